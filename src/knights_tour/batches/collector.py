"""Collection: turn every finished batch into a report, exactly once.

A *report* for batch ``B`` is two files in the reports directory (``KT_REPORTS_DIR``)::

    B.jsonl           every record of the batch, one JSON object per line, sorted by
                      (rows, cols, start, solver, closed) like ``ktour collect`` (each
                      ``found`` tour checked again: one that is not a tour is an error)
    B.summary.json    counts by status, per board and per worker, timing, params

plus one line appended to ``index.jsonl`` (the list ``ktour reports`` shows). The latest
summary is also kept in Redis (:func:`knights_tour.store.keys.latest_summary`), and each collected
batch gets a marker in the hash :func:`knights_tour.store.keys.collected`.

Exactly once, even with two beats or overlapping collections:

1. a collection runs only while it holds a redis-py :class:`redis.lock.Lock` (with a timeout,
   so a crashed collector cannot block collection forever; the lock is re-armed before each
   batch and a collection that lost it stops);
2. each batch is *claimed* with ``HSETNX`` on its marker before anything is written - an atomic
   set-if-absent, so only one collector can ever claim a batch even if the lock expired. The
   marker becomes ``written`` once the files are in place (each written to a temporary file and
   renamed, so a reader never sees half a report); a claim left by a collector that died is
   taken over after ``lock_timeout_s`` with a WATCH/MULTI compare-and-set;
3. a report file that already exists is never overwritten (e.g. after the markers were lost).

A collection that finds nothing new writes nothing (no file, no Redis key).

This module uses redis-py but not Celery; the beat task ``collect_reports`` is a thin adapter
around :func:`collect_finished`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NotRequired, TypedDict, cast

import redis
from redis.exceptions import LockError, LockNotOwnedError

from knights_tour.batches import progress, store
from knights_tour.batches.progress import BatchMeta, Params
from knights_tour.errors import CorruptKeyError, KnightsTourError
from knights_tour.output.recordfile import records_to_jsonl
from knights_tour.store import keys
from knights_tour.store.registry import utc_iso
from knights_tour.tours.pages import reverified
from knights_tour.tours.record import Record

INDEX_FILE = "index.jsonl"
"""Append-only list of reports written (one JSON line each) in the reports directory."""

_STATUSES = ("found", "no_tour", "unknown", "error")


class BoardCounts(TypedDict):
    """One board of a summary: its label, size, jobs and records by status."""

    board: str
    rows: int
    cols: int
    jobs: int
    found: int
    no_tour: int
    unknown: int
    error: int


class ReportFiles(TypedDict):
    """The files of a report (names in the reports directory) and the host that wrote them."""

    records: str
    summary: str
    host: str


class BatchSummary(TypedDict):
    """The summary of a finished batch (:func:`summarize`; ``B.summary.json``)."""

    batch_id: str
    schedule: str | None
    params: Params
    created: float | None
    created_iso: str | None
    collected_at: float
    collected_iso: str | None
    total: int
    records: int
    counts: dict[str, int]
    mismatches: int
    clean: bool
    boards: list[BoardCounts]
    workers: dict[str, int]
    wall_s: float | None
    solver_s: float
    report: NotRequired[ReportFiles]


Outcome = Literal["written", "skipped", "unfinished", "unreadable"]
"""What a collection did with one pending batch (:func:`collect_finished`)."""


class CollectResult(TypedDict):
    """What one collection did (:func:`collect_finished`)."""

    locked: bool
    written: list[str]
    skipped: list[str]
    unfinished: list[str]
    unreadable: list[str]
    at: float
    host: str


JsonObject = dict[str, object]
"""A JSON object read back as written, by this release or an older one (a collection marker,
an index line, a summary): its fields are looked up, not trusted."""


def report_paths(reports_dir: str | os.PathLike[str], batch_id: str) -> tuple[Path, Path]:
    """``(records JSONL path, summary JSON path)`` of batch ``batch_id``'s report."""
    d = Path(reports_dir)
    return d / f"{batch_id}.jsonl", d / f"{batch_id}.summary.json"


