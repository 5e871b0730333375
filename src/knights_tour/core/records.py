"""The typed record: one :class:`Record` per job of a batch, as stored in Redis and written to
JSON Lines.

A record is the JSON dict of :meth:`knights_tour.result.TourResult.to_dict` plus what running
it as a job adds (:func:`knights_tour.core.jobs.run_job`, :func:`knights_tour.core.jobs.error_record`,
the worker's ``attempts``). On the wire and on disk it stays a plain JSON object;
:meth:`Record.from_dict` and :meth:`Record.to_dict` convert losslessly: the same keys, in the
same order, with the same values (a key that was absent stays absent, unknown keys are kept in
:attr:`Record.extra`). Values are not coerced: an ``error`` record of a job message that could
not be validated may carry whatever that message held.

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

DECIDED = ("found", "no_tour")
"""Statuses that answer the job's question (a tour, or a proof that there is none)."""


@dataclass(frozen=True)
class Record:
    """The outcome of one job, with a field per record key (see :mod:`knights_tour.result`)."""

    rows: int
    """Board height (number of ranks)."""
    cols: int
    """Board width (number of files)."""
    start: list[int]
    """Start square ``[row, col]``, zero-based, row 0 at the top."""
    start_square: str | None
    """Algebraic name of the start square (rank 1 at the bottom), e.g. ``"a8"``."""
    solver: str
    """Registered backend name that ran the job."""
    closed: bool
    """Whether a closed (re-entrant) tour was asked for."""
    status: str
    """``found`` | ``no_tour`` | ``unknown`` | ``error``."""
    proof: str | None = None
    """For ``no_tour``: ``parity`` | ``exhaustive`` | ``cpsat`` | ``theorem``; else None."""
    proof_detail: str | None = None
    """Words and source of the proof (e.g. the theorem cited), or None."""
    reason: str | None = None
    """For ``unknown``/``error``: why (``node_limit``, ``time_limit``, a message)."""
    tour: list[list[int]] | None = None
    """The tour as ``[[row, col], ...]`` of length rows*cols, or None."""
    checks: dict[str, bool | None] = field(default_factory=dict)
    """``{"verifier": bool | None, "cpsat": bool | None}``: the verifier's and the CP-SAT
    cross-check's verdicts (None: not run or not decidable)."""
    nodes: int = 0
    """Search nodes the solver expanded (0 when not applicable)."""
    elapsed_s: float = 0.0
    """Wall seconds the solver took."""
    batch_id: str | None = None
    """The batch the job ran in, or None."""
    cpsat_status: str | None = None
    """With ``verify="cpsat"``: the CP-SAT backend's status for the same job."""
    cpsat_proof: str | None = None
    """With ``verify="cpsat"``: the CP-SAT backend's proof, if it proved ``no_tour``."""
    cpsat_reason: str | None = None
    """With ``verify="cpsat"``: why CP-SAT did not decide, or None."""
    cpsat_elapsed_s: float | None = None
    """With ``verify="cpsat"``: wall seconds of the cross-check."""
    cpsat_nodes: int | None = None
    """With ``verify="cpsat"``: CP-SAT search branches."""
    cpsat_tour_accepted: bool | None = None
    """With ``verify="cpsat"``: whether the CP-SAT model accepts the solver's tour (None: no
    tour)."""
    mismatch: bool = False
    """True if the solver and the CP-SAT cross-check disagree (never hidden)."""
    cpsat_note: str | None = None
    """With ``verify="cpsat"``: why ``checks.cpsat`` is None or False, in words."""
    job_key: str | None = None
    """Stable key of the job in its batch, e.g. ``"8x8:0,0:warnsdorff:open"``."""
    verify: str | None = None
    """The cross-check asked for: None or ``"cpsat"``."""
    error_type: str | None = None
    """For ``error`` records: the exception class name (e.g. ``WorkerLost``)."""
    worker: str | None = None
    """Node name of the worker that ran the job (e.g. ``w1@host``)."""
    job_elapsed_s: float | None = None
    """Wall seconds for the whole job, cross-check included."""
    finished_at: float | None = None
    """Unix seconds when the job finished."""
    attempts: int | None = None
    """Starts of the job since its last record (worker deaths make it > 1)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this class does not know, kept as they came."""
    keys: tuple[str, ...] = ()
    """The record's keys in their JSON order (what :meth:`to_dict` writes)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """The record of a JSON dict (as stored by a worker).

        Raises
        ------
        TypeError
            If ``data`` lacks ``rows``, ``cols``, ``start``, ``solver`` or ``status``.
        """
        known = {k: v for k, v in data.items() if k in _FIELDS}
        extra = {k: v for k, v in data.items() if k not in _FIELDS}
        known.setdefault("start_square", None)
        known.setdefault("closed", False)
        return cls(**known, extra=extra, keys=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The JSON dict: the keys of :attr:`keys`, in that order (for a record built by the
        constructor: every field set to other than its default, in field order)."""
        order = self.keys or tuple(k for k in _FIELDS if self._is_set(k)) + tuple(self.extra)
        return {k: (self.extra[k] if k in self.extra else getattr(self, k)) for k in order}

    def _is_set(self, name: str) -> bool:
        f = _FIELD_INFO[name]
        return name in _ALWAYS or getattr(self, name) != (
            f.default_factory() if callable(f.default_factory) else f.default
        )

    # -- what the batch verdict reads ---------------------------------------------------------
    @property
    def board_label(self) -> str:
        """``"RxC"``, e.g. ``"8x8"``."""
        return f"{self.rows}x{self.cols}"

    @property
    def is_decided(self) -> bool:
        """True for ``found`` and ``no_tour``."""
        return self.status in DECIDED

    @property
    def verifier_ok(self) -> bool | None:
        """The verifier's verdict on the tour (None: no tour to check)."""
        return self.checks.get("verifier")

    @property
    def cpsat_agrees(self) -> bool | None:
        """``checks.cpsat``: True agrees, False disagrees or failed, None not cross-checked."""
        return self.checks.get("cpsat")

    @property
    def cpsat_failed(self) -> bool:
        """True if the CP-SAT cross-check failed (a mismatch or a failed check)."""
        return self.mismatch or self.cpsat_agrees is False

    @property
    def seconds(self) -> float:
        """Wall seconds of the job: ``job_elapsed_s``, else ``elapsed_s``."""
        return float(self.job_elapsed_s or self.elapsed_s or 0.0)


