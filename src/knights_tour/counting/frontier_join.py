"""Meeting two frontier-DP halves in the middle: the compiled join.

Used by :mod:`knights_tour.counting.frontier_run`. Both halves end on the same frontier, the
*interface* (keys in the layout of :mod:`knights_tour.counting.frontier_kernel`; the
lower half's keys are first re-packed into the upper half's slot order, :func:`reslot`). Every
edge is decided by exactly one half, so a Hamiltonian path is exactly a pair of states with

* degrees that add up: on every interface vertex ``deg_up + deg_low`` is 2, or 1 where the path
  ends (``ISO`` = 0, a label or ``DANGLE`` = 1, ``SAT`` = 2);
* two path ends in all: the ends each half already made (one per ``DANGLE``) plus the interface
  vertices of degree 1;
* no cycle: the fragments of the two halves, linked at the interface vertices where an upper
  fragment end meets a lower fragment end, form no cycle (union-find over fragment names);
  with two ends and degrees at most 2 that makes one path through every vertex.

Lower states are grouped by the degrees they need from the upper half (the *signature*) and
the number of ends they made; for each upper state the join looks up the groups of its
complement (and of the complement with one or two interface vertices as path ends) and checks
each pair. The counts multiply (``uint64``; every product is at most the final count). Method:
meet in the middle over a transfer-matrix cut (I. Jensen, "A parallel algorithm for the
enumeration of self-avoiding polygons on the square lattice", 2003, for the bidirectional
transfer matrix). Pure: no Celery, no Redis.
"""

from __future__ import annotations

import numpy as np

from knights_tour._numba import njit
from knights_tour.counting.frontier_kernel import DANGLE, EMPTY, ISO, SAT, slot_index


@njit(cache=True, inline="always")
def _deg(val):
    if val == SAT:
        return 2
    if val == ISO:
        return 0
    return 1


@njit(cache=True)
def reslot(keys, n_slots, slot_map):
    """Re-pack ``keys`` (``n_slots`` slots) so slot ``i`` moves to slot ``slot_map[i]``."""
    out = np.empty_like(keys)
    for i in range(keys.shape[0]):
        k = keys[i]
        o = np.uint64(0)
        for s in range(n_slots):
            val = (k >> np.uint64(4 * s)) & np.uint64(15)
            o |= val << np.uint64(4 * slot_map[s])
        out[i] = o
    return out


@njit(cache=True)
def signatures(keys, n_slots):
    """Per lower state: ``(2 bits per slot: its degree) | (ends made << 60)``."""
    out = np.empty(keys.shape[0], dtype=np.uint64)
    for i in range(keys.shape[0]):
        k = keys[i]
        sig = np.uint64(0)
        ends = 0
        for s in range(n_slots):
            val = np.int64((k >> np.uint64(4 * s)) & np.uint64(15))
            sig |= np.uint64(_deg(val)) << np.uint64(2 * s)
            if val == DANGLE:
                ends += 1
        out[i] = sig | (np.uint64(ends) << np.uint64(60))
    return out


@njit(cache=True)
def group_index(sorted_sigs, logcap):
    """A hash table ``signature -> (first, end)`` over signatures sorted ascending."""
    cap = np.int64(1) << logcap
    gkeys = np.full(cap, EMPTY, dtype=np.uint64)
    gfirst = np.zeros(cap, dtype=np.int64)
    gend = np.zeros(cap, dtype=np.int64)
    mask = cap - 1
    i = 0
    n = sorted_sigs.shape[0]
    while i < n:
        j = i
        while j < n and sorted_sigs[j] == sorted_sigs[i]:
            j += 1
        h = slot_index(sorted_sigs[i], logcap)
        while gkeys[h] != EMPTY:
            h = (h + 1) & mask
        gkeys[h] = sorted_sigs[i]
        gfirst[h] = i
        gend[h] = j
        i = j
    return gkeys, gfirst, gend


@njit(cache=True, inline="always")
def _lookup(gkeys, logcap, sig):
    mask = (np.int64(1) << logcap) - 1
    h = slot_index(sig, logcap)
    while True:
        kk = gkeys[h]
        if kk == sig:
            return h
        if kk == EMPTY:
            return -1
        h = (h + 1) & mask


@njit(cache=True)
def _find(parent, stamp, cur, a):
    if stamp[a] != cur:
        stamp[a] = cur
        parent[a] = a
        return a
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@njit(cache=True)
def join(ukeys, ucounts, n_slots, lkeys, lcounts, gkeys, gfirst, gend, logcap, end_ok):
    """Sum ``ucount * lcount`` over the pairs of upper and lower states that make one
    Hamiltonian path (see the module docstring). ``lkeys`` are in the upper slot order, sorted
    by :func:`signatures`; ``end_ok[s]`` says whether interface slot ``s`` may be a path end
    (its colour). Returns ``(total, pairs_checked, overflow)``."""
    total = np.uint64(0)
    pairs = 0
    overflow = False
    du = np.zeros(16, dtype=np.int64)
    vu = np.zeros(16, dtype=np.int64)
    parent = np.zeros(64, dtype=np.int64)
    stamp = np.zeros(64, dtype=np.int64)
    cur = 0
    for i in range(ukeys.shape[0]):
        k = ukeys[i]
        ends_u = 0
        comp = np.uint64(0)
        for s in range(n_slots):
            val = np.int64((k >> np.uint64(4 * s)) & np.uint64(15))
            vu[s] = val
            du[s] = _deg(val)
            if val == DANGLE:
                ends_u += 1
            comp |= np.uint64(2 - du[s]) << np.uint64(2 * s)
        if ends_u > 2:
            continue
        # variants: 0, 1 or 2 interface ends (slots of upper degree <= 1 whose colour may end)
        for a in range(-1, n_slots):
            if a >= 0 and (du[a] > 1 or not end_ok[a]):
                continue
            for b in range(-1, n_slots):
                if b >= 0 and (a < 0 or b <= a or du[b] > 1 or not end_ok[b]):
                    continue
                n_if = (a >= 0) + (b >= 0)
                ends_l = 2 - ends_u - n_if
                if ends_l < 0:
                    continue
                sig = comp
                if a >= 0:
                    sig -= np.uint64(1) << np.uint64(2 * a)
                if b >= 0:
                    sig -= np.uint64(1) << np.uint64(2 * b)
                sig |= np.uint64(ends_l) << np.uint64(60)
                h = _lookup(gkeys, logcap, sig)
                if h < 0:
                    continue
                for j in range(gfirst[h], gend[h]):
                    lk = lkeys[j]
                    pairs += 1
                    cur += 1
                    ok = True
                    for s in range(n_slots):
                        x = vu[s]
                        if x == SAT or x == ISO:
                            continue
                        y = np.int64((lk >> np.uint64(4 * s)) & np.uint64(15))
                        if y == SAT or y == ISO:
                            continue
                        fu = x if x != DANGLE else 16 + s
                        fl = 32 + (y if y != DANGLE else 16 + s)
                        ru = _find(parent, stamp, cur, fu)
                        rl = _find(parent, stamp, cur, fl)
                        if ru == rl:
                            ok = False
                            break
                        parent[ru] = rl
                    if ok:
                        prod = ucounts[i] * lcounts[j]
                        if ucounts[i] != 0 and prod // ucounts[i] != lcounts[j]:
                            overflow = True
                        t = total + prod
                        if t < total:
                            overflow = True
                        total = t
    return total, pairs, overflow
