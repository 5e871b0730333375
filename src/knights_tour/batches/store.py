"""The Redis result store: batches, their jobs and their records (redis-py, no Celery).

Key names come from :mod:`knights_tour.store.keys`. Everything stored is JSON. A record is written
under its job's key inside its batch, once: a job delivered twice still has one record, the
first one stored.

Typical use (what ``ktour submit/status/collect`` do)::

    r = connect("redis://127.0.0.1:6379/0")   # knights_tour.store.connection
    batch_id = create_batch(r, jobs, params={"sizes": "5-12"})
    ...                                   # workers call saving.save_record(r, batch_id, record)
    progress.batch_status(r, batch_id)    # {"total": 620, "done": 12, ...}
    for record in iter_records(r, batch_id):   # sorted, streamed in pipelined chunks
        ...

How far a batch got (its meta, progress, state field and the list of batches) is read by
:mod:`knights_tour.batches.progress`, without the job and record types; a chunk's records are
stored by :mod:`knights_tour.batches.saving`.

Records are stored in the compact form of :func:`knights_tour.tours.stored.encode_record` (the
tour as its move sequence, the whole zlib-compressed); records stored as plain JSON by older
code still read.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
import redis

from knights_tour.batches import records
from knights_tour.batches.jobs import Job, order_key, wire_form
from knights_tour.batches.progress import get_batch_meta
from knights_tour.errors import CorruptKeyError, KnightsTourError
from knights_tour.settings import get_settings
from knights_tour.store import keys, registry
from knights_tour.tours.record import Record


def _ttl() -> int:
    return int(get_settings().result_ttl_s)


def new_batch_id() -> str:
    """A fresh batch id: UTC time plus randomness, e.g. ``20261120-232512-9f3a1c``; sorts by
    time."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


_JOB_ENCODER = msgspec.json.Encoder()

_HSET_FIELDS = 5000
"""Jobs per HSET command of :func:`create_batch` (all of them in one transaction)."""


def _job_json(job: Job | Mapping[str, Any]) -> bytes:
    """The stored JSON of a job (compact, as :meth:`Job.to_dict`), or of a job dict."""
    if isinstance(job, Job):
        return _JOB_ENCODER.encode(wire_form(job))
    return _JOB_ENCODER.encode(dict(job))


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
    fields: list[Any] = []  # key, value, key, value, ...: a job given twice is stored once
    for j in jobs:
        fields += (_job_key(j), _job_json(j))
    meta = registry.open_meta(
        r, keys.batch(batch_id), "batch_id", batch_id, {"params": dict(params or {})}
    )
    pipe = r.pipeline(transaction=True)
    for i in range(0, len(fields), 2 * _HSET_FIELDS):
        pipe.hset(keys.batch_jobs(batch_id), items=fields[i : i + 2 * _HSET_FIELDS])
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


def note_submission(r: redis.Redis, batch_id: str, began: float, sent: float) -> None:
    """Store when the batch's latest submission (``ktour run``, ``submit``, ``resume``, a
    sweep) began, before its jobs were made, and when its last task was sent: unix seconds,
    read back by :func:`submission`."""
    pipe = r.pipeline(transaction=True)
    pipe.hset(keys.batch(batch_id), "submitted", registry.dumps({"began": began, "sent": sent}))
    if _ttl() > 0:  # a batch forgotten meanwhile leaves no key that never expires
        pipe.expire(keys.batch(batch_id), _ttl())
    pipe.execute()


def submission(r: redis.Redis, batch_id: str) -> tuple[float, float] | None:
    """``(began, sent)`` of the batch's latest submission in unix seconds
    (:func:`note_submission`); None if none was noted (a batch submitted by older code) or
    the note is unreadable."""
    raw = r.hget(keys.batch(batch_id), "submitted")
    try:
        note = json.loads(raw) if raw else None
        return (float(note["began"]), float(note["sent"])) if note else None
    except (ValueError, TypeError, KeyError):
        return None


def batch_jobs(r: redis.Redis, batch_id: str) -> list[Job]:
    """The jobs of a batch, in record order (rows, cols, start, solver, closed).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    CorruptKeyError
        Naming the job hash and the first field that is not a job.
    """
    get_batch_meta(r, batch_id)
    stored = r.hgetall(keys.batch_jobs(batch_id))
    jobs = [parse_job(batch_id, str(k), v) for k, v in stored.items()]
    return sorted(jobs, key=lambda j: order_key(j.rows, j.cols, j.start, j.solver, j.closed, j.key))


