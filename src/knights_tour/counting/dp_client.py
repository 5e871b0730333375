"""Frontier-DP counts on the workers, client side: the count's sub-jobs (one per trunk, one per
searched start class: :func:`knights_tour.counting.dp_jobs.dp_plan`), registered and stored
per key as an enumeration count's are (:mod:`knights_tour.counting.store`), sent as the same
Celery task (:data:`knights_tour.worker.messages.TASK_COUNT_SUBJOBS`, so recovery, hand-back and
``stop_count`` treat them alike), and waited for.

A class's sub-job is sent once the layer it starts from is on disk: when its trunk's progress
in Redis (stored by the worker after each checkpointed layer) has passed that layer, or the
trunk has its entry. Running the same count again resumes: sub-jobs with an entry are not
sent, a trunk resumes from its checkpoint, a class from its trunk's kept layer. The worker
side is :mod:`knights_tour.counting.dp_execution`.

Typical use (what ``ktour count --method dp`` does)::

    plan = dp_plan(board)
    cid = dp_count_id(plan)
    items = plan.subjobs(memory_bytes)
    items = register_dp_count(r, cid, plan, items)
    status = wait_for_dp_count(r, url, cid, items, timeout_s=None)
    report = assemble_dp_count(r, cid, plan, items, elapsed_s)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import redis

from knights_tour.board import Square
from knights_tour.counting import store as count_store
from knights_tour.counting.client import send_subjobs, wait_for_count
from knights_tour.counting.dp_jobs import DpPlan
from knights_tour.counting.method import dp_report
from knights_tour.counting.plan import CountReport
from knights_tour.counting.records import (
    ClassFigures,
    CountEntry,
    CountExtra,
    DpProgress,
    DpSubJob,
    LayerRow,
)
from knights_tour.errors import KnightsTourError
from knights_tour.store.waiting import WaitHooks


def register_dp_count(
    r: redis.Redis,
    count_id: str,
    plan: DpPlan,
    items: list[DpSubJob],
    params: dict[str, Any] | None = None,
) -> list[DpSubJob]:
    """Register the count and its sub-jobs (idempotent; stored results stay). Returns
    ``items`` stamped with the count's generation
    (:func:`~knights_tour.counting.store.count_generation`: a new one when the count is new or
    was deleted, else the one it has), as they are stored and are to be sent: a result of a
    sub-job sent for an earlier generation is not stored.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    generation = count_store.count_generation(r, count_id)
    stamped = [msgspec.structs.replace(it, generation=generation) for it in items]
    fields = {
        "rows": plan.board.rows,
        "cols": plan.board.cols,
        "closed": False,
        "depth": 0,
        "use_symmetry": True,
        "method": "dp",
        "classes": [[list(rep), [list(s) for s in m]] for rep, m in plan.classes.items()],
        "params": dict(params or {}),
    }
    count_store.register_items(r, count_id, fields, {it.key: it for it in stamped})
    return stamped


def ready_items(
    r: redis.Redis,
    count_id: str,
    items: list[DpSubJob],
    sent: set[str],
    progress: dict[str, DpProgress] | None = None,
) -> list[DpSubJob]:
    """The sub-jobs to send now: without an entry, not in ``sent``, and (a class) its trunk's
    layer is kept: the trunk has an entry, or its progress (``progress``, the sweeps' records
    as :func:`~knights_tour.counting.store.load_dp_progress` gives them: read if not given) has
    passed that layer."""
    done = count_store.counted(count_store.load_partials(r, count_id))
    if progress is None:
        progress = count_store.load_dp_progress(r, count_id)
    trunks = {it.group: it.key for it in items if it.role == "trunk"}
    out = []
    for it in items:
        if it.key in sent or it.key in done:
            continue
        trunk = trunks.get(it.group) if it.role == "tail" else None
        if trunk is not None and it.after >= 0:
            got = progress.get(trunk)
            if trunk not in done and (got is None or got.step < it.after):
                continue
        out.append(it)
    return out


