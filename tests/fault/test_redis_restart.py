"""Fault: the Redis server (broker and store, AOF persistence on) stopped and restarted on the
same port and data dir while a batch runs. Workers and the waiting client reconnect, the batch
completes, and every record stored before the restart is still there, unchanged."""

from __future__ import annotations

import json
import time

import pytest
from _faultkit import audit, drive

from knights_tour import keys
from knights_tour.jobs import make_batch_jobs
from knights_tour.store import connect
from knights_tour.tasks import submit_batch

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]

DOWN_S = 3.0


def test_redis_restarted_mid_batch(fault_redis, worker_pool):
    url = fault_redis.url
    workers = [worker_pool.start("rrestart-a"), worker_pool.start("rrestart-b")]
    pids = [w.pids[0] for w in workers]
    r = connect(url)
    jobs = make_batch_jobs([6, 8], solver="cpsat")
    batch_id = submit_batch(url, jobs, {"test": "redis restart"}, chunk_size=2)
    state: dict = {"restarted": False}

    def on_tick(st):
        if state["restarted"] or st.get("done", 0) < len(jobs) // 3:
            return
        state["before"] = dict(r.hgetall(keys.batch_records(batch_id)))
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
    after = r.hgetall(keys.batch_records(batch_id))
    before = state["before"]
    assert before and all(after[k] == v for k, v in before.items()), "a stored record changed"
    assert d.overwritten == set()
    # The same worker processes carried on (they reconnected; nobody restarted them).
    assert [w.pids[0] for w in workers] == pids and all(w.procs[0].poll() is None for w in workers)
    finished = sorted(json.loads(v)["finished_at"] for v in after.values())
    first_after = min(f for f in finished if f > state["back_at"])
    print(f"\nredis restart: {len(jobs)} jobs, 1 restart ({DOWN_S:g} s down), "
          f"{len(before)} records before it, lost 0, re-sent {len(d.resent)}, "
          f"first record {first_after - state['back_at']:.1f} s after Redis was back, "
          f"batch {d.seconds:.1f} s")
