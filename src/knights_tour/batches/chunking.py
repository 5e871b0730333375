"""How a batch's jobs are cut into tasks: chunks sized by the jobs' estimated cost.

What a task costs around its jobs (a message, a claim, a store of its records: a few Redis
calls each) is paid per chunk, so small jobs travel in large chunks; large jobs (big boards,
CP-SAT) travel in small ones, so that the last chunks of a batch do not leave workers idle.
Each chunk holds about :data:`TARGET_CHUNK_S` seconds of estimated work (less for a small
batch, so that it still spreads over :data:`MIN_CHUNKS` tasks, but never less than
:data:`MIN_CHUNK_S`, what a task costs around its jobs: a batch whose whole work is a few
milliseconds travels in one or two tasks), and at most :data:`MAX_CHUNK` jobs. The estimate
only sizes chunks; it is rough on purpose (linear in the squares of the board, each backend's
:class:`~knights_tour.solvers.CostModel` in its descriptor), and a wrong estimate costs
balance, never correctness.
Measured costs are in ``benchmarks/README.md`` (``bench_redis_cost.py``, ``bench_scale.py``).

A chunk's Celery time limits are derived from it, not fixed (:func:`chunk_time_limits`): its
soft limit is the sum of its jobs' budgets (``time_limit_s``, else ``KT_JOB_TIME_LIMIT_S``:
each covers its job's solver and cross-check) plus ``KT_TASK_MARGIN_S``, its hard limit
``KT_TASK_GRACE_S`` later, so no task limit cuts a job inside its budget. The worker reads
them from the message it receives (:class:`knights_tour.tasks.ChunkRequest`), with its own
settings, since its ``KT_JOB_TIME_LIMIT_S`` is the one its jobs run with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knights_tour.batches.jobs import Job
from knights_tour.errors import InvalidJobError
from knights_tour.settings import Settings, get_settings
from knights_tour.solvers import check_limits, get_backend

TARGET_CHUNK_S = 0.25
"""Estimated seconds of work per chunk."""

MIN_CHUNKS = 16
"""A batch is cut into at least this many chunks when it has that many jobs (balance across
workers matters more than per-task cost for a small batch)."""

MIN_CHUNK_S = 0.01
"""Estimated seconds of work per chunk at least: about what a task costs a worker around its
jobs (its message, claim and store; ``bench_pipeline.py`` in ``benchmarks/README.md``). Below
it, spreading a batch over more tasks costs more than the work it spreads."""

MAX_CHUNK = 256
"""Jobs per chunk at most (a chunk's message and its stored records stay small)."""


def estimated_cost_s(job: Job) -> float:
    """A rough estimate of ``job``'s run time in seconds, for sizing chunks only: its
    backend's :meth:`~knights_tour.solvers.CostModel.chunk_cost_s` on the board, plus its
    cross-check's backend (``verify``) priced the same way."""
    squares = job.rows * job.cols
    cost = get_backend(job.solver).cost.chunk_cost_s(squares)
    if job.verify is not None:
        cost += get_backend(job.verify).cost.chunk_cost_s(squares)
    return cost


def job_budget_s(job_dict: Any, default_s: float) -> float:
    """The time budget in seconds of one job of a task message (untrusted: a dict as
    :meth:`Job.to_dict` gives it): its ``time_limit_s`` when that is a valid budget
    (:func:`knights_tour.solvers.check_limits`), else ``default_s`` (what the job runs with when it
    names none; an invalid job becomes an error record at once, so its budget only pads)."""
    tl = job_dict.get("time_limit_s") if isinstance(job_dict, dict) else None
    if tl is None:
        return default_s
    try:
        check_limits(tl, None)
    except InvalidJobError:
        return default_s
    return float(tl)


def chunk_time_limits(job_dicts: Any, settings: Settings | None = None) -> tuple[float, float]:
    """The Celery ``(soft, hard)`` time limits in seconds of a task that runs ``job_dicts``.

    ``soft`` = the sum of the jobs' budgets (:func:`job_budget_s`, default
    ``KT_JOB_TIME_LIMIT_S``) + ``KT_TASK_MARGIN_S``; ``hard`` = ``soft`` +
    ``KT_TASK_GRACE_S``. A task whose soft limit is reached all the same (a job that overran
    its budget, a stalled machine) hands the jobs it has not decided back
    (:func:`knights_tour.batches.execution.run_chunk`); at the hard limit its process is
    killed and recovery re-sends them (:mod:`knights_tour.worker.recovery`).

    Parameters
    ----------
    job_dicts : list of dict
        The task message's jobs (untrusted; anything but a list counts as one job).
    settings : Settings, optional
        Default: :func:`knights_tour.settings.get_settings`.
    """
    settings = settings or get_settings()
    dicts = job_dicts if isinstance(job_dicts, list) else [job_dicts]
    budget = sum(job_budget_s(d, settings.job_time_limit_s) for d in dicts)
    soft = budget + settings.task_margin_s
    return soft, soft + settings.task_grace_s


def plan_chunks(jobs: Sequence[Job], chunk_size: int | None = None) -> list[list[Job]]:
    """Cut ``jobs`` (in the order given) into consecutive chunks.

    Parameters
    ----------
    jobs : sequence of Job
    chunk_size : int, optional
        A fixed number of jobs per chunk; None (default): sized by estimated cost (see the
        module docstring).

    Returns
    -------
    list of list of Job
        Every job once, in order.

    Raises
    ------
    ValueError
        If ``chunk_size`` < 1.
    """
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError("chunk size must be at least 1")
        return [list(jobs[i : i + chunk_size]) for i in range(0, len(jobs), chunk_size)]
    priced: dict[tuple[str, str | None, int], float] = {}  # a batch has few kinds of job
    costs = []
    for j in jobs:
        kind = (j.solver, j.verify, j.rows * j.cols)
        cost = priced.get(kind)
        if cost is None:
            cost = priced[kind] = estimated_cost_s(j)
        costs.append(cost)
    target = max(min(TARGET_CHUNK_S, sum(costs) / MIN_CHUNKS), MIN_CHUNK_S)
    chunks: list[list[Job]] = []
    current: list[Job] = []
    load = 0.0
    for job, cost in zip(jobs, costs, strict=True):
        if current and (load + cost > target or len(current) >= MAX_CHUNK):
            chunks.append(current)
            current, load = [], 0.0
        current.append(job)
        load += cost
    if current:
        chunks.append(current)
    return chunks


__all__ = [
    "TARGET_CHUNK_S",
    "MIN_CHUNKS",
    "MAX_CHUNK",
    "estimated_cost_s",
    "plan_chunks",
    "job_budget_s",
    "chunk_time_limits",
]
