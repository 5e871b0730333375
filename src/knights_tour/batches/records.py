"""Reading a batch's records in bulk: pages of stored values fetched with one HMGET each,
decoded page by page into :class:`~knights_tour.tours.record.Record` objects, in record order.

The client holds the batch's record keys (tens of bytes each) and one page of records at a
time, so its memory does not grow with the records' size; decoding is
:func:`knights_tour.tours.stored.decode_many` (MessagePack in C, tours as numpy arrays).
Records are written by the workers (:mod:`knights_tour.batches.store`); the one way a stored
record is replaced is :func:`retire_records` (``ktour retry``), which moves it to the job's list
of earlier records (:func:`earlier_records`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

import redis
from redis.client import NEVER_DECODE

from knights_tour.batches.jobs import order_key, record_sort_key
from knights_tour.batches.key_order import sorted_job_keys
from knights_tour.errors import CorruptKeyError
from knights_tour.store import keys
from knights_tour.tours.record import Record
from knights_tour.tours.stored import decode_many

PAGE = 500
"""Records fetched per HMGET while reading a batch's records."""

_JOB_KEY = re.compile(r"(\d+)x(\d+):(\d+),(\d+):([^:]+):(open|closed)")


def _key_order(job_key: str) -> tuple[Any, ...] | None:
    """The record order of the record stored under a job key of the form of
    :attr:`~knights_tour.batches.jobs.Job.key` (whose fields are the record's), or None for
    another key."""
    m = _JOB_KEY.fullmatch(job_key)
    if m is None:
        return None
    rows, cols, row, col, solver, kind = m.groups()
    return order_key(int(rows), int(cols), (int(row), int(col)), solver, kind == "closed", job_key)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _record_names(r: redis.Redis, batch_id: str) -> list[str]:
    """The fields of the batch's record hash, as text."""
    names = cast("list[str] | list[bytes]", r.hkeys(keys.batch_records(batch_id)))
    if names and isinstance(names[0], bytes):  # a client that does not decode replies
        return [_text(k) for k in names]
    return cast("list[str]", names)


def fetch(r: redis.Redis, batch_id: str, job_keys: list[str]) -> list[bytes | None]:
    """The stored values of ``job_keys`` in the batch, undecoded bytes (None: no record), in
    one HMGET."""
    if not job_keys:
        return []
    return r.execute_command(
        "HMGET", keys.batch_records(batch_id), *job_keys, **{NEVER_DECODE: True}
    )


_DECODE_ERRORS = (ValueError, TypeError, IndexError, KeyError, OverflowError)
"""What decoding a stored value that is not a record raises (``msgspec.DecodeError`` and
``UnicodeDecodeError`` are ValueErrors; numpy's reshaping of a cut tour, an IndexError)."""
DECODE_ERRORS = _DECODE_ERRORS


def unreadable_hint(batch_id: str) -> str:
    """What to do about an unreadable record of ``batch_id``."""
    return (
        f"`ktour collect {batch_id} --repair` drops it and `ktour resume {batch_id}` "
        f"runs its job again"
    )


def decode(batch_id: str, job_keys: list[str], values: list[bytes | None]) -> list[Record]:
    """The records of the stored ``values`` of ``job_keys`` (None: no record, skipped), decoded
    together (:func:`~knights_tour.tours.stored.decode_many`).

    Raises
    ------
    CorruptKeyError
        Naming the batch's record hash and the first job key whose value does not decode.
    """
    try:
        return decode_many(values)
    except _DECODE_ERRORS:
        bad = unreadable(job_keys, values)
        if not bad:
            raise
        job_key, problem = bad[0]
        raise CorruptKeyError(
            keys.batch_records(batch_id), problem, job_key, unreadable_hint(batch_id)
        ) from None


def unreadable(job_keys: list[str], values: list[bytes | None]) -> list[tuple[str, str]]:
    """``(job key, why)`` of each of ``values`` that does not decode as a record."""
    out = []
    for job_key, value in zip(job_keys, values, strict=True):
        if value is None:
            continue
        try:
            decode_many([value])
        except _DECODE_ERRORS as exc:
            out.append((job_key, f"not a stored record ({type(exc).__name__}: {exc})"[:200]))
    return out


