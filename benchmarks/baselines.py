"""Baseline knight's tour searches for the engine benchmark, the classic methods as described in
the literature, compiled with numba like our engine so that nodes *and* times compare fairly.

* ``plain``  — depth-first search with backtracking, moves tried in a fixed order (the order of
  :data:`knights_tour.board.KNIGHT_OFFSETS`), no heuristic, no pruning: the textbook
  backtracking algorithm (e.g. Wirth, *Algorithms + Data Structures = Programs*, 1976, §3.4).
* ``wdfs``   — the same DFS with moves ordered by Warnsdorff's rule (fewest onward moves first,
  Warnsdorff 1823), ties broken by the fixed move order, no pruning.
* ``greedy`` — Warnsdorff's rule as originally stated: always move to the square with the fewest
  onward moves (first in the fixed order on ties), never backtrack; fails at the first dead end.

All three count a *node* for every square placed on the path (the start included), as our
engine does, and stop after ``budget`` nodes. They know no theorems and no parity argument:
an exhausted DFS is their only proof (``exhausted``). Not part of the package.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from knights_tour.board import KNIGHT_OFFSETS

FOUND, EXHAUSTED, BUDGET, STUCK = 1, 2, 0, 3

_DR = np.array([d[0] for d in KNIGHT_OFFSETS], np.int64)
_DC = np.array([d[1] for d in KNIGHT_OFFSETS], np.int64)


@njit(cache=True)
def _search(rows, cols, sr, sc, warnsdorff, backtrack, budget, dr, dc, out):
    """Returns (status, nodes); on FOUND ``out`` (N, 2) holds the tour."""
    W = cols + 4
    size = (rows + 4) * W
    n_sq = rows * cols
    visited = np.ones(size, np.uint8)
    for r in range(rows):
        for c in range(cols):
            visited[(r + 2) * W + c + 2] = 0
    offs = np.empty(8, np.int64)
    for k in range(8):
        offs[k] = dr[k] * W + dc[k]
    deg = np.zeros(size, np.int64)
    for r in range(rows):
        for c in range(cols):
            p = (r + 2) * W + c + 2
            for k in range(8):
                if visited[p + offs[k]] == 0:
                    deg[p] += 1
    pos = np.empty(n_sq, np.int64)
    order = np.empty((n_sq, 8), np.int8)  # candidate moves per depth, -1 terminated
    nxt = np.zeros(n_sq, np.int64)
    keys = np.empty(8, np.int64)

    s = (sr + 2) * W + sc + 2
    visited[s] = 1
    for k in range(8):
        deg[s + offs[k]] -= 1
    pos[0] = s
    nodes = 1
    d = 0
    status = BUDGET
    need_order = True
    while True:
        if d == n_sq - 1:
            status = FOUND
            break
        p = pos[d]
        if need_order:
            n = 0
            for k in range(8):
                q = p + offs[k]
                if visited[q] == 0:
                    key = deg[q] * 8 + k if warnsdorff else k
                    i = n
                    while i > 0 and keys[i - 1] > key:
                        keys[i] = keys[i - 1]
                        order[d, i] = order[d, i - 1]
                        i -= 1
                    keys[i] = key
                    order[d, i] = k
                    n += 1
            if n < 8:
                order[d, n] = -1
            nxt[d] = 0
            need_order = False
        i = nxt[d]
        m = order[d, i] if i < 8 else -1
        if m >= 0 and (backtrack or i == 0):
            if nodes >= budget:
                break
            nxt[d] = i + 1
            q = p + offs[m]
            visited[q] = 1
            for k in range(8):
                deg[q + offs[k]] -= 1
            nodes += 1
            d += 1
            pos[d] = q
            need_order = True
        else:
            if not backtrack:
                status = STUCK
                break
            if d == 0:
                status = EXHAUSTED
                break
            q = pos[d]
            for k in range(8):
                deg[q + offs[k]] += 1
            visited[q] = 0
            d -= 1
    if status == FOUND:
        for i in range(n_sq):
            out[i, 0] = pos[i] // W - 2
            out[i, 1] = pos[i] % W - 2
    return status, nodes


def run(method: str, rows: int, cols: int, start: tuple[int, int], budget: int):
    """Run baseline ``method`` ("plain", "wdfs", "greedy") on an open tour from ``start``.

    Returns ``(status, nodes, tour)`` with status "found" | "exhausted" | "budget" | "stuck" and
    ``tour`` an (N, 2) int32 array when found, else None.
    """
    out = np.empty((rows * cols, 2), np.int32)
    warnsdorff = method in ("wdfs", "greedy")
    backtrack = method != "greedy"
    status, nodes = _search(
        rows, cols, start[0], start[1], warnsdorff, backtrack, budget, _DR, _DC, out
    )
    name = {FOUND: "found", EXHAUSTED: "exhausted", BUDGET: "budget", STUCK: "stuck"}[status]
    return name, int(nodes), (out if status == FOUND else None)
