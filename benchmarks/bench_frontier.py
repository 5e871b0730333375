"""Benchmark: the frontier DP (states per layer, transitions per second, memory).

One command::

    python benchmarks/bench_frontier.py [SIZE=6] [--start SQ] [--halves] [--memory-gb G]
                                        [--checkpoint-dir DIR] [--json FILE]
    python benchmarks/bench_frontier.py --manifest DIR     # a checkpointed (maybe unfinished) run

Counts the directed open tours from ``--start`` (default: every square, one per symmetry class,
as ``ktour count SIZE --method dp`` does) in this process and prints, per sweep and layer, the
states after the step, the transitions (successor states generated) and transitions per second,
then the grid or the count, the total (compare OEIS A165134: 1728 for 5x5, 6,637,920 for 6x6,
165,575,218,320 for 7x7), wall time and peak RSS. ``--manifest`` prints the same table for the
layers a checkpointed run has finished (its ``manifest.json``), so a long run can be reported
while it is still going. Figures go to benchmarks/README.md or docs/counts/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import msgspec

from knights_tour.board import parse_board
from knights_tour.counting.frontier_run import count_paths
from knights_tour.counting.frontier_store import LayerStat
from knights_tour.counting.method import dp_count, peak_rss_bytes

OEIS_A165134 = {5: 1728, 6: 6_637_920, 7: 165_575_218_320}


def _table(name: str, layers: list[LayerStat]) -> None:
    print(f"{name}: step  states  transitions  seconds  transitions/s  parts")
    for ls in layers:
        rate = ls.transitions / ls.seconds if ls.seconds > 0 else 0.0
        print(
            f"{name}: {ls.step + 1:4d} {ls.states:>13,} {ls.transitions:>13,} "
            f"{ls.seconds:8.2f} {rate:>13,.0f} {ls.parts:3d}"
        )
    total_t = sum(ls.transitions for ls in layers)
    total_s = sum(ls.seconds for ls in layers)
    peak = max((ls.states for ls in layers), default=0)
    rate = total_t / total_s if total_s > 0 else 0.0
    print(
        f"{name}: {len(layers)} layers, peak {peak:,} states, {total_t:,} transitions in "
        f"{total_s:.1f} s ({rate:,.0f}/s)"
    )


def _manifest(path: Path) -> int:
    record = json.loads((path / "manifest.json").read_text())
    _table(path.name, [LayerStat(**d) for d in record["layers"]])
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("size", nargs="?", default="6")
    ap.add_argument("--start", default=None)
    ap.add_argument("--halves", action="store_true", help="meet two halves in the middle")
    ap.add_argument("--memory-gb", type=float, default=8.0)
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--manifest", default=None, help="print a checkpointed run's layers")
    args = ap.parse_args(argv)
    if args.manifest:
        return _manifest(Path(args.manifest))
    board = parse_board(args.size)
    began = time.perf_counter()
    mem = int(args.memory_gb * 2**30)
    record: dict = {"board": board.label, "command": " ".join(["bench_frontier.py", *sys.argv[1:]])}
    if args.start is not None:
        sq = board.parse_square(args.start)
        res = count_paths(
            board, sq, halves=args.halves, memory_bytes=mem, checkpoint_dir=args.checkpoint_dir
        )
        for sweep in res.sweeps:
            _table(sweep.name, sweep.layers)
        print(
            f"{board.label} from {board.algebraic(sq)}: {res.paths:,} directed open tours "
            f"({res.method})"
        )
        record.update(res.to_dict())
    else:
        report = dp_count(
            board, memory_bytes=mem, checkpoint_dir=args.checkpoint_dir, halves=args.halves or None
        )
        extra = msgspec.to_builtins(report.extra)  # a CountExtra struct (a dict before it)
        for fig in extra.get("dp_classes", []):
            print(
                f"class {fig['representative']}: {fig['count']:,} ({fig['method']}, "
                f"{fig.get('seconds', 0)} s)"
            )
            for name, layers in fig.get("layers", {}).items():
                _table(f"{fig['representative']} {name}", [LayerStat(**d) for d in layers])
        for i, low in enumerate(extra.get("lower_halves", [])):
            _table(f"lower{i}", [LayerStat(**d) for d in low])
        for row in report.grid:
            print(" ".join(f"{v:>12,}" for v in row))
        expect = OEIS_A165134.get(board.rows) if board.is_square else None
        print(f"total {report.total:,}" + (f" (A165134: {expect:,})" if expect else ""))
        record.update(report.to_dict())
    wall = time.perf_counter() - began
    record.update(wall_s=round(wall, 3), peak_rss_bytes=peak_rss_bytes())
    print(f"wall {wall:.1f} s; peak RSS {record['peak_rss_bytes'] / 2**30:.2f} GiB")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
