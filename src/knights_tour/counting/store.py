"""Distributed tour counts in Redis (issue 7): sub-jobs, partial counts, progress, reports.

redis-py only (no Celery); key names come from :mod:`knights_tour.store.keys`; everything stored is
JSON. A count is identified by a **count id** derived from what is counted
(:func:`count_id_for`: board, open/closed, split depth, which squares, symmetry), so asking for
the same count again finds the partial counts already stored and only the missing sub-jobs are
sent (resumable). Each partial count is stored under its sub-job key, so a sub-job delivered
twice (a worker killed mid-task, Celery late acknowledgement) overwrites its own entry with the
same number: the sum stays exact.

Typical use (what ``ktour count`` does)::

    plan = counting.plan_count(Board(5, 5))  # 4 sub-jobs
    cid = count_id_for(plan, start=None)
    register_count(r, cid, plan)
    todo = missing_subjobs(r, cid, plan)     # all 4 the first time, none on a rerun
    ...                                      # workers: save_partial(r, cid, key, count, nodes)
    count_status(r, cid)                     # {"total": 4, "done": 4, "complete": True, ...}
    report = assemble_count(r, cid, plan, counted=[sj.key for sj in todo])  # CountReport
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any, TypedDict, cast

import msgspec
import redis

from knights_tour.board import Square
from knights_tour.counting.plan import CountPlan, CountReport, SubJob, assemble
from knights_tour.counting.records import CountEntry, DpProgress, DpResult
from knights_tour.errors import KnightsTourError
from knights_tour.store import keys, registry
from knights_tour.worker.ledger import Ledger


class CountStatus(TypedDict):
    """How far a count got (:func:`count_status`): its sub-jobs in all (``total``), with a
    partial count (``done``), with an error entry (``errors``) and without an entry
    (``missing``, the first ``missing_keys``); ``complete`` when every one has a count; the
    finished sub-jobs' ``nodes`` and summed seconds (``subjob_s``)."""

    count_id: str
    total: int
    done: int
    errors: int
    missing: int
    missing_keys: list[str]
    complete: bool
    nodes: int
    subjob_s: float


def count_id_for(plan: CountPlan, start: Square | None = None) -> str:
    """The id of the count ``plan`` describes, e.g. ``6x6-open-d2-all-folded`` or
    ``5x5-open-d2-sq0.0-folded`` (one class: its representative; ``-folded``: its prefixes
    folded by symmetry, ``-nosym``: no symmetry used). Same plan, same id; a plan with other
    sub-jobs, another id."""
    board = plan.board
    kind = "closed" if plan.closed else "open"
    if start is None:
        which = "all"
    else:
        rep = next(iter(plan.classes))
        which = f"sq{rep[0]}.{rep[1]}"
    sym = "-folded" if plan.folded else "" if plan.use_symmetry else "-nosym"
    return f"{board.label}-{kind}-d{plan.depth}-{which}{sym}"


def register_count(
    r: redis.Redis, count_id: str, plan: CountPlan, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Store the count's meta and its sub-jobs (idempotent: an existing count keeps its
    partial counts and creation time). Returns the meta dict.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    fields = {
        "rows": plan.board.rows,
        "cols": plan.board.cols,
        "closed": plan.closed,
        "depth": plan.depth,
        "use_symmetry": plan.use_symmetry,
        "classes": [[list(rep), [list(s) for s in m]] for rep, m in plan.classes.items()],
        "params": dict(params or {}),
    }
    return register_items(r, count_id, fields, {sj.key: sj.to_dict() for sj in plan.subjobs})


