"""The one poll loop: wait for a batch or a count to complete, riding out Redis outages.

:func:`poll_until_complete` is what ``ktour run``, ``ktour count`` and ``ktour collect --wait``
wait with (through :func:`knights_tour.service.batches.wait_for_batch` and
:func:`knights_tour.service.counts.wait_for_count`). It knows nothing of terminals: callers
show progress through :class:`WaitHooks`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from knights_tour.errors import BackendUnavailableError
from knights_tour.store.batches import REDIS_ERRORS

REDIS_OUTAGE_S = 120.0
"""How long a wait keeps retrying while Redis is unreachable before it gives up, seconds."""


@dataclass
class WaitHooks:
    """Callbacks of :func:`poll_until_complete` (each optional)."""

    on_progress: Callable[[dict[str, Any]], None] | None = None
    """Called after each successful poll with the status dict."""

    on_outage: Callable[[bool], None] | None = None
    """Called with True when contact with Redis is lost, with False when it is back."""

    on_resent: Callable[[int], None] | None = None
    """Called with the number of jobs re-sent (lost with their worker), when there are any."""

    check: Callable[[dict[str, Any]], None] | None = None
    """Called after each poll that did not end the wait; may raise to stop waiting."""


def _finished(status: dict[str, Any]) -> bool:
    """Complete, or parts failed for good (a count's ``errors``): waiting will not mend it."""
    return bool(status.get("complete") or status.get("errors"))


def poll_until_complete(
    status_fn: Callable[[], dict[str, Any]],
    *,
    timeout_s: float | None = None,
    recover_fn: Callable[[], int] | None = None,
    hooks: WaitHooks | None = None,
    poll_s: float = 0.5,
    outage_s: float = REDIS_OUTAGE_S,
) -> dict[str, Any]:
    """Call ``status_fn()`` every ``poll_s`` seconds until the status says ``complete`` (or has
    ``errors``), or ``timeout_s`` seconds pass; return the last status.

    Parameters
    ----------
    status_fn : callable
        Returns a status dict with at least ``complete`` (bool), ``done`` and ``total``.
    timeout_s : float, optional
        Give up after this many seconds and return the last status (``complete`` False).
    recover_fn : callable, optional
        Called after each poll that is not complete; returns how many lost jobs it re-sent.
        A Redis error inside it is left to the next poll.
    hooks : WaitHooks, optional
        Progress, outage and re-send callbacks, and a ``check`` that may raise.
    poll_s : float
        Seconds between polls.
    outage_s : float
        How long Redis may stay unreachable before the wait gives up.

    Returns
    -------
    dict
        The last status.

    Raises
    ------
    BackendUnavailableError
        If Redis stays unreachable for ``outage_s`` seconds, or for the whole ``timeout_s``
        before any status was read.
    """
    hooks = hooks or WaitHooks()
    began = time.monotonic()
    outage_began: float | None = None
    status: dict[str, Any] | None = None
    while True:
        now = time.monotonic()
        timed_out = timeout_s is not None and now - began > timeout_s
        try:
            status = status_fn()
        except REDIS_ERRORS + (BackendUnavailableError,) as exc:
            if outage_began is None:
                outage_began = now
                if hooks.on_outage is not None:
                    hooks.on_outage(True)
            if now - outage_began > outage_s or (timed_out and status is None):
                raise BackendUnavailableError(f"lost contact with Redis while waiting: {exc}") \
                    from None
            if timed_out:
                return status  # type: ignore[return-value]
            time.sleep(poll_s)
            continue
        if outage_began is not None:
            outage_began = None
            if hooks.on_outage is not None:
                hooks.on_outage(False)
        if hooks.on_progress is not None:
            hooks.on_progress(status)
        if _finished(status):
            return status
        if recover_fn is not None:
            _recover(recover_fn, hooks)
        if timeout_s is not None and time.monotonic() - began > timeout_s:
            return status
        if hooks.check is not None:
            hooks.check(status)
        time.sleep(poll_s)


def _recover(recover_fn: Callable[[], int], hooks: WaitHooks) -> None:
    try:
        resent = recover_fn()
    except REDIS_ERRORS:
        return
    if resent and hooks.on_resent is not None:
        hooks.on_resent(resent)


__all__ = ["WaitHooks", "poll_until_complete", "REDIS_OUTAGE_S"]
