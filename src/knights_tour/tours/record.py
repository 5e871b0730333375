"""The record: one :class:`Record` per job, the single type of a job's outcome end to end.

A solver backend returns a :class:`Record` (its claim), :func:`knights_tour.solvers.api.solve`
verifies it, :func:`knights_tour.batches.jobs.run_job` adds what running it as a job adds (batch,
worker, the CP-SAT cross-check), the worker stores it (:mod:`knights_tour.tours.stored` gives
its compact stored form), and the collector and every output format read it back as a
:class:`Record`. It is a :class:`msgspec.Struct`: typed, validated when decoded, and encoded to
JSON or MessagePack in C.

Its JSON form (one object per line of a JSON Lines file;
:func:`knights_tour.output.recordfile.jsonl_line`) holds every field below, in this order,
``null`` where a field does not apply. Each field is named and explained once, in its
docstring here.

The tour is a numpy integer array of shape ``(rows*cols, 2)``: ``tour[i] = (row, col)`` of the
i-th square visited, row 0 at the top. In JSON it is the list ``[[row, col], ...]``.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import functools
import json
from enum import StrEnum
from typing import Any

import msgspec
import numpy as np

from knights_tour.board import Board

Tour = np.ndarray
"""A tour in memory: ``int32`` array of shape ``(rows*cols, 2)``, ``(row, col)`` per step."""


class Status(StrEnum):
    """Outcome of a job: ``found`` (a verified tour), ``no_tour`` (with a proof), ``unknown``
    (undecided within the budget; ``reason`` says why) or ``error`` (``reason`` says what)."""

    FOUND = "found"
    NO_TOUR = "no_tour"
    UNKNOWN = "unknown"
    ERROR = "error"

    @property
    def decided(self) -> bool:
        """True for ``found`` and ``no_tour``: the job's question is answered."""
        return self in (Status.FOUND, Status.NO_TOUR)


DECIDED = (Status.FOUND, Status.NO_TOUR)
"""Statuses that answer the job's question (a tour, or a proof that there is none)."""


class Proof(StrEnum):
    """Why a ``no_tour`` answer is true.

    * ``parity`` – colour parity: a tour alternates colours, so on a board with an odd number of
      squares an open tour starts and ends on the majority colour, and no closed tour exists.
    * ``exhaustive`` – a complete backtracking search finished without a tour.
    * ``cpsat`` – the CP-SAT Hamiltonian-path model is INFEASIBLE.
    * ``theorem`` – a published theorem (cited in ``proof_detail``), e.g. Schwenk 1991 for closed
      tours, Cull & De Curtins 1978 / Conrad et al. 1994 for open tours.
    """

    PARITY = "parity"
    EXHAUSTIVE = "exhaustive"
    CPSAT = "cpsat"
    THEOREM = "theorem"


class Checks(msgspec.Struct, kw_only=True):
    """The independent checks of a job's answer."""

    verifier: bool | None = None
    """The verifier's verdict on the tour (:func:`knights_tour.tours.verify.verify_tour`); None when
    there is no tour to check."""
    cpsat: bool | None = None
    """The CP-SAT cross-check: True agrees, False disagrees or failed, None not run or not
    decidable (``cpsat_note`` says why)."""


def as_tour(tour: Any) -> Tour | None:
    """``tour`` (a sequence of ``(row, col)`` pairs, or an array) as a :data:`Tour` array of
    shape ``(N, 2)``, or None. A value that is not such a sequence is returned as an array of
    whatever shape it has, for the verifier to reject."""
    if tour is None:
        return None
    arr = np.asarray(tour)
    if arr.dtype != np.int32 and arr.dtype.kind in "iu":
        arr = arr.astype(np.int32)
    if arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, 2)
    return arr


