"""Schedules for ``celery beat``: periodic sweeps and periodic collection into reports.

The schedule is read from one place: the TOML file named by ``KT_SCHEDULE_FILE`` (parsed with
the standard library's :mod:`tomllib`). Without a file the schedule is a single collection every
``KT_COLLECT_INTERVAL_S`` seconds. Format (see ``schedule.example.toml``)::

    [collect]                     # optional; default: every KT_COLLECT_INTERVAL_S seconds
    every = "5m"                  # an interval ...
    # cron = "*/5 * * * *"        # ... or a cron expression (exactly one of the two)
    # enabled = false             # no collection entry at all

    [[sweep]]                     # any number of sweeps
    name = "nightly-5-12"         # unique; letters, digits, '-', '_', '.'
    sizes = "5-12"                # boards as for `ktour submit --sizes` ("5-12", "8,10", "6x8")
    solver = "warnsdorff"         # default warnsdorff
    verify = "cpsat"              # "none" (default) or "cpsat"
    cron = "0 2 * * *"            # minute hour day-of-month month day-of-week, UTC
    # every = "6h"                # or an interval instead of cron
    # closed = false, exhaustive = false, time_limit_s = 60, node_limit = 1000000,
    # chunk_size = 16

Intervals are a number of seconds or a string of ``<number><unit>`` parts with units ``d``,
``h``, ``m``, ``s`` (``"90s"``, ``"1h30m"``). Cron expressions have the five fields of crontab(5)
and become :class:`celery.schedules.crontab` (Celery's semantics: when both day-of-month and
day-of-week are restricted, a day must match both). Times are UTC (the app has
``enable_utc``).

Beat wiring: the Celery app's ``beat_scheduler`` is :class:`ScheduleFileScheduler`, a
:class:`celery.beat.PersistentScheduler` that loads this schedule when beat starts (workers
never read the file, so a broken schedule cannot stop a worker; it stops beat with a clear
error). Each sweep entry sends the task :data:`knights_tour.worker.TASK_SUBMIT_SWEEP` with the
sweep as a JSON dict, which submits it with :func:`run_sweep` (through
:func:`knights_tour.service.batches.submit_batch`, the one submit path); the collect entry
sends :data:`knights_tour.worker.TASK_COLLECT` (see :mod:`knights_tour.service.collector`).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler
from celery.schedules import crontab, schedule

from knights_tour.board import parse_board_list
from knights_tour.core.jobs import Job, JobOptions
from knights_tour.solvers import DEFAULT_SOLVER
from knights_tour.errors import KnightsTourError
from knights_tour.service.batches import DEFAULT_CHUNK_SIZE, make_jobs, submit_batch
from knights_tour.settings import Settings, get_settings
from knights_tour.store import keys
from knights_tour.messages import OPS_PRIORITY, TASK_COLLECT, TASK_SUBMIT_SWEEP

COLLECT_ENTRY = "collect"
"""Name of the collect entry in the beat schedule; sweeps are ``sweep:<name>``."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_SWEEP_KEYS = {
    "name", "sizes", "solver", "verify", "closed", "exhaustive", "time_limit_s", "node_limit",
    "chunk_size", "cron", "every",
}
_COLLECT_KEYS = {"cron", "every", "enabled"}
_TOP_KEYS = {"collect", "sweep"}


class InvalidScheduleError(KnightsTourError):
    """The schedule file (or a schedule value) is malformed; the message names the entry."""


# -- values -----------------------------------------------------------------------------------


