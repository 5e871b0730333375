"""``ktour count --method dp``: the real command (a subprocess), its grid against OEIS
A165134 and the enumeration, the method line, the checkpoints a rerun resumes from, and bad
input as one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import msgspec
from _cli import ktour

from knights_tour.commands import count_dp
from knights_tour.commands.count_dp import _WorkerProgress
from knights_tour.counting.records import DpProgress


def _ktour(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return ktour("count", *args, env={"KT_DATA_DIR": str(data_dir)}, timeout=600)


def test_dp_grid_5x5_matches_a165134_and_says_its_method(tmp_path):
    out = tmp_path / "grid.json"
    run = _ktour("5", "--method", "dp", "--out", str(out), data_dir=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "total: 1,728" in run.stdout
    assert "method: frontier DP" in run.stdout and "ktour: method: frontier DP" in run.stderr
    assert "of the estimated" in run.stderr and "ETA" in run.stderr  # progress lines
    # the estimate is of what the command runs (halves on 5x5), not of full sweeps
    assert "past the estimated" not in run.stderr, run.stderr
    record = json.loads(out.read_text())
    assert record["total"] == 1728
    assert record["grid"][0][0] == 304 and record["grid"][2][2] == 64
    assert record["grid"][0][1] == 0  # minority colour of an odd board
    assert record["peak_rss_bytes"] > 0 and record["wall_s"] > 0
    layer_files = list((tmp_path / "frontier").glob("*/manifest.json"))
    assert layer_files  # checkpoints a rerun resumes from
    again = _ktour("5", "--method", "dp", "--start", "a1", "--json", data_dir=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["grid"][4][0] == 304
    assert "past the estimated" not in again.stderr, again.stderr  # one class alone


def test_closed_dp_is_one_line(tmp_path):
    run = _ktour("5", "--method", "dp", "--closed", data_dir=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "ktour: error:" in run.stderr
    assert "Traceback" not in run.stderr


def test_progress_eta_from_the_estimate_then_the_runs_own_rate():
    progress = _WorkerProgress(estimate=1_000_000)
    progress.base, progress.began = 0, 100.0  # this run began at t=100 s with nothing done
    assert progress.eta(1, 100.0) == "~ 0% of the estimated 1e+06 transitions, ETA ~ 2 s"
    # 250,000 in 10 s: 25,000 a second
    assert progress.eta(250_000, 110.0) == "~ 25% of the estimated 1e+06 transitions, ETA ~ 30 s"
    assert progress.eta(1_000_000, 120.0) == "~ 100% of the estimated 1e+06 transitions, ETA ~ 0 s"
    assert progress.eta(1_050_000, 121.0).startswith("past the estimated 1e+06 transitions")


def test_progress_lines_from_the_workers_records(monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(count_dp, "note", lines.append)
    progress = _WorkerProgress(estimate=1_000)
    rec = DpProgress(
        sweep="trunk-a",
        role="trunk",
        step=4,
        n_steps=10,
        states=1234,
        transitions=500,
        seconds=0.5,
        parts=1,
        done_transitions=600,
        done_s=0.5,
        tasks=1,
        peak_rss_bytes=0,
        worker=None,
        at=1.0,
    )
    progress({})  # the first poll: what an earlier run left is not shown
    progress({"k": rec})
    assert lines and lines[-1].startswith(
        "dp trunk-a: layer 5/10, 1,234 states, 1,000 transitions/s"
    )
    progress({"k": rec})  # nothing moved: no line
    assert len(lines) == 1
    progress(
        {"k": msgspec.structs.replace(rec, step=9, at=2.0)}
    )  # a sweep's last layer is always shown
    assert len(lines) == 2 and "layer 10/10" in lines[-1]
