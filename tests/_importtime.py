"""A Python process run with ``-X importtime``, and the modules it loaded: for the tests that
check what a command does not import (Celery, numpy, the record types, ...)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$")


def run_importtime(
    args: list[str], data_dir: Path, cwd: Path
) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``python -X importtime ARGS`` in ``cwd`` with ``KT_DATA_DIR=data_dir`` (and no
    ``KT_REDIS_URL``): the finished process and the names of the modules it loaded."""
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env["KT_DATA_DIR"] = str(data_dir)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    modules = {m.group(1) for line in proc.stderr.splitlines() if (m := _IMPORTED.match(line))}
    return proc, modules
