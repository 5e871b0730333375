"""Cleanup: ``ktour forget BATCH`` and ``ktour prune --older-than AGE``.

Forgetting a batch cancels it if it is unfinished (only its own queued tasks are dropped),
refuses while a job of it is still running (its record would bring keys back), then deletes
every Redis key of it (:func:`knights_tour.store.cleanup.forget_batch`) and its collection
report files (``<batch>.jsonl``, ``<batch>.summary.json`` and its lines of ``index.jsonl`` in
the reports directory). Pruning forgets every batch and count created before a cut-off, and
deletes worker log files last written before it. Both say what was freed (:class:`Cleanup`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from knights_tour.batches import collector, progress
from knights_tour.batches.cancelling import cancel_batch, drop_queued
from knights_tour.batches.estimate import format_bytes
from knights_tour.errors import KnightsTourError
from knights_tour.store import cleanup
from knights_tour.store.cleanup import Freed
from knights_tour.worker import holders, messages
from knights_tour.worker.ledger import Ledger


@dataclass
class Cleanup:
    """What :func:`forget` / :func:`prune` removed."""

    batches: list[str] = field(default_factory=list)
    """Batches forgotten."""
    counts: list[str] = field(default_factory=list)
    """Counts forgotten."""
    redis: Freed = field(default_factory=Freed)
    """Keys, records and memory freed in Redis."""
    files: int = 0
    """Files deleted (collection reports, worker logs)."""
    file_bytes: int = 0
    """Their size, bytes."""
    busy: list[str] = field(default_factory=list)
    """Batches and counts left alone because a job of them was running."""

    def describe(self) -> str:
        """One line: ``forgot 2 batch(es) and 1 count(s): 1,240 records, 57 keys, 1.2 MB in
        Redis; 3 file(s), 40 kB``."""
        what = f"forgot {len(self.batches)} batch(es)" + (
            f" and {len(self.counts)} count(s)" if self.counts else ""
        )
        line = (
            f"{what}: {self.redis.records:,} records, {self.redis.keys:,} keys, "
            f"{format_bytes(self.redis.bytes)} in Redis; {self.files} file(s), "
            f"{format_bytes(self.file_bytes)}"
        )
        if self.busy:
            line += f"; left {len(self.busy)} with jobs running now: {', '.join(self.busy)}"
        return line


def _remove(path: Path, out: Cleanup) -> None:
    with contextlib.suppress(FileNotFoundError):
        size = path.stat().st_size
        path.unlink()
        out.files += 1
        out.file_bytes += size


def _forget_reports(reports_dir: Path, batch_ids: set[str], out: Cleanup) -> None:
    """Delete the collection reports of ``batch_ids`` and their lines of the index."""
    if not batch_ids or not reports_dir.is_dir():
        return
    for bid in batch_ids:
        for path in collector.report_paths(reports_dir, bid):
            _remove(path, out)
    index = reports_dir / collector.INDEX_FILE
    try:
        lines = index.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        return
    kept = []
    for line in lines:
        try:
            if json.loads(line).get("batch_id") in batch_ids:
                continue
        except (ValueError, AttributeError):
            pass
        kept.append(line)
    if len(kept) == len(lines):
        return
    fd, tmp = tempfile.mkstemp(prefix=".index.", dir=reports_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(kept)
    os.chmod(tmp, index.stat().st_mode & 0o777)
    os.replace(tmp, index)


def _forget_one_batch(r: redis.Redis, batch_id: str, out: Cleanup) -> bool:
    """Cancel ``batch_id`` if unfinished, then forget it unless a job of it is running; False
    if it was left alone for that reason."""
    with contextlib.suppress(KnightsTourError):  # a batch with keys but no meta: no state
        if not progress.batch_status(r, batch_id, max_missing=0)["complete"]:
            cancel_batch(r, batch_id)  # nothing new of it starts; its queued tasks go
    if holders.running(r, Ledger.for_batch(batch_id)):
        out.busy.append(batch_id)
        return False
    drop_queued(r, batch_id)
    out.redis.add(cleanup.forget_batch(r, batch_id))
    out.batches.append(batch_id)
    return True


def forget(r: redis.Redis, batch_id: str, reports_dir: Path) -> Cleanup:
    """Forget ``batch_id``: every key of it in Redis and its collection reports.

    Raises
    ------
    KnightsTourError
        For an unknown batch, or one with a job running now (it is cancelled first, so it
        can be forgotten once that job ends).
    """
    out = Cleanup()
    if not _forget_one_batch(r, batch_id, out):
        held = holders.running(r, Ledger.for_batch(batch_id))
        raise KnightsTourError(
            f"batch {batch_id} has {len(held)} job(s) running now; it "
            "is cancelled (nothing new of it starts): forget it again once they end"
        )
    _forget_reports(reports_dir, {batch_id}, out)
    return out


def prune(
    r: redis.Redis,
    older_than_s: float,
    reports_dir: Path,
    log_dir: Path | None,
    now: float | None = None,
) -> Cleanup:
    """Forget every batch and count created more than ``older_than_s`` seconds ago (except
    those with a job running now, listed in :attr:`Cleanup.busy`), their collection reports,
    and the worker log files in ``log_dir`` last written before then.

    Raises
    ------
    KnightsTourError
        If ``older_than_s`` is not positive.
    """
    if not older_than_s > 0:
        raise KnightsTourError(f"the age must be positive, got {older_than_s}")
    cut = (time.time() if now is None else now) - older_than_s
    out = Cleanup()
    for bid in cleanup.batches_created_before(r, cut):
        _forget_one_batch(r, bid, out)
    for cid in cleanup.counts_created_before(r, cut):
        ledger = Ledger.for_count(cid)
        if holders.running(r, ledger):
            out.busy.append(cid)
            continue
        drop_queued(r, cid, messages.TASK_COUNT_SUBJOBS)
        out.redis.add(cleanup.forget_count(r, cid))
        out.counts.append(cid)
    _forget_reports(reports_dir, set(out.batches), out)
    if log_dir is not None and log_dir.is_dir():
        for path in sorted(log_dir.glob("*.log*")):
            with contextlib.suppress(FileNotFoundError):
                if path.is_file() and path.stat().st_mtime < cut:
                    _remove(path, out)
    return out


__all__ = ["Cleanup", "forget", "prune"]
