"""Directories in RAM for tests whose code fsyncs what it writes.

The frontier DP checkpoints each layer it sweeps (a file, its manifest and its directory,
each fsynced): on this machine's disk an fsync takes milliseconds, so a count of hundreds of
layers spends most of its time waiting for the platter, while what the tests check is what is
written and read back. :func:`ram_dir` gives a fresh directory in :data:`RAM_DIR` where the
machine has one (the fsyncs still run, and return at once there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

RAM_DIR = Path("/dev/shm")
"""A RAM-backed file system (tmpfs), where the machine has one."""


@contextlib.contextmanager
def ram_dir(fallback: Path) -> Iterator[Path]:
    """A fresh empty directory in :data:`RAM_DIR` if that is a writable directory (removed
    at the end), else ``fallback`` (left to its owner, e.g. pytest's ``tmp_path``)."""
    if not (RAM_DIR.is_dir() and os.access(RAM_DIR, os.W_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(prefix="kt-test-", dir=RAM_DIR))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
