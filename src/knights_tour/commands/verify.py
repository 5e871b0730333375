"""``ktour verify``: check a tour file (a step-number matrix, a JSON record, or every record of
a JSON Lines file) with the verifier (:func:`knights_tour.tours.verify.verify_tour`).

Apart from :mod:`knights_tour.commands.solve`, which loads the solvers' job type, the SVG
drawing and rich, none of which a check needs; a file that cannot be read is refused without
them. Exit 0 valid, 1 invalid, 2 a file that cannot be read as a matrix or record.
"""

from __future__ import annotations

import click

from knights_tour.commands._errors import ExitCode
from knights_tour.errors import StepNumbersError
from knights_tour.output.tourfile import read_jsonl, read_tour_file, record_to_tour
from knights_tour.tours.verify import is_closed, verify_tour


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


__all__ = ["verify"]
