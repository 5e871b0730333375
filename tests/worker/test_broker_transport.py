"""The broker transport's acknowledgement frees the worker's prefetch slot even when Redis does
not answer (a worker whose ack timed out in a network fault otherwise never consumes again
while its connection stays up: seen in the network fault tier)."""

from __future__ import annotations

import types

import pytest
import redis
from kombu.transport import redis as kombu_redis

from knights_tour.settings import get_settings
from knights_tour.worker import transport as broker_transport
from knights_tour.worker.celery import celery_config

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
        "knights_tour.worker.transport:Transport"
    )
    assert broker_transport.Transport.Channel.QoS is broker_transport.QoS


def _envelope(**changes: object) -> dict:
    env = {
        "body": "W1tdLCB7fSwge31d",  # [[], {}, {}]
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"task": "knights_tour.run_jobs", "id": "x"},
        "properties": {
            "delivery_tag": "t-1",
            "body_encoding": "base64",
            "delivery_info": {"exchange": "", "routing_key": "knights_tour"},
        },
    }
    env.update(changes)
    return env


def test_a_well_formed_queue_entry_passes():
    assert broker_transport.envelope_problem(_envelope()) is None


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ([1, 2], "a JSON list, not an object"),
        (_envelope(properties=None), "no properties object"),
        (_envelope(properties={"body_encoding": "base64"}), "no delivery tag"),
        (_envelope(headers=[1]), "headers are not an object"),
        (_envelope(body=7), "body is a JSON int"),
        (_envelope(body="!!!notbase64"), "not valid base64"),
        (
            _envelope(properties={"delivery_tag": "t", "body_encoding": "rot13"}),
            "unknown body encoding",
        ),
    ],
)
def test_a_queue_entry_kombu_cannot_build_a_message_from_says_why(entry, says):
    problem = broker_transport.envelope_problem(entry)
    assert problem is not None and says in problem
