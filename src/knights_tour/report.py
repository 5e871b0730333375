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
as compact JSON (start square and one digit per knight move), the script draws the selected tour as SVG, and each
board also carries one server-drawn SVG (:func:`knights_tour.svg.tour_svg`) so the page shows
tours even with scripts off. A 620-job batch (every start on 5×5..12×12) is a few hundred kB.

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
from knights_tour.render import tour_view
from knights_tour.result import TourResult
from knights_tour.svg import default_size_px, tour_svg

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


def group_records(records: Iterable[TourResult | Mapping[str, Any]]) -> tuple[list[BoardGroup], int]:
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

_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2em 2em;color:#222;background:#fafafa}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .4em}
.meta{color:#666}
table.sum{border-collapse:collapse;background:#fff;margin:.6em 0}
table.sum th,table.sum td{border:1px solid #ddd;padding:3px 8px;text-align:right}
table.sum th{background:#f0f0f0}table.sum td.l,table.sum th.l{text-align:left}
table.sum tr.tot td{font-weight:600;background:#f7f7f7}
.bad{color:#c62828;font-weight:600}
.legend span{display:inline-block;margin-right:1em}
.sw{display:inline-block;width:13px;height:13px;vertical-align:-2px;margin-right:4px;border:1px solid #999}
.board{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
table.grid{border-collapse:collapse;font-size:11px}
table.grid td{width:26px;height:26px;padding:0;text-align:center;border:1px solid #fff;cursor:pointer;color:#333}
table.grid.small td{width:9px;height:9px;font-size:0}
table.grid th{font-weight:normal;color:#777;padding:0 3px}
table.grid td:focus,table.grid td.sel{outline:3px solid #1d3f8f;outline-offset:-2px}
td.found{background:#66bb6a}td.no_tour{background:#b0bec5}td.p-parity{background:#cfd8dc}
td.p-exhaustive{background:#90a4ae}td.p-cpsat{background:#78909c;color:#fff}td.p-theorem{background:#a1887f;color:#fff}
td.unknown{background:#ffca28}td.error{background:#e53935;color:#fff}td.conflict{background:#8e24aa;color:#fff}
td.none{background:#eee;cursor:default}
.viewer{min-width:300px}.viewer svg{max-width:min(640px,92vw);height:auto;display:block;background:#fff}
.cap{color:#444;margin:.3em 0;white-space:pre-line;max-width:640px}
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="meta">{{ tot.jobs }} jobs, {{ tot.starts }} start squares, {{ groups|length }} board(s).
Solvers: {{ tot.solvers|join(", ") or "–" }}.{% if batch_ids %} Batch: {{ batch_ids|join(", ") }}.{% endif %}
Generated {{ generated }}.{% if skipped %} <span class="bad">{{ skipped }} unreadable record(s) skipped.</span>{% endif %}</p>
<table class="sum">
<tr><th class="l">board</th><th class="l">tour</th><th>starts</th><th>found</th><th>no tour</th><th class="l">proofs</th><th>unknown</th><th>error</th><th class="l">CP-SAT check</th><th>time total</th><th>median</th><th>max</th><th>CP-SAT time</th></tr>
{% for g, s in rows %}<tr><td class="l"><a href="#{{ g.key }}">{{ g.rows }}×{{ g.cols }}</a></td><td class="l">{{ g.kind }}</td><td>{{ s.starts }}</td><td>{{ s.found }}</td><td>{{ s.no_tour }}</td><td class="l">{{ proof_words(s.by_proof) }}</td><td>{{ s.unknown }}</td><td{% if s.error %} class="bad"{% endif %}>{{ s.error }}</td><td class="l{% if s.cpsat_checked != s.cpsat_agree or s.mismatches %} bad{% endif %}">{{ cpsat_words(s) }}</td><td>{{ fmt_s(s.time_total_s) }}</td><td>{{ fmt_s(s.time_median_s) }}</td><td>{{ fmt_s(s.time_max_s) }}</td><td>{{ fmt_s(s.cpsat_time_s) }}</td></tr>
{% endfor %}<tr class="tot"><td class="l">all</td><td></td><td>{{ tot.starts }}</td><td>{{ tot.found }}</td><td>{{ tot.no_tour }}</td><td class="l">{{ proof_words(tot.by_proof) }}</td><td>{{ tot.unknown }}</td><td>{{ tot.error }}</td><td class="l">{{ cpsat_words(tot) }}</td><td>{{ fmt_s(tot.time_total_s) }}</td><td></td><td>{{ fmt_s(tot.time_max_s) }}</td><td>{{ fmt_s(tot.cpsat_time_s) }}</td></tr>
</table>
{% if tot.conflicts %}<p class="bad">{{ tot.conflicts }} start square(s) have conflicting answers (a tour found and also claimed impossible).</p>{% endif %}
{% if tot.verifier_fail %}<p class="bad">{{ tot.verifier_fail }} tour(s) failed the verifier.</p>{% endif %}
<p class="legend">Start squares:
<span><i class="sw" style="background:#66bb6a"></i>tour found</span>
<span><i class="sw" style="background:#cfd8dc"></i>P no tour, parity</span>
<span><i class="sw" style="background:#90a4ae"></i>E no tour, exhaustive search</span>
<span><i class="sw" style="background:#78909c"></i>C no tour, CP-SAT</span>
<span><i class="sw" style="background:#a1887f"></i>T no tour, theorem</span>
<span><i class="sw" style="background:#ffca28"></i>? unknown</span>
<span><i class="sw" style="background:#e53935"></i>! error</span>
<span><i class="sw" style="background:#8e24aa"></i>X conflict</span>
— click a square to draw its tour.</p>
{% for g, s in rows %}{% set gi = loop.index0 %}
<h2 id="{{ g.key }}">{{ g.rows }}×{{ g.cols }}, {{ g.kind }} tours — {{ s.found }} of {{ s.starts }} starts have a tour</h2>
<div class="board">
<table class="grid{% if g.cols > 24 %} small{% endif %}" data-g="{{ gi }}" aria-label="start squares of {{ g.rows }}x{{ g.cols }}">
{% for r in range(g.rows) %}<tr><th>{{ g.rows - r }}</th>{% for c in range(g.cols) %}{% set cell = g.cells.get((r, c)) %}{% if cell %}<td id="{{ g.key }}-{{ cell.name }}" class="{{ cell_class(cell) }}" tabindex="0"{% if cell.tour_record %} data-t="{{ tour_index[(gi, r, c)] }}"{% endif %} title="{{ cell.describe() }}">{{ cell_text(cell) }}</td>{% else %}<td class="none" title="{{ g.board.algebraic((r, c)) }}: not in this batch"></td>{% endif %}{% endfor %}</tr>
{% endfor %}<tr><th></th>{% for c in range(g.cols) %}<th>{% if g.cols <= 24 %}{{ file_name(c) }}{% endif %}</th>{% endfor %}</tr>
</table>
<div class="viewer" id="v{{ gi }}"><div class="pic">{{ first_svg[gi]|safe }}</div><p class="cap">{{ first_cap[gi] }}</p></div>
</div>
{% endfor %}
<script type="application/json" id="kt-data">{{ data_json|safe }}</script>
<script>
(function(){
"use strict";
var D=JSON.parse(document.getElementById("kt-data").textContent);
var NS="http://www.w3.org/2000/svg",MAXPX={{ svg_px }};
function f(x){return (Math.round(x*100)/100).toString();}
function fileName(c){var s="",n=c+1;while(n){var m=(n-1)%26;s=String.fromCharCode(97+m)+s;n=Math.floor((n-1)/26);}return s;}
var OFF={{ offsets }};
function decode(e,C){if(e.t)return e.t;var t=[e.s],r=Math.floor(e.s/C),c=e.s%C;
  for(var k=0;k<e.m.length;k++){var o=OFF[e.m.charCodeAt(k)-48];r+=o[0];c+=o[1];t.push(r*C+c);}return t;}
function draw(g,idx,gi){
  var R=g.rows,C=g.cols,t=decode(g.tours[idx],C),closed=g.tours[idx].c,side=Math.max(R,C);
  var size=Math.min(MAXPX,Math.max(320,60*side)),cell=size/side;
  var labels=cell>=14&&side<=52,lab=Math.max(9,Math.min(16,cell*0.32)),m=labels?lab*1.9:0,pad=Math.max(1,cell*0.04);
  var dense=cell<24,sw=Math.max(0.6,cell*(dense?0.1:0.07));
  var ox=m+pad,oy=pad,W=ox+C*cell+pad,H=oy+R*cell+m+pad;
  var digits=String(R*C).length,font=Math.min(cell*0.32,cell*0.8/(0.6*digits)),nums=font>=8&&side<=40;
  function cx(i){return ox+(i%C+0.5)*cell;} function cy(i){return oy+(Math.floor(i/C)+0.5)*cell;}
  var p=[],i,r,c,k;
  var sid="js-g"+gi;
  p.push('<svg xmlns="'+NS+'" id="'+sid+'" class="kt-tour" data-rows="'+R+'" data-cols="'+C+'" data-closed="'+(closed?"true":"false")+'" width="'+f(W)+'" height="'+f(H)+'" viewBox="0 0 '+f(W)+' '+f(H)+'">');
  p.push('<style>#'+sid+' .kt-lab{font:'+f(lab)+'px sans-serif;fill:#555;text-anchor:middle;dominant-baseline:central}#'+sid+' .kt-n{font:600 '+f(font)+'px sans-serif;fill:#111;text-anchor:middle;dominant-baseline:central;paint-order:stroke;stroke:#fff;stroke-width:'+f(Math.max(0.5,font*0.22))+'px;stroke-linejoin:round}</style>');
  p.push('<defs><marker id="'+sid+'-dot" markerUnits="strokeWidth" markerWidth="2" markerHeight="2" refX="1" refY="1"><circle cx="1" cy="1" r="1" fill="#1d3f8f"/></marker></defs>');
  p.push('<rect class="kt-board" x="'+f(ox)+'" y="'+f(oy)+'" width="'+f(C*cell)+'" height="'+f(R*cell)+'" fill="'+(dense?"#f8f1e6":"#f0d9b5")+'"/>');
  var d=[];for(r=0;r<R;r++)for(c=0;c<C;c++)if((r+c)%2)d.push("M"+f(ox+c*cell)+" "+f(oy+r*cell)+"h"+f(cell)+"v"+f(cell)+"h-"+f(cell)+"z");
  if(d.length)p.push('<path class="kt-dark" fill="'+(dense?"#e2cdb0":"#b58863")+'" d="'+d.join("")+'"/>');
  if(labels){for(r=0;r<R;r++)p.push('<text class="kt-lab" x="'+f(ox-m/2)+'" y="'+f(oy+(r+0.5)*cell)+'">'+(R-r)+'</text>');
    for(c=0;c<C;c++)p.push('<text class="kt-lab" x="'+f(ox+(c+0.5)*cell)+'" y="'+f(oy+R*cell+m/2)+'">'+fileName(c)+'</text>');}
  var s=t[0],e=t[t.length-1];
  p.push('<circle class="kt-start" cx="'+f(cx(s))+'" cy="'+f(cy(s))+'" r="'+f(cell*0.34)+'" fill="#2e7d32" stroke="#fff" stroke-width="'+f(sw*0.6)+'"/>');
  if(e!==s)p.push('<circle class="kt-end" cx="'+f(cx(e))+'" cy="'+f(cy(e))+'" r="'+f(cell*0.28)+'" fill="#c62828" stroke="#fff" stroke-width="'+f(sw*0.6)+'"/>');
  var pts=[];for(k=0;k<t.length;k++)pts.push(f(cx(t[k]))+","+f(cy(t[k])));
  if(closed&&t.length>1)pts.push(pts[0]);
  p.push('<polyline class="kt-path" fill="none" stroke="#1d3f8f" stroke-opacity="0.85" stroke-linejoin="round" stroke-linecap="round" stroke-width="'+f(sw)+'"'+(cell>=6?' marker-mid="url(#'+sid+'-dot)"':'')+' points="'+pts.join(" ")+'"/>');
  if(nums){p.push('<g class="kt-nums">');for(k=0;k<t.length;k++)p.push('<text class="kt-n" x="'+f(cx(t[k]))+'" y="'+f(cy(t[k]))+'">'+(k+1)+'</text>');p.push('</g>');}
  p.push('</svg>');
  return p.join("");
}
function show(td){
  var tbl=td.closest("table.grid");if(!tbl)return;
  var gi=+tbl.getAttribute("data-g"),v=document.getElementById("v"+gi);
  var old=tbl.querySelector("td.sel");if(old)old.classList.remove("sel");
  td.classList.add("sel");
  var cap=v.querySelector(".cap"),pic=v.querySelector(".pic");
  if(td.hasAttribute("data-t")){pic.innerHTML=draw(D.groups[gi],+td.getAttribute("data-t"),gi);}
  else{pic.innerHTML="";}
  cap.textContent=td.getAttribute("title");
}
document.addEventListener("click",function(ev){var td=ev.target.closest&&ev.target.closest("table.grid td[id]");if(td)show(td);});
document.addEventListener("keydown",function(ev){if(ev.key==="Enter"||ev.key===" "){var td=document.activeElement;if(td&&td.matches&&td.matches("table.grid td[id]")){ev.preventDefault();show(td);}}});
function fromHash(){var id=decodeURIComponent(location.hash.slice(1));var td=id&&document.getElementById(id);if(td&&td.matches("table.grid td[id]")){show(td);td.scrollIntoView();}}
window.addEventListener("hashchange",fromHash);fromHash();
})();
</script>
</body>
</html>
"""


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
    for (r0, c0), (r1, c1) in zip(tour, tour[1:]):
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
        ones the script draws); smaller boards use :func:`knights_tour.svg.default_size_px`.

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
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(_TEMPLATE)
    return template.render(
        title=title,
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
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
