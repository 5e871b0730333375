"""What a batch or a count will cost before it is submitted: jobs, output size, time.

``ktour run`` / ``submit`` and ``ktour count`` ask for confirmation (or ``--yes``) when an
estimate is above the thresholds ``KT_CONFIRM_JOBS``, ``KT_CONFIRM_OUTPUT_MB`` and
``KT_CONFIRM_HOURS`` (:func:`batch_concerns`, :func:`count_concerns`). The estimates are
coarse on purpose - a factor of a few either way - and cost no more than reading the board
list: a million-job batch is judged without making its jobs.

The speed figures below come from the benchmarks (``benchmarks/README.md``):
``bench_engine.py`` (engine time per square), ``bench_cpsat.py`` (CP-SAT time per job),
``bench_pipeline.py`` (the cost of a job through Celery and Redis) and ``bench_count.py``
(count nodes per CPU-second). Counting nodes of 5x5 are what ``ktour count 5`` reports
(deterministic); the growth per square is fitted between 5x5 and 6x6. The frontier DP's
figures are those of ``docs/counts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knights_tour.board import Board, parse_board_list
from knights_tour.settings import Settings, get_settings

JOB_OVERHEAD_S = 0.003
"""Seconds a job costs beyond its solver: message, claim, record, through Redis."""

ENGINE_S_PER_SQUARE = 3e-7
"""Engine (``warnsdorff``) seconds per board square of one job."""

CPSAT_S_PER_SQUARE = 1e-3
"""CP-SAT seconds per board square of one job (it grows faster than linearly on large
boards; the job's time limit caps it)."""

RECORD_FIELDS_BYTES = 800
"""JSON Lines characters of a record beyond its tour (every other field, CP-SAT ones
included)."""

COUNT_NODES_5X5 = 9_266
"""Search nodes of ``ktour count 5`` (one square per symmetry class)."""

COUNT_GROWTH_PER_SQUARE = 2.12
"""Factor by which a count's nodes grow per added board square (5x5 to 6x6)."""

COUNT_NODES_PER_CPU_S = 10e6
"""Counting nodes per CPU-second of one worker process."""

DP_6X6_S = 8.7
"""Seconds of the frontier DP's count of the whole 6x6 grid (``docs/counts``,
``benchmarks/bench_frontier.py 6 --halves``)."""

DP_GROWTH_PER_SQUARE = 1.72
"""Factor by which the DP's time grows per added board square, fitted between 6x6 and the
7x7 figures of ``docs/counts`` (about 10^9 transitions per start class at 10^6 a second)."""


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
    solver: str = "warnsdorff",
    verify: str | None = None,
    time_limit_s: float | None = None,
    settings: Settings | None = None,
) -> BatchEstimate:
    """Estimate a batch of one job per start square of every board.

    Parameters
    ----------
    boards : sequence of Board
    solver : str
        ``"cpsat"`` is costed as CP-SAT, anything else as the engine.
    verify : str, optional
        ``"cpsat"`` adds a CP-SAT run per job.
    time_limit_s : float, optional
        Per-job limit (default ``KT_JOB_TIME_LIMIT_S``; CP-SAT ``KT_CPSAT_TIME_LIMIT_S``).
    """
    settings = settings or get_settings()
    job_limit = time_limit_s or settings.job_time_limit_s
    cpsat_limit = time_limit_s or settings.cpsat_time_limit_s
    jobs = out = 0
    cpu = 0.0
    for b in boards:
        n = b.n_squares
        jobs += n
        out += n * (RECORD_FIELDS_BYTES + tour_chars(b))
        per_job = JOB_OVERHEAD_S + (
            min(cpsat_limit, CPSAT_S_PER_SQUARE * n)
            if solver == "cpsat"
            else min(job_limit, ENGINE_S_PER_SQUARE * n)
        )
        if verify == "cpsat":
            per_job += min(cpsat_limit, CPSAT_S_PER_SQUARE * n)
        cpu += n * per_job
    return BatchEstimate(boards=len(boards), jobs=jobs, output_bytes=out, cpu_s=cpu)


def count_cpu_s(board: Board, counted_squares: int, representatives: int) -> float:
    """CPU-seconds of an exhaustive tour count on ``board`` that counts ``counted_squares``
    start squares, where the full count with symmetry counts ``representatives``."""
    nodes = COUNT_NODES_5X5 * COUNT_GROWTH_PER_SQUARE ** (board.n_squares - 25)
    return nodes * counted_squares / max(1, representatives) / COUNT_NODES_PER_CPU_S


def dp_count_s(board: Board) -> float:
    """Seconds of a frontier-DP count of every square of ``board`` (one process)."""
    return DP_6X6_S * DP_GROWTH_PER_SQUARE ** (board.n_squares - 36)


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
    "parse_sizes",
    "tour_chars",
    "count_cpu_s",
    "dp_count_s",
    "batch_concerns",
    "count_concerns",
    "describe_batch",
    "format_bytes",
    "format_hours",
]
