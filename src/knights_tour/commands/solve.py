"""``ktour solve``: one job in-process (``ktour verify``, which checks a tour file, is
:mod:`knights_tour.commands.verify`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import cast

import click

from knights_tour.batches.jobs import Job, solve_job
from knights_tour.board import Board, parse_board
from knights_tour.commands._checks import check_out_path
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import node_limit_option, solver_option, time_limit_option
from knights_tour.commands._shared import note, write_output
from knights_tour.output.render import print_board
from knights_tour.output.svg import tour_svg
from knights_tour.output.tourfile import format_step_matrix
from knights_tour.solvers import check_solver_name
from knights_tour.tours.record import Status, TourResult
from knights_tour.tours.verify import is_closed


def _status_line(result: TourResult) -> str:
    """The ``# status ...; proof ...; solver ...; nodes ...; time ...`` line of ``solve``."""
    kind = "closed" if result.closed else "open"
    where = f"{kind} tour of {result.rows}x{result.cols} from {result.start_square}"
    parts = [f"status {result.status.value}"]
    if result.status == Status.FOUND:
        # numpy (N, 2) rows are (row, col) pairs: what is_closed reads
        tour = cast("Sequence[Sequence[int]]", result.tour if result.tour is not None else [])
        parts.append(
            f"{'closed' if is_closed(tour) else 'open'} tour of "
            f"{result.rows}x{result.cols} from {result.start_square}"
        )
    elif result.status == Status.NO_TOUR:
        parts.append(f"no {where}")
    else:
        parts.append(f"{where}: {result.reason or 'undecided'}")
    proof = result.proof.value if result.proof is not None else "-"
    if result.proof_detail:
        proof += f" ({result.proof_detail})"
    parts.append(f"proof {proof}")
    parts.append(f"solver {result.solver}")
    parts.append(f"nodes {result.nodes}")
    parts.append(f"time {result.elapsed_s:.3f} s")
    return "# " + "; ".join(parts)


TERMINAL_BOARD_SQUARES = 10_000
"""The largest board (squares) ``solve`` prints on a terminal: 100x100, about 50 kB. A larger
one (``1001x1001`` is 8 MB) would scroll past unread: a line says how to have it instead."""


def _print_result(
    board: Board, result: TourResult, labels: bool, ascii_board: bool, colour_board: bool
) -> None:
    """The board with step numbers (a picture on a terminal), then the status line."""
    if result.tour is not None and result.status == Status.FOUND:
        out = sys.stdout
        if out.isatty() and board.n_squares > TERMINAL_BOARD_SQUARES:
            note(
                f"the {board.label} board ({board.n_squares:,} squares) is not printed on a "
                "terminal: redirect it to a file (> FILE), or use --json or --svg FILE"
            )
        elif ascii_board:
            print_board(result, ascii=True, file=out)
        elif colour_board or out.isatty():
            print_board(result, ascii=None, caption=False, file=out)
        else:
            steps = cast("Sequence[Sequence[int]]", result.tour)  # (N, 2) rows: (row, col)
            click.echo(format_step_matrix(board, steps, labels=labels), nl=False)
    click.echo(_status_line(result))


@click.command()
@click.argument("size")
@click.argument("start")
@solver_option
@click.option("--closed", is_flag=True, help="Ask for a closed (re-entrant) tour.")
@click.option(
    "--exhaustive",
    is_flag=True,
    help="Search without a node budget, so a finished search proves no_tour (engine).",
)
@time_limit_option
@node_limit_option
@click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead.")
@click.option("--labels", is_flag=True, help="Print rank/file labels around the board.")
@click.option(
    "--ascii",
    "ascii_board",
    is_flag=True,
    help="Print the board as an ASCII picture: labels, start [ 1], end (N).",
)
@click.option(
    "--colour",
    "--color",
    "colour_board",
    is_flag=True,
    help="Print the board in colour (the default on a terminal; plain when piped).",
)
@click.option(
    "--svg",
    "svg_out",
    default=None,
    metavar="FILE",
    help="Also draw the tour (or the board and start square) as SVG to FILE.",
)
def solve(
    size: str,
    start: str,
    solver: str,
    closed: bool,
    exhaustive: bool,
    time_limit: float | None,
    node_limit: int | None,
    as_json: bool,
    labels: bool,
    ascii_board: bool = False,
    colour_board: bool = False,
    svg_out: str | None = None,
) -> ExitCode:
    """Solve one job in-process: a knight's tour of SIZE (8 or 6x8) from START (a1 or r,c).

    Prints the board with step numbers (1 = start square, row 0 at the top) and a status line
    starting with '#', so the output can be piped into 'ktour verify -'. Exit 0 when the job is
    decided (found or no_tour), 1 when it is unknown or an error.
    """
    check_solver_name(solver)
    check_out_path(svg_out)
    board = parse_board(size)
    start_sq = board.parse_square(start)
    # The limits of a batch job apply here too (e.g. CP-SAT at most 2500 squares), and its
    # budget: KT_JOB_TIME_LIMIT_S unless told. InvalidJobError -> exit 2.
    job = Job(
        rows=board.rows,
        cols=board.cols,
        start=start_sq,
        solver=solver,
        closed=closed,
        time_limit_s=time_limit,
        exhaustive=exhaustive,
        node_limit=node_limit,
    )
    result = solve_job(job)
    if as_json:
        click.echo(json.dumps(result.to_dict(), separators=(",", ":")))
    else:
        _print_result(board, result, labels, ascii_board, colour_board)
    if svg_out is not None:
        write_output(svg_out, tour_svg(result) + "\n", "--svg")
    decided = result.status in (Status.FOUND, Status.NO_TOUR)
    return ExitCode.OK if decided else ExitCode.NOT_OK


__all__ = ["solve"]
