"""The ``ktour`` console script (and ``python -m knights_tour``): loads the command line
(:mod:`knights_tour.cli`) and runs it.

A Ctrl-C while the command line is still loading - its first tenths of a second: click and
the package's modules - ends the command as a Ctrl-C does later on, with ``ktour:
interrupted`` and exit code 130 (:attr:`knights_tour.commands._errors.ExitCode.INTERRUPTED`),
instead of an import traceback. Nothing has been started by then, so there is nothing to stop.
"""

from __future__ import annotations

import sys

INTERRUPTED_WHILE_LOADING = 130
"""The exit code of a Ctrl-C while loading: ``ExitCode.INTERRUPTED``, which is not loaded yet
(a test checks that the two agree)."""


def run() -> None:
    """Load :mod:`knights_tour.cli` and run its :func:`~knights_tour.cli.run` (which exits
    with the command's code).

    Raises
    ------
    SystemExit
        Always: the command's exit code, or 130 on a Ctrl-C while loading.
    """
    try:
        from knights_tour import cli
    except KeyboardInterrupt:
        sys.stderr.write("ktour: interrupted\n")
        raise SystemExit(INTERRUPTED_WHILE_LOADING) from None
    cli.run()


__all__ = ["run", "INTERRUPTED_WHILE_LOADING"]
