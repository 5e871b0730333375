"""Is this Redis safe to keep records and queued jobs in? Its ``maxmemory-policy`` and how
full it is, read once per connection (:func:`check_memory`, called by
:func:`knights_tour.store.connection.connect`).

A Redis that reaches ``maxmemory`` under any policy but ``noeviction`` deletes keys to make
room - records, leases and the broker's queued messages alike - and nothing tells the client:
a batch would wait for jobs that no longer exist, or lose records it had. Under
``noeviction`` a full Redis refuses writes with an error instead, which the project reports.
Managed Redis services often default to ``volatile-lru`` or ``allkeys-lru`` (Redis
documentation, "Key eviction").

A Redis may also refuse writes while it stays reachable: full under ``noeviction`` (``OOM``), a
failed snapshot with ``stop-writes-on-bgsave-error`` (``MISCONF``), a read-only replica
(``READONLY``). :func:`write_refusal` tells such an error from others and
:func:`writes_refused` asks the server whether it refuses writes now. redis-py only.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, TypedDict

import redis

from knights_tour.errors import RedisRefusedError, StorageFullError
from knights_tour.store import keys

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"
"""The only ``maxmemory-policy`` under which Redis never deletes a key to make room."""

FULL_FRACTION = 0.8
"""Warn once when ``used_memory`` passes this fraction of ``maxmemory``."""

WRITE_REFUSALS = ("OOM", "MISCONF", "READONLY")
"""Error codes with which a reachable Redis refuses a write (Redis documentation: the
``maxmemory`` / ``stop-writes-on-bgsave-error`` / ``replica-read-only`` settings)."""

_REFUSAL = re.compile(r"(?:^|-)((?:" + "|".join(WRITE_REFUSALS) + r") .*)")
_CODE_OF = {redis.exceptions.OutOfMemoryError: "OOM", redis.exceptions.ReadOnlyError: "READONLY"}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str, *args: Any) -> bool:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    log.warning(message, *args)
    return True


class MemoryInfo(TypedDict):
    """What :func:`memory_info` reads of a server (None: could not be read)."""

    maxmemory_policy: str | None
    maxmemory: int | None
    """Bytes; 0 for no limit."""
    used_memory: int | None
    """Bytes."""


def memory_info(r: redis.Redis) -> MemoryInfo:
    """``maxmemory_policy``, ``maxmemory`` and ``used_memory`` (bytes) of the server.

    Reads ``INFO memory`` (allowed on managed services that disable ``CONFIG``); falls back to
    ``CONFIG GET maxmemory-policy`` for a server whose INFO lacks the policy. A value that
    cannot be read is None.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    try:
        info = r.info("memory")
    except redis.ResponseError:  # NOPERM for this user, or INFO renamed away
        info = {}
    policy = info.get("maxmemory_policy")
    if policy is None:
        try:
            got = r.config_get("maxmemory-policy")
            policy = got.get("maxmemory-policy") if got else None
        except redis.ResponseError:
            pass
    return {
        "maxmemory_policy": policy.decode() if isinstance(policy, bytes) else policy,
        "maxmemory": info.get("maxmemory"),
        "used_memory": info.get("used_memory"),
    }


def check_memory(r: redis.Redis, where: str, allow_evicting: bool = False) -> MemoryInfo:
    """Refuse a Redis that may evict keys; warn once per process when it is nearly full.

    Parameters
    ----------
    r : redis.Redis
        A connected client.
    where : str
        How to name the server in messages (the URL, password masked).
    allow_evicting : bool
        ``KT_ALLOW_EVICTING_REDIS``: accept an evicting policy (one warning instead).

    Returns
    -------
    MemoryInfo
        :func:`memory_info` of the server.

    Raises
    ------
    RedisRefusedError
        ``Redis at <where> has maxmemory-policy <p>: it may delete records and queued jobs
        when full; set maxmemory-policy noeviction (or KT_ALLOW_EVICTING_REDIS=1 to accept
        the risk)``.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    info = memory_info(r)
    limit, used = info["maxmemory"], info["used_memory"]
    if limit and used is not None and used >= FULL_FRACTION * limit:
        _warn_once(
            f"full:{where}",
            "Redis at %s uses %d%% of its maxmemory (%.1f of %.1f "
            "MiB); when full it refuses writes: raise maxmemory, or delete collected "
            "batches (ktour prune --older-than AGE, ktour forget BATCH)",
            where,
            round(100 * used / limit),
            used / 2**20,
            limit / 2**20,
        )
    policy = info["maxmemory_policy"]
    if policy is None:
        _warn_once(
            f"unknown:{where}",
            "cannot read maxmemory-policy of Redis at %s (no "
            "permission for INFO or CONFIG GET): make sure it is noeviction",
            where,
        )
    elif policy != SAFE_POLICY:
        if not allow_evicting:
            raise RedisRefusedError(
                f"Redis at {where} has maxmemory-policy {policy}: it may delete records and "
                f"queued jobs when full; set maxmemory-policy {SAFE_POLICY} (or "
                f"KT_ALLOW_EVICTING_REDIS=1 to accept the risk)"
            )
        _warn_once(
            f"evicting:{where}",
            "Redis at %s has maxmemory-policy %s (accepted by "
            "KT_ALLOW_EVICTING_REDIS): records and queued jobs may be deleted when it "
            "is full",
            where,
            policy,
        )
    return info


def write_refusal(exc: BaseException) -> str | None:
    """Redis's reason, its code first (e.g. ``OOM command not allowed when used memory >
    'maxmemory'.``), if ``exc`` is a write refused by a reachable Redis (:data:`WRITE_REFUSALS`),
    else None: the one reader of a refusal's reply. Also from inside a script (Redis wraps it
    in ``Error running script``) or a pipeline (redis-py prefixes the command), and from a
    client that is not the store's (kombu's); the store's client raises
    :class:`~knights_tour.errors.StorageFullError` with this reason
    (:func:`knights_tour.store.connection.typed_error`)."""
    if isinstance(exc, StorageFullError):  # the store's client types them already
        return exc.reason
    if not isinstance(exc, redis.ResponseError):
        return None
    text = str(exc.args[0]) if exc.args else ""
    reply = text.split("caused error: ", 1)[-1].strip()  # a pipeline's annotation left out
    for cls, code in _CODE_OF.items():
        if isinstance(exc, cls):  # redis-py strips the code of the errors it maps to a class
            return reply if reply.startswith(code) else f"{code} {reply}"
    found = _REFUSAL.search(reply)
    return found.group(1).strip() if found else None


PROBE_TTL_MS = 1000
"""Lifetime of the key :func:`writes_refused` writes, in milliseconds."""


def writes_refused(r: redis.Redis) -> str | None:
    """Redis's reason if it refuses writes now (:func:`write_refusal`), else None: one tiny
    write (a key of its own with a TTL of :data:`PROBE_TTL_MS`), which a full Redis refuses as
    it refuses a record.

    A user whose ACL forbids that write (a read-only monitoring user) learns nothing: None.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    redis.ResponseError
        For another error.
    """
    try:
        r.set(keys.write_probe(), "1", px=PROBE_TTL_MS)
    except redis.exceptions.NoPermissionError:
        return None
    except redis.ResponseError as exc:
        reason = write_refusal(exc)
        if reason is None:
            raise
        return reason
    return None


__all__ = [
    "MemoryInfo",
    "SAFE_POLICY",
    "FULL_FRACTION",
    "WRITE_REFUSALS",
    "PROBE_TTL_MS",
    "memory_info",
    "check_memory",
    "write_refusal",
    "writes_refused",
]
