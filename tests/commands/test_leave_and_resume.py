"""Leaving a batch and coming back to it: ``ktour resume``, ``ktour run`` with the same
arguments, ``--timeout``, Ctrl-C and ``ktour cancel`` from another shell.

Real Redis (the test server, or a ``ktour run``'s own embedded one), real Celery worker
processes, real ``ktour`` subprocesses where a signal or an exit code is the point. Every wait
polls a condition with a generous deadline (a busy 2-core machine).

Facts from outside the code: every square of an n x n board with even n >= 6 starts an open
knight's tour (Conrad et al. 1994), so a 6x6 batch ends with 36 ``found`` records and a
16x16 one with 256; on 5x5 exactly the 13 squares of the corners' colour
start one.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
from _cli import KTOUR, ktour, ktour_env, run_cli
from _polling import wait_for

from knights_tour.batches import progress, saving, store
from knights_tour.batches.cancelling import message_of
from knights_tour.batches.client import make_jobs, submit_batch
from knights_tour.batches.jobs import JobOptions, run_job
from knights_tour.batches.schedule import run_sweep
from knights_tour.board import Board
from knights_tour.commands._following import resume_hint
from knights_tour.counting.plan import plan_count
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.urls import mask_url
from knights_tour.worker import celery as worker
from knights_tour.worker import messages

pytestmark = pytest.mark.timeout(400)

DEADLINE_S = 240.0

RUN_16 = ("run", "--sizes", "16", "--solver", "cpsat", "--chunk-size", "2")
"""A run of 256 CP-SAT jobs (16x16), two a task: far longer than the tests let it go on."""


@pytest.fixture(autouse=True)
def _fresh_settings(data_dir, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a default results-<batch>.jsonl lands here, not in the repo


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _messages(r: redis.Redis, batch_id: str) -> tuple[int, int]:
    """(queued, held by a worker without acknowledgement) run-jobs messages of ``batch_id``."""
    match = message_of(batch_id, messages.TASK_RUN_JOBS)
    queued = sum(match(raw) for name in worker.queue_lists() for raw in r.lrange(name, 0, -1))
    held = sum(match(json.dumps(json.loads(v)[0])) for v in r.hvals(worker.UNACKED_KEY))
    return queued, held


def _default_sigint() -> None:  # in the child: Ctrl-C as on a terminal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# -- resume ---------------------------------------------------------------------------------


def _submitted_and_cancelled(capsys, r, url: str) -> tuple[str, dict[str, float]]:
    """A 6x6 batch submitted (no worker listening), 7 of its jobs recorded (as a worker
    would), then cancelled; returns its id and the recorded jobs' finish times."""
    code, out, err = run_cli(capsys, "submit", "--sizes", "6", "--chunk-size", "4", "--redis", url)
    assert code == 0, err
    batch_id = out.splitlines()[-1]
    early = {}
    for job in store.batch_jobs(r, batch_id)[:7]:
        rec = run_job(job, batch_id=batch_id, worker="earlier@test")
        assert saving.save_record(r, batch_id, rec)
        early[job.key] = rec.finished_at
    code, out, err = run_cli(capsys, "cancel", batch_id, "--redis", url)
    assert code == 0 and "7/36 jobs done, 9 queued task(s) dropped" in out, (out, err)
    assert f"continue with: ktour resume {batch_id} --redis {url}\n" in out
    assert _messages(r, batch_id) == (0, 0)
    return batch_id, early


def test_the_resume_hint_names_the_redis_url_with_its_password_masked():
    assert resume_hint("B", "redis://:s3cret@example.org:6380/2") == (
        "ktour resume B --redis redis://:***@example.org:6380/2"
    )
    assert resume_hint("B", None) == "ktour resume B"


def _local_run(capsys, url: str, workers: int, out: Path | str, *args: str):
    """``ktour ARGS --workers N --redis URL --out OUT`` in this process: its local workers on
    the test's Redis."""
    return run_cli(capsys, *args, "--workers", str(workers), "--redis", url, "--out", str(out))


