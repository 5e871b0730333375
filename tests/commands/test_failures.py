"""Every failure is one clear line: ``ktour: error: ...`` naming the user's path or value, the
exact exit code, no traceback, nothing half-written, no phantom batch.

Where the process itself is the point (the exit status a shell sees, a closed pipe, a terminal,
a private mount namespace) the real ``ktour`` (``python -m knights_tour``) runs as a
subprocess; elsewhere the command line runs in this process (``main()``, as the console script
calls it) with its file descriptors 1 and 2 captured (``capfd``), so whatever reaches them is
seen, a child process's writes included.
"""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
from _cli import KTOUR, ktour, ktour_env, run_cli

from knights_tour.batches import saving
from knights_tour.batches.client import make_jobs, submit_batch
from knights_tour.batches.jobs import JobOptions, run_job
from knights_tour.settings import get_settings

# Euler's closed 8x8 tour (1759; OEIS A226697 has the board), as printed: top row first.
EULER_8X8 = Path(__file__).parents[1] / "data" / "euler_8x8_closed_a226697.txt"


# In-process commands get the data dir of conftest's data_dir and no KT_REDIS_URL, as the
# subprocesses do (:func:`ktour`).
pytestmark = pytest.mark.usefixtures("data_dir")


def in_process(capfd: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``ktour ARGS`` run in this process (:func:`knights_tour.cli.main`), as a completed
    process: its exit code and what reached file descriptors 1 and 2."""
    code, out, err = run_cli(capfd, *args)
    return subprocess.CompletedProcess(["ktour", *args], int(code), out, err)


def assert_one_error_line(
    proc: subprocess.CompletedProcess[str], *fragments: str, after_progress: bool = False
) -> str:
    """Exit 2, exactly one ``ktour: error:`` line on stderr holding every fragment, and no
    other line (``after_progress``: the progress notes of a batch that ran may precede it)."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    if after_progress:
        assert all(line.startswith("ktour: ") for line in lines), proc.stderr
        lines = [line for line in lines if line.startswith("ktour: error: ")]
    assert len(lines) == 1 and lines[0].startswith("ktour: error: "), proc.stderr
    assert proc.stderr.splitlines()[-1] == lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _book(tmp_path: Path, row: int, col: int, step: int) -> Path:
    """Euler's board with the number on line ``row``, column ``col`` (1-based) changed."""
    rows = [line.split() for line in EULER_8X8.read_text().splitlines()]
    rows[row - 1][col - 1] = str(step)
    path = tmp_path / "book.txt"
    path.write_text("".join(" ".join(f"{k:>2}" for k in r) + "\n" for r in rows))
    return path


# -- verify: a matrix that is read but is not a tour is invalid (1), not an error (2) --------


def test_verify_the_printed_board_is_valid(capfd) -> None:
    proc = in_process(capfd, "verify", str(EULER_8X8), "--closed")
    assert (proc.returncode, proc.stdout) == (0, "valid closed tour of 8x8 from a4\n")


def test_verify_a_step_printed_twice_is_invalid_exit_1(tmp_path: Path) -> None:
    """Through the real process: exit status 1 as a shell sees it, nothing on stderr."""
    path = _book(tmp_path, 2, 5, 41)  # a misprint: 42 printed as 41 (41 is on line 1)
    proc = ktour("verify", str(path))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "invalid: step 41 appears twice (line 1, column 7 and line 2, column 5)\n"
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "change, reason",
    [
        ((1, 1, 65), "step 65 is out of range 1..64 for a 8x8 board (line 1, column 1)"),
        ((1, 2, 1), "step 1 appears twice (line 1, column 2 and line 5, column 1)"),
        ((3, 3, -3), "step numbers must start at 1 (or 0), but the smallest is -3"),
    ],
)
def test_verify_numbers_that_are_not_the_steps_are_invalid(
    tmp_path: Path, capfd, monkeypatch, change, reason
) -> None:
    path = _book(tmp_path, *change)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    proc = in_process(capfd, "verify", "-")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, f"invalid: {reason}\n", "")


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("1 2 3\n4 5\n", "line 2: ragged rows"),
        ("1 2\n3 four\n", "'four' is not a step number"),
        ("", "no step numbers"),
    ],
)
def test_verify_a_file_that_is_not_a_matrix_stays_exit_2(
    tmp_path: Path, capfd, content, fragment
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content)
    proc = in_process(capfd, "verify", str(path))
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