def summarize(
    batch_id: str, meta: BatchMeta, records: Sequence[Record], collected_at: float | None = None
) -> BatchSummary:
    """The summary of a finished batch.

    Parameters
    ----------
    batch_id : str
    meta : mapping
        The batch meta (:func:`knights_tour.batches.progress.get_batch_meta`): created, params,
        total.
    records : sequence of Record
        The batch's records (:func:`knights_tour.batches.store.collect`).
    collected_at : float, optional
        Unix seconds; default now.

    Returns
    -------
    BatchSummary
        ``batch_id``, ``schedule`` (sweep name or None), ``params``, ``created``/
        ``created_iso``, ``collected_at``/``collected_iso``, ``total`` (jobs), ``records``,
        ``counts`` (status -> n, all four statuses present), ``mismatches``, ``clean`` (every
        job decided, no error, no mismatch), ``boards`` (per board: jobs and status counts),
        ``workers`` (worker node name -> records), ``wall_s`` (batch creation to last record,
        seconds), ``solver_s`` (sum of the records' ``elapsed_s``).
    """
    collected_at = time.time() if collected_at is None else collected_at
    tally = _Tally.of(records)
    params = dict(meta.get("params") or {})
    created: float | None = meta.get("created")
    schedule = params.get("schedule")
    total = int(meta.get("total") or len(records))
    undecided = tally.counts["unknown"] + tally.counts["error"]
    last = tally.last_finished
    wall = (last - float(created)) if last is not None and created is not None else None
    return {
        "batch_id": batch_id,
        "schedule": schedule if isinstance(schedule, str) else None,
        "params": params,
        "created": created,
        "created_iso": utc_iso(created),
        "collected_at": round(collected_at, 3),
        "collected_iso": utc_iso(collected_at),
        "total": total,
        "records": len(records),
        "counts": dict(tally.counts),
        "mismatches": tally.mismatches,
        "clean": undecided == 0 and tally.mismatches == 0 and len(records) >= total,
        "boards": tally.board_rows(),
        "workers": dict(sorted(tally.workers.items())),
        "wall_s": None if wall is None else round(wall, 3),
        "solver_s": round(tally.solver_s, 6),
    }


@dataclass
class _Tally:
    """What a batch's records add up to: counts by status (all four present), by board and by
    worker, mismatches, the last finish time (unix seconds) and the solvers' total seconds."""

    counts: Counter[str] = field(default_factory=lambda: Counter({s: 0 for s in _STATUSES}))
    boards: dict[tuple[int, int], Counter[str]] = field(default_factory=dict)
    workers: Counter[str] = field(default_factory=Counter)
    mismatches: int = 0
    last_finished: float | None = None
    solver_s: float = 0.0

    @classmethod
    def of(cls, records: Sequence[Record]) -> _Tally:
        tally = cls()
        for rec in records:
            status = rec.status.value
            tally.counts[status] += 1
            tally.boards.setdefault((rec.rows, rec.cols), Counter())[status] += 1
            tally.workers[rec.worker or "?"] += 1
            tally.mismatches += rec.mismatch
            last = tally.last_finished
            if rec.finished_at is not None and (last is None or rec.finished_at > last):
                tally.last_finished = rec.finished_at
            tally.solver_s += rec.elapsed_s
        return tally

    def board_rows(self) -> list[BoardCounts]:
        """One row per board, in order of size: board label, rows, cols, jobs, status counts."""
        return [
            {
                "board": f"{r}x{c}",
                "rows": r,
                "cols": c,
                "jobs": sum(cnt.values()),
                "found": cnt.get("found", 0),
                "no_tour": cnt.get("no_tour", 0),
                "unknown": cnt.get("unknown", 0),
                "error": cnt.get("error", 0),
            }
            for (r, c), cnt in sorted(
                self.boards.items(), key=lambda kv: (str(kv[0][0]).zfill(9), str(kv[0][1]).zfill(9))
            )
        ]


