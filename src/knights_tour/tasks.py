"""The Celery tasks: thin bodies, the worker-side entry (laid out like Celery's
``examples/next-steps/proj/tasks.py``).

Each task takes JSON arguments and hands them to a function of its concept's package
(:mod:`knights_tour.batches`, :mod:`knights_tour.counting`); the names are spelled in
:mod:`knights_tour.worker.messages` and the app loads this module through its ``include``. Nothing
in the package imports this module.

The modules of the counts, the schedule and the collection are imported by the tasks that
use them, on first use: a worker imports this module before its pool process forks, and
``ktour run``'s workers, which run batch chunks, need none of them to start.

A chunk of batch jobs runs under time limits derived from its jobs' budgets, not the app's
fixed ones (:class:`ChunkRequest`). The worker main process's timer runs the recovery sweep
and the Redis memory watch (:func:`recovery_tick`, :func:`memory_watch`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from celery.signals import worker_process_init
from celery.worker.request import Request

from knights_tour.batches import chunking, execution
from knights_tour.errors import RedisRefusedError
from knights_tour.settings import get_settings
from knights_tour.store.connection import REDIS_ERRORS, connect
from knights_tour.store.memory import check_memory
from knights_tour.store.urls import mask_url
from knights_tour.worker import celery as worker
from knights_tour.worker import lease_keeper, messages, recovery
from knights_tour.worker.celery import app
from knights_tour.worker.claims import redis_client
from knights_tour.worker.messages import ItemDict, Send, is_dp

if TYPE_CHECKING:
    import redis

    from knights_tour.batches.collector import CollectResult

log = logging.getLogger(__name__)

JOB_TASK_OPTIONS: Mapping[str, object] = {
    "acks_late": True,
    "autoretry_for": REDIS_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "max_retries": 5,
}
"""Options shared by the tasks that run work (batch chunks, count sub-jobs): late
acknowledgement, and retries with back-off when Redis is briefly unreachable."""


class _LimitedRequest(Request):
    """A worker's request whose soft and hard time limits, unless the message carries its
    own, come from its items (:meth:`limits`), read with this worker's settings. Built in the
    worker main process, whose pool enforces them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        given: Any = getattr(self, "time_limits", None)  # Celery's (hard, soft) of the message
        if not any(given or ()):
            task_args = self.args if isinstance(self.args, (list, tuple)) else ()
            limits = self.limits(task_args)  # untrusted: priced as is
            if limits is not None:
                soft, hard = limits
                self.time_limits = (hard, soft)  # Celery's order: (hard, soft)

    def limits(self, task_args: Sequence[Any]) -> tuple[float, float] | None:
        """``(soft, hard)`` for the task's arguments (unit id, item dicts), or None for the
        app's limits."""
        raise NotImplementedError


class ChunkRequest(_LimitedRequest):
    """The worker's request for a chunk of batch jobs (Celery's custom request class, set as
    the task's ``Request``): unless the message carries time limits of its own, its soft and
    hard limits are those of its chunk (:func:`knights_tour.batches.chunking.chunk_time_limits`:
    the sum of its jobs' budgets plus ``KT_TASK_MARGIN_S``, then ``KT_TASK_GRACE_S``), so no
    task limit cuts a job inside its budget."""

    def limits(self, task_args: Sequence[Any]) -> tuple[float, float] | None:
        return chunking.chunk_time_limits(task_args[1] if len(task_args) > 1 else [])


def _is_dp_chunk(subjob_dicts: object) -> bool:
    """True if a count task's sub-jobs are a frontier DP's (``"kind": "dp"``)."""
    return isinstance(subjob_dicts, list) and bool(subjob_dicts) and is_dp(subjob_dicts[0])


