"""Malformed queue messages set aside by the workers (the dead-letter list): one JSON entry per
message, newest first, at most :data:`KEEP` of them (:func:`knights_tour.store.keys.dead_letters`).

A worker that takes a message it cannot run - not JSON, a body that is not valid base64, an
unknown task, arguments of the wrong shape - acknowledges it and keeps it here, with why, instead
of crashing on it (:mod:`knights_tour.worker.transport`, :mod:`knights_tour.worker.celery`);
``ktour status`` counts them and shows the latest, ``ktour dead-letters`` lists or clears them.
An entry is read back as bytes and decoded here, so one that is not the JSON :func:`entry` writes
(written by hand, damaged, not even UTF-8) is shown as corrupt, never fails a reader.
redis-py only.
"""

from __future__ import annotations

import json
import time
from typing import Any, NotRequired, TypedDict

import redis
from redis.client import NEVER_DECODE

from knights_tour.store import keys

KEEP = 1000
"""Entries kept in the list; older ones are dropped as new ones come (a flood of bad messages
must not fill Redis)."""

MESSAGE_CHARS = 16384
"""At most this many characters of a message are kept (its start)."""


class DeadLetter(TypedDict):
    """One entry read back (:func:`parse`)."""

    at: float | None
    """Unix seconds it was set aside; None for a corrupt entry."""
    reason: str | None
    message: str
    """The message's text (its first :data:`MESSAGE_CHARS` characters)."""
    corrupt: NotRequired[bool]
    """True, only for an entry that is not the JSON :func:`entry` writes."""


class DeadLetters(TypedDict):
    """The list (:func:`listing`): its length and the newest entries asked for."""

    count: int
    entries: list[DeadLetter]


class DeadLetterSummary(TypedDict):
    """What a status shows of the list (:func:`summary`)."""

    count: int
    latest: DeadLetter | None


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


def parse(raw: bytes | str) -> DeadLetter:
    """One stored entry as ``{"at": unix s, "reason": str, "message": str}``; an entry that is
    not the JSON object :func:`entry` writes is ``{"at": None, "reason": None, "message": its
    text (bytes that are not UTF-8 replaced), "corrupt": True}``."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        item = json.loads(text)
    except ValueError:
        item = None
    if (
        isinstance(item, dict)
        and isinstance(item.get("at"), int | float)
        and not isinstance(item["at"], bool)
        and isinstance(item.get("reason"), str)
        and isinstance(item.get("message"), str)
    ):
        return {"at": item["at"], "reason": item["reason"], "message": item["message"]}
    return {"at": None, "reason": None, "message": text, "corrupt": True}


def listing(r: redis.Redis, limit: int | None = None) -> DeadLetters:
    """``{"count": entries in the list, "entries": the newest ``limit`` of them (all for
    None), newest first, each :func:`parse`d}``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    knights_tour.errors.CorruptKeyError
        If the key holds another type (the project's client,
        :func:`~knights_tour.store.connection.connect`).
    """
    pipe = r.pipeline(transaction=False)
    pipe.llen(keys.dead_letters())
    stop = -1 if limit is None else limit - 1
    pipe.execute_command("LRANGE", keys.dead_letters(), 0, stop, **{NEVER_DECODE: True})
    count, raws = pipe.execute()
    return {"count": int(count or 0), "entries": [parse(raw) for raw in raws or ()]}


def summary(r: redis.Redis) -> DeadLetterSummary:
    """``{"count": entries in the list, "latest": the newest entry (:func:`parse`), or None}``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    view = listing(r, 1)
    return {"count": view["count"], "latest": view["entries"][0] if view["entries"] else None}


_CLEAR = """
local n = redis.pcall('LLEN', KEYS[1])
if type(n) == 'table' then
  return n
end
redis.call('DEL', KEYS[1])
return n
"""
"""Count and delete the list in one step (an entry a worker adds meanwhile is either counted
and removed or kept); a key of another type is left as it is, its error reply returned."""


def clear(r: redis.Redis) -> int:
    """Empty the list; returns how many entries it held.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    knights_tour.errors.StorageFullError
        If Redis refuses writes.
    knights_tour.errors.CorruptKeyError
        If the key holds another type (the project's client): it is left as it is.
    """
    return int(r.eval(_CLEAR, 1, keys.dead_letters()) or 0)


__all__ = [
    "DeadLetter",
    "DeadLetters",
    "DeadLetterSummary",
    "KEEP",
    "MESSAGE_CHARS",
    "entry",
    "park",
    "parse",
    "listing",
    "summary",
    "clear",
]
