"""What the command modules share: consoles, ``ktour:`` messages, writing an output file,
progress bars.

Exit codes and the error line are :mod:`knights_tour.commands._errors`'s; the options several
commands take, :mod:`knights_tour.commands._options`'s; the checks of a command's input,
:mod:`knights_tour.commands._checks`'s.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from knights_tour.batches.estimate import eta_s
from knights_tour.output.atomicfile import atomic_write_text
from knights_tour.output.durations import format_eta
from knights_tour.settings import get_settings

Status = TypeVar("Status", bound=Mapping[str, Any])
"""What a wait reports progress with (a batch's or a count's status: ``done``, ``total``)."""


def note(message: str) -> None:
    """One line on stderr, prefixed ``ktour:``."""
    click.echo(f"ktour: {message}", err=True)


class _StdoutConsole(Console):
    """A rich console whose closed stdout pipe ends the command as any other write to it does
    (:func:`knights_tour.commands._errors.exit_for`), not with rich's own exit 1."""

    def on_broken_pipe(self) -> None:
        """Raise ``BrokenPipeError`` (rich's default exits 1)."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def stdout_console() -> Console:
    """Console on stdout; when stdout is not a terminal, wide enough not to wrap ids."""
    console = _StdoutConsole(file=sys.stdout, highlight=False)
    if not console.is_terminal:
        console = _StdoutConsole(file=sys.stdout, highlight=False, width=160)
    return console


def format_utc(t: float | datetime | None) -> str:
    """``t`` (Unix seconds or a datetime) as ``YYYY-MM-DD HH:MM:SS`` in UTC; ``-`` for None."""
    if t is None:
        return "-"
    if isinstance(t, datetime):
        return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return datetime.fromtimestamp(float(t), UTC).strftime("%Y-%m-%d %H:%M:%S")


def write_output(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (``-`` = stdout) atomically, and say so on stderr.

    A new file gets the umask's permissions, an existing one keeps its own (as every file
    ``ktour`` writes: :func:`knights_tour.output.atomicfile.new_file_mode`).
    ``what`` names the option for a usage error (``path`` is a directory).
    """
    if path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    if target.is_dir():
        raise click.BadParameter(f"{path} is a directory", param_hint=what)
    atomic_write_text(target, text)
    click.echo(f"wrote {path} ({len(text.encode('utf-8'))} bytes)", err=True)


class ProgressLines:
    """Progress as one ``ktour:`` line every ``every_s`` seconds, for a stderr that is not a
    terminal (cron, CI logs, beat): ``batch B: 120/620 jobs done, 12.0/s, ETA 41s``. The
    rate is measured since the first status seen, so jobs recorded before (a resumed batch)
    do not inflate it. The first poll gives a line at once (where the wait starts). While
    the done count stands still (a few long jobs, or the sub-jobs of a DP count, which prints
    its own per-layer lines) the same line is repeated only every :data:`UNCHANGED_EVERY`
    intervals, as a sign of life rather than news. :attr:`planned_s`, the estimated seconds
    per job where known, gives the ETA until the measured rate is worth more."""

    UNCHANGED_EVERY = 6

    def __init__(
        self, what: str, label: str, every_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what, self.label, self.every_s, self.clock = what, label, every_s, clock
        self.first: tuple[float, int] | None = None
        self.last_line: float | None = None
        self.last_done: int | None = None
        self.planned_s: float | None = None

    def rate_and_eta(self, done: int, total: int) -> tuple[float | None, float | None]:
        """Jobs per second measured since the first call, and the seconds still to go
        (:func:`~knights_tour.batches.estimate.eta_s`: the estimate :attr:`planned_s` until
        the measured rate is worth more); None where there is none yet."""
        now = self.clock()
        if self.first is None:
            self.first = (now, done)
        t0, d0 = self.first
        rate = (done - d0) / (now - t0) if now > t0 and done > d0 else None
        return rate, eta_s(total - done, done - d0, now - t0, self.planned_s)

    def line(self, done: int, total: int) -> str:
        """The progress line for ``done`` of ``total`` now (no ``ktour:`` prefix)."""
        rate, eta = self.rate_and_eta(done, total)
        head = f"{self.what}: " if self.what else ""
        return (
            f"{head}{done}/{total} {self.label} done, "
            + (f"{rate:,.1f}/s" if rate is not None else "rate -")
            + f", ETA {format_eta(eta)}"
        )

    def __call__(self, done: int, total: int) -> None:
        """Note the line if ``every_s`` passed since the last one and the count moved (or
        :data:`UNCHANGED_EVERY` intervals passed); the first poll notes its line at once
        unless everything is done already."""
        now = self.clock()
        if self.last_line is None:
            self.last_line, self.last_done = now, done
            text = self.line(done, total)
            if done < total:  # where the wait starts (a resumed batch: its jobs already done)
                note(text)
            return
        waited = now - self.last_line
        if waited < self.every_s:
            return
        if done == self.last_done and waited < self.every_s * self.UNCHANGED_EVERY:
            return
        self.last_line, self.last_done = now, done
        note(self.line(done, total))


@contextlib.contextmanager
def progress_hooks(
    label: str,
    total: int,
    info: Callable[[Status], str],
    check: Callable[[Status], None] | None = None,
    what: str = "",
    plan: Callable[[Status], float | None] | None = None,
) -> Iterator[dict[str, Callable[..., None] | None]]:
    """The callbacks of a ``WaitHooks`` (:mod:`knights_tour.store.waiting`), as keyword
    arguments: a rich progress bar of ``label`` (``done``/``total`` of each status, plus
    ``info(status)``) on stderr when it is a terminal, else one :class:`ProgressLines` line
    about ``what`` every ``KT_PROGRESS_S`` seconds; Redis outages and re-sent jobs reported
    as ``ktour:`` lines (so is a Redis that refuses writes, once, with its reason), and
    ``check``. Both show the ETA of :class:`ProgressLines`, with
    ``plan(status)``, asked until it answers, as its estimated seconds per job. The bar ends
    with the block."""
    console = Console(stderr=True)
    lines = ProgressLines(what, label, get_settings().progress_s)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TextColumn("ETA {task.fields[eta]}"),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(label, total=total, info="", eta=format_eta(None))

        def on_progress(status: Status) -> None:
            if plan is not None and lines.planned_s is None:
                lines.planned_s = plan(status)
            done, total = int(status["done"]), int(status["total"])
            if not console.is_terminal:
                lines(done, total)
                return
            _, eta = lines.rate_and_eta(done, total)
            progress.update(
                task, completed=done, total=total, info=info(status), eta=format_eta(eta)
            )

        yield {
            "on_progress": on_progress,
            "on_outage": lambda lost: note(
                "lost contact with Redis; retrying" if lost else "Redis is back"
            ),
            "on_resent": lambda n: note(f"re-sent {n} job(s) whose worker was lost"),
            "on_refused": lambda reason: note(
                f"Redis refuses writes: {reason}" if reason else "Redis accepts writes again"
            ),
            "check": check,
        }


__all__ = [
    "note",
    "format_utc",
    "stdout_console",
    "write_output",
    "progress_hooks",
    "ProgressLines",
]
