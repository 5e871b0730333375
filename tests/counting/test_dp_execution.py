"""A DP sub-job's dict: built, validated (malformed ones refused as errors), told apart from an
enumeration sub-job's."""

from __future__ import annotations

import pytest

from knights_tour.board import Board
from knights_tour.counting.records import DpSubJob
from knights_tour.errors import InvalidJobError
from knights_tour.worker.messages import is_dp


def dp_item(board, start, role, **fields):
    """The JSON object of a DP sub-job, as a worker receives it."""
    return DpSubJob.of(board, start, role, **fields).to_dict()


def test_dp_item_round_trip():
    raw = dp_item(Board(7, 7), None, "tail", group=0, square=(3, 3), after=23, memory_bytes=2**30)
    assert raw["key"] == "7x7:dp:sq3.3" and is_dp(raw)
    sj = DpSubJob.from_dict(raw)
    assert sj.square == (3, 3) and sj.role == "tail" and sj.to_dict() == raw
    trunk = DpSubJob.from_dict(dp_item(Board(7, 7), None, "trunk", group=0, memory_bytes=1))
    assert trunk.key == "7x7:dp:trunk0" and trunk.square is None
    assert not is_dp({"rows": 5, "cols": 5, "prefix": [[0, 0]]}) and not is_dp(["x"])


@pytest.mark.parametrize(
    "change",
    [
        {"role": "branch"},
        {"memory_bytes": 0},
        {"square": None},
        {"square": [9, 9]},
        {"rows": "x"},
        {"key": 3},
    ],
)
def test_malformed_dp_subjob_is_refused(change):
    raw = dp_item(Board(5, 5), None, "tail", group=0, square=(0, 0), after=23, memory_bytes=10)
    with pytest.raises(InvalidJobError):
        DpSubJob.from_dict(raw | change)
    bare = {k: v for k, v in raw.items() if k != "memory_bytes"}
    with pytest.raises(InvalidJobError):
        DpSubJob.from_dict(bare)


def test_dp_tasks_get_their_own_time_limits_enumeration_the_apps(monkeypatch):
    from knights_tour.settings import get_settings
    from knights_tour.tasks import dp_time_limits

    monkeypatch.setenv("KT_DP_LAYER_LIMIT_S", "1200")
    monkeypatch.setenv("KT_TASK_GRACE_S", "30")
    get_settings.cache_clear()
    try:
        raw = dp_item(Board(7, 7), None, "trunk", group=0, memory_bytes=2**30)
        assert dp_time_limits([raw]) == (1200.0, 1230.0)
        assert dp_time_limits([{"rows": 5, "cols": 5, "prefix": [[0, 0]]}]) is None
        assert dp_time_limits("junk") is None and dp_time_limits([]) is None
    finally:
        get_settings.cache_clear()


def test_dp_chunk_in_process_goes_on_in_new_tasks_and_counts_5x5(task_env, tmp_path, monkeypatch):
    """A chunk run in this process against the real Redis with a budget of 1 ms: each task
    runs one layer and sends its sub-job on (a second sub-job in the same chunk is sent on
    without starting); feeding the sent ones back until every one is stored gives A165134."""
    from knights_tour.counting import store as count_store
    from knights_tour.counting.dp_client import register_dp_count
    from knights_tour.counting.dp_execution import run_dp_chunk
    from knights_tour.counting.dp_jobs import dp_plan
    from knights_tour.settings import get_settings
    from knights_tour.store.connection import connect
    from knights_tour.worker.ledger import Ledger, activate

    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KT_DP_TASK_BUDGET_S", "0.001")
    get_settings.cache_clear()
    board = Board(5, 5)
    plan = dp_plan(board)
    items = plan.subjobs(2**26)
    r = connect(task_env)
    register_dp_count(r, "t-dp", plan, items)
    activate(r, Ledger.for_count("t-dp"))  # sent: what the client does before sending
    sent = [[items[0].to_dict(), items[1].to_dict()]]  # the trunk and the centre in one chunk
    tasks = 0
    while sent:
        chunk = sent.pop(0)
        summary = run_dp_chunk("t-dp", chunk, "w1", sent.append)
        tasks += 1
        assert summary["errors"] == 0
        assert tasks < 500
    assert tasks > 24  # the trunk's 24 layers went one task each
    for it in items[2:]:  # the other classes, now that the trunk's layers are kept
        assert run_dp_chunk("t-dp", [it.to_dict()], "w1")["ran"] == 1  # without send: to the end
    entries = count_store.load_partials(r, "t-dp")
    counts = {it.square: entries[it.key].count for it in items[1:]}
    assert counts[(0, 0)] == 304 and counts[(2, 2)] == 64
    assert sum(counts.get(rep, 0) * len(m) for rep, m in plan.classes.items()) == 1728
    assert entries[items[0].key].figures["layers"]  # the trunk's layers, all tasks'


def test_a_stopped_dp_count_is_not_sent_on(task_env, tmp_path, monkeypatch):
    from knights_tour.counting import store as count_store
    from knights_tour.counting.dp_client import register_dp_count
    from knights_tour.counting.dp_execution import run_dp_chunk
    from knights_tour.counting.dp_jobs import dp_plan
    from knights_tour.settings import get_settings
    from knights_tour.store.connection import connect

    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KT_DP_TASK_BUDGET_S", "0.001")
    get_settings.cache_clear()
    plan = dp_plan(Board(5, 5))
    items = plan.subjobs(2**26)
    r = connect(task_env)
    register_dp_count(r, "t-dp-stopped", plan, items)  # never activated: as after a stop
    sent: list[list[dict]] = []
    summary = run_dp_chunk("t-dp-stopped", [items[0].to_dict()], "w1", sent.append)
    assert summary["stopped"] == 1 and sent == []
    assert count_store.load_dp_progress(r, "t-dp-stopped")[items[0].key].step >= 0
    assert not count_store.load_partials(r, "t-dp-stopped")  # left at its checkpoint
