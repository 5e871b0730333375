"""What the batch commands share beyond :mod:`knights_tour.commands._shared`: waiting for a
batch with a progress display, writing its records to a file, and the per-board summary
table and mismatch report (``run``, ``resume`` and ``collect``).

Kept apart from ``_shared`` because it loads the batches package (Celery's door included),
which ``ktour solve`` never needs.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator

import redis
from rich.console import Console
from rich.table import Table

from knights_tour.batches.client import WaitedBatch, stream_records, wait_for_batch
from knights_tour.batches.estimate import planned_s_per_job
from knights_tour.batches.progress import batch_progress
from knights_tour.batches.record_stream import stored_pages, write_jsonl
from knights_tour.batches.store import submission
from knights_tour.batches.verdict import BoardRow, Tally, TotalRow, summary_total
from knights_tour.commands._shared import note, progress_hooks
from knights_tour.output import parquet
from knights_tour.output.atomicfile import AtomicFile, atomic_write_lines
from knights_tour.output.recordfile import record_lines
from knights_tour.store.waiting import WaitHooks
from knights_tour.tours.pages import reverified


def summary_table(rows: list[BoardRow], title: str) -> Table:
    """The per-board summary rows (:meth:`~knights_tour.batches.verdict.Tally.rows`) as a
    table, with a total row when there are several boards."""
    verify = any(r["cpsat_checked"] for r in rows)
    table = Table(title=title)
    for col in ("board", "starts", "found", "no tour (proof)", "unknown", "errors", "mismatches"):
        table.add_column(col, justify="left" if col in ("board", "no tour (proof)") else "right")
    if verify:
        table.add_column("cpsat agrees", justify="right")
    table.add_column("job s", justify="right")

    def cells(r: BoardRow | TotalRow, no_tour: str) -> list[str]:
        out = [
            r["board"],
            str(r["starts"]),
            str(r["found"]),
            no_tour,
            str(r["unknown"]),
            str(r["error"]),
            str(r["mismatch"]),
        ]
        if verify:
            out.append(f"{r['cpsat_agree']}/{r['cpsat_checked']}")
        return out + [f"{r['seconds']:.2f}"]

    for r in rows:
        proofs = ", ".join(f"{k} {v}" for k, v in sorted(r["no_tour"].items()))
        nt = f"{sum(r['no_tour'].values())}" + (f" ({proofs})" if proofs else "")
        table.add_row(*cells(r, nt))
    if len(rows) > 1:
        tot = summary_total(rows)
        table.add_section()
        table.add_row(*cells(tot, str(tot["no_tour"])), style="bold")
    return table


def report_mismatches(tally: Tally) -> None:
    """Loud report of every CP-SAT disagreement / failed check, on stderr."""
    bad = tally.failed
    if not bad:
        return
    con = Console(stderr=True, highlight=False)
    con.print(f"[bold red]CP-SAT CROSS-CHECK FAILED for {tally.failed_count} job(s):[/]")
    for r in bad[:50]:
        con.print(
            f"[red]  {r.rows}x{r.cols} from {r.start_square}: {r.solver} says "
            f"{r.status.value}, CP-SAT says {r.cpsat_status.value if r.cpsat_status else None}"
            f" - {r.cpsat_note or ''}[/]"
        )
    if tally.failed_count > 50:
        con.print(f"[red]  ... and {tally.failed_count - 50} more (see the records)[/]")


def write_records(client: redis.Redis, batch_id: str, out: str | None, fmt: str = "jsonl") -> Tally:
    """Stream the records of the batch as JSON Lines, JSON, CSV or Parquet to ``out`` (``-`` =
    stdout, not for Parquet; a file is written atomically; None = nowhere), counting them as
    they pass; returns the counts. Every ``found`` tour is checked again on the way: one that
    is not a knight's tour is written, and counted, as an ``error`` record
    (:func:`knights_tour.tours.pages.reverified`)."""
    with collector_paused():
        return _write_records(client, batch_id, out, fmt)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration: writing a batch's records
    makes and drops millions of small objects, none of them in a cycle, and each automatic
    collection would walk every object the command has loaded (Celery, numba, rich) again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _write_records(client: redis.Redis, batch_id: str, out: str | None, fmt: str) -> Tally:
    tally = Tally()

    def counted():
        for rec in stream_records(client, batch_id):
            rec = reverified(rec)
            tally.add(rec)
            yield rec

    if out is None:
        return write_jsonl(client, batch_id, lambda chunks: None)
    if fmt == "parquet":
        parquet.write_pages(out, stored_pages(client, batch_id, tally, parquet.table))
    elif out == "-":
        sys.stdout.flush()  # what was echoed before goes first
        if fmt == "jsonl":
            tally = write_jsonl(client, batch_id, sys.stdout.buffer.writelines)
        else:
            sys.stdout.buffer.writelines(record_lines(counted(), fmt))
        sys.stdout.buffer.flush()
    elif fmt == "jsonl":
        file = AtomicFile(out)
        try:
            tally = write_jsonl(client, batch_id, file.writelines)
        except BaseException:
            file.discard()
            raise
        file.commit()
    else:
        atomic_write_lines(out, record_lines(counted(), fmt))
    return tally


def batch_info(status: WaitedBatch) -> str:
    info = " ".join(f"{k} {v}" for k, v in status["counts"].items())
    if status.get("mismatches"):
        info += f" [red]mismatch {status['mismatches']}[/]"
    return info


def wait_with_progress(
    client,
    batch_id: str,
    total: int,
    timeout: float | None,
    recover_url: str,
    check: Callable[[WaitedBatch], None] | None = None,
    workers: int = 0,
    began: float | None = None,
) -> WaitedBatch:
    """Wait for the batch with a progress bar (a line every ``KT_PROGRESS_S`` when stderr is
    not a terminal); once it is complete, one line saying how long it took from the start of
    its submission: ``began`` (unix seconds), else the start of its latest submission noted in
    Redis (:func:`~knights_tour.batches.store.submission`); a batch complete before the wait,
    or with no such note, is said to be so instead. With ``workers`` (the worker processes it
    runs on, where known) the ETA starts from the batch's estimate
    (:func:`~knights_tour.batches.estimate.planned_s_per_job`)."""
    waited_from = time.time()
    if began is None:
        already = batch_progress(client, batch_id)
        noted = None if already and already["complete"] else submission(client, batch_id)
        began = noted[0] if noted is not None else None

    def plan(status: WaitedBatch) -> float | None:
        return planned_s_per_job(status["params"] or {}, workers)

    with progress_hooks(
        "jobs", total, batch_info, check, what=f"batch {batch_id}", plan=plan
    ) as hooks:
        status = wait_for_batch(
            client, batch_id, timeout_s=timeout, recover_url=recover_url, hooks=WaitHooks(**hooks)
        )
    if status["complete"]:
        done = f"batch {batch_id}: {status['done']}/{status['total']} jobs done"
        if began is not None:
            note(f"{done} in {time.time() - began:.1f} s from the start of its submission")
        else:
            note(f"{done} ({time.time() - waited_from:.1f} s waited)")
    return status


__all__ = [
    "summary_table",
    "report_mismatches",
    "write_records",
    "batch_info",
    "wait_with_progress",
]
