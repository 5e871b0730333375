"""Compiled helpers of the constructive tours: lay block tours on the board, merge the cycles by
edge exchanges, walk the result (see :mod:`knights_tour.solvers.construct`).

The board is a graph on ``rows*cols`` squares, square ``(r, c)`` having index ``r * cols + c``.
A *2-factor-like* structure ``nb`` (int32, shape ``(N, 2)``) holds the two tour neighbours of
every square; ``-1`` marks the missing neighbour of an end of the one open path (open tours).
Each block of the tiling starts as its own component (a closed tour of the block, or the open
path through the block of the start square); ``parent`` is a union-find forest over blocks, so
the component of a square is the root of its block.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import numpy as np

from knights_tour._numba import njit

_DR = np.array([-2, -1, 1, 2, 2, 1, -1, -2], np.int64)
_DC = np.array([1, 2, 2, 1, -1, -2, -2, -1], np.int64)


@njit(cache=True)
def place_blocks(
    cols, row_start, row_len, col_start, col_len, btype, type_off, type_cols, loc_nb, nb
):
    """Write the tour neighbours of every block into ``nb``.

    Block ``(i, j)`` covers rows ``row_start[i] .. + row_len[i]`` and columns ``col_start[j] ..
    + col_len[j]``; its tour is block type ``btype[i, j]``, whose local neighbour table starts
    at ``loc_nb[type_off[t]]`` (two entries per local square ``lr * type_cols[t] + lc``, ``-1``
    for a path end)."""
    for i in range(len(row_start)):
        for j in range(len(col_start)):
            t = btype[i, j]
            bc = type_cols[t]
            off = type_off[t]
            r0 = row_start[i]
            c0 = col_start[j]
            for lr in range(row_len[i]):
                for lc in range(col_len[j]):
                    li = lr * bc + lc
                    g = (r0 + lr) * cols + c0 + lc
                    for k in range(2):
                        ln = loc_nb[off + 2 * li + k]
                        if ln < 0:
                            nb[g, k] = -1
                        else:
                            nb[g, k] = (r0 + ln // bc) * cols + c0 + ln % bc


@njit(cache=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True, inline="always")
def _is_move(a, b, cols):
    dr = abs(a // cols - b // cols)
    dc = abs(a % cols - b % cols)
    return (dr == 1 and dc == 2) or (dr == 2 and dc == 1)


@njit(cache=True, inline="always")
def _replace(nb, v, old, new):
    if nb[v, 0] == old:
        nb[v, 0] = new
    else:
        nb[v, 1] = new


@njit(cache=True)
def _merge_strip(rows, cols, nb, parent, rblk, cblk, n_bcols, r0, r1, c0, c1, root_b):
    """Merge the component of block root ``root_b`` with a neighbouring component by one edge
    exchange found around the squares ``[r0, r1) x [c0, c1)`` (a strip along a block border).

    An exchange takes a tour edge ``a-b`` of one component and a tour edge ``c-d`` of the other
    with ``a-c`` and ``b-d`` knight moves, removes the two edges and adds ``a-c`` and ``b-d``:
    two cycles become one cycle, a path and a cycle one path with the same ends.
    Returns True if an exchange was made."""
    for r in range(r0, r1):
        for c in range(c0, c1):
            a = r * cols + c
            root_a = _find(parent, rblk[r] * n_bcols + cblk[c])
            if root_a == root_b:
                continue
            for k in range(8):
                cr = r + _DR[k]
                cc = c + _DC[k]
                if cr < 0 or cr >= rows or cc < 0 or cc >= cols:
                    continue
                if _find(parent, rblk[cr] * n_bcols + cblk[cc]) != root_b:
                    continue
                x = cr * cols + cc
                for i in range(2):
                    b = nb[a, i]
                    if b < 0:
                        continue
                    for j in range(2):
                        d = nb[x, j]
                        if d < 0 or not _is_move(b, d, cols):
                            continue
                        _replace(nb, a, b, x)
                        _replace(nb, b, a, d)
                        _replace(nb, x, d, a)
                        _replace(nb, d, x, b)
                        parent[root_a] = root_b
                        return True
    return False


@njit(cache=True)
def merge_blocks(rows, cols, row_start, col_start, rblk, cblk, nb):
    """Merge the components of all blocks into one by edge exchanges across block borders:
    first along every block row (left to right), then between block rows. Returns the number
    of components left (1 on success)."""
    n_brows = len(row_start)
    n_bcols = len(col_start)
    parent = np.arange(n_brows * n_bcols)
    for i in range(n_brows):
        r0 = row_start[i]
        r1 = row_start[i + 1] if i + 1 < n_brows else rows
        for j in range(n_bcols - 1):
            x = col_start[j + 1]
            root_b = _find(parent, i * n_bcols + j + 1)
            if _find(parent, i * n_bcols + j) != root_b:
                _merge_strip(rows, cols, nb, parent, rblk, cblk, n_bcols, r0, r1, x - 2, x, root_b)
    for i in range(n_brows - 1):
        y = row_start[i + 1]
        for j in range(n_bcols):
            c0 = col_start[j]
            c1 = col_start[j + 1] if j + 1 < n_bcols else cols
            root_b = _find(parent, (i + 1) * n_bcols + j)
            if _find(parent, i * n_bcols + j) != root_b:
                _merge_strip(rows, cols, nb, parent, rblk, cblk, n_bcols, y - 2, y, c0, c1, root_b)
    roots = 0
    for b in range(n_brows * n_bcols):
        if _find(parent, b) == b:
            roots += 1
    return roots


@njit(cache=True)
def walk(nb, start, cols, out):
    """Follow the tour neighbours from ``start`` and write the squares as ``(row, col)`` into
    ``out`` (shape ``(N, 2)``). Returns the number of squares written before the walk ends or
    returns to ``start`` (``N`` for a Hamiltonian path or cycle)."""
    n = nb.shape[0]
    prev = -1
    cur = start
    for i in range(n):
        out[i, 0] = cur // cols
        out[i, 1] = cur % cols
        a = nb[cur, 0]
        b = nb[cur, 1]
        if prev < 0:
            nxt = a if a >= 0 else b
        else:
            nxt = b if a == prev else a
        if nxt < 0 or nxt == start:
            return i + 1
        prev = cur
        cur = nxt
    return n


@njit(cache=True)
def small_search(adj, n_adj, partner, first, closed, node_limit, path):
    """Hamiltonian path from ``first`` (or cycle through ``first`` if ``closed``) of a small
    graph that must use every *forced* edge ``v-partner[v]``; depth-first search with
    backtracking, candidates ordered by Warnsdorff's rule (fewest unvisited neighbours first).

    ``adj[v, :n_adj[v]]`` are the neighbours of ``v`` (forced partners included);
    ``partner[v]`` is ``-1`` for a vertex on no forced edge. A forced edge stands for a whole
    region walked between its ends, so a vertex entered from elsewhere must continue to its
    partner, and a vertex whose partner is already on the path (not just before it) cannot be
    entered — except, for a cycle, as the last vertex when its partner is ``first``.

    Pruning (sound, as in the engine kernel): an unvisited vertex without unvisited neighbours
    (for a cycle: not even ``first``) ends the branch unless it can be the next and last vertex.

    Returns 1 (``path[:n]`` is the tour), 2 (exhausted: none exists) or 0 (budget used up).
    """
    n = adj.shape[0]
    visited = np.zeros(n, np.uint8)
    deg = n_adj.copy()
    cand = np.full((n, adj.shape[1]), -1, np.int64)
    n_cand = np.zeros(n, np.int64)
    nxt = np.zeros(n, np.int64)
    path[0] = first
    visited[first] = 1
    if not closed:
        for k in range(n_adj[first]):
            deg[adj[first, k]] -= 1
    d = 0
    nodes = 1
    expand = True
    while True:
        if expand:
            expand = False
            v = path[d]
            if d == n - 1:
                if not closed:
                    return 1
                for k in range(n_adj[v]):
                    if adj[v, k] == first:
                        return 1
                n_cand[d] = 0
            else:
                n_cand[d] = 0
                nxt[d] = 0
                prev = path[d - 1] if d > 0 else -1
                p = partner[v]
                dead = False
                for u in range(n):  # sound pruning: a stranded unvisited vertex
                    if visited[u] == 0 and deg[u] == 0:
                        near = False
                        for k in range(n_adj[v]):
                            if adj[v, k] == u:
                                near = True
                        if closed or not near or d < n - 2:
                            dead = True
                if not dead:
                    if p >= 0 and visited[p] == 0 and p != prev:
                        cand[d, 0] = p
                        n_cand[d] = 1
                    else:
                        for k in range(n_adj[v]):
                            u = adj[v, k]
                            if visited[u]:
                                continue
                            q = partner[u]
                            if q >= 0 and q != v and visited[q]:
                                if not (closed and q == first and d == n - 2):
                                    continue
                            i = n_cand[d]  # insertion by degree
                            while i > 0 and deg[cand[d, i - 1]] > deg[u]:
                                cand[d, i] = cand[d, i - 1]
                                i -= 1
                            cand[d, i] = u
                            n_cand[d] += 1
        if nxt[d] < n_cand[d]:
            if nodes >= node_limit:
                return 0
            u = cand[d, nxt[d]]
            nxt[d] += 1
            visited[u] = 1
            for k in range(n_adj[u]):
                deg[adj[u, k]] -= 1
            d += 1
            path[d] = u
            nodes += 1
            expand = True
        else:
            if d == 0:
                return 2
            u = path[d]
            for k in range(n_adj[u]):
                deg[adj[u, k]] += 1
            visited[u] = 0
            d -= 1
