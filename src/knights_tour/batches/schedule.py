"""Running the schedule in ``celery beat``: periodic sweeps and periodic collection into
reports.

What the schedule says, and its TOML file (``KT_SCHEDULE_FILE``), is
:mod:`knights_tour.batches.schedule_file`.

Beat wiring: the Celery app's ``beat_scheduler`` is :class:`ScheduleFileScheduler`, a
:class:`celery.beat.PersistentScheduler` that loads the schedule when beat starts (workers
never read the file, so a broken schedule cannot stop a worker; it stops beat with a clear
error). Each sweep entry sends the task :data:`knights_tour.worker.messages.TASK_SUBMIT_SWEEP` with
the sweep as a JSON dict, which submits it with :func:`run_sweep` (through
:func:`knights_tour.batches.client.submit_batch`, the one submit path); the collect entry
sends :data:`knights_tour.worker.messages.TASK_COLLECT` (see :mod:`knights_tour.batches.collector`).
Times are UTC (the app has ``enable_utc``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from celery.beat import PersistentScheduler
from celery.schedules import crontab, schedule

from knights_tour.batches.client import DEFAULT_CHUNK_SIZE, make_jobs, submit_batch
from knights_tour.batches.schedule_file import (
    COLLECT_ENTRY,
    ScheduleConfig,
    Sweep,
    Timing,
    parse_cron,
    schedule_from_settings,
)
from knights_tour.store import keys
from knights_tour.worker.messages import OPS_PRIORITY, TASK_COLLECT, TASK_SUBMIT_SWEEP


def celery_schedule(timing: Timing, app: Any = None) -> crontab | schedule:
    """The Celery schedule object of ``timing``: a ``crontab``, or ``schedule(timedelta)`` of
    its interval in seconds; ``app`` is the Celery app it belongs to (None: the current one)."""
    if timing.cron is not None:
        return parse_cron(timing.cron, app=app)
    return schedule(timedelta(seconds=float(timing.every_s or 0)), app=app)


class BeatEntry(TypedDict):
    """One entry of Celery beat's ``beat_schedule``: the task, when (a Celery schedule), its
    arguments and the message's options (queue, priority, expiry)."""

    task: str
    schedule: object
    args: tuple[object, ...]
    options: dict[str, object]


def beat_schedule(config: ScheduleConfig, app: Any = None) -> dict[str, BeatEntry]:
    """The ``beat_schedule`` dict for ``config``: entry name -> task, schedule, args, options.

    Task messages go to the project queue (:data:`knights_tour.store.keys.QUEUE`), JSON only.
    """
    out: dict[str, BeatEntry] = {}
    if config.collect is not None:
        options: dict[str, object] = {"queue": keys.QUEUE, "priority": OPS_PRIORITY}
        if config.collect.every_s is not None:
            # collections share the job queue; one that waited a whole interval behind long
            # jobs is dropped (the next one does the same work) instead of piling up
            options["expires"] = float(config.collect.every_s)
        out[COLLECT_ENTRY] = {
            "task": TASK_COLLECT,
            "schedule": celery_schedule(config.collect, app),
            "args": (),
            "options": options,
        }
    for sweep in config.sweeps:
        out[f"sweep:{sweep.name}"] = {
            "task": TASK_SUBMIT_SWEEP,
            "schedule": celery_schedule(sweep.timing, app),
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
        redis_url,
        jobs,
        params=params,
        chunk_size=sw.chunk_size or DEFAULT_CHUNK_SIZE,
        batch_id=batch_id,
        only_missing=batch_id is not None,
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
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
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
        out.append(nxt.astimezone(UTC))
        last = nxt
    return out


__all__ = [
    "celery_schedule",
    "beat_schedule",
    "ScheduleFileScheduler",
    "next_run_times",
    "run_sweep",
]
