"""The stored form of a :class:`~knights_tour.tours.record.Record`: what a worker writes to Redis
and the collector reads back, in bulk and without a Python loop per square.

A stored record is :data:`STORED_PREFIX` followed by the record as a MessagePack array (the
fields of :class:`~knights_tour.tours.record.Record` in order, :mod:`msgspec` in C), with the
tour as a MessagePack extension: its start square and its moves, three bits each (an index into
:data:`KNIGHT_MOVES`). A 40x40 tour takes 600 bytes of moves instead of 12 KB of JSON. A tour
that is not a chain of knight moves (only a failed claim can be one) is kept as its squares.

Records stored by earlier versions (the ``z1:`` zlib form and plain JSON objects) still decode.

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import numpy as np

from knights_tour.tours.record import Record, Status, Tour, as_tour

__all__ = [
    "KNIGHT_MOVES",
    "STORED_PREFIX",
    "encode_moves",
    "move_codes",
    "page_moves",
    "decode_moves",
    "encode_stored",
    "decode_stored",
    "decode_many",
    "decode_light",
    "decode_raw_tours",
    "from_legacy",
    "encode_record",
]

KNIGHT_MOVES = ((-2, 1), (-1, 2), (1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1))
"""The eight knight moves ``(d_row, d_col)``, clockwise from "two up, one right"; a move of a
tour is stored as its index in this tuple."""

STORED_PREFIX = b"k2"
"""Marks a record in the stored form of this module (version 2)."""

_MOVES = np.asarray(KNIGHT_MOVES, dtype=np.int32)
_CODE_OF = np.full(25, 255, dtype=np.uint8)
for _i, (_dr, _dc) in enumerate(KNIGHT_MOVES):
    _CODE_OF[(_dr + 2) * 5 + (_dc + 2)] = _i
_EXT_MOVES, _EXT_SQUARES = 1, 2
_HEAD = np.dtype([("row", "<i4"), ("col", "<i4"), ("moves", "<u4")])
_START_CODE = len(KNIGHT_MOVES)
_STEP_PAIRS = np.vstack([_MOVES, np.zeros((1, 2), dtype=np.int32)]).view(np.int64).ravel()
"""Each move code's ``(d_row, d_col)`` (and ``(0, 0)`` for :data:`_START_CODE`) as one int64."""


def move_codes(tour: Tour) -> np.ndarray | None:
    """The moves of a tour: ``uint8`` array of N-1 indices into :data:`KNIGHT_MOVES`, or None
    if ``tour`` (integer array of shape ``(N, 2)``, N >= 1) is not a chain of knight moves."""
    steps = np.diff(tour, axis=0)
    if steps.size and int(np.abs(steps).max()) > 2:
        return None
    codes = _CODE_OF[(steps[:, 0] + 2) * 5 + (steps[:, 1] + 2)]
    if codes.size and int(codes.max()) == 255:
        return None
    return codes


def encode_moves(tour: Tour) -> bytes | None:
    """A tour as its start square and its moves: a 12-byte head (start row, start col, number
    of moves; little-endian) and three bits per move (MSB first), or None if ``tour`` is not a
    chain of knight moves.

    Parameters
    ----------
    tour : Tour
        Integer array of shape ``(N, 2)``, N >= 1.
    """
    codes = move_codes(tour)
    if codes is None:
        return None
    head = np.array([(tour[0, 0], tour[0, 1], len(codes))], dtype=_HEAD).tobytes()
    bits = np.unpackbits(codes[:, None], axis=1)[:, 5:]
    return head + np.packbits(bits).tobytes()


def decode_moves(data: bytes) -> Tour:
    """The tour of :func:`encode_moves`' bytes (a cumulative sum of the moves).

    Raises
    ------
    ValueError
        If ``data`` is shorter than its head says.
    """
    head = np.frombuffer(data[: _HEAD.itemsize], dtype=_HEAD)[0]
    n = int(head["moves"])
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8, offset=_HEAD.itemsize))
    if bits.size < 3 * n:
        raise ValueError(f"stored tour is cut short: {n} moves announced")
    codes = bits[: 3 * n].reshape(n, 3) @ np.array([4, 2, 1], dtype=np.uint8)
    tour = np.empty((n + 1, 2), dtype=np.int32)
    tour[0] = (head["row"], head["col"])
    np.cumsum(_MOVES[codes], axis=0, out=tour[1:])
    tour[1:] += tour[0]
    return tour


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        tour = as_tour(obj)
        if tour is not None and tour.ndim == 2 and tour.shape[1] == 2 and len(tour):
            moves = encode_moves(tour)
            if moves is not None:
                return msgspec.msgpack.Ext(_EXT_MOVES, moves)
            return msgspec.msgpack.Ext(_EXT_SQUARES, np.ascontiguousarray(tour, "<i4").tobytes())
        return obj.tolist()
    if isinstance(obj, np.integer):
        return int(obj)
    raise NotImplementedError(f"cannot store {type(obj).__name__}")


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == _EXT_MOVES:  # decoded with the rest of its page (_decode_pending)
        return np.array(data)  # a copy (``data`` is the stored value's memory), uint8
    if code == _EXT_SQUARES:
        return np.frombuffer(data, dtype="<i4").reshape(-1, 2).astype(np.int32)
    raise ValueError(f"unknown stored extension {code}")


