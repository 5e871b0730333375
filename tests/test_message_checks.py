"""What a worker checks of a task message before Celery takes it
(:func:`knights_tour.messages.body_problem`), and how a write refused by a reachable Redis is
told from other errors (:func:`knights_tour.store.memory.write_refusal`)."""

from __future__ import annotations

import pytest
import redis

from knights_tour.errors import StorageFullError
from knights_tour.messages import (
    TASK_COLLECT,
    TASK_COUNT_SUBJOBS,
    TASK_RUN_JOBS,
    TASK_SUBMIT_SWEEP,
    body_problem,
)
from knights_tour.store.memory import write_refusal

pytestmark = pytest.mark.unit


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
