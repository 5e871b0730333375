"""What a worker checks of a task message before Celery takes it
(:func:`knights_tour.worker.messages.body_problem`), how a message's body and ``argsrepr`` are
written (jobs as structs, read back as their dicts), and how a write refused by a reachable
Redis is told from other errors (:func:`knights_tour.store.memory.write_refusal`)."""

from __future__ import annotations

import json
import reprlib

import pytest
import redis

from knights_tour.batches.jobs import Job, wire_form
from knights_tour.errors import StorageFullError
from knights_tour.store.memory import write_refusal
from knights_tour.worker.messages import (
    TASK_COLLECT,
    TASK_COUNT_SUBJOBS,
    TASK_RUN_JOBS,
    TASK_SUBMIT_SWEEP,
    args_repr,
    body_problem,
    encode_body,
)

pytestmark = pytest.mark.unit

JOBS = [
    Job(6, 8, (2, 3)),
    Job(5, 5, (0, 4), solver="cpsat", closed=True, verify="cpsat", time_limit_s=2.5),
    Job(7, 7, (3, 3), time_limit_s=4, exhaustive=True, node_limit=1000),
]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        (TASK_RUN_JOBS, ["b1", [{"rows": 5}]]),
        (TASK_COUNT_SUBJOBS, ["c1", []]),
        (TASK_SUBMIT_SWEEP, [{"name": "s"}]),
        (TASK_COLLECT, []),
    ],
)
def test_the_tasks_of_this_release_pass(name, args):
    assert body_problem(name, [args, {}, {"callbacks": None}]) is None


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("knights_tour.nope", [[], {}, {}], "unknown task 'knights_tour.nope'"),
        (None, [[], {}, {}], "unknown task None"),
        (TASK_RUN_JOBS, {}, "not Celery's [args, kwargs, embed]"),
        (TASK_RUN_JOBS, [["b", []], {}], "not Celery's [args, kwargs, embed]"),
        (TASK_RUN_JOBS, [["b", []], [], {}], "not Celery's [args, kwargs, embed]"),
        (TASK_RUN_JOBS, [["b"], {}, {}], "takes arguments (str, list), got (str)"),
        (TASK_RUN_JOBS, [[1, 2], {}, {}], "takes arguments (str, list), got (int, int)"),
        (TASK_RUN_JOBS, [["b", [], {}], {}, {}], "got (str, list, dict)"),
        (TASK_RUN_JOBS, [[], {"batch_id": "b"}, {}], "takes no keyword arguments, got batch_id"),
        (TASK_COLLECT, [["x"], {}, {}], "takes arguments (), got (str)"),
    ],
)
def test_a_body_of_another_shape_says_why(name, body, says):
    problem = body_problem(name, body)
    assert problem is not None and says in problem


OOM = "command not allowed when used memory > 'maxmemory'."


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (redis.exceptions.OutOfMemoryError(OOM), f"OOM {OOM}"),
        (
            redis.ResponseError(f"Error running script (call to f_1): @user_script:25: -OOM {OOM}"),
            f"OOM {OOM}",
        ),
        (
            redis.ResponseError("MISCONF Redis is configured to save RDB snapshots, but it failed"),
            "MISCONF Redis is configured to save RDB snapshots, but it failed",
        ),
        (
            redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
            "READONLY You can't write against a read only replica.",
        ),
        (StorageFullError(f"OOM {OOM}"), f"OOM {OOM}"),
    ],
)
def test_a_refused_write_gives_redis_reason(exc, reason):
    assert write_refusal(exc) == reason


@pytest.mark.parametrize(
    "exc",
    [
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        redis.ResponseError("ERR value OOM is not an integer"),
        redis.ConnectionError("Connection refused"),
        ValueError("OOM"),
    ],
)
def test_other_errors_are_not_refused_writes(exc):
    assert write_refusal(exc) is None


@pytest.mark.parametrize("count", [1, 3])
def test_a_body_of_job_structs_reads_back_as_the_jobs_dicts(count):
    jobs = JOBS[:count]
    body = ["b1", [wire_form(j) for j in jobs]], {}, {"callbacks": None, "chord": None}
    decoded = json.loads(encode_body(body))
    assert decoded == [["b1", [j.to_dict() for j in jobs]], {}, {"callbacks": None, "chord": None}]
    assert [Job.from_dict(d) for d in decoded[0][1]] == jobs
    assert body_problem(TASK_RUN_JOBS, decoded) is None


def test_the_argsrepr_of_job_structs_is_that_of_their_dicts():
    plain = reprlib.Repr()
    plain.maxlist, plain.maxdict, plain.maxlevel, plain.maxstring = 2, 8, 4, 80
    for count in (1, 3):
        jobs = JOBS[:count]
        shown = args_repr(["b1", [wire_form(j) for j in jobs]])
        assert shown == plain.repr(["b1", [j.to_dict() for j in jobs]])
    assert shown.startswith("['b1', [{") and shown.endswith(", ...]]")


def test_a_body_that_is_not_json_is_refused():
    with pytest.raises(TypeError):
        encode_body([[object()], {}, {}])
