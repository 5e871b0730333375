"""``ktour status``: the progress of a batch (done / running / queued / failed, the counts by
status, mismatches, an ETA, which worker process holds which jobs), once or refreshed
(``--watch``).

What it shows is :func:`knights_tour.batches.status.batch_view`, read from Redis alone. This
module declares the options and renders as plain text (``--watch`` redraws it in place on a
terminal). Its imports stay off everything that decodes a job or a record
(:mod:`knights_tour.batches.jobs`, the record type, numpy behind them), off rich and off Celery,
so that an answer costs the interpreter's start, click, the Redis client and a few round
trips (tests/commands/test_status_imports.py checks the process). The other commands that read
batches (``collect``, ``batches``) are :mod:`knights_tour.commands.batch`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable

import click
import redis

from knights_tour.batches.estimate import eta_s
from knights_tour.batches.progress import CANCELLED
from knights_tour.batches.status import (
    BatchView,
    DeadLettersNote,
    Holder,
    batch_view,
    newest_batch,
    shown_params,
)
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import interval_option, redis_option, timeout_option
from knights_tour.local.backend import open_store
from knights_tour.output.durations import format_eta
from knights_tour.store.waiting import WaitHooks, poll_until_complete

WORKER_LINES = 16
"""At most this many worker processes are listed by ``ktour status`` (``--json``: all)."""


def _ago(seconds: float | None) -> str:
    return "-" if seconds is None else format_eta(seconds)


def _worker_line(w: Holder) -> str:
    """One process holding jobs of the batch: who, how many, which, since when."""
    span = w["first"] if w["jobs"] == 1 else f"{w['first']} .. {w['last']}"
    since = ""
    if w["since"] is not None:
        clock = time.strftime("%H:%M:%S", time.gmtime(w["since"]))
        since = f", claimed {_ago(w['for_s'])} ago ({clock} UTC)"
    now = f"; running {w['running_job']}" if w.get("running_job") else ""
    dead = "" if w["live"] else " [lease expired]"
    return f"  {w['worker']}{dead}: {w['jobs']} job(s) {span}{since}{now}"


def _status_lines(p: BatchView) -> list[str]:
    counts = ", ".join(f"{k} {v}" for k, v in p["counts"].items()) or "none yet"
    orphaned = f", orphaned {p['orphaned']}" if p.get("orphaned") else ""
    lines = [
        f"batch {p['batch_id']}: {p['done']}/{p['total']} jobs done ({p['state']}); "
        f"{counts}; mismatches {p['mismatches']}",
        f"progress: done {p['done']}, running {p['running']}, queued {p['queued']}{orphaned}, "
        f"failed {p['failed']}; ETA {format_eta(p['eta_s'])}; state {p['state']}",
    ]
    if p.get("reason"):
        lines.append(f"stalled: {p['reason']} (start workers, or `ktour resume {p['batch_id']}`)")
    if p.get("unrecorded"):
        lines.append(
            f"lost: {p['unrecorded']} job(s) counted done have no record in Redis (an evicting "
            f"Redis?): `ktour resume {p['batch_id']}` runs them again"
        )
    if p.get("lost_jobs"):
        lines.append(
            f"lost: {p['lost_jobs']} job(s) of the batch are gone from Redis: it cannot be "
            f"resumed, run it again"
        )
    if p.get("writes_refused"):
        lines.append(f"Redis refuses writes: {p['writes_refused']}")
    dead = p.get("dead_letters")
    lines += _dead_letter_lines(dead) if dead else []
    if not p["complete"]:
        busy = len(p.get("workers_busy") or ())
        lines.append(f"workers: {p.get('live_workers', 0)} live, {busy} on this batch")
        holding = p.get("workers") or []
        lines += [_worker_line(w) for w in holding[:WORKER_LINES]]
        if len(holding) > WORKER_LINES:
            lines.append(f"  ... {len(holding) - WORKER_LINES} more (--json lists every one)")
    params = shown_params(p.get("params") or {})
    if params:
        lines.append("params: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    return lines


def _dead_letter_lines(dead: DeadLettersNote) -> list[str]:
    """How many malformed queue messages the workers set aside, the latest one's reason, and
    the command that lists them."""
    if not dead.get("count"):
        return []
    latest, when, reason = dead.get("latest"), "", None
    if latest is not None:
        if latest["at"] is not None:
            when = time.strftime(" at %Y-%m-%d %H:%M:%S UTC", time.gmtime(latest["at"]))
        reason = "a corrupted entry" if latest.get("corrupt") else latest["reason"]
    return [
        f"dead letters: {dead['count']} malformed queue message(s) set aside in Redis list "
        f"{dead.get('key')}; the latest{when}: {reason} (`ktour dead-letters` lists them)"
    ]


def _progress_poller(client: redis.Redis, batch_id: str) -> Callable[[], BatchView]:
    """A function returning :func:`~knights_tour.batches.status.batch_view` of the batch (from
    Redis alone: no worker is asked), with the ETA from the rate measured since its first call
    once the batch has moved (weighed against the batch's estimate:
    :func:`~knights_tour.batches.estimate.eta_s`). The returned function raises
    :class:`~knights_tour.errors.KnightsTourError` for an unknown batch."""
    first: tuple[float, int] | None = None

    def poll() -> BatchView:
        nonlocal first
        p = batch_view(client, batch_id)
        now, remaining = time.monotonic(), p["total"] - p["done"]
        if first is None:
            first = (now, p["done"])
        elif (
            p["done"] > first[1]
            and remaining
            and now > first[0]
            and p["state"] in ("running", "queued")
        ):
            done, elapsed = p["done"] - first[1], now - first[0]  # the rate while watching
            eta = eta_s(remaining, done, elapsed, p.get("planned_s_per_job"))
            p["rate_jobs_per_s"], p["eta_s"] = round(done / elapsed, 3), round(eta or 0.0, 1)
        return p

    return poll


def _watch_done(p: BatchView) -> bool:
    return bool(p["complete"] or p["state"] == CANCELLED)


def _terminal_size() -> tuple[int, int]:
    columns, lines = shutil.get_terminal_size()
    return columns, lines


class Redraw:
    """Lines shown in place on a terminal, as ``watch(1)`` shows a command's output: each
    :meth:`show` moves the cursor back to the first row the previous one wrote and clears
    the screen from there (ANSI ``CSI n F``, ``CSI J``) before writing.

    What is shown fits the terminal as it is at each refresh: each line is cut to its width
    (so none wraps, and the rows to move back over are the lines written) and, when there are
    more lines than rows, the first ones are kept (the batch and its progress come first) and
    the last row says how many were left out.

    Parameters
    ----------
    size : callable, optional
        The terminal's ``(columns, lines)``, asked at every refresh (default
        :func:`shutil.get_terminal_size`).
    """

    def __init__(self, size: Callable[[], tuple[int, int]] | None = None) -> None:
        self.size = size or _terminal_size
        self.rows = 0

    def fit(self, lines: list[str]) -> list[str]:
        """``lines`` cut to the terminal: at most its width per line, and at most one row
        fewer than its height (the cursor's row after the last line), the last row kept for
        ``... N more line(s)`` when some are left out."""
        columns, height = self.size()
        width, room = max(1, columns), max(2, height - 1)
        if len(lines) > room:
            left_out = len(lines) - (room - 1)
            lines = lines[: room - 1] + [f"  ... {left_out} more line(s) (--json shows all)"]
        return [line[:width] for line in lines]

    def show(self, lines: list[str]) -> None:
        """Replace what the previous call wrote with ``lines`` (ASCII, no newlines)."""
        shown = self.fit(lines)
        back = f"\x1b[{self.rows}F\x1b[J" if self.rows else ""
        click.echo(back + "\n".join(shown), color=True)  # the codes kept as written
        self.rows = len(shown)


def _watch(
    poll: Callable[[], BatchView], as_json: bool, interval: float, timeout: float | None
) -> BatchView:
    """``status --watch``: the status redrawn in place on a terminal (:class:`Redraw`), else
    one line (or JSON object) per refresh, until the batch is complete or ``timeout`` seconds
    pass; returns the last progress."""
    if sys.stdout.isatty() and not as_json and os.environ.get("TERM", "") != "dumb":
        screen = Redraw()
        hooks: WaitHooks[BatchView] = WaitHooks(on_progress=lambda q: screen.show(_status_lines(q)))
        return poll_until_complete(
            poll, timeout_s=timeout, hooks=hooks, poll_s=interval, is_done=_watch_done, steady=True
        )
    if as_json:
        hooks = WaitHooks(on_progress=lambda q: click.echo(json.dumps(q, separators=(",", ":"))))
    else:
        hooks = WaitHooks(on_progress=lambda q: click.echo(_status_lines(q)[1]))
    p = poll_until_complete(
        poll, timeout_s=timeout, hooks=hooks, poll_s=interval, is_done=_watch_done, steady=True
    )
    if not as_json:
        click.echo(_status_lines(p)[0])
    return p


@click.command()
@click.argument("batch_id", metavar="[BATCH]", required=False)
@redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", is_flag=True, help="Refresh until the batch is complete (Ctrl-C stops).")
@interval_option
@timeout_option("With --watch: stop after S seconds.")
def status(
    batch_id: str | None,
    redis_url: str | None,
    as_json: bool,
    watch: bool = False,
    interval: float = 2.0,
    timeout: float | None = None,
) -> ExitCode:
    """Progress of BATCH (default: the newest batch): jobs done / running / queued / failed,
    counts by status, mismatches and an ETA. Also which worker process holds which jobs of it
    since when. Read from Redis alone (the records' tally and the workers' leases; no worker
    is asked). A batch no live worker has served for 1.5 lease periods (KT_LEASE_S) is
    'stalled', with the reason. Exit 0 if complete, 1 if not.
    """
    if interval <= 0:
        raise click.BadParameter("must be positive", param_hint="--interval")
    with open_store(redis_url) as backend:
        if batch_id is None:
            batch_id = newest_batch(backend.client)
        poll = _progress_poller(backend.client, batch_id)
        if watch:
            p = _watch(poll, as_json, interval, timeout)
        else:
            p = poll()
            click.echo(json.dumps(p, indent=2) if as_json else "\n".join(_status_lines(p)))
    return ExitCode.OK if p["complete"] else ExitCode.NOT_OK


__all__ = ["status", "Redraw"]