def _dec_hook(kind: type, obj: Any) -> Any:
    if kind is Tour:
        return obj if isinstance(obj, np.ndarray) else as_tour(obj)
    raise NotImplementedError(f"cannot decode {kind}")


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_ARRAY_RECORD = msgspec.defstruct("ArrayRecord", [], bases=(Record,), array_like=True, kw_only=True)


def encode_stored(record: Record) -> bytes:
    """The stored form of ``record`` (see the module docstring), as bytes."""
    return STORED_PREFIX + _ENCODER.encode(_as_array_record(record))


def _as_array_record(record: Record) -> Any:
    return _ARRAY_RECORD(**{f: getattr(record, f) for f in Record.__struct_fields__})


_ARRAY_DECODER = msgspec.msgpack.Decoder(_ARRAY_RECORD, ext_hook=_ext_hook, dec_hook=_dec_hook)


def _as_stored(self: Any) -> None:
    """A record decoded with its tour as stored is kept as stored (no ``__post_init__``)."""


_RAW_TOUR_RECORD = msgspec.defstruct(
    "RawTourRecord",
    [("tour", msgspec.Raw, msgspec.Raw(b"\xc0"))],
    bases=(Record,),
    array_like=True,
    kw_only=True,
    namespace={"__post_init__": _as_stored},
)
_RAW_TOUR_DECODER = msgspec.msgpack.Decoder(_RAW_TOUR_RECORD)


def decode_raw_tours(values: Iterable[bytes | str | None]) -> list[Any] | None:
    """The records of stored values that are not None, each with its tour as its stored
    MessagePack bytes (a :class:`msgspec.Raw`: nil, or the extension holding its moves or
    squares), decoded without a Python call per record; None if a value is not in this
    module's form (a form earlier versions stored: :func:`decode_light` reads it). The other
    fields are as :func:`decode_light` gives them, except that ``start_square`` is as stored
    (None stays None). For writers that render the tours from their stored moves
    (:func:`knights_tour.tours.pages.jsonl_page`).

    Raises
    ------
    ValueError
        If a value of this module's form does not decode as a record.
    """
    out: list[Any] = []
    for stored in values:
        if stored is None:
            continue
        if not isinstance(stored, bytes) or stored[:2] != STORED_PREFIX:
            return None
        out.append(_RAW_TOUR_DECODER.decode(memoryview(stored)[2:]))
    return out


def _pending(record: Any) -> bool:
    tour = record.tour
    return tour is not None and tour.ndim == 1 and tour.dtype == np.uint8