@pytest.mark.parametrize(
    "command",
    [
        ["submit", "--sizes", "5"],
        ["run", "--sizes", "5", "--workers", "0"],
        ["workers"],
        ["count", "5", "--workers", "0"],
    ],
)
@pytest.mark.parametrize(
    "tail, fragment",
    [
        ("/abc", "database 'abc' is not a number"),
        ("/0?db=x", "database 'x' is not a number"),
        ("/99", "has no database 99"),
    ],
)
def test_bad_redis_database_is_one_line_and_no_phantom_batch(
    redis_server, capfd, command, tail, fragment
) -> None:
    url = _with_path(redis_server.url, tail)
    before = _all_keys(redis_server)
    proc = in_process(capfd, *command, "--redis", url)
    assert_one_error_line(proc, url, fragment)
    assert _all_keys(redis_server) == before


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("http://127.0.0.1:6379/0", "scheme 'http'; use redis://, rediss:// or unix://"),
        ("127.0.0.1:6379", "use redis://, rediss:// or unix://"),
        ("redis://127.0.0.1:99999/0", "port '99999' is not a number in 1..65535"),
        ("redis://127.0.0.1:six/0", "port 'six' is not a number in 1..65535"),
        ("redis:///0", "no host"),
    ],
)
def test_malformed_redis_url_is_one_line(capfd, url: str, fragment: str) -> None:
    proc = in_process(capfd, "submit", "--sizes", "5", "--redis", url)
    assert_one_error_line(proc, "invalid Redis URL", fragment)


def test_malformed_kt_redis_url_is_one_line_naming_it(capfd, monkeypatch) -> None:
    monkeypatch.setenv("KT_REDIS_URL", "redis://127.0.0.1:6379/abc")
    get_settings.cache_clear()
    proc = in_process(capfd, "status")
    assert_one_error_line(proc, "redis://127.0.0.1:6379/abc", "database 'abc' is not a number")


def test_redis_url_password_is_masked_in_the_error() -> None:
    """Through the real process: exit status 2 as a shell sees it, and nothing it writes
    anywhere shows the password."""
    proc = ktour("submit", "--sizes", "5", "--redis", "redis://:s3cret@127.0.0.1:6379/abc")
    line = assert_one_error_line(proc, "redis://:***@127.0.0.1:6379/abc")
    assert "s3cret" not in line and "s3cret" not in proc.stdout + proc.stderr


# -- configuration and options that cannot work: refused before anything starts --------------


@pytest.mark.parametrize(
    "name, value", [("KT_DATA_DIR", ""), ("KT_DATA_DIR", "  "), ("KT_REPORTS_DIR", "")]
)
def test_empty_path_variable_is_refused_not_the_current_directory(
    tmp_path, capfd, monkeypatch, name, value
) -> None:
    monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    proc = in_process(capfd, "run", "--sizes", "5")
    assert_one_error_line(proc, f"invalid configuration: {name}: must be a path, not empty")
    assert list(tmp_path.iterdir()) == []  # no redis/ or logs/ in the current directory


@pytest.mark.parametrize("command", [["run", "--sizes", "5"], ["count", "5"]])
def test_workers_0_without_redis_is_refused_at_once(data_dir: Path, capfd, command) -> None:
    proc = in_process(capfd, *command, "--workers", "0")
    assert_one_error_line(proc, "--workers", "0 starts no worker", "--redis URL")
    assert not data_dir.exists()  # no embedded Redis was started


def test_workers_0_with_a_redis_url_is_accepted(redis_db_url, capfd, tmp_path, monkeypatch) -> None:
    """The batch is submitted to the workers listening there (none here): the run waits for
    them until its --timeout, which is all this needs."""
    monkeypatch.chdir(tmp_path)
    proc = in_process(
        capfd, "run", "--sizes", "5", "--workers", "0", "--timeout", "0.2", "--redis", redis_db_url
    )
    assert "--workers" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.returncode == 1 and "cancelled by --timeout" in proc.stderr, proc.stderr


# -- --out: checked before the batch, named as given -----------------------------------------


def _read_only_dir(tmp_path: Path) -> Path:
    """A directory this process cannot create files in (root ignores modes: a read-only bind
    mount in a private mount namespace is not possible from here, so root gets /proc)."""
    if os.geteuid() == 0:
        return Path("/proc/self")
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o500)
    return ro


