"""The operations commands of ``ktour``: ``workers``, ``schedule show`` and ``reports``.

Exit 0 on success, 2 on bad input or an unreachable Redis (a
:class:`~knights_tour.errors.KnightsTourError` that :func:`knights_tour.cli.main` turns into one
``ktour: error: ...`` line).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from rich.table import Table

from knights_tour.commands._shared import ExitCode, stdout_console, url_redis_option
from knights_tour.errors import KnightsTourError
from knights_tour.service import collector
from knights_tour.service.local import configured_redis_url
from knights_tour.service.monitor import live_workers
from knights_tour.service.schedule import load_schedule, next_run_times, schedule_from_settings
from knights_tour.settings import get_settings
from knights_tour.store.connection import connect


def _iso(t: float | datetime | None) -> str:
    if t is None:
        return "-"
    if isinstance(t, datetime):
        return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return datetime.fromtimestamp(float(t), UTC).strftime("%Y-%m-%d %H:%M:%S")


# -- schedule show ------------------------------------------------------------------------------


@click.group("schedule")
def schedule_group() -> None:
    """The celery beat schedule (KT_SCHEDULE_FILE; see schedule.example.toml)."""


@schedule_group.command("show")
@click.option(
    "--file",
    "path",
    default=None,
    metavar="FILE",
    help="Schedule file to show (default: KT_SCHEDULE_FILE).",
)
@click.option(
    "--count",
    type=click.IntRange(1, 50),
    default=3,
    show_default=True,
    help="Next run times to list per entry.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the schedule as JSON.")
def schedule_show(path: str | None, count: int, as_json: bool) -> ExitCode:
    """Print the active schedule and each entry's next run times (UTC).

    Cron entries are exact; for an interval entry beat counts from its last run (or its start),
    so the times shown assume beat starts now. Exit 2 if the schedule is invalid.
    """
    settings = get_settings()
    config = (
        load_schedule(path, default_collect_s=settings.collect_interval_s)
        if path
        else schedule_from_settings(settings)
    )
    now = datetime.now(UTC)
    sweeps = {f"sweep:{s.name}": s for s in config.sweeps}
    rows: list[dict[str, Any]] = []
    for name, task, timing in config.entries():
        sweep = sweeps.get(name)
        what = "collect finished batches into " + str(settings.reports_path)
        if sweep is not None:
            opts = sweep.options
            what = f"sizes {sweep.sizes}, solver {opts.solver}, verify {opts.verify or 'none'}" + (
                ", closed" if opts.closed else ""
            )
        rows.append(
            {
                "entry": name,
                "task": task,
                "when": timing.describe(),
                "cron": timing.cron,
                "every_s": timing.every_s,
                "what": what,
                "next_runs": [t.isoformat() for t in next_run_times(timing, now, count)],
                "sweep": sweep.to_dict() if sweep is not None else None,
            }
        )
    if as_json:
        click.echo(json.dumps({"source": config.source, "entries": rows}, indent=2))
        return ExitCode.OK
    table = Table(title=f"schedule ({config.source})")
    for col in ("entry", "when", "next runs (UTC)", "what"):
        table.add_column(col)
    for row in rows:
        nxt = "\n".join(t[:19].replace("T", " ") for t in row["next_runs"])
        if row["every_s"] is not None:
            nxt += "\n(counted from beat's start)"
        table.add_row(row["entry"], row["when"], nxt, row["what"])
    stdout_console().print(table)
    if not rows:
        click.echo("the schedule is empty")
    return ExitCode.OK


# -- reports ------------------------------------------------------------------------------------


@click.command("reports")
@click.option(
    "--dir",
    "reports_dir",
    default=None,
    metavar="DIR",
    help="Reports directory (default KT_REPORTS_DIR, else <data dir>/reports).",
)
@click.option(
    "--redis",
    "redis_url",
    default=None,
    metavar="URL",
    help="List the collections recorded in this Redis instead (every host's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def reports(reports_dir: str | None, redis_url: str | None, as_json: bool) -> ExitCode:
    """List the reports written by collections (oldest first).

    From the reports directory (its index.jsonl), or with --redis from the collection markers in
    Redis, which also name the host and directory each report was written to.
    """
    if redis_url:
        client = connect(redis_url)
        try:
            markers = collector.collected_markers(client)
            last = collector.last_collection(client)
        finally:
            client.close()
        items = [
            {"batch_id": bid, **m}
            for bid, m in sorted(markers.items(), key=lambda kv: kv[1].get("at", 0))
        ]
        for it in items:
            it["collected_iso"] = _iso(it.get("at"))
        source = "Redis"
    else:
        where = reports_dir or get_settings().reports_path
        items = collector.read_index(where)
        last = None
        source = str(where)
    if as_json:
        click.echo(
            json.dumps({"source": source, "reports": items, "last_collection": last}, indent=2)
        )
        return ExitCode.OK
    table = Table(title=f"reports ({source})")
    for col in (
        "batch",
        "collected (UTC)",
        "schedule",
        "jobs",
        "found",
        "no_tour",
        "unknown",
        "error",
        "state",
    ):
        table.add_column(col)
    for it in items:
        counts = it.get("counts") or {}
        state = it.get("state") or ("clean" if it.get("clean") else "not clean")
        if it.get("state") == "written":
            state = f"{'clean' if it.get('clean') else 'not clean'} @ {it.get('host')}"
        when = str(it.get("collected_iso") or "-").replace("T", " ").replace("+00:00", "")
        table.add_row(
            str(it.get("batch_id")),
            when,
            str(it.get("schedule") or "-"),
            str(it.get("total", "")),
            *(str(counts.get(s, 0)) for s in ("found", "no_tour", "unknown", "error")),
            state,
        )
    stdout_console().print(table)
    if not items:
        click.echo("no reports yet")
    if last:
        click.echo(
            f"last collection: {_iso(last.get('at'))} UTC on {last.get('host')}, "
            f"{len(last.get('written') or [])} report(s) written"
        )
    return ExitCode.OK


# -- workers ------------------------------------------------------------------------------------


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
                _iso(t["started"]),
            )
    stdout_console().print(table)
    if not nodes:
        click.echo(
            "no worker answered (start one: celery -A knights_tour.worker worker "
            "-Q knights_tour -n NAME@%h)"
        )
    return ExitCode.OK if nodes else ExitCode.NOT_OK


__all__ = ["workers", "schedule_group", "schedule_show", "reports"]
