"""``ktour solve`` (one job in-process) and ``ktour verify`` (check a tour file)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import cast

import click

from knights_tour.board import Board, parse_board
from knights_tour.commands._shared import (
    ExitCode,
    node_limit_option,
    solver_option,
    time_limit_option,
    write_output,
)
from knights_tour.core.jobs import Job
from knights_tour.errors import StepNumbersError
from knights_tour.output.render import print_board
from knights_tour.output.svg import tour_svg
from knights_tour.output.tourfile import (
    format_step_matrix,
    read_jsonl,
    read_tour_file,
    record_to_tour,
)
from knights_tour.result import Status, TourResult
from knights_tour.settings import get_settings
from knights_tour.solvers import check_solver_name
from knights_tour.solvers.api import solve as api_solve
from knights_tour.verify import is_closed, verify_tour


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


def _print_result(
    board: Board, result: TourResult, labels: bool, ascii_board: bool, colour_board: bool
) -> None:
    """The board with step numbers (a picture on a terminal), then the status line."""
    if result.tour is not None and result.status == Status.FOUND:
        out = sys.stdout
        if ascii_board:
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
    board = parse_board(size)
    start_sq = board.parse_square(start)
    # One budget per job, as in a batch: the solver gets KT_JOB_TIME_LIMIT_S unless told.
    if time_limit is None:
        time_limit = get_settings().job_time_limit_s
    # The limits of a batch job apply here too: a board the solver can take (e.g. CP-SAT at
    # most 2500 squares). InvalidJobError -> exit 2.
    Job(
        rows=board.rows,
        cols=board.cols,
        start=start_sq,
        solver=solver,
        closed=closed,
        time_limit_s=time_limit,
        exhaustive=exhaustive,
        node_limit=node_limit,
    )
    result = api_solve(
        board,
        start_sq,
        solver=solver,
        closed=closed,
        time_limit_s=time_limit,
        exhaustive=exhaustive,
        node_limit=node_limit,
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), separators=(",", ":")))
    else:
        _print_result(board, result, labels, ascii_board, colour_board)
    if svg_out is not None:
        write_output(svg_out, tour_svg(result) + "\n", "--svg")
    decided = result.status in (Status.FOUND, Status.NO_TOUR)
    return ExitCode.OK if decided else ExitCode.NOT_OK


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--closed", is_flag=True, help="Require a closed (re-entrant) tour.")
@click.option(
    "--start",
    "start",
    default=None,
    metavar="SQ",
    help="Require the tour to start on this square (a1 or r,c).",
)
@click.option(
    "--record",
    type=int,
    default=None,
    metavar="N",
    help="For a JSON Lines file: check the N-th record (1-based).",
)
@click.option(
    "--all",
    "all_records",
    is_flag=True,
    help="For a JSON Lines file (e.g. from 'ktour run'): check the tour of every record.",
)
def verify(
    file: str, closed: bool, start: str | None, record: int | None, all_records: bool = False
) -> ExitCode:
    """Check the tour in FILE ('-' = stdin).

    FILE is a step-number matrix (one line per row, top row first; the number k on a square
    means the knight visits it at step k, 1-based or 0-based; lines starting with '#' are
    ignored) or a JSON record as written by 'ktour solve --json' / 'ktour collect'. A record
    that says closed: true, or names a start, is held to it. Exit 0 valid, 1 invalid (with the
    verifier's reason; also a matrix whose numbers are not the steps 1..N, e.g. one used
    twice), 2 a file that cannot be read as a matrix or record.
    """
    if all_records:
        if start is not None or record is not None:
            raise click.UsageError("--all cannot be combined with --start or --record")
        return _verify_all(file, closed)
    try:
        board, tour, meta = read_tour_file(file, record=record)
    except StepNumbersError as exc:  # a matrix that was read, but is not a tour
        click.echo(f"invalid: {exc.reason}")
        return ExitCode.NOT_OK
    start_sq = board.parse_square(start) if start is not None else meta.get("start")
    need_closed = closed or bool(meta.get("closed"))
    verdict = verify_tour(board, tour, start=start_sq, closed=need_closed)
    if not verdict.ok:
        click.echo(f"invalid: {verdict.reason}")
        return ExitCode.NOT_OK
    kind = "closed" if is_closed(tour) else "open"
    click.echo(f"valid {kind} tour of {board.label} from {board.algebraic(tour[0])}")
    return ExitCode.OK


def _verify_all(file: str, closed: bool) -> ExitCode:
    """``verify --all``: every record of a JSON Lines file that holds (or claims) a tour."""
    records = read_jsonl(file)
    valid = invalid = without = 0
    for i, rec in enumerate(records, start=1):
        where = f"record {i}"
        if rec.get("tour") is None:
            if rec.get("status") == "found":
                invalid += 1
                click.echo(f"{where}: invalid: status found but the record holds no tour")
            else:
                without += 1
            continue
        board, tour, meta = record_to_tour(rec, where)
        verdict = verify_tour(
            board, tour, start=meta.get("start"), closed=closed or bool(meta.get("closed"))
        )
        if verdict.ok:
            valid += 1
        else:
            invalid += 1
            click.echo(
                f"{where} ({board.label} from {rec.get('start_square')}): invalid: {verdict.reason}"
            )
    click.echo(
        f"{len(records)} records: {valid} valid tours, {invalid} invalid, {without} without a tour"
    )
    return ExitCode.OK if invalid == 0 else ExitCode.NOT_OK


__all__ = ["solve", "verify"]
