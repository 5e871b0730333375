"""Who holds what, read from the leases (redis-py only): the live leases, the items of a batch
or count each worker process holds, and the registry of worker leases - the read side of
:mod:`knights_tour.worker.leases`, for recovery and for ``ktour status``.

A ``started`` entry (:func:`knights_tour.store.keys.batch_started`) is ``token|mode|claim``:
the token of the process that claimed the item, the mode of its chunk (``p`` plain, ``c``
careful not started yet, ``r`` started by a careful chunk) and the claim's id, whose first part
is the unix time of the claim on the worker's clock (:func:`knights_tour.worker.leases.claim`).
A token's lease is live while its key exists.

The **registry** (:func:`knights_tour.store.keys.workers`) is a sorted set token -> the time
(Redis server clock, unix seconds) its lease runs out, written with each opening and renewal of
a lease. A lease that lapsed keeps its last entry (for a day), so the registry tells how long
ago the last worker lease of a server ended: what ``ktour status`` needs to call a batch that
nobody serves ``stalled``. Reading it takes no broadcast to the workers: one pipelined round
trip for the registry, the ``started`` hash and the server's clock, one for the leases.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from knights_tour.store import keys
from knights_tour.worker.ledger import Ledger, text

REGISTRY_READ_MAX = 4096
"""At most this many registry entries (those whose leases end latest) are read per view: more
worker processes than this with live leases on one server are not told apart."""


def live(r: redis.Redis, tokens: Iterable[str]) -> dict[str, bool]:
    """token -> its lease exists (one EXISTS per distinct token, pipelined: one round trip).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    tokens = sorted(set(tokens))
    if not tokens:
        return {}
    pipe = r.pipeline(transaction=False)
    for t in tokens:
        pipe.exists(keys.lease(t))
    return {t: bool(x) for t, x in zip(tokens, pipe.execute(), strict=True)}


def owners(r: redis.Redis, led: Ledger) -> dict[str, str]:
    """item key -> the token that claimed it (mode and claim stripped), from ``led``'s
    ``started`` hash (one HGETALL)."""
    return {text(k): text(v).split("|", 1)[0] for k, v in r.hgetall(led.started).items()}


def holders(r: redis.Redis, led: Ledger) -> dict[str, str]:
    """item key -> token, for the items of ``led`` claimed by a process whose lease is live
    (two round trips)."""
    found = owners(r, led)
    alive = live(r, found.values())
    return {k: t for k, t in found.items() if alive[t]}


def running(r: redis.Redis, led: Ledger) -> list[str]:
    """Keys of the items of ``led`` held by a live process now, sorted."""
    return sorted(holders(r, led))


@dataclass
class Holding:
    """The items of one unit (batch or count) that one worker process has claimed and not yet
    stored a result for.

    Attributes
    ----------
    token : str
        The process's token, ``name:pid:random`` (:mod:`knights_tour.worker.lease_keeper`:
        its Celery node name, ``solver1@vm``, or its host).
    live : bool
        Its lease exists: it is working on them; False: it died or stalled past its lease, so
        they are lost until recovery re-sends them.
    items : list of str
        The item keys it holds, in natural order (numbers by value: ``8x8:0,9`` before
        ``8x8:0,10``).
    since : float or None
        Unix seconds (worker's clock) of its oldest claim among them; None for entries without
        a readable claim time.
    started : str or None
        The item a careful chunk marked started (mode ``r``), the one it runs now; None for a
        plain chunk (any of its items may be the one running).
    """

    token: str
    live: bool
    items: list[str] = field(default_factory=list)
    since: float | None = None
    started: str | None = None

    @property
    def worker(self) -> str:
        """``name:pid`` of the process (the token without its random part): ``solver1@vm:9671``,
        the worker ``ktour workers`` calls ``solver1@vm``, pool process 9671."""
        return self.token.rsplit(":", 1)[0] if self.token.count(":") >= 2 else self.token


