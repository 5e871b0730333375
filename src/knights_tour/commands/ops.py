"""The operations commands of ``ktour``: ``schedule show`` and ``reports`` (``workers`` is
:mod:`knights_tour.commands.workers`, apart so that it loads neither the schedule's celery beat
nor the record types).

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

from knights_tour.batches import collector
from knights_tour.batches.schedule import next_run_times
from knights_tour.batches.schedule_file import load_schedule, schedule_from_settings
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_url_option
from knights_tour.commands._shared import format_utc, stdout_console
from knights_tour.settings import get_settings
from knights_tour.store.connection import connect

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
@redis_url_option("List the collections recorded in this Redis instead (every host's).")
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
        items: list[collector.JsonObject] = [
            {"batch_id": bid, **m}
            for bid, m in sorted(markers.items(), key=lambda kv: _at(kv[1]) or 0.0)
        ]
        for it in items:
            it["collected_iso"] = format_utc(_at(it))
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
        counts = it.get("counts")
        counts = counts if isinstance(counts, dict) else {}
        state = str(it.get("state") or ("clean" if it.get("clean") else "not clean"))
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
            f"last collection: {format_utc(_at(last))} UTC on {last.get('host')}, "
            f"{len(_listed(last.get('written')))} report(s) written"
        )
    return ExitCode.OK


def _at(item: collector.JsonObject) -> float | None:
    """The ``at`` (unix seconds) of a marker or note read back, None if it has none."""
    at = item.get("at")
    return float(at) if isinstance(at, int | float) else None


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


__all__ = ["schedule_group", "schedule_show", "reports"]