def register_items(
    r: redis.Redis, count_id: str, fields: dict[str, Any], items: dict[str, object]
) -> dict[str, Any]:
    """Store a count's meta (``fields`` plus the id, creation time and ``total``) and its
    sub-jobs (``items``: key -> its JSON-ready dict or record), as :func:`register_count`
    does for an enumeration; a DP count's sub-jobs are its trunks and classes. Idempotent:
    stored partial counts stay; the sub-jobs' dicts are rewritten. Returns the meta dict.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    meta = registry.open_meta(r, keys.count(count_id), "count_id", count_id, fields)
    meta["total"] = len(items)
    mapping = {k: registry.dumps(msgspec.to_builtins(v)) for k, v in items.items()}
    pipe = r.pipeline(transaction=True)
    if mapping:
        pipe.hset(keys.count_subjobs(count_id), mapping=cast("dict[Any, Any]", mapping))
    registry.write_meta(pipe, keys.count(count_id), keys.counts(), count_id, meta, len(items))
    pipe.execute()
    return meta


def count_generation(r: redis.Redis, count_id: str) -> str:
    """The token of this registration of ``count_id`` (32 hex digits), made the first time
    the count is asked for since it was registered afresh (new, or deleted by ``--fresh``:
    :func:`delete_count`) and kept until then. A DP sub-job carries it
    (:class:`~knights_tour.counting.records.DpSubJob`); :func:`save_partial` and
    :func:`save_dp_progress` store nothing for one of another generation.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    pipe = r.pipeline(transaction=True)
    pipe.hsetnx(keys.count(count_id), _GENERATION, uuid.uuid4().hex)
    pipe.hget(keys.count(count_id), _GENERATION)
    return str(pipe.execute()[1])


_GENERATION = "generation"
"""The field of the count's hash holding :func:`count_generation`."""


def save_partial(
    r: redis.Redis,
    count_id: str,
    subjob_key: str,
    count: int | None,
    nodes: int,
    elapsed_s: float = 0.0,
    worker: str | None = None,
    error: str | None = None,
    ledger: Ledger | None = None,
    extra: DpResult | None = None,
    generation: str = "",
) -> bool:
    """Store one sub-job's partial count (overwriting an earlier entry for the same sub-job);
    False, with nothing stored, if ``generation`` (a DP sub-job's, empty: not checked) is not
    the count's (:func:`count_generation`: the sub-job was sent before ``--fresh`` registered
    the count again, or the count is gone), checked in the same script as the write.

    ``error`` (with ``count`` None) records a sub-job that could not be run (a malformed
    message), so waiting stops and the count is reported incomplete instead of hanging. With
    ``ledger`` (the count's), its lease bookkeeping for the sub-job (started, attempts,
    requeued) is cleared in the same script, as
    :func:`knights_tour.worker.orphans.finish` does: one round trip instead of two. ``extra``
    (a DP sub-job's :class:`~knights_tour.counting.records.DpResult`) is stored in the entry
    too, its fields after the entry's own.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    entry = CountEntry(
        count=None if count is None else int(count),
        nodes=int(nodes),
        elapsed_s=round(float(elapsed_s), 6),
        finished_at=round(time.time(), 6),
        worker=worker,
    )
    if extra is not None:
        entry.role, entry.peak_rss_bytes = extra.role, extra.peak_rss_bytes
        entry.figures = msgspec.to_builtins(extra.figures)
    if error is not None:
        entry.error = error
    tidy = [ledger.started, ledger.attempts, ledger.requeued] if ledger is not None else []
    stored = r.eval(
        _SAVE_PARTIAL_LUA,
        3 + len(tidy),
        keys.count(count_id),
        keys.count_partials(count_id),
        keys.count_subjobs(count_id),
        *tidy,
        generation,
        subjob_key,
        registry.dumps(msgspec.to_builtins(entry)),
        keys.count_events(count_id),
    )
    return bool(stored)


_FENCE_LUA = """
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then
  return 0
end
"""
# KEYS[1]: the count's hash; ARGV[1]: the generation the writer was sent for ('' : any)

_SAVE_PARTIAL_LUA = (
    _FENCE_LUA
    + """
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
for i = 4, #KEYS do
  redis.call('HDEL', KEYS[i], ARGV[2])
