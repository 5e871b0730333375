"""Fixtures of the fault tier: a Redis server of the test's own (it gets stopped and restarted)
and Celery worker processes the test may kill. Everything binds 127.0.0.1 and is stopped, by
recorded PID, by the fixture that started it."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
from _faultkit import LEASE_S, WorkerPool

from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.settings import get_settings
from knights_tour.solvers import warm_up_backends


@pytest.fixture(scope="session", autouse=True)
def _engine_loaded() -> None:
    """The search engine loaded in this process (its compiled kernels read from numba's cache,
    or compiled into it) before the tier's first test: the tests that run a task in this
    process (test_leases.py) count on its commands or race a lease, and the first solve of a
    process, seconds on a busy machine, must not fall inside that window. A serial run has
    loaded it in the tests before this tier; a parallel run starts with this tier. The engine's
    warm-up loads the kernels (small jobs alone would run them as plain Python and load
    nothing); the two jobs then load the rest of a job's path."""
    warm_up_backends()
    for size in (5, 6):
        run_job(make_batch_jobs([size])[0])


@pytest.fixture
def fault_redis(tmp_path) -> Iterator[EmbeddedRedis]:
    """A password-protected embedded Redis (AOF on) in this test's tmp dir; ``KT_REDIS_URL``
    and ``KT_LEASE_S`` point this process at it for the test."""
    server = EmbeddedRedis(tmp_path / "redis", password=secrets.token_hex(8), reuse=False)
    server.start()
    saved = {k: os.environ.get(k) for k in ("KT_REDIS_URL", "KT_LEASE_S")}
    os.environ["KT_REDIS_URL"] = server.url
    os.environ["KT_LEASE_S"] = str(LEASE_S)
    get_settings.cache_clear()
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()


@pytest.fixture
def worker_pool(fault_redis, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(fault_redis.url, tmp_path / "logs")
    try:
        yield pool
    finally:
        pool.stop_all()