@pytest.mark.parametrize("case", ["directory", "missing dir", "read-only dir"])
def test_unwritable_out_is_refused_before_the_batch(tmp_path, data_dir: Path, capfd, case) -> None:
    if case == "directory":
        out, why = tmp_path, "it is a directory"
    elif case == "missing dir":
        out, why = tmp_path / "no-such" / "r.jsonl", f"directory {tmp_path / 'no-such'} does not"
    else:
        out, why = _read_only_dir(tmp_path) / "r.jsonl", "cannot write"
    proc = in_process(capfd, "run", "--sizes", "5", "--workers", "1", "--out", str(out))
    assert_one_error_line(proc, f"cannot write {out}", why)
    assert not data_dir.exists()  # checked before anything started: no batch anywhere


def test_full_disk_on_out_names_the_path(data_dir, capfd) -> None:
    """``/dev/full`` answers every write with ENOSPC, as a full disk does; the batch ran (a full
    disk cannot be foreseen), so the message says how to get its records."""
    proc = in_process(capfd, "run", "--sizes", "5", "--workers", "1", "--out", "/dev/full")
    assert_one_error_line(
        proc,
        "cannot write /dev/full: No space left on device",
        "ktour collect",
        after_progress=True,
    )
    assert Path("/dev/full").is_char_device()  # written in place, never replaced


def test_closed_stdout_pipe_ends_quietly(data_dir: Path) -> None:
    """``ktour run --out - | head -c 100``: the records do not fit in the pipe, the reader
    leaves; ``ktour`` ends without a word, as ``SIGPIPE`` ends a Unix tool, and not with 0
    (with or without ``PYTHONUNBUFFERED``)."""
    for unbuffered in ("1", ""):
        env = ktour_env(KT_DATA_DIR=str(data_dir), PYTHONUNBUFFERED=unbuffered)
        proc = subprocess.Popen(
            [*KTOUR, "run", "--sizes", "5-8", "--workers", "1", "--out", "-"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert len(proc.stdout.read(100)) == 100
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=180) == 141, stderr
        assert "Traceback" not in stderr and "Exception ignored" not in stderr
        assert [line for line in stderr.splitlines() if "error" in line] == []


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """``ktour ARGS`` with its stdout on a pseudo-terminal: (exit code, what the terminal
    showed, stderr)."""
    main_fd, term_fd = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*KTOUR, *args],
            env=ktour_env(TERM="xterm", COLUMNS="120"),
            stdout=term_fd,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(term_fd)
        shown = b""
        while True:  # read as it comes: a terminal's buffer is small
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            shown += chunk
        _, err = proc.communicate(timeout=180)
        return proc.returncode, shown.decode(errors="replace"), err
    finally:
        os.close(main_fd)


def test_solve_prints_no_huge_board_on_a_terminal(capfd) -> None:
    """A board past the terminal limit (120x120: 14,400 squares) is not dumped on a terminal:
    a line says how to have it; piped, it is printed in full."""
    code, shown, err = _on_a_terminal("solve", "120x120", "a1")
    assert code == 0, err
    assert shown.count("\n") == 1 and shown.startswith("# status found;"), shown[:300]
    assert err.startswith("ktour: the 120x120 board (14,400 squares) is not printed on a terminal")
    assert "--json" in err and "--svg FILE" in err
    piped = in_process(capfd, "solve", "120x120", "a1")  # stdout is not a terminal
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 121
    code, shown, err = _on_a_terminal("solve", "8", "a1")  # a board that fits: printed
    assert code == 0 and len(shown.splitlines()) > 8, err


def _closed_pipe_run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``ktour ARGS`` with a stdout pipe whose reader is gone before it starts: its first
    write meets ``EPIPE``."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*KTOUR, *args],
            env=ktour_env(**env),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
        )
    finally:
        os.close(write_end)


def test_every_command_that_writes_to_stdout_ends_quietly_on_a_closed_pipe(
    data_dir: Path, redis_db_url: str, tmp_path: Path, capfd
) -> None:
    """``ktour collect B --format jsonl | head -1`` and the like: no line on stderr, exit
    141 (128 + SIGPIPE), whatever command writes."""
    env = {"KT_DATA_DIR": str(data_dir)}
    _, jobs, params = make_jobs(["5"], JobOptions())
    batch_id = submit_batch(redis_db_url, jobs, params)  # no worker: the records stored here
    client = redis.Redis.from_url(redis_db_url, decode_responses=True)
    for job in jobs:
        saving.save_record(client, batch_id, run_job(job, batch_id=batch_id))
    record = tmp_path / "one.jsonl"
    solved = in_process(capfd, "solve", "5", "a1", "--json")
    assert solved.returncode == 0, solved.stderr
    record.write_text(solved.stdout)
    commands = [
        ["solve", "8", "a1"],
        ["--help"],
        ["collect", batch_id, "--format", "jsonl", "--redis", redis_db_url],
        ["status", batch_id, "--redis", redis_db_url],
        ["batches", "--redis", redis_db_url],
        ["draw", str(record)],
        ["verify", str(EULER_8X8)],
    ]
    for args in commands:
        proc = _closed_pipe_run(*args, env=env)
        assert (proc.returncode, proc.stderr) == (141, ""), args


