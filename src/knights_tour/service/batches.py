"""The batch lifecycle on the client side: make jobs, submit, wait (recovering lost jobs),
collect.

``ktour run``/``submit``/``collect --wait`` and the beat sweep all go through these functions;
the worker side of a batch is :mod:`knights_tour.service.execution`. Typical use::

    boards, jobs, params = make_jobs(["5-8"], "warnsdorff", "none", False, False, None, None)
    batch_id = submit_batch(url, jobs, params)
    status = wait_for_batch(r, batch_id, recover_url=url)
    for record in stream_records(r, batch_id):   # dicts, sorted by board and start
        ...
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import redis

from knights_tour import worker
from knights_tour.board import Board, parse_board_list
from knights_tour.core.jobs import Job, make_batch_jobs
from knights_tour.core.records import Record
from knights_tour.errors import InvalidJobError, KnightsTourError
from knights_tour.service.waiting import REDIS_OUTAGE_S, WaitHooks, poll_until_complete
from knights_tour.settings import get_settings
from knights_tour.solvers import check_solver_name
from knights_tour.store import batches as store
from knights_tour.store import leases
from knights_tour.store.connection import connect

DEFAULT_CHUNK_SIZE = 16
"""Jobs per task. Per-task Celery/Redis round trips dominate a batch of small jobs, so jobs
travel in chunks (figures in ``benchmarks/README.md``); each job still gets its own record key."""


def make_jobs(
    sizes: Sequence[str],
    solver: str,
    verify: str | None,
    closed: bool,
    exhaustive: bool,
    time_limit_s: float | None,
    node_limit: int | None,
) -> tuple[list[Board], list[Job], dict[str, Any]]:
    """The jobs of a batch: one per start square of every board named in ``sizes``.

    Parameters
    ----------
    sizes : sequence of str
        Board lists as :func:`knights_tour.board.parse_board_list` reads them (``"5-12"``,
        ``"8,10"``, ``"6x8"``); a board named twice is kept once, in first-seen order.
    solver : str
        A registered backend name.
    verify : str or None
        ``"cpsat"`` for the CP-SAT cross-check; ``None`` or ``"none"`` for none.
    closed, exhaustive : bool
        As in :class:`knights_tour.core.jobs.Job`.
    time_limit_s : float, optional
        Solver wall-clock limit per job, in seconds.
    node_limit : int, optional
        Engine node budget per job.

    Returns
    -------
    (boards, jobs, params)
        The distinct boards, the jobs (boards in order, squares row-major) and the JSON-ready
        ``params`` stored in the batch meta.

    Raises
    ------
    UnknownSolverError, InvalidBoardError, InvalidJobError
        On bad input (``time_limit_s`` <= 0 included).
    """
    check_solver_name(solver)
    boards: list[Board] = []
    for spec in sizes:
        for b in parse_board_list(spec):
            if b not in boards:
                boards.append(b)
    if time_limit_s is not None and time_limit_s <= 0:
        raise InvalidJobError(f"the time limit must be positive, got {time_limit_s}")
    verify = None if verify == "none" else verify
    jobs = make_batch_jobs(
        boards, solver=solver, closed=closed, verify=verify, time_limit_s=time_limit_s,
        exhaustive=exhaustive, node_limit=node_limit,
    )
    params = {
        "sizes": ",".join(b.label for b in boards), "solver": solver, "closed": closed,
        "verify": verify, "time_limit_s": time_limit_s, "exhaustive": exhaustive,
        "node_limit": node_limit,
    }
    return boards, jobs, params


def chunked(items: Sequence[Any], size: int) -> list[list[Any]]:
    """Split ``items`` into consecutive lists of at most ``size`` (``size`` >= 1).

    Raises
    ------
    ValueError
        If ``size`` < 1.
    """
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
        E.g. from :func:`make_jobs`.
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
        not all wait at the end of the queue while other workers idle.

    Returns
    -------
    str
        The batch id.

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached (URL masked in the message).
    KnightsTourError
        If ``jobs`` is empty or ``chunk_size`` < 1.

    References
    ----------
    .. [1] R. L. Graham, "Bounds on multiprocessing timing anomalies", SIAM J. Appl. Math. 17
       (1969) 416-429 (longest processing time first).
    """
    if chunk_size < 1:
        raise KnightsTourError(f"chunk size must be at least 1, got {chunk_size}")
    r = connect(redis_url)
    batch_id = store.create_batch(r, jobs, params, batch_id=batch_id)
    to_send = list(jobs)
    if only_missing:
        status = store.batch_status(r, batch_id, max_missing=10**9)
        missing = set(status["missing_keys"])
        to_send = [j for j in to_send if j.key in missing]
    if largest_first:
        to_send.sort(key=lambda j: j.rows * j.cols, reverse=True)
    app = worker.use_redis(redis_url)
    with app.producer_or_acquire() as producer:
        for chunk in chunked([j.to_dict() for j in to_send], chunk_size):
            worker.send(worker.TASK_RUN_JOBS, [batch_id, chunk], producer=producer,
                        priority=worker.BATCH_PRIORITY)
    r.close()
    return batch_id


