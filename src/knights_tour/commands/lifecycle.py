"""The commands that start, stop and resume batches: ``ktour run`` (a whole batch, locally by
default), ``resume``, ``submit`` and ``cancel``. One module on purpose: the four share the job
options, the size guard and the way a batch is followed and left.

The lifecycle itself (make jobs, submit, resume, cancel, wait, recover) is
:mod:`knights_tour.service.batches`; the backend (embedded Redis, local workers, signals,
dropping the queued tasks of work it leaves) is :func:`knights_tour.service.local.open_backend`;
the estimate that asks before a big batch is :mod:`knights_tour.service.estimate`. This
module declares the options and renders.

Leaving a batch unfinished - ``--timeout``, Ctrl-C (or SIGTERM), ``ktour cancel`` from another
shell - cancels it: only its own queued tasks are dropped (other batches sharing the queue
keep theirs), local workers are stopped at once, its records stay, and one line says how far
it got and how to continue (``ktour resume BATCH``). Exit 1 for --timeout and a cancel from
elsewhere, 130 for Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click
import redis

from knights_tour.commands._records import (
    report_mismatches,
    summary_table,
    wait_with_progress,
    write_records,
)
from knights_tour.commands._shared import (
    ExitCode,
    check_out_path,
    confirm_big,
    node_limit_option,
    note,
    redis_option,
    require_positive,
    require_workers,
    solver_option,
    stdout_console,
    time_limit_option,
    url_redis_option,
    workers_option,
    yes_option,
)
from knights_tour.core.jobs import JobOptions
from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.service.batches import (
    DEFAULT_CHUNK_SIZE,
    make_jobs,
    resume_batch,
    start_or_resume,
    submit_batch,
)
from knights_tour.service.cancelling import cancel_batch
from knights_tour.service.estimate import (
    BatchEstimate,
    batch_concerns,
    describe_batch,
    estimate_batch,
    parse_sizes,
)
from knights_tour.service.local import (
    NO_WORKERS_WARNING,
    Backend,
    configured_redis_url,
    no_worker_answers,
    open_backend,
    open_store,
)
from knights_tour.service.verdict import Tally
from knights_tour.settings import get_settings
from knights_tour.solvers import check_solver_name
from knights_tour.store.batches import CANCELLED, batch_status
from knights_tour.store.connection import connect, mask_url


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by ``run`` and ``submit`` (what each job asks)."""
    opts: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option(
            "--sizes",
            "sizes",
            multiple=True,
            required=True,
            metavar="LIST",
            help="Boards: 5-12 (range of n x n), 8,10, 6x8; repeat to add more.",
        ),
        solver_option,
        click.option(
            "--verify",
            "verify",
            type=click.Choice(["none", "cpsat"]),
            default="none",
            show_default=True,
            help="Cross-check every job with the CP-SAT model.",
        ),
        click.option("--closed", is_flag=True, help="Ask for closed (re-entrant) tours."),
        click.option(
            "--exhaustive",
            is_flag=True,
            help="Engine searches without a node budget (proves no_tour).",
        ),
        time_limit_option,
        node_limit_option,
        click.option(
            "--chunk-size",
            type=int,
            default=None,
            metavar="N",
            help="Jobs per Celery task (default: sized by the jobs' estimated cost).",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _jobs(sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size):
    """``(boards, jobs, params, chunk)`` from the job options (their limits were checked by
    the options themselves)."""
    options = JobOptions(
        solver=solver,
        closed=closed,
        verify=None if verify == "none" else verify,
        time_limit_s=time_limit,
        exhaustive=exhaustive,
        node_limit=node_limit,
    )
    boards, jobs, params = make_jobs(sizes, options)
    if chunk_size is not None and chunk_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--chunk-size")
    return boards, jobs, params, chunk_size or DEFAULT_CHUNK_SIZE


def _guard(
    sizes: tuple[str, ...],
    solver: str,
    verify: str,
    time_limit: float | None,
    workers: int | None,
    yes: bool,
) -> BatchEstimate:
    """Estimate the batch before any job is made; above the thresholds ask (or refuse
    without a terminal and --yes). Bad input is reported first, as without the guard.
    Returns the estimate."""
    check_solver_name(solver)
    k = workers or get_settings().workers
    est = estimate_batch(
        parse_sizes(sizes), solver, None if verify == "none" else verify, time_limit
    )
    confirm_big(describe_batch(est, k), batch_concerns(est, k), yes)
    return est


def _stopped(backend: Backend, batch_id: str, why: str, hint: str) -> None:
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


def _follow(
    backend: Backend, batch_id: str, total: int, deadline: float | None, out: str | None, hint: str
) -> tuple[ExitCode, dict[str, Any], Tally | None, str]:
    """Wait for the batch until it is complete, the deadline passes (monotonic seconds),
    Ctrl-C, or a cancel from elsewhere; then write its records to ``out`` (complete only).

    Returns ``(code, status, tally, out_path)``: ``tally`` None when the batch was left
    unfinished (exit 1 for --timeout / a cancel from elsewhere, 130 for Ctrl-C), after one
    line saying so (:func:`_stopped`)."""
    out_path = out or f"results-{batch_id}.jsonl"
    try:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        status = wait_with_progress(
            backend.client,
            batch_id,
            total,
            left,
            backend.url,
            check=backend.check_workers(f"batch {batch_id}", "jobs"),
        )
    except KeyboardInterrupt:
        _stopped(backend, batch_id, "by Ctrl-C", hint)
        return ExitCode.INTERRUPTED, {}, None, out_path
    if status.get("state") == CANCELLED:
        backend.stop_work()
        note(
            f"batch {batch_id} was cancelled from elsewhere (ktour cancel): {status['done']}/"
            f"{status['total']} jobs done, their records kept (ktour collect {batch_id}); "
            f"continue with: {hint}"
        )
        return ExitCode.NOT_OK, status, None, out_path
    if not status["complete"]:
        _stopped(backend, batch_id, "by --timeout", hint)
        return ExitCode.NOT_OK, status, None, out_path
    backend.finished()  # nothing to drop if writing the file fails
    try:
        tally = write_records(
            backend.client,
            batch_id,
            out_path,
            "parquet" if out_path.endswith(".parquet") else "jsonl",
        )
    except OutputPathError as exc:  # e.g. a full disk: the records stay in Redis
        raise OutputPathError(
            f"{exc}; the records of batch {batch_id} are kept: ktour collect {batch_id} --out FILE",
            exc.errno,
        ) from None
    return ExitCode.OK, status, tally, out_path


def _finish(batch_id: str, status: dict[str, Any], tally: Tally, out_path: str) -> ExitCode:
    """Summary table, mismatches, problems and the batch id on the last line; the verdict."""
    console = stdout_console()
    if out_path != "-":
        console.print(summary_table(tally.rows(), f"batch {batch_id}"))
        console.print(f"{tally.records} records written to {out_path}")
    report_mismatches(tally)
    found = tally.problems(status["total"])
    for p in found:
        note(p)
    click.echo(batch_id if out_path != "-" else f"batch {batch_id}", err=out_path == "-")
    return ExitCode.OK if not found else ExitCode.NOT_OK


def _resume_hint(batch_id: str, redis_url: str | None) -> str:
    return f"ktour resume {batch_id}" + (" --redis URL" if redis_url else "")


_out_option = click.option(
    "--out",
    "out",
    default=None,
    metavar="FILE",
    help="File for all records: JSON Lines, or Parquet if FILE ends in .parquet "
    "(default results-<batch>.jsonl; '-' = stdout).",
)
_timeout_option = click.option(
    "--timeout",
    "timeout",
    type=float,
    default=None,
    metavar="S",
    help="Give up S seconds after the start: the batch is cancelled (only its own queued "
    "tasks dropped), its records kept, and 'ktour resume BATCH' continues it; exit 1.",
)


@click.command()
@job_options
@workers_option
@_out_option
@redis_option
@_timeout_option
@click.option(
    "--fresh",
    is_flag=True,
    help="Start a new batch even if an unfinished one with the same arguments exists.",
)
@yes_option
def run(
    sizes,
    solver,
    verify,
    closed,
    exhaustive,
    time_limit,
    node_limit,
    chunk_size,
    workers,
    out,
    redis_url,
    timeout,
    fresh=False,
    yes=False,
) -> ExitCode:
    """Run a batch: one job per start square of every board, in parallel, and collect it.

    Without --redis (and KT_REDIS_URL) an embedded Redis is started with its data under the
    data dir (KT_DATA_DIR), plus K local Celery workers; both are shut down at the end, Ctrl-C
    included. An unfinished batch with the same jobs and parameters (made by run, submit or
    the schedule; cancelled, timed out or abandoned) is resumed: jobs already recorded are not
    recomputed (--fresh starts over). A batch estimated above KT_CONFIRM_JOBS,
    KT_CONFIRM_OUTPUT_MB or KT_CONFIRM_HOURS asks first (--yes does not ask; without a
    terminal it is refused). Prints a summary table per board, writes every record, and prints
    the batch id on the last line. Exit 0 only if every job was decided (found / no_tour) with
    no error and no CP-SAT mismatch; 1 otherwise, and when stopped by --timeout or a cancel
    from elsewhere (records kept, 'ktour resume BATCH' continues); 2 on bad input; 130 on
    Ctrl-C (the batch is cancelled, its records kept).
    """
    began = time.monotonic()
    require_positive(timeout, "--timeout")
    require_workers(workers, redis_url)
    check_out_path(out or "results-<batch>.jsonl")  # the default name is in this directory
    est = _guard(sizes, solver, verify, time_limit, workers, yes)
    boards, jobs, params, chunk = _jobs(
        sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size
    )
    deadline = None if timeout is None else began + timeout
    with open_backend(redis_url, workers, notify=note, work_cpu_s=est.cpu_s) as backend:
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
            batch_id, reused = start_or_resume(
                backend.url, jobs, params, chunk, fresh=fresh, on_id=on_id
            )
        except KeyboardInterrupt:
            if not known:
                raise
            _stopped(backend, known[0], "by Ctrl-C", _resume_hint(known[0], redis_url))
            return ExitCode.INTERRUPTED
        if reused or any(resumed):
            note(
                f"resuming batch {batch_id}: {reused} of {len(jobs)} jobs already "
                f"recorded, not recomputed; {len(jobs) - reused} sent to "
                f"{backend.where} (--fresh starts over)"
            )
        else:
            note(
                f"batch {batch_id}: {len(jobs)} jobs on {len(boards)} board(s) submitted "
                f"to {backend.where}"
            )
        code, status, tally, out_path = _follow(
            backend, batch_id, len(jobs), deadline, out, _resume_hint(batch_id, redis_url)
        )
    if tally is None:
        return code
    return _finish(batch_id, status, tally, out_path)


@click.command()
@click.argument("batch_id", metavar="BATCH")
@workers_option
@_out_option
@redis_option
@_timeout_option
@click.option(
    "--chunk-size",
    type=int,
    default=None,
    metavar="N",
    help="Jobs per Celery task for the jobs sent again (default: sized by the "
    "jobs' estimated cost).",
)
def resume(batch_id, workers, out, redis_url, timeout, chunk_size) -> ExitCode:
    """Resume BATCH: send again only its jobs with no record, wait, and collect it.

    Any unfinished batch: made by run, submit or the schedule; cancelled, timed out, or
    abandoned by a process that died. Its jobs come from Redis, so its arguments are not
    needed; its tasks still queued are dropped first (no job runs twice). As for 'ktour run':
    without --redis the embedded Redis and K local workers; a summary table, every record
    written, the batch id on the last line, and the same exit codes. A complete batch is just
    collected.
    """
    began = time.monotonic()
    require_positive(timeout, "--timeout")
    require_workers(workers, redis_url)
    if chunk_size is not None and chunk_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--chunk-size")
    check_out_path(out or "results-<batch>.jsonl")
    deadline = None if timeout is None else began + timeout
    with open_backend(redis_url, workers, notify=note, start_workers=False) as backend:
        st = batch_status(backend.client, batch_id, max_missing=0)  # unknown batch -> error
        if not st["complete"]:
            backend.start_workers()
            backend.abandon_on_error(f"batch {batch_id}", lambda r: cancel_batch(r, batch_id))
            try:
                reused, sent = resume_batch(backend.url, batch_id, chunk_size or DEFAULT_CHUNK_SIZE)
            except KeyboardInterrupt:
                _stopped(backend, batch_id, "by Ctrl-C", _resume_hint(batch_id, redis_url))
                return ExitCode.INTERRUPTED
            note(
                f"resuming batch {batch_id}: {reused} of {st['total']} jobs already "
                f"recorded, not recomputed; {sent} sent to {backend.where}"
            )
        else:
            note(f"batch {batch_id} is complete ({st['done']}/{st['total']} jobs): collecting")
        code, status, tally, out_path = _follow(
            backend, batch_id, st["total"], deadline, out, _resume_hint(batch_id, redis_url)
        )
    if tally is None:
        return code
    return _finish(batch_id, status, tally, out_path)


@click.command()
@click.argument("batch_id", metavar="BATCH")
@redis_option
def cancel(batch_id: str, redis_url: str | None) -> ExitCode:
    """Cancel BATCH: drop its queued tasks; workers skip its jobs and nothing re-sends them.

    Records already stored stay ('ktour collect BATCH'); 'ktour resume BATCH' (or 'ktour run'
    with the same arguments) continues it. Other batches' tasks are left alone. A 'ktour run'
    waiting for it stops and exits 1.
    """
    with open_store(redis_url) as backend:
        dropped = cancel_batch(backend.client, batch_id)
        st = batch_status(backend.client, batch_id, max_missing=0)
    click.echo(
        f"batch {batch_id} cancelled: {st['done']}/{st['total']} jobs done, "
        f"{dropped} queued task(s) dropped; continue with: "
        f"{_resume_hint(batch_id, redis_url)}"
    )
    return ExitCode.OK


@click.command()
@job_options
@url_redis_option
@yes_option
def submit(
    sizes,
    solver,
    verify,
    closed,
    exhaustive,
    time_limit,
    node_limit,
    chunk_size,
    redis_url,
    yes=False,
) -> ExitCode:
    """Submit a batch to the workers listening on a Redis server and return at once.

    Needs --redis or KT_REDIS_URL (for a local batch use 'ktour run'). A batch estimated above
    KT_CONFIRM_JOBS, KT_CONFIRM_OUTPUT_MB or KT_CONFIRM_HOURS asks first (--yes does not
    ask). Prints the batch id alone on the last line of stdout; follow it with 'ktour status'
    / 'ktour collect'; 'ktour resume BATCH' continues it if it is cancelled.
    """
    url = configured_redis_url(redis_url)
    if url is None:
        raise KnightsTourError(
            "submit needs a Redis URL with workers listening (--redis URL or KT_REDIS_URL); "
            "for a local batch use 'ktour run'"
        )
    _guard(sizes, solver, verify, time_limit, None, yes)
    boards, jobs, params, chunk = _jobs(
        sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size
    )
    connect(url).close()
    if no_worker_answers(url):
        note(NO_WORKERS_WARNING)
    batch_id = submit_batch(url, jobs, params=params, chunk_size=chunk)
    click.echo(f"submitted {len(jobs)} jobs on {len(boards)} board(s) to {mask_url(url)}")
    click.echo(batch_id)
    return ExitCode.OK


__all__ = ["run", "resume", "submit", "cancel", "job_options"]
