"""What the task messages are called, how urgent they are and how they are written: names,
priorities, the default broker, the body's JSON and its ``argsrepr``, without Celery.

The Celery app (:mod:`knights_tour.worker.celery`) and the task bodies (:mod:`knights_tour.tasks`)
use these names; so do the modules of :mod:`knights_tour.batches` and
:mod:`knights_tour.counting` that build, drop or count messages, which must not load Celery to
do it (``ktour status`` or ``draw`` import no Celery or kombu module:
tests/test_architecture.py). The queue's own name is a Redis key:
:data:`knights_tour.store.keys.QUEUE`.
"""

from __future__ import annotations

import hashlib
import json
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
"""Broker used when ``KT_REDIS_URL`` is not set (``ktour run`` always sets it for its workers)."""

# -- task names: the only place they are spelled (the bodies are in knights_tour.tasks) --------

TASK_RUN_JOBS = "knights_tour.run_jobs"
"""The task that runs a chunk of jobs of a batch (arguments: batch id, list of job dicts)."""

TASK_COUNT_SUBJOBS = "knights_tour.count_subjobs"
"""The task that runs count sub-jobs (arguments: count id, list of sub-job dicts)."""

TASK_SUBMIT_SWEEP = "knights_tour.submit_sweep"
"""The task a beat sweep entry sends (argument: the sweep as a JSON dict)."""

TASK_COLLECT = "knights_tour.collect_reports"
"""The task the beat collect entry sends (no arguments)."""

TASK_ARGUMENTS: dict[str, tuple[type, ...]] = {
    TASK_RUN_JOBS: (str, list),
    TASK_COUNT_SUBJOBS: (str, list),
    TASK_SUBMIT_SWEEP: (dict,),
    TASK_COLLECT: (),
}
"""The JSON type of each positional argument of each task (no keyword arguments)."""


def body_problem(name: object, body: object) -> str | None:
    """Why the decoded body of a task message named ``name`` cannot be run, or None if it can.

    ``body`` is Celery's message body (protocol 2: ``[args, kwargs, embed]``); the task must be
    one of :data:`TASK_ARGUMENTS` and its arguments of the types given there, with no keyword
    arguments. A message sent by another release whose tasks take other arguments fails here.
    The items inside (jobs, sub-jobs) are checked where they run.
    """
    if name not in TASK_ARGUMENTS:
        return f"unknown task {name!r}"
    if not (isinstance(body, list) and len(body) == 3):
        return "the body is not Celery's [args, kwargs, embed]"
    args, kwargs, embed = body
    if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(embed, dict):
        return "the body is not Celery's [args, kwargs, embed]"
    if kwargs:
        return f"{name} takes no keyword arguments, got {', '.join(sorted(map(str, kwargs)))}"
    want = TASK_ARGUMENTS[str(name)]
    shape = ", ".join(t.__name__ for t in want)
    if len(args) != len(want) or not all(
        isinstance(a, t) for a, t in zip(args, want, strict=False)
    ):
        got = ", ".join(type(a).__name__ for a in args)
        return f"{name} takes arguments ({shape}), got ({got})"
    return None


DP_KIND = "dp"
"""``kind`` of a frontier-DP count sub-job's dict (enumeration sub-jobs carry none)."""


def is_dp(raw: object) -> bool:
    """True if ``raw`` (a count sub-job's dict, untrusted) is a frontier-DP sub-job."""
    return isinstance(raw, dict) and raw.get("kind") == DP_KIND


# -- a chunk task's items: untrusted, handed back at the task's time limit ----------------------

ItemDict = dict[str, Any]
"""One item of a chunk task's message as JSON decodes it (a job or a count sub-job; untrusted
until its own type validates it)."""

Send = Callable[[list[ItemDict]], None]
"""Puts one task for a list of item dicts (jobs of the running batch, sub-jobs of the running
count) on the queue, served first: the hand-back at a task's time limit."""

