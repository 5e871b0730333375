"""Redis URLs read without redis-py: :func:`check_redis_url` (is it a URL redis-py and kombu
read the same way?) and :func:`mask_url` (the URL with its password hidden, for messages).

The standard library only, so that a command refuses a malformed ``--redis`` URL before it
loads redis-py or anything behind it; :mod:`knights_tour.store.connection` checks every URL it
connects to with the same function.
"""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qs, unquote, urlsplit, urlunsplit

from knights_tour.errors import InvalidRedisUrlError

REDIS_SCHEMES = ("redis", "rediss", "unix")
"""URL schemes redis-py (and kombu's Redis transport) accept."""


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


def url_database(parts: SplitResult) -> str | None:
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
    db = url_database(parts)
    if db is not None and not (db.isascii() and db.isdigit()):
        raise bad(f"database {db!r} is not a number (0, 1, ...)")
    return url


__all__ = ["REDIS_SCHEMES", "check_redis_url", "mask_url", "url_database"]
