"""kombu's Redis transport, hardened: an acknowledgement that always frees its prefetch slot, a
message that cannot be decoded set aside instead of killing the worker, and a delivery that
survives a Redis refusing writes.

**Acks.** kombu's Redis ``QoS.ack`` removes the message from the ``unacked`` hash and index in
Redis and only then forgets the delivery locally. When that removal fails (the connection timed
out in a network fault, the ack is logged as ``Couldn't ack``), the delivery is never forgotten:
the worker's prefetch slot stays taken and, with ``worker_prefetch_multiplier = 1`` and one
process, the worker never asks for another message while its connection stays up - seen in the
network fault tier as a healed worker that took nothing for minutes. Here the delivery is
forgotten whatever Redis answered (the error is still raised, so Celery logs it). The message
then stays in kombu's ``unacked`` hash and comes back after the visibility timeout; its jobs are
recorded by then, so the task it carries claims nothing and ends
(:mod:`knights_tour.worker.leases`).

**Malformed messages.** kombu decodes a queue entry (JSON) in its BRPOP reader and its body
(base64) as it builds the message; either error escapes the event loop and Celery stops the
worker (``Unrecoverable error``). Here an entry that is not a JSON object with kombu's fields,
or whose body does not decode, is set aside in the dead-letter list
(:mod:`knights_tour.worker.dead_letters`) with one ERROR line, and the worker takes the next one.
A well-formed envelope is checked again before Celery takes it (:func:`message_problem`: the
task's name and arguments; :func:`guarded`, which the worker's consumer wraps around Celery's
handler) and set aside the same way (:func:`set_aside`).

**Refused writes.** kombu records each delivered message in the ``unacked`` hash before handing
it to Celery; a full Redis (``OOM``) refuses that write after the message was popped, and kombu
loses it. Here the delivery goes on, known to this worker only (its task waits for Redis to
accept its records; if the worker dies meanwhile, recovery re-sends its jobs).

Selected by ``broker_transport`` in :func:`knights_tour.worker.celery.celery_config`.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable
from queue import Empty
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from knights_tour.store import keys
from knights_tour.store.memory import write_refusal
from knights_tour.worker import dead_letters
from knights_tour.worker.logs import NETWORK_ERRORS
from knights_tour.worker.messages import body_problem

log = logging.getLogger(__name__)

DEAD_LETTER_LOG = "set aside a malformed queue message (%s) in Redis list %s"
"""The ERROR line for each message set aside (reason, list key)."""


def envelope_problem(raw: object) -> str | None:
    """Why kombu could not build a message from the queue entry ``raw`` (decoded JSON), or None
    if it can: a JSON object whose ``properties`` object has a ``delivery_tag`` and
    ``delivery_info``, with ``headers`` an object and a ``body`` that is text, valid base64 when
    ``body_encoding`` says so."""
    if not isinstance(raw, dict):
        return f"the queue entry is a JSON {type(raw).__name__}, not an object"
    props = raw.get("properties")
    if not isinstance(props, dict):
        return "the queue entry has no properties object"
    if not isinstance(props.get("delivery_tag"), str) or not props.get("delivery_tag"):
        return "the queue entry has no delivery tag"
    if not isinstance(props.get("delivery_info", {}), dict):
        return "the queue entry's delivery_info is not an object"
    if not isinstance(raw.get("headers", {}), dict):
        return "the queue entry's headers are not an object"
    body = raw.get("body")
    if body is not None and not isinstance(body, str):
        return f"the message body is a JSON {type(body).__name__}, not text"
    encoding = props.get("body_encoding")
    if encoding not in (None, "base64", "utf-8"):
        return f"unknown body encoding {encoding!r}"
    if encoding == "base64" and body:
        try:
            base64.b64decode(body.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
            return f"the message body is not valid base64 ({exc})"
    return None


class QoS(kombu_redis.QoS):
    """:class:`kombu.transport.redis.QoS` whose :meth:`ack` frees the prefetch slot even when
    Redis does not answer, and whose :meth:`append` keeps a delivery Redis refused to record."""

    def ack(self, delivery_tag: str) -> None:
        """Remove the message from Redis's unacked records, then forget the delivery - also
        when the removal raises (a connection error: re-raised after the delivery is
        forgotten)."""
        try:
            self._remove_from_indices(delivery_tag).execute()
        finally:
            virtual.QoS.ack(self, delivery_tag)

    def append(self, message: Any, delivery_tag: str) -> None:
        """Record the delivery in Redis (kombu's ``unacked`` hash) and here; when Redis refuses
        the write (:func:`knights_tour.store.memory.write_refusal`), here only, with one
        ERROR line: the message is already off the queue, and dropping it would lose it."""
        try:
            super().append(message, delivery_tag)
        except redis.ResponseError as exc:
            reason = write_refusal(exc)
            if reason is None:
                raise
            log.error(
                "Redis refuses writes: %s; message %s runs unrecorded in Redis",
                reason,
                delivery_tag,
            )
            virtual.QoS.append(self, message, delivery_tag)


class Channel(kombu_redis.Channel):
    """kombu's Redis channel with :class:`QoS`, setting aside the queue entries it cannot
    decode (:meth:`dead_letter`)."""

    QoS = QoS

    def dead_letter(self, reason: str, message: object) -> None:
        """Keep ``message`` (raw text or a decoded entry) in the dead-letter list with
        ``reason`` and log one ERROR line; if Redis cannot take it, the line says so and the
        message is dropped."""
        try:
            with self.conn_or_acquire() as client:
                dead_letters.park(client, reason, message)
        except redis.RedisError as exc:
            log.error("dropped a malformed queue message (%s); could not keep it: %s", reason, exc)
            return
        log.error(DEAD_LETTER_LOG, reason, keys.dead_letters())

    def _brpop_read(self, **options: Any) -> bool:
        # kombu decodes the popped entry (JSON) before delivering it: an entry that is not JSON
        # would escape the event loop. The entry is already off the queue: set it aside.
        try:
            return bool(super()._brpop_read(**options))
        except json.JSONDecodeError as exc:
            self.dead_letter(f"the queue entry is not JSON: {exc}", exc.doc)
        except UnicodeDecodeError as exc:
            self.dead_letter(f"the queue entry is not UTF-8 text: {exc}", exc.object)
        return True

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        try:
            return super()._get(queue)
        except json.JSONDecodeError as exc:
            self.dead_letter(f"the queue entry is not JSON: {exc}", exc.doc)
        except UnicodeDecodeError as exc:
            self.dead_letter(f"the queue entry is not UTF-8 text: {exc}", exc.object)
        raise Empty()


def message_problem(message: Any) -> str | None:
    """Why a delivered task message (a kombu message) cannot be run, or None: its headers must
    name a task of :data:`knights_tour.worker.messages.TASK_ARGUMENTS` (Celery's protocol 2), its
    content type be JSON and its body decode to arguments of that task's shape
    (:func:`knights_tour.worker.messages.body_problem`)."""
    headers = message.headers
    name = headers.get("task") if isinstance(headers, dict) else None
    if not isinstance(name, str):
        return "no task name in its headers (not a Celery task message of this release)"
    if message.content_type != "application/json":
        return f"content type {message.content_type!r}, not application/json"
    try:
        body = message.decode()
    except Exception as exc:  # noqa: BLE001 - whatever the body is, it is not a task's
        return f"the body does not decode: {type(exc).__name__}: {exc}"
    return body_problem(name, body)


def set_aside(message: Any, problem: str) -> None:
    """Acknowledge ``message`` and keep it in the dead-letter list with ``problem`` (one ERROR
    line); an acknowledgement Redis refuses is logged, not raised."""
    channel = message.channel
    raw = getattr(message, "_raw", None) or {"headers": message.headers, "body": message.body}
    if hasattr(channel, "dead_letter"):
        channel.dead_letter(problem, raw)
    else:
        log.error("dropped a malformed queue message (%s)", problem)
    try:
        message.ack()
    except Exception as exc:  # noqa: BLE001 - the delivery is forgotten all the same
        log.error("could not acknowledge the malformed message: %s", exc)


def guarded(handle: Callable[[Any], None]) -> Callable[[Any], None]:
    """Celery's task message handler ``handle`` (the consumer's ``create_task_handler``), with
    every message checked first (:func:`message_problem`): one that is not a task of this
    release with arguments of the right shape - or that ``handle`` fails on all the same - is
    acknowledged and set aside (:func:`set_aside`) instead of stopping the worker (Celery lets
    the error of a body it cannot unpack escape its event loop, and the message,
    unacknowledged, comes back to stop the next worker). Network errors still propagate."""

    def on_task_received(message: Any) -> None:
        problem = message_problem(message)
        if problem is None:
            try:
                handle(message)
                return
            except NETWORK_ERRORS:
                raise
            except Exception as exc:  # noqa: BLE001 - no message may stop the worker
                problem = f"Celery could not take it: {type(exc).__name__}: {exc}"
        set_aside(message, problem)

    return on_task_received


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`; an entry of the project queue that kombu
    could not build a message from (:func:`envelope_problem`) is set aside, not delivered."""

    Channel = Channel

    def _deliver(self, message: Any, queue: str) -> None:
        if queue == keys.QUEUE:
            problem = envelope_problem(message)
            if problem is not None:
                channel = next((c for c in self.channels if isinstance(c, Channel)), None)
                if channel is not None:
                    channel.dead_letter(problem, message)
                else:
                    log.error("dropped a malformed queue message (%s)", problem)
                return
        super()._deliver(message, queue)


__all__ = [
    "Transport",
    "Channel",
    "QoS",
    "envelope_problem",
    "message_problem",
    "set_aside",
    "guarded",
    "DEAD_LETTER_LOG",
]
