"""The Redis connection: :func:`connect`, :func:`mask_url` and :data:`REDIS_ERRORS`, defined once.

redis-py only. Every other module that talks to Redis gets its client from :func:`connect` and
retries on :data:`REDIS_ERRORS` where it rides out an outage.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis

from knights_tour.errors import BackendUnavailableError

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
    BackendUnavailableError
        ``cannot reach Redis at redis://:***@host:port/0: <reason>`` (password masked) if the
        URL is malformed, the server is unreachable, or authentication fails.
    """
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
        raise BackendUnavailableError(f"cannot reach Redis at {mask_url(url)}: {reason}") from None
    return client


__all__ = ["REDIS_ERRORS", "mask_url", "connect"]
