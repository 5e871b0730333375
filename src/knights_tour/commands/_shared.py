"""What the command modules share: exit codes, options, consoles, messages, progress bars.

Exit codes (all commands), :class:`ExitCode`:

* ``0`` – success (``solve``: the job was decided, ``found`` or ``no_tour``; ``verify``: valid;
  ``run``/``collect --wait``: every job decided, no error, no mismatch).
* ``1`` – the command ran but the answer is not a clean success: ``solve`` ended ``unknown``
  (limit reached) or ``error``; ``verify`` found the tour invalid; ``run`` had undecided jobs,
  errors or a CP-SAT disagreement.
* ``2`` – bad input or unusable environment (unknown solver, off-board start square, malformed
  size, unreadable tour file, unreachable Redis, usage error): one line ``ktour: error: ...`` on
  stderr, nothing written.
* ``130`` – interrupted (Ctrl-C); everything the command started is shut down first.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from enum import IntEnum
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from knights_tour.errors import KnightsTourError
from knights_tour.output.tourfile import atomic_write_text
from knights_tour.solvers import DEFAULT_SOLVER, solver_names


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


def err(message: str) -> None:
    """One line on stderr, prefixed ``ktour: error:`` (whitespace folded)."""
    first = " ".join(str(message).split())
    click.echo(f"ktour: error: {first}", err=True)


def note(message: str) -> None:
    """One line on stderr, prefixed ``ktour:``."""
    click.echo(f"ktour: {message}", err=True)


def stdout_console() -> Console:
    """Console on stdout; when stdout is not a terminal, wide enough not to wrap ids."""
    console = Console(file=sys.stdout, highlight=False)
    if not console.is_terminal:
        console = Console(file=sys.stdout, highlight=False, width=160)
    return console


def solver_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--solver NAME`` (default the registry's default solver)."""
    return click.option(
        "--solver",
        default=DEFAULT_SOLVER,
        show_default=True,
        metavar="NAME",
        help=f"Solver backend: {', '.join(solver_names())}.",
    )(f)


redis_option = click.option(
    "--redis",
    "redis_url",
    default=None,
    metavar="URL",
    help="Redis URL (redis://:PASSWORD@host:6379/0); default KT_REDIS_URL, else the embedded "
    "Redis under the data dir.",
)
"""``--redis URL``."""

workers_option = click.option(
    "--workers", "workers", type=int, default=None, metavar="K",
    help="Local worker processes to start (default KT_WORKERS = cores; with --redis "
    "none: the workers already listening there are used).",
)
"""``--workers K`` of ``run`` and ``count``."""


def require_positive(value: float | None, hint: str) -> None:
    """Raise a click usage error naming ``hint`` unless ``value`` is None or > 0."""
    if value is not None and value <= 0:
        raise click.BadParameter("must be positive", param_hint=hint)


def require_non_negative(value: int | None, hint: str) -> None:
    """Raise a click usage error naming ``hint`` unless ``value`` is None or >= 0."""
    if value is not None and value < 0:
        raise click.BadParameter("must be >= 0", param_hint=hint)


def check_out_path(out: str | None) -> None:
    """Fail before any work if the output file's directory is missing or not writable.

    Raises
    ------
    KnightsTourError
        Naming the file and the directory.
    """
    if out is None or out == "-":
        return
    parent = Path(out).parent
    if not parent.is_dir():
        raise KnightsTourError(f"cannot write {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise KnightsTourError(f"cannot write {out}: directory {parent} is not writable")


def write_output(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (``-`` = stdout) atomically, and say so on stderr.

    A file gets the umask's permissions (the temporary file is 0600; a report is for sharing).
    ``what`` names the option for a usage error (``path`` is a directory).
    """
    if path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    if target.is_dir():
        raise click.BadParameter(f"{path} is a directory", param_hint=what)
    atomic_write_text(target, text)
    mask = os.umask(0)
    os.umask(mask)
    target.chmod(0o666 & ~mask)
    click.echo(f"wrote {path} ({len(text.encode('utf-8'))} bytes)", err=True)


@contextlib.contextmanager
def progress_hooks(
    label: str, total: int, info: Callable[[dict[str, Any]], str],
    check: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[dict[str, Callable[..., None] | None]]:
    """The callbacks of a ``WaitHooks`` (:mod:`knights_tour.service.waiting`), as keyword
    arguments: a rich progress bar of ``label`` (``done``/``total`` of each status, plus
    ``info(status)``) on stderr when it is a terminal, Redis outages and re-sent jobs reported
    as ``ktour:`` lines, and ``check``. The bar ends with the block."""
    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
        console=console, transient=False, disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(label, total=total, info="")

        def on_progress(status: dict[str, Any]) -> None:
            progress.update(task, completed=status["done"], total=status["total"],
                            info=info(status))

        yield {
            "on_progress": on_progress,
            "on_outage": lambda lost: note("lost contact with Redis; retrying" if lost
                                           else "Redis is back"),
            "on_resent": lambda n: note(f"re-sent {n} job(s) whose worker was lost"),
            "check": check,
        }


__all__ = [
    "ExitCode", "err", "note", "stdout_console", "solver_option", "redis_option",
    "workers_option", "require_positive", "require_non_negative", "check_out_path",
    "write_output", "progress_hooks",
]
