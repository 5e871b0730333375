"""How far a batch got, from its bookkeeping keys alone: its meta, the sizes of its job and
status hashes, its per-status tally, its lifecycle ``state`` field and the index of batches
(redis-py, no Celery).

Nothing here decodes a job or a record, so reading a batch's progress loads neither the job
type (:mod:`knights_tour.batches.jobs`) nor the record type (:mod:`knights_tour.tours.record`) with
numpy behind it: ``ktour status`` and ``ktour batches`` start quickly. Registering a batch,
storing and reading its records is :mod:`knights_tour.batches.store`; storing a chunk's records,
:mod:`knights_tour.batches.saving`. Key names come from :mod:`knights_tour.store.keys`.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping
from typing import NotRequired, TypedDict, cast

import redis

from knights_tour.errors import CorruptKeyError
from knights_tour.store import keys, registry

Params = dict[str, object]
"""A batch's parameters as submitted (``sizes``, ``solver``, options, ``schedule`` ...): the
JSON object its meta keeps, open to what each release adds."""


class BatchMeta(TypedDict):
    """A batch's meta as registered (:func:`knights_tour.batches.store.create_batch`)."""

    batch_id: str
    created: float
    """Unix seconds of its first submission."""
    created_iso: str
    params: Params
    total: int
    """Jobs registered."""
    updated: NotRequired[float]
    """Unix seconds of its latest submission (a resume), when there was one."""


class BatchProgress(TypedDict):
    """How far a batch got (:func:`batch_status`, :func:`batch_progress`)."""

    batch_id: str
    total: int
    done: int
    counts: dict[str, int]
    mismatches: int
    missing: int
    missing_keys: list[str]
    unrecorded: int
    lost_jobs: int
    complete: bool
    created: float | None
    params: Params


class BatchListing(TypedDict):
    """One batch of :func:`list_batches`."""

    batch_id: str
    done: int
    created: float | None
    created_iso: str | None
    total: int
    params: Params
    unreadable: str | None


def get_batch_meta(r: redis.Redis, batch_id: str) -> BatchMeta:
    """The batch's meta (batch_id, created, created_iso, params, total).

    Raises
    ------
    KnightsTourError
        ``unknown batch 'id'`` if there is no such batch (or it expired).
    """
    meta = registry.read_meta(
        r, keys.batch(batch_id), f"unknown batch {batch_id!r} (see `ktour batches`)"
    )
    return cast(BatchMeta, meta)


def batch_status(r: redis.Redis, batch_id: str, max_missing: int = 20) -> BatchProgress:
    """Progress of a batch.

    A job is done when it has both its status entry and its record: a record lost from Redis
    (an evicting server, a key deleted by hand) leaves the job missing, never done, so the
    batch is not complete and a resume runs the job again. Jobs lost from the batch's job
    hash (counted against the ``total`` it was registered with) keep it incomplete too.

    Returns
    -------
    BatchProgress
        ``batch_id``, ``total`` (jobs), ``done`` (jobs with a stored status and record),
        ``counts`` (status -> number, of the statuses stored), ``mismatches`` (records with
        mismatch true), ``missing`` (jobs without a record), ``missing_keys`` (up to
        ``max_missing`` of them, sorted), ``unrecorded`` (jobs with a status entry but no
        record), ``lost_jobs`` (jobs registered but gone from the job hash), ``complete``
        (every job done, none lost), ``created`` (unix seconds), ``params``.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    CorruptKeyError
        If a key of the batch cannot be read (its meta, its total, a key of another type).
    """
    meta = get_batch_meta(r, batch_id)
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(keys.batch_jobs(batch_id))
    pipe.hgetall(keys.batch_status(batch_id))
    pipe.hlen(keys.batch_records(batch_id))
    pipe.hget(keys.batch(batch_id), "total")
    job_keys, all_statuses, stored, declared = pipe.execute()
    total = len(job_keys)  # each field of the hash once
    if total == len(all_statuses) and all(map(all_statuses.__contains__, job_keys)):
        statuses, unseen = all_statuses, set()  # the same keys: every job has its status
    else:
        job_set = set(job_keys)
        statuses = (
            all_statuses
            if job_set.issuperset(all_statuses)
            else {k: v for k, v in all_statuses.items() if k in job_set}
        )
        unseen = job_set.difference(statuses)
    counts: Counter[str] = Counter()
    mismatches = 0
    for value, n in Counter(statuses.values()).items():  # a few distinct values
        status, _, flag = value.partition("|")
        counts[status] += n
        mismatches += n if flag == "1" else 0
    # A status and its record are stored (and dropped) together: only fewer records than
    # statuses says some are lost, and only then are the record keys read.
    if stored >= len(all_statuses):
        unrecorded, missing = 0, unseen
    else:
        recorded = statuses.keys() & _record_names(r, batch_id)
        unrecorded, missing = len(statuses) - len(recorded), unseen | (statuses.keys() - recorded)
    lost_jobs = max(0, registry.read_int(keys.batch(batch_id), "total", declared) - total)
    return _progress(
        batch_id,
        meta,
        total,
        total - len(missing),
        counts,
        mismatches,
        missing_keys=_first(missing, max_missing),
        unrecorded=unrecorded,
        lost_jobs=lost_jobs,
    )