class Record(msgspec.Struct, kw_only=True):
    """The outcome of one job. Fields in JSON order; ``None`` is ``null``."""

    rows: int
    """Board height (number of ranks)."""
    cols: int
    """Board width (number of files)."""
    start: tuple[int, int]
    """Start square ``(row, col)``, zero-based, row 0 at the top."""
    start_square: str | None = None
    """Algebraic name of the start square (file ``a`` on the left, rank 1 at the bottom), e.g.
    ``"a8"``; None only for a job message that could not be validated."""
    solver: str
    """Registered backend name that ran the job (:func:`knights_tour.solvers.backends`)."""
    closed: bool = False
    """Whether a closed (re-entrant) tour was asked for."""
    status: Status = Status.UNKNOWN
    """The answer (:class:`Status`)."""
    proof: Proof | None = None
    """For ``no_tour``: why (:class:`Proof`); else None."""
    proof_detail: str | None = None
    """Words and source of the proof (e.g. the theorem cited), or None."""
    reason: str | None = None
    """For ``unknown``/``error``: why (``node_limit``, ``time_limit``, a message); else None."""
    tour: Tour | None = None
    """The tour (:data:`Tour`, length rows*cols), or None."""
    checks: Checks = msgspec.field(default_factory=Checks)
    """The verifier's and the CP-SAT cross-check's verdicts (:class:`Checks`)."""
    nodes: int = 0
    """Search nodes the solver expanded (CP-SAT: branches); 0 when not applicable."""
    elapsed_s: float = 0.0
    """Wall seconds the solver took."""
    batch_id: str | None = None
    """The batch the job ran in, or None."""
    restarts: int | None = None
    """Engine only: runs of the compiled search (each with its own tie-break and budget) made
    for this job; None for other backends and for answers that needed no search."""
    via: str | None = None
    """How a tour not found by search was made (a construction, a rotated closed tour), or
    None."""
    cpsat_model_status: str | None = None
    """The CP-SAT solver's own status name (``OPTIMAL``, ``FEASIBLE``, ``INFEASIBLE``,
    ``UNKNOWN``, ``MODEL_INVALID``) of the CP-SAT run behind this record: the job's own solve
    with ``solver="cpsat"``, or the cross-check with ``verify="cpsat"``; else None."""
    cpsat_status: Status | None = None
    """With ``verify="cpsat"``: the cross-check's answer, in :class:`Status` terms; else None."""
    cpsat_proof: Proof | None = None
    """With ``verify="cpsat"``: the cross-check's proof, if it proved ``no_tour``."""
    cpsat_reason: str | None = None
    """With ``verify="cpsat"``: why the cross-check did not decide, or None."""
    cpsat_elapsed_s: float | None = None
    """With ``verify="cpsat"``: wall seconds of the cross-check (model solve and tour check)."""
    cpsat_nodes: int | None = None
    """With ``verify="cpsat"``: CP-SAT search branches of the cross-check."""
    cpsat_tour_accepted: bool | None = None
    """With ``verify="cpsat"``: whether the CP-SAT model accepts the solver's tour (None: no
    tour)."""
    mismatch: bool = False
    """True if the solver and the CP-SAT cross-check disagree (never hidden)."""
    cpsat_note: str | None = None
    """With ``verify="cpsat"``: why ``checks.cpsat`` is None or False, in words."""
    job_key: str | None = None
    """Stable key of the job in its batch, e.g. ``"8x8:0,0:warnsdorff:open"``
    (:attr:`knights_tour.batches.jobs.Job.key`)."""
    verify: str | None = None
    """The cross-check asked for: None or ``"cpsat"``."""
    error_type: str | None = None
    """For ``error`` records: the exception class name (e.g. ``WorkerLost``)."""
    worker: str | None = None
    """Node name of the worker (or host) that ran the job, e.g. ``w1@host``."""
    job_elapsed_s: float | None = None
    """Wall seconds of the whole job, cross-check included."""
    finished_at: float | None = None
    """Unix seconds when the job finished."""
    attempts: int | None = None
    """In a batch: how many times a worker started this job (1, or more after worker deaths)."""

    def __post_init__(self) -> None:
        if self.tour is not None and not isinstance(self.tour, np.ndarray):
            self.tour = as_tour(self.tour)
        if self.start_square is None and 0 < self.rows and 0 < self.cols:
            r, c = self.start
            if 0 <= r < self.rows and 0 <= c < self.cols:
                self.start_square = f"{Board.file_name(c)}{self.rows - r}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        for name in Record.__struct_fields__:
            a, b = getattr(self, name), getattr(other, name)
            if name == "tour":
                if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable, and equal records must hash equal

    # -- derived --------------------------------------------------------------------------
    @property
    def board(self) -> Board:
        """The board, ``Board(rows, cols)``."""
        return Board(self.rows, self.cols)

    @property
    def board_label(self) -> str:
        """``"RxC"``, e.g. ``"8x8"``."""
        return f"{self.rows}x{self.cols}"

    @property
    def is_decided(self) -> bool:
        """True for ``found`` and ``no_tour``."""
        return self.status in DECIDED

    @property
    def cpsat_failed(self) -> bool:
        """True if the CP-SAT cross-check failed (a mismatch or a failed check)."""
        return self.mismatch or self.checks.cpsat is False

    @property
    def seconds(self) -> float:
        """Wall seconds of the job: ``job_elapsed_s``, else ``elapsed_s``."""
        return float(self.job_elapsed_s or self.elapsed_s or 0.0)

    # -- plain forms ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON object as plain Python values (the tour as a list of ``[row, col]``)."""
        data = msgspec.to_builtins(self, enc_hook=_tour_to_list)
        data["start"] = list(data["start"])
        return data

    def to_json(self) -> str:
        """The record as one line of JSON (no newline)."""
        return json_bytes(self).decode()

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        """The record of a JSON object (as :meth:`to_dict` gives it), validated.

        Raises
        ------
        msgspec.ValidationError
            (a ``ValueError``) naming the first field of the wrong type, or a missing ``rows``,
            ``cols``, ``start`` or ``solver``.
        """
        return msgspec.convert(data, Record, dec_hook=_tour_from_json)