def _exactly_once(path: Path, batch_id: str, early: dict[str, float]) -> None:
    records = _records(path)
    assert len(records) == 36 and len({r["job_key"] for r in records}) == 36
    assert all(r["status"] == "found" and r["batch_id"] == batch_id for r in records)
    by_key = {r["job_key"]: r for r in records}
    assert {k: by_key[k]["finished_at"] for k in early} == early  # not computed again
    assert sum(r["worker"] == "earlier@test" for r in records) == 7


def test_submit_cancel_resume_gives_every_record_exactly_once(
    capsys, redis_client, redis_db_url, tmp_path, monkeypatch
):
    monkeypatch.setenv("KT_PROGRESS_S", "0.5")
    get_settings.cache_clear()
    batch_id, early = _submitted_and_cancelled(capsys, redis_client, redis_db_url)
    out_file = tmp_path / "resumed.jsonl"
    code, out, err = _local_run(capsys, redis_db_url, 2, str(out_file), "resume", batch_id)
    assert code == 0, err
    assert (
        f"resuming batch {batch_id}: 7 of 36 jobs already recorded, not recomputed; 29 sent"
    ) in err
    assert out.splitlines()[-1] == batch_id
    _exactly_once(out_file, batch_id, early)
    assert redis_client.hlen(keys.batch_records(batch_id)) == 36
    assert progress.batch_state(redis_client, batch_id) is None  # no longer cancelled
    # stderr is not a terminal here: progress came as lines, not as a bar
    assert re.search(
        rf"ktour: batch {batch_id}: \d+/36 jobs done, (rate -|[\d.,]+/s), ETA ", err
    ), err
    # resuming a complete batch collects it again, sending nothing
    code, _, err = _local_run(
        capsys, redis_db_url, 1, str(tmp_path / "again.jsonl"), "resume", batch_id
    )
    assert code == 0 and f"batch {batch_id} is complete (36/36 jobs)" in err
    assert (tmp_path / "again.jsonl").read_text() == out_file.read_text()


def test_run_with_the_same_arguments_resumes_a_submitted_batch(
    capsys, redis_client, redis_db_url, tmp_path
):
    batch_id, early = _submitted_and_cancelled(capsys, redis_client, redis_db_url)
    out_file = tmp_path / "run.jsonl"
    code, out, err = _local_run(
        capsys, redis_db_url, 2, str(out_file), "run", "--sizes", "6", "--chunk-size", "4"
    )
    assert code == 0, err
    assert (
        f"resuming batch {batch_id}: 7 of 36 jobs already recorded, not recomputed; 29 sent" in err
    )
    _exactly_once(out_file, batch_id, early)


def test_run_with_a_sweeps_arguments_resumes_the_sweeps_batch(
    capsys, redis_client, redis_db_url, tmp_path
):
    sweep_batch = run_sweep(redis_db_url, {"name": "nightly-5", "sizes": "5", "every": "1d"})
    assert progress.get_batch_meta(redis_client, sweep_batch)["params"]["schedule"] == "nightly-5"
    out_file = tmp_path / "run.jsonl"
    code, out, err = _local_run(capsys, redis_db_url, 1, str(out_file), "run", "--sizes", "5")
    assert code == 0, err
    assert f"resuming batch {sweep_batch}: 0 of 25 jobs already recorded" in err
    records = _records(out_file)
    assert len(records) == 25 and sum(r["status"] == "found" for r in records) == 13


# -- leaving: --timeout, Ctrl-C, cancel from another shell ----------------------------------


