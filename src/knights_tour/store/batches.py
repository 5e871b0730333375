"""The Redis result store: batches, their jobs and their records (redis-py, no Celery).

Key names come from :mod:`knights_tour.store.keys`. Everything stored is JSON. A record is written
under its job's key inside its batch, so a job delivered twice overwrites its own record.

Typical use (what ``ktour submit/status/collect`` do)::

    r = connect("redis://127.0.0.1:6379/0")
    batch_id = create_batch(r, jobs, params={"sizes": "5-12"})
    ...                                   # workers call save_record(r, batch_id, record)
    batch_status(r, batch_id)             # {"total": 620, "done": 12, ...}
    records = collect(r, batch_id)        # sorted list of record dicts
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from knights_tour.store import keys
from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.core.jobs import Job, record_sort_key

REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError)
"""Errors that mean "Redis is (temporarily) unreachable"; callers may retry on them."""


def mask_url(url: str | None) -> str:
    """The URL with any password replaced by ``***`` (for messages and logs).

    >>> mask_url("redis://:s3cret@example.org:6380/2")
    'redis://:***@example.org:6380/2'
    >>> mask_url("redis://user:pw@h/0")
    'redis://user:***@h/0'
    >>> mask_url("redis://127.0.0.1:6379/0")
    'redis://127.0.0.1:6379/0'
    """
    if not url:
        return str(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{user}:***@{host}"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def connect(url: str, timeout_s: float = 5.0) -> redis.Redis:
    """A redis-py client for ``url``, checked with PING.

    Parameters
    ----------
    url : str
        ``redis://[:password@]host:port/db`` (or ``rediss://``, ``unix://``).
    timeout_s : float
        Connect and socket timeout in seconds.

    Raises
    ------
    BackendUnavailableError
        ``cannot reach Redis at redis://:***@host:port/0: <reason>`` (password masked) if the
        URL is malformed, the server is unreachable, or authentication fails.
    """
    try:
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout_s,
            socket_timeout=max(timeout_s, 30.0),
            decode_responses=True,
            health_check_interval=30,
        )
        client.ping()
    except (redis.RedisError, ValueError, OSError) as exc:
        reason = str(exc).replace(url, mask_url(url)) or type(exc).__name__
        raise BackendUnavailableError(f"cannot reach Redis at {mask_url(url)}: {reason}") from None
    return client


def _ttl() -> int:
    from knights_tour.settings import get_settings

    return int(get_settings().result_ttl_s)


def new_batch_id() -> str:
    """A fresh batch id: UTC time plus randomness, e.g. ``20261120-232512-9f3a1c``; sorts by time."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


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
    now = time.time()
    mapping = {_job_key(j): json.dumps(_job_dict(j), separators=(",", ":")) for j in jobs}
    existing = r.hget(keys.batch(batch_id), "meta")
    if existing:
        meta = json.loads(existing)
        meta["updated"] = now
    else:
        meta = {
            "batch_id": batch_id,
            "created": now,
            "created_iso": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
            "params": dict(params or {}),
        }
    pipe = r.pipeline(transaction=True)
    for i in range(0, len(mapping), 5000):
        pipe.hset(keys.batch_jobs(batch_id), mapping=dict(list(mapping.items())[i:i + 5000]))
    pipe.execute()
    total = r.hlen(keys.batch_jobs(batch_id))
    meta["total"] = total
    pipe = r.pipeline(transaction=True)
    pipe.hset(
        keys.batch(batch_id),
        mapping={"meta": json.dumps(meta, separators=(",", ":")), "total": total},
    )
    pipe.zadd(keys.batches(), {batch_id: meta["created"]})
    ttl = _ttl()
    if ttl > 0:
        for k in keys.batch_keys(batch_id):
            pipe.expire(k, ttl)
    pipe.execute()
    return batch_id


def save_record(r: redis.Redis, batch_id: str, record: Mapping[str, Any]) -> None:
    """Store one job's record in its batch (overwriting an earlier record for the same job).

    The record must carry ``job_key`` (as :func:`knights_tour.core.jobs.run_job` sets it).

    Raises
    ------
    KnightsTourError
        If the record has no ``job_key``.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable (the task layer retries).
    """
    job_key = record.get("job_key")
    if not job_key:
        raise KnightsTourError("a record needs a job_key to be stored")
    flag = "1" if record.get("mismatch") else "0"
    pipe = r.pipeline(transaction=True)
    pipe.hset(keys.batch_records(batch_id), job_key, json.dumps(record, separators=(",", ":")))
    pipe.hset(keys.batch_status(batch_id), job_key, f"{record.get('status')}|{flag}")
    ttl = _ttl()
    if ttl > 0:
        pipe.expire(keys.batch_records(batch_id), ttl)
        pipe.expire(keys.batch_status(batch_id), ttl)
    pipe.execute()


