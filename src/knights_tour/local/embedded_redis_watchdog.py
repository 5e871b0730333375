"""The embedded Redis's watchdog: a small detached process that shuts the server down once
no process that uses it is alive (see :class:`~knights_tour.local.embedded_redis.EmbeddedRedis`,
"Sharing"), so a user killed by any signal, SIGKILL included, leaves no server behind.

Run as ``python -m knights_tour.local.embedded_redis_watchdog PORT SERVER_PID STARTER_PID``
(password in ``KT_WATCH_PASSWORD``) by
:class:`~knights_tour.local.embedded_redis.EmbeddedRedis` when it starts a server.
"""

from __future__ import annotations

import os
import sys
import time

import redis

from knights_tour.local.embedded_redis_sharing import live_users
from knights_tour.local.redis_process import direct_client, pid_alive, shut_down, wait_gone


def watch(port: int, server_pid: int, starter_pid: int, poll_s: float = 0.25) -> None:
    """Watch an embedded server until it exits; shut it down when nobody uses it any more.

    Runs as its own process (``python -m knights_tour.local.embedded_redis_watchdog PORT
    SERVER_PID STARTER_PID``, password in ``KT_WATCH_PASSWORD``), started by
    :class:`~knights_tour.local.embedded_redis.EmbeddedRedis`.
    Users are the live PIDs of the server's user set (commands and the local workers they
    start register there); until a live one is first seen there, the starting process counts
    as the user (the set may still hold the dead users of an earlier run, kept in the server's
    append-only file). When no user is alive, the server is shut down (:func:`shut_down`), then
    SIGTERMed and SIGKILLed by PID if it is still there (:func:`wait_gone`).

    Parameters
    ----------
    port : int
        The server's port on 127.0.0.1.
    server_pid, starter_pid : int
        PIDs of the ``redis-server`` and of the process that started it.
    poll_s : float
        Seconds between checks.
    """
    password = os.environ.get("KT_WATCH_PASSWORD") or None
    client = direct_client(port, password, 2.0)
    seen_users = False
    while pid_alive(server_pid):
        try:
            _, live = live_users(client)
        except (redis.RedisError, OSError):
            time.sleep(poll_s)
            continue
        seen_users = seen_users or live > 0
        if not seen_users:
            live = int(pid_alive(starter_pid))
        if live == 0:
            shut_down(client)
            wait_gone(server_pid, 15.0)
            return
        time.sleep(poll_s)


__all__ = ["watch"]


if __name__ == "__main__":  # pragma: no cover - the watchdog process
    watch(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
