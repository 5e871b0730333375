"""The batch commands: ``ktour run`` (a whole batch, locally by default), ``submit``,
``status`` (progress with running / queued / failed counts, ETA, ``--watch``), ``collect``,
``batches`` and ``cancel``.

The lifecycle itself (make jobs, submit, wait, recover, collect) is
:mod:`knights_tour.service.batches`; the backend (embedded Redis, local workers, signals) is
:func:`knights_tour.service.local.open_backend`; the verdict is
:mod:`knights_tour.service.verdict`. This module declares the options and renders.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import click
import redis
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from knights_tour.commands._shared import (ExitCode, check_out_path, note, progress_hooks,
                                           redis_option, require_positive, require_workers,
                                           solver_option, stdout_console, workers_option)
from knights_tour.core.jobs import JobOptions
from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.output import parquet
from knights_tour.output.tourfile import atomic_write_lines, record_lines
from knights_tour.service.batches import (DEFAULT_CHUNK_SIZE, cancel_batch, make_jobs,
                                          start_or_resume, stream_records, submit_batch,
                                          wait_for_batch)
from knights_tour.service.local import (NO_WORKERS_WARNING, configured_redis_url,
                                        no_worker_answers, open_backend, open_store)
from knights_tour.service.monitor import batch_progress, batch_states, format_eta, live_workers
from knights_tour.service.verdict import Tally, summary_total
from knights_tour.service.waiting import WaitHooks, poll_until_complete
from knights_tour.store.batches import CANCELLED, batch_state, batch_status, list_batches
from knights_tour.store.connection import connect, mask_url


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by ``run`` and ``submit`` (what each job asks)."""
    opts = [
        click.option("--sizes", "sizes", multiple=True, required=True, metavar="LIST",
                     help="Boards: 5-12 (range of n x n), 8,10, 6x8; repeat to add more."),
        solver_option,
        click.option("--verify", "verify", type=click.Choice(["none", "cpsat"]),
                     default="none", show_default=True,
                     help="Cross-check every job with the CP-SAT model."),
        click.option("--closed", is_flag=True, help="Ask for closed (re-entrant) tours."),
        click.option("--exhaustive", is_flag=True,
                     help="Engine searches without a node budget (proves no_tour)."),
        click.option("--time-limit", "time_limit", type=float, default=None, metavar="S",
                     help="Solver wall-clock limit per job, seconds (default: backend's)."),
        click.option("--node-limit", type=int, default=None, metavar="N",
                     help="Engine node budget per job."),
        click.option("--chunk-size", type=int, default=None, metavar="N",
                     help="Jobs per Celery task (default 16)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _jobs(sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size):
    """``(boards, jobs, params, chunk)`` from the job options; usage errors for bad limits."""
    require_positive(time_limit, "--time-limit")
    options = JobOptions(solver=solver, closed=closed,
                         verify=None if verify == "none" else verify,
                         time_limit_s=time_limit, exhaustive=exhaustive, node_limit=node_limit)
    boards, jobs, params = make_jobs(sizes, options)
    if chunk_size is not None and chunk_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--chunk-size")
    return boards, jobs, params, chunk_size or DEFAULT_CHUNK_SIZE


def _summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    """The per-board summary rows (:meth:`~knights_tour.service.verdict.Tally.rows`) as a
    table, with a total row when there are several boards."""
    verify = any(r["cpsat_checked"] for r in rows)
    table = Table(title=title)
    for col in ("board", "starts", "found", "no tour (proof)", "unknown", "errors",
                "mismatches"):
        table.add_column(col, justify="left" if col in ("board", "no tour (proof)") else "right")
    if verify:
        table.add_column("cpsat agrees", justify="right")
    table.add_column("job s", justify="right")

    def cells(r: dict[str, Any], no_tour: str) -> list[str]:
        out = [r["board"], str(r["starts"]), str(r["found"]), no_tour, str(r["unknown"]),
               str(r["error"]), str(r["mismatch"])]
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


def _report_mismatches(tally: Tally) -> None:
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


def _write_records(client: redis.Redis, batch_id: str, out: str | None,
                   fmt: str = "jsonl") -> Tally:
    """Stream the records of the batch as JSON Lines, JSON, CSV or Parquet to ``out`` (``-`` =
    stdout, not for Parquet; a file is written atomically; None = nowhere), counting them as
    they pass; returns the counts."""
    tally = Tally()

    def counted():
        for rec in stream_records(client, batch_id):
            tally.add(rec)
            yield rec

    if out is None:
        for _ in counted():
            pass
    elif fmt == "parquet":
        parquet.write(out, counted())
    elif out == "-":
        for line in record_lines(counted(), fmt):
            click.echo(line, nl=False)
    else:
        atomic_write_lines(out, record_lines(counted(), fmt))
    return tally


def _batch_info(status: dict[str, Any]) -> str:
    info = " ".join(f"{k} {v}" for k, v in status.get("counts", {}).items())
    if status.get("mismatches"):
        info += f" [red]mismatch {status['mismatches']}[/]"
    return info


def _wait(client, batch_id: str, total: int, timeout: float | None, recover_url: str,
          check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Wait for the batch with a progress bar; then one line: how far it got, how long."""
    began = time.monotonic()
    with progress_hooks("jobs", total, _batch_info, check) as callbacks:
        status = wait_for_batch(client, batch_id, timeout_s=timeout, recover_url=recover_url,
                                hooks=WaitHooks(**callbacks))
    note(f"batch {batch_id}: {status['done']}/{status['total']} jobs done in "
         f"{time.monotonic() - began:.1f} s" + ("" if status["complete"] else " (INCOMPLETE)"))
    return status


@click.command()
@job_options
@workers_option
@click.option("--out", "out", default=None, metavar="FILE",
              help="File for all records: JSON Lines, or Parquet if FILE ends in .parquet "
              "(default results-<batch>.jsonl; '-' = stdout).")
@redis_option
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="Stop waiting after S seconds (records so far are written; exit 1).")
@click.option("--fresh", is_flag=True,
              help="Start a new batch even if an unfinished one with the same arguments exists.")
def run(sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size,
        workers, out, redis_url, timeout, fresh=False) -> ExitCode:
    """Run a batch: one job per start square of every board, in parallel, and collect it.

    Without --redis (and KT_REDIS_URL) an embedded Redis is started with its data under the
    data dir (KT_DATA_DIR), plus K local Celery workers; both are shut down at the end, Ctrl-C
    included. Run again with the same arguments after an interruption, it resumes the
    unfinished batch: jobs already recorded are not recomputed (--fresh starts over); Ctrl-C
    cancels the batch (its queued tasks are dropped). Prints a summary table per board,
    writes every record as JSON Lines, and prints the batch id on the last line. Exit 0 only if every job was decided (found / no_tour) with
    no error and no CP-SAT mismatch; 1 otherwise.
    """
    boards, jobs, params, chunk = _jobs(sizes, solver, verify, closed, exhaustive, time_limit,
                                        node_limit, chunk_size)
    check_out_path(out or "results-<batch>.jsonl")  # the default name is in this directory
    require_workers(workers, redis_url)
    require_positive(timeout, "--timeout")
    with open_backend(redis_url, workers, notify=note) as backend:
        known: list[str] = []
        try:
            batch_id, reused = start_or_resume(backend.url, jobs, params, chunk, fresh=fresh,
                                               on_id=known.append)
            backend.abandon_on_error(f"batch {batch_id}")
            if reused:
                note(f"resuming batch {batch_id}: {reused} of {len(jobs)} jobs already "
                     f"recorded, not recomputed; {len(jobs) - reused} sent to "
                     f"{backend.where} (--fresh starts over)")
            else:
                note(f"batch {batch_id}: {len(jobs)} jobs on {len(boards)} board(s) submitted "
                     f"to {backend.where}")
            status = _wait(backend.client, batch_id, len(jobs), timeout, backend.url,
                           check=backend.check_workers(f"batch {batch_id}", "jobs"))
        except KeyboardInterrupt:
            if known:
                _cancel_on_interrupt(backend.url, known[0])
            raise
        if status.get("state") == CANCELLED:
            raise KnightsTourError(f"batch {batch_id} was cancelled ({status['done']}/"
                                   f"{status['total']} jobs done)")
        out_path = out or f"results-{batch_id}.jsonl"
        try:
            tally = _write_records(backend.client, batch_id, out_path,
                                   "parquet" if out_path.endswith(".parquet") else "jsonl")
        except OutputPathError as exc:  # e.g. a full disk: the records stay in Redis
            raise OutputPathError(f"{exc}; the records of batch {batch_id} are kept: ktour "
                                  f"collect {batch_id} --out FILE", exc.errno) from None

    console = stdout_console()
    if out_path != "-":
        console.print(_summary_table(tally.rows(), f"batch {batch_id}"))
        console.print(f"{tally.records} records written to {out_path}")
    _report_mismatches(tally)
    found = tally.problems(status["total"])
    for p in found:
        note(p)
    click.echo(batch_id if out_path != "-" else f"batch {batch_id}", err=out_path == "-")
    return ExitCode.OK if not found else ExitCode.NOT_OK


def _cancel_on_interrupt(url: str, batch_id: str) -> None:
    """Ctrl-C while waiting: cancel the batch, on a fresh connection (the interrupt may have
    cut a reply on the waiting one). Best effort: Redis may be going away."""
    try:
        client = connect(url)
        try:
            dropped = cancel_batch(client, batch_id)
        finally:
            client.close()
    except (redis.RedisError, KnightsTourError) as exc:
        note(f"batch {batch_id} could not be cancelled: {exc}")
        return
    note(f"batch {batch_id} cancelled (dropped {dropped} queued task(s)); the same command "
         "resumes it")


@click.command()
@click.argument("batch_id", metavar="BATCH")
@redis_option
def cancel(batch_id: str, redis_url: str | None) -> ExitCode:
    """Cancel BATCH: drop its queued tasks; workers skip its jobs and nothing re-sends them.

    Records already stored stay ('ktour collect BATCH'); 'ktour run' with the same arguments
    resumes it. Other batches' tasks are left alone.
    """
    with open_store(redis_url) as backend:
        dropped = cancel_batch(backend.client, batch_id)
        st = batch_status(backend.client, batch_id, max_missing=0)
    click.echo(f"batch {batch_id} cancelled: {st['done']}/{st['total']} jobs done, "
               f"{dropped} queued task(s) dropped")
    return ExitCode.OK


@click.command()
@job_options
@redis_option
def submit(sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size,
           redis_url) -> ExitCode:
    """Submit a batch to the workers listening on a Redis server and return at once.

    Needs --redis or KT_REDIS_URL (for a local batch use 'ktour run'). Prints the batch id alone
    on the last line of stdout; follow it with 'ktour status' / 'ktour collect'.
    """
    url = configured_redis_url(redis_url)
    if url is None:
        raise KnightsTourError(
            "submit needs a Redis URL with workers listening (--redis URL or KT_REDIS_URL); "
            "for a local batch use 'ktour run'"
        )
    boards, jobs, params, chunk = _jobs(sizes, solver, verify, closed, exhaustive, time_limit,
                                        node_limit, chunk_size)
    connect(url).close()
    if no_worker_answers(url):
        note(NO_WORKERS_WARNING)
    batch_id = submit_batch(url, jobs, params=params, chunk_size=chunk)
    click.echo(f"submitted {len(jobs)} jobs on {len(boards)} board(s) to {mask_url(url)}")
    click.echo(batch_id)
    return ExitCode.OK


@click.command()
@click.argument("batch_id", metavar="BATCH")
@click.option("--format", "fmt",
              type=click.Choice(["table", "json", "jsonl", "csv", "parquet"]),
              default="table", show_default=True,
              help="table = per-board summary; json/jsonl/csv/parquet = every record.")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Write the records to FILE atomically instead of stdout (needed for "
              "parquet).")
@click.option("--wait", is_flag=True, help="Wait until every job of the batch has a record.")
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="With --wait: give up after S seconds.")
@redis_option
def collect(batch_id: str, fmt: str, out: str | None, wait: bool, timeout: float | None,
            redis_url: str | None) -> ExitCode:
    """Records of BATCH, one per job, sorted by board and start square.

    Without --redis / KT_REDIS_URL the embedded Redis is started on the data dir (so a batch
    from 'ktour run' can be collected from a new shell) and stopped again. Exit 0 if the batch
    is complete and clean (every job decided, no error, no mismatch), 1 otherwise.
    """
    check_out_path(out)
    if out is not None and fmt == "table":
        fmt = "parquet" if out.endswith(".parquet") else "jsonl"
    if fmt == "parquet" and out in (None, "-"):
        raise click.UsageError("--format parquet writes a file: give --out FILE")
    with open_store(redis_url) as backend:
        st = batch_status(backend.client, batch_id)
        if wait and not st["complete"]:
            st = _wait(backend.client, batch_id, st["total"], timeout, backend.url)
        tally = _write_records(backend.client, batch_id,
                               None if fmt == "table" else out or "-", fmt)
    if fmt == "table":
        stdout_console().print(_summary_table(tally.rows(), f"batch {batch_id}"))
        if not st["complete"]:
            click.echo(f"batch incomplete: {st['done']}/{st['total']} jobs done")
    elif out:
        click.echo(f"{tally.records} records written to {out}", err=True)
    _report_mismatches(tally)
    return ExitCode.OK if not tally.problems(st["total"]) else ExitCode.NOT_OK


@click.command()
@redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def batches(redis_url: str | None, as_json: bool) -> ExitCode:
    """List known batches, oldest first."""
    with open_store(redis_url) as backend:
        items = list_batches(backend.client)
        states = batch_states(backend.client, items)  # queued / running / complete / collected
        for b in items:
            b["state"] = states.get(b["batch_id"])
            if b["state"] not in ("complete", "collected") and (
                    batch_state(backend.client, b["batch_id"]) == CANCELLED):
                b["state"] = CANCELLED
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return ExitCode.OK
    table = Table(title="batches")
    for col in ("batch", "created (UTC)", "state", "done", "sizes", "solver", "verify",
                "closed"):
        table.add_column(col)
    for b in items:
        p = b.get("params") or {}
        table.add_row(b["batch_id"], str(b.get("created_iso") or ""), str(b.get("state")),
                      f"{b['done']}/{b['total']}", str(p.get("sizes", "")),
                      str(p.get("solver", "")), str(p.get("verify") or "-"),
                      "yes" if p.get("closed") else "no")
    stdout_console().print(table)
    if not items:
        click.echo("no batches")
    return ExitCode.OK


# -- status -----------------------------------------------------------------------------------


def _status_lines(p: dict[str, Any]) -> list[str]:
    counts = ", ".join(f"{k} {v}" for k, v in p["counts"].items()) or "none yet"
    lines = [
        f"batch {p['batch_id']}: {p['done']}/{p['total']} jobs done "
        f"({'complete' if p['complete'] else p['state'] if p.get('cancelled') else 'running'});"
        f" {counts}; "
        f"mismatches {p['mismatches']}",
        f"progress: done {p['done']}, running {p['running']}, queued {p['queued']}, "
        f"failed {p['failed']}; ETA {format_eta(p['eta_s'])}; state {p['state']}"
        + (f"; on {', '.join(p['workers_busy'])}" if p["workers_busy"] else ""),
    ]
    params = p.get("params") or {}
    if params:
        lines.append("params: " + ", ".join(f"{k}={v}" for k, v in params.items()
                                            if v not in (None, False)))
    return lines


def _progress_poller(client: redis.Redis, url: str, batch_id: str,
                     interval: float) -> Callable[[], dict[str, Any]]:
    """A function returning :func:`~knights_tour.service.monitor.batch_progress` of the batch,
    with the ETA from the rate measured since its first call. The returned function raises
    :class:`~knights_tour.errors.KnightsTourError` for an unknown batch."""
    first: tuple[float, int] | None = None

    def poll() -> dict[str, Any]:
        nonlocal first
        st = batch_status(client, batch_id, max_missing=0)  # unknown batch -> error
        nodes: list[dict[str, Any]] = []
        if not st["complete"]:
            with contextlib.suppress(Exception):  # inspection is best effort
                nodes = live_workers(url, timeout_s=min(1.0, interval))
        now = time.time()
        rate = None
        if first is not None and st["done"] > first[1] and now > first[0]:
            rate = (st["done"] - first[1]) / (now - first[0])  # rate while watching
        p = batch_progress(client, batch_id, nodes, now=now, rate_jobs_per_s=rate)
        if not p["complete"] and batch_state(client, batch_id) == CANCELLED:
            p.update(state=CANCELLED, eta_s=None, queued=0, cancelled=True)
        if first is None:
            first = (now, p["done"])
        return p

    return poll


def _watch_done(p: dict[str, Any]) -> bool:
    return bool(p["complete"] or p.get("cancelled"))


def _watch(poll: Callable[[], dict[str, Any]], as_json: bool, interval: float,
           timeout: float | None) -> dict[str, Any]:
    """``status --watch``: a live view on a terminal, else one line (or JSON object) per
    refresh, until the batch is complete or ``timeout`` seconds pass; returns the last
    progress."""
    console = stdout_console()
    if console.is_terminal and not as_json:
        with Live(Text(""), console=console, refresh_per_second=4) as live:
            hooks = WaitHooks(on_progress=lambda q: live.update(Text("\n".join(_status_lines(q)))))
            return poll_until_complete(poll, timeout_s=timeout, hooks=hooks, poll_s=interval,
                                       is_done=_watch_done)
    if as_json:
        hooks = WaitHooks(on_progress=lambda q: click.echo(json.dumps(q, separators=(",", ":"))))
    else:
        hooks = WaitHooks(on_progress=lambda q: click.echo(_status_lines(q)[1]))
    p = poll_until_complete(poll, timeout_s=timeout, hooks=hooks, poll_s=interval,
                            is_done=_watch_done)
    if not as_json:
        click.echo(_status_lines(p)[0])
    return p


@click.command()
@click.argument("batch_id", metavar="[BATCH]", required=False)
@redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", is_flag=True, help="Refresh until the batch is complete (Ctrl-C stops).")
@click.option("--interval", type=float, default=2.0, show_default=True, metavar="S",
              help="With --watch: seconds between refreshes.")
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="With --watch: stop after S seconds.")
def status(batch_id: str | None, redis_url: str | None, as_json: bool, watch: bool = False,
           interval: float = 2.0, timeout: float | None = None) -> ExitCode:
    """Progress of BATCH (default: the newest batch): jobs done / running / queued / failed,
    counts by status, mismatches and an ETA. Running jobs are those in a chunk a live worker
    is executing (Celery inspect). Exit 0 if complete, 1 if not.
    """
    if interval <= 0:
        raise click.BadParameter("must be positive", param_hint="--interval")
    with open_store(redis_url) as backend:
        if batch_id is None:
            items = list_batches(backend.client, limit=1)
            if not items:
                raise KnightsTourError("no batches yet (see `ktour submit`)")
            batch_id = items[-1]["batch_id"]
        poll = _progress_poller(backend.client, backend.url, batch_id, interval)
        if watch:
            p = _watch(poll, as_json, interval, timeout)
        else:
            p = poll()
            click.echo(json.dumps(p, indent=2) if as_json else "\n".join(_status_lines(p)))
    return ExitCode.OK if p["complete"] else ExitCode.NOT_OK


__all__ = ["run", "submit", "status", "collect", "batches", "cancel", "job_options"]
