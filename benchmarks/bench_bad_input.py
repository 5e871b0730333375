"""How fast ``ktour`` refuses bad input: the wall and CPU seconds of commands that end with
one ``ktour: error:`` line (exit 2), e.g. ``ktour run --sizes abc``.

Each case runs ``python -m knights_tour ARGS`` in a subprocess, with a fresh ``KT_DATA_DIR``
(nothing in it: no embedded Redis is ever started by these cases) and ``KT_REDIS_URL`` unset.
The unreachable Redis is ``127.0.0.1:1`` (connection refused at once, no server needed).

``--compare SRC`` also times the package in directory SRC (an older checkout's ``src``, put
first on ``PYTHONPATH``), interleaved call by call with this tree's so both see the same load,
and prints the ratio of the medians. The exit code of every call is checked (2).

Usage::

    python benchmarks/bench_bad_input.py [--repeats 10] [--compare SRC] [--json FILE]

Figures go in ``benchmarks/README.md`` ("Bad input"), with the machine's load (``uptime``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CASES: dict[str, list[str]] = {
    "run --sizes abc": ["run", "--sizes", "abc"],
    "run --sizes 0": ["run", "--sizes", "0"],
    "run --solver nope": ["run", "--sizes", "5", "--solver", "nope"],
    "run --time-limit -1": ["run", "--sizes", "5", "--time-limit", "-1"],
    "run --workers 0": ["run", "--sizes", "5", "--workers", "0"],
    "run --redis http://...": ["run", "--sizes", "5", "--redis", "http://127.0.0.1:6379/0"],
    "run --redis .../abc": [
        "run",
        "--sizes",
        "5",
        "--workers",
        "0",
        "--redis",
        "redis://127.0.0.1:1/abc",
    ],
    "run --redis unreachable": ["run", "--sizes", "5", "--redis", "redis://127.0.0.1:1/0"],
    "submit --redis .../abc": ["submit", "--sizes", "5", "--redis", "redis://127.0.0.1:1/abc"],
    "submit --redis unreachable": ["submit", "--sizes", "5", "--redis", "redis://127.0.0.1:1/0"],
    "workers --redis .../abc": ["workers", "--redis", "redis://127.0.0.1:1/abc"],
}
"""Case name -> ``ktour`` arguments; every one must exit 2."""


def timed(src: Path, args: list[str], data_dir: Path) -> tuple[float, float]:
    """``(wall s, CPU s)`` of ``python -m knights_tour ARGS`` with ``src`` first on the path.

    Raises
    ------
    AssertionError
        If the call does not exit 2 (the case is not refused as bad input).
    """
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env |= {"PYTHONPATH": str(src), "KT_DATA_DIR": str(data_dir)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "knights_tour", *args],
        env=env,
        cwd=data_dir.parent,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 2, (src, args, proc.returncode, proc.stderr[-500:])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Time every case ``--repeats`` times (interleaved with ``--compare SRC``), print the
    medians (and ratios), optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--compare", type=Path, default=None, metavar="SRC")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    opts = parser.parse_args()
    trees = {"this": SRC} | ({"before": opts.compare.resolve()} if opts.compare else {})
    out: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "kt-data"
        for name, args in CASES.items():
            samples: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
            for _ in range(opts.repeats):
                for tree, src in trees.items():
                    samples[tree].append(timed(src, args, data_dir))
            row = {
                tree: {
                    "wall_s": statistics.median(w for w, _ in s),
                    "cpu_s": statistics.median(c for _, c in s),
                }
                for tree, s in samples.items()
            }
            out[name] = row
            this = row["this"]
            line = f"{name:28s} this: wall {this['wall_s']:.3f} s, CPU {this['cpu_s']:.3f} s"
            if "before" in row:
                b = row["before"]
                line += (
                    f" | before: wall {b['wall_s']:.3f} s, CPU {b['cpu_s']:.3f} s"
                    f" | ratio wall {this['wall_s'] / b['wall_s']:.2f}x,"
                    f" CPU {this['cpu_s'] / b['cpu_s']:.2f}x"
                )
            print(line, flush=True)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min) at the end; medians of {opts.repeats}")
    if opts.json:
        opts.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
