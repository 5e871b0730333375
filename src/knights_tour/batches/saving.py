"""Storing a batch's records: many jobs' records in one script call (redis-py only).

A worker buffers the records of its chunk and stores them together
(:func:`save_records`): each job's first stored record is kept (a record once read never
changes), its status goes to the batch's status hash and tally (each job counted once), its
lease bookkeeping is cleared, and the batch's channel hears ``complete`` when the last one
lands - all in one Lua script whose Redis calls per flush are a small constant (variadic HMGET,
HSET and HDEL; one HINCRBY per distinct status), not a number per job.

The stored value of a record is opaque here: the caller encodes it
(:func:`knights_tour.tours.stored.encode_record`). Key names come from
:mod:`knights_tour.store.keys`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from knights_tour.errors import KnightsTourError
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.tours.record import Record
from knights_tour.tours.stored import encode_record

Row = tuple[str, str, bool, "bytes | str"]
"""One record to store: ``(job_key, status, mismatch, payload)`` - the job's key, its status
name (``found`` ...), whether the CP-SAT cross-check disagreed, and the encoded record."""


def row_of(record: Record) -> Row:
    """The :data:`Row` that stores ``record`` (its stored form: :func:`encode_record`)."""
    return (str(record.job_key), record.status.value, record.mismatch, encode_record(record))


SAVE_BATCH = 500
"""Records per script call (a longer list is stored in several calls)."""

_SAVE_LUA = """
local function add(field, c)  -- HINCRBY, save that a count that is not a number restarts
  local old = redis.call('HGET', KEYS[4], field)
  if old and tonumber(old) == nil then old = '0' end
  redis.call('HSET', KEYS[4], field, tonumber(old or '0') + c)
end
local n = (#ARGV - 2) / 4
local jobs = {}
for i = 1, n do jobs[i] = ARGV[4 * i - 1] end
local have = redis.call('HMGET', KEYS[2], unpack(jobs))
local rec, st, tally, out, again, seen = {}, {}, {}, {}, {}, {}
local mismatches = 0
for i = 1, n do
  local b = 4 * i - 1
  if have[i] or seen[jobs[i]] then
    again[#again + 1] = i
  else
    seen[jobs[i]] = true
    local status, flag = ARGV[b + 1], ARGV[b + 2]
    rec[#rec + 1] = ARGV[b]
    rec[#rec + 1] = ARGV[b + 3]
    st[#st + 1] = ARGV[b]
    st[#st + 1] = status .. '|' .. flag
    tally[status] = (tally[status] or 0) + 1
    if flag == '1' then mismatches = mismatches + 1 end
    out[i] = 1
  end
end
if #rec > 0 then
  redis.call('HSET', KEYS[1], unpack(rec))
  redis.call('HSET', KEYS[2], unpack(st))
  for status, c in pairs(tally) do add(status, c) end
  if mismatches > 0 then add('mismatch', mismatches) end
  if tonumber(ARGV[1]) > 0 then
    redis.call('EXPIRE', KEYS[1], ARGV[1])
    redis.call('EXPIRE', KEYS[2], ARGV[1])
    redis.call('EXPIRE', KEYS[4], ARGV[1])
  end
end
if #again > 0 then
  local names = {}
  for j, i in ipairs(again) do names[j] = jobs[i] end
  local old = redis.call('HMGET', KEYS[1], unpack(names))
  for j, i in ipairs(again) do
    if old[j] == ARGV[4 * i + 2] then out[i] = 1 else out[i] = 0 end
  end
end
redis.call('HDEL', KEYS[5], unpack(jobs))
redis.call('HDEL', KEYS[6], unpack(jobs))
redis.call('HDEL', KEYS[7], unpack(jobs))
if #rec > 0 and redis.call('HLEN', KEYS[2]) >= redis.call('HLEN', KEYS[3]) then
  redis.call('PUBLISH', ARGV[2], 'complete')
end
return out
"""
# KEYS: records, status, jobs, tally, started, attempts, requeued; ARGV: ttl_s, events channel
# (told when the batch has as many results as jobs), then per record: job_key, status,
# mismatch flag ('0' / '1'), encoded record. Returns 1 (stored, or identical to the stored
# record: a retried write) or 0 (another record was stored first and is kept) per record.
# A job that appears twice in one call keeps its first record. A tally count that is not a
# number (a corrupted key) restarts from the records stored now, so the tally no longer adds
# up and readers count from the status hash (batches/progress.py) until a resume recounts it.


def save_records(r: redis.Redis, batch_id: str, rows: Sequence[Row]) -> list[bool]:
    """Store the records ``rows`` of batch ``batch_id``: each job's first stored record is
    kept; each newly stored one is counted in the batch's tally once; the jobs' lease
    bookkeeping (started, attempts, requeued) is cleared. One script call per
    :data:`SAVE_BATCH` rows.

    A job runs twice only when its worker's lease lapsed while it ran (a worker stalled or cut
    off from Redis for longer than ``KT_LEASE_S``); the second run's record is then dropped.

    Parameters
    ----------
    rows : sequence of (job_key, status, mismatch, payload)
        See :data:`Row`. ``status`` is the status name (a ``str`` enum is fine).

    Returns
    -------
    list of bool
        Per row: True if it is the job's stored record (new, or identical to the stored one);
        False if a different record was stored first and is kept.

    Raises
    ------
    KnightsTourError
        If a row has no job key.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable (the caller retries: a retried write counts as stored).
    """
    ttl = max(int(get_settings().result_ttl_s), 0)
    names = [
        keys.batch_records(batch_id),
        keys.batch_status(batch_id),
        keys.batch_jobs(batch_id),
        keys.batch_tally(batch_id),
        keys.batch_started(batch_id),
        keys.batch_attempts(batch_id),
        keys.batch_requeued(batch_id),
    ]
    out: list[bool] = []
    for i in range(0, len(rows), SAVE_BATCH):
        args: list[Any] = [ttl, keys.batch_events(batch_id)]
        for job_key, status, mismatch, payload in rows[i : i + SAVE_BATCH]:
            if not job_key:
                raise KnightsTourError("a record needs a job_key to be stored")
            args += [job_key, getattr(status, "value", status), "1" if mismatch else "0", payload]
        out += [bool(x) for x in r.eval(_SAVE_LUA, len(names), *names, *args)]
    return out


def save_record(r: redis.Redis, batch_id: str, record: Record | Mapping[str, Any]) -> bool:
    """Store one job's record in its batch unless the job already has one
    (:func:`save_records` for a single record; it must carry ``job_key``, as
    :func:`knights_tour.batches.jobs.run_job` sets it). A mapping is read as
    :meth:`Record.from_dict` reads it.

    Returns
    -------
    bool
        True if this record is the job's stored record (new, or identical to the stored one:
        a retried write); False if a different record was stored first and is kept.

    Raises
    ------
    KnightsTourError
        If the record has no ``job_key``.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if not isinstance(record, Record):
        record = Record.from_dict(record)
    if not record.job_key:
        raise KnightsTourError("a record needs a job_key to be stored")
    return save_records(r, batch_id, [row_of(record)])[0]


__all__ = ["Row", "row_of", "SAVE_BATCH", "save_records", "save_record"]
