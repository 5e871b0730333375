"""``ktour count`` by the frontier DP: runs the count on the Celery workers (one sub-job per
trunk and per searched start class, :mod:`knights_tour.counting.dp_client`), prints progress per
layer from what the workers report, and the same grid as an enumeration.

The workers checkpoint every layer under their ``KT_DATA_DIR/frontier``; the sub-jobs' results
are stored in Redis, so running the same command again after an interruption skips what is
stored and resumes each sweep from its last finished layer. This module renders;
:mod:`knights_tour.commands.count` declares the options and picks the method.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import click

from knights_tour.batches.estimate import DP_TRANSITIONS_PER_S, dp_count_transitions, format_hours
from knights_tour.board import Board, Square
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._shared import note, progress_hooks
from knights_tour.counting import store as count_store
from knights_tour.counting.client import restart_count, stop_count
from knights_tour.counting.dp_client import assemble_dp_count, register_dp_count, wait_for_dp_count
from knights_tour.counting.dp_jobs import dp_count_id, dp_plan
from knights_tour.counting.method import MethodChoice
from knights_tour.counting.plan import CountReport
from knights_tour.counting.records import DpProgress, DpSubJob
from knights_tour.local.backend import Backend, open_backend
from knights_tour.output.atomicfile import atomic_write_text
from knights_tour.settings import get_settings
from knights_tour.store.waiting import WaitHooks

PROGRESS_EVERY_S = 10.0
"""Least seconds between two progress lines (the last layer of a sweep is always shown)."""


def _grid_lines(report: CountReport) -> list[str]:
    """The per-square grid as text lines: rank labels on the left (rank 1 at the bottom), file
    letters below; ``-`` for a square that was not counted."""
    board = Board(report.rows, report.cols)
    cells = [["-" if v is None else str(v) for v in row] for row in report.grid]
    width = max(len(c) for row in cells for c in row)
    label_w = len(str(board.rows))
    lines = [
        f"{board.rows - r:>{label_w}}  " + " ".join(c.rjust(width) for c in row)
        for r, row in enumerate(cells)
    ]
    lines.append(
        " " * (label_w + 2) + " ".join(board.file_name(c).rjust(width) for c in range(board.cols))
    )
    return lines


def write_record(record: dict[str, Any], as_json: bool, out: str | None) -> bool:
    """Write a count's JSON ``record`` to the file ``out`` (indented) if given, and with
    ``as_json`` print it on one line; True if printed (nothing more is to be printed).

    Raises
    ------
    OSError
        If ``out`` cannot be written.
    """
    if out is not None:
        atomic_write_text(out, json.dumps(record, indent=1) + "\n")
    if as_json:
        click.echo(json.dumps(record, separators=(",", ":")))
    return as_json


def echo_grid(report: CountReport, start_sq: Square | None) -> None:
    """Print a count's grid (:func:`_grid_lines`) under its title, then its total (or the
    count from ``start_sq``, else from the first class counted) and its symmetry note."""
    board = Board(report.rows, report.cols)
    kind = "closed" if report.closed else "open"
    click.echo(f"directed {kind} knight's tours per start square, {board.label}:")
    for line in _grid_lines(report):
        click.echo(line)
    if report.total is not None:
        click.echo(f"total: {report.total:,}")
    else:
        sq = start_sq if start_sq is not None else next(iter(report.classes))
        click.echo(f"tours from {board.algebraic(sq)}: {report.grid[sq[0]][sq[1]]:,}")
    click.echo(report.symmetry_note)


def _progress_line(rec: DpProgress) -> str:
    parts = f", {rec.parts} parts" if rec.parts > 1 else ""
    rate = rec.transitions / rec.seconds if rec.seconds > 0 else 0.0
    return (
        f"dp {rec.sweep}: layer {rec.step + 1}/{rec.n_steps}, "
        f"{rec.states:,} states, {rate:,.0f} transitions/s{parts}"
    )


class _WorkerProgress:
    """Progress lines of a DP count on the workers, from the sweeps' records in Redis (one per
    sweep: its last checkpointed layer): at most one line every :data:`PROGRESS_EVERY_S`
    seconds (and each sweep's last layer), the layer of the sweep that moved last, with the
    share of the estimated transitions done over all sweeps and an ETA at this run's rate
    (the estimate's rate, times the sweeps running, until 1% is done)."""

    def __init__(self, estimate: float) -> None:
        self.estimate = estimate
        self.began = time.monotonic()
        self.base: int | None = None
        self.last_line = 0.0
        self.seen: dict[str, float] = {}

    def __call__(self, records: dict[str, DpProgress]) -> None:
        done = sum(r.done_transitions for r in records.values())
        first = self.base is None
        if first:
            self.base = done
        moved = [r for k, r in records.items() if r.at != self.seen.get(k)]
        self.seen.update((k, r.at) for k, r in records.items())
        if not moved or first:  # the first records are an earlier run's: not news
            return
        now = time.monotonic()
        rec = max(moved, key=lambda r: r.at)
        finished = any(r.step + 1 >= r.n_steps for r in moved)
        if now - self.last_line < PROGRESS_EVERY_S and not finished:
            return
        self.last_line = now
        note(f"{_progress_line(rec)}; {self.eta(done, now)}")

    def eta(self, done: int, now: float) -> str:
        """``"~ 38% of the estimated 1.5e+09 transitions, ETA ~ 27 min"`` (or past it)."""
        if done > self.estimate:
            return f"past the estimated {self.estimate:.2g} transitions, ETA unknown"
        ran = done - (self.base or 0)
        wall = now - self.began
        timed = ran >= 0.01 * self.estimate and wall > 0
        rate = ran / wall if timed else DP_TRANSITIONS_PER_S
        left_s = (self.estimate - done) / rate
        return (
            f"~ {100 * done / self.estimate:.0f}% of the estimated "
            f"{self.estimate:.2g} transitions, ETA ~ {format_hours(left_s / 3600)}"
        )


def run_dp_count(
    board: Board,
    start_sq: Square | None,
    choice: MethodChoice,
    *,
    memory_gb: float,
    as_json: bool,
    out: str | None,
    redis_url: str | None = None,
    workers: int | None = None,
    fresh: bool = False,
    timeout: float | None = None,
) -> ExitCode:
    """Count by the DP on the Celery workers (one sub-job per trunk and per searched start
    class, :mod:`knights_tour.counting.dp_client`) and print (or write) the report. Exit 0
    when complete, 1 when stopped (timeout) or a sub-job failed, 130 on Ctrl-C (stored
    results and checkpoints kept: the same command resumes)."""
    plan = dp_plan(board, start_sq)
    count_id = dp_count_id(plan)
    began = time.monotonic()
    with open_backend(redis_url, workers, start_workers=False, notify=note) as backend:
        note(f"method: {choice.reason}")
        per_task_gb = memory_gb / max(1, backend.worker_count)
        items = plan.subjobs(int(per_task_gb * 2**30))
        sent: set[str] = set()
        try:
            if fresh:
                dropped = restart_count(backend.client, count_id)
                root = get_settings().frontier_path
                removed = plan.remove_sweeps(root)
                note(
                    f"--fresh: {removed} checkpoint folder(s) of this count removed under "
                    f"{root}; {dropped} queued task(s) of it dropped"
                    + (
                        ""
                        if backend.worker_count > 0
                        else "; workers on other machines keep theirs under their KT_DATA_DIR"
                    )
                )
            items = register_dp_count(
                backend.client,
                count_id,
                plan,
                items,
                {"size": board.label, "start": None if start_sq is None else list(start_sq)},
            )
            status = _run(backend, count_id, board, start_sq, items, sent, per_task_gb, timeout)
        except KeyboardInterrupt:
            _stop(backend, count_id, "by Ctrl-C")
            return ExitCode.INTERRUPTED
        if status["complete"]:
            report = assemble_dp_count(
                backend.client, count_id, plan, items, time.monotonic() - began, sent
            )
        elif status.get("errors"):
            count_failed(backend, count_id, status)
            return ExitCode.NOT_OK
        else:
            _stop(backend, count_id, f"by --timeout after {timeout:g} s")
            return ExitCode.NOT_OK
    return _print(report, choice, start_sq, as_json, out)


def _run(
    backend: Backend,
    count_id: str,
    board: Board,
    start_sq: Square | None,
    items: list[DpSubJob],
    sent: set[str],
    per_task_gb: float,
    timeout: float | None,
) -> count_store.CountStatus:
    """Send the sub-jobs without a result as their layers are ready and wait."""
    client = backend.client
    done = count_store.counted(count_store.load_partials(client, count_id))
    missing = [it for it in items if it.key not in done]
    if not missing:
        note(f"count {count_id}: all {len(items)} sub-jobs already counted")
        return count_store.count_status(client, count_id)
    backend.start_workers()
    backend.abandon_on_error(f"count {count_id}", lambda r: stop_count(r, count_id))
    reused = len(items) - len(missing)
    note(
        f"count {count_id}: {len(missing)} of {len(items)} DP sub-jobs (trunks, then start "
        f"classes as their trunk's layer is ready) to run on {backend.where}"
        + (f" ({reused} already counted)" if reused else "")
        + f"; layers checkpointed under each worker's KT_DATA_DIR/frontier (here "
        f"{get_settings().frontier_path}; the same command resumes); tables bounded "
        f"by {per_task_gb:g} GiB per task"
    )

    def on_sent(keys: list[str]) -> None:
        note(f"dp: sent {', '.join(keys)}")

    check = backend.check_workers(f"count {count_id}", "sub-jobs")
    with progress_hooks(
        "sub-jobs", len(items), lambda st: "", check, what=f"count {count_id}"
    ) as callbacks:
        transitions = dp_count_transitions(board, start_sq is not None, halves=False)
        progress = _WorkerProgress(transitions)
        status = wait_for_dp_count(
            client,
            backend.url,
            count_id,
            items,
            sent=sent,
            timeout_s=timeout,
            hooks=WaitHooks(**callbacks),
            on_layers=progress,
            on_sent=on_sent,
        )
    if status["complete"]:
        backend.finished()
    return status


def count_stopped(
    backend: Backend,
    count_id: str,
    why: str,
    status: count_store.CountStatus | None,
    *,
    unknown: str,
    kept: str,
) -> None:
    """Stop the count ``count_id`` (its own queued sub-jobs dropped) and say so in one line:
    how far it got (``status`` read again once the workers are stopped: the last poll misses
    what they counted since; ``unknown`` if Redis cannot say), what is kept (``kept``, the
    method's own words) and how to resume. For ``ktour count`` by either method."""
    dropped = backend.stop_work()
    with contextlib.suppress(Exception):  # best effort: Redis may be going away
        status = count_store.count_status(backend.client, count_id)
    got = f"{status['done']}/{status['total']} sub-jobs counted (kept)" if status else unknown
    drop = (
        f"{dropped} queued task(s) of this count dropped"
        if dropped is not None
        else "its queued tasks could not be dropped (Redis unreachable)"
    )
    note(f"count {count_id} stopped {why}: {got}; {drop}{kept}; the same command resumes it")


def count_failed(backend: Backend, count_id: str, status: count_store.CountStatus) -> None:
    """Stop the count ``count_id``, some of whose sub-jobs failed, and say so in one line."""
    backend.stop_work()
    note(
        f"count {count_id} incomplete ({status['errors']} sub-job(s) failed): "
        f"{status['done']}/{status['total']} sub-jobs done; run the same command "
        "again to resume"
    )


def _stop(backend: Backend, count_id: str, why: str) -> None:
    count_stopped(backend, count_id, why, None, unknown="kept", kept="; checkpoints kept")


def _print(
    report: CountReport,
    choice: MethodChoice,
    start_sq: Square | None,
    as_json: bool,
    out: str | None,
) -> ExitCode:
    record = report.to_dict()
    record["method_reason"] = choice.reason
    if write_record(record, as_json, out):
        return ExitCode.OK
    echo_grid(report, start_sq)
    click.echo(f"method: {choice.reason}")
    click.echo(
        f"sub-jobs: {report.subjobs} ({record['reused_subjobs']} reused from an earlier run); "
        f"transitions {report.nodes:,}; wall {report.elapsed_s:.2f} s; peak RSS "
        f"{record['peak_rss_bytes'] / 2**30:.2f} GiB in the largest worker process, "
        f"{sum(record['peak_rss_bytes_per_worker'].values()) / 2**30:.2f} GiB summed over "
        f"{len(record['peak_rss_bytes_per_worker'])} worker(s)"
    )
    click.echo(f"count id: {record['count_id']}")
    return ExitCode.OK


__all__ = ["count_stopped", "count_failed", "echo_grid", "run_dp_count", "write_record"]
