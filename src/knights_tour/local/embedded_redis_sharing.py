"""How an embedded Redis is shared between processes: the state file in its data directory
(which server runs on these files: its PID, port and password) and the set of its users, kept
in the server itself (:func:`knights_tour.store.keys.embedded_users`, entries ``pid:token``).

A second ``ktour`` on the same data directory finds the live server through the state file and
attaches to it instead of starting another one on the same files. Every process that starts or
attaches registers as a user; the server is shut down by the last user to leave
(:meth:`~knights_tour.local.embedded_redis.EmbeddedRedis.stop`) or, once every user has
died, by its watchdog (:mod:`knights_tour.local.embedded_redis_watchdog`). A user is alive
while its PID runs (a zombie does not count).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import redis

from knights_tour.errors import BackendUnavailableError
from knights_tour.local.redis_process import pid_alive, ping, runs_redis_server
from knights_tour.store import keys


class ServerState(NamedTuple):
    """A live embedded Redis as its state file records it."""

    pid: int
    port: int
    password: str | None


def read_state(path: Path) -> Mapping[str, object] | None:
    """The state file at ``path`` as written (``pid``, ``port``, ``password``; not yet checked),
    or None if it is missing or unreadable."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def write_state(path: Path, pid: int | None, port: int | None, password: str | None) -> None:
    """Record the server at ``path`` (mode 0600: it holds the password), atomically.

    Raises
    ------
    BackendUnavailableError
        If the file cannot be written (e.g. a full disk), naming its directory; no
        half-written file is left.
    """
    state = {"pid": pid, "port": port, "password": password}
    tmp = path.with_suffix(".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BackendUnavailableError(
            f"cannot write under {path.parent}: {exc.strerror or exc}"
        ) from None


def live_recorded_server(path: Path) -> ServerState | None:
    """The server the state file at ``path`` records, if it is a live ``redis-server``
    answering PING; else None, and a stale (or malformed) state file is removed."""
    state = read_state(path)
    if not state:
        return None
    pid, port, password = state.get("pid"), state.get("port"), state.get("password")
    if (
        isinstance(pid, int)
        and isinstance(port, int)
        and (password is None or isinstance(password, str))
        and runs_redis_server(pid)
        and ping(port, password)
    ):
        return ServerState(pid, port, password)
    with contextlib.suppress(OSError):
        path.unlink()
    return None


def forget_state(path: Path, pid: int | None) -> None:
    """Remove the state file at ``path`` if it still records the server of PID ``pid``."""
    state = read_state(path)
    if state and state.get("pid") == pid:
        with contextlib.suppress(OSError):
            path.unlink()


def _entries(client: redis.Redis) -> list[str]:
    return [
        raw.decode() if isinstance(raw, bytes) else str(raw)
        for raw in client.smembers(keys.embedded_users())
    ]


def _alive(entry: str) -> bool:
    pid_text = entry.split(":", 1)[0]
    return pid_text.isdigit() and pid_alive(int(pid_text))


def register(client: redis.Redis, entry: str) -> None:
    """Add ``entry`` (``pid:token``) to the users of the server behind ``client``.

    Raises
    ------
    redis.RedisError, OSError
        If the server cannot be reached.
    """
    client.sadd(keys.embedded_users(), entry)


def leave(client: redis.Redis, entry: str) -> list[str]:
    """Remove ``entry`` from the server's users; return the entries of the OTHER live users
    (those of dead processes are removed too).

    Raises
    ------
    redis.RedisError, OSError
        If the server cannot be reached.
    """
    client.srem(keys.embedded_users(), entry)
    others = []
    for other in _entries(client):
        if _alive(other):
            others.append(other)
        else:
            client.srem(keys.embedded_users(), other)
    return others


def live_users(client: redis.Redis) -> tuple[int, int]:
    """``(entries, live entries)`` of the server's users.

    Raises
    ------
    redis.RedisError, OSError
        If the server cannot be reached.
    """
    entries = _entries(client)
    return len(entries), sum(1 for e in entries if _alive(e))


__all__ = [
    "ServerState",
    "read_state",
    "write_state",
    "live_recorded_server",
    "forget_state",
    "register",
    "leave",
    "live_users",
]
