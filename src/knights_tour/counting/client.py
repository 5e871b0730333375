"""The tour-count lifecycle on the client side: send sub-jobs, wait for their partial counts.

Planning and summing are pure (:mod:`knights_tour.counting.plan`); what is stored is in
:mod:`knights_tour.counting.store`; the worker side is
:func:`knights_tour.counting.execution.run_count_chunk`. Typical use (what ``ktour count``
does)::

    plan = counting.plan_count(board)
    cid = count_id_for(plan)                                  # knights_tour.counting.store
    register_count(r, cid, plan)
    submit_count(url, cid, missing_subjobs(r, cid, plan))
    status = wait_for_count(r, cid)
    report = assemble_count(r, cid, plan)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

import redis

from knights_tour.batches.cancelling import drop_held, drop_queued
from knights_tour.counting import store as count_store
from knights_tour.counting.plan import SubJob
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.store.waiting import WaitOptions, wait_announced
from knights_tour.worker import ledger, messages, recovery
from knights_tour.worker.lazy import celery_worker


def submit_count(redis_url: str, count_id: str, subjobs: Sequence[SubJob]) -> int:
    """Send one count task per sub-job of ``count_id`` (registered beforehand with
    :func:`knights_tour.counting.store.register_count`).

    Parameters
    ----------
    redis_url : str
        The broker the workers listen on.
    count_id : str
    subjobs : sequence of SubJob
        E.g. :func:`knights_tour.counting.store.missing_subjobs` (the ones still to count).

    Returns
    -------
    int
        The number of tasks sent.
    """
    return send_subjobs(redis_url, count_id, [sj.to_dict() for sj in subjobs])


def send_subjobs(redis_url: str, count_id: str, subjob_dicts: Sequence[object]) -> int:
    """Send one count task per sub-job of ``count_id`` (an enumeration's dict, a DP count's
    :class:`~knights_tour.counting.records.DpSubJob`), each marked sent and the count put on
    the workers' recovery watch first (recovery re-sends only sub-jobs that were sent);
    returns how many were sent."""
    led = ledger.Ledger.for_count(count_id)
    r = connect(redis_url)
    pipe = r.pipeline(transaction=False)
    ledger.mark_sent(pipe, led, [_key_of(raw) for raw in subjob_dicts])
    ledger.activate(pipe, led)
    pipe.execute()
    r.close()
    celery = celery_worker()
    with celery.use_redis(redis_url).producer_or_acquire() as producer:
        for raw in subjob_dicts:
            celery.send(
                messages.TASK_COUNT_SUBJOBS, [count_id, [raw]], url=redis_url, producer=producer
            )
    return len(subjob_dicts)


def _key_of(raw: object) -> str:
    """The key of a sub-job as :func:`send_subjobs` takes it (a dict or a record)."""
    return str(raw.get("key") if isinstance(raw, dict) else getattr(raw, "key", None))


def recover_lost_subjobs(r: redis.Redis, redis_url: str, count_id: str) -> list[str]:
    """Re-send (at recovery priority) the sub-jobs of ``count_id`` lost with their worker;
    returns their keys (:func:`knights_tour.worker.recovery.recover` on the count's ledger).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    return recovery.recover(
        r,
        ledger.Ledger.for_count(count_id),
        recovery.sender(messages.TASK_COUNT_SUBJOBS, url=redis_url),
    )


def _count_done(status: count_store.CountStatus) -> bool:
    return bool(status["complete"] or status["errors"])


def wait_for_count(
    r: redis.Redis,
    count_id: str,
    *,
    recover_url: str | None = None,
    **wait: Unpack[WaitOptions[count_store.CountStatus]],
) -> count_store.CountStatus:
    """Wait until every sub-job of ``count_id`` has a partial count or one failed.

    The arguments are those of :func:`knights_tour.batches.client.wait_for_batch`; with
    ``recover_url``, sub-jobs lost with their worker are re-sent on every poll
    (:func:`recover_lost_subjobs`).

    Returns
    -------
    dict
        The last :func:`knights_tour.counting.store.count_status` (``complete`` False after a
        timeout or a failed sub-job).

    Raises
    ------
    KnightsTourError
        For an unknown count id.
    BackendUnavailableError
        If Redis stayed unreachable for ``outage_s`` seconds.
    """
    return wait_announced(
        r,
        keys.count_events(count_id),
        lambda: count_store.count_status(r, count_id),
        _count_done,
        lambda url: recover_lost_subjobs(r, url, count_id),
        recover_url=recover_url,
        **wait,
    )


def stop_count(r: redis.Redis, count_id: str) -> int:
    """Stop ``count_id`` for now (``ktour count`` interrupted or timed out): drop its queued
    sub-job tasks and those workers took without acknowledging - only its own, other work on
    the queue stays - and take it off the
    workers' recovery watch. Its partial counts stay, so running the same count again
    resumes it. Returns the tasks dropped.

    Raises
    ------
    redis.RedisError
        If Redis cannot be reached.
    """
    ledger.deactivate(r, ledger.Ledger.for_count(count_id))
    return drop_queued(r, count_id, messages.TASK_COUNT_SUBJOBS) + drop_held(
        r, count_id, messages.TASK_COUNT_SUBJOBS
    )


def restart_count(r: redis.Redis, count_id: str) -> int:
    """Forget ``count_id`` to count it again from nothing (``ktour count --fresh``): stop it
    first (:func:`stop_count`: its own queued and unacknowledged sub-job tasks dropped, off
    the recovery watch), so no task of the earlier run stays to store an entry for the new
    one, then delete its keys (:func:`knights_tour.counting.store.delete_count`). A task a
    worker runs at that moment still stores its entry when it ends. Returns the tasks
    dropped.

    Raises
    ------
    redis.RedisError
        If Redis cannot be reached.
    """
    dropped = stop_count(r, count_id)
    count_store.delete_count(r, count_id)
    return dropped


__all__ = [
    "submit_count",
    "send_subjobs",
    "wait_for_count",
    "recover_lost_subjobs",
    "stop_count",
    "restart_count",
]
