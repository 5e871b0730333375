"""The Redis result store: batches, their jobs and their records (redis-py, no Celery).

Key names come from :mod:`knights_tour.store.keys`. Everything stored is JSON. A record is written
under its job's key inside its batch, once: a job delivered twice still has one record, the
first one stored.

Typical use (what ``ktour submit/status/collect`` do)::

    r = connect("redis://127.0.0.1:6379/0")   # knights_tour.store.connection
    batch_id = create_batch(r, jobs, params={"sizes": "5-12"})
    ...                                   # workers call save_record(r, batch_id, record)
    batch_status(r, batch_id)             # {"total": 620, "done": 12, ...}
    for record in iter_records(r, batch_id):   # sorted, streamed in pipelined chunks
        ...

How far a batch got (its meta, progress, state field and the list of batches) is read by
:mod:`knights_tour.store.progress`, without the job and record types; its names are
re-exported here.

Records are stored in the compact form of :func:`knights_tour.core.records.encode_record` (the
tour as its move sequence, the whole zlib-compressed); records stored as plain JSON by older
code still read.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis

from knights_tour.core.jobs import Job, order_key
from knights_tour.errors import KnightsTourError
from knights_tour.result import Record
from knights_tour.settings import get_settings
from knights_tour.store import keys, records, registry
from knights_tour.store.progress import (
    CANCELLED,
    batch_progress,
    batch_state,
    batch_status,
    get_batch_meta,
    list_batches,
)
from knights_tour.store.saving import save_record, save_records


def _ttl() -> int:
    return int(get_settings().result_ttl_s)


def new_batch_id() -> str:
    """A fresh batch id: UTC time plus randomness, e.g. ``20261120-232512-9f3a1c``; sorts by
    time."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _job_dict(job: Job | Mapping[str, Any]) -> dict[str, Any]:
    return job.to_dict() if isinstance(job, Job) else dict(job)


def _job_key(job: Job | Mapping[str, Any]) -> str:
    return job.key if isinstance(job, Job) else Job.from_dict(job).key


def create_batch(
    r: redis.Redis,
    jobs: Sequence[Job],
    params: Mapping[str, Any] | None = None,
    batch_id: str | None = None,
) -> str:
    """Register a batch and its jobs; returns the batch id.

    With an existing ``batch_id`` the jobs are merged into that batch (same job key = same job,
    so re-submitting the same set adds nothing); ``total`` becomes the number of distinct jobs.

    Parameters
    ----------
    r : redis.Redis
    jobs : sequence of Job
    params : mapping, optional
        JSON-ready description of how the batch was asked for (sizes, solver, verify, ...),
        stored in the batch meta.
    batch_id : str, optional
        Reuse/extend this batch instead of creating a new id.

    Raises
    ------
    KnightsTourError
        If ``jobs`` is empty or the batch id is malformed.
    """
    if not jobs:
        raise KnightsTourError("a batch needs at least one job")
    if batch_id is None:
        batch_id = new_batch_id()
    elif not batch_id or any(c.isspace() for c in batch_id) or ":" in batch_id:
        raise KnightsTourError(f"malformed batch id {batch_id!r}")
    mapping = {_job_key(j): registry.dumps(_job_dict(j)) for j in jobs}
    meta = registry.open_meta(
        r, keys.batch(batch_id), "batch_id", batch_id, {"params": dict(params or {})}
    )
    pipe = r.pipeline(transaction=True)
    for i in range(0, len(mapping), 5000):
        pipe.hset(keys.batch_jobs(batch_id), mapping=dict(list(mapping.items())[i : i + 5000]))
    pipe.execute()
    total = r.hlen(keys.batch_jobs(batch_id))
    meta["total"] = total
    pipe = r.pipeline(transaction=True)
    registry.write_meta(pipe, keys.batch(batch_id), keys.batches(), batch_id, meta, total)
    ttl = _ttl()
    if ttl > 0:
        for k in keys.batch_keys(batch_id):
            pipe.expire(k, ttl)
    pipe.execute()
    return batch_id


def batch_jobs(r: redis.Redis, batch_id: str) -> list[Job]:
    """The jobs of a batch, in record order (rows, cols, start, solver, closed).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    get_batch_meta(r, batch_id)
    jobs = [Job.from_dict(json.loads(v)) for v in r.hvals(keys.batch_jobs(batch_id))]
    return sorted(jobs, key=lambda j: order_key(j.rows, j.cols, j.start, j.solver, j.closed, j.key))


def iter_records(r: redis.Redis, batch_id: str, chunk: int = records.PAGE) -> Iterator[Record]:
    """The records of a batch, one per job, in record order, read a page at a time
    (:func:`knights_tour.store.records.iter_records`).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    get_batch_meta(r, batch_id)
    return records.iter_records(r, batch_id, chunk)


def collect(r: redis.Redis, batch_id: str) -> list[Record]:
    """All records of a batch, one per job, sorted by (rows, cols, start, solver, closed)
    (the whole batch in memory: for a large batch use :func:`iter_records`).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    return list(iter_records(r, batch_id))


def delete_batch(r: redis.Redis, batch_id: str) -> None:
    """Remove a batch and all its records."""
    registry.delete(r, keys.batch_keys(batch_id), keys.batches(), batch_id)


# -- lifecycle: the batch's state field and the resume pointer --------------------------------


def set_batch_state(r: redis.Redis, batch_id: str, state: str | None) -> None:
    """Set the batch's ``state`` field (:data:`~knights_tour.store.progress.CANCELLED`), or
    clear it with None.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    get_batch_meta(r, batch_id)
    if state is None:
        r.hdel(keys.batch(batch_id), "state")
    else:
        r.hset(keys.batch(batch_id), "state", state)
        r.publish(keys.batch_events(batch_id), state)  # wake its waiting clients


def resumable_batch(r: redis.Redis, digest: str) -> str | None:
    """The id stored for ``digest`` by :func:`remember_batch`, if that batch still exists."""
    value = r.get(keys.batch_resume(digest))
    if value is None:
        return None
    batch_id = value.decode() if isinstance(value, bytes) else str(value)
    return batch_id if r.exists(keys.batch(batch_id)) else None


def remember_batch(r: redis.Redis, digest: str, batch_id: str | None) -> None:
    """Store ``batch_id`` as the batch to resume for ``digest`` (None: forget it)."""
    if batch_id is None:
        r.delete(keys.batch_resume(digest))
    else:
        r.set(keys.batch_resume(digest), batch_id)


def records_by_key(records: Iterable[Record]) -> dict[str, Record]:
    """Index records by ``job_key``."""
    return {str(rec.job_key): rec for rec in records}


__all__ = [
    "CANCELLED",
    "set_batch_state",
    "batch_state",
    "resumable_batch",
    "remember_batch",
    "new_batch_id",
    "create_batch",
    "save_record",
    "save_records",
    "get_batch_meta",
    "batch_jobs",
    "batch_progress",
    "batch_status",
    "iter_records",
    "collect",
    "list_batches",
    "delete_batch",
    "records_by_key",
]
