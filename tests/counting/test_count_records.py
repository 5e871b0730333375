"""A count's records (counting/records.py) encode to the JSON the count wrote as plain dicts:
the same keys in the same order, the same bytes, so workers and stored counts of an earlier
version read them as before."""

from __future__ import annotations

import json

import msgspec
import pytest

from knights_tour.board import Board
from knights_tour.counting.records import (
    ClassFigures,
    CountEntry,
    CountExtra,
    DpProgress,
    DpResult,
    DpSubJob,
    TrunkFigures,
)
from knights_tour.store.registry import dumps

pytestmark = pytest.mark.unit

LAYERS = [{"step": 0, "states": 1, "transitions": 2, "seconds": 0.001, "parts": 1}]


def _old_dp_item(board, start, role, group=-1, square=None, after=-1, memory_bytes=1):
    """The sub-job dict as the DP client built it by hand."""
    name = f"trunk{group}" if role == "trunk" else f"sq{square[0]}.{square[1]}"
    return {
        "kind": "dp",
        "key": f"{board.label}:dp:{name}",
        "rows": board.rows,
        "cols": board.cols,
        "start": None if start is None else list(start),
        "role": role,
        "group": group,
        "square": None if square is None else list(square),
        "after": after,
        "memory_bytes": int(memory_bytes),
    }


@pytest.mark.parametrize(
    ("start", "role", "fields"),
    [
        (None, "trunk", {"group": 1}),
        ((2, 3), "trunk", {"group": 0}),
        (None, "tail", {"group": 0, "square": (3, 3), "after": 23}),
        ((0, 1), "tail", {"group": -1, "square": (0, 1), "after": -1}),
    ],
)
def test_a_dp_sub_job_is_sent_and_stored_as_before(start, role, fields):
    board = Board(7, 6)
    sj = DpSubJob.of(board, start, role, memory_bytes=2**30, **fields)
    old = _old_dp_item(board, start, role, memory_bytes=2**30, **fields)
    assert msgspec.json.encode(sj) == json.dumps(old, separators=(",", ":")).encode()
    assert dumps(sj.to_dict()) == dumps(old)
    assert DpSubJob.from_dict(json.loads(dumps(old))) == sj


def test_progress_and_results_are_stored_as_before():
    old = {
        "sweep": "trunk0",
        "role": "trunk",
        "step": 7,
        "n_steps": 24,
        "states": 1234,
        "transitions": 56789,
        "seconds": 0.25,
        "parts": 2,
        "done_transitions": 99999,
        "done_s": 1.5,
        "tasks": 3,
        "peak_rss_bytes": 2**27,
        "worker": None,
        "at": 1764262000.125,
    }
    record = DpProgress(**old)
    assert dumps(msgspec.to_builtins(record)) == dumps(old)
    assert msgspec.json.decode(dumps(old), type=DpProgress) == record
    tail = {
        "representative": [2, 2],
        "count": 64,
        "method": "full sweep",
        "peak_states": 10,
        "transitions": 20,
        "layers": LAYERS,
    }
    fig = ClassFigures(
        representative=(2, 2),
        count=64,
        method="full sweep",
        peak_states=10,
        transitions=20,
        layers=LAYERS,
    )
    result = DpResult(role="tail", figures=fig, peak_rss_bytes=5)
    assert dumps(msgspec.to_builtins(result)) == dumps(
        {"role": "tail", "figures": tail, "peak_rss_bytes": 5}
    )
    trunk = TrunkFigures(layers=[], peak_states=0, method="not run")
    assert dumps(msgspec.to_builtins(trunk)) == dumps(
        {"layers": [], "peak_states": 0, "method": "not run"}
    )
    assert dumps(msgspec.to_builtins(TrunkFigures(layers=LAYERS, peak_states=1))) == dumps(
        {"layers": LAYERS, "peak_states": 1}
    )


def test_a_reports_extra_keeps_each_methods_keys_in_order():
    figures = [
        ClassFigures(representative=(0, 1), count=0, method="no search"),
        ClassFigures(
            representative=(0, 0),
            count=304,
            method="halves",
            upper_peak_states=5,
            pairs=6,
            transitions=7,
            seconds=0.5,
        ),
    ]
    in_process = CountExtra(
        method="frontier DP",
        dp_classes=figures,
        wall_s=1.25,
        peak_rss_bytes=10,
        lower_halves=[LAYERS],
        trunks=[],
    )
    assert json.dumps(msgspec.to_builtins(in_process)) == json.dumps(
        {
            "method": "frontier DP",
            "dp_classes": [
                {"representative": [0, 1], "count": 0, "method": "no search"},
                {
                    "representative": [0, 0],
                    "count": 304,
                    "method": "halves",
                    "upper_peak_states": 5,
                    "pairs": 6,
                    "transitions": 7,
                    "seconds": 0.5,
                },
            ],
            "wall_s": 1.25,
            "peak_rss_bytes": 10,
            "lower_halves": [LAYERS],
            "trunks": [],
        }
    )
    on_workers = CountExtra(
        method="frontier DP",
        dp_classes=[],
        wall_s=2.0,
        peak_rss_bytes=10,
        peak_rss_bytes_per_worker={"w1": 10},
        trunks=[LAYERS],
        count_id="5x5-open-dp-all",
        subjob_s=1.5,
        counting_s=None,
        reused_subjobs=5,
    )
    assert list(msgspec.to_builtins(on_workers)) == [
        "method",
        "dp_classes",
        "wall_s",
        "peak_rss_bytes",
        "peak_rss_bytes_per_worker",
        "trunks",
        "count_id",
        "subjob_s",
        "counting_s",
        "reused_subjobs",
    ]
    enumeration = CountExtra(count_id="5x5-open-d0-all-folded", subjob_s=0.5, counting_s=None)
    assert msgspec.to_builtins(enumeration) == {
        "count_id": "5x5-open-d0-all-folded",
        "subjob_s": 0.5,
        "counting_s": None,
    }
    assert msgspec.to_builtins(CountExtra()) == {}


def test_a_partial_count_entry_is_stored_as_before():
    """save_partial's entry: its own fields, then a DP sub-job's result, then an error."""
    layers = {"layers": LAYERS, "peak_states": 1}
    old = {
        "count": 0,
        "nodes": 12,
        "elapsed_s": 1.2e-05,
        "finished_at": 1764262000.123456,
        "worker": "w1",
        "role": "trunk",
        "figures": layers,
        "peak_rss_bytes": 7,
    }
    entry = CountEntry(
        count=0,
        nodes=12,
        elapsed_s=1.2e-05,
        finished_at=1764262000.123456,
        worker="w1",
        role="trunk",
        figures=msgspec.to_builtins(TrunkFigures(layers=LAYERS, peak_states=1)),
        peak_rss_bytes=7,
    )
    assert dumps(msgspec.to_builtins(entry)) == dumps(old)
    assert msgspec.json.decode(dumps(old), type=CountEntry) == entry
    failed = {"count": None, "nodes": 0, "elapsed_s": 0.0, "finished_at": 1.5, "worker": None}
    failed["error"] = "InvalidJobError: bad"
    bad = CountEntry(count=None, finished_at=1.5, error="InvalidJobError: bad")
    assert dumps(msgspec.to_builtins(bad)) == dumps(failed)
