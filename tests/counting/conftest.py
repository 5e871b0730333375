"""The core's tests write files only as the frontier DP's checkpoints, which are fsynced layer
by layer: ``tmp_path`` is, for the tests of this folder, a fresh directory in RAM where the
machine has one (:func:`_ramdir.ram_dir`: a 4x7 count with checkpoints is ~1 s of CPU and ~8 s
of fsyncs on a busy machine's disk), else pytest's own ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _ramdir import ram_dir


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """A fresh empty directory for this test: in RAM (removed after the test) if the machine
    has a writable one, else pytest's ``tmp_path``."""
    with ram_dir(tmp_path) as path:
        yield path
