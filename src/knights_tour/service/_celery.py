"""The service layer's one door to Celery and kombu, imported on first use.

Importing Celery and kombu costs noticeable start-up time, and most commands that open a
backend (``ktour collect``, ``status``, ``batches``, ``report``) send no message at all. So the
service modules reach the Celery app module (:mod:`knights_tour.worker`) and kombu's Redis
transport only through these functions: the one place in the layer that imports them.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any


def celery_worker() -> ModuleType:
    """The Celery app module :mod:`knights_tour.worker` (``app``, ``use_redis``, task names)."""
    from knights_tour import worker  # the layer's lazy import of Celery

    return worker


def queue_lists(queue: str) -> list[str]:
    """The Redis lists that hold ``queue``'s messages: kombu's Redis transport keeps one list
    per priority step (the queue's own name for priority 0)."""
    from kombu.transport.redis import PRIORITY_STEPS, Channel  # the layer's lazy kombu import

    return [queue] + [f"{queue}{Channel.sep}{p}" for p in PRIORITY_STEPS if p]


def messages_held(client: Any) -> int:
    """How many task messages workers on this Redis hold right now: delivered to a worker
    (running or reserved) and not yet acknowledged. With late acknowledgement, kombu's Redis
    transport keeps each of them in its ``unacked`` hash until the task ends.

    Parameters
    ----------
    client : redis.Redis
        A client of the broker's Redis (database included).

    Raises
    ------
    redis.RedisError
        If Redis cannot be asked.
    """
    return int(client.hlen(celery_worker().UNACKED_KEY))


def unacked_keys() -> tuple[str, str]:
    """The Redis keys where kombu's Redis transport keeps delivered, unacknowledged messages:
    ``(hash tag -> message, sorted set tag -> delivery time)``."""
    channel = celery_worker().Channel  # kombu's Redis channel, as the app module loaded it
    return channel.unacked_key, channel.unacked_index_key


__all__ = ["celery_worker", "queue_lists", "messages_held", "unacked_keys"]
