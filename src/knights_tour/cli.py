"""The ``ktour`` command line (click; rich for tables and the progress bar).

Commands: ``solve`` (one job in-process), ``verify`` (check a tour file), ``run`` (a whole batch,
with an embedded Redis and local workers unless a Redis URL is given), ``submit``, ``status``,
``collect``, ``batches``. :func:`main` takes an argument list and returns the exit code, so tests
call it in-process.

Exit codes (all commands):

* ``0`` – success (``solve``: the job was decided, ``found`` or ``no_tour``; ``verify``: valid;
  ``run``/``collect --wait``: every job decided, no error, no mismatch).
* ``1`` – the command ran but the answer is not a clean success: ``solve`` ended ``unknown``
  (limit reached) or ``error``; ``verify`` found the tour invalid; ``run`` had undecided jobs,
  errors or a CP-SAT disagreement.
* ``2`` – bad input or unusable environment (unknown solver, off-board start square, malformed
  size, unreadable tour file, unreachable Redis, usage error): one line ``ktour: error: ...`` on
  stderr, nothing written.
* ``130`` – interrupted (Ctrl-C); everything the command started is shut down first.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from knights_tour.board import Board, parse_board
from knights_tour.errors import KnightsTourError
from knights_tour.result import Status, TourResult
from knights_tour.solvers import DEFAULT_SOLVER, check_solver_name, solver_names
from knights_tour.verify import is_closed, verify_tour

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _err(message: str) -> None:
    """One line on stderr, prefixed ``ktour: error:``."""
    first = " ".join(str(message).split())
    click.echo(f"ktour: error: {first}", err=True)


def _solver_option(f):
    return click.option(
        "--solver",
        default=DEFAULT_SOLVER,
        show_default=True,
        metavar="NAME",
        help=f"Solver backend: {', '.join(solver_names())}.",
    )(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="knights-tour", prog_name="ktour")
def cli() -> None:
    """ktour: find knight's tours (or prove there are none), one at a time or in batches."""


# -- solve --------------------------------------------------------------------------------


def _status_line(result: TourResult) -> str:
    kind = "closed" if result.closed else "open"
    where = f"{kind} tour of {result.rows}x{result.cols} from {result.start_square}"
    parts = [f"status {result.status.value}"]
    if result.status == Status.FOUND:
        parts.append(f"{'closed' if is_closed(result.tour or []) else 'open'} tour of "
                     f"{result.rows}x{result.cols} from {result.start_square}")
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


@cli.command()
@click.argument("size")
@click.argument("start")
@_solver_option
@click.option("--closed", is_flag=True, help="Ask for a closed (re-entrant) tour.")
@click.option(
    "--exhaustive",
    is_flag=True,
    help="Search without a node budget, so a finished search proves no_tour (engine).",
)
@click.option("--time-limit", "time_limit", type=float, default=None, metavar="S",
              help="Wall-clock limit in seconds; on expiry the status is unknown.")
@click.option("--node-limit", type=int, default=None, metavar="N",
              help="Override the engine's node budget.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead.")
@click.option("--labels", is_flag=True, help="Print rank/file labels around the board.")
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
) -> int:
    """Solve one job in-process: a knight's tour of SIZE (8 or 6x8) from START (a1 or r,c).

    Prints the board with step numbers (1 = start square, row 0 at the top) and a status line
    starting with '#', so the output can be piped into 'ktour verify -'. Exit 0 when the job is
    decided (found or no_tour), 1 when it is unknown or an error.
    """
    from knights_tour.api import solve as api_solve
    from knights_tour.tourfile import format_step_matrix

    check_solver_name(solver)
    board = parse_board(size)
    start_sq = board.parse_square(start)
    if time_limit is not None and time_limit <= 0:
        raise click.BadParameter("must be positive", param_hint="--time-limit")
    if node_limit is not None and node_limit <= 0:
        raise click.BadParameter("must be positive", param_hint="--node-limit")
    result = api_solve(
        board, start_sq, solver=solver, closed=closed, time_limit_s=time_limit,
        exhaustive=exhaustive, node_limit=node_limit,
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        if result.tour is not None and result.status == Status.FOUND:
            click.echo(format_step_matrix(board, result.tour, labels=labels), nl=False)
        click.echo(_status_line(result))
    return EXIT_OK if result.status in (Status.FOUND, Status.NO_TOUR) else EXIT_NOT_OK


# -- verify -------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--closed", is_flag=True, help="Require a closed (re-entrant) tour.")
@click.option("--start", "start", default=None, metavar="SQ",
              help="Require the tour to start on this square (a1 or r,c).")
@click.option("--record", type=int, default=None, metavar="N",
              help="For a JSON Lines file: check the N-th record (1-based).")
def verify(file: str, closed: bool, start: str | None, record: int | None) -> int:
    """Check the tour in FILE ('-' = stdin).

    FILE is a step-number matrix (one line per row, top row first; the number k on a square
    means the knight visits it at step k, 1-based or 0-based; lines starting with '#' are
    ignored) or a JSON record as written by 'ktour solve --json' / 'ktour collect'. A record
    that says closed: true, or names a start, is held to it. Exit 0 valid, 1 invalid (with the
    verifier's reason), 2 unreadable file.
    """
    from knights_tour.tourfile import read_tour_file

    board, tour, meta = read_tour_file(file, record=record)
    start_sq = board.parse_square(start) if start is not None else meta.get("start")
    need_closed = closed or bool(meta.get("closed"))
    verdict = verify_tour(board, tour, start=start_sq, closed=need_closed)
    if not verdict.ok:
        click.echo(f"invalid: {verdict.reason}")
        return EXIT_NOT_OK
    kind = "closed" if is_closed(tour) else "open"
    click.echo(f"valid {kind} tour of {board.label} from {board.algebraic(tour[0])}")
    return EXIT_OK


# -- entry point ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run ``ktour`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Never raises for user errors: a :class:`KnightsTourError`, a click usage error or an
    ``OSError`` (e.g. an unwritable ``--out``) becomes one ``ktour: error: ...`` line on
    stderr and exit code 2; Ctrl-C gives 130.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name="ktour", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return EXIT_BAD_INPUT
    except click.UsageError as exc:
        hint = ""
        if exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        _err(f"{exc.format_message()}{hint}")
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        _err(exc.format_message())
        return exc.exit_code if exc.exit_code else EXIT_BAD_INPUT
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("ktour: interrupted", err=True)
        return EXIT_INTERRUPTED
    except KnightsTourError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except OSError as exc:
        _err(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
        return EXIT_BAD_INPUT
    if isinstance(rv, int):
        return rv
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
