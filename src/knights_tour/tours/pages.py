"""Pages of stored records made into output without making their tours' squares: the JSON
Lines text (:func:`jsonl_page`) and the moves of each tour (:func:`moves_page`, for Parquet),
each ``found`` tour checked again on the way (:func:`reverified`).

A tour stored as moves (:mod:`knights_tour.tours.stored`) is walked once, in compiled code
(:mod:`knights_tour.tours.tour_text`), which writes its text (or reads its moves out) and
checks it; a tour the walk rejects, or one stored otherwise, is judged by
:func:`knights_tour.tours.verify.verify_tour`. A stored record is data to check again, never an
answer to pass on unchecked.

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import numpy as np

from knights_tour.tours.record import Record, Status, Tour, json_bytes, tour_json
from knights_tour.tours.stored import (
    _EXT_MOVES,
    _FIELDS,
    _HEAD,
    _pending,
    decode_light,
    decode_moves,
    decode_raw_tours,
    move_codes,
)
from knights_tour.tours.verify import verify_tour

if TYPE_CHECKING:
    from knights_tour.tours.stored_columns import Columns


def reverified(record: Record) -> Record:
    """``record``, or, if it is ``found`` but its tour is not a knight's tour of its board from
    its start square (:func:`knights_tour.tours.verify.verify_tour`), the ``error`` record that says
    so: a stored record is data to check again, never an answer to pass on unchecked.

    The error record keeps every field and the tour; its ``status`` is ``error``, ``proof``
    None, ``checks.verifier`` False and ``reason`` begins with :data:`REJECTED`.
    """
    if record.status != Status.FOUND:
        return record
    if record.tour is None:
        return _rejected(record, "a found record without a tour")
    verdict = verify_tour(
        (record.rows, record.cols), record.tour, start=record.start, closed=record.closed
    )
    return record if verdict.ok else _rejected(record, verdict.reason or "not a knight's tour")


REJECTED = "the stored tour failed verification: "
"""How the ``reason`` of a stored ``found`` record whose tour is not a tour begins."""


def _rejected(record: Record, why: str) -> Record:
    return msgspec.structs.replace(
        record,
        status=Status.ERROR,
        proof=None,
        reason=REJECTED + why,
        checks=msgspec.structs.replace(record.checks, verifier=False),
    )


_JSON = msgspec.json.Encoder()
_TOUR_NULL = b'"tour":null'


class JsonPage(NamedTuple):
    """A page of records as JSON Lines text (:func:`jsonl_page`)."""

    records: list[Record]
    """The page's records in order, as :func:`reverified` gives them; a tour that was stored
    as moves is left out (None): its text is in :attr:`chunks` only. A page written by the
    compiled pass gives them as decoded, every tour None."""
    chunks: list[bytes | memoryview]
    """The bytes of the lines, in order: ``b"".join(chunks)`` is the page's text."""
    sizes: list[int]
    """Each record's line length in bytes, newline included."""
    buffer: np.ndarray
    """Where the tours' text is (the memoryviews among :attr:`chunks` point into it): to be
    passed to the next :func:`jsonl_page` call once the chunks are written, so that the next
    page is rendered into memory already mapped."""