# -- the JSON form ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _number_words(width: int) -> tuple[np.ndarray, np.ndarray]:
    """For every number below ``10**width`` (``width`` <= 6): ``[`` + its digits + ``,`` and its
    digits + ``],``, each as 8 bytes in one little-endian word, the digits right-aligned in
    ``width`` columns and every unused byte 0 (JSON text has no 0 byte: dropped after)."""
    values = np.arange(10**width, dtype=np.int64)
    digits = np.zeros((len(values), width), dtype=np.uint8)
    for col in range(width):  # one column at a time: no (numbers x width) int64 temporaries
        power = 10 ** (width - 1 - col)
        column = (values // power % 10 + ord("0")).astype(np.uint8)
        if power > 1:  # a leading zero is no digit; the units column always has one
            column[values < power] = 0
        digits[:, col] = column
    first = np.zeros((len(values), 8), dtype=np.uint8)
    first[:, 0] = ord("[")
    first[:, 1 : 1 + width] = digits
    first[:, 1 + width] = ord(",")
    second = np.zeros((len(values), 8), dtype=np.uint8)
    second[:, :width] = digits
    second[:, width] = ord("]")
    second[:, width + 1] = ord(",")
    return first.view("<u8").ravel(), second.view("<u8").ravel()


_SMALL_SIDE = 64


@functools.lru_cache(maxsize=_SMALL_SIDE)
def _square_texts(side: int) -> np.ndarray:
    """``b"[r,c]"`` for every square of a ``side`` x ``side`` board, row-major."""
    return np.array([b"[%d,%d]" % (r, c) for r in range(side) for c in range(side)], dtype=object)


def tour_json(tour: Tour) -> bytes:
    """The JSON text ``[[r,c],[r,c],...]`` of a tour (the bytes
    ``json.dumps(tour.tolist(), separators=(",", ":"))`` gives), built with numpy: the digits of
    every coordinate looked up in a table of the numbers' texts, padding masked out, no Python
    loop per square. A tour with a coordinate below 0 (never a tour; a record that fails
    verification may hold one) goes through the stdlib.
    """
    if len(tour) == 0:
        return b"[]"
    top = int(tour.max())
    if int(tour.min()) < 0:
        return json.dumps(tour.tolist(), separators=(",", ":")).encode()
    if top < _SMALL_SIDE:  # a table of the squares' texts, one join
        return b"[" + b",".join(_square_texts(top + 1)[tour[:, 0] * (top + 1) + tour[:, 1]]) + b"]"
    width = len(str(top))
    if width > 6:  # a table of every number would outweigh the tour
        return json.dumps(tour.tolist(), separators=(",", ":")).encode()
    first, second = _number_words(width)
    words = np.empty((len(tour), 2), dtype="<u8")
    np.take(first, tour[:, 0], out=words[:, 0])
    np.take(second, tour[:, 1], out=words[:, 1])
    text = words.view(np.uint8).ravel()
    return b"[" + text[text != 0].tobytes()[:-1] + b"]"


def _tour_to_json(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.ndim == 2 and obj.shape[1] == 2 and obj.dtype.kind in "iu":
            return msgspec.Raw(tour_json(obj))
        return obj.tolist()
    if isinstance(obj, np.integer):
        return int(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _tour_to_list(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.integer)):
        return obj.tolist()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _tour_from_json(kind: type, obj: Any) -> Any:
    if kind is Tour:
        return tour_from_list(obj)
    raise NotImplementedError(f"cannot decode {kind}")


def tour_from_list(obj: Any) -> Tour:
    """A :data:`Tour` from decoded JSON: a list of ``[row, col]`` integer pairs (or an array).

    Raises
    ------
    ValueError
        If ``obj`` is not such a list.
    """
    arr = np.asarray(obj) if isinstance(obj, (list, np.ndarray)) else None
    if arr is not None and arr.size == 0:
        return np.empty((0, 2), dtype=np.int32)
    if arr is None or arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iu":
        raise ValueError("a tour must be a list of [row, col] integer pairs")
    return arr.astype(np.int32)


_JSON_ENCODER = msgspec.json.Encoder(enc_hook=_tour_to_json)
_JSON_DECODER = msgspec.json.Decoder(Record, dec_hook=_tour_from_json)


def json_bytes(record: Record) -> bytes:
    """The record's JSON object, compact (no spaces), as UTF-8 bytes without a newline."""
    return _JSON_ENCODER.encode(record)


def record_from_json(text: bytes | str) -> Record:
    """The record of one JSON object (a line of a JSON Lines file), validated.

    Raises
    ------
    msgspec.DecodeError
        (a ``ValueError``) if ``text`` is not JSON, or not a record: the message names the
        first bad field, e.g. ``Expected `int`, got `str` - at `$.rows```.
    """
    return _JSON_DECODER.decode(text)


TourResult = Record
"""The name the solver backends use for what they return: the same type as :class:`Record`."""

__all__ = [
    "Record",
    "TourResult",
    "Status",
    "Proof",
    "Checks",
    "Tour",
    "DECIDED",
    "as_tour",
    "json_bytes",
    "record_from_json",
    "tour_json",
    "tour_from_list",
]
