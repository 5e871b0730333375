"""A Celery worker's log through a network fault: one line per fault, no traceback, and each
condition that repeats while the fault lasts at most once a minute (:class:`NetworkFaultLogFilter`,
attached to :data:`QUIET_LOGGERS` by :mod:`knights_tour.worker.celery`). What the operator sees
during each fault: ``docs/reliability.md``.
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from kombu.exceptions import OperationalError

from knights_tour.errors import StorageFullError

NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    OperationalError,
    ConnectionError,
    TimeoutError,
    StorageFullError,
)
"""Exceptions that mean the network or Redis failed (or Redis refused writes for longer than a
task waits): logged as one line, no traceback."""

REPEATED_CONDITIONS = (
    "consumer: Cannot connect to",
    "consumer: Connection to broker lost",
    "Redis BRPOP got no reply",
    "Redis pub/sub connection missed",
    "lease heartbeat ran",
    "recovery tick failed",
    "cannot reach Redis",
    "recovery: re-sent",
    "Redis refuses writes",
    "Frequent restarts detected",
    "maybe_refresh_binding_expiry",
)
"""Warnings that repeat for as long as a fault lasts: each is shown at most once a minute."""

QUIET_LOGGERS = (
    "celery.worker.consumer.consumer",
    "celery.worker.consumer.connection",
    "celery.app.trace",
    "celery.worker.request",
    "celery.worker.pidbox",
    "kombu.transport.redis",
    "kombu.connection",
    "knights_tour.worker.celery",
    "knights_tour.worker.leases",
    "knights_tour.tasks",
    "knights_tour.batches.execution",
    "knights_tour.counting.execution",
    "knights_tour.worker.claims",
    "knights_tour.worker.transport",
)
"""Loggers :class:`NetworkFaultLogFilter` is attached to."""


class NetworkFaultLogFilter(logging.Filter):
    """Keep a worker's log readable through a network fault: a record caused by one of
    :data:`NETWORK_ERRORS` loses its traceback (its message keeps the error's one line),
    multi-line connection messages become one line, and each of
    :data:`REPEATED_CONDITIONS` is let through at most once per ``every_s`` seconds (the next
    one says how many were held back)."""

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self.every_s = every_s
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def network_cause(exc: BaseException | None) -> BaseException | None:
        """The network error ``exc`` is, wraps (a task's Reject or Retry) or was raised while
        handling; None if there is none."""
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen and len(seen) < 20:
            if isinstance(exc, NETWORK_ERRORS):
                return exc
            seen.add(id(exc))
            inner = getattr(exc, "exc", None) or getattr(exc, "reason", None)
            exc = inner if isinstance(inner, BaseException) else (exc.__cause__ or exc.__context__)
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        exc = self.network_cause(record.exc_info[1] if record.exc_info else None)
        if exc is not None:
            text = record.getMessage()
            cause = f"{type(exc).__name__}: {exc}"
            if str(exc) not in text:
                text = f"{text} ({cause})"
            record.msg, record.args = text, ()
            record.exc_info = record.exc_text = None
        if record.levelno < logging.WARNING:
            return True
        text = record.getMessage()
        if "\n" in text and record.name.startswith(("celery.", "kombu.")):
            text = " ".join(part.strip() for part in text.splitlines() if part.strip())
            record.msg, record.args = text, ()
        cond = next((c for c in REPEATED_CONDITIONS if c in text[:120]), None)
        if cond is None:
            return True
        key = f"{record.name}:{cond}"
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.every_s:
                self._held[key] = self._held.get(key, 0) + 1
                return False
            self._last[key] = now
            held = self._held.pop(key, 0)
        if held:
            record.msg = f"{text} [{held} more like this in the last {self.every_s:g} s]"
            record.args = ()
        return True


def install() -> NetworkFaultLogFilter:
    """Attach one :class:`NetworkFaultLogFilter` to every logger of :data:`QUIET_LOGGERS`;
    returns it."""
    fault_filter = NetworkFaultLogFilter()
    for name in QUIET_LOGGERS:
        logging.getLogger(name).addFilter(fault_filter)
    return fault_filter


__all__ = [
    "NETWORK_ERRORS",
    "REPEATED_CONDITIONS",
    "QUIET_LOGGERS",
    "NetworkFaultLogFilter",
    "install",
]
