"""Batch reports: one self-contained HTML file to browse, and Markdown to paste.

Input is a list of JSON records (``TourResult.to_dict()``, as stored by the pipeline and
written by ``ktour run --out``) or :class:`~knights_tour.result.TourResult` objects.

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
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2

from knights_tour.board import KNIGHT_OFFSETS, Board, Square
from knights_tour.errors import KnightsTourError, TourFormatError
from knights_tour.output.render import tour_view
from knights_tour.result import TourResult
from knights_tour.output.svg import default_size_px, tour_svg

STATUS_RANK = {"found": 0, "no_tour": 1, "unknown": 2, "error": 3}
PROOFS = ("parity", "exhaustive", "cpsat", "theorem")
PROOF_LETTER = {"parity": "P", "exhaustive": "E", "cpsat": "C", "theorem": "T"}


def _as_record(obj: TourResult | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(obj, TourResult):
        return obj.to_dict()
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TourFormatError(f"expected a record dict or TourResult, got {type(obj).__name__}")


def _fmt_s(x: float | None) -> str:
    """Seconds in words: ``180 µs``, ``12.3 ms``, ``4.56 s``, ``2.5 min``."""
    if x is None:
        return "–"
    if x >= 120:
        return f"{x / 60:.1f} min"
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 1:
        return f"{x:.3g} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.0f} µs"


@dataclass
class Cell:
    """One start square of a board group, with every record that started there."""

    row: int
    col: int
    name: str
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """Best outcome among the records (found > no_tour > unknown > error)."""
        return min((_status(r) for r in self.records), key=lambda s: STATUS_RANK[s])

    @property
    def proof(self) -> str | None:
        """The proof of the first ``no_tour`` record, when the best outcome is ``no_tour``."""
        if self.status != "no_tour":
            return None
        return next((r.get("proof") for r in self.records if _status(r) == "no_tour"), None)

    @property
    def conflict(self) -> bool:
        """True if one record found a tour here and another claimed there is none."""
        statuses = {_status(r) for r in self.records}
        return "found" in statuses and "no_tour" in statuses

    @property
    def tour_record(self) -> dict[str, Any] | None:
        """The first record here with a found tour that can be drawn."""
        for r in self.records:
            if _status(r) == "found" and r.get("tour"):
                return r
        return None

    def describe(self) -> str:
        """Hover text: the square, then one line per record."""
        lines = [self.name]
        for r in self.records:
            st = _status(r).replace("_", " ")
            extra = ""
            if r.get("proof"):
                extra = f" by {r['proof']}"
                detail = " ".join(str(r.get("proof_detail") or "").split())
                if detail:
                    extra += f" ({detail[:240]}{'…' if len(detail) > 240 else ''})"
            elif r.get("reason"):
                extra = f" ({r['reason']})"
            cp = (r.get("checks") or {}).get("cpsat")
            cps = "" if cp is None else (", CP-SAT agrees" if cp else ", CP-SAT DISAGREES")
            if r.get("cpsat_elapsed_s") is not None:
                cps += f" (CP-SAT {_fmt_s(_elapsed(r, 'cpsat_elapsed_s'))})"
            lines.append(
                f"{r.get('solver', '?')}: {st}{extra}, {_fmt_s(_elapsed(r))}, "
                f"{int(r.get('nodes') or 0)} nodes{cps}"
            )
            if r.get("cpsat_note"):
                lines.append(f"  {r['cpsat_note']}")
        if self.conflict:
            lines.append("CONFLICT: a tour was found and also claimed impossible")
        return "\n".join(lines)


def _status(record: Mapping[str, Any]) -> str:
    s = str(record.get("status") or "error")
    return s if s in STATUS_RANK else "error"


def _elapsed(record: Mapping[str, Any], key: str = "elapsed_s") -> float:
    try:
        return float(record.get(key) or 0.0)
    except (TypeError, ValueError):
        return 0.0


@dataclass
class BoardGroup:
    """All records of one board and tour kind, with the per-board summary numbers."""

    rows: int
    cols: int
    closed: bool
    cells: dict[tuple[int, int], Cell] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def board(self) -> Board:
        return Board(self.rows, self.cols)

    @property
    def kind(self) -> str:
        return "closed" if self.closed else "open"

    @property
    def key(self) -> str:
        """``"8x8-open"`` — used in element ids and URL fragments."""
        return f"{self.rows}x{self.cols}-{self.kind}"

    def summary(self) -> dict[str, Any]:
        """Summary numbers: ``starts``, ``jobs``, ``found``, ``no_tour`` (total),
        ``by_proof`` {proof: count}, ``unknown``, ``error``, ``conflicts``, ``cpsat_checked``
        (jobs with ``checks.cpsat`` true or false), ``cpsat_agree``, ``mismatches`` (jobs the
        pipeline flagged ``mismatch``: CP-SAT and the solver disagree), ``cpsat_time_s`` (sum
        of ``cpsat_elapsed_s``, None when no job was cross-checked), ``verifier_fail``,
        ``time_total_s``, ``time_median_s``, ``time_max_s`` (solver ``elapsed_s``),
        ``solvers``. Counts of outcomes are per start square; CP-SAT and times are per job."""
        statuses = [c.status for c in self.cells.values()]
        by_proof: dict[str, int] = {}
        for c in self.cells.values():
            if c.status == "no_tour":
                p = c.proof or "unstated"
                by_proof[p] = by_proof.get(p, 0) + 1
        cps = [(r.get("checks") or {}).get("cpsat") for r in self.records]
        ver = [(r.get("checks") or {}).get("verifier") for r in self.records]
        times = [_elapsed(r) for r in self.records]
        return {
            "starts": len(self.cells),
            "jobs": len(self.records),
            "found": statuses.count("found"),
            "no_tour": statuses.count("no_tour"),
            "by_proof": dict(sorted(by_proof.items())),
            "unknown": statuses.count("unknown"),
            "error": statuses.count("error"),
            "conflicts": sum(c.conflict for c in self.cells.values()),
            "cpsat_checked": sum(v is not None for v in cps),
            "cpsat_agree": sum(v is True for v in cps),
            "mismatches": sum(bool(r.get("mismatch")) for r in self.records),
            "cpsat_time_s": (
                sum(_elapsed(r, "cpsat_elapsed_s") for r in self.records)
                if any(r.get("cpsat_elapsed_s") is not None for r in self.records) else None
            ),
            "verifier_fail": sum(v is False for v in ver),
            "time_total_s": sum(times),
            "time_median_s": statistics.median(times) if times else None,
            "time_max_s": max(times) if times else None,
            "solvers": sorted({str(r.get("solver") or "?") for r in self.records}),
        }


def group_records(
    records: Iterable[TourResult | Mapping[str, Any]],
) -> tuple[list[BoardGroup], int]:
    """Group records by ``(rows, cols, closed)``, sorted by board size then open before closed.

    Returns
    -------
    (groups, skipped)
        ``skipped`` counts records that could not be placed (no valid board or start square).
    """
    groups: dict[tuple[int, int, bool], BoardGroup] = {}
    skipped = 0
    for obj in records:
        try:
            rec = _as_record(obj)
            board = Board(int(rec["rows"]), int(rec["cols"]))
            start = board.check_square(tuple(int(v) for v in rec["start"]))
        except (KeyError, TypeError, ValueError, IndexError, KnightsTourError):
            skipped += 1
            continue
        closed = bool(rec.get("closed", False))
        g = groups.setdefault(
            (board.rows, board.cols, closed), BoardGroup(board.rows, board.cols, closed)
        )
        g.records.append(rec)
        cell = g.cells.get(start)
        if cell is None:
            cell = g.cells[start] = Cell(start[0], start[1], board.algebraic(start))
        cell.records.append(rec)
    ordered = [groups[k] for k in sorted(groups, key=lambda k: (k[0] * k[1], k[0], k[1], k[2]))]
    return ordered, skipped


def _totals(groups: list[BoardGroup]) -> dict[str, Any]:
    sums = [g.summary() for g in groups]
    keys = ("starts", "jobs", "found", "no_tour", "unknown", "error", "conflicts",
            "cpsat_checked", "cpsat_agree", "mismatches", "verifier_fail", "time_total_s")
    tot: dict[str, Any] = {k: sum(s[k] for s in sums) for k in keys}
    by_proof: dict[str, int] = {}
    for s in sums:
        for p, n in s["by_proof"].items():
            by_proof[p] = by_proof.get(p, 0) + n
    tot["by_proof"] = dict(sorted(by_proof.items()))
    cp_times = [s["cpsat_time_s"] for s in sums if s["cpsat_time_s"] is not None]
    tot["cpsat_time_s"] = sum(cp_times) if cp_times else None
    tot["time_max_s"] = max((s["time_max_s"] or 0.0 for s in sums), default=None)
    tot["solvers"] = sorted({x for s in sums for x in s["solvers"]})
    return tot


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
    tot = _totals(groups)
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
            f"{s['unknown']} | {s['error']} | {_cpsat_words(s)} | {_fmt_s(s['time_total_s'])} | "
            f"{_fmt_s(s['time_median_s'])} | {_fmt_s(s['time_max_s'])} | "
            f"{_fmt_s(s['cpsat_time_s'])} |"
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


def decode_tour(cols: int, entry: Mapping[str, Any]) -> list[Square]:
    """Inverse of :func:`encode_tour`: the list of ``(row, col)``."""
    if "t" in entry:
        return [divmod(int(i), cols) for i in entry["t"]]
    r, c = divmod(int(entry["s"]), cols)
    out = [(r, c)]
    for ch in entry["m"]:
        dr, dc = KNIGHT_OFFSETS[int(ch)]
        r, c = r + dr, c + dc
        out.append((r, c))
    return out


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
        tours = []
        first: tuple[dict[str, Any], Cell] | None = None
        for (r, c) in sorted(g.cells):
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
    batch_ids = sorted({str(r["batch_id"]) for g in groups for r in g.records if r.get("batch_id")})
    return _template().render(
        title=title,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        groups=groups,
        rows=rows,
        tot=_totals(groups),
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
        fmt_s=_fmt_s,
        cell_class=_cell_class,
        cell_text=_cell_text,
        file_name=Board.file_name,
    )


__all__ = [
    "html_report", "markdown_report", "group_records", "start_map", "encode_tour", "decode_tour",
    "BoardGroup", "Cell",
]
