"""Fault: Redis refuses writes while a batch runs, then accepts them again, with nobody
restarting anything - each way a reachable Redis refuses writes: full under ``noeviction``
(``OOM``: ``maxmemory`` set well below what it uses), a failed snapshot with
``stop-writes-on-bgsave-error`` (``MISCONF``: its directory removed under it) and a read-only
replica (``READONLY``: ``REPLICAOF`` a master that is not there).

Two real workers run a batch; once some of its records are stored, Redis refuses writes for
longer than a task waits for them (``KT_SAVE_RETRY_S``, shortened for these workers), so
tasks give up and their claims go back or lapse. A waiting client (the wait of ``ktour run``,
without its recovery pass: only the workers heal the batch) must hear of it once, with Redis's
reason, and ``ktour status`` must say it (under ``MISCONF`` Redis refuses even a PING, so
``status`` cannot connect: it says why in one line). Then Redis accepts writes again, and the
batch must complete by itself: one record per job, none lost, none twice, no job left held
by a live worker that no longer runs it, the same worker processes.

Fact: from 8x8 to 16x16, every start square of an even board, and every square of the majority
colour of an odd one, has an open knight's tour (Conrad et al. 1994); a tour alternates colours,
so from a square of the minority colour there is none. Every job ends ``found`` (checked by the
verifier in ``audit``) or ``no_tour``.
"""

from __future__ import annotations

import time

import psutil
import pytest
from _faultkit import audit
from _refusals import CODES, Refusal

from knights_tour.batches.client import submit_batch, wait_for_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.cli import main
from knights_tour.store.connection import connect
from knights_tour.store.waiting import WaitHooks

pytestmark = [pytest.mark.fault, pytest.mark.timeout(500)]

REFUSE_AFTER = 40
"""Redis starts refusing writes once this many jobs have their record."""

SAVE_RETRY_S = 3.0
"""How long the workers' tasks wait for Redis to accept writes (``KT_SAVE_RETRY_S``)."""

GIVE_UP_S = SAVE_RETRY_S + 5
"""Redis refuses writes at least this long: longer than a task waits for it."""


def _log_text(worker_pool) -> str:
    return "".join(p.read_text(errors="replace") for p in worker_pool.log_dir.glob("*.log"))


@pytest.mark.parametrize("code", CODES)
def test_a_batch_completes_by_itself_once_redis_accepts_writes_again(
    code, fault_redis, worker_pool, capsys, tmp_path
):
    url = fault_redis.url
    r = connect(url)
    refusal = Refusal(code, r, tmp_path)
    started = worker_pool.start_all(
        "refused-a", "refused-b", env={"KT_SAVE_RETRY_S": f"{SAVE_RETRY_S:g}"}
    )
    pids = [p for w in started for p in w.pids]
    jobs = make_batch_jobs(range(8, 17))
    batch_id = submit_batch(url, jobs, {"test": "refused writes"}, chunk_size=4)

    heard: list[str | None] = []
    shown: dict[str, object] = {}

    def on_progress(status: dict) -> None:
        if "began" not in shown and status["done"] >= REFUSE_AFTER:
            refusal.begin()
            shown["began"] = time.monotonic()
        if "healed" in shown or not heard or heard[-1] is None:
            return
        if time.monotonic() - float(shown["began"]) < GIVE_UP_S:
            return  # every task that waited for Redis has given up by then
        code = main(["status", batch_id, "--redis", url])
        shown["status"] = (code, *capsys.readouterr())
        refusal.end()
        shown["healed"] = time.monotonic()

    status = wait_for_batch(
        r,
        batch_id,
        timeout_s=360,
        hooks=WaitHooks(on_progress=on_progress, on_refused=heard.append),
    )
    log = _log_text(worker_pool)
    assert "healed" in shown, f"Redis never refused writes: {heard}\n{log[-4000:]}"
    assert status["complete"], f"{status}\n{log[-4000:]}"
    healed_s = time.monotonic() - shown["healed"]
    print(f"\nRedis refused writes ({code}); the batch completed {healed_s:.1f} s after")
    status_code, out, err = shown["status"]
    if code == "MISCONF":  # Redis refuses even a PING: status cannot connect, and says why
        assert status_code == 2 and f"Redis refuses writes: {code} " in err, err
        assert len(err.splitlines()) == 1, err
    else:
        assert status_code == 1 and f"Redis refuses writes: {code} " in out, out
    assert len(heard) == 2 and heard[0].startswith(f"{code} ") and heard[1] is None, heard
    said = [line for line in log.splitlines() if "WARNING/" in line or "ERROR/" in line]
    # A consumer that loses its connection first logs Redis's reply as redis-py words it,
    # without the code; a task that waits for Redis logs the code and the reply.
    reply = heard[0].split(" ", 1)[1].rstrip(".")
    assert any(code in line or reply in line for line in said), "the workers' log never says why"
    audit(r, batch_id, jobs)
    assert all(psutil.pid_exists(p) for p in pids), "a worker died"