TIME_LIMIT_EXCEPTIONS = frozenset({"SoftTimeLimitExceeded"})
"""Names of the exceptions a worker's signal handler raises inside a running job when its time
is up (Celery/billiard's soft time limit); matched by name, so that the code of a job need
not import Celery."""


class TaskLimitReached(Exception):
    """The task's soft time limit interrupted the item being run (its result is not kept)."""


def at_task_limit(exc: BaseException) -> bool:
    """True if ``exc`` is the task's soft time limit (matched by name: no Celery here)."""
    return isinstance(exc, TaskLimitReached) or type(exc).__name__ in TIME_LIMIT_EXCEPTIONS


def invalid_key(item: object) -> str:
    """A stable key for an item dict that failed validation (so a re-delivery adds no second
    record or entry): ``invalid:`` and 16 hex digits of the SHA-1 of its sorted JSON."""
    try:
        text = json.dumps(item, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(item)
    return "invalid:" + hashlib.sha1(text.encode()).hexdigest()[:16]


# -- message priorities ---------------------------------------------------------------------

BATCH_PRIORITY = 6
"""Priority of a batch's tasks. With the Redis transport a worker pops priority 0 first, then 3,
6, 9 (kombu ``priority_steps``; each step is its own list), so re-sent lost jobs
(:data:`RECOVERY_PRIORITY`) overtake the queued rest of the batch instead of waiting behind it."""

RECOVERY_PRIORITY = 0
"""Priority of jobs re-sent by recovery (and of a soft-time-limit hand-off): served first."""

OPS_PRIORITY = 0
"""Priority of the beat entries: a collection or a sweep submission is not queued behind the
chunks of running batches (sent at :data:`BATCH_PRIORITY`)."""

# -- how a message is written ---------------------------------------------------------------

_BODY_ENCODER = msgspec.json.Encoder()


class _ArgsRepr(reprlib.Repr):
    """A bounded repr that shows a msgspec struct as the JSON object it is sent as."""

    def repr_instance(self, x: Any, level: int) -> str:
        if isinstance(x, msgspec.Struct):
            return self.repr1(msgspec.json.decode(_BODY_ENCODER.encode(x)), level)
        return super().repr_instance(x, level)


_ARGS_REPR = _ArgsRepr()
_ARGS_REPR.maxlist = 2
_ARGS_REPR.maxdict = 8
_ARGS_REPR.maxlevel = 4
_ARGS_REPR.maxstring = 80
_ARGS_REPR.maxother = 80


def args_repr(args: Sequence[Any]) -> str:
    """A task's ``argsrepr`` header (shown in worker logs and monitors): a list's first two
    items, strings cut at 80 characters, at most four levels deep. Celery's own (a
    ``saferepr`` of every argument) would walk a chunk's whole job list."""
    return _ARGS_REPR.repr(list(args))


def encode_body(body: Any) -> bytes:
    """A task message's body (protocol 2: ``(args, kwargs, embed)``) as JSON, encoded in C:
    JSON-ready values, and msgspec structs as JSON objects of their fields.

    Raises
    ------
    TypeError
        For a value msgspec cannot encode.
    """
    return _BODY_ENCODER.encode(body)


__all__ = [
    "DEFAULT_REDIS_URL",
    "TASK_RUN_JOBS",
    "TASK_COUNT_SUBJOBS",
    "TASK_SUBMIT_SWEEP",
    "TASK_COLLECT",
    "TASK_ARGUMENTS",
    "body_problem",
    "BATCH_PRIORITY",
    "RECOVERY_PRIORITY",
    "OPS_PRIORITY",
    "DP_KIND",
    "is_dp",
    "ItemDict",
    "Send",
    "TIME_LIMIT_EXCEPTIONS",
    "TaskLimitReached",
    "at_task_limit",
    "invalid_key",
    "args_repr",
    "encode_body",
]
