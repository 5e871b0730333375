"""Ledgers: the Redis keys the leases of a batch or a count use, and the sets of active
batches and counts the workers' recovery timer watches (redis-py only).

A batch's ledger is its jobs -> records; a count's is its sub-jobs -> partial counts. Both
have the same lease bookkeeping (started / attempts / requeued hashes, a lease string per
item), so :mod:`knights_tour.store.leases` serves both through a :class:`Ledger`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from knights_tour.store import keys


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


@dataclass(frozen=True)
class Ledger:
    """The Redis keys the leases of one unit of work use: a batch (jobs -> records) or a
    count (sub-jobs -> partial counts). Every function here that takes a ``batch_id`` also
    takes a :class:`Ledger`; a plain string means the batch of that id.

    Attributes
    ----------
    id : str
        The batch id or count id (what re-sent tasks carry).
    kind : str
        ``"batch"`` or ``"count"``.
    items, results, started, attempts, requeued : str
        Hash keys: item key -> item JSON / result JSON / claim time / claims / re-send time.
    """

    id: str
    kind: str
    items: str
    results: str
    started: str
    attempts: str
    requeued: str

    @property
    def jobs(self) -> str:
        """The items hash (a batch's jobs, a count's sub-jobs)."""
        return self.items

    @property
    def records(self) -> str:
        """The results hash (a batch's records, a count's partial counts)."""
        return self.results

    @property
    def head(self) -> str:
        """The batch (count) hash, whose ``state`` field says ``cancelled``."""
        return keys.count(self.id) if self.kind == "count" else keys.batch(self.id)

    def lease(self, item_key: str) -> str:
        """The lease key of one item."""
        if self.kind == "count":
            return keys.count_lease(self.id, item_key)
        return keys.batch_lease(self.id, item_key)

    @classmethod
    def for_batch(cls, batch_id: str) -> Ledger:
        """The ledger of batch ``batch_id``."""
        return cls(batch_id, "batch", keys.batch_jobs(batch_id), keys.batch_records(batch_id),
                   keys.batch_started(batch_id), keys.batch_attempts(batch_id),
                   keys.batch_requeued(batch_id))

    @classmethod
    def for_count(cls, count_id: str) -> Ledger:
        """The ledger of count ``count_id`` (sub-jobs and partial counts)."""
        return cls(count_id, "count", keys.count_subjobs(count_id),
                   keys.count_partials(count_id), keys.count_started(count_id),
                   keys.count_attempts(count_id), keys.count_requeued(count_id))

    @property
    def active_set(self) -> str:
        """The set of unfinished units of this kind the workers' recovery timer visits."""
        return keys.active_counts() if self.kind == "count" else keys.active_batches()


def _L(unit: str | Ledger) -> Ledger:  # noqa: N802 - short on purpose: used on every key
    return unit if isinstance(unit, Ledger) else Ledger.for_batch(unit)


def activate(r: redis.Redis, unit: str | Ledger) -> None:
    """Put ``unit`` (a batch id or a :class:`Ledger`) in its active set, so every worker's
    recovery timer watches it until all its items have results."""
    led = _L(unit)
    r.sadd(led.active_set, led.id)


def deactivate(r: redis.Redis, unit: str | Ledger) -> None:
    """Take ``unit`` out of its active set (finished, cancelled or deleted)."""
    led = _L(unit)
    r.srem(led.active_set, led.id)


def active(r: redis.Redis) -> list[Ledger]:
    """The ledgers of every active batch and count, batches first, each kind sorted by id."""
    pipe = r.pipeline(transaction=False)
    pipe.smembers(keys.active_batches())
    pipe.smembers(keys.active_counts())
    b, c = pipe.execute()
    return ([Ledger.for_batch(_text(x)) for x in sorted(b)]
            + [Ledger.for_count(_text(x)) for x in sorted(c)])


def cancelled(r: redis.Redis, unit: str | Ledger) -> bool:
    """True if ``unit`` (a batch id or a :class:`Ledger`) was cancelled."""
    state = r.hget(_L(unit).head, "state")
    return state is not None and _text(state) == "cancelled"


def missing(r: redis.Redis, unit: str | Ledger) -> list[str]:
    """Keys of the items of ``unit`` without a result, sorted."""
    led = _L(unit)
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(led.items)
    pipe.hkeys(led.results)
    items, results = pipe.execute()
    done = {_text(k) for k in results}
    return sorted(k for k in (_text(i) for i in items) if k not in done)

__all__ = ["Ledger", "activate", "deactivate", "active", "cancelled", "missing"]
