"""Records grouped for the batch reports: one :class:`BoardGroup` per board and tour kind
``(rows, cols, closed)``, one :class:`Cell` per start square (see
:mod:`knights_tour.output.report`).

When several records share a start square (e.g. two solvers, or a retry), the square counts
once with the best outcome (found > no_tour > unknown > error), and a start with both a found
tour and a ``no_tour`` claim is a *conflict*.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast, get_type_hints

from knights_tour.board import Board
from knights_tour.errors import KnightsTourError, TourFormatError
from knights_tour.output.durations import fmt_seconds
from knights_tour.solvers import cross_check_label
from knights_tour.tours.record import Proof, Record, Status
from knights_tour.tours.stored import from_legacy

STATUS_RANK = {Status.FOUND: 0, Status.NO_TOUR: 1, Status.UNKNOWN: 2, Status.ERROR: 3}
PROOFS = tuple(p.value for p in Proof)
PROOF_LETTER: dict[str, str] = {
    Proof.PARITY: "P",
    Proof.EXHAUSTIVE: "E",
    Proof.CPSAT: "C",
    Proof.THEOREM: "T",
}


def _as_record(obj: Record | Mapping[str, Any]) -> Record:
    if isinstance(obj, Record):
        return obj
    if isinstance(obj, Mapping):
        return from_legacy(obj)
    raise TourFormatError(f"expected a record, got {type(obj).__name__}")


@dataclass
class Cell:
    """One start square of a board group, with every record that started there."""

    row: int
    col: int
    name: str
    records: list[Record] = field(default_factory=list)

    @property
    def status(self) -> Status:
        """Best outcome among the records (found > no_tour > unknown > error)."""
        return min((r.status for r in self.records), key=STATUS_RANK.__getitem__)

    @property
    def proof(self) -> str | None:
        """The proof of the first ``no_tour`` record, when the best outcome is ``no_tour``."""
        if self.status != Status.NO_TOUR:
            return None
        return next(
            (
                r.proof.value if r.proof else None
                for r in self.records
                if r.status == Status.NO_TOUR
            ),
            None,
        )

    @property
    def conflict(self) -> bool:
        """True if one record found a tour here and another claimed there is none."""
        statuses = {r.status for r in self.records}
        return Status.FOUND in statuses and Status.NO_TOUR in statuses

    @property
    def tour_record(self) -> Record | None:
        """The first record here with a found tour that can be drawn."""
        for r in self.records:
            if r.status == Status.FOUND and r.tour is not None and len(r.tour):
                return r
        return None

    def describe(self) -> str:
        """Hover text: the square, then one line per record (its cross-check named by the
        descriptor's label, :func:`knights_tour.solvers.cross_check_label`)."""
        lines = [self.name]
        for r in self.records:
            st = r.status.value.replace("_", " ")
            extra = ""
            if r.proof:
                extra = f" by {r.proof.value}"
                detail = " ".join(str(r.proof_detail or "").split())
                if detail:
                    extra += f" ({detail[:240]}{'…' if len(detail) > 240 else ''})"
            elif r.reason:
                extra = f" ({r.reason})"
            cp = r.checks.cpsat
            label = cross_check_label(r.verify)
            cps = "" if cp is None else (f", {label} agrees" if cp else f", {label} DISAGREES")
            if r.cpsat_elapsed_s is not None:
                cps += f" ({label} {fmt_seconds(r.cpsat_elapsed_s)})"
            lines.append(
                f"{r.solver or '?'}: {st}{extra}, {fmt_seconds(r.elapsed_s)}, {r.nodes} nodes{cps}"
            )
            if r.cpsat_note:
                lines.append(f"  {r.cpsat_note}")
        if self.conflict:
            lines.append("CONFLICT: a tour was found and also claimed impossible")
        return "\n".join(lines)


class Totals(TypedDict):
    """Summary numbers of records (see :meth:`BoardGroup.summary`), of one board or added up
    over boards by :func:`totals`; times in seconds."""

    starts: int
    jobs: int
    found: int
    no_tour: int
    unknown: int
    error: int
    conflicts: int
    cpsat_checked: int
    cpsat_agree: int
    mismatches: int
    verifier_fail: int
    time_total_s: float
    by_proof: dict[str, int]
    cpsat_time_s: float | None
    time_max_s: float | None
    solvers: list[str]


_SUMMED = tuple(key for key, kind in get_type_hints(Totals).items() if kind in (int, float))
"""The summary numbers that add up over boards: the plain numbers of :class:`Totals`, in
their order."""


class BoardSummary(Totals):
    """The summary numbers of one board, with the median of its jobs' times (seconds)."""

    time_median_s: float | None


@dataclass
class BoardGroup:
    """All records of one board and tour kind, with the per-board summary numbers."""

    rows: int
    cols: int
    closed: bool
    cells: dict[tuple[int, int], Cell] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)

    @property
    def board(self) -> Board:
        return Board(self.rows, self.cols)

    @property
    def kind(self) -> str:
        return "closed" if self.closed else "open"

    @property
    def key(self) -> str:
        """``"8x8-open"`` — used in element ids and URL fragments."""
        return f"{self.rows}x{self.cols}-{self.kind}"

    def summary(self) -> BoardSummary:
        """Summary numbers: ``starts``, ``jobs``, ``found``, ``no_tour`` (total),
        ``by_proof`` {proof: count}, ``unknown``, ``error``, ``conflicts``, ``cpsat_checked``
        (jobs with ``checks.cpsat`` true or false), ``cpsat_agree``, ``mismatches`` (jobs the
        pipeline flagged ``mismatch``: CP-SAT and the solver disagree), ``cpsat_time_s`` (sum
        of ``cpsat_elapsed_s``, None when no job was cross-checked), ``verifier_fail``,
        ``time_total_s``, ``time_median_s``, ``time_max_s`` (solver ``elapsed_s``),
        ``solvers``. Counts of outcomes are per start square; CP-SAT and times are per job."""
        statuses = [c.status for c in self.cells.values()]
        by_proof: dict[str, int] = {}
        for c in self.cells.values():
            if c.status == Status.NO_TOUR:
                p = c.proof or "unstated"
                by_proof[p] = by_proof.get(p, 0) + 1
        cps = [r.checks.cpsat for r in self.records]
        ver = [r.checks.verifier for r in self.records]
        times = [r.elapsed_s for r in self.records]
        return {  # the keys and order of BoardSummary
            "starts": len(self.cells),
            "jobs": len(self.records),
            "found": statuses.count(Status.FOUND),
            "no_tour": statuses.count(Status.NO_TOUR),
            "by_proof": dict(sorted(by_proof.items())),
            "unknown": statuses.count(Status.UNKNOWN),
            "error": statuses.count(Status.ERROR),
            "conflicts": sum(c.conflict for c in self.cells.values()),
            "cpsat_checked": sum(v is not None for v in cps),
            "cpsat_agree": sum(v is True for v in cps),
            "mismatches": sum(r.mismatch for r in self.records),
            "cpsat_time_s": (
                sum(r.cpsat_elapsed_s or 0.0 for r in self.records)
                if any(r.cpsat_elapsed_s is not None for r in self.records)
                else None
            ),
            "verifier_fail": sum(v is False for v in ver),
            "time_total_s": sum(times),
            "time_median_s": statistics.median(times) if times else None,
            "time_max_s": max(times) if times else None,
            "solvers": sorted({r.solver or "?" for r in self.records}),
        }


