"""The worker side of counts: run count sub-jobs (:class:`knights_tour.counting.plan.SubJob`)
and store one partial count per sub-job, claimed, leased and handed back at the task's time
limit as a batch's jobs are (:mod:`knights_tour.batches.execution`). The Celery task in
:mod:`knights_tour.tasks` is a thin wrapper around :func:`run_count_chunk`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from knights_tour.counting import store as count_store
from knights_tour.counting.plan import SubJob
from knights_tour.settings import get_settings
from knights_tour.worker import orphans
from knights_tour.worker.claims import ChunkClaim, Item, redis_client, retrying
from knights_tour.worker.lease_keeper import keeper
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.messages import Send, invalid_key

log = logging.getLogger(__name__)


SubJobT = TypeVar("SubJobT", bound=Item)


def _subjob_key(sj: Item) -> str:
    """The key a sub-job is claimed, leased and stored under."""
    return sj.key


def store_error(
    held: ChunkClaim, key: str, worker: str | None, error: str, tally: Counter[str]
) -> None:
    """Store an error entry for sub-job ``key`` (the count is then reported incomplete, not
    left waiting) and mark it done."""
    count_store.save_partial(
        held.r, held.led.id, key, None, 0, worker=worker, error=error, ledger=held.led
    )
    tally["errors"] += 1
    held.done(key)


def _start_or_give_up(held: ChunkClaim, key: str, worker: str | None, tally: Counter[str]) -> bool:
    """Start sub-job ``key``; False, with an error entry stored, if workers died on it
    ``KT_MAX_ATTEMPTS`` times already."""
    deaths = held.start(key)
    if deaths < get_settings().max_attempts:
        return True
    error = f"WorkerLost: worker lost {deaths} times on this sub-job; given up"
    store_error(held, key, worker, error, tally)
    return False


def started_subjobs(
    held: ChunkClaim, todo: deque[SubJobT], worker: str | None, tally: Counter[str]
) -> Iterator[SubJobT]:
    """The claimed sub-jobs ``todo`` in order, each started (its lease begun) as it is
    yielded; one on which workers died ``KT_MAX_ATTEMPTS`` times gets an error entry instead
    and is not yielded."""
    while todo:
        todo = held.ready(todo, _subjob_key, lambda: None)
        if not todo:
            return
        sj = todo.popleft()
        if _start_or_give_up(held, sj.key, worker, tally):
            yield sj


def _count_subjobs(
    held: ChunkClaim, todo: deque[SubJob], worker: str | None, tally: Counter[str]
) -> None:
    """Count the claimed sub-jobs ``todo`` in order, storing each partial count as it is done
    (an error entry instead for one on which workers died ``KT_MAX_ATTEMPTS`` times)."""
    r, led = held.r, held.led
    for sj in started_subjobs(held, todo, worker, tally):
        began = time.perf_counter()
        count, nodes = sj.run()
        elapsed_s = time.perf_counter() - began
        count_store.save_partial(r, led.id, sj.key, count, nodes, elapsed_s, worker, ledger=led)
        tally["ran"] += 1
        held.done(sj.key)


def _stored(held: ChunkClaim, key: str) -> bool:
    return bool(retrying(lambda: count_store.has_entry(held.r, held.led.id, key)))


def hand_back_subjobs(
    held: ChunkClaim, subjobs: Sequence[Item], worker: str | None, send: Send, tally: Counter[str]
) -> None:
    """After the task's soft time limit (``KT_SOFT_TIME_LIMIT_S``): hand back the sub-jobs not
    counted, as a batch's chunk does for jobs (:mod:`knights_tour.batches.execution`). The one the
    limit cut is blamed an attempt; the cut that makes ``KT_MAX_ATTEMPTS`` stores an error
    entry for it instead (the count is then reported incomplete, not left waiting for ever).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis stays unreachable.
    """
    r, led = held.r, held.led
    cut = held.current
    if cut is not None and _stored(held, cut):
        # the limit came after its entry was stored, before it was marked done
        stored_key = cut
        retrying(lambda: orphans.finish(r, led, [stored_key]))
        held.done(stored_key)
        cut = None
    given_up = held.blame_cut()
    if given_up is not None:
        key, tries = given_up
        error = f"TimeLimit: the task's time limit cut this sub-job {tries} times; given up"
        retrying(
            lambda: count_store.save_partial(r, led.id, key, None, 0, worker=worker, error=error)
        )
        retrying(lambda: orphans.finish(r, led, [key]))
        held.done(key)
        tally["errors"] += 1
    stored: set[str] = set()
    if not held.claimed_all:  # the claim's sub-jobs are not known: keep what has an entry
        stored = {sj.key for sj in subjobs if _stored(held, sj.key)}
    back = [
        s
        for s in subjobs
        if s.key in held.unfinished or (not held.claimed_all and s.key not in stored)
    ]
    if back:
        tally["handed_back"] += held.hand_back(back, send, "sub-job(s)")


def run_count_chunk(
    count_id: str, subjob_dicts: Sequence[object], worker: str | None, send: Send | None = None
) -> dict[str, object]:
    """Run count sub-jobs (:class:`knights_tour.counting.plan.SubJob` dicts) of ``count_id`` and
    store each partial count under its sub-job key. The sub-jobs are claimed as batch jobs
    are: one that already has a partial count is skipped (resubmission, re-delivery), one
    another live worker holds is left to it; a malformed one is stored as an error entry.
    Sub-jobs are long (seconds), so each partial count is stored as it is counted. With
    ``send`` (``send(subjob_dicts)`` puts a task for them on the queue at recovery priority),
    the task's soft time limit hands the sub-jobs not counted back
    (:func:`hand_back_subjobs`); without, it is raised.

    Returns
    -------
    dict
        A tiny summary: ``count_id``, ``ran``, ``skipped``, ``errors``, ``handed_back``,
        ``worker``.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    held, tally = run_claimed_subjobs(
        count_id, subjob_dicts, SubJob.from_dict, worker, send, _count_subjobs
    )
    return {
        "count_id": count_id,
        "ran": tally["ran"],
        "skipped": held.skipped,
        "errors": tally["errors"],
        "handed_back": tally["handed_back"],
        "worker": worker,
    }


