"""Batch reports: one self-contained HTML file to browse, and Markdown to paste.

Input is :class:`~knights_tour.tours.record.Record` objects (or JSON record dicts, as ``ktour run
--out`` writes them, which are validated into records).

Records are grouped by board and tour kind: ``(rows, cols, closed)``. For each group the
report gives

* a summary row: start squares, how many have a tour (``found``), how many are proven to have
  none and by which proof (parity, exhaustive search, CP-SAT, theorem), ``unknown``,
  ``error``, agreement of the CP-SAT cross-check (``checks.cpsat``), and solver times;
* a grid of the start squares in board orientation (row 0 at the top, rank 1 at the bottom),
  each cell coloured by the outcome from that start;
* every tour, viewable as a picture: click (or focus and press Enter on) a cell, or open the
  page with ``#8x8-open-a1`` in the address.

When several records share a start square (e.g. two solvers, or a retry), the square counts
once with the best outcome (found > no_tour > unknown > error), and a start with both a found
tour and a ``no_tour`` claim is counted as a *conflict*.

:func:`html_report` needs no network: CSS and a small script are inline, the tours are embedded
as compact JSON (start square and one digit per knight move), the script draws the selected
tour as SVG, and each board also carries one server-drawn SVG
(:func:`knights_tour.output.svg.tour_svg`) so the page shows tours even with scripts off. A 620-job
batch (every start on 5×5..12×12) is about 230 kB. The page template is
``knights_tour/templates/report.html.j2``.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2

from knights_tour.board import KNIGHT_OFFSETS, Board, Square
from knights_tour.errors import TourFormatError
from knights_tour.output.durations import fmt_seconds
from knights_tour.output.grouping import (
    PROOF_LETTER,
    PROOFS,
    BoardGroup,
    Cell,
    group_records,
    totals,
)
from knights_tour.output.render import tour_view
from knights_tour.output.svg import default_size_px, tour_svg
from knights_tour.tours.record import TourResult


def _proof_words(by_proof: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {p}" for p, n in by_proof.items()) or "–"


def _cpsat_words(s: Mapping[str, Any]) -> str:
    if not s["cpsat_checked"]:
        return "not run"
    bad = s["cpsat_checked"] - s["cpsat_agree"]
    words = f"{s['cpsat_agree']}/{s['cpsat_checked']} agree" + (f" ({bad} DISAGREE)" if bad else "")
    if s.get("mismatches"):
        words += f", {s['mismatches']} MISMATCH"
    return words


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------

MAP_SYMBOL = {"found": "T", "unknown": "?", "error": "!"}


def start_map(group: BoardGroup) -> str:
    """The start squares of a group as text, board orientation (rank 1 at the bottom):
    ``T`` tour found; for no tour the proof letter in lower case (``p`` parity, ``e``
    exhaustive, ``c`` CP-SAT, ``t`` theorem, ``n`` unstated); ``?`` unknown, ``!`` error,
    ``X`` conflict, ``-`` not in the batch. File letters underneath (last letter only)."""
    b = group.board
    rank_w = len(str(b.rows))
    lines = []
    for r in range(b.rows):
        syms = []
        for c in range(b.cols):
            cell = group.cells.get((r, c))
            if cell is None:
                syms.append("-")
            elif cell.conflict:
                syms.append("X")
            elif cell.status == "no_tour":
                syms.append(PROOF_LETTER.get(cell.proof or "", "N").lower())
            else:
                syms.append(MAP_SYMBOL[cell.status])
        lines.append(f"{b.rows - r:>{rank_w}} " + " ".join(syms))
    lines.append(" " * (rank_w + 1) + " ".join(Board.file_name(c)[-1] for c in range(b.cols)))
    return "\n".join(lines)


def markdown_report(
    records: Iterable[TourResult | Mapping[str, Any]],
    title: str = "Knight's tour batch report",
    *,
    maps: bool = True,
) -> str:
    """A Markdown summary of a batch: a totals line, one table row per board and tour kind,
    and (``maps``) each board's start-square map (see :func:`start_map`) in a collapsed
    ``<details>`` block — GitHub-flavoured Markdown, pastes into an issue or a README.

    Returns
    -------
    str
        The Markdown text, ending with a newline.
    """
    groups, skipped = group_records(records)
    tot = totals(groups)
    out = [f"# {title}", ""]
    out.append(
        f"{tot['jobs']} jobs over {tot['starts']} start squares on {len(groups)} board(s): "
        f"**{tot['found']} tours found**, {tot['no_tour']} proven without a tour "
        f"({_proof_words(tot['by_proof'])}), {tot['unknown']} unknown, {tot['error']} errors. "
        f"Solvers: {', '.join(tot['solvers']) or '–'}. CP-SAT cross-check: {_cpsat_words(tot)}."
    )
    if tot["conflicts"]:
        out.append(f"\n**{tot['conflicts']} start square(s) have conflicting answers.**")
    if tot["verifier_fail"]:
        out.append(f"\n**{tot['verifier_fail']} tour(s) failed the verifier.**")
    if skipped:
        out.append(f"\n{skipped} record(s) could not be read and were skipped.")
    out += [
        "",
        "| board | tour | starts | found | no tour (proof) | unknown | error | CP-SAT | "
        "time total | median | max | CP-SAT time |",
        "|---|---|--:|--:|---|--:|--:|---|--:|--:|--:|--:|",
    ]
    for g in groups:
        s = g.summary()
        nt = f"{s['no_tour']}" + (f" ({_proof_words(s['by_proof'])})" if s["no_tour"] else "")
        out.append(
            f"| {g.rows}×{g.cols} | {g.kind} | {s['starts']} | {s['found']} | {nt} | "
            f"{s['unknown']} | {s['error']} | {_cpsat_words(s)} | "
            f"{fmt_seconds(s['time_total_s'])} | {fmt_seconds(s['time_median_s'])} | "
            f"{fmt_seconds(s['time_max_s'])} | {fmt_seconds(s['cpsat_time_s'])} |"
        )
    if maps and groups:
        out += [
            "",
            "<details><summary>Start-square maps (T = tour found; p/e/c/t = no tour by parity/"
            "exhaustive search/CP-SAT/theorem; ? unknown; ! error; X conflict)</summary>",
            "",
        ]
        for g in groups:
            out += [f"**{g.rows}×{g.cols} {g.kind}**", "", "```", start_map(g), "```", ""]
        out.append("</details>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

_TEMPLATE_FILE = "report.html.j2"
"""The page template, package data in ``knights_tour/templates`` (Jinja2, autoescaped)."""


def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("knights_tour.output", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(_TEMPLATE_FILE)


def _cell_class(cell: Cell) -> str:
    if cell.conflict:
        return "conflict"
    if cell.status == "no_tour":
        return f"no_tour p-{cell.proof}" if cell.proof in PROOFS else "no_tour"
    return cell.status


def _cell_text(cell: Cell) -> str:
    if cell.conflict:
        return "X"
    if cell.status == "no_tour":
        return PROOF_LETTER.get(cell.proof or "", "N")
    return {"unknown": "?", "error": "!"}.get(cell.status, "")


_MOVE_CODE = {off: str(i) for i, off in enumerate(KNIGHT_OFFSETS)}


def encode_tour(cols: int, tour: list[Square]) -> dict[str, Any]:
    """Compact form of a tour for the page's script: ``{"s": start, "m": moves}`` with the
    start as a row-major index and each knight move as one digit, its index in
    :data:`knights_tour.board.KNIGHT_OFFSETS` (one byte a square instead of about four). A
    path with a step that is not a knight move is kept as ``{"t": [row-major indices]}``.
    """
    moves = []
    for (r0, c0), (r1, c1) in zip(tour, tour[1:], strict=False):
        code = _MOVE_CODE.get((r1 - r0, c1 - c0))
        if code is None:
            return {"t": [cols * r + c for r, c in tour]}
        moves.append(code)
    return {"s": cols * tour[0][0] + tour[0][1], "m": "".join(moves)}


def _script_json(data: Any) -> str:
    """JSON safe to place inside a ``<script>`` element (no ``<``, ``>`` or ``&``)."""
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_report(
    records: Iterable[TourResult | Mapping[str, Any]],
    title: str = "Knight's tour batch report",
    *,
    svg_px: int = 640,
) -> str:
    """One self-contained HTML page for a batch (see the module docstring).

    Parameters
    ----------
    records : iterable of record dicts or TourResult
        Any mix of boards, start squares, open/closed and solvers.
    title : str
        Page title and heading.
    svg_px : int
        Largest size in px of a tour drawing (the server-drawn first tour of each board and the
        ones the script draws); smaller boards use :func:`knights_tour.output.svg.default_size_px`.

    Returns
    -------
    str
        The HTML document. It references nothing outside itself (no network, no files).
    """
    groups, skipped = group_records(records)
    rows = [(g, g.summary()) for g in groups]
    data_groups = []
    tour_index: dict[tuple[int, int, int], int] = {}
    first_svg: list[str] = []
    first_cap: list[str] = []
    for gi, g in enumerate(groups):
        tours: list[dict[str, Any]] = []
        first: tuple[TourResult, Cell] | None = None
        for r, c in sorted(g.cells):
            cell = g.cells[(r, c)]
            rec = cell.tour_record
            if rec is None:
                continue
            try:
                view = tour_view(rec)
            except TourFormatError:
                continue
            if not view.tour:
                continue
            tour_index[(gi, r, c)] = len(tours)
            tours.append({**encode_tour(g.cols, view.tour), "c": view.closed})
            if first is None or (r, c) == (g.rows - 1, 0):  # prefer a1 (bottom-left)
                first = (rec, cell)
        data_groups.append({"rows": g.rows, "cols": g.cols, "closed": g.closed, "tours": tours})
        if first is not None:
            size = min(svg_px, default_size_px(g.board))
            first_svg.append(tour_svg(first[0], size_px=size, id_prefix=f"kt-g{gi}"))
            first_cap.append(first[1].describe())
        else:
            first_svg.append("")
            first_cap.append("No tour found on this board.")
    batch_ids = sorted({r.batch_id for g in groups for r in g.records if r.batch_id})
    return _template().render(
        title=title,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        groups=groups,
        rows=rows,
        tot=totals(groups),
        skipped=skipped,
        batch_ids=batch_ids[:5] + (["…"] if len(batch_ids) > 5 else []),
        tour_index=tour_index,
        first_svg=first_svg,
        first_cap=first_cap,
        svg_px=int(svg_px),
        offsets=json.dumps([list(o) for o in KNIGHT_OFFSETS], separators=(",", ":")),
        data_json=_script_json({"groups": data_groups}),
        proof_words=_proof_words,
        cpsat_words=_cpsat_words,
        fmt_s=fmt_seconds,
        cell_class=_cell_class,
        cell_text=_cell_text,
        file_name=Board.file_name,
    )


__all__ = ["html_report", "markdown_report", "start_map", "encode_tour"]
