"""The Redis connection: :func:`connect`, :func:`redis_options` and :data:`REDIS_ERRORS`,
defined once; a URL is checked and masked by :mod:`knights_tour.store.urls` (the standard
library only).

redis-py only. Every other module that talks to Redis gets its client from :func:`connect` and
retries on :data:`REDIS_ERRORS` where it rides out an outage. The broker's connections (kombu)
get the same socket options through :func:`knights_tour.worker.celery.celery_config`, from
:func:`tcp_keepalive_options` and the same settings.

Why every connection has timeouts: a peer that vanishes without closing the connection (a
pulled cable, a firewall or NAT entry that drops packets, a paused VM) sends no RST, so
without a socket timeout a read waits for ever and without TCP keepalive an idle connection
is never found dead (Linux gives up on unacknowledged data only after ~15 minutes,
``tcp_retries2``). The settings and their defaults are explained in ``docs/deploy.md``.
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from knights_tour.errors import (
    BackendUnavailableError,
    CorruptKeyError,
    RedisRefusedError,
    StorageFullError,
)
from knights_tour.settings import Settings, get_settings
from knights_tour.store.memory import check_memory, write_refusal
from knights_tour.store.urls import check_redis_url, mask_url, url_database

REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError)
"""Errors that mean "Redis is (temporarily) unreachable"; callers may retry on them."""


class _RefusesWrites(StorageFullError, redis.ResponseError):
    """:class:`~knights_tour.errors.StorageFullError` as the reply of a command (also the
    ``redis.ResponseError`` redis-py would have raised, so a caller that catches that still
    does)."""

    def __init__(self, reason: str, code: str | None = None) -> None:
        StorageFullError.__init__(self, reason)
        redis.ResponseError.__init__(self, str(self), status_code=code)


class MisconfError(_RefusesWrites):
    """``MISCONF``: Redis cannot persist (e.g. a full disk under its data)."""


class OutOfMemoryError(_RefusesWrites, redis.exceptions.OutOfMemoryError):
    """``OOM``: Redis is at ``maxmemory`` and may not evict."""


class ReadOnlyError(_RefusesWrites, redis.exceptions.ReadOnlyError):
    """``READONLY``: a replica."""


class WrongTypeError(CorruptKeyError, redis.ResponseError):
    """:class:`~knights_tour.errors.CorruptKeyError` for a ``WRONGTYPE`` reply: a key of the
    project holds another type than the one it writes there."""

    def __init__(self, key: str, reply: str) -> None:
        CorruptKeyError.__init__(
            self, key, f"it holds another type of value than this project writes ({reply})"
        )
        redis.ResponseError.__init__(self, str(self), status_code="WRONGTYPE")


_REFUSING = {"MISCONF": MisconfError, "OOM": OutOfMemoryError, "READONLY": ReadOnlyError}


def typed_error(exc: redis.ResponseError, command: tuple[Any, ...] | None) -> Exception:
    """The project's error for a Redis error reply to ``command`` (its arguments, the name
    first): a refused write (``MISCONF``, ``OOM``, ``READONLY``, read by
    :func:`knights_tour.store.memory.write_refusal`: also one refused inside a script) is a
    :class:`~knights_tour.errors.StorageFullError`, a ``WRONGTYPE`` a
    :class:`~knights_tour.errors.CorruptKeyError` naming the command's key (every key of a
    script); anything else is ``exc`` itself. Each is still a ``redis.ResponseError``."""
    if isinstance(exc, (StorageFullError, CorruptKeyError)):
        return exc
    reason = write_refusal(exc)
    if reason is not None:
        code = reason.split(" ", 1)[0]
        return _REFUSING[code](reason, code)
    text = str(exc.args[0]) if exc.args else ""
    reply = text.split("caused error: ", 1)[-1]  # a pipeline's annotation left out
    if getattr(exc, "status_code", None) == "WRONGTYPE" or reply.startswith("WRONGTYPE"):
        return WrongTypeError(_keys_of(command), reply)
    return exc


def _keys_of(command: tuple[Any, ...] | None) -> str:
    """The key (or keys) a command names: its first argument, a script's KEYS."""
    if not command or len(command) < 2:
        return "?"
    name = str(command[0]).upper()
    if name in ("EVAL", "EVALSHA") and len(command) > 2:
        n = int(command[2])
        return ", ".join(_text(k) for k in command[3 : 3 + n]) or "?"
    return _text(command[1])


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class Pipeline(redis.client.Pipeline):
    """redis-py's pipeline whose error replies become the project's errors
    (:func:`typed_error`)."""

    def annotate_exception(self, exception: Exception, number: int, command: Any) -> None:
        super().annotate_exception(exception, number, command)
        exception.command = tuple(command)  # type: ignore[attr-defined]

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            return super().execute(raise_on_error)
        except redis.ResponseError as exc:
            raise typed_error(exc, getattr(exc, "command", None)) from exc


