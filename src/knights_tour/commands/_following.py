"""What ``ktour run``, ``resume``, ``submit`` and ``cancel`` do once their input is checked:
open the backend, make the batch's jobs, submit or resume it, follow it to its end or leave it
(``--timeout``, Ctrl-C, a cancel from elsewhere), write its records and print the summary.

Apart from :mod:`knights_tour.commands.lifecycle`, which declares the commands and checks their
input, because of what it loads: the backend and the batches package (redis-py, psutil, Celery's
door), the job and record types (numpy) and rich's tables. ``ktour run`` imports it only once
the embedded Redis and the local workers are launched
(:func:`~knights_tour.local.launching.launch_ahead`), so these imports run while the workers
start, on the other core, instead of before them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import click
import redis

from knights_tour.batches.cancelling import cancel_batch
from knights_tour.batches.client import (
    DEFAULT_CHUNK_SIZE,
    WaitedBatch,
    make_jobs,
    resume_batch,
    send_order,
    start_or_resume,
    submit_batch,
)
from knights_tour.batches.jobs import Job, JobOptions
from knights_tour.batches.progress import CANCELLED, Params, batch_status
from knights_tour.batches.record_stream import RecordStream
from knights_tour.batches.verdict import Tally
from knights_tour.board import Board
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import JobArgs
from knights_tour.commands._records import (
    report_mismatches,
    summary_table,
    wait_with_progress,
    write_records,
)
from knights_tour.commands._shared import note, stdout_console
from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.local.backend import (
    NO_WORKERS_WARNING,
    Backend,
    no_worker_answers,
    open_backend,
    open_store,
)
from knights_tour.local.launching import Launched
from knights_tour.output.recordfile import format_for_path
from knights_tour.store.connection import REDIS_ERRORS
from knights_tour.store.urls import mask_url


def resume_hint(batch_id: str, redis_url: str | None) -> str:
    """The command that continues ``batch_id``: ``ktour resume BATCH`` and, when the batch's
    Redis was given by ``--redis``, its URL (password masked: ``redis://:***@host:6379/0``)."""
    return f"ktour resume {batch_id}" + (f" --redis {mask_url(redis_url)}" if redis_url else "")


def batch_jobs(job: JobArgs) -> tuple[list[Board], list[Job], Params, int | None]:
    """``(boards, jobs, params, chunk)`` from the job options of ``run`` / ``submit`` (their
    limits, the sizes and the solver were checked before: the options' callbacks and the
    size guard; ``chunk_size`` >= 1 or None)."""
    options = JobOptions(
        solver=job.solver,
        closed=job.closed,
        verify=job.verify_backend,
        time_limit_s=job.time_limit,
        exhaustive=job.exhaustive,
        node_limit=job.node_limit,
    )
    boards, jobs, params = make_jobs(job.sizes, options)
    return boards, jobs, params, job.chunk_size or DEFAULT_CHUNK_SIZE


@dataclass
class Outcome:
    """How a followed batch ended: the exit code, and for a complete batch the status, the
    tally of the records written and where they went (``tally`` None: left unfinished)."""

    code: ExitCode
    batch_id: str
    status: WaitedBatch | None
    """The batch's last status (None if stopped by Ctrl-C)."""
    tally: Tally | None
    out_path: str


def stopped(backend: Backend, batch_id: str, why: str, hint: str) -> None:
    """Cancel the batch the command is leaving (only its own queued tasks dropped; its
    records kept) and say so in one line: how far it got, what is kept, how to resume."""
    dropped = backend.stop_work()
    try:
        st = batch_status(backend.client, batch_id, max_missing=0)
        got = f"{st['done']}/{st['total']} jobs done"
    except (redis.RedisError, KnightsTourError):  # Redis going away: say what we know
        got = "the jobs done so far"
    drop = (
        f"its {dropped} queued task(s) dropped, other batches' untouched"
        if dropped is not None
        else "its queued tasks could not be dropped (no Redis)"
    )
    note(
        f"batch {batch_id} cancelled {why}: {got}, their records kept (ktour collect "
        f"{batch_id}); {drop}; continue with: {hint}"
    )


def follow(
    backend: Backend,
    batch_id: str,
    total: int,
    deadline: float | None,
    out: str | None,
    hint: str,
    job_keys: Sequence[str] | None = None,
    began: float | None = None,
) -> Outcome:
    """Wait for the batch until it is complete, the deadline passes (monotonic seconds),
    Ctrl-C, or a cancel from elsewhere; then write its records to ``out`` (complete only).
    Given the batch's ``job_keys``, a JSON Lines file is written while the batch runs
    (:class:`~knights_tour.batches.record_stream.RecordStream`) and put in place at its end.
    ``began``: when its submission began (unix seconds), what the line saying how long it
    took counts from (:func:`~knights_tour.commands._records.wait_with_progress`).

    Left unfinished (exit 1 for --timeout / a cancel from elsewhere, 130 for Ctrl-C), the
    outcome has no tally, after one line saying so (:func:`stopped`)."""
    out_path = out or f"results-{batch_id}.jsonl"
    stream = None
    if job_keys is not None and out_path != "-" and format_for_path(out_path) == "jsonl":
        stream = RecordStream(backend.client, batch_id, job_keys, out_path)
    check = backend.check_workers(f"batch {batch_id}", "jobs")

    def check_and_write(status: WaitedBatch) -> None:
        check(status)
        if stream is not None:
            with contextlib.suppress(*REDIS_ERRORS):  # an outage: the wait rides it out
                stream.advance()

    try:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        status = wait_with_progress(
            backend.client,
            batch_id,
            total,
            left,
            backend.url,
            check=check_and_write,
            workers=backend.worker_count,
            began=began,
        )
    except KeyboardInterrupt:
        if stream is not None:
            stream.discard()
        stopped(backend, batch_id, "by Ctrl-C", hint)
        return Outcome(ExitCode.INTERRUPTED, batch_id, None, None, out_path)
    except BaseException:
        if stream is not None:
            stream.discard()
        raise
    if status.get("state") == CANCELLED or not status["complete"]:
        if stream is not None:
            stream.discard()
    if status.get("state") == CANCELLED:
        backend.stop_work()
        note(
            f"batch {batch_id} was cancelled from elsewhere (ktour cancel): {status['done']}/"
            f"{status['total']} jobs done, their records kept (ktour collect {batch_id}); "
            f"continue with: {hint}"
        )
        return Outcome(ExitCode.NOT_OK, batch_id, status, None, out_path)
    if not status["complete"]:
        stopped(backend, batch_id, "by --timeout", hint)
        return Outcome(ExitCode.NOT_OK, batch_id, status, None, out_path)
    backend.finished()  # nothing to drop if writing the file fails
    with _records_kept(batch_id):
        if stream is not None:
            tally = stream.finish()
        else:
            tally = write_records(backend.client, batch_id, out_path, format_for_path(out_path))
    return Outcome(ExitCode.OK, batch_id, status, tally, out_path)


@contextlib.contextmanager
def _records_kept(batch_id: str) -> Iterator[None]:
    """An error writing the file (e.g. a full disk) says that the records stay in Redis."""
    try:
        yield
    except OutputPathError as exc:
        raise OutputPathError(
            f"{exc}; the records of batch {batch_id} are kept: ktour collect {batch_id} --out FILE",
            exc.errno,
        ) from None


def submit_and_follow(
    backend: Backend,
    job: JobArgs,
    fresh: bool,
    deadline: float | None,
    out: str | None,
    redis_url: str | None,
) -> Outcome:
    """``ktour run`` on an open backend: make the jobs (:func:`batch_jobs`), start the batch
    or resume the unfinished one with the same jobs and parameters (``fresh``: start over),
    say which and how long submitting took, and :func:`follow` it. Ctrl-C while it is being
    submitted cancels it (exit 130)."""
    began = time.time()  # the batch's time is counted from here, its jobs' making included
    boards, jobs, params, chunk = batch_jobs(job)
    known: list[str] = []
    resumed: list[bool] = []

    def on_id(batch_id: str) -> None:
        known.append(batch_id)
        try:  # an existing batch is resumed, even with no job recorded yet
            resumed.append(bool(batch_status(backend.client, batch_id, max_missing=0)))
        except KnightsTourError:
            resumed.append(False)
        backend.abandon_on_error(f"batch {batch_id}", lambda r: cancel_batch(r, batch_id))

    try:
        batch_id, reused, sent = start_or_resume(
            backend.url, jobs, params, chunk, fresh=fresh, on_id=on_id, began=began
        )
    except KeyboardInterrupt:
        if not known:
            raise
        stopped(backend, known[0], "by Ctrl-C", resume_hint(known[0], redis_url))
        return Outcome(ExitCode.INTERRUPTED, known[0], None, None, "")
    took = f"in {time.time() - began:.1f} s"
    if reused or any(resumed):
        note(
            f"resuming batch {batch_id}: {reused} of {len(jobs)} jobs already "
            f"recorded, not recomputed; {sent} sent to "
            f"{backend.where} {took} (--fresh starts over)"
        )
    else:
        note(
            f"batch {batch_id}: {len(jobs)} jobs on {len(boards)} board(s) submitted "
            f"to {backend.where} {took}"
        )
    return follow(
        backend,
        batch_id,
        len(jobs),
        deadline,
        out,
        resume_hint(batch_id, redis_url),
        job_keys=[job.key for job in send_order(jobs)],
        began=began,
    )


def run_batch(
    launched: Launched | None,
    redis_url: str | None,
    workers: int | None,
    work_cpu_s: float,
    job: JobArgs,
    fresh: bool,
    deadline: float | None,
    out: str | None,
) -> ExitCode:
    """``ktour run`` once its input is checked: open the backend (taking over the server and
    workers ``launched`` ahead, if any: :func:`~knights_tour.local.backend.open_backend`),
    :func:`submit_and_follow`, stop the backend, :func:`finish`."""
    with open_backend(
        redis_url, workers, notify=note, work_cpu_s=work_cpu_s, launched=launched
    ) as backend:
        outcome = submit_and_follow(backend, job, fresh, deadline, out, redis_url)
    return finish(outcome)


def resume_command(
    batch_id: str,
    workers: int | None,
    redis_url: str | None,
    chunk_size: int | None,
    deadline: float | None,
    out: str | None,
    before: Callable[[Backend], None] | None = None,
) -> ExitCode:
    """``ktour resume`` once its input is checked: open the backend without workers, call
    ``before`` with it if given (``ktour retry`` retires records there), then
    :func:`resume_and_follow`, stop the backend, :func:`finish`."""
    with open_backend(redis_url, workers, notify=note, start_workers=False) as backend:
        if before is not None:
            before(backend)
        outcome = resume_and_follow(backend, batch_id, chunk_size, deadline, out, redis_url)
    return finish(outcome)


def resume_and_follow(
    backend: Backend,
    batch_id: str,
    chunk_size: int | None,
    deadline: float | None,
    out: str | None,
    redis_url: str | None,
) -> Outcome:
    """``ktour resume`` on a backend opened without workers: an unknown batch is an error; a
    complete one is just collected; otherwise the workers are started, its jobs without a
    record that no queued task or live worker carries sent once
    (:func:`~knights_tour.batches.client.resume_batch`) and it is :func:`follow`\\ ed.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    st = batch_status(backend.client, batch_id, max_missing=0)  # unknown batch -> error
    hint = resume_hint(batch_id, redis_url)
    began = None
    if not st["complete"]:
        backend.start_workers()
        backend.abandon_on_error(f"batch {batch_id}", lambda r: cancel_batch(r, batch_id))
        began = time.time()
        try:
            reused, sent = resume_batch(
                backend.url, batch_id, chunk_size or DEFAULT_CHUNK_SIZE, began=began
            )
        except KeyboardInterrupt:
            stopped(backend, batch_id, "by Ctrl-C", hint)
            return Outcome(ExitCode.INTERRUPTED, batch_id, None, None, "")
        note(
            f"resuming batch {batch_id}: {reused} of {st['total']} jobs already "
            f"recorded, not recomputed; {sent} sent to {backend.where} "
            f"in {time.time() - began:.1f} s"
        )
    else:
        note(f"batch {batch_id} is complete ({st['done']}/{st['total']} jobs): collecting")
    return follow(backend, batch_id, st["total"], deadline, out, hint, began=began)


def cancel_command(batch_id: str, redis_url: str | None) -> None:
    """``ktour cancel``: cancel the batch (its queued tasks dropped, its records kept) and
    say how far it got and how to continue it."""
    with open_store(redis_url) as backend:
        dropped = cancel_batch(backend.client, batch_id)
        st = batch_status(backend.client, batch_id, max_missing=0)
    click.echo(
        f"batch {batch_id} cancelled: {st['done']}/{st['total']} jobs done, "
        f"{dropped} queued task(s) dropped; continue with: {resume_hint(batch_id, redis_url)}"
    )


def submit_command(url: str, job: JobArgs) -> None:
    """``ktour submit`` to the Redis at ``url`` once its input is checked and the server
    reached: warn if no worker answers, make the jobs (:func:`batch_jobs`), submit, say how
    long making and submitting took, and print the batch id alone on the last line."""
    if no_worker_answers(url):
        note(NO_WORKERS_WARNING)
    began = time.time()
    boards, jobs, params, chunk = batch_jobs(job)
    batch_id = submit_batch(url, jobs, params=params, chunk_size=chunk, began=began)
    click.echo(
        f"submitted {len(jobs)} jobs on {len(boards)} board(s) to {mask_url(url)} "
        f"in {time.time() - began:.1f} s"
    )
    click.echo(batch_id)


def finish(outcome: Outcome) -> ExitCode:
    """The end of ``run`` / ``resume`` once the backend is stopped: for a batch left
    unfinished its code; else the summary table, mismatches, problems and the batch id on the
    last line, and the verdict (0 only if every job was decided, cleanly)."""
    tally, batch_id, out_path = outcome.tally, outcome.batch_id, outcome.out_path
    if tally is None or outcome.status is None:
        return outcome.code
    console = stdout_console()
    if out_path != "-":
        console.print(summary_table(tally.rows(), f"batch {batch_id}"))
        console.print(f"{tally.records} records written to {out_path}")
    report_mismatches(tally)
    found = tally.problems(outcome.status["total"])
    for p in found:
        note(p)
    click.echo(batch_id if out_path != "-" else f"batch {batch_id}", err=out_path == "-")
    return ExitCode.OK if not found else ExitCode.NOT_OK


__all__ = [
    "Outcome",
    "batch_jobs",
    "cancel_command",
    "submit_command",
    "follow",
    "finish",
    "resume_and_follow",
    "resume_command",
    "run_batch",
    "resume_hint",
    "stopped",
    "submit_and_follow",
]