def dp_time_limits(subjob_dicts: object) -> tuple[float, float] | None:
    """``(soft, hard)`` time limits of a count task whose sub-jobs are a frontier DP's
    (``"kind": "dp"``): ``KT_DP_LAYER_LIMIT_S`` and that plus ``KT_TASK_GRACE_S``; None for
    other sub-jobs (the app's limits). A DP task stops by itself after a layer once its budget
    (``KT_DP_TASK_BUDGET_S``) is spent; this limit only bounds one layer that outlasts it."""
    if not _is_dp_chunk(subjob_dicts):
        return None
    s = get_settings()
    return s.dp_layer_limit_s, s.dp_layer_limit_s + s.task_grace_s


class CountRequest(_LimitedRequest):
    """The worker's request for a count task: a frontier DP's sub-jobs get the time limits of
    :func:`dp_time_limits` (one large layer may outlast the app's soft limit), unless the
    message carries its own; enumeration sub-jobs keep the app's."""

    def limits(self, task_args: Sequence[Any]) -> tuple[float, float] | None:
        return dp_time_limits(task_args[1] if len(task_args) > 1 else None)


def _resend(unit_id: str, count: bool = False) -> Send:
    """Send more jobs of batch ``unit_id`` (with ``count``: sub-jobs of count ``unit_id``) at
    recovery priority: the hand-back at a task's time limit."""
    name = messages.TASK_COUNT_SUBJOBS if count else messages.TASK_RUN_JOBS

    def send(item_dicts: list[ItemDict]) -> None:
        worker.send(name, [unit_id, item_dicts], priority=messages.RECOVERY_PRIORITY)

    return send


@app.task(name=messages.TASK_RUN_JOBS, bind=True, Request=ChunkRequest, **JOB_TASK_OPTIONS)
def run_jobs(self: Any, batch_id: str, job_dicts: list[ItemDict]) -> execution.ChunkSummary:
    """Run a chunk of jobs of batch ``batch_id`` and store one record per job
    (:func:`knights_tour.batches.execution.run_chunk`; at the soft time limit the jobs not
    decided are handed back); returns its summary dict."""
    node = getattr(self.request, "hostname", None)
    lease_keeper.name_process(node)
    return execution.run_chunk(batch_id, job_dicts, node, _resend(batch_id))


