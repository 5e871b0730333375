"""Fault: Redis refuses writes while a batch runs (full under ``noeviction``: ``-OOM``), then
accepts them again, with nobody restarting anything.

Two real workers run a batch; once some of its records are stored, the test's Redis gets a
``maxmemory`` well below what it uses, so no record fits any more. A waiting client (the wait
of ``ktour run``, without its recovery pass: only the workers heal the batch) must hear of it
once, with Redis's reason, and ``ktour status`` must say it. Once a task has waited for Redis
as long as a task waits (``SAVE_RETRY_S``) and given up, the limit is lifted. Then the batch
must complete by itself: one record per job, none lost, none twice, no job left held by a live
worker that no longer runs it, the same worker processes.

Fact: every start square of 8x8, 9x9 and 10x10 has an open knight's tour (Conrad et al. 1994),
so every job finds one, each checked by the verifier in ``audit``.
"""

from __future__ import annotations

import time

import psutil
import pytest
from _faultkit import audit

from knights_tour.cli import main
from knights_tour.core.jobs import make_batch_jobs
from knights_tour.service.batches import submit_batch, wait_for_batch
from knights_tour.service.waiting import WaitHooks
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault, pytest.mark.timeout(500)]

FULL_AFTER = 40
"""Redis is made full once this many jobs have their record."""


def _log_text(worker_pool) -> str:
    return "".join(p.read_text(errors="replace") for p in worker_pool.log_dir.glob("*.log"))


def test_a_batch_completes_by_itself_once_redis_accepts_writes_again(
    fault_redis, worker_pool, capsys
):
    url = fault_redis.url
    r = connect(url)
    started = worker_pool.start_all("full-a", "full-b")
    pids = [p for w in started for p in w.pids]
    jobs = make_batch_jobs([8, 9, 10])
    batch_id = submit_batch(url, jobs, {"test": "refused writes"}, chunk_size=4)

    heard: list[str | None] = []
    shown: dict[str, object] = {}

    def on_progress(status: dict) -> None:
        if "full" not in shown and status["done"] >= FULL_AFTER:
            # Far below what it uses: deleting a few entries cannot bring it back under.
            r.config_set("maxmemory", str(r.info("memory")["used_memory"] // 2))
            shown["full"] = True
        if "healed" in shown or not heard or heard[-1] is None:
            return
        if "raised unexpected: StorageFullError" not in _log_text(worker_pool):
            return  # no task has waited for Redis as long as it does, and given up, yet
        code = main(["status", batch_id, "--redis", url])
        shown["status"] = (code, capsys.readouterr().out)
        r.config_set("maxmemory", "0")
        shown["healed"] = time.monotonic()

    status = wait_for_batch(
        r,
        batch_id,
        timeout_s=360,
        hooks=WaitHooks(on_progress=on_progress, on_refused=heard.append),
    )
    log_tail = _log_text(worker_pool)[-4000:]
    assert "healed" in shown, f"no task gave up on a refused write: {heard}\n{log_tail}"
    assert status["complete"], f"{status}\n{log_tail}"
    healed_s = time.monotonic() - shown["healed"]
    print(f"\nRedis refused writes; the batch completed {healed_s:.1f} s after it accepted them")
    code, out = shown["status"]
    assert code == 1 and "Redis refuses writes: OOM command not allowed" in out, out
    assert len(heard) == 2 and heard[0].startswith("OOM ") and heard[1] is None, heard
    audit(r, batch_id, jobs)
    assert all(psutil.pid_exists(p) for p in pids), "a worker died"
