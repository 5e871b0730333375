"""The one poll loop (service.waiting) against a real Redis: progress, timeout, a liveness check
that stops the wait, and an outage that ends in BackendUnavailableError or is ridden out."""

from __future__ import annotations

import socket

import pytest
import redis

from knights_tour.batches.client import wait_for_batch
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.progress import batch_status
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import create_batch
from knights_tour.errors import BackendUnavailableError, KnightsTourError
from knights_tour.store.connection import redis_options
from knights_tour.store.waiting import WaitHooks, poll_until_complete


def _unreachable() -> redis.Redis:
    """A client for a loopback port nothing listens on (every call raises ConnectionError),
    with the project's connection options (one quick retry; redis-py's own default retries
    with backoff for seconds before each error)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, **redis_options())


@pytest.fixture
def half_done(redis_client):
    jobs = make_batch_jobs([5])[:2]
    batch_id = create_batch(redis_client, jobs, {})
    save_record(redis_client, batch_id, run_job(jobs[0], batch_id=batch_id))
    return redis_client, batch_id, jobs


def test_timeout_returns_the_last_incomplete_status(half_done):
    r, batch_id, _ = half_done
    seen = []
    status = wait_for_batch(
        r, batch_id, timeout_s=0.3, poll_s=0.05, hooks=WaitHooks(on_progress=seen.append)
    )
    assert not status["complete"] and status["done"] == 1 and status["total"] == 2
    assert len(seen) >= 2 and all(s["done"] == 1 for s in seen)


def test_wait_ends_when_the_last_record_lands(half_done):
    r, batch_id, jobs = half_done
    save_record(r, batch_id, run_job(jobs[1], batch_id=batch_id))
    status = wait_for_batch(r, batch_id, timeout_s=30, poll_s=0.05)
    assert status["complete"] and status["done"] == 2


def test_a_check_hook_stops_the_wait(half_done):
    r, batch_id, _ = half_done

    def workers_gone(status):
        raise KnightsTourError(f"all local workers exited ({status['done']}/{status['total']})")

    with pytest.raises(KnightsTourError, match=r"\(1/2\)"):
        wait_for_batch(r, batch_id, poll_s=0.05, hooks=WaitHooks(check=workers_gone))


def test_an_unknown_batch_is_an_error_not_a_wait(redis_client):
    with pytest.raises(KnightsTourError, match="unknown batch"):
        wait_for_batch(redis_client, "no-such-batch", timeout_s=5)


def test_redis_away_longer_than_the_outage_limit_raises():
    outages = []
    with pytest.raises(BackendUnavailableError, match="lost contact with Redis"):
        wait_for_batch(
            _unreachable(),
            "b",
            poll_s=0.05,
            outage_s=0.1,  # each failed poll takes the client's retry backoff, longer than this
            hooks=WaitHooks(on_outage=outages.append),
        )
    assert outages == [True]


def test_a_short_outage_is_ridden_out_and_reported(half_done):
    r, batch_id, jobs = half_done
    away = _unreachable()
    calls = {"n": 0}

    def status_fn():  # Redis unreachable for the first three polls, then back
        calls["n"] += 1
        client = away if calls["n"] <= 3 else r
        return batch_status(client, batch_id)

    save_record(r, batch_id, run_job(jobs[1], batch_id=batch_id))
    outages = []
    status = poll_until_complete(
        status_fn, timeout_s=30, poll_s=0.05, outage_s=30, hooks=WaitHooks(on_outage=outages.append)
    )
    assert status["complete"] and outages == [True, False] and calls["n"] == 4


def test_recovery_runs_each_poll_and_reports_what_it_resent(half_done):
    r, batch_id, _ = half_done
    resent = []
    passes = {"n": 0}

    def recover():
        passes["n"] += 1
        return ["5x5:0,1:warnsdorff:open"] if passes["n"] == 2 else []

    poll_until_complete(
        lambda: batch_status(r, batch_id),
        timeout_s=0.4,
        poll_s=0.05,
        recover_fn=recover,
        hooks=WaitHooks(on_resent=resent.append),
    )
    assert passes["n"] >= 3 and resent == [1]


@pytest.mark.unit
def test_a_steady_wait_pauses_the_full_interval_and_no_pause_runs_past_the_timeout(monkeypatch):
    """``status --watch --interval 5``: every refresh 5 s after the last (not 0.05 s, then
    growing), and the last pause cut at the deadline instead of overshooting it."""
    import knights_tour.store.waiting as waiting

    clock = [1000.0]
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(round(seconds, 3))
        clock[0] += seconds

    monkeypatch.setattr(waiting.time, "monotonic", lambda: clock[0])
    poll_until_complete(
        lambda: {"complete": False}, timeout_s=12, poll_s=5, pause=pause, steady=True
    )
    assert pauses == [5, 5, 2]
    assert clock[0] == pytest.approx(1012)
