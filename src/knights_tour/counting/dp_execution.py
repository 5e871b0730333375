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
from typing import Any

import msgspec

from knights_tour.counting import store as count_store
from knights_tour.counting.dp_jobs import dp_run_tail, dp_run_trunk
from knights_tour.counting.execution import run_claimed_subjobs, started_subjobs, store_error
from knights_tour.counting.frontier_run import SweepOptions
from knights_tour.counting.frontier_store import LayerStat
from knights_tour.counting.method import peak_rss_bytes
from knights_tour.counting.records import ClassFigures, DpProgress, DpResult, DpSubJob, TrunkFigures
from knights_tour.errors import KnightsTourError
from knights_tour.settings import get_settings
from knights_tour.worker import ledger
from knights_tour.worker.claims import ChunkClaim, redis_client, retrying
from knights_tour.worker.messages import Send

log = logging.getLogger(__name__)

LAYER_GROWTH = 3.0
"""A task stops before a layer unless the time used plus this many times the last layer's
would stay within its budget (a layer takes up to ~2-3 times its predecessor's time)."""


class _OutOfBudget(Exception):  # noqa: N818 - a signal, not an error
    """Raised by the progress callback after a checkpointed layer: the task's budget would not
    hold another one."""


class _Superseded(Exception):  # noqa: N818 - a signal, not an error
    """Raised by the progress callback when the count was registered again since the sub-job
    was sent (``--fresh``): nothing of the sweep is stored, it is not sent on."""


class _Reporter:
    """The sweeps' progress callback: stores each layer's figures in Redis and stops the
    sweep (:class:`_OutOfBudget`) when the next layer would not fit the task's budget, or
    (:class:`_Superseded`) when the count is no longer the generation the sub-job was sent
    for."""

    def __init__(
        self, r: Any, count_id: str, sj: DpSubJob, deadline: float | None, worker: str | None
    ) -> None:
        self.r, self.count_id, self.sj, self.deadline = r, count_id, sj, deadline
        self.worker = worker
        before = count_store.load_dp_progress(r, count_id).get(sj.key)
        self.done = 0 if before is None else before.done_transitions
        self.seconds = 0.0 if before is None else before.done_s
        self.tasks = (0 if before is None else before.tasks) + 1  # tasks this sweep has run in

    def __call__(self, name: str, stat: LayerStat, n_steps: int) -> None:
        self.done += stat.transitions
        self.seconds += stat.seconds
        record = DpProgress(
            sweep=name,
            role=self.sj.role,
            step=stat.step,
            n_steps=n_steps,
            states=stat.states,
            transitions=stat.transitions,
            seconds=round(stat.seconds, 3),
            parts=stat.parts,
            done_transitions=self.done,
            done_s=round(self.seconds, 3),
            tasks=self.tasks,
            peak_rss_bytes=peak_rss_bytes(),
            worker=self.worker,
            at=round(time.time(), 3),
        )
        stored = retrying(
            lambda: count_store.save_dp_progress(
                self.r, self.count_id, self.sj.key, record, self.sj.fence
            )
        )
        if not stored:
            raise _Superseded
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
) -> tuple[int, int, float, DpResult]:
    """Run one DP sub-job to its end: ``(count, transitions, seconds, result)`` (a trunk's
    count is 0; ``result``: role, figures, peak RSS of this process). With ``deadline``
    (:func:`time.monotonic` seconds), it stops after the first layer past which the next one
    would not end in time.

    Raises
    ------
    _OutOfBudget
        When it stopped after a layer to go on in another task.
    _Superseded
        When it stopped after a layer because the count was registered again since.
    ArithmeticError, MemoryError, InvalidJobError
        From the sweep.
    KnightsTourError
        If the sub-job's stored progress cannot be read.
    """
    reporter = _Reporter(r, count_id, sj, deadline, worker)
    opts = SweepOptions(
        checkpoint_dir=get_settings().frontier_path, memory_bytes=sj.memory_bytes, progress=reporter
    )
    figures: ClassFigures | TrunkFigures
    if sj.role == "trunk":
        res = dp_run_trunk(sj.board, sj.start, sj.group, opts)
        layers = [] if res is None else [ls.to_dict() for ls in res.layers]
        trans = 0 if res is None else res.transitions
        secs = 0.0 if res is None else res.seconds
        figures = TrunkFigures(
            layers=layers, peak_states=max((int(ls["states"]) for ls in layers), default=0)
        )
        if res is None:
            figures.method = "not run: every class it serves is counted on disk"
        count = 0
    else:
        assert sj.square is not None
        count, figures = dp_run_tail(sj.board, sj.start, sj.square, opts)
        trans = figures.transitions if figures.transitions is not msgspec.UNSET else 0
        layers = figures.layers if figures.layers is not msgspec.UNSET else []
        secs = sum(float(ls["seconds"]) for ls in layers)
    return (
        count,
        trans,
        secs,
        DpResult(role=sj.role, figures=figures, peak_rss_bytes=peak_rss_bytes()),
    )


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
            count, trans, secs, result = run_dp_subjob(r, led.id, sj, deadline, worker)
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
        except _Superseded:
            _drop_superseded(held, sj, tally)
            continue
        except (ArithmeticError, MemoryError, KnightsTourError) as exc:
            store_error(held, sj.key, worker, f"{type(exc).__name__}: {exc}", tally)
            continue
        if not count_store.save_partial(
            r,
            led.id,
            sj.key,
            count,
            trans,
            secs,
            worker,
            ledger=led,
            extra=result,
            generation=sj.fence,
        ):
            _drop_superseded(held, sj, tally)
            continue
        tally["ran"] += 1
        held.done(sj.key)


