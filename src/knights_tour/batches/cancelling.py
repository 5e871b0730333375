"""Leaving a batch or a count: cancel it and drop its tasks from the shared queue.

A queue is shared by every batch and count on the Redis, so only the unit's own task messages
are dropped - queued ones (:func:`drop_queued`) and, for workers that were killed, the ones
they took without acknowledging (:func:`drop_held`); every other message stays, whoever sent
it. ``ktour cancel``, ``--timeout``, Ctrl-C and ``ktour forget`` go through here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, cast

import redis

from knights_tour.batches import progress, store
from knights_tour.worker import messages, queue
from knights_tour.worker.lazy import celery_worker, unacked_keys
from knights_tour.worker.ledger import Ledger, deactivate

__all__ = ["cancel_batch", "drop_held", "drop_queued", "message_of", "queued_items"]


def message_of(unit_id: str, task: str) -> Callable[[Any], bool]:
    """A test for raw kombu messages (Redis transport envelope, JSON body base64-encoded):
    True for a ``task`` message whose first argument is ``unit_id`` (a batch or count id)."""

    def match(raw: Any) -> bool:
        try:
            envelope = json.loads(raw)
            if envelope.get("headers", {}).get("task") != task:
                return False
            body = envelope["body"]
            if envelope.get("properties", {}).get("body_encoding") == "base64":
                body = base64.b64decode(body)
            args = json.loads(body)[0]
            return bool(args) and args[0] == unit_id
        except (ValueError, KeyError, IndexError, TypeError):
            return False

    return match


def _items_of(raw: Any) -> list[Any]:
    """The item dicts a raw run-jobs / count-subjobs message carries (its second argument);
    [] for anything unreadable."""
    try:
        envelope = json.loads(raw)
        body = envelope["body"]
        if envelope.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        items = json.loads(body)[0][1]
    except (ValueError, KeyError, IndexError, TypeError):
        return []
    return items if isinstance(items, list) else []


def queued_items(r: redis.Redis, unit_id: str, task: str = messages.TASK_RUN_JOBS) -> list[Any]:
    """The item dicts (a batch's job dicts by default) carried by the ``task`` messages of
    ``unit_id`` now waiting in the project queue, read without taking them off it (one LRANGE
    per queue list). Messages workers have taken are not in the queue and not counted.

    Raises
    ------
    redis.RedisError
        If Redis cannot be reached.
    """
    match = message_of(unit_id, task)
    found: list[Any] = []
    for name in celery_worker().queue_lists():
        for raw in cast("list[Any]", r.lrange(name, 0, -1)):
            if match(raw):
                found += _items_of(raw)
    return found


def cancel_batch(r: redis.Redis, batch_id: str) -> int:
    """Cancel ``batch_id``: mark it ``cancelled`` (workers skip its jobs when they claim them;
    recovery never re-sends them), stop watching it, and drop its queued tasks - only its own,
    other batches' messages stay - and those workers took without acknowledging
    (:func:`drop_held`). Its stored records stay. Returns the tasks dropped.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    store.set_batch_state(r, batch_id, progress.CANCELLED)
    deactivate(r, Ledger.for_batch(batch_id))
    return drop_queued(r, batch_id) + drop_held(r, batch_id)


def drop_queued(r: redis.Redis, unit_id: str, task: str = messages.TASK_RUN_JOBS) -> int:
    """Remove from the project queue the ``task`` messages of ``unit_id`` (default: the
    run-jobs tasks of batch ``unit_id``; ``messages.TASK_COUNT_SUBJOBS`` for a count's
    sub-jobs) and return how many; every other message stays, whoever sent it (a queue is
    shared by every batch and count on the Redis). A message a worker holds now is not in
    the queue and is not touched.

    Raises
    ------
    redis.RedisError
        If Redis cannot be reached.
    """
    return queue.drop_messages(r, celery_worker().queue_lists(), message_of(unit_id, task))


def drop_held(r: redis.Redis, unit_id: str, task: str = messages.TASK_RUN_JOBS) -> int:
    """Remove the ``task`` messages of ``unit_id`` that workers took and did not acknowledge
    (kombu's unacknowledged hash) - for workers that were just killed, whose messages would
    otherwise come back after the visibility timeout - and return how many. Only for a
    stopped batch or count (cancelled, or its count deactivated): a live worker's message
    for it then only skips its jobs."""
    hash_key, index_key = unacked_keys()
    return queue.drop_unacked(r, hash_key, index_key, message_of(unit_id, task))
