"""``ktour count``: the knight's tours from every start square, counted exhaustively on the
workers (sub-jobs with their first moves fixed; partial counts kept in Redis, so a rerun
resumes).

Planning is :mod:`knights_tour.counting.plan`, storage :mod:`knights_tour.counting.store`, sending
and waiting :mod:`knights_tour.counting.client`, the backend
:func:`knights_tour.local.backend.open_backend`. This module declares the options and renders.
"""

from __future__ import annotations

import time
from typing import Any

import click

from knights_tour.batches.estimate import count_concerns, count_cpu_s, dp_count_s, format_hours
from knights_tour.board import Board, Square, parse_board
from knights_tour.commands._checks import (
    check_out_path,
    confirm_big,
    require_non_negative,
    require_positive,
    require_workers,
)
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_option, timeout_option, workers_option, yes_option
from knights_tour.commands._shared import note, progress_hooks
from knights_tour.commands.count_dp import (
    count_failed,
    count_stopped,
    echo_grid,
    run_dp_count,
    write_record,
)
from knights_tour.counting import store as count_store
from knights_tour.counting.client import restart_count, stop_count, submit_count, wait_for_count
from knights_tour.counting.method import METHODS, MethodChoice, choose_method
from knights_tour.counting.plan import CountPlan, CountReport, plan_count
from knights_tour.local.backend import Backend, open_backend
from knights_tour.settings import get_settings
from knights_tour.store.waiting import WaitHooks


def _send_and_wait(
    backend: Backend, count_id: str, plan: CountPlan, timeout: float | None
) -> tuple[count_store.CountStatus, list[str]]:
    """Send the sub-jobs without a stored partial count and wait for the count; returns the
    last count status and the keys of the sub-jobs sent (the others are reused from an earlier
    run)."""
    client = backend.client
    missing = count_store.missing_subjobs(client, count_id, plan)
    reused = len(plan.subjobs) - len(missing)
    if not missing:
        if not plan.subjobs:
            note(f"count {count_id}: every start square is ruled out without search (no sub-jobs)")
        else:
            note(
                f"count {count_id}: all {len(plan.subjobs)} sub-jobs already counted; "
                "summing the stored partial counts"
            )
        return count_store.count_status(client, count_id), []
    backend.start_workers()
    backend.abandon_on_error(f"count {count_id}", lambda r: stop_count(r, count_id))
    submit_count(backend.url, count_id, missing)
    note(
        f"count {count_id}: {len(missing)} of {len(plan.subjobs)} sub-jobs submitted to "
        f"{backend.where}" + (f" ({reused} already counted)" if reused else "")
    )
    check = backend.check_workers(f"count {count_id}", "sub-jobs")
    with progress_hooks(
        "sub-jobs",
        len(plan.subjobs),
        lambda st: f"nodes {st['nodes']:,}",
        check,
        what=f"count {count_id}",
    ) as callbacks:
        status = wait_for_count(client, count_id, timeout_s=timeout, hooks=WaitHooks(**callbacks))
    if status["complete"]:
        backend.finished()
    return status, [sj.key for sj in missing]


def _stopped(
    backend: Backend, count_id: str, why: str, status: count_store.CountStatus | None
) -> None:
    count_stopped(
        backend,
        count_id,
        why,
        status,
        unknown="sub-jobs counted so far kept",
        kept=", other work untouched",
    )


def _print_report(
    report: CountReport, record: dict[str, Any], start_sq: Square | None, count_id: str
) -> None:
    echo_grid(report, start_sq)
    span = record.get("counting_s")
    counting = (
        f"counting {span:.2f} s (this run's first sub-job's start to its last one's end); "
        if span is not None
        else ""
    )
    click.echo(
        f"sub-jobs: {report.subjobs} (depth {report.depth}; "
        f"{record['reused_subjobs']} reused from an earlier run); nodes "
        f"{report.nodes:,}; summed sub-job time {record['subjob_s']:.2f} s; {counting}wall "
        f"{report.elapsed_s:.2f} s"
    )
    click.echo(f"count id: {count_id}")


@click.command()
@click.argument("size")
@click.option(
    "--start",
    "start",
    default=None,
    metavar="SQ",
    help="Count only the tours from this square (a1 or r,c) and its symmetric images.",
)
@workers_option
@click.option("--closed", is_flag=True, help="Count closed (re-entrant) tours instead.")
@click.option(
    "--depth",
    type=int,
    default=None,
    metavar="K",
    help="Moves fixed per sub-job (default: about 12 sub-jobs per counted square; "
    "no split up to 25 squares).",
)
@click.option(
    "--no-symmetry",
    "no_symmetry",
    is_flag=True,
    help="Count every square directly instead of one per symmetry class.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Discard partial counts stored by an earlier run of the same count: in Redis, and "
    "for the DP its layers checkpointed under this machine's KT_DATA_DIR/frontier (workers "
    "on other machines keep theirs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead.")
