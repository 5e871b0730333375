"""Tour counts on the client side: send the sub-jobs of a count, wait for them.

The worker side is the ``count_subjobs`` task (:mod:`knights_tour.tasks`); partial counts are
stored by :mod:`knights_tour.store.counts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from knights_tour.service._celery import celery_worker
from knights_tour.service.waiting import REDIS_OUTAGE_S, WaitHooks, poll_until_complete
from knights_tour.store import keys
from knights_tour.store.counts import count_status


def submit_count(redis_url: str, count_id: str, subjobs: Sequence[Any]) -> int:
    """Send one ``count_subjobs`` task per sub-job (``counting.SubJob``) of ``count_id``
    (registered beforehand with :func:`knights_tour.store.counts.register_count`); returns the
    number of tasks sent."""
    worker = celery_worker()
    app = worker.use_redis(redis_url)
    with app.producer_or_acquire() as producer:
        for sj in subjobs:
            app.send_task(
                worker.TASK_COUNT_SUBJOBS,
                args=[count_id, [sj.to_dict()]],
                producer=producer,
                queue=keys.QUEUE,
                ignore_result=True,
            )
    return len(subjobs)


def wait_for_count(
    r: redis.Redis,
    count_id: str,
    *,
    timeout_s: float | None = None,
    recover_url: str | None = None,
    hooks: WaitHooks | None = None,
    poll_s: float = 0.5,
    outage_s: float = REDIS_OUTAGE_S,
) -> dict[str, Any]:
    """Wait until every sub-job of ``count_id`` has a partial count, one failed (an error
    entry), or ``timeout_s`` passes; returns the last
    :func:`knights_tour.store.counts.count_status`.

    ``recover_url`` is accepted for symmetry with
    :func:`knights_tour.service.batches.wait_for_batch`; count sub-jobs hold no leases, so
    nothing is re-sent (Celery re-delivers a sub-job whose worker died: late acknowledgement).

    Raises
    ------
    KnightsTourError
        For an unknown count id.
    BackendUnavailableError
        If Redis stays unreachable for ``outage_s`` seconds.
    """
    del recover_url
    return poll_until_complete(
        lambda: count_status(r, count_id), timeout_s=timeout_s, hooks=hooks, poll_s=poll_s,
        outage_s=outage_s,
    )


__all__ = ["submit_count", "wait_for_count"]