# -- the data dir: full or read-only ---------------------------------------------------------


def _private_mounts() -> bool:
    """Whether this user may mount a tmpfs in a private user + mount namespace."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


def ktour_on_tmpfs(mount: Path, options: str, *commands: list[str]) -> list[tuple[int, str]]:
    """Run ``ktour`` commands one after the other with ``KT_DATA_DIR`` = ``mount``, a tmpfs
    mounted with ``options`` in a private mount namespace; ``(exit code, stderr)`` of each."""
    mount.mkdir()
    script = [f"mount -t tmpfs -o {options} tmpfs {mount} || exit 99"]
    for i, cmd in enumerate(commands):
        argv = " ".join([*KTOUR, *cmd])
        script.append(f"{argv} >/dev/null 2>{mount.parent}/err{i}; echo $? >{mount.parent}/rc{i}")
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "\n".join(script)],
        env=ktour_env(KT_DATA_DIR=str(mount)),
        timeout=300,
    )
    assert proc.returncode == 0
    return [
        (int((mount.parent / f"rc{i}").read_text()), (mount.parent / f"err{i}").read_text())
        for i in range(len(commands))
    ]


def _misconf_server(directory: Path):
    """The fallback without private mounts: a Redis server of its own made to refuse writes
    the way a full disk does: its snapshot fails (its directory moved to one nobody can
    write), and Redis then answers every write with ``MISCONF``."""
    from knights_tour.local.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(directory, reuse=False).start()
    client = redis.Redis.from_url(server.url)
    client.config_set("dir", "/proc/self")
    client.config_set("save", "1 1")
    client.set("kt:test:dirty", "1")  # the save point fires within a second, and fails
    deadline = time.monotonic() + 60
    while client.info("persistence").get("rdb_last_bgsave_status") != "err":
        assert time.monotonic() < deadline, "the snapshot did not fail"
        time.sleep(0.1)
    return server


def test_full_data_dir_is_one_line_naming_it_and_no_phantom_batch(tmp_path: Path) -> None:
    """A tmpfs of 16 KiB as the data dir (private mount namespace); without one, a Redis that
    refuses writes with MISCONF given by ``--redis``: one line, no batch registered."""
    mount = tmp_path / "kt-data"
    run = ["run", "--sizes", "5-6", "--workers", "1", "--out", str(tmp_path / "r.jsonl")]
    if _private_mounts():
        (code, err), (_, listing) = ktour_on_tmpfs(mount, "size=16k", run, ["batches"])
        expected = f"the embedded Redis cannot write its data under {mount}/redis: "
    else:
        server = _misconf_server(tmp_path / "redis")
        try:
            proc = ktour(*run, "--redis", server.url, env={"KT_DATA_DIR": str(mount)})
            code, err = proc.returncode, proc.stderr
            listing = ktour("batches", "--redis", server.url).stderr
            assert redis.Redis.from_url(server.url).keys("kt:batch*") == []
        finally:
            server.stop()
        expected = " refuses writes: "
    assert code == 2 and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("ktour: error: ")]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    assert expected in errors[0], errors[0]
    assert "No space left on device" in errors[0] or "not able to persist" in errors[0]
    assert not (tmp_path / "r.jsonl").exists()
    assert "Traceback" not in listing and "did not start" not in listing


def test_read_only_data_dir_is_one_line_naming_it(tmp_path: Path) -> None:
    mount = tmp_path / "kt-data"
    if _private_mounts():
        ((code, err),) = ktour_on_tmpfs(mount, "ro", ["run", "--sizes", "5", "--workers", "1"])
    else:
        mount = _read_only_dir(tmp_path) / "kt-data"
        proc = ktour("run", "--sizes", "5", "--workers", "1", env={"KT_DATA_DIR": str(mount)})
        code, err = proc.returncode, proc.stderr
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("ktour: error: "), err
    assert str(mount) in lines[0] and "Traceback" not in err
