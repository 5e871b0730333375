"""How far a batch got, from its bookkeeping keys alone: its meta, the sizes of its job and
status hashes, its per-status tally, its lifecycle ``state`` field and the index of batches
(redis-py, no Celery).

Nothing here decodes a job or a record, so reading a batch's progress loads neither the job
type (:mod:`knights_tour.core.jobs`) nor the record type (:mod:`knights_tour.result`) with
numpy behind it: ``ktour status`` and ``ktour batches`` start quickly. Registering a batch,
storing and reading its records is :mod:`knights_tour.store.batches` (which re-exports these
names). Key names come from :mod:`knights_tour.store.keys`.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, cast

import redis

from knights_tour.store import keys, registry


def get_batch_meta(r: redis.Redis, batch_id: str) -> dict[str, Any]:
    """The batch's meta dict (batch_id, created, created_iso, params, total).

    Raises
    ------
    KnightsTourError
        ``unknown batch 'id'`` if there is no such batch (or it expired).
    """
    return registry.read_meta(
        r, keys.batch(batch_id), f"unknown batch {batch_id!r} (see `ktour batches`)"
    )


def batch_status(r: redis.Redis, batch_id: str, max_missing: int = 20) -> dict[str, Any]:
    """Progress of a batch.

    Returns
    -------
    dict
        ``batch_id``, ``total`` (jobs), ``done`` (records stored for the batch's jobs),
        ``counts`` (status -> number), ``mismatches`` (records with mismatch true),
        ``missing`` (jobs without a record), ``missing_keys`` (up to ``max_missing`` of them,
        sorted), ``complete`` (done == total), ``created`` (unix seconds), ``params``.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    meta = get_batch_meta(r, batch_id)
    job_set, statuses = registry.items_and_results(
        r, keys.batch_jobs(batch_id), keys.batch_status(batch_id)
    )
    counts: Counter[str] = Counter()
    mismatches = 0
    for value in statuses.values():
        status, _, flag = value.partition("|")
        counts[status] += 1
        mismatches += flag == "1"
    missing = sorted(job_set.difference(statuses))
    total = len(job_set)
    done = total - len(missing)
    return {
        "batch_id": batch_id,
        "total": total,
        "done": done,
        "counts": dict(sorted(counts.items())),
        "mismatches": mismatches,
        "missing": len(missing),
        "missing_keys": missing[:max_missing],
        "complete": done == total,
        "created": meta.get("created"),
        "params": meta.get("params", {}),
    }


def batch_progress(r: redis.Redis, batch_id: str) -> dict[str, Any] | None:
    """Progress of a batch without reading every job: the shape of :func:`batch_status`, from
    the batch's tally (:func:`knights_tour.store.keys.batch_tally`) and the sizes of its hashes;
    ``missing_keys`` is empty. For polling a batch of any size.

    ``complete`` is only a hint here (a record stored under a key that is not a job of the
    batch, e.g. an invalid message's, counts as done): confirm it with :func:`batch_status`.

    Returns
    -------
    dict or None
        None when the tally does not account for every stored result (records stored by
        older code): use :func:`batch_status`.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    meta = get_batch_meta(r, batch_id)
    pipe = r.pipeline(transaction=False)
    pipe.hlen(keys.batch_jobs(batch_id))
    pipe.hlen(keys.batch_status(batch_id))
    pipe.hgetall(keys.batch_tally(batch_id))
    total, stored, tally = pipe.execute()
    counts = {k: int(v) for k, v in tally.items() if k != "mismatch"}
    if sum(counts.values()) != stored:
        return None
    done = min(stored, total)
    return {
        "batch_id": batch_id,
        "total": total,
        "done": done,
        "counts": dict(sorted(counts.items())),
        "mismatches": int(tally.get("mismatch", 0)),
        "missing": total - done,
        "missing_keys": [],
        "complete": done == total,
        "created": meta.get("created"),
        "params": meta.get("params", {}),
    }


def list_batches(r: redis.Redis, limit: int | None = None) -> list[dict[str, Any]]:
    """Known batches, oldest first: dicts with ``batch_id``, ``created``, ``created_iso``,
    ``total``, ``done``, ``params``. Batches whose keys expired are dropped from the index."""
    ids = cast("list[str]", r.zrange(keys.batches(), 0, -1))  # decoded by the client
    if limit is not None:
        ids = ids[-limit:] if limit > 0 else []
    out: list[dict[str, Any]] = []
    for bid in ids:
        raw = r.hget(keys.batch(bid), "meta")
        if not raw:
            r.zrem(keys.batches(), bid)
            continue
        meta = json.loads(raw)
        out.append(
            {
                "batch_id": bid,
                "created": meta.get("created"),
                "created_iso": meta.get("created_iso"),
                "total": int(r.hget(keys.batch(bid), "total") or meta.get("total") or 0),
                "done": int(r.hlen(keys.batch_status(bid))),
                "params": meta.get("params", {}),
            }
        )
    return out


CANCELLED = "cancelled"
"""The value of a cancelled batch's ``state`` field."""


def batch_state(r: redis.Redis, batch_id: str) -> str | None:
    """The batch's ``state`` field (:data:`CANCELLED`), or None if it has none."""
    value = r.hget(keys.batch(batch_id), "state")
    return value.decode() if isinstance(value, bytes) else value


__all__ = [
    "CANCELLED",
    "batch_state",
    "get_batch_meta",
    "batch_progress",
    "batch_status",
    "list_batches",
]
