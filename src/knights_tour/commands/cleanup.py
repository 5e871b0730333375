"""Cleanup commands: ``ktour forget BATCH`` and ``ktour prune --older-than AGE``
(:mod:`knights_tour.batches.cleanup` does the work; this module declares the options and
renders). Exit 0 when done, 1 when something was left because a job of it is running, 2 on
bad input (an unknown batch, a malformed age, an unreachable Redis).
"""

from __future__ import annotations

import click

from knights_tour.batches import cleanup
from knights_tour.batches.schedule_file import parse_interval
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_option
from knights_tour.errors import KnightsTourError
from knights_tour.local.backend import open_store
from knights_tour.settings import get_settings


def _number_or_text(value: str) -> float | str:
    """``value`` as seconds if it is a plain number (``"3600"``, ``"90.5"``), else as given
    (a duration such as ``"1d12h"``, read by :func:`parse_interval`)."""
    try:
        return float(value)
    except ValueError:
        return value


@click.command()
@click.argument("batch_id", metavar="BATCH")
@redis_option
def forget(batch_id: str, redis_url: str | None) -> ExitCode:
    """Forget BATCH: delete every Redis key of it (jobs, records, leases, ...) and its
    collection reports, and say what was freed.

    An unfinished batch is cancelled first (only its own queued tasks are dropped); while a job
    of it is still running it is not deleted (exit 1: run forget again once it ends). There is
    no undo: 'ktour collect BATCH --out FILE' first to keep its records.
    """
    with open_store(redis_url) as backend:
        try:
            done = cleanup.forget(backend.client, batch_id, get_settings().reports_path)
        except KnightsTourError as exc:
            if "running now" not in str(exc):
                raise
            click.echo(f"ktour: {exc}", err=True)
            return ExitCode.NOT_OK
    click.echo(f"batch {batch_id}: {done.describe()}")
    return ExitCode.OK


@click.command()
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Age of what is removed: '7d', '12h', '90m', '1d12h' or seconds.",
)
@redis_option
def prune(older_than: str, redis_url: str | None) -> ExitCode:
    """Forget every batch and count created longer than AGE ago (their Redis keys, records and
    collection reports) and delete worker logs last written before then; say what was freed.

    Unfinished batches among them are cancelled first (their own queued tasks dropped); any
    with a job running now is left and named (exit 1).
    """
    age_s = parse_interval(_number_or_text(older_than), "--older-than")
    settings = get_settings()
    with open_store(redis_url) as backend:
        done = cleanup.prune(
            backend.client, age_s, settings.reports_path, settings.data_dir / "logs"
        )
    click.echo(done.describe())
    return ExitCode.NOT_OK if done.busy else ExitCode.OK


__all__ = ["forget", "prune"]