class Client(redis.Redis):
    """The redis-py client of the project (:func:`connect`): the same, except that an error
    reply that means "this Redis refuses writes" or "this key holds another type" raises the
    project's typed error (:func:`typed_error`), in pipelines too."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute_command(*args, **options)
        except redis.ResponseError as exc:
            raise typed_error(exc, args) from exc

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        return Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def tcp_keepalive_options(idle_s: int) -> dict[int, int]:
    """TCP keepalive socket options (Linux ``TCP_KEEPIDLE``/``TCP_KEEPINTVL``/``TCP_KEEPCNT``)
    for redis-py's ``socket_keepalive_options`` and kombu's transport option of that name:
    the first probe after ``idle_s`` idle seconds, then one every ``idle_s / 3`` (at least 1 s);
    after 3 unanswered probes the kernel declares the peer dead and the socket fails, so a
    dead peer on an idle connection is found in about ``2 * idle_s`` seconds instead of never.
    Options this platform lacks are left out.
    """
    wanted = {"TCP_KEEPIDLE": idle_s, "TCP_KEEPINTVL": max(1, idle_s // 3), "TCP_KEEPCNT": 3}
    return {getattr(socket, name): value for name, value in wanted.items() if hasattr(socket, name)}


def redis_options(settings: Settings | None = None) -> dict[str, Any]:
    """The redis-py connection options every client of the project uses (``KT_REDIS_*``).

    * ``socket_timeout`` (``KT_REDIS_SOCKET_TIMEOUT_S``): a reply not received within it
      fails the command with a TimeoutError and drops the connection;
    * ``socket_connect_timeout`` (``KT_REDIS_CONNECT_TIMEOUT_S``);
    * ``socket_keepalive`` with :func:`tcp_keepalive_options` (``KT_REDIS_KEEPALIVE_S``);
    * ``health_check_interval`` (``KT_REDIS_HEALTH_CHECK_S``): a connection idle that long is
      checked with PING before it is used, so a command is not sent into a dead connection;
    * ``retry``: one retry on a fresh connection after a connection error (a pooled
      connection the server closed, e.g. after a restart). A timeout is not retried: the
      command may have been applied, and a command then waits at most ``socket_timeout``;
      longer outages are ridden out by the callers' own loops, which log them.

    Returns
    -------
    dict
        Keyword arguments for ``redis.Redis.from_url`` (plus ``decode_responses``).
    """
    s = settings if settings is not None else get_settings()
    return {
        "socket_timeout": s.redis_socket_timeout_s,
        "socket_connect_timeout": s.redis_connect_timeout_s,
        "socket_keepalive": True,
        "socket_keepalive_options": tcp_keepalive_options(s.redis_keepalive_s),
        "health_check_interval": s.redis_health_check_s,
        "retry": Retry(
            ExponentialBackoff(cap=1.0, base=0.1), 1, supported_errors=(redis.ConnectionError,)
        ),
    }


_REFUSED = (
    "WRONGPASS",
    "NOAUTH",
    "NOPERM",
    "invalid username-password",
    "invalid password",
    "Authentication required",
    "HELLO must be called with the client already authenticated",
)
"""Words of the replies that mean "reachable, but these credentials are wrong"."""


def connect(url: str, timeout_s: float | None = None, *, check_policy: bool = True) -> redis.Redis:
    """A redis-py client for ``url`` (``decode_responses=True``, :func:`redis_options`),
    checked with PING and, unless ``check_policy`` is False, refused if the server may evict
    keys (:func:`knights_tour.store.memory.check_memory`, ``KT_ALLOW_EVICTING_REDIS``).

    Parameters
    ----------
    url : str
        ``redis://[[user]:password@]host:port/db`` (or ``rediss://``, ``unix://``).
    timeout_s : float, optional
        Connect timeout in seconds; default ``KT_REDIS_CONNECT_TIMEOUT_S``.
    check_policy : bool
        Read ``maxmemory-policy`` and memory use (one ``INFO memory``).

    Returns
    -------
    redis.Redis
        A connected client.

    Raises
    ------
    InvalidRedisUrlError
        If the URL is malformed (:func:`check_redis_url`).
    RedisRefusedError
        ``Redis at redis://:***@host:port/0 refused the credentials: <reply>`` for a wrong
        password, unknown user or missing permission, or an evicting ``maxmemory-policy``.
    StorageFullError
        ``Redis refuses writes: MISCONF ...`` if the server cannot persist (its checks reply
        so). The client raises it, and :class:`~knights_tour.errors.CorruptKeyError` for a
        ``WRONGTYPE`` reply, on every later command too (:class:`Client`).
    BackendUnavailableError
        ``cannot reach Redis at redis://:***@host:port/0: <reason>`` (password masked) if the
        server is unreachable or the database does not exist there.
    """
    check_redis_url(url)
    settings = get_settings()
    options = redis_options(settings)
    if timeout_s is not None:
        options["socket_connect_timeout"] = timeout_s
    try:
        client = Client.from_url(url, decode_responses=True, **options)
        client.ping()
        if check_policy:
            check_memory(client, mask_url(url), settings.allow_evicting_redis)
    except (RedisRefusedError, StorageFullError):
        client.close()
        raise
    except (redis.RedisError, ValueError, OSError) as exc:
        reason = str(exc).replace(url, mask_url(url)) or type(exc).__name__
        refused = isinstance(exc, (redis.AuthenticationError, redis.exceptions.NoPermissionError))
        if (refused or any(w in reason for w in _REFUSED)) and urlsplit(url).password is None:
            raise RedisRefusedError(
                f"Redis at {mask_url(url)} requires a password, and the URL has none "
                f"(redis://[user]:PASSWORD@host:port/db)"
            ) from None
        if refused or any(w in reason for w in _REFUSED):
            raise RedisRefusedError(
                f"Redis at {mask_url(url)} refused the credentials: {reason} (check the "
                f"user and password in the URL)"
            ) from None
        if "DB index is out of range" in reason:
            db = url_database(urlsplit(url))
            raise BackendUnavailableError(
                f"Redis at {mask_url(url)} has no database {db}"
            ) from None
        raise BackendUnavailableError(f"cannot reach Redis at {mask_url(url)}: {reason}") from None
    return client


__all__ = [
    "Client",
    "Pipeline",
    "typed_error",
    "REDIS_ERRORS",
    "connect",
    "redis_options",
    "tcp_keepalive_options",
]
