"""What a batch or a count will cost before it is submitted: jobs, output size, time.

``ktour run`` / ``submit`` and ``ktour count`` ask for confirmation (or ``--yes``) when an
estimate is above the thresholds ``KT_CONFIRM_JOBS``, ``KT_CONFIRM_OUTPUT_MB`` and
``KT_CONFIRM_HOURS`` (:func:`batch_concerns`, :func:`count_concerns`). The estimates are
coarse on purpose - a factor of a few either way - and cost no more than reading the board
list: a million-job batch is judged without making its jobs.

The speed figures below, and those of each backend's descriptor
(:attr:`knights_tour.solvers.CostModel.estimate_per_square_s`), come from the benchmarks
(``benchmarks/README.md``): ``bench_engine.py`` (engine time per square), ``bench_cpsat.py``
(CP-SAT time per job),
``bench_pipeline.py`` (the cost of a job through Celery and Redis) and ``bench_count.py``
(count nodes per CPU-second). Counting nodes of 5x5 are what ``ktour count 5`` reports
(deterministic); the growth per square is fitted between 5x5 and 6x6. The frontier DP is
costed by its transitions (deterministic: what ``ktour count --method dp`` reports as nodes),
measured on boards of each narrow side - full sweeps (:data:`DP_TRANSITIONS`,
``bench_frontier.py``) and, up to 36 squares, the halves the command runs there
(:data:`DP_HALVES_TRANSITIONS`) - and interpolated between them, at the rate of the whole 7x7
count of ``docs/counts``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knights_tour.board import Board, parse_board_list
from knights_tour.errors import KnightsTourError
from knights_tour.settings import Settings, get_settings
from knights_tour.solvers import DEFAULT_SOLVER, get_backend

JOB_OVERHEAD_S = 0.003
"""Seconds a job costs beyond its solver: message, claim, record, through Redis."""

RECORD_FIELDS_BYTES = 800
"""JSON Lines characters of a record beyond its tour (every other field, CP-SAT ones
included)."""

COUNT_NODES_5X5 = 9_266
"""Search nodes of ``ktour count 5`` (one square per symmetry class)."""

COUNT_GROWTH_PER_SQUARE = 2.12
"""Factor by which a count's nodes grow per added board square (5x5 to 6x6)."""

COUNT_NODES_PER_CPU_S = 10e6
"""Counting nodes per CPU-second of one worker process."""

DP_TRANSITIONS: dict[int, tuple[tuple[int, int], ...]] = {
    3: ((10, 9_043), (20, 122_769), (40, 665_539)),
    4: ((6, 6_860), (10, 181_306), (20, 1_541_063)),
    5: ((5, 7_323), (6, 181_165), (8, 5_548_125), (9, 9_897_558)),
    6: ((6, 6_351_957), (7, 94_083_041)),
    7: ((7, 1_514_725_396),),
}
"""Transitions of the frontier DP's count of every square of a board (its trunks and tails:
``dp_count(board, halves=False).nodes``), by the board's narrow side: ``(long side,
transitions)``, measured (``benchmarks/bench_frontier.py``; 7x7: ``docs/counts/7x7-open.json``)."""

DP_HALVES_TRANSITIONS: dict[int, tuple[tuple[int, int], ...]] = {
    3: ((6, 389), (12, 15_005)),
    4: ((4, 670), (5, 2_777), (6, 18_949), (9, 174_434)),
    5: ((5, 15_822), (6, 281_913), (7, 459_943)),
    6: ((6, 7_990_846),),
}
"""Transitions of what ``ktour count --method dp`` runs on boards of up to 36 squares: halves
met in the middle (``dp_count(board).nodes``, lower half shared by every class), by the
board's narrow side: ``(long side, transitions)``, measured (deterministic). Boards too short
for halves (3x4, 3x5) are swept whole and estimated by :data:`DP_TRANSITIONS`."""

DP_HALVES_ONE_CLASS_FRACTION = 1.0
"""Share of the whole grid's halves transitions that one start class is estimated at: a class
alone runs the whole grid's lower half (the same cut) and its own upper half, a part of the
whole grid's work that the lower half dominates (measured 0.41-0.98 over the classes needing a
search on 3x6 to 6x6, 6x6 0.98), so the whole grid's estimate is its bound."""

