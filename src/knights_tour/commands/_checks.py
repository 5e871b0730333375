"""The checks a command makes of its input before any work starts: numbers in range
(:func:`require_positive`, :func:`require_non_negative`), ``--workers`` against where the jobs
go (:func:`require_workers`), an ``--out`` that can be written (:func:`check_out_path`) and the
question before a big batch or count (:func:`confirm_big`).

click and the standard library only (no rich, no redis-py), so that a command refuses bad input
before it loads what its work needs.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from pathlib import Path

import click

from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.settings import get_settings


class Declined(click.ClickException):
    """The user answered no to :func:`confirm_big`: nothing was submitted (exit 1)."""

    exit_code = 1


def stdin_is_terminal() -> bool:
    """True if stdin is a terminal someone can answer a question on."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, AttributeError):  # closed or replaced
        return False


def confirm_big(what: str, concerns: list[str], yes: bool) -> None:
    """Go on if ``concerns`` is empty (the estimate is below every threshold) or ``yes``;
    else ask on a terminal, and refuse without one.

    Parameters
    ----------
    what : str
        The estimate in words (``"1,000,000 jobs on 1 board(s), records ~ 10 TB, ..."``).
    concerns : list of str
        The thresholds it passes (:func:`knights_tour.batches.estimate.batch_concerns`).
    yes : bool
        ``--yes`` was given.

    Raises
    ------
    KnightsTourError
        Without a terminal on stdin: one line naming ``--yes`` (exit 2).
    Declined
        The user answered no (exit 1).
    """
    if not concerns or yes:
        return
    why = "; ".join(concerns)
    if not stdin_is_terminal():
        raise KnightsTourError(f"not submitted: {what} ({why}); add --yes to submit it anyway")
    if not click.confirm(f"ktour: {what} ({why}). Submit it?", default=False, err=True):
        raise Declined("nothing submitted")


def require_positive(value: float | None, hint: str) -> None:
    """Raise a click usage error naming ``hint`` unless ``value`` is None or > 0."""
    if value is not None and value <= 0:
        raise click.BadParameter("must be positive", param_hint=hint)


def require_non_negative(value: int | None, hint: str) -> None:
    """Raise a click usage error naming ``hint`` unless ``value`` is None or >= 0."""
    if value is not None and value < 0:
        raise click.BadParameter("must be >= 0", param_hint=hint)


def require_workers(workers: int | None, redis_url: str | None) -> None:
    """Check ``--workers K`` against where the jobs go: K >= 0, and K = 0 (start no local
    worker) only with a Redis URL (``--redis`` or ``KT_REDIS_URL``) whose workers take the
    jobs; the embedded Redis is private, so no other worker could ever reach it.

    Raises
    ------
    click.BadParameter
        Naming ``--workers`` and the value.
    """
    require_non_negative(workers, "--workers")
    if workers == 0 and not (redis_url or get_settings().redis_url):
        raise click.BadParameter(
            "0 starts no worker, and no other worker can reach the embedded Redis; give "
            "--redis URL (or KT_REDIS_URL) of a server with workers, or K >= 1",
            param_hint="--workers",
        )


def check_out_path(out: str | None) -> None:
    """Fail before any work if ``out`` cannot be written: it is a directory, an existing file
    that is not writable, or its directory is missing or refuses a new file (read-only, no
    permission, full). ``None`` and ``-`` (stdout) pass.

    Raises
    ------
    OutputPathError
        ``cannot write <out>: <reason>``, naming the path as the user gave it.
    """
    if out is None or out == "-":
        return
    target = Path(out)
    parent = target.parent
    if target.is_dir():
        raise OutputPathError(f"cannot write {out}: it is a directory", errno.EISDIR)
    if not parent.is_dir():
        raise OutputPathError(
            f"cannot write {out}: directory {parent} does not exist", errno.ENOENT
        )
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(f"cannot write {out}: permission denied", errno.EACCES)
    if target.exists() and not target.is_file():  # a device or pipe, written in place
        return
    try:  # the directory must take a new file: the output is written beside it, then renamed
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        raise OutputPathError(f"cannot write {out}: {exc.strerror or exc}", exc.errno) from None
    os.close(fd)
    os.unlink(probe)


__all__ = [
    "Declined",
    "check_out_path",
    "confirm_big",
    "require_non_negative",
    "require_positive",
    "require_workers",
    "stdin_is_terminal",
]
