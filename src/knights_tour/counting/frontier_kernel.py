"""The compiled frontier (path-structure) DP kernel: one layer of the DP that counts Hamiltonian
paths of the knight's graph without listing them.

Used by :mod:`knights_tour.counting.frontier`, which plans the vertex order and the per-step tables
this kernel reads. Compiled with numba (``@njit(cache=True)``). Pure: no Celery, no
Redis.

Method
    Frontier-based dynamic programming over a vertex order (the "path-structure" or
    "connectivity" DP of transfer-matrix counts of Hamiltonian paths: Stertenbrink's knight's
    path counts; D. E. Knuth, *TAOCP* Vol. 4 pre-fascicle 8A and his ``simpath`` programs, 2008-;
    S. Minato's frontier-based search, 2013). Vertices are taken one at a time in a fixed order;
    when vertex ``v`` is taken, every edge between ``v`` and an earlier vertex is decided (used by
    the path or not), so the chosen edges among the taken vertices form disjoint path pieces
    (*fragments*). The *frontier* is the taken vertices that still have an untaken neighbour;
    everything the future needs to know about the past is, per frontier vertex, its state:

    ``SAT`` (0)
        takes no more edges (degree 2, or the fixed start square once it has its one edge);
    ``1 .. 7``
        degree 1, one end of a fragment whose other end is the frontier vertex with the same
        label (labels renumbered by first appearance, so equal structures have equal keys);
    ``DANGLE`` (14)
        degree <= 1, one end of a fragment whose other end is already a path end point
        (the fixed start square with no edge yet is its own ``DANGLE``);
    ``ISO`` (15)
        degree 0 (a fragment of one vertex, both ends here).

    A state is these 4-bit values packed into a ``uint64`` key (slot ``i`` in bits ``4i..4i+3``,
    at most 16 frontier slots); its value is the number of edge choices among the taken vertices
    that lead to it (``uint64``, checked for overflow).

Pruning (exact: a state is dropped only if no Hamiltonian path completes it)
    * a closed cycle, or a complete path before the last vertex;
    * a vertex leaving the frontier with degree 0;
    * end points: a path has two, and their colours are fixed by the colour classes (a knight
      move changes colour, so on a board with one more black square both ends are black, on a
      balanced one one of each). The colours of the end points already made are read from the
      key: every taken vertex lies on a fragment, and twice a fragment's black-minus-white count
      is the sum of ``+1``/``-1`` over its two ends, so ``2 (b - w)`` of the taken vertices (a
      constant of the layer) minus the colours of the open ends gives the colours of the made
      ends. To these are added the end points the future is forced to make: a frontier vertex
      of degree 0 with one untaken neighbour, an untaken vertex with one possible neighbour
      left (its untaken neighbours plus the frontier neighbours that can still take an edge),
      and the fixed start square while it is untaken. More than the path has of a colour: dead.
      An untaken vertex with no possible neighbour left: dead. A *reserved* end (a start of a
      known colour that is not named yet, one of a set of untaken *candidates*: the shared trunk
      of several start squares) counts as one more forced end of its colour when no forced end
      is a candidate, else as at least one (it may be one of the forced ones). ``adj_col`` holds
      the colour in bit 0 and "is a candidate" in bit 1.
"""

from __future__ import annotations

import numpy as np

from knights_tour._numba import njit

SAT = 0
DANGLE = 14
ISO = 15
EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
"""The hash table's empty-slot marker (no key has its top 4 bits set: 15 slots use 60 bits)."""
MAX_SLOTS = 15
"""Frontier slots a key holds (4 bits each, the top 4 bits of a key stay clear)."""

# columns of the per-step scalar table ``scal``
C_NF_OLD, C_NBACK, C_V_INIT, C_V_NEW, C_NF_NEW, C_NADJ, C_STATIC_B, C_STATIC_W = range(8)
C_BW_TAKEN, C_IS_LAST, C_NEED_B, C_NEED_W, C_RESERVE_B, C_RESERVE_W = range(8, 14)
C_STATIC_CAND = 14
N_SCALARS = 15
MAX_ADJ = 48
"""Untaken vertices next to the frontier a step can list."""

_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)
_PART_MUL = np.uint64(0xC2B2AE3D27D4EB4F)


@njit(cache=True, inline="always")
def slot_index(key, logcap):
    """The home slot of ``key`` in an open-addressing table of ``2**logcap`` slots
    (multiplicative hashing: the top ``logcap`` bits of ``key`` times an odd constant; Knuth,
    TAOCP vol. 3, 6.4)."""
    return np.int64((key * _HASH_MUL) >> np.uint64(64 - logcap))


@njit(cache=True)
def part_of(key, nparts):
    """The part (``0 .. nparts-1``) a key belongs to when a layer is split into parts."""
    h = (key ^ (key >> np.uint64(31))) * _PART_MUL
    return np.int64((h >> np.uint64(40)) % np.uint64(nparts))


@njit(cache=True, inline="always")
def _popcount(m):
    c = 0
    while m:
        m &= m - 1
        c += 1
    return c