DP_GROWTH_EXPONENT_7 = 17.8
"""Exponent of the power of the board's squares by which the DP's transitions grow where no
two boards of a narrow side are measured: 6x6 to 7x7 (a factor of 238 for 49/36 the squares,
about 1.52 a square)."""

DP_TRANSITIONS_PER_S = 0.56e6
"""Transitions a second of the DP in one process: the whole 7x7 count from nothing (1.51e9
transitions in 2,709 s, niced on the shared 2-core machine at load 2-9; ``docs/counts``). The
small layers of 5x5 and 6x6 run faster (about 0.7-1 M/s), the 6x7 layers slower under load."""

DP_START_S = 0.5
"""Seconds a DP count costs beyond its transitions (numba's cached kernels, plans)."""

DP_ONE_CLASS_FRACTION = 0.5
"""Share of the whole grid's transitions that one start class costs (7x7 measured: the corner
alone 0.49 with its own trunk, d4 0.29 and c5 0.22 by their own sweeps)."""


@dataclass(frozen=True)
class BatchEstimate:
    """What a batch will cost (see the module docstring for how coarse)."""

    boards: int
    """Distinct boards."""
    jobs: int
    """Jobs (start squares of every board)."""
    output_bytes: int
    """Size of its JSON Lines records, every tour found."""
    cpu_s: float
    """Worker CPU-seconds for every job."""

    def hours_on(self, workers: int) -> float:
        """Wall-clock hours with ``workers`` worker processes busy."""
        return self.cpu_s / max(1, workers) / 3600.0


def tour_chars(board: Board) -> int:
    """Characters of the tour of ``board`` in a JSON record: ``[r,c]`` per square, commas
    between them and the outer brackets, the digits of every row and column index counted
    exactly."""

    def digits(n: int) -> int:  # total digits of 0 .. n-1
        total, width, low = 0, 1, 0
        while low < n:
            high = min(n, 10**width)
            total += (high - low) * width
            low, width = high, width + 1
        return total

    return (
        board.rows * digits(board.cols) + board.cols * digits(board.rows) + 4 * board.n_squares + 1
    )


def parse_sizes(sizes: Sequence[str]) -> list[Board]:
    """The distinct boards named by ``sizes`` (as ``--sizes``), in first-seen order.

    Raises
    ------
    InvalidBoardError
        For a malformed size or range.
    """
    boards: list[Board] = []
    seen: set[Board] = set()
    for spec in sizes:
        for b in parse_board_list(spec):
            if b not in seen:
                seen.add(b)
                boards.append(b)
    return boards


def estimate_batch(
    boards: Sequence[Board],
    solver: str = DEFAULT_SOLVER,
    verify: str | None = None,
    time_limit_s: float | None = None,
    settings: Settings | None = None,
) -> BatchEstimate:
    """Estimate a batch of one job per start square of every board.

    Parameters
    ----------
    boards : sequence of Board
    solver : str
        A registered backend, costed by its descriptor
        (:meth:`~knights_tour.solvers.CostModel.estimate_s`).
    verify : str, optional
        A backend that cross-checks: adds its run per job, costed the same way.
    time_limit_s : float, optional
        Per-job limit (default each backend's own: ``KT_JOB_TIME_LIMIT_S``, CP-SAT's
        ``KT_CPSAT_TIME_LIMIT_S``; :meth:`~knights_tour.solvers.Backend.time_limit_s`).

    Raises
    ------
    UnknownSolverError
        If ``solver`` or ``verify`` is no registered backend.
    """
    settings = settings or get_settings()
    runs = [get_backend(solver)] + ([get_backend(verify)] if verify else [])
    priced = [(b.cost, time_limit_s or b.time_limit_s(settings)) for b in runs]
    jobs = out = 0
    cpu = 0.0
    for b in boards:
        n = b.n_squares
        jobs += n
        out += n * (RECORD_FIELDS_BYTES + tour_chars(b))
        per_job = JOB_OVERHEAD_S
        for cost, limit_s in priced:
            per_job += cost.estimate_s(n, limit_s)
        cpu += n * per_job
    return BatchEstimate(boards=len(boards), jobs=jobs, output_bytes=out, cpu_s=cpu)