@click.option(
    "--out", "out", default=None, metavar="FILE", help="Also write the report as JSON to FILE."
)
@click.option(
    "--method",
    "method",
    type=click.Choice(METHODS),
    default="auto",
    show_default=True,
    help="Enumeration (every tour searched) or the frontier "
    "DP (counts without listing tours); auto: enumeration up to 6x6, the DP beyond.",
)
@click.option(
    "--memory-gb",
    "memory_gb",
    type=float,
    default=8.0,
    show_default=True,
    metavar="G",
    help="DP only: bound on the layers' tables of all local workers together (GiB; each of "
    "K local workers gets G/K); with --redis and no --workers, the bound per DP task (each "
    "worker process running one). A layer that needs more is built in parts.",
)
@redis_option
@timeout_option(
    "Stop after S seconds: its queued sub-jobs are dropped, partial counts "
    "stay stored (the same command resumes); exit 1."
)
@yes_option
def count(
    size,
    start,
    workers,
    closed,
    depth,
    no_symmetry,
    fresh,
    as_json,
    out,
    redis_url,
    timeout,
    yes=False,
    method="auto",
    memory_gb=8.0,
) -> ExitCode:
    """Count the knight's tours from every start square of SIZE (exhaustively), in parallel.

    Directed open tours are counted (an open tour is counted once from each end; the grid of
    n x n sums to OEIS A165134: 1728 for 5, 6,637,920 for 6). One square per symmetry class is
    counted and copied to its class. Each count is split into sub-jobs (first moves fixed) that
    run as Celery tasks; partial counts are stored in Redis per sub-job, so running the same
    command again resumes: finished sub-jobs are not counted twice. By the frontier DP (auto
    beyond 6x6) the sub-jobs are its trunk sweeps and start classes, checkpointed per layer
    under the workers' KT_DATA_DIR/frontier. Without --redis an embedded
    Redis and K local workers are started, as for 'ktour run'. A count estimated to take longer
    than KT_CONFIRM_HOURS on K workers asks first (--yes does not ask; without a terminal it
    is refused). Exit 0 when the count is complete, 1 if not (timeout, failed sub-jobs, the
    question answered no), 2 on bad input, 130 on Ctrl-C (its queued sub-jobs dropped, partial
    counts kept).
    """
    board = parse_board(size)
    start_sq = board.parse_square(start) if start is not None else None
    require_non_negative(depth, "--depth")
    require_workers(workers, redis_url)
    require_positive(timeout, "--timeout")
    check_out_path(out)
    require_positive(memory_gb, "--memory-gb")
    choice = choose_method(board, closed=closed, method=method)
    if choice.method == "dp":  # on the workers: a sub-job per trunk and per start class
        dp_s = dp_count_s(board, start_sq is not None, halves=False)
        confirm_big(
            f"a frontier-DP count on {board.label} takes ~ {format_hours(dp_s / 3600)} "
            "of worker time in all (a trunk and its classes; classes run beside the trunk)",
            count_concerns(dp_s, 1),
            yes,
        )
        where = {"redis_url": redis_url, "workers": workers, "fresh": fresh, "timeout": timeout}
        return run_dp_count(
            board, start_sq, choice, memory_gb=memory_gb, as_json=as_json, out=out, **where
        )
    plan = plan_count(board, start_sq, closed=closed, depth=depth, use_symmetry=not no_symmetry)
    _confirm_enumeration(board, plan, start_sq, closed, no_symmetry, workers, yes)
    params = {
        "size": board.label,
        "start": None if start_sq is None else list(start_sq),
        "closed": closed,
        "depth": plan.depth,
        "symmetry": not no_symmetry,
    }
    count_id = count_store.count_id_for(plan, start_sq)
    began = time.monotonic()
    got = _enumerate(plan, count_id, params, choice, redis_url, workers, fresh, timeout, began)
    if isinstance(got, ExitCode):
        return got
    report, reused = got
    record = report.to_dict()
    record["reused_subjobs"] = reused
    if write_record(record, as_json, out):
        return ExitCode.OK
    _print_report(report, record, start_sq, count_id)
    return ExitCode.OK


def _confirm_enumeration(
    board: Board,
    plan: CountPlan,
    start_sq: Square | None,
    closed: bool,
    no_symmetry: bool,
    workers: int | None,
    yes: bool,
) -> None:
    """Ask before an enumeration estimated above the confirmation limits (see
    :func:`knights_tour.commands._checks.confirm_big`)."""
    local = workers or get_settings().workers  # a count with --workers 0 runs elsewhere
    full = (
        plan
        if start_sq is None and not no_symmetry
        else plan_count(board, closed=closed, depth=plan.depth)
    )
    cpu_s = count_cpu_s(board, len(plan.classes), len(full.classes)) if plan.subjobs else 0.0
    confirm_big(
        f"an exhaustive count on {board.label} takes ~ "
        f"{format_hours(cpu_s / 3600)} of CPU, ~ {format_hours(cpu_s / local / 3600)} "
        f"on {local} worker(s)",
        count_concerns(cpu_s, local),
        yes,
    )


def _enumerate(
    plan: CountPlan,
    count_id: str,
    params: dict[str, Any],
    choice: MethodChoice,
    redis_url: str | None,
    workers: int | None,
    fresh: bool,
    timeout: float | None,
    began: float,
) -> tuple[CountReport, int] | ExitCode:
    """Register the count, send its missing sub-jobs and wait: ``(report, sub-jobs reused)``
    when complete, ExitCode.INTERRUPTED on Ctrl-C, ExitCode.NOT_OK when stopped or failed
    (said in one line; the same command resumes)."""
    with open_backend(redis_url, workers, start_workers=False, notify=note) as backend:
        note(f"method: {choice.reason}")  # once Redis answers: a bad URL is the only line
        try:
            if fresh:
                restart_count(backend.client, count_id)
            count_store.register_count(backend.client, count_id, plan, params)
            status, sent = _send_and_wait(backend, count_id, plan, timeout)
        except KeyboardInterrupt:
            _stopped(backend, count_id, "by Ctrl-C", None)
            return ExitCode.INTERRUPTED
        if status["complete"]:
            report = count_store.assemble_count(
                backend.client, count_id, plan, time.monotonic() - began, counted=sent
            )
            return report, len(plan.subjobs) - len(sent)
        if status.get("errors"):
            count_failed(backend, count_id, status)
        else:
            _stopped(backend, count_id, f"by --timeout after {timeout:g} s", status)
    return ExitCode.NOT_OK


__all__ = ["count"]
