"""A ``redis-server`` process on 127.0.0.1, seen from outside: a client that does not retry,
PING, ``SHUTDOWN``, and waiting for its PID to exit (escalating to SIGTERM and SIGKILL), and
whether a PID still runs that server (launching one: :mod:`knights_tour.local.launching`).

Shared by :class:`~knights_tour.local.embedded_redis.EmbeddedRedis`, which starts the server,
and its watchdog process (:mod:`knights_tour.local.embedded_redis_watchdog`), which ends it.
"""

from __future__ import annotations

import contextlib

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def direct_client(port: int, password: str | None, timeout: float) -> redis.Redis:
    """A client of the server on 127.0.0.1:``port``, database 0, that does not retry (redis-py
    retries with backoff by default, which turns a closed connection - e.g. after SHUTDOWN -
    into seconds of waiting); ``timeout`` (seconds) bounds the connect and every command."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        password=password,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def ping(port: int, password: str | None, timeout: float = 0.5) -> bool:
    """True if the server on 127.0.0.1:``port`` answers PING within ``timeout`` seconds."""
    try:
        client = direct_client(port, password, timeout)
        ok = bool(client.ping())
        client.close()
        return ok
    except (redis.RedisError, OSError):
        return False


def shut_down(client: redis.Redis) -> None:
    """Ask the server behind ``client`` to exit (``SHUTDOWN NOSAVE``). Nothing is lost: the
    server flushes and fsyncs its append-only file as it exits, and a server started with
    ``appendonly yes`` loads that file at start, never an RDB snapshot, so a snapshot written
    at every stop would be a full write of the dataset for nothing. Returns without waiting
    for the exit; errors are swallowed (the connection closes as the server exits, or it is
    already gone)."""
    with contextlib.suppress(redis.RedisError, OSError):
        client.shutdown(nosave=True)


def wait_gone(pid: int, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` seconds for process ``pid`` to exit, then SIGTERM it and wait
    up to 5 s more, then SIGKILL it."""
    try:
        target = psutil.Process(pid)
    except psutil.Error:
        return
    for sig_fn, wait_s in (
        (None, timeout_s),
        (target.terminate, min(5.0, timeout_s)),
        (target.kill, 5.0),
    ):
        try:
            if sig_fn is not None:
                sig_fn()
            target.wait(timeout=wait_s)
            return
        except psutil.TimeoutExpired:
            continue
        except psutil.Error:
            return


def runs_redis_server(pid: int) -> bool:
    """True if process ``pid`` runs and is a ``redis-server`` (by its command line, else its
    name): a recorded PID is signalled only while it is still that server."""
    try:
        proc = psutil.Process(pid)
        return "redis-server" in " ".join(proc.cmdline() or [proc.name()])
    except (psutil.Error, OSError):
        return False


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


__all__ = ["direct_client", "ping", "shut_down", "wait_gone", "pid_alive", "runs_redis_server"]
