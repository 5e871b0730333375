"""The ``ktour`` console script (and ``python -m knights_tour``): loads the command line
(:mod:`knights_tour.cli`) and runs it.

A Ctrl-C while the command line is still loading - its first tenths of a second: click and
the package's modules - ends the command as a Ctrl-C does later on, with ``ktour:
interrupted`` and exit code 130 (:attr:`knights_tour.commands._errors.ExitCode.INTERRUPTED`),
instead of an import traceback.

``ktour run`` starts its local workers' parent before anything else
(:mod:`knights_tour.local.prelaunch`), so that it loads Celery and the engine while the
command line loads; one that the command did not take over (bad input, Ctrl-C while loading,
no local workers needed) is killed when the command ends. Nothing else has been started while
the command line loads.

numpy's OpenBLAS gets one thread (:data:`~knights_tour.local.prelaunch.ONE_BLAS_THREAD`)
unless the environment sets its count: nothing ``ktour`` runs does linear algebra.

Whatever the command's exit code, the process ends with it: a Ctrl-C that the command handled
(``ktour: interrupted``, 130) must not turn into a death by SIGINT at the interpreter's exit
(:func:`_forget_handled_interrupt`).

A Ctrl-C pressed again while the command is already stopping may land in a finalizer (an
object's ``__del__`` run by the garbage collector, such as a Redis connection pool's), where
Python cannot raise it and prints "Exception ignored in ..." with a traceback instead. The
first Ctrl-C has already started the orderly stop, so such an interrupt is dropped quietly
(:func:`_drop_interrupts_in_finalizers`); every other unraisable exception is reported as
before.
"""

from __future__ import annotations

import os
import sys

from knights_tour.local import prelaunch

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
    sys.unraisablehook = _drop_interrupts_in_finalizers
    for name, value in prelaunch.ONE_BLAS_THREAD.items():
        os.environ.setdefault(name, value)  # before numpy is first imported
    try:
        try:
            prelaunch.prelaunch(sys.argv[1:])
            from knights_tour import cli
        except KeyboardInterrupt:
            sys.stderr.write("ktour: interrupted\n")
            raise SystemExit(INTERRUPTED_WHILE_LOADING) from None
        cli.run()
    except SystemExit:
        _forget_handled_interrupt()
        raise
    finally:
        prelaunch.dismiss()


def _drop_interrupts_in_finalizers(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook`` of ``ktour``: a KeyboardInterrupt that could not be raised (it
    landed in a finalizer) is dropped; anything else goes to Python's default hook."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def _forget_handled_interrupt() -> None:
    """Clear CPython's record of an unhandled Ctrl-C before exiting with a code.

    CPython notes a KeyboardInterrupt that escapes code run by ``exec`` of a string (as
    dataclasses, namedtuple and others generate their methods, often during an import) as
    unhandled, even when a caller catches it, and after finalizing kills the process with
    SIGINT instead of exiting with the code given (``Py_RunMain``; the note is reset only when
    the next such ``exec`` starts). A Ctrl-C landing in one of those instants made ``ktour``
    print ``ktour: interrupted`` and then die by SIGINT instead of exiting 130. Running an
    empty ``exec`` resets the note.
    """
    exec("")  # noqa: S102 - a constant empty program: only its reset of the note is wanted


__all__ = ["run", "INTERRUPTED_WHILE_LOADING"]
