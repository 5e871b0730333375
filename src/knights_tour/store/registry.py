"""What batches and counts store alike: a meta hash, an index by creation time, progress.

A batch (:mod:`knights_tour.batches.store`) and a count (:mod:`knights_tour.counting.store`) are
both *registered* the same way: a hash ``{"meta": JSON, "total": n}``, a sorted-set index scored
by creation time, a hash of work items (jobs / sub-jobs) and a hash of their results. This
module is that pattern, written once. redis-py only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis

from knights_tour.errors import CorruptKeyError, KnightsTourError


def dumps(value: Any) -> str:
    """Compact JSON, as everything this package stores is written."""
    return json.dumps(value, separators=(",", ":"))


def utc_iso(t: float | None) -> str | None:
    """ISO 8601 UTC time of unix seconds ``t`` to the second (``None`` stays ``None``).

    >>> utc_iso(0)
    '1970-01-01T00:00:00+00:00'
    """
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def open_meta(
    r: redis.Redis, meta_key: str, id_field: str, item_id: str, fields: Mapping[str, object]
) -> dict[str, object]:
    """The meta dict to (re-)register ``item_id`` under ``meta_key``.

    Parameters
    ----------
    r : redis.Redis
    meta_key : str
        The hash holding ``"meta"`` (e.g. :func:`knights_tour.store.keys.batch`).
    id_field : str
        Name of the id in the meta (``"batch_id"``, ``"count_id"``).
    item_id : str
    fields : mapping
        Fields of a new meta after ``id_field``, ``created`` and ``created_iso`` (in order).

    Returns
    -------
    dict
        The stored meta with ``updated`` set to now if it exists (creation time kept), else
        a new one ``{id_field, created, created_iso, **fields}``.
    """
    now = time.time()
    existing = r.hget(meta_key, "meta")
    if existing:
        meta = parse_meta(meta_key, existing)
        meta["updated"] = now
        return meta
    return {id_field: item_id, "created": now, "created_iso": utc_iso(now), **fields}


def write_meta(
    pipe: redis.client.Pipeline,
    meta_key: str,
    index_key: str,
    item_id: str,
    meta: Mapping[str, Any],
    total: int,
) -> None:
    """Queue on ``pipe`` the writes of ``meta`` and ``total`` and the index entry of ``item_id``
    (scored by ``meta["created"]``)."""
    pipe.hset(meta_key, mapping={"meta": dumps(meta), "total": total})
    pipe.zadd(index_key, {item_id: meta["created"]})


def read_meta(r: redis.Redis, meta_key: str, unknown: str) -> dict[str, object]:
    """The meta dict stored under ``meta_key``.

    Raises
    ------
    KnightsTourError
        With the message ``unknown`` if there is none (never registered, or expired).
    CorruptKeyError
        If the stored meta is not a JSON object (:func:`parse_meta`).
    """
    raw = r.hget(meta_key, "meta")
    if not raw:
        raise KnightsTourError(unknown)
    return parse_meta(meta_key, raw)


def parse_meta(meta_key: str, raw: str | bytes) -> dict[str, object]:
    """The meta dict of the stored text ``raw`` (the ``meta`` field of ``meta_key``).

    Raises
    ------
    CorruptKeyError
        Naming ``meta_key`` and its field, if ``raw`` is not a JSON object.
    """
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise CorruptKeyError(meta_key, f"not JSON ({exc})", "meta") from None
    if not isinstance(meta, dict):
        raise CorruptKeyError(meta_key, f"not a JSON object: {str(raw)[:40]!r}", "meta")
    return meta


def read_int(key: str, field: str, raw: Any) -> int:
    """``raw``, the stored value of ``field`` of the hash ``key``, as an integer (None or
    empty: 0).

    Raises
    ------
    CorruptKeyError
        Naming the key and field, if ``raw`` is not an integer.
    """
    if raw is None or raw == "":
        return 0
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise CorruptKeyError(key, f"not a whole number: {str(raw)[:40]!r}", field) from None


def items_and_results(
    r: redis.Redis, items_key: str, results_key: str
) -> tuple[set[str], dict[str, str]]:
    """``(work item keys, result hash)`` in one round trip: the two reads every progress check
    makes. Result entries of keys that are not work items are dropped."""
    pipe = r.pipeline(transaction=False)
    pipe.hkeys(items_key)
    pipe.hgetall(results_key)
    item_keys, results = pipe.execute()
    wanted = set(item_keys)
    return wanted, {k: v for k, v in results.items() if k in wanted}


def delete(r: redis.Redis, item_keys: Sequence[str], index_key: str, item_id: str) -> None:
    """Remove every key of one batch/count and its index entry."""
    r.delete(*item_keys)
    r.zrem(index_key, item_id)


__all__ = [
    "dumps",
    "utc_iso",
    "open_meta",
    "write_meta",
    "read_meta",
    "parse_meta",
    "read_int",
    "items_and_results",
    "delete",
]
