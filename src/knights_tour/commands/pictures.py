"""The picture commands of ``ktour``: ``draw`` (a tour as an SVG file or a terminal board) and
``report`` (a batch as one self-contained HTML page and/or Markdown).

Plain click commands registered on the ``ktour`` group in :mod:`knights_tour.cli`; exit 0 on
success, 2 on bad input (raised as :class:`~knights_tour.errors.KnightsTourError` / click
usage errors and turned into one ``ktour: error: ...`` line by :func:`knights_tour.cli.main`),
files written atomically.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from knights_tour.batches.status import newest_batch
from knights_tour.batches.store import collect as collect_records
from knights_tour.board import parse_board
from knights_tour.commands._errors import ExitCode
from knights_tour.commands._options import redis_url_option
from knights_tour.commands._shared import write_output
from knights_tour.errors import KnightsTourError, NoTourError, TourFormatError
from knights_tour.local.backend import open_store
from knights_tour.output.render import print_board, tour_view
from knights_tour.output.report import html_report, markdown_report
from knights_tour.output.svg import tour_svg
from knights_tour.output.tourfile import numbered, read_jsonl, read_tour_file
from knights_tour.tours.verify import is_closed, verify_tour


def load_drawable(
    source: str, index: int | None = None, start: str | None = None, size: str | None = None
) -> dict[str, Any]:
    """Pick one record to draw from ``source``.

    ``source`` is a JSON record file, a JSON Lines file (records as from ``ktour run --out``
    or ``ktour collect --format jsonl``) or a step-number matrix (see
    :mod:`knights_tour.output.tourfile`); ``-`` reads standard input.

    Parameters
    ----------
    index : int, optional
        1-based: the N-th record of a JSON Lines file, or with ``start`` the N-th record that
        matches.
    start : str, optional
        Select records whose start square is this (algebraic or ``r,c``, read on each record's
        own board).
    size : str, optional
        With ``start``: only records of this board (``8`` or ``6x8``).

    Returns
    -------
    dict
        A JSON record (``rows``, ``cols``, ``tour``, ``start``, ``closed``, ...; ``tour`` None
        for a record without one). A step matrix becomes a record with ``closed`` true when the
        tour is re-entrant.

    Raises
    ------
    TourFormatError
        Unreadable file, no record matching, or several matching without ``--index``.
    """
    if start is None:
        try:
            board, tour, meta = read_tour_file(source, record=index)
        except NoTourError as exc:  # no_tour, unknown: the board and start square are drawn
            return dict(exc.record)
        except TourFormatError as exc:  # the reader's hint names verify's options
            text = str(exc).replace(
                "choose one with --record N (or check every record with --all)",
                "choose one with --index N or --start SQ",
            )
            raise TourFormatError(text) from None
        if meta.get("format") == "json":
            return dict(meta["record"])
        return {
            "rows": board.rows,
            "cols": board.cols,
            "start": list(tour[0]),
            "tour": [list(sq) for sq in tour],
            "closed": is_closed(tour),
            "status": "found",
            "solver": "",
        }
    want_board = parse_board(size) if size is not None else None
    matches = []
    for rec in read_jsonl(source):
        try:
            board = parse_board((int(rec["rows"]), int(rec["cols"])))
            if want_board is not None and board != want_board:
                continue
            if list(board.parse_square(start)) == [int(v) for v in rec["start"]]:
                matches.append(rec)
        except (KeyError, TypeError, ValueError, KnightsTourError):
            continue  # unreadable record, or SQ is off this record's board: not a match
    where = f"start {start}" + (f" on {want_board.label}" if want_board else "")
    if not matches:
        raise TourFormatError(f"{source}: no record with {where}")
    return numbered(
        matches,
        index,
        choose=lambda: (
            f"{source}: {len(matches)} records with {where} (boards {_boards(matches)}); "
            "choose with --size or --index N"
        ),
        missing=lambda n: f"{source}: no match {n} ({len(matches)} records with {where})",
    )


def _boards(matches: list[dict[str, object]]) -> str:
    """The boards of ``matches`` as ``"5x5, 6x6"`` (their sizes read as the match read them)."""
    sizes = sorted({(int(str(m["rows"])), int(str(m["cols"]))) for m in matches})
    return ", ".join(f"{r}x{c}" for r, c in sizes)


@click.command()
@click.argument(
    "source", metavar="RECORD_OR_FILE", type=click.Path(dir_okay=False, allow_dash=True)
)
@click.option(
    "--svg",
    "svg_out",
    default=None,
    metavar="FILE",
    help="Write the drawing as SVG to FILE ('-' = stdout) instead of printing a board.",
)
@click.option(
    "--index",
    type=int,
    default=None,
    metavar="N",
    help="JSON Lines: the N-th record (1-based); with --start, the N-th match.",
)
@click.option(
    "--start", default=None, metavar="SQ", help="JSON Lines: the record starting on SQ (a1 or r,c)."
)
@click.option(
    "--size", default=None, metavar="N|RxC", help="With --start: only records of this board."
)
@click.option(
    "--numbers/--no-numbers",
    default=None,
    help="Step numbers in the SVG (default: when they are legible).",
)
@click.option(
    "--px",
    type=click.IntRange(16, 20000),
    default=None,
    metavar="PX",
    help="SVG size in px of the board's longer side (default: 60 px a square, 320..1600).",
)
@click.option(
    "--ascii",
    "ascii_",
    is_flag=True,
    help="Terminal board in plain ASCII (default when output is not a terminal).",
)
def draw(
    source: str,
    svg_out: str | None,
    index: int | None,
    start: str | None,
    size: str | None,
    numbers: bool | None,
    px: int | None,
    ascii_: bool,
) -> ExitCode:
    """Draw one tour: a JSON record, a JSON Lines file of records (pick with --index or
    --start [--size]) or a step-number matrix file ('-' = stdin).

    With --svg FILE: a chessboard with the knight's path, start (green) and end (red) marked,
    closed tours closed. Without: the board with step numbers in the terminal, coloured on a
    terminal, plain ASCII otherwise ([ 1] = start, (64) = end). A tour that fails the verifier
    is still drawn, with a warning on stderr; a record without a tour (no_tour, unknown) is
    drawn as its board and start square, as 'ktour solve --svg' draws it.
    """
    if index is not None and index < 1:
        raise click.BadParameter("must be 1 or more", param_hint="--index")
    if size is not None and start is None:
        raise click.BadParameter("needs --start", param_hint="--size")
    rec = load_drawable(source, index=index, start=start, size=size)
    view = tour_view(rec)
    if view.tour is None:
        click.echo(
            f"ktour: the record holds no tour (status {rec.get('status') or '?'}): its board "
            "and start square are drawn",
            err=True,
        )
    else:
        verdict = verify_tour(
            view.board, view.tour, start=view.start, closed=bool(rec.get("closed"))
        )
        if not verdict.ok:
            click.echo(f"ktour: warning: not a valid knight's tour: {verdict.reason}", err=True)
    if svg_out is not None:
        write_output(svg_out, tour_svg(rec, numbers=numbers, size_px=px) + "\n", "--svg")
    else:
        print_board(rec, ascii=True if ascii_ else None, file=sys.stdout)
    return ExitCode.OK


@click.command()
@click.argument("batch_id", metavar="[BATCH]", required=False)
@click.option(
    "--from-jsonl",
    "from_jsonl",
    default=None,
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read the records from a JSON Lines file (e.g. 'ktour run --out') instead "
    "of Redis; works offline.",
)
@click.option(
    "--html",
    "html_out",
    default=None,
    metavar="FILE",
    help="Write the HTML report (one self-contained file) to FILE.",
)
@click.option(
    "--markdown",
    "md_out",
    default=None,
    metavar="FILE",
    help="Write the Markdown summary to FILE ('-' = stdout; the default when --html is not given).",
)
@click.option("--title", default=None, help="Report title.")
@redis_url_option("Redis URL for BATCH; default KT_REDIS_URL, else the embedded Redis.")
def report(
    batch_id: str | None,
    from_jsonl: str | None,
    html_out: str | None,
    md_out: str | None,
    title: str | None,
    redis_url: str | None,
) -> ExitCode:
    """Report on a batch: BATCH from Redis (default: the newest batch), or --from-jsonl FILE.

    --html FILE writes one self-contained page (summary per board and tour kind, a grid of
    start squares per board, every tour drawable by clicking its square); --markdown FILE
    writes a summary table with start-square maps for an issue or README. Exit 0 on success,
    1 if there are no records.
    """
    if batch_id is not None and from_jsonl is not None:
        raise click.UsageError("give either BATCH or --from-jsonl FILE, not both")
    if html_out is None and md_out is None:
        md_out = "-"
    records: list[Any]  # JSON record dicts from a file, Records from Redis
    if from_jsonl is not None:
        records = read_jsonl(from_jsonl)
        default_title = f"Knight's tours: {Path(from_jsonl).name if from_jsonl != '-' else 'stdin'}"
    else:
        with open_store(redis_url) as backend:
            if batch_id is None:
                batch_id = newest_batch(backend.client)
            records = collect_records(backend.client, batch_id)
        default_title = f"Knight's tours: batch {batch_id}"
    if not records:
        raise click.ClickException(
            f"no records in {'batch ' + batch_id if batch_id else from_jsonl}: nothing to report"
        )
    title = title or default_title
    if html_out is not None:
        write_output(html_out, html_report(records, title=title), "--html")
    if md_out is not None:
        write_output(md_out, markdown_report(records, title=title), "--markdown")
    return ExitCode.OK


__all__ = ["draw", "report", "load_drawable"]
