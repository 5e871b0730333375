"""Tests of the beat schedule: its TOML format, cron/interval timing, the example file and the
README example (knights_tour.batches.schedule_file); next run times and the beat scheduler class
(knights_tour.batches.schedule).

Facts from outside the code: crontab(5) field meaning (minute hour day-of-month month
day-of-week, 0 = Sunday); the calendar (Python's datetime: which days are Friday the 13th);
CP-SAT board limit of the job model (a 60x60 board has 3600 squares).
"""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery.schedules import crontab, schedule

from knights_tour.batches.schedule import ScheduleFileScheduler, beat_schedule, next_run_times
from knights_tour.batches.schedule_file import (
    COLLECT_ENTRY,
    InvalidScheduleError,
    Sweep,
    Timing,
    load_schedule,
    parse_interval,
    parse_schedule,
    schedule_from_settings,
)
from knights_tour.settings import get_settings
from knights_tour.worker.messages import TASK_COLLECT, TASK_SUBMIT_SWEEP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "schedule.example.toml"
NOW = datetime(2026, 11, 20, 23, 34, 5, tzinfo=UTC)  # a Friday


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("KT_SCHEDULE_FILE", raising=False)
    monkeypatch.delenv("KT_COLLECT_INTERVAL_S", raising=False)
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


# -- the example file and the README example ----------------------------------------------


def _check_example(config):
    names = [s.name for s in config.sweeps]
    assert names == ["nightly-5-12", "closed-rectangles"]
    nightly, rect = config.sweeps
    assert nightly.sizes == ",".join(f"{n}x{n}" for n in range(5, 13))
    assert nightly.options.verify == "cpsat" and nightly.timing.cron == "0 2 * * *"
    assert (
        rect.options.closed and rect.timing.every_s == 6 * 3600 and rect.options.time_limit_s == 30
    )
    assert config.collect == Timing(every_s=300)
    sched = beat_schedule(config)
    assert set(sched) == {COLLECT_ENTRY, "sweep:nightly-5-12", "sweep:closed-rectangles"}
    assert sched[COLLECT_ENTRY]["task"] == TASK_COLLECT
    assert sched[COLLECT_ENTRY]["schedule"].run_every == timedelta(minutes=5)
    assert sched[COLLECT_ENTRY]["options"]["expires"] == 300  # a late collection is dropped
    from knights_tour.worker.messages import BATCH_PRIORITY

    # Redis transport: lower number = served first; beat's tasks overtake queued batch chunks
    assert all(e["options"]["priority"] < BATCH_PRIORITY for e in sched.values())
    cron = sched["sweep:nightly-5-12"]["schedule"]
    assert isinstance(cron, crontab)
    assert cron.minute == {0} and cron.hour == {2} and len(cron.day_of_week) == 7
    assert sched["sweep:nightly-5-12"]["task"] == TASK_SUBMIT_SWEEP
    (arg,) = sched["sweep:nightly-5-12"]["args"]
    assert Sweep.from_dict(arg).sizes == nightly.sizes  # the task argument round-trips
    assert isinstance(sched["sweep:closed-rectangles"]["schedule"], schedule)


def test_example_file_parses_and_builds_a_beat_schedule():
    _check_example(load_schedule(EXAMPLE))


def test_documented_schedule_example_is_the_example_file_and_works_as_written(tmp_path):
    doc = (ROOT / "docs" / "schedule.md").read_text()
    m = re.search(r"<!-- schedule-example -->\s*```toml\n(.+?)```", doc, re.S)
    assert m, "docs/schedule.md must show the schedule example after <!-- schedule-example -->"
    path = tmp_path / "schedule.toml"
    path.write_text(m.group(1))
    _check_example(load_schedule(path))


def test_schedule_file_from_settings(monkeypatch):
    monkeypatch.setenv("KT_SCHEDULE_FILE", str(EXAMPLE))
    get_settings.cache_clear()
    config = schedule_from_settings()
    assert [s.name for s in config.sweeps] == ["nightly-5-12", "closed-rectangles"]