@njit(cache=True)
def _partner(x, n, i, lab):
    for j in range(n):
        if j != i and x[j] == lab:
            return j
    return -2


@njit(cache=True)
def _connect(x, n, vi, u, fresh):
    """Add the edge ``vi``-``u`` (both open) to the working states ``x[0:n]``.

    Returns ``(status, fresh)``: status 0 ok, 1 a path was completed, -1 dead (a cycle)."""
    a = x[vi]
    b = x[u]
    if a == SAT or b == SAT:
        return -1, fresh
    if a == ISO:
        oa = vi
    elif a == DANGLE:
        oa = -1
    else:
        oa = _partner(x, n, vi, a)
    if b == ISO:
        ob = u
    elif b == DANGLE:
        ob = -1
    else:
        ob = _partner(x, n, u, b)
    if a != ISO and a != DANGLE and a == b:
        return -1, fresh  # both ends of one fragment: a cycle
    if a != ISO:
        x[vi] = SAT
    if b != ISO:
        x[u] = SAT
    if oa == -1 and ob == -1:
        return 1, fresh
    if oa == -1:
        x[ob] = DANGLE
    elif ob == -1:
        x[oa] = DANGLE
    else:
        x[oa] = fresh
        x[ob] = fresh
        fresh += 1
    return 0, fresh


@njit(cache=True)
def _leave(x, n, i):
    """Vertex ``i`` leaves the frontier. Returns 0 ok, 1 a path was completed, -1 dead."""
    a = x[i]
    if a == SAT:
        return 0
    if a == ISO:
        return -1
    x[i] = SAT
    if a == DANGLE:
        return 1
    p = _partner(x, n, i, a)
    x[p] = DANGLE
    return 0


@njit(cache=True)
def _successor(x, k, scal, o2n, newcol, newrem1, adj_static, adj_col, adj_fs, done, y, lab):
    """Leave, prune and encode the working states ``x`` (old slots, then ``v``) after step
    ``k``'s edges were added (``done``: paths those edges completed). Returns ``(ok, key)``."""
    nf_old = scal[k, C_NF_OLD]
    n = nf_old + 1
    for i in range(nf_old):
        if o2n[k, i] < 0:
            r = _leave(x, n, i)
            if r < 0:
                return False, np.uint64(0)
            done += r
    if scal[k, C_V_NEW] < 0:
        r = _leave(x, n, nf_old)
        if r < 0:
            return False, np.uint64(0)
        done += r
    if scal[k, C_IS_LAST] == 1:
        if done != 1:
            return False, np.uint64(0)
        for i in range(n):
            if x[i] != SAT:
                return False, np.uint64(0)
        return True, np.uint64(0)
    if done > 0:
        return False, np.uint64(0)
    nf_new = scal[k, C_NF_NEW]
    for j in range(nf_new):
        y[j] = 0
    for i in range(nf_old):
        j = o2n[k, i]
        if j >= 0:
            y[j] = x[i]
    if scal[k, C_V_NEW] >= 0:
        y[scal[k, C_V_NEW]] = x[nf_old]
    # end points: made (read from the colours of the open ends) and forced
    n_dangle = 0
    open_bw = 0
    forced_b = scal[k, C_STATIC_B]
    forced_w = scal[k, C_STATIC_W]
    open_mask = 0
    for j in range(nf_new):
        val = y[j]
        if val == SAT:
            continue
        open_mask |= 1 << j
        sign = 1 - 2 * newcol[k, j]
        if val == ISO:
            open_bw += 2 * sign
            if newrem1[k, j] == 1:
                if sign > 0:
                    forced_b += 1
                else:
                    forced_w += 1
        else:
            open_bw += sign
            if val == DANGLE:
                n_dangle += 1
    made_bw = 2 * scal[k, C_BW_TAKEN] - open_bw
    made_b = (n_dangle + made_bw) // 2
    made_w = (n_dangle - made_bw) // 2
    need_b = scal[k, C_NEED_B]
    need_w = scal[k, C_NEED_W]
    # a reserved end (a start square still untaken but not named) may be one of the forced ones
    res_b = scal[k, C_RESERVE_B]
    res_w = scal[k, C_RESERVE_W]
    if made_b + max(forced_b, res_b) > need_b or made_w + max(forced_w, res_w) > need_w:
        return False, np.uint64(0)
    forced_cand = scal[k, C_STATIC_CAND]
    for a in range(scal[k, C_NADJ]):
        avail = adj_static[k, a] + _popcount(open_mask & adj_fs[k, a])
        if avail == 0:
            return False, np.uint64(0)
        if avail == 1:
            if adj_col[k, a] & 1 == 0:
                forced_b += 1
            else:
                forced_w += 1
            forced_cand += adj_col[k, a] >> 1
    if forced_cand == 0:
        # no forced end is a start candidate: the reserved end is one more
        forced_b += res_b
        forced_w += res_w
    if made_b + max(forced_b, res_b) > need_b or made_w + max(forced_w, res_w) > need_w:
        return False, np.uint64(0)
    # renumber labels by first appearance and pack
    for j in range(16):
        lab[j] = 0
    nxt = 1
    key = np.uint64(0)
    for j in range(nf_new):
        val = y[j]
        if 1 <= val <= 13:
            if lab[val] == 0:
                lab[val] = nxt
                nxt += 1
            val = lab[val]
        key |= np.uint64(val) << np.uint64(4 * j)
    return True, key