def run_claimed_subjobs(
    count_id: str,
    subjob_dicts: Any,
    parse: Callable[[Any], SubJobT],
    worker: str | None,
    send: Send | None,
    run: Callable[[ChunkClaim, deque[SubJobT], str | None, Counter[str]], None],
) -> tuple[ChunkClaim, Counter[str]]:
    """The frame of a count task: parse each of ``subjob_dicts`` (a list, or one dict) with
    ``parse`` (one that does not parse gets an error entry), claim them, ``run`` the claimed
    ones; at the task's soft time limit, with ``send``, hand back those not run
    (:func:`hand_back_subjobs`), without it re-raise. Returns the claim (released) and the
    tally (``ran``, ``errors``, ``handed_back``, and what ``run`` adds).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    r = redis_client()
    tally: Counter[str] = Counter()
    valid: list[SubJobT] = []
    for raw in subjob_dicts if isinstance(subjob_dicts, list) else [subjob_dicts]:
        try:
            valid.append(parse(raw))
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error entry
            name = raw.get("key") if isinstance(raw, dict) else None
            key = str(name or invalid_key(raw))
            error = f"{type(exc).__name__}: {exc}"
            count_store.save_partial(r, count_id, key, None, 0, worker=worker, error=error)
            tally["errors"] += 1
    held = ChunkClaim(r, Ledger.for_count(count_id), keeper())
    back = None if send is None else lambda: hand_back_subjobs(held, valid, worker, send, tally)
    try:
        held.run(valid, _subjob_key, lambda todo: run(held, todo, worker, tally), back)
    finally:
        held.release()
    return held, tally


__all__ = [
    "run_count_chunk",
    "run_claimed_subjobs",
    "hand_back_subjobs",
    "started_subjobs",
    "store_error",
]