def _drop_superseded(held: ChunkClaim, sj: DpSubJob, tally: Counter[str]) -> None:
    """Give up ``sj``, sent before its count was registered again (``--fresh``): its claim
    released, nothing stored, not sent on."""
    held.release([sj.key])
    held.done(sj.key)
    tally["superseded"] += 1
    log.info("count %s registered again: %s of an earlier run dropped", held.led.id, sj.key)


def _current(count_id: str, subjob_dicts: Any) -> tuple[list[Any], int]:
    """``(the sub-job dicts of the count's present generation, how many were not)``: a dict
    whose ``generation`` is another than the count's was sent before the count was
    registered again (``--fresh``) and is not claimed; anything else goes on to be parsed.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    raw = subjob_dicts if isinstance(subjob_dicts, list) else [subjob_dicts]
    stamps = [_stamp(d) for d in raw]
    if not any(stamps):
        return raw, 0
    present = retrying(functools.partial(count_store.present_generation, redis_client(), count_id))
    kept = [d for d, stamp in zip(raw, stamps, strict=True) if not stamp or stamp == present]
    return kept, len(raw) - len(kept)


def _stamp(subjob_dict: Any) -> str:
    """The ``generation`` a sub-job dict was sent for (empty: none, not checked)."""
    stamp = subjob_dict.get("generation") if isinstance(subjob_dict, dict) else None
    return stamp if isinstance(stamp, str) else ""


def run_dp_chunk(
    count_id: str, subjob_dicts: list[Any], worker: str | None, send: Send | None = None
) -> dict[str, object]:
    """Run DP sub-jobs (:class:`~knights_tour.counting.records.DpSubJob` dicts) of ``count_id``,
    storing each result as a partial count under its key (claimed as enumeration sub-jobs
    are: one with an entry is skipped, one a live worker holds is left to it; a malformed one
    gets an error entry).
    With ``send`` (``send(dicts)`` puts a task for them on the queue), a sweep that outruns
    the task's budget is sent on (:func:`budget_s`) unless the count was stopped (then it
    stays at its checkpoint for the next run), and at the soft time limit the sub-jobs not run
    are handed back; without, each runs to its end.

    A sub-job sent before the count was registered again (``--fresh``: another
    ``generation``) is not claimed, or, if the count was registered again while it ran,
    stores nothing and is not sent on (``superseded``).

    Returns
    -------
    dict
        ``count_id``, ``ran``, ``continued``, ``stopped``, ``superseded``, ``skipped``,
        ``errors``, ``handed_back``, ``worker``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    run = functools.partial(_run_claimed, send=send)
    current, superseded = _current(count_id, subjob_dicts)
    held, tally = run_claimed_subjobs(count_id, current, DpSubJob.from_dict, worker, send, run)
    return {
        "count_id": count_id,
        "ran": tally["ran"],
        "continued": tally["continued"],
        "stopped": tally["stopped"],
        "superseded": superseded + tally["superseded"],
        "skipped": held.skipped,
        "errors": tally["errors"],
        "handed_back": tally["handed_back"],
        "worker": worker,
    }


__all__ = ["LAYER_GROWTH", "budget_s", "run_dp_subjob", "run_dp_chunk"]