def jsonl_page(values: Sequence[bytes | str | None], buffer: np.ndarray | None = None) -> JsonPage:
    """The JSON Lines text of a page of stored values (None: skipped), each ``found`` tour
    checked again (:func:`reverified`), without making the tours' arrays. A page stored as
    this version stores it (every tour as moves or none) is written whole, in one chunk, by a
    compiled pass that writes each line and walks and checks each tour
    (:func:`knights_tour.tours.tour_text.render_lines`); any other page, or one with a tour
    that pass rejects, line by line, the tours' text written from their stored moves by the
    same compiled walk (:func:`knights_tour.tours.tour_text.render_moves`); a tour the walk
    rejects is judged by :func:`reverified`.

    The text is ``b"".join(json_bytes(r) + b"\\n" for r in map(reverified,
    decode_many(values)))``, byte for byte; it is made that way for the first
    :data:`PLAIN_SQUARES` squares of tours a process renders (a small batch never loads the
    walk).

    Parameters
    ----------
    values : sequence of bytes, str or None
        Stored values (:func:`~knights_tour.tours.stored.decode_stored` reads each).
    buffer : uint8 array, optional
        A :attr:`JsonPage.buffer` whose chunks are written: reused for this page's tours.

    Raises
    ------
    ValueError
        As :func:`~knights_tour.tours.stored.decode_stored`.
    """
    lines = _lines(values, buffer)
    if lines is not None:
        return lines
    out: list[Any] = decode_light(values)
    moved, (buf, at, end, ok) = _walk(out, buffer, write=True, few_plain=True)
    view = memoryview(buf.data)
    texts = {i: view[at[j] : end[j]] for j, i in enumerate(moved)}
    failed = {i for j, i in enumerate(moved) if out[i].status == Status.FOUND and not ok[j]}
    records: list[Record] = []
    chunks: list[bytes | memoryview] = []
    sizes: list[int] = []
    for i, rec in enumerate(out):
        if (
            i in failed
            or (i not in texts and (rec.status == Status.FOUND or _pending(rec)))
            or type(rec) is Record
        ):
            checked = reverified(_full_record(rec))
            line = json_bytes(checked) + b"\n"
            records.append(checked)
            chunks.append(line)
            sizes.append(len(line))
            continue
        fields = msgspec.structs.asdict(rec)
        text = texts.get(i)
        if text is not None:
            fields["tour"] = None
            head, tail = _JSON.encode(fields).split(_TOUR_NULL, 1)
            head += b'"tour":'
            tail += b"\n"
            chunks += (head, text, tail)
            sizes.append(len(head) + len(text) + len(tail))
            rec.tour = None
        else:
            if rec.tour is not None:
                fields["tour"] = msgspec.Raw(tour_json(rec.tour))
            line = _JSON.encode(fields) + b"\n"
            chunks.append(line)
            sizes.append(len(line))
        records.append(rec)
    return JsonPage(records, chunks, sizes, buf)


_LINE_KEYS = [(b"," if k else b"{") + _JSON.encode(name) + b":" for k, name in enumerate(_FIELDS)]
_TOUR_FIELD = _FIELDS.index("tour")


def _lines(values: Sequence[bytes | str | None], buffer: np.ndarray | None) -> JsonPage | None:
    """:func:`jsonl_page` of a page whose records are all in the stored form of this version
    with their tours as moves or none, in one compiled pass over the page
    (:func:`knights_tour.tours.tour_text.render_lines`): the page's records encoded once as
    JSON arrays, each made a line with its fields' names and its tour's text. None for a page
    :func:`jsonl_page` makes the plain way: another stored form, a ``start_square`` to fill
    in, a ``found`` record whose tour is missing, stored otherwise or not a tour, or a page
    rendered the plain way before the walk is loaded (:data:`PLAIN_SQUARES`)."""
    recs = decode_raw_tours(values)
    if not recs:
        return None
    tours = [rec.tour for rec in recs]
    rows = [rec.rows for rec in recs]
    cols = [rec.cols for rec in recs]
    if not _walk_loaded() and _plain_left[0] >= sum(
        r * c for r, c, tour in zip(rows, cols, tours) if len(tour) > 1
    ):
        return None
    if any(rec.start_square is None for rec in recs):
        return None
    for rec in recs:
        rec.tour = None
    from knights_tour.tours.tour_text import render_lines  # noqa: PLC0415 - numba, on first use

    done = render_lines(
        _JSON.encode(recs),
        _LINE_KEYS,
        _TOUR_FIELD,
        tours,
        _EXT_MOVES,
        rows,
        cols,
        [rec.start for rec in recs],
        [rec.closed for rec in recs],
        [rec.status == Status.FOUND for rec in recs],
        buffer,
    )
    if done is None:
        return None
    buf, ends = done
    sizes = np.diff(ends, prepend=0).tolist()
    return JsonPage(recs, [memoryview(buf.data)[: int(ends[-1])]], sizes, buf)


PLAIN_SQUARES = 100_000
"""Squares of tours a process renders the plain way (:func:`reverified`, then
:func:`~knights_tour.tours.record.json_bytes`) before it loads the compiled walk, which costs more
CPU to load (numba and its kernel from the on-disk cache) than the plain way takes for this
many: a small batch's records are written without it."""

