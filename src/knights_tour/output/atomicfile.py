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
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from knights_tour.errors import OutputPathError

WRITE_BUFFER_BYTES = 1 << 20
"""Write buffer of a record file: a sweep's lines are kilobytes each (tours), so the default
8 KiB buffer made about one ``write`` call per line."""


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
    that is a symbolic link, or exists and is not a regular file (``/dev/stdout``, a named
    pipe), is written in place, through the link.

    Raises
    ------
    OutputPathError
        ``cannot write <path>: <reason>`` (the path as given, never the temporary file's) if
        ``path`` is a directory, its directory is missing or not writable, or the disk is full.
        It is also an ``OSError`` with the original ``errno``.
    """
    return atomic_write_lines(path, (text.encode(),))


def atomic_write_lines(path: str | os.PathLike[str], lines: Iterable[bytes]) -> Path:
    """Write the byte strings of ``lines`` (UTF-8 text, each holding its own line ending) to
    ``path`` as they come, atomically as :func:`atomic_write_text` does: memory stays bounded
    by one line and the write buffer whatever the file's size.

    Raises
    ------
    OutputPathError
        As :func:`atomic_write_text`. Whatever ``lines`` raises is raised too, and then no
        file is left behind.
    """
    out = AtomicFile(path)
    try:
        out.writelines(lines)
    except BaseException:
        out.discard()
        raise
    return out.commit()


class AtomicFile:
    """A file written in several steps that appears at its path only when complete
    (:meth:`commit`): a temporary file in the target's directory, with the permissions a
    plain ``open(path, "w")`` would give, fsynced and renamed over the target. A path that
    is a symbolic link, or exists and is not a regular file (``/dev/stdout``, a named pipe), is
    written in place, through the link.

    Raises
    ------
    OutputPathError
        From the constructor, :meth:`writelines` and :meth:`commit`: ``cannot write <path>:
        <reason>`` (the path as given), also an ``OSError`` with the original ``errno``; the
        temporary file is then removed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.given = str(path)
        self.target = Path(path)
        self.directory = self.target.parent if str(self.target.parent) else Path(".")
        self.tmp: str | None = None
        self.fh: BinaryIO | None = None
        if self.target.is_dir():
            raise OutputPathError(f"cannot write {path}: it is a directory", errno.EISDIR)
        with self._errors():
            if self.target.is_symlink() or (self.target.exists() and not self.target.is_file()):
                # written through: renaming over a link would replace the link itself (as
                # root, /dev/stdout -> /proc/self/fd/1 with stdout redirected to a file)
                self.fh = _open_in_place(self.target)
            else:
                fd, self.tmp = tempfile.mkstemp(
                    prefix=f".{self.target.name}.", suffix=".tmp", dir=self.directory
                )
                os.fchmod(fd, new_file_mode(self.target))
                self.fh = os.fdopen(fd, "wb", buffering=WRITE_BUFFER_BYTES)

    def writelines(self, lines: Iterable[bytes | memoryview]) -> None:
        """Append ``lines`` (bytes, each with its own line ending). A list is handed to the
        kernel as it is (``writev``), not copied into the write buffer first."""
        assert self.fh is not None, "the file is closed"
        with self._errors():
            if isinstance(lines, list):
                self.fh.flush()
                write_gathered(self.fh.fileno(), lines)
            else:
                self.fh.writelines(lines)

    def commit(self) -> Path:
        """Flush, fsync and rename the file into place; returns its path."""
        assert self.fh is not None, "the file is closed"
        with self._errors():
            self.fh.flush()
            if self.tmp is not None:
                os.fsync(self.fh.fileno())
            self.fh.close()
            if self.tmp is not None:
                os.replace(self.tmp, self.target)
                self.tmp = None
        return self.target

    def discard(self) -> None:
        """Close and remove the temporary file (the target stays as it was)."""
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
        if self.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
            self.tmp = None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            self.discard()
            if isinstance(exc, OutputPathError):
                raise
            reason = exc.strerror or str(exc)
            if exc.errno == errno.ENOENT and not self.directory.is_dir():
                reason = f"directory {self.directory} does not exist"
            raise OutputPathError(f"cannot write {self.given}: {reason}", exc.errno) from None


_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16


def write_gathered(fd: int, chunks: list[bytes | memoryview]) -> None:
    """Write ``chunks`` (bytes, or memoryviews of bytes) one after the other to the file
    descriptor ``fd``, a few hundred per ``writev`` call, whatever each call leaves unwritten
    written again.

    Raises
    ------
    OSError
        As ``os.writev`` (e.g. ``ENOSPC``).
    """
    for i in range(0, len(chunks), _IOV_MAX):
        part = chunks[i : i + _IOV_MAX]
        done = os.writev(fd, part)
        if done == sum(map(len, part)):
            continue
        for chunk in part:  # a short write: the rest chunk by chunk
            if done >= len(chunk):
                done -= len(chunk)
                continue
            view = memoryview(chunk)[done:]
            done = 0
            while view:
                view = view[os.write(fd, view) :]


STDOUT_FD = 1
"""The descriptor of standard output (``sys.stdout`` may be replaced, e.g. by tests)."""


def _open_in_place(target: Path) -> BinaryIO:
    """``target`` opened for writing where it is. This process's own stdout (``/dev/stdout``,
    or a link to the file stdout is redirected to) is written through a duplicate of its
    descriptor, which shares its offset, so the lines land where stdout's own output does and
    nothing earlier is truncated."""
    with contextlib.suppress(OSError, ValueError):
        if os.path.samestat(os.stat(target), os.fstat(STDOUT_FD)):
            sys.stdout.flush()
            return os.fdopen(os.dup(STDOUT_FD), "wb", buffering=WRITE_BUFFER_BYTES)
    return open(target, "wb", buffering=WRITE_BUFFER_BYTES)  # noqa: SIM115 - the caller closes it


__all__ = [
    "AtomicFile",
    "write_gathered",
    "atomic_write_text",
    "atomic_write_lines",
    "new_file_mode",
    "current_umask",
]
