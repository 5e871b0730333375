"""Wake-ups over Redis pub/sub: a waiting client blocks on its batch's (count's) channel
between polls, so it sees the end as soon as the last result is stored instead of at its next
poll.

Workers publish from the script that stores a result
(:func:`knights_tour.batches.saving.save_record`, :func:`knights_tour.counting.store.save_partial`)
once there are as many results as jobs; a cancel publishes too. A message is only a hint to
poll now: the poll decides, and a message missed (sent before the subscription, or during a
Redis outage) costs at most one poll interval. redis-py only.
"""

from __future__ import annotations

import time
from types import TracebackType

import redis


class Wakeup:
    """A subscription to one channel; :meth:`wait` sleeps until a message or the timeout.

    Use as a context manager (the subscription's connection is closed on exit). Redis errors
    never escape: :meth:`wait` then sleeps the whole timeout, and the next call resubscribes.

    Parameters
    ----------
    r : redis.Redis
        The client to subscribe with (the subscription takes a connection of its own).
    channel : str
        The channel name (e.g. :func:`knights_tour.store.keys.batch_events`).
    """

    def __init__(self, r: redis.Redis, channel: str) -> None:
        self.channel = channel
        self._pubsub = r.pubsub(ignore_subscribe_messages=True)
        self._subscribed = False
        self._subscribe()

    def _subscribe(self) -> None:
        try:
            self._pubsub.subscribe(self.channel)
            self._subscribed = True
        except redis.RedisError:
            self._drop()

    def _drop(self) -> None:
        """Forget the subscription and its connection (a Redis that refuses writes under
        ``MISCONF`` also answers the connection's health-check PING with an error)."""
        self._subscribed = False
        try:
            self._pubsub.reset()
        except redis.RedisError:
            pass

    def wait(self, timeout_s: float) -> bool:
        """Block for up to ``timeout_s`` seconds; True if a message came (poll now)."""
        deadline = time.monotonic() + timeout_s
        if not self._subscribed:
            self._subscribe()
        while self._subscribed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                # None also after a subscribe confirmation; wait out the rest of the time.
                if self._pubsub.get_message(timeout=left) is not None:
                    return True
            except redis.RedisError:
                self._drop()
        time.sleep(max(0.0, deadline - time.monotonic()))
        return False

    def close(self) -> None:
        """Drop the subscription and its connection (errors ignored)."""
        try:
            self._pubsub.close()
        except redis.RedisError:
            pass

    def __enter__(self) -> Wakeup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["Wakeup"]
