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


# -- a bad Redis URL: one line, and nothing registered anywhere ------------------------------


def _with_path(url: str, tail: str) -> str:
    """``url`` (``redis://host:port/0``) with its database part replaced by ``tail``."""
    return url.rsplit("/", 1)[0] + tail


def _all_keys(redis_server: object) -> dict[int, list[str]]:
    """Every key of databases 0..15 of the test server (to show nothing was written)."""
    import redis

    out = {}
    for db in range(16):
        client = redis.Redis.from_url(redis_server.url_for_db(db))  # type: ignore[attr-defined]
        out[db] = sorted(k.decode() for k in client.keys("kt:batch*"))
        client.close()
    return out


@pytest.mark.parametrize("command", [
    ["submit", "--sizes", "5"],
    ["run", "--sizes", "5", "--workers", "0"],
    ["workers"],
    ["count", "5", "--workers", "0"],
])
@pytest.mark.parametrize("tail, fragment", [
    ("/abc", "database 'abc' is not a number"),
    ("/0?db=x", "database 'x' is not a number"),
    ("/99", "has no database 99"),
])
def test_bad_redis_database_is_one_line_and_no_phantom_batch(redis_server, command, tail,
                                                             fragment) -> None:
    url = _with_path(redis_server.url, tail)
    before = _all_keys(redis_server)
    proc = ktour(*command, "--redis", url)
    assert_one_error_line(proc, url, fragment)
    assert _all_keys(redis_server) == before


@pytest.mark.parametrize("url, fragment", [
    ("http://127.0.0.1:6379/0", "scheme 'http'; use redis://, rediss:// or unix://"),
    ("127.0.0.1:6379", "use redis://, rediss:// or unix://"),
    ("redis://127.0.0.1:99999/0", "port '99999' is not a number in 1..65535"),
    ("redis://127.0.0.1:six/0", "port 'six' is not a number in 1..65535"),
    ("redis:///0", "no host"),
])
def test_malformed_redis_url_is_one_line(url: str, fragment: str) -> None:
    proc = ktour("submit", "--sizes", "5", "--redis", url)
    assert_one_error_line(proc, "invalid Redis URL", fragment)


def test_malformed_kt_redis_url_is_one_line_naming_it() -> None:
    proc = ktour("status", env={"KT_REDIS_URL": "redis://127.0.0.1:6379/abc"})
    assert_one_error_line(proc, "redis://127.0.0.1:6379/abc", "database 'abc' is not a number")


def test_redis_url_password_is_masked_in_the_error() -> None:
    proc = ktour("submit", "--sizes", "5", "--redis", "redis://:s3cret@127.0.0.1:6379/abc")
    line = assert_one_error_line(proc, "redis://:***@127.0.0.1:6379/abc")
    assert "s3cret" not in line
