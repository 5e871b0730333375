"""``ktour retry``: run again the jobs of a batch that ended ``unknown`` or ``error`` (or the
statuses asked for), optionally with another solver or larger limits, and follow the batch to
its end as ``ktour resume`` does.

The retry itself (records retired to each job's earlier records, the jobs' new options) is
:mod:`knights_tour.batches.retrying`; what follows is ``resume``'s
(:func:`knights_tour.commands._following.resume_and_follow`). Input is checked before the
backend and the batch machinery are loaded, as in :mod:`knights_tour.commands.lifecycle`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from knights_tour.batches.retrying import JobChanges, parse_statuses, retry_jobs
from knights_tour.commands._checks import check_out_path, require_positive, require_workers
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import limit_option, redis_option, workers_option
from knights_tour.commands._shared import note
from knights_tour.commands.lifecycle import (
    _following,
    _out_option,
    _reach,
    _require_chunk_size,
    _resend_chunk_option,
    _timeout_option,
)
from knights_tour.solvers import check_solver_name, solver_names

if TYPE_CHECKING:
    from knights_tour.local.backend import Backend


@click.command()
@click.argument("batch_id", metavar="BATCH")
@click.option(
    "--status",
    "statuses",
    default="unknown,error",
    show_default=True,
    metavar="LIST",
    help="Retry the jobs whose records have these statuses (comma-separated: found, "
    "no_tour, unknown, error).",
)
@click.option(
    "--solver",
    default=None,
    metavar="NAME",
    help=f"Run the retried jobs with this solver ({', '.join(solver_names())}); default: "
    "each job's own.",
)
@limit_option("time", "Time budget in seconds of each retried job (default: each job's own).")
@limit_option("node", "Engine search nodes of each retried job (default: each job's own).")
@click.option(
    "--exhaustive", is_flag=True, help="Retried jobs search without a node budget (engine)."
)
@workers_option
@_out_option
@redis_option
@_timeout_option
@_resend_chunk_option
def retry(
    batch_id: str,
    statuses: str,
    solver: str | None,
    time_limit: float | None,
    node_limit: int | None,
    exhaustive: bool,
    workers: int | None,
    out: str | None,
    redis_url: str | None,
    timeout: float | None,
    chunk_size: int | None,
) -> ExitCode:
    """Retry BATCH: run again its jobs whose records are unknown or error (--status).

    Each such record is replaced by the job's next one; the replaced records are kept as the
    job's earlier attempts ('ktour job BATCH SQUARE'), and 'collect' shows the latest. The
    retried jobs take --solver, --time-limit, --node-limit and --exhaustive when given (their
    own options otherwise). Then the batch is resumed and followed as by 'ktour resume' (its
    jobs with no record are sent too): without --redis the embedded Redis and K local
    workers; a summary table, every record written, the batch id on the last line, and the
    same exit codes.
    """
    began = time.monotonic()
    wanted = parse_statuses(statuses)
    if solver is not None:
        check_solver_name(solver)
    require_positive(timeout, "--timeout")
    require_workers(workers, redis_url)
    _require_chunk_size(chunk_size)
    check_out_path(out or "results-<batch>.jsonl")
    changes: JobChanges = {}
    if solver is not None:
        changes["solver"] = solver
    if time_limit is not None:
        changes["time_limit_s"] = time_limit
    if node_limit is not None:
        changes["node_limit"] = node_limit
    if exhaustive:
        changes["exhaustive"] = True
    _reach(redis_url)
    deadline = None if timeout is None else began + timeout

    def retire(backend: Backend) -> None:
        """The records asked for retired, once the backend is open
        (:func:`~knights_tour.batches.retrying.retry_jobs`)."""
        retried = retry_jobs(backend.client, batch_id, wanted, changes)
        asked = " or ".join(wanted)
        if retried:
            note(
                f"retrying {len(retried)} job(s) of batch {batch_id} whose records were "
                f"{asked}; the replaced records are kept as earlier attempts"
            )
        else:
            note(f"no job of batch {batch_id} has a record that is {asked}")

    return _following().resume_command(
        batch_id, workers, redis_url, chunk_size, deadline, out, before=retire
    )


__all__ = ["retry"]
