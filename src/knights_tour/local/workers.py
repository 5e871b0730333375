"""Local Celery workers: K ``celery worker`` nodes on this machine, against a Redis URL, forked
by one warmed parent process (:mod:`~knights_tour.local.celery_worker_main`).

:class:`LocalWorkers` records the processes it starts and stops only those (warm shutdown
first, then by PID, pool children included). As a context manager it stops them on leaving the
``with`` block, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.local.launching import Launched, kill_now
from knights_tour.local.worker_pool import ForkedWorker, WorkerPool, WorkerSpec
from knights_tour.store.urls import mask_url
from knights_tour.worker.lazy import celery_worker

_DEFERRED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
"""Signals held back while the workers are being killed (a repeated Ctrl-C must not cut
that short: the embedded Redis is stopped after it)."""


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """While the block runs, Ctrl-C and SIGTERM/SIGHUP are held back and delivered when it
    ends: a repeated Ctrl-C must not land between taking the workers out of this object and
    killing them, or nothing would stop them before the embedded Redis. The signals' Python
    handlers are swapped, not the thread's signal mask: a process-directed signal may reach
    another thread (the record renderers), and CPython then still raises in the main
    thread."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Python's signal handlers, and so KeyboardInterrupt, run in the main thread only
        return
    held: list[int] = []
    old: dict[int, Any] = {}
    try:
        for sig in _DEFERRED:
            if signal.getsignal(sig) is not None:  # None: set outside Python, cannot be put back
                old[sig] = signal.signal(sig, lambda signum, _frame: held.append(signum))
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])


def _kill_all(procs: list[Any], family: list[psutil.Process]) -> None:
    """SIGKILL whatever of ``procs`` and ``family`` still runs, and reap it; Ctrl-C and
    SIGTERM/SIGHUP are delivered only afterwards."""
    with _signals_deferred():
        _kill_and_reap(procs, family)


def _kill_and_reap(procs: list[Any], family: list[psutil.Process]) -> None:
    kill_now(procs)  # first: a worker killed forks no pool process anew
    for child in family:
        with contextlib.suppress(psutil.Error):
            child.kill()
    _wait_dead(family, timeout_s=5.0)


def _wait_dead(family: list[psutil.Process], timeout_s: float) -> None:
    """Wait until every process of ``family`` has exited; a zombie counts as exited. (A pool
    process whose worker was killed is reaped by init, possibly only a while later: waiting
    for that, as ``psutil.wait_procs`` does, would only wait for init.)"""
    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while True:
        left = []
        for child in family:
            with contextlib.suppress(psutil.Error):
                if child.status() != psutil.STATUS_ZOMBIE:
                    left.append(child)
        if not left or time.monotonic() > deadline:
            return
        family = left
        time.sleep(pause)
        pause = min(0.05, pause * 2)


def _descendants(pool: WorkerPool) -> list[psutil.Process]:
    """The live descendants of ``pool``'s parent (its nodes and their pool processes), found
    before any is signalled."""
    with contextlib.suppress(psutil.Error):
        return list(psutil.Process(pool.proc.pid).children(recursive=True))
    return []