def page_moves(payloads: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The moves of several :func:`encode_moves` payloads at once (one unpackbits, the padding
    bits dropped): ``(starts, counts, codes)``, the start squares (int32, shape (n, 2)), the
    number of moves of each and all their moves one after the other (uint8 indices into
    :data:`KNIGHT_MOVES`).

    Raises
    ------
    ValueError
        If a payload is shorter than its head says.
    """
    heads = np.frombuffer(b"".join(p[: _HEAD.itemsize].tobytes() for p in payloads), dtype=_HEAD)
    n = heads["moves"].astype(np.int64)
    bodies = [p[_HEAD.itemsize :] for p in payloads]
    body_len = np.array([len(b) for b in bodies], dtype=np.int64)
    if np.any(body_len * 8 < 3 * n):
        raise ValueError("a stored tour is cut short")
    bits = np.unpackbits(np.concatenate(bodies)) if bodies else np.zeros(0, np.uint8)
    pad = body_len * 8 - 3 * n  # fewer than 8 bits at the end of each body
    if pad.any():
        first = np.repeat(np.cumsum(body_len * 8) - pad, pad)
        offset = np.arange(int(pad.sum()), dtype=np.int64) - np.repeat(np.cumsum(pad) - pad, pad)
        keep = np.ones(len(bits), dtype=bool)
        keep[first + offset] = False
        bits = bits[keep]
    codes = (bits[0::3] << 2) | (bits[1::3] << 1) | bits[2::3]
    starts = np.stack([heads["row"], heads["col"]], axis=1).astype(np.int32)
    return starts, n, codes


def _decode_pending(payloads: list[np.ndarray]) -> list[Tour]:
    """The tours of several :func:`encode_moves` payloads at once (:func:`page_moves`): one
    lookup of every square's step (a start square's step is filled in after) and one
    cumulative sum over them all, then a view per tour.

    Raises
    ------
    ValueError
        If a payload is shorter than its head says.
    """
    begin, n, moves = page_moves(payloads)
    squares = n + 1
    row0 = np.zeros(len(payloads), dtype=np.int64)
    np.cumsum(squares[:-1], out=row0[1:])
    codes = np.full(int(squares.sum()), _START_CODE, dtype=np.uint8)
    is_move = np.ones(len(codes), dtype=bool)
    is_move[row0] = False
    codes[is_move] = moves
    # every square's (d_row, d_col) as one int64 of two int32s: one 1-D lookup
    steps = np.take(_STEP_PAIRS, codes).view(np.int32).reshape(-1, 2)
    steps[row0] = begin
    # the running sum reaches the sum of the pages' end squares: int32 while that fits
    bound = int(np.abs(begin).sum() + 2 * n.sum())
    kind = np.dtype(np.int32 if bound < 2**31 else np.int64)
    total: np.ndarray = np.cumsum(steps, axis=0, dtype=kind)
    before = np.zeros((len(payloads), 2), dtype=kind)
    before[1:] = total[row0[1:] - 1]
    np.subtract(total, np.repeat(before, squares, axis=0), out=total)
    return np.split(total.astype(np.int32, copy=False), row0[1:])


def decode_stored(stored: bytes | str) -> Record:
    """The record of a stored value: this module's form, or a form earlier versions stored
    (the ``z1:`` zlib form, a plain JSON object).

    Raises
    ------
    ValueError
        If ``stored`` is none of these (``msgspec.DecodeError`` is a ValueError).
    """
    return decode_many([stored])[0]


def decode_light(values: Iterable[bytes | str | None]) -> list[Any]:
    """The records of stored values that are not None, as stored: a record of this module's
    form is a :class:`Record` subclass laid out as an array, its tour still the moves' payload
    (``uint8``) where it was stored as moves; a form earlier versions stored is a plain
    :class:`Record`. For readers that write the records out without making the squares
    (:mod:`knights_tour.tours.pages`).

    Raises
    ------
    ValueError
        As :func:`decode_stored`.
    """
    out: list[Any] = []
    for stored in values:
        if stored is None:
            continue
        if (
            isinstance(stored, (bytes, bytearray, memoryview))
            and bytes(stored[:2]) == STORED_PREFIX
        ):
            out.append(_ARRAY_DECODER.decode(memoryview(stored)[2:]))
        else:
            text = (
                stored.decode("utf-8")
                if isinstance(stored, (bytes, bytearray, memoryview))
                else stored
            )
            out.append(from_legacy(_legacy_dict(text)))
    return out


def decode_many(values: Iterable[bytes | str | None]) -> list[Record]:
    """:func:`decode_stored` of each value that is not None (a key deleted meanwhile), the
    tours of them all decoded together (:func:`_decode_pending`).

    Raises
    ------
    ValueError
        As :func:`decode_stored`.
    """
    out = [
        rec if type(rec) is Record else Record(**{f: getattr(rec, f) for f in _FIELDS})
        for rec in decode_light(values)
    ]
    pending = [r for r in out if _pending(r)]
    if pending:
        for rec, tour in zip(
            pending, _decode_pending([r.tour for r in pending if r.tour is not None])
        ):
            rec.tour = tour
    return out


def encode_record(record: Record | Mapping[str, Any]) -> bytes:
    """:func:`encode_stored` of a record, or of a record's JSON dict (:meth:`Record.to_dict`)."""
    return encode_stored(record if isinstance(record, Record) else from_legacy(record))


_FIELDS = Record.__struct_fields__


# -- what earlier versions stored ---------------------------------------------------------------

_LEGACY_PREFIX = "z1:"


def _legacy_dict(text: str) -> dict[str, Any]:
    if not text.startswith(_LEGACY_PREFIX):
        return json.loads(text)
    try:
        raw = zlib.decompress(base64.b64decode(text[len(_LEGACY_PREFIX) :], validate=True))
    except zlib.error as exc:
        raise ValueError(f"corrupt stored record: {exc}") from None
    data = json.loads(raw)
    moves = data.get("tour")
    if isinstance(moves, str):  # "r,c:" then one digit per move
        head, _, digits = moves.partition(":")
        row, _, col = head.partition(",")
        codes = np.frombuffer(digits.encode("ascii"), dtype=np.uint8) - ord("0")
        if codes.size and int(codes.max()) > 7:  # uint8: a char below "0" wraps above 7 too
            raise ValueError(f"corrupt stored record: not a move sequence: {digits[:20]!r}")
        tour = np.empty((codes.size + 1, 2), dtype=np.int32)
        tour[0] = (int(row), int(col))
        np.cumsum(_MOVES[codes], axis=0, out=tour[1:])
        tour[1:] += tour[0]
        data["tour"] = tour.tolist()
    return data


def from_legacy(data: Mapping[str, Any]) -> Record:
    """The record of a JSON dict in the shape earlier versions wrote: the CP-SAT solver's own
    status name, stored then as ``cpsat_status``, becomes ``cpsat_model_status``; the engine's
    run count, written then as ``attempts`` in a record no worker ran, becomes ``restarts``.

    Raises
    ------
    ValueError
        If ``data`` lacks ``rows``, ``cols``, ``start`` or ``solver``, or a field has the wrong
        type.
    """
    data = dict(data)
    if "restarts" not in data and data.get("worker") is None and data.get("attempts"):
        data["restarts"] = data.pop("attempts")  # the engine's count, in a single-job record
    status = data.get("cpsat_status")
    if status is not None and status not in {s.value for s in Status}:
        data["cpsat_model_status"] = data.pop("cpsat_status")
    return Record.from_dict(data)
