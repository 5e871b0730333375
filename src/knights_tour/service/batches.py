"""The batch lifecycle on the client side: make the jobs, submit them, wait, recover, collect.

``ktour run`` / ``submit`` / ``collect --wait`` and the beat sweep all go through these
functions; the worker side (the task bodies) is :mod:`knights_tour.tasks`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis

from knights_tour.board import Board, parse_board_list
from knights_tour.core.jobs import Job, make_batch_jobs
from knights_tour.errors import KnightsTourError
from knights_tour.service._celery import celery_worker, queue_lists
from knights_tour.service.waiting import REDIS_OUTAGE_S, WaitHooks, poll_until_complete
from knights_tour.settings import get_settings
from knights_tour.solvers import check_solver_name
from knights_tour.store import keys
from knights_tour.store import leases as recovery
from knights_tour.store.batches import batch_status, connect, create_batch
from knights_tour.store.batches import collect as store_collect

BATCH_PRIORITY = 6
"""Priority of a batch's tasks. With the Redis transport a worker pops priority 0 first, then 3,
6, 9 (kombu ``priority_steps``; each step is its own list), so re-sent lost jobs
(:data:`RECOVERY_PRIORITY`) overtake the queued rest of the batch instead of waiting behind it."""

RECOVERY_PRIORITY = 0
"""Priority of jobs re-sent by recovery (and of a soft-time-limit hand-off): served first."""

DEFAULT_CHUNK_SIZE = 16
"""Jobs per task. Measured (``benchmarks/bench_pipeline.py``, 2 local workers, 2-core machine
shared with other load) on the 620-job sweep n=5..12, engine only: one job per task (620
tasks) took 4.6-7.1 s of wall time, chunks of 16 (39 tasks) 1.5-2.4 s, chunks of 64 about the
same as 16; the solving itself is ~0.2 s, so per-task Celery/Redis round trips dominate.
With ``--verify cpsat`` (CP-SAT ~170 s of worker time) chunks of 16 were not slower than 4 or 1.
Each job still gets its own record key."""


def make_jobs(
    sizes: Sequence[str],
    solver: str,
    verify: str,
    closed: bool,
    exhaustive: bool,
    time_limit_s: float | None,
    node_limit: int | None,
) -> tuple[list[Board], list[Job], dict[str, Any]]:
    """The jobs of a batch: one per start square of every board in ``sizes``.

    Parameters
    ----------
    sizes : sequence of str
        Board lists as :func:`knights_tour.board.parse_board_list` reads them (``"5-12"``,
        ``"8,10"``, ``"6x8"``); a board named twice is kept once, first place wins.
    solver : str
        A registered solver name.
    verify : str
        ``"none"`` or ``"cpsat"`` (cross-check every job with the CP-SAT model).
    closed, exhaustive, time_limit_s, node_limit
        As for :class:`knights_tour.core.jobs.Job`.

    Returns
    -------
    (boards, jobs, params)
        The distinct boards in order, the jobs, and the JSON-ready ``params`` stored in the
        batch meta.

    Raises
    ------
    UnknownSolverError, InvalidBoardError, InvalidJobError
        For a bad solver, board or limit.
    """
    check_solver_name(solver)
    boards: list[Board] = []
    for spec in sizes:
        for b in parse_board_list(spec):
            if b not in boards:
                boards.append(b)
    verify_name = None if verify == "none" else verify
    jobs = make_batch_jobs(
        boards, solver=solver, closed=closed, verify=verify_name,
        time_limit_s=time_limit_s, exhaustive=exhaustive, node_limit=node_limit,
    )
    params = {
        "sizes": ",".join(b.label for b in boards), "solver": solver, "closed": closed,
        "verify": verify_name, "time_limit_s": time_limit_s,
        "exhaustive": exhaustive, "node_limit": node_limit,
    }
    return boards, jobs, params


def chunked(items: Sequence[Any], size: int) -> list[list[Any]]:
    """Split ``items`` into consecutive lists of at most ``size`` (``size`` >= 1)."""
    if size < 1:
        raise ValueError("chunk size must be at least 1")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def submit_batch(
    redis_url: str,
    jobs: Sequence[Job],
    params: Mapping[str, Any] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    batch_id: str | None = None,
    only_missing: bool = False,
    largest_first: bool = True,
) -> str:
    """Register a batch in Redis and send its jobs to the workers; returns the batch id.

    Parameters
    ----------
    redis_url : str
        The Redis server used as broker and store (workers must listen on the same one).
    jobs : sequence of Job
        E.g. from :func:`knights_tour.core.jobs.make_batch_jobs`.
    params : mapping, optional
        JSON-ready description stored in the batch meta (sizes, solver, verify, ...).
    chunk_size : int
        Jobs per Celery task (each job still gets its own record key).
    batch_id : str, optional
        Add the jobs to this existing batch instead of a new one (re-submitting the same jobs
        overwrites their records; nothing is duplicated).
    only_missing : bool
        With ``batch_id``: send only the jobs that have no record yet (resume a batch).
    largest_first : bool
        Send the jobs of the largest boards first (stable otherwise), so the slowest jobs do
        not all wait at the end of the queue while other workers idle (longest-processing-time
        first, Graham 1969). Records are keyed by job, so the order changes nothing else.

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached (URL masked in the message).
    KnightsTourError
        If ``jobs`` is empty or ``chunk_size`` < 1.
    """
    if chunk_size < 1:
        raise KnightsTourError(f"chunk size must be at least 1, got {chunk_size}")
    r = connect(redis_url)
    batch_id = create_batch(r, jobs, params, batch_id=batch_id)
    to_send = list(jobs)
    if only_missing:
        status = batch_status(r, batch_id, max_missing=10**9)
        missing = set(status["missing_keys"])
        to_send = [j for j in to_send if j.key in missing]
    if largest_first:
        to_send.sort(key=lambda j: j.rows * j.cols, reverse=True)
    dicts = [j.to_dict() for j in to_send]
    worker = celery_worker()
    app = worker.use_redis(redis_url)
    with app.producer_or_acquire() as producer:
        for chunk in chunked(dicts, chunk_size):
            app.send_task(
                worker.TASK_RUN_JOBS,
                args=[batch_id, chunk],
                producer=producer,
                queue=keys.QUEUE,
                ignore_result=True,
                priority=BATCH_PRIORITY,
            )
    r.close()
    return batch_id


def resend_jobs(redis_url: str, batch_id: str, job_dicts: list[dict[str, Any]]) -> None:
    """Put one :func:`run_jobs` task for ``job_dicts`` of ``batch_id`` on the queue (JSON), at
    :data:`RECOVERY_PRIORITY`, so it runs before the batch's still-queued jobs."""
    worker = celery_worker()
    worker.use_redis(redis_url).send_task(
        worker.TASK_RUN_JOBS, args=[batch_id, job_dicts], queue=keys.QUEUE,
        ignore_result=True, priority=RECOVERY_PRIORITY,
    )


