"""The schedule of ``celery beat``, as written: its TOML file, validated into sweeps and a
collection timing (:class:`ScheduleConfig`).

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

How beat runs it is :mod:`knights_tour.batches.schedule`. Cron expressions are checked with
Celery's own parser when the file is read, so a bad one stops ``ktour schedule`` and beat
before the first tick rather than at it.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery.schedules import crontab

from knights_tour.batches.jobs import Job, JobOptions
from knights_tour.board import parse_board_list
from knights_tour.errors import KnightsTourError
from knights_tour.settings import Settings, get_settings
from knights_tour.solvers import DEFAULT_SOLVER
from knights_tour.worker.messages import TASK_COLLECT, TASK_SUBMIT_SWEEP

COLLECT_ENTRY = "collect"
"""Name of the collect entry in the beat schedule; sweeps are ``sweep:<name>``."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_SWEEP_KEYS = {
    "name",
    "sizes",
    "solver",
    "verify",
    "closed",
    "exhaustive",
    "time_limit_s",
    "node_limit",
    "chunk_size",
    "cron",
    "every",
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
        raise InvalidScheduleError(
            f"{where}: expected seconds or a duration like '5m', got {value!r}"
        )
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
        raise InvalidScheduleError(
            f"{where}: expected seconds or a duration like '5m', got {value!r}"
        )
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
            minute=minute,
            hour=hour,
            day_of_month=dom,
            month_of_year=month,
            day_of_week=dow,
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
        raise InvalidScheduleError(f'{where}: \'sizes\' is required, e.g. "5-12" or "8,6x8"')
    return sizes


@dataclass(frozen=True)
class Sweep:
    """A scheduled sweep: one batch with a job per start square of every board in ``sizes``.

    ``sizes`` is a board list as :func:`knights_tour.board.parse_board_list` reads it; the
    other fields are those of :class:`knights_tour.batches.jobs.Job` (``time_limit_s`` in seconds)
    plus ``chunk_size`` (jobs per Celery task).
    """

    name: str
    sizes: str
    timing: Timing
    options: JobOptions = JobOptions()
    chunk_size: int | None = None

    def to_dict(self) -> dict[str, object]:
        """The sweep as the JSON argument of the ``submit_sweep`` task (no timing)."""
        return {
            "name": self.name,
            "sizes": self.sizes,
            **self.options.to_dict(),
            "chunk_size": self.chunk_size,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "sweep") -> Sweep:
        """Validate a sweep table (from TOML, or the task's JSON argument) and build it.

        Every board is checked against the solver (and CP-SAT, if ``verify``) size limits by
        building one :class:`knights_tour.batches.jobs.Job` per board.

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
        if chunk is not None and (
            not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1
        ):
            raise InvalidScheduleError(f"{where}: 'chunk_size' must be a positive integer")
        tl = data.get("time_limit_s")
        if isinstance(tl, int) and not isinstance(tl, bool):
            tl = float(tl)
        options = JobOptions(
            solver=data.get("solver", DEFAULT_SOLVER),
            closed=data.get("closed", False),
            verify=verify,
            time_limit_s=tl,
            exhaustive=data.get("exhaustive", False),
            node_limit=data.get("node_limit"),
        )
        try:
            boards = parse_board_list(sizes)
            for board in boards:  # validates solver, verify, limits, flags and board size
                Job.of(board, (0, 0), options)
        except KnightsTourError as exc:
            raise InvalidScheduleError(f"{where}: {exc}") from None
        return cls(
            name=name,
            sizes=",".join(b.label for b in boards),
            timing=timing,
            options=options,
            chunk_size=chunk,
        )


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
        raise InvalidScheduleError(
            f"cannot read schedule file {p}: {exc.strerror or exc}"
        ) from None
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


__all__ = [
    "InvalidScheduleError",
    "Timing",
    "Sweep",
    "ScheduleConfig",
    "parse_interval",
    "parse_cron",
    "parse_schedule",
    "load_schedule",
    "schedule_from_settings",
    "COLLECT_ENTRY",
]