def _write_new(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` via a temporary file and an atomic link; False (nothing
    written) if ``path`` already exists."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # fails if path exists: never overwrite a report
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _append_index(reports_dir: Path, entry: Mapping[str, object]) -> None:
    line = json.dumps(entry, separators=(",", ":")) + "\n"
    fd = os.open(reports_dir / INDEX_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _claim(r: redis.Redis, batch_id: str, token: str, now: float, stale_s: float) -> bool:
    """Claim ``batch_id`` for this collector (HSETNX); take over a claim older than
    ``stale_s`` seconds with WATCH/MULTI. False if another collector has it (or wrote it)."""
    marker = json.dumps({"state": "claimed", "by": token, "at": now}, separators=(",", ":"))
    if r.hsetnx(keys.collected(), batch_id, marker):
        return True
    with r.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(keys.collected())
            raw = pipe.hget(keys.collected(), batch_id)
            try:
                old = json.loads(raw) if raw else {}
            except ValueError:
                old = {}
            if old.get("state") != "claimed" or now - float(old.get("at", now)) <= stale_s:
                pipe.unwatch()
                return False
            pipe.multi()
            pipe.hset(keys.collected(), batch_id, marker)
            pipe.execute()
            return True
        except redis.WatchError:
            return False


def _release_claim(r: redis.Redis, batch_id: str, token: str) -> None:
    """Drop our claim (after a failed write) so the next collection retries the batch."""
    with r.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(keys.collected())
            raw = pipe.hget(keys.collected(), batch_id)
            if raw and json.loads(raw).get("by") == token:
                pipe.multi()
                pipe.hdel(keys.collected(), batch_id)
                pipe.execute()
            else:
                pipe.unwatch()
        except (redis.WatchError, ValueError):
            pass


def pending_batches(r: redis.Redis) -> list[str]:
    """Batch ids (oldest first) with no finished collection marker."""
    ids = cast("list[str]", r.zrange(keys.batches(), 0, -1))  # decoded by the client
    markers = cast("dict[str, str]", r.hgetall(keys.collected()))
    out = []
    for bid in ids:
        raw = markers.get(bid)
        if raw:
            try:
                if json.loads(raw).get("state") == "written":
                    continue
            except ValueError:
                pass
        out.append(bid)
    return out


def collect_finished(
    r: redis.Redis,
    reports_dir: str | os.PathLike[str],
    lock_timeout_s: float = 300.0,
    now: float | None = None,
) -> CollectResult:
    """Write a report for every batch that finished and has not been collected yet.

    Parameters
    ----------
    r : redis.Redis
        Client with ``decode_responses=True`` (:func:`knights_tour.store.connection.connect`).
    reports_dir : path
        Directory for the reports (created if missing, only when there is something to write).
    lock_timeout_s : float
        Seconds the collection lock lives without being re-armed; also the age after which a
        claim left by a dead collector is taken over.
    now : float, optional
        Unix seconds to stamp the collection with (default: the clock).

    Returns
    -------
    CollectResult
        ``locked`` (True: another collection held the lock, nothing done), ``written`` (batch
        ids reported by this call, in order), ``skipped`` (finished batches another collector
        claimed or whose report file already existed), ``unfinished`` (batches still running),
        ``unreadable`` (batches with a key that cannot be read, e.g. a corrupted record: not
        reported, tried again by the next collection; ``ktour collect BATCH`` names the key),
        ``at`` (unix seconds), ``host``.

    Raises
    ------
    redis.RedisError
        If Redis fails (claims of batches not yet written are released first).
    OSError
        If the reports directory cannot be written (the batch's claim is released, so the
        next collection retries it).
    """
    now = time.time() if now is None else now
    reports = Path(reports_dir)
    token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    result: CollectResult = {
        "locked": False,
        "written": [],
        "skipped": [],
        "unfinished": [],
        "unreadable": [],
        "at": now,
        "host": socket.gethostname(),
    }
    lock = r.lock(keys.collect_lock(), timeout=lock_timeout_s, blocking=False)
    if not lock.acquire(blocking=False):
        result["locked"] = True
        return result
    try:
        for batch_id in pending_batches(r):
            try:
                lock.reacquire()  # re-arm the timeout; lost it -> stop, someone else collects
            except LockError:
                break
            outcome = _collect_batch(r, reports, batch_id, token, now, lock_timeout_s)
            if outcome is not None:
                result[outcome].append(batch_id)
    finally:
        with contextlib.suppress(LockNotOwnedError, LockError, redis.RedisError):
            lock.release()
    if result["written"]:  # nothing new: nothing written, not even the last-collection note
        _note_collection(r, result, now)
    return result


def _collect_batch(
    r: redis.Redis, reports: Path, batch_id: str, token: str, now: float, stale_s: float
) -> Outcome | None:
    """Collect one pending batch under the lock: ``"unfinished"`` (still running),
    ``"skipped"`` (another collector claimed it, or its report file existed), ``"written"``,
    ``"unreadable"`` (a key of it cannot be read: nothing written, its claim released), or
    None (the batch expired or was deleted meanwhile). A claim whose write fails is
    released before the error propagates, so the next collection retries the batch."""
    try:
        st = progress.batch_status(r, batch_id, max_missing=0)
    except CorruptKeyError:
        return "unreadable"
    except KnightsTourError:
        return None
    if not st["complete"]:
        return "unfinished"
    if not _claim(r, batch_id, token, now, stale_s):
        return "skipped"
    try:
        written = _write_report(r, reports, batch_id, now)
    except CorruptKeyError:  # the next batches are still collected; this one is retried
        _release_claim(r, batch_id, token)
        return "unreadable"
    except BaseException:
        _release_claim(r, batch_id, token)
        raise
    return "written" if written else "skipped"


def _note_collection(r: redis.Redis, result: CollectResult, now: float) -> None:
    """Keep what this collection did in Redis (:func:`last_collection`); best effort."""
    note = {
        "at": result["at"],
        "host": result["host"],
        "written": result["written"],
        "skipped": result["skipped"],
        "unfinished": result["unfinished"],
        "at_iso": utc_iso(now),
    }
    with contextlib.suppress(redis.RedisError):
        r.set(keys.last_collection(), json.dumps(note, separators=(",", ":")))


def _write_report(r: redis.Redis, reports: Path, batch_id: str, now: float) -> bool:
    """Write one claimed batch's report files, mark it written, update the latest summary.
    False if its summary file already existed (nothing overwritten)."""
    meta = progress.get_batch_meta(r, batch_id)
    records = [reverified(rec) for rec in store.collect(r, batch_id)]
    summary = summarize(batch_id, meta, records, collected_at=now)
    jsonl_path, summary_path = report_paths(reports, batch_id)
    summary["report"] = {
        "records": jsonl_path.name,
        "summary": summary_path.name,
        "host": socket.gethostname(),
    }
    reports.mkdir(parents=True, exist_ok=True)
    fresh = not summary_path.exists()
    if fresh:
        lines = records_to_jsonl(records)
        _write_new(jsonl_path, lines)
        # the summary goes last: its presence means the report is complete
        fresh = _write_new(summary_path, json.dumps(summary, indent=2) + "\n")
    marker = {
        "state": "written",
        "at": now,
        "host": socket.gethostname(),
        "records": jsonl_path.name,
        "summary": summary_path.name,
        "reports_dir": str(reports),
        "counts": summary["counts"],
        "total": summary["total"],
        "clean": summary["clean"],
        "schedule": summary["schedule"],
        "existing": not fresh,
    }
    pipe = r.pipeline(transaction=True)
    pipe.hset(keys.collected(), batch_id, json.dumps(marker, separators=(",", ":")))
    if fresh:
        pipe.set(keys.latest_summary(), json.dumps(summary, separators=(",", ":")))
    pipe.execute()
    if fresh:
        _append_index(
            reports,
            {
                "batch_id": batch_id,
                "collected_iso": summary["collected_iso"],
                "schedule": summary["schedule"],
                "total": summary["total"],
                "counts": summary["counts"],
                "mismatches": summary["mismatches"],
                "clean": summary["clean"],
                "records": jsonl_path.name,
                "summary": summary_path.name,
            },
        )
    return fresh


def read_index(reports_dir: str | os.PathLike[str]) -> list[JsonObject]:
    """The reports listed in ``reports_dir/index.jsonl`` (oldest first; [] if none).

    Lines that are not JSON (e.g. a torn last line) are skipped.
    """
    path = Path(reports_dir) / INDEX_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                out.append(item)
    return out


def collected_markers(r: redis.Redis) -> dict[str, JsonObject]:
    """batch_id -> collection marker (``state`` claimed/written, host, files, counts)."""
    out = {}
    for bid, raw in cast("dict[str, str]", r.hgetall(keys.collected())).items():
        with contextlib.suppress(ValueError):
            out[bid] = json.loads(raw)
    return out


def latest_summary(r: redis.Redis) -> JsonObject | None:
    """The summary of the most recent report written (from Redis), or None."""
    raw = r.get(keys.latest_summary())
    return json.loads(raw) if raw else None


def last_collection(r: redis.Redis) -> JsonObject | None:
    """What the last collection did (at, host, written, skipped, unfinished), or None."""
    raw = r.get(keys.last_collection())
    return json.loads(raw) if raw else None


__all__ = [
    "BatchSummary",
    "BoardCounts",
    "CollectResult",
    "JsonObject",
    "collect_finished",
    "summarize",
    "report_paths",
    "pending_batches",
    "read_index",
    "collected_markers",
    "latest_summary",
    "last_collection",
    "INDEX_FILE",
]
