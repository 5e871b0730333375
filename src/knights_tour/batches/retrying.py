"""Retrying a batch's jobs that ended with a given status (``ktour retry``): their records are
retired to the jobs' lists of earlier records, the jobs stored with the batch take the options
asked for (another solver, time or node limit, an exhaustive search), and the batch is resumed
(:func:`knights_tour.batches.client.resume_batch`), which sends each job without a record once.

Replacing a record is explicit: nothing but a retry moves one, and a retry moves each record
at most once (:func:`knights_tour.batches.records.retire_records`: one script call checks the
status and moves the record together). The job's next record is stored as its first one, under
the rules of every record (:mod:`knights_tour.batches.saving`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

import msgspec
import redis

from knights_tour.batches.jobs import Job
from knights_tour.batches.progress import get_batch_meta
from knights_tour.batches.records import retire_records
from knights_tour.batches.store import parse_job
from knights_tour.errors import KnightsTourError
from knights_tour.settings import get_settings
from knights_tour.store import keys, registry
from knights_tour.tours.record import Status
from knights_tour.worker.ledger import text

DEFAULT_STATUSES: tuple[str, ...] = (Status.UNKNOWN.value, Status.ERROR.value)
"""The statuses ``ktour retry`` retries unless told otherwise: the undecided ones."""


def parse_statuses(text: str) -> tuple[str, ...]:
    """The status names of a comma-separated list (``"unknown,error"``), each once, in the
    order given.

    Raises
    ------
    KnightsTourError
        For an empty list or a name that is not a status (the known ones are named).
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    known = [s.value for s in Status]
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise KnightsTourError(
            f"unknown status {', '.join(map(repr, bad)) or repr(text)}; known: {', '.join(known)}"
        )
    return tuple(dict.fromkeys(names))


class JobChanges(TypedDict, total=False):
    """:class:`~knights_tour.batches.jobs.Job` fields a retry sets on every retried job."""

    solver: str
    time_limit_s: float
    """Seconds."""
    node_limit: int
    exhaustive: bool


def retry_jobs(
    r: redis.Redis,
    batch_id: str,
    statuses: Iterable[str] = DEFAULT_STATUSES,
    changes: JobChanges | None = None,
) -> list[str]:
    """Retire the records of ``batch_id``'s jobs whose status is one of ``statuses`` and store
    the jobs again with ``changes`` applied, so that the next resume sends them. Jobs without a
    record are left as they are (a resume sends them anyway).

    Parameters
    ----------
    statuses : iterable of str
        Status names (:func:`parse_statuses`).
    changes : mapping, optional
        :class:`~knights_tour.batches.jobs.Job` fields to set on every retried job: ``solver``,
        ``time_limit_s`` (seconds), ``node_limit``, ``exhaustive``. Every retried job is
        validated before any record is moved.

    Returns
    -------
    list of str
        The keys of the retried jobs (a job's key changes with its solver).

    Raises
    ------
    KnightsTourError
        For an unknown batch; InvalidJobError if a retried job is not valid with ``changes``
        (e.g. a board too large for the solver asked); CorruptKeyError (naming the key) for a
        job entry that is not a job. Nothing is retired then.
    redis.ConnectionError, redis.TimeoutError
        If Redis is unreachable.
    """
    get_batch_meta(r, batch_id)
    wanted = set(statuses)
    picked = [
        text(k)
        for k, v in r.hgetall(keys.batch_status(batch_id)).items()
        if text(v).partition("|")[0] in wanted
    ]
    if not picked:
        return []
    stored = r.hmget(keys.batch_jobs(batch_id), picked)
    retried: dict[str, tuple[str, str]] = {}
    for key, raw in zip(picked, stored, strict=True):
        if raw is None:  # a record under a key that is no job of the batch: nothing to run
            continue
        job = parse_job(batch_id, key, raw)
        if changes:
            job = msgspec.structs.replace(job, **changes)
            job = Job.from_dict(job.to_dict())  # validated with its new options
        retried[key] = (job.key, registry.dumps(job.to_dict()))
    return retire_records(r, batch_id, wanted, retried, int(get_settings().result_ttl_s))


__all__ = ["DEFAULT_STATUSES", "JobChanges", "parse_statuses", "retry_jobs"]
