"""``ktour status`` during a real two-worker run, answered from the leases: both workers shown
busy (their pool processes' PIDs, the jobs each holds), the counts adding up, no Celery
broadcast on its path (no Celery module even loaded); then, the workers SIGKILLed, the batch
shown ``stalled`` within three lease periods with the jobs their expired leases hold.

Jobs: CP-SAT on 20x20, where every start square has an open tour (Conrad et al. 1994) and each
job takes long enough for a chunk of eight to be held for a while.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import psutil
import pytest

from knights_tour.batches.client import make_jobs, submit_batch
from knights_tour.batches.jobs import JobOptions
from knights_tour.cli import main
from knights_tour.local.workers import LocalWorkers
from knights_tour.settings import get_settings

pytestmark = pytest.mark.timeout(400)

LEASE_S = 2.0
"""The workers' lease (KT_LEASE_S), short so that the stall shows soon."""

CHUNK = 8
"""Jobs per task: what one busy worker holds at most."""


def _status(capsys, batch_id: str, url: str, *more: str) -> tuple[int, str]:
    code = main(["status", batch_id, "--redis", url, *more])
    out, _ = capsys.readouterr()
    return code, out


def _poll(capsys, batch_id: str, url: str, done, timeout_s: float, what: str) -> dict:
    """``ktour status --json`` until ``done(p)`` (generous deadline: the machine may be
    busy)."""
    deadline = time.monotonic() + timeout_s
    p: dict = {}
    while time.monotonic() < deadline:
        _, out = _status(capsys, batch_id, url, "--json")
        p = json.loads(out)
        if done(p):
            return p
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}; last status {p}")


def _pool_pids(workers: LocalWorkers) -> set[int]:
    pids = set()
    for pid in workers.pids:
        pids |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
    return pids


def _no_broadcast(*_a, **_k):
    raise AssertionError("ktour status sent a Celery broadcast")


def test_status_of_a_two_worker_run_then_stalled_once_the_workers_die(
    capsys, monkeypatch, redis_db_url, tmp_path
):
    from celery.app.control import Control

    url = redis_db_url
    monkeypatch.setenv("KT_LEASE_S", str(LEASE_S))
    monkeypatch.setenv("KT_REDIS_URL", url)
    get_settings.cache_clear()
    workers = LocalWorkers(url, 2, env={"KT_LEASE_S": str(LEASE_S)}, ready_timeout_s=180)
    workers.start()  # (waits for the workers' answers to a ping)
    monkeypatch.setattr(Control, "broadcast", _no_broadcast)  # ping and inspect go through it
    try:
        _boards, jobs, params = make_jobs(["20"], JobOptions(solver="cpsat"))
        batch_id = submit_batch(url, jobs, params, chunk_size=CHUNK)
        p = _poll(
            capsys,
            batch_id,
            url,
            lambda q: len(q["workers_busy"]) == 2 or q["complete"],
            240,
            "both workers busy",
        )
        assert not p["complete"], "the batch ended before both workers were seen busy"
        pool = _pool_pids(workers)
        busy = {int(w.rsplit(":", 1)[1]) for w in p["workers_busy"]}
        assert busy <= pool and len(busy) == 2  # the two pool processes we started
        # named as `ktour workers` and the records name them: their Celery node names
        names = {w.rsplit(":", 1)[0] for w in p["workers_busy"]}
        assert names == set(workers.node_names), (names, workers.node_names)
        assert 2 <= p["running"] <= 2 * CHUNK and p["state"] == "running"
        assert p["done"] + p["running"] + p["queued"] + p["orphaned"] == p["total"] == 400
        assert all(1 <= w["jobs"] <= CHUNK and w["since"] for w in p["workers"])

        code, out = _status(capsys, batch_id, url)
        assert code == 1
        assert "params: sizes=20, solver=cpsat" in out  # as written
        assert re.search(r"^workers: 2 live, [12] on this batch$", out, re.M), out

        # A separate process answers too, loading no Celery module at all (so no broadcast).
        env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "knights_tour", "status", batch_id]
            + ["--json", "--redis", url],
            env=env | {"KT_DATA_DIR": str(tmp_path / "data")},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert json.loads(proc.stdout)["batch_id"] == batch_id, proc.stderr[-2000:]
        loaded = re.findall(r"\|\s*((?:celery|kombu|billiard)\S*)$", proc.stderr, re.M)
        assert not loaded, loaded

        workers.kill()  # SIGKILL, every process of both workers: nobody serves the batch now
        killed = time.time()
        p = _poll(capsys, batch_id, url, lambda q: q["state"] == "stalled", 240, "stalled")
        stalled = r"no live worker lease for \d+ s; (\d+) job\(s\) held by expired leases"
        m = re.fullmatch(stalled, p["reason"])
        assert m, p["reason"]
        assert int(m.group(1)) == p["orphaned"] >= 1 and p["running"] == 0
        assert p["stalled_since"] <= killed + 3 * LEASE_S  # within three lease periods
        assert p["live_workers"] == 0 and p["eta_s"] is None
        code, out = _status(capsys, batch_id, url)
        assert code == 1 and f"stalled: {p['reason']}".split(" for ")[0] in out
        assert f"`ktour resume {batch_id}`" in out and "[lease expired]" in out
    finally:
        workers.stop()
        get_settings.cache_clear()