@app.task(name=messages.TASK_COUNT_SUBJOBS, bind=True, Request=CountRequest, **JOB_TASK_OPTIONS)
def count_subjobs(self: Any, count_id: str, subjob_dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Run count sub-jobs of ``count_id`` and store their partial counts
    (:func:`knights_tour.counting.execution.run_count_chunk`; at the soft time limit the
    sub-jobs not counted are handed back); a frontier-DP count's sub-jobs (``"kind": "dp"``)
    go to :func:`knights_tour.counting.dp_execution.run_dp_chunk` (a sweep longer than the
    task's budget is sent on as a continuation). Returns its summary dict."""
    node = getattr(self.request, "hostname", None)
    lease_keeper.name_process(node)
    if _is_dp_chunk(subjob_dicts):
        from knights_tour.counting import dp_execution  # on first use: see the module docstring

        return dp_execution.run_dp_chunk(count_id, subjob_dicts, node, _resend(count_id, True))
    from knights_tour.counting import (
        execution as count_execution,  # on first use: see the module docstring
    )

    return count_execution.run_count_chunk(count_id, subjob_dicts, node, _resend(count_id, True))


class SweepSubmitted(TypedDict):
    """What :func:`submit_sweep` returns: the batch submitted and the sweep's name."""

    batch_id: str
    sweep: str


@app.task(name=messages.TASK_SUBMIT_SWEEP, bind=True, acks_late=True)
def submit_sweep(self: Any, sweep: Mapping[str, object]) -> SweepSubmitted:
    """Submit the batch of a scheduled sweep (sent by celery beat; see
    :func:`knights_tour.batches.schedule.run_sweep`).

    The batch id is derived from the task id, so a re-delivered message re-sends only the
    jobs without a record instead of starting a second batch. Returns ``{"batch_id", "sweep"}``.
    """
    from knights_tour.batches import schedule  # on first use: see the module docstring

    name = str(sweep.get("name", "sweep")) if isinstance(sweep, dict) else "sweep"
    task_id = str(getattr(self.request, "id", None) or "")[:8] or None
    batch_id = f"sweep-{name}-{task_id}" if task_id else None
    url = get_settings().redis_url or messages.DEFAULT_REDIS_URL
    batch_id = schedule.run_sweep(url, sweep, batch_id=batch_id)
    log.info("scheduled sweep %s submitted as batch %s", name, batch_id)
    return {"batch_id": batch_id, "sweep": name}


@app.task(name=messages.TASK_COLLECT)
def collect_reports() -> CollectResult:
    """Write a report for every finished, not yet collected batch (sent by celery beat):
    :func:`knights_tour.batches.collector.collect_finished` with ``KT_REPORTS_DIR`` and
    ``KT_COLLECT_LOCK_TIMEOUT_S``; returns its result dict."""
    from knights_tour.batches import collector  # on first use: see the module docstring

    settings = get_settings()
    result = collector.collect_finished(
        redis_client(), settings.reports_path, lock_timeout_s=settings.collect_lock_timeout_s
    )
    if result["written"]:
        log.info("collected %d batch(es): %s", len(result["written"]), result["written"])
    return result


@worker_process_init.connect
def _pool_child_exits_with_parent(**_: object) -> None:
    """A pool process exits when its worker main process dies while it holds leases."""
    lease_keeper.exit_with_parent()


_recovery_redis: list[Any] = []


@worker.on_recovery_tick
def recovery_tick() -> dict[str, list[str]]:
    """Re-send the jobs and count sub-jobs of every active batch and count lost with a worker
    (:func:`knights_tour.worker.recovery.sweep`), at recovery priority; runs in the worker
    main process on the :class:`knights_tour.worker.celery.RecoveryTimer` timer. Returns what it
    re-sent."""
    if not _recovery_redis:  # its own client: the timer thread shares no connection
        _recovery_redis.append(connect(get_settings().redis_url or messages.DEFAULT_REDIS_URL))

    resent = recovery.sweep(
        _recovery_redis[0],
        recovery.sender(messages.TASK_RUN_JOBS),
        recovery.sender(messages.TASK_COUNT_SUBJOBS),
    )
    for unit, job_keys in resent.items():
        log.warning("recovery: re-sent %d item(s) of %s lost with a worker", len(job_keys), unit)
    return resent


MEMORY_CHECK_S = 60.0
"""How often a worker re-reads Redis's memory use and policy (warnings once per process)."""


@dataclass
class _MemoryWatch:
    """The memory watch's state in this process: its client, when it last looked (monotonic
    seconds) and whether a refusal was logged."""

    client: redis.Redis | None = None
    last: float = 0.0
    refused: bool = False


_memory_watch = _MemoryWatch()


@worker.on_recovery_tick
def memory_watch() -> None:
    """Every :data:`MEMORY_CHECK_S`, read Redis's memory use and policy again, so a Redis
    that fills up (or is switched to an evicting policy) while workers run is warned about
    once (:func:`knights_tour.store.memory.check_memory`). Errors wait for the next tick."""
    state = _memory_watch
    now = time.monotonic()
    if now - state.last < MEMORY_CHECK_S:
        return
    state.last = now
    url = get_settings().redis_url or messages.DEFAULT_REDIS_URL
    if state.client is None:
        state.client = connect(url, check_policy=False)
    try:
        check_memory(state.client, mask_url(url), get_settings().allow_evicting_redis)
    except RedisRefusedError as exc:  # switched to an evicting policy while we run
        if not state.refused:
            state.refused = True
            log.error("%s", exc)


__all__ = [
    "run_jobs",
    "count_subjobs",
    "submit_sweep",
    "collect_reports",
    "JOB_TASK_OPTIONS",
    "ChunkRequest",
    "CountRequest",
    "dp_time_limits",
    "recovery_tick",
    "memory_watch",
    "MEMORY_CHECK_S",
]
