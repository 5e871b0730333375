"""Malformed queue messages set aside by the workers (the dead-letter list): one JSON entry per
message, newest first, at most :data:`KEEP` of them (:func:`knights_tour.store.keys.dead_letters`).

A worker that takes a message it cannot run - not JSON, a body that is not valid base64, an
unknown task, arguments of the wrong shape - acknowledges it and keeps it here, with why, instead
of crashing on it (:mod:`knights_tour.broker_transport`, :mod:`knights_tour.worker`);
``ktour status`` counts them and shows the latest. redis-py only.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from knights_tour.store import keys

KEEP = 1000
"""Entries kept in the list; older ones are dropped as new ones come (a flood of bad messages
must not fill Redis)."""

MESSAGE_CHARS = 16384
"""At most this many characters of a message are kept (its start)."""


def entry(reason: str, message: object, at: float | None = None) -> str:
    """The JSON entry for ``message`` (raw text, bytes or a decoded envelope) set aside because
    of ``reason``: ``{"at": unix s, "reason": str, "message": str}``."""
    if isinstance(message, bytes):
        text = message.decode("utf-8", errors="replace")
    elif isinstance(message, str):
        text = message
    else:
        text = json.dumps(message, default=repr)
    return json.dumps(
        {"at": time.time() if at is None else at, "reason": reason, "message": text[:MESSAGE_CHARS]}
    )


def park(r: Any, reason: str, message: object) -> None:
    """Add ``message`` (see :func:`entry`) to the dead-letter list and cut the list to
    :data:`KEEP` entries, in one transaction. ``r``: any redis-py client (a worker passes the
    broker's).

    Raises
    ------
    redis.RedisError
        If Redis is unreachable or refuses the write.
    """
    pipe = r.pipeline(transaction=True)
    pipe.lpush(keys.dead_letters(), entry(reason, message))
    pipe.ltrim(keys.dead_letters(), 0, KEEP - 1)
    pipe.execute()


def summary(r: redis.Redis) -> dict[str, Any]:
    """``{"count": entries in the list, "latest": the newest entry as a dict, or None}``; an
    entry that is not JSON shows as its text.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    pipe = r.pipeline(transaction=False)
    pipe.llen(keys.dead_letters())
    pipe.lindex(keys.dead_letters(), 0)
    count, latest = pipe.execute()
    if latest is None:
        return {"count": int(count or 0), "latest": None}
    try:
        item = json.loads(latest)
    except ValueError:
        item = None
    if not isinstance(item, dict):
        item = {"at": None, "reason": None, "message": str(latest)}
    return {"count": int(count or 0), "latest": item}


__all__ = ["KEEP", "MESSAGE_CHARS", "entry", "park", "summary"]
