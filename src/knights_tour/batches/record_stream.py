"""A batch's JSON Lines file written while the batch runs.

``ktour run`` knows its batch's jobs and the order their tasks were sent in. While it waits,
:meth:`RecordStream.advance` fetches the records stored since its last call, a page of job keys
in that order at a time (one HMGET, one bulk decode), and writes their JSON lines to a spill file
as they come; when the batch is complete, :meth:`RecordStream.finish` fetches the rest and
copies the lines into the output file in record order
(:func:`knights_tour.batches.records.in_record_order`). The file is the one
:func:`knights_tour.batches.records.iter_records` gives (``ktour collect``), byte for byte: should
the batch's stored keys not be its jobs' (a record under another key), the file is written
from Redis in record order instead. Memory: the batch's job keys, two integers per job and one
page of records; disk: the spill file (deleted at the end) beside the output.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np
import redis

from knights_tour.batches.progress import get_batch_meta
from knights_tour.batches.records import (
    DECODE_ERRORS,
    PAGE,
    decode,
    fetch,
    in_record_order,
    record_keys,
)
from knights_tour.batches.verdict import Tally
from knights_tour.output.atomicfile import AtomicFile
from knights_tour.store import keys
from knights_tour.tours.pages import JsonPage, MovesPage, jsonl_page, moves_page

_Page = TypeVar("_Page")

ADVANCE_BUDGET_S = 0.25
"""Longest a call of :meth:`RecordStream.advance` keeps fetching (seconds): the wait's
progress and its checks run between two calls."""


def write_json_pages(
    r: redis.Redis,
    batch_id: str,
    write: Callable[[JsonPage], None],
    names: list[str] | None = None,
    page: int = PAGE,
) -> None:
    """Hand the JSON Lines text of a batch's records in record order (or of the records stored
    under ``names``, in that order) to ``write``, a page at a time, each page as
    :func:`knights_tour.tours.pages.jsonl_page` gives it (every ``found`` tour checked again;
    the records' tours left out). The pages are fetched and rendered ahead on
    :data:`RENDER_THREADS` threads (the rendering releases the GIL), at most two pages a thread
    ahead of ``write``; a page's buffer is reused once ``write`` has returned, so ``write``
    must be done with the page's chunks by then (write them; keep no memoryview).

    Raises
    ------
    ValueError
        As :func:`knights_tour.tours.stored.decode_stored`.
    redis.RedisError
        If Redis fails.
    """
    names = record_keys(r, batch_id) if names is None else names
    free: deque[np.ndarray] = deque()

    def render(i: int) -> JsonPage:
        part = names[i : i + page]
        values = fetch(r, batch_id, part)
        return _page(jsonl_page, batch_id, part, values, _reused(free))

    for done in _ahead(render, range(0, len(names), page)):
        write(done)
        free.append(done.buffer)


def _ahead(render: Callable[[int], _Page], starts: range) -> Iterator[_Page]:
    """``render(i)`` for each ``i`` of ``starts``, in order, made on :data:`RENDER_THREADS`
    threads at most two a thread ahead; the next is started only when the consumer asks for
    the one after the last it got (so what it did with that one is done)."""
    todo = iter(starts)
    with ThreadPoolExecutor(RENDER_THREADS, thread_name_prefix="kt-render") as pool:
        ahead = deque(pool.submit(render, i) for i in itertools.islice(todo, 2 * RENDER_THREADS))
        try:
            while ahead:
                yield ahead.popleft().result()
                ahead.extend(pool.submit(render, i) for i in itertools.islice(todo, 1))
        finally:
            for future in ahead:
                future.cancel()


RENDER_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Threads that fetch and render pages of records ahead of the writer."""


def write_jsonl(
    r: redis.Redis, batch_id: str, lines: Callable[[list[bytes | memoryview]], None]
) -> Tally:
    """Write the JSON Lines text of batch ``batch_id``'s records in record order with
    ``lines`` (a file's ``writelines``), every ``found`` tour checked again
    (:func:`write_json_pages`): the bytes of ``ktour collect`` and of
    ``ktour run --out``. Returns the counts of the records written.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    get_batch_meta(r, batch_id)
    tally = Tally()

    def write(page: JsonPage) -> None:
        tally.add_many(page.records)
        lines(page.chunks)

    write_json_pages(r, batch_id, write)
    return tally


def _page(
    make: Callable[..., Any], batch_id: str, job_keys: list[str], values: list, *args: Any
) -> Any:
    """``make(values, *args)``; a value that does not decode as a record is reported as
    :func:`knights_tour.batches.records.decode` reports it (a ``CorruptKeyError`` naming its key).
    """
    try:
        return make(values, *args)
    except DECODE_ERRORS:
        decode(batch_id, job_keys, values)  # raises, naming the first value that does not decode
        raise


@overload
def stored_pages(r: redis.Redis, batch_id: str, tally: Tally) -> Iterator[MovesPage]: ...


@overload
def stored_pages(
    r: redis.Redis, batch_id: str, tally: Tally, make: Callable[[MovesPage], _Page]
) -> Iterator[_Page]: ...


def stored_pages(
    r: redis.Redis, batch_id: str, tally: Tally, make: Callable[[MovesPage], Any] | None = None
) -> Iterator[Any]:
    """Batch ``batch_id``'s records in record order with their tours' moves, a page at a time
    (:func:`knights_tour.tours.pages.moves_page`: each ``found`` tour checked again;
    made ahead on several threads), each page's records counted in ``tally`` as it is handed
    on: what a Parquet file of the batch is written from
    (:func:`knights_tour.output.parquet.write_pages`). With ``make``, ``make(page)`` is handed
    on instead, made on the same threads (a page's Arrow table,
    :func:`knights_tour.output.parquet.table`). Each page's moves are its own (no buffer is
    reused), so the consumer may keep pages to write several as one.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    CorruptKeyError
        For a stored value that does not decode as a record.
    """
    get_batch_meta(r, batch_id)
    names = record_keys(r, batch_id)

    def render(i: int) -> tuple[MovesPage, Any]:
        part = names[i : i + PAGE]
        values = fetch(r, batch_id, part)
        page = _page(moves_page, batch_id, part, values)
        return page, page if make is None else make(page)

    for page, made in _ahead(render, range(0, len(names), PAGE)):
        tally.add_many(page.records)
        yield made


def _reused(free: deque[np.ndarray]) -> np.ndarray | None:
    """A buffer of a page already written, if there is one."""
    try:
        return free.popleft()
    except IndexError:
        return None


class RecordStream:
    """The JSON Lines file of batch ``batch_id`` at ``path``, its lines made as the records
    arrive.

    Parameters
    ----------
    r : redis.Redis
    batch_id : str
    job_keys : sequence of str
        The batch's job keys (:attr:`~knights_tour.batches.jobs.Job.key`), in the order their
        tasks were sent (:func:`knights_tour.batches.client.send_order`): the order the
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
        self.buffer: np.ndarray | None = None  # the last page's tours' text, reused
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
        page = _page(
            jsonl_page, self.batch_id, [self.keys[p] for p in positions], values, self.buffer
        )
        end = self.spill.seek(0, os.SEEK_END)
        self.tally.add_many(page.records)
        for p, size in zip(positions, page.sizes, strict=True):
            self.offset[p] = end
            self.length[p] = size
            end += size
        self.spill.writelines(page.chunks)
        self.buffer = page.buffer
        self.spilled += len(page.sizes)

    def _from_redis(self) -> Tally:
        """The file from Redis in record order, as ``ktour collect`` writes it."""
        self.discard()
        out = AtomicFile(self.path)
        try:
            self.tally = write_jsonl(self.r, self.batch_id, out.writelines)
        except BaseException:
            out.discard()
            raise
        out.commit()
        return self.tally


__all__ = [
    "ADVANCE_BUDGET_S",
    "RENDER_THREADS",
    "RecordStream",
    "write_json_pages",
    "write_jsonl",
    "stored_pages",
]
