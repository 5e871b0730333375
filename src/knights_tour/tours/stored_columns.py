"""The fields of a page of stored records read out as columns, in compiled code, for the Parquet
file of a batch: each record's MessagePack array (:mod:`knights_tour.tours.stored`) is parsed
once, its numbers, flags and the places of its strings written to arrays, one row per field,
without a Python object per value.

The values must have been decoded already (:func:`knights_tour.tours.stored.decode_raw_tours`):
that decode checks every value's type, and this pass only reads where each value is. Anything
it does not expect (another number of fields, a type it does not read) makes it give up on the
page, which is then made from the decoded records.

Compiled with numba (:func:`knights_tour._numba.njit`, cached on disk); loaded only by the
commands that write records. Pure: no Celery, no Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from knights_tour._numba import njit
from knights_tour.tours.record import Checks, Record

INT, FLOAT, BOOL, STR, START, CHECKS, TOUR = range(7)
"""How each field of a :class:`~knights_tour.tours.record.Record` is read (:data:`KINDS`)."""

_CHECKS = Checks.__struct_fields__
_KIND_OF = {
    "rows": INT,
    "cols": INT,
    "start": START,
    "closed": BOOL,
    "checks": CHECKS,
    "tour": TOUR,
    "nodes": INT,
    "restarts": INT,
    "cpsat_nodes": INT,
    "attempts": INT,
    "cpsat_tour_accepted": BOOL,
    "mismatch": BOOL,
    "elapsed_s": FLOAT,
    "cpsat_elapsed_s": FLOAT,
    "job_elapsed_s": FLOAT,
    "finished_at": FLOAT,
}
KINDS = np.array([_KIND_OF.get(name, STR) for name in Record.__struct_fields__], dtype=np.int64)
"""Each field's kind, in the record's order; a field not named above is a string (an
enumeration is stored as its value)."""

_VERIFIER = np.frombuffer(_CHECKS[0].encode(), dtype=np.uint8)
_CPSAT = np.frombuffer(_CHECKS[1].encode(), dtype=np.uint8)


class Columns(NamedTuple):
    """A page's fields as columns (:func:`record_columns`), one row per field of
    :class:`~knights_tour.tours.record.Record`, one column per record."""

    first: np.ndarray
    """``int64``: an integer's value, a flag as 0 or 1, a string's position in :attr:`text`,
    the start square's row, the ``verifier`` check."""
    second: np.ndarray
    """``int64``: a string's length in bytes, the start square's column, the ``cpsat`` check."""
    number: np.ndarray
    """``float64``: a float's value."""
    valid: np.ndarray
    """``bool``: the value is not None (for ``checks``, ``verifier`` is not None)."""
    valid_second: np.ndarray
    """``bool``: for ``checks``, ``cpsat`` is not None."""
    text: np.ndarray
    """``uint8``: the page's stored values, one after the other, where the strings are."""


@njit(cache=True, inline="always")
def _big_endian(raw, b, n):
    """The unsigned integer of the ``n`` bytes at ``raw[b:]``, most significant first."""
    v = np.uint64(0)
    for j in range(n):
        v = (v << np.uint64(8)) | np.uint64(raw[b + j])
    return v


@njit(cache=True)
def _value(raw, b):
    """The MessagePack value at ``raw[b:]``: ``(kind, whole, real, start, size, after)`` where
    kind is 0 nil, 1 integer (``whole``), 2 float (``real``), 3 bool (``whole``), 4 string
    (``start``, ``size``), 5 array and 6 map (``whole`` elements, the first at ``after``), 7 an
    extension (skipped), -1 anything else (an unsigned integer past the int64 range too);
    ``after`` is where the next value begins."""
    t = raw[b]
    if t <= 0x7F:
        return 1, np.int64(t), 0.0, 0, 0, b + 1
    if t >= 0xE0:
        return 1, np.int64(t) - 256, 0.0, 0, 0, b + 1
    if 0xA0 <= t <= 0xBF:
        return 4, 0, 0.0, b + 1, np.int64(t - 0xA0), b + 1 + (t - 0xA0)
    if 0x90 <= t <= 0x9F:
        return 5, np.int64(t - 0x90), 0.0, 0, 0, b + 1
    if 0x80 <= t <= 0x8F:
        return 6, np.int64(t - 0x80), 0.0, 0, 0, b + 1
    if t == 0xC0:
        return 0, 0, 0.0, 0, 0, b + 1
    if t == 0xC2 or t == 0xC3:
        return 3, np.int64(t - 0xC2), 0.0, 0, 0, b + 1
    if 0xCC <= t <= 0xCF:  # uint 8, 16, 32, 64
        n = 1 << (t - 0xCC)
        v = _big_endian(raw, b + 1, n)
        if v >= np.uint64(1 << 63):
            return -1, 0, 0.0, 0, 0, b
        return 1, np.int64(v), 0.0, 0, 0, b + 1 + n
    if 0xD0 <= t <= 0xD3:  # int 8, 16, 32, 64
        n = 1 << (t - 0xD0)
        v = _big_endian(raw, b + 1, n)
        if n < 8 and v >= np.uint64(1) << np.uint64(8 * n - 1):
            return 1, np.int64(v) - (np.int64(1) << (8 * n)), 0.0, 0, 0, b + 1 + n
        return 1, np.int64(v), 0.0, 0, 0, b + 1 + n  # int64's bits, two's complement
    if t == 0xCB:
        bits = np.zeros(1, dtype=np.uint64)
        bits[0] = _big_endian(raw, b + 1, 8)
        return 2, 0, bits.view(np.float64)[0], 0, 0, b + 9
    if t == 0xCA:
        bits32 = np.zeros(1, dtype=np.uint32)
        bits32[0] = np.uint32(_big_endian(raw, b + 1, 4))
        return 2, 0, np.float64(bits32.view(np.float32)[0]), 0, 0, b + 5
    if 0xD9 <= t <= 0xDB:  # str 8, 16, 32
        n = 1 << (t - 0xD9)
        size = np.int64(_big_endian(raw, b + 1, n))
        return 4, 0, 0.0, b + 1 + n, size, b + 1 + n + size
    if t == 0xDC or t == 0xDD:  # array 16, 32
        n = 2 if t == 0xDC else 4
        return 5, np.int64(_big_endian(raw, b + 1, n)), 0.0, 0, 0, b + 1 + n
    if t == 0xDE or t == 0xDF:  # map 16, 32
        n = 2 if t == 0xDE else 4
        return 6, np.int64(_big_endian(raw, b + 1, n)), 0.0, 0, 0, b + 1 + n
    if 0xD4 <= t <= 0xD8:  # fixext 1, 2, 4, 8, 16
        return 7, 0, 0.0, 0, 0, b + 2 + (1 << (t - 0xD4))
    if 0xC7 <= t <= 0xC9:  # ext 8, 16, 32
        n = 1 << (t - 0xC7)
        return 7, 0, 0.0, 0, 0, b + 2 + n + np.int64(_big_endian(raw, b + 1, n))
    return -1, 0, 0.0, 0, 0, b


