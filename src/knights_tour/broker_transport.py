"""kombu's Redis transport with an acknowledgement that always frees its prefetch slot.

kombu's Redis ``QoS.ack`` removes the message from the ``unacked`` hash and index in Redis and
only then forgets the delivery locally. When that removal fails (the connection timed out in a
network fault, the ack is logged as ``Couldn't ack``), the delivery is never forgotten: the
worker's prefetch slot stays taken and, with ``worker_prefetch_multiplier = 1`` and one process,
the worker never asks for another message while its connection stays up - seen in the network
fault tier as a healed worker that took nothing for minutes.

Here the delivery is forgotten whatever Redis answered (the error is still raised, so Celery
logs it). The message then stays in kombu's ``unacked`` hash and comes back after the
visibility timeout; its jobs are recorded by then, so the task it carries claims nothing and
ends (:mod:`knights_tour.store.leases`). Selected by ``broker_transport`` in
:func:`knights_tour.worker.celery_config`.
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual


class QoS(kombu_redis.QoS):
    """:class:`kombu.transport.redis.QoS` whose :meth:`ack` frees the prefetch slot even when
    Redis does not answer."""

    def ack(self, delivery_tag: str) -> None:
        """Remove the message from Redis's unacked records, then forget the delivery - also
        when the removal raises (a connection error: re-raised after the delivery is
        forgotten)."""
        try:
            self._remove_from_indices(delivery_tag).execute()
        finally:
            virtual.QoS.ack(self, delivery_tag)


class Channel(kombu_redis.Channel):
    """kombu's Redis channel with :class:`QoS`."""

    QoS = QoS


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel


__all__ = ["Transport", "Channel", "QoS"]