_plain_left = [PLAIN_SQUARES]


def _walk(
    out: list[Any], buffer: np.ndarray | None, write: bool, few_plain: bool = False
) -> tuple[list[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The positions of ``out``'s records whose tour is a payload, and
    :func:`knights_tour.tours.tour_text.render_moves` of those tours (found ones checked).
    None walked (and the walk not loaded) if there are none, or, with ``few_plain``, while
    this process has rendered fewer than :data:`PLAIN_SQUARES` squares the plain way and the
    walk is not loaded yet: the caller renders them the plain way."""
    moved = [i for i, rec in enumerate(out) if _pending(rec)]
    recs = [out[i] for i in moved]
    squares = sum(rec.rows * rec.cols for rec in recs)
    if not moved or (few_plain and _plain_left[0] >= squares and not _walk_loaded()):
        _plain_left[0] -= squares
        none = np.zeros(0, dtype=np.int64)
        kept = np.empty(0, dtype=np.uint8) if buffer is None else buffer
        return [], (kept, none, none, np.zeros(0, dtype=np.bool_))
    from knights_tour.tours.tour_text import render_moves  # noqa: PLC0415 - numba, on first use

    return moved, render_moves(
        [rec.tour for rec in recs],
        [rec.rows for rec in recs],
        [rec.cols for rec in recs],
        [rec.start for rec in recs],
        [rec.closed for rec in recs],
        [rec.status == Status.FOUND for rec in recs],
        np.empty(0, dtype=np.uint8) if buffer is None else buffer,
        write=write,
    )


class MovesPage(NamedTuple):
    """A page of records with their tours as moves (:func:`moves_page`)."""

    records: list[Record]
    """The page's records in order, as :func:`reverified` gives them, each ``tour`` left
    out (None)."""
    moves: np.ndarray
    """The moves of the tours, one after the other, a byte each (``uint8``, an index into
    :data:`~knights_tour.tours.stored.KNIGHT_MOVES`): record i's are
    ``moves[offsets[i]:offsets[i + 1]]``, from its ``start``."""
    offsets: np.ndarray
    """``int64``, one more than the records (see :attr:`moves`)."""
    present: np.ndarray
    """``bool`` per record: its tour is in :attr:`moves` (False: no tour, or a tour that is not
    a chain of knight moves from ``start``)."""
    squares: dict[int, Tour]
    """The tours that are not a chain of knight moves from ``start``, by position in
    :attr:`records`."""
    buffer: np.ndarray | None = None
    """Where :attr:`moves` is (None: a page made the plain way): to be passed to the next
    :func:`moves_page` call once the page is written, as :attr:`JsonPage.buffer` is."""
    columns: Columns | None = None
    """The records' fields as columns, read from their stored form
    (:func:`knights_tour.tours.stored_columns.record_columns`), where the page was read in one
    pass; None otherwise (the fields are those of :attr:`records`)."""

    @classmethod
    def of(cls, records: list[Record], tours: list[np.ndarray | None]) -> MovesPage:
        """The page of ``records`` whose tours are ``tours`` (squares, or None)."""
        pieces: list[np.ndarray] = []
        present = np.zeros(len(records), dtype=bool)
        lengths = np.zeros(len(records), dtype=np.int64)
        squares: dict[int, Tour] = {}
        for i, (rec, tour) in enumerate(zip(records, tours, strict=True)):
            if tour is None:
                continue
            from_start = len(tour) and tuple(tour[0]) == tuple(rec.start)
            codes = move_codes(tour) if from_start else None
            if codes is None:
                squares[i] = tour
            else:
                pieces.append(codes)
                present[i] = True
                lengths[i] = len(codes)
        offsets = np.zeros(len(records) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        moves = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
        return cls(records, moves, offsets, present, squares)


def moves_page(values: Sequence[bytes | str | None], buffer: np.ndarray | None = None) -> MovesPage:
    """A page of stored values (None: skipped) as records and their tours' moves, each
    ``found`` tour checked again (:func:`reverified`), a tour stored as moves never made into
    squares. A page stored as this version stores it is read in one compiled pass over its
    tours that reads each one's moves out and checks it
    (:func:`knights_tour.tours.tour_text.read_moves`), its records as decoded with their tours
    None; any other page, or one with a tour that pass rejects, record by record, the moves
    read out by the walk of :func:`knights_tour.tours.tour_text.render_moves` and a tour it
    rejects judged by :func:`reverified`. ``buffer``: a :attr:`MovesPage.buffer` whose page is
    written, reused for this page's moves.

    Raises
    ------
    ValueError
        As :func:`~knights_tour.tours.stored.decode_stored`.
    """
    fast = _moves(values, buffer)
    if fast is not None:
        return fast
    out: list[Any] = decode_light(values)
    moved, (buf, at, end, ok) = _walk(out, buffer, write=False)
    walked = []
    for j, i in enumerate(moved):
        rec = out[i]
        head = rec.tour[: _HEAD.itemsize].view(_HEAD)[0]
        if (rec.status != Status.FOUND or ok[j]) and (head["row"], head["col"]) == rec.start:
            walked.append(j)
    if len(walked) < len(moved) or any(not _pending(r) and r.tour is not None for r in out):
        full = [reverified(_full_record(rec)) for rec in out]  # a rare page: the plain way
        tours = [rec.tour for rec in full]
        return MovesPage.of([msgspec.structs.replace(r, tour=None) for r in full], tours)
    records: list[Record] = []
    present = np.zeros(len(out), dtype=bool)
    present[moved] = True
    offsets = np.zeros(len(out) + 1, dtype=np.int64)
    lengths = np.zeros(len(out), dtype=np.int64)
    lengths[moved] = end - at
    np.cumsum(lengths, out=offsets[1:])
    for rec in out:
        if rec.status == Status.FOUND and not _pending(rec):  # found, without a tour
            rec = reverified(_full_record(rec))
        rec.tour = None
        records.append(rec)
    return MovesPage(records, buf[: offsets[-1]], offsets, present, {}, buf)


def _moves(values: Sequence[bytes | str | None], buffer: np.ndarray | None) -> MovesPage | None:
    """:func:`moves_page` of a page whose records are all in the stored form of this version
    with their tours as moves or none, in one compiled pass over the page's tours
    (:func:`knights_tour.tours.tour_text.read_moves`). None for a page :func:`moves_page`
    makes the plain way: another stored form, a ``start_square`` to fill in, a tour stored
    otherwise or not from its start square, a ``found`` record without a tour or with one
    that is not a tour. The page's fields are read out as columns too
    (:func:`knights_tour.tours.stored_columns.record_columns`), for its Arrow table."""
    recs = decode_raw_tours(values)
    if not recs or any(rec.start_square is None for rec in recs):
        return None
    from knights_tour.tours.stored_columns import record_columns  # noqa: PLC0415 - likewise
    from knights_tour.tours.tour_text import read_moves  # noqa: PLC0415 - numba, on first use

    done = read_moves(
        [rec.tour for rec in recs],
        _EXT_MOVES,
        [rec.rows for rec in recs],
        [rec.cols for rec in recs],
        [rec.start for rec in recs],
        [rec.closed for rec in recs],
        [rec.status == Status.FOUND for rec in recs],
        buffer,
    )
    if done is None:
        return None
    buf, offsets, present = done
    for rec in recs:
        rec.tour = None
    columns = record_columns([v for v in values if isinstance(v, bytes)])
    return MovesPage(recs, buf[: offsets[-1]], offsets, present, {}, buf, columns)


def _walk_loaded() -> bool:
    return "knights_tour.tours.tour_text" in sys.modules


def _full_record(rec: Any) -> Record:
    """A plain :class:`Record` of a page's decoded record, its tour made an array."""
    if type(rec) is Record:
        return rec
    full = Record(**{f: getattr(rec, f) for f in _FIELDS})
    if _pending(full) and full.tour is not None:
        full.tour = decode_moves(full.tour.tobytes())
    return full


__all__ = ["REJECTED", "reverified", "JsonPage", "jsonl_page", "MovesPage", "moves_page"]
