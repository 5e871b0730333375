"""The command line run in the test's own process: ``main`` with its exit code and the
output captured by pytest's ``capsys``."""

from __future__ import annotations

from typing import Any

from knights_tour.cli import main


def run_cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """Run ``ktour ARGS...`` through :func:`knights_tour.cli.main`; return its exit code and
    what it wrote to stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
