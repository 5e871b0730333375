"""The ``ktour`` command line: the click group, the commands registered on it, and
:func:`main`, which turns every user error into one line and an exit code.

The commands live in :mod:`knights_tour.commands` (one module per family); each is imported
only when it is run (:class:`~knights_tour.commands._group.LazyGroup`), so ``ktour solve`` does
not load Celery or Redis, and ``ktour --help`` none at all.
:func:`main` takes an argument list and returns the exit code, so tests call it in-process;
:func:`run` is the console script. The exit codes and the errors that give them:
:mod:`knights_tour.commands._errors`.
"""

from __future__ import annotations

import gc
import sys

import click

from knights_tour.commands._errors import ExitCode, exit_code, exit_for, stdout_writes_all
from knights_tour.commands._group import LazyGroup

COMMANDS: dict[str, tuple[str, str]] = {
    "solve": (
        "solve:solve",
        "Solve one job in-process: a knight's tour of SIZE (8 or 6x8) from START (a1 or r,c).",
    ),
    "verify": ("verify:verify", "Check the tour in FILE ('-' = stdin)."),
    "run": (
        "lifecycle:run",
        "Run a batch: one job per start square of every board, in parallel, and collect it.",
    ),
    "resume": (
        "lifecycle:resume",
        "Resume BATCH: send again only its jobs with no record, wait, and collect it.",
    ),
    "retry": (
        "retry:retry",
        "Retry BATCH: run again its jobs whose records are unknown or error (--status).",
    ),
    "job": (
        "job:job",
        "One job of BATCH: its record, earlier attempts, worker and timings (SQUARE: a1 or r,c).",
    ),
    "submit": (
        "lifecycle:submit",
        "Submit a batch to the workers listening on a Redis server and return at once.",
    ),
    "collect": (
        "batch:collect",
        "Records of BATCH, one per job, sorted by board and start square.",
    ),
    "batches": ("batch:batches", "List known batches, oldest first."),
    "cancel": (
        "lifecycle:cancel",
        "Cancel BATCH: drop its queued tasks; workers skip its jobs and nothing re-sends them.",
    ),
    "forget": (
        "cleanup:forget",
        "Forget BATCH: delete every Redis key of it (jobs, records, leases, ...) and its "
        "collection reports, and say what was freed.",
    ),
    "prune": (
        "cleanup:prune",
        "Forget every batch and count created longer than AGE ago (their Redis keys, records "
        "and collection reports) and delete worker logs last written before then; say what was "
        "freed.",
    ),
    "count": (
        "count:count",
        "Count the knight's tours from every start square of SIZE (exhaustively), in parallel.",
    ),
    "draw": (
        "pictures:draw",
        "Draw one tour: a JSON record, a JSON Lines file of records (pick with --index or "
        "--start [--size]) or a step-number matrix file ('-' = stdin).",
    ),
    "report": (
        "pictures:report",
        "Report on a batch: BATCH from Redis (default: the newest batch), or --from-jsonl FILE.",
    ),
    "status": (
        "status:status",
        "Progress of BATCH (default: the newest batch): jobs done / running / queued / failed, "
        "counts by status, mismatches and an ETA.",
    ),
    "workers": (
        "workers:workers",
        "Show the queue and the live Celery workers: queue depth, reserved tasks, per worker its "
        "pool size, jobs processed and failed, and heartbeat age.",
    ),
    "dead-letters": (
        "dead_letters:dead_letters",
        "List the malformed queue messages the workers set aside, newest first, or empty that "
        "list (--clear).",
    ),
    "worker": (
        "serving:worker",
        "Run a Celery worker of the project's queue on a Redis server, until Ctrl-C.",
    ),
    "redis": (
        "serving:redis_server",
        "Run a Redis server for workers and clients on many hosts, until Ctrl-C.",
    ),
    "schedule": (
        "ops:schedule_group",
        "The celery beat schedule (KT_SCHEDULE_FILE; see schedule.example.toml).",
    ),
    "reports": ("ops:reports", "List the reports written by collections (oldest first)."),
}
"""Every ``ktour`` command: name -> (``"module:attribute"`` of its click command, the module in
:mod:`knights_tour.commands`; the first sentence of its help, shown by ``ktour --help`` without
importing the command)."""


@click.group(
    cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="knights-tour", prog_name="ktour")
def cli() -> None:
    """ktour: find knight's tours (or prove there are none), one at a time or in batches."""


def main(argv: list[str] | None = None) -> ExitCode | int:
    """Run ``ktour`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Never raises for user errors: each becomes one ``ktour: error: ...`` line on stderr and its
    exit code (:func:`knights_tour.commands._errors.exit_for`); a bug keeps its traceback.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    stdout_writes_all()
    stdout_before = sys.stdout
    try:
        rv = cli.main(args=args, prog_name="ktour", standalone_mode=False)
    except BaseException as exc:  # exit_for re-raises what is not a user error
        return exit_for(exc, args, stdout_swapped=sys.stdout is not stdout_before)
    return exit_code(rv) if isinstance(rv, int) else ExitCode.OK


def run() -> None:
    """The ``ktour`` console script: :func:`main` on ``sys.argv``, then exit with its code.

    Before exiting, every object is moved out of the garbage collector's reach
    (:func:`gc.freeze`): the interpreter would otherwise run collections over everything
    ``ktour run`` loaded (Celery, numpy, rich) as it shuts down, for nothing, since the
    process is ending. Files and sockets are closed by then; exit handlers still run.
    """
    code = main()
    gc.freeze()
    raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
