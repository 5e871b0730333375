"""``ktour job``: one job of a batch - its record, the earlier attempts a retry replaced, the
worker that ran it, its timings, and who holds it while it has no record
(:mod:`knights_tour.batches.job_view`)."""

from __future__ import annotations

import json

import click

from knights_tour.batches.job_view import JobView, job_views
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_option
from knights_tour.commands._shared import format_utc
from knights_tour.local.backend import open_store
from knights_tour.tours.record import Record


def _outcome(record: Record) -> str:
    """One line of a record: status, why, worker, timings."""
    why = [x for x in (record.proof and record.proof.value, record.reason) if x]
    parts = [record.status.value + (f" ({', '.join(why)})" if why else "")]
    parts.append(f"worker {record.worker or '?'}")
    parts.append(f"solver {record.solver}")
    parts.append(f"{record.elapsed_s:.3f} s search")
    if record.job_elapsed_s is not None:
        parts.append(f"{record.job_elapsed_s:.3f} s job")
    parts.append(f"{record.nodes} nodes")
    if record.attempts:
        parts.append(f"started {record.attempts}x")
    parts.append(f"finished {format_utc(record.finished_at)}")
    return ", ".join(parts)


def _lines(view: JobView) -> list[str]:
    job = view.job
    lines = [
        f"job {job.key}: {view.state}",
        "  options: "
        + ", ".join(f"{k}={v}" for k, v in job.options.to_dict().items() if v not in (None, False)),
    ]
    if view.record is not None:
        lines.append(f"  record: {_outcome(view.record)}")
    if view.claimed_by is not None:
        live = "live lease" if view.lease_live else "lease gone"
        lines.append(f"  claimed by {view.claimed_by} ({live})")
    if view.worker_deaths:
        lines.append(f"  worker deaths since its last record: {view.worker_deaths}")
    if view.requeued_at is not None:
        lines.append(f"  re-sent by recovery at {format_utc(view.requeued_at)}")
    for i, earlier in enumerate(view.earlier, start=1):
        lines.append(f"  attempt {i} (replaced by a retry): {_outcome(earlier)}")
    return lines


@click.command("job")
@click.argument("batch_id", metavar="BATCH")
@click.argument("square", metavar="SQUARE")
@click.option(
    "--board",
    "board",
    default=None,
    metavar="SIZE",
    help="The board of SQUARE (8 or 6x8); needed when the batch has several.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON (tours left out).")
@redis_option
def job(
    batch_id: str, square: str, board: str | None, as_json: bool, redis_url: str | None
) -> ExitCode:
    """One job of BATCH: its record, earlier attempts, worker and timings (SQUARE: a1 or r,c).

    The record shown is the latest; the records a 'ktour retry' replaced are listed as its
    earlier attempts, oldest first. A job without a record shows who holds it: running
    (claimed under a live lease), lost (its worker's lease is gone: recovery re-sends it) or
    waiting (queued). Exit 0 if every job shown has a record, 1 otherwise.
    """
    with open_store(redis_url) as backend:
        views = job_views(backend.client, batch_id, square, board)
    if as_json:
        click.echo(json.dumps([v.to_dict() for v in views], indent=2))
    else:
        for v in views:
            click.echo("\n".join(_lines(v)))
    return ExitCode.OK if all(v.record is not None for v in views) else ExitCode.NOT_OK


__all__ = ["job"]
