"""What each Celery worker node did and when its processes last beat (redis-py only): the
jobs it recorded and how many of them ended ``error`` (written by the worker as each chunk
ends, :mod:`knights_tour.worker.celery`), and the registry of worker leases
(:func:`knights_tour.store.keys.workers`), whose renewals are the heartbeats of the processes
that run jobs. Read by ``ktour workers`` (:mod:`knights_tour.worker.monitor`).
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from knights_tour.store import keys
from knights_tour.worker.holders import REGISTRY_READ_MAX
from knights_tour.worker.ledger import text

COUNTS_TTL_S = 7 * 24 * 3600
"""A node's counts expire this long after its last chunk (a node name not used again)."""


def reset_counts(r: redis.Redis, node: str) -> None:
    """Start ``node``'s counts from zero (its worker just started)."""
    r.delete(keys.node_counts(node))


def add_counts(r: redis.Redis, node: str, processed: int, failed: int) -> None:
    """Add ``processed`` jobs recorded, ``failed`` of them as ``error``, to ``node``'s counts
    (one pipelined round trip).

    Raises
    ------
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    name = keys.node_counts(node)
    pipe = r.pipeline(transaction=True)
    pipe.hincrby(name, "processed", processed)
    pipe.hincrby(name, "failed", failed)
    pipe.expire(name, COUNTS_TTL_S)
    pipe.execute()


def read_counts(r: redis.Redis, nodes: Sequence[str]) -> dict[str, tuple[int, int]]:
    """node -> (jobs recorded, jobs recorded as error) since it started; (0, 0) for a node
    with no counts (one pipelined round trip)."""
    pipe = r.pipeline(transaction=False)
    for node in nodes:
        pipe.hmget(keys.node_counts(node), ["processed", "failed"])
    return {
        node: (int(p or 0), int(f or 0)) for node, (p, f) in zip(nodes, pipe.execute(), strict=True)
    }


def lease_ends(r: redis.Redis) -> tuple[float, dict[str, float]]:
    """The Redis server's clock and, per worker-process token (``host:pid:random``), when its
    lease runs out (server clock, unix seconds), for the :data:`REGISTRY_READ_MAX` leases that
    end latest (one round trip)."""
    pipe = r.pipeline(transaction=False)
    pipe.time()
    pipe.zrevrange(keys.workers(), 0, REGISTRY_READ_MAX - 1, withscores=True)
    (sec, usec), registry = pipe.execute()
    return int(sec) + int(usec) / 1e6, {text(t): float(s) for t, s in registry}


__all__ = ["COUNTS_TTL_S", "reset_counts", "add_counts", "read_counts", "lease_ends"]