def unreadable_keys(r: redis.Redis, batch_id: str, page: int = PAGE) -> list[str]:
    """The job keys of the batch whose stored record does not decode (every record is read,
    a page at a time)."""
    names = _record_names(r, batch_id)
    bad: list[str] = []
    for i in range(0, len(names), page):
        part = names[i : i + page]
        values = fetch(r, batch_id, part)
        try:
            decode_many(values)
        except _DECODE_ERRORS:
            bad += [k for k, _ in unreadable(part, values)]
    return bad


def record_keys(r: redis.Redis, batch_id: str) -> list[str]:
    """The job keys that have a record in the batch, in record order (rows, cols, start,
    solver, closed), without reading the records (except those stored under a key not of the
    :attr:`~knights_tour.batches.jobs.Job.key` form, such as the error record of an invalid job
    message)."""
    names = _record_names(r, batch_id)
    plain = _sorted_job_keys(names)
    if plain is not None:
        return plain
    order = {k: _key_order(k) for k in names}
    odd = [k for k, v in order.items() if v is None]
    for i in range(0, len(odd), PAGE):
        part = odd[i : i + PAGE]
        for k, raw in zip(part, fetch(r, batch_id, part)):
            order[k] = (
                record_sort_key(decode(batch_id, [k], [raw])[0])
                if raw is not None
                else order_key(None, None, None, None, False, k)
            )
    return sorted(names, key=lambda k: cast("tuple[Any, ...]", order[k]))


def in_record_order(job_keys: Iterable[str]) -> list[str]:
    """Job keys of the :attr:`~knights_tour.batches.jobs.Job.key` form in the order
    :func:`record_keys` gives their records (another key sorts as :func:`record_keys` sorts
    a key whose record is missing)."""

    job_keys = list(job_keys)
    plain = _sorted_job_keys(job_keys)
    if plain is not None:
        return plain

    def order(k: str) -> tuple[Any, ...]:
        return _key_order(k) or order_key(None, None, None, None, False, k)

    return sorted(job_keys, key=order)


def _sorted_job_keys(names: list[str]) -> list[str] | None:
    """``names`` in the order of :func:`_key_order` when every one is of the
    :attr:`~knights_tour.batches.jobs.Job.key` form, else None: a batch's keys, parsed in bulk
    (:func:`knights_tour.batches.key_order.sorted_job_keys`), or where that cannot tell, sorted
    on flat tuples of plain values that compare as
    :func:`~knights_tour.batches.jobs.order_key`'s nested ones do, at a fraction of their cost."""
    in_bulk = sorted_job_keys(names)
    if in_bulk is not None:
        return in_bulk
    flat = []
    for name in names:
        m = _JOB_KEY.fullmatch(name)
        if m is None:
            return None
        rows, cols, row, col, solver, kind = m.groups()
        flat.append((int(rows), int(cols), int(row), int(col), solver, kind == "closed", name))
    flat.sort()
    return [item[-1] for item in flat]


def iter_pages(r: redis.Redis, batch_id: str, page: int = PAGE) -> Iterator[list[Record]]:
    """The records of a batch in record order, ``page`` at a time (one HMGET and one bulk
    decode per page).

    Raises
    ------
    CorruptKeyError
        When a page holds a record that does not decode (:func:`decode`).
    """
    names = record_keys(r, batch_id)
    for i in range(0, len(names), page):
        part = names[i : i + page]
        yield decode(batch_id, part, fetch(r, batch_id, part))


def iter_records(r: redis.Redis, batch_id: str, page: int = PAGE) -> Iterator[Record]:
    """The records of a batch, one per job, in record order (:func:`iter_pages`, flattened)."""
    for records in iter_pages(r, batch_id, page):
        yield from records


def collect(r: redis.Redis, batch_id: str) -> list[Record]:
    """All records of a batch, in record order (the whole batch in memory: for a large batch
    use :func:`iter_pages`)."""
    return list(iter_records(r, batch_id))


