"""Benchmark: size and build time of the batch report and of tour drawings.

One command::

    python benchmarks/bench_report.py [--sizes 5-12] [--from-jsonl results.jsonl] [--out DIR]

Without ``--from-jsonl`` the records are made in-process with :func:`knights_tour.solve`
(warnsdorff, every start square of every board: 620 jobs for 5-12). Prints the HTML and
Markdown report sizes (bytes) and build times, and the SVG size and build time of one tour per
board plus a 100×100 tour; with ``--out`` writes ``report.html``, ``report.md`` and the SVGs
there. The issue's budget is an HTML report under ~5 MB for the 620-job batch.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from knights_tour.board import parse_board_list
from knights_tour.output.report import html_report, markdown_report
from knights_tour.output.svg import tour_svg
from knights_tour.output.tourfile import read_jsonl
from knights_tour.solvers.api import solve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5-12")
    parser.add_argument("--from-jsonl", dest="from_jsonl", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    t0 = time.perf_counter()
    if args.from_jsonl:
        records = read_jsonl(args.from_jsonl)
        how = f"read from {args.from_jsonl}"
    else:
        records = [
            solve(b, sq).to_dict() for b in parse_board_list(args.sizes) for sq in b.squares()
        ]
        how = f"solved in-process ({args.sizes})"
    print(f"{len(records)} records {how} in {time.perf_counter() - t0:.2f} s")
    squares = sum(len(r["tour"]) for r in records if r.get("tour"))
    print(f"{sum(1 for r in records if r.get('tour'))} tours, {squares} tour squares in all")

    t0 = time.perf_counter()
    html = html_report(records, title="bench_report")
    t_html = time.perf_counter() - t0
    t0 = time.perf_counter()
    md = markdown_report(records, title="bench_report")
    t_md = time.perf_counter() - t0
    size = len(html.encode("utf-8"))
    print(
        f"HTML report: {size} bytes ({size / 1024 / 1024:.2f} MiB, "
        f"{size / max(1, len(records)):.0f} bytes/job), built in {t_html:.3f} s"
    )
    print(f"Markdown report: {len(md.encode('utf-8'))} bytes, built in {t_md:.3f} s")

    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.html").write_text(html, encoding="utf-8")
        (out / "report.md").write_text(md, encoding="utf-8")

    firsts = {}
    for r in records:
        if r.get("tour"):
            firsts.setdefault((r["rows"], r["cols"]), r)
    big = solve(100, "a1")
    if big.tour is not None:
        firsts[(100, 100)] = big.to_dict()
    for (rows, cols), rec in sorted(firsts.items()):
        t0 = time.perf_counter()
        svg = tour_svg(rec)
        dt = time.perf_counter() - t0
        print(f"SVG {rows}x{cols}: {len(svg.encode('utf-8'))} bytes in {dt * 1000:.1f} ms")
        if out:
            (out / f"tour-{rows}x{cols}.svg").write_text(svg, encoding="utf-8")


if __name__ == "__main__":
    main()
