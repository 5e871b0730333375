"""The JSON text of stored tours, made straight from their stored moves, and the walk's check
that each is a knight's tour: the compiled kernel behind collecting a batch's records.

A page of stored tours (:func:`knights_tour.tours.stored.encode_moves` payloads: a start square
and three bits per move) is walked once, square by square, in compiled code that releases the
GIL: each square's ``[row,col]`` text is written into one output buffer (the bytes
:func:`knights_tour.tours.record.tour_json` gives for the same tour) and, where asked, the walk
records whether the squares are a knight's tour of the record's board from its start square
(every square on the board, none twice, ``rows*cols`` of them, closed if asked; each step is a
knight move by construction). A tour the walk rejects is judged again by
:func:`knights_tour.tours.verify.verify_tour`, which says why. For a Parquet file the same
check is made while the moves are read out, a byte each (:func:`read_moves`).

Compiled with numba (:func:`knights_tour._numba.njit`, cached on disk); loaded only
by the commands that write records. Pure: no Celery, no Redis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from knights_tour._numba import njit
from knights_tour.tours.stored import KNIGHT_MOVES

_HEAD_BYTES = 12
_DR = np.array([dr for dr, _ in KNIGHT_MOVES], dtype=np.int64)
_DC = np.array([dc for _, dc in KNIGHT_MOVES], dtype=np.int64)
_TABLE_TOP = 10000
"""Coordinates below this take their digits from a table; others are written digit by digit."""


def _number_table() -> tuple[np.ndarray, np.ndarray]:
    texts = np.zeros((_TABLE_TOP, 4), dtype=np.uint8)
    lengths = np.zeros(_TABLE_TOP, dtype=np.int64)
    for v in range(_TABLE_TOP):
        s = str(v).encode()
        texts[v, : len(s)] = np.frombuffer(s, dtype=np.uint8)
        lengths[v] = len(s)
    return texts, lengths


_TEXTS, _LENGTHS = _number_table()


@njit(cache=True, inline="always")
def _put_int(out, p, v, texts, lengths):
    """Write the decimal digits of ``v`` at ``out[p:]``; returns the position after them."""
    if 0 <= v < texts.shape[0]:
        k = lengths[v]
        for j in range(k):
            out[p + j] = texts[v, j]
        return p + k
    if v < 0:
        out[p] = 45  # "-"
        p += 1
        v = -v
    digits = 1
    t = v
    while t >= 10:
        t //= 10
        digits += 1
    for j in range(digits - 1, -1, -1):
        out[p + j] = 48 + v % 10
        v //= 10
    return p + digits


_TABLE_SQUARES = 1 << 22
"""Boards of more squares are written digit by digit (their table would outweigh the tour)."""


@njit(cache=True)
def _board_table(nr, nc, texts, lengths):
    """``[r,c],`` of every square of an ``nr`` x ``nc`` board (sides below 10,000), row-major,
    as two little-endian words of 8 bytes each (zero padded), and each text's length."""
    words = np.zeros((nr * nc, 2), dtype=np.uint64)
    size = np.zeros(nr * nc, dtype=np.uint64)
    text = np.zeros(16, dtype=np.uint8)
    for r in range(nr):
        for c in range(nc):
            s = r * nc + c
            text[:] = 0
            text[0] = 91  # "["
            p = _put_int(text, 1, r, texts, lengths)
            text[p] = 44  # ","
            p = _put_int(text, p + 1, c, texts, lengths)
            text[p] = 93  # "]"
            text[p + 1] = 44
            size[s] = p + 2
            for j in range(16):
                words[s, j // 8] |= np.uint64(text[j]) << np.uint64(8 * (j % 8))
    return words, size


@njit(cache=True, inline="always")
def _put_word(out, p, v):
    """The 8 bytes of ``v`` (little-endian) at ``out[p:p+8]``: byte stores that the compiler
    merges into one (``p`` unsigned, so no negative-index wrap-around sits between them)."""
    for j in range(8):
        out[p + np.uint64(j)] = np.uint8((v >> np.uint64(8 * j)) & np.uint64(0xFF))


@njit(cache=True, inline="always")
def _head(data, b):
    """Start row, start column and number of moves of the payload at ``data[b:]``."""
    r = np.int64(0)
    c = np.int64(0)
    n = np.int64(0)
    for j in range(4):
        r |= np.int64(data[b + j]) << (8 * j)
        c |= np.int64(data[b + 4 + j]) << (8 * j)
        n |= np.int64(data[b + 8 + j]) << (8 * j)
    if r >= 2**31:
        r -= 2**32
    if c >= 2**31:
        c -= 2**32
    return r, c, n


@njit(cache=True)
def _put_square(out, p, r, c, texts, lengths):
    """``[r,c],`` at ``out[p:]``, digit by digit; returns the position after it."""
    q = np.int64(p)
    out[q] = 91  # "["
    q = _put_int(out, q + 1, r, texts, lengths)
    out[q] = 44  # ","
    q = _put_int(out, q + 1, c, texts, lengths)
    out[q] = 93  # "]"
    out[q + 1] = 44
    return np.uint64(q + 2)


@njit(cache=True, inline="always")
def _eight_moves(data, b, left):
    """The next eight moves (``left`` of them if fewer), three bits each, most significant
    first, as the low 24 bits of an integer: the bytes at ``data[b:b+3]`` that hold them."""
    word = np.int64(data[b]) << 16
    if left > 2:
        word |= np.int64(data[b + 1]) << 8
    if left > 5:
        word |= np.int64(data[b + 2])
    return word


@njit(cache=True)
def _board_arrays(write, nr, nc, texts, lengths):
    """For the tours of an ``nr`` x ``nc`` board: an empty array to mark their squares seen in
    (:func:`_seen_for` makes it), and the board's table of square texts (:func:`_board_table`;
    empty where the text is not written or the board is too large for a table)."""
    seen = np.zeros(0, dtype=np.uint32)
    if write and 0 < nr < 10000 and 0 < nc < 10000 and nr * nc <= _TABLE_SQUARES:
        words, size = _board_table(nr, nc, texts, lengths)
        return seen, words, size
    return seen, np.zeros((0, 2), dtype=np.uint64), np.zeros(0, dtype=np.uint64)


@njit(cache=True, inline="always")
def _seen_for(seen, good, squares):
    """``seen``, or a new one for a board of ``squares`` squares if it has none yet and a tour
    may pass the check (``good``): a tour of fewer moves than its board has squares, such as
    an undecided record's on a large board, needs none."""
    if good and len(seen) == 0:
        return np.zeros(squares, dtype=np.uint32)
    return seen


@njit(cache=True, inline="always")
def _mark(seen, s, stamp, good):
    """Mark square ``s`` seen by tour ``stamp`` while the tour may pass the check (``good``);
    whether it still may (not if ``s`` was seen by it before)."""
    if not good:
        return False
    again = seen[s] == stamp
    seen[s] = stamp
    return not again


@njit(cache=True, inline="always")
def _knight_move(dr, dc):
    """Whether a step of ``(dr, dc)`` is a knight move."""
    ar = abs(dr)
    ac = abs(dc)
    return (ar == 1 and ac == 2) or (ar == 2 and ac == 1)


@njit(cache=True, inline="always")
def _walk_tour(
    write, data, b, nr, nc, srow, scol, closed, check, seen, words, size, stamp, out, p, tables
):
    """Walk the payload at ``data[b:]``, its moves read eight (three bytes) at a time: its
    tour's JSON text (with ``write`` False, its moves, a byte each) goes to ``out[p:]``; the
    tour is checked if ``check``, its squares marked seen with ``stamp`` in ``seen`` (one
    array per board, made here on first need). Returns the position after what was written,
    the verdict (checked and a knight's tour of the ``nr`` x ``nc`` board from ``(srow,
    scol)``, closed if ``closed``) and ``seen``."""
    texts, lengths, dr, dc = tables
    r, c, n = _head(data, b)
    tabled = len(size) > 0
    wide = nr > 100 or nc > 100  # a text of more than 8 bytes
    good = check and n + 1 == nr * nc and r == srow and c == scol
    seen = _seen_for(seen, good, nr * nc)
    b += _HEAD_BYTES
    word = np.int64(0)
    if write:
        out[p] = 91  # "["
        p += np.uint64(1)
    k = 0
    while True:
        if 0 <= r < nr and 0 <= c < nc:
            s = r * nc + c
            good = _mark(seen, s, stamp, good)
            if write and tabled:
                _put_word(out, p, words[s, 0])
                if wide:
                    _put_word(out, p + np.uint64(8), words[s, 1])
                p += size[s]
            elif write:
                p = _put_square(out, p, r, c, texts, lengths)
        else:
            good = False
            if write:
                p = _put_square(out, p, r, c, texts, lengths)
        if k == n:
            break
        j = k & 7
        if j == 0:
            word = _eight_moves(data, b, n - k)
            b += 3
        code = (word >> (21 - 3 * j)) & 7
        if not write:
            out[p] = code
            p += np.uint64(1)
        r += dr[code]
        c += dc[code]
        k += 1
    if write:
        out[p - np.uint64(1)] = 93  # the last "," closes the list
    # a good tour began on its start square
    return p, good and (not closed or _knight_move(r - srow, c - scol)), seen


@njit(cache=True, inline="always")
def _on_board(write, nr, nc, shape, seen, words, size, stamp, texts, lengths):
    """The walk's arrays for a tour of an ``nr`` x ``nc`` board (:func:`_board_arrays`): the
    ones it has if its last tour's board ``shape`` was the same, else the new board's; and the
    tour's number on its board. Returns ``seen, words, size, stamp, shape``."""
    if (nr, nc) != shape:
        seen, words, size = _board_arrays(write, nr, nc, texts, lengths)
        stamp = np.uint32(0)
        shape = (nr, nc)
    return seen, words, size, stamp + np.uint32(1), shape


@njit(cache=True)
def _render(
    write,
    data,
    starts,
    rows,
    cols,
    srow,
    scol,
    closed,
    check,
    out,
    out_at,
    out_end,
    ok,
    texts,
    lengths,
    dr,
    dc,
):
    """Walk each payload ``data[starts[i]:starts[i+1]]`` (:func:`_walk_tour`): its tour's JSON
    text (with ``write`` False, its moves, a byte each) goes to
    ``out[out_at[i]:out_end[i]]``, and where ``check[i]`` the walk's verdict to ``ok[i]``; a
    square is marked seen with the tour's number, so one board's tours share one array."""
    seen, words, size = _board_arrays(False, 0, 0, texts, lengths)
    stamp = np.uint32(0)
    shape = (-1, -1)
    p = np.uint64(0)
    for i in range(len(out_at)):
        nr = rows[i]
        nc = cols[i]
        seen, words, size, stamp, shape = _on_board(
            write, nr, nc, shape, seen, words, size, stamp, texts, lengths
        )
        out_at[i] = np.int64(p)
        p, ok[i], seen = _walk_tour(
            write,
            data,
            starts[i],
            nr,
            nc,
            srow[i],
            scol[i],
            closed[i],
            check[i],
            seen,
            words,
            size,
            stamp,
            out,
            p,
            (texts, lengths, dr, dc),
        )
        out_end[i] = np.int64(p)


@njit(cache=True, inline="always")
def _value_end(text, q):
    """Where the JSON value at ``text[q:]`` ends: the position of the ``,`` or closing bracket
    after it, at its own depth and outside strings."""
    depth = 0
    quoted = False
    while True:
        ch = text[q]
        if quoted:
            if ch == 92:  # a backslash: the next byte is escaped
                q += 1
            elif ch == 34:
                quoted = False
        elif ch == 34:  # '"'
            quoted = True
        elif ch == 91 or ch == 123:  # "[" "{"
            depth += 1
        elif ch == 93 or ch == 125:  # "]" "}"
            if depth == 0:
                return q
            depth -= 1
        elif ch == 44 and depth == 0:  # ","
            return q
        q += 1


@njit(cache=True)
def _render_lines(
    text,
    keys,
    key_at,
    tour_field,
    data,
    pay_at,
    rows,
    cols,
    srow,
    scol,
    closed,
    check,
    out,
    line_end,
    ok,
    tables,
):
    """The JSON Lines text of a page of records: ``text`` is the page's records as JSON arrays
    of their fields (``[[f0,f1,...],...]``); each becomes an object line, ``keys[key_at[k]:
    key_at[k+1]]`` before field ``k``, ``}`` and a newline after the last, the tour (``null``
    in ``text``) written by the walk of the payload at ``data[pay_at[i]:]`` where ``pay_at[i]
    >= 0`` (:func:`_walk_tour`, with ``tables``; its verdict to ``ok[i]``). Line ``i`` ends
    at ``line_end[i]``. Returns the bytes written, or -1 if ``text`` is not a list of arrays
    of ``len(key_at) - 1`` fields each."""
    texts, lengths = tables[0], tables[1]
    seen, words, size = _board_arrays(False, 0, 0, texts, lengths)
    stamp = np.uint32(0)
    shape = (-1, -1)
    fields = len(key_at) - 1
    p = np.uint64(0)
    q = 1  # past the page's "["
    for i in range(len(line_end)):
        if text[q] != 91:
            return -1
        q += 1
        for k in range(fields):
            for j in range(key_at[k], key_at[k + 1]):
                out[p] = keys[j]
                p += np.uint64(1)
            end = _value_end(text, q)
            if (text[end] == 93) != (k == fields - 1):
                return -1
            if k == tour_field and pay_at[i] >= 0:
                nr = rows[i]
                nc = cols[i]
                seen, words, size, stamp, shape = _on_board(
                    True, nr, nc, shape, seen, words, size, stamp, texts, lengths
                )
                p, ok[i], seen = _walk_tour(
                    True,
                    data,
                    pay_at[i],
                    nr,
                    nc,
                    srow[i],
                    scol[i],
                    closed[i],
                    check[i],
                    seen,
                    words,
                    size,
                    stamp,
                    out,
                    p,
                    tables,
                )
            else:
                for j in range(q, end):
                    out[p] = text[j]
                    p += np.uint64(1)
            q = end + 1
        out[p] = 125  # "}"
        out[p + np.uint64(1)] = 10
        p += np.uint64(2)
        line_end[i] = np.int64(p)
        q += 1  # the "," between records, or the page's "]"
    return np.int64(p)


@njit(cache=True)
def _ext_payloads(raw, raw_at, moves_code):
    """Where the data of each MessagePack value ``raw[raw_at[i]:raw_at[i+1]]`` begins if it
    is an extension of type ``moves_code`` (else -1: nil, or -2: anything else), and its
    length."""
    count = len(raw_at) - 1
    at = np.full(count, -1, dtype=np.int64)
    size = np.zeros(count, dtype=np.int64)
    for i in range(count):
        b = raw_at[i]
        kind = raw[b]
        if kind == 0xC0 and raw_at[i + 1] == b + 1:
            continue
        n = -1
        h = 0
        if kind == 0xC7:
            n = int(raw[b + 1])
            h = 2
        elif kind == 0xC8:
            n = (int(raw[b + 1]) << 8) | int(raw[b + 2])
            h = 3
        elif kind == 0xC9:
            n = 0
            for j in range(4):
                n = (n << 8) | int(raw[b + 1 + j])
            h = 5
        elif 0xD4 <= kind <= 0xD8:
            n = 1 << (int(kind) - 0xD4)
            h = 1
        if n < 0 or raw[b + h] != moves_code or b + h + 1 + n != raw_at[i + 1]:
            at[i] = -2
        else:
            at[i] = b + h + 1
            size[i] = n
    return at, size


_WALL = np.uint32(0xFFFFFFFF)
"""The mark of a square beside the board in :func:`_read_moves`' board arrays: no tour's
number reaches it."""


@njit(cache=True, inline="always")
def _three_bytes(data, b, left):
    """The bytes at ``data[b:b+3]`` as the low 24 bits of an integer (:func:`_eight_moves`),
    the whole three when eight moves or more are ``left``."""
    if left >= 8:
        return (np.int64(data[b]) << 16) | (np.int64(data[b + 1]) << 8) | np.int64(data[b + 2])
    return _eight_moves(data, b, left)


@njit(cache=True, inline="always")
def _moves_out(data, b, n, out, p):
    """The ``n`` moves at ``data[b:]`` (three bits each) to ``out[p:p+n]``, a byte each."""
    for k in range(0, n, 8):
        word = _three_bytes(data, b, n - k)
        b += 3
        for j in range(min(8, n - k)):
            out[p + k + j] = (word >> (21 - 3 * j)) & 7


@njit(cache=True, inline="always")
def _moves_checked(data, b, n, out, p, seen, q, step, stamp):
    """:func:`_moves_out`, each move also taken on the board from square ``q`` of ``seen``
    (:func:`_read_moves`), the squares reached marked with ``stamp``; stops at the first step
    that finds a mark at least ``stamp``. Returns whether none did, and the square reached.
    Whole groups of eight moves first, in a loop of constant length that the compiler
    unrolls, then the last few."""
    whole = n - n % 8
    for k in range(0, whole, 8):
        word = (np.int64(data[b]) << 16) | (np.int64(data[b + 1]) << 8) | np.int64(data[b + 2])
        b += 3
        for j in range(8):
            code = (word >> (21 - 3 * j)) & 7
            out[p + k + j] = code
            q += step[code]
            if seen[q] >= stamp:
                return False, q
            seen[q] = stamp
    if whole < n:
        word = _eight_moves(data, b, n - whole)
        for j in range(n - whole):
            code = (word >> (21 - 3 * j)) & 7
            out[p + whole + j] = code
            q += step[code]
            if seen[q] >= stamp:
                return False, q
            seen[q] = stamp
    return True, q


@njit(cache=True)
def _read_moves(data, pay_at, rows, cols, srow, scol, closed, check, out, out_at, ok, dr, dc):
    """Each payload at ``data[pay_at[i]:]`` (``pay_at[i] >= 0``) read out as its moves, a byte
    each, to ``out[out_at[i]:out_at[i+1]]`` (``out_at`` has one more entry than ``pay_at``;
    a record without a payload gets none); where ``check[i]``, ``ok[i]`` says whether the
    moves from ``(srow[i], scol[i])`` make a knight's tour of its ``rows[i]`` x ``cols[i]``
    board (closed if ``closed[i]``). Returns False if a payload's start square is not its
    record's ``(srow[i], scol[i])``.

    The board is kept with a margin of two squares marked :data:`_WALL`, and a square is
    marked with the tour's number when the tour reaches it: a step that leaves the board or
    comes back to a square finds a mark at least the tour's number, and a square is a single
    index that each move shifts by a constant."""
    shape = (-1, -1)
    seen = np.zeros(0, dtype=np.uint32)
    width = 0
    step = np.zeros(8, dtype=np.int64)
    stamp = np.uint32(0)
    p = 0
    heads_ok = True
    for i in range(len(pay_at)):
        out_at[i] = p
        b = pay_at[i]
        if b < 0:
            continue
        r, c, n = _head(data, b)
        nr = rows[i]
        nc = cols[i]
        if r != srow[i] or c != scol[i]:
            heads_ok = False
        good = check[i] and n + 1 == nr * nc and heads_ok and 0 <= r < nr and 0 <= c < nc
        if good and (nr, nc) != shape:
            shape = (nr, nc)
            width = nc + 4
            seen = np.full((nr + 4) * width, _WALL, dtype=np.uint32)
            for y in range(nr):
                seen[(y + 2) * width + 2 : (y + 2) * width + 2 + nc] = 0
            for k in range(8):
                step[k] = dr[k] * width + dc[k]
            stamp = np.uint32(0)
        b += _HEAD_BYTES
        if good:
            stamp += np.uint32(1)
            q = (r + 2) * width + (c + 2)
            seen[q] = stamp
            good, q = _moves_checked(data, b, n, out, p, seen, q, step, stamp)
            if good and closed[i]:
                good = _knight_move(q // width - 2 - r, q % width - 2 - c)
        if not good:  # unchecked, or read out again past the step that failed
            _moves_out(data, b, n, out, p)
        ok[i] = good
        p += n
    out_at[len(pay_at)] = p
    return heads_ok


def _layout(
    payloads: list[bytes | memoryview | np.ndarray], write: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """The payloads one after the other, where each starts (and the end), and the bytes the
    walk may write (:func:`_room`)."""
    count = len(payloads)
    lengths = np.array([len(p) for p in payloads], dtype=np.int64)
    starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    if not count:
        return np.zeros(0, np.uint8), starts, 16
    data = np.concatenate([np.frombuffer(p, dtype=np.uint8) for p in payloads])
    return data, starts, _room(data, starts[:-1], lengths, write)


def _room(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, write: bool) -> int:
    """The bytes the walk may write for the payloads ``data[starts[i]:starts[i]+lengths[i]]``:
    each tour's text at its widest (a coordinate moves at most 2 a step; sign included), or
    one byte a move.

    Raises
    ------
    ValueError
        If a payload is shorter than its head says.
    """
    if np.any(lengths < _HEAD_BYTES):
        raise ValueError("a stored tour is cut short")
    if not len(starts):
        return 16
    heads = data[(starts[:, None] + np.arange(_HEAD_BYTES)).ravel()].view("<i4").reshape(-1, 3)
    moves = heads[:, 2].view("<u4").astype(np.int64)
    if np.any((lengths - _HEAD_BYTES) * 8 < 3 * moves):
        raise ValueError("a stored tour is cut short")
    if not write:
        return int(moves.sum())
    reach = np.maximum(np.abs(heads[:, 0]), np.abs(heads[:, 1])).astype(np.int64) + 2 * moves
    width = np.floor(np.log10(np.maximum(reach, 1))).astype(np.int64) + 2
    return int(((moves + 1) * (4 + 2 * width) + 2).sum()) + 16


def _buffer(out: np.ndarray | None, need: int) -> np.ndarray:
    """``out`` if it holds ``need`` bytes, else a new buffer of the next power of two bytes."""
    if out is not None and len(out) >= need:
        return out
    # room to grow: a batch's pages grow with its boards, and every new buffer's pages are
    # faulted in (and zeroed by the kernel) on first write
    return np.empty(1 << (need - 1).bit_length(), dtype=np.uint8)


def _boards(
    rows: Sequence[int] | np.ndarray,
    cols: Sequence[int] | np.ndarray,
    start: Sequence[tuple[int, int]] | np.ndarray,
    closed: Sequence[bool] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each record's board, start square and closedness as the kernels take them: rows,
    cols, start row, start column (``int64``) and closed (``bool``)."""
    squares = np.asarray(start, dtype=np.int64).reshape(-1, 2)
    return (
        np.asarray(rows, dtype=np.int64),
        np.asarray(cols, dtype=np.int64),
        np.ascontiguousarray(squares[:, 0]),
        np.ascontiguousarray(squares[:, 1]),
        np.asarray(closed, dtype=np.bool_),
    )


def _stored_payloads(
    tours: list[bytes | memoryview], moves_code: int, check: Sequence[bool], write: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """A page's stored tours (MessagePack nil, or an extension of type ``moves_code``) one
    after the other, where each one's payload begins (-1: none), which are to be checked, and
    the bytes the walk may write (:func:`_room`); None if a tour is stored otherwise or cut
    short, or one to be checked has none."""
    count = len(tours)
    raw_at = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, tours), dtype=np.int64, count=count), out=raw_at[1:])
    raw = np.frombuffer(b"".join(tours), dtype=np.uint8)
    pay_at, pay_size = _ext_payloads(raw, raw_at, moves_code)
    moved = pay_at >= 0
    wanted = np.asarray(check, dtype=np.bool_)
    if np.any(pay_at == -2) or np.any(wanted & ~moved):
        return None
    try:
        room = _room(raw, pay_at[moved], pay_size[moved], write)
    except ValueError:
        return None
    return raw, pay_at, wanted, room


def render_lines(
    text: bytes,
    keys: Sequence[bytes],
    tour_field: int,
    tours: list[bytes | memoryview],
    moves_code: int,
    rows: Sequence[int],
    cols: Sequence[int],
    start: Sequence[tuple[int, int]] | np.ndarray,
    closed: Sequence[bool],
    check: Sequence[bool],
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The JSON Lines text of a page of records, their tours written from their stored moves
    and the checked ones checked (the walk of :func:`render_moves`), in one pass.

    Parameters
    ----------
    text : bytes
        The page's records as one JSON list of arrays, one per record, of its fields in order
        with the tour ``null`` (msgspec's JSON of array-like records).
    keys : sequence of bytes
        What goes before each field in a line: ``{"name":`` for the first, then ``,"name":``.
    tour_field : int
        The tour's position among the fields.
    tours : n bytes-like
        Each record's tour as stored: MessagePack nil (no tour), or an extension of type
        ``moves_code`` holding a :func:`knights_tour.tours.stored.encode_moves` payload.
    rows, cols, start, closed, check, out
        As for :func:`render_moves`.

    Returns
    -------
    (out, ends) or None
        The lines are ``out[:ends[-1]]``, record i's ending at ``ends[i]`` (newline
        included); None if a tour is stored otherwise, a checked record has no tour or its
        tour fails the walk's check, or ``text`` is not of the form above: such a page is
        for the plain way, which says why.
    """
    count = len(tours)
    found = _stored_payloads(tours, moves_code, check, True)
    if found is None:
        return None
    raw, pay_at, wanted, room = found
    key_at = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum([len(k) for k in keys], out=key_at[1:])
    out = _buffer(out, room + len(text) + count * (int(key_at[-1]) + 2))
    ends = np.zeros(count, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    written = _render_lines(
        np.frombuffer(text, dtype=np.uint8),
        np.frombuffer(b"".join(keys), dtype=np.uint8),
        key_at,
        tour_field,
        raw,
        pay_at,
        *_boards(rows, cols, start, closed),
        wanted,
        out,
        ends,
        ok,
        (_TEXTS, _LENGTHS, _DR, _DC),
    )
    if written < 0 or np.any(wanted & ~ok):
        return None
    return out, ends


def read_moves(
    tours: list[bytes | memoryview],
    moves_code: int,
    rows: Sequence[int],
    cols: Sequence[int],
    start: Sequence[tuple[int, int]] | np.ndarray,
    closed: Sequence[bool],
    check: Sequence[bool],
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The moves of a page of stored tours, read straight from their stored form, and the
    checked ones checked as :func:`render_moves` checks them, in one compiled pass.

    Parameters
    ----------
    tours : n bytes-like
        Each record's tour as stored: MessagePack nil (no tour), or an extension of type
        ``moves_code`` holding a :func:`knights_tour.tours.stored.encode_moves` payload.
    rows, cols, start, closed, check, out
        As for :func:`render_moves`.

    Returns
    -------
    (out, offsets, present) or None
        Record i's moves, a byte each (an index into
        :data:`knights_tour.tours.stored.KNIGHT_MOVES`), are ``out[offsets[i]:offsets[i+1]]``
        (``offsets``: int64, n + 1 entries); ``present[i]``: record i has a tour. None if a
        tour is stored otherwise or cut short, does not begin on its record's start square,
        or a checked record has no tour or a tour that fails the check: such a page is for
        the plain way, which says why.
    """
    count = len(tours)
    found = _stored_payloads(tours, moves_code, check, False)
    if found is None:
        return None
    raw, pay_at, wanted, need = found
    out = _buffer(out, need)
    offsets = np.zeros(count + 1, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    heads_ok = _read_moves(
        raw, pay_at, *_boards(rows, cols, start, closed), wanted, out, offsets, ok, _DR, _DC
    )
    if not heads_ok or np.any(wanted & ~ok):
        return None
    return out, offsets, pay_at >= 0


def render_moves(
    payloads: list[bytes | memoryview | np.ndarray],
    rows: Sequence[int] | np.ndarray,
    cols: Sequence[int] | np.ndarray,
    start: Sequence[tuple[int, int]] | np.ndarray,
    closed: Sequence[bool] | np.ndarray,
    check: Sequence[bool] | np.ndarray,
    out: np.ndarray | None = None,
    write: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The JSON text of each stored tour, and whether each checked one is a knight's tour.

    Parameters
    ----------
    payloads : list of bytes-like
        :func:`knights_tour.tours.stored.encode_moves` payloads, one per tour.
    rows, cols : n ints
        Each record's board.
    start : n pairs of ints
        Each record's start square ``(row, col)``.
    closed, check : n bools
        Whether a closed tour was asked for; whether to check the tour.
    out : uint8 array, optional
        Where to write the text, if it is large enough (a buffer already written to is
        mapped: writing into it again costs no page faults); else a new one, of the next power
        of two bytes, so that later, larger pages fit in it too.
    write : bool
        False: each tour's moves (a byte each, an index into
        :data:`knights_tour.tours.stored.KNIGHT_MOVES`) instead of its text.

    Returns
    -------
    out, at, end, ok
        ``bytes(out[at[i]:end[i]])`` is tour i's JSON text, as
        :func:`knights_tour.tours.record.tour_json` writes it (``out``: the buffer given, or a new
        one); ``ok[i]``: tour i was checked and is a knight's tour of its board from its start
        square (closed if asked).

    Raises
    ------
    ValueError
        If a payload is shorter than its head says.
    """
    count = len(payloads)
    data, starts, need = _layout(payloads, write)
    out_at = np.zeros(count, dtype=np.int64)
    out = _buffer(out, need)
    out_end = np.zeros(count, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    _render(
        write,
        data,
        starts,
        *_boards(rows, cols, start, closed),
        np.asarray(check, dtype=np.bool_),
        out,
        out_at,
        out_end,
        ok,
        _TEXTS,
        _LENGTHS,
        _DR,
        _DC,
    )
    return out, out_at, out_end, ok


__all__ = ["render_moves", "render_lines", "read_moves"]
