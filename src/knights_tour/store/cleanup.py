"""Forgetting batches and counts: every Redis key of one, and what it occupied (redis-py only).

A batch's keys are its hash (:func:`knights_tour.store.keys.batch`) and everything under its
own prefix (:func:`knights_tour.store.keys.batch_pattern`: jobs, records, status, tally,
leases, recovery hashes, whatever the lease store adds there), plus its entries in shared
keys: the index of batches, the set of active batches, the collection markers and any
resume pointer naming it. A count likewise. Found by ``SCAN MATCH`` on the prefix, so keys
added later under the prefix go too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis

from knights_tour.errors import KnightsTourError
from knights_tour.store import keys


@dataclass
class Freed:
    """What forgetting removed from Redis."""

    keys: int = 0
    """Keys deleted (a batch's or count's own)."""
    records: int = 0
    """Records (a batch's) or partial counts (a count's) among them."""
    bytes: int = 0
    """Memory Redis reported for the deleted keys (``MEMORY USAGE``), bytes."""

    def add(self, other: Freed) -> None:
        """Add ``other``'s figures to these."""
        self.keys += other.keys
        self.records += other.records
        self.bytes += other.bytes


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _own_keys(r: redis.Redis, head: str, pattern: str) -> list[str]:
    """``head`` (if it exists) and every key matching ``pattern``."""
    found = [_text(k) for k in r.scan_iter(match=pattern, count=1000)]
    return ([head] if r.exists(head) else []) + sorted(set(found))


def _delete(r: redis.Redis, names: list[str]) -> int:
    """Memory of ``names`` (bytes, as Redis reports it), then delete them; returns the bytes."""
    total = 0
    for i in range(0, len(names), 500):
        part = names[i : i + 500]
        pipe = r.pipeline(transaction=False)
        for name in part:
            pipe.memory_usage(name)
        total += sum(int(n or 0) for n in pipe.execute())
        r.delete(*part)
    return total


def _entries(r: redis.Redis, name: str) -> int:
    """Fields of the hash ``name``; 0 if it holds another type (a corrupted key is forgotten
    too)."""
    return int(r.hlen(name)) if _text(r.type(name)) in ("hash", "none") else 0


def _drop_resume_pointers(r: redis.Redis, batch_id: str) -> None:
    for name in r.scan_iter(match=keys.batch_resume("*"), count=1000):
        if _text(r.get(name) or "") == batch_id:
            r.delete(name)


def batch_keys_now(r: redis.Redis, batch_id: str) -> list[str]:
    """Every key of ``batch_id`` present now (its hash and everything under its prefix)."""
    return _own_keys(r, keys.batch(batch_id), keys.batch_pattern(batch_id))


def forget_batch(r: redis.Redis, batch_id: str) -> Freed:
    """Delete every key of ``batch_id`` and its entries in the shared keys (index, active
    set, collection marker, resume pointers). Nothing else is touched.

    Returns
    -------
    Freed
        Keys deleted, records among them, their memory.

    Raises
    ------
    KnightsTourError
        ``unknown batch`` if it has no key and no index entry.
    """
    freed = _forget(
        r,
        batch_id,
        batch_keys_now(r, batch_id),
        (keys.batches(), keys.active_batches(), keys.batch_records(batch_id)),
        f"unknown batch {batch_id!r} (see `ktour batches`)",
        also=keys.collected(),
    )
    _drop_resume_pointers(r, batch_id)
    return freed


def forget_count(r: redis.Redis, count_id: str) -> Freed:
    """Delete every key of ``count_id`` and its entries in the count index and active set.

    Raises
    ------
    KnightsTourError
        ``unknown count`` if it has no key and no index entry.
    """
    names = _own_keys(r, keys.count(count_id), keys.count_pattern(count_id))
    return _forget(
        r,
        count_id,
        names,
        (keys.counts(), keys.active_counts(), keys.count_partials(count_id)),
        f"unknown count {count_id!r}",
    )


def _forget(
    r: redis.Redis,
    item_id: str,
    names: list[str],
    where: tuple[str, str, str],
    unknown: str,
    also: str | None = None,
) -> Freed:
    """Delete ``names`` (the keys of batch or count ``item_id``) and its entries in its index
    and active set (``where``: those keys and its results hash, whose entries are counted),
    and in the hash ``also``.

    Raises
    ------
    KnightsTourError
        ``unknown`` if it has no key and no index entry.
    """
    index, active, results = where
    if not names and r.zscore(index, item_id) is None:
        raise KnightsTourError(unknown)
    freed = Freed(keys=len(names), records=_entries(r, results))
    freed.bytes = _delete(r, names)
    pipe = r.pipeline(transaction=False)
    pipe.zrem(index, item_id)
    pipe.srem(active, item_id)
    if also is not None:
        pipe.hdel(also, item_id)
    pipe.execute()
    return freed


def batches_created_before(r: redis.Redis, t: float) -> list[str]:
    """Ids of the batches created before unix time ``t``, oldest first."""
    return [
        _text(b)
        for b in cast("list[bytes | str]", r.zrangebyscore(keys.batches(), "-inf", f"({t}"))
    ]


def counts_created_before(r: redis.Redis, t: float) -> list[str]:
    """Ids of the counts created before unix time ``t``, oldest first."""
    return [
        _text(c) for c in cast("list[bytes | str]", r.zrangebyscore(keys.counts(), "-inf", f"({t}"))
    ]


__all__ = [
    "Freed",
    "batch_keys_now",
    "forget_batch",
    "forget_count",
    "batches_created_before",
    "counts_created_before",
]