def parse_interval(value: object, where: str = "every") -> float:
    """Seconds in an interval: a positive number of seconds or a string like ``"1h30m"``.

    >>> parse_interval("1h30m"), parse_interval(2.5), parse_interval("90s")
    (5400.0, 2.5, 90.0)

    Raises
    ------
    InvalidScheduleError
        For anything else (zero, negative, unknown unit, bool).
    """
    if isinstance(value, bool):
        raise InvalidScheduleError(f"{where}: expected seconds or a duration like '5m', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        parts = re.findall(r"(\d+(?:\.\d+)?)([dhms])", text)
        if not parts or "".join(a + b for a, b in parts) != text:
            raise InvalidScheduleError(
                f"{where}: cannot read duration {value!r} (use e.g. '90s', '5m', '1h30m', '1d')"
            )
        seconds = sum(float(a) * _UNIT_S[b] for a, b in parts)
    else:
        raise InvalidScheduleError(f"{where}: expected seconds or a duration like '5m', got {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidScheduleError(f"{where}: the interval must be positive, got {value!r}")
    return seconds


def parse_cron(expr: object, where: str = "cron", app: Any = None) -> crontab:
    """A :class:`celery.schedules.crontab` from a five-field cron expression.

    Fields: minute, hour, day of month, month, day of week (0 or 7 = Sunday; names such as
    ``mon`` are accepted, as Celery does).

    Raises
    ------
    InvalidScheduleError
        If the expression does not have five fields or Celery rejects a field.
    """
    if not isinstance(expr, str):
        raise InvalidScheduleError(f"{where}: a cron expression must be a string, got {expr!r}")
    fields = expr.split()
    if len(fields) != 5:
        raise InvalidScheduleError(
            f"{where}: cron expression {expr!r} must have 5 fields "
            "(minute hour day-of-month month day-of-week)"
        )
    minute, hour, dom, month, dow = fields
    try:
        return crontab(
            minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow,
            app=app,
        )
    except (ValueError, TypeError) as exc:  # celery's crontab_parser raises ValueError
        raise InvalidScheduleError(f"{where}: bad cron expression {expr!r}: {exc}") from None


# -- entries ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """When an entry runs: exactly one of ``cron`` (expression) or ``every_s`` (seconds)."""

    cron: str | None = None
    every_s: float | None = None

    def celery_schedule(self, app: Any = None) -> crontab | schedule:
        """The Celery schedule object (``crontab`` or ``schedule(timedelta)``)."""
        if self.cron is not None:
            return parse_cron(self.cron, app=app)
        return schedule(timedelta(seconds=float(self.every_s or 0)), app=app)

    def describe(self) -> str:
        """``cron 0 2 * * *`` or ``every 300 s``."""
        if self.cron is not None:
            return f"cron {self.cron}"
        return f"every {self.every_s:g} s"


def _timing(table: Mapping[str, Any], where: str) -> Timing:
    has_cron, has_every = "cron" in table, "every" in table
    if has_cron == has_every:
        raise InvalidScheduleError(f"{where}: give exactly one of 'cron' or 'every'")
    if has_cron:
        parse_cron(table["cron"], f"{where}.cron")  # validate now, not when beat ticks
        return Timing(cron=" ".join(str(table["cron"]).split()))
    return Timing(every_s=parse_interval(table["every"], f"{where}.every"))


def _sweep_name(data: object, where: str) -> str:
    """The name of a sweep table, after checking it is a table with only known keys."""
    if not isinstance(data, Mapping):
        raise InvalidScheduleError(f"{where}: a sweep must be a table, got {data!r}")
    unknown = sorted(set(data) - _SWEEP_KEYS)
    if unknown:
        raise InvalidScheduleError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_SWEEP_KEYS))}"
        )
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidScheduleError(
            f"{where}: 'name' must be 1-64 letters, digits, '-', '_' or '.', got {name!r}"
        )
    return name


def _sweep_sizes(sizes: object, where: str) -> str:
    """A sweep's ``sizes`` as one board-list string (a TOML list or a number is accepted)."""
    if isinstance(sizes, (list, tuple)):
        sizes = ",".join(str(s) for s in sizes)
    elif isinstance(sizes, int) and not isinstance(sizes, bool):
        sizes = str(sizes)
    if not isinstance(sizes, str) or not sizes.strip():
        raise InvalidScheduleError(f"{where}: 'sizes' is required, e.g. \"5-12\" or \"8,6x8\"")
    return sizes


