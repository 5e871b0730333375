"""Watching the cluster: the Celery workers and what they run, and the batches' states.

* :func:`live_workers` asks the workers through Celery's remote-control API
  (``app.control.ping`` to learn which nodes are alive, then ``app.control.inspect().active()``
  for the tasks each one is running right now): ``ktour workers``. A broadcast waits for its
  timeout, and a worker busy solving may not answer in time, so nothing that must answer fast
  uses it: a batch's status comes from Redis alone (:mod:`knights_tour.batches.status`).
* :func:`queue_overview` adds what ``ktour workers`` (and ``--watch``) shows beside them: the
  queue's depth and the messages workers hold (Redis), and per worker its pool (Celery's
  ``inspect stats``), its reserved tasks (``inspect reserved``), the jobs it recorded and
  failed since it started (:mod:`knights_tour.worker.nodes`, counted by the worker) and the age
  of its processes' last heartbeat (their lease renewals, :mod:`knights_tour.worker.nodes`).
* :func:`batch_states`: queued / running / complete / collected of many batches at once, from
  their record counts (``ktour batches``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import redis

from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import nodes
from knights_tour.worker.lazy import celery_worker, messages_held

Reply = Mapping[str, object]
"""A worker's answer to an inspect request, as Celery decodes it (open: Celery's to fill)."""


class TaskRow(TypedDict):
    """A task a worker runs or holds reserved."""

    id: str | None
    task: str | None
    batch_id: str | None
    """The batch (or count) id, the task's first argument."""
    jobs: int | None
    """The items of its chunk (its second argument), None if it has none."""
    started: float | None
    """Unix seconds, None if not started."""


class WorkerRow(TypedDict):
    """One worker node of :func:`live_workers`."""

    name: str
    answered_inspect: bool
    active: list[TaskRow]
    reserved: list[TaskRow]
    pool: int | None
    processes: list[int]
    tasks: int | None
    processed: int
    failed: int
    heartbeat_age_s: float | None


class QueueOverview(TypedDict):
    """The queue and its workers (:func:`queue_overview`)."""

    queued: int
    held: int
    workers: list[WorkerRow]


def live_workers(redis_url: str, timeout_s: float = 1.0) -> list[WorkerRow]:
    """The Celery workers answering on ``redis_url``, what they run and hold, their pools and
    counts.

    Returns
    -------
    list of WorkerRow
        Sorted by node name: ``name``; ``active`` and ``reserved`` (lists of ``{"id",
        "task", "batch_id", "jobs", "started"}``; ``jobs`` = jobs in the chunk for
        ``run_jobs`` tasks, ``started`` unix seconds or None); ``answered_inspect`` (False if
        the node answered the ping but not the inspect requests in time); ``pool`` (its
        processes' most, None if unknown); ``processes`` (their PIDs); ``tasks`` (tasks it
        accepted since it started, Celery's count); ``processed`` and ``failed`` (jobs it
        recorded, and recorded as ``error``, since it started); ``heartbeat_age_s`` (seconds
        since one of its processes last renewed its lease, None if none holds one: it has
        run no job yet).

    Raises
    ------
    BackendUnavailableError
        If the broker cannot be reached.
    """
    r = connect(redis_url)  # a clear error for a wrong URL / password
    try:
        # Celery's broadcast publishes through the app's producer pool, so point the app
        # itself at this URL (as LocalWorkers.wait_ready does), not just the connection.
        app = celery_worker().use_redis(redis_url)
        with app.connection_for_write(redis_url) as conn:
            replies = app.control.ping(timeout=timeout_s, connection=conn) or []
            names = sorted({name for reply in replies for name in reply})
            active: dict[str, list[Reply]] = {}
            reserved: dict[str, list[Reply]] = {}
            stats: dict[str, Reply] = {}
            if names:
                insp = app.control.inspect(
                    destination=names, timeout=timeout_s, limit=len(names), connection=conn
                )
                active = insp.active() or {}
                reserved = insp.reserved() or {}
                stats = insp.stats() or {}
        counts = nodes.read_counts(r, names) if names else {}
        now, ends = nodes.lease_ends(r) if names else (0.0, {})
    finally:
        r.close()
    out: list[WorkerRow] = []
    for name in names:
        tasks, stat = active.get(name), stats.get(name) or {}
        pool = stat.get("pool")
        pool = pool if isinstance(pool, dict) else {}
        pids = [int(p) for p in pool.get("processes") or [] if isinstance(p, int)]
        processed, failed = counts.get(name, (0, 0))
        total = stat.get("total")
        out.append(
            {
                "name": name,
                "answered_inspect": tasks is not None,
                "active": [_task_info(t) for t in (tasks or [])],
                "reserved": [_task_info(t) for t in (reserved.get(name) or [])],
                "pool": pool.get("max-concurrency"),
                "processes": pids,
                "tasks": sum(total.values()) if isinstance(total, dict) else None,
                "processed": processed,
                "failed": failed,
                "heartbeat_age_s": _heartbeat_age(name, pids, now, ends),
            }
        )
    return out


