"""Open a backend for a command: a Redis server (the given one, or the embedded one) and,
for the commands that run work, local Celery workers.

:func:`open_store` connects (starting or attaching to the embedded Redis when no URL is
configured); :func:`open_backend` adds what ``ktour run`` and ``ktour count`` need around it:
K local workers (:class:`~knights_tour.local.workers.LocalWorkers`), SIGTERM handled
like Ctrl-C, the liveness check of those workers while waiting, and, when the command fails or
is interrupted, dropping the queued tasks of the batch or count it abandons - only those:
other batches' tasks on the same queue stay. Everything started is stopped when the ``with``
block ends, in reverse order. No terminal output here: messages go to the ``notify``
callback.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from knights_tour.errors import KnightsTourError
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.launching import (
    Launched,
    configured_redis_url,
    embedded_dir,
    local_worker_count,
    worker_log_dir,
)
from knights_tour.local.workers import LocalWorkers
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.store.urls import mask_url
from knights_tour.worker import leases
from knights_tour.worker.lazy import celery_worker, messages_held

ACK_WAIT_S = 1.0
"""Seconds the local workers' stop waits at most, when :func:`open_backend`'s block ended
normally, for the task messages the workers hold to be acknowledged before it kills them. A
worker acknowledges a task only after the task has stored its records, so a client that has
just read the last record often finds the message still held for a few milliseconds; without
the wait, the workers would get Celery's warm shutdown, which takes a second or more."""

NO_WORKERS_WARNING = (
    "warning: no worker answered a ping on this Redis; jobs wait until one starts "
    "(celery -A knights_tour.worker worker -Q knights_tour)"
)
"""What :func:`open_backend` (and ``ktour submit``) say when no worker listens on the Redis."""


def _to_stderr(message: str) -> None:
    print(f"ktour: {message}", file=sys.stderr)


