"""Local Celery workers: K ``celery worker`` OS processes on this machine, against a Redis URL.

:class:`LocalWorkers` records the PIDs it starts and stops only those (warm shutdown first,
then by PID, pool children included). As a context manager it stops them on leaving the
``with`` block, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.service._celery import celery_worker
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import mask_url


def _pdeathsig(
    sig: int = signal.SIGTERM, parent_pid: int | None = None
) -> None:  # pragma: no cover - runs in the child
    """In a child process: ask Linux to send ``sig`` to it when the thread that started it
    dies (best effort). If the parent is already gone (it died between fork and here), send
    it now."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(sig))  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), int(sig))


_DEFERRED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
"""Signals held back while the workers are being killed (a repeated Ctrl-C must not cut
that short: the embedded Redis is stopped after it)."""


def _kill_all(procs: list[subprocess.Popen[bytes]], family: list[psutil.Process]) -> None:
    """SIGKILL whatever of ``procs`` and ``family`` still runs, and reap it; Ctrl-C and
    SIGTERM/SIGHUP are delivered only afterwards."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        _kill_and_reap(procs, family)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _kill_and_reap(procs: list[subprocess.Popen[bytes]], family: list[psutil.Process]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    for child in family:
        with contextlib.suppress(psutil.Error):
            child.kill()
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
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


def _descendants(procs: list[subprocess.Popen[bytes]]) -> list[psutil.Process]:
    """The live descendants (pool processes) of ``procs``, found before any is signalled."""
    family: list[psutil.Process] = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            family.extend(psutil.Process(proc.pid).children(recursive=True))
    return family


def rotate_logs(log_dir: Path, keep: int, max_bytes: int) -> list[Path]:
    """Delete the oldest ``*.log`` files of ``log_dir`` (by last write) until at most ``keep``
    remain and they hold at most ``max_bytes`` together; returns the files deleted. Each
    ``ktour run`` writes new files (one per worker, named by its process), so this rotates
    the logs run by run (``KT_LOG_KEEP``, ``KT_LOG_MAX_MB``). A file another process still
    writes to may go: its data stays readable to that process, only the name is gone."""
    files = []
    for path in log_dir.glob("*.log"):
        with contextlib.suppress(OSError):
            st = path.stat()
            files.append((st.st_mtime, st.st_size, path))
    files.sort(key=lambda f: (f[0], str(f[2])), reverse=True)  # newest first
    kept_n = kept_bytes = 0
    removed = []
    for _mtime, size, path in files:
        if kept_n < keep and kept_bytes + size <= max_bytes:
            kept_n += 1
            kept_bytes += size
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


class LocalWorkers:
    """K Celery worker OS processes on this machine, listening on ``redis_url``.

    Each runs the equivalent of ``celery -A knights_tour.worker worker --pool prefork -c
    CONCURRENCY -n {node_prefix}{i}@%h --without-gossip --without-mingle --without-heartbeat
    -Q knights_tour`` (:mod:`knights_tour.service.celery_worker_main`) with ``KT_REDIS_URL``
    set in its environment.

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
        Signal Linux sends a worker main process when the thread that started it dies
        (``PR_SET_PDEATHSIG``): SIGTERM is Celery's warm shutdown (running tasks finish),
        SIGQUIT its cold shutdown (the pool is terminated at once).

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
        self.redis_url = redis_url
        self.count = count
        self.concurrency = concurrency
        self.node_prefix = node_prefix or f"kt{os.getpid()}-w"
        self.env = dict(env or {})
        self.ready_timeout_s = ready_timeout_s
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.loglevel = loglevel
        self.death_signal = death_signal
        self.hostname = socket.gethostname()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def node_names(self) -> list[str]:
        """Celery node names of the workers, ``{prefix}{i}@{hostname}``."""
        return [f"{self.node_prefix}{i}@{self.hostname}" for i in range(1, self.count + 1)]

    @property
    def pids(self) -> list[int]:
        """PIDs of the worker main processes started."""
        return [p.pid for p in self.procs]

    def _command(self, i: int, loglevel: str) -> list[str]:
        # celery_worker_main = `celery -A knights_tour.worker worker` with the options of the
        # class docstring, without importing Celery's command line and its plugins.
        return [
            sys.executable,
            "-m",
            "knights_tour.service.celery_worker_main",
            f"{self.node_prefix}{i}@{self.hostname}",
            str(self.concurrency),
            keys.QUEUE,
            loglevel,
        ]

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
        loglevel = self.loglevel or get_settings().log_level
        env = dict(os.environ)
        env.update(self.env)
        env["KT_REDIS_URL"] = self.redis_url
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            settings = get_settings()
            # room for this start's files within KT_LOG_KEEP
            rotate_logs(
                self.log_dir, max(0, settings.log_keep - self.count), int(settings.log_max_mb * 1e6)
            )
        watch = functools.partial(_pdeathsig, self.death_signal, os.getpid())
        try:
            for i in range(len(self.procs) + 1, self.count + 1):
                out: Any = subprocess.DEVNULL
                if self.log_dir is not None:
                    out = open(self.log_dir / f"{self.node_prefix}{i}.log", "ab")  # noqa: SIM115
                try:
                    proc = subprocess.Popen(
                        self._command(i, loglevel),
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=watch,
                    )
                finally:
                    if out is not subprocess.DEVNULL:
                        out.close()
                self.procs.append(proc)
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
                    if proc.poll() is not None:
                        raise BackendUnavailableError(
                            f"celery worker (pid {proc.pid}) exited with code {proc.returncode} "
                            f"during start-up (broker {mask_url(self.redis_url)})"
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
        procs, self.procs = self.procs, []
        family = _descendants(procs)
        try:
            for proc in procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)
            deadline = time.monotonic() + timeout_s
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            psutil.wait_procs(family, timeout=max(0.1, deadline - time.monotonic()))
        except KeyboardInterrupt:
            _kill_all(procs, family)
            raise
        _kill_all(procs, family)

    def kill(self) -> None:
        """Stop the workers we started at once: SIGKILL to each worker main process and its
        pool children, then reap them. Only for workers that hold no task message (none
        running, none reserved), e.g. once the broker's unacknowledged-message hash is empty:
        nothing is then lost, and neither Celery's warm nor its cold shutdown (each about a
        second or two, pool join and connection teardown included) is paid."""
        procs, self.procs = self.procs, []
        _kill_all(procs, _descendants(procs))

    def kill_one(self, index: int = 0, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to the pool child of worker ``index`` (or the worker itself if it has
        none) - for fault tests. Returns the PID signalled."""
        proc = self.procs[index]
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        target = children[0].pid if children else proc.pid
        os.kill(target, sig)
        return target

    def __enter__(self) -> LocalWorkers:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


__all__ = ["LocalWorkers", "rotate_logs"]
