"""A batch's JSON Lines file written while the batch runs.

``ktour run`` knows its batch's jobs and the order their tasks were sent in. While it waits,
:meth:`RecordStream.advance` fetches the records stored since its last call, a page of job keys
in that order at a time (one HMGET, one bulk decode), and writes their JSON lines to a spill file
as they come; when the batch is complete, :meth:`RecordStream.finish` fetches the rest and
copies the lines into the output file in record order
(:func:`knights_tour.store.records.in_record_order`). The file is the one
:func:`knights_tour.store.records.iter_records` gives (``ktour collect``), byte for byte: should
the batch's stored keys not be its jobs' (a record under another key), the file is written
from Redis in record order instead. Memory: the batch's job keys, two integers per job and one
page of records; disk: the spill file (deleted at the end) beside the output.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import redis

from knights_tour.output.atomicfile import AtomicFile
from knights_tour.output.recordfile import jsonl_bytes
from knights_tour.service.verdict import Tally
from knights_tour.store import keys
from knights_tour.store.records import PAGE, decode, fetch, in_record_order, record_keys

ADVANCE_BUDGET_S = 0.25
"""Longest a call of :meth:`RecordStream.advance` keeps fetching (seconds): the wait's
progress and its checks run between two calls."""


class RecordStream:
    """The JSON Lines file of batch ``batch_id`` at ``path``, its lines made as the records
    arrive.

    Parameters
    ----------
    r : redis.Redis
    batch_id : str
    job_keys : sequence of str
        The batch's job keys (:attr:`~knights_tour.core.jobs.Job.key`), in the order their
        tasks were sent (:func:`knights_tour.service.batches.send_order`): the order the
        records are looked for.
    path : path
        The output file; it appears there only when :meth:`finish` returns.

    Attributes
    ----------
    tally : Tally
        The counts of the records fetched so far.

    Raises
    ------
    OutputPathError
        From :meth:`finish`, if the file cannot be written (it is created there: a
        ``ktour run`` killed before leaves no file; the spill file is unlinked at once).
    """

    def __init__(
        self, r: redis.Redis, batch_id: str, job_keys: Sequence[str], path: str | os.PathLike[str]
    ) -> None:
        self.r = r
        self.batch_id = batch_id
        self.path = path
        self.keys = in_record_order(job_keys)
        position = {k: i for i, k in enumerate(self.keys)}
        self.looked_for = [position[k] for k in job_keys]
        self.cursor = 0  # looked_for[:cursor] are all in the spill file
        self.offset = np.full(len(self.keys), -1, dtype=np.int64)
        self.length = np.zeros(len(self.keys), dtype=np.int64)
        target = Path(path)
        regular = not target.is_symlink() and (target.is_file() or not target.exists())
        beside = target.parent if regular and target.parent.is_dir() else None
        try:  # unlinked at once: nothing is left behind if this process is killed
            self.spill = tempfile.TemporaryFile(dir=beside)  # noqa: SIM115 - closed by finish/discard
        except OSError:
            self.spill = tempfile.TemporaryFile()  # noqa: SIM115 - closed by finish/discard
        self.spilled = 0
        self.spill_failed = False
        self.tally = Tally()

    def advance(self, budget_s: float = ADVANCE_BUDGET_S) -> int:
        """Spill the records stored since the last call (looked for a page past the first
        job still without one), for about ``budget_s`` seconds at most; returns how many."""
        began = time.monotonic()
        got = 0
        start = self.cursor
        if self.spill_failed:
            return 0
        while start < len(self.looked_for) and time.monotonic() - began < budget_s:
            window = [p for p in self.looked_for[start : start + PAGE] if self.offset[p] < 0]
            start += PAGE
            if window:
                values = fetch(self.r, self.batch_id, [self.keys[p] for p in window])
                found = [(p, v) for p, v in zip(window, values, strict=True) if v is not None]
                try:
                    self._spill([p for p, _ in found], [v for _, v in found])
                except OSError:  # e.g. a full disk: finish() writes from Redis, or says why
                    self.spill_failed = True
                    return got
                got += len(found)
                if len(found) < len(window):
                    break
        while self.cursor < len(self.looked_for) and self.offset[self.looked_for[self.cursor]] >= 0:
            self.cursor += 1
        return got

    def finish(self) -> Tally:
        """Fetch what is not spilled yet, write the file in record order, fsync it and rename
        it into place; returns the counts of its records."""
        if self.spill_failed:
            return self._from_redis()
        missing = np.flatnonzero(self.offset < 0)
        for i in range(0, len(missing), PAGE):
            part = [int(p) for p in missing[i : i + PAGE]]
            values = fetch(self.r, self.batch_id, [self.keys[p] for p in part])
            found = [(p, v) for p, v in zip(part, values, strict=True) if v is not None]
            try:
                self._spill([p for p, _ in found], [v for _, v in found])
            except OSError:
                return self._from_redis()
        stored = int(self.r.hlen(keys.batch_records(self.batch_id)))
        if stored != len(self.keys) or self.spilled != len(self.keys):
            return self._from_redis()
        try:
            self.spill.flush()
        except OSError:  # the last of the spill did not fit: the file is written from Redis
            return self._from_redis()
        fd = self.spill.fileno()
        out = AtomicFile(self.path)
        try:
            out.writelines(
                os.pread(fd, n, o) for o, n in zip(self.offset.tolist(), self.length.tolist())
            )
        except BaseException:
            out.discard()
            raise
        finally:
            self.spill.close()
        out.commit()
        return self.tally

    def discard(self) -> None:
        """Leave no file (the batch was left unfinished)."""
        with contextlib.suppress(OSError):  # what is still buffered may not fit: it is not needed
            self.spill.close()

    def _spill(self, positions: list[int], values: list[bytes | None]) -> None:
        records = decode(self.batch_id, [self.keys[p] for p in positions], values)
        end = self.spill.seek(0, os.SEEK_END)
        lines = []
        for p, rec in zip(positions, records, strict=True):
            self.tally.add(rec)
            line = jsonl_bytes(rec)
            self.offset[p] = end
            self.length[p] = len(line)
            end += len(line)
            lines.append(line)
        self.spill.writelines(lines)
        self.spilled += len(lines)

    def _from_redis(self) -> Tally:
        """The file from Redis in record order, as ``ktour collect`` writes it."""
        self.discard()
        self.tally = Tally()
        names = record_keys(self.r, self.batch_id)
        out = AtomicFile(self.path)
        try:
            for i in range(0, len(names), PAGE):
                part = names[i : i + PAGE]
                records = decode(self.batch_id, part, fetch(self.r, self.batch_id, part))
                for rec in records:
                    self.tally.add(rec)
                out.writelines(map(jsonl_bytes, records))
        except BaseException:
            out.discard()
            raise
        out.commit()
        return self.tally


__all__ = ["ADVANCE_BUDGET_S", "RecordStream"]
