"""Work lost with a worker, found in the leases (redis-py only): the items claimed by a process
whose lease is gone (:func:`find_orphans`), the items nobody claimed (:func:`find_unclaimed`),
marking them re-sent atomically (:func:`take_for_resend`), taking the unrecorded items of a unit
being resumed (:func:`take_for_resume`) and clearing the bookkeeping of stored items
(:func:`finish`). The claims themselves are :mod:`knights_tour.worker.leases`; who holds
what now, :mod:`knights_tour.worker.holders`; when to re-send, :mod:`knights_tour.worker.recovery`.

An item is **orphaned** when it has no result and the token that claimed it has no lease any
more: :func:`find_orphans` groups the ``started`` entries by token and looks each distinct token
up once, and :func:`take_for_resend` marks the orphans re-sent in one script call per
:data:`SCRIPT_BATCH` items, so several recovering processes re-send an item once. How a death is
blamed on the items of a plain or careful chunk: :mod:`knights_tour.worker.leases`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis

from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.worker.holders import live, owners
from knights_tour.worker.ledger import Ledger, text

SCRIPT_BATCH = 1000
"""Items per script call when a list of any length is handed to a script (Lua's ``unpack``
has a limit of a few thousand values)."""

_RESEND_LUA = """
local items = {}
for i = 5, #ARGV do items[#items + 1] = ARGV[i] end
local done = redis.call('HMGET', KEYS[1], unpack(items))
local owner = redis.call('HMGET', KEYS[2], unpack(items))
local requeued = redis.call('HMGET', KEYS[3], unpack(items))
local deaths = redis.call('HMGET', KEYS[4], unpack(items))
local now, grace, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
local live, out, marks = {}, {}, {}
for i, item in ipairs(items) do
  local lost = not done[i] and (not requeued[i] or now - tonumber(requeued[i]) > grace)
  local mode = nil
  if lost and owner[i] then
    local tok
    tok, mode = string.match(owner[i], '^([^|]*)|([^|]*)')
    if live[tok] == nil then live[tok] = redis.call('EXISTS', ARGV[3] .. tok) == 1 end
    lost = not live[tok]
  end
  if lost then
    out[#out + 1] = item
    marks[#marks + 1] = item
    marks[#marks + 1] = ARGV[1]
    local n = tonumber(deaths[i] or '0')
    if mode == 'r' then
      redis.call('HSET', KEYS[4], item, n + 1)
    elseif mode == 'p' then
      redis.call('HSET', KEYS[4], item, math.max(n, math.min(n + 1, cap - 1)))
    end
  end
end
if #out > 0 then
  redis.call('HDEL', KEYS[2], unpack(out))
  redis.call('HSET', KEYS[3], unpack(marks))
end
return out
"""
# KEYS: done, started, requeued, attempts; ARGV: now (unix s), grace (s), lease key prefix,
# the cap on deaths (KT_MAX_ATTEMPTS), item keys. Marks re-sent (and returns) the items with no
# result, not re-sent within the grace period, and either unclaimed or claimed by a token whose
# lease is gone. A death is blamed on the started item of a careful chunk ('r'), and on every
# item of a plain chunk ('p'), but never up to the cap (an entry, even 0, makes the next claim
# careful); an item a careful chunk had not started ('c') is not blamed.


_RESUME_LUA = """
local items = {}
for i = 4, #ARGV do items[#items + 1] = ARGV[i] end
local done = redis.call('HMGET', KEYS[1], unpack(items))
local owner = redis.call('HMGET', KEYS[2], unpack(items))
local requeued = redis.call('HMGET', KEYS[3], unpack(items))
local now, grace = tonumber(ARGV[1]), tonumber(ARGV[2])
local live, out, marks, freed = {}, {}, {}, {}
for i, item in ipairs(items) do
  local send = not done[i]
  if send and owner[i] then
    local tok = string.match(owner[i], '^[^|]*')
    if live[tok] == nil then live[tok] = redis.call('EXISTS', ARGV[3] .. tok) == 1 end
    send = not live[tok]
    if send then freed[#freed + 1] = item end
  elseif send and requeued[i] and grace >= 0 then
    send = now - tonumber(requeued[i]) > grace
  end
  if send then
    out[#out + 1] = item
    marks[#marks + 1] = item
    marks[#marks + 1] = ARGV[1]
  end
end
if #freed > 0 then
  redis.call('HDEL', KEYS[2], unpack(freed))
  redis.call('HDEL', KEYS[4], unpack(freed))
end
if #out > 0 then redis.call('HSET', KEYS[3], unpack(marks)) end
return out
"""
# KEYS: done, started, requeued, attempts; ARGV: now (unix s), grace (s; negative: re-send
# marks are ignored), lease key prefix, item keys. Takes (marks re-sent now, and returns) the
# items with no result that are unclaimed or claimed by a token whose lease is gone, unless
# re-sent within the grace period; a lost claim is dropped with its deaths (no death blamed).
# Items held by a live token are left to it.


def finish(r: redis.Redis, led: Ledger, item_keys: Sequence[str]) -> None:
    """Clear the lease bookkeeping (started, attempts, requeued) of items whose results are
    stored by a path that does not clear it itself (count partials).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if item_keys:
        pipe = r.pipeline(transaction=False)
        for name in (led.started, led.attempts, led.requeued):
            pipe.hdel(name, *item_keys)
        pipe.execute()


def _grace(requeue_grace_s: float | None, now: float | None) -> tuple[float, float]:
    """The re-send grace period (default ``KT_VISIBILITY_TIMEOUT_S``) and the time now."""
    if requeue_grace_s is None:
        requeue_grace_s = float(get_settings().visibility_timeout_s)
    return requeue_grace_s, (time.time() if now is None else now)


def find_orphans(
    r: redis.Redis, led: Ledger, requeue_grace_s: float | None = None, now: float | None = None
) -> list[str]:
    """Items lost with their worker: claimed by a token whose lease is gone, no result.

    The ``started`` entries are grouped by token and each distinct token is looked up once, so
    the cost follows the items in flight and the processes holding them, not the unit's size.
    Bookkeeping left by a worker killed between storing a result and tidying is removed.

    Parameters
    ----------
    requeue_grace_s : float, optional
        An item re-sent less than this many seconds ago is left alone (its message may still
        be waiting in the queue); default ``KT_VISIBILITY_TIMEOUT_S``.

    Returns
    -------
    list of str
        Sorted item keys.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    grace, now = _grace(requeue_grace_s, now)
    found = owners(r, led)
    if not found:
        return []
    alive = live(r, found.values())
    dead = sorted(k for k, t in found.items() if not alive[t])
    if not dead:
        return []
    pipe = r.pipeline(transaction=False)
    pipe.hmget(led.done, dead)
    pipe.hmget(led.requeued, dead)
    done, requeued = pipe.execute()
    stale = [k for k, d in zip(dead, done, strict=True) if d is not None]
    if stale:
        finish(r, led, stale)
    return [
        k
        for k, d, q in zip(dead, done, requeued, strict=True)
        if d is None and (q is None or now - float(text(q)) > grace)
    ]


def take_for_resend(
    r: redis.Redis, led: Ledger, candidates: Sequence[str], requeue_grace_s: float | None = None
) -> list[tuple[str, Any]]:
    """Mark for re-sending those of ``candidates`` that still have no result, were not re-sent
    within the grace period, and are unclaimed or claimed by a token whose lease is gone -
    atomically (so a job recorded or claimed a moment ago is not re-sent, and several recovering
    processes re-send it once). A death is blamed on each claimed one
    (:mod:`knights_tour.worker.leases`).

    Returns
    -------
    list of (str, str)
        ``(item key, item JSON)`` of the items marked, for the caller to send.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    grace, now = _grace(requeue_grace_s, None)
    marked = _run_in_parts(
        r,
        _RESEND_LUA,
        led,
        candidates,
        f"{now:.3f}",
        grace,
        keys.lease_prefix(),
        int(get_settings().max_attempts),
    )
    if not marked:
        return []
    raw = r.hmget(led.items, marked)
    return [(k, text(v)) for k, v in zip(marked, raw, strict=True) if v is not None]


def _run_in_parts(
    r: redis.Redis, script: str, led: Ledger, candidates: Sequence[str], *args: Any
) -> list[str]:
    """Run ``script`` (KEYS: the ledger's done, started, requeued, attempts; ARGV: ``args``,
    then item keys) over ``candidates``, :data:`SCRIPT_BATCH` items per call; the item keys
    its calls returned, in order."""
    out: list[str] = []
    for i in range(0, len(candidates), SCRIPT_BATCH):
        part = list(candidates[i : i + SCRIPT_BATCH])
        reply = r.eval(script, 4, led.done, led.started, led.requeued, led.attempts, *args, *part)
        out += [text(k) for k in reply or []]
    return out


def take_for_resume(
    r: redis.Redis,
    led: Ledger,
    candidates: Sequence[str],
    honour_resends: bool = True,
    requeue_grace_s: float | None = None,
) -> list[str]:
    """Take for sending, on a resume, those of ``candidates`` that have no result and that no
    live process holds; atomically, :data:`SCRIPT_BATCH` items per script call.

    A resume is a fresh start, not a worker death: an item claimed by a token whose lease is
    gone (an orphan) loses its ``started`` entry and its ``attempts`` (deaths) entry instead
    of being blamed. Every item taken is marked re-sent now, so a recovery pass running at the
    same moment (:func:`take_for_resend`, :func:`find_unclaimed`) leaves it alone for the
    grace period: recovery and resume cannot both send it. An item held by a live lease is
    not taken (its process runs it now, and recovery re-sends it if that process dies).

    Parameters
    ----------
    candidates : sequence of str
        Item keys, e.g. the unit's unrecorded items that no queued message carries.
    honour_resends : bool
        Leave alone an unclaimed item re-sent within the grace period (its message may still
        be queued). False when every message of the unit was just dropped (a cancelled unit).
    requeue_grace_s : float, optional
        Default ``KT_VISIBILITY_TIMEOUT_S``.

    Returns
    -------
    list of str
        The keys taken, in the order given, for the caller to send.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    grace, now = _grace(requeue_grace_s, None)
    return _run_in_parts(
        r,
        _RESUME_LUA,
        led,
        candidates,
        f"{now:.3f}",
        grace if honour_resends else -1,
        keys.lease_prefix(),
    )


def find_unclaimed(
    r: redis.Redis, led: Ledger, requeue_grace_s: float | None = None, now: float | None = None
) -> list[str]:
    """Items of ``led`` with no result that no task has claimed (and not re-sent lately);
    of a count's, only those a client sent (:func:`knights_tour.worker.ledger.mark_sent`: a
    DP count holds its classes back until their trunk's layer is kept).

    Normally these are simply still queued. They are lost only if nothing carries them any
    more - e.g. a message taken off the queue by a worker that died (or lost Redis) before
    its task started; the caller decides that from the queue being empty and no item of the
    unit being held for a while (:func:`knights_tour.worker.recovery.recover`).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    grace, now = _grace(requeue_grace_s, now)
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(led.items)
    pipe.hkeys(led.done)
    pipe.hkeys(led.started)
    pipe.hgetall(led.requeued)
    if led.sent is not None:
        pipe.smembers(led.sent)
    items, done, started, requeued, *sent = pipe.execute()
    skip = {text(k) for k in done} | {text(k) for k in started}
    skip |= {text(k) for k, v in requeued.items() if now - float(text(v)) <= grace}
    found = (text(j) for j in items)
    if sent:
        was_sent = {text(k) for k in sent[0]}
        found = (k for k in found if k in was_sent)
    return sorted(k for k in found if k not in skip)


def mark_requeued(r: redis.Redis, led: Ledger, item_keys: Sequence[str]) -> None:
    """Note that ``item_keys`` were just put back on the queue (e.g. a soft-time-limit
    hand-off), so recovery leaves them alone for the re-send grace period.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if item_keys:
        now = f"{time.time():.3f}"
        r.hset(led.requeued, mapping={k: now for k in item_keys})


__all__ = [
    "SCRIPT_BATCH",
    "finish",
    "find_orphans",
    "take_for_resend",
    "take_for_resume",
    "find_unclaimed",
    "mark_requeued",
]
