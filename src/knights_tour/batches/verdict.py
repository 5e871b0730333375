"""The verdict on a batch: is it a clean success, and if not, why; per-board summary rows.

A batch is clean when every job has a record, every record is decided (``found`` or
``no_tour``), and no check failed: neither the tour verifier nor the CP-SAT cross-check
disagrees. These rules decide the exit code of ``ktour run`` and ``ktour collect``; the
commands only render what this module returns.

Records are :class:`~knights_tour.tours.record.Record` objects.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TypedDict

from knights_tour.tours.record import Record, Status


class _Counts(TypedDict):
    board: str
    """``"RxC"``, or ``"total"``."""
    starts: int
    found: int
    unknown: int
    error: int
    mismatch: int
    cpsat_agree: int
    cpsat_checked: int
    seconds: float
    """Summed job wall time."""


class BoardRow(_Counts):
    """One board of a batch's summary (:func:`summary_rows`)."""

    no_tour: Counter[str]
    """``no_tour`` records by proof."""


class TotalRow(_Counts):
    """The summary's rows added up (:func:`summary_total`)."""

    no_tour: int


def cpsat_failed(rec: Record) -> bool:
    """True if the record disagrees with CP-SAT (``mismatch``) or failed the CP-SAT check."""
    return rec.cpsat_failed


def mismatches(records: Iterable[Record]) -> list[Record]:
    """The records that disagree with CP-SAT or failed its check, in order."""
    return [r for r in records if cpsat_failed(r)]


class Tally:
    """Counters of a batch's records, fed one record at a time (:meth:`add`), so the verdict
    and the per-board summary of a batch of any size take memory per board, not per record.

    Attributes
    ----------
    records : int
        Records added.
    statuses : Counter
        Records by ``status``.
    mismatch, bad_cpsat : int
        Records with ``mismatch`` true; records whose CP-SAT check failed without a mismatch.
    failed : list of dict
        The first :attr:`keep_failed` records that disagree with CP-SAT or failed its check
        (:func:`cpsat_failed`), in order; ``failed_count`` counts them all.
    """

    keep_failed = 50

    def __init__(self) -> None:
        self.records = 0
        self.statuses: Counter[str] = Counter()
        self.mismatch = 0
        self.bad_cpsat = 0
        self.failed: list[Record] = []
        self.failed_count = 0
        self._rows: dict[tuple[int, int], BoardRow] = {}

    def add(self, rec: Record) -> None:
        """Count one record."""
        self.records += 1
        self.statuses[rec.status.value] += 1
        self.mismatch += rec.mismatch
        self.bad_cpsat += rec.checks.cpsat is False and not rec.mismatch
        if rec.cpsat_failed:
            self.failed_count += 1
            if len(self.failed) < self.keep_failed:
                self.failed.append(rec)
        key = (rec.rows, rec.cols)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _new_row(key)
        _count_row(row, rec)

    def add_many(self, records: Sequence[Record]) -> None:
        """Count records in order, as :meth:`add` counts each (the same counts), a board's run
        of records at a time: for a page of a batch's records, which come board by board."""
        for key, run in itertools.groupby(records, _BOARD):
            self._add_run(key, list(run))

    def _add_run(self, key: tuple[int, int], run: list[Record]) -> None:
        """:meth:`add` of records of one board, counted with C-level list operations."""
        count = len(run)
        statuses = Counter(map(_STATUS, run))
        cpsat = list(map(_CPSAT, run))
        mismatch = sum(map(_MISMATCH, run))
        self.records += count
        for status, n in statuses.items():
            self.statuses[status.value] += n
        self.mismatch += mismatch
        if mismatch or False in cpsat:
            for rec in run:
                self.bad_cpsat += rec.checks.cpsat is False and not rec.mismatch
                if rec.cpsat_failed:
                    self.failed_count += 1
                    if len(self.failed) < self.keep_failed:
                        self.failed.append(rec)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _new_row(key)
        row["starts"] += count
        row["found"] += statuses[Status.FOUND]
        row["unknown"] += statuses[Status.UNKNOWN]
        row["error"] += statuses[Status.ERROR]
        if statuses[Status.NO_TOUR]:
            row["no_tour"].update(
                r.proof.value if r.proof is not None else "?"
                for r in run
                if r.status == Status.NO_TOUR
            )
        row["mismatch"] += mismatch
        row["cpsat_checked"] += count - cpsat.count(None)
        row["cpsat_agree"] += cpsat.count(True)
        seconds = row["seconds"]
        for taken in [r.job_elapsed_s or r.elapsed_s or 0.0 for r in run]:
            seconds += float(taken)
        row["seconds"] = seconds

    def rows(self) -> list[BoardRow]:
        """The per-board summary rows so far, smallest board first (see :func:`summary_rows`),
        whatever order the records came in."""
        return [self._rows[key] for key in sorted(self._rows)]

    def problems(self, total: int) -> list[str]:
        """Why a batch of ``total`` jobs with the records added is not a clean success (see
        :func:`problems`)."""
        out = []
        if self.records < total:
            out.append(f"{total - self.records} of {total} jobs have no record")
        if self.statuses.get("unknown"):
            out.append(f"{self.statuses['unknown']} jobs undecided (unknown)")
        if self.statuses.get("error"):
            out.append(f"{self.statuses['error']} jobs ended in error")
        if self.mismatch:
            out.append(f"{self.mismatch} CP-SAT mismatches")
        if self.bad_cpsat:
            out.append(f"{self.bad_cpsat} failed CP-SAT checks")
        return out