_RETIRE_LUA = """
local ttl, prefix, na = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local allowed = {}
for i = 1, na do allowed[ARGV[3 + i]] = true end
local out = {}
for i = 4 + na, #ARGV, 3 do
  local old, new, job = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local st = redis.call('HGET', KEYS[2], old)
  local rec = redis.call('HGET', KEYS[1], old)
  if st and rec and redis.call('HEXISTS', KEYS[3], old) == 1
      and (old == new or redis.call('HEXISTS', KEYS[3], new) == 0) then
    local sep = string.find(st, '|', 1, true)
    local status = sep and string.sub(st, 1, sep - 1) or st
    if allowed[status] then
      local dst = prefix .. new
      if old ~= new and redis.call('EXISTS', prefix .. old) == 1 then
        redis.call('RENAME', prefix .. old, dst)
      end
      redis.call('RPUSH', dst, rec)
      if ttl > 0 then redis.call('EXPIRE', dst, ttl) end
      redis.call('HDEL', KEYS[1], old)
      redis.call('HDEL', KEYS[2], old)
      local fields = {status}
      if sep and string.sub(st, sep + 1) == '1' then fields[2] = 'mismatch' end
      for _, f in ipairs(fields) do
        if redis.call('HINCRBY', KEYS[4], f, -1) <= 0 then redis.call('HDEL', KEYS[4], f) end
      end
      if old ~= new then redis.call('HDEL', KEYS[3], old) end
      redis.call('HSET', KEYS[3], new, job)
      out[#out + 1] = new
    end
  end
end
return out
"""
# KEYS: records, status, jobs, tally; ARGV: ttl_s, earlier-list prefix, number of statuses,
# the statuses, then per job: its key now, its key once retried (another solver is another
# key), the retried job's JSON. Returns the keys (once retried) of the jobs retired.


def retire_records(
    r: redis.Redis,
    batch_id: str,
    statuses: Iterable[str],
    retried: Mapping[str, tuple[str, str]],
    ttl_s: int = 0,
) -> list[str]:
    """Make jobs of a batch recordless again so that they run once more (``ktour retry``): for
    each job key in ``retried`` whose stored record has one of ``statuses``, in one script call
    per :data:`PAGE` jobs, the record is moved to the end of the job's list of earlier records
    (:func:`knights_tour.store.keys.batch_earlier`), its status leaves the batch's status hash
    and tally, and the job stored with the batch is replaced by the retried one. The job's next
    record is then stored as a first one (:mod:`knights_tour.batches.saving`): a retry replaces
    a record at most once, however often it is asked or re-delivered.

    Parameters
    ----------
    statuses : iterable of str
        Status names (``unknown``, ``error``, ...) whose records are retired.
    retried : mapping
        job key now -> (job key once retried, the retried job's JSON). The key changes with
        the solver; a job whose new key is already another job of the batch is left alone.
    ttl_s : int
        Expiry of the earlier-records list in seconds (0: none), as the batch's keys.

    Returns
    -------
    list of str
        The keys (once retried) of the jobs whose records were retired.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable (a page whose reply was lost may have been applied).
    """
    wanted = sorted(set(statuses))
    names = [
        keys.batch_records(batch_id),
        keys.batch_status(batch_id),
        keys.batch_jobs(batch_id),
        keys.batch_tally(batch_id),
    ]
    head: list[str | int] = [
        max(int(ttl_s), 0),
        keys.batch_earlier_prefix(batch_id),
        len(wanted),
        *wanted,
    ]
    items = list(retried.items())
    out: list[str] = []
    for i in range(0, len(items), PAGE):
        args = [a for old, (new, job) in items[i : i + PAGE] for a in (old, new, job)]
        out += [_text(k) for k in r.eval(_RETIRE_LUA, len(names), *names, *head, *args)]
    return out


def earlier_records(r: redis.Redis, batch_id: str, job_key: str) -> list[Record]:
    """The records of ``job_key`` that :func:`retire_records` replaced, oldest first (empty if
    the job was never retried)."""
    raw = r.execute_command(
        "LRANGE", keys.batch_earlier(batch_id, job_key), 0, -1, **{NEVER_DECODE: True}
    )
    return decode_many(raw)


__all__ = [
    "retire_records",
    "earlier_records",
    "PAGE",
    "decode",
    "unreadable",
    "unreadable_hint",
    "unreadable_keys",
    "fetch",
    "record_keys",
    "in_record_order",
    "iter_pages",
    "iter_records",
    "collect",
]
