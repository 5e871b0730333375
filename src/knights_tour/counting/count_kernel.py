"""The compiled counting kernel: exhaustive enumeration of knight's tours that *counts* them.

Used by :mod:`knights_tour.counting.plan`. Compiled with numba
(``@njit(cache=True)``); all state lives in numpy arrays, nothing is stored per
tour. Pure: no Celery, no Redis.

Graph layout
    Squares are row-major indices ``0 .. N-1`` (``N = rows*cols``). ``nbr[v, 0:ndeg[v]]`` lists
    the squares a knight on ``v`` attacks (``nbr`` is ``N × 8``, padded with ``-1``).

Search
    Depth-first search with backtracking on an explicit stack (one entry per tour position), from
    a fixed *prefix* (the first squares of the path, start square first). Every completion of
    the prefix into a Hamiltonian path of the knight's graph (an open knight's tour) is counted
    once; with ``closed`` only those whose last square is a knight move from the start square
    (closed, re-entrant tours, counted as directed cycles read from the start).

Pruning (exact: a branch is cut only when no tour can complete it)
    Let ``h`` be the current end of the path (the *head*) and ``U`` the unvisited squares;
    ``free[w]`` counts the unvisited neighbours of ``w``. In any completion each ``w`` in ``U``
    is entered from a neighbour in ``U ∪ {h}`` and, unless it is the last square, left to a
    neighbour in ``U``. So with ``a(w) = free[w] + [w attacks h]``:

    * ``a(w) == 0`` for some ``w`` in ``U``: no completion (``w`` cannot be reached);
    * ``w`` attacks ``h`` and ``free[w] == 0``: ``w`` must be the *next* square and the *last*
      one (once the path leaves ``h`` elsewhere, nothing can reach ``w``); two such squares, or
      one while more than one square is unvisited: no completion;
    * ``a(w) == 1`` and ``w`` does not attack ``h``: ``w`` must be the last square; two such
      squares: no completion (a path has one end). Kept in ``ends[d]``, the must-end square.
    * colour parity (a knight move changes colour, so the rest of the path alternates colours):
      checked once at the root; if it holds there it holds on every branch.

    ``a(w)`` only ever decreases for the neighbours of the square the head just left (a
    neighbour of the new head loses one free neighbour but gains the head; the knight's graph is
    bipartite, so the two neighbourhoods are disjoint and moving to ``x`` does not change
    ``free`` of the other neighbours of ``h``). So the head's neighbours are scanned once per
    node, and each candidate move is tested *before* it is made: O(8) work per node, and no
    work at all for a move the tests reject.

    These are the standard degree arguments for Hamiltonian paths (a vertex of degree 1 in the
    remaining graph must be an end point), as in the enumerations behind OEIS A165134.
"""

from __future__ import annotations

import numpy as np

from knights_tour._numba import njit

DEAD = -2
"""Returned by :func:`_root_checks` when the prefix cannot be completed."""


@njit(cache=True)
def _setup(nbr: np.ndarray, ndeg: np.ndarray, prefix: np.ndarray):
    """``visited``, ``free`` (unvisited-neighbour counts) and ``adj_start`` after the prefix."""
    n = nbr.shape[0]
    visited = np.zeros(n, dtype=np.bool_)
    free = ndeg.copy()
    for i in range(prefix.shape[0]):
        v = prefix[i]
        visited[v] = True
        for j in range(ndeg[v]):
            free[nbr[v, j]] -= 1
    start = prefix[0]
    adj_start = np.zeros(n, dtype=np.bool_)
    for j in range(ndeg[start]):
        adj_start[nbr[start, j]] = True
    return visited, free, adj_start


@njit(cache=True)
def _complete_ok(
    ndeg: np.ndarray, nbr: np.ndarray, prefix: np.ndarray, closed: bool, adj_start: np.ndarray
) -> bool:
    """Whether a prefix covering every square is a counted tour (closed: last attacks first;
    a one-square tour is never closed, as in :func:`knights_tour.tours.verify.verify_tour`)."""
    if not closed:
        return True
    if prefix.shape[0] < 2:
        return False
    return adj_start[prefix[prefix.shape[0] - 1]]


