"""The Redis connection: :func:`connect`, :func:`check_redis_url`, :func:`mask_url` and
:data:`REDIS_ERRORS`, defined once.

redis-py only. Every other module that talks to Redis gets its client from :func:`connect` and
retries on :data:`REDIS_ERRORS` where it rides out an outage.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

import redis

from knights_tour.errors import BackendUnavailableError, InvalidRedisUrlError

REDIS_SCHEMES = ("redis", "rediss", "unix")
"""URL schemes redis-py (and kombu's Redis transport) accept."""

REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError)
"""Errors that mean "Redis is (temporarily) unreachable"; callers may retry on them."""


def mask_url(url: str | None) -> str:
    """The URL with any password replaced by ``***`` (for messages and logs).

    Parameters
    ----------
    url : str or None
        A Redis URL such as ``redis://:PASSWORD@host:6379/0``.

    Returns
    -------
    str
        The URL, password masked; ``"<unparseable URL>"`` if it cannot be split.

    Examples
    --------
    >>> mask_url("redis://:s3cret@example.org:6380/2")
    'redis://:***@example.org:6380/2'
    >>> mask_url("redis://user:pw@h/0")
    'redis://user:***@h/0'
    >>> mask_url("redis://127.0.0.1:6379/0")
    'redis://127.0.0.1:6379/0'
    """
    if not url:
        return str(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{user}:***@{host}"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _url_database(parts) -> str | None:
    """The database part of a split URL as written (path for redis://, ``?db=`` for unix://)."""
    query = parse_qs(parts.query).get("db")
    if query:
        return query[-1]
    if parts.scheme == "unix":
        return None
    path = unquote(parts.path).strip("/")
    return path or None


def check_redis_url(url: str) -> str:
    """Check that ``url`` is a Redis URL redis-py and kombu read the same way; return it.

    redis-py ignores a database that is not a number (``redis://host:6379/abc`` quietly means
    database 0) where kombu refuses it, so a URL is checked before anything is written.

    Parameters
    ----------
    url : str
        ``redis://[[user]:password@]host[:port][/db]``, ``rediss://...`` or
        ``unix://[[user]:password@]/path/to/socket[?db=N]``.

    Returns
    -------
    str
        ``url`` unchanged.

    Raises
    ------
    InvalidRedisUrlError
        ``invalid Redis URL <url, password masked>: <what is wrong>`` for an unknown scheme, a
        missing host or socket path, a port that is not in 1..65535, or a database that is not
        a non-negative integer.
    """
    def bad(why: str) -> InvalidRedisUrlError:
        return InvalidRedisUrlError(f"invalid Redis URL {mask_url(url)}: {why}")

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise bad(str(exc)) from None
    if parts.scheme not in REDIS_SCHEMES:
        shown = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise bad(f"{shown}; use redis://, rediss:// or unix://")
    if parts.scheme == "unix":
        if not parts.path:
            raise bad("no socket path")
    else:
        if not parts.hostname:
            raise bad("no host")
        try:
            port = parts.port
        except ValueError:
            port_text = parts.netloc.rpartition(":")[2]
            raise bad(f"port {port_text!r} is not a number in 1..65535") from None
        if port == 0:
            raise bad("port 0 is not a number in 1..65535")
    db = _url_database(parts)
    if db is not None and not (db.isascii() and db.isdigit()):
        raise bad(f"database {db!r} is not a number (0, 1, ...)")
    return url


def connect(url: str, timeout_s: float = 5.0) -> redis.Redis:
    """A redis-py client for ``url`` (``decode_responses=True``), checked with PING.

    Parameters
    ----------
    url : str
        ``redis://[:password@]host:port/db`` (or ``rediss://``, ``unix://``).
    timeout_s : float
        Connect timeout in seconds (the socket timeout is at least 30 s).

    Returns
    -------
    redis.Redis
        A connected client.

    Raises
    ------
    InvalidRedisUrlError
        If the URL is malformed (:func:`check_redis_url`).
    BackendUnavailableError
        ``cannot reach Redis at redis://:***@host:port/0: <reason>`` (password masked) if the
        server is unreachable, authentication fails or the database does not exist there.
    """
    check_redis_url(url)
    try:
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout_s,
            socket_timeout=max(timeout_s, 30.0),
            decode_responses=True,
            health_check_interval=30,
        )
        client.ping()
    except (redis.RedisError, ValueError, OSError) as exc:
        reason = str(exc).replace(url, mask_url(url)) or type(exc).__name__
        if reason.startswith("MISCONF"):  # it cannot persist (e.g. a full disk)
            raise BackendUnavailableError(
                f"Redis at {mask_url(url)} refuses writes: {reason[7:].strip()}") from None
        if "DB index is out of range" in reason:
            db = _url_database(urlsplit(url))
            raise BackendUnavailableError(
                f"Redis at {mask_url(url)} has no database {db}") from None
        raise BackendUnavailableError(f"cannot reach Redis at {mask_url(url)}: {reason}") from None
    return client


__all__ = ["REDIS_ERRORS", "REDIS_SCHEMES", "mask_url", "check_redis_url", "connect"]
