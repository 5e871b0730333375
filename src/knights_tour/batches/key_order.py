"""A batch's job keys put in record order in bulk, with numpy: the keys are parsed as one
array of bytes instead of one regular expression match and one tuple per key.

A job key has the form of :attr:`~knights_tour.batches.jobs.Job.key`,
``{rows}x{cols}:{row},{col}:{solver}:{open|closed}``, and its record sorts by
``(rows, cols, row, col, solver, closed)``, the numbers compared as numbers
(:func:`~knights_tour.batches.jobs.order_key`). :func:`sorted_job_keys` gives that order for
the keys it can read in bulk and leaves the rest (a key of another form, digits that are
not ASCII, two keys that differ only in leading zeros) to the caller,
:mod:`knights_tour.batches.records`, which sorts them one key at a time.
"""

from __future__ import annotations

import numpy as np

_MAX_DIGITS = 18
"""Longest number read: any 18 digits fit an int64."""

_MAX_SOLVER = 64
"""Longest solver name read (bytes): the names are padded to the longest in one array."""

_MAX_BYTES = 2**31 - 1
"""Longest text of keys read (positions held as int32 while parsing)."""


def sorted_job_keys(names: list[str]) -> list[str] | None:
    """``names`` sorted as their records sort, or None when one of them is not a job key of
    plain ASCII digits and solver (no newline, no NUL; numbers of at most 18 digits, a solver
    of at most 64 bytes) or two of them tie on ``(rows, cols, row, col, solver, closed)``
    (leading zeros): sort those one at a time.

    Parameters
    ----------
    names : list of str
        Distinct keys (a Redis hash's fields), of the form of
        :attr:`~knights_tour.batches.jobs.Job.key` for an answer.

    Returns
    -------
    list of str or None
        The same keys in record order: by rows, cols, start row, start column (as numbers),
        solver (as text), open before closed.
    """
    n = len(names)
    if n == 0:
        return []
    text = "\n".join(names)
    if (
        len(text) > _MAX_BYTES
        or not text.isascii()
        or "\0" in text
        or text.count("\n") != n - 1  # a newline in a key
    ):
        return None
    buf = np.frombuffer(text.encode("ascii"), np.uint8)
    newlines = np.flatnonzero(buf == ord("\n")).astype(np.int32)
    start = np.concatenate(([0], newlines + 1)).astype(np.int32)
    end = np.append(newlines, len(buf)).astype(np.int32)
    colons = np.flatnonzero(buf == ord(":")).astype(np.int32)
    if len(colons) != 3 * n:
        return None
    # The k-th three colons are the k-th key's: each key holds the three given to it (start <
    # x < c0 and c2 < end, checked below), and with 3n in all, no more.
    c0, c1, c2 = colons.reshape(n, 3).T
    x = _first_at(buf, ord("x"), start)
    comma = _first_at(buf, ord(","), c0)
    closed = _spells(buf, c2 + 1, end, b"closed")
    well_formed = (
        (start < x)
        & (x < c0 - 1)
        & (c0 + 1 < comma)
        & (comma < c1 - 1)
        & (c1 + 1 < c2)
        & (closed | _spells(buf, c2 + 1, end, b"open"))
    )
    if not well_formed.all():
        return None
    numbers = []
    for lo, hi in ((start, x), (x + 1, c0), (c0 + 1, comma), (comma + 1, c1)):
        column = _number(buf, lo, hi)
        if column is None:
            return None
        numbers.append(column)
    if (c2 - c1 - 1).max() > _MAX_SOLVER:
        return None
    order = _order([*numbers, *_words(buf, c1 + 1, c2), closed.astype(np.int64)], n)
    if order is None:
        return None
    keyed = np.empty(n, object)
    keyed[:] = names
    return keyed[order].tolist()


def _at(buf: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The bytes of ``buf`` at ``positions``, a position past its end read as its last byte
    (a key shorter than the one looked at fails another check)."""
    return buf[np.minimum(positions, len(buf) - 1)]


def _first_at(buf: np.ndarray, byte: int, after: np.ndarray) -> np.ndarray:
    """Position of the first ``byte`` at or after each of ``after`` (``len(buf)``: none)."""
    found = np.append(np.flatnonzero(buf == byte), len(buf))
    return found[np.searchsorted(found, after)]


def _spells(buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, word: bytes) -> np.ndarray:
    """Whether each ``buf[lo:hi]`` is ``word``."""
    same = hi - lo == len(word)
    for k, byte in enumerate(word):
        same &= _at(buf, lo + k) == byte
    return same


def _number(buf: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """The numbers written in ``buf[lo:hi]`` (each at least one byte long), or None if one
    holds a byte that is not an ASCII digit or has more than :data:`_MAX_DIGITS` digits."""
    width = hi - lo
    if width.max() > _MAX_DIGITS:
        return None
    value = np.zeros(len(lo), np.int64)
    for k in range(int(width.max())):
        digit = _at(buf, lo + k) - np.uint8(ord("0"))
        inside = k < width
        if (digit[inside] > 9).any():
            return None
        value = np.where(inside, value * 10 + digit, value)
    return value


def _words(buf: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """``buf[lo:hi]`` padded with NULs to a common length, as columns of big-endian 8-byte
    words: rows that compare, column by column, as the texts do (none holds a NUL)."""
    width = hi - lo
    longest = int(width.max())
    padded = np.zeros((len(lo), -(-longest // 8) * 8), np.uint8)
    for k in range(longest):
        padded[:, k] = np.where(k < width, _at(buf, lo + k), 0)
    return list(padded.view(">u8").T)


def _order(columns: list[np.ndarray], n: int) -> np.ndarray | None:
    """The indices that sort ``n`` rows by ``columns`` (integers, the first the most
    significant), or None when two rows are equal in every column."""
    columns = [c for c in columns if c.min() != c.max()]
    if not columns:
        return np.zeros(1, np.intp) if n == 1 else None
    key, span = np.zeros(n, np.int64), 1
    for column in columns:  # one int64 of mixed radix, where the columns' ranges allow it
        lo, size = int(column.min()), int(column.max()) - int(column.min()) + 1
        span *= size
        if span >= 2**63:
            order = np.lexsort(columns[::-1])
            break
        key = key * size + (column - lo).astype(np.int64)
    else:
        order = np.argsort(key)
        columns = [key]
    tied = np.ones(n - 1, bool)
    for column in columns:
        ranked = column[order]
        tied &= ranked[1:] == ranked[:-1]
    return None if tied.any() else order


__all__ = ["sorted_job_keys"]
