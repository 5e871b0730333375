"""Recovery of work lost with a worker: one pass over a batch or a count, and the sweep every
worker runs on a timer.

A job (or count sub-job) is lost when the worker main process that held it dies: its message
stays in kombu's ``unacked`` hash until the visibility timeout. Its lease
(:mod:`knights_tour.store.leases`) lapses within ``KT_LEASE_S`` instead, and :func:`recover`
re-sends it. :func:`sweep` runs :func:`recover` over every active batch and count; each
worker's main process calls it every ``KT_LEASE_S / 2`` seconds (the recovery bootstep of
:mod:`knights_tour.worker`, wired in :mod:`knights_tour.tasks`), so a batch heals with or
without a waiting client. Waiting clients call :func:`recover` on every poll too. Several
processes recovering at once re-send each job once: the re-send is marked atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from knights_tour import worker
from knights_tour.settings import get_settings
from knights_tour.store import leases, queue

Send = Callable[[str, list[dict[str, Any]]], None]
"""``send(unit_id, item_dicts)``: put one task for these items of the batch/count on the queue."""

_quiet_since: dict[tuple[str, str], float] = {}


def sender(task_name: str) -> Send:
    """A :data:`Send` putting one ``task_name`` task (``[unit_id, item_dicts]``) on the queue
    of this process's Celery app at :data:`knights_tour.worker.RECOVERY_PRIORITY`."""

    def send(unit_id: str, dicts: list[dict[str, Any]]) -> None:
        worker.send(task_name, [unit_id, dicts], priority=worker.RECOVERY_PRIORITY)

    return send


def recover(r: redis.Redis, unit: str | leases.Ledger, send: Send) -> list[str]:
    """Re-send the items of ``unit`` (a batch id or a :class:`~knights_tour.store.leases.Ledger`)
    lost with a worker or a Redis restart; returns their keys.

    * a claimed item whose lease expired without a result (its worker died):
      :func:`knights_tour.store.leases.recover_batch`;
    * unclaimed items without a result when the queue is empty and no item of the unit is
      running, for ``KT_LEASE_S`` in a row as seen by this process (their message was taken
      off the queue but never started; Celery would restore it only after the visibility
      timeout): :func:`knights_tour.store.leases.find_unclaimed`.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    led = leases._L(unit)  # noqa: SLF001 - the store's own str-or-Ledger coercion
    if leases.cancelled(r, led):
        return []  # nothing of a cancelled batch is ever re-sent
    resent = leases.recover_batch(r, led, send)
    quiet_key = (led.kind, led.id)
    # The cheap checks first: reading every job key (find_unclaimed) costs as much as the
    # unit is large, and is needed only once nothing runs and the queue is empty.
    unclaimed = []
    if not leases.running(r, led) and queue.lists_empty(r, worker.queue_lists()):
        unclaimed = leases.find_unclaimed(r, led)
    if unclaimed:
        since = _quiet_since.setdefault(quiet_key, time.monotonic())
        if time.monotonic() - since >= get_settings().lease_s:
            resent += leases.resend(r, led, unclaimed, send)
            _quiet_since.pop(quiet_key, None)
    else:
        _quiet_since.pop(quiet_key, None)
    return resent


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
    for led in leases.active(r):
        if leases.cancelled(r, led) or not leases.missing(r, led):
            leases.deactivate(r, led)
            continue
        resent = recover(r, led, send_count if led.kind == "count" else send_batch)
        if resent:
            out[f"{led.kind}:{led.id}"] = resent
    return out


__all__ = ["Send", "sender", "recover", "sweep"]
