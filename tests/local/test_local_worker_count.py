"""How many local workers ``ktour run`` starts: ``--workers`` if given, else ``KT_WORKERS``,
but no more than the batch's estimated work can keep busy past their start-up."""

from __future__ import annotations

import pytest

from knights_tour.batches.estimate import estimate_batch, parse_sizes
from knights_tour.local.launching import WORKER_START_CPU_S, local_worker_count
from knights_tour.settings import get_settings


@pytest.fixture
def four_workers(monkeypatch):
    monkeypatch.setenv("KT_WORKERS", "4")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_a_batch_smaller_than_one_start_up_gets_one_worker(four_workers):
    tiny = estimate_batch(parse_sizes(["5"]))  # 25 trivial engine jobs
    assert tiny.cpu_s < WORKER_START_CPU_S
    assert local_worker_count(None, embedded=True, work_cpu_s=tiny.cpu_s) == 1


def test_one_worker_per_start_up_of_work_up_to_kt_workers(four_workers):
    assert local_worker_count(None, embedded=True, work_cpu_s=1.5 * WORKER_START_CPU_S) == 2
    main_job = estimate_batch(parse_sizes(["5-12"]), verify="cpsat")  # CP-SAT on 620 jobs
    assert main_job.cpu_s > 4 * WORKER_START_CPU_S
    assert local_worker_count(None, embedded=True, work_cpu_s=main_job.cpu_s) == 4
    assert local_worker_count(None, embedded=True) == 4  # no estimate: KT_WORKERS


def test_an_explicit_count_and_a_given_redis_are_kept(four_workers):
    assert local_worker_count(3, embedded=True, work_cpu_s=0.01) == 3
    assert local_worker_count(None, embedded=False, work_cpu_s=100.0) == 0