_quiet_since: dict[str, float] = {}


def _queues_empty(r: redis.Redis) -> bool:
    """True if no task message waits in the project queue (every kombu priority list)."""
    names = queue_lists(keys.QUEUE)
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.llen(name)
    return not any(pipe.execute())


def recover_lost_jobs(r: redis.Redis, redis_url: str, batch_id: str) -> list[str]:
    """Re-send the jobs of ``batch_id`` lost with a worker or a Redis restart; returns their
    keys. Call it on every poll while waiting for a batch (``ktour run``, ``collect --wait``).

    * a claimed job whose lease expired without a record (its worker died):
      :func:`knights_tour.store.leases.recover_batch`;
    * unclaimed jobs without a record when the queue is empty and no job of the batch is
      running, for ``KT_LEASE_S`` in a row (their message was taken off the queue but never
      started - e.g. Redis went away as a worker received it; Celery would only restore it
      after the visibility timeout): :func:`knights_tour.store.leases.find_unclaimed`.
    """
    def send(bid: str, dicts: list[dict[str, Any]]) -> None:
        resend_jobs(redis_url, bid, dicts)

    resent = recovery.recover_batch(r, batch_id, send)
    unclaimed = recovery.find_unclaimed(r, batch_id)
    if unclaimed and not recovery.running(r, batch_id) and _queues_empty(r):
        since = _quiet_since.setdefault(batch_id, time.monotonic())
        if time.monotonic() - since >= get_settings().lease_s:
            resent += recovery.resend(r, batch_id, unclaimed, send)
            _quiet_since.pop(batch_id, None)
    else:
        _quiet_since.pop(batch_id, None)
    return resent


def wait_for_batch(
    r: redis.Redis,
    batch_id: str,
    *,
    timeout_s: float | None = None,
    recover_url: str | None = None,
    hooks: WaitHooks | None = None,
    poll_s: float = 0.5,
    outage_s: float = REDIS_OUTAGE_S,
) -> dict[str, Any]:
    """Wait until every job of ``batch_id`` has a record (or ``timeout_s`` passes).

    With ``recover_url`` (the broker), jobs lost with a dead worker are re-sent on every poll
    (:func:`recover_lost_jobs`). See :func:`knights_tour.service.waiting.poll_until_complete`.

    Returns
    -------
    dict
        The last :func:`knights_tour.store.batches.batch_status`; ``complete`` is False on a
        timeout.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    BackendUnavailableError
        If Redis stays unreachable for ``outage_s`` seconds.
    """
    recover_fn: Callable[[], int] | None = None
    if recover_url is not None:
        url = recover_url
        recover_fn = lambda: len(recover_lost_jobs(r, url, batch_id))  # noqa: E731
    return poll_until_complete(
        lambda: batch_status(r, batch_id), timeout_s=timeout_s, recover_fn=recover_fn,
        hooks=hooks, poll_s=poll_s, outage_s=outage_s,
    )


def collect(r: redis.Redis, batch_id: str) -> list[dict[str, Any]]:
    """All records of ``batch_id``, sorted by (rows, cols, start, solver, closed).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    return store_collect(r, batch_id)


__all__ = [
    "DEFAULT_CHUNK_SIZE", "BATCH_PRIORITY", "RECOVERY_PRIORITY", "make_jobs", "chunked",
    "submit_batch", "resend_jobs", "recover_lost_jobs", "wait_for_batch", "collect",
]
