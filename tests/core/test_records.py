"""The typed Record: a lossless view of the JSON record (same keys, same order, same values)."""

from __future__ import annotations

import json

import pytest

from knights_tour.core.jobs import Job, error_record, run_job
from knights_tour.core.records import Record


def _roundtrip(record: dict) -> Record:
    wire = json.loads(json.dumps(record))  # what Redis hands back
    rec = Record.from_dict(wire)
    out = rec.to_dict()
    assert out == wire
    assert list(out) == list(wire), "key order changed"
    assert json.dumps(out) == json.dumps(wire)
    return rec


def test_found_record_roundtrips_and_reads_typed():
    raw = run_job(Job(5, 5, (0, 0)), batch_id="b1", worker="w1@test")
    raw["attempts"] = 1  # as a worker adds it
    rec = _roundtrip(raw)
    assert rec.status == "found" and rec.is_decided and rec.verifier_ok is True
    assert len(rec.tour) == 25 and rec.start == [0, 0] and rec.start_square == "a5"
    assert rec.worker == "w1@test" and rec.attempts == 1 and rec.batch_id == "b1"
    assert rec.seconds == raw["job_elapsed_s"] and rec.board_label == "5x5"
    assert rec.cpsat_agrees is None and not rec.cpsat_failed and rec.extra == {}


def test_no_tour_by_colour_parity_roundtrips():
    # 5x5 has 13 squares of the corner colour and 12 of the other: an open tour of 25 squares
    # alternates colours, so it must start on the majority colour; (0, 1) is on the minority.
    rec = _roundtrip(run_job(Job(5, 5, (0, 1))))
    assert rec.status == "no_tour" and rec.proof == "parity" and rec.is_decided
    assert rec.tour is None and rec.verifier_ok is None


def test_cpsat_cross_checked_record_keeps_the_cpsat_fields_in_order():
    rec = _roundtrip(run_job(Job(5, 5, (0, 0), verify="cpsat", time_limit_s=30.0)))
    assert rec.verify == "cpsat" and rec.cpsat_status == "found"
    assert rec.cpsat_agrees is True and rec.cpsat_tour_accepted is True and not rec.mismatch


def test_error_records_of_invalid_and_lost_jobs_roundtrip():
    bad = _roundtrip(error_record({"rows": "x", "start": [0], "junk": 1}, ValueError("bad"),
                                  "b1", job_key="invalid:abc"))
    assert bad.status == "error" and not bad.is_decided and bad.rows == "x"
    assert bad.error_type == "ValueError" and bad.reason == "bad"
    lost = error_record(Job(6, 6, (1, 1)), "worker lost 3 times", "b1")
    lost["error_type"], lost["worker"], lost["attempts"] = "WorkerLost", "w2@test", 4
    assert _roundtrip(lost).error_type == "WorkerLost"


def test_unknown_keys_are_kept_in_extra_and_in_place():
    raw = run_job(Job(5, 5, (0, 0)))
    raw = {**dict(list(raw.items())[:3]), "future_field": {"x": 1}, **dict(list(raw.items())[3:])}
    rec = _roundtrip(raw)
    assert rec.extra == {"future_field": {"x": 1}}


def test_a_disagreement_counts_as_a_failed_cross_check():
    raw = run_job(Job(5, 5, (0, 0)))
    raw.update({"checks": {"verifier": True, "cpsat": False}, "mismatch": True})
    rec = Record.from_dict(raw)
    assert rec.cpsat_failed and rec.cpsat_agrees is False


def test_a_record_without_the_required_keys_is_refused():
    with pytest.raises(TypeError):
        Record.from_dict({"rows": 5, "cols": 5})