@njit(cache=True)
def _insert(tkeys, tcounts, logcap, key, cnt):
    """Add ``cnt`` to ``key``'s entry. Returns (1 if a new entry, overflow flag)."""
    mask = (np.int64(1) << logcap) - 1
    h = slot_index(key, logcap)
    while True:
        kk = tkeys[h]
        if kk == key:
            s = tcounts[h] + cnt
            ovf = s < cnt
            tcounts[h] = s
            return 0, ovf
        if kk == EMPTY:
            tkeys[h] = key
            tcounts[h] = cnt
            return 1, False
        h = (h + 1) & mask


@njit(cache=True)
def expand(
    keys,
    counts,
    i0,
    k,
    scal,
    back,
    o2n,
    newcol,
    newrem1,
    adj_static,
    adj_col,
    adj_fs,
    part,
    nparts,
    tkeys,
    tcounts,
    logcap,
    fill,
    max_fill,
):
    """Take step ``k``: the successors of states ``keys[i0:]`` (with ``counts``) that fall in
    part ``part`` of ``nparts`` are added into the open-addressing table ``tkeys``/``tcounts``
    (capacity ``2**logcap``, ``fill`` entries used).

    Stops early, before an input state whose successors could push the table past
    ``max_fill`` entries, so the caller can grow the table and call again from there.

    Returns ``(i_next, fill, transitions, overflow)``: the first input state not processed,
    the table's entries, the successors generated (all parts) and whether a count overflowed.
    """
    nf_old = scal[k, C_NF_OLD]
    nback = scal[k, C_NBACK]
    v_init = scal[k, C_V_INIT]
    cap2 = v_init == ISO
    w = np.zeros(17, dtype=np.int64)
    x = np.zeros(17, dtype=np.int64)
    y = np.zeros(16, dtype=np.int64)
    lab = np.zeros(16, dtype=np.int64)
    trans = 0
    overflow = False
    n = nf_old + 1
    i = i0
    while i < keys.shape[0]:
        if fill + 11 > max_fill:
            break
        key = keys[i]
        cnt = counts[i]
        for s in range(nf_old):
            w[s] = np.int64((key >> np.uint64(4 * s)) & np.uint64(15))
        w[nf_old] = v_init
        # choices: no edge, one edge to each open back neighbour, two (unless v is the start)
        nchoice = 1 + nback + (nback * (nback - 1) // 2 if cap2 else 0)
        for c in range(nchoice):
            if c == 0:
                e1 = -1
                e2 = -1
            elif c <= nback:
                e1 = back[k, c - 1]
                e2 = -1
            else:
                cc = c - 1 - nback
                p = 0
                q = 1
                while cc >= nback - 1 - p:
                    cc -= nback - 1 - p
                    p += 1
                q = p + 1 + cc
                e1 = back[k, p]
                e2 = back[k, q]
            if e1 >= 0 and w[e1] == SAT:
                continue
            if e2 >= 0 and w[e2] == SAT:
                continue
            for s in range(n):
                x[s] = w[s]
            fresh = 8
            done = 0
            if e1 >= 0:
                st, fresh = _connect(x, n, nf_old, e1, fresh)
                if st < 0:
                    continue
                done += st
            if e2 >= 0:
                if x[nf_old] == SAT:
                    continue
                st, fresh = _connect(x, n, nf_old, e2, fresh)
                if st < 0:
                    continue
                done += st
            if done > 0 and scal[k, C_IS_LAST] == 0:
                continue
            ok, nkey = _successor(
                x, k, scal, o2n, newcol, newrem1, adj_static, adj_col, adj_fs, done, y, lab
            )
            if not ok:
                continue
            trans += 1
            if nparts > 1 and part_of(nkey, nparts) != part:
                continue
            new, ovf = _insert(tkeys, tcounts, logcap, nkey, cnt)
            fill += new
            overflow |= ovf
        i += 1
    return i, fill, trans, overflow


@njit(cache=True)
def compact(tkeys, tcounts, fill):
    """The used entries of a table as two arrays ``(keys, counts)`` of length ``fill``."""
    ok = np.empty(fill, dtype=np.uint64)
    oc = np.empty(fill, dtype=np.uint64)
    j = 0
    for h in range(tkeys.shape[0]):
        if tkeys[h] != EMPTY:
            ok[j] = tkeys[h]
            oc[j] = tcounts[h]
            j += 1
    return ok, oc


@njit(cache=True)
def rehash(tkeys, tcounts, logcap):
    """The entries of a table moved into a new table of capacity ``2**logcap``."""
    nk = np.full(np.int64(1) << logcap, EMPTY, dtype=np.uint64)
    nc = np.zeros(np.int64(1) << logcap, dtype=np.uint64)
    for h in range(tkeys.shape[0]):
        if tkeys[h] != EMPTY:
            _insert(nk, nc, logcap, tkeys[h], tcounts[h])
    return nk, nc
