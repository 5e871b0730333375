"""The ``ktour`` command line: the click group, the commands registered on it, and
:func:`main`, which turns every user error into one line and an :class:`ExitCode`.

The commands live in :mod:`knights_tour.commands` (one module per family); each is imported
only when it is run, so ``ktour solve`` does not load Celery or Redis, and ``ktour --help``
none at all.
:func:`main` takes an argument list and returns the exit code, so tests call it in-process;
:func:`run` is the console script.
The exit codes are documented on :class:`~knights_tour.commands._shared.ExitCode`.
"""

from __future__ import annotations

import difflib
import errno
import gc
import importlib
import io
import os
import sys

import click
from pydantic import ValidationError

from knights_tour.commands._shared import ExitCode, err, refused_write
from knights_tour.errors import KnightsTourError

COMMANDS: dict[str, tuple[str, str]] = {
    "solve": (
        "knights_tour.commands.solve:solve",
        "Solve one job in-process: a knight's tour of SIZE (8 or 6x8) from START (a1 or r,c).",
    ),
    "verify": ("knights_tour.commands.solve:verify", "Check the tour in FILE ('-' = stdin)."),
    "run": (
        "knights_tour.commands.lifecycle:run",
        "Run a batch: one job per start square of every board, in parallel, and collect it.",
    ),
    "resume": (
        "knights_tour.commands.lifecycle:resume",
        "Resume BATCH: send again only its jobs with no record, wait, and collect it.",
    ),
    "submit": (
        "knights_tour.commands.lifecycle:submit",
        "Submit a batch to the workers listening on a Redis server and return at once.",
    ),
    "collect": (
        "knights_tour.commands.batch:collect",
        "Records of BATCH, one per job, sorted by board and start square.",
    ),
    "batches": ("knights_tour.commands.batch:batches", "List known batches, oldest first."),
    "cancel": (
        "knights_tour.commands.lifecycle:cancel",
        "Cancel BATCH: drop its queued tasks; workers skip its jobs and nothing re-sends them.",
    ),
    "forget": (
        "knights_tour.commands.cleanup:forget",
        "Forget BATCH: delete every Redis key "
        "of it (jobs, records, leases, ...) and its collection reports, and say what "
        "was freed.",
    ),
    "prune": (
        "knights_tour.commands.cleanup:prune",
        "Forget every batch and count created "
        "longer than AGE ago (their Redis keys, records and collection reports) and "
        "delete worker logs last written before then; say what was freed.",
    ),
    "count": (
        "knights_tour.commands.count:count",
        "Count the knight's tours from every start square of SIZE (exhaustively), in parallel.",
    ),
    "draw": (
        "knights_tour.commands.pictures:draw",
        "Draw one tour: a JSON record, a JSON Lines "
        "file of records (pick with --index or --start [--size]) or a step-number matrix "
        "file ('-' = stdin).",
    ),
    "report": (
        "knights_tour.commands.pictures:report",
        "Report on a batch: BATCH from Redis, or --from-jsonl FILE.",
    ),
    "status": (
        "knights_tour.commands.batch:status",
        "Progress of BATCH (default: the newest "
        "batch): jobs done / running / queued / failed, counts by status, mismatches "
        "and an ETA.",
    ),
    "workers": (
        "knights_tour.commands.ops:workers",
        "List the live Celery workers and what they are running (Celery ping + inspect active).",
    ),
    "schedule": (
        "knights_tour.commands.ops:schedule_group",
        "The celery beat schedule (KT_SCHEDULE_FILE; see schedule.example.toml).",
    ),
    "reports": (
        "knights_tour.commands.ops:reports",
        "List the reports written by collections (oldest first).",
    ),
}
"""Every ``ktour`` command: name -> (``"module:attribute"`` of its click command, the first
sentence of its help, shown by ``ktour --help`` without importing the command)."""


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use (click's "lazily loading
    subcommands" pattern), from :data:`COMMANDS`; ``ktour --help`` lists them from there."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, _, attr = COMMANDS[cmd_name][0].partition(":")
        return getattr(importlib.import_module(module), attr)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but a mistyped command name gets a suggestion: ``No such command
        'stauts'. Did you mean 'status'?`` (closest names by :mod:`difflib`)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            name = click.utils.make_str(args[0]) if args else ""
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if not close or name in COMMANDS:
                raise
            choices = " or ".join(f"'{c}'" for c in close)
            raise click.UsageError(
                f"No such command '{name}'. Did you mean {choices}?", ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, _short_help(COMMANDS[name][1], limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="knights-tour", prog_name="ktour")
def cli() -> None:
    """ktour: find knight's tours (or prove there are none), one at a time or in batches."""


def _settings_error(exc: ValidationError) -> str:
    """First problem of a settings ValidationError in words, naming the KT_ variable."""
    first = exc.errors()[0]
    loc = [str(x) for x in first.get("loc", ()) if x]
    name = f"KT_{loc[0].upper()}: " if loc else ""
    msg = str(first.get("msg", exc)).removeprefix("Value error, ")
    value = first.get("input")
    shown = f" (got {value!r})" if loc and isinstance(value, (str, int, float)) else ""
    return f"{name}{msg}{shown}"


def _short_help(summary: str, limit: int) -> str:
    """``summary`` cut to ``limit`` columns the way click cuts a command's help for a listing
    (through its public API: the helper it uses is private from click 8.5)."""
    return click.Command(None, help=summary).get_short_help_str(limit)


def _exit_code(value: int) -> ExitCode | int:
    try:
        return ExitCode(value)
    except ValueError:
        return value


def _stdout_writes_all() -> None:
    """Give an unbuffered stdout (``python -u``, ``PYTHONUNBUFFERED``) a buffered writer.

    Over a raw file a text stream passes on a pipe's partial write and drops the rest without
    an error, so a reader that stops early (``| head``) went unnoticed; a buffered writer
    writes everything or raises ``BrokenPipeError``. Line buffering keeps a terminal prompt.
    """
    stream = sys.stdout
    if (
        stream is None
        or stream is not sys.__stdout__
        or not isinstance(getattr(stream, "buffer", None), io.RawIOBase)
    ):
        return  # buffered already, or replaced (e.g. captured by a test): left alone
    sys.stdout = open(
        stream.fileno(),
        "w",
        encoding=stream.encoding,  # noqa: SIM115
        errors=stream.errors,
        closefd=False,
        buffering=1,
    )


def _stdout_closed() -> ExitCode:
    """The reader of stdout went away: say so, and silence the flush at interpreter exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    err("stdout was closed before all output was written (broken pipe)")
    return ExitCode.BAD_INPUT


def _os_error(exc: OSError) -> str:
    return f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}"


def main(argv: list[str] | None = None) -> ExitCode | int:
    """Run ``ktour`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Never raises for user errors: a :class:`KnightsTourError`, a click usage error, a settings
    error, an ``OSError`` (e.g. an unwritable ``--out``), a closed stdout pipe or a Redis that
    refuses writes (``MISCONF``, e.g. a full disk) becomes one ``ktour: error: ...`` line on
    stderr and :attr:`ExitCode.BAD_INPUT`; Ctrl-C gives :attr:`ExitCode.INTERRUPTED`.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    _stdout_writes_all()
    stdout_before = sys.stdout
    try:
        rv = cli.main(args=args, prog_name="ktour", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return ExitCode.BAD_INPUT
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        err(f"{exc.format_message()}{hint}")
        return ExitCode.BAD_INPUT
    except click.ClickException as exc:
        err(exc.format_message())
        return _exit_code(exc.exit_code) if exc.exit_code else ExitCode.BAD_INPUT
    except click.exceptions.Exit as exc:
        return _exit_code(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("ktour: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except KnightsTourError as exc:
        err(str(exc))
        return ExitCode.BAD_INPUT
    except ValidationError as exc:  # KT_ settings that do not parse (knights_tour.settings)
        err(f"invalid configuration: {_settings_error(exc)}")
        return ExitCode.BAD_INPUT
    except SystemExit:
        # click's own answer to EPIPE: it wraps stdout to silence its flush and exits 1. Its
        # wrapper class is private (renamed in click 8.5), so the swap itself is the sign.
        if sys.stdout is not stdout_before:
            return _stdout_closed()
        raise
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            return _stdout_closed()
        err(_os_error(exc))
        return ExitCode.BAD_INPUT
    except Exception as exc:
        message = refused_write(exc, any(a.split("=")[0] == "--redis" for a in args))
        if message is None:
            raise
        err(message)
        return ExitCode.BAD_INPUT
    return _exit_code(rv) if isinstance(rv, int) else ExitCode.OK


def run() -> None:
    """The ``ktour`` console script: :func:`main` on ``sys.argv``, then exit with its code.

    Before exiting, every object is moved out of the garbage collector's reach
    (:func:`gc.freeze`): the interpreter would otherwise run collections over everything
    ``ktour run`` loaded (Celery, pydantic, rich) as it shuts down, for nothing, since the
    process is ending. Files and sockets are closed by then; exit handlers still run.
    """
    code = main()
    gc.freeze()
    raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
