"""How ``ktour`` ends: its exit codes, the one error line, and every user error turned into them.

Exit codes (all commands), :class:`ExitCode`:

* ``0`` – success (``solve``: the job was decided, ``found`` or ``no_tour``; ``verify``: valid;
  ``run``/``collect --wait``: every job decided, no error, no mismatch).
* ``1`` – the command ran but the answer is not a clean success: ``solve`` ended ``unknown``
  (limit reached) or ``error``; ``verify`` found the tour invalid; ``run``/``resume`` had
  undecided jobs, errors or a CP-SAT disagreement, or stopped unfinished - ``--timeout`` or a
  ``ktour cancel`` from another shell (the batch is cancelled, its records kept, ``ktour
  resume BATCH`` continues it); ``count`` timed out or a sub-job failed; a confirmation
  (``run``, ``submit``, ``count`` above the ``KT_CONFIRM_*`` thresholds) was answered no;
  ``forget``/``prune`` left a batch whose job is running.
* ``2`` – bad input or unusable environment (unknown solver, off-board start square, malformed
  size, unreadable tour file, unreachable Redis, usage error; a batch or count above the
  ``KT_CONFIRM_*`` thresholds without ``--yes`` and without a terminal to ask on): one line
  ``ktour: error: ...`` on stderr, nothing written, nothing submitted.
* ``141`` – stdout was closed before everything was written (``ktour collect B | head -1``):
  nothing said, the status a shell reports for a tool stopped by ``SIGPIPE`` (128 + 13).
* ``130`` – interrupted (Ctrl-C, SIGTERM); everything the command started is shut down first
  (``run``/``resume``/``count``: the batch or count is stopped, only its own queued tasks
  dropped, its results kept; one line says how to continue).
"""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
from enum import IntEnum

import click

from knights_tour.errors import KnightsTourError, StorageFullError
from knights_tour.settings import get_settings


class ExitCode(IntEnum):
    """Exit status of ``ktour`` (see the module docstring)."""

    OK = 0
    """Success: the answer is a clean one."""

    NOT_OK = 1
    """The command ran, but the answer is not a clean success."""

    BAD_INPUT = 2
    """Bad input or unusable environment; one ``ktour: error:`` line on stderr."""

    INTERRUPTED = 130
    """Ctrl-C (or SIGTERM during ``run``/``count``)."""

    STDOUT_CLOSED = 128 + signal.SIGPIPE
    """The reader of stdout left early (``| head``): ended quietly, as ``SIGPIPE`` ends a
    Unix tool."""


def err(message: str) -> None:
    """One line on stderr, prefixed ``ktour: error:`` (whitespace folded)."""
    first = " ".join(str(message).split())
    click.echo(f"ktour: error: {first}", err=True)


def exit_code(value: int) -> ExitCode | int:
    """``value`` as an :class:`ExitCode` where it is one, else the integer itself."""
    try:
        return ExitCode(value)
    except ValueError:
        return value


def stdout_writes_all() -> None:
    """Give an unbuffered stdout (``python -u``, ``PYTHONUNBUFFERED``) a buffered writer.

    Over a raw file a text stream passes on a pipe's partial write and drops the rest without
    an error, so a reader that stops early (``| head``) went unnoticed; a buffered writer
    writes everything or raises ``BrokenPipeError``. Line buffering keeps a terminal prompt.
    """
    stream = sys.__stdout__
    if (
        stream is None
        or sys.stdout is not stream
        or not isinstance(getattr(stream, "buffer", None), io.RawIOBase)
    ):
        return  # buffered already, or replaced (e.g. captured by a test): left alone
    sys.stdout = open(  # noqa: SIM115
        stream.fileno(),
        "w",
        encoding=stream.encoding,
        errors=stream.errors,
        closefd=False,
        buffering=1,
    )


def _stdout_closed() -> ExitCode:
    """The reader of stdout went away: end quietly, as a Unix tool that ``SIGPIPE`` stops
    does (its reader has what it wanted), with the flush at interpreter exit silenced."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return ExitCode.STDOUT_CLOSED


def refused_write(exc: StorageFullError, redis_given: bool) -> str:
    """The one-line message for a Redis server refusing writes (a ``MISCONF``, ``OOM`` or
    ``READONLY`` reply, raised by the store as :class:`StorageFullError`).

    ``redis_given``: a URL was given (``--redis``/``KT_REDIS_URL``); otherwise the server is
    the embedded Redis, and a ``MISCONF`` (it cannot persist) names its data directory, under
    ``KT_DATA_DIR``.
    """
    if redis_given or get_settings().redis_url or exc.code != "MISCONF":
        return str(exc)
    where = get_settings().data_dir / "redis"
    reason = exc.reason[len(exc.code) :].strip()
    return f"the embedded Redis cannot write its data under {where}: {reason}"


def exit_for(exc: BaseException, args: list[str], stdout_swapped: bool) -> ExitCode | int:
    """The exit code for ``exc``, raised by a command run with ``args``, after its one line
    ``ktour: error: ...`` (or ``ktour: interrupted``) on stderr; ``exc`` itself is re-raised
    when it is not a user error (a bug keeps its traceback).

    User errors: a :class:`KnightsTourError` (a ``KT_`` setting that does not parse included),
    a click usage error, an ``OSError`` (e.g. an unwritable ``--out``), a Redis that refuses
    writes (:class:`StorageFullError`: ``MISCONF``, e.g. a full disk, ``OOM``, ``READONLY``) or a
    key of Redis that cannot be read (:class:`~knights_tour.errors.CorruptKeyError`, naming the
    key) give :attr:`ExitCode.BAD_INPUT`; Ctrl-C gives :attr:`ExitCode.INTERRUPTED`; a closed
    stdout pipe (``EPIPE``, or ``stdout_swapped``: click replaced stdout, its answer to
    ``EPIPE``) gives :attr:`ExitCode.STDOUT_CLOSED` without a line.
    """
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return ExitCode.BAD_INPUT
    if isinstance(exc, click.UsageError):
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        err(f"{exc.format_message()}{hint}")
        return ExitCode.BAD_INPUT
    if isinstance(exc, click.ClickException):
        err(exc.format_message())
        return exit_code(exc.exit_code) if exc.exit_code else ExitCode.BAD_INPUT
    if isinstance(exc, click.exceptions.Exit):
        return exit_code(exc.exit_code)
    if isinstance(exc, (click.exceptions.Abort, KeyboardInterrupt)):
        click.echo("ktour: interrupted", err=True)
        return ExitCode.INTERRUPTED
    if isinstance(exc, StorageFullError):
        err(refused_write(exc, any(a.split("=")[0] == "--redis" for a in args)))
        return ExitCode.BAD_INPUT
    if isinstance(exc, KnightsTourError):
        err(str(exc))
        return ExitCode.BAD_INPUT
    if isinstance(exc, SystemExit):
        # click's own answer to EPIPE: it wraps stdout to silence its flush and exits 1. Its
        # wrapper class is private (renamed in click 8.5), so the swap itself is the sign.
        if stdout_swapped:
            return _stdout_closed()
        raise exc
    if isinstance(exc, OSError):
        if exc.errno == errno.EPIPE:
            return _stdout_closed()
        err(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
        return ExitCode.BAD_INPUT
    raise exc
