"""The compiled search kernel: iterative DFS over knight moves, ordered by Warnsdorff's rule.

This is the hot loop of the ``warnsdorff`` backend (:mod:`knights_tour.solvers.warnsdorff`),
compiled with numba (``@njit(cache=True)``, so the compile cost is paid once per
machine and cached on disk next to this file). It holds no Python objects: all state lives in
numpy arrays that the caller allocates, so a search can be run in slices (``budget`` nodes per
call) and resumed, which is how the caller honours wall-clock time limits.

Board layout
    The board is stored *padded*: two extra rows and columns on every side, marked visited, so a
    knight move from any real square is a plain index offset with no bounds test. Padded width
    ``W = cols + 4``; the real square ``(r, c)`` has padded index ``(r + 2) * W + (c + 2)``.

Search (one *attempt*)
    Depth-first search with backtracking on an explicit stack (``pos``, ``cand``, ``nxt``: one
    entry per tour position, so no recursion and no recursion limit). At every square the
    untried moves are ordered by **Warnsdorff's rule** (H. C. von Warnsdorff, 1823): fewest
    onward moves first, where ``deg[q]`` is the number of unvisited squares a knight on ``q``
    attacks. Ties are broken by one of:

    * ``TIE_FIXED``  – a fixed move order (the order of ``offs``), as in the fixed-order variants
      studied by Squirrel & Cull (1996), "A Warnsdorff-rule algorithm for knight's tours on
      square chessboards";
    * ``TIE_ROTH``   – farthest from the centre of the board first (Roth's tie-break, reported in
      Squirrel & Cull 1996), then the fixed order;
    * ``TIE_POHL``   – smallest sum of the onward degrees of the candidate's unvisited
      neighbours (one more level of Warnsdorff's rule: Pohl 1967, "A method for finding
      Hamilton paths and knight's tours", CACM 10(7)), then the fixed order;
    * ``TIE_RANDOM`` – a pseudo-random key (xorshift64, seeded) for randomised restarts.

    The ordering only decides which branch is tried first; every unvisited neighbour is a
    candidate, so an attempt that runs to exhaustion is a complete search.

Pruning (sound: only cuts branches that no tour can complete)
    Let ``p`` be the current end of the path and ``U`` the unvisited squares. In any Hamiltonian
    path from ``p`` through ``U`` each square of ``U`` is entered from a neighbour in
    ``U ∪ {p}`` and, unless it is the last square, left to a neighbour in ``U``. Hence, with
    ``deg`` counting unvisited neighbours only:

    * an unvisited square with ``deg == 0`` can only be the next *and* last square, so with two
      or more squares left any such square ends the branch;
    * an unvisited square with ``deg == 1`` not attacked from ``p`` must be the last square, and
      of the ``deg == 1`` squares attacked from ``p`` at most one can be the next square (the
      others must then be the last); more than one forced last square ends the branch.

    For a closed tour the start square ``s`` stays "unvisited" for its neighbours' degrees (its
    neighbours are never decremented when ``s`` is visited), because the last square must
    return to ``s``; then *no* square may be forced to be last, and a square with ``deg == 0``
    (not even attacked from ``s``) ends the branch.

    The counters ``c0``/``c1`` (unvisited squares with degree 0 / 1) are kept incrementally, so
    each check costs O(8).

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import numpy as np

from knights_tour._numba import njit

TIE_FIXED = 0
TIE_ROTH = 1
TIE_POHL = 2
TIE_RANDOM = 3

# status codes returned by run_attempt
RUNNING = 0
FOUND = 1
EXHAUSTED = 2

# layout of the scalar state vector ``st`` (int64)
ST_DEPTH = 0  # index into pos of the current end of the path
ST_NODES = 1  # nodes expanded in this attempt (squares placed on the path, start included)
ST_C0 = 2  # unvisited squares with deg == 0
ST_C1 = 3  # unvisited squares with deg == 1
ST_RNG = 4  # xorshift64 state
ST_STATUS = 5
ST_SIZE = 6

_DEG_SHIFT = np.int64(1) << np.int64(52)  # primary key: degree; secondary keys stay below this


@njit(cache=True)
def padded_index(r, c, W):
    return (r + 2) * W + (c + 2)


@njit(cache=True)
def init_board(rows, cols, offs, visited, deg):
    """Fill ``visited`` (padding = 1, real squares = 0) and ``deg`` (number of on-board knight
    moves of each real square) for a padded board; arrays have ``(rows + 4) * (cols + 4)``
    entries."""
    W = cols + 4
    visited[:] = 1
    deg[:] = 0
    for r in range(rows):
        base = (r + 2) * W + 2
        for c in range(cols):
            visited[base + c] = 0
    for r in range(rows):
        base = (r + 2) * W + 2
        for c in range(cols):
            p = base + c
            d = 0
            for k in range(8):
                if visited[p + offs[k]] == 0:
                    d += 1
            deg[p] = d


@njit(cache=True, inline="always")
def _visit(q, dec, offs, visited, deg, st):
    """Put ``q`` on the path; if ``dec``, its unvisited neighbours lose one onward move."""
    dq = deg[q]
    if dq == 0:
        st[ST_C0] -= 1
    elif dq == 1:
        st[ST_C1] -= 1
    visited[q] = 1
    if dec:
        for k in range(8):
            y = q + offs[k]
            if visited[y] == 0:
                old = deg[y]
                if old == 1:
                    st[ST_C1] -= 1
                    st[ST_C0] += 1
                elif old == 2:
                    st[ST_C1] += 1
                deg[y] = old - 1


@njit(cache=True, inline="always")
def _unvisit(q, inc, offs, visited, deg, st):
    """Undo :func:`_visit` (called in exact reverse order, so neighbour states match)."""
    if inc:
        for k in range(8):
            y = q + offs[k]
            if visited[y] == 0:
                old = deg[y]
                if old == 0:
                    st[ST_C0] -= 1
                    st[ST_C1] += 1
                elif old == 1:
                    st[ST_C1] -= 1
                deg[y] = old + 1
    visited[q] = 0
    dq = deg[q]
    if dq == 0:
        st[ST_C0] += 1
    elif dq == 1:
        st[ST_C1] += 1


@njit(cache=True, inline="always")
def _expand(
    p, remaining, closed, W, rows, cols, tie, offs, mdr, mdc, visited, deg, st, keys, moves
):
    """Expand the path ending at ``p`` with ``remaining`` unvisited squares.

    Returns 0 if the sound pruning test (module docstring) shows no tour can complete the path;
    else the candidate moves (indices into ``offs``) sorted by Warnsdorff's rule and the
    tie-break, packed into one int64: count in bits 0-3, then 3 bits per move. ``mdr``/``mdc``
    are the (d_row, d_col) of the moves in ``offs``; ``keys`` and ``moves`` are scratch arrays of
    8 int64 (allocated once by the caller)."""
    if remaining == 0:
        return np.int64(0)
    if st[ST_C0] > 0 and (closed or remaining >= 2):
        return np.int64(0)
    n = 0
    a1 = 0
    pr2 = np.int64(0)
    pc2 = np.int64(0)
    if tie == TIE_ROTH:
        # twice the offset of p from the centre, per axis
        pr2 = 2 * (p // W - 2) - (rows - 1)
        pc2 = 2 * (p % W - 2) - (cols - 1)
    for k in range(8):
        q = p + offs[k]
        if visited[q] != 0:
            continue
        dq = deg[q]
        if dq == 1:
            a1 += 1
        key = np.int64(dq) * _DEG_SHIFT
        if tie == TIE_ROTH:
            dr = pr2 + 2 * mdr[k]
            dc = pc2 + 2 * mdc[k]
            far = dr * dr + dc * dc  # (2 * distance from the centre) ** 2
            key += (np.int64(1) << np.int64(48)) - far * 8 + k
        elif tie == TIE_POHL:
            s = np.int64(0)  # an int8 sum to numpy's scalars (plain Python), int64 to numba
            for j in range(8):
                z = q + offs[j]
                if visited[z] == 0:
                    s += deg[z]
            key += s * 8 + k
        elif tie == TIE_RANDOM:
            x = st[ST_RNG]
            x ^= x << np.int64(13)
            x ^= (x >> np.int64(7)) & np.int64(0x01FFFFFFFFFFFFFF)
            x ^= x << np.int64(17)
            st[ST_RNG] = x
            key += (x & np.int64(0xFFFFFFFFFF)) * 8 + k
        else:
            key += k
        # insertion sort (at most 8 entries)
        i = n
        while i > 0 and keys[i - 1] > key:
            keys[i] = keys[i - 1]
            moves[i] = moves[i - 1]
            i -= 1
        keys[i] = key
        moves[i] = k
        n += 1
    # squares forced to be the last of the path (deg 1, or deg 1 attacked from p beyond one)
    forced_last = st[ST_C1] - a1
    if a1 > 1:
        forced_last += a1 - 1
    if forced_last > (0 if closed else 1):
        return np.int64(0)
    packed = np.int64(n)
    for i in range(n):
        packed |= moves[i] << np.int64(4 + 3 * i)
    return packed


@njit(cache=True)
def start_attempt(
    start, closed, W, rows, cols, tie, offs, mdr, mdc, visited, deg, pos, cand, nxt, st
):
    """Begin an attempt from padded square ``start`` on a freshly initialised board: set the
    counters, put the start on the path and order its moves."""
    n_sq = rows * cols
    c0 = 0
    c1 = 0
    for r in range(rows):
        base = (r + 2) * W + 2
        for c in range(cols):
            d = deg[base + c]
            if d == 0:
                c0 += 1
            elif d == 1:
                c1 += 1
    st[ST_C0] = c0
    st[ST_C1] = c1
    st[ST_DEPTH] = 0
    st[ST_NODES] = 1
    st[ST_STATUS] = RUNNING
    _visit(start, not closed, offs, visited, deg, st)
    pos[0] = start
    nxt[0] = 0
    if n_sq == 1:
        st[ST_STATUS] = EXHAUSTED if closed else FOUND
        return
    keys = np.empty(8, np.int64)
    moves = np.empty(8, np.int64)
    cand[0] = _expand(
        start, n_sq - 1, closed, W, rows, cols, tie, offs, mdr, mdc, visited, deg, st, keys, moves
    )


@njit(cache=True)
def run_attempt(
    budget, closed, W, rows, cols, tie, offs, mdr, mdc, visited, deg, pos, cand, nxt, st
):
    """Continue the attempt for at most ``budget`` more nodes.

    Returns the status: ``FOUND`` (``pos[:rows*cols]`` is the tour), ``EXHAUSTED`` (the
    complete search space below the start was searched: no tour from this start) or
    ``RUNNING`` (budget used up; call again to continue)."""
    n_sq = rows * cols
    last = n_sq - 1
    start = pos[0]
    d = st[ST_DEPTH]
    spent = 0
    status = st[ST_STATUS]
    keys = np.empty(8, np.int64)
    moves = np.empty(8, np.int64)
    while status == RUNNING:
        if d == last:
            if closed:
                ok = False
                p = pos[d]
                for k in range(8):
                    if p + offs[k] == start:
                        ok = True
                if ok:
                    status = FOUND
                    break
                # not closable: fall through to backtrack (cand[d] is empty)
            else:
                status = FOUND
                break
        packed = cand[d]
        i = nxt[d]
        if i < (packed & 15):
            if spent >= budget:
                break
            nxt[d] = i + 1
            m = (packed >> np.int64(4 + 3 * i)) & 7
            q = pos[d] + offs[m]
            _visit(q, True, offs, visited, deg, st)
            spent += 1
            d += 1
            pos[d] = q
            nxt[d] = 0
            cand[d] = _expand(
                q,
                last - d,
                closed,
                W,
                rows,
                cols,
                tie,
                offs,
                mdr,
                mdc,
                visited,
                deg,
                st,
                keys,
                moves,
            )
        else:
            if d == 0:
                status = EXHAUSTED
                break
            _unvisit(pos[d], True, offs, visited, deg, st)
            d -= 1
    st[ST_DEPTH] = d
    st[ST_NODES] += spent
    st[ST_STATUS] = status
    return status


@njit(cache=True)
def tour_coords(pos, n_sq, W, out):
    """Write the path ``pos[:n_sq]`` as ``(row, col)`` pairs into ``out`` (shape (n_sq, 2))."""
    for i in range(n_sq):
        p = pos[i]
        out[i, 0] = p // W - 2
        out[i, 1] = p % W - 2