def wait_for_dp_count(
    r: redis.Redis,
    redis_url: str,
    count_id: str,
    items: list[DpSubJob],
    *,
    sent: set[str] | None = None,
    timeout_s: float | None = None,
    hooks: WaitHooks[count_store.CountStatus] | None = None,
    on_layers: Callable[[dict[str, DpProgress]], None] | None = None,
    on_sent: Callable[[list[str]], None] | None = None,
) -> count_store.CountStatus:
    """Send the count's ready sub-jobs (:func:`ready_items`) now and after every poll, until
    every sub-job has an entry or one failed (:func:`knights_tour.counting.client.wait_for_count`).
    ``sent`` (updated) holds the keys this run sent; ``on_layers(progress)`` gets the sweeps'
    progress records after each poll, ``on_sent(keys)`` the keys sent.

    Returns
    -------
    dict
        The last count status.

    Raises
    ------
    KnightsTourError, BackendUnavailableError
        As :func:`knights_tour.counting.client.wait_for_count`.
    """
    sent = set() if sent is None else sent
    given = hooks or WaitHooks()

    def step() -> None:
        progress = count_store.load_dp_progress(r, count_id)
        todo = ready_items(r, count_id, items, sent, progress)
        if todo:
            send_subjobs(redis_url, count_id, todo)
            sent.update(it.key for it in todo)
            if on_sent is not None:
                on_sent([it.key for it in todo])
        if on_layers is not None:
            on_layers(progress)

    def check(status: count_store.CountStatus) -> None:
        step()
        if given.check is not None:
            given.check(status)

    step()
    return wait_for_count(
        r,
        count_id,
        timeout_s=timeout_s,
        hooks=WaitHooks(given.on_progress, given.on_outage, given.on_resent, check),
    )


def _results(
    plan: DpPlan, items: list[DpSubJob], entries: dict[str, CountEntry]
) -> tuple[dict[Square, int], list[ClassFigures], list[list[LayerRow]]]:
    """``(class counts, per-class figures, trunks' layers)`` from the stored entries.

    Raises
    ------
    KnightsTourError
        If a stored entry's figures are not a class's or a trunk's (bad data in Redis).
    """
    counts: dict[Square, int] = dict(plan.trivial)
    figures = list(plan.trivial_figures)
    trunks: list[list[LayerRow]] = []
    for it in items:
        e = entries[it.key]
        fig = {} if e.figures is msgspec.UNSET else dict(e.figures)
        try:
            if it.role == "trunk":
                trunks.append(msgspec.convert(fig.get("layers", []), list[LayerRow]))
                continue
            assert it.square is not None  # a tail names its square
            if e.count is None:
                raise KeyError(it.key)  # an error entry: no count to report
            counts[it.square] = e.count
            fig |= {"representative": it.square, "count": counts[it.square]}
            found = msgspec.convert(fig, ClassFigures)
        except msgspec.ValidationError as exc:
            raise KnightsTourError(f"sub-job {it.key}: bad figures stored: {exc}") from None
        found.seconds, found.worker = e.elapsed_s, e.worker
        figures.append(found)
    return counts, figures, trunks


def assemble_dp_count(
    r: redis.Redis,
    count_id: str,
    plan: DpPlan,
    items: list[DpSubJob],
    elapsed_s: float,
    sent: set[str] | None = None,
) -> CountReport:
    """The count's report from its stored entries (the same grid and JSON as
    :func:`knights_tour.counting.method.dp_count`: ``extra`` with the method, per-class
    figures, ``wall_s``, ``peak_rss_bytes`` (the largest of the workers' processes' peaks;
    ``peak_rss_bytes_per_worker``: each worker's, whose sum bounds what they held at once),
    the trunks' layers),
    also stored in the count's hash.

    Raises
    ------
    KeyError
        If a sub-job has no stored count yet.
    """
    entries = count_store.load_partials(r, count_id)
    progress = count_store.load_dp_progress(r, count_id)
    counts, figures, trunks = _results(plan, items, entries)
    transitions = sum(entries[it.key].nodes for it in items)
    peaks = [(str(p.worker), p.peak_rss_bytes) for p in progress.values()]
    peaks += [
        (str(e.worker), 0 if e.peak_rss_bytes is msgspec.UNSET else e.peak_rss_bytes)
        for e in entries.values()
    ]
    by_worker: dict[str, int] = {}
    for name, peak_bytes in peaks:
        by_worker[name] = max(by_worker.get(name, 0), peak_bytes)
    ran = [entries[k] for k in (sent or ()) if k in entries]
    extra = CountExtra(
        method="frontier DP",
        dp_classes=figures,
        wall_s=round(elapsed_s, 3),
        peak_rss_bytes=max(by_worker.values(), default=0),
        peak_rss_bytes_per_worker=by_worker,
        trunks=trunks,
        count_id=count_id,
        subjob_s=round(sum(e.elapsed_s for e in entries.values()), 3),
        counting_s=count_store.counting_span_s(ran),
        reused_subjobs=len(items) - len(ran),
    )
    report = dp_report(plan.board, plan.classes, counts, len(items), transitions, elapsed_s, extra)
    count_store.save_report(r, count_id, report.to_dict())
    return report


__all__ = ["register_dp_count", "ready_items", "wait_for_dp_count", "assemble_dp_count"]
