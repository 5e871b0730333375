"""``ktour count`` by the frontier DP: runs the count in this process, prints progress per layer
and the same grid as an enumeration.

The DP (:mod:`knights_tour.core.count_method`) checkpoints every layer under
``KT_DATA_DIR/frontier``, so running the same command again after an interruption resumes from
the last finished layer. This module renders; :mod:`knights_tour.commands.count` declares the
options and picks the method.
"""

from __future__ import annotations

import json
import time

import click

from knights_tour.board import Board, Square
from knights_tour.commands._shared import ExitCode, note
from knights_tour.core.count_method import MethodChoice, dp_count, dp_uses_halves
from knights_tour.core.counting import CountReport
from knights_tour.core.frontier_run import LayerStat
from knights_tour.output.tourfile import atomic_write_text
from knights_tour.service.estimate import DP_TRANSITIONS_PER_S, dp_count_transitions, format_hours
from knights_tour.settings import get_settings

PROGRESS_EVERY_S = 10.0
"""Least seconds between two progress lines (the last layer of a sweep is always shown)."""


class _LayerProgress:
    """One stderr line per layer at most every :data:`PROGRESS_EVERY_S` seconds: sweep, layer,
    states, transitions per second, and the share of the estimated work done with an ETA.

    ``estimate`` is the count's estimated transitions
    (:func:`knights_tour.service.estimate.dp_count_transitions`, within about 2x); the ETA is
    what is left of it at this run's own rate so far (the estimate's rate until 1% of it is
    done: the first layers are too small to time). Layers resumed from checkpoints are not
    counted as done, so after a resume the ETA is an upper bound."""

    def __init__(self, estimate: float) -> None:
        self.last = 0.0
        self.estimate = estimate
        self.done = 0
        self.seconds = 0.0

    def __call__(self, name: str, stat: LayerStat, n_steps: int) -> None:
        self.done += stat.transitions
        self.seconds += stat.seconds
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and stat.step + 1 < n_steps:
            return
        self.last = now
        rate = stat.transitions / stat.seconds if stat.seconds > 0 else 0.0
        parts = f", {stat.parts} parts" if stat.parts > 1 else ""
        note(
            f"dp {name}: layer {stat.step + 1}/{n_steps}, {stat.states:,} states, "
            f"{rate:,.0f} transitions/s{parts}; {self.eta()}"
        )

    def eta(self) -> str:
        """``"~ 38% of the estimated 1.5e+09 transitions, ETA ~ 27 min"`` (or past it)."""
        if self.done > self.estimate:
            return f"past the estimated {self.estimate:.2g} transitions, ETA unknown"
        timed = self.done >= 0.01 * self.estimate and self.seconds > 0
        rate = self.done / self.seconds if timed else DP_TRANSITIONS_PER_S
        left_s = (self.estimate - self.done) / rate
        return (
            f"~ {100 * self.done / self.estimate:.0f}% of the estimated "
            f"{self.estimate:.2g} transitions, ETA ~ {format_hours(left_s / 3600)}"
        )


def _grid_lines(report: CountReport) -> list[str]:
    board = Board(report.rows, report.cols)
    cells = [["-" if v is None else str(v) for v in row] for row in report.grid]
    width = max(len(c) for row in cells for c in row)
    label_w = len(str(board.rows))
    lines = [
        f"{board.rows - r:>{label_w}}  " + " ".join(c.rjust(width) for c in row)
        for r, row in enumerate(cells)
    ]
    lines.append(
        " " * (label_w + 2) + " ".join(board.file_name(c).rjust(width) for c in range(board.cols))
    )
    return lines


def run_dp_count(
    board: Board,
    start_sq: Square | None,
    choice: MethodChoice,
    *,
    memory_gb: float,
    as_json: bool,
    out: str | None,
) -> ExitCode:
    """Count by the DP in this process and print (or write) the report; exit code 0."""
    note(f"method: {choice.reason}")
    checkpoints = get_settings().data_dir / "frontier"
    note(
        f"dp: layers checkpointed under {checkpoints} (the same command resumes); tables "
        f"bounded by {memory_gb:g} GiB"
    )

    def class_done(rep: Square, value: int, seconds: float) -> None:
        note(f"dp: start {board.algebraic(rep)}: {value:,} tours ({seconds:.1f} s)")

    report = dp_count(
        board,
        start_sq,
        memory_bytes=int(memory_gb * 2**30),
        checkpoint_dir=checkpoints,
        progress=_LayerProgress(
            dp_count_transitions(board, start_sq is not None, halves=dp_uses_halves(board))
        ),
        class_done=class_done,
    )
    record = report.to_dict()
    record["method_reason"] = choice.reason
    if out is not None:
        atomic_write_text(out, json.dumps(record, indent=1) + "\n")
    if as_json:
        click.echo(json.dumps(record, separators=(",", ":")))
        return ExitCode.OK
    click.echo(f"directed open knight's tours per start square, {board.label}:")
    for line in _grid_lines(report):
        click.echo(line)
    if report.total is not None:
        click.echo(f"total: {report.total:,}")
    else:
        sq = start_sq if start_sq is not None else next(iter(report.classes))
        click.echo(f"tours from {board.algebraic(sq)}: {report.grid[sq[0]][sq[1]]:,}")
    click.echo(report.symmetry_note)
    click.echo(f"method: {choice.reason}")
    click.echo(
        f"transitions {report.nodes:,}; wall {report.elapsed_s:.2f} s; peak RSS "
        f"{record['peak_rss_bytes'] / 2**30:.2f} GiB"
    )
    return ExitCode.OK


__all__ = ["run_dp_count"]
