"""The broker transport's acknowledgement frees the worker's prefetch slot even when Redis does
not answer (a worker whose ack timed out in a network fault otherwise never consumes again
while its connection stays up: seen in the network fault tier)."""

from __future__ import annotations

import types

import pytest
import redis
from kombu.transport import redis as kombu_redis

from knights_tour import broker_transport
from knights_tour.settings import get_settings
from knights_tour.worker import celery_config

pytestmark = pytest.mark.unit


class _UnansweredPipeline:
    def execute(self) -> None:
        raise redis.exceptions.TimeoutError("Timeout reading from socket")


def _qos_holding_one_delivery(cls: type) -> kombu_redis.QoS:
    qos = cls(types.SimpleNamespace(do_restore=False), prefetch_count=1)
    qos._remove_from_indices = lambda tag, pipe=None: _UnansweredPipeline()
    qos._delivered["tag-1"] = object()
    assert not qos.can_consume()  # the one prefetch slot is taken
    return qos


def test_kombus_own_ack_keeps_the_slot_when_redis_does_not_answer():
    """The upstream behaviour this module exists for (if kombu changes it, so can we)."""
    qos = _qos_holding_one_delivery(kombu_redis.QoS)
    with pytest.raises(redis.exceptions.TimeoutError):
        qos.ack("tag-1")
    assert not qos.can_consume()


def test_our_ack_frees_the_slot_and_still_reports_the_error():
    qos = _qos_holding_one_delivery(broker_transport.QoS)
    with pytest.raises(redis.exceptions.TimeoutError):
        qos.ack("tag-1")
    assert qos.can_consume()


def test_the_worker_uses_it():
    assert celery_config(get_settings())["broker_transport"] == (
        "knights_tour.broker_transport:Transport"
    )
    assert broker_transport.Transport.Channel.QoS is broker_transport.QoS
