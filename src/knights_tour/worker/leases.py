"""Leases in Redis: which worker process holds which job, and what was lost with a dead one
(redis-py only; the worker's side of it - the heartbeat, the token, when to exit - is
:mod:`knights_tour.worker.lease_keeper`).

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
thread, once per period for the whole process, not per job; each opening and renewal also
notes in the registry of workers (:func:`knights_tour.store.keys.workers`) when the lease runs
out, so that ``ktour status`` can tell how long a server has had no live worker. A task claims
its whole chunk in one script call (:func:`claim`): each job not recorded and not held by
another live token is entered in the unit's ``started`` hash under this process's token. The
records of the chunk are stored, and their ``started`` entries removed, one script call per
flush (:func:`knights_tour.batches.saving.save_records`).

This module is the worker's side: opening, renewing, claiming, releasing. Who holds what now
(and the registry read back) is :mod:`knights_tour.worker.holders`; the jobs lost with a dead
process (orphans) and their re-sending, :mod:`knights_tour.worker.orphans`; the ledger's keys
and its active/cancelled sets, :mod:`knights_tour.worker.ledger`.

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
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis

from knights_tour.store import keys
from knights_tour.worker.ledger import Ledger, text
from knights_tour.worker.orphans import SCRIPT_BATCH

CLAIMED, DONE, HELD, CANCELLED = "claimed", "done", "held", "cancelled"
"""Outcomes of a claim, per job: ours now / its record is already stored / another live token
holds it / the batch (count) was cancelled: skip it."""

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
# ARGV: token, lease key prefix, claim (_claim_id), item keys. Returns 'cancelled', 'lapsed'
# (this token's lease is gone: take a new token), or the mode followed by one outcome letter +
# deaths per item.
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


REGISTRY_KEEP_S = 86400
"""A lapsed lease's entry in the registry of workers is dropped this many seconds after it ran
out (when a new lease opens)."""

_OPEN_LUA = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]) / 1000, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
return 1
"""
# KEYS: the lease, the registry of workers; ARGV: lease ms, token, REGISTRY_KEEP_S. Creates the
# lease unless it exists; notes when it runs out (Redis clock) and forgets entries a day old.
# TIME before a write: scripts replicate their effects, not their text (Redis 5 and later).

_RENEW_LUA = """
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return 0 end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[2], tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1]) / 1000,
  ARGV[2])
return 1
"""
# KEYS: the lease, the registry of workers; ARGV: lease ms, token. Extends a live lease only,
# and then notes when it runs out now.


def open_lease(r: redis.Redis, token: str, lease_ms: int) -> bool:
    """Create the lease of a new ``token`` (live for ``lease_ms`` milliseconds) and note it in
    the registry of workers; False if that key exists already (a token is never reused). One
    script call.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    args = (int(lease_ms), token, REGISTRY_KEEP_S)
    return bool(r.eval(_OPEN_LUA, 2, keys.lease(token), keys.workers(), *args))


def renew(r: redis.Redis, token: str, lease_ms: int) -> bool:
    """Extend the lease of ``token`` to ``lease_ms`` from now and note when it runs out in the
    registry of workers; False if it has lapsed (a lapsed lease is never brought back: its jobs
    may have been re-sent). One script call (a PEXPIRE and a ZADD).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    args = (int(lease_ms), token)
    return bool(r.eval(_RENEW_LUA, 2, keys.lease(token), keys.workers(), *args))


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
    reply = [
        text(x)
        for x in r.eval(
            _CLAIM_LUA,
            6,
            led.head,
            led.done,
            led.started,
            led.attempts,
            led.requeued,
            keys.lease(token),
            token,
            keys.lease_prefix(),
            claim_id,
            *item_keys,
        )
    ]
    if reply[0] == "cancelled":
        return Claim(cancelled=True)
    if reply[0] == "lapsed":
        return Claim(lapsed=True)
    out = Claim(careful=reply[0] == "careful", claim=claim_id)
    for k, code in zip(item_keys, reply[1:], strict=True):
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
        part = list(item_keys[i : i + SCRIPT_BATCH])
        dropped += int(r.eval(_RELEASE_LUA, 1, led.started, token, *part))
    return dropped


def end_leases_of(r: redis.Redis, host: str, pids: Sequence[int]) -> list[str]:
    """End at once the leases of the worker processes ``pids`` of ``host`` (tokens
    ``host:pid:random`` or ``node@host:pid:random`` found in the registry of workers), for
    processes the caller has just
    killed and reaped: what they held is then lost now (recovery, or a resume, takes it)
    rather than when their leases would have run out. Never for a process that may still run:
    it would lose its claims. Returns the tokens whose leases were ended.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    wanted = {str(pid) for pid in pids}
    if not wanted:
        return []

    def of_ours(token: str) -> bool:
        name, pid = (token.rsplit(":", 2) + ["", ""])[:2]
        return pid in wanted and name.rpartition("@")[2] == host

    tokens = [t for t in (text(x) for x in r.zrange(keys.workers(), 0, -1)) if of_ours(t)]
    ended = [t for t in tokens if r.delete(keys.lease(t))]
    return ended


__all__ = [
    "CLAIMED",
    "DONE",
    "HELD",
    "CANCELLED",
    "Claim",
    "open_lease",
    "renew",
    "REGISTRY_KEEP_S",
    "claim",
    "begin",
    "release",
    "end_leases_of",
]
