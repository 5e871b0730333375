"""The commands that start, stop and resume batches: ``ktour run`` (a whole batch, locally by
default), ``resume``, ``submit`` and ``cancel``. One module on purpose: the four share the job
options, the size guard and the way a batch is followed and left.

The lifecycle itself (make jobs, submit, resume, cancel, wait, recover) is
:mod:`knights_tour.batches.client`; the backend (embedded Redis, local workers, signals,
dropping the queued tasks of work it leaves) is :func:`knights_tour.local.backend.open_backend`;
the estimate that asks before a big batch is :mod:`knights_tour.batches.estimate`. This
module declares the options and checks the input, loading neither rich nor numpy nor Celery to
do so (its options and checks come from :mod:`~knights_tour.commands._options` and
:mod:`~knights_tour.commands._checks`, not ``_shared``), so bad input is refused at once; a
Redis URL given is checked and reached here too. What follows once the backend is up (make
the jobs, submit or resume, wait or leave, write the records, the summary) is
:mod:`knights_tour.commands._following`, imported only then: ``ktour run`` loads it while the
embedded Redis and its workers start, so none of them waits for its imports.

Leaving a batch unfinished - ``--timeout``, Ctrl-C (or SIGTERM), ``ktour cancel`` from another
shell - cancels it: only its own queued tasks are dropped (other batches sharing the queue
keep theirs), local workers are stopped at once, its records stay, and one line says how far
it got and how to continue (``ktour resume BATCH``). Exit 1 for --timeout and a cancel from
elsewhere, 130 for Ctrl-C.
"""

from __future__ import annotations

import time
from types import ModuleType

import click

from knights_tour.batches.estimate import (
    BatchEstimate,
    batch_concerns,
    describe_batch,
    estimate_batch,
    parse_sizes,
)
from knights_tour.commands._checks import (
    check_out_path,
    confirm_big,
    require_positive,
    require_workers,
)
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import (
    JobArgs,
    job_options,
    redis_option,
    timeout_option,
    url_redis_option,
    workers_option,
    yes_option,
)
from knights_tour.errors import KnightsTourError
from knights_tour.local.launching import configured_redis_url, launch_ahead
from knights_tour.settings import get_settings
from knights_tour.solvers import check_solver_name
from knights_tour.store.urls import check_redis_url


def _following() -> ModuleType:
    """:mod:`knights_tour.commands._following`, imported on first use: it loads the backend,
    the batches package and the record types, which ``ktour run`` imports only once its server
    and workers are launched."""
    from knights_tour.commands import _following

    return _following


def _reach(redis_url: str | None) -> None:
    """Check the Redis URL given (``--redis``, else ``KT_REDIS_URL``; none: the embedded one)
    and reach it (one PING, :func:`~knights_tour.store.connection.connect`) before
    :func:`_following` loads the batch machinery: a malformed URL is refused without redis-py,
    an unreachable server without Celery or numpy. The errors are those of the backend that
    connects next."""
    url = configured_redis_url(redis_url)
    if url is None:
        return
    check_redis_url(url)
    from knights_tour.store.connection import connect  # redis-py, for a given URL only

    connect(url).close()


def _require_chunk_size(chunk_size: int | None) -> None:
    """``--chunk-size N``: at least 1 (None: sized by the jobs' estimated cost)."""
    if chunk_size is not None and chunk_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--chunk-size")


def _guard(job: JobArgs, workers: int | None, yes: bool) -> BatchEstimate:
    """Estimate ``job``'s batch before any job is made; above the thresholds ask (or refuse
    without a terminal and --yes). Bad input is reported first, as without the guard.
    Returns the estimate."""
    check_solver_name(job.solver)
    k = workers or get_settings().workers
    est = estimate_batch(parse_sizes(job.sizes), job.solver, job.verify_backend, job.time_limit)
    confirm_big(describe_batch(est, k), batch_concerns(est, k), yes)
    return est


_out_option = click.option(
    "--out",
    "out",
    default=None,
    metavar="FILE",
    help="File for all records: JSON Lines, or Parquet / CSV if FILE ends in .parquet / "
    ".csv (default results-<batch>.jsonl; '-' = stdout).",
)
_timeout_option = timeout_option(
    "Give up S seconds after the start: the batch is cancelled (only its own queued "
    "tasks dropped), its records kept, and 'ktour resume BATCH' continues it; exit 1."
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
    job: JobArgs,
    workers: int | None,
    out: str | None,
    redis_url: str | None,
    timeout: float | None,
    fresh: bool = False,
    yes: bool = False,
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
    _require_chunk_size(job.chunk_size)
    check_out_path(out or "results-<batch>.jsonl")  # the default name is in this directory
    est = _guard(job, workers, yes)
    _reach(redis_url)
    deadline = None if timeout is None else began + timeout
    # The embedded server and the workers first: they start while this process loads the rest.
    launched = launch_ahead(redis_url, workers, est.cpu_s)
    try:
        following = _following()
    except BaseException:
        if launched is not None:
            launched.kill()
        raise
    return following.run_batch(launched, redis_url, workers, est.cpu_s, job, fresh, deadline, out)


_resend_chunk_option = click.option(
    "--chunk-size",
    type=int,
    default=None,
    metavar="N",
    help="Jobs per Celery task for the jobs sent again (default: sized by the "
    "jobs' estimated cost).",
)
"""``--chunk-size N`` of the commands that send an existing batch's jobs again (resume,
retry)."""


@click.command()
@click.argument("batch_id", metavar="BATCH")
@workers_option
@_out_option
@redis_option
@_timeout_option
@_resend_chunk_option
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
    _require_chunk_size(chunk_size)
    check_out_path(out or "results-<batch>.jsonl")
    _reach(redis_url)
    deadline = None if timeout is None else began + timeout
    return _following().resume_command(batch_id, workers, redis_url, chunk_size, deadline, out)


@click.command()
@click.argument("batch_id", metavar="BATCH")
@redis_option
def cancel(batch_id: str, redis_url: str | None) -> ExitCode:
    """Cancel BATCH: drop its queued tasks; workers skip its jobs and nothing re-sends them.

    Records already stored stay ('ktour collect BATCH'); 'ktour resume BATCH' (or 'ktour run'
    with the same arguments) continues it. Other batches' tasks are left alone. A 'ktour run'
    waiting for it stops and exits 1.
    """
    _reach(redis_url)
    _following().cancel_command(batch_id, redis_url)
    return ExitCode.OK


@click.command()
@job_options
@url_redis_option
@yes_option
def submit(job: JobArgs, redis_url: str | None, yes: bool = False) -> ExitCode:
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
    _require_chunk_size(job.chunk_size)
    _guard(job, None, yes)
    _reach(url)
    _following().submit_command(url, job)
    return ExitCode.OK


__all__ = ["run", "resume", "submit", "cancel"]
