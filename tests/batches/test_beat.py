"""Collection into reports (knights_tour.batches.collector) and celery beat, against a real Redis.

* Collector tests: batches with real records (the engine run in-process), one report per
  finished batch, nothing for a second collection, the lock, the per-batch HSETNX claim (also
  when the lock has expired), a failed write being retried.
* Beat test: ``python -m celery -A knights_tour.worker beat`` started as two real processes
  (two beats, the worst case) on a seconds-scale schedule, real Celery workers, a real Redis:
  a sweep is submitted and its report is written exactly once.

Facts from outside the code: colour parity - on 5x5 (13 squares of one colour, 12 of the other)
no open tour starts on a minority-colour square, so at least 12 of the 25 jobs are no_tour.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from knights_tour.batches import progress, saving, store
from knights_tour.batches.collector import (
    INDEX_FILE,
    collect_finished,
    last_collection,
    latest_summary,
    read_index,
    report_paths,
)
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.tours.pages import REJECTED
from knights_tour.tours.record import record_from_json
from knights_tour.worker.messages import TASK_COLLECT


def _make_batch(r, sizes=("5",), finish=True, params=None):
    """A batch with real records (engine run in this process); ``finish=False`` leaves the
    last job without a record."""
    jobs = make_batch_jobs(list(sizes))
    batch_id = store.create_batch(r, jobs, params=params or {"sizes": ",".join(sizes)})
    todo = jobs if finish else jobs[:-1]
    for job in todo:
        saving.save_record(r, batch_id, run_job(job, batch_id=batch_id, worker="test@here"))
    return batch_id, jobs


def _files(d: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in d.iterdir()} if d.exists() else {}


def test_a_finished_batch_gets_one_complete_report(redis_client, tmp_path):
    r = redis_client
    batch_id, jobs = _make_batch(r, params={"sizes": "5x5", "schedule": "nightly"})
    out = tmp_path / "reports"
    result = collect_finished(r, out)
    assert result["written"] == [batch_id] and not result["locked"]

    jsonl, summary_path = report_paths(out, batch_id)
    lines = [record_from_json(ln) for ln in jsonl.read_text().splitlines()]
    assert lines == store.collect(r, batch_id)
    assert len(lines) == len(jobs) == 25
    summary = json.loads(summary_path.read_text())
    counts = Counter(rec.status.value for rec in lines)
    assert summary["counts"] == {
        s: counts.get(s, 0) for s in ("found", "no_tour", "unknown", "error")
    }
    assert summary["counts"]["no_tour"] >= 12  # colour parity
    assert summary["total"] == 25 and summary["schedule"] == "nightly"
    assert summary["boards"] == [
        {"board": "5x5", "rows": 5, "cols": 5, "jobs": 25, **summary["counts"]}
    ]
    assert summary["workers"] == {"test@here": 25}
    assert summary["clean"] is (counts["unknown"] + counts["error"] == 0)
    assert latest_summary(r)["batch_id"] == batch_id
    assert last_collection(r)["written"] == [batch_id]
    index = read_index(out)
    assert [e["batch_id"] for e in index] == [batch_id]
    assert index[0]["summary"] == summary_path.name
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_report_checks_every_found_tour_again(redis_client, tmp_path):
    r = redis_client
    jobs = make_batch_jobs(["5"])
    batch_id = store.create_batch(r, jobs, params={"sizes": "5x5"})
    records = [run_job(job, batch_id=batch_id, worker="test@here") for job in jobs]
    victim = next(i for i, rec in enumerate(records) if rec.status.value == "found")
    tour = records[victim].tour.copy()
    tour[[2, 7]] = tour[[7, 2]]  # tampered: no longer a knight's tour
    records[victim] = msgspec.structs.replace(records[victim], tour=tour)
    for rec in records:
        saving.save_record(r, batch_id, rec)
    out = tmp_path / "reports"
    assert collect_finished(r, out)["written"] == [batch_id]
    jsonl, summary_path = report_paths(out, batch_id)
    lines = [record_from_json(ln) for ln in jsonl.read_text().splitlines()]
    bad = [rec for rec in lines if rec.status.value == "error"]
    assert [rec.job_key for rec in bad] == [records[victim].job_key]
    assert bad[0].reason.startswith(REJECTED)
    summary = json.loads(summary_path.read_text())
    assert summary["counts"]["error"] == 1 and summary["clean"] is False


def test_a_collection_that_finds_nothing_new_writes_nothing(redis_client, tmp_path):
    r = redis_client
    out = tmp_path / "reports"
    assert collect_finished(r, out)["written"] == []
    assert not out.exists()  # no batches at all: not even the directory
    _make_batch(r)
    collect_finished(r, out)
    before, last = _files(out), r.get(keys.last_collection())
    time.sleep(0.01)
    again = collect_finished(r, out)
    assert again["written"] == [] and again["skipped"] == []
    assert _files(out) == before
    assert r.get(keys.last_collection()) == last


def test_an_unfinished_batch_waits_until_it_is_complete(redis_client, tmp_path):
    r = redis_client
    batch_id, jobs = _make_batch(r, finish=False)
    out = tmp_path / "reports"
    result = collect_finished(r, out)
    assert result["written"] == [] and result["unfinished"] == [batch_id]
    assert not out.exists()
    saving.save_record(r, batch_id, run_job(jobs[-1], batch_id=batch_id, worker="test@here"))
    assert collect_finished(r, out)["written"] == [batch_id]


def test_a_held_lock_means_nothing_is_done(redis_client, tmp_path):
    r = redis_client
    _make_batch(r)
    lock = r.lock(keys.collect_lock(), timeout=30)
    assert lock.acquire(blocking=False)
    try:
        result = collect_finished(r, tmp_path / "reports")
        assert result["locked"] and result["written"] == []
        assert not (tmp_path / "reports").exists()
    finally:
        lock.release()
    assert len(collect_finished(r, tmp_path / "reports")["written"]) == 1


def test_a_claimed_batch_is_not_written_twice_even_without_the_lock(redis_client, tmp_path):
    """The lock can expire (a slow collector); the per-batch HSETNX claim still holds."""
    r = redis_client
    batch_id, _ = _make_batch(r)
    claim = {"state": "claimed", "by": "other-collector", "at": time.time()}
    assert r.hsetnx(keys.collected(), batch_id, json.dumps(claim))
    result = collect_finished(r, tmp_path / "reports")
    assert result["skipped"] == [batch_id] and result["written"] == []
    assert not report_paths(tmp_path / "reports", batch_id)[1].exists()


def test_a_stale_claim_of_a_dead_collector_is_taken_over(redis_client, tmp_path):
    r = redis_client
    batch_id, _ = _make_batch(r)
    claim = {"state": "claimed", "by": "dead-collector", "at": time.time() - 3600}
    r.hset(keys.collected(), batch_id, json.dumps(claim))
    result = collect_finished(r, tmp_path / "reports", lock_timeout_s=60)
    assert result["written"] == [batch_id]


def test_a_failed_write_releases_the_claim_for_the_next_collection(redis_client, tmp_path):
    r = redis_client
    batch_id, _ = _make_batch(r)
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the reports directory should be\n")
    with pytest.raises(OSError):
        collect_finished(r, blocker)
    assert r.hget(keys.collected(), batch_id) is None
    assert r.get(keys.collect_lock()) is None  # the lock was released on the way out
    assert collect_finished(r, tmp_path / "elsewhere")["written"] == [batch_id]


def test_overlapping_collections_write_each_report_exactly_once(
    redis_client, redis_db_url, tmp_path
):
    r = redis_client
    ids = {_make_batch(r, sizes=(s,))[0] for s in ("3x4", "4x5", "5")}
    out = tmp_path / "reports"
    results: list[dict] = []
    barrier = threading.Barrier(6)

    def one():
        client = connect(redis_db_url)
        barrier.wait()
        for _ in range(3):
            results.append(collect_finished(client, out))
        client.close()

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    written = [b for res in results for b in res["written"]]
    assert sorted(written) == sorted(ids)
    assert sorted(e["batch_id"] for e in read_index(out)) == sorted(ids)
    assert len(list(out.glob("*.summary.json"))) == 3


# -- celery beat, as real processes --------------------------------------------------------


SCHEDULE = """\
[collect]
every = "1s"

