"""Ledgers: the Redis keys the leases of a batch or a count use, and the sets of active
batches and counts the workers' recovery timer watches (redis-py only).

A batch's ledger is its jobs -> records; a count's is its sub-jobs -> partial counts. Both
have the same lease bookkeeping (started / attempts / requeued hashes, keyed by item), so
:mod:`knights_tour.worker.leases` serves both through a :class:`Ledger`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from knights_tour.store import keys


def text(v: Any) -> str:
    """A Redis reply (bytes or str) as str."""
    return v.decode() if isinstance(v, bytes) else str(v)


@dataclass(frozen=True)
class Ledger:
    """The Redis keys the leases of one unit of work use: a batch (jobs -> records) or a
    count (sub-jobs -> partial counts).

    Attributes
    ----------
    id : str
        The batch id or count id (what re-sent tasks carry).
    kind : str
        ``"batch"`` or ``"count"``.
    items : str
        Hash item key -> item JSON (a batch's jobs, a count's sub-jobs).
    results : str
        Hash item key -> result (a batch's records, a count's partial counts).
    done : str
        Hash whose fields are the items that have a result, with small values (a batch's
        status hash; a count's partial counts): what the lease scripts look up.
    started, attempts, requeued : str
        Hash keys: item key -> owner token / worker deaths blamed on it / re-send time.
    head : str
        The batch (count) hash, whose ``state`` field says ``cancelled``.
    sent : str or None
        A count's set of the item keys a client sent (:func:`mark_sent`):
        recovery re-sends no item that was never sent (a DP count holds its classes back
        until their trunk's layer is kept). None for a batch: every job is sent as it is
        submitted.
    """

    id: str
    kind: str
    items: str
    results: str
    done: str
    started: str
    attempts: str
    requeued: str
    head: str
    sent: str | None = None

    @classmethod
    def for_batch(cls, batch_id: str) -> Ledger:
        """The ledger of batch ``batch_id``."""
        return cls(
            batch_id,
            "batch",
            keys.batch_jobs(batch_id),
            keys.batch_records(batch_id),
            keys.batch_status(batch_id),
            keys.batch_started(batch_id),
            keys.batch_attempts(batch_id),
            keys.batch_requeued(batch_id),
            keys.batch(batch_id),
        )

    @classmethod
    def for_count(cls, count_id: str) -> Ledger:
        """The ledger of count ``count_id`` (sub-jobs and partial counts)."""
        return cls(
            count_id,
            "count",
            keys.count_subjobs(count_id),
            keys.count_partials(count_id),
            keys.count_partials(count_id),
            keys.count_started(count_id),
            keys.count_attempts(count_id),
            keys.count_requeued(count_id),
            keys.count(count_id),
            keys.count_sent(count_id),
        )

    @property
    def active_set(self) -> str:
        """The set of unfinished units of this kind the workers' recovery timer visits."""
        return keys.active_counts() if self.kind == "count" else keys.active_batches()


def activate(r: redis.Redis, led: Ledger) -> None:
    """Put ``led``'s unit in its active set, so every worker's recovery timer watches it until
    all its items have results."""
    r.sadd(led.active_set, led.id)


def mark_sent(r: redis.Redis, led: Ledger, item_keys: list[str]) -> None:
    """Note that ``item_keys`` of ``led``'s unit were sent to the workers, so recovery may
    re-send them once lost; nothing for a ledger without a ``sent`` set (a batch).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if led.sent is None or not item_keys:
        return
    r.sadd(led.sent, *item_keys)


def deactivate(r: redis.Redis, led: Ledger) -> None:
    """Take ``led``'s unit out of its active set (finished, cancelled or deleted)."""
    r.srem(led.active_set, led.id)


def is_active(r: redis.Redis, led: Ledger) -> bool:
    """True if ``led``'s unit is in its active set (sent and neither finished nor stopped)."""
    return bool(r.sismember(led.active_set, led.id))


def active(r: redis.Redis) -> list[Ledger]:
    """The ledgers of every active batch and count, batches first, each kind sorted by id."""
    pipe = r.pipeline(transaction=False)
    pipe.smembers(keys.active_batches())
    pipe.smembers(keys.active_counts())
    b, c = pipe.execute()
    return [Ledger.for_batch(text(x)) for x in sorted(b)] + [
        Ledger.for_count(text(x)) for x in sorted(c)
    ]


def cancelled(r: redis.Redis, led: Ledger) -> bool:
    """True if ``led``'s unit was cancelled."""
    state = r.hget(led.head, "state")
    return state is not None and text(state) == "cancelled"


def finished(r: redis.Redis, led: Ledger) -> bool:
    """True if every item of ``led``'s unit has a result. The sizes of the items and the done
    hash are compared first (two O(1) calls); the item keys are read only when the sizes say
    finished (a result stored under a key that is not an item, such as an invalid message's,
    must not end the watch early)."""
    pipe = r.pipeline(transaction=False)
    pipe.hlen(led.items)
    pipe.hlen(led.done)
    items, done = pipe.execute()
    return int(done) >= int(items) and not missing(r, led)


def missing(r: redis.Redis, led: Ledger) -> list[str]:
    """Keys of the items of ``led``'s unit without a result, sorted."""
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(led.items)
    pipe.hkeys(led.results)
    items, results = pipe.execute()
    done = {text(k) for k in results}
    return sorted(k for k in (text(i) for i in items) if k not in done)


__all__ = [
    "Ledger",
    "text",
    "activate",
    "mark_sent",
    "deactivate",
    "active",
    "is_active",
    "cancelled",
    "finished",
    "missing",
]
