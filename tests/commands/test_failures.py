"""Every failure is one clear line: ``ktour: error: ...`` naming the user's path or value, the
exact exit code, no traceback, nothing half-written, no phantom batch.

Each case runs the real ``ktour`` (``python -m knights_tour``) as a subprocess, so the whole
path from ``main()`` to the exit status is exercised, including what reaches stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# A 5x5 open knight's tour (squares numbered in step order, top row first).
TOUR_5X5 = [
    [1, 14, 9, 20, 3],
    [24, 19, 2, 15, 10],
    [13, 8, 25, 4, 21],
    [18, 23, 6, 11, 16],
    [7, 12, 17, 22, 5],
]


def ktour(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
          timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``ktour ARGS`` in a subprocess; ``env`` entries override the environment."""
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "knights_tour", *args], env=full,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def assert_one_error_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, exactly one ``ktour: error:`` line on stderr holding every fragment."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("ktour: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _matrix(rows: list[list[int]]) -> str:
    return "".join(" ".join(f"{k:2d}" for k in row) + "\n" for row in rows)


# -- verify: a matrix that is read but is not a tour is invalid (1), not an error (2) --------


def test_verify_a_step_used_twice_is_invalid_exit_1(tmp_path: Path) -> None:
    rows = [row[:] for row in TOUR_5X5]
    rows[4][3] = 21  # step 22 replaced by a second 21 (21 is already at line 3, column 5)
    path = tmp_path / "book.txt"
    path.write_text(_matrix(rows))
    proc = ktour("verify", str(path))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "invalid: step 21 appears twice (line 3, column 5 and line 5, column 4)\n"
    assert proc.stderr == ""


@pytest.mark.parametrize("change, reason", [
    ((2, 2, 26), "step 26 is out of range 1..25 for a 5x5 board (line 3, column 3)"),
    ((0, 1, 1), "step 1 appears twice (line 1, column 1 and line 1, column 2)"),
    ((2, 2, -3), "step numbers must start at 1 (or 0), but the smallest is -3"),
])
def test_verify_numbers_that_are_not_the_steps_are_invalid(tmp_path: Path, change, reason) -> None:
    rows = [row[:] for row in TOUR_5X5]
    r, c, k = change
    rows[r][c] = k
    path = tmp_path / "book.txt"
    path.write_text(_matrix(rows))
    proc = ktour("verify", "-", stdin=path.read_text())
    assert proc.returncode == 1 and proc.stdout.startswith(f"invalid: {reason}"), proc
    assert proc.stderr == ""


@pytest.mark.parametrize("content, fragment", [
    ("1 2 3\n4 5\n", "line 2: ragged rows"),
    ("1 2\n3 four\n", "'four' is not a step number"),
    ("", "no step numbers"),
])
def test_verify_a_file_that_is_not_a_matrix_stays_exit_2(tmp_path: Path, content, fragment) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content)
    proc = ktour("verify", str(path))
    assert_one_error_line(proc, str(path), fragment)
    assert proc.stdout == ""
