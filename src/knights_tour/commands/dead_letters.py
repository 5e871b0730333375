"""``ktour dead-letters``: the malformed queue messages the workers set aside (the dead-letter
list, :mod:`knights_tour.worker.dead_letters`), newest first, one line each; ``--clear`` empties
the list. ``ktour status`` counts them and names the latest reason; this shows them.

Each line: when the worker set the message aside (UTC), why, the task name and id when the
message is a Celery envelope that carries them in its headers, and the start of the raw
message on one line. An entry that is not what a worker writes is shown as corrupted.
"""

from __future__ import annotations

import json

import click

from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_option
from knights_tour.commands._shared import format_utc
from knights_tour.local.backend import open_store
from knights_tour.store import keys
from knights_tour.worker import dead_letters as store
from knights_tour.worker.dead_letters import DeadLetter, DeadLetters

EXCERPT_CHARS = 80
"""At most this many characters of a message are shown on its line (``--json``: all kept)."""

LIMIT = 20
"""Entries listed by default (``--limit``)."""

CORRUPTED = "a corrupted entry (not the JSON a worker writes)"


def _excerpt(text: str) -> str:
    """``text`` on one line: whitespace runs as one space, other control characters as ``?``,
    cut to :data:`EXCERPT_CHARS` (``...`` when cut)."""
    flat = "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 3] + "..."


def _task(message: str) -> str:
    """``task NAME id ID`` from the headers of a Celery envelope (what it has of the two);
    ``""`` when ``message`` is no such envelope."""
    try:
        envelope = json.loads(message)
    except ValueError:
        return ""
    headers = envelope.get("headers") if isinstance(envelope, dict) else None
    if not isinstance(headers, dict):
        return ""
    return " ".join(f"{k} {headers[k]}" for k in ("task", "id") if isinstance(headers.get(k), str))


def entry_line(e: DeadLetter) -> str:
    """One entry (:func:`knights_tour.worker.dead_letters.parse`) as a line: time, reason, task
    and id when known, the message's start."""
    if e.get("corrupt"):
        return f"-  {CORRUPTED}; message: {_excerpt(e['message'])}"
    task = _task(e["message"])
    task = f"; {task}" if task else ""
    return f"{format_utc(e['at'])} UTC  {e['reason']}{task}; message: {_excerpt(e['message'])}"


def listing_lines(view: DeadLetters, key: str) -> list[str]:
    """``ktour dead-letters`` as plain lines: how many, one line per entry shown, and how many
    more there are."""
    if not view["count"]:
        return [f"dead letters: none in Redis list {key}"]
    shown = view["entries"]
    lines = [
        f"dead letters: {view['count']} malformed queue message(s) in Redis list {key}, "
        "newest first",
        *(entry_line(e) for e in shown),
    ]
    if view["count"] > len(shown):
        lines.append(f"... {view['count'] - len(shown)} more (--limit 0 lists all)")
    return lines


@click.command("dead-letters")
@redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=LIMIT,
    show_default=True,
    metavar="N",
    help="List the newest N entries (0: all).",
)
@click.option("--clear", is_flag=True, help="Empty the list and say how many entries it held.")
def dead_letters(redis_url: str | None, as_json: bool, limit: int, clear: bool) -> ExitCode:
    """List the malformed queue messages the workers set aside, newest first, or empty that
    list (--clear).

    A worker that takes a queue message it cannot run (not JSON, a body that does not decode,
    an unknown task, arguments of another shape or release) acknowledges it and keeps it in
    a Redis list (the newest 1000) instead of crashing; `ktour status` counts them. One line
    each: when (UTC), why, the task name and id when the message carries them, and the start
    of the message; --json gives each entry whole. An entry that is not what a worker writes is
    shown as corrupted. Exit 0; 2 if Redis cannot be reached or the key holds another type.
    """
    key = keys.dead_letters()
    with open_store(redis_url) as backend:
        if clear:
            removed = store.clear(backend.client)
            if as_json:
                click.echo(json.dumps({"key": key, "removed": removed}))
            else:
                click.echo(f"dead letters: removed {removed} from Redis list {key}")
            return ExitCode.OK
        view = store.listing(backend.client, limit or None)
    if as_json:
        click.echo(json.dumps({"key": key, **view}, indent=2))
    else:
        click.echo("\n".join(listing_lines(view, key)))
    return ExitCode.OK


__all__ = ["dead_letters", "entry_line", "listing_lines"]