def group_records(records: Iterable[Record | Mapping[str, Any]]) -> tuple[list[BoardGroup], int]:
    """Group records by ``(rows, cols, closed)``, sorted by board size then open before closed.

    Returns
    -------
    (groups, skipped)
        ``skipped`` counts records that could not be placed (no valid board or start square).
    """
    groups: dict[tuple[int, int, bool], BoardGroup] = {}
    skipped = 0
    for obj in records:
        try:
            rec = _as_record(obj)
            board = Board(rec.rows, rec.cols)
            start = board.check_square(rec.start)
        except (KeyError, TypeError, ValueError, IndexError, KnightsTourError):
            skipped += 1
            continue
        closed = rec.closed
        g = groups.setdefault(
            (board.rows, board.cols, closed), BoardGroup(board.rows, board.cols, closed)
        )
        g.records.append(rec)
        cell = g.cells.get(start)
        if cell is None:
            cell = g.cells[start] = Cell(start[0], start[1], board.algebraic(start))
        cell.records.append(rec)
    ordered = [groups[k] for k in sorted(groups, key=lambda k: (k[0] * k[1], k[0], k[1], k[2]))]
    return ordered, skipped


def totals(groups: list[BoardGroup]) -> Totals:
    """The summaries of all groups added up (starts, jobs, statuses, proofs, CP-SAT agreement,
    times, CP-SAT time, longest job) plus ``solvers``: the sorted solver names seen."""
    sums = [g.summary() for g in groups]
    by_proof: dict[str, int] = {}
    for s in sums:
        for p, n in s["by_proof"].items():
            by_proof[p] = by_proof.get(p, 0) + n
    cp_times = [s["cpsat_time_s"] for s in sums if s["cpsat_time_s"] is not None]
    numbers = cast("list[Mapping[str, float]]", sums)
    out: dict[str, object] = {key: sum(s[key] for s in numbers) for key in _SUMMED}
    out["by_proof"] = dict(sorted(by_proof.items()))
    out["cpsat_time_s"] = sum(cp_times) if cp_times else None
    out["time_max_s"] = max((s["time_max_s"] or 0.0 for s in sums), default=None)
    out["solvers"] = sorted({x for s in sums for x in s["solvers"]})
    return cast(Totals, out)
