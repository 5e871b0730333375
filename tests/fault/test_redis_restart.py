"""Fault: the Redis server (broker and store, AOF persistence on) stopped and restarted on the
same port and data dir while a batch runs. Workers and the waiting client reconnect, the batch
completes, and every record stored before the restart is still there, unchanged."""

from __future__ import annotations

import json
import time

import pytest
from _cli import ktour_env, start_ktour
from _faultkit import audit, drive
from _netfaults import wait_connected
from redis.client import NEVER_DECODE

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.tours.stored import decode_stored

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]

DOWN_S = 3.0


def stored_records(r, batch_id: str) -> dict:
    """The batch's stored record values as bytes (a binary form), by job key."""
    return r.execute_command("HGETALL", keys.batch_records(batch_id), **{NEVER_DECODE: True})


def test_redis_restarted_mid_batch(fault_redis, worker_pool):
    url = fault_redis.url
    workers = worker_pool.start_all("rrestart-a", "rrestart-b")
    pids = [w.pids[0] for w in workers]
    r = connect(url)
    # A CP-SAT job on these boards takes milliseconds: enough of them that the batch is still
    # far from done once Redis is down again, whatever the tick lags behind the workers.
    jobs = make_batch_jobs([8, 10, 12], solver="cpsat")
    batch_id = submit_batch(url, jobs, {"test": "redis restart"}, chunk_size=2)
    state: dict = {"restarted": False}

    def on_tick(st):
        if state["restarted"] or st.get("done", 0) < 10:
            return
        state["before"] = stored_records(r, batch_id)
        t0 = time.monotonic()
        fault_redis.stop()
        time.sleep(DOWN_S)
        fault_redis.start()
        state["restart_s"] = time.monotonic() - t0
        state["back_at"] = time.time()
        state["restarted"] = True

    d = drive(r, url, batch_id, timeout_s=200, on_tick=on_tick)
    assert state["restarted"]
    assert d.status.get("complete"), d.status
    audit(r, batch_id, jobs)
    after = stored_records(r, batch_id)
    before = state["before"]
    assert before and all(after[k] == v for k, v in before.items()), "a stored record changed"
    assert d.overwritten == set()
    # The same worker processes carried on (they reconnected; nobody restarted them).
    assert [w.pids[0] for w in workers] == pids and all(w.procs[0].poll() is None for w in workers)
    finished = sorted(decode_stored(v).finished_at for v in after.values())
    assert len(before) < len(jobs)
    after_restart = [f for f in finished if f > state["back_at"]]
    assert after_restart, "no job finished after Redis came back"
    first_after = after_restart[0]
    print(
        f"\nredis restart: {len(jobs)} jobs, 1 restart ({DOWN_S:g} s down), "
        f"{len(before)} records before it, lost 0, re-sent {len(d.resent)}, "
        f"first record {first_after - state['back_at']:.1f} s after Redis was back, "
        f"batch {d.seconds:.1f} s"
    )


def test_a_waiting_cli_survives_a_redis_restart(fault_redis, worker_pool, tmp_path):
    """``ktour collect BATCH --wait`` (a real subprocess) keeps waiting through the restart and
    writes every record once."""
    url = fault_redis.url
    r = connect(url)
    # About a tenth of a second per job: the batch is far from done when Redis goes down.
    jobs = make_batch_jobs([20], solver="cpsat")[:60]
    # The worker starts only once the CLI is waiting: Redis must go down while it waits (a CLI
    # that cannot reach Redis at start-up exits 2 at once, by design).
    batch_id = submit_batch(url, jobs, {"test": "cli through restart"}, chunk_size=2)
    out = tmp_path / "records.jsonl"
    env = ktour_env(KT_DATA_DIR=str(tmp_path / "kt-data"), KT_LEASE_S="2")
    collect = ["collect", batch_id, "--wait", "--timeout", "150", "--format", "jsonl"]
    cli = start_ktour(*collect, "--out", str(out), "--redis", url, env=env)
    try:
        deadline = time.monotonic() + 120
        if not wait_connected(cli, fault_redis.port, 120):
            cli.kill()
            raise AssertionError(f"the CLI never connected to Redis: {cli.communicate()[1]}")
        worker_pool.start("rrcli-a")
        while time.monotonic() < deadline and r.hlen(keys.batch_records(batch_id)) < 5:
            time.sleep(0.1)
        assert cli.poll() is None and r.hlen(keys.batch_records(batch_id)) < len(jobs)
        fault_redis.stop()
        time.sleep(DOWN_S)
        fault_redis.start()
        stdout, stderr = cli.communicate(timeout=170)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 0, stderr
    assert "Traceback" not in stderr and url.split("@")[0].split(":")[-1] not in stderr
    lines = out.read_text().splitlines()
    assert len(lines) == len(jobs) == len({json.loads(x)["job_key"] for x in lines})
