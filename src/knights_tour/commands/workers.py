"""``ktour workers``: the live Celery workers and what they are running (a Celery ping and an
inspect broadcast, :func:`knights_tour.service.monitor.live_workers`).

A module of its own, apart from :mod:`knights_tour.commands.ops`, because of what that one
loads (the schedule's celery beat, the record types and numpy): a ``ktour workers`` whose Redis
URL is malformed or unreachable says so before Celery is imported (``live_workers`` connects
first). Exit 0 if at least one worker answered, 1 if none did, 2 on bad input or an
unreachable Redis.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from knights_tour.commands._shared import ExitCode, format_utc, stdout_console, url_redis_option
from knights_tour.errors import KnightsTourError
from knights_tour.service.launching import configured_redis_url
from knights_tour.service.monitor import live_workers


def _require_url(redis_url: str | None, what: str) -> str:
    url = configured_redis_url(redis_url)
    if url is None:
        raise KnightsTourError(f"{what} needs the workers' Redis URL (--redis URL or KT_REDIS_URL)")
    return url


@click.command("workers")
@url_redis_option
@click.option(
    "--timeout",
    "timeout",
    type=float,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for the workers' replies.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def workers(redis_url: str | None, timeout: float, as_json: bool) -> ExitCode:
    """List the live Celery workers and what they are running (Celery ping + inspect active).

    Exit 0 if at least one worker answered, 1 if none did.
    """
    if timeout <= 0:
        raise click.BadParameter("must be positive", param_hint="--timeout")
    url = _require_url(redis_url, "workers")
    nodes = live_workers(url, timeout_s=timeout)
    if as_json:
        for n in nodes:
            for t in n["active"]:
                t.pop("job_dicts", None)
        click.echo(json.dumps(nodes, indent=2))
        return ExitCode.OK if nodes else ExitCode.NOT_OK
    table = Table(title="workers")
    for col in ("worker", "running", "task", "batch", "jobs", "since (UTC)"):
        table.add_column(col)
    for n in nodes:
        if not n["active"]:
            table.add_row(n["name"], "idle" if n["answered_inspect"] else "?", "", "", "", "")
        for i, t in enumerate(n["active"]):
            table.add_row(
                n["name"] if i == 0 else "",
                str(len(n["active"])) if i == 0 else "",
                str(t["task"]),
                str(t["batch_id"] or "-"),
                str(t["jobs"] if t["jobs"] is not None else "-"),
                format_utc(t["started"]),
            )
    stdout_console().print(table)
    if not nodes:
        click.echo(
            "no worker answered (start one: celery -A knights_tour.worker worker "
            "-Q knights_tour -n NAME@%h)"
        )
    return ExitCode.OK if nodes else ExitCode.NOT_OK


__all__ = ["workers"]