class LocalWorkers:
    """K Celery worker nodes on this machine, listening on ``redis_url``: OS processes forked
    by one parent that has loaded Celery, the tasks and the engine
    (:mod:`knights_tour.local.celery_worker_main`), so K start as fast as one.

    Each runs the equivalent of ``celery -A knights_tour.worker worker --pool prefork -c
    CONCURRENCY -n {node_prefix}{i}@%h --without-gossip --without-mingle --without-heartbeat
    -Q knights_tour`` with ``KT_REDIS_URL`` set in its environment. :attr:`procs` holds one
    ``Popen``-like handle per node (:class:`~knights_tour.local.worker_pool.ForkedWorker`).

    Parameters
    ----------
    redis_url : str
        Broker/store URL (password allowed; it goes to the child via the environment only).
    count : int
        Number of worker processes (K >= 1).
    concurrency : int
        Pool processes per worker.
    node_prefix : str, optional
        Node names are ``{node_prefix}{i}@{hostname}``; default unique per parent process.
    env : mapping, optional
        Extra environment variables (e.g. ``KT_LOG_LEVEL``) for the workers.
    ready_timeout_s : float
        How long :meth:`start` waits for every worker to answer a ping.
    log_dir : path, optional
        If given, each worker logs to ``{log_dir}/{node}.log``, the oldest logs there being
        deleted first (:func:`rotate_logs`); otherwise logs are discarded.
    loglevel : str, optional
        Celery log level (default ``KT_LOG_LEVEL``).
    death_signal : int
        Signal Linux sends the workers' parent when the thread that started it dies, and each
        worker when the parent dies (``PR_SET_PDEATHSIG``; the parent passes it on to its
        workers): SIGTERM is Celery's warm shutdown (running tasks finish), SIGQUIT its cold
        shutdown (the pool is terminated at once).

    Raises
    ------
    BackendUnavailableError
        From :meth:`start` if a worker exits or does not answer in time (all are then stopped).
    """

    def __init__(
        self,
        redis_url: str,
        count: int,
        concurrency: int = 1,
        node_prefix: str | None = None,
        env: dict[str, str] | None = None,
        ready_timeout_s: float = 60.0,
        log_dir: str | os.PathLike[str] | None = None,
        loglevel: str | None = None,
        death_signal: int = signal.SIGTERM,
    ) -> None:
        if count < 1 or concurrency < 1:
            raise KnightsTourError("worker count and concurrency must be at least 1")
        self.spec = WorkerSpec(
            redis_url,
            concurrency=concurrency,
            node_prefix=node_prefix or f"kt{os.getpid()}-w",
            env=dict(env or {}),
            log_dir=Path(log_dir) if log_dir is not None else None,
            loglevel=loglevel,
            death_signal=death_signal,
        )
        self.redis_url = redis_url
        self.count = count
        self.node_prefix = self.spec.node_prefix
        self.hostname = self.spec.hostname
        self.log_dir = self.spec.log_dir
        self.ready_timeout_s = ready_timeout_s
        self.pool: WorkerPool | None = None
        self.procs: list[ForkedWorker] = []

    @classmethod
    def adopt(cls, launched: Launched) -> LocalWorkers:
        """The workers :func:`~knights_tour.local.launching.launch_ahead` started, as a
        :class:`LocalWorkers` that stops them (they were launched with its defaults: logs in
        ``KT_DATA_DIR/logs``, ``death_signal`` SIGQUIT)."""
        spec = launched.workers
        local = cls(
            spec.redis_url,
            len(launched.pool.workers),
            spec.concurrency,
            spec.node_prefix,
            spec.env,
            log_dir=spec.log_dir,
            loglevel=spec.loglevel,
            death_signal=spec.death_signal,
        )
        local.pool = launched.take_workers()
        local.procs = list(local.pool.workers)
        return local

    @property
    def node_names(self) -> list[str]:
        """Celery node names of the workers, ``{prefix}{i}@{hostname}``."""
        return [f"{self.node_prefix}{i}@{self.hostname}" for i in range(1, self.count + 1)]

    @property
    def pids(self) -> list[int]:
        """PIDs of the worker main processes (nodes) forked so far, in node order."""
        return [pid for p in self.procs if (pid := p.pid) is not None]

    @property
    def user_pids(self) -> list[int]:
        """PIDs that stay alive while any of the workers may: the parent's and the nodes'."""
        parent = [] if self.pool is None else [self.pool.proc.pid]
        return parent + self.pids

    def start(self) -> LocalWorkers:
        """Start the workers and wait until every one answers a ping; returns ``self``."""
        try:
            self.spawn()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def spawn(self) -> LocalWorkers:
        """Start the worker processes without waiting for them to answer; returns ``self``.

        Messages sent meanwhile wait in Redis. Call it from the thread that outlives the
        workers (see ``death_signal``). A worker that fails to come up shows as an exited
        process in :attr:`procs`.
        """
        if self.pool is None:
            try:
                self.pool = self.spec.spawn(self.count)
                self.procs = list(self.pool.workers)
            except BaseException:
                self.stop()
                raise
        return self

    def wait_ready(self) -> None:
        """Block until every worker node answers ``app.control.ping``.

        Raises
        ------
        BackendUnavailableError
            If a worker process exits or the timeout passes.
        """
        app = celery_worker().use_redis(self.redis_url)
        pending = set(self.node_names)
        deadline = time.monotonic() + self.ready_timeout_s
        with app.connection_for_write() as conn:
            while pending:
                for proc in self.procs:
                    if (code := proc.poll()) is not None:
                        raise BackendUnavailableError(
                            f"celery worker {proc.index} (pid {proc.pid}) exited with code "
                            f"{code} during start-up (broker {mask_url(self.redis_url)})"
                        )
                replies = app.control.ping(
                    destination=sorted(pending), timeout=0.5, connection=conn
                )
                for reply in replies or []:
                    pending.difference_update(reply)
                if pending and time.monotonic() > deadline:
                    raise BackendUnavailableError(
                        f"celery workers {', '.join(sorted(pending))} did not answer within "
                        f"{self.ready_timeout_s:g} s (broker {mask_url(self.redis_url)})"
                    )

    def stop(self, timeout_s: float = 20.0, sig: int = signal.SIGTERM) -> None:
        """Stop the workers we started, worker main processes and their pool children (found
        with psutil before signalling); returns once all of them are gone.

        Parameters
        ----------
        timeout_s : float
            After this many seconds, what still runs gets SIGKILL.
        sig : int
            The first signal: SIGTERM is Celery's warm shutdown (running tasks finish,
            unacknowledged messages go back to the queue); SIGQUIT its cold shutdown, for
            workers with nothing left to do.

        Raises
        ------
        KeyboardInterrupt
            If one arrives while waiting (a repeated Ctrl-C): every process of the family is
            then killed with SIGKILL and reaped first, so none outlives this call.
        """
        pool: WorkerPool | None = None
        procs: list[ForkedWorker] = []
        family: list[psutil.Process] = []
        try:
            with _signals_deferred():
                pool, procs = self._release()
                if pool is None:
                    return
                family = _descendants(pool)
                if pool.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        pool.proc.send_signal(sig)  # passed on to every worker; none forked after
                else:
                    for node in procs:
                        node.send_signal(sig)
            deadline = time.monotonic() + timeout_s
            waits: list[Any] = [*procs, pool.proc]  # the workers, then their parent
            for waited in waits:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    waited.wait(timeout=max(0.1, deadline - time.monotonic()))
            psutil.wait_procs(family, timeout=max(0.1, deadline - time.monotonic()))
        except KeyboardInterrupt:
            if pool is not None:
                _kill_all([pool.proc, *procs], family)
                pool.close()
            raise
        _kill_all([pool.proc, *procs], family)
        pool.close()

    def _release(self) -> tuple[WorkerPool | None, list[ForkedWorker]]:
        """The parent and the workers, no longer this object's (they are being stopped)."""
        pool, procs = self.pool, self.procs
        self.pool, self.procs = None, []
        return pool, procs

    def kill(self) -> list[int]:
        """Stop the workers we started at once: SIGKILL to each worker main process and its
        pool children, then reap them; returns their PIDs (all gone now). Only for workers
        that hold no task message (none running, none reserved), e.g. once the broker's
        unacknowledged-message hash is empty: nothing is then lost, and neither Celery's warm
        nor its cold shutdown (each about a second or two, pool join and connection teardown
        included) is paid."""
        with _signals_deferred():
            pool, procs = self._release()
            if pool is None:
                return []
            family = _descendants(pool)
            pids = [pool.proc.pid, *(pid for p in procs if (pid := p.pid) is not None)]
            _kill_and_reap([pool.proc, *procs], family)  # the parent first: it forks no more
            pool.close()
        return sorted(set(pids) | {p.pid for p in family})

    def kill_one(self, index: int = 0, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to the pool child of worker ``index`` (or the worker itself if it has
        none) - for fault tests. Returns the PID signalled."""
        pid = self.procs[index].pid
        if pid is None:
            raise KnightsTourError(f"worker {index + 1} has not been forked yet")
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            children = []
        target = children[0].pid if children else pid
        os.kill(target, sig)
        return target

    def __enter__(self) -> LocalWorkers:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


__all__ = ["LocalWorkers"]