def planned_s_per_job(params: Mapping[str, Any], workers: int) -> float | None:
    """Estimated wall seconds per job of a batch on ``workers`` worker processes, from the
    ``params`` of its meta (``sizes``, ``solver``, ``verify``, ``time_limit_s``, as
    :func:`knights_tour.batches.client.make_jobs` stores them): :func:`estimate_batch` spread
    over its jobs. None when the params name no readable board list, a backend not registered
    in this process, or ``workers`` < 1."""
    if workers < 1 or not isinstance(params.get("sizes"), str):
        return None
    limit = params.get("time_limit_s")
    try:
        est = estimate_batch(
            parse_sizes([params["sizes"]]),
            solver=str(params.get("solver") or DEFAULT_SOLVER),
            verify=params.get("verify") or None,
            time_limit_s=float(limit) if isinstance(limit, int | float) else None,
        )
    except KnightsTourError:
        return None
    return est.hours_on(workers) * 3600.0 / est.jobs if est.jobs else None


def eta_s(todo: int, done: int, elapsed_s: float, planned_s: float | None) -> float | None:
    """Seconds until ``todo`` more jobs are done, ``done`` having taken ``elapsed_s`` since the
    clock started; ``planned_s`` the estimated seconds per job (:func:`planned_s_per_job`).

    The time per job is the estimate's and the measured one (``elapsed_s / done``) weighted by
    the share of the jobs done: the first jobs of a batch also pay for starting the workers and
    compiling the kernels, so their rate says little about the rest (it promised hours for a
    batch of seconds); the measured rate takes over as the jobs are done. Without an
    estimate, the measured rate alone; None while there is neither. 0 when nothing is left.
    """
    if todo <= 0:
        return 0.0
    measured = elapsed_s / done if done > 0 and elapsed_s > 0 else None
    if measured is None:
        return None if planned_s is None else todo * planned_s
    if planned_s is None:
        return todo * measured
    share = done / (done + todo)
    return todo * ((1.0 - share) * planned_s + share * measured)


def count_cpu_s(board: Board, counted_squares: int, representatives: int) -> float:
    """CPU-seconds of an exhaustive tour count on ``board`` that counts ``counted_squares``
    start squares, where the full count with symmetry counts ``representatives``."""
    nodes = COUNT_NODES_5X5 * COUNT_GROWTH_PER_SQUARE ** (board.n_squares - 25)
    return nodes * counted_squares / max(1, representatives) / COUNT_NODES_PER_CPU_S


def dp_transitions(board: Board) -> float:
    """Estimated transitions of the frontier DP's full sweeps of every square of ``board``
    (``dp_count(board, halves=False)``: its trunks and tails).

    Interpolated log-log in the number of squares between the measured boards of the same
    narrow side (:data:`DP_TRANSITIONS`); beyond them, the power of the nearest segment (or
    :data:`DP_GROWTH_EXPONENT_7`). Within a factor of 2 of the measured transitions of the
    boards the suite checks that are not in the table (4x8, 4x14, 5x7); beyond the table, an
    extrapolation. A board of narrow side below 3 has no tour (0); above 7, the DP's keys do
    not hold its frontier (the command refuses the DP there) and the 7-wide measurements are
    extrapolated in the number of squares.
    """
    return _interpolate(board, DP_TRANSITIONS)


def dp_halves_transitions(board: Board) -> float:
    """Estimated transitions of the frontier DP's halves on every square of ``board`` (what
    ``dp_count(board)`` runs up to 36 squares), interpolated in
    :data:`DP_HALVES_TRANSITIONS` as :func:`dp_transitions` does in its table. Within a
    factor of 2 of the measured transitions of the boards the suite checks that are not in the
    table (3x8, 3x10, 4x7, 4x8)."""
    return _interpolate(board, DP_HALVES_TRANSITIONS)


def _interpolate(board: Board, table: dict[int, tuple[tuple[int, int], ...]]) -> float:
    """Transitions of ``board`` from ``table`` (narrow side -> (long side, transitions)),
    log-log in the squares between its rows of the board's narrow side (the widest row for a
    wider board), extrapolated by the nearest segment's power or :data:`DP_GROWTH_EXPONENT_7`;
    0 below a narrow side of 3."""
    narrow, long_side = sorted((board.rows, board.cols))
    if narrow < 3:
        return 0.0
    width = min(narrow, max(table))
    points = [(width * n, t) for n, t in table[width]]
    n = narrow * long_side
    if len(points) == 1:
        (n0, t0), exponent = points[0], DP_GROWTH_EXPONENT_7
        return t0 * (n / n0) ** exponent
    i = 1
    while i < len(points) - 1 and points[i][0] < n:
        i += 1
    (n0, t0), (n1, t1) = points[i - 1], points[i]
    exponent = math.log(t1 / t0) / math.log(n1 / n0)
    return t0 * (n / n0) ** exponent


