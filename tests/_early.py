"""Commands started as soon as the tests are collected, read by a test later.

A test module may define ``EARLY_COMMANDS``: a name for each command and a function that, given
a scratch directory of its own, returns the command line. When any test of that module is
selected, the root conftest starts each command (:func:`register`, :func:`start_all`) at the
end of collection, in a process of its own with the repository's root as working directory; the
module's tests get the outcome through the ``early`` fixture (:func:`get`, then
:meth:`EarlyRun.wait`). A long single-threaded check (mypy over the package: ~17 s of CPU with
a cold cache) so runs on the machine's other core while the tests before it run, instead of
after them. What it checks, and what the test asserts on its outcome, are unchanged. In a
parallel run (pytest-xdist) a worker starts a command only when one of its tests asks for it:
every worker collects every test, and the other workers already use the machine's cores.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

Command = Callable[[Path], list[str]]
"""Given a scratch directory of its own (removed at the end of the session): a command line."""

_REGISTERED: dict[str, tuple[Command, Path]] = {}
_RUNS: dict[str, EarlyRun] = {}


class EarlyRun:
    """One command running (or finished) in a process of its own; its output goes to files."""

    def __init__(self, name: str, command: Command, cwd: Path) -> None:
        self.name = name
        self.scratch = Path(tempfile.mkdtemp(prefix=f"kt-early-{name}-"))
        self.args = command(self.scratch)
        self._out: IO[str] = tempfile.TemporaryFile("w+")
        self._err: IO[str] = tempfile.TemporaryFile("w+")
        self._proc = subprocess.Popen(
            self.args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err
        )
        self._done: subprocess.CompletedProcess[str] | None = None

    def wait(self, timeout_s: float) -> subprocess.CompletedProcess[str]:
        """The command's outcome, waiting up to ``timeout_s`` seconds for it to end.

        Raises
        ------
        subprocess.TimeoutExpired
            If it has not ended by then (it is killed).
        """
        if self._done is None:
            try:
                code = self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
                raise
            self._out.seek(0)
            self._err.seek(0)
            self._done = subprocess.CompletedProcess(
                self.args, code, self._out.read(), self._err.read()
            )
        return self._done

    def close(self) -> None:
        """Stop the command if it still runs; remove its files and scratch directory."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._out.close()
        self._err.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def register(commands: dict[str, Command], cwd: Path) -> None:
    """Note each command (to run in ``cwd``), without starting it."""
    for name, command in commands.items():
        _REGISTERED.setdefault(name, (command, cwd))


def start_all() -> None:
    """Start each registered command not started yet."""
    for name in _REGISTERED:
        get(name)


def get(name: str) -> EarlyRun:
    """The run of the registered command ``name``, started now if it was not yet
    (``KeyError`` if it was never registered)."""
    if name not in _RUNS:
        command, cwd = _REGISTERED[name]
        _RUNS[name] = EarlyRun(name, command, cwd)
    return _RUNS[name]


def close_all() -> None:
    """Stop and clean up every run (end of the session)."""
    _REGISTERED.clear()
    while _RUNS:
        _RUNS.popitem()[1].close()