end
if redis.call('HLEN', KEYS[2]) >= redis.call('HLEN', KEYS[3]) then
  redis.call('PUBLISH', ARGV[4], 'complete')
end
return 1
"""
)
# KEYS: the count's hash, partials, subjobs, then (optional) the ledger's started, attempts,
# requeued hashes; ARGV: generation, sub-job key, entry JSON, events channel (told when the
# count has an entry for every sub-job)

_SAVE_PROGRESS_LUA = (
    _FENCE_LUA
    + """
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
"""
)
# KEYS: the count's hash, its DP progress hash; ARGV: generation, sweep key, record JSON


def save_dp_progress(
    r: redis.Redis, count_id: str, sweep_key: str, record: DpProgress, generation: str = ""
) -> bool:
    """Store how far the sweep of DP sub-job ``sweep_key`` got (its last layer checkpointed),
    overwriting the last one; False, with nothing stored, for a sweep of another
    ``generation`` than the count's (as :func:`save_partial`).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    stored = r.eval(
        _SAVE_PROGRESS_LUA,
        2,
        keys.count(count_id),
        keys.count_dp_progress(count_id),
        generation,
        sweep_key,
        registry.dumps(msgspec.to_builtins(record)),
    )
    return bool(stored)


def present_generation(r: redis.Redis, count_id: str) -> str | None:
    """The token of the count's present registration (:func:`count_generation`), None if it
    has none (the count is gone, or no DP sub-job of it was stamped yet): a sub-job sent for
    another belongs to an earlier registration.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    return cast("str | None", r.hget(keys.count(count_id), _GENERATION))


def load_dp_progress(r: redis.Redis, count_id: str) -> dict[str, DpProgress]:
    """Every DP sweep's last progress record of a count: sweep key -> record.

    Raises
    ------
    KnightsTourError
        If a stored record is not one (bad data in Redis).
    """
    raw = cast("dict[str, str]", r.hgetall(keys.count_dp_progress(count_id)))
    try:
        return {k: _PROGRESS.decode(v) for k, v in raw.items()}
    except msgspec.DecodeError as exc:
        raise KnightsTourError(
            f"count {count_id!r}: a stored DP progress record is bad: {exc}"
        ) from None


_PROGRESS = msgspec.json.Decoder(DpProgress)


def has_entry(r: redis.Redis, count_id: str, subjob_key: str) -> bool:
    """True if the sub-job has a stored entry of any kind (a partial count or an error)."""
    return bool(r.hexists(keys.count_partials(count_id), subjob_key))


def load_partials(r: redis.Redis, count_id: str) -> dict[str, CountEntry]:
    """All stored entries of a count: sub-job key -> entry.

    Raises
    ------
    KnightsTourError
        If a stored entry is not one (bad data in Redis).
    """
    return _entries(count_id, cast("dict[str, str]", r.hgetall(keys.count_partials(count_id))))


def _entries(count_id: str, raw: dict[str, str]) -> dict[str, CountEntry]:
    try:
        return {k: _ENTRY.decode(v) for k, v in raw.items()}
    except msgspec.DecodeError as exc:
        raise KnightsTourError(f"count {count_id!r}: a stored entry is bad: {exc}") from None


_ENTRY = msgspec.json.Decoder(CountEntry)


def count_status(r: redis.Redis, count_id: str, max_missing: int = 20) -> CountStatus:
    """Progress of a count: ``total``, ``done`` (sub-jobs with a partial count), ``errors``,
    ``missing``, ``missing_keys`` (up to ``max_missing``), ``complete``, ``nodes``,
    ``subjob_s`` (summed seconds of the finished sub-jobs).

    Raises
    ------
    KnightsTourError
        For an unknown count id.
    """
    if not r.hexists(keys.count(count_id), "meta"):
        raise KnightsTourError(f"unknown count {count_id!r}")
    wanted, raw = registry.items_and_results(
        r, keys.count_subjobs(count_id), keys.count_partials(count_id)
    )
    entries = _entries(count_id, raw)
    done = counted(entries)
    errors = set(entries) - done
    missing = sorted(wanted - done - errors)
    return CountStatus(
        count_id=count_id,
        total=len(wanted),
        done=len(done),
        errors=len(errors),
        missing=len(missing),
        missing_keys=missing[:max_missing],
        complete=not missing and not errors,
        nodes=sum(entries[k].nodes for k in done),
        subjob_s=sum(entries[k].elapsed_s for k in done),
    )


def counting_span_s(entries: Iterable[CountEntry]) -> float | None:
    """Seconds from the start of the first of ``entries`` (stored partial counts) to the end
    of the last, by the workers' clocks (``finished_at`` less ``elapsed_s``): the count's
    counting, without starting workers or waiting for them; None without timed entries."""
    ends = [(e.finished_at, e.elapsed_s) for e in entries if e.finished_at is not None]
    if not ends:
        return None
    return round(max(end for end, _ in ends) - min(end - took for end, took in ends), 3)


def missing_subjobs(r: redis.Redis, count_id: str, plan: CountPlan) -> list[SubJob]:
    """The plan's sub-jobs that have no stored partial count yet (what to send on a resume)."""
    entries = load_partials(r, count_id)
    done = counted(entries)
    return [sj for sj in plan.subjobs if sj.key not in done]


