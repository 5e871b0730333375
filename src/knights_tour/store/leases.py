"""Job leases and worker-loss recovery: a batch finishes in seconds after a worker dies.

What Celery with a Redis broker does on its own (tested in ``tests/fault``):

* pool child killed (SIGKILL, OOM): with ``task_acks_late`` and ``task_reject_on_worker_lost``
  the worker main process rejects the message and it goes back to the queue at once;
* worker main process killed (or the machine lost): the message stays in kombu's ``unacked``
  hash and is restored only after the ``visibility_timeout`` (ours: 420 s; Celery's default is
  one hour), see celery/celery#4984 and kombu's ``QoS.restore_visible``. It cannot be made
  short, because a message not acknowledged within the visibility timeout is handed out again
  even if its task is still running.

So each job also carries a **lease** in Redis (:func:`knights_tour.store.keys.batch_lease`, a string
with a TTL of ``KT_LEASE_S``) while a task holds it. A heartbeat thread in the pool process
refreshes the leases it holds every third of the lease. A job that was claimed
(:func:`knights_tour.store.keys.batch_started`), has no record, and whose lease has expired was lost
with its worker: :func:`recover_batch` re-sends it. It runs in every waiting ``ktour run`` /
``collect --wait`` (each poll), at the end of each task, and on a timer in every worker's main
process over every active batch and count (:mod:`knights_tour.service.recovery`), so work
heals with or without a waiting client. Count sub-jobs are leased the same way, through their
:class:`~knights_tour.store.ledger.Ledger`; a cancelled batch's jobs are never claimed or
re-sent. A waiting
client also re-sends jobs no task ever claimed once the queue is empty and nothing of the batch
runs (a message lost as Redis restarted). Claims are atomic (a Lua script), so two deliveries
of one job never run it at the same time, and a task that finds the job's record already
stored skips it: a late duplicate delivery costs one Redis round trip. A process stalled past
its lease (the heartbeat could not run) finds out: it does not start a job whose lease it lost,
and a job it finished after the lapse keeps the record stored first
(:func:`knights_tour.store.batches.save_record`). A job whose worker dies
``KT_MAX_ATTEMPTS`` times gets an ``error`` record (``error_type`` ``WorkerLost``) instead of
killing workers forever.

This module uses redis-py only (no Celery); re-sending is a callable given by the caller
(:func:`knights_tour.service.batches.resend_jobs` on the client, the task's own app in a
worker).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from knights_tour.settings import get_settings
from knights_tour.store.ledger import (Ledger, _L, _text, activate, active, cancelled,
                                       deactivate, missing)

log = logging.getLogger(__name__)

CLAIMED, DONE, HELD, CANCELLED = "claimed", "done", "held", "cancelled"
"""Outcomes of :meth:`LeaseKeeper.claim`: ours now / record already stored / a live lease /
the batch (count) was cancelled: skip the job."""


_CLAIM_LUA = """
if redis.call('HGET', KEYS[6], 'state') == 'cancelled' then
  return 'cancelled'
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
  return 'done'
end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
  redis.call('HDEL', KEYS[4], ARGV[1])
  return 'claimed'
end
return 'held'
"""
# KEYS: records, lease, started, requeued, attempts, head (state field); ARGV: job_key, token,
# lease_ms, now
# (a recorded job: tidy bookkeeping left by a worker killed between saving and releasing)

_RENEW_LUA = """
local lost = {}
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then
    redis.call('PEXPIRE', k, ARGV[2])
  else
    table.insert(lost, k)
  end
end
return lost
"""
# KEYS: lease keys held; ARGV: token, lease_ms. Returns the keys that were no longer ours.

_MARK_LUA = """
local out = {}
for i = 3, #KEYS do
  local job = ARGV[i - 1]
  if redis.call('HEXISTS', KEYS[1], job) == 0 and redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('HSET', KEYS[2], job, ARGV[1])
    table.insert(out, job)
  end
end
return out
"""
# KEYS: records, requeued, lease of each candidate; ARGV: now, candidate job keys

_BEGIN_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
"""
# KEYS: lease, attempts; ARGV: token, job_key