@dataclass(frozen=True)
class Sweep:
    """A scheduled sweep: one batch with a job per start square of every board in ``sizes``.

    ``sizes`` is a board list as :func:`knights_tour.board.parse_board_list` reads it; the
    other fields are those of :class:`knights_tour.core.jobs.Job` (``time_limit_s`` in seconds) plus
    ``chunk_size`` (jobs per Celery task).
    """

    name: str
    sizes: str
    timing: Timing
    options: JobOptions = JobOptions()
    chunk_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The sweep as the JSON argument of the ``submit_sweep`` task (no timing)."""
        return {"name": self.name, "sizes": self.sizes, **self.options.to_dict(),
                "chunk_size": self.chunk_size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "sweep") -> Sweep:
        """Validate a sweep table (from TOML, or the task's JSON argument) and build it.

        Every board is checked against the solver (and CP-SAT, if ``verify``) size limits by
        building one :class:`knights_tour.core.jobs.Job` per board.

        Raises
        ------
        InvalidScheduleError
            Naming the sweep and the bad field.
        """
        name = _sweep_name(data, where)
        where = f"sweep {name!r}"
        sizes = _sweep_sizes(data.get("sizes"), where)
        verify = data.get("verify")
        if verify in (None, "none"):
            verify = None
        if "cron" in data or "every" in data:
            timing = _timing(data, where)
        else:
            timing = Timing()  # task argument: timing not carried
        chunk = data.get("chunk_size")
        if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1):
            raise InvalidScheduleError(f"{where}: 'chunk_size' must be a positive integer")
        tl = data.get("time_limit_s")
        if isinstance(tl, int) and not isinstance(tl, bool):
            tl = float(tl)
        options = JobOptions(
            solver=data.get("solver", DEFAULT_SOLVER), closed=data.get("closed", False),
            verify=verify, time_limit_s=tl, exhaustive=data.get("exhaustive", False),
            node_limit=data.get("node_limit"),
        )
        try:
            boards = parse_board_list(sizes)
            for board in boards:  # validates solver, verify, limits, flags and board size
                Job.of(board, (0, 0), options)
        except KnightsTourError as exc:
            raise InvalidScheduleError(f"{where}: {exc}") from None
        return cls(name=name, sizes=",".join(b.label for b in boards), timing=timing,
                   options=options, chunk_size=chunk)


@dataclass(frozen=True)
class ScheduleConfig:
    """A whole schedule: the sweeps and the collection timing (None: no collect entry)."""

    sweeps: tuple[Sweep, ...] = ()
    collect: Timing | None = None
    source: str = "defaults"

    def entries(self) -> list[tuple[str, str, Timing]]:
        """``(entry name, task name, timing)`` for every beat entry, collect first."""
        out: list[tuple[str, str, Timing]] = []
        if self.collect is not None:
            out.append((COLLECT_ENTRY, TASK_COLLECT, self.collect))
        out += [(f"sweep:{s.name}", TASK_SUBMIT_SWEEP, s.timing) for s in self.sweeps]
        return out


def parse_schedule(
    data: Mapping[str, Any], source: str = "<schedule>", default_collect_s: float = 60.0
) -> ScheduleConfig:
    """Validate a parsed TOML schedule (see the module docstring) and build it.

    Parameters
    ----------
    data : mapping
        The TOML document as :func:`tomllib.loads` returns it.
    source : str
        Where it came from, for messages.
    default_collect_s : float
        Collection interval in seconds when there is no ``[collect]`` table.

    Raises
    ------
    InvalidScheduleError
        For unknown keys, a bad timing, a bad sweep, or duplicate sweep names.
    """
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise InvalidScheduleError(
            f"{source}: unknown key(s) {', '.join(unknown)}; a schedule has [collect] and [[sweep]]"
        )
    collect_table = data.get("collect", {})
    if not isinstance(collect_table, Mapping):
        raise InvalidScheduleError(f"{source}: 'collect' must be a table ([collect])")
    unknown = sorted(set(collect_table) - _COLLECT_KEYS)
    if unknown:
        raise InvalidScheduleError(f"{source}: [collect] has unknown key(s) {', '.join(unknown)}")
    enabled = collect_table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidScheduleError(f"{source}: [collect] enabled must be true or false")
    collect: Timing | None = None
    if enabled:
        if "cron" in collect_table or "every" in collect_table:
            collect = _timing(collect_table, f"{source}: [collect]")
        else:
            collect = Timing(every_s=parse_interval(default_collect_s, "KT_COLLECT_INTERVAL_S"))
    sweeps_raw = data.get("sweep", [])
    if not isinstance(sweeps_raw, list):
        raise InvalidScheduleError(f"{source}: sweeps are an array of tables ([[sweep]])")
    sweeps: list[Sweep] = []
    for i, raw in enumerate(sweeps_raw, 1):
        sweep = Sweep.from_dict(raw, where=f"{source}: sweep #{i}")
        if sweep.timing.cron is None and sweep.timing.every_s is None:
            raise InvalidScheduleError(f"{source}: sweep {sweep.name!r}: give 'cron' or 'every'")
        if any(s.name == sweep.name for s in sweeps):
            raise InvalidScheduleError(f"{source}: two sweeps are named {sweep.name!r}")
        sweeps.append(sweep)
    return ScheduleConfig(sweeps=tuple(sweeps), collect=collect, source=source)


def load_schedule(path: str | Path, default_collect_s: float = 60.0) -> ScheduleConfig:
    """Read and validate a TOML schedule file.

    Raises
    ------
    InvalidScheduleError
        If the file cannot be read, is not TOML, or is not a valid schedule.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidScheduleError(f"cannot read schedule file {p}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidScheduleError(f"{p}: not valid TOML: {exc}") from None
    return parse_schedule(data, source=str(p), default_collect_s=default_collect_s)


def schedule_from_settings(settings: Settings | None = None) -> ScheduleConfig:
    """The active schedule: ``KT_SCHEDULE_FILE`` if set, else collection every
    ``KT_COLLECT_INTERVAL_S`` seconds and no sweeps.

    Raises
    ------
    InvalidScheduleError
        If the file named by ``KT_SCHEDULE_FILE`` is unreadable or invalid.
    """
    if settings is None:
        settings = get_settings()
    if settings.schedule_file is not None:
        return load_schedule(settings.schedule_file, default_collect_s=settings.collect_interval_s)
    return ScheduleConfig(
        collect=Timing(every_s=float(settings.collect_interval_s)),
        source="KT_COLLECT_INTERVAL_S (no KT_SCHEDULE_FILE)",
    )


# -- Celery beat ------------------------------------------------------------------------------


def beat_schedule(config: ScheduleConfig, app: Any = None) -> dict[str, dict[str, Any]]:
    """The ``beat_schedule`` dict for ``config``: entry name -> task, schedule, args, options.

    Task messages go to the project queue (:data:`knights_tour.store.keys.QUEUE`), JSON only.
    """
    out: dict[str, dict[str, Any]] = {}
    if config.collect is not None:
        options: dict[str, Any] = {"queue": keys.QUEUE, "priority": OPS_PRIORITY}
        if config.collect.every_s is not None:
            # collections share the job queue; one that waited a whole interval behind long
            # jobs is dropped (the next one does the same work) instead of piling up
            options["expires"] = float(config.collect.every_s)
        out[COLLECT_ENTRY] = {
            "task": TASK_COLLECT,
            "schedule": config.collect.celery_schedule(app),
            "args": (),
            "options": options,
        }
    for sweep in config.sweeps:
        out[f"sweep:{sweep.name}"] = {
            "task": TASK_SUBMIT_SWEEP,
            "schedule": sweep.timing.celery_schedule(app),
            "args": (sweep.to_dict(),),
            "options": {"queue": keys.QUEUE, "priority": OPS_PRIORITY},
        }
    return out


def run_sweep(redis_url: str, sweep: Mapping[str, Any], batch_id: str | None = None) -> str:
    """Submit one batch for ``sweep`` (what the ``submit_sweep`` task does); returns its id.

    Parameters
    ----------
    redis_url : str
        Broker/store the workers listen on.
    sweep : mapping
        :meth:`Sweep.to_dict` (validated again: a task argument is untrusted input).
    batch_id : str, optional
        Use this id (the task passes one derived from its task id, so a re-delivered task
        re-sends only the jobs that still have no record instead of starting a second batch).

    Raises
    ------
    InvalidScheduleError
        If the sweep is invalid.
    BackendUnavailableError
        If Redis cannot be reached.
    """
    sw = Sweep.from_dict(sweep)
    _boards, jobs, params = make_jobs([sw.sizes], sw.options)
    params["schedule"] = sw.name
    return submit_batch(
        redis_url, jobs, params=params, chunk_size=sw.chunk_size or DEFAULT_CHUNK_SIZE,
        batch_id=batch_id, only_missing=batch_id is not None,
    )


class ScheduleFileScheduler(PersistentScheduler):
    """Celery beat scheduler that loads :func:`schedule_from_settings` when beat starts.

    Configured as the app's ``beat_scheduler``; entries from the schedule replace any earlier
    ones with the same name, and entries no longer in the file are dropped (Celery's
    ``merge_inplace``). The local state file (``--schedule``) keeps last-run times.
    """

    def setup_schedule(self) -> None:
        config = schedule_from_settings()
        self.app.conf.beat_schedule = beat_schedule(config, app=self.app)
        super().setup_schedule()


def next_run_times(
    timing: Timing, now: datetime | None = None, count: int = 3, app: Any = None
) -> list[datetime]:
    """The next ``count`` run times (UTC) of ``timing`` after ``now``.

    For a cron entry these are exact (Celery's own ``crontab.remaining_estimate``). For an
    interval beat counts from its last run (kept in its state file) or, on a fresh start, from
    its start; here ``now`` stands for that start.
    """
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    if timing.cron is None:
        step = timedelta(seconds=float(timing.every_s or 0))
        return [now + step * (i + 1) for i in range(count)]
    cron = parse_cron(timing.cron, app=app)
    cron.nowfun = lambda: now
    out: list[datetime] = []
    last = now
    for _ in range(count):
        # remaining_estimate(last) = (next occurrence after `last`) - now
        nxt = now + cron.remaining_estimate(last)
        out.append(nxt.astimezone(timezone.utc))
        last = nxt
    return out


__all__ = [
    "InvalidScheduleError", "Timing", "Sweep", "ScheduleConfig", "parse_interval", "parse_cron",
    "parse_schedule", "load_schedule", "schedule_from_settings", "beat_schedule",
    "ScheduleFileScheduler", "next_run_times", "run_sweep", "COLLECT_ENTRY",
]
