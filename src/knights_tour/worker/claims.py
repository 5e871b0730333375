"""What one chunk of work holds of a ledger (a batch's jobs or a count's sub-jobs): its claim,
the lease checks before each item, the re-claim after a lapse, the item running now and the
release of what it did not finish (:class:`ChunkClaim`); and :func:`retrying`, how a task rides
out a short Redis outage or a Redis that refuses writes for a while; :func:`redis_client`, the
worker process's one client. The Redis side is
:mod:`knights_tour.worker.leases`; the process's lease and heartbeat are
:mod:`knights_tour.worker.lease_keeper`.

A claim that cannot be given back (Redis refuses the write, or is away) is left to lapse: the
process drops its lease and takes a new one for its next task, so recovery re-sends what the
old lease held within ``KT_LEASE_S`` of Redis accepting writes again, instead of those jobs
staying held by a live worker that no longer runs them.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import redis

from knights_tour.errors import StorageFullError
from knights_tour.settings import get_settings
from knights_tour.store.connection import REDIS_ERRORS, connect
from knights_tour.store.memory import write_refusal
from knights_tour.worker import leases, orphans
from knights_tour.worker.lease_keeper import LeaseKeeper
from knights_tour.worker.ledger import Ledger
from knights_tour.worker.messages import DEFAULT_REDIS_URL, ItemDict, Send, at_task_limit

log = logging.getLogger(__name__)

T = TypeVar("T")


class Item(Protocol):
    """What a chunk hands back of an item (a batch's job, a count's sub-job)."""

    @property
    def key(self) -> str: ...

    def to_dict(self) -> ItemDict: ...


def redis_client() -> redis.Redis:
    """This worker process's Redis client (the broker's server, ``KT_REDIS_URL``): one per
    process and URL, created on first use and kept for every later chunk.

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached.
    """
    return _client_for(get_settings().redis_url or DEFAULT_REDIS_URL)


@functools.cache
def _client_for(url: str) -> redis.Redis:
    """The client of :func:`redis_client` for ``url`` (kept: connections are pooled)."""
    return connect(url)


def retrying(call: Callable[[], T]) -> T:
    """``call()``, retried with growing pauses (0.2 s doubling up to 2 s) for up to
    ``KT_SAVE_RETRY_S`` seconds while Redis is unreachable or refuses writes
    (:func:`knights_tour.store.memory.write_refusal`; logged as ``Redis refuses writes:
    <reason>``).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis stays unreachable.
    StorageFullError
        If Redis still refuses writes after ``KT_SAVE_RETRY_S``.
    """
    window_s = get_settings().save_retry_s
    deadline = time.monotonic() + window_s
    delay = 0.2
    while True:
        try:
            return call()
        except REDIS_ERRORS:
            if time.monotonic() >= deadline:
                raise
        except redis.ResponseError as exc:
            reason = write_refusal(exc)
            if reason is None:
                raise
            if time.monotonic() >= deadline:
                raise StorageFullError(reason) from None
            log.error("Redis refuses writes: %s; retrying for up to %g s", reason, window_s)
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


class ChunkClaim:
    """What one chunk holds of one ledger: the claim, the lease checks before each item, and
    the re-claim after a lapse (the same for batch jobs and count sub-jobs)."""

    def __init__(self, r: redis.Redis, led: Ledger, keeper_: LeaseKeeper) -> None:
        self.r, self.led, self.keeper = r, led, keeper_
        self.token = ""
        self.claim_id = ""
        self.careful = False
        self.deaths: dict[str, int] = {}
        self.unfinished: set[str] = set()
        self.skipped = 0
        self.current: str | None = None  # the item running now
        self.claimed_all = False  # every claim call of the chunk returned

    def claim(self, items: Sequence[T], key: Callable[[T], str]) -> deque[T]:
        """Claim ``items``; the ones now ours, in order (others are counted as skipped)."""
        first: dict[str, T] = {}
        for item in items:
            first.setdefault(key(item), item)
        names = list(first)
        outcomes: dict[str, str] = {}
        self.careful = False
        for i in range(0, len(names), orphans.SCRIPT_BATCH):
            part = names[i : i + orphans.SCRIPT_BATCH]
            self.token, got = retrying(functools.partial(self.keeper.claim, self.r, self.led, part))
            self.careful = self.careful or got.careful
            self.claim_id = got.claim
            self.deaths.update(got.deaths)
            outcomes.update(got.outcomes)
        mine = [(k, i) for k, i in first.items() if outcomes.get(k) == leases.CLAIMED]
        self.skipped += len(items) - len(mine)
        self.unfinished.update(k for k, _ in mine)
        self.claimed_all = True
        return deque(i for _, i in mine)

    def run(
        self,
        items: Sequence[T],
        key: Callable[[T], str],
        run: Callable[[deque[T]], None],
        hand_back: Callable[[], None] | None,
    ) -> None:
        """The frame of a chunk: claim ``items`` (:meth:`claim`) and ``run`` the ones now
        ours; when the task's soft time limit stops it
        (:func:`~knights_tour.worker.messages.at_task_limit`), ``hand_back`` what was not
        decided, or re-raise without one. The caller releases the claim.

        Raises
        ------
        Exception
            Whatever ``run`` raises, but the time limit when there is ``hand_back``.
        """
        try:
            run(self.claim(items, key))
        except Exception as exc:
            if hand_back is None or not at_task_limit(exc):
                raise
            hand_back()

    def ready(self, todo: deque[T], key: Callable[[T], str], flush: Callable[[], None]) -> deque[T]:
        """``todo`` if the lease is alive; else (the process was stalled past its lease) what
        is left of it once claimed again under a new token."""
        if self.keeper.known_alive():
            return todo
        flush()
        if retrying(lambda: self.keeper.confirm(self.r)):
            return todo
        rest = list(todo)
        log.warning(
            "%s %s: the lease lapsed before its job started for %s (this process was "
            "stalled longer than %.1f s); claiming them again",
            self.led.kind,
            self.led.id,
            ", ".join(key(i) for i in rest),
            self.keeper.lease_s,
        )
        self.unfinished.difference_update(key(i) for i in rest)
        self.claimed_all = False
        return self.claim(rest, key)

    def start(self, item_key: str) -> int:
        """Mark ``item_key`` started (careful mode only); returns the deaths blamed on it."""
        self.current = item_key
        if self.careful:
            retrying(lambda: leases.begin(self.r, self.led, self.token, item_key, self.claim_id))
        return self.deaths.get(item_key, 0)

    def done(self, item_key: str) -> None:
        self.unfinished.discard(item_key)
        if self.current == item_key:
            self.current = None

    def blame_cut(self) -> tuple[str, int] | None:
        """At the task's soft time limit: blame the item the limit cut (:attr:`current`) one
        attempt (its ``attempts`` entry + 1, so its next claim is careful) and return None; or,
        if this cut makes ``KT_MAX_ATTEMPTS``, return it with its tries (this cut included)
        for the caller to record as given up. None too when no item was cut.

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis stays unreachable.
        """
        cut = self.current
        if cut is None:
            return None
        tries = self.deaths.get(cut, 0) + 1
        if tries >= get_settings().max_attempts:
            return cut, tries
        retrying(lambda: self.r.hincrby(self.led.attempts, cut, 1))
        return None

    def release(self, item_keys: Sequence[str] | None = None) -> None:
        """Give up the claims on ``item_keys`` (default: every unfinished one), so another task
        may run them at once. If Redis does not take the release (away, or refusing writes),
        the process drops its lease (:meth:`LeaseKeeper.abandon`): the claims lapse within
        ``KT_LEASE_S`` and recovery re-sends them."""
        names = list(self.unfinished if item_keys is None else item_keys)
        self.unfinished.difference_update(names)
        token = self.token or self.keeper.token
        if names and token:
            try:
                leases.release(self.r, self.led, token, names)
            except redis.RedisError as exc:
                self.keeper.abandon(token, f"could not give back {len(names)} claim(s): {exc}")

    def send_back(self, item_keys: list[str], item_dicts: list[ItemDict], send: Send) -> None:
        """Hand ``item_keys`` back at the task's time limit: release their claims, ``send``
        their dicts again as one task, and mark them re-sent (so recovery does not re-send
        them a second time).

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis stays unreachable.
        """
        self.release(item_keys)
        send(item_dicts)
        retrying(lambda: orphans.mark_requeued(self.r, self.led, item_keys))

    def hand_back(self, items: Sequence[Item], send: Send, what: str, note: str = "") -> int:
        """At the task's time limit: :meth:`send_back` ``items`` (not empty) and log one
        warning, ``<batch|count> ID: the task's time limit was reached; N <what> handed
        back<note>``. Returns how many went back.

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis stays unreachable.
        """
        self.send_back([i.key for i in items], [i.to_dict() for i in items], send)
        log.warning(
            "%s %s: the task's time limit was reached; %d %s handed back%s",
            self.led.kind,
            self.led.id,
            len(items),
            what,
            note,
        )
        return len(items)


__all__ = ["ChunkClaim", "Item", "retrying", "redis_client"]
