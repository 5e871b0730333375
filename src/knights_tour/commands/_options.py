"""The options several ``ktour`` commands take, declared once: where the work goes
(``--redis``, ``--workers``), a job's solver and limits (``--solver``, ``--time-limit``,
``--node-limit``), the job options of ``run`` and ``submit`` (:func:`job_options`) and
``--yes``.

click only (no rich), so that a command with nothing to draw, ``ktour status``, can take its
options from here without loading rich's consoles.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import click

from knights_tour.errors import InvalidJobError
from knights_tour.settings import default_of
from knights_tour.solvers import DEFAULT_SOLVER, check_limits, cross_check_names, solver_names


def solver_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--solver NAME`` (default the registry's default solver)."""
    return click.option(
        "--solver",
        default=DEFAULT_SOLVER,
        show_default=True,
        metavar="NAME",
        help=f"Solver backend: {', '.join(solver_names())}.",
    )(f)


def _checked_limit(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback of ``--time-limit`` / ``--node-limit``: the one check of a job's limits
    (:func:`knights_tour.solvers.check_limits`), as a usage error naming the option."""
    try:
        if param.name == "node_limit":
            check_limits(None, value)
        else:
            check_limits(value, None)
    except InvalidJobError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def limit_option(
    kind: str, help: str, show_default: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--time-limit S`` (``kind`` ``"time"``, seconds) or ``--node-limit N`` (``"node"``)
    with the command's own ``help`` (and default shown), checked by :func:`_checked_limit`."""
    return click.option(
        f"--{kind}-limit",
        f"{kind}_limit",
        type=float if kind == "time" else int,
        default=None,
        metavar="S" if kind == "time" else "N",
        callback=_checked_limit,
        show_default=show_default,
        help=help,
    )


time_limit_option = limit_option(
    "time",
    "Time budget of each job in seconds, its solver and CP-SAT cross-check together; "
    "on expiry the job is unknown (time_limit).",
    f"KT_JOB_TIME_LIMIT_S, else {default_of('job_time_limit_s'):g}",
)
"""``--time-limit S`` of ``solve``, ``run`` and ``submit``: the job's budget; its default is
the setting's (:class:`knights_tour.settings.Settings`), whatever the backend."""

node_limit_option = limit_option(
    "node",
    "Engine search nodes per job; spent, the job is unknown (node_limit).",
    "the engine's, by board size",
)
"""``--node-limit N`` of ``solve``, ``run`` and ``submit``."""


def redis_url_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--redis URL`` (parameter ``redis_url``, default None) with the command's own
    ``help``."""
    return click.option("--redis", "redis_url", default=None, metavar="URL", help=help)


redis_option = redis_url_option(
    "Redis URL (redis://:PASSWORD@host:6379/0); default KT_REDIS_URL, else the embedded "
    "Redis under the data dir."
)
"""``--redis URL``."""

url_redis_option = redis_url_option(
    "Redis URL the workers listen on (redis://:PASSWORD@host:6379/0); default "
    "KT_REDIS_URL. Required: no worker listens on the embedded Redis between runs."
)
"""``--redis URL`` of the commands that need workers' Redis (``submit``, ``workers``)."""

workers_option = click.option(
    "--workers",
    "workers",
    type=int,
    default=None,
    metavar="K",
    help="Local worker processes to start (default KT_WORKERS = cores; with --redis "
    "none: the workers already listening there are used).",
)
"""``--workers K`` of ``run`` and ``count``."""


yes_option = click.option(
    "--yes",
    "-y",
    "yes",
    is_flag=True,
    help="Submit without asking even if the estimate is above KT_CONFIRM_JOBS, "
    "KT_CONFIRM_OUTPUT_MB or KT_CONFIRM_HOURS.",
)
"""``--yes`` of ``run``, ``submit`` and ``count``."""


interval_option = click.option(
    "--interval",
    type=float,
    default=2.0,
    show_default=True,
    metavar="S",
    help="With --watch: seconds between refreshes.",
)
"""``--interval S`` of the commands that ``--watch`` (status, workers)."""


def timeout_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--timeout S`` (seconds, default none) with the command's own ``help``: what it gives
    up on and how it ends."""
    return click.option("--timeout", "timeout", type=float, default=None, metavar="S", help=help)


class JobArgs(NamedTuple):
    """The job options of ``run`` and ``submit`` as given (:func:`job_options`): checked by
    their callbacks, then by the command (:mod:`knights_tour.commands.lifecycle`)."""

    sizes: tuple[str, ...]
    solver: str
    verify: str
    closed: bool
    exhaustive: bool
    time_limit: float | None
    node_limit: int | None
    chunk_size: int | None

    @property
    def verify_backend(self) -> str | None:
        """The ``--verify`` backend, None for ``--verify none``."""
        return None if self.verify == "none" else self.verify


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by ``run`` and ``submit`` (what each job asks), given to the command
    as one :class:`JobArgs`, its parameter ``job``."""

    @functools.wraps(f)
    def with_job(**params: Any) -> Any:
        job = JobArgs(**{name: params.pop(name) for name in JobArgs._fields})
        return f(job=job, **params)

    opts: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option(
            "--sizes",
            "sizes",
            multiple=True,
            required=True,
            metavar="LIST",
            help="Boards: 5-12 (range of n x n), 8,10, 6x8; repeat to add more.",
        ),
        solver_option,
        click.option(
            "--verify",
            "verify",
            type=click.Choice(["none", *cross_check_names()]),
            default="none",
            show_default=True,
            help="Cross-check every job with the CP-SAT model.",
        ),
        click.option("--closed", is_flag=True, help="Ask for closed (re-entrant) tours."),
        click.option(
            "--exhaustive",
            is_flag=True,
            help="Engine searches without a node budget (proves no_tour).",
        ),
        time_limit_option,
        node_limit_option,
        click.option(
            "--chunk-size",
            type=int,
            default=None,
            metavar="N",
            help="Jobs per Celery task (default: sized by the jobs' estimated cost).",
        ),
    ]
    decorated: Callable[..., Any] = with_job
    for opt in reversed(opts):
        decorated = opt(decorated)
    return decorated


__all__ = [
    "JobArgs",
    "job_options",
    "timeout_option",
    "limit_option",
    "interval_option",
    "solver_option",
    "time_limit_option",
    "node_limit_option",
    "redis_option",
    "redis_url_option",
    "url_redis_option",
    "workers_option",
    "yes_option",
]
