"""Recovery and restarts of counts against a real Redis (no worker): recovery re-sends only the
sub-jobs a client sent (a DP count holds its classes back until their trunk's layer is kept),
forgets a unit's quiet spell once the unit leaves the watch, ``--fresh`` drops the count's
own queued tasks before it forgets the count, and a DP sub-job sent before ``--fresh`` (an
earlier generation of the count) stores nothing after it."""

from __future__ import annotations

import time

import msgspec

from knights_tour.batches.cancelling import queued_items
from knights_tour.board import Board
from knights_tour.counting import store as count_store
from knights_tour.counting.client import restart_count, send_subjobs
from knights_tour.counting.dp_client import register_dp_count
from knights_tour.counting.dp_execution import run_dp_chunk
from knights_tour.counting.dp_jobs import dp_plan
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import ledger, messages, orphans, recovery
from knights_tour.worker.ledger import Ledger


def _dp_count(r, count_id: str):
    """A registered 5x5 DP count: 1 trunk and 4 classes; returns its sub-jobs."""
    plan = dp_plan(Board(5, 5))
    items = plan.subjobs(2**28)
    register_dp_count(r, count_id, plan, items)
    return items


def test_recovery_resends_no_dp_class_the_client_held_back(redis_client, task_env):
    """The client sent the trunk only (the classes wait for its layers): the unclaimed
    sub-jobs recovery may re-send are the trunk, never the classes."""
    cid = "5x5-open-dp-held-back"
    items = _dp_count(redis_client, cid)
    trunk = [it for it in items if it.role == "trunk"]
    assert len(trunk) == 1 and len(items) == 5
    send_subjobs(task_env, cid, trunk)
    led = Ledger.for_count(cid)
    assert orphans.find_unclaimed(redis_client, led, requeue_grace_s=0) == [trunk[0].key]
    assert ledger.is_active(redis_client, led)


def test_a_quiet_spell_ends_when_the_unit_leaves_the_watch(redis_client, monkeypatch):
    """A count seen quiet (nothing queued or held), then off the watch (finished, stopped,
    restarted) and back on it, is not taken for lost at once: its quiet spell starts again."""
    monkeypatch.setenv("KT_LEASE_S", "1")  # the quiet spell recovery waits for: 1 s
    get_settings.cache_clear()
    try:
        cid = "5x5-open-dp-quiet"
        items = _dp_count(redis_client, cid)
        led = Ledger.for_count(cid)
        ledger.mark_sent(redis_client, led, [it.key for it in items])
        sent: list[list[str]] = []

        def send(_unit: str, dicts: list) -> None:
            sent.append([d["key"] for d in dicts])

        ledger.activate(redis_client, led)
        assert recovery.recover(redis_client, led, send, min_interval_s=0) == []  # quiet from now
        ledger.deactivate(redis_client, led)
        assert recovery.sweep(redis_client, send, send) == {}  # not watched: nothing to do
        quiet_s = get_settings().lease_timing.quiet_s
        seen_quiet = time.monotonic()
        while time.monotonic() - seen_quiet <= quiet_s:  # longer than a quiet spell since
            time.sleep(0.05)
        ledger.activate(redis_client, led)
        assert recovery.recover(redis_client, led, send, min_interval_s=0) == []
        assert sent == []
    finally:
        get_settings.cache_clear()


def test_fresh_drops_the_counts_queued_tasks_then_forgets_it(redis_client, task_env):
    cid = "5x5-open-dp-restarted"
    items = _dp_count(redis_client, cid)
    other = "5x5-open-dp-other"
    _dp_count(redis_client, other)
    send_subjobs(task_env, cid, items[:2])
    send_subjobs(task_env, other, items[:1])
    assert len(queued_items(redis_client, cid, messages.TASK_COUNT_SUBJOBS)) == 2
    assert restart_count(redis_client, cid) == 2
    assert queued_items(redis_client, cid, messages.TASK_COUNT_SUBJOBS) == []
    assert len(queued_items(redis_client, other, messages.TASK_COUNT_SUBJOBS)) == 1  # stays
    assert not ledger.is_active(redis_client, Ledger.for_count(cid))
    assert not any(redis_client.exists(k) for k in keys.count_keys(cid))
    assert count_store.load_partials(redis_client, cid) == {}


def test_a_dp_subjob_sent_before_fresh_stores_nothing_after_it(task_env, tmp_path, monkeypatch):
    """A worker late with a sub-job of the count's earlier generation (sent before
    ``--fresh`` registered the count again) neither runs it nor, had it been running
    then, stores its entry or progress; the present generation's is stored."""
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    r = connect(task_env)
    cid = "5x5-open-dp-generations"
    plan = dp_plan(Board(5, 5))
    items = plan.subjobs(2**26)
    old = register_dp_count(r, cid, plan, items)
    assert old[0].generation and len({it.generation for it in old}) == 1
    assert register_dp_count(r, cid, plan, items) == old  # a resume keeps its generation
    restart_count(r, cid)
    new = register_dp_count(r, cid, plan, items)
    assert {it.generation for it in new} == {new[0].generation} != {old[0].generation}
    late = run_dp_chunk(cid, [old[0].to_dict()], "w-late")  # the earlier run's trunk
    assert late["superseded"] == 1 and late["ran"] == 0 and late["skipped"] == 0
    assert count_store.load_partials(r, cid) == {} and count_store.load_dp_progress(r, cid) == {}
    tail = old[1]
    assert not count_store.save_partial(
        r, cid, tail.key, 304, 10, worker="w-late", generation=tail.fence
    )
    assert count_store.load_partials(r, cid) == {}
    assert run_dp_chunk(cid, [new[0].to_dict()], "w1")["ran"] == 1
    assert set(count_store.load_partials(r, cid)) == {new[0].key}
    kept = count_store.load_dp_progress(r, cid)[new[0].key]
    stale = msgspec.structs.replace(kept, step=0, worker="w-late")
    assert not count_store.save_dp_progress(r, cid, old[0].key, stale, old[0].fence)
    assert count_store.load_dp_progress(r, cid) == {new[0].key: kept}
    r.close()
