"""A chunk task's time limits come from its jobs' budgets, and a task that reaches its soft
limit hands back what it has not decided - never an ``error`` record that would hide a later
answer (the first stored record of a job is kept).

The hand-back is driven in this process against the real Redis: a test stand-in raises
Celery's ``SoftTimeLimitExceeded`` where the worker's signal would (inside a job, or between
two jobs). The real worker under derived limits and under a message's fixed 1 s limit is in
``tests/fault/test_time_limits.py``.

Facts used: a corner of 5x5 starts an open tour (Euler's board, 1759), so each 5x5 job from
a majority-colour square is decided ``found``; 5x5 has 1728 directed open tours (OEIS
A165134).
"""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from celery.exceptions import SoftTimeLimitExceeded

import knights_tour.solvers.warnsdorff as engine
from knights_tour.batches.chunking import chunk_time_limits, job_budget_s
from knights_tour.batches.jobs import Job
from knights_tour.batches.progress import batch_status
from knights_tour.batches.store import collect, create_batch
from knights_tour.board import Board
from knights_tour.counting import store as count_store
from knights_tour.counting.plan import SubJob, plan_count
from knights_tour.settings import Settings, get_settings
from knights_tour.solvers import MAX_TIME_LIMIT_S
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.worker import claims as chunk_claims
from knights_tour.worker.ledger import Ledger

# Squares of the majority colour of 5x5 (row + col even): each starts an open tour.
FOUND_STARTS = [(0, 0), (0, 2), (0, 4), (1, 1), (2, 0)]


def _jobs(n: int = 4) -> list[Job]:
    return [Job(5, 5, s) for s in FOUND_STARTS[:n]]


def _queued_chunks(r) -> list[list[dict]]:
    """The job dicts of every run-jobs message on the project queue (JSON bodies)."""
    out = []
    for raw in r.lrange(keys.QUEUE, 0, -1):
        message = json.loads(raw)
        assert message["content-type"] == "application/json"
        out.append(json.loads(base64.b64decode(message["body"]))[0][1])
    return out


class _CutAt:
    """Raises SoftTimeLimitExceeded on the given calls of the wrapped function (1-based)."""

    def __init__(self, fn, *calls: int) -> None:
        self.fn, self.cut, self.calls = fn, set(calls), 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls in self.cut:
            raise SoftTimeLimitExceeded()
        return self.fn(*args, **kwargs)


class _CutAfter(_CutAt):
    """Raises SoftTimeLimitExceeded just after the given calls of the wrapped function."""

    def __call__(self, *args, **kwargs):
        self.calls += 1
        out = self.fn(*args, **kwargs)
        if self.calls in self.cut:
            raise SoftTimeLimitExceeded()
        return out


# -- the limits ---------------------------------------------------------------------------------
@pytest.mark.unit
def test_a_chunks_soft_limit_leaves_every_job_its_budget():
    settings = Settings(job_time_limit_s=60.0, task_margin_s=2.0, task_grace_s=5.0)
    dicts = [Job(5, 5, (0, 0), time_limit_s=0.6).to_dict() for _ in range(4)]
    dicts.append(Job(6, 6, (0, 0)).to_dict())  # no budget of its own: KT_JOB_TIME_LIMIT_S
    soft, hard = chunk_time_limits(dicts, settings)
    assert soft == pytest.approx(4 * 0.6 + 60.0 + 2.0)
    assert hard == pytest.approx(soft + 5.0)
    # A chunk of a week-long job is not cut at a fixed 300 s.
    week = Job(5, 5, (0, 0), time_limit_s=MAX_TIME_LIMIT_S).to_dict()
    assert chunk_time_limits([week], settings)[0] > MAX_TIME_LIMIT_S


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad", [None, "1", -1.0, 0, float("nan"), float("inf"), True, 1e12, 10**400, -(10**400)]
)
def test_an_invalid_budget_in_a_message_counts_as_the_default(bad):
    assert job_budget_s({"time_limit_s": bad}, 7.0) == 7.0
    assert job_budget_s("not a job", 7.0) == 7.0


# -- the hand-back --------------------------------------------------------------------------------
@pytest.fixture
def chunk(task_env, monkeypatch):
    """A batch of four 5x5 jobs on the test's Redis; returns (r, batch_id, jobs, run)."""
    from knights_tour.tasks import run_jobs

    monkeypatch.setenv("KT_MAX_ATTEMPTS", "2")
    get_settings.cache_clear()
    r = connect(task_env)
    jobs = _jobs()
    batch_id = create_batch(r, jobs, {})

    def run(job_dicts):
        return run_jobs.run(batch_id, job_dicts)

    return r, batch_id, jobs, run


@pytest.mark.redis
def test_a_job_cut_by_the_soft_limit_is_handed_back_with_the_rest_not_stored(chunk, monkeypatch):
    r, batch_id, jobs, run = chunk
    monkeypatch.setattr(engine, "solve", _CutAt(engine.solve, 2))
    summary = run([j.to_dict() for j in jobs])
    assert summary["counts"] == {"found": 1, "handed_back": 3}
    got = {x.job_key: x for x in collect(r, batch_id)}
    assert list(got) == [jobs[0].key]  # no record for the cut job: nothing hides its answer
    # The three undecided jobs went back as one task; the cut one is blamed one attempt.
    assert _queued_chunks(r) == [[j.to_dict() for j in jobs[1:]]]
    led = Ledger.for_batch(batch_id)
    assert r.hgetall(led.attempts) == {jobs[1].key: "1"}
    assert set(r.hkeys(led.requeued)) == {j.key for j in jobs[1:]}
    assert not r.hkeys(led.started)  # released: another task may claim them at once

    # The handed-back task runs them (the stand-in cuts no more): every job decided.
    r.delete(keys.QUEUE)
    summary = run([j.to_dict() for j in jobs[1:]])
    assert summary["counts"] == {"found": 3}
    got = {x.job_key: x for x in collect(r, batch_id)}
    assert {x.status for x in got.values()} == {"found"}
    assert got[jobs[1].key].attempts == 2 and got[jobs[2].key].attempts == 1
    assert batch_status(r, batch_id)["complete"]


