"""The batch lifecycle on the client side: make jobs, submit, wait (recovering lost jobs),
collect (cancelling one is :mod:`knights_tour.batches.cancelling`).

``ktour run``/``submit``/``collect --wait`` and the beat sweep all go through these functions;
the worker side of a batch is :mod:`knights_tour.batches.execution`. Typical use::

    boards, jobs, params = make_jobs(["5-8"], JobOptions())
    batch_id = submit_batch(url, jobs, params)
    status = wait_for_batch(r, batch_id, recover_url=url)
    for record in stream_records(r, batch_id):   # dicts, sorted by board and start
        ...
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Unpack

import redis

from knights_tour.batches import progress, store
from knights_tour.batches.cancelling import queued_items
from knights_tour.batches.chunking import plan_chunks
from knights_tour.batches.jobs import Job, JobOptions, make_batch_jobs, wire_form
from knights_tour.batches.progress import BatchProgress, Params
from knights_tour.board import Board, parse_board_list
from knights_tour.errors import InvalidJobError, KnightsTourError
from knights_tour.solvers import check_solver_name
from knights_tour.store import keys, memory
from knights_tour.store.connection import connect
from knights_tour.store.waiting import WaitOptions, wait_announced
from knights_tour.tours.record import Record
from knights_tour.worker import messages, recovery
from knights_tour.worker.lazy import celery_worker
from knights_tour.worker.ledger import Ledger, activate
from knights_tour.worker.messages import ItemDict
from knights_tour.worker.orphans import take_for_resume


class WaitedBatch(BatchProgress):
    """A batch's progress as :func:`wait_for_batch` polls it: with its lifecycle ``state``
    (``"cancelled"`` or None) and ``writes_refused`` (Redis's reason while it refuses writes
    and the batch is not complete, else None)."""

    state: str | None
    writes_refused: str | None


DEFAULT_CHUNK_SIZE: int | None = None
"""Jobs per task by default: None, i.e. chunks sized by the jobs' estimated cost
(:func:`knights_tour.batches.chunking.plan_chunks`). What a task costs Redis is paid per chunk,
so small jobs travel in large chunks (figures in ``benchmarks/README.md``); each job still gets
its own record key."""


def make_jobs(sizes: Sequence[str], options: JobOptions) -> tuple[list[Board], list[Job], Params]:
    """The jobs of a batch: one per start square of every board named in ``sizes``.

    Parameters
    ----------
    sizes : sequence of str
        Board lists as :func:`knights_tour.board.parse_board_list` reads them (``"5-12"``,
        ``"8,10"``, ``"6x8"``); a board named twice is kept once, in first-seen order.
    options : JobOptions
        The options of every job (solver, closed, verify, limits).

    Returns
    -------
    (boards, jobs, params)
        The distinct boards, the jobs (boards in order, squares row-major) and the JSON-ready
        ``params`` stored in the batch meta (``sizes``: the board list, ``sizes_asked``:
        ``sizes`` as given, joined by commas, and the options' fields).

    Raises
    ------
    UnknownSolverError, InvalidBoardError, InvalidJobError
        On bad input (``time_limit_s`` <= 0 included).
    """
    check_solver_name(options.solver)
    boards: list[Board] = []
    for spec in sizes:
        for b in parse_board_list(spec):
            if b not in boards:
                boards.append(b)
    if options.time_limit_s is not None and options.time_limit_s <= 0:
        raise InvalidJobError(f"the time limit must be positive, got {options.time_limit_s}")
    jobs = make_batch_jobs(boards, options)
    params: Params = {
        "sizes": ",".join(b.label for b in boards),
        "sizes_asked": ",".join(sizes),  # as the user wrote them, for status and listings
        **options.to_dict(),
    }
    return boards, jobs, params


def submit_batch(
    redis_url: str,
    jobs: Sequence[Job],
    params: Mapping[str, Any] | None = None,
    chunk_size: int | None = DEFAULT_CHUNK_SIZE,
    batch_id: str | None = None,
    only_missing: bool = False,
    largest_first: bool = True,
    began: float | None = None,
    digest: str | None = None,
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
    chunk_size : int, optional
        Jobs per Celery task (each job still gets its own record key); None: sized by the
        jobs' estimated cost (:func:`knights_tour.batches.chunking.plan_chunks`).
    batch_id : str, optional
        Add the jobs to this existing batch instead of a new one (a job that already has a
        record is not run again; nothing is duplicated).
    only_missing : bool
        With ``batch_id``: send only the jobs that have no record yet (resume a batch).
    largest_first : bool
        Send the jobs of the largest boards first (stable otherwise), so the slowest jobs do
        not all wait at the end of the queue while other workers idle.
    began : float, optional
        Unix seconds when the submission began (before its jobs were made; default: now),
        noted with the time its last task was sent (:func:`store.note_submission`).
    digest : str, optional
        :func:`batch_digest` of ``jobs`` and ``params``, if the caller has it.

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
    began = time.time() if began is None else began
    if chunk_size is not None and chunk_size < 1:
        raise KnightsTourError(f"chunk size must be at least 1, got {chunk_size}")
    r = connect(redis_url)
    is_new = batch_id is None or not r.exists(keys.batch(batch_id))
    batch_id = store.create_batch(r, jobs, params, batch_id=batch_id)
    if is_new and params is not None:
        # remembered for resume: `ktour run` with the same jobs and params continues it
        store.remember_batch(r, digest or batch_digest(jobs, params), batch_id)
    activate(r, Ledger.for_batch(batch_id))
    to_send = list(jobs)
    if only_missing:
        status = progress.batch_status(r, batch_id, max_missing=10**9)
        missing = set(status["missing_keys"])
        to_send = [j for j in to_send if j.key in missing]
    _send_jobs(redis_url, batch_id, to_send, chunk_size, largest_first)
    store.note_submission(r, batch_id, began, time.time())
    r.close()
    return batch_id


def send_order(jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` in the order a batch's tasks are sent: the largest boards first (their jobs
    take longest, so the batch's end is not held up by one of them started last), the given
    order within a board size."""
    return sorted(jobs, key=lambda j: j.rows * j.cols, reverse=True)


def _send_jobs(
    redis_url: str,
    batch_id: str,
    jobs: Sequence[Job],
    chunk_size: int | None,
    largest_first: bool = True,
) -> None:
    """Put ``jobs`` of ``batch_id`` on the queue in run-jobs tasks at
    :data:`knights_tour.worker.messages.BATCH_PRIORITY` (chunks: :func:`plan_chunks`), pipelined."""
    to_send = send_order(jobs) if largest_first else list(jobs)
    with celery_worker().sending(redis_url) as send:
        for chunk in plan_chunks(to_send, chunk_size):
            send(
                messages.TASK_RUN_JOBS,
                [batch_id, [wire_form(j) for j in chunk]],
                priority=messages.BATCH_PRIORITY,
            )


def resend_jobs(redis_url: str, batch_id: str, job_dicts: list[ItemDict]) -> None:
    """Put one run-jobs task for ``job_dicts`` of ``batch_id`` on the queue (JSON), at
    :data:`knights_tour.worker.messages.RECOVERY_PRIORITY`, so it runs before the batch's
    still-queued jobs."""
    celery_worker().send(
        messages.TASK_RUN_JOBS,
        [batch_id, job_dicts],
        url=redis_url,
        priority=messages.RECOVERY_PRIORITY,
    )


def recover_lost_jobs(r: redis.Redis, redis_url: str, batch_id: str) -> list[str]:
    """Re-send the jobs of ``batch_id`` lost with a worker or a Redis restart; returns their
    keys (:func:`knights_tour.worker.recovery.recover`). :func:`wait_for_batch` calls it on
    every poll when given ``recover_url``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """

    def send(bid: str, dicts: list[ItemDict]) -> None:
        resend_jobs(redis_url, bid, dicts)

    return recovery.recover(r, Ledger.for_batch(batch_id), send)


def wait_for_batch(
    r: redis.Redis,
    batch_id: str,
    *,
    recover_url: str | None = None,
    **wait: Unpack[WaitOptions[WaitedBatch]],
) -> WaitedBatch:
    """Wait until every job of ``batch_id`` has a record
    (:func:`~knights_tour.store.waiting.wait_announced`).

    Parameters
    ----------
    r : redis.Redis
    batch_id : str
    recover_url : str, optional
        The broker URL: with it, jobs lost with their worker are re-sent on every poll
        (:func:`recover_lost_jobs`).
    **wait
        ``timeout_s``, ``hooks``, ``poll_s``, ``outage_s``
        (:class:`~knights_tour.store.waiting.WaitOptions`); after ``timeout_s`` the returned
        status has ``complete`` False.

    Returns
    -------
    WaitedBatch
        The last :func:`knights_tour.batches.progress.batch_status`, plus ``state``
        (``"cancelled"`` or None; a cancelled batch ends the wait), ``writes_refused``.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    BackendUnavailableError
        If Redis stayed unreachable for ``outage_s`` seconds.
    """

    def status_fn() -> WaitedBatch:
        # Polls read the batch's tally, not every job; every job is looked at only when the
        # tally says the batch is complete (or when it cannot tell).
        status = progress.batch_progress(r, batch_id)
        if status is None or status["complete"]:
            status = progress.batch_status(r, batch_id)
        refused = None if status["complete"] else memory.writes_refused(r)
        return {**status, "state": progress.batch_state(r, batch_id), "writes_refused": refused}

    return wait_announced(
        r,
        keys.batch_events(batch_id),
        status_fn,
        _ended,
        lambda url: recover_lost_jobs(r, url, batch_id),
        recover_url=recover_url,
        **wait,
    )


def _ended(status: WaitedBatch) -> bool:
    """Every job has a record, or the batch was cancelled (nothing more will come)."""
    return bool(status["complete"]) or status.get("state") == progress.CANCELLED


# -- lifecycle: resume and cancel -----------------------------------------------------------

_NOT_ASKED = frozenset({"schedule", "sizes_asked"})
"""Params that say who asked for a batch or how, not what it computes: left out of its digest,
so ``ktour run`` with a sweep's arguments resumes the sweep's unfinished batch, and
``--sizes 5-8`` resumes a batch asked for as ``--sizes 5,6,7,8``."""


def batch_digest(jobs: Sequence[Job], params: Mapping[str, Any]) -> str:
    """A deterministic key for "the same batch asked again": SHA-256 of the sorted job keys
    and the params (JSON, sorted keys; not :data:`_NOT_ASKED`, e.g. the schedule entry's
    name). The Redis target is implicit: the pointer is stored in the Redis the batch runs
    on."""
    asked = {k: v for k, v in params.items() if k not in _NOT_ASKED}
    text = json.dumps(
        {"jobs": sorted(j.key for j in jobs), "params": asked}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def start_or_resume(
    redis_url: str,
    jobs: Sequence[Job],
    params: Mapping[str, Any],
    chunk_size: int | None = DEFAULT_CHUNK_SIZE,
    fresh: bool = False,
    on_id: Callable[[str], None] | None = None,
    began: float | None = None,
) -> tuple[str, int, int]:
    """Resume the latest unfinished batch asked for with the same ``jobs`` and ``params``
    (made by ``ktour run``, ``ktour submit`` or a schedule sweep; cancelled, timed out or
    abandoned), sending only its jobs without a record that no queued task or live worker
    carries (:func:`resume_batch`); else (or with
    ``fresh``) submit a new batch (:func:`submit_batch`).

    on_id : callable, optional
        Called with the batch id as soon as it is known, before any task is sent (so an
        interrupt while sending can still cancel the batch).
    began : float, optional
        As for :func:`submit_batch`.

    Returns
    -------
    (batch_id, reused, sent)
        ``reused``: jobs already recorded, not sent again (0 for a new batch); ``sent``: jobs
        sent now (all of a new batch's).

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached.
    """
    digest = batch_digest(jobs, params)
    r = connect(redis_url)
    try:
        old = None if fresh else store.resumable_batch(r, digest)
        if old is not None and not progress.batch_status(r, old, max_missing=0)["complete"]:
            if on_id is not None:
                on_id(old)
            reused, sent = resume_batch(redis_url, old, chunk_size, began=began)
            return old, reused, sent
        batch_id = store.new_batch_id()
        if on_id is not None:
            on_id(batch_id)
        submit_batch(redis_url, jobs, params, chunk_size, batch_id, began=began, digest=digest)
        return batch_id, 0, len(jobs)
    finally:
        r.close()


def resume_batch(
    redis_url: str,
    batch_id: str,
    chunk_size: int | None = DEFAULT_CHUNK_SIZE,
    began: float | None = None,
) -> tuple[int, int]:
    """Resume ``batch_id``, whoever made it and however it stopped (cancelled, timed out,
    abandoned by a process that died): its ``cancelled`` state is cleared and each job without
    a record that nothing carries any more is sent once (from the jobs stored with the batch,
    so the original arguments are not needed). A complete batch is left as it is. A job whose
    record was lost from Redis while its status stayed (an evicting server) is missing, and
    sent again; the tally is counted again where it does not add up
    (:func:`knights_tour.batches.store.repair_results`).

    Not sent again: a job a queued task of the batch carries (it runs when the task is taken;
    a cancel drops the queued tasks, so after one they are sent again), and a job held by a
    live lease (a worker runs it now; recovery re-sends it if that worker dies). A job claimed
    by a worker whose lease is gone is released and sent as a fresh start, its deaths
    forgotten, in the same script call that tells recovery to leave it alone
    (:func:`knights_tour.worker.orphans.take_for_resume`): a resume and a recovery pass never
    both send it. ``began``: as for :func:`submit_batch`.

    Returns
    -------
    (reused, sent)
        Jobs already recorded (kept, not recomputed) and jobs sent.

    Raises
    ------
    KnightsTourError
        For an unknown batch, a ``chunk_size`` < 1, or jobs lost from the batch's job hash.
    CorruptKeyError
        If a key of the batch cannot be read (its meta, a job, a key of another type).
    BackendUnavailableError
        If Redis cannot be reached.
    """
    began = time.time() if began is None else began
    if chunk_size is not None and chunk_size < 1:
        raise KnightsTourError(f"chunk size must be at least 1, got {chunk_size}")
    r = connect(redis_url)
    try:
        store.repair_results(r, batch_id)  # unknown batch -> error; lost records -> missing
        st = progress.batch_status(r, batch_id, max_missing=10**9)
        if st["lost_jobs"]:
            raise KnightsTourError(
                f"batch {batch_id} lost {st['lost_jobs']} of its jobs from Redis key "
                f"{keys.batch_jobs(batch_id)} (an evicting Redis?): they cannot be resumed; "
                f"run the batch again (ktour run with its arguments)"
            )
        if st["complete"]:
            return int(st["done"]), 0
        led = Ledger.for_batch(batch_id)
        was_cancelled = progress.batch_state(r, batch_id) == progress.CANCELLED
        queued = _job_keys(queued_items(r, batch_id))
        candidates = [k for k in st["missing_keys"] if k not in queued]
        # While cancelled, no recovery pass touches the batch, and every message of it was
        # dropped: a re-send mark then means nothing.
        taken = set(take_for_resume(r, led, candidates, honour_resends=not was_cancelled))
        store.set_batch_state(r, batch_id, None)
        jobs = store.batch_jobs(r, batch_id)
        store.create_batch(r, jobs, batch_id=batch_id)  # keeps the batch's keys alive
        activate(r, led)
        _send_jobs(redis_url, batch_id, [j for j in jobs if j.key in taken], chunk_size)
        store.note_submission(r, batch_id, began, time.time())
        return int(st["done"]), len(taken)
    finally:
        r.close()


def _job_keys(job_dicts: Sequence[Any]) -> set[str]:
    """The keys of the job dicts among ``job_dicts`` (a message's items); a dict that is not
    a valid job (:meth:`Job.from_dict`) is skipped."""
    found = set()
    for d in job_dicts:
        try:
            found.add(Job.from_dict(d).key)
        except KnightsTourError:
            continue
    return found


def stream_records(r: redis.Redis, batch_id: str) -> Iterator[Record]:
    """The records of a batch, one per job, sorted by (rows, cols, start, solver, closed), read
    from Redis a page at a time as they are consumed
    (:func:`knights_tour.batches.store.iter_records`): a batch of any size is collected in
    bounded memory.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    return store.iter_records(r, batch_id)


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "make_jobs",
    "submit_batch",
    "send_order",
    "resend_jobs",
    "recover_lost_jobs",
    "wait_for_batch",
    "batch_digest",
    "start_or_resume",
    "resume_batch",
    "stream_records",
]
