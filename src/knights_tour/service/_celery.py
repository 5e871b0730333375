"""The service layer's one door to Celery and kombu, imported on first use.

Importing Celery and kombu costs noticeable start-up time, and most commands that open a
backend (``ktour collect``, ``status``, ``batches``, ``report``) send no message at all. So the
service modules reach the Celery app module (:mod:`knights_tour.worker`) and kombu's Redis
transport only through these functions: the one place in the layer that imports them.
"""

from __future__ import annotations

from types import ModuleType


def celery_worker() -> ModuleType:
    """The Celery app module :mod:`knights_tour.worker` (``app``, ``use_redis``, task names)."""
    from knights_tour import worker  # the layer's lazy import of Celery

    return worker


def queue_lists(queue: str) -> list[str]:
    """The Redis lists that hold ``queue``'s messages: kombu's Redis transport keeps one list
    per priority step (the queue's own name for priority 0)."""
    from kombu.transport.redis import PRIORITY_STEPS, Channel  # the layer's lazy kombu import

    return [queue] + [f"{queue}{Channel.sep}{p}" for p in PRIORITY_STEPS if p]


__all__ = ["celery_worker", "queue_lists"]
