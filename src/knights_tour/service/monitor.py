"""Watching the service: live workers and what they run, and batch progress with an ETA.

* :func:`live_workers` asks the workers through Celery's remote-control API
  (``app.control.ping`` to learn which nodes are alive, then ``app.control.inspect().active()``
  for the tasks each one is running right now).
* :func:`batch_progress` combines a batch's status in Redis (records stored) with those active
  tasks: ``done`` jobs have a record, ``running`` jobs sit in a chunk a worker is executing and
  have no record yet, ``queued`` is the rest, ``failed`` counts ``error`` records. The ETA is
  the remaining jobs divided by the observed completion rate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from knights_tour.core.jobs import Job
from knights_tour.output.grouping import format_eta
from knights_tour.service._celery import celery_worker
from knights_tour.store import batches as store
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


def batch_progress(
    r: redis.Redis,
    batch_id: str,
    workers: Sequence[Mapping[str, Any]] | None = None,
    now: float | None = None,
    rate_jobs_per_s: float | None = None,
) -> dict[str, Any]:
    """Progress of one batch: done / running / queued / failed and an ETA.

    Parameters
    ----------
    r : redis.Redis
        Client (decode_responses=True).
    batch_id : str
    workers : sequence of dict, optional
        :func:`live_workers` output; without it ``running`` is 0 and every job without a
        record counts as queued.
    now : float, optional
        Unix seconds (default: the clock).
    rate_jobs_per_s : float, optional
        Completion rate to use for the ETA (e.g. measured between two polls); default the
        batch's average since it was created.

    Returns
    -------
    dict
        :func:`knights_tour.store.batches.batch_status` fields plus ``running``, ``queued``,
        ``failed`` (error records), ``workers_busy`` (node names running its jobs),
        ``rate_jobs_per_s``, ``eta_s`` (None when done or no rate yet), ``state`` (queued /
        running / complete / collected).

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    """
    now = time.time() if now is None else now
    st = store.batch_status(r, batch_id)  # missing_keys: the first 20, as before
    recorded = set(r.hkeys(keys.batch_status(batch_id)))
    running = 0
    busy: set[str] = set()
    for w in workers or ():
        for task in w.get("active", ()):
            if task.get("batch_id") != batch_id:
                continue
            for d in task.get("job_dicts") or ():
                try:
                    key = Job.from_dict(d).key
                except Exception:  # noqa: BLE001 - an invalid job is not running anything
                    continue
                if key not in recorded:
                    running += 1
                    busy.add(str(w.get("name")))
    remaining = st["total"] - st["done"]
    running = min(running, remaining)
    created = st.get("created")
    rate = rate_jobs_per_s
    if rate is None and created is not None and st["done"] > 0 and now > created:
        rate = st["done"] / (now - float(created))
    eta = None
    if remaining == 0:
        eta = 0.0
    elif rate:
        eta = remaining / rate
    if st["complete"]:
        marker = r.hget(keys.collected(), batch_id)
        state = "collected" if marker and '"written"' in marker else "complete"
    else:
        state = "running" if (st["done"] > 0 or running > 0) else "queued"
    return st | {
        "running": running,
        "queued": remaining - running,
        "failed": int(st["counts"].get("error", 0)),
        "workers_busy": sorted(busy),
        "rate_jobs_per_s": None if rate is None else round(rate, 3),
        "eta_s": None if eta is None else round(eta, 1),
        "state": state,
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


__all__ = ["live_workers", "batch_progress", "batch_states", "format_eta"]
