"""The typed Record: its JSON dict is lossless (every field, in order, the same values back) and
records stored by earlier versions (``z1:`` and plain JSON objects) still decode."""

from __future__ import annotations

import base64
import json
import zlib

import msgspec
import pytest

from knights_tour.batches.jobs import Job, error_record, run_job
from knights_tour.tours.record import Checks, Proof, Record, Status
from knights_tour.tours.stored import KNIGHT_MOVES, decode_stored, encode_stored


def _roundtrip(record: Record) -> Record:
    wire = json.loads(json.dumps(record.to_dict()))  # what a JSON reader hands back
    rec = Record.from_dict(wire)
    assert rec == record
    out = rec.to_dict()
    assert out == wire
    assert list(out) == list(wire) == list(Record.__struct_fields__), "key order changed"
    assert json.dumps(out) == json.dumps(wire)
    assert decode_stored(encode_stored(rec)) == record  # and through the stored form
    return rec


def test_found_record_roundtrips_and_reads_typed():
    raw = run_job(Job(5, 5, (0, 0)), batch_id="b1", worker="w1@test")
    raw = msgspec.structs.replace(raw, attempts=1)  # as a worker adds it
    rec = _roundtrip(raw)
    assert rec.status == Status.FOUND and rec.is_decided and rec.checks.verifier is True
    assert len(rec.tour) == 25 and rec.start == (0, 0) and rec.start_square == "a5"
    assert rec.worker == "w1@test" and rec.attempts == 1 and rec.batch_id == "b1"
    assert rec.restarts >= 1  # the engine's own runs, apart from the worker's starts
    assert rec.seconds == raw.job_elapsed_s and rec.board_label == "5x5"
    assert rec.checks.cpsat is None and not rec.cpsat_failed


def test_no_tour_by_colour_parity_roundtrips():
    # 5x5 has 13 squares of the corner colour and 12 of the other: an open tour of 25 squares
    # alternates colours, so it must start on the majority colour; (0, 1) is on the minority.
    rec = _roundtrip(run_job(Job(5, 5, (0, 1))))
    assert rec.status == Status.NO_TOUR and rec.proof == Proof.PARITY and rec.is_decided
    assert rec.tour is None and rec.checks.verifier is None
    assert rec.to_dict()["tour"] is None and rec.to_dict()["proof"] == "parity"


def test_cpsat_cross_checked_record_keeps_the_cpsat_fields_in_order():
    rec = _roundtrip(run_job(Job(5, 5, (0, 0), verify="cpsat", time_limit_s=30.0)))
    assert rec.verify == "cpsat" and rec.cpsat_status == Status.FOUND
    assert rec.checks.cpsat is True and rec.cpsat_tour_accepted is True and not rec.mismatch
    assert rec.cpsat_model_status in ("OPTIMAL", "FEASIBLE")
    plain = rec.to_dict()
    cpsat_keys = [k for k in plain if k.startswith("cpsat_")]
    assert cpsat_keys == [
        "cpsat_model_status",
        "cpsat_status",
        "cpsat_proof",
        "cpsat_reason",
        "cpsat_elapsed_s",
        "cpsat_nodes",
        "cpsat_tour_accepted",
        "cpsat_note",
    ]
    assert plain["cpsat_status"] == "found" and plain["checks"] == {"verifier": True, "cpsat": True}


def test_error_records_of_invalid_and_lost_jobs_roundtrip():
    bad = _roundtrip(
        error_record(
            {"rows": "x", "start": [0], "junk": 1}, ValueError("bad"), "b1", job_key="invalid:abc"
        )
    )
    assert bad.status == Status.ERROR and not bad.is_decided
    assert (bad.rows, bad.cols, bad.start) == (0, 0, (0, 0))  # what did not fit the type
    assert bad.error_type == "ValueError" and bad.reason == "bad" and bad.job_key == "invalid:abc"
    lost = error_record(Job(6, 6, (1, 1)), "worker lost 3 times", "b1")
    lost = msgspec.structs.replace(lost, error_type="WorkerLost", worker="w2@test", attempts=4)
    back = _roundtrip(lost)
    assert (back.error_type, back.worker, back.attempts) == ("WorkerLost", "w2@test", 4)


def test_unknown_keys_of_a_json_record_are_ignored():
    """A key this version does not know (written by a later one) does not stop a record from
    reading; the record holds the known fields only."""
    rec = run_job(Job(5, 5, (0, 0)))
    raw = rec.to_dict()
    raw = {**dict(list(raw.items())[:3]), "future_field": {"x": 1}, **dict(list(raw.items())[3:])}
    assert Record.from_dict(raw) == rec
    assert "future_field" not in Record.from_dict(raw).to_dict()


def test_a_disagreement_counts_as_a_failed_cross_check():
    raw = run_job(Job(5, 5, (0, 0))).to_dict()
    raw.update({"checks": {"verifier": True, "cpsat": False}, "mismatch": True})
    rec = Record.from_dict(raw)
    assert rec.cpsat_failed and rec.checks == Checks(verifier=True, cpsat=False)
    agree = msgspec.structs.replace(rec, checks=Checks(verifier=True, cpsat=True), mismatch=False)
    assert not agree.cpsat_failed


@pytest.mark.parametrize("missing", ["rows", "cols", "start", "solver"])
def test_a_record_without_the_required_keys_is_refused(missing):
    data = {"rows": 5, "cols": 5, "start": [0, 0], "solver": "warnsdorff"}
    assert Record.from_dict(data).start == (0, 0)
    del data[missing]
    with pytest.raises(msgspec.ValidationError, match=missing):
        Record.from_dict(data)


def _z1(data: dict) -> str:
    """The ``z1:`` stored form earlier versions wrote: zlib'd compact JSON, base64, with the
    tour as ``"r,c:"`` and one digit per move (an index into KNIGHT_MOVES)."""
    tour = data.get("tour")
    if tour:
        moves = [KNIGHT_MOVES.index((b[0] - a[0], b[1] - a[1])) for a, b in zip(tour, tour[1:])]
        data = {**data, "tour": f"{tour[0][0]},{tour[0][1]}:" + "".join(map(str, moves))}
    raw = json.dumps(data, separators=(",", ":")).encode()
    return "z1:" + base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def test_records_in_the_forms_of_earlier_versions_still_decode():
    """Earlier versions stored a dict: the engine's runs merged in as ``attempts`` (then
    overwritten by the worker's count), ``via`` beside it, and the CP-SAT solver's own status
    name as ``cpsat_status``."""
    rec = run_job(Job(6, 6, (0, 0), verify="cpsat"), batch_id="b1", worker="w1@test")
    old = rec.to_dict()
    for new in (
        "restarts",
        "via",
        "cpsat_model_status",
        "cpsat_status",
        "cpsat_proof",
        "cpsat_reason",
    ):
        del old[new]
    old.update(attempts=1, cpsat_status=rec.cpsat_model_status)
    expected = msgspec.structs.replace(rec, restarts=None, attempts=1, cpsat_status=None)
    for stored in (_z1(old), json.dumps(old), json.dumps(old).encode()):
        got = decode_stored(stored)
        assert got == expected
        assert got.cpsat_model_status in ("OPTIMAL", "FEASIBLE")
        assert got.tour.tolist() == rec.tour.tolist()


def test_a_corrupt_z1_record_is_a_value_error():
    with pytest.raises(ValueError):
        decode_stored("z1:" + base64.b64encode(b"not zlib").decode())