def resend_jobs(redis_url: str, batch_id: str, job_dicts: list[dict[str, Any]]) -> None:
    """Put one run-jobs task for ``job_dicts`` of ``batch_id`` on the queue (JSON), at
    :data:`knights_tour.worker.RECOVERY_PRIORITY`, so it runs before the batch's still-queued
    jobs."""
    worker.use_redis(redis_url)
    worker.send(worker.TASK_RUN_JOBS, [batch_id, job_dicts], priority=worker.RECOVERY_PRIORITY)


_quiet_since: dict[str, float] = {}


def recover_lost_jobs(r: redis.Redis, redis_url: str, batch_id: str) -> list[str]:
    """Re-send the jobs of ``batch_id`` lost with a worker or a Redis restart; returns their
    keys. :func:`wait_for_batch` calls it on every poll when given ``recover_url``.

    * a claimed job whose lease expired without a record (its worker died):
      :func:`knights_tour.store.leases.recover_batch`;
    * unclaimed jobs without a record when the queue is empty and no job of the batch is
      running, for ``KT_LEASE_S`` in a row (their message was taken off the queue but never
      started - e.g. Redis went away as a worker received it; Celery would only restore it
      after the visibility timeout): :func:`knights_tour.store.leases.find_unclaimed`.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """

    def send(bid: str, dicts: list[dict[str, Any]]) -> None:
        resend_jobs(redis_url, bid, dicts)

    resent = leases.recover_batch(r, batch_id, send)
    unclaimed = leases.find_unclaimed(r, batch_id)
    if unclaimed and not leases.running(r, batch_id) and leases.lists_empty(
        r, worker.queue_lists()
    ):
        since = _quiet_since.setdefault(batch_id, time.monotonic())
        if time.monotonic() - since >= get_settings().lease_s:
            resent += leases.resend(r, batch_id, unclaimed, send)
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
    """Wait until every job of ``batch_id`` has a record (:func:`poll_until_complete`).

    Parameters
    ----------
    r : redis.Redis
    batch_id : str
    timeout_s : float, optional
        Stop waiting after this many seconds (the returned status then has ``complete``
        False).
    recover_url : str, optional
        The broker URL: with it, jobs lost with their worker are re-sent on every poll
        (:func:`recover_lost_jobs`).
    hooks : WaitHooks, optional
        Progress / outage / re-send / liveness callbacks.
    poll_s : float
        Seconds between polls.
    outage_s : float
        Seconds without Redis before giving up.

    Returns
    -------
    dict
        The last :func:`knights_tour.store.batches.batch_status`.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    BackendUnavailableError
        If Redis stayed unreachable for ``outage_s`` seconds.
    """
    recover_fn = None
    if recover_url is not None:
        url = recover_url
        recover_fn = lambda: recover_lost_jobs(r, url, batch_id)  # noqa: E731

    return poll_until_complete(
        lambda: store.batch_status(r, batch_id), timeout_s=timeout_s, recover_fn=recover_fn,
        hooks=hooks, poll_s=poll_s, outage_s=outage_s,
    )


def collect(r: redis.Redis, batch_id: str) -> list[Record]:
    """All records of a batch as :class:`~knights_tour.core.records.Record`, one per job, sorted
    by (rows, cols, start, solver, closed).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    return [Record.from_dict(d) for d in store.collect(r, batch_id)]


def stream_records(r: redis.Redis, batch_id: str) -> Iterator[dict[str, Any]]:
    """The records of a batch as JSON dicts, one per job, sorted by (rows, cols, start,
    solver, closed), read from Redis in pipelined chunks as they are consumed
    (:func:`knights_tour.store.batches.iter_records`): a batch of any size is collected in
    bounded memory.

    Raises
    ------
    KnightsTourError
        For an unknown batch (when the first record is asked for).
    """
    return store.iter_records(r, batch_id)


__all__ = [
    "stream_records", "DEFAULT_CHUNK_SIZE", "make_jobs", "chunked", "submit_batch", "resend_jobs",
    "recover_lost_jobs", "wait_for_batch", "collect",
]
