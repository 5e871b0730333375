"""The worker side of frontier-DP counts: run one DP sub-job (a trunk or a class's tail, see
:func:`knights_tour.counting.dp_jobs.dp_plan`) and store its result as a count's partial
count, claimed and leased as enumeration sub-jobs are
(:mod:`knights_tour.counting.execution`).

A sweep runs longer than a task may (the soft limit ``KT_SOFT_TIME_LIMIT_S``), so a task runs
layers while it has budget (``KT_DP_TASK_BUDGET_S``; default the soft limit less
``KT_TASK_MARGIN_S``): after a checkpointed layer, when the time used plus
:data:`LAYER_GROWTH` times that layer's would pass the budget, it stops and sends the sub-job
again (the continuation resumes from the checkpoint on disk, ``KT_DATA_DIR/frontier``). A
worker killed mid-layer loses that layer only: the lease machinery re-sends the sub-job. After
each layer the sweep's progress is stored in Redis (the client's progress lines; a trunk's
progress also tells the client which class may start).

The Celery task in :mod:`knights_tour.tasks` hands a count's sub-job dicts here when they are
DP sub-jobs (:func:`knights_tour.worker.messages.is_dp`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from knights_tour.board import Board, Square
from knights_tour.counting import store as count_store
from knights_tour.counting.dp_jobs import dp_run_tail, dp_run_trunk
from knights_tour.counting.execution import run_claimed_subjobs, started_subjobs, store_error
from knights_tour.counting.frontier_store import LayerStat
from knights_tour.counting.method import peak_rss_bytes
from knights_tour.errors import InvalidJobError
from knights_tour.settings import get_settings
from knights_tour.worker import ledger
from knights_tour.worker.claims import ChunkClaim, retrying
from knights_tour.worker.messages import Send

log = logging.getLogger(__name__)

LAYER_GROWTH = 3.0
"""A task stops before a layer unless the time used plus this many times the last layer's
would stay within its budget (a layer takes up to ~2-3 times its predecessor's time)."""


@dataclass(frozen=True)
class DpSubJob:
    """A validated DP sub-job (:func:`knights_tour.counting.dp_client.dp_item`'s dict)."""

    raw: dict[str, Any]
    board: Board
    start: Square | None
    role: str
    group: int
    square: Square | None
    memory_bytes: int

    @property
    def key(self) -> str:
        return str(self.raw["key"])

    def to_dict(self) -> dict[str, Any]:
        return self.raw

    @classmethod
    def from_dict(cls, raw: Any) -> DpSubJob:
        """Validate ``raw``.

        Raises
        ------
        InvalidJobError
            If a field is missing or out of range.
        """
        try:
            board = Board(int(raw["rows"]), int(raw["cols"]))
            start = None if raw.get("start") is None else board.check_square(tuple(raw["start"]))
            role = raw["role"]
            square = None if raw.get("square") is None else board.check_square(tuple(raw["square"]))
            group = int(raw.get("group", -1))
            memory = int(raw["memory_bytes"])
            key = raw["key"]
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidJobError(f"malformed DP sub-job: {exc!r}") from None
        if role not in ("trunk", "tail") or memory < 1 or not isinstance(key, str):
            raise InvalidJobError("malformed DP sub-job: role, memory_bytes or key")
        if (role == "tail") != (square is not None):
            raise InvalidJobError("malformed DP sub-job: a tail names its square, a trunk not")
        return cls(dict(raw), board, start, role, group, square, memory)


class _OutOfBudget(Exception):  # noqa: N818 - a signal, not an error
    """Raised by the progress callback after a checkpointed layer: the task's budget would not
    hold another one."""


class _Reporter:
    """The sweeps' progress callback: stores each layer's figures in Redis and stops the
    sweep (:class:`_OutOfBudget`) when the next layer would not fit the task's budget."""

    def __init__(
        self, r: Any, count_id: str, sj: DpSubJob, deadline: float | None, worker: str | None
    ) -> None:
        self.r, self.count_id, self.sj, self.deadline = r, count_id, sj, deadline
        self.worker = worker
        before = count_store.load_dp_progress(r, count_id).get(sj.key) or {}
        self.done = int(before.get("done_transitions") or 0)
        self.seconds = float(before.get("done_s") or 0.0)
        self.tasks = int(before.get("tasks") or 0) + 1  # tasks this sweep has run in

    def __call__(self, name: str, stat: LayerStat, n_steps: int) -> None:
        self.done += stat.transitions
        self.seconds += stat.seconds
        record = {
            "sweep": name,
            "role": self.sj.role,
            "step": stat.step,
            "n_steps": n_steps,
            "states": stat.states,
            "transitions": stat.transitions,
            "seconds": round(stat.seconds, 3),
            "parts": stat.parts,
            "done_transitions": self.done,
            "done_s": round(self.seconds, 3),
            "tasks": self.tasks,
            "peak_rss_bytes": peak_rss_bytes(),
            "worker": self.worker,
            "at": round(time.time(), 3),
        }
        retrying(lambda: count_store.save_dp_progress(self.r, self.count_id, self.sj.key, record))
        if self.deadline is None or stat.step + 1 >= n_steps:
            return
        if time.monotonic() + LAYER_GROWTH * stat.seconds > self.deadline:
            raise _OutOfBudget


def budget_s() -> float:
    """Seconds a DP task runs layers before handing its sweep on (``KT_DP_TASK_BUDGET_S``,
    default ``KT_SOFT_TIME_LIMIT_S`` less ``KT_TASK_MARGIN_S``, at least a tenth of the soft
    limit)."""
    s = get_settings()
    if s.dp_task_budget_s is not None:
        return s.dp_task_budget_s
    return max(s.soft_time_limit_s - s.task_margin_s, s.soft_time_limit_s / 10)


def run_dp_subjob(
    r: Any, count_id: str, sj: DpSubJob, deadline: float | None, worker: str | None = None
) -> tuple[int, int, float, dict[str, Any]]:
    """Run one DP sub-job to its end: ``(count, transitions, seconds, extra)`` (a trunk's
    count is 0; ``extra``: role, figures, peak RSS of this process). With ``deadline``
    (:func:`time.monotonic` seconds), it stops after the first layer past which the next one
    would not end in time.

    Raises
    ------
    _OutOfBudget
        When it stopped after a layer to go on in another task.
    ArithmeticError, MemoryError, InvalidJobError
        From the sweep.
    """
    reporter = _Reporter(r, count_id, sj, deadline, worker)
    opts: dict[str, Any] = {
        "checkpoint_dir": get_settings().frontier_path,
        "memory_bytes": sj.memory_bytes,
        "progress": reporter,
    }
    if sj.role == "trunk":
        res = dp_run_trunk(sj.board, sj.start, sj.group, **opts)
        layers = [] if res is None else [ls.to_dict() for ls in res.layers]
        trans = 0 if res is None else res.transitions
        secs = 0.0 if res is None else res.seconds
        figures: dict[str, Any] = {
            "layers": layers,
            "peak_states": max((ls["states"] for ls in layers), default=0),
        }
        if res is None:
            figures["method"] = "not run: every class it serves is counted on disk"
        count = 0
    else:
        assert sj.square is not None
        count, figures = dp_run_tail(sj.board, sj.start, sj.square, **opts)
        trans = int(figures.get("transitions", 0))
        secs = sum(float(ls["seconds"]) for ls in figures.get("layers", []))
    extra = {"role": sj.role, "figures": figures, "peak_rss_bytes": peak_rss_bytes()}
    return count, trans, secs, extra


def _run_claimed(
    held: ChunkClaim,
    todo: deque[DpSubJob],
    worker: str | None,
    tally: Counter[str],
    send: Send | None = None,
) -> None:
    r, led = held.r, held.led
    deadline = time.monotonic() + budget_s() if send is not None else None
    for n, sj in enumerate(started_subjobs(held, todo, worker, tally)):
        try:
            if n and deadline is not None and time.monotonic() >= deadline:
                raise _OutOfBudget  # the task's budget went to the sub-jobs before it
            count, trans, secs, extra = run_dp_subjob(r, led.id, sj, deadline, worker)
        except _OutOfBudget:
            assert send is not None
            if not retrying(lambda: ledger.is_active(r, led)):  # the count was stopped
                held.release([sj.key])
                held.done(sj.key)
                tally["stopped"] += 1
                log.info("count %s stopped: %s not sent on", led.id, sj.key)
                continue
            held.send_back([sj.key], [sj.to_dict()], send)
            held.done(sj.key)
            tally["continued"] += 1
            log.info("count %s: %s goes on in another task", led.id, sj.key)
            continue
        except (ArithmeticError, MemoryError, InvalidJobError) as exc:
            store_error(held, sj.key, worker, f"{type(exc).__name__}: {exc}", tally)
            continue
        count_store.save_partial(
            r, led.id, sj.key, count, trans, secs, worker, ledger=led, extra=extra
        )
        tally["ran"] += 1
        held.done(sj.key)


def run_dp_chunk(
    count_id: str, subjob_dicts: list[Any], worker: str | None, send: Send | None = None
) -> dict[str, Any]:
    """Run DP sub-jobs (:func:`knights_tour.counting.dp_client.dp_item` dicts) of ``count_id``,
    storing each result as a partial count under its key (claimed as enumeration sub-jobs
    are: one with an entry is skipped, one a live worker holds is left to it; a malformed one
    gets an error entry).
    With ``send`` (``send(dicts)`` puts a task for them on the queue), a sweep that outruns
    the task's budget is sent on (:func:`budget_s`) unless the count was stopped (then it
    stays at its checkpoint for the next run), and at the soft time limit the sub-jobs not run
    are handed back; without, each runs to its end.

    Returns
    -------
    dict
        ``count_id``, ``ran``, ``continued``, ``stopped``, ``skipped``, ``errors``, ``handed_back``,
        ``worker``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    run = functools.partial(_run_claimed, send=send)
    held, tally = run_claimed_subjobs(count_id, subjob_dicts, DpSubJob.from_dict, worker, send, run)
    return {
        "count_id": count_id,
        "ran": tally["ran"],
        "continued": tally["continued"],
        "stopped": tally["stopped"],
        "skipped": held.skipped,
        "errors": tally["errors"],
        "handed_back": tally["handed_back"],
        "worker": worker,
    }


__all__ = ["LAYER_GROWTH", "DpSubJob", "budget_s", "run_dp_subjob", "run_dp_chunk"]
