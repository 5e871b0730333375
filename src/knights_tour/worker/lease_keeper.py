"""The worker's lease policy: one lease per worker process, its heartbeat thread, and when the
process must stop (the Redis side of leases is :mod:`knights_tour.worker.leases`).

Each process that runs jobs has one :class:`LeaseKeeper` (:func:`keeper`): a token
(``name:pid:random``: the Celery node name, ``solver1@vm``, that ``ktour workers`` and the
records show, once :func:`name_process` has given it; else the host), the lease key of that
token in Redis, and a daemon thread that renews it every heartbeat
(:attr:`~knights_tour.settings.LeaseTiming.heartbeat_s`) - one renewal per period (a PEXPIRE,
and the lease's end noted in the registry of workers, in one script call) for the whole
process, however many jobs it holds. The keeper remembers when its last successful renewal was
sent, so before each job it knows without asking Redis whether the lease is certainly still
alive (renewed less than :attr:`~knights_tour.settings.LeaseTiming.known_alive_s` ago); only
after a stall (the process was stopped, swapped out, or cut off from Redis) does it ask, once,
before the next job (:meth:`LeaseKeeper.confirm`). A lease found lapsed is never renewed again:
the process takes a new token, and what is left of its chunk is
claimed again (jobs another task has taken or recorded meanwhile are skipped).

A Celery pool process also watches its parent (:func:`exit_with_parent`, set at pool start):
if the worker main process dies, the pool child exits (``os._exit(70)``) instead of running
jobs that recovery re-sends once its lease lapses.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence

import redis

from knights_tour.settings import LeaseTiming, get_settings
from knights_tour.worker import leases
from knights_tour.worker.ledger import Ledger

log = logging.getLogger(__name__)

EX_SOFTWARE = 70
"""Exit status of a pool process whose worker main process died (``sysexits.h``)."""

LATE_WARNING_EVERY_S = 60.0
"""The heartbeat's warning that this process was stalled is logged at most this often (a
long stall is one warning, with the count of late beats folded into the next one)."""


class LeaseKeeper:
    """This process's lease: its token, its heartbeat thread, what it knows of the lease.

    One per process (:func:`keeper`); a forked child gets a fresh one.

    Parameters
    ----------
    lease_s : float, optional
        Lease lifetime in seconds (default ``KT_LEASE_S``); its periods are
        :class:`~knights_tour.settings.LeaseTiming`'s.
    """

    def __init__(self, lease_s: float | None = None) -> None:
        self.timing = (
            get_settings().lease_timing if lease_s is None else LeaseTiming(float(lease_s))
        )
        self._pid = os.getpid()
        self.node: str | None = None
        self._ppid = os.getppid()
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None
        self._token: str | None = None
        self._last_ok = float("-inf")  # monotonic time the last successful renewal was sent
        self._thread: threading.Thread | None = None
        self._late_logged = float("-inf")
        self._late_count = 0

    @property
    def lease_s(self) -> float:
        """The lease lifetime, seconds."""
        return self.timing.lease_s

    @property
    def lease_ms(self) -> int:
        """The lease lifetime in milliseconds."""
        return self.timing.lease_ms

    @property
    def token(self) -> str | None:
        """The current token (None before the first :meth:`ensure`)."""
        return self._token

    def ensure(self, r: redis.Redis) -> str:
        """This process's token, with a lease on ``r``: a new token (and lease) the first time,
        after a lapse, or when ``r`` is another client (another server or database).

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis is unreachable.
        """
        with self._lock:
            if self._token is not None and self._client is r:
                return self._token
        token = f"{self.node or socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        sent = time.monotonic()
        leases.open_lease(r, token, self.lease_ms)
        with self._lock:
            self._client, self._token, self._last_ok = r, token, sent
        self._ensure_thread()
        return token

    def known_alive(self) -> bool:
        """True if the lease is certainly alive now: renewed successfully less than
        ``timing.known_alive_s`` seconds ago (no Redis call)."""
        with self._lock:
            return (
                self._token is not None
                and time.monotonic() - self._last_ok < self.timing.known_alive_s
            )

    def confirm(self, r: redis.Redis) -> bool:
        """True if the lease is alive: known locally, else renewed now (one call). False if it
        lapsed; the token is then dropped (the next :meth:`ensure` takes a new one).

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis is unreachable.
        """
        if self.known_alive():
            return True
        with self._lock:
            token = self._token
        if token is None:
            return False
        sent = time.monotonic()
        if leases.renew(r, token, self.lease_ms):
            self._renewed(token, sent)
            return True
        self._lapsed(token)
        return False

    def claim(
        self, r: redis.Redis, led: Ledger, item_keys: Sequence[str]
    ) -> tuple[str, leases.Claim]:
        """Claim ``item_keys`` of ``led`` under this process's token
        (:func:`knights_tour.worker.leases.claim`), taking a new token if the lease lapsed.

        Returns
        -------
        (token, Claim)

        Raises
        ------
        redis.ConnectionError, redis.TimeoutError
            If Redis is unreachable.
        """
        token = self.ensure(r)
        got = leases.claim(r, led, token, item_keys)
        if got.lapsed:  # stalled since the last claim: this token is done for
            self._lapsed(token)
            token = self.ensure(r)
            got = leases.claim(r, led, token, item_keys)
        return token, got

    def abandon(self, token: str, why: str) -> None:
        """Stop renewing ``token``'s lease (logged once, with ``why``): whatever it still holds
        lapses within ``lease_s`` and is re-sent by recovery; the next claim takes a new token.
        For claims the process could not give back."""
        if not self._drop(token):
            return
        log.warning(
            "%s; this process drops its lease %s, so they lapse within %.1f s and are re-sent",
            why,
            token,
            self.lease_s,
        )

    def _renewed(self, token: str, sent: float) -> None:
        with self._lock:
            if self._token == token:
                self._last_ok = max(self._last_ok, sent)

    def _drop(self, token: str) -> bool:
        """Forget ``token`` if it is still this process's lease; False if it was not."""
        with self._lock:
            if self._token != token:
                return False
            self._token = None
            self._last_ok = float("-inf")
        return True

    def _lapsed(self, token: str) -> None:
        if not self._drop(token):
            return
        log.warning(
            "the lease of this process (%s) lapsed (no renewal within %.1f s): the jobs "
            "it held may be run by another worker",
            token,
            self.lease_s,
        )

    # -- heartbeat ------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._beat, name="kt-lease-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        interval = self.timing.heartbeat_s
        last = time.monotonic()
        while True:
            time.sleep(interval)
            if os.getppid() != self._ppid:
                # Our worker main process died (we are a pool child it left behind): stop
                # renewing, so the lease lapses and our jobs are re-sent. A pool child also
                # exits, before its lease lapses, so it never runs a job a re-sent copy runs.
                if _EXIT_WITH_PARENT:
                    os._exit(EX_SOFTWARE)  # nothing of ours is left to flush
                return
            self._note_lateness(time.monotonic() - last - interval, interval)
            with self._lock:
                client, token = self._client, self._token
            if client is not None and token is not None:
                self._renew_from_heartbeat(client, token)
            # Measured from here: a renewal that waited for a slow or paused Redis (its socket
            # timeout) is not a stall of this process.
            last = time.monotonic()

    def _note_lateness(self, late_s: float, interval: float) -> None:
        """Warn (at most once a minute) when the heartbeat woke up more than a period late:
        this process was stalled (stopped, swapped out, starved of CPU)."""
        if late_s <= interval:
            return
        now = time.monotonic()
        self._late_count += 1
        if now - self._late_logged < LATE_WARNING_EVERY_S:
            return
        more = ""
        if self._late_count > 1:
            more = f" ({self._late_count - 1} more since the last warning)"
        log.warning(
            "lease heartbeat ran %.2f s late (lease %.1f s): this process was stalled%s",
            late_s,
            self.lease_s,
            more,
        )
        self._late_logged, self._late_count = now, 0

    def _renew_from_heartbeat(self, client: redis.Redis, token: str) -> None:
        sent = time.monotonic()
        try:
            alive = leases.renew(client, token, self.lease_ms)
        except redis.RedisError:
            return  # Redis away: the lease may lapse; recovery then re-sends
        if alive:
            self._renewed(token, sent)
        else:
            self._lapsed(token)


_EXIT_WITH_PARENT = False


def exit_with_parent() -> None:
    """Make this process exit (status :data:`EX_SOFTWARE`) when its parent dies (called in each
    Celery pool process at start: an orphaned pool child must not keep running jobs that
    recovery re-sends)."""
    global _EXIT_WITH_PARENT
    _EXIT_WITH_PARENT = True


_KEEPER: LeaseKeeper | None = None
_KEEPER_LOCK = threading.Lock()


def keeper() -> LeaseKeeper:
    """This process's :class:`LeaseKeeper` (a fresh one after ``fork``)."""
    global _KEEPER
    with _KEEPER_LOCK:
        if _KEEPER is None or _KEEPER._pid != os.getpid():  # noqa: SLF001
            _KEEPER = LeaseKeeper()
        return _KEEPER


def name_process(node: str | None) -> None:
    """Name this process's leases after its Celery node (``solver1@vm``, the task request's
    ``hostname``), so that ``ktour status`` names a worker as ``ktour workers`` and the records
    do; from its next token on (None: left as it is)."""
    if node:
        keeper().node = node


__all__ = ["LeaseKeeper", "keeper", "name_process", "exit_with_parent", "EX_SOFTWARE"]
