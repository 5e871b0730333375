"""The style and type checks of pyproject.toml run as part of the suite: ``ruff check``,
``ruff format --check`` over the repository, and ``mypy`` over the package (its settings:
``[tool.ruff]`` and ``[tool.mypy]``). Each test also shows its tool is not vacuous: a file with
a known defect fails it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # mypy over the package takes tens of seconds cold


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path(sys.executable).with_name(name))


def _run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    done = _run([_tool("ruff"), "check", "--no-cache", "."])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is():
    done = _run([_tool("ruff"), "format", "--check", "--no-cache", "."])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_catches_an_unused_import_and_a_misformatted_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx = {  'a':1 }\n")
    config = ["--config", str(ROOT / "pyproject.toml"), "--no-cache"]
    assert _run([_tool("ruff"), "check", *config, str(bad)], cwd=tmp_path).returncode == 1
    assert (
        _run([_tool("ruff"), "format", "--check", *config, str(bad)], cwd=tmp_path).returncode == 1
    )


MYPY_CACHE = ROOT / ".mypy_cache"
"""mypy's cache: its default place (where a plain ``mypy`` run in the repository keeps it; mypy
marks the folder git-ignored). A cold run takes ~16 s of CPU, a run with the cache of an
earlier one under a second: mypy checks again every module whose file, options or imports
changed (and never caches a module with an error), so the run still sees every change."""


def _mypy_command(scratch: Path) -> list[str]:
    """The mypy command line (``scratch``, the early command's own folder, is not used: the
    cache, :data:`MYPY_CACHE`, outlives the session)."""
    config = str(ROOT / "pyproject.toml")
    return [sys.executable, "-m", "mypy", "--config-file", config, "--cache-dir", str(MYPY_CACHE)]


EARLY_COMMANDS = {"mypy": _mypy_command}
"""mypy over the package starts when the tests are collected (tests/_early.py): its run (cold,
~16 s of CPU) goes on beside the tests that come before this module."""


@pytest.fixture(scope="module")
def mypy(early) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """The mypy command line and the outcome of its run over the package (once that has
    ended, so the cache it filled is there for the module's other runs)."""
    run = early("mypy")
    return run.args, run.wait(timeout_s=600)


def test_mypy_finds_no_type_error(mypy):
    _, done = mypy
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_catches_a_wrong_argument_type(mypy, tmp_path):
    command, _ = mypy
    bad = tmp_path / "bad.py"
    bad.write_text("from knights_tour.board import Board\n\nBoard('eight', 8)\n")
    done = _run([*command, str(bad)], cwd=tmp_path)
    assert done.returncode == 1 and 'incompatible type "str"' in done.stdout, done.stdout