@njit(cache=True, inline="always")
def _same(raw, start, size, word):
    """Whether ``raw[start:start+size]`` is ``word``."""
    if size != len(word):
        return False
    for j in range(size):
        if raw[start + j] != word[j]:
            return False
    return True


@njit(cache=True)
def _read_columns(raw, at, kinds, first, second, number, valid, valid_second, verifier, cpsat):
    """Parse each stored value ``raw[at[i]:at[i+1]]`` (its two-byte prefix, then a MessagePack
    array of ``len(kinds)`` fields) into column ``i`` of the output rows (see
    :class:`Columns`). Returns False if a record is not laid out as expected."""
    fields = len(kinds)
    for i in range(len(at) - 1):
        end = at[i + 1]
        kind, count, _, _, _, b = _value(raw, at[i] + 2)
        if kind != 5 or count != fields:
            return False
        for f in range(fields):
            if b >= end:
                return False
            kind, whole, real, start, size, after = _value(raw, b)
            want = kinds[f]
            if kind < 0:
                return False
            if kind == 0:
                b = after
                continue
            if want == INT and kind == 1:
                first[f, i] = whole
            elif want == FLOAT and (kind == 1 or kind == 2):
                number[f, i] = real if kind == 2 else np.float64(whole)
            elif want == BOOL and kind == 3:
                first[f, i] = whole
            elif want == STR and kind == 4:
                first[f, i] = start
                second[f, i] = size
            elif want == START and kind == 5 and whole == 2 and after + 1 < end:
                kind, row, _, _, _, after = _value(raw, after)
                if kind != 1 or after >= end:
                    return False
                kind, col, _, _, _, after = _value(raw, after)
                if kind != 1:
                    return False
                first[f, i] = row
                second[f, i] = col
            elif want == CHECKS and kind == 6:
                for _ in range(whole):
                    if after >= end:
                        return False
                    kind, _, _, start, size, after = _value(raw, after)
                    if kind != 4 or after >= end:
                        return False
                    kind, flag, _, _, _, after = _value(raw, after)
                    if kind != 0 and kind != 3:
                        return False
                    if _same(raw, start, size, verifier):
                        if kind == 3:
                            first[f, i] = flag
                            valid[f, i] = True
                    elif _same(raw, start, size, cpsat):
                        if kind == 3:
                            second[f, i] = flag
                            valid_second[f, i] = True
                b = after
                continue
            elif want == TOUR and kind == 7:
                pass
            else:
                return False
            valid[f, i] = True
            b = after
        if b != end:
            return False
    return True


def record_columns(values: Sequence[bytes]) -> Columns | None:
    """The fields of stored values of the form of :mod:`knights_tour.tours.stored` (each
    already decoded: see the module docstring) as :class:`Columns`, a column per value in
    order; None if one is not laid out as this reads it. No read leaves the values: a value
    that claims more bytes than it has is not laid out as this reads it."""
    count = len(values)
    sizes = np.fromiter(map(len, values), dtype=np.int64, count=count)
    at = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=at[1:])
    # room past the last value for the longest head a value is read by (nine bytes)
    text = np.frombuffer(b"".join([*values, bytes(16)]), dtype=np.uint8)
    fields = len(KINDS)
    first = np.zeros((fields, count), dtype=np.int64)
    second = np.zeros((fields, count), dtype=np.int64)
    number = np.zeros((fields, count), dtype=np.float64)
    valid = np.zeros((fields, count), dtype=np.bool_)
    valid_second = np.zeros((fields, count), dtype=np.bool_)
    if not _read_columns(
        text, at, KINDS, first, second, number, valid, valid_second, _VERIFIER, _CPSAT
    ):
        return None
    return Columns(first, second, number, valid, valid_second, text)


__all__ = [
    "INT",
    "FLOAT",
    "BOOL",
    "STR",
    "START",
    "CHECKS",
    "TOUR",
    "KINDS",
    "Columns",
    "record_columns",
]
