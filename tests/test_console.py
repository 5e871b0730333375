"""The console script: a Ctrl-C while the command line is still loading gives the one line and
exit code of a Ctrl-C later on, not an import traceback."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys

import pytest

from knights_tour import console
from knights_tour.commands._errors import ExitCode


@pytest.mark.unit
def test_the_exit_code_of_an_interrupt_while_loading_is_the_command_lines():
    assert console.INTERRUPTED_WHILE_LOADING == ExitCode.INTERRUPTED


@pytest.mark.unit
def test_ctrl_c_while_the_command_line_loads_is_one_line_and_130(monkeypatch, capsys):
    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "knights_tour" and args and args[2] and "cli" in args[2]:
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "knights_tour.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as stop:
        console.run()
    assert stop.value.code == 130
    err = capsys.readouterr().err
    assert err == "ktour: interrupted\n"
    assert "Traceback" not in err


@pytest.mark.unit
def test_the_console_script_runs_the_command_line(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["ktour", "--help"])
    with pytest.raises(SystemExit) as stop:
        console.run()
    assert stop.value.code == 0
    assert "Usage" in capsys.readouterr().out


_INTERRUPTED_IN_GENERATED_CODE = """
import sys
from knights_tour import cli

def interrupted(*args, **kwargs):
    # a Ctrl-C landing in code generated with exec, as dataclasses builds a class's methods
    exec("raise KeyboardInterrupt")

cli.cli.main = interrupted
sys.argv = ["ktour", "batches"]
from knights_tour.console import run
run()
"""


@pytest.mark.process
def test_ctrl_c_in_generated_code_still_exits_130_not_by_the_signal(tmp_path):
    # Run as ``python -m``, as ``python -m knights_tour`` runs: only that way does the
    # interpreter look at its note of an unhandled Ctrl-C after the program has exited.
    (tmp_path / "interrupted_ktour.py").write_text(_INTERRUPTED_IN_GENERATED_CODE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_ktour"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr == "ktour: interrupted\n"


_INTERRUPT_IN_A_FINALIZER = """
import gc, sys
from knights_tour import console

sys.unraisablehook = console._drop_interrupts_in_finalizers


class Interrupted:
    def __del__(self):
        raise KeyboardInterrupt


class Broken:
    def __del__(self):
        raise ValueError("a real bug in a finalizer")


Interrupted()
Broken()
gc.collect()
print("still running")
"""


@pytest.mark.process
def test_a_ctrl_c_landing_in_a_finalizer_prints_no_traceback(tmp_path):
    # A repeated Ctrl-C during the stop once landed in redis-py's ConnectionPool.__del__ and
    # printed "Exception ignored in ..." with a traceback; other errors there are still shown.
    script = tmp_path / "finalizers.py"
    script.write_text(_INTERRUPT_IN_A_FINALIZER)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "still running\n"
    assert "KeyboardInterrupt" not in done.stderr, done.stderr
    assert "ValueError: a real bug in a finalizer" in done.stderr, done.stderr