@dataclass
class Backend:
    """An open backend (yielded by :func:`open_store` / :func:`open_backend`)."""

    url: str
    """The Redis URL (broker and store); may carry a password: print it via ``mask_url``."""

    client: redis.Redis
    """A connected redis-py client (``decode_responses=True``)."""

    server: EmbeddedRedis | None
    """The embedded server when no URL was configured, else None."""

    workers: LocalWorkers | None = None
    """The local workers started by :meth:`start_workers`, if any."""

    where: str = ""
    """``"embedded Redis"`` or ``"Redis at <masked URL>"``, for messages."""

    notify: Callable[[str], None] = _to_stderr
    """Receives one-line messages (without the ``ktour:`` prefix)."""

    worker_count: int = 0
    """How many local workers :meth:`start_workers` starts."""

    pending: str | None = None
    """What was submitted and not yet awaited to the end (``"batch ID"``), see
    :meth:`abandon_on_error`."""

    stop_pending: Callable[[redis.Redis], int] | None = None
    """Stops :attr:`pending` on a given client and returns the queued tasks it dropped (only
    its own), see :meth:`abandon_on_error`."""

    hurry: bool = False
    """Set when the work was stopped (timeout, Ctrl-C, cancel, error): local workers are then
    killed at once instead of letting their running task end, and the messages of the
    stopped work they held are dropped."""

    stop_last: Callable[[redis.Redis], int] | None = None
    """The ``stop`` of the last work stopped by :meth:`stop_work`, run again once the local
    workers are gone."""

    ack_wait_s: float = ACK_WAIT_S
    """How long the workers' stop waits for the messages they hold to be acknowledged
    (:data:`ACK_WAIT_S`)."""

    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)

    def start_workers(self) -> None:
        """Start :attr:`worker_count` local worker processes (stopped with the backend)
        without waiting for them; with none to start, warn through :attr:`notify` if no
        worker answers a ping. A worker that cannot come up is reported by
        :meth:`check_workers` while waiting.

        If this process dies, even by SIGKILL, Linux sends the worker SIGQUIT (Celery's cold
        shutdown), so none is left behind.
        """
        if self.workers is not None:
            return
        if self.worker_count > 0:
            self.adopt_workers(_spawn_workers(self.url, self.worker_count))
        elif no_worker_answers(self.url):
            self.notify(NO_WORKERS_WARNING)

    def adopt_workers(self, local: LocalWorkers) -> None:
        """Make ``local`` (spawned, e.g. while the server was starting) this backend's
        workers: stopped with it, before the server, and registered as users of the embedded
        server so its watchdog outlives them."""
        self.notify(f"starting {local.count} local worker(s) on {self.where}")
        self._stack.push(self._stop_workers)
        self.workers = local
        if self.server is not None:
            # The embedded server's watchdog waits for these too before shutting it down.
            with contextlib.suppress(redis.RedisError):
                self.client.sadd(
                    keys.embedded_users(), *(f"{pid}:worker" for pid in local.user_pids)
                )

    def _stop_workers(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Stop the local workers when the ``with`` block ends (an ``ExitStack`` exit
        callback): at once (SIGKILL) if it ended normally and no worker on this Redis holds a
        task message, or none does any more within :attr:`ack_wait_s` (the last tasks'
        acknowledgements may still be on their way), so none is lost (one fetched in the
        instant between the check and the kill is recovered like any job lost with its worker:
        lease expiry, or the waiting client's re-send of never-claimed jobs); otherwise by
        Celery's warm shutdown, so a task still running - ours after ``--timeout``, or another
        command's sharing the embedded Redis - finishes or goes back to the queue."""
        local = self.workers
        if local is None:
            return
        if exc_type is not None:
            self.hurry = True
        if not self.hurry and self._nothing_in_flight(self.ack_wait_s):
            local.kill()
        elif self.hurry:
            # The work was stopped: its running jobs are not worth waiting for (the batch is
            # resumable), nor is Celery's shutdown (seconds). The messages the killed workers
            # held of the stopped work are dropped; one of other work on a shared server
            # comes back by its lease (or the visibility timeout).
            local.kill()
            self._drop_pending_again()
        else:
            local.stop()

    def _drop_pending_again(self) -> None:
        """After a cold shutdown, the messages of stopped work that the workers held are
        back on the queue: drop them again (best effort)."""
        stop = self.stop_pending or self.stop_last
        if stop is None:
            return
        with contextlib.suppress(redis.RedisError, KnightsTourError):
            stop(self.client)

    def _nothing_in_flight(self, wait_s: float) -> bool:
        """Whether no worker on this Redis holds a task message, now or at some poll within
        ``wait_s`` seconds; False if Redis cannot be asked."""
        deadline = time.monotonic() + wait_s
        pause = 0.002
        try:
            while messages_held(self.client):
                if time.monotonic() > deadline:
                    return False
                time.sleep(pause)
                pause = min(0.05, pause * 2)
        except redis.RedisError:
            return False
        return True

    def check_workers(self, what: str, unit: str) -> Callable[[Mapping[str, Any]], None]:
        """A ``WaitHooks.check`` that raises if every local worker we started has exited
        (the wait would never end).

        Parameters
        ----------
        what : str
            What is awaited (``"batch ID"``), for the message.
        unit : str
            What the status counts (``"jobs"``, ``"sub-jobs"``).

        Raises
        ------
        KnightsTourError
            From the returned callable, naming how far ``what`` got and where the logs are.
        """

        def check(status: Mapping[str, Any]) -> None:
            local = self.workers
            if local is not None and local.procs and all(p.poll() is not None for p in local.procs):
                raise KnightsTourError(
                    f"all local workers exited before {what} finished "
                    f"({status['done']}/{status['total']} {unit} done); see the worker logs "
                    f"in {local.log_dir}"
                )

        return check

    def abandon_on_error(self, what: str, stop: Callable[[redis.Redis], int]) -> None:
        """Mark ``what`` (``"batch ID"``) as submitted and not yet finished: if the ``with``
        block of :func:`open_backend` then ends by an exception (Ctrl-C included), ``stop``
        is called on a fresh connection - it stops that work and drops its own queued tasks
        (e.g. :func:`knights_tour.batches.cancelling.cancel_batch`), never another's - so the
        next run's workers do not start with them. Its stored records stay."""
        self.pending = what
        self.stop_pending = stop

    def finished(self) -> None:
        """:attr:`pending` ran to its end: nothing to stop or drop any more."""
        self.pending = self.stop_pending = None

    def stop_work(self) -> int | None:
        """Stop :attr:`pending` now (the command is leaving it: timeout, Ctrl-C, error): kill
        the local workers first (their running jobs are not worth waiting for; nothing of the
        work changes after this), then call its ``stop`` on a fresh connection (an interrupt
        may have cut a reply on :attr:`client`), then end the killed workers' leases
        (:func:`knights_tour.worker.leases.end_leases_of`). Returns the tasks dropped (queued,
        or held by the killed workers), or None if nothing was pending or Redis could not be
        reached (best effort)."""
        self.hurry = True
        killed = self.workers.kill() if self.workers is not None else []
        stop, self.pending, self.stop_pending = self.stop_pending, None, None
        if stop is None and not killed:
            return None
        if stop is not None:
            self.stop_last = stop
        try:
            client = connect(self.url)
            try:
                return None if stop is None else stop(client)
            finally:
                # After the stop (a cancelled batch is not recovered): what the killed workers
                # held is lost now, not when their leases would run out, so a resume takes it
                # at once as a fresh start instead of leaving it to recovery.
                with contextlib.suppress(redis.RedisError):
                    leases.end_leases_of(client, socket.gethostname(), killed)
                client.close()
        except (redis.RedisError, KnightsTourError):
            return None

    def _abandon(self) -> None:
        """The block ended by an exception: stop what is still pending and say so."""
        what = self.pending
        if what is None:
            self.hurry = True
            return
        dropped = self.stop_work()
        if dropped is not None:
            self.notify(
                f"{what} abandoned: its {dropped} queued task(s) dropped (other work "
                "on this Redis untouched); its results so far are kept"
            )


def _spawn_workers(url: str, count: int) -> LocalWorkers:
    """Spawn ``count`` local workers on ``url`` without waiting for them (see
    :meth:`Backend.start_workers`)."""
    # K Celery workers of one pool process each, forked by one warmed parent: K start about as
    # fast as one, and a crashing worker takes only its own pool process with it. The workers
    # are not awaited: messages wait in Redis until they listen, and Backend.check_workers
    # notices if they all exit.
    return LocalWorkers(url, count, log_dir=worker_log_dir(), death_signal=signal.SIGQUIT).spawn()


@contextlib.contextmanager
def open_store(
    redis_url: str | None,
    on_launch: Callable[[str], None] | None = None,
    launched: Launched | None = None,
) -> Iterator[Backend]:
    """Connect to ``redis_url`` / ``KT_REDIS_URL``, or start (or attach to) the embedded Redis
    on the data dir; everything is closed or stopped when the block ends.

    The embedded server gets a fresh random password on its loopback port; it lives only in
    the 0600 state file. ``on_launch(url)``, if given, is called as soon as a new embedded
    server's process has bound its port, before it answers (not when attaching to a running one or
    connecting to a given URL). ``launched``: the embedded server launched ahead
    (:func:`~knights_tour.local.launching.launch_ahead`), used instead of starting one.

    Raises
    ------
    BackendUnavailableError
        If the server cannot be reached or started (password masked in the message).
    """
    with contextlib.ExitStack() as stack:
        url = configured_redis_url(redis_url)
        server = None
        if url is None:
            server = EmbeddedRedis(
                embedded_dir(),
                password=secrets.token_urlsafe(18),
                reuse=True,
                on_launch=on_launch,
                launched=launched,
            )
            stack.enter_context(server)
            url = server.url
        client = connect(url)
        stack.callback(client.close)
        where = "embedded Redis" if server else f"Redis at {mask_url(url)}"
        backend = Backend(url=url, client=client, server=server, where=where)
        stack.enter_context(backend._stack)  # local workers stop before the server
        yield backend


@contextlib.contextmanager
def open_backend(
    redis_url: str | None,
    workers: int | None = None,
    *,
    start_workers: bool = True,
    notify: Callable[[str], None] | None = None,
    work_cpu_s: float | None = None,
    launched: Launched | None = None,
) -> Iterator[Backend]:
    """A backend to run work on: :func:`open_store` plus local workers and signal handling.

    Parameters
    ----------
    redis_url : str, optional
        As for :func:`open_store`.
    workers : int, optional
        Local worker processes to start; default ``KT_WORKERS`` on the embedded Redis and none
        on a given one (the workers already listening there are used).
    start_workers : bool
        Start them on entry; with False the caller calls :meth:`Backend.start_workers` once it
        knows there is work to send.
    notify : callable, optional
        Receives one-line messages (default: ``ktour: <message>`` on stderr).
    work_cpu_s : float, optional
        Estimated worker CPU-seconds of the work to come: without ``workers``, a small batch
        gets fewer local workers than ``KT_WORKERS`` (one per
        :data:`~knights_tour.local.launching.WORKER_START_CPU_S`).
    launched : Launched, optional
        The embedded server and local workers launched ahead for this backend
        (:func:`~knights_tour.local.launching.launch_ahead`, with the same ``redis_url``,
        ``workers`` and ``work_cpu_s``): taken over instead of started here; whatever of them
        is not taken over when this returns or raises is killed.

    While the block runs, SIGTERM and SIGHUP raise KeyboardInterrupt (so it shuts down like
    Ctrl-C). If this process dies without that (SIGKILL), the workers get SIGQUIT from Linux
    and the embedded server's watchdog shuts it down once they are gone.

    Raises
    ------
    BackendUnavailableError
        If Redis cannot be reached or a local worker does not come up.
    """
    early: list[LocalWorkers] = []

    def spawn_early(url: str) -> None:
        # A new embedded server: its workers start with it (they retry the connection), so
        # their start-up overlaps the server's.
        count = local_worker_count(workers, embedded=True, work_cpu_s=work_cpu_s)
        if start_workers and count > 0:
            early.append(_spawn_workers(url, count))

    try:
        if launched is not None:
            early.append(LocalWorkers.adopt(launched))
        with (
            _sigterm_as_interrupt(),
            open_store(redis_url, on_launch=spawn_early, launched=launched) as backend,
        ):
            backend.notify = notify or _to_stderr
            backend.worker_count = local_worker_count(
                workers, embedded=backend.server is not None, work_cpu_s=work_cpu_s
            )
            if early:
                backend.adopt_workers(early[0])
            elif start_workers:
                backend.start_workers()
            try:
                yield backend
            except BaseException:
                backend._abandon()
                raise
    finally:
        for local in early:  # left running only if the server failed to start: no work
            local.kill()
        if launched is not None:
            launched.kill()  # its server, if it was never taken over


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM and SIGHUP (the terminal closed)
    raise KeyboardInterrupt, so everything started is stopped in order."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, on_term) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def no_worker_answers(url: str) -> bool:
    """True if a Celery ping on ``url`` got no reply (False if it got one, or could not be
    sent: the warning it drives is only a hint)."""
    try:
        # control.ping sends on the app's broker whatever connection= says, so point the app
        # at this URL first
        replies = celery_worker().use_redis(url).control.ping(timeout=1.0)
    except Exception:  # noqa: BLE001 - only a hint
        return False
    return not replies


__all__ = ["Backend", "open_store", "open_backend", "no_worker_answers", "NO_WORKERS_WARNING"]
