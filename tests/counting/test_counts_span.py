"""The counting span of a count (counting/store.counting_span_s): from the first sub-job's start
to the last one's end, by the workers' stored clocks, whatever order they finished in; for a
resumed count, of the sub-jobs that run counted only (counting/store.assemble_count)."""

from __future__ import annotations

import msgspec
import pytest

from knights_tour.counting.records import CountEntry
from knights_tour.counting.store import counting_span_s


def test_span_from_the_first_start_to_the_last_end():
    entries = [
        CountEntry(count=1, elapsed_s=0.5, finished_at=100.5),  # ran 100.0-100.5
        CountEntry(count=2, elapsed_s=2.0, finished_at=101.0),  # ran 99.0-101.0: first start
        CountEntry(count=3, elapsed_s=0.25, finished_at=101.75),  # the last end
    ]
    assert counting_span_s(entries) == pytest.approx(2.75)
    assert counting_span_s(reversed(entries)) == pytest.approx(2.75)


def test_no_span_without_timed_entries():
    assert counting_span_s([]) is None
    older = msgspec.json.decode(b'{"count":1,"elapsed_s":1.0}', type=CountEntry)
    assert counting_span_s([older]) is None  # stored by an older tree


def test_a_resumed_count_spans_only_the_sub_jobs_this_run_counted(redis_client, monkeypatch):
    """A count stopped after half its sub-jobs and resumed a day later: the span is the second
    run's own (its sub-jobs took 0.1 s each, one after another), not the day in between;
    a rerun that counts nothing has no span. The total is OEIS A165134's 1,728 for 5x5."""
    from knights_tour.board import Board
    from knights_tour.counting import store as count_store
    from knights_tour.counting.plan import plan_count

    r = redis_client
    plan = plan_count(Board(5, 5), depth=1)
    cid = count_store.count_id_for(plan)
    count_store.register_count(r, cid, plan)
    half = len(plan.subjobs) // 2
    clock = [1_000.0]
    monkeypatch.setattr(count_store.time, "time", lambda: clock[0])
    for sj in plan.subjobs[:half]:  # the first run, stopped by --timeout
        clock[0] += 0.1
        count_store.save_partial(r, cid, sj.key, *sj.run(), elapsed_s=0.1)
    clock[0] += 86_400.0  # the same command again the next day
    second = plan.subjobs[half:]
    for sj in second:
        clock[0] += 0.1
        count_store.save_partial(r, cid, sj.key, *sj.run(), elapsed_s=0.1)
    counted = [sj.key for sj in second]
    report = count_store.assemble_count(r, cid, plan, 5.0, counted=counted)
    assert report.total == 1728
    assert report.extra.counting_s == pytest.approx(0.1 * len(second))
    again = count_store.assemble_count(r, cid, plan, 0.5, counted=[])
    assert again.extra.counting_s is None
    assert again.total == 1728
