"""The one poll loop: wait for a batch or a count to finish, riding out Redis outages.

:func:`poll_until_complete` is what ``ktour run``, ``ktour count`` and ``collect --wait`` wait
with (through :func:`knights_tour.batches.client.wait_for_batch` and
:func:`knights_tour.counting.client.wait_for_count`). It knows nothing of terminals: progress,
outage notes and re-sent jobs are reported through :class:`WaitHooks`.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar, Unpack

import redis

from knights_tour.errors import BackendUnavailableError
from knights_tour.store.connection import REDIS_ERRORS
from knights_tour.store.events import Wakeup
from knights_tour.store.memory import write_refusal

REDIS_OUTAGE_S = 120.0
"""How long a waiting client keeps retrying while Redis is unreachable, in seconds."""

Status = TypeVar("Status", bound=Mapping[str, object])
"""What a wait polls: a batch's or a count's status, with at least ``complete`` (and, where
the poll reads it, ``writes_refused``: Redis's reason while it refuses writes, or None)."""


@dataclass
class WaitHooks(Generic[Status]):
    """Callbacks of :func:`poll_until_complete`; every one is optional."""

    on_progress: Callable[[Status], None] | None = None
    """Called after each successful poll with the status dict (e.g. to move a progress bar)."""

    on_outage: Callable[[bool], None] | None = None
    """Called with True when contact with Redis is lost, with False when it is back."""

    on_resent: Callable[[int], None] | None = None
    """Called with the number of jobs re-sent by recovery (lost with their worker), when > 0."""

    check: Callable[[Status], None] | None = None
    """Called after each poll that did not end the wait; may raise to stop waiting (e.g. when
    every local worker has exited)."""

    on_refused: Callable[[str | None], None] | None = None
    """Called with Redis's reason when it begins to refuse writes (the status's
    ``writes_refused``, or a recovery pass refused), with None when it accepts them again."""


class WaitOptions(TypedDict, Generic[Status], total=False):
    """How long and how often a wait polls, and who hears of it: :func:`poll_until_complete`'s
    keywords of the same names (its defaults where left out), which :func:`wait_announced` and
    the batch's and the count's waits pass on."""

    timeout_s: float | None
    hooks: WaitHooks[Status] | None
    poll_s: float
    outage_s: float


FIRST_POLL_S = 0.05
"""Seconds before the second poll of :func:`poll_until_complete`."""


def _complete(status: Status) -> bool:
    return bool(status["complete"])


def _pauses(longest_s: float) -> Iterator[float]:
    """:data:`FIRST_POLL_S`, then each pause half as long again, up to ``longest_s``."""
    pause = min(longest_s, FIRST_POLL_S)
    while True:
        yield pause
        pause = min(longest_s, pause * 1.5)


def poll_until_complete(
    status_fn: Callable[[], Status],
    *,
    timeout_s: float | None = None,
    recover_fn: Callable[[], list[str]] | None = None,
    hooks: WaitHooks[Status] | None = None,
    poll_s: float = 0.5,
    outage_s: float = REDIS_OUTAGE_S,
    is_done: Callable[[Status], bool] = _complete,
    pause: Callable[[float], object] = time.sleep,
    steady: bool = False,
) -> Status:
    """Call ``status_fn()`` until ``is_done(status)`` or ``timeout_s``: first after
    :data:`FIRST_POLL_S`, each pause then half as long again, up to ``poll_s`` seconds (with
    ``steady``, every pause ``poll_s``). No pause runs past ``timeout_s``.

    Parameters
    ----------
    status_fn : callable
        Returns the current status dict (e.g. :func:`knights_tour.batches.progress.batch_status`);
        may raise one of :data:`knights_tour.store.connection.REDIS_ERRORS` while Redis is away.
    timeout_s : float, optional
        Give up after this many seconds and return the last status (None: wait for ever).
    recover_fn : callable, optional
        Called after each poll that did not end the wait; returns the keys of the jobs it
        re-sent (:func:`knights_tour.batches.client.recover_lost_jobs`); Redis errors wait.
    hooks : WaitHooks, optional
        Progress, outage, re-send and liveness callbacks.
    poll_s : float
        Longest pause between polls (seconds).
    steady : bool
        Pause ``poll_s`` between all polls (a display refreshed at a fixed interval) instead of
        starting at :data:`FIRST_POLL_S` and growing.
    outage_s : float
        Seconds without Redis after which the wait fails.
    is_done : callable
        Ends the wait; default ``status["complete"]``.
    pause : callable
        ``pause(seconds)`` between polls; default :func:`time.sleep`. A
        :meth:`knights_tour.store.events.Wakeup.wait` returns early when the end is announced.

    Returns
    -------
    dict
        The last status; it may not be done if ``timeout_s`` passed.

    Raises
    ------
    BackendUnavailableError
        If Redis stayed unreachable for ``outage_s`` s, or timed out before any status came.
    Exception
        Whatever ``hooks.check`` raises.
    """
    hooks = hooks or WaitHooks[Status]()
    began = time.monotonic()
    pauses = itertools.repeat(poll_s) if steady else _pauses(poll_s)
    outage = _Outage(hooks, outage_s)
    refused = _Refused(hooks)
    status: Status | None = None
    while True:
        try:
            status = status_fn()
        except REDIS_ERRORS as exc:
            timed_out = timeout_s is not None and time.monotonic() - began >= timeout_s
            outage.lost(exc, fatal=timed_out and status is None)
            if timed_out and status is not None:  # (with no status yet, lost() raised)
                return status
            time.sleep(poll_s)
            continue
        outage.back()
        if _after_poll(status, is_done, recover_fn, hooks, refused) or (
            timeout_s is not None and time.monotonic() - began >= timeout_s
        ):
            return status
        if hooks.check is not None:
            hooks.check(status)
        wait_s = next(pauses)
        if timeout_s is not None:
            wait_s = max(0.01, min(wait_s, timeout_s - (time.monotonic() - began)))
        pause(wait_s)


class _Outage:
    """The current stretch without Redis, if any: reported through ``hooks.on_outage`` when it
    begins (True) and when it ends (False); the wait fails once it lasted ``outage_s`` seconds."""

    def __init__(self, hooks: WaitHooks[Any], outage_s: float) -> None:
        self.hooks = hooks
        self.outage_s = outage_s
        self.began: float | None = None

    def lost(self, exc: BaseException, *, fatal: bool = False) -> None:
        """A poll failed with ``exc``: note when the outage began (monotonic clock), and raise
        :class:`BackendUnavailableError` if it has lasted ``outage_s`` seconds or ``fatal``."""
        now = time.monotonic()
        if self.began is None:
            self.began = now
            if self.hooks.on_outage is not None:
                self.hooks.on_outage(True)
        if now - self.began > self.outage_s or fatal:
            raise BackendUnavailableError(f"lost contact with Redis while waiting: {exc}") from None

    def back(self) -> None:
        """A poll succeeded: end the outage, if there was one."""
        if self.began is not None:
            self.began = None
            if self.hooks.on_outage is not None:
                self.hooks.on_outage(False)


class _Refused:
    """Whether Redis refuses writes, as last seen: ``hooks.on_refused`` hears of each change
    once (the reason when it begins, None when it ends)."""

    def __init__(self, hooks: WaitHooks[Any]) -> None:
        self.hooks = hooks
        self.reason: str | None = None

    def seen(self, reason: str | None) -> None:
        if (reason is None) == (self.reason is None):
            return
        self.reason = reason
        if self.hooks.on_refused is not None:
            self.hooks.on_refused(reason)


def _after_poll(
    status: Status,
    is_done: Callable[[Status], bool],
    recover_fn: Callable[[], list[str]] | None,
    hooks: WaitHooks[Status],
    refused: _Refused,
) -> bool:
    """Report progress (and whether Redis refuses writes, if the status says); True if the
    wait is over, else run one recovery pass."""
    if "writes_refused" in status:
        reason = status["writes_refused"]
        refused.seen(reason if isinstance(reason, str) else None)
    if hooks.on_progress is not None:
        hooks.on_progress(status)
    if is_done(status):
        return True
    if recover_fn is not None:
        _recover(recover_fn, hooks, refused)
    return False


def _recover(recover_fn: Callable[[], list[str]], hooks: WaitHooks[Any], refused: _Refused) -> None:
    """Run one recovery pass; report what it re-sent; Redis errors (away, or refusing
    writes) wait for the next poll."""
    try:
        resent = recover_fn()
    except REDIS_ERRORS:
        return
    except redis.ResponseError as exc:
        reason = write_refusal(exc)
        if reason is None:
            raise
        refused.seen(reason)
        return
    if resent and hooks.on_resent is not None:
        hooks.on_resent(len(resent))


def wait_announced(
    r: redis.Redis,
    channel: str,
    status_fn: Callable[[], Status],
    is_done: Callable[[Status], bool],
    recover: Callable[[str], list[str]],
    *,
    recover_url: str | None = None,
    **wait: Unpack[WaitOptions[Status]],
) -> Status:
    """Wait as :func:`poll_until_complete` does (``wait``: its :class:`WaitOptions`), each
    pause cut short when the end is announced on the pub/sub ``channel``
    (:class:`~knights_tour.store.events.Wakeup`); with ``recover_url`` (the broker),
    ``recover(recover_url)`` after every poll re-sends the work lost with its worker. A batch's
    wait and a count's (``wait_for_batch``, ``wait_for_count``) are this with their own status
    and end.

    Raises
    ------
    BackendUnavailableError
        If Redis stayed unreachable for ``outage_s`` seconds.
    """
    recover_fn = None if recover_url is None else functools.partial(recover, recover_url)
    # Subscribed before the first poll, so the announcement of the end cannot fall between.
    with Wakeup(r, channel) as wakeup:
        return poll_until_complete(
            status_fn, recover_fn=recover_fn, is_done=is_done, pause=wakeup.wait, **wait
        )


__all__ = [
    "WaitHooks",
    "WaitOptions",
    "REDIS_OUTAGE_S",
    "FIRST_POLL_S",
    "poll_until_complete",
    "wait_announced",
]