_FIELD_INFO = {f.name: f for f in fields(Record) if f.name not in ("extra", "keys")}
_FIELDS = tuple(_FIELD_INFO)
_ALWAYS = frozenset(("rows", "cols", "start", "start_square", "solver", "closed", "status",
                     "proof", "proof_detail", "reason", "tour", "checks", "nodes", "elapsed_s",
                     "batch_id"))

# -- the compact stored form ----------------------------------------------------------------

KNIGHT_MOVES = ((-2, 1), (-1, 2), (1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1))
"""The eight knight moves ``(d_row, d_col)``, clockwise from "two up, one right"; a move of a
tour is stored as its index in this tuple."""

_MOVE_INDEX = {m: str(i) for i, m in enumerate(KNIGHT_MOVES)}
COMPACT_PREFIX = "z1:"
"""Marks a record in the compact stored form (version 1). A stored value without it is the
plain JSON object that older code wrote, and still decodes."""


def encode_tour(tour: Any) -> str | None:
    """A tour as its start square and move sequence: ``"r,c:"`` then one digit 0-7 per move
    (an index into :data:`KNIGHT_MOVES`), e.g. ``[[0, 0], [2, 1], [4, 2]]`` -> ``"0,0:33"``.

    Parameters
    ----------
    tour : any
        A tour as a record holds it: a list of ``[row, col]`` pairs of ints, row 0 at the top.

    Returns
    -------
    str or None
        The encoding, or None if ``tour`` is not a non-empty list of int pairs each a knight
        move from the one before (such a value is stored as it is).
    """
    if not isinstance(tour, list) or not tour:
        return None
    digits = []
    prev = None
    for sq in tour:
        if (not isinstance(sq, list) or len(sq) != 2 or type(sq[0]) is not int
                or type(sq[1]) is not int):
            return None
        if prev is not None:
            d = _MOVE_INDEX.get((sq[0] - prev[0], sq[1] - prev[1]))
            if d is None:
                return None
            digits.append(d)
        prev = sq
    return f"{tour[0][0]},{tour[0][1]}:" + "".join(digits)


def decode_tour(text: str) -> list[list[int]]:
    """The tour of :func:`encode_tour`'s string: a list of ``[row, col]``.

    Raises
    ------
    ValueError
        If ``text`` is not of the form ``"r,c:"`` followed by digits 0-7.
    """
    return _decode_path(text).tolist()