@pytest.mark.redis
def test_a_job_cut_at_every_attempt_ends_undecided_never_error(chunk, monkeypatch):
    """KT_MAX_ATTEMPTS = 2: the second cut of the same job records it as unknown/time_limit
    (a job that never fits its task's time), and the jobs after it are handed back."""
    r, batch_id, jobs, run = chunk
    cut = _CutAt(engine.solve, 1, 2)  # the first job of each of two tasks
    monkeypatch.setattr(engine, "solve", cut)
    run([j.to_dict() for j in jobs])
    r.delete(keys.QUEUE)
    summary = run([j.to_dict() for j in jobs])
    assert summary["counts"] == {"unknown": 1, "handed_back": 3}
    rec = {x.job_key: x for x in collect(r, batch_id)}[jobs[0].key]
    assert (rec.status, rec.reason, rec.error_type, rec.attempts) == (
        "unknown",
        "time_limit",
        None,
        2,
    )
    assert _queued_chunks(r) == [[j.to_dict() for j in jobs[1:]]]
    r.delete(keys.QUEUE)
    run([j.to_dict() for j in jobs[1:]])
    statuses = [x.status for x in collect(r, batch_id)]
    assert sorted(statuses) == ["found", "found", "found", "unknown"]
    assert batch_status(r, batch_id)["complete"]


@pytest.mark.redis
def test_the_soft_limit_between_two_jobs_hands_back_the_rest_unblamed(chunk, monkeypatch):
    r, batch_id, jobs, run = chunk
    # ChunkClaim.ready runs before each job: the limit lands after the first job is done.
    cut = _CutAt(chunk_claims.ChunkClaim.ready, 2)
    monkeypatch.setattr(chunk_claims.ChunkClaim, "ready", lambda self, *a: cut(self, *a))
    summary = run([j.to_dict() for j in jobs])
    assert summary["counts"] == {"found": 1, "handed_back": 3}
    assert [x.job_key for x in collect(r, batch_id)] == [jobs[0].key]
    assert _queued_chunks(r) == [[j.to_dict() for j in jobs[1:]]]
    assert not r.hgetall(Ledger.for_batch(batch_id).attempts)  # no job was running


# -- count sub-jobs: the fixed task limit, and the same hand-back ---------------------------------
@pytest.mark.redis
def test_count_subjobs_cut_by_the_soft_limit_are_handed_back_and_the_total_holds(
    task_env, monkeypatch
):
    """5x5 has 1728 directed open tours (OEIS A165134): a count whose second sub-job is cut by
    the task's limit hands the rest back, and counting them later gives the exact total."""
    from knights_tour.tasks import count_subjobs

    r = connect(task_env)
    plan = plan_count(Board(5, 5))
    cid = count_store.count_id_for(plan)
    count_store.register_count(r, cid, plan)
    dicts = [sj.to_dict() for sj in plan.subjobs]
    cut = _CutAt(SubJob.run, 2)
    monkeypatch.setattr(SubJob, "run", lambda self: cut(self))
    summary = count_subjobs.run(cid, dicts)
    assert (summary["ran"], summary["errors"], summary["handed_back"]) == (1, 0, len(dicts) - 1)
    assert set(count_store.load_partials(r, cid)) == {dicts[0]["key"]}
    assert _queued_chunks(r) == [dicts[1:]]
    assert r.hgetall(Ledger.for_count(cid).attempts) == {dicts[1]["key"]: "1"}

    r.delete(keys.QUEUE)
    summary = count_subjobs.run(cid, dicts[1:])  # the stand-in cuts no more
    assert summary["ran"] == len(dicts) - 1 and summary["handed_back"] == 0
    assert count_store.assemble_count(r, cid, plan).total == 1728


@pytest.mark.redis
def test_a_subjob_counted_just_before_the_limit_keeps_its_count(task_env, monkeypatch):
    """The limit can land after a sub-job's partial count is stored and before it is marked
    done; even at the last attempt its count stays (no error entry over it), only the rest go
    back, and the total is still A165134(5) = 1728."""
    from knights_tour.tasks import count_subjobs

    monkeypatch.setenv("KT_MAX_ATTEMPTS", "1")
    get_settings.cache_clear()
    r = connect(task_env)
    plan = plan_count(Board(5, 5))
    cid = count_store.count_id_for(plan)
    count_store.register_count(r, cid, plan)
    dicts = [sj.to_dict() for sj in plan.subjobs]
    # the limit lands once the first partial count is stored (with its lease bookkeeping)
    monkeypatch.setattr(count_store, "save_partial", _CutAfter(count_store.save_partial, 1))
    summary = count_subjobs.run(cid, dicts)
    assert summary["errors"] == 0 and summary["handed_back"] == len(dicts) - 1
    first = count_store.load_partials(r, cid)[dicts[0]["key"]]
    assert first.count is not None and first.error is msgspec.UNSET
    assert _queued_chunks(r) == [dicts[1:]]

    r.delete(keys.QUEUE)
    count_subjobs.run(cid, dicts[1:])
    assert count_store.assemble_count(r, cid, plan).total == 1728