def test_a_timed_out_run_leaves_nothing_queued_for_the_next_run(tmp_path, monkeypatch):
    # 256 CP-SAT jobs on one worker outlast the --timeout (counted from the command's start,
    # the start of Redis and the worker included) several times over even on an idle machine;
    # a loaded machine widens the margin
    data = tmp_path / "kt-data"  # this process's KT_DATA_DIR too: it reads the same Redis
    env = {"KT_DATA_DIR": str(data), "KT_WORKERS": "1", "KT_PROGRESS_S": "1"}
    began = time.monotonic()
    first = ktour(*RUN_16, "--timeout", "4", env=env, cwd=tmp_path, timeout=DEADLINE_S)
    took = time.monotonic() - began
    assert first.returncode == 1, first.stderr
    (line,) = [ln for ln in first.stderr.splitlines() if "cancelled" in ln]
    batch_id = re.search(r"batch (\S+) cancelled by --timeout", line).group(1)
    assert re.search(r": \d+/256 jobs done, their records kept \(ktour collect ", line), line
    assert "other batches' untouched" in line and line.endswith(f"ktour resume {batch_id}")
    assert "Traceback" not in first.stderr and first.stdout == ""
    assert list(tmp_path.glob("results-*")) == []  # an unfinished batch writes no file
    print(f"--timeout 4: the command took {took:.1f} s from start to exit")

    second = ktour(
        "run", "--sizes", "5", "--out", "r.jsonl", env=env, cwd=tmp_path, timeout=DEADLINE_S
    )
    assert second.returncode == 0, second.stderr
    assert len(_records(tmp_path / "r.jsonl")) == 25
    # the first batch's tasks were gone before the second run started: nothing of it ran
    from knights_tour.local.backend import open_store

    with open_store(None) as backend:
        r = backend.client
        assert r.zrange(keys.batches(), 0, -1)[0] == batch_id
        assert _messages(r, batch_id) == (0, 0)
        assert r.hlen(worker.UNACKED_KEY) == 0
        assert progress.batch_state(r, batch_id) == progress.CANCELLED
        assert r.hlen(keys.batch_records(batch_id)) < 256  # (none, on a loaded machine)
        kept = r.hlen(keys.batch_records(batch_id))

    # and `ktour resume` finishes it on the embedded Redis, every job recorded once
    third = ktour(
        "resume",
        batch_id,
        "--workers",
        "2",
        "--out",
        "resumed.jsonl",
        env=env,
        cwd=tmp_path,
        timeout=DEADLINE_S,
    )
    assert third.returncode == 0, third.stderr
    assert f"resuming batch {batch_id}: {kept} of 256 jobs already recorded" in third.stderr
    records = _records(tmp_path / "resumed.jsonl")
    assert len({rec["job_key"] for rec in records}) == len(records) == 256
    assert all(rec["status"] == "found" for rec in records)


def _start_run(tmp_path: Path, url: str, name: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / f"{name}.err"
    with open(err, "w") as fh:
        proc = subprocess.Popen(
            [
                *KTOUR,
                *RUN_16,
                "--workers",
                "1",
                "--redis",
                url,
                "--out",
                str(tmp_path / f"{name}.jsonl"),
            ],
            env=ktour_env(KT_DATA_DIR=str(tmp_path / "kt-data")),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=fh,
            preexec_fn=_default_sigint,
        )
    return proc, err


def _ctrl_c(proc: subprocess.Popen, err: Path) -> None:
    """Ctrl-C to ``proc``, which ends with 130 (interrupted), its stderr in ``err``."""
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=DEADLINE_S) == 130, err.read_text()


def _running_batch(r: redis.Redis) -> str:
    """Once the run's batch has all its tasks queued and a first record: its id."""

    def ready():
        ids = r.zrange(keys.batches(), 0, -1)
        if ids and r.hlen(keys.batch_records(ids[-1])) >= 1:
            return ids[-1]
        return None

    return wait_for(ready, "the run's first record")


