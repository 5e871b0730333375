"""Guards before a big batch or count, cleanup (``forget``, ``prune``, worker log rotation),
and the output details: file modes from the umask, progress lines without a terminal, help
texts and hints that are true, "did you mean" for a mistyped command.

In-process through ``main([...])`` against the real test Redis (its own database per test).
Facts from outside the code: a board n x n has n * n start squares (one job each), so
``--sizes 1000`` is 1,000,000 jobs; every square of the 6x6 board starts an open tour (n even,
n >= 6: Conrad et al. 1994), so a 6x6 batch has 36 tours.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import time
from pathlib import Path

import pytest
from _cli import run_cli

from knights_tour.batches import collector, saving
from knights_tour.batches.client import make_jobs, submit_batch
from knights_tour.batches.estimate import estimate_batch, tour_chars
from knights_tour.batches.jobs import Job, JobOptions, run_job
from knights_tour.batches.progress import CANCELLED, batch_state, batch_status, get_batch_meta
from knights_tour.board import Board
from knights_tour.local.worker_pool import rotate_logs
from knights_tour.output.recordfile import jsonl_line
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.worker import celery as worker
from knights_tour.worker import leases, messages
from knights_tour.worker.ledger import Ledger


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch, tmp_path):
    """Own data dir, no KT_REDIS_URL, thresholds at their defaults."""
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "kt-data"))
    for name in ("KT_REDIS_URL", "KT_CONFIRM_JOBS", "KT_CONFIRM_OUTPUT_MB", "KT_CONFIRM_HOURS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KT_WORKERS", "2")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _all_keys(r) -> list[str]:
    return sorted(r.keys("*"))


def _batch_messages(r, batch_id: str) -> int:
    from knights_tour.batches.cancelling import message_of

    match = message_of(batch_id, messages.TASK_RUN_JOBS)
    return sum(match(raw) for name in worker.queue_lists() for raw in r.lrange(name, 0, -1))


# -- estimates ------------------------------------------------------------------------------


def test_the_output_estimate_bounds_the_records_actually_written():
    jobs = [Job(6, 6, (r, c)) for r in range(6) for c in range(6)]
    written = sum(len(jsonl_line(run_job(j, batch_id="b"))) for j in jobs)
    est = estimate_batch([Board(6, 6)])
    assert est.jobs == 36
    assert written <= est.output_bytes <= 1.5 * written
    tour = json.dumps(run_job(jobs[0]).to_dict()["tour"], separators=(",", ":"))
    assert tour_chars(Board(6, 6)) == len(tour)
    big = json.dumps([[r, c] for r in range(12) for c in range(10)], separators=(",", ":"))
    assert tour_chars(Board(12, 10)) == len(big)  # every square once, two-digit rows


# -- the guard: ask, --yes, or refuse without a terminal ------------------------------------


@pytest.mark.parametrize("command", ["run", "submit"])
def test_a_million_jobs_without_yes_is_refused_with_one_line(
    capsys, redis_client, redis_db_url, command
):
    before = _all_keys(redis_client)
    code, out, err = run_cli(capsys, command, "--sizes", "1000", "--redis", redis_db_url)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ktour: error: not submitted: 1,000,000 jobs")
    assert "--yes" in lines[0] and "KT_CONFIRM_JOBS" in lines[0]
    assert _all_keys(redis_client) == before  # nothing registered, nothing queued


def test_on_a_terminal_the_question_is_asked_and_no_submits_nothing(
    capsys, monkeypatch, redis_client, redis_db_url
):
    monkeypatch.setattr("knights_tour.commands._checks.stdin_is_terminal", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run_cli(capsys, "submit", "--sizes", "1000", "--redis", redis_db_url)
    assert code == 1
    assert "Submit it?" in err and "nothing submitted" in err
    assert _all_keys(redis_client) == []


def test_yes_and_a_yes_answer_submit(capsys, monkeypatch, redis_client, redis_db_url):
    monkeypatch.setenv("KT_CONFIRM_JOBS", "10")
    get_settings.cache_clear()
    code, _, err = run_cli(capsys, "submit", "--sizes", "5", "--redis", redis_db_url)
    assert code == 2 and "25 jobs" in err and "--yes" in err
    code, out, err = run_cli(capsys, "submit", "--sizes", "5", "--yes", "--redis", redis_db_url)
    assert code == 0, err
    first = out.splitlines()[-1]
    monkeypatch.setattr("knights_tour.commands._checks.stdin_is_terminal", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = run_cli(capsys, "submit", "--sizes", "6", "--redis", redis_db_url)
    assert code == 0, err
    second = out.splitlines()[-1]
    assert [get_batch_meta(redis_client, b)["total"] for b in (first, second)] == [25, 36]


def test_count_beyond_an_hour_of_this_machine_asks(capsys, redis_client, redis_db_url):
    # closed tours are always counted by enumeration; 6x8 takes CPU-hours that way
    code, out, err = run_cli(
        capsys, "count", "6x8", "--closed", "--workers", "2", "--redis", redis_db_url
    )
    assert code == 2 and out == ""
    line = err.splitlines()[-1]
    assert line.startswith("ktour: error: not submitted: an exhaustive count on 6x8")
    assert "KT_CONFIRM_HOURS" in line and "--yes" in line
    assert _all_keys(redis_client) == []
    # 7x8 open tours: the frontier DP, hours in this process (7x7 alone took 45 min: docs/counts)
    code, out, err = run_cli(capsys, "count", "7x8", "--redis", redis_db_url)
    assert code == 2 and out == ""
    line = err.splitlines()[-1]
    assert line.startswith("ktour: error: not submitted: a frontier-DP count on 7x8 takes ~ ")
    assert "--yes" in line


# -- forget and prune -----------------------------------------------------------------------


def _batch_with_records(url: str, r, size: str, recorded: int) -> tuple[str, list[Job]]:
    _, jobs, params = make_jobs([size], JobOptions())
    batch_id = submit_batch(url, jobs, params, chunk_size=4)  # no worker: tasks stay queued
    for job in jobs[:recorded]:
        saving.save_record(r, batch_id, run_job(job, batch_id=batch_id))
    return batch_id, jobs


def test_forget_leaves_no_key_of_the_batch_and_says_what_was_freed(
    capsys, redis_client, redis_db_url, tmp_path, monkeypatch
):
    r = redis_client
    gone, jobs = _batch_with_records(redis_db_url, r, "6", 7)
    kept, _ = _batch_with_records(redis_db_url, r, "5", 3)
    reports = tmp_path / "reports"
    monkeypatch.setenv("KT_REPORTS_DIR", str(reports))
    get_settings.cache_clear()
    reports.mkdir()
    for bid in (gone, kept):
        for path in collector.report_paths(reports, bid):
            path.write_text("{}\n")
    (reports / collector.INDEX_FILE).write_text(
        "".join(json.dumps({"batch_id": b}) + "\n" for b in (gone, kept))
    )
    before = _all_keys(r)
    mine = [k for k in before if gone in k]
    pointer = [k for k in before if k.startswith(keys.PREFIX + "resume:") and r.get(k) == gone]
    assert len(pointer) == 1  # submit remembered it for `ktour run` to resume
    assert len(mine) >= 4  # meta, jobs, records, status, tally, ...
    assert _batch_messages(r, gone) == 9 and _batch_messages(r, kept) == 7

    code, out, err = run_cli(capsys, "forget", gone, "--redis", redis_db_url)
    assert code == 0, err
    assert out.startswith(f"batch {gone}: forgot 1 batch(es): 7 records, {len(mine)} keys, ")
    assert "2 file(s)" in out
    after = _all_keys(r)
    assert [k for k in after if gone in k] == []
    assert set(after) == set(before) - set(mine) - set(pointer)  # and nothing else
    assert gone not in r.zrange(keys.batches(), 0, -1) and gone not in r.smembers(
        keys.active_batches()
    )
    assert _batch_messages(r, gone) == 0 and _batch_messages(r, kept) == 7
    assert sorted(p.name for p in reports.iterdir()) == sorted(
        [collector.INDEX_FILE] + [p.name for p in collector.report_paths(reports, kept)]
    )
    assert [
        json.loads(x)["batch_id"] for x in (reports / collector.INDEX_FILE).read_text().splitlines()
    ] == [kept]

    code, _, err = run_cli(capsys, "forget", gone, "--redis", redis_db_url)
    assert code == 2 and f"unknown batch '{gone}'" in err


def test_forget_refuses_while_a_job_runs_and_cancels_meanwhile(capsys, redis_client, redis_db_url):
    r = redis_client
    batch_id, jobs = _batch_with_records(redis_db_url, r, "5", 0)
    # a job of it is running: claimed by a process whose lease is live
    ledger, token = Ledger.for_batch(batch_id), "test-worker-token"
    assert leases.open_lease(r, token, 60_000)
    assert leases.claim(r, ledger, token, [jobs[3].key]).claimed() == [jobs[3].key]
    code, _, err = run_cli(capsys, "forget", batch_id, "--redis", redis_db_url)
    assert code == 1 and "1 job(s) running now" in err
    assert batch_state(r, batch_id) == CANCELLED
    assert _batch_messages(r, batch_id) == 0 and r.exists(keys.batch(batch_id))


def test_prune_forgets_what_is_older_and_keeps_the_rest(
    capsys, redis_client, redis_db_url, tmp_path
):
    r = redis_client
    old, _ = _batch_with_records(redis_db_url, r, "5", 25)
    new, _ = _batch_with_records(redis_db_url, r, "5x6", 2)
    week = 7 * 86400
    r.zadd(keys.batches(), {old: time.time() - week - 3600})
    logs = get_settings().data_dir / "logs"
    logs.mkdir(parents=True)
    stale, fresh = logs / "kt1-w1.log", logs / "kt2-w1.log"
    stale.write_text("old\n")
    fresh.write_text("new\n")
    os.utime(stale, (time.time() - week - 60,) * 2)

    code, out, err = run_cli(capsys, "prune", "--older-than", "7d", "--redis", redis_db_url)
    assert code == 0, err
    assert out.startswith("forgot 1 batch(es): 25 records, ") and "1 file(s)" in out
    assert not [k for k in _all_keys(r) if old in k]
    assert batch_status(r, new)["done"] == 2
    assert not stale.exists() and fresh.exists()
    code, _, err = run_cli(capsys, "prune", "--older-than", "soon", "--redis", redis_db_url)
    assert code == 2 and "--older-than" in err and "soon" in err


def test_prune_reads_a_plain_number_as_seconds(capsys, redis_client, redis_db_url):
    """``--help`` says the age may be given in seconds: ``3600`` is an hour."""
    r = redis_client
    old, _ = _batch_with_records(redis_db_url, r, "5", 1)
    new, _ = _batch_with_records(redis_db_url, r, "5", 1)
    r.zadd(keys.batches(), {old: time.time() - 7200})
    code, out, err = run_cli(capsys, "prune", "--older-than", "3600", "--redis", redis_db_url)
    assert code == 0, err
    assert out.startswith("forgot 1 batch(es)")
    assert not [k for k in _all_keys(r) if old in k]
    assert batch_status(r, new)["done"] == 1
    for bad in ("0", "-60", "nan"):
        code, _, err = run_cli(capsys, "prune", "--older-than", bad, "--redis", redis_db_url)
        assert code == 2 and "--older-than" in err, (bad, err)


def test_worker_logs_rotate_keeping_the_newest(tmp_path):
    now = time.time()
    for i in range(10):
        path = tmp_path / f"kt{i}-w1.log"
        path.write_text("x" * 100)
        os.utime(path, (now - 100 + i,) * 2)
    removed = rotate_logs(tmp_path, keep=4, max_bytes=10_000)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"kt{i}-w1.log" for i in (6, 7, 8, 9)]
    assert len(removed) == 6
    rotate_logs(tmp_path, keep=4, max_bytes=250)  # and at most 250 bytes: the newest two
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kt8-w1.log", "kt9-w1.log"]


# -- output details -------------------------------------------------------------------------


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_the_umask_mode(capsys, redis_client, redis_db_url, tmp_path, mask, mode):
    batch_id, _ = _batch_with_records(redis_db_url, redis_client, "5", 25)
    old = os.umask(mask)
    try:
        out = tmp_path / "r.jsonl"
        code, _, err = run_cli(
            capsys,
            "collect",
            batch_id,
            "--format",
            "csv",
            "--out",
            str(out),
            "--redis",
            redis_db_url,
        )
        assert code in (0, 1), err
        assert stat.S_IMODE(out.stat().st_mode) == mode
        out.chmod(0o640)  # an existing file keeps its own mode, as open(..., "w") would
        run_cli(capsys, "collect", batch_id, "--out", str(out), "--redis", redis_db_url)
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def _progress_lines(
    monkeypatch, what: str, label: str, polls, planned_s: float | None = None
) -> list[str]:
    """The lines a ProgressLines (10 s interval; ``planned_s`` the estimated seconds per job)
    notes for ``polls``: ``(seconds, done, total)`` on a fake clock."""
    import knights_tour.commands._shared as shared

    lines: list[str] = []
    monkeypatch.setattr(shared, "note", lines.append)
    t = [0.0]
    progress = shared.ProgressLines(what, label, 10.0, clock=lambda: t[0])
    progress.planned_s = planned_s
    for t[0], done, total in polls:
        progress(done, total)
    return lines


def test_progress_lines_every_interval_with_rate_and_eta(monkeypatch):
    polls = [(100.0, 0, 620)] + [(100.0 + 2 * i, 10 * i, 620) for i in range(1, 13)]
    lines = _progress_lines(monkeypatch, "batch B", "jobs", polls)
    # 24 s of polls every 2 s: a line at once, then at 10 s and at 20 s after the first poll
    assert lines == [
        "batch B: 0/620 jobs done, rate -, ETA -",
        "batch B: 50/620 jobs done, 5.0/s, ETA 1m54s",
        "batch B: 100/620 jobs done, 5.0/s, ETA 1m44s",
    ]


def test_progress_lines_start_from_the_estimate_not_from_the_first_jobs(monkeypatch):
    """620 jobs estimated at 23 s in all: the first two take 14 s (workers starting), the rest
    9 s. The rate of the first two alone said ``ETA 1h12m``."""
    polls = [(0.0, 0, 620), (14.0, 2, 620), (24.0, 400, 620)]
    lines = _progress_lines(monkeypatch, "batch B", "jobs", polls, planned_s=23.0 / 620)
    assert lines[0] == "batch B: 0/620 jobs done, rate -, ETA 23s"
    assert lines[1].startswith("batch B: 2/620 jobs done, 0.1/s, ETA ")
    assert "h" not in lines[1].split("ETA ")[1]  # well under an hour
    measured_only = _progress_lines(monkeypatch, "batch B", "jobs", polls)
    assert measured_only[1] == "batch B: 2/620 jobs done, 0.1/s, ETA 1h12m"


def test_progress_lines_repeat_a_count_that_stands_still_only_as_a_sign_of_life(monkeypatch):
    # polls every 2 s; nothing done until 125 s
    polls = [(0.0, 0, 2)] + [(2.0 * i, 1 if 2.0 * i >= 125.0 else 0, 2) for i in range(1, 66)]
    lines = _progress_lines(monkeypatch, "count C", "sub-jobs", polls)
    # at once, the unchanged 0/2 once a minute (60 s, 120 s), the change at the next interval
    assert [line.split(",")[0] for line in lines] == [
        "count C: 0/2 sub-jobs done",
        "count C: 0/2 sub-jobs done",
        "count C: 0/2 sub-jobs done",
        "count C: 1/2 sub-jobs done",
    ]


def test_a_mistyped_command_gets_a_suggestion(capsys):
    code, _, err = run_cli(capsys, "stauts")
    assert code == 2 and "No such command 'stauts'. Did you mean 'status'?" in err
    code, _, err = run_cli(capsys, "frobnicate")
    assert code == 2 and "Did you mean" not in err


def test_hints_name_options_that_exist(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "--sizes", "5-x", "--redis", "redis://127.0.0.1:1/0")
    assert code == 2 and "5-12" in err and "6x8" in err  # the range syntax is in the hint
    two = tmp_path / "two.jsonl"
    two.write_text("".join(jsonl_line(run_job(Job(5, 5, sq))) for sq in ((0, 0), (2, 2))))
    code, _, err = run_cli(capsys, "draw", str(two))
    assert code == 2 and "--index N" in err and "--record" not in err and "--all" not in err
    code, _, _ = run_cli(capsys, "draw", str(two), "--index", "2")
    assert code == 0


@pytest.mark.parametrize("command", ["workers", "submit"])
def test_help_of_commands_that_need_a_url_does_not_promise_the_embedded_redis(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "KT_REDIS_URL" in text and "Required" in text
    assert not re.search(r"else the embedded Redis", text)


def _docstrings(tree) -> set[int]:
    """ids of the string constants that stand alone as statements: docstrings of modules,
    classes, functions and attributes (documentation, which may name other tools' options),
    not messages."""
    import ast

    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def test_every_option_a_message_or_help_names_is_an_option_of_ktour():
    """Error hints and help texts name only options that exist (an error hint once named
    --record to ``ktour draw``, which has --index). Celery's and redis-server's own command
    lines are built in the modules skipped here."""
    import ast

    import click

    from knights_tour.cli import COMMANDS, cli

    ctx = click.Context(cli)
    options = {"--help"}

    def collect(command: click.Command) -> None:
        for param in command.params:
            options.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                collect(command.get_command(ctx, name))

    for name in COMMANDS:
        collect(cli.get_command(ctx, name))
    root = Path(__file__).resolve().parents[2] / "src" / "knights_tour"
    skip = {
        "local/embedded_redis.py",
        "local/workers.py",
        "local/celery_worker_main.py",
        "local/prelaunch.py",
        "local/serving.py",
        "worker/celery.py",
    }
    unknown = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in skip:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and (id(node) not in docs or rel.startswith("commands/"))
            ):  # help = docstring
                for opt in re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", node.value):
                    if opt not in options:
                        unknown.append(f"{rel}:{node.lineno} {opt}")
    assert unknown == []
