"""Chunks sized by estimated cost: every job once and in order, many small jobs per chunk,
few large ones, a small batch still spread over several tasks unless its whole work costs less
than a task."""

from __future__ import annotations

import pytest

from knights_tour.batches.chunking import (
    MAX_CHUNK,
    MIN_CHUNK_S,
    MIN_CHUNKS,
    estimated_cost_s,
    plan_chunks,
)
from knights_tour.batches.jobs import make_batch_jobs


def _flat(chunks):
    return [j for c in chunks for j in c]


def test_every_job_once_in_order_and_small_jobs_travel_together():
    jobs = make_batch_jobs(range(5, 21))  # 2,660 engine jobs
    chunks = plan_chunks(jobs)
    assert _flat(chunks) == list(jobs)
    assert all(0 < len(c) <= MAX_CHUNK for c in chunks)
    assert len(chunks) <= len(jobs) / 16  # more than 16 jobs per task on average
    sizes = {c[0].rows: len(c) for c in chunks}
    assert sizes[5] >= sizes[20]  # cheaper boards, more jobs per chunk


def test_cpsat_jobs_travel_in_smaller_chunks_than_engine_jobs():
    engine = plan_chunks(make_batch_jobs(range(5, 13)))
    checked = plan_chunks(make_batch_jobs(range(5, 13), verify="cpsat"))
    assert len(checked) > len(engine)
    assert estimated_cost_s(make_batch_jobs([12], verify="cpsat")[0]) > estimated_cost_s(
        make_batch_jobs([12])[0]
    )


def test_a_small_batch_is_spread_unless_its_tasks_would_cost_more_than_its_work():
    checked = make_batch_jobs([12], verify="cpsat")  # 144 CP-SAT jobs: seconds of work
    assert len(plan_chunks(checked)) >= MIN_CHUNKS
    jobs = make_batch_jobs([5])  # 25 engine jobs: milliseconds in all
    assert sum(estimated_cost_s(j) for j in jobs) < MIN_CHUNK_S
    assert plan_chunks(jobs) == [list(jobs)]  # one task, not 25 that each cost more


def test_a_fixed_size_is_kept():
    jobs = make_batch_jobs([5])
    fixed = plan_chunks(jobs, chunk_size=4)
    assert [len(c) for c in fixed] == [4] * 6 + [1] and _flat(fixed) == list(jobs)
    with pytest.raises(ValueError):
        plan_chunks(jobs, chunk_size=0)
