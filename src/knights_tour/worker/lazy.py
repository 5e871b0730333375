"""The one door to Celery and kombu for the packages above the cluster, imported on first use.

Importing Celery and kombu costs noticeable start-up time, and most commands that open a
backend (``ktour collect``, ``status``, ``batches``, ``report``) send no message at all. So
:mod:`knights_tour.batches`, :mod:`knights_tour.counting` and :mod:`knights_tour.local` reach the
Celery app module (:mod:`knights_tour.worker.celery`) and kombu's Redis transport only through
these functions (an import-linter contract in pyproject.toml holds them to it; task names and
priorities are in :mod:`knights_tour.worker.messages`, which needs no Celery).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any


def celery_worker() -> ModuleType:
    """The Celery app module :mod:`knights_tour.worker.celery` (``app``, ``use_redis``, task
    names)."""
    from knights_tour.worker import celery as worker  # the layer's lazy import of Celery

    return worker


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


__all__ = ["celery_worker", "messages_held", "unacked_keys"]
