"""Atomic file writes: a file appears whole or not at all, with the permissions a plain
``open(path, "w")`` would have given it.

Every file ``ktour`` writes (tour matrices, record files, count tables) goes through
:func:`atomic_write_text` or :func:`atomic_write_lines`: a temporary file in the target's
directory, flushed, synced and renamed over the target (POSIX ``rename(2)`` is atomic within a
file system), so a reader never sees a half-written file and a failed write leaves the old one.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from knights_tour.errors import OutputPathError


def current_umask() -> int:
    """This process's umask (read from ``/proc/self/status`` where there is one, so no
    other thread sees it changed; else set and restored)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(target: str | os.PathLike[str]) -> int:
    """The permissions a file written at ``target`` gets, as ``open(target, "w")`` would give
    it: an existing file's own, else ``0o666`` less the umask (a temporary file is created
    ``0600``, so it is set explicitly before the rename)."""
    with contextlib.suppress(OSError):
        return os.stat(target).st_mode & 0o7777
    return 0o666 & ~current_umask()


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a temporary file in the same directory, then a
    rename, so a reader never sees a half-written file and an interrupted or failed write
    (e.g. a full disk) leaves none, and an existing file at ``path`` unchanged. A ``path``
    that exists and is not a regular file (``/dev/stdout``, a named pipe) is written in place.

    Raises
    ------
    OutputPathError
        ``cannot write <path>: <reason>`` (the path as given, never the temporary file's) if
        ``path`` is a directory, its directory is missing or not writable, or the disk is full.
        It is also an ``OSError`` with the original ``errno``.
    """
    return atomic_write_lines(path, (text,))


def atomic_write_lines(path: str | os.PathLike[str], lines: Iterable[str]) -> Path:
    """Write the strings of ``lines`` to ``path`` as they come (each holds its own line
    ending), atomically as :func:`atomic_write_text` does: memory stays bounded by one line
    whatever the file's size.

    Raises
    ------
    OutputPathError
        As :func:`atomic_write_text`. Whatever ``lines`` raises is raised too, and then no
        file is left behind.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise OutputPathError(f"cannot write {path}: it is a directory", errno.EISDIR)
    if target.exists() and not target.is_file():  # a device or pipe: written in place
        try:
            with open(target, "w", encoding="utf-8", newline="") as fh:
                fh.writelines(lines)
        except OSError as exc:
            raise OutputPathError(
                f"cannot write {path}: {exc.strerror or exc}", exc.errno
            ) from None
        return target
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        os.fchmod(fd, new_file_mode(target))
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.writelines(lines)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputPathError):
            reason = exc.strerror or str(exc)
            if exc.errno == errno.ENOENT and not directory.is_dir():
                reason = f"directory {directory} does not exist"
            raise OutputPathError(f"cannot write {path}: {reason}", exc.errno) from None
        raise
    return target


__all__ = ["atomic_write_text", "atomic_write_lines", "new_file_mode", "current_umask"]