[[sweep]]
name = "tiny"
sizes = "5"
every = "2s"
"""


def _beat(env, state: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "knights_tour.worker.celery",
            "beat",
            "--schedule",
            str(state),
            "--loglevel",
            "INFO",
            "--max-interval",
            "1",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,  # noqa: SIM115
        start_new_session=True,
    )


def _collections_done(log_dir: Path) -> int:
    """How many collection tasks the workers have finished, from their INFO logs."""
    done = 0
    for log in log_dir.glob("*.log"):
        done += sum(
            1
            for line in log.read_text(errors="replace").splitlines()
            if TASK_COLLECT in line and "succeeded" in line
        )
    return done


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


@pytest.mark.integration
def test_beat_submits_a_sweep_and_its_report_is_written_exactly_once(redis_db_url, tmp_path):
    from knights_tour.local.workers import LocalWorkers

    r = connect(redis_db_url)
    reports = tmp_path / "reports"
    schedule = tmp_path / "schedule.toml"
    schedule.write_text(SCHEDULE)
    env = dict(
        os.environ,
        KT_REDIS_URL=redis_db_url,
        KT_SCHEDULE_FILE=str(schedule),
        KT_REPORTS_DIR=str(reports),
        PYTHONUNBUFFERED="1",
    )
    beats: list[subprocess.Popen] = []
    workers = LocalWorkers(
        redis_db_url,
        count=2,
        env={"KT_REPORTS_DIR": str(reports)},
        node_prefix=f"beat{os.getpid()}-w",
        ready_timeout_s=90,
        log_dir=tmp_path / "logs",
        loglevel="INFO",
    )
    try:
        # the workers and both beats start at once (the beats' messages wait in Redis)
        workers.spawn()
        # two beats at once: every collection tick is sent twice, overlapping on 2 workers
        for i in (1, 2):
            beats.append(_beat(env, tmp_path / f"beat{i}-state", tmp_path / f"beat{i}.log"))
        workers.wait_ready()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not read_index(reports):
            assert all(b.poll() is None for b in beats), (tmp_path / "beat1.log").read_text()
            time.sleep(0.2)
        assert read_index(reports), (
            "no report within 90 s; beat log:\n" + (tmp_path / "beat1.log").read_text()[-3000:]
        )
        # several more collections run after the report was written (and must not
        # report the batch again): wait for them in the workers' logs, not a fixed time
        seen = _collections_done(tmp_path / "logs")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and _collections_done(tmp_path / "logs") < seen + 3:
            assert all(b.poll() is None for b in beats), (tmp_path / "beat1.log").read_text()
            time.sleep(0.2)
        assert _collections_done(tmp_path / "logs") >= seen + 3, "no more collections ran"
    finally:
        for b in beats:
            _stop(b)
        workers.stop()
    index = read_index(reports)
    ids = [e["batch_id"] for e in index]
    assert len(ids) == len(set(ids)), f"a batch was reported twice: {ids}"
    markers = {k: json.loads(v) for k, v in r.hgetall(keys.collected()).items()}
    assert sorted(k for k, v in markers.items() if v["state"] == "written") == sorted(ids)
    first = ids[0]
    meta = progress.get_batch_meta(r, first)
    assert meta["params"]["schedule"] == "tiny" and meta["params"]["sizes"] == "5x5"
    records = [
        record_from_json(ln) for ln in report_paths(reports, first)[0].read_text().splitlines()
    ]
    assert records == store.collect(r, first) and len(records) == 25
    assert sum(json.loads(report_paths(reports, first)[1].read_text())["counts"].values()) == 25
    assert len(list(reports.glob("*.summary.json"))) == len(ids)
    assert (reports / INDEX_FILE).read_text().count("\n") == len(ids)
    logs = (tmp_path / "beat1.log").read_text() + (tmp_path / "beat2.log").read_text()
    assert "Sending due task sweep:tiny" in logs and "Sending due task collect" in logs
    r.close()