@dataclass
class LeaseView:
    """What the leases say about one unit, read in two round trips (:func:`lease_view`).

    Attributes
    ----------
    now : float
        The Redis server's clock when read, unix seconds.
    holdings : list of Holding
        One per token with items of the unit, live ones first, then by token.
    live_tokens : list of str
        Every token with a live lease on this server (registry entries not yet run out whose
        key exists, and the unit's holders whose key exists), sorted.
    last_lease_end : float or None
        Server time (unix s) the latest lease in the registry runs out (in the future while
        one is live); None if the registry is empty (no worker has held a lease for a day).
    """

    now: float
    holdings: list[Holding]
    live_tokens: list[str]
    last_lease_end: float | None

    def held(self, live: bool) -> int:
        """Items held by live (``live=True``) or by lapsed (``False``) leases."""
        return sum(len(h.items) for h in self.holdings if h.live == live)


def _natural(key: str) -> list[tuple[int, int | str]]:
    """Sort key of an item key with its numbers compared by value."""
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", key)]


def _claim_time(claim: str) -> float | None:
    try:
        return float(claim.split(":", 1)[0])
    except ValueError:
        return None


def _holdings(started: dict[Any, Any], alive: dict[str, bool]) -> list[Holding]:
    by_token: dict[str, Holding] = {}
    for k, v in started.items():
        token, mode, claim = ([*text(v).split("|", 2), "", ""])[:3]
        h = by_token.setdefault(token, Holding(token, alive.get(token, False)))
        h.items.append(text(k))
        t = _claim_time(claim)
        if t is not None and (h.since is None or t < h.since):
            h.since = t
        if mode == "r":
            h.started = text(k)
    for h in by_token.values():
        h.items.sort(key=_natural)
    return sorted(by_token.values(), key=lambda h: (not h.live, h.token))


def _view(r: redis.Redis, started_key: str | None) -> tuple[LeaseView, dict[Any, Any]]:
    """The server's clock, the registry and (with ``started_key``) that ``started`` hash in one
    round trip; the leases of the tokens met in one more."""
    pipe = r.pipeline(transaction=False)
    pipe.time()
    pipe.zrevrange(keys.workers(), 0, REGISTRY_READ_MAX - 1, withscores=True)
    if started_key is not None:
        pipe.hgetall(started_key)
    replies = pipe.execute()
    (sec, usec), registry = replies[0], replies[1]
    started = replies[2] if started_key is not None else {}
    now = int(sec) + int(usec) / 1e6
    ends = [(text(t), float(s)) for t, s in registry]
    candidates = {t for t, end in ends if end > now}
    tokens = {text(v).split("|", 1)[0] for v in started.values()}
    alive = live(r, candidates | tokens)
    view = LeaseView(
        now=now,
        holdings=_holdings(started, alive),
        live_tokens=sorted(t for t, ok in alive.items() if ok),
        last_lease_end=ends[0][1] if ends else None,
    )
    return view, started


def lease_view(r: redis.Redis, led: Ledger) -> LeaseView:
    """Who holds which items of ``led``'s unit, and which worker leases are live.

    Round trip 1 (pipelined): the server's TIME, the registry entries whose leases end latest
    (:data:`REGISTRY_READ_MAX`), the unit's ``started`` hash. Round trip 2: one EXISTS per
    token met. Cost: the items in flight plus the worker processes, not the unit's size.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    return _view(r, led.started)[0]


def server_leases(r: redis.Redis) -> LeaseView:
    """The worker leases of the whole server, without any unit's holdings (``holdings`` empty):
    the clock, the live tokens, when the last lease ends. Two round trips.

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    return _view(r, None)[0]


__all__ = [
    "REGISTRY_READ_MAX",
    "Holding",
    "LeaseView",
    "live",
    "owners",
    "holders",
    "running",
    "lease_view",
    "server_leases",
]
