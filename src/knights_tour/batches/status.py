"""A batch's status from Redis alone: done / running / queued counts, which worker process holds
which jobs since when, and whether anyone serves the batch at all (``ktour status``).

Everything comes from what the workers already write - the batch's tally (records stored), its
``started`` hash (who claimed which job) and the leases of the worker processes with the
registry of when each runs out (:mod:`knights_tour.worker.holders`) - in a handful of pipelined
round trips, whatever the batch's size. No Celery broadcast: a busy worker answers no inspect
request, so asking the workers is both slow and wrong while they solve.

* ``running``: jobs held by a process whose lease is live (claimed with their chunk, no record
  yet); ``orphaned``: jobs held by a process whose lease has run out (it died or stalled:
  recovery re-sends them once a live worker sweeps); ``queued``: the rest without a record.
* ``state``: ``complete`` / ``collected`` (every job has a record), ``cancelled``, ``stalled``
  (no live worker lease on the server for
  :attr:`~knights_tour.settings.LeaseTiming.stalled_after_s`: nobody will finish it unless
  workers start or it is resumed; ``reason`` says why), ``running`` (a job is held or has a
  record), ``queued`` (nothing started yet).

A batch whose workers all died shows ``stalled`` at most one lease (``KT_LEASE_S``) plus
``stalled_after_s`` after they died: their leases run out within one period, and the batch is
stalled ``stalled_after_s`` later.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TypedDict

import redis

from knights_tour.batches import progress
from knights_tour.batches.estimate import eta_s, planned_s_per_job
from knights_tour.errors import KnightsTourError
from knights_tour.settings import LeaseTiming, get_settings
from knights_tour.store import keys
from knights_tour.store.memory import writes_refused
from knights_tour.worker import dead_letters
from knights_tour.worker.dead_letters import DeadLetterSummary
from knights_tour.worker.holders import Holding, LeaseView, lease_view, server_leases
from knights_tour.worker.ledger import Ledger


class Holder(TypedDict):
    """A worker process holding jobs of a batch (:func:`batch_view`'s ``workers``)."""

    worker: str
    """Its node name and PID, ``node:pid``."""
    token: str
    jobs: int
    first: str | None
    last: str | None
    """The first and last of the job keys it holds."""
    running_job: str | None
    since: float | None
    """Unix seconds of its claim."""
    for_s: float | None
    live: bool
    """Its lease is live."""


class DeadLettersNote(DeadLetterSummary):
    """The dead letters a status shows, with the list's key."""

    key: str


class ServerNotes(TypedDict):
    """What a status adds about the server (:func:`server_notes`)."""

    writes_refused: str | None
    dead_letters: DeadLettersNote


class BatchView(progress.BatchProgress):
    """The status of one batch (:func:`batch_view`)."""

    running: int
    queued: int
    orphaned: int
    failed: int
    workers: list[Holder]
    workers_busy: list[str]
    live_workers: int
    reason: str | None
    stalled_since: float | None
    now: float
    rate_jobs_per_s: float | None
    planned_s_per_job: float | None
    state: str
    eta_s: float | None
    writes_refused: str | None
    dead_letters: DeadLettersNote


def shown_params(params: Mapping[str, object]) -> dict[str, object]:
    """The params worth printing, as the user wrote them: ``sizes`` is the ``--sizes`` text
    (``"5-34"``) where the batch kept it (``sizes_asked``), else the stored board list; options
    that are unset or false are left out.

    >>> shown_params({"sizes": "5x5,6x6", "sizes_asked": "5-6", "closed": False, "solver": "cpsat"})
    {'sizes': '5-6', 'solver': 'cpsat'}
    """
    out = {k: v for k, v in params.items() if k != "sizes_asked" and v not in (None, False)}
    if params.get("sizes_asked"):
        out["sizes"] = params["sizes_asked"]
    return out


def _holder(h: Holding, now: float) -> Holder:
    return {
        "worker": h.worker,
        "token": h.token,
        "jobs": len(h.items),
        "first": h.items[0] if h.items else None,
        "last": h.items[-1] if h.items else None,
        "running_job": h.started,
        "since": h.since,
        "for_s": None if h.since is None else round(max(0.0, now - h.since), 1),
        "live": h.live,
    }


def assess(
    lv: LeaseView, submitted: float | None, orphaned: int, lease_s: float
) -> tuple[str | None, float | None]:
    """Whether an unfinished batch is stalled: ``(reason, stalled_since)``, both None when it
    is not.

    Stalled: no live worker lease on the server, and none for ``LeaseTiming(lease_s)``'s
    ``stalled_after_s`` seconds since the later of ``submitted`` (unix s) and the end of the
    last lease (``lv.last_lease_end``; a lease whose key is gone before its registered end
    counts as ended now).

    Returns
    -------
    (str or None, float or None)
        The reason in words (e.g. ``"no live worker lease for 25 s; 12 jobs held by expired
        leases"``) and the server time (unix s) the batch became stalled.
    """
    if lv.live_tokens:
        return None, None
    ended = None if lv.last_lease_end is None else min(lv.last_lease_end, lv.now)
    since = max(t for t in (ended, submitted, float("-inf")) if t is not None)
    stalled_after_s = LeaseTiming(lease_s).stalled_after_s
    if since == float("-inf") or lv.now - since < stalled_after_s:
        return None, None
    idle = lv.now - since
    reason = f"no live worker lease for {idle:.0f} s"
    if ended is None or (submitted is not None and ended < submitted):
        reason += " (none since the batch was submitted)"
    if orphaned:
        reason += f"; {orphaned} job(s) held by expired leases"
    return reason, since + stalled_after_s


def newest_batch(r: redis.Redis) -> str:
    """The id of the newest batch on the server: what ``status`` and ``report`` take when no
    BATCH is given.

    Raises
    ------
    KnightsTourError
        If the server has no batch.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    items = progress.list_batches(r, limit=1)
    if not items:
        raise KnightsTourError("no batches yet (see `ktour run` or `ktour submit`)")
    return str(items[-1]["batch_id"])


def _counts(r: redis.Redis, batch_id: str) -> progress.BatchProgress:
    """Records stored, from the tally (cheap); every job is read only to confirm a batch the
    tally calls complete, or where the tally does not cover older records."""
    st = progress.batch_progress(r, batch_id)
    if st is None or st["complete"]:
        st = progress.batch_status(r, batch_id, max_missing=0)
    return st


def batch_view(
    r: redis.Redis,
    batch_id: str,
    rate_jobs_per_s: float | None = None,
    lease_s: float | None = None,
) -> BatchView:
    """The status of one batch, from Redis alone (see the module docstring).

    Parameters
    ----------
    r : redis.Redis
        Client (decode_responses=True).
    batch_id : str
    rate_jobs_per_s : float, optional
        Completion rate for the ETA (e.g. measured between two polls); default the batch's
        average since it was created.
    lease_s : float, optional
        The workers' lease period, seconds (default ``KT_LEASE_S``).

    Returns
    -------
    BatchView
        :func:`knights_tour.batches.progress.batch_status` fields (``missing_keys`` empty) plus
        ``running``, ``queued``, ``orphaned`` (jobs), ``failed`` (error records),
        ``workers`` (one dict per process holding its jobs: ``worker`` node:pid, ``token``,
        ``jobs``, ``first`` / ``last`` job keys, ``running_job`` or None, ``since`` unix s
        of its claim, ``for_s``, ``live``), ``workers_busy`` (node:pid of the live ones),
        ``live_workers`` (processes with a live lease on the server), ``rate_jobs_per_s``,
        ``planned_s_per_job`` (the estimate on the live workers, or None), ``eta_s``
        (:func:`~knights_tour.batches.estimate.eta_s`; None if stalled or unknown), ``state``,
        ``reason``, ``stalled_since`` (unix s; None unless stalled), ``now``, :func:`server_notes`.

    Raises
    ------
    KnightsTourError
        For an unknown batch.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    lease_s = get_settings().lease_timing.lease_s if lease_s is None else float(lease_s)
    st = _counts(r, batch_id)
    pipe = r.pipeline(transaction=False)
    pipe.hget(keys.batch(batch_id), "state")
    pipe.hget(keys.batch(batch_id), "meta")
    pipe.hget(keys.collected(), batch_id)
    state_field, meta_raw, marker = pipe.execute()
    lv = lease_view(r, Ledger.for_batch(batch_id))
    remaining = st["total"] - st["done"]
    running = min(lv.held(live=True), remaining)
    orphaned = min(lv.held(live=False), remaining - running)
    submitted = _submitted(meta_raw, st["created"])
    rate = _rate(st, lv.now) if rate_jobs_per_s is None else rate_jobs_per_s
    planned = planned_s_per_job(st["params"] or {}, len(lv.live_tokens))
    eta = eta_s(remaining, st["done"], st["done"] / rate if rate else 0.0, planned)
    notes = server_notes(r, st["complete"])
    out: BatchView = {
        **st,
        "running": running,
        "queued": remaining - running - orphaned,
        "orphaned": orphaned,
        "failed": int(st["counts"].get("error", 0)),
        "workers": [_holder(h, lv.now) for h in lv.holdings],
        "workers_busy": [h.worker for h in lv.holdings if h.live],
        "live_workers": len(lv.live_tokens),
        "reason": None,
        "stalled_since": None,
        "now": lv.now,
        "rate_jobs_per_s": None if rate is None else round(rate, 3),
        "planned_s_per_job": planned,
        "state": "",
        "eta_s": None,
        "writes_refused": notes["writes_refused"],
        "dead_letters": notes["dead_letters"],
    }
    _settle(out, marker, state_field, lv, submitted, lease_s)
    ended = out["state"] in ("stalled", progress.CANCELLED)
    out["eta_s"] = None if eta is None or ended else round(eta, 1)
    return out


def _settle(
    out: BatchView,
    marker: str | None,
    state_field: str | None,
    lv: LeaseView,
    submitted: float | None,
    lease_s: float,
) -> None:
    """Set the ``state`` of a batch's view (and ``reason``, ``stalled_since`` if stalled;
    ``queued`` 0 if cancelled) from its collection ``marker`` and its ``state`` field."""
    if out["complete"]:
        out["state"] = "collected" if marker and '"written"' in str(marker) else "complete"
    elif state_field == progress.CANCELLED:
        out["state"], out["queued"] = progress.CANCELLED, 0
    else:
        out["reason"], out["stalled_since"] = assess(lv, submitted, out["orphaned"], lease_s)
        if out["reason"]:
            out["state"] = "stalled"
        else:
            out["state"] = "running" if (out["done"] > 0 or out["running"] > 0) else "queued"


def server_notes(r: redis.Redis, complete: bool) -> ServerNotes:
    """What a status adds about the server: ``writes_refused`` (Redis's reason while it refuses
    writes and the batch is not ``complete``, else None:
    :func:`knights_tour.store.memory.writes_refused`) and ``dead_letters`` (the malformed queue
    messages the workers set aside: ``count``, ``latest`` entry or None, ``key`` of the list;
    :func:`knights_tour.worker.dead_letters.summary`).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    dead = dead_letters.summary(r)
    return {
        "writes_refused": None if complete else writes_refused(r),
        "dead_letters": {
            "count": dead["count"],
            "latest": dead["latest"],
            "key": keys.dead_letters(),
        },
    }


def _rate(st: progress.BatchProgress, now: float) -> float | None:
    """Jobs per second since the batch was created (a resume does not restart the clock)."""
    created = st["created"]
    if created is None or st["done"] <= 0 or now <= float(created):
        return None
    return float(st["done"]) / (now - float(created))


def stalled_batches(
    r: redis.Redis, batch_ids: Sequence[str], lease_s: float | None = None
) -> dict[str, str]:
    """batch_id -> why it is stalled, for those of ``batch_ids`` (unfinished, not cancelled:
    the caller's choice) that nobody serves (:func:`assess`, without counting orphans). Three
    round trips whatever the number of batches (``ktour batches``).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    if not batch_ids:
        return {}
    lease_s = get_settings().lease_timing.lease_s if lease_s is None else float(lease_s)
    lv = server_leases(r)
    if lv.live_tokens:
        return {}
    pipe = r.pipeline(transaction=False)
    for bid in batch_ids:
        pipe.hget(keys.batch(bid), "meta")
    out = {}
    for bid, raw in zip(batch_ids, pipe.execute(), strict=True):
        created = _submitted(raw, None)
        reason, _ = assess(lv, created, 0, lease_s)
        if reason:
            out[bid] = reason
    return out


def _submitted(meta_raw: str | None, created: float | None) -> float | None:
    """When the batch was last submitted: its meta's ``updated`` (a resume) or ``created``
    (the meta's, else ``created``)."""
    try:
        meta = json.loads(meta_raw) if meta_raw else {}
    except ValueError:
        meta = {}
    times = [
        t for t in (meta.get("updated"), meta.get("created"), created) if isinstance(t, int | float)
    ]
    return max(times) if times else None


__all__ = [
    "BatchView",
    "Holder",
    "ServerNotes",
    "newest_batch",
    "shown_params",
    "assess",
    "batch_view",
    "server_notes",
    "stalled_batches",
]