def parse_job(batch_id: str, job_key: str, value: str | bytes) -> Job:
    """The job stored under ``job_key`` in the batch's job hash, from its JSON ``value``.

    Raises
    ------
    CorruptKeyError
        Naming the job hash and the field, if ``value`` is not a job.
    """
    try:
        return Job.from_dict(json.loads(value))
    except (ValueError, TypeError, KnightsTourError) as exc:
        raise CorruptKeyError(keys.batch_jobs(batch_id), f"not a job ({exc})", job_key) from None


def iter_records(r: redis.Redis, batch_id: str, chunk: int = records.PAGE) -> Iterator[Record]:
    """The records of a batch, one per job, in record order, read a page at a time
    (:func:`knights_tour.batches.records.iter_records`).

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


# -- repair: results the batch's bookkeeping counts but cannot give ------------------------------

_REBUILD_TALLY_LUA = """
local st = redis.call('HGETALL', KEYS[1])
local tally, mismatches = {}, 0
for i = 2, #st, 2 do
  local v = st[i]
  local bar = string.find(v, '|', 1, true)
  local status = bar and string.sub(v, 1, bar - 1) or v
  tally[status] = (tally[status] or 0) + 1
  if bar and string.sub(v, bar + 1) == '1' then mismatches = mismatches + 1 end
end
local ttl = redis.call('TTL', KEYS[2])
redis.call('DEL', KEYS[2])
for status, c in pairs(tally) do redis.call('HSET', KEYS[2], status, c) end
if mismatches > 0 then redis.call('HSET', KEYS[2], 'mismatch', mismatches) end
if ttl > 0 and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ttl) end
return #st / 2
"""
# KEYS: status, tally. The tally counted again from the status hash, in one step, so a record
# stored meanwhile is counted once.


def _tally_agrees(r: redis.Redis, batch_id: str) -> bool:
    """Whether the batch's tally reads as numbers and counts every stored status."""
    pipe = r.pipeline(transaction=False)
    pipe.hgetall(keys.batch_tally(batch_id))
    pipe.hlen(keys.batch_status(batch_id))
    tally, stored = pipe.execute()
    try:
        counted = sum(
            registry.read_int(keys.batch_tally(batch_id), k, v)
            for k, v in tally.items()
            if k != "mismatch"
        )
        registry.read_int(keys.batch_tally(batch_id), "mismatch", tally.get("mismatch"))
    except CorruptKeyError:
        return False
    return bool(counted == stored)


def repair_results(r: redis.Redis, batch_id: str, *, unreadable: bool = False) -> list[str]:
    """Make the batch's bookkeeping agree with the records it can give, so that every job
    without a readable record is missing (and a resume runs it again): the status entries of
    jobs whose record is gone (an evicting Redis, a key deleted by hand) are dropped, with
    ``unreadable`` also the records that do not decode and their status entries (every record
    is read), and the tally is counted again from the status hash when anything was dropped or
    it is not numbers or does not add up.

    Returns
    -------
    list of str
        The job keys whose results were dropped (sorted).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    CorruptKeyError
        If the batch's meta cannot be read, or one of its hashes is of another type.
    """
    get_batch_meta(r, batch_id)
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(keys.batch_status(batch_id))
    pipe.hkeys(keys.batch_records(batch_id))
    stored, recorded = pipe.execute()
    drop = set(stored).difference(recorded)
    if unreadable:
        drop.update(records.unreadable_keys(r, batch_id))
    dropped = sorted(drop)
    for i in range(0, len(dropped), records.PAGE):
        part = dropped[i : i + records.PAGE]
        pipe = r.pipeline(transaction=True)
        pipe.hdel(keys.batch_records(batch_id), *part)
        pipe.hdel(keys.batch_status(batch_id), *part)
        pipe.execute()
    if dropped or not _tally_agrees(r, batch_id):
        r.eval(_REBUILD_TALLY_LUA, 2, keys.batch_status(batch_id), keys.batch_tally(batch_id))
    return dropped


# -- lifecycle: the batch's state field and the resume pointer --------------------------------


def set_batch_state(r: redis.Redis, batch_id: str, state: str | None) -> None:
    """Set the batch's ``state`` field (:data:`~knights_tour.batches.progress.CANCELLED`), or
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


__all__ = [
    "set_batch_state",
    "resumable_batch",
    "remember_batch",
    "new_batch_id",
    "create_batch",
    "note_submission",
    "submission",
    "batch_jobs",
    "iter_records",
    "collect",
    "repair_results",
    "parse_job",
]
