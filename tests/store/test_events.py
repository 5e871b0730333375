"""The end of a batch is announced on its pub/sub channel, so a waiting client wakes at once
instead of at its next poll: by the record that completes it, and by a cancel."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.progress import CANCELLED
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import create_batch, set_batch_state
from knights_tour.store import keys
from knights_tour.store.events import Wakeup

LONG_S = 60.0
"""A wait that ends early when the message comes (a generous bound, never reached)."""


@pytest.fixture
def records_3x4():
    jobs = make_batch_jobs(["3x4"])
    return jobs, [run_job(j) for j in jobs]


def test_the_record_that_completes_a_batch_wakes_its_waiter(redis_client, records_3x4):
    jobs, records = records_3x4
    batch_id = create_batch(redis_client, jobs, {})
    with Wakeup(redis_client, keys.batch_events(batch_id)) as wakeup:
        for rec in records[:-1]:
            save_record(redis_client, batch_id, rec)
        assert wakeup.wait(0.3) is False  # jobs without a record: no announcement
        save_record(redis_client, batch_id, records[-1])
        assert wakeup.wait(LONG_S) is True
        save_record(redis_client, batch_id, records[0])  # already stored: not announced again
        assert wakeup.wait(0.3) is False


def test_a_cancel_wakes_the_waiter_and_other_batches_stay_quiet(redis_client, records_3x4):
    jobs, records = records_3x4
    batch_id = create_batch(redis_client, jobs, {})
    other = create_batch(redis_client, jobs, {"other": True})
    with Wakeup(redis_client, keys.batch_events(batch_id)) as wakeup:
        for rec in records:
            save_record(redis_client, other, rec)  # completes the other batch
        assert wakeup.wait(0.3) is False
        set_batch_state(redis_client, batch_id, CANCELLED)
        assert wakeup.wait(LONG_S) is True


def test_a_wakeup_without_redis_sleeps_out_its_timeout():
    client = redis.Redis(
        host="127.0.0.1",
        port=1,
        socket_connect_timeout=0.5,  # nobody there
        retry=Retry(NoBackoff(), 0),
    )
    with Wakeup(client, "kt:batch:none:events") as wakeup:
        assert wakeup.wait(0.2) is False


def test_the_last_partial_count_wakes_the_waiter(redis_client):
    from knights_tour.board import Board
    from knights_tour.counting import store as count_store
    from knights_tour.counting.plan import plan_count

    plan = plan_count(Board(3, 4), depth=1)
    cid = count_store.count_id_for(plan)
    count_store.register_count(redis_client, cid, plan)
    *first, last = plan.subjobs
    assert first, "a plan of one sub-job would test nothing"
    with Wakeup(redis_client, keys.count_events(cid)) as wakeup:
        for sj in first:
            count, nodes = sj.run()
            count_store.save_partial(redis_client, cid, sj.key, count, nodes)
        assert wakeup.wait(0.3) is False
        count, nodes = last.run()
        count_store.save_partial(redis_client, cid, last.key, count, nodes)
        assert wakeup.wait(LONG_S) is True
    status = count_store.count_status(redis_client, cid)
    assert status["complete"] and status["errors"] == 0
