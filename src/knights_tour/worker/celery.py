"""The Celery application (laid out like Celery's ``examples/next-steps/proj``).

What a worker process must have before it consumes - the configuration, its bootsteps and
consumer, its process signals - is set up when this module is imported (Celery loads an app by
module path: ``-A knights_tour.worker`` finds it here). The task bodies and what the worker's
timer runs are in :mod:`knights_tour.tasks`; the log filter for network faults in
:mod:`knights_tour.worker.logs`.

Start a worker with::

    KT_REDIS_URL=redis://:PASSWORD@host:6379/0 \\
        celery -A knights_tour.worker worker -Q knights_tour -c 2 -n w1@%h

Configuration comes only from :func:`knights_tour.settings.get_settings` (``KT_`` variables):

* broker and result backend = ``KT_REDIS_URL`` (default ``redis://127.0.0.1:6379/0`` if unset;
  ``ktour run`` sets it for the workers it starts);
* JSON only on the wire (``task_serializer``, ``result_serializer``, ``accept_content``) -
  never pickle;
* late acknowledgement (``task_acks_late``) with ``task_reject_on_worker_lost``: a job whose
  worker dies is delivered again (records are keyed by job, and a job's first record is kept);
  ``worker_prefetch_multiplier = 1`` so a worker does not hoard messages it cannot start;
* a chunk of batch jobs runs under soft/hard time limits derived from its jobs' budgets
  (:class:`knights_tour.tasks.ChunkRequest`); other tasks under ``KT_SOFT_TIME_LIMIT_S`` /
  ``KT_HARD_TIME_LIMIT_S``. The Redis ``visibility_timeout`` (``KT_VISIBILITY_TIMEOUT_S``) is
  longer than those, because a message not acknowledged within it is handed to another
  worker (Celery docs, "Using Redis: Visibility Timeout"). A chunk that runs longer is handed
  out again, and harmlessly so: its jobs are claimed by the running task's live lease, so
  the second delivery skips them (:mod:`knights_tour.worker.leases`);
* every broker connection has the store's socket timeouts, TCP keepalive and health checks
  (``KT_REDIS_*``), and a worker reconnects for ever with short pauses
  (:class:`ReconnectingConsumer`); it refuses a Redis that rejects its credentials or may
  evict keys before consuming (:class:`RedisPreflight`); network faults are logged as one line
  each, a repeated one once a minute (:mod:`knights_tour.worker.logs`). Why each setting has
  its value: ``docs/deploy.md``;
* ``task_ignore_result = True``: each job's record is written to Redis by the task itself
  (:mod:`knights_tour.batches.store`), so Celery's own result keys would be unused extra writes
  (and measurably slower: ``benchmarks/README.md``).

The numba engine is warmed up once per process before it runs jobs, so the first job does not
pay the compile/cache-load cost: in the worker main process before its pool forks when the
worker is started by :mod:`knights_tour.local.celery_worker_main` (as ``ktour run`` does),
else in each pool process (``worker_process_init``).

Every task name is spelled here (``TASK_*``); the task bodies are in :mod:`knights_tour.tasks`,
which the app loads by name (``include``), so nothing imports it.

``celery -A knights_tour.worker beat`` runs the schedule of :mod:`knights_tour.batches.schedule`
(``KT_SCHEDULE_FILE``) through the ``beat_scheduler`` set here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import redis
from celery import Celery, bootsteps
from celery.signals import task_success, worker_process_init, worker_process_shutdown, worker_ready
from celery.worker.consumer import Consumer
from kombu.exceptions import KombuError, OperationalError
from kombu.transport.redis import PRIORITY_STEPS, Channel
from kombu.utils.uuid import uuid

from knights_tour import solvers
from knights_tour.errors import BackendUnavailableError, RedisRefusedError
from knights_tour.settings import Settings, get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect, tcp_keepalive_options
from knights_tour.tours.record import Status
from knights_tour.worker import logs as worker_logs
from knights_tour.worker import nodes
from knights_tour.worker import transport as broker_transport
from knights_tour.worker.messages import DEFAULT_REDIS_URL, TASK_RUN_JOBS, args_repr, encode_body

UNACKED_KEY: str = Channel.unacked_key
"""The Redis hash where kombu's Redis transport keeps every message delivered to a worker and
not yet acknowledged (with late acks: reserved or running tasks)."""

log = logging.getLogger(__name__)


def celery_config(settings: Settings, url: str | None = None) -> dict:
    """The Celery configuration for ``settings`` (a plain dict, for inspection and tests), with
    broker and result backend ``url`` (default: ``KT_REDIS_URL``, else
    :data:`~knights_tour.worker.messages.DEFAULT_REDIS_URL`)."""
    url = url or settings.redis_url or DEFAULT_REDIS_URL
    visibility = int(settings.visibility_timeout_s)
    # Every broker connection (kombu) gets the store's socket options (store.connection):
    # a dead peer is noticed in seconds, not when the kernel gives up on it. kombu also uses
    # health_check_interval for its own checks of the BRPOP and pub/sub connections, which
    # wait in the event loop where no socket timeout applies (kombu >= 5.7). retry_on_timeout
    # stays off: a write whose reply timed out may have been applied, and kombu then stops
    # batching publishes; the consumer reconnects instead.
    transport = {
        "visibility_timeout": visibility,
        "socket_timeout": settings.redis_socket_timeout_s,
        "socket_connect_timeout": settings.redis_connect_timeout_s,
        "socket_keepalive": True,
        "socket_keepalive_options": tcp_keepalive_options(settings.redis_keepalive_s),
        "health_check_interval": settings.redis_health_check_s,
    }
    return {
        "broker_url": url,
        # kombu's Redis transport, with an ack that frees its prefetch slot when Redis does not
        # answer (knights_tour.worker.transport).
        "broker_transport": "knights_tour.worker.transport:Transport",
        "result_backend": url,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": settings.soft_time_limit_s,
        "task_time_limit": settings.hard_time_limit_s,
        "broker_transport_options": dict(transport),
        "result_backend_transport_options": dict(transport),
        "broker_connection_retry_on_startup": True,
        # Reconnect for ever (Celery's default gives up after 100 attempts and the worker
        # exits), with pauses of at most KT_REDIS_RECONNECT_MAX_S (ReconnectingConsumer).
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,
        "broker_connection_timeout": settings.redis_connect_timeout_s,
        "broker_channel_error_retry": True,
        "worker_consumer": "knights_tour.worker.celery:ReconnectingConsumer",
        # The result backend's own connections (unused by the tasks, which ignore results;
        # set so that nothing in this app opens a Redis connection without them).
        "redis_socket_timeout": settings.redis_socket_timeout_s,
        "redis_socket_connect_timeout": settings.redis_connect_timeout_s,
        "redis_socket_keepalive": True,
        "redis_backend_health_check_interval": settings.redis_health_check_s,
        "task_ignore_result": True,
        "task_default_queue": keys.QUEUE,
        "task_routes": {TASK_RUN_JOBS: {"queue": keys.QUEUE}},
        # A pool process warms up the numba engine at start; billiard's default of 4 s to
        # come alive would be too short when the compile cache is cold.
        "worker_proc_alive_timeout": 120.0,
        # With late acks a task cut off from the broker can no longer be acknowledged and will
        # be delivered again anyway; stop it rather than finish work twice.
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "worker_hijack_root_logger": False,
        "enable_utc": True,
        "timezone": "UTC",
        # celery beat loads KT_SCHEDULE_FILE when it starts (workers never read the file).
        "beat_scheduler": "knights_tour.batches.schedule:ScheduleFileScheduler",
    }


app = Celery("knights_tour", include=["knights_tour.tasks"])
app.config_from_object(celery_config(get_settings()))


@functools.cache
def _client_app(url: str) -> Celery:
    """A Celery app of its own for sending to (and controlling workers of) the Redis at
    ``url``, configured like :data:`app` but for that broker. One per URL and process: its
    broker connections are pooled for the next send."""
    client = Celery("knights_tour", set_as_current=False)
    client.config_from_object(celery_config(get_settings(), url))
    return client


def use_redis(url: str) -> Celery:
    """The Celery app that talks to the Redis at ``url`` (broker and result backend).

    For client processes (``ktour run/submit``, tests) that talk to a Redis chosen at run time
    (e.g. the embedded server) rather than ``KT_REDIS_URL``: :data:`app` itself when ``url`` is
    its broker, else an app of its own for ``url`` (created on first use, then kept), so no
    app is ever re-pointed at another server and nothing of Celery's internals is reset.
    Workers never call this: they are configured from settings.
    """
    return app if url == app.conf.broker_url else _client_app(url)


def send(
    name: str,
    args: Sequence[Any],
    *,
    url: str | None = None,
    priority: int | None = None,
    producer: Any = None,
) -> None:
    """Put one task message on the project queue (JSON, result ignored).

    Celery's own message and sender (routing, retries, signals), with the body encoded by
    :func:`~knights_tour.worker.messages.encode_body` and without ``send_task``'s result object; a
    task sent from inside a task has it as its parent, as ``send_task`` links them.

    Parameters
    ----------
    name : str
        One of the ``TASK_*`` names above.
    args : sequence
        Positional arguments of the task: JSON-ready values, or msgspec structs (sent as
        JSON objects of their fields).
    url : str, optional
        The broker's Redis URL (:func:`use_redis`); default: this process's :data:`app`
        (``KT_REDIS_URL``).
    priority : int, optional
        Message priority (0 is served first); default: the transport's default.
    producer : kombu.Producer, optional
        A producer from ``app.producer_or_acquire()``, to send many messages on one connection.

    Raises
    ------
    redis.ConnectionError
        If the broker cannot be reached (kombu's ``OperationalError``, after its own retries).
    TypeError
        If an argument cannot be encoded to JSON.
    """
    sender = app if url is None else use_redis(url)
    header: dict[str, object] = {"argsrepr": args_repr(args), "kwargsrepr": "{}"}
    if parent := sender.current_worker_task:  # linked to it as send_task links a task's tasks
        request = parent.request
        header.update(root_id=request.root_id or request.id, parent_id=request.id)
    message = sender.amqp.create_task_message(
        uuid(), name, list(args), {}, reply_to=sender.thread_oid, ignore_result=True, **header
    )
    options: dict[str, object] = {"content_type": "application/json", "content_encoding": "utf-8"}
    if priority is not None:
        options["priority"] = priority
    try:
        with sender.producer_or_acquire(producer) as p, p.connection._reraise_as_library_errors():
            message = message._replace(body=encode_body(message.body))
            sender.amqp.send_task_message(p, name, message, queue=keys.QUEUE, **options)
    except OperationalError as exc:
        # The broker is the same Redis: report its outage as the store's errors are reported,
        # so every caller that rides out a Redis outage (REDIS_ERRORS) rides out this one.
        raise redis.ConnectionError(f"cannot send to the broker: {exc}") from exc


SEND_BATCH = 64
"""Messages that :func:`sending` writes to the broker per pipelined round trip: few enough
that the first tasks of a batch reach the workers while the rest are being sent."""


@contextlib.contextmanager
def sending(url: str | None = None) -> Iterator[Callable[..., None]]:
    """Send many task messages on one connection, written to the broker :data:`SEND_BATCH` at
    a time in a pipeline (kombu's ``Producer.batch``) instead of one round trip each.

    Yields ``send(name, args, priority=None)``, :func:`send` on this connection. The messages
    not yet written are written on leaving the block; an exception inside it drops them.

    Parameters
    ----------
    url : str, optional
        The broker's Redis URL, as for :func:`send`.

    Raises
    ------
    redis.ConnectionError
        If the broker cannot be reached, or a pipeline of messages could not be written (some
        of its messages may have been delivered all the same).
    """
    sender = app if url is None else use_redis(url)
    try:
        with sender.producer_or_acquire() as producer, producer.batch(max_size=SEND_BATCH):
            yield functools.partial(send, url=url, producer=producer)
    except KombuError as exc:
        raise redis.ConnectionError(f"cannot send to the broker: {exc}") from exc


def queue_lists() -> list[str]:
    """Names of the Redis lists that hold the project queue's messages: kombu's Redis transport
    keeps one list per priority step (``knights_tour``, ``knights_tour\x06\x163``, ...)."""
    return [keys.QUEUE] + [f"{keys.QUEUE}{Channel.sep}{p}" for p in PRIORITY_STEPS if p]


# -- recovery timer: every worker's main process re-sends work lost with other workers -------

_RECOVERY_TICKS: list[Callable[[], object]] = []

Tick = TypeVar("Tick", bound=Callable[[], object])


def on_recovery_tick(fn: Tick) -> Tick:
    """Register ``fn`` to run in the worker main process every ``KT_LEASE_S / 2`` seconds
    (:class:`RecoveryTimer`); :mod:`knights_tour.tasks` registers the recovery sweep. Returns
    ``fn`` (usable as a decorator)."""
    _RECOVERY_TICKS.append(fn)
    return fn


class RecoveryTimer(bootsteps.StartStopStep):
    """Worker bootstep: a daemon thread of the worker main process that runs the functions
    given to :func:`on_recovery_tick` every half lease (``LeaseTiming.recovery_tick_s``), so
    jobs lost with another worker are re-sent within about two leases, client or not.
    Errors (Redis away) are logged and retried on the next tick."""

    label = "kt-recovery"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        interval = get_settings().lease_timing.recovery_tick_s
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(interval,), name="kt-recovery-timer", daemon=True
        )
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            for fn in list(_RECOVERY_TICKS):
                try:
                    fn()
                except Exception as exc:  # noqa: BLE001 - the next tick tries again
                    log.warning("recovery tick failed: %s: %s", type(exc).__name__, exc)

    def stop(self, parent: Any) -> None:
        self._stop.set()


app.steps["worker"].add(RecoveryTimer)


# -- network faults: reconnect quickly, refuse an unusable Redis, keep the log readable -------


class ReconnectingConsumer(Consumer):
    """Celery's consumer, reconnecting to the broker with pauses of 0, 1, 2, ... seconds up to
    ``KT_REDIS_RECONNECT_MAX_S`` instead of kombu's 2, 4, 6, ... up to 30 s: after a long
    outage the fixed schedule leaves a healed worker idle for up to 30 s (plus one attempt's
    time-out) before its next try. Attempts never stop (``broker_connection_max_retries``
    is None). Every task message is checked before Celery takes it, and a malformed one set
    aside instead of stopping the worker (:func:`knights_tour.worker.transport.guarded`)."""

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Callable[[Any], None]:
        return broker_transport.guarded(super().create_task_handler(*args, **kwargs))

    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(
            type(conn).ensure_connection,
            conn,
            interval_start=0,
            interval_step=1,
            interval_max=get_settings().redis_reconnect_max_s,
        )
        return super().ensure_connected(conn)


EX_CONFIG = 78
"""Exit status of a worker that refuses its Redis (sysexits.h ``EX_CONFIG``)."""


class RedisPreflight(bootsteps.Step):
    """Worker bootstep: connect to ``KT_REDIS_URL`` as the store does
    (:func:`knights_tour.store.connection.connect`) when Celery builds the worker's steps, before
    it includes any (the Pool step forks when included: no pool process outlives a refusal). A
    wrong password or an evicting policy is one line and exit :data:`EX_CONFIG`."""

    label = "kt-redis-preflight"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        url = get_settings().redis_url or DEFAULT_REDIS_URL
        try:
            connect(url).close()
        except RedisRefusedError as exc:
            log.critical("worker not started: %s", exc)
            raise SystemExit(EX_CONFIG) from None
        except BackendUnavailableError as exc:
            log.warning("%s; the worker keeps trying to connect", exc)


app.steps["worker"].add(RedisPreflight)

_NETWORK_LOG_FILTER = worker_logs.install()
"""Keeps the worker's log readable through network faults (:mod:`knights_tour.worker.logs`)."""


def warm_up_engine_in_this_process() -> None:
    """Load every solver backend (``KT_EXTRA_BACKENDS`` included) and compile the engine's
    numba kernels in this process, once (a worker main process calls it before its pool
    forks; pool processes then start warm). A failure is logged, not raised: a missing engine
    must not keep the worker from serving other solvers."""
    global _engine_warm
    if _engine_warm:
        return
    try:
        solvers.warm_up_backends()
        _engine_warm = True
    except Exception as exc:  # noqa: BLE001 - a missing engine must not kill the pool
        log.warning("engine warm-up failed at worker start: %s", exc)


_engine_warm = False
_warm_up_in_pool = True


def leave_warm_up_to_jobs() -> None:
    """Pool processes forked after this (by a worker started in this process, or forked from
    it) do not load the engine's kernels when they start: a fresh worker's first small jobs run
    them as plain Python (:func:`knights_tour.solvers.warnsdorff_attempts.plain_search`), and
    the first job that needs them loads them. For a worker whose first job must not wait for a
    whole warm-up (the first local worker of ``ktour run``)."""
    global _warm_up_in_pool
    _warm_up_in_pool = False


@worker_process_init.connect
def _warm_up_engine(**_: object) -> None:
    """Load/compile the engine's numba kernels once per pool process (nothing to do if its
    parent warmed them before the fork, or left them to the jobs)."""
    if _warm_up_in_pool:
        warm_up_engine_in_this_process()


@worker_process_shutdown.connect
def _exit_pool_process_now(exitcode: int | None = None, **_: object) -> None:
    """End a pool process as soon as its work loop has ended. Otherwise billiard's pool
    process posts its exit to the main process and sleeps a fixed second before exiting, which
    the main process waits for at every shutdown; the main process notices the exit anyway
    (it joins its pool processes), as it does for a pool process that was killed."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exitcode or 0)


# -- per-node counts (``ktour workers``): jobs recorded and failed since the worker started ----


@functools.cache
def _counts_client(url: str) -> redis.Redis:
    """This process's client for the node counts (kept: connections are pooled)."""
    return connect(url, check_policy=False)


def _counts_url() -> str:
    return get_settings().redis_url or DEFAULT_REDIS_URL


@worker_ready.connect
def _reset_node_counts(sender: Any = None, **_: object) -> None:
    """A worker starting counts its jobs from zero (best effort: Redis may be away)."""
    node = getattr(sender, "hostname", None)
    if not node:
        return
    try:
        nodes.reset_counts(_counts_client(_counts_url()), node)
    except (redis.RedisError, BackendUnavailableError) as exc:
        log.info("node counts of %s not reset: %s", node, exc)


_STATUSES = frozenset(s.value for s in Status)


@task_success.connect
def _count_recorded_jobs(sender: Any = None, result: Any = None, **_: object) -> None:
    """Add a finished chunk's records (its summary's ``counts``) to its node's counts: jobs
    recorded and jobs recorded as ``error`` (best effort: Redis may be away)."""
    if getattr(sender, "name", None) != TASK_RUN_JOBS or not isinstance(result, dict):
        return
    counts, node = result.get("counts"), getattr(sender.request, "hostname", None)
    if not node or not isinstance(counts, dict):
        return
    processed = sum(int(n) for status, n in counts.items() if status in _STATUSES)
    if processed:
        try:
            nodes.add_counts(
                _counts_client(_counts_url()), node, processed, int(counts.get("error", 0))
            )
        except (redis.RedisError, BackendUnavailableError) as exc:
            log.info("node counts of %s not updated: %s", node, exc)


__all__ = [
    "app",
    "use_redis",
    "celery_config",
    "send",
    "sending",
    "SEND_BATCH",
    "queue_lists",
    "UNACKED_KEY",
    "RecoveryTimer",
    "on_recovery_tick",
    "ReconnectingConsumer",
    "RedisPreflight",
    "EX_CONFIG",
]