def _heartbeat_age(
    node: str, pids: Sequence[int], now: float, ends: Mapping[str, float]
) -> float | None:
    """Seconds since a pool process of ``node`` last renewed its lease (a renewal sets the
    lease to end ``KT_LEASE_S`` later), from the registry's lease ends; None if none of its
    processes (tokens ``node:pid:random``, or ``host:pid:random`` from before the node's name
    was known) has a lease."""
    host = node.split("@", 1)[-1]
    wanted = {str(p) for p in pids}
    latest = max(
        (
            end
            for token, end in ends.items()
            if token.count(":") >= 2
            and token.rsplit(":", 2)[0] in (node, host)
            and token.rsplit(":", 2)[1] in wanted
        ),
        default=None,
    )
    if latest is None:
        return None
    return round(max(0.0, now - (latest - get_settings().lease_timing.lease_s)), 1)


def queue_overview(redis_url: str, timeout_s: float = 1.0) -> QueueOverview:
    """The project queue and its workers, as ``ktour workers`` shows them.

    Returns
    -------
    QueueOverview
        ``queued`` (messages waiting in the project queue, every priority), ``held``
        (messages delivered to workers and not acknowledged: running or reserved) and
        ``workers`` (:func:`live_workers`).

    Raises
    ------
    BackendUnavailableError
        If the broker cannot be reached.
    """
    workers = live_workers(redis_url, timeout_s)
    r = connect(redis_url)
    try:
        pipe = r.pipeline(transaction=False)
        for name in celery_worker().queue_lists():
            pipe.llen(name)
        queued = sum(int(n) for n in pipe.execute())
        held = messages_held(r)
    finally:
        r.close()
    return {"queued": queued, "held": held, "workers": workers}


def _task_info(task: Reply) -> TaskRow:
    args = task.get("args")
    batch_id, jobs = None, None
    if isinstance(args, (list, tuple)) and args:
        if isinstance(args[0], str):
            batch_id = args[0]
        if len(args) > 1 and isinstance(args[1], list):
            jobs = args[1]
    return {
        "id": _text(task.get("id")),
        "task": _text(task.get("name") or task.get("type")),
        "batch_id": batch_id,
        "jobs": len(jobs) if jobs is not None else None,
        "started": _number(task.get("time_start")),
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    return value if isinstance(value, int | float) else None


def batch_states(r: redis.Redis, items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """batch_id -> queued / running / complete / collected, for
    :func:`knights_tour.batches.progress.list_batches` items (cheap: no worker inspection)."""
    markers = r.hgetall(keys.collected()) if items else {}
    out = {}
    for b in items:
        bid = str(b["batch_id"])
        done, total = int(b.get("done") or 0), int(b.get("total") or 0)
        if total and done >= total:
            out[bid] = "collected" if '"written"' in (markers.get(bid) or "") else "complete"
        else:
            out[bid] = "running" if done else "queued"
    return out


__all__ = [
    "TaskRow",
    "WorkerRow",
    "QueueOverview",
    "live_workers",
    "queue_overview",
    "batch_states",
]
