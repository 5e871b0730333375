"""Tests of the operations commands (``ktour schedule show``, ``reports``, ``workers``,
``status``, ``batches``) against a real Redis without workers, and of the deployment pieces the
operations issue added to docker-compose.yml (Flower, beat's schedule file, shared reports).

Facts from outside the code: crontab(5) semantics ("0 2 * * *" is 02:00 every day); colour
parity (on 5x5 at least 12 start squares have no open tour).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import msgspec
import pytest
import yaml
from _cli import run_cli

from knights_tour.batches import saving, store
from knights_tour.batches.collector import collect_finished
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.settings import get_settings
from knights_tour.tours.record import Status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "schedule.example.toml"


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "kt-data"))
    for name in ("KT_REDIS_URL", "KT_SCHEDULE_FILE", "KT_REPORTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _batch(r, sizes=("5",), finish=True):
    jobs = make_batch_jobs(list(sizes))
    batch_id = store.create_batch(r, jobs, params={"sizes": ",".join(sizes)})
    for job in jobs if finish else jobs[: len(jobs) // 2]:
        saving.save_record(r, batch_id, run_job(job, batch_id=batch_id, worker="t@here"))
    return batch_id, jobs


# -- schedule show --------------------------------------------------------------------------


def test_schedule_show_lists_entries_and_next_runs(capsys, monkeypatch):
    monkeypatch.setenv("KT_SCHEDULE_FILE", str(EXAMPLE))
    get_settings.cache_clear()
    before = datetime.now(UTC)
    code, out, err = run_cli(capsys, "schedule", "show", "--json", "--count", "2")
    assert code == 0, err
    data = json.loads(out)
    entries = {e["entry"]: e for e in data["entries"]}
    assert list(entries) == ["collect", "sweep:nightly-5-12", "sweep:closed-rectangles"]
    nightly = [datetime.fromisoformat(t) for t in entries["sweep:nightly-5-12"]["next_runs"]]
    assert all((t.hour, t.minute, t.second) == (2, 0, 0) for t in nightly)
    assert before < nightly[0] <= before + timedelta(days=1)
    assert nightly[1] - nightly[0] == timedelta(days=1)
    assert entries["sweep:nightly-5-12"]["sweep"]["verify"] == "cpsat"
    code, out, _ = run_cli(capsys, "schedule", "show")
    assert code == 0 and "nightly-5-12" in out and "cron 0 2 * * *" in out


def test_schedule_show_without_a_file_is_the_collect_interval(capsys, monkeypatch):
    monkeypatch.setenv("KT_COLLECT_INTERVAL_S", "90")
    get_settings.cache_clear()
    code, out, _ = run_cli(capsys, "schedule", "show", "--json")
    entries = json.loads(out)["entries"]
    assert code == 0 and [(e["entry"], e["every_s"]) for e in entries] == [("collect", 90.0)]


def test_schedule_show_rejects_a_bad_file_in_one_line(capsys, tmp_path):
    bad = tmp_path / "s.toml"
    bad.write_text('[[sweep]]\nname = "x"\nsizes = "8"\ncron = "0 2 * *"\n')
    code, out, err = run_cli(capsys, "schedule", "show", "--file", str(bad))
    assert code == 2 and out == ""
    assert err.startswith("ktour: error:") and "5 fields" in err and err.count("\n") == 1


# -- reports ------------------------------------------------------------------------------------


def test_reports_from_the_directory_and_from_redis(capsys, redis_client, redis_db_url, tmp_path):
    out_dir = tmp_path / "reports"
    code, out, _ = run_cli(capsys, "reports", "--dir", str(out_dir))
    assert code == 0 and "no reports yet" in out
    batch_id, _ = _batch(redis_client)
    assert collect_finished(redis_client, out_dir)["written"] == [batch_id]

    code, out, _ = run_cli(capsys, "reports", "--dir", str(out_dir), "--json")
    (item,) = json.loads(out)["reports"]
    assert item["batch_id"] == batch_id and item["total"] == 25
    assert item["counts"]["no_tour"] >= 12  # colour parity
    code, out, _ = run_cli(capsys, "reports", "--dir", str(out_dir))
    assert code == 0 and batch_id in out

    code, out, _ = run_cli(capsys, "reports", "--redis", redis_db_url, "--json")
    data = json.loads(out)
    (marker,) = data["reports"]
    assert marker["batch_id"] == batch_id and marker["state"] == "written"
    assert marker["reports_dir"] == str(out_dir)
    assert data["last_collection"]["written"] == [batch_id]

    monkeypatch_dir = tmp_path / "kt-data" / "reports"  # the default: <data dir>/reports
    assert not monkeypatch_dir.exists()
    code, out, _ = run_cli(capsys, "reports")
    assert code == 0 and "no reports yet" in out


# -- status and batches without workers -----------------------------------------------------


def test_status_counts_queued_and_done_and_batches_show_the_state(
    capsys, redis_client, redis_db_url, tmp_path
):
    url = redis_db_url
    half, jobs = _batch(redis_client, sizes=("3x4",), finish=False)
    code, out, _ = run_cli(capsys, "status", half, "--json", "--redis", url)
    p = json.loads(out)
    assert code == 1
    assert (p["done"], p["running"], p["queued"], p["total"]) == (6, 0, 6, 12)
    assert p["state"] == "running" and p["eta_s"] is not None and p["failed"] == 0

    full, _ = _batch(redis_client)
    code, out, _ = run_cli(capsys, "status", "--redis", url)  # no BATCH: the newest
    assert code == 0
    assert f"batch {full}: 25/25 jobs done (complete)" in out
    assert "running 0, queued 0, failed 0; ETA 0s; state complete" in out

    collect_finished(redis_client, tmp_path / "reports")
    code, out, _ = run_cli(capsys, "batches", "--json", "--redis", url)
    states = {b["batch_id"]: b["state"] for b in json.loads(out)}
    assert states == {half: "running", full: "collected"}
    code, out, _ = run_cli(capsys, "batches", "--redis", url)
    assert "collected" in out and "running" in out

    # an error record counts as failed
    rec = msgspec.structs.replace(
        run_job(jobs[-1], batch_id=half, worker="t@here"), status=Status.ERROR, reason="injected"
    )
    saving.save_record(redis_client, half, rec)
    p = json.loads(run_cli(capsys, "status", half, "--json", "--redis", url)[1])
    assert (p["done"], p["failed"], p["queued"]) == (7, 1, 5)


def test_status_watch_ends_when_complete_or_on_timeout(capsys, redis_client, redis_db_url):
    done, _ = _batch(redis_client, sizes=("3x4",))
    code, out, _ = run_cli(
        capsys, "status", done, "--watch", "--interval", "0.1", "--redis", redis_db_url
    )
    assert code == 0 and out.splitlines()[-1].startswith(f"batch {done}: 12/12 jobs done")
    stuck, _ = _batch(redis_client, sizes=("3x4",), finish=False)
    code, out, _ = run_cli(
        capsys,
        "status",
        stuck,
        "--watch",
        "--interval",
        "0.1",
        "--timeout",
        "1",
        "--redis",
        redis_db_url,
    )
    lines = [ln for ln in out.splitlines() if ln.startswith("progress:")]
    assert code == 1 and len(lines) >= 2 and "queued 6" in lines[-1]


def test_status_errors(capsys, redis_db_url):
    code, _, err = run_cli(capsys, "status", "--redis", redis_db_url)
    assert code == 2 and "no batches yet" in err
    code, _, err = run_cli(capsys, "status", "nope", "--watch", "--redis", redis_db_url)
    assert code == 2 and "unknown batch" in err


# -- workers without workers --------------------------------------------------------------------


def test_workers_with_nobody_listening(capsys, redis_db_url):
    code, out, _ = run_cli(capsys, "workers", "--redis", redis_db_url, "--timeout", "0.3")
    assert code == 1 and "no worker answered" in out
    code, _, err = run_cli(capsys, "workers")
    assert code == 2 and "KT_REDIS_URL" in err
    code, _, err = run_cli(capsys, "workers", "--redis", "redis://127.0.0.1:1/0")
    assert code == 2 and "cannot reach Redis" in err


# -- deployment: what the operations issue added to docker-compose.yml ------------------------

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_still_matches_the_schema():
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    errors = list(jsonschema.Draft201909Validator(schema).iter_errors(COMPOSE))
    assert not errors, [e.message for e in errors]


def test_compose_flower_is_password_protected_on_loopback():
    flower = COMPOSE["services"]["flower"]
    env = flower["environment"]
    assert env["CELERY_BROKER_URL"].startswith("redis://:${KT_REDIS_PASSWORD:?")
    assert env["FLOWER_BASIC_AUTH"].split("}:", 1)[1].startswith("${KT_FLOWER_PASSWORD:?")
    assert all(str(p).startswith("127.0.0.1:") for p in flower["ports"])
    assert flower["depends_on"]["redis"]["condition"] == "service_healthy"


def test_compose_beat_reads_the_mounted_schedule_and_workers_share_reports():
    services = COMPOSE["services"]
    beat = services["beat"]
    target = beat["environment"]["KT_SCHEDULE_FILE"]
    mounts = [v for v in beat["volumes"] if isinstance(v, str) and f":{target}:" in v]
    assert len(mounts) == 1
    default_host_file = mounts[0].split(":-", 1)[1].split("}", 1)[0]
    assert (ROOT / default_host_file).is_file()  # the documented default exists
    state = next(a for a in beat["command"] if a.startswith("--schedule="))
    assert any(v.split(":")[1] in state for v in beat["volumes"] if v.startswith("beat-state:"))
    reports_dir = services["worker"]["environment"]["KT_REPORTS_DIR"]
    assert f"reports:{reports_dir}" in services["worker"]["volumes"]
    assert "-E" in services["worker"]["command"]  # task events for Flower
    assert {"reports", "beat-state"} <= set(COMPOSE["volumes"])
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert reports_dir in dockerfile and "/home/kt/beat" in dockerfile


def test_compose_beat_scheduler_module_exists():
    import importlib

    from knights_tour.worker.celery import app

    module, _, cls = app.conf.beat_scheduler.partition(":")
    assert hasattr(importlib.import_module(module), cls)


def test_switching_the_app_between_redis_urls_and_back(redis_db_url, module_redis_url):
    """`ktour workers` / `status` point this process's Celery app at the URL they are given;
    switching A -> B -> A must not hand back A's closed connection pool."""
    import redis as redis_py

    from knights_tour.worker.celery import use_redis

    a, b = redis_db_url, module_redis_url  # two freshly flushed databases
    assert a != b
    for url in (a, b, a, b, a):
        app = use_redis(url)
        assert app.backend.url == url  # the result backend follows too
        app.send_task("knights_tour.no_such_task", queue="kt-switch-test", ignore_result=True)
    assert redis_py.Redis.from_url(a).llen("kt-switch-test") == 3
    assert redis_py.Redis.from_url(b).llen("kt-switch-test") == 2
