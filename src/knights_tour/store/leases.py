"""Leases in Redis: which worker process holds which job, and what was lost with a dead one
(redis-py only; the worker's side of it - the heartbeat, the token, when to exit - is
:mod:`knights_tour.service.lease_keeper`).

What Celery with a Redis broker does on its own (tested in ``tests/fault``):

* pool child killed (SIGKILL, OOM): with ``task_acks_late`` and ``task_reject_on_worker_lost``
  the worker main process rejects the message and it goes back to the queue at once;
* worker main process killed (or the machine lost): the message stays in kombu's ``unacked``
  hash and is restored only after the ``visibility_timeout`` (ours: 420 s; Celery's default is
  one hour), see celery/celery#4984 and kombu's ``QoS.restore_visible``. It cannot be made
  short, because a message not acknowledged within the visibility timeout is handed out again
  even if its task is still running.

So each worker process holds one **lease** in Redis (:func:`knights_tour.store.keys.lease`, a
string with a TTL of ``KT_LEASE_S`` named by the process's token) and renews it from a heartbeat
thread, once per period for the whole process, not per job. A task claims its whole chunk in
one script call (:func:`claim`): each job not recorded and not held by another live token is
entered in the unit's ``started`` hash under this process's token. The records of the chunk
are stored, and their ``started`` entries removed, one script call per flush
(:func:`knights_tour.store.saving.save_records`). A job is **orphaned** when it has no record
and the token that claimed it has no lease any more: :func:`find_orphans` groups the ``started``
entries by token and looks each distinct token up once, and :func:`take_for_resend` marks the
orphans re-sent atomically (so several recovering processes re-send a job once).

A lease that lapsed is never written again (:func:`renew` only extends a live key): a process
that was stalled past its lease finds out when it renews, takes a new token, and claims what is
left of its chunk again; what another task has taken or recorded meanwhile it skips.

**Worker deaths.** A death in a plain chunk is blamed on its unrecorded jobs without knowing
which one was running: when such an orphan is re-sent, its ``attempts`` entry (deaths) goes up
by one, but never to ``KT_MAX_ATTEMPTS`` this way. A chunk with a job that has an entry is
claimed in *careful* mode (``started`` mode ``c``): each job is marked started (mode ``r``)
before it runs and its record is stored right after, and only the started job
is blamed for a death of a careful chunk. So only a job that really kills its worker reaches
``KT_MAX_ATTEMPTS`` deaths (and then gets a ``WorkerLost`` error record instead of killing
workers forever); the others are blamed once at most.

Claims, re-sends and record stores are Lua scripts: atomic, so two deliveries of one job never
run it at the same time unless a lease lapsed, and a job's first stored record is kept.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.ledger import (Ledger, activate, active, cancelled, deactivate,
                                       finished, missing, text)

CLAIMED, DONE, HELD, CANCELLED = "claimed", "done", "held", "cancelled"
"""Outcomes of a claim, per job: ours now / its record is already stored / another live token
holds it / the batch (count) was cancelled: skip it."""

SCRIPT_BATCH = 1000
"""Items per script call when a list of any length is handed to a script (Lua's ``unpack``
has a limit of a few thousand values)."""

_OUTCOME = {"c": CLAIMED, "d": DONE, "h": HELD}

_CLAIM_LUA = """
if redis.call('HGET', KEYS[1], 'state') == 'cancelled' then return {'cancelled'} end
if redis.call('EXISTS', KEYS[6]) == 0 then return {'lapsed'} end
local items = {}
for i = 4, #ARGV do items[#items + 1] = ARGV[i] end
local done = redis.call('HMGET', KEYS[2], unpack(items))
local owner = redis.call('HMGET', KEYS[3], unpack(items))
local deaths = {}
if redis.call('EXISTS', KEYS[4]) == 1 then deaths = redis.call('HMGET', KEYS[4], unpack(items)) end
local live, out, taken, tidy = {}, {}, {}, {}
local careful = false
for i, item in ipairs(items) do
  local o = 'c'
  if done[i] then
    o = 'd'
    tidy[#tidy + 1] = item
  elseif owner[i] then
    local tok = string.match(owner[i], '^[^|]*')
    if tok ~= ARGV[1] then
      if live[tok] == nil then live[tok] = redis.call('EXISTS', ARGV[2] .. tok) == 1 end
      if live[tok] then o = 'h' end
    end
  end
  if o == 'c' then
    taken[#taken + 1] = item
    if deaths[i] then careful = true end
  end
  out[i + 1] = o .. (deaths[i] or '0')
end
if #taken > 0 then
  local mark = ARGV[1] .. '|p|' .. ARGV[3]
  if careful then mark = ARGV[1] .. '|c|' .. ARGV[3] end
  local args = {}
  for _, item in ipairs(taken) do
    args[#args + 1] = item
    args[#args + 1] = mark
  end
  redis.call('HSET', KEYS[3], unpack(args))
  if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('HDEL', KEYS[5], unpack(taken)) end
end
if #tidy > 0 then
  redis.call('HDEL', KEYS[3], unpack(tidy))
  redis.call('HDEL', KEYS[4], unpack(tidy))
  redis.call('HDEL', KEYS[5], unpack(tidy))
end
if careful then out[1] = 'careful' else out[1] = 'plain' end
return out
"""
# KEYS: head (state field), done, started, attempts, requeued, this token's lease;
# ARGV: token, lease key prefix, claim (see _started), item keys. Returns 'cancelled', 'lapsed' (this token's lease is
# gone: take a new token), or the mode followed by one outcome letter + deaths per item.
# A recorded item's leftover bookkeeping (a worker killed between storing and tidying) is
# removed on the way.

_RELEASE_LUA = """
local owner = redis.call('HMGET', KEYS[1], unpack(ARGV, 2))
local mine = {}
for i = 2, #ARGV do
  local o = owner[i - 1]
  if o and string.match(o, '^[^|]*') == ARGV[1] then mine[#mine + 1] = ARGV[i] end
end
if #mine > 0 then redis.call('HDEL', KEYS[1], unpack(mine)) end
return #mine
"""
# KEYS: started; ARGV: token, item keys. Drops the entries this token owns.

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


@dataclass
class Claim:
    """What :func:`claim` got for a chunk.

    Attributes
    ----------
    lapsed : bool
        This token's lease is gone (the process was stalled or Redis lost it): nothing was
        claimed; take a new token and claim again.
    cancelled : bool
        The batch (count) was cancelled: nothing was claimed.
    careful : bool
        A claimed job has had a worker die on it: run the chunk one job at a time, each marked
        started (:func:`begin`) and stored before the next.
    outcomes : dict
        item key -> :data:`CLAIMED`, :data:`DONE` or :data:`HELD`.
    deaths : dict
        item key -> worker deaths blamed on it so far (0 normally).
    claim : str
        What identifies this claim in the ``started`` values (:func:`_claim_id`).
    """

    lapsed: bool = False
    cancelled: bool = False
    careful: bool = False
    claim: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)
    deaths: dict[str, int] = field(default_factory=dict)

    def claimed(self) -> list[str]:
        """The keys that are ours now, in the order given."""
        return [k for k, o in self.outcomes.items() if o == CLAIMED]


def _claim_id() -> str:
    """A new claim's id in ``started`` values: unix time (ms) and 32 random hex digits. Besides
    telling claims apart, it keeps every value longer than Redis's compact-hash limit
    (``hash-max-ziplist-value`` / ``hash-max-listpack-value``, 64 bytes by default), so the
    ``started`` hash is a real hash table from its first entry: a chunk claims and clears
    hundreds of fields at once, which in the compact encoding costs a scan of the whole hash
    per field."""
    return f"{time.time():.3f}:{uuid.uuid4().hex}"


def open_lease(r: redis.Redis, token: str, lease_ms: int) -> bool:
    """Create the lease of a new ``token`` (live for ``lease_ms`` milliseconds); False if that
    key exists already (a token is never reused).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    return bool(r.set(keys.lease(token), "1", nx=True, px=int(lease_ms)))


def renew(r: redis.Redis, token: str, lease_ms: int) -> bool:
    """Extend the lease of ``token`` to ``lease_ms`` from now; False if it has lapsed (a lapsed
    lease is never brought back: its jobs may have been re-sent). One PEXPIRE.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    return bool(r.pexpire(keys.lease(token), int(lease_ms)))


def claim(r: redis.Redis, led: Ledger, token: str, item_keys: Sequence[str]) -> Claim:
    """Claim the items ``item_keys`` of ``led`` for ``token``, in one script call: an item with
    a result is :data:`DONE`, one claimed by another token whose lease is live is
    :data:`HELD`, any other is :data:`CLAIMED` (entered in ``started`` under ``token``).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if not item_keys:
        return Claim()
    if len(item_keys) > SCRIPT_BATCH:
        raise ValueError(f"at most {SCRIPT_BATCH} items per claim, got {len(item_keys)}")
    claim_id = _claim_id()
    reply = [text(x) for x in r.eval(
        _CLAIM_LUA, 6, led.head, led.done, led.started, led.attempts, led.requeued,
        keys.lease(token), token, keys.lease_prefix(), claim_id, *item_keys)]
    if reply[0] == "cancelled":
        return Claim(cancelled=True)
    if reply[0] == "lapsed":
        return Claim(lapsed=True)
    out = Claim(careful=reply[0] == "careful", claim=claim_id)
    for k, code in zip(item_keys, reply[1:]):
        out.outcomes[k] = _OUTCOME[code[0]]
        out.deaths[k] = int(code[1:])
    return out


def begin(r: redis.Redis, led: Ledger, token: str, item_key: str, claim_id: str = "") -> None:
    """Mark ``item_key`` started by ``token`` (careful mode: a death of this process is then
    blamed on this item only); ``claim_id``: the :attr:`Claim.claim` it was claimed by. One
    HSET.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    r.hset(led.started, item_key, f"{token}|r|{claim_id or _claim_id()}")


def release(r: redis.Redis, led: Ledger, token: str, item_keys: Sequence[str]) -> int:
    """Give up ``token``'s claims on ``item_keys`` (not run: a hand-off, an error), so another
    task may claim them at once; returns how many were ours.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    dropped = 0
    for i in range(0, len(item_keys), SCRIPT_BATCH):
        part = list(item_keys[i:i + SCRIPT_BATCH])
        dropped += int(r.eval(_RELEASE_LUA, 1, led.started, token, *part))
    return dropped


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


def _live(r: redis.Redis, tokens: Iterable[str]) -> dict[str, bool]:
    """token -> its lease exists (one EXISTS per distinct token, pipelined)."""
    tokens = sorted(set(tokens))
    if not tokens:
        return {}
    pipe = r.pipeline(transaction=False)
    for t in tokens:
        pipe.exists(keys.lease(t))
    return {t: bool(x) for t, x in zip(tokens, pipe.execute())}


def _owners(r: redis.Redis, led: Ledger) -> dict[str, str]:
    """item key -> the token that claimed it (mode suffix stripped)."""
    return {text(k): text(v).split("|", 1)[0] for k, v in r.hgetall(led.started).items()}


def holders(r: redis.Redis, led: Ledger) -> dict[str, str]:
    """item key -> token, for the items of ``led`` claimed by a process whose lease is live."""
    owners = _owners(r, led)
    live = _live(r, owners.values())
    return {k: t for k, t in owners.items() if live[t]}


def running(r: redis.Redis, led: Ledger) -> list[str]:
    """Keys of the items of ``led`` held by a live process now, sorted."""
    return sorted(holders(r, led))


def _grace(requeue_grace_s: float | None, now: float | None) -> tuple[float, float]:
    """The re-send grace period (default ``KT_VISIBILITY_TIMEOUT_S``) and the time now."""
    if requeue_grace_s is None:
        requeue_grace_s = float(get_settings().visibility_timeout_s)
    return requeue_grace_s, (time.time() if now is None else now)


def find_orphans(r: redis.Redis, led: Ledger, requeue_grace_s: float | None = None,
                 now: float | None = None) -> list[str]:
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
    owners = _owners(r, led)
    if not owners:
        return []
    live = _live(r, owners.values())
    dead = sorted(k for k, t in owners.items() if not live[t])
    if not dead:
        return []
    pipe = r.pipeline(transaction=False)
    pipe.hmget(led.done, dead)
    pipe.hmget(led.requeued, dead)
    done, requeued = pipe.execute()
    stale = [k for k, d in zip(dead, done) if d is not None]
    if stale:
        finish(r, led, stale)
    return [k for k, d, q in zip(dead, done, requeued)
            if d is None and (q is None or now - float(text(q)) > grace)]


def take_for_resend(r: redis.Redis, led: Ledger, candidates: Sequence[str],
                    requeue_grace_s: float | None = None) -> list[tuple[str, Any]]:
    """Mark for re-sending those of ``candidates`` that still have no result, were not re-sent
    within the grace period, and are unclaimed or claimed by a token whose lease is gone - atomically
    (so a job recorded or claimed a moment ago is not re-sent, and several recovering processes
    re-send it once). A death is blamed on each claimed one (see the module docstring).

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
    marked: list[str] = []
    for i in range(0, len(candidates), SCRIPT_BATCH):
        part = list(candidates[i:i + SCRIPT_BATCH])
        marked += [text(k) for k in r.eval(
            _RESEND_LUA, 4, led.done, led.started, led.requeued, led.attempts,
            f"{now:.3f}", grace, keys.lease_prefix(), int(get_settings().max_attempts),
            *part) or []]
    if not marked:
        return []
    raw = r.hmget(led.items, marked)
    return [(k, text(v)) for k, v in zip(marked, raw) if v is not None]


def find_unclaimed(r: redis.Redis, led: Ledger, requeue_grace_s: float | None = None,
                   now: float | None = None) -> list[str]:
    """Items of ``led`` with no result that no task has claimed (and not re-sent lately).

    Normally these are simply still queued. They are lost only if nothing carries them any
    more - e.g. a message taken off the queue by a worker that died (or lost Redis) before
    its task started; the caller decides that from the queue being empty and no item of the
    unit being held for a while (:func:`knights_tour.service.recovery.recover`).

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
    items, done, started, requeued = pipe.execute()
    skip = {text(k) for k in done} | {text(k) for k in started}
    skip |= {text(k) for k, v in requeued.items() if now - float(text(v)) <= grace}
    return sorted(k for k in (text(j) for j in items) if k not in skip)


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
    "CLAIMED", "DONE", "HELD", "CANCELLED", "SCRIPT_BATCH", "Claim", "Ledger", "open_lease",
    "renew", "claim", "begin", "release", "finish", "holders", "running", "find_orphans",
    "take_for_resend", "find_unclaimed", "mark_requeued", "activate", "deactivate", "active",
    "cancelled", "finished", "missing",
]
