"""Real Celery worker processes for a test module (the ``local_workers`` fixture and the
fixtures that need workers with settings of their own)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from knights_tour.local.workers import LocalWorkers
from knights_tour.settings import get_settings


@contextlib.contextmanager
def workers_on(url: str, env: dict[str, str] | None = None) -> Iterator[LocalWorkers]:
    """Two real Celery worker processes (prefork, concurrency 1) on ``url``, with ``env`` added
    to their environment, stopped at the end. ``KT_REDIS_URL`` is set (and the settings cache
    cleared) meanwhile, so code in this process that reads settings talks to the same
    database; restored afterwards."""
    saved = os.environ.get("KT_REDIS_URL")
    os.environ["KT_REDIS_URL"] = url
    get_settings.cache_clear()
    workers = LocalWorkers(url, count=2, concurrency=1, env=env, ready_timeout_s=90)
    try:
        workers.start()
        yield workers
    finally:
        workers.stop()
        if saved is None:
            os.environ.pop("KT_REDIS_URL", None)
        else:
            os.environ["KT_REDIS_URL"] = saved
        get_settings.cache_clear()
