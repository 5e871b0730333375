"""Distributed tour counts (issue 7) on a real Redis server and real Celery worker processes.

Facts: OEIS A165134 — 1728 directed open tours on 5×5 (per-square table from its example
section: 304 per corner, 64 in the centre) and 6,637,920 on 6×6.
"""

from __future__ import annotations

import json
import re
import time

import psutil
import pytest
from _counts_facts import OEIS_5X5

from knights_tour.board import Board
from knights_tour.cli import main
from knights_tour.counting import store as count_store
from knights_tour.counting.client import submit_count, wait_for_count
from knights_tour.counting.plan import plan_count
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker.celery import use_redis
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.messages import TASK_COUNT_SUBJOBS


def _grid_from_output(text: str, n: int) -> list[list[int]]:
    """Rows printed as '<rank>  v v v ...' (rank n first)."""
    rows = []
    for line in text.splitlines():
        m = re.match(rf"^\s*(\d+)\s{{2}}((?:\s*\d+){{{n}}})\s*$", line)
        if m:
            rows.append([int(v) for v in m.group(2).split()])
    return rows


def test_ktour_count_5_prints_grid_summing_to_1728(local_workers, module_redis_url, capsys):
    code = main(["count", "5", "--redis", module_redis_url, "--workers", "0", "--fresh"])
    out = capsys.readouterr()
    assert code == 0, out.err
    grid = _grid_from_output(out.out, 5)
    assert grid == OEIS_5X5
    assert sum(map(sum, grid)) == 1728
    assert "total: 1,728" in out.out
    assert "order 8" in out.out  # says that symmetry was used
    # the counting itself, inside the command's wall time
    span = float(re.search(r"; counting (\d+\.\d+) s ", out.out).group(1))
    wall = float(re.search(r"; wall (\d+\.\d+) s", out.out).group(1))
    assert 0 <= span <= wall

    # Same command again: every sub-job is already counted, nothing is sent.
    code = main(["count", "5", "--redis", module_redis_url, "--workers", "0"])
    again = capsys.readouterr()
    assert code == 0
    assert "already counted" in again.err
    assert _grid_from_output(again.out, 5) == OEIS_5X5


def test_resume_counts_only_missing_subjobs(local_workers, module_redis_url, capsys):
    r = connect(module_redis_url)
    plan = plan_count(Board(5, 5))
    cid = count_store.count_id_for(plan)
    assert main(["count", "5", "--redis", module_redis_url, "--workers", "0"]) == 0
    capsys.readouterr()
    # Drop some partial counts, as if their workers had never finished them.
    dropped = [sj.key for sj in plan.subjobs[::7]]
    r.hdel(keys.count_partials(cid), *dropped)
    assert len(count_store.missing_subjobs(r, cid, plan)) == len(dropped)
    code = main(["count", "5", "--redis", module_redis_url, "--workers", "0", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"{len(dropped)} of {len(plan.subjobs)} sub-jobs submitted" in out.err
    record = json.loads(out.out)
    assert record["total"] == 1728 and record["grid"] == OEIS_5X5
    assert record["reused_subjobs"] == len(plan.subjobs) - len(dropped)
    # the span is of this run's sub-jobs only, inside this run's wall time
    assert 0 <= record["counting_s"] <= record["elapsed_s"]
    r.close()


def test_start_option(local_workers, module_redis_url, capsys):
    code = main(["count", "5", "--start", "e1", "--redis", module_redis_url, "--workers", "0"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "tours from e1: 304" in out.out


def test_killed_worker_count_still_exact(local_workers, module_redis_url):
    """SIGKILL a worker's pool process in the middle of a 6x6 count: its sub-job is delivered
    again (late acknowledgement) and the total is still exactly OEIS A165134(6)."""
    r = connect(module_redis_url)
    plan = plan_count(Board(6, 6), depth=2)
    cid = count_store.count_id_for(plan)
    count_store.delete_count(r, cid)
    count_store.register_count(r, cid, plan)
    submit_count(module_redis_url, cid, plan.subjobs)
    deadline = time.monotonic() + 120
    while count_store.count_status(r, cid)["done"] < 3:
        assert time.monotonic() < deadline, "no sub-job finished"
        time.sleep(0.05)
    status = count_store.count_status(r, cid)
    assert not status["complete"], "count finished before the kill; test proves nothing"
    killed = local_workers.kill_one(0)
    status = wait_for_count(r, cid, timeout_s=240)
    assert status["complete"], status
    report = count_store.assemble_count(r, cid, plan)
    assert report.total == 6_637_920
    # each stored partial count cleared its lease bookkeeping, the redelivered one's too
    led = Ledger.for_count(cid)
    assert [r.hlen(h) for h in (led.started, led.attempts, led.requeued)] == [0, 0, 0]
    # the pool process is gone (the worker replaced it); the worker itself survived
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == psutil.STATUS_ZOMBIE
    assert all(p.poll() is None for p in local_workers.procs)
    r.close()


def test_malformed_subjob_is_an_error_not_a_hang(local_workers, module_redis_url):
    r = connect(module_redis_url)
    plan = plan_count(Board(3, 4), depth=1)
    cid = count_store.count_id_for(plan) + "-bad"
    count_store.register_count(r, cid, plan)
    bad = plan.subjobs[0].to_dict() | {"prefix": [[0, 0], [0, 1]]}  # not a knight move
    use_redis(module_redis_url).send_task(
        TASK_COUNT_SUBJOBS, args=[cid, [bad]], queue=keys.QUEUE, ignore_result=True
    )
    status = wait_for_count(r, cid, timeout_s=60)
    assert status["errors"] == 1 and not status["complete"]
    r.close()


@pytest.mark.parametrize(
    "args", [["count", "8"], ["count", "5", "--start", "z9"], ["count", "5", "--depth", "-1"]]
)
def test_bad_input_exit_2(args, capsys):
    assert main(args) == 2
    assert "ktour: error:" in capsys.readouterr().err