def test_without_a_file_the_schedule_is_collection_every_kt_collect_interval(monkeypatch):
    monkeypatch.setenv("KT_COLLECT_INTERVAL_S", "42")
    get_settings.cache_clear()
    config = schedule_from_settings()
    assert config.sweeps == () and config.collect == Timing(every_s=42.0)
    assert list(beat_schedule(config)) == [COLLECT_ENTRY]


def test_collect_table_missing_uses_default_and_can_be_disabled():
    sweep = {"name": "a", "sizes": "5", "every": 60}
    assert parse_schedule({"sweep": [sweep]}, default_collect_s=7).collect == Timing(every_s=7)
    off = parse_schedule({"collect": {"enabled": False}, "sweep": [sweep]})
    assert off.collect is None and list(beat_schedule(off)) == ["sweep:a"]


# -- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, seconds",
    [("90s", 90), ("5m", 300), ("1h30m", 5400), ("1d", 86400), (2.5, 2.5), (3, 3), ("0.5s", 0.5)],
)
def test_intervals(text, seconds):
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("bad", ["", "5", "5x", "m5", "-5s", 0, -1, True, "0s", [5]])
def test_bad_intervals(bad):
    with pytest.raises(InvalidScheduleError):
        parse_interval(bad)


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"sweep": [{"name": "a", "sizes": "5"}]}, "'cron' or 'every'"),
        ({"sweep": [{"name": "a", "sizes": "5", "cron": "* * * * *", "every": 5}]}, "exactly one"),
        ({"sweep": [{"name": "a", "sizes": "5", "cron": "* * * *"}]}, "5 fields"),
        ({"sweep": [{"name": "a", "sizes": "5", "cron": "61 * * * *"}]}, "bad cron"),
        ({"sweep": [{"name": "a", "sizes": "5", "cron": "0 24 * * *"}]}, "bad cron"),
        ({"sweep": [{"name": "a", "sizes": "5-", "every": 5}]}, "sweep 'a'"),
        ({"sweep": [{"name": "a", "sizes": "60", "verify": "cpsat", "every": 5}]}, "too large"),
        ({"sweep": [{"name": "a", "sizes": "8", "solver": "nope", "every": 5}]}, "nope"),
        ({"sweep": [{"name": "a", "sizes": "8", "every": 5, "colour": "red"}]}, "unknown key"),
        ({"sweep": [{"name": "a b", "sizes": "8", "every": 5}]}, "'name'"),
        (
            {
                "sweep": [
                    {"name": "a", "sizes": "8", "every": 5},
                    {"name": "a", "sizes": "6", "every": 9},
                ]
            },
            "two sweeps",
        ),
        ({"sweep": [{"name": "a", "sizes": "8", "every": 5, "chunk_size": 0}]}, "chunk_size"),
        ({"collect": {"every": "5m", "cron": "* * * * *"}}, "exactly one"),
        ({"collect": {"when": "now"}}, "unknown key"),
        ({"sweeps": []}, "unknown key"),
    ],
)
def test_invalid_schedules_name_the_problem(data, fragment):
    with pytest.raises(InvalidScheduleError, match=re.escape(fragment)):
        parse_schedule(data)


