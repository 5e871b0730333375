"""The core's tests write files only as the frontier DP's checkpoints, and those are fsynced
layer by layer (a file, its manifest and its directory for each of a count's hundreds of
layers): on a disk that is most of such a test's time (a 4x7 count with checkpoints: ~1 s of
CPU, ~8 s of fsyncs on a busy machine), while what the tests check is what is written and read
back, not that it reached the platter. So ``tmp_path`` is, for the tests of this folder, a fresh
directory in RAM (``/dev/shm``) where the machine has one; the fsyncs still run, and return at
once there. Elsewhere it is pytest's own ``tmp_path``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

RAM_DIR = Path("/dev/shm")


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """A fresh empty directory for this test: in :data:`RAM_DIR` if it is a writable directory
    (removed after the test), else pytest's ``tmp_path``."""
    if not (RAM_DIR.is_dir() and os.access(RAM_DIR, os.W_OK)):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="kt-test-", dir=RAM_DIR))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