_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('HDEL', KEYS[4], ARGV[2])
end
return 1
"""
# KEYS: lease, started, attempts, requeued; ARGV: token, job_key, finished ('1': record stored)


class LeaseKeeper:
    """The leases held by this process, and the heartbeat thread that keeps them alive.

    One per process (:func:`keeper`); safe after ``fork`` (a forked child starts empty).

    Parameters
    ----------
    lease_s : float, optional
        Lease lifetime in seconds (default ``KT_LEASE_S``); refreshed every ``lease_s / 3``.
    """

    def __init__(self, lease_s: float | None = None) -> None:
        self.lease_s = float(lease_s if lease_s is not None else get_settings().lease_s)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._pid = os.getpid()
        self._ppid = os.getppid()
        self._held: dict[str, redis.Redis] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def lease_ms(self) -> int:
        return int(self.lease_s * 1000)

    def held(self) -> list[str]:
        """Lease keys currently held (for tests and logs)."""
        with self._lock:
            return sorted(self._held)

    # -- heartbeat ------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._beat, name="kt-lease-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        interval = self.lease_s / 3.0
        last = time.monotonic()
        while True:
            time.sleep(interval)
            if os.getppid() != self._ppid:
                # Our worker main process died (we are a pool child it left behind): stop
                # renewing, so the leases lapse and the jobs are re-sent. A pool child also
                # exits, before its leases lapse, so it never runs a job a re-sent copy runs.
                if _EXIT_WITH_PARENT:
                    os._exit(70)  # EX_SOFTWARE; nothing of ours is left to flush
                return
            now = time.monotonic()
            if now - last > 2 * interval:
                log.warning("lease heartbeat ran %.2f s late (lease %.1f s): this process or "
                            "Redis was stalled", now - last - interval, self.lease_s)
            last = now
            with self._lock:
                by_client: dict[int, tuple[redis.Redis, list[str]]] = {}
                for key, client in self._held.items():
                    by_client.setdefault(id(client), (client, []))[1].append(key)
            for client, lease_keys in by_client.values():
                try:
                    lost = client.eval(_RENEW_LUA, len(lease_keys), *lease_keys, self.token,
                                       self.lease_ms)
                except redis.RedisError:
                    continue  # Redis away: the lease may lapse; recovery then re-sends
                self._report_lapsed([_text(k) for k in lost or []])

    def _report_lapsed(self, lost: list[str]) -> None:
        """Log (once) and forget the leases found lapsed while still held (released ones are
        not lapses): they are no longer ours to renew."""
        with self._lock:
            lapsed = [k for k in lost if self._held.pop(k, None) is not None]
        for key in lapsed:
            log.warning("lease %s lapsed while its job was still running (no renewal within "
                        "%.1f s): the job may be run a second time", key, self.lease_s)

    # -- claim / release ------------------------------------------------------------------
    def claim(self, r: redis.Redis, batch_id: str | Ledger, job_key: str) -> str:
        """Try to take the lease of ``job_key`` in ``batch_id``.

        Returns
        -------
        str
            :data:`CLAIMED` (ours; kept alive until :meth:`release`), :data:`DONE` (the job's
            record is already stored: skip it), :data:`HELD` (another live task holds it) or
            :data:`CANCELLED` (its batch or count was cancelled: skip it).

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis is unreachable.
        """
        led = _L(batch_id)
        outcome = r.eval(
            _CLAIM_LUA, 6, led.records, led.lease(job_key), led.started, led.requeued,
            led.attempts, led.head, job_key, self.token, self.lease_ms, f"{time.time():.3f}",
        )
        if isinstance(outcome, bytes):
            outcome = outcome.decode()
        if outcome == CLAIMED:
            with self._lock:
                self._held[_L(batch_id).lease(job_key)] = r
            self._ensure_thread()
        return str(outcome)

    def begin(self, r: redis.Redis, batch_id: str | Ledger, job_key: str) -> int:
        """Count one more start of ``job_key`` (since its last record) if its lease is still
        ours; returns the count, or 0 if the lease lapsed since the claim (this process was
        stalled longer than the lease, and the job may be another task's now: do not run it).

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis is unreachable.
        """
        led = _L(batch_id)
        lease = led.lease(job_key)
        started = int(r.eval(_BEGIN_LUA, 2, lease, led.attempts, self.token, job_key))
        if not started:
            with self._lock:
                self._held.pop(lease, None)
            log.warning("lease %s lapsed before its job started (this process was stalled "
                        "longer than %.1f s)", lease, self.lease_s)
        return started

    def release(self, r: redis.Redis, batch_id: str | Ledger, job_key: str, finished: bool) -> None:
        """Give up the lease of ``job_key``. ``finished``: its record is stored (clears the
        started/attempts bookkeeping); otherwise a redelivery may claim it at once.
        Redis errors are ignored (the lease then simply expires)."""
        lease = _L(batch_id).lease(job_key)
        with self._lock:
            self._held.pop(lease, None)
        try:
            r.eval(
                _RELEASE_LUA, 4, lease, _L(batch_id).started,
                _L(batch_id).attempts, _L(batch_id).requeued,
                self.token, job_key, "1" if finished else "0",
            )
        except redis.RedisError:
            pass


_EXIT_WITH_PARENT = False


def exit_with_parent() -> None:
    """Make this process exit when its parent dies while it holds leases (called in each
    Celery pool process at start: an orphaned pool child must not keep running jobs that
    recovery has re-sent)."""
    global _EXIT_WITH_PARENT
    _EXIT_WITH_PARENT = True


_KEEPER: LeaseKeeper | None = None
_KEEPER_LOCK = threading.Lock()


def keeper() -> LeaseKeeper:
    """This process's :class:`LeaseKeeper` (a fresh one after ``fork``)."""
    global _KEEPER
    with _KEEPER_LOCK:
        if _KEEPER is None or _KEEPER._pid != os.getpid():  # noqa: SLF001
            _KEEPER = LeaseKeeper()
        return _KEEPER


# -- recovery (client side) --------------------------------------------------------------------
def running(r: redis.Redis, batch_id: str | Ledger) -> list[str]:
    """Job keys of ``batch_id`` with a live lease (a task is on them now), sorted."""
    started = [_text(k) for k in r.hkeys(_L(batch_id).started)]
    if not started:
        return []
    pipe = r.pipeline(transaction=False)
    for k in started:
        pipe.exists(_L(batch_id).lease(k))
    return sorted(k for k, live in zip(started, pipe.execute()) if live)


def _grace(requeue_grace_s: float | None, now: float | None) -> tuple[float, float]:
    """The re-send grace period (default ``KT_VISIBILITY_TIMEOUT_S``) and the time now."""
    if requeue_grace_s is None:
        requeue_grace_s = float(get_settings().visibility_timeout_s)
    return requeue_grace_s, (time.time() if now is None else now)


def find_orphans(
    r: redis.Redis, batch_id: str | Ledger, requeue_grace_s: float | None = None,
    now: float | None = None,
) -> list[str]:
    """Jobs lost with their worker: claimed, no record, no live lease, not re-sent lately.

    Parameters
    ----------
    requeue_grace_s : float, optional
        A job re-sent less than this many seconds ago is left alone (its message may still be
        waiting in the queue); default ``KT_VISIBILITY_TIMEOUT_S``, after which Celery would
        redeliver a lost message anyway.

    Returns
    -------
    list of str
        Sorted job keys.
    """
    grace, now = _grace(requeue_grace_s, now)
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(_L(batch_id).started)
    pipe.hgetall(_L(batch_id).requeued)
    started, requeued = pipe.execute()
    started = [_text(s) for s in started]
    if not started:
        return []
    # Only the started jobs' records are looked up (a finished job leaves `started`), so the
    # cost follows the jobs in flight, not the size of the batch.
    pipe = r.pipeline(transaction=False)
    for k in started:
        pipe.hexists(_L(batch_id).records, k)
    stale = [k for k, recorded in zip(started, pipe.execute()) if recorded]
    if stale:  # a worker died between saving a record and releasing its lease: tidy up
        pipe = r.pipeline(transaction=False)
        pipe.hdel(_L(batch_id).started, *stale)
        pipe.hdel(_L(batch_id).attempts, *stale)
        pipe.execute()
    requeued_at = {_text(k): float(_text(v)) for k, v in requeued.items()}
    stale_set = set(stale)
    candidates = [
        k for k in started
        if k not in stale_set and now - requeued_at.get(k, float("-inf")) > grace
    ]
    if not candidates:
        return []
    pipe = r.pipeline(transaction=False)
    for k in candidates:
        pipe.exists(_L(batch_id).lease(k))
    return sorted(k for k, live in zip(candidates, pipe.execute()) if not live)


def recover_batch(
    r: redis.Redis,
    batch_id: str | Ledger,
    send: Callable[[str, list[dict[str, Any]]], None],
    requeue_grace_s: float | None = None,
    chunk_size: int = 16,
) -> list[str]:
    """Re-send the jobs of ``batch_id`` lost with their worker (see :func:`find_orphans`).

    Parameters
    ----------
    send : callable
        ``send(batch_id, job_dicts)`` puts one task on the queue (e.g.
        :func:`knights_tour.service.batches.resend_jobs`).

    Returns
    -------
    list of str
        The job keys re-sent (empty if none). Safe to call from several processes at once:
        duplicates are only extra messages; the claim lets one task run each job.
    """
    if cancelled(r, batch_id):
        return []
    return resend(r, batch_id, find_orphans(r, batch_id, requeue_grace_s), send, chunk_size)


def resend(
    r: redis.Redis,
    batch_id: str | Ledger,
    candidates: Sequence[str],
    send: Callable[[str, list[dict[str, Any]]], None],
    chunk_size: int = 16,
) -> list[str]:
    """Re-send those of ``candidates`` that still have neither a record nor a live lease
    (checked and marked re-sent atomically, so a job recorded a moment ago is not re-sent);
    returns their keys."""
    if not candidates:
        return []
    marked = r.eval(
        _MARK_LUA, 2 + len(candidates), _L(batch_id).records,
        _L(batch_id).requeued, *[_L(batch_id).lease(k) for k in candidates],
        f"{time.time():.3f}", *candidates,
    )
    orphans = [_text(k) for k in marked or []]
    if not orphans:
        return []
    raw = r.hmget(_L(batch_id).jobs, orphans)
    pairs = [(k, json.loads(_text(v))) for k, v in zip(orphans, raw) if v is not None]
    for i in range(0, len(pairs), chunk_size):
        send(_L(batch_id).id, [d for _, d in pairs[i:i + chunk_size]])
    return [k for k, _ in pairs]


def find_unclaimed(
    r: redis.Redis, batch_id: str | Ledger, requeue_grace_s: float | None = None,
    now: float | None = None,
) -> list[str]:
    """Jobs of ``batch_id`` with no record that no task has claimed (and not re-sent lately).

    Normally these are simply still queued. They are lost only if nothing carries them any
    more - e.g. a message taken off the queue by a worker that died (or lost Redis) before
    its task started; the caller decides that from the queue being empty and the batch having
    no live lease for a while (see :func:`knights_tour.service.batches.recover_lost_jobs`).
    """
    grace, now = _grace(requeue_grace_s, now)
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(_L(batch_id).jobs)
    pipe.hkeys(_L(batch_id).records)
    pipe.hkeys(_L(batch_id).started)
    pipe.hgetall(_L(batch_id).requeued)
    jobs, recorded, started, requeued = pipe.execute()
    skip = {_text(k) for k in recorded} | {_text(k) for k in started}
    skip |= {_text(k) for k, v in requeued.items() if now - float(_text(v)) <= grace}
    return sorted(k for k in (_text(j) for j in jobs) if k not in skip)


def mark_requeued(r: redis.Redis, batch_id: str | Ledger, job_keys: Sequence[str]) -> None:
    """Note that ``job_keys`` were just put back on the queue (e.g. a soft-time-limit hand-off),
    so :func:`find_orphans` leaves them alone for the re-send grace period."""
    if job_keys:
        now = f"{time.time():.3f}"
        r.hset(_L(batch_id).requeued, mapping={k: now for k in job_keys})


def claim_all(
    keeper_: LeaseKeeper, r: redis.Redis, batch_id: str | Ledger, job_keys: Iterable[str]
) -> dict[str, str]:
    """:meth:`LeaseKeeper.claim` for each key; returns key -> outcome."""
    return {k: keeper_.claim(r, batch_id, k) for k in job_keys}


def wait_for_claim(
    keeper_: LeaseKeeper, r: redis.Redis, batch_id: str | Ledger, job_keys: Sequence[str],
    timeout_s: float, poll_s: float = 0.25,
) -> Iterable[tuple[str, str]]:
    """For jobs whose lease another task holds: yield ``(key, CLAIMED | DONE)`` as each lease
    is freed or its record appears, polling for up to ``timeout_s`` seconds. Keys still held
    then are dropped (their holder is alive; if it dies, :func:`recover_batch` re-sends)."""
    pending = list(job_keys)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        still = []
        for k in pending:
            outcome = keeper_.claim(r, batch_id, k)
            if outcome == HELD:
                still.append(k)
            else:
                yield k, outcome
        pending = still
        if pending:
            time.sleep(poll_s)


__all__ = [
    "Ledger", "exit_with_parent", "activate", "deactivate", "active", "missing", "LeaseKeeper", "keeper", "running", "find_orphans", "recover_batch", "mark_requeued",
    "resend", "find_unclaimed", "claim_all",
    "wait_for_claim", "CLAIMED", "DONE", "HELD", "CANCELLED", "cancelled",
]
