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

__all__ = ["Record", "DECIDED"]
