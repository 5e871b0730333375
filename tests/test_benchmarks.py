"""Every benchmark script runs once, at a tiny size, as its users run it: a moved or renamed
function, a changed record type or option breaks the suite, not the next person who wants a
figure.

Each script is run as ``python benchmarks/SCRIPT.py ARGS`` from the repository's root, with
``KT_DATA_DIR`` (and ``--json``, where the script writes one) in the test's temporary
directory; it must exit 0, and what it writes must parse. No figure is asserted (they depend
on the machine: benchmarks/README.md). ``baselines.py`` is a module of ``bench_engine.py``
(the baseline solvers), run through it.

Facts: OEIS A165134 (1,728 directed open tours on 5x5) for the frontier DP's total.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"

TINY_TEST = """
def test_two_colours():
    # a knight's move changes the colour of its square
    assert (0 + 0) % 2 != (1 + 2) % 2
"""

BASELINE_FINGERPRINT = "benchmarks/fingerprints/before-restructure.txt"

# script -> list of (id, arguments); "{tmp}" is the test's temporary directory. The JSON file
# each writes (if any) is "{tmp}/out.json".
RUNS: dict[str, list[tuple[str, list[str]]]] = {
    "bench_collect.py": [
        ("batches", ["--batches", "1", "--sizes", "5", "--json", "{tmp}/out.json"]),
        ("split", ["--split", "--sizes", "5"]),  # these two print their JSON
        ("formats", ["--formats", "--sizes", "5"]),
        (
            "scale",
            ["--scale", "--sizes", "5", "--no-base", "--cache", "{tmp}/5.msgpack"]
            + ["--json", "{tmp}/out.json"],
        ),
    ],
    "bench_collect_fixed.py": [
        (
            "5x5",
            ["--sizes", "5", "--no-base", "--repeat", "1", "--cache", "{tmp}/5.msgpack"]
            + ["--json", "{tmp}/out.json"],
        )
    ],
    "bench_count.py": [("5x5", ["5", "--jobs", "1", "--json", "{tmp}/out.json"])],
    "bench_count_celery.py": [
        (
            "5x5",
            ["5", "--workers", "1", "--repeat", "1", "--plans", "default,unfolded:1"]
            + ["--json", "{tmp}/out.json"],
        )
    ],
    "bench_cpsat.py": [
        (
            "rect-closed",
            [
                "--groups",
                "rect-closed",
                "--first",
                "2",
                "--repeat",
                "1",
                "--time-limit",
                "10",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
    "bench_engine.py": [
        (
            "5x5",
            [
                "--sizes",
                "5",
                "--large",
                "",
                "--thin-rows",
                "",
                "--square-sizes",
                "",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
    "bench_faults.py": [("none", ["--only", "none", "--sizes", "5", "--json", "{tmp}/out.json"])],
    "bench_frontier.py": [("5x5", ["5", "--json", "{tmp}/out.json"])],
    "bench_network_faults.py": [
        (
            "client-blackhole",
            [
                "--only",
                "client-blackhole-30",
                "--fault-s",
                "1",
                "--sizes",
                "6",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
    "bench_pipeline.py": [
        ("chunk-32", ["--workers", "1", "--chunks", "32", "--json", "{tmp}/out.json"])
    ],
    "bench_redis_cost.py": [
        (
            "sweep-5",
            [
                "--workload",
                "sweep",
                "--sweep-sizes",
                "5",
                "--no-monitor",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
    "bench_report.py": [("5x5", ["--sizes", "5", "--out", "{tmp}/report"])],
    # its smallest run: the committed baseline compared with itself (a fingerprint takes minutes)
    "behaviour_fingerprint.py": [
        ("compare", ["--compare", BASELINE_FINGERPRINT, BASELINE_FINGERPRINT])
    ],
    "bench_scale.py": [
        (
            "sweep-5",
            [
                "--workload",
                "sweep",
                "--sweep-sizes",
                "5",
                "--workers",
                "1",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
    "bench_submit.py": [("5", ["--sizes", "5", "--repeats", "1", "--json", "{tmp}/out.json"])],
    "bench_status.py": [
        ("6x6", ["--sizes", "6", "--workers", "1", "--repeats", "1", "--json", "{tmp}/out.json"]),
        ("synthetic", ["--synthetic-sizes", "5", "--repeats", "1", "--json", "{tmp}/out.json"]),
    ],
    "bench_bad_input.py": [("one", ["--repeats", "1", "--json", "{tmp}/out.json"])],
    "bench_startup.py": [
        (
            "one",
            [
                "--repeats",
                "1",
                "--split-repeats",
                "1",
                "--first-job-workers",
                "2",
                "--first-job-repeats",
                "1",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
    "bench_tiers.py": [
        ("tiny", ["--marker", "", "--json", "{tmp}/out.json", "--", "{tmp}/test_tiny.py"])
    ],
    "stress_tiers.py": [
        (
            "tiny",
            [
                "--runs",
                "1",
                "--burners",
                "0",
                "--tiers",
                "{tmp}/test_tiny.py",
                "--log-dir",
                "{tmp}/logs",
                "--json",
                "{tmp}/out.json",
            ],
        )
    ],
}
"""The tiny run(s) of each script (the smallest input each offers)."""

MODULES = {"baselines.py"}
"""Files of benchmarks/ that are modules of a script, not scripts."""

CASES = [
    pytest.param(script, args, id=f"{script[:-3]}-{name}")
    for script, runs in RUNS.items()
    for name, args in runs
]


def _files_under(*dirs: Path) -> set[Path]:
    return {p for d in dirs for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_every_script_has_a_tiny_run():
    scripts = {p.name for p in BENCH.glob("*.py")} - MODULES
    assert scripts == set(RUNS), "give each benchmark script a tiny run in RUNS"


@pytest.mark.parametrize(("script", "args"), CASES)
def test_benchmark_runs_at_a_tiny_size(script: str, args: list[str], tmp_path: Path) -> None:
    (tmp_path / "test_tiny.py").write_text(TINY_TEST)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env["KT_DATA_DIR"] = str(tmp_path / "data")
    before = _files_under(BENCH)
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"{script} {' '.join(argv)}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-5000:]
    assert not _files_under(BENCH) - before, "the benchmark wrote into benchmarks/"
    if "{tmp}/out.json" in args:
        doc = json.loads((tmp_path / "out.json").read_text())
        assert doc, f"{script} wrote an empty JSON document"
        if script == "bench_frontier.py":
            assert doc["total"] == 1728  # OEIS A165134, n = 5
        if script == "bench_network_faults.py":
            assert list(doc) == ["client-blackhole-30"]
        if script == "bench_tiers.py":
            assert [(r["tree"], r["summary"]) for r in doc] == [("this tree", "1 passed")]
        if script == "stress_tiers.py":
            assert [(r["passed"], r["failed"]) for r in doc["runs"]] == [(1, 0)]
        if "--scale" in args:  # the collect's own CPU and each phase's
            assert doc["jsonl_after_cpu_user_s"] > 0 and doc["phase_render_jsonl_cpu_s"] >= 0
    if script == "bench_collect.py" and "--batches" not in args:
        assert json.loads(proc.stdout)
    if script == "bench_report.py":
        assert (tmp_path / "report" / "report.html").stat().st_size > 0
