"""The project's small error hierarchy.

Every error a user can cause derives from :class:`KnightsTourError`, so the CLI can turn any of
them into one clear line on stderr and exit code 2 without catching unrelated bugs.
"""

from __future__ import annotations

from typing import Any


class KnightsTourError(Exception):
    """Base class of every error this package raises on bad input or an unusable environment."""


class InvalidBoardError(KnightsTourError, ValueError):
    """A board size that is malformed or out of range (e.g. ``"0"``, ``"8x"``, ``-3``)."""


class InvalidSquareError(KnightsTourError, ValueError):
    """A square that is malformed or off the board (e.g. ``"z9"`` on 8×8, ``(8, 0)``)."""


class UnknownSolverError(KnightsTourError, ValueError):
    """A solver backend name that is not registered; the message lists the valid names."""


class InvalidJobError(KnightsTourError, ValueError):
    """A job (from the CLI, the API or a broker message) with a missing or malformed field."""


class TourFormatError(KnightsTourError, ValueError):
    """A tour file (step-number matrix or JSON record) that cannot be parsed."""


class StepNumbersError(TourFormatError):
    """A well-formed step-number matrix whose numbers are not a permutation of the steps
    (a number used twice, out of range, or not starting at 0 or 1): the file was read, but it
    does not describe a tour. ``reason`` holds the problem without the file name."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class NoTourError(TourFormatError):
    """A well-formed JSON record without a tour (``no_tour``, ``unknown`` or ``error``): nothing
    to verify, but its board and start square can still be drawn. ``record`` is the record."""

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record


class BackendUnavailableError(KnightsTourError, RuntimeError):
    """A service the command needs (e.g. the Redis server at a given URL) cannot be reached."""


class RedisRefusedError(BackendUnavailableError):
    """A Redis server that answers but must not be used as it is: a wrong password or user,
    a user without the permissions the project needs, or a ``maxmemory-policy`` that may evict
    keys. Unlike an unreachable server, waiting does not help; the message names the fix."""


class InvalidRedisUrlError(BackendUnavailableError, ValueError):
    """A Redis URL that is malformed: unknown scheme, no host, a port that is not a number in
    1..65535, or a database that is not a non-negative integer."""


class OutputPathError(KnightsTourError, OSError):
    """An output file that cannot be written: its path is a directory, its directory is missing
    or read-only, or the disk is full. The message names the path the user gave; the errno of
    the underlying ``OSError`` is kept in ``errno``."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno

    def __str__(self) -> str:
        return str(self.args[0])


class StorageFullError(KnightsTourError, RuntimeError):
    """Redis refuses writes: it cannot persist them (``MISCONF``: e.g. no space left on the
    device holding its data), it is at ``maxmemory`` with ``noeviction`` (``OOM``), or it is a
    read-only replica (``READONLY``). Waiting helps only once its operator acts. ``reason`` is
    the server's reply, its code first (``"OOM command not allowed ..."``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Redis refuses writes: {reason}")
        self.reason = reason

    @property
    def code(self) -> str:
        """The reply's code: ``MISCONF``, ``OOM`` or ``READONLY``."""
        return self.reason.split(" ", 1)[0]


class CorruptKeyError(KnightsTourError, ValueError):
    """A value stored in Redis that cannot be read as what the project wrote there: a batch's
    meta that is not JSON, a total or tally that is not a number, a record that does not
    decode, a key holding another type (``WRONGTYPE``). ``key`` is the Redis key, ``field``
    the hash field (or None); the message names both, says what is wrong and, where there is
    one, how to repair it (e.g. ``ktour resume BATCH`` runs a job whose record is unreadable
    again)."""

    def __init__(self, key: str, problem: str, field: str | None = None, hint: str = "") -> None:
        where = f"Redis key {key}" + (f" field {field!r}" if field is not None else "")
        super().__init__(f"{where} is unreadable: {problem}" + (f"; {hint}" if hint else ""))
        self.key = key
        self.field = field
