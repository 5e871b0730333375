"""The commands that read batches: ``ktour collect`` (every record, or a per-board summary)
and ``batches`` (every batch and its state). A batch's progress, ``ktour status``, is
:mod:`knights_tour.commands.status` (kept apart so that it loads no record type); starting,
stopping and resuming a batch is :mod:`knights_tour.commands.lifecycle`.

The lifecycle itself is :mod:`knights_tour.batches.client`; the backend is
:func:`knights_tour.local.backend.open_store`; the verdict is
:mod:`knights_tour.batches.verdict`. This module declares the options and renders.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from knights_tour.batches.progress import (
    CANCELLED,
    BatchListing,
    batch_state,
    batch_status,
    list_batches,
)
from knights_tour.batches.status import shown_params, stalled_batches
from knights_tour.batches.store import repair_results
from knights_tour.commands._checks import check_out_path
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_option, timeout_option
from knights_tour.commands._records import (
    report_mismatches,
    summary_table,
    wait_with_progress,
    write_records,
)
from knights_tour.commands._shared import stdout_console
from knights_tour.local.backend import open_store
from knights_tour.output.recordfile import FORMATS, format_for_path
from knights_tour.worker.monitor import batch_states


@click.command()
@click.argument("batch_id", metavar="BATCH")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", *FORMATS]),
    default="table",
    show_default=True,
    help="table = per-board summary; json/jsonl/csv/parquet = every record.",
)
@click.option(
    "--out",
    "out",
    default=None,
    metavar="FILE",
    help="Write the records to FILE atomically instead of stdout (needed for parquet); "
    "without --format, a FILE ending in .parquet or .csv gets that format, else JSON Lines.",
)
@click.option("--wait", is_flag=True, help="Wait until every job of the batch has a record.")
@click.option(
    "--repair",
    is_flag=True,
    help="First drop the records that cannot be read (and the bookkeeping of records lost "
    "from Redis), so that their jobs are missing: 'ktour resume BATCH' runs them again.",
)
@timeout_option("With --wait: give up after S seconds.")
@redis_option
def collect(
    batch_id: str,
    fmt: str,
    out: str | None,
    wait: bool,
    timeout: float | None,
    redis_url: str | None,
    repair: bool = False,
) -> ExitCode:
    """Records of BATCH, one per job, sorted by board and start square.

    Without --redis / KT_REDIS_URL the embedded Redis is started on the data dir (so a batch
    from 'ktour run' can be collected from a new shell) and stopped again. Exit 0 if the batch
    is complete and clean (every job decided, no error, no mismatch), 1 otherwise.
    """
    check_out_path(out)
    if out is not None and fmt == "table":
        fmt = format_for_path(out)
    if fmt == "parquet" and out in (None, "-"):
        raise click.UsageError("--format parquet writes a file: give --out FILE")
    with open_store(redis_url) as backend:
        if repair:
            dropped = repair_results(backend.client, batch_id, unreadable=True)
            if dropped:
                click.echo(
                    f"{len(dropped)} job(s) of batch {batch_id} had no readable record "
                    f"(first {dropped[0]}): dropped; `ktour resume {batch_id}` runs them again",
                    err=True,
                )
        st = batch_status(backend.client, batch_id)
        if wait and not st["complete"]:
            st = wait_with_progress(backend.client, batch_id, st["total"], timeout, backend.url)
        tally = write_records(backend.client, batch_id, None if fmt == "table" else out or "-", fmt)
    if fmt == "table":
        stdout_console().print(summary_table(tally.rows(), f"batch {batch_id}"))
        if not st["complete"]:
            click.echo(f"batch incomplete: {st['done']}/{st['total']} jobs done")
    elif out:
        click.echo(f"{tally.records} records written to {out}", err=True)
    report_mismatches(tally)
    return ExitCode.OK if not tally.problems(st["total"]) else ExitCode.NOT_OK


UNREADABLE = "unreadable"
"""The state ``ktour batches`` gives a batch with a key that cannot be read (the reason beside
it)."""


@click.command()
@redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def batches(redis_url: str | None, as_json: bool) -> ExitCode:
    """List known batches, oldest first. An unfinished batch no live worker serves (no worker
    lease on the Redis for 1.5 lease periods) is shown 'stalled' (the reason is in --json); a
    batch with a key that cannot be read is shown 'unreadable', the key named on stderr (exit
    1)."""
    with open_store(redis_url) as backend:
        items = list_batches(backend.client)
        states = batch_states(backend.client, items)  # queued / running / complete / collected
        shown: dict[str, str | None] = {}
        reasons: dict[str, str] = {}
        for b in items:
            bid = b["batch_id"]
            shown[bid] = states.get(bid)
            if b["unreadable"]:
                shown[bid], reasons[bid] = UNREADABLE, b["unreadable"]
                continue
            if shown[bid] not in ("complete", "collected") and (
                batch_state(backend.client, bid) == CANCELLED
            ):
                shown[bid] = CANCELLED
        waiting = [bid for bid, state in shown.items() if state in ("queued", "running")]
        stalled = stalled_batches(backend.client, waiting)  # nobody serves them
        for bid, reason in stalled.items():
            shown[bid], reasons[bid] = "stalled", reason
    bad = UNREADABLE in shown.values()
    if as_json:
        rows = [_listed(b, shown[b["batch_id"]], reasons.get(b["batch_id"])) for b in items]
        click.echo(json.dumps(rows, indent=2))
        return ExitCode.NOT_OK if bad else ExitCode.OK
    table = Table(title="batches")
    for col in ("batch", "created (UTC)", "state", "done", "sizes", "solver", "verify", "closed"):
        table.add_column(col)
    for b in items:
        p = b["params"] or {}
        table.add_row(
            b["batch_id"],
            str(b["created_iso"] or ""),
            str(shown[b["batch_id"]]),
            f"{b['done']}/{b['total']}",
            str(shown_params(p).get("sizes", "")),
            str(p.get("solver", "")),
            str(p.get("verify") or "-"),
            "yes" if p.get("closed") else "no",
        )
    stdout_console().print(table)
    if not items:
        click.echo("no batches")
    for b in items:
        if shown[b["batch_id"]] == UNREADABLE:
            click.echo(f"batch {b['batch_id']}: {reasons[b['batch_id']]}", err=True)
    return ExitCode.NOT_OK if bad else ExitCode.OK


def _listed(b: BatchListing, state: str | None, reason: str | None) -> dict[str, object]:
    """A batch of ``ktour batches --json``: its listing without ``unreadable``, its ``state``
    and, for an unreadable or stalled one, the ``reason``."""
    row: dict[str, object] = {k: v for k, v in b.items() if k != "unreadable"}
    row["state"] = state
    if reason is not None:
        row["reason"] = reason
    return row


__all__ = ["collect", "batches"]
