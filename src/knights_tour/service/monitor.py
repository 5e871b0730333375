"""Watching the service: the Celery workers and what they run, and the batches' states.

* :func:`live_workers` asks the workers through Celery's remote-control API
  (``app.control.ping`` to learn which nodes are alive, then ``app.control.inspect().active()``
  for the tasks each one is running right now): ``ktour workers``. A broadcast waits for its
  timeout, and a worker busy solving may not answer in time, so nothing that must answer fast
  uses it: a batch's status comes from Redis alone (:mod:`knights_tour.service.status`).
* :func:`batch_states`: queued / running / complete / collected of many batches at once, from
  their record counts (``ktour batches``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from knights_tour.service._celery import celery_worker
from knights_tour.store import keys
from knights_tour.store.connection import connect


def live_workers(redis_url: str, timeout_s: float = 1.0) -> list[dict[str, Any]]:
    """The Celery workers answering on ``redis_url`` and their active tasks.

    Returns
    -------
    list of dict
        Sorted by node name: ``name``, ``active`` (list of ``{"id", "task", "batch_id",
        "jobs", "started"}``; ``jobs`` = jobs in the chunk for ``run_jobs`` tasks, ``started``
        unix seconds or None), ``answered_inspect`` (False if the node answered the ping but
        not the inspect request in time).

    Raises
    ------
    BackendUnavailableError
        If the broker cannot be reached.
    """
    connect(redis_url).close()  # a clear error for a wrong URL / password
    # Celery's broadcast publishes through the app's producer pool, so point the app itself at
    # this URL (as LocalWorkers.wait_ready does), not just the connection.
    app = celery_worker().use_redis(redis_url)
    with app.connection_for_write(redis_url) as conn:
        replies = app.control.ping(timeout=timeout_s, connection=conn) or []
        nodes = sorted({name for reply in replies for name in reply})
        active: dict[str, list[dict[str, Any]]] = {}
        if nodes:
            insp = app.control.inspect(
                destination=nodes, timeout=timeout_s, limit=len(nodes), connection=conn
            )
            active = insp.active() or {}
    out = []
    for name in nodes:
        tasks = active.get(name)
        out.append(
            {
                "name": name,
                "answered_inspect": tasks is not None,
                "active": [_task_info(t) for t in (tasks or [])],
            }
        )
    return out


def _task_info(task: Mapping[str, Any]) -> dict[str, Any]:
    args = task.get("args")
    batch_id, jobs = None, None
    if isinstance(args, (list, tuple)) and args:
        if isinstance(args[0], str):
            batch_id = args[0]
        if len(args) > 1 and isinstance(args[1], list):
            jobs = args[1]
    return {
        "id": task.get("id"),
        "task": task.get("name") or task.get("type"),
        "batch_id": batch_id,
        "jobs": len(jobs) if jobs is not None else None,
        "job_dicts": jobs,
        "started": task.get("time_start"),
    }


def batch_states(r: redis.Redis, items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """batch_id -> queued / running / complete / collected, for :func:`store.list_batches`
    items (cheap: no worker inspection)."""
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


__all__ = ["live_workers", "batch_states"]
