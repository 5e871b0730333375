"""The Redis store and the embedded Redis server, against a real redis-server (no mocks).

Facts used: colour parity (a tour alternates colours, so on 5×5 - 13 squares of colour 0, 12 of
colour 1 - no open tour starts on colour 1), so a 5×5 batch has exactly 12 parity no-tours.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
from collections import Counter

import msgspec
import psutil
import pytest

from knights_tour.batches.client import wait_for_batch
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.progress import batch_progress, batch_status, list_batches
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import batch_jobs, collect, create_batch
from knights_tour.board import Board
from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.local import launching
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.launching import STATE_FILE
from knights_tour.local.prelaunch import free_port
from knights_tour.settings import get_settings
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.store.urls import mask_url
from knights_tour.store.waiting import WaitHooks
from knights_tour.tours.record import Status
from knights_tour.tours.verify import verify_tour


@pytest.fixture(scope="module")
def records_5x5():
    jobs = make_batch_jobs([5])
    return jobs, [run_job(j) for j in jobs]


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:hunter2@example.org:6380/2", "redis://:***@example.org:6380/2"),
        ("redis://alice:hunter2@10.0.0.1/0", "redis://alice:***@10.0.0.1/0"),
        ("rediss://:p%40ss@[::1]:6379/0", "rediss://:***@[::1]:6379/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_mask_url(url, masked):
    assert mask_url(url) == masked


def test_connect_to_nothing_fails_clearly_with_masked_password():
    with pytest.raises(BackendUnavailableError) as info:
        connect(f"redis://:hunter2@127.0.0.1:{free_port()}/0", timeout_s=1)
    message = str(info.value)
    assert message.startswith("cannot reach Redis at redis://:***@127.0.0.1:")
    assert "hunter2" not in message


def test_connect_with_a_wrong_password_fails_clearly(tmp_path):
    with EmbeddedRedis(tmp_path, password="right-horse") as server:
        assert connect(server.url).ping()
        wrong = server.url.replace("right-horse", "wrong-horse")
        with pytest.raises(BackendUnavailableError) as info:
            connect(wrong)
        assert "wrong-horse" not in str(info.value) and "***" in str(info.value)


def test_batch_round_trip_sorted_and_counted(redis_client, records_5x5):
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs, {"sizes": "5"})
    status = batch_status(redis_client, batch_id)
    assert (status["total"], status["done"], status["missing"], status["complete"]) == (
        25,
        0,
        25,
        False,
    )
    shuffled = list(records)
    random.Random(7).shuffle(shuffled)
    for rec in shuffled:
        save_record(redis_client, batch_id, rec)
    status = batch_status(redis_client, batch_id)
    assert status["complete"] and status["done"] == 25 and status["missing"] == 0
    minority = [sq for sq in Board(5, 5).squares() if Board.colour(sq) == 1]
    assert status["counts"]["no_tour"] == len(minority) == 12
    assert status["counts"]["found"] == 25 - 12  # every majority-colour start has a tour
    assert status["params"] == {"sizes": "5"} and status["mismatches"] == 0
    got = collect(redis_client, batch_id)
    assert [tuple(r.start) for r in got] == list(Board(5, 5).squares())  # row-major order
    for rec in got:
        if rec.status == "found":
            assert verify_tour(5, rec.tour, start=rec.start).ok
    assert [j.key for j in batch_jobs(redis_client, batch_id)] == [r.job_key for r in got]


def test_the_first_record_stored_for_a_job_is_kept(redis_client, records_5x5):
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs[:3], {})
    for rec in records[:3]:
        assert save_record(redis_client, batch_id, rec) is True
    assert save_record(redis_client, batch_id, records[0]) is True  # a retried write
    again = msgspec.structs.replace(
        records[0], worker="second-run", finished_at=records[0].finished_at + 1
    )
    assert save_record(redis_client, batch_id, again) is False
    got = collect(redis_client, batch_id)
    assert len(got) == 3 and got[0] == records[0]
    assert batch_status(redis_client, batch_id)["done"] == 3
    # Re-registering the same jobs in the same batch adds nothing.
    assert create_batch(redis_client, jobs[:3], {}, batch_id=batch_id) == batch_id
    assert batch_status(redis_client, batch_id)["total"] == 3


def test_progress_from_the_tally_matches_the_full_status(redis_client, records_5x5):
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs, {"sizes": "5"})
    shown = ("total", "done", "counts", "mismatches", "missing", "complete", "params")
    for i, rec in enumerate(records):
        if i in (0, 7, len(records) - 1):
            full, quick = (
                batch_status(redis_client, batch_id),
                batch_progress(redis_client, batch_id),
            )
            assert {k: quick[k] for k in shown} == {k: full[k] for k in shown}
        save_record(redis_client, batch_id, rec)
        save_record(
            redis_client, batch_id, msgspec.structs.replace(rec, status=Status.ERROR)
        )  # kept out: not counted
    quick = batch_progress(redis_client, batch_id)
    assert quick["complete"] and quick["counts"] == batch_status(redis_client, batch_id)["counts"]
    # 25 starts of 5x5: 13 of the majority colour have tours, 12 are ruled out by colour parity.
    assert quick["counts"] == {"found": 13, "no_tour": 12}
    # A result the tally does not know (stored by older code): progress cannot tell.
    redis_client.hset(keys.batch_status(batch_id), "legacy", "found|0")
    assert batch_progress(redis_client, batch_id) is None


def test_batches_are_separate_and_listed_in_order(redis_client, records_5x5):
    jobs, records = records_5x5
    first = create_batch(redis_client, jobs[:2], {"n": 1})
    second = create_batch(redis_client, jobs[:4], {"n": 2})
    assert first != second
    save_record(redis_client, first, records[0])
    assert [r.job_key for r in collect(redis_client, first)] == [records[0].job_key]
    assert collect(redis_client, second) == []
    listed = list_batches(redis_client)
    assert [b["batch_id"] for b in listed] == [first, second]
    assert [(b["total"], b["done"], b["params"]) for b in listed] == [
        (2, 1, {"n": 1}),
        (4, 0, {"n": 2}),
    ]


def test_mismatch_and_missing_are_reported(redis_client, records_5x5):
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs[:5], {})
    save_record(redis_client, batch_id, msgspec.structs.replace(records[0], mismatch=True))
    status = batch_status(redis_client, batch_id)
    assert status["mismatches"] == 1 and status["missing"] == 4
    assert status["missing_keys"] == sorted(j.key for j in jobs[1:5])


def test_status_of_a_batch_whose_hashes_disagree(redis_client, records_5x5):
    """A status stored for a key that is not a job of the batch is not counted; a job whose
    record is lost is unrecorded and missing; a job gone from the job hash is lost, and its
    status no longer counts."""
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs[:7], {})
    saved = [msgspec.structs.replace(records[0], mismatch=True), *records[1:6]]
    for rec in saved:
        save_record(redis_client, batch_id, rec)
    redis_client.hset(keys.batch_status(batch_id), "not-a-job", "found|1")
    redis_client.hdel(keys.batch_records(batch_id), jobs[1].key)  # unrecorded
    redis_client.hdel(keys.batch_jobs(batch_id), jobs[2].key)  # lost, its status a stray
    kept = [rec for rec in saved if rec.job_key != jobs[2].key]
    missing = sorted([jobs[1].key, jobs[6].key])
    status = batch_status(redis_client, batch_id)
    assert (status["total"], status["done"], status["lost_jobs"]) == (6, 4, 1)
    assert status["counts"] == dict(sorted(Counter(str(rec.status) for rec in kept).items()))
    assert (status["mismatches"], status["unrecorded"]) == (1, 1)
    assert (status["missing"], status["missing_keys"]) == (2, missing)
    assert not status["complete"]
    for n in (0, 1, 2, 3):
        assert batch_status(redis_client, batch_id, max_missing=n)["missing_keys"] == missing[:n]


def test_unknown_batch_is_a_clear_error(redis_client):
    for fn in (batch_status, collect, batch_jobs):
        with pytest.raises(KnightsTourError, match="unknown batch 'no-such-batch'"):
            fn(redis_client, "no-such-batch")


def test_record_without_job_key_is_refused(redis_client, records_5x5):
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs[:1], {})
    with pytest.raises(KnightsTourError, match="job_key"):
        save_record(redis_client, batch_id, msgspec.structs.replace(records[0], job_key=None))


def test_results_do_not_expire_unless_a_ttl_is_set(redis_client, records_5x5, monkeypatch):
    jobs, records = records_5x5
    kept = create_batch(redis_client, jobs[:1], {})
    save_record(redis_client, kept, records[0])
    assert all(redis_client.ttl(k) == -1 for k in keys.batch_keys(kept))
    monkeypatch.setenv("KT_RESULT_TTL_S", "3600")
    get_settings.cache_clear()
    try:
        expiring = create_batch(redis_client, jobs[:1], {})
        save_record(redis_client, expiring, records[0])
        assert all(0 < redis_client.ttl(k) <= 3600 for k in keys.batch_keys(expiring))
    finally:
        monkeypatch.delenv("KT_RESULT_TTL_S")
        get_settings.cache_clear()


def test_wait_for_batch_reports_progress_and_times_out(redis_client, records_5x5):
    jobs, records = records_5x5
    batch_id = create_batch(redis_client, jobs[:2], {})
    save_record(redis_client, batch_id, records[0])
    seen = []
    status = wait_for_batch(
        redis_client, batch_id, timeout_s=0.3, hooks=WaitHooks(on_progress=seen.append), poll_s=0.05
    )
    assert not status["complete"] and status["done"] == 1 and seen and seen[-1]["done"] == 1
    save_record(redis_client, batch_id, records[1])
    assert wait_for_batch(redis_client, batch_id, timeout_s=5)["complete"]


def test_embedded_redis_keeps_data_across_restart_on_the_same_port(tmp_path, records_5x5):
    jobs, records = records_5x5
    server = EmbeddedRedis(tmp_path / "data")
    server.start()
    try:
        port, pid = server.port, server.pid
        conns = psutil.Process(pid).net_connections(kind="tcp")
        assert {c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN} == {"127.0.0.1"}
        r = connect(server.url)
        batch_id = create_batch(r, jobs[:2], {"survive": True})
        save_record(r, batch_id, records[0])
        r.close()
        server.stop()
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not (tmp_path / "data" / STATE_FILE).exists()
        server.start()
        assert server.port == port and server.pid != pid
        r = connect(server.url)
        assert [x.job_key for x in collect(r, batch_id)] == [records[0].job_key]
        assert batch_status(r, batch_id)["params"] == {"survive": True}
        r.close()
    finally:
        server.stop()


def test_a_second_embedded_redis_on_the_same_dir_attaches_or_refuses(tmp_path):
    with EmbeddedRedis(tmp_path) as first:
        other = EmbeddedRedis(tmp_path).start()  # reuse=True: attach, do not start another
        assert (other.port, other.pid, other.owned) == (first.port, first.pid, False)
        other.stop()  # not ours: must leave it running
        assert first.is_running()
        with pytest.raises(BackendUnavailableError, match="already running"):
            EmbeddedRedis(tmp_path, reuse=False).start()


def test_a_stale_state_file_is_replaced(tmp_path):
    dead = subprocess.Popen(["sleep", "0"])
    dead.wait()
    (tmp_path / STATE_FILE).write_text(
        json.dumps({"pid": dead.pid, "port": free_port(), "password": None})
    )
    with EmbeddedRedis(tmp_path) as server:
        assert server.owned and server.pid != dead.pid
        assert json.loads((tmp_path / STATE_FILE).read_text())["pid"] == server.pid


@pytest.mark.parametrize("with_clients", [False, True])
def test_a_server_whose_port_is_taken_before_it_binds_starts_on_another(
    tmp_path, monkeypatch, with_clients
):
    """``free_port`` releases the port it found before redis-server binds it, and another
    process (a parallel test worker, another ``ktour``) may bind it first: the server then
    starts on another port instead of failing, and clients started at its launch
    (``on_launch``) are given that port only."""
    urls: list[str] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(launching, "free_port", lambda: next(picks, None) or free_port())
        server = EmbeddedRedis(
            tmp_path, reuse=False, on_launch=urls.append if with_clients else None
        )
        try:
            server.start()
            assert server.port != taken.getsockname()[1] and server.is_running()
            assert urls == ([server.url] if with_clients else [])
        finally:
            server.stop()


def test_a_server_on_a_given_port_that_is_taken_does_not_move(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = EmbeddedRedis(tmp_path, port=taken.getsockname()[1])
        with pytest.raises(BackendUnavailableError, match="Address already in use"):
            server.start()
        assert server.port == taken.getsockname()[1] and not server.is_running()


def test_stop_kills_a_server_that_ignores_shutdown(tmp_path):
    server = EmbeddedRedis(tmp_path).start()
    pid = server.pid
    os.kill(pid, signal.SIGSTOP)  # a hung server: SHUTDOWN cannot be answered
    try:
        server.stop(timeout_s=0.5)
    finally:
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGCONT)
    assert not server.is_running()
    assert not psutil.pid_exists(pid)


def test_stop_does_not_wait_out_its_timeout_when_the_server_cannot_save(tmp_path):
    """A server whose snapshot cannot be written (a full disk) answers ``SHUTDOWN SAVE`` with
    an error and keeps running; ``stop`` must then shut it down without saving at once, not
    wait the whole timeout and signal it. What it had is in its append-only file."""
    import time

    import redis

    server = EmbeddedRedis(tmp_path).start()
    pid = server.pid
    client = redis.Redis.from_url(server.url)
    client.set("kt:test:kept", "1")
    client.config_set("dir", "/proc/self")  # where no snapshot can be written
    with pytest.raises(redis.ResponseError):
        client.shutdown(save=True)
    assert server.is_running()
    began = time.monotonic()
    server.stop(timeout_s=120)
    assert time.monotonic() - began < 60  # half the timeout: it did not wait it out
    assert not psutil.pid_exists(pid)
    again = EmbeddedRedis(tmp_path).start()
    try:
        assert redis.Redis.from_url(again.url).get("kt:test:kept") == b"1"
    finally:
        again.stop()


# -- the task adapter, run in this process against the real Redis (no worker needed) --------
def test_task_writes_one_record_per_job_and_an_error_for_a_bad_one(task_env):
    from knights_tour.tasks import run_jobs

    r = connect(task_env)
    jobs = make_batch_jobs(["3x4"])[:2]
    batch_id = create_batch(r, jobs, {})
    bad = {"rows": 3, "cols": 4, "start": [0, 0], "solver": "bogus"}
    summary = run_jobs.run(batch_id, [jobs[0].to_dict(), bad, jobs[1].to_dict()])
    assert summary["jobs"] == 3 and summary["batch_id"] == batch_id
    got = collect(r, batch_id)
    assert len(got) == 3
    errors = [x for x in got if x.status == "error"]
    assert len(errors) == 1 and "unknown solver 'bogus'" in errors[0].reason
    assert batch_status(r, batch_id)["complete"]  # the bad dict is not one of the batch's jobs


def test_use_redis_drops_the_old_result_backend(tmp_path, redis_db_url):
    """A send that does not ignore its result subscribes through the app's result backend; after
    switching URLs that backend must be the new server's, even once the old server is gone."""
    from knights_tour.worker.celery import use_redis

    with EmbeddedRedis(tmp_path) as old:
        use_redis(old.url).send_task("knights_tour.no_such_task", queue="kt-backend-test")
    app = use_redis(redis_db_url)  # the old server is stopped now
    from urllib.parse import urlsplit

    assert (
        app.backend.client.connection_pool.connection_kwargs["port"] == urlsplit(redis_db_url).port
    )
    app.send_task("knights_tour.no_such_task", queue="kt-backend-test")
    assert connect(redis_db_url).llen("kt-backend-test") == 1


def test_the_last_user_of_a_shared_embedded_redis_shuts_it_down(tmp_path):
    owner = EmbeddedRedis(tmp_path).start()
    guest = EmbeddedRedis(tmp_path).start()  # e.g. `ktour collect` from a second shell
    assert not guest.owned and guest.pid == owner.pid
    owner.stop()  # the run ends first: the guest still uses the server, so it stays up
    assert guest.is_running() and (tmp_path / STATE_FILE).exists()
    guest.stop()  # the last one out shuts it down, although it did not start it
    assert (
        not psutil.pid_exists(owner.pid)
        or psutil.Process(owner.pid).status() == psutil.STATUS_ZOMBIE
    )
    assert not (tmp_path / STATE_FILE).exists()