def _progress(
    batch_id: str,
    meta: BatchMeta,
    total: int,
    done: int,
    counts: Mapping[str, int],
    mismatches: int,
    *,
    missing_keys: list[str] | None = None,
    unrecorded: int = 0,
    lost_jobs: int = 0,
) -> BatchProgress:
    """A batch's progress with ``done`` of its ``total`` jobs recorded; ``missing_keys``,
    ``unrecorded`` and ``lost_jobs`` as :func:`batch_status` found them (none by default), a
    batch with lost jobs never ``complete``."""
    return {
        "batch_id": batch_id,
        "total": total,
        "done": done,
        "counts": dict(sorted(counts.items())),
        "mismatches": mismatches,
        "missing": total - done,
        "missing_keys": [] if missing_keys is None else missing_keys,
        "unrecorded": unrecorded,
        "lost_jobs": lost_jobs,
        "complete": done == total and lost_jobs == 0,
        "created": meta.get("created"),
        "params": meta.get("params", {}),
    }


def _first(job_keys: set[str], n: int) -> list[str]:
    """The ``n`` first of ``job_keys`` in sorted order (all of them, sorted, when fewer)."""
    return heapq.nsmallest(n, job_keys) if 0 <= n < len(job_keys) else sorted(job_keys)[:n]


def _record_names(r: redis.Redis, batch_id: str) -> set[str]:
    return set(cast("list[str]", r.hkeys(keys.batch_records(batch_id))))  # decoded by the client


def batch_progress(r: redis.Redis, batch_id: str) -> BatchProgress | None:
    """Progress of a batch without reading every job: the shape of :func:`batch_status`, from
    the batch's tally (:func:`knights_tour.store.keys.batch_tally`) and the sizes of its hashes;
    ``missing_keys`` is empty. For polling a batch of any size.

    ``complete`` is only a hint here (a record stored under a key that is not a job of the
    batch, e.g. an invalid message's, counts as done): confirm it with :func:`batch_status`.

    Returns
    -------
    BatchProgress or None
        None when the tally does not account for every stored result (records stored by
        older code, a tally that is not numbers), or the batch's hashes disagree (records or
        jobs lost): use :func:`batch_status`.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    CorruptKeyError
        If a key of the batch cannot be read (its meta, its total, a key of another type).
    """
    meta = get_batch_meta(r, batch_id)
    pipe = r.pipeline(transaction=False)
    pipe.hlen(keys.batch_jobs(batch_id))
    pipe.hlen(keys.batch_status(batch_id))
    pipe.hgetall(keys.batch_tally(batch_id))
    pipe.hlen(keys.batch_records(batch_id))
    pipe.hget(keys.batch(batch_id), "total")
    total, stored, tally, records, declared = pipe.execute()
    tally_key = keys.batch_tally(batch_id)
    try:  # a tally that is not numbers is only a cache gone wrong: the full read does not use it
        counts = {
            k: registry.read_int(tally_key, k, v) for k, v in tally.items() if k != "mismatch"
        }
        mismatches = registry.read_int(tally_key, "mismatch", tally.get("mismatch"))
    except CorruptKeyError:
        return None
    lost = records < stored or registry.read_int(keys.batch(batch_id), "total", declared) > total
    if sum(counts.values()) != stored or lost:
        return None
    return _progress(batch_id, meta, total, min(stored, total), counts, mismatches)


def list_batches(r: redis.Redis, limit: int | None = None) -> list[BatchListing]:
    """Known batches, oldest first: dicts with ``batch_id``, ``created``, ``created_iso``,
    ``total``, ``done`` (jobs with a status entry and a record, at most), ``params``, and
    ``unreadable`` (None, or the one-line reason a key of the batch cannot be read: the batch
    is still listed, its other fields as far as they read). Batches whose keys expired are
    dropped from the index."""
    ids = cast("list[str]", r.zrange(keys.batches(), 0, -1))  # decoded by the client
    if limit is not None:
        ids = ids[-limit:] if limit > 0 else []
    out: list[BatchListing] = []
    for bid in ids:
        pipe = r.pipeline(transaction=False)
        pipe.hget(keys.batch(bid), "meta")
        pipe.hget(keys.batch(bid), "total")
        pipe.hlen(keys.batch_status(bid))
        pipe.hlen(keys.batch_records(bid))
        pipe.hlen(keys.batch_jobs(bid))
        try:
            raw, declared, statuses, records, jobs = pipe.execute()
        except CorruptKeyError as exc:  # a key of another type
            out.append(_unreadable(bid, 0, 0, exc))
            continue
        if not raw:
            r.zrem(keys.batches(), bid)
            continue
        done = min(statuses, records)
        try:
            meta = registry.parse_meta(keys.batch(bid), raw)
            total = registry.read_int(keys.batch(bid), "total", declared or meta.get("total"))
        except CorruptKeyError as exc:
            out.append(_unreadable(bid, done, jobs, exc))
            continue
        out.append(
            {
                "batch_id": bid,
                "done": done,
                "created": cast("float | None", meta.get("created")),
                "created_iso": cast("str | None", meta.get("created_iso")),
                "total": total,
                "params": cast(Params, meta.get("params", {})),
                "unreadable": None,
            }
        )
    return out


def _unreadable(batch_id: str, done: int, jobs: int, exc: CorruptKeyError) -> BatchListing:
    """The listing of a batch with a key that cannot be read: what is known, and why."""
    return {
        "batch_id": batch_id,
        "created": None,
        "created_iso": None,
        "total": jobs,
        "done": done,
        "params": {},
        "unreadable": str(exc),
    }


CANCELLED = "cancelled"
"""The value of a cancelled batch's ``state`` field."""


def batch_state(r: redis.Redis, batch_id: str) -> str | None:
    """The batch's ``state`` field (:data:`CANCELLED`), or None if it has none."""
    value = r.hget(keys.batch(batch_id), "state")
    return value.decode() if isinstance(value, bytes) else value


__all__ = [
    "Params",
    "BatchMeta",
    "BatchProgress",
    "BatchListing",
    "CANCELLED",
    "batch_state",
    "get_batch_meta",
    "batch_progress",
    "batch_status",
    "list_batches",
]
