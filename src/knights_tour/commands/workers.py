"""``ktour workers``: the queue and the live Celery workers - queue depth, the messages workers
hold, and per worker its pool, what it runs and has reserved, the jobs it recorded and failed,
and the age of its last heartbeat (:func:`knights_tour.worker.monitor.queue_overview`);
``--watch`` refreshes it.

A module of its own, apart from :mod:`knights_tour.commands.ops`, because of what that one
loads (the schedule's celery beat, the record types and numpy): a ``ktour workers`` whose Redis
URL is malformed or unreachable says so before Celery is imported (``queue_overview``
connects first). Exit 0 if at least one worker answered, 1 if none did, 2 on bad input or an
unreachable Redis.
"""

from __future__ import annotations

import json
import os
import sys
import time

import click

from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import interval_option, url_redis_option
from knights_tour.commands._shared import format_utc
from knights_tour.commands.status import Redraw
from knights_tour.errors import KnightsTourError
from knights_tour.local.launching import configured_redis_url
from knights_tour.worker.monitor import QueueOverview, queue_overview

NO_WORKER = "no worker answered (start one: ktour worker --redis URL)"


def _require_url(redis_url: str | None, what: str) -> str:
    url = configured_redis_url(redis_url)
    if url is None:
        raise KnightsTourError(f"{what} needs the workers' Redis URL (--redis URL or KT_REDIS_URL)")
    return url


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


def overview_lines(view: QueueOverview) -> list[str]:
    """``ktour workers`` as plain lines: the queue, one row per worker, and under it a line
    per task it runs or holds reserved."""
    nodes = view["workers"]
    lines = [
        f"queue: {view['queued']} message(s) waiting, {view['held']} held by workers "
        "(running or reserved)"
    ]
    if not nodes:
        return [*lines, NO_WORKER]
    width = max(len("worker"), *(len(n["name"]) for n in nodes))
    head = ("pool", "active", "reserved", "processed", "failed", "heartbeat")
    lines.append(f"{'worker':<{width}}  " + "  ".join(f"{h:>9}" for h in head))
    for n in nodes:
        known = n["answered_inspect"]
        cells = (
            n["pool"] if n["pool"] is not None else "?",
            len(n["active"]) if known else "?",
            len(n["reserved"]) if known else "?",
            n["processed"],
            n["failed"],
            _age(n["heartbeat_age_s"]),
        )
        lines.append(f"{n['name']:<{width}}  " + "  ".join(f"{c!s:>9}" for c in cells))
        for kind, tasks in (("running", n["active"]), ("reserved", n["reserved"])):
            for t in tasks:
                jobs = f", {t['jobs']} jobs" if t["jobs"] is not None else ""
                since = f", since {format_utc(t['started'])}" if t["started"] else ""
                lines.append(f"  {kind} {t['task']} batch {t['batch_id'] or '-'}{jobs}{since}")
    return lines


def _watch(url: str, timeout: float, interval: float, limit: float | None, as_json: bool) -> bool:
    """Refresh until Ctrl-C or ``limit`` seconds; in place on a terminal, else one block (or
    JSON line) per refresh. Returns whether a worker answered the last refresh."""
    screen = Redraw() if sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb" else None
    end = None if limit is None else time.monotonic() + limit
    while True:
        began = time.monotonic()
        view = queue_overview(url, timeout_s=timeout)
        if as_json:
            click.echo(json.dumps(view, separators=(",", ":")))
        elif screen is not None:
            screen.show([f"{format_utc(time.time())} (every {interval:g}s)", *overview_lines(view)])
        else:
            click.echo("\n".join([format_utc(time.time()), *overview_lines(view), ""]))
        now = time.monotonic()
        if end is not None and now + interval > end:
            return bool(view["workers"])
        time.sleep(max(0.0, interval - (now - began)))


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
@click.option("--json", "as_json", is_flag=True, help="Print the view as JSON.")
@click.option("--watch", is_flag=True, help="Refresh until Ctrl-C (or --for S).")
@interval_option
@click.option(
    "--for",
    "watch_for",
    type=float,
    default=None,
    metavar="S",
    help="With --watch: stop after S seconds.",
)
def workers(
    redis_url: str | None,
    timeout: float,
    as_json: bool,
    watch: bool = False,
    interval: float = 2.0,
    watch_for: float | None = None,
) -> ExitCode:
    """Show the queue and the live Celery workers: queue depth, reserved tasks, per worker
    its pool size, jobs processed and failed, and heartbeat age.

    Asked of the workers (Celery ping and inspect: active, reserved, stats) and of Redis (the
    queue's lists; the jobs each worker recorded and recorded as error since it started; its
    processes' lease renewals, the heartbeat). --watch refreshes it until Ctrl-C. Exit 0 if at
    least one worker answered (the last refresh, with --watch), 1 if none did.
    """
    for value, hint in ((timeout, "--timeout"), (interval, "--interval"), (watch_for, "--for")):
        if value is not None and value <= 0:
            raise click.BadParameter("must be positive", param_hint=hint)
    url = _require_url(redis_url, "workers")
    if watch:
        return (
            ExitCode.OK if _watch(url, timeout, interval, watch_for, as_json) else ExitCode.NOT_OK
        )
    view = queue_overview(url, timeout_s=timeout)
    if as_json:
        click.echo(json.dumps(view["workers"], indent=2))
    else:
        click.echo("\n".join(overview_lines(view)))
    return ExitCode.OK if view["workers"] else ExitCode.NOT_OK


__all__ = ["workers", "overview_lines"]
