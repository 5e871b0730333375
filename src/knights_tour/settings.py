"""Configuration: the one module that reads the environment (variables prefixed ``KT_``).

Every setting has a documented default; nothing else in the package reads ``os.environ`` for
``KT_`` variables. Read with :func:`get_settings` (cached; call ``get_settings.cache_clear()``
after changing the environment in tests).

=============================  ========================================================  =========
variable                       meaning                                                   default
=============================  ========================================================  =========
``KT_REDIS_URL``               broker and result store; unset = embedded Redis           unset
``KT_DATA_DIR``                embedded Redis data, reports (platformdirs user data;     per-user
                               created 0700, its files 0600: :func:`private_dir`)
``KT_SOFT_TIME_LIMIT_S``       Celery soft time limit of tasks that are not chunks of    300
                               batch jobs (count sub-jobs, sweeps, collection), seconds
``KT_HARD_TIME_LIMIT_S``       their hard time limit, seconds                            360
``KT_TASK_MARGIN_S``           a chunk task's soft limit beyond the sum of its jobs'     30
                               budgets (the chunk's limits: ``batches/chunking.py``)
``KT_TASK_GRACE_S``            a chunk task's hard limit after its soft one (time to     30
                               store what is done and hand the rest back), seconds
``KT_VISIBILITY_TIMEOUT_S``    Redis visibility timeout, seconds (> hard limit)          420
``KT_DP_TASK_BUDGET_S``        seconds a frontier-DP count task runs layers before it    soft -
                               re-sends itself to go on (unset: the soft limit less      margin
                               ``KT_TASK_MARGIN_S``)
``KT_DP_LAYER_LIMIT_S``        soft time limit of a frontier-DP count task (bounds one   3600
                               layer that outlasts the budget; hard: plus grace)
``KT_JOB_TIME_LIMIT_S``        time budget per job (solver + cross-check), seconds       60
``KT_CPSAT_TIME_LIMIT_S``      CP-SAT limit when no job budget is given, seconds         60
``KT_RESULT_TTL_S``            expire stored records after this many seconds; 0 = never  0
``KT_WORKERS``                 local worker processes for the embedded run               cores
``KT_LOG_LEVEL``               worker log level                                          WARNING
``KT_SCHEDULE_FILE``           TOML schedule for ``celery beat`` (see schedule.py)       unset
``KT_REPORTS_DIR``             collection reports; unset = ``{KT_DATA_DIR}/reports``     unset
``KT_COLLECT_INTERVAL_S``      collect every S seconds when the schedule file says not   60
``KT_COLLECT_LOCK_TIMEOUT_S``  lifetime of the collection lock, seconds                  300
``KT_LEASE_S``                 job lease: a job whose worker is silent this long is      10
                               re-sent by recovery (every period derived from it:
                               :class:`LeaseTiming`)
``KT_MAX_ATTEMPTS``            worker deaths on one job before it gets an error record   3
``KT_SAVE_RETRY_S``            how long a task keeps trying to store its records while   30
                               Redis is unreachable or refuses writes, seconds
``KT_CONFIRM_JOBS``            ask (or ``--yes``) before submitting more jobs than this  50000
``KT_CONFIRM_OUTPUT_MB``       ask before a batch whose records would exceed this, MB    200
``KT_CONFIRM_HOURS``           ask before a batch or count estimated to take longer on   1
                               this machine's workers (``KT_WORKERS``), hours
``KT_PROGRESS_S``              seconds between progress lines when stderr is not a       10
                               terminal (a live bar when it is)
``KT_LOG_KEEP``                worker log files kept in ``{KT_DATA_DIR}/logs`` (the      40
                               oldest are deleted when local workers start)
``KT_LOG_MAX_MB``              and at most this many MB of them                          50
``KT_EXTRA_BACKENDS``          solver backends beyond the built-in ones: their           unset
                               descriptors as ``module:attribute``, comma-separated
                               (:func:`extra_backends`)
=============================  ========================================================  =========

Redis connections (every one the project opens: the broker's, the store's, the client's; why
each default is what it is: ``docs/deploy.md``, Network settings):

==============================  ======================================================  =======
variable                        meaning                                                 default
==============================  ======================================================  =======
``KT_REDIS_SOCKET_TIMEOUT_S``   longest wait for one reply; then the connection is      10
                                dropped and the command retried
``KT_REDIS_CONNECT_TIMEOUT_S``  longest wait to open a connection, seconds              5
``KT_REDIS_KEEPALIVE_S``        TCP keepalive: first probe after this many idle         10
                                seconds, then every third of it; 3 unanswered = dead
``KT_REDIS_HEALTH_CHECK_S``     PING a connection idle this long before using it; also  5
                                kombu's check of its BRPOP and pub/sub connections
``KT_REDIS_RECONNECT_MAX_S``    longest pause between a worker's reconnect attempts     2
``KT_ALLOW_EVICTING_REDIS``     accept a Redis whose ``maxmemory-policy`` may evict     false
                                keys (records and queued jobs can then vanish)
==============================  ======================================================  =======
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated

import msgspec
import platformdirs
from msgspec import Meta

from knights_tour.errors import KnightsTourError


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("knights-tour", appauthor=False))


class Settings(msgspec.Struct, kw_only=True):
    """All ``KT_`` settings; see the module docstring for the table. Built by
    :func:`get_settings` from the environment, or directly (in tests) from keyword arguments.
    """

    redis_url: str | None = None
    data_dir: Path = msgspec.field(default_factory=_default_data_dir)
    soft_time_limit_s: Annotated[float, Meta(gt=0)] = 300.0
    hard_time_limit_s: Annotated[float, Meta(gt=0)] = 360.0
    task_margin_s: Annotated[float, Meta(ge=0)] = 30.0
    task_grace_s: Annotated[float, Meta(gt=0)] = 30.0
    visibility_timeout_s: Annotated[float, Meta(gt=0)] = 420.0
    dp_task_budget_s: Annotated[float, Meta(gt=0)] | None = None
    dp_layer_limit_s: Annotated[float, Meta(gt=0)] = 3600.0
    job_time_limit_s: Annotated[float, Meta(gt=0)] = 60.0
    cpsat_time_limit_s: Annotated[float, Meta(gt=0)] = 60.0
    result_ttl_s: Annotated[int, Meta(ge=0)] = 0
    workers: Annotated[int, Meta(ge=1)] = msgspec.field(
        default_factory=lambda: max(1, os.cpu_count() or 1)
    )
    log_level: str = "WARNING"
    schedule_file: Path | None = None
    reports_dir: Path | None = None
    collect_interval_s: Annotated[float, Meta(gt=0)] = 60.0
    collect_lock_timeout_s: Annotated[float, Meta(gt=0)] = 300.0
    lease_s: Annotated[float, Meta(ge=1.0)] = 10.0
    max_attempts: Annotated[int, Meta(ge=1)] = 3
    save_retry_s: Annotated[float, Meta(gt=0)] = 30.0
    confirm_jobs: Annotated[int, Meta(ge=1)] = 50_000
    confirm_output_mb: Annotated[float, Meta(gt=0)] = 200.0
    confirm_hours: Annotated[float, Meta(gt=0)] = 1.0
    progress_s: Annotated[float, Meta(gt=0)] = 10.0
    log_keep: Annotated[int, Meta(ge=1)] = 40
    log_max_mb: Annotated[float, Meta(gt=0)] = 50.0
    redis_socket_timeout_s: Annotated[float, Meta(gt=0)] = 10.0
    redis_connect_timeout_s: Annotated[float, Meta(gt=0)] = 5.0
    redis_keepalive_s: Annotated[int, Meta(ge=1)] = 10
    redis_health_check_s: Annotated[int, Meta(ge=1)] = 5
    redis_reconnect_max_s: Annotated[float, Meta(gt=0)] = 2.0
    allow_evicting_redis: bool = False

    @property
    def reports_path(self) -> Path:
        """``KT_REPORTS_DIR`` if set, else ``{KT_DATA_DIR}/reports``."""
        return self.reports_dir if self.reports_dir is not None else self.data_dir / "reports"

    @property
    def frontier_path(self) -> Path:
        """``{KT_DATA_DIR}/frontier``: where the frontier DP checkpoints its layers (shared by
        the local workers; on a cluster, a shared filesystem lets a class start from its
        trunk's layer)."""
        return self.data_dir / "frontier"

    @property
    def lease_timing(self) -> LeaseTiming:
        """The periods of job leases, all derived from ``KT_LEASE_S`` (:class:`LeaseTiming`)."""
        return LeaseTiming(self.lease_s)

    def __post_init__(self) -> None:
        """The time limits must nest: soft < hard < the visibility timeout.

        Raises
        ------
        ValueError
            If they do not.
        """
        if self.hard_time_limit_s <= self.soft_time_limit_s:
            raise ValueError("KT_HARD_TIME_LIMIT_S must be greater than KT_SOFT_TIME_LIMIT_S")
        if self.visibility_timeout_s <= self.hard_time_limit_s:
            raise ValueError("KT_VISIBILITY_TIMEOUT_S must be greater than KT_HARD_TIME_LIMIT_S")


@dataclass(frozen=True)
class LeaseTiming:
    """Every period of the job leases, derived from one lease lifetime (``KT_LEASE_S``), each
    fraction named here once: the worker's heartbeat and renewal checks
    (``worker/lease_keeper.py``), recovery (``worker/recovery.py`` and the worker's recovery
    timer), a worker's heartbeat age (``ktour workers``) and a stalled batch (``ktour status``)
    all read this object. :func:`get_settings` gives it as ``get_settings().lease_timing``.

    A worker process holds one lease in Redis that lapses ``lease_s`` after its last renewal;
    an item claimed under a lapsed lease is re-sent by recovery.

    Parameters
    ----------
    lease_s : float
        The lease lifetime, seconds (> 0).

    Raises
    ------
    ValueError
        If ``lease_s`` is not positive.
    """

    lease_s: float

    def __post_init__(self) -> None:
        if not self.lease_s > 0:
            raise ValueError(f"a lease lasts a positive number of seconds, not {self.lease_s!r}")

    @property
    def lease_ms(self) -> int:
        """The lease lifetime in milliseconds (Redis's ``PEXPIRE``)."""
        return int(self.lease_s * 1000)

    @property
    def heartbeat_s(self) -> float:
        """Seconds between a worker process's lease renewals: a third of the lease, so that one
        renewal lost or late (a Redis blip, a short stall) still leaves the lease alive until
        the next."""
        return self.lease_s / 3.0

    @property
    def renew_margin_s(self) -> float:
        """How much sooner than ``lease_s`` after its last successful renewal a process stops
        trusting its lease without asking Redis: a quarter of the lease, which covers the time
        between sending a renewal and Redis applying it. Longer than nothing, shorter than the
        gap it leaves over a heartbeat, so a healthy process never asks."""
        return self.lease_s / 4.0

    @property
    def known_alive_s(self) -> float:
        """A lease renewed successfully less than this many seconds ago is certainly alive
        (``lease_s - renew_margin_s``): a process checks it before each job with no Redis
        call."""
        return self.lease_s - self.renew_margin_s

    @property
    def recovery_pass_s(self) -> float:
        """The least time between two recovery passes of one process over the same batch or
        count: a quarter of the lease (a lease cannot lapse faster than that, so a pass sooner
        would find nothing new)."""
        return self.lease_s / 4.0

    @property
    def quiet_s(self) -> float:
        """How long the queue must have been empty, with no item of a batch or count held, before
        recovery re-sends its unclaimed items (their message was taken but never started): one
        lease, the time a message taken by a live worker takes to be claimed or lapse."""
        return self.lease_s

    @property
    def recovery_tick_s(self) -> float:
        """Seconds between the sweeps of a worker's recovery timer: half a lease (at least 0.2 s),
        so that jobs lost with another worker are re-sent within about two leases whether or not
        a client waits."""
        return max(0.2, self.lease_s / 2.0)

    @property
    def stalled_after_s(self) -> float:
        """An unfinished batch is stalled once the server has had no live worker lease for this
        long since the last one ran out or since the batch was submitted, whichever is later:
        1.5 leases. More than one, so that a worker starting or reconnecting is not called gone;
        less than two, so that workers killed at time t make the batch stalled by t + 2.5
        leases."""
        return 1.5 * self.lease_s


def default_of(name: str) -> object:
    """The default of setting ``name`` (a field of :class:`Settings`, e.g. ``"lease_s"``),
    without reading the environment.

    Raises
    ------
    KeyError
        If ``name`` is no setting.
    """
    if name not in Settings.__struct_fields__:
        raise KeyError(name)
    return getattr(Settings(), name)


def extra_backends(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``KT_EXTRA_BACKENDS`` of ``environ`` (default :data:`os.environ`): the
    ``"module:attribute"`` paths of the descriptors of solver backends beyond the built-in ones
    (:class:`knights_tour.solvers.Backend`), comma-separated, blanks ignored; ``()`` when unset.

    Read alone, not as a field of :class:`Settings`: the registry reads it whenever it is
    asked, ``--help`` included, which a bad value of another variable must not stop.
    """
    env = os.environ if environ is None else environ
    raw = env.get("KT_EXTRA_BACKENDS", "")
    return tuple(p for p in (part.strip() for part in raw.split(",")) if p)


class SettingsError(KnightsTourError, ValueError):
    """A ``KT_`` variable that does not parse or is out of range; the message names it."""


_PATHS = ("data_dir", "schedule_file", "reports_dir")
_BOOLS = {
    "yes": "true",
    "on": "true",
    "y": "true",
    "t": "true",
    "no": "false",
    "off": "false",
    "n": "false",
    "f": "false",
}


def _decode(kind: type, value: object) -> object:
    """msgspec's hook for the types it does not know: :class:`~pathlib.Path` from its text."""
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError(kind)


def _from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``KT_`` variables of ``environ`` by field name (case-insensitive, as before), numbers
    and booleans stripped of surrounding blanks, booleans also spelled yes/no/on/off."""
    names = {f"KT_{name}".upper(): name for name in Settings.__struct_fields__}
    found: dict[str, str] = {}
    for key, value in environ.items():
        name = names.get(key.upper())
        if name is None:
            continue
        if name in _PATHS:
            if not value.strip():
                raise SettingsError(
                    f"invalid configuration: KT_{name.upper()}: must be a path, not empty "
                    "(unset it for the default)"
                )
            found[name] = value
        elif name in ("redis_url", "log_level"):
            found[name] = value
        else:
            found[name] = _BOOLS.get(value.strip().lower(), value.strip())
    return found


def settings_from(environ: Mapping[str, str]) -> Settings:
    """The settings that ``environ`` (e.g. :data:`os.environ`) gives.

    Raises
    ------
    SettingsError
        For the first variable that does not parse or is out of range, named with its value:
        ``invalid configuration: KT_WORKERS: Expected `int`, got `str` (got 'many')``.
    """
    values = _from_environment(environ)
    try:
        return msgspec.convert(values, Settings, strict=False, dec_hook=_decode)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = re.search(r" - at `\$\.(\w+)`$", text)
        if where is None:  # the limits' order (__post_init__)
            raise SettingsError(f"invalid configuration: {text}") from None
        name = where.group(1)
        raise SettingsError(
            f"invalid configuration: KT_{name.upper()}: {text[: where.start()]} "
            f"(got {values[name]!r})"
        ) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment (:func:`settings_from`)."""
    return settings_from(os.environ)


PRIVATE_DIR_MODE = 0o700
"""The mode of the data dir (``KT_DATA_DIR``, where ktour creates it) and of its directories
that hold the embedded Redis's data and the workers' logs: its owner alone enters them."""

PRIVATE_FILE_MODE = 0o600
"""The mode of the files ktour keeps in its data dir (the embedded Redis's append-only file,
log and state file, the workers' logs): its owner alone reads them. Output files (``--out``)
follow the umask instead."""

PRIVATE_UMASK = 0o077
"""The umask the embedded ``redis-server`` runs with, so that what it creates is private."""


def private_dir(path: Path) -> Path:
    """``path``, a directory of the data dir, made private (:data:`PRIVATE_DIR_MODE`) whatever
    the umask: it and each missing parent are created with that mode; an existing ``path`` is
    set to it, an existing parent (e.g. a ``KT_DATA_DIR`` the user made) is left as it is.

    Raises
    ------
    OSError
        If a directory cannot be created or its mode set (e.g. a read-only file system).
    """
    missing = []
    at = path
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(directory, PRIVATE_DIR_MODE)
    if path.stat().st_mode & 0o777 != PRIVATE_DIR_MODE:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path