@njit(cache=True)
def _root_checks(
    nbr: np.ndarray,
    ndeg: np.ndarray,
    visited: np.ndarray,
    free: np.ndarray,
    head: int,
    remaining: int,
    closed: bool,
    adj_start: np.ndarray,
) -> int:
    """The pruning tests of the module docstring on a whole state, plus colour parity.

    Returns :data:`DEAD` if no completion exists, else the must-end square (or -1).
    """
    n = nbr.shape[0]
    adj_head = np.zeros(n, dtype=np.bool_)
    for j in range(ndeg[head]):
        adj_head[nbr[head, j]] = True
    ends0 = -1
    for w in range(n):
        if visited[w]:
            continue
        a = free[w] + (1 if adj_head[w] else 0)
        if a == 0:
            return DEAD
        if adj_head[w] and free[w] == 0 and remaining > 1:
            return DEAD
        if a == 1 and not adj_head[w]:
            if ends0 == -1:
                ends0 = w
            else:
                return DEAD
    if closed:
        if ends0 != -1 and not adj_start[ends0]:
            return DEAD
        unvisited_next_to_start = False
        for w in range(n):
            if adj_start[w] and not visited[w]:
                unvisited_next_to_start = True
        if not unvisited_next_to_start:
            return DEAD
    # Colour parity: the rest of the path, head first, alternates colours, so the unvisited
    # squares of the colour opposite to the head's number ceil(r/2) and the others floor(r/2).
    # Colours come from a BFS 2-colouring of the head's component (squares outside it cannot
    # be reached; the search finds no completion for them).
    colour = np.full(n, -1, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    colour[head] = 0
    queue[0] = head
    qh = 0
    qt = 1
    while qh < qt:
        v = queue[qh]
        qh += 1
        for j in range(ndeg[v]):
            w = nbr[v, j]
            if colour[w] == -1:
                colour[w] = 1 - colour[v]
                queue[qt] = w
                qt += 1
    opposite = 0
    for w in range(n):
        if not visited[w] and colour[w] == 1:
            opposite += 1
    if opposite != (remaining + 1) // 2:
        return DEAD
    return ends0


@njit(cache=True)
def prefix_viable(nbr: np.ndarray, ndeg: np.ndarray, prefix: np.ndarray, closed: bool) -> bool:
    """False if the root tests prove that no tour begins with ``prefix`` (shapes as in
    :func:`count_completions`); True means "maybe" (or, for a full-length prefix, "a tour")."""
    n = nbr.shape[0]
    visited, free, adj_start = _setup(nbr, ndeg, prefix)
    if prefix.shape[0] == n:
        return _complete_ok(ndeg, nbr, prefix, closed, adj_start)
    return (
        _root_checks(
            nbr,
            ndeg,
            visited,
            free,
            prefix[prefix.shape[0] - 1],
            n - prefix.shape[0],
            closed,
            adj_start,
        )
        != DEAD
    )


@njit(cache=True)
def count_completions(
    nbr: np.ndarray, ndeg: np.ndarray, prefix: np.ndarray, closed: bool
) -> tuple[int, int]:
    """Count the knight's tours that begin with ``prefix``.

    Parameters
    ----------
    nbr : int64 array, shape (N, 8)
        Knight-move adjacency by row-major index, padded with -1.
    ndeg : int64 array, shape (N,)
        Number of valid entries in each row of ``nbr``.
    prefix : int64 array, shape (L,), 1 <= L <= N
        The first squares of the path (start square first). Must be a path of knight moves with
        no repeats (the caller checks this).
    closed : bool
        Count only closed tours (last square a knight move from ``prefix[0]``).

    Returns
    -------
    (count, nodes)
        Number of tours completing the prefix, and search nodes (path extensions made, plus
        one for the root).
    """
    n = nbr.shape[0]
    length = prefix.shape[0]
    start = prefix[0]
    visited, free, adj_start = _setup(nbr, ndeg, prefix)
    if length == n:
        return (1 if _complete_ok(ndeg, nbr, prefix, closed, adj_start) else 0), 1
    ends0 = _root_checks(
        nbr, ndeg, visited, free, prefix[length - 1], n - length, closed, adj_start
    )
    if ends0 == DEAD:
        return 0, 1

    # -- depth-first search ------------------------------------------------------------------
    path = np.empty(n, dtype=np.int64)
    slot = np.zeros(n + 1, dtype=np.int64)  # next neighbour slot to try at each depth
    ends = np.full(n + 1, -1, dtype=np.int64)  # the must-end square at each depth, or -1
    one_a = np.full(n + 1, -1, dtype=np.int64)  # neighbours of the head with free == 1
    one_b = np.full(n + 1, -1, dtype=np.int64)
    for i in range(length):
        path[i] = prefix[i]
    ends[length] = ends0
    count = 0
    nodes = 1
    d = length  # path length; head = path[d-1]
    fresh = True  # first visit of depth d (run the checks on the head's neighbours)
    while True:
        h = path[d - 1]
        if fresh:
            fresh = False
            forced = -1
            nforced = 0
            nones = 0
            oa = -1
            ob = -1
            for j in range(ndeg[h]):
                y = nbr[h, j]
                if visited[y]:
                    continue
                f = free[y]
                if f == 0:
                    nforced += 1
                    forced = y
                elif f == 1:
                    nones += 1
                    if oa == -1:
                        oa = y
                    else:
                        ob = y
            if nforced > 0:
                # y must be next and last: a leaf if it is the one unvisited square, else dead
                if nforced == 1 and d + 1 == n:
                    nodes += 1
                    if not closed or adj_start[forced]:
                        count += 1
                slot[d] = 8  # nothing else to try here
            else:
                # Once the head moves on to x, every other unvisited neighbour w of h keeps
                # only free[w] connections (x does not attack w: same colour), so those with
                # free[w] == 1 must be the last square, as must ends[d]. At most one may remain.
                k = nones + (1 if ends[d] != -1 else 0)
                if k >= 3:
                    slot[d] = 8
                one_a[d] = oa
                one_b[d] = ob
        # next untried unvisited neighbour of h that passes the end-square test
        e = int(ends[d])
        oa = int(one_a[d])
        ob = int(one_b[d])
        x = -1
        end = -1
        while slot[d] < ndeg[h]:
            y = nbr[h, slot[d]]
            slot[d] += 1
            if visited[y]:
                continue
            # must-end squares left after moving to y: e, oa, ob minus y
            end = e
            ok = True
            if oa != -1 and oa != y:
                if end == -1:
                    end = oa
                else:
                    ok = False
            if ok and ob != -1 and ob != y:
                if end == -1:
                    end = ob
                else:
                    ok = False
            if not ok:
                continue
            if closed:
                if end != -1 and not adj_start[end]:
                    continue
                if adj_start[y] and free[start] == 1:
                    continue  # y would take the start's last unvisited neighbour
            x = y
            break
        if x == -1:
            # backtrack
            if d == length:
                break
            v = path[d - 1]
            visited[v] = False
            for j in range(ndeg[v]):
                free[nbr[v, j]] += 1
            d -= 1
            continue
        # move h -> x
        nodes += 1
        visited[x] = True
        for j in range(ndeg[x]):
            free[nbr[x, j]] -= 1
        path[d] = x
        d += 1
        slot[d] = 0
        ends[d] = end
        fresh = True
    return count, nodes
