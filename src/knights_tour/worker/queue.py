"""The broker's Redis lists of the project queue (one per message priority, as kombu's Redis
transport keeps them): whether they are empty, and removing one batch's messages from them.
redis-py only; the list names come from :func:`knights_tour.worker.celery.queue_lists`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, cast

import redis


def lists_empty(r: redis.Redis, names: Sequence[str]) -> bool:
    """True if every Redis list in ``names`` is empty (e.g. the broker's lists of the project
    queue, one per message priority: :func:`knights_tour.worker.celery.queue_lists`)."""
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.llen(name)
    return not any(pipe.execute())


def drop_messages(r: redis.Redis, names: Sequence[str], match: Callable[[bytes], bool]) -> int:
    """Remove from the Redis lists ``names`` (the queue's lists) every message for which
    ``match(raw_message)`` is true; returns how many. Other messages are left in place (a
    shared Redis holds other users' work)."""
    dropped = 0
    for name in names:
        for raw in cast("list[Any]", r.lrange(name, 0, -1)):  # bytes (raw client)
            if match(raw):
                dropped += int(r.lrem(name, 1, raw))
    return dropped


def drop_unacked(
    r: redis.Redis, hash_key: str, index_key: str, match: Callable[[bytes | str], bool]
) -> int:
    """Remove from kombu's hash of delivered, unacknowledged messages (``hash_key``, entries
    ``tag -> [message, exchange, routing key]``, and its time index ``index_key``) every
    message for which ``match(message JSON)`` is true; returns how many. For messages held by
    workers that were killed: otherwise kept until the visibility timeout, then re-queued."""
    dropped = 0
    for tag, value in r.hgetall(hash_key).items():
        try:
            message = json.dumps(json.loads(value)[0])
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        if match(message):
            dropped += int(r.hdel(hash_key, tag))
            r.zrem(index_key, tag)
    return dropped


__all__ = ["lists_empty", "drop_messages", "drop_unacked"]
