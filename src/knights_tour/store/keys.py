"""Redis key names and the Celery queue name: the ONLY module that spells them.

Layout (all keys start with :data:`PREFIX`, so the project can share a Redis database)::

    kt:batches                   sorted set   batch_id, scored by creation time (unix seconds)
    kt:batch:{id}                hash         "meta" -> batch meta JSON (created, params, ...),
                                              "total" -> number of jobs in the batch
    kt:batch:{id}:jobs           hash         job_key -> job JSON (the job as submitted)
    kt:batch:{id}:records        hash         job_key -> record (the first one stored)
    kt:batch:{id}:status         hash         job_key -> "status|mismatch" (small, for polling)
    kt:batch:{id}:tally          hash         status -> jobs recorded with it, "mismatch" -> n
    kt:lease:{token}             string (TTL) the lease of one worker process (its token); the
                                              process's heartbeat renews it, so it vanishes
                                              soon after the process dies or stalls
    kt:workers                   sorted set   token -> when its lease runs out (Redis clock,
                                              unix s), set as it opens or renews; entries kept
                                              a day after (``ktour status``: who serves)
    kt:batch:{id}:started        hash         job_key -> "token|mode|claim": the process that
                                              claimed it; mode p (plain chunk), c (careful
                                              chunk, not started), r (started by a careful
                                              chunk); cleared with the record
    kt:batch:{id}:attempts       hash         job_key -> worker deaths blamed on the job since
                                              its last record (capped by KT_MAX_ATTEMPTS)
    kt:batch:{id}:requeued       hash         job_key -> unix time recovery last re-sent it
    kt:batch:{id}:earlier:{job}  list         the job's records replaced by ``ktour retry``,
                                              oldest first (the current one is in records)
    kt:batch:{id}:events         channel      pub/sub, not a key: "complete" / "cancelled"
    kt:collect:lock              string       redis-py Lock held by the running collection
    kt:collect:done              hash         batch_id -> collection marker JSON (claimed/written)
    kt:collect:last              string       JSON of the last collection (time, batches written)
    kt:summary:latest            string       summary JSON of the latest report written
    kt:counts                    sorted set   count_id, scored by creation time (tour counts)
    kt:count:{id}                hash         "meta" -> count meta JSON, "total" -> sub-jobs,
                                              "report" -> final report JSON, "generation" ->
                                              token of this registration (a new one after
                                              --fresh; a DP sub-job of another is not stored)
    kt:count:{id}:subjobs        hash         sub-job key -> sub-job JSON (counting.SubJob)
    kt:count:{id}:partials       hash         sub-job key -> partial count JSON (re-delivery
                                              overwrites with the same number)
    kt:count:{id}:started        hash         sub-job key -> token that claimed it (as for jobs)
    kt:count:{id}:attempts       hash         sub-job key -> worker deaths blamed on it
    kt:count:{id}:requeued       hash         sub-job key -> unix time recovery last re-sent it
    kt:count:{id}:sent           set          the sub-job keys a client sent
                                              (a DP count holds classes back until their
                                              trunk's layer is kept: recovery re-sends only
                                              what was sent)
    kt:count:{id}:events         channel      pub/sub, not a key: "complete"
    kt:active:batches            set          batch ids the workers' recovery timer watches
    kt:active:counts             set          count ids the workers' recovery timer watches
    kt:resume:{digest}           string       id of the latest unfinished batch asked for with
                                              these jobs and params (``ktour run`` resumes it)
    kt:node:{name}               hash         "processed" / "failed" -> jobs a Celery worker node
                                              recorded / recorded as error since it started
    kt:embedded:users            set          "pid:token" of each process using an embedded
                                              server (the last one to leave shuts it down)
    kt:dead-letters              list         JSON of each malformed queue message a worker set
                                              aside (newest first, capped), with why
    kt:write-probe               string (TTL) written now and then to learn whether Redis
                                              accepts writes (OOM, MISCONF, read-only replica)

Records are per batch, so ``collect BATCH`` returns exactly that batch's records, and a job that
is delivered twice (Celery late acknowledgement, a resubmission) keeps the one record stored
first instead of adding a duplicate. Only ``ktour retry`` replaces a record: it moves the record
to the job's ``earlier`` list and the job's next record is stored as a first one. Keys do not
expire unless ``KT_RESULT_TTL_S`` > 0.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

PREFIX = "kt:"
"""Common prefix of every key this project writes."""

QUEUE = "knights_tour"
"""Name of the Celery queue tour jobs travel on (workers listen with ``-Q knights_tour``)."""


def batches() -> str:
    """Sorted set of all batch ids, scored by creation time."""
    return f"{PREFIX}batches"


def batch(batch_id: str) -> str:
    """Hash with the batch's ``meta`` JSON and ``total``; its ``state`` (cancelled) and
    ``submitted`` (its last submission's times) when set."""
    return f"{PREFIX}batch:{batch_id}"


def batch_jobs(batch_id: str) -> str:
    """Hash job_key -> job JSON."""
    return f"{PREFIX}batch:{batch_id}:jobs"


def batch_records(batch_id: str) -> str:
    """Hash job_key -> record JSON."""
    return f"{PREFIX}batch:{batch_id}:records"


def batch_events(batch_id: str) -> str:
    """Pub/sub channel (not a key): ``"complete"`` when the batch has a result for every job,
    ``"cancelled"`` when it is cancelled (:mod:`knights_tour.store.events`)."""
    return f"{PREFIX}batch:{batch_id}:events"


def batch_status(batch_id: str) -> str:
    """Hash job_key -> ``"status|0"`` or ``"status|1"`` (mismatch flag), for cheap polling."""
    return f"{PREFIX}batch:{batch_id}:status"


def collect_lock() -> str:
    """Name of the redis-py ``Lock`` that lets one collection run at a time."""
    return f"{PREFIX}collect:lock"


def collected() -> str:
    """Hash batch_id -> marker JSON of its collection (set with HSETNX: one claim per batch)."""
    return f"{PREFIX}collect:done"


def last_collection() -> str:
    """JSON of the last collection run (finished time, batches reported)."""
    return f"{PREFIX}collect:last"


def latest_summary() -> str:
    """Summary JSON of the most recent report written by a collection."""
    return f"{PREFIX}summary:latest"


def batch_tally(batch_id: str) -> str:
    """Hash status -> number of jobs with a record of that status, and ``"mismatch"`` -> number
    of records with mismatch true: counted as each job's first record is stored, so progress is
    read without reading every job."""
    return f"{PREFIX}batch:{batch_id}:tally"


def batch_keys(batch_id: str) -> list[str]:
    """Every key belonging to one batch (for expiry and deletion)."""
    return [
        batch(batch_id),
        batch_jobs(batch_id),
        batch_records(batch_id),
        batch_status(batch_id),
        batch_tally(batch_id),
    ]


def lease(token: str) -> str:
    """String with a TTL: the lease of the worker process whose token is ``token`` (one per
    process, shared by every job it holds in any batch or count).

    Written by :mod:`knights_tour.worker.leases`; renewed by the process's heartbeat
    (:mod:`knights_tour.worker.lease_keeper`), so it disappears within ``KT_LEASE_S`` after the
    process dies or stalls, and is never written again once it has lapsed.
    """
    return f"{PREFIX}lease:{token}"


def workers() -> str:
    """Sorted set token -> when that worker process's lease runs out (Redis server clock, unix
    seconds), written with each opening and renewal of a :func:`lease`; a lapsed lease's entry
    stays (dropped a day later), so the time the last lease ended can be read back
    (:mod:`knights_tour.worker.holders`)."""
    return f"{PREFIX}workers"


def lease_prefix() -> str:
    """The common prefix of every :func:`lease` key (Lua scripts append the token)."""
    return f"{PREFIX}lease:"


def batch_started(batch_id: str) -> str:
    """Hash job_key -> ``token|mode|claim``: the token of the process that claimed the job,
    its mode (``p`` plain chunk, ``c`` careful chunk not started yet, ``r`` started by a
    careful chunk) and the claim's id (:mod:`knights_tour.worker.leases`); removed when the
    job's record lands or recovery re-sends it."""
    return f"{PREFIX}batch:{batch_id}:started"


def batch_attempts(batch_id: str) -> str:
    """Hash job_key -> worker deaths blamed on the job since its last record (poison cap)."""
    return f"{PREFIX}batch:{batch_id}:attempts"


def batch_requeued(batch_id: str) -> str:
    """Hash job_key -> unix time recovery last re-sent the job (cleared when a task claims it)."""
    return f"{PREFIX}batch:{batch_id}:requeued"


def counts() -> str:
    """Sorted set of all count ids (``ktour count``), scored by creation time."""
    return f"{PREFIX}counts"


def count(count_id: str) -> str:
    """Hash with the count's ``meta`` JSON, ``total`` (sub-jobs), final ``report`` JSON and
    ``generation`` (:func:`knights_tour.counting.store.count_generation`)."""
    return f"{PREFIX}count:{count_id}"


def count_events(count_id: str) -> str:
    """Pub/sub channel (not a key): ``"complete"`` when the count has an entry for every
    sub-job (:mod:`knights_tour.store.events`)."""
    return f"{PREFIX}count:{count_id}:events"


def count_subjobs(count_id: str) -> str:
    """Hash sub-job key -> sub-job JSON."""
    return f"{PREFIX}count:{count_id}:subjobs"


def count_partials(count_id: str) -> str:
    """Hash sub-job key -> partial count JSON (count, nodes, elapsed_s, worker)."""
    return f"{PREFIX}count:{count_id}:partials"


def count_dp_progress(count_id: str) -> str:
    """Hash sweep key -> JSON of the last layer a worker checkpointed in a DP count's sweep
    (a trunk or a class; :func:`knights_tour.counting.store.save_dp_progress`)."""
    return f"{PREFIX}count:{count_id}:dp"


def count_started(count_id: str) -> str:
    """Hash sub-job key -> token of the process that claimed it (as :func:`batch_started`)."""
    return f"{PREFIX}count:{count_id}:started"


def count_attempts(count_id: str) -> str:
    """Hash sub-job key -> worker deaths blamed on it since its partial count."""
    return f"{PREFIX}count:{count_id}:attempts"


def count_requeued(count_id: str) -> str:
    """Hash sub-job key -> unix time recovery last re-sent it."""
    return f"{PREFIX}count:{count_id}:requeued"


def count_sent(count_id: str) -> str:
    """Set of the sub-job keys a client sent (recovery re-sends no sub-job
    that was never sent: a DP count sends its classes only once their layer is kept)."""
    return f"{PREFIX}count:{count_id}:sent"


def active_batches() -> str:
    """Set of the ids of unfinished batches (watched by every worker's recovery timer)."""
    return f"{PREFIX}active:batches"


def active_counts() -> str:
    """Set of the ids of unfinished counts (watched by every worker's recovery timer)."""
    return f"{PREFIX}active:counts"


def batch_resume(digest: str) -> str:
    """String: the id of the latest unfinished batch whose jobs and params hash to ``digest``."""
    return f"{PREFIX}resume:{digest}"


def embedded_users() -> str:
    """Set of ``"pid:token"`` entries, one per
    :class:`~knights_tour.local.embedded_redis.EmbeddedRedis` (owner or attached) using the
    embedded server."""
    return f"{PREFIX}embedded:users"


def count_keys(count_id: str) -> list[str]:
    """Every key belonging to one count (for deletion)."""
    return [
        count(count_id),
        count_subjobs(count_id),
        count_partials(count_id),
        count_dp_progress(count_id),
        count_started(count_id),
        count_attempts(count_id),
        count_requeued(count_id),
        count_sent(count_id),
    ]


__all__ = [
    "PREFIX",
    "QUEUE",
    "batches",
    "batch",
    "batch_jobs",
    "batch_records",
    "batch_status",
    "batch_tally",
    "batch_events",
    "batch_keys",
    "counts",
    "count",
    "count_subjobs",
    "count_partials",
    "count_keys",
    "collect_lock",
    "collected",
    "last_collection",
    "latest_summary",
    "lease",
    "lease_prefix",
    "batch_started",
    "batch_attempts",
    "batch_requeued",
    "embedded_users",
    "count_started",
    "count_attempts",
    "count_requeued",
    "count_sent",
    "active_batches",
    "active_counts",
    "batch_resume",
]


def batch_pattern(batch_id: str) -> str:
    """Glob (for ``SCAN MATCH``) of every key under one batch's own prefix (its jobs, records,
    leases, ...); the batch hash :func:`batch` itself is not matched."""
    return f"{batch(batch_id)}:*"


def count_pattern(count_id: str) -> str:
    """Glob (for ``SCAN MATCH``) of every key under one count's own prefix; the count hash
    :func:`count` itself is not matched."""
    return f"{count(count_id)}:*"


def batch_earlier_prefix(batch_id: str) -> str:
    """The prefix of every :func:`batch_earlier` key of a batch (Lua scripts append the job
    key); it is under :func:`batch_pattern`, so forgetting a batch deletes them."""
    return f"{batch(batch_id)}:earlier:"


def batch_earlier(batch_id: str, job_key: str) -> str:
    """List of the encoded records of ``job_key`` that ``ktour retry`` replaced, oldest first
    (:mod:`knights_tour.batches.records`)."""
    return f"{batch_earlier_prefix(batch_id)}{job_key}"


def node_counts(node: str) -> str:
    """Hash ``processed`` / ``failed`` -> the jobs the Celery worker ``node`` (``name@host``)
    recorded, and recorded as ``error``, since it started (:mod:`knights_tour.worker.nodes`)."""
    return f"{PREFIX}node:{node}"


__all__ += [
    "batch_pattern",
    "count_pattern",
    "batch_earlier_prefix",
    "batch_earlier",
    "node_counts",
]


def dead_letters() -> str:
    """List of the malformed queue messages the workers set aside, newest first: JSON
    ``{"at", "reason", "message"}`` each (:mod:`knights_tour.worker.dead_letters`)."""
    return f"{PREFIX}dead-letters"


def write_probe() -> str:
    """String written with a short TTL to learn whether Redis accepts writes
    (:func:`knights_tour.store.memory.writes_refused`)."""
    return f"{PREFIX}write-probe"


__all__ += ["dead_letters", "write_probe"]