_BOARD = operator.attrgetter("rows", "cols")
_STATUS = operator.attrgetter("status")
_CPSAT = operator.attrgetter("checks.cpsat")
_MISMATCH = operator.attrgetter("mismatch")


def tally(records: Iterable[Record]) -> Tally:
    """A :class:`Tally` of ``records``."""
    t = Tally()
    for rec in records:
        t.add(rec)
    return t


def problems(records: list[Record], total: int) -> list[str]:
    """Why a batch of ``total`` jobs with these ``records`` is not a clean success.

    Returns
    -------
    list of str
        One phrase per kind of problem (``"3 jobs undecided (unknown)"``); empty when the
        batch is clean.
    """
    return tally(records).problems(total)


def _new_row(key: tuple[int, int]) -> BoardRow:
    return {
        "board": f"{key[0]}x{key[1]}",
        "starts": 0,
        "found": 0,
        "no_tour": Counter(),
        "unknown": 0,
        "error": 0,
        "mismatch": 0,
        "cpsat_agree": 0,
        "cpsat_checked": 0,
        "seconds": 0.0,
    }


def _count_row(row: BoardRow, rec: Record) -> None:
    row["starts"] += 1
    status = rec.status
    if status == Status.FOUND:
        row["found"] += 1
    elif status == Status.NO_TOUR:
        row["no_tour"][rec.proof.value if rec.proof is not None else "?"] += 1
    elif status == Status.UNKNOWN:
        row["unknown"] += 1
    else:
        row["error"] += 1
    row["mismatch"] += rec.mismatch
    cp = rec.checks.cpsat
    if cp is not None:
        row["cpsat_checked"] += 1
        row["cpsat_agree"] += cp is True
    row["seconds"] += rec.seconds


def summary_rows(records: Iterable[Record]) -> list[BoardRow]:
    """Per-board summary of records, boards by rows then columns (``5x5`` before ``12x12``).

    Returns
    -------
    list of BoardRow
        ``board`` (``"RxC"``), ``starts``, ``found``, ``no_tour`` (a Counter by proof),
        ``unknown``, ``error``, ``mismatch``, ``cpsat_agree``, ``cpsat_checked`` and
        ``seconds`` (summed job wall time).
    """
    return tally(records).rows()


def summary_total(rows: list[BoardRow]) -> TotalRow:
    """The rows of :func:`summary_rows` added up (``no_tour`` summed over proofs), board
    ``"total"``."""
    return {
        "board": "total",
        "starts": sum(r["starts"] for r in rows),
        "found": sum(r["found"] for r in rows),
        "no_tour": sum(sum(r["no_tour"].values()) for r in rows),
        "unknown": sum(r["unknown"] for r in rows),
        "error": sum(r["error"] for r in rows),
        "mismatch": sum(r["mismatch"] for r in rows),
        "cpsat_agree": sum(r["cpsat_agree"] for r in rows),
        "cpsat_checked": sum(r["cpsat_checked"] for r in rows),
        "seconds": sum((r["seconds"] for r in rows), 0.0),
    }


__all__ = [
    "BoardRow",
    "TotalRow",
    "cpsat_failed",
    "mismatches",
    "problems",
    "summary_rows",
    "summary_total",
    "Tally",
    "tally",
]
