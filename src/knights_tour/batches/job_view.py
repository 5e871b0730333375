"""One job of a batch as ``ktour job`` shows it: the job as stored, its record, the records a
retry replaced (its earlier attempts), who holds it now and how often it was re-sent.

Read from Redis alone (no broadcast to the workers): the batch's hashes for the job
(:mod:`knights_tour.store.keys`), its earlier records
(:func:`knights_tour.batches.records.earlier_records`) and the lease of the process that claimed
it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import redis
from redis.client import NEVER_DECODE

from knights_tour.batches.jobs import Job
from knights_tour.batches.progress import get_batch_meta
from knights_tour.batches.records import decode, earlier_records
from knights_tour.batches.store import parse_job
from knights_tour.board import Board, parse_board, parse_board_list
from knights_tour.errors import KnightsTourError
from knights_tour.solvers import solver_names
from knights_tour.store import keys
from knights_tour.tours.record import Record
from knights_tour.worker.holders import live
from knights_tour.worker.ledger import text

_BOARD_OF_KEY = re.compile(r"(\d+)x(\d+):")


@dataclass
class JobView:
    """What is known of one job of a batch."""

    job: Job
    """The job as stored with the batch (a retry stores it with its new options)."""
    record: Record | None
    """Its record (the latest), or None while it has none."""
    earlier: list[Record] = field(default_factory=list)
    """The records retries replaced, oldest first."""
    claimed_by: str | None = None
    """The token (``host:pid:random``) of the worker process that claimed it and has not
    recorded it yet, or None."""
    lease_live: bool = False
    """Whether that process's lease is live (it is running the job now)."""
    worker_deaths: int = 0
    """Worker deaths blamed on the job since its last record."""
    requeued_at: float | None = None
    """Unix seconds recovery last re-sent it, or None."""

    @property
    def state(self) -> str:
        """``recorded``, ``running`` (claimed under a live lease), ``lost`` (claimed by a
        process whose lease is gone: recovery re-sends it) or ``waiting`` (queued or not sent)."""
        if self.record is not None:
            return "recorded"
        if self.claimed_by is not None:
            return "running" if self.lease_live else "lost"
        return "waiting"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: the job, the state, the records without their tours (``tour_length``
        instead) and the claim."""
        return {
            "job_key": self.job.key,
            "state": self.state,
            "job": self.job.to_dict(),
            "record": _brief(self.record),
            "earlier": [_brief(r) for r in self.earlier],
            "claimed_by": self.claimed_by,
            "lease_live": self.lease_live,
            "worker_deaths": self.worker_deaths,
            "requeued_at": self.requeued_at,
        }


def _brief(record: Record | None) -> dict[str, object] | None:
    if record is None:
        return None
    data = record.to_dict()
    tour = data.pop("tour", None)
    data["tour_length"] = None if tour is None else len(tour)
    return data


def batch_boards(r: redis.Redis, batch_id: str) -> list[Board]:
    """The boards of a batch: from its params (``sizes``), else from its job keys.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    sizes = get_batch_meta(r, batch_id).get("params", {}).get("sizes")
    if sizes:
        return parse_board_list(str(sizes))
    seen: dict[tuple[int, int], None] = {}
    for k in r.hkeys(keys.batch_jobs(batch_id)):
        m = _BOARD_OF_KEY.match(text(k))
        if m:
            seen[(int(m.group(1)), int(m.group(2)))] = None
    return [Board(rows, cols) for rows, cols in seen]


def pick_board(boards: list[Board], board: str | None, batch_id: str) -> Board:
    """The board ``board`` names (``8``, ``6x8``), or the batch's only board.

    Raises
    ------
    KnightsTourError
        If no board is named and the batch has several, or the board named is not one of the
        batch's (the batch's boards are listed).
    """
    labels = ", ".join(b.label for b in boards)
    if board is None:
        if len(boards) == 1:
            return boards[0]
        raise KnightsTourError(f"batch {batch_id} has boards {labels}: name one with --board")
    chosen = parse_board(board)
    if chosen not in boards:
        raise KnightsTourError(f"batch {batch_id} has no {chosen.label} board (it has {labels})")
    return chosen


def job_views(
    r: redis.Redis, batch_id: str, square: str, board: str | None = None
) -> list[JobView]:
    """The jobs of ``batch_id`` that start on ``square`` (``a1`` or ``row,col``) of ``board``
    (default: the batch's only board): one per solver and tour kind the batch asked for, in
    key order.

    Raises
    ------
    KnightsTourError
        For an unknown batch, a board the batch does not have (or none named when it has
        several), a square off the board (InvalidSquareError), or no job on that square.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    chosen = pick_board(batch_boards(r, batch_id), board, batch_id)
    row, col = chosen.parse_square(square)
    candidates = [
        f"{chosen.rows}x{chosen.cols}:{row},{col}:{solver}:{kind}"
        for solver in solver_names()
        for kind in ("open", "closed")
    ]
    found = [
        (k, parse_job(batch_id, k, v))
        for k, v in zip(candidates, r.hmget(keys.batch_jobs(batch_id), candidates), strict=True)
        if v is not None
    ]
    if not found:
        raise KnightsTourError(
            f"batch {batch_id} has no job from {chosen.algebraic((row, col))} on {chosen.label}"
        )
    out = []
    for key, job in found:
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("HGET", keys.batch_records(batch_id), key, **{NEVER_DECODE: True})
        pipe.hget(keys.batch_started(batch_id), key)
        pipe.hget(keys.batch_attempts(batch_id), key)
        pipe.hget(keys.batch_requeued(batch_id), key)
        raw, started, deaths, requeued = pipe.execute()
        token = text(started).split("|", 1)[0] if started is not None else None
        out.append(
            JobView(
                job=job,
                record=decode(batch_id, [key], [raw])[0] if raw is not None else None,
                earlier=earlier_records(r, batch_id, key),
                claimed_by=token,
                lease_live=bool(token and live(r, [token])[token]),
                worker_deaths=int(deaths or 0),
                requeued_at=float(requeued) if requeued is not None else None,
            )
        )
    return out


__all__ = ["JobView", "batch_boards", "pick_board", "job_views"]