def get_batch_meta(r: redis.Redis, batch_id: str) -> dict[str, Any]:
    """The batch's meta dict (batch_id, created, created_iso, params, total).

    Raises
    ------
    KnightsTourError
        ``unknown batch 'id'`` if there is no such batch (or it expired).
    """
    raw = r.hget(keys.batch(batch_id), "meta")
    if not raw:
        raise KnightsTourError(f"unknown batch {batch_id!r} (see `ktour batches`)")
    return json.loads(raw)


def batch_jobs(r: redis.Redis, batch_id: str) -> list[Job]:
    """The jobs of a batch, in record order (rows, cols, start, solver, closed).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    get_batch_meta(r, batch_id)
    jobs = [Job.from_dict(json.loads(v)) for v in r.hvals(keys.batch_jobs(batch_id))]
    return sorted(jobs, key=lambda j: record_sort_key(j.to_dict() | {"job_key": j.key}))


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
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(keys.batch_jobs(batch_id))
    pipe.hgetall(keys.batch_status(batch_id))
    job_keys, statuses = pipe.execute()
    job_set = set(job_keys)
    counts: Counter[str] = Counter()
    mismatches = 0
    for key, value in statuses.items():
        if key not in job_set:
            continue
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


def collect(r: redis.Redis, batch_id: str) -> list[dict[str, Any]]:
    """All records of a batch, one per job, sorted by (rows, cols, start, solver, closed).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    get_batch_meta(r, batch_id)
    records = [json.loads(v) for v in r.hvals(keys.batch_records(batch_id))]
    return sorted(records, key=record_sort_key)


def list_batches(r: redis.Redis, limit: int | None = None) -> list[dict[str, Any]]:
    """Known batches, oldest first: dicts with ``batch_id``, ``created``, ``created_iso``,
    ``total``, ``done``, ``params``. Batches whose keys expired are dropped from the index."""
    ids = r.zrange(keys.batches(), 0, -1)
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


def delete_batch(r: redis.Redis, batch_id: str) -> None:
    """Remove a batch and all its records."""
    r.delete(*keys.batch_keys(batch_id))
    r.zrem(keys.batches(), batch_id)


def wait_for_batch(
    r: redis.Redis,
    batch_id: str,
    timeout_s: float | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    poll_s: float = 0.25,
) -> dict[str, Any]:
    """Poll :func:`batch_status` until the batch is complete or ``timeout_s`` seconds pass.

    ``on_progress(status)`` is called after every poll (e.g. to move a progress bar). A Redis
    connection error while polling (e.g. Redis restarting) is retried until the timeout.

    Returns
    -------
    dict
        The last status; ``status["complete"]`` tells whether every job has a record.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    BackendUnavailableError
        If Redis stayed unreachable until the timeout.
    """
    return poll_status(
        lambda: batch_status(r, batch_id),
        lambda status: status["complete"],
        f"batch {batch_id}",
        timeout_s=timeout_s,
        on_progress=on_progress,
        poll_s=poll_s,
    )


def poll_status(
    fetch: Callable[[], dict[str, Any]],
    is_done: Callable[[dict[str, Any]], bool],
    what: str,
    timeout_s: float | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    poll_s: float = 0.25,
) -> dict[str, Any]:
    """Call ``fetch()`` every ``poll_s`` seconds until ``is_done(status)`` or ``timeout_s``
    passes, and return the last status. Redis connection errors are retried until the timeout,
    so a waiting client rides out a Redis restart.

    Raises
    ------
    BackendUnavailableError
        If Redis stayed unreachable until the timeout (``what`` names what was awaited).
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    status: dict[str, Any] | None = None
    last_error: BaseException | None = None
    while True:
        try:
            status = fetch()
            last_error = None
            if on_progress is not None:
                on_progress(status)
            if is_done(status):
                return status
        except REDIS_ERRORS as exc:
            last_error = exc
        if deadline is not None and time.monotonic() >= deadline:
            if status is None or last_error is not None:
                raise BackendUnavailableError(
                    f"lost contact with Redis while waiting for {what}: {last_error}"
                )
            return status
        time.sleep(poll_s)


def records_by_key(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Index records by ``job_key``."""
    return {str(rec.get("job_key")): rec for rec in records}


__all__ = [
    "mask_url", "connect", "new_batch_id", "create_batch", "save_record", "get_batch_meta",
    "batch_jobs", "batch_status", "collect", "list_batches", "delete_batch", "wait_for_batch",
    "records_by_key", "REDIS_ERRORS",
]