def test_unreadable_and_non_toml_files(tmp_path):
    with pytest.raises(InvalidScheduleError, match="cannot read"):
        load_schedule(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[sweep]\nname = 1\n")
    with pytest.raises(InvalidScheduleError, match="not valid TOML"):
        load_schedule(bad)


def test_sizes_accept_a_list_and_integers():
    s = parse_schedule({"sweep": [{"name": "a", "sizes": [5, "6x8"], "every": 5}]}).sweeps[0]
    assert s.sizes == "5x5,6x8"


# -- next run times ---------------------------------------------------------------------------


def test_daily_cron_next_runs_are_at_0200_utc_each_day():
    runs = next_run_times(Timing(cron="0 2 * * *"), NOW, count=3)
    first = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    assert runs == [first, first + timedelta(days=1), first + timedelta(days=2)]


def test_every_quarter_hour():
    runs = next_run_times(Timing(cron="*/15 * * * *"), NOW, count=4)
    assert [r.strftime("%H:%M") for r in runs] == ["23:45", "00:00", "00:15", "00:30"]


def test_monday_morning_cron_matches_the_calendar():
    runs = next_run_times(Timing(cron="30 9 * * mon"), NOW, count=3)
    assert all(r.weekday() == 0 and (r.hour, r.minute) == (9, 30) for r in runs)
    assert runs[0] - NOW < timedelta(days=7)
    assert [b - a for a, b in zip(runs, runs[1:])] == [timedelta(days=7)] * 2


def test_friday_the_13th_cron_agrees_with_the_calendar():
    # Celery's crontab requires both day-of-month and day-of-week when both are restricted.
    runs = next_run_times(Timing(cron="0 12 13 * 5"), NOW, count=3)
    expected = []
    day = NOW.date()
    while len(expected) < 3:
        day += timedelta(days=1)
        if day.day == 13 and day.weekday() == 4:  # Friday
            expected.append(datetime(day.year, day.month, day.day, 12, tzinfo=UTC))
    assert runs == expected


def test_interval_next_runs_count_from_the_start():
    runs = next_run_times(Timing(every_s=90), NOW, count=2)
    assert runs == [NOW + timedelta(seconds=90), NOW + timedelta(seconds=180)]


# -- the beat scheduler class -----------------------------------------------------------------


def test_scheduler_loads_the_schedule_file_when_beat_starts(monkeypatch, tmp_path):
    from knights_tour.worker.celery import app

    assert app.conf.beat_scheduler == "knights_tour.batches.schedule:ScheduleFileScheduler"
    path = tmp_path / "s.toml"
    path.write_text('[collect]\nevery = "2s"\n[[sweep]]\nname = "t"\nsizes = "5"\nevery = 3\n')
    monkeypatch.setenv("KT_SCHEDULE_FILE", str(path))
    get_settings.cache_clear()
    saved = dict(app.conf.beat_schedule or {})
    try:
        sched = ScheduleFileScheduler(app=app, schedule_filename=str(tmp_path / "beat-state"))
        assert set(sched.schedule) >= {COLLECT_ENTRY, "sweep:t"}
        assert sched.schedule["sweep:t"].task == TASK_SUBMIT_SWEEP
        assert sched.schedule["sweep:t"].schedule.run_every == timedelta(seconds=3)
        sched.close()
        # an entry removed from the file disappears from the persisted schedule on restart
        path.write_text('[collect]\nevery = "2s"\n')
        sched = ScheduleFileScheduler(app=app, schedule_filename=str(tmp_path / "beat-state"))
        assert "sweep:t" not in sched.schedule and COLLECT_ENTRY in sched.schedule
        sched.close()
    finally:
        app.conf.beat_schedule = saved


def test_a_broken_schedule_file_stops_the_scheduler(monkeypatch, tmp_path):
    from knights_tour.worker.celery import app

    path = tmp_path / "s.toml"
    path.write_text('[[sweep]]\nname = "t"\nsizes = "5"\ncron = "99 * * * *"\n')
    monkeypatch.setenv("KT_SCHEDULE_FILE", str(path))
    get_settings.cache_clear()
    saved = dict(app.conf.beat_schedule or {})
    try:
        with pytest.raises(InvalidScheduleError, match="bad cron"):
            ScheduleFileScheduler(app=app, schedule_filename=str(tmp_path / "beat-state"))
    finally:
        app.conf.beat_schedule = saved


def test_example_file_is_valid_toml_with_only_known_tables():
    data = tomllib.loads(EXAMPLE.read_text())
    assert set(data) <= {"collect", "sweep"}
