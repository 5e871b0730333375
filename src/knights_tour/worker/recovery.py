"""Recovery of work lost with a worker: the one entry point (:func:`recover`, one pass over a
batch or a count) and the sweep every worker runs on a timer.

A job (or count sub-job) is lost when the worker process that claimed it dies: if its worker
main process died, its message stays in kombu's ``unacked`` hash until the visibility timeout.
The process's lease (:mod:`knights_tour.worker.leases`) lapses within ``KT_LEASE_S`` instead,
and :func:`recover` re-sends what it held. :func:`sweep` runs :func:`recover` over every
active batch and count; each worker's main process calls it every ``KT_LEASE_S / 2`` seconds
(the recovery bootstep of :mod:`knights_tour.worker.celery`, wired in :mod:`knights_tour.tasks`),
so a batch heals with or without a waiting client. Waiting clients call :func:`recover` on every
poll too (:func:`knights_tour.batches.client.recover_lost_jobs`,
:func:`knights_tour.counting.client.recover_lost_subjobs`). Several processes recovering at
once re-send each job once: the re-send is marked atomically.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import redis

from knights_tour.settings import get_settings
from knights_tour.worker import holders, ledger, messages, orphans, queue
from knights_tour.worker.lazy import celery_worker
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.messages import ItemDict

Send = Callable[[str, list[ItemDict]], None]
"""``send(unit_id, item_dicts)``: put one task for these items of the batch/count on the queue."""

RESEND_CHUNK = 16
"""Items per re-sent task. Re-sent jobs are few (what one dead worker held) and may be the
ones that kill workers, so they travel in small tasks."""

_quiet_since: dict[tuple[str, str], float] = {}
_last_pass: dict[tuple[str, str], float] = {}


def sender(task_name: str, url: str | None = None) -> Send:
    """A :data:`Send` putting one ``task_name`` task (``[unit_id, item_dicts]``) on the queue
    of the broker at ``url`` (default: this process's Celery app's) at
    :data:`knights_tour.worker.messages.RECOVERY_PRIORITY`."""

    def send(unit_id: str, dicts: list[ItemDict]) -> None:
        celery_worker().send(
            task_name, [unit_id, dicts], url=url, priority=messages.RECOVERY_PRIORITY
        )

    return send


def resend(r: redis.Redis, led: Ledger, candidates: Sequence[str], send: Send) -> list[str]:
    """Re-send those of ``candidates`` that are still lost when checked atomically
    (:func:`knights_tour.worker.orphans.take_for_resend`), :data:`RESEND_CHUNK` per task;
    returns their keys.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if not candidates:
        return []
    taken = orphans.take_for_resend(r, led, candidates)
    dicts = [json.loads(raw) for _, raw in taken]
    for i in range(0, len(dicts), RESEND_CHUNK):
        send(led.id, dicts[i : i + RESEND_CHUNK])
    return [k for k, _ in taken]


def recover(
    r: redis.Redis, led: Ledger, send: Send, min_interval_s: float | None = None
) -> list[str]:
    """Re-send the items of ``led``'s unit lost with a worker or a Redis restart; returns their
    keys. The one recovery pass, whoever runs it.

    * an item claimed by a process whose lease is gone, without a result: its worker died
      (:func:`knights_tour.worker.orphans.find_orphans`);
    * unclaimed items without a result once the queue has been empty and no item of the unit
      held for ``KT_LEASE_S`` in a row, as seen by this process (their message was taken off
      the queue but never started; Celery would restore it only after the visibility
      timeout): :func:`knights_tour.worker.orphans.find_unclaimed`, which reads every item key,
      is only called then.

    Nothing of a cancelled unit is re-sent. A pass within ``min_interval_s`` of the last one
    this process made over the same unit does nothing (a lease cannot lapse faster than that);
    default :attr:`~knights_tour.settings.LeaseTiming.recovery_pass_s`.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    timing = get_settings().lease_timing
    unit = (led.kind, led.id)
    now = time.monotonic()
    interval = timing.recovery_pass_s if min_interval_s is None else min_interval_s
    if now - _last_pass.get(unit, float("-inf")) < interval:
        return []
    _last_pass[unit] = now
    if ledger.cancelled(r, led):
        return []
    resent = resend(r, led, orphans.find_orphans(r, led), send)
    # The cheap checks first: reading every item key costs as much as the unit is large, and
    # is needed only once nothing has run and the queue has been empty for a lease.
    if queue.lists_empty(r, celery_worker().queue_lists()) and not holders.running(r, led):
        since = _quiet_since.setdefault(unit, now)
        if now - since >= timing.quiet_s:
            resent += resend(r, led, orphans.find_unclaimed(r, led), send)
            _quiet_since.pop(unit, None)
    else:
        _quiet_since.pop(unit, None)
    return resent


def _forget_quiet(active: set[tuple[str, str]]) -> None:
    """Forget when the units not in ``active`` were first seen quiet: a unit seen quiet, then
    finished or stopped and sent again later has not been quiet all that time."""
    for unit in [u for u in _quiet_since if u not in active]:
        del _quiet_since[unit]


def sweep(r: redis.Redis, send_batch: Send, send_count: Send) -> dict[str, list[str]]:
    """One recovery pass over every active batch and count (see :func:`recover`); a unit whose
    items all have results (or that was cancelled) leaves the active set.

    Parameters
    ----------
    send_batch, send_count : callable
        ``send(unit_id, item_dicts)`` for a batch's jobs / a count's sub-jobs.

    Returns
    -------
    dict
        ``"batch:<id>"`` / ``"count:<id>"`` -> keys re-sent, for the units where any were.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    out: dict[str, list[str]] = {}
    watched = ledger.active(r)
    _forget_quiet({(led.kind, led.id) for led in watched})
    for led in watched:
        if ledger.cancelled(r, led) or ledger.finished(r, led):
            ledger.deactivate(r, led)
            _quiet_since.pop((led.kind, led.id), None)
            continue
        resent = recover(r, led, send_count if led.kind == "count" else send_batch)
        if resent:
            out[f"{led.kind}:{led.id}"] = resent
    return out


__all__ = ["Send", "RESEND_CHUNK", "sender", "resend", "recover", "sweep"]