def counted(entries: dict[str, CountEntry]) -> set[str]:
    """The keys of ``entries`` that hold a partial count (not an error entry)."""
    return {k for k, e in entries.items() if e.count is not None}


def assemble_count(
    r: redis.Redis,
    count_id: str,
    plan: CountPlan,
    elapsed_s: float = 0.0,
    counted: Iterable[str] | None = None,
) -> CountReport:
    """Sum the stored partial counts into the per-square report (see
    :func:`knights_tour.counting.plan.assemble`) and store the report's JSON in the count's hash.

    ``elapsed_s`` is the wall time to report; the sub-jobs' summed seconds (every stored entry,
    reused ones included) go to ``subjob_s``. ``counted`` names the sub-jobs this run sent (their
    keys): ``counting_s`` is the span from the first of *them* to start to the last of them to
    end (:func:`counting_span_s`), None when this run counted none (everything reused), so the
    hours between a stopped run and its resume are never counted. ``counted`` None spans every
    stored entry (a count assembled right after one run that sent every sub-job).

    Raises
    ------
    InvalidJobError
        If a sub-job has no partial count yet.
    """
    entries = load_partials(r, count_id)
    partials = {k: (e.count, e.nodes) for k, e in entries.items() if e.count is not None}
    subjob_s = sum(e.elapsed_s for e in entries.values())
    report = assemble(plan, partials, elapsed_s=elapsed_s)
    report.extra.count_id = count_id
    report.extra.subjob_s = round(subjob_s, 6)
    ran = entries if counted is None else {k: entries[k] for k in counted if k in entries}
    report.extra.counting_s = counting_span_s(ran.values())
    save_report(r, count_id, report.to_dict())
    return report


def save_report(r: redis.Redis, count_id: str, record: dict[str, Any]) -> None:
    """Store a finished count's report JSON in its hash (its ``report`` field, for whoever
    reads the count's keys: :func:`knights_tour.store.keys.count`)."""
    r.hset(keys.count(count_id), "report", registry.dumps(record))


def delete_count(r: redis.Redis, count_id: str) -> None:
    """Remove a count, its sub-jobs and partial counts (``ktour count --fresh``)."""
    registry.delete(r, keys.count_keys(count_id), keys.counts(), count_id)


__all__ = [
    "CountStatus",
    "count_id_for",
    "count_generation",
    "present_generation",
    "counting_span_s",
    "register_count",
    "register_items",
    "save_dp_progress",
    "load_dp_progress",
    "save_partial",
    "load_partials",
    "counted",
    "count_status",
    "missing_subjobs",
    "assemble_count",
    "save_report",
    "delete_count",
]