def test_ctrl_c_cancels_only_its_own_batch(redis_client, redis_db_url, tmp_path):
    r = redis_client
    proc, err = _start_run(tmp_path, redis_db_url, "a")
    try:
        mine = _running_batch(r)
        # another batch queued behind it on the same queue (no worker of its own)
        _, jobs5, params5 = make_jobs(["5"], JobOptions())
        other = submit_batch(redis_db_url, jobs5, params5, chunk_size=5)
        assert _messages(r, other) == (5, 0)
        _ctrl_c(proc, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = err.read_text().splitlines()
    stop = [ln for ln in lines if "cancelled by Ctrl-C" in ln]
    assert len(stop) == 1 and stop[0].startswith(f"ktour: batch {mine} cancelled by Ctrl-C:")
    assert stop[0].endswith(f"continue with: ktour resume {mine} --redis {mask_url(redis_db_url)}")
    assert "ktour: interrupted" not in lines  # the one line says it all
    assert _messages(r, mine) == (0, 0)  # its own: dropped, held ones included
    assert _messages(r, other) == (5, 0)  # the other batch's: all still queued
    assert r.hlen(keys.batch_records(other)) == 0
    assert (
        progress.batch_state(r, mine) == progress.CANCELLED
        and progress.batch_state(r, other) is None
    )


def test_a_cancel_from_another_shell_ends_the_run_with_exit_1(
    capsys, redis_client, redis_db_url, tmp_path
):
    proc, err = _start_run(tmp_path, redis_db_url, "b")
    try:
        mine = _running_batch(redis_client)
        code, out, _ = run_cli(capsys, "cancel", mine, "--redis", redis_db_url)
        assert code == 0 and f"batch {mine} cancelled:" in out
        assert proc.wait(timeout=DEADLINE_S) == 1, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.read_text()
    assert "Traceback" not in text and "error" not in text
    (line,) = [ln for ln in text.splitlines() if "cancelled" in ln]
    assert line.startswith(f"ktour: batch {mine} was cancelled from elsewhere (ktour cancel): ")
    assert line.endswith(f"continue with: ktour resume {mine} --redis {mask_url(redis_db_url)}")
    assert _messages(redis_client, mine) == (0, 0)
    assert not (tmp_path / "b.jsonl").exists()


def test_ctrl_c_on_a_count_stops_it_with_one_line_and_the_same_command_resumes(
    redis_client, redis_db_url, tmp_path
):
    """6x6 open tours: 6,637,920 in all (OEIS A165134), counted in the sub-jobs of depth 2
    (seconds of counting on one worker, so some are still to count when Ctrl-C comes)."""
    r = redis_client
    total = len(plan_count(Board(6, 6), depth=2).subjobs)
    args = [*KTOUR, "count", "6", "--depth", "2", "--workers", "1", "--redis", redis_db_url]
    env = ktour_env(KT_DATA_DIR=str(tmp_path / "kt-data"))
    err = tmp_path / "count.err"
    with open(err, "w") as fh:
        proc = subprocess.Popen(
            args,
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=fh,
            preexec_fn=_default_sigint,
        )
    try:
        count_id = wait_for(
            lambda: next(iter(r.zrange(keys.counts(), 0, -1)), None), "the count to be registered"
        )
        wait_for(lambda: r.hlen(keys.count_partials(count_id)) >= 3, "some partial counts")
        _ctrl_c(proc, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (line,) = [ln for ln in err.read_text().splitlines() if "stopped" in ln]
    m = re.fullmatch(
        rf"ktour: count {count_id} stopped by Ctrl-C: (\d+)/{total} sub-jobs counted "
        r"\(kept\); (\d+) queued task\(s\) of this count dropped, other work "
        r"untouched; the same command resumes it",
        line,
    )
    assert m, line
    done, dropped = int(m.group(1)), int(m.group(2))
    # the line tells what Redis holds once the workers are stopped: the sub-jobs counted, and
    # some tasks dropped (a task is usually one sub-job, but one re-sent by recovery when a
    # lease lapsed on a loaded machine carries several, so the two need not add up to the total)
    assert done == r.hlen(keys.count_partials(count_id)) and 3 <= done < total, done
    assert dropped >= 1
    match = message_of(count_id, messages.TASK_COUNT_SUBJOBS)
    assert not any(match(raw) for name in worker.queue_lists() for raw in r.lrange(name, 0, -1))
    assert not r.sismember(keys.active_counts(), count_id)

    again = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert again.returncode == 0, again.stderr
    assert "total: 6,637,920" in again.stdout
    reused = int(re.search(r"; (\d+) reused from an earlier run", again.stdout).group(1))
    assert reused >= done
