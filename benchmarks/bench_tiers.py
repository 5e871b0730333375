"""How long a test tier takes: ``python -m pytest -m MARKER -q`` on this tree, and on the tree
of another commit in the same invocation, alternately, with the load around each run.

    python benchmarks/bench_tiers.py                        # the unit tier, this tree, once
    python benchmarks/bench_tiers.py --against b152d27      # ... and that commit's tree
    python benchmarks/bench_tiers.py --marker "" --runs 1   # the whole suite

The other tree is ``git archive REV`` unpacked in a temporary directory and run there with its
own ``src`` first on ``PYTHONPATH`` (the venv is this tree's). Each row: the tree, passed and
deselected counts as pytest reports them, wall seconds, CPU seconds of pytest and every process
it waited for (user + system), and the 1-minute load average before and after. Bytecode caches
are used where they exist (``PYTHONDONTWRITEBYTECODE`` is dropped for the runs; this tree is
collected once before it is timed, the unpacked one run once untimed, which also fills its
numba caches), as on a machine that keeps them.

Options: ``--marker M`` (default ``unit``; empty: every test), ``--runs R`` (default 1),
``--against REV``, ``--json PATH``; after ``--``, pytest's own arguments (paths, ``-k``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_tier(
    tree: Path, marker: str, extra: list[str], collect_only: bool = False
) -> dict[str, object]:
    """``python -m pytest [-m MARKER] -q [EXTRA]`` in ``tree``: its summary line, wall and CPU
    seconds, the load before and after."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree / "src")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    args += ["-m", marker] if marker else []
    args += ["--collect-only"] if collect_only else []
    args += extra
    load_before = os.getloadavg()[0]
    cpu0, t0 = _children_cpu_s(), time.monotonic()
    done = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, _children_cpu_s() - cpu0
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    summary = re.sub(r" in [\d.]+s.*$", "", lines[-1].strip("= ")) if lines else "?"
    return {
        "summary": summary,
        "returncode": done.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--marker", default="unit")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--against", default=None, metavar="REV")
    ap.add_argument("--json", default=None, metavar="PATH")
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's own arguments")
    opts = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-tiers-") as tmp:
        trees = [("this tree", ROOT)]
        if opts.against:
            other = Path(tmp) / "tree"
            other.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", opts.against], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(other)], input=archive.stdout, check=True)
            trees.append((opts.against, other))
        for _, tree in trees:  # bytecode caches; the unpacked tree's numba caches too
            run_tier(tree, opts.marker, opts.pytest_args, collect_only=tree == ROOT)
        rows = []
        for i in range(opts.runs):
            for name, tree in trees:
                row = {"tree": name, "run": i + 1} | run_tier(tree, opts.marker, opts.pytest_args)
                rows.append(row)
                print(
                    f"{name:>12}  run {i + 1}: {row['summary']}; {row['wall_s']} s wall, "
                    f"{row['cpu_s']} s CPU; load {row['load_before']} -> {row['load_after']}",
                    flush=True,
                )
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