def dp_count_transitions(board: Board, one_class: bool = False, halves: bool = False) -> float:
    """Estimated transitions of what ``ktour count --method dp`` runs on ``board``: with
    ``halves`` (where ``dp_count`` meets halves:
    :func:`knights_tour.counting.method.dp_uses_halves`) :func:`dp_halves_transitions`, one
    start class :data:`DP_HALVES_ONE_CLASS_FRACTION` of it; else full sweeps,
    :func:`dp_transitions`, one class :data:`DP_ONE_CLASS_FRACTION` of it. Within a factor of
    2 of the measured counts the suite checks off the tables (whole grids, and classes that
    need a search: a class that needs none - minority colour - costs nothing)."""
    if halves:
        share = DP_HALVES_ONE_CLASS_FRACTION if one_class else 1.0
        return share * dp_halves_transitions(board)
    share = DP_ONE_CLASS_FRACTION if one_class else 1.0
    return share * dp_transitions(board)


def dp_count_s(board: Board, one_class: bool = False, halves: bool = False) -> float:
    """Seconds of a frontier-DP count of every square of ``board`` in one process (of one start
    class with ``one_class``; ``halves`` as in :func:`dp_count_transitions`):
    :func:`dp_count_transitions` at :data:`DP_TRANSITIONS_PER_S`. Within a factor of 2 of the
    measured 7x7 counts on this machine (``docs/counts``); the small boards' layers run faster
    than that rate, so their estimate is high."""
    return DP_START_S + dp_count_transitions(board, one_class, halves) / DP_TRANSITIONS_PER_S


def format_bytes(n: float) -> str:
    """``"812 B"``, ``"3.4 MB"``, ``"91 GB"`` (powers of 1000)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" or n >= 100 else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError  # pragma: no cover


def format_hours(hours: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.5 h"``, ``"12 days"``."""
    s = hours * 3600
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:,.0f} days"


def batch_concerns(est: BatchEstimate, workers: int, settings: Settings | None = None) -> list[str]:
    """What makes the batch big enough to confirm: the thresholds it passes (empty: none)."""
    settings = settings or get_settings()
    out = []
    if est.jobs > settings.confirm_jobs:
        out.append(f"more than KT_CONFIRM_JOBS={settings.confirm_jobs:,} jobs")
    if est.output_bytes > settings.confirm_output_mb * 1e6:
        out.append(f"records over KT_CONFIRM_OUTPUT_MB={settings.confirm_output_mb:g} MB")
    if est.hours_on(workers) > settings.confirm_hours:
        out.append(f"over KT_CONFIRM_HOURS={settings.confirm_hours:g} h on {workers} worker(s)")
    return out


def describe_batch(est: BatchEstimate, workers: int) -> str:
    """``"1,000,000 jobs on 1 board(s), records ~ 10 TB, ~ 3.2 h on 2 worker(s)"``."""
    return (
        f"{est.jobs:,} jobs on {est.boards} board(s), records ~ "
        f"{format_bytes(est.output_bytes)}, ~ {format_hours(est.hours_on(workers))} on "
        f"{workers} worker(s)"
    )


def count_concerns(cpu_s: float, workers: int, settings: Settings | None = None) -> list[str]:
    """The thresholds an estimated count passes: more than ``KT_CONFIRM_HOURS`` on
    ``workers`` worker processes (one machine's)."""
    settings = settings or get_settings()
    if cpu_s / max(1, workers) / 3600.0 > settings.confirm_hours:
        return [f"over KT_CONFIRM_HOURS={settings.confirm_hours:g} h on {workers} worker(s)"]
    return []


__all__ = [
    "BatchEstimate",
    "estimate_batch",
    "eta_s",
    "planned_s_per_job",
    "parse_sizes",
    "tour_chars",
    "count_cpu_s",
    "dp_count_s",
    "dp_count_transitions",
    "dp_transitions",
    "dp_halves_transitions",
    "batch_concerns",
    "count_concerns",
    "describe_batch",
    "format_bytes",
    "format_hours",
]