def _decode_path(text: str) -> Any:
    """:func:`decode_tour` as a numpy array of shape ``(squares, 2)``."""
    import numpy as np  # lazily: the client needs it only to collect

    head, _, moves = text.partition(":")
    row_s, _, col_s = head.partition(",")
    codes = np.frombuffer(moves.encode("ascii"), dtype=np.uint8) - ord("0")
    if codes.size and int(codes.max()) > 7:  # uint8: a char below "0" wraps above 7 too
        raise ValueError(f"not a move sequence: {moves[:20]!r}")
    path = np.empty((codes.size + 1, 2), dtype=np.int64)
    path[0] = (int(row_s), int(col_s))
    np.cumsum(np.asarray(KNIGHT_MOVES, dtype=np.int64)[codes], axis=0, out=path[1:])
    path[1:] += path[0]
    return path


class TourJSON(str):
    """The JSON text of a tour, ``[[row,col],...]`` with compact separators (the bytes
    ``json.dumps(tour, separators=(",", ":"))`` gives), made by :func:`tour_json`. A record
    holding one in ``tour`` (``decode_record(..., tour_as_json=True)``) is meant for
    :func:`knights_tour.output.recordfile.jsonl_line`, which writes it as it is."""


@functools.lru_cache(maxsize=64)
def _square_texts(rows: int, cols: int) -> Any:
    import numpy as np  # lazily, as in _decode_path

    return np.array([f"[{r},{c}]" for r in range(rows) for c in range(cols)], dtype=object)


def tour_json(text: str, rows: int, cols: int) -> TourJSON:
    """The JSON text of :func:`decode_tour` ``(text)`` on a ``rows`` x ``cols`` board, without
    building the list: one ``"[r,c]"`` string per square, made once per board size.

    Raises
    ------
    ValueError
        As :func:`decode_tour`, or if the path leaves the board.
    """
    path = _decode_path(text)
    r, c = path[:, 0], path[:, 1]
    if int(r.min()) < 0 or int(c.min()) < 0 or int(r.max()) >= rows or int(c.max()) >= cols:
        raise ValueError(f"the move sequence leaves the {rows}x{cols} board")
    return TourJSON("[" + ",".join(_square_texts(rows, cols)[r * cols + c]) + "]")


def encode_record(record: Mapping[str, Any]) -> str:
    """A record dict in the compact stored form: :data:`COMPACT_PREFIX` + base64 of the
    zlib-compressed compact JSON, with the tour (when it is a chain of knight moves) replaced
    in place by its :func:`encode_tour` string. Key order and every other value are kept, so
    :func:`decode_record` gives back a dict equal to ``record``, in the same key order.

    A 40x40 tour record shrinks from about 12 KB of JSON to under 1 KB (figures in
    ``benchmarks/README.md``).
    """
    data = dict(record)
    moves = encode_tour(data.get("tour"))
    if moves is not None:
        data["tour"] = moves
    raw = json.dumps(data, separators=(",", ":")).encode("utf-8")
    return COMPACT_PREFIX + base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def decode_record(stored: str, *, tour_as_json: bool = False) -> dict[str, Any]:
    """The record dict of a stored value: the compact form of :func:`encode_record`, or the
    plain JSON object that older code stored. With ``tour_as_json`` a stored move sequence
    becomes a :class:`TourJSON` (for writing JSON Lines) instead of a list.

    Raises
    ------
    ValueError
        If ``stored`` is neither (``json.JSONDecodeError``, ``zlib.error`` and
        ``binascii.Error`` are ValueErrors or are raised as one).
    """
    if not stored.startswith(COMPACT_PREFIX):
        return json.loads(stored)
    try:
        raw = zlib.decompress(base64.b64decode(stored[len(COMPACT_PREFIX):], validate=True))
    except zlib.error as exc:
        raise ValueError(f"corrupt stored record: {exc}") from None
    data = json.loads(raw)
    moves, rows, cols = data.get("tour"), data.get("rows"), data.get("cols")
    if isinstance(moves, str):
        data["tour"] = None
        if tour_as_json and type(rows) is int and type(cols) is int:
            with contextlib.suppress(ValueError):  # off the board: the list, as before
                data["tour"] = tour_json(moves, rows, cols)
        if data["tour"] is None:
            data["tour"] = decode_tour(moves)
    return data


__all__ = ["Record", "DECIDED", "KNIGHT_MOVES", "COMPACT_PREFIX", "encode_tour", "decode_tour",
           "encode_record", "decode_record", "TourJSON", "tour_json"]
