"""``ktour count --method dp`` on real Celery workers over a real Redis: one sub-job per trunk
and per start class, each class sent once its trunk's layer is on disk, results stored per key
(a rerun skips them), and sweeps that outrun a task's budget sent on as continuations (the
workers here get a budget of a few milliseconds, so every sweep goes on in several tasks).

Facts: OEIS A165134 — 1728 directed open tours on 5×5 (304 per corner, 64 in the centre) and
6,637,920 on 6×6; the enumeration's grid square by square.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from _counts_facts import OEIS_5X5
from _ramdir import ram_dir
from _workers import workers_on

from knights_tour.cli import main
from knights_tour.counting import store as count_store
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect


@pytest.fixture(scope="module")
def dp_workers(
    module_redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimpleNamespace]:
    """Two real workers on ``module_redis_url`` with their own ``KT_DATA_DIR`` (the DP's
    checkpoints, in RAM where the machine has it: :mod:`_ramdir`) and a DP task budget of
    5 ms; yields ``.data`` (that dir) and ``.workers``."""
    with ram_dir(tmp_path_factory.mktemp("dp-workers")) as data:
        env = {"KT_DATA_DIR": str(data), "KT_DP_TASK_BUDGET_S": "0.005"}
        with workers_on(module_redis_url, env) as workers:
            yield SimpleNamespace(data=data, workers=workers)


def _count(url: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    code = main(["count", *args, "--redis", url, "--workers", "0", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out), out.err


def test_dp_5x5_on_workers_equals_a165134_through_continuations(
    dp_workers, module_redis_url, capsys
):
    record, err = _count(module_redis_url, "5", "--method", "dp", "--fresh", capsys=capsys)
    assert record["grid"] == OEIS_5X5 and record["total"] == 1728
    assert record["method"] == "frontier DP" and record["peak_rss_bytes"] > 0
    assert len(record["peak_rss_bytes_per_worker"]) <= 2  # the peak of each worker process
    assert record["subjobs"] == 5 and record["reused_subjobs"] == 0  # 1 trunk + 4 classes
    assert "dp trunk" in err and "ETA" in err  # progress lines from the workers' records
    r = connect(module_redis_url)
    progress = count_store.load_dp_progress(r, "5x5-open-dp-all")
    # the trunk's 24 layers ran in several tasks, each resuming from the last checkpoint
    assert progress["5x5:dp:trunk0"].tasks > 1
    assert list(
        (dp_workers.data / "frontier").glob("*/kept-*.npy")
    )  # the layers classes start from


def test_dp_rectangle_on_workers_equals_the_enumeration(dp_workers, module_redis_url, capsys):
    dp, _ = _count(module_redis_url, "4x5", "--method", "dp", "--fresh", capsys=capsys)
    enum, _ = _count(module_redis_url, "4x5", "--method", "enumerate", capsys=capsys)
    assert dp["grid"] == enum["grid"] and dp["total"] == enum["total"] > 0


def test_dp_rerun_counts_only_what_is_not_stored(dp_workers, module_redis_url, capsys):
    first, _ = _count(module_redis_url, "3x10", "--method", "dp", "--fresh", capsys=capsys)
    r = connect(module_redis_url)
    cid = "3x10-open-dp-all"
    entries = count_store.load_partials(r, cid)
    assert len(entries) == first["subjobs"] == 12  # 2 trunks + 10 classes
    # As if the run had stopped after the trunks and one class: the other classes' results
    # are dropped and counted again; the stored ones are not.
    kept = {"3x10:dp:trunk0", "3x10:dp:trunk1", "3x10:dp:sq0.0"}
    r.hdel(keys.count_partials(cid), *[k for k in entries if k not in kept])
    again, err = _count(module_redis_url, "3x10", "--method", "dp", capsys=capsys)
    assert "9 of 12 DP sub-jobs" in err and "(3 already counted)" in err
    assert again["grid"] == first["grid"] and again["reused_subjobs"] == 3
    now = count_store.load_partials(r, cid)
    for key in kept:
        assert now[key].finished_at == entries[key].finished_at  # not counted again
    # Nothing dropped: the same command only sums what is stored.
    third, err = _count(module_redis_url, "3x10", "--method", "dp", capsys=capsys)
    assert "all 12 sub-jobs already counted" in err and third["grid"] == first["grid"]


def test_dp_fresh_removes_the_counts_checkpoints(dp_workers, module_redis_url, capsys, monkeypatch):
    """``--fresh`` removes the count's checkpoint folders under this machine's data dir (here
    the workers' own, as for local workers); without it, a count whose results were dropped
    from Redis reads its classes' finished sweeps from disk again."""
    monkeypatch.setenv("KT_DATA_DIR", str(dp_workers.data))
    get_settings.cache_clear()
    try:
        _count(module_redis_url, "5", "--method", "dp", capsys=capsys)  # complete, on disk
        r = connect(module_redis_url)
        count_store.delete_count(r, "5x5-open-dp-all")  # Redis forgets, the disk does not
        kept, _ = _count(module_redis_url, "5", "--method", "dp", capsys=capsys)
        assert kept["total"] == 1728
        swept = [c["method"] for c in kept["dp_classes"] if "sweep" in c["method"]]
        assert len(swept) == 4 and all("resumed from its checkpoint" in m for m in swept)
        assert count_store.load_dp_progress(r, "5x5-open-dp-all") == {}  # no layer swept
        fresh, err = _count(module_redis_url, "5", "--method", "dp", "--fresh", capsys=capsys)
        frontier = dp_workers.data / "frontier"
        assert f"--fresh: 5 checkpoint folder(s) of this count removed under {frontier}" in err
        assert fresh["total"] == 1728 and fresh["reused_subjobs"] == 0
        progress = count_store.load_dp_progress(r, "5x5-open-dp-all")
        assert progress["5x5:dp:trunk0"].step > 0  # the trunk swept its layers again
    finally:
        get_settings.cache_clear()


def test_dp_6x6_stopped_by_timeout_then_finished_equals_the_enumeration(
    dp_workers, module_redis_url, capsys
):
    """A 6x6 DP count stopped by ``--timeout`` is finished by the same command, from what it
    left; the grid is the enumeration's on the same workers, the total OEIS A165134(6)."""
    shutil.rmtree(dp_workers.data / "frontier", ignore_errors=True)  # no finished sweeps on disk
    args = ["count", "6", "--method", "dp", "--redis", module_redis_url, "--workers", "0"]
    code = main([*args, "--fresh", "--timeout", "0.5"])
    err = capsys.readouterr().err
    assert code == 1 and "stopped by --timeout after 0.5 s" in err, err
    dp, err = _count(module_redis_url, "6", "--method", "dp", capsys=capsys)
    enum, _ = _count(module_redis_url, "6", "--method", "enumerate", capsys=capsys)
    assert dp["total"] == enum["total"] == 6_637_920
    assert dp["grid"] == enum["grid"]


def test_dp_worker_killed_mid_trunk_count_still_exact(dp_workers, module_redis_url):
    """SIGKILL a worker's pool process while the trunks of a 6x6 DP count run (one layer a
    task): its sub-job is re-sent and resumes from the last checkpointed layer; the total is
    still OEIS A165134(6)."""
    from knights_tour.board import Board
    from knights_tour.counting.client import send_subjobs
    from knights_tour.counting.dp_client import (
        assemble_dp_count,
        ready_items,
        register_dp_count,
        wait_for_dp_count,
    )
    from knights_tour.counting.dp_jobs import dp_plan

    shutil.rmtree(dp_workers.data / "frontier", ignore_errors=True)
    r = connect(module_redis_url)
    cid = "6x6-open-dp-killed"
    count_store.delete_count(r, cid)
    plan = dp_plan(Board(6, 6))
    items = plan.subjobs(2**28)
    register_dp_count(r, cid, plan, items)
    first = ready_items(r, cid, items, set())
    assert [it.role for it in first] == ["trunk", "trunk"]
    send_subjobs(module_redis_url, cid, first)
    deadline = time.monotonic() + 120
    while getattr(count_store.load_dp_progress(r, cid).get("6x6:dp:trunk0"), "step", -1) < 20:
        assert time.monotonic() < deadline, "the trunk made no progress"
        time.sleep(0.05)
    assert "6x6:dp:trunk0" not in count_store.load_partials(r, cid), "trunk done: proves nothing"
    dp_workers.workers.kill_one(0)
    sent = {it.key for it in first}
    status = wait_for_dp_count(r, module_redis_url, cid, items, sent=sent, timeout_s=240)
    assert status["complete"], status
    report = assemble_dp_count(r, cid, plan, items, 0.0, sent)
    assert report.total == 6_637_920
    trunk = count_store.load_partials(r, cid)["6x6:dp:trunk0"]
    steps = [layer["step"] for layer in trunk.figures["layers"]]
    assert steps == list(range(len(steps)))  # every layer once, none lost or doubled
    r.close()
