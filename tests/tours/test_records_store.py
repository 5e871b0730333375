"""The typed record, its stored form and its JSON form, and the paged, sorted collection."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from knights_tour.batches.jobs import Job, make_batch_jobs, record_sort_key, run_job
from knights_tour.batches.records import in_record_order, record_keys
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import collect, create_batch, iter_records
from knights_tour.board import Board
from knights_tour.output.recordfile import jsonl_line
from knights_tour.store import keys
from knights_tour.tours.record import Record, Status, json_bytes, record_from_json, tour_json
from knights_tour.tours.stored import (
    KNIGHT_MOVES,
    STORED_PREFIX,
    decode_moves,
    decode_stored,
    encode_moves,
    encode_stored,
)
from knights_tour.tours.verify import verify_tour


@pytest.fixture(scope="module")
def records_6x6():
    jobs = make_batch_jobs([6])
    return jobs, [run_job(j, worker="w1@host") for j in jobs]


def test_the_eight_knight_moves_are_distinct_and_each_a_knight_move():
    assert len(set(KNIGHT_MOVES)) == 8
    assert all({abs(dr), abs(dc)} == {1, 2} for dr, dc in KNIGHT_MOVES)


def test_a_tour_round_trips_through_three_bits_a_move(records_6x6):
    _, records = records_6x6
    tours = [rec.tour for rec in records if rec.tour is not None]
    assert len(tours) == 36  # every square of 6x6 starts an open tour
    for tour in tours:
        data = encode_moves(tour)
        assert len(data) == 12 + (3 * 35 + 7) // 8
        back = decode_moves(data)
        assert np.array_equal(back, tour)
        assert verify_tour(Board(6, 6), back).ok


def test_a_value_that_is_not_a_chain_of_knight_moves_is_kept_as_squares():
    king = np.array([[0, 0], [0, 1], [1, 1]], dtype=np.int32)
    assert encode_moves(king) is None
    rec = Record(
        rows=2,
        cols=2,
        start=(0, 0),
        solver="warnsdorff",
        status=Status.ERROR,
        tour=king,
        reason="a failed claim",
    )
    assert decode_stored(encode_stored(rec)) == rec


def test_a_record_round_trips_through_its_stored_form(records_6x6):
    _, records = records_6x6
    for rec in records:
        stored = encode_stored(rec)
        assert stored.startswith(STORED_PREFIX)
        assert decode_stored(stored) == rec
        assert json_bytes(decode_stored(stored)) == json_bytes(rec)


@pytest.mark.parametrize(
    "rows, cols, start",
    [
        (5, 5, (0, 0)),
        (6, 6, (2, 3)),
        (3, 10, (0, 0)),
        (8, 8, (7, 0)),
        (7, 40, (3, 20)),
        (70, 70, (0, 0)),
    ],
)
def test_the_json_form_is_what_the_stdlib_writes_for_the_same_values(rows, cols, start):
    """The numpy tour text (tables below 64 squares a side, digit arrays above) gives the
    bytes ``json.dumps`` gives for the tour, and the line the record's plain values."""
    rec = run_job(Job(rows=rows, cols=cols, start=start), worker="w1@host")
    assert rec.status == Status.FOUND
    plain = rec.to_dict()
    line = jsonl_line(rec)
    assert line.endswith("}\n") and "\n" not in line[:-1]
    assert json.loads(line) == plain
    assert tour_json(rec.tour) == json.dumps(rec.tour.tolist(), separators=(",", ":")).encode()
    assert record_from_json(json_bytes(rec)) == rec
    assert list(plain) == list(Record.__struct_fields__)  # every field, in order


def test_a_record_of_the_wrong_shape_is_refused_on_decode_naming_the_field():
    good = json.loads(json_bytes(run_job(Job(rows=5, cols=5, start=(0, 0)))))
    for field, value in (("rows", "5"), ("status", "maybe"), ("closed", 1), ("tour", "a1")):
        with pytest.raises(msgspec.ValidationError, match=field):
            record_from_json(json.dumps(good | {field: value}))


def test_a_40x40_tour_record_is_stored_in_under_a_tenth_of_its_json():
    rec = run_job(make_batch_jobs([40])[0])
    assert len(encode_stored(rec)) * 10 < len(json_bytes(rec))
    assert decode_stored(encode_stored(rec)) == rec


def test_records_stored_by_older_versions_still_read(redis_client, records_6x6):
    """Plain JSON objects (the first form), with the CP-SAT solver's status then named
    ``cpsat_status``, decode to the record of today's fields."""
    jobs, records = records_6x6
    bid = create_batch(redis_client, jobs)
    for rec in records[:10]:
        save_record(redis_client, bid, rec)
    for rec in records[10:]:
        old = rec.to_dict()
        for new in ("restarts", "via", "cpsat_model_status"):
            del old[new]
        redis_client.hset(
            keys.batch_records(bid), rec.job_key, json.dumps(old, separators=(",", ":"))
        )
    got = collect(redis_client, bid)
    assert len(got) == 36
    assert got[:10] == sorted(records, key=record_sort_key)[:10]
    assert [g.tour.tolist() for g in got] == [
        r.tour.tolist() for r in sorted(records, key=record_sort_key)
    ]
    legacy = decode_stored(
        json.dumps(
            {
                "rows": 5,
                "cols": 5,
                "start": [0, 0],
                "solver": "cpsat",
                "status": "found",
                "cpsat_status": "OPTIMAL",
            }
        )
    )
    assert (legacy.cpsat_model_status, legacy.cpsat_status) == ("OPTIMAL", None)


def test_records_stream_in_sorted_order_across_pages(redis_client):
    jobs = make_batch_jobs([5, 6, 10])  # 10x10 sorts after 6x6, not between 1 and 6
    records = [run_job(j) for j in jobs]
    bid = create_batch(redis_client, jobs)
    for rec in reversed(records):
        save_record(redis_client, bid, rec)
    streamed = list(iter_records(redis_client, bid, chunk=7))
    assert streamed == sorted(records, key=record_sort_key)
    assert [r.job_key for r in streamed] == record_keys(redis_client, bid)


def test_job_keys_sort_as_their_records_with_or_without_an_odd_key():
    jobs = make_batch_jobs([5, 12, (6, 9)]) + make_batch_jobs([6], solver="cpsat", closed=True)
    keys = [j.key for j in jobs]
    keys.append(keys[0].replace("5x5", "05x5", 1))  # leading zeros: ordered as 5, then by text
    want = sorted(keys, key=lambda k: record_sort_key(_keyed(k)))
    shuffled = list(reversed(keys))
    assert in_record_order(shuffled) == want
    odd = "invalid:0123456789abcdef"
    assert in_record_order([*shuffled, odd]) == [*want, odd]


def _keyed(job_key: str) -> Record:
    """A record with the fields a job key names (of the Job.key form)."""
    size, square, solver, kind = job_key.split(":")
    rows, cols = size.split("x")
    row, col = square.split(",")
    return Record(
        rows=int(rows),
        cols=int(cols),
        start=(int(row), int(col)),
        solver=solver,
        closed=kind == "closed",
        job_key=job_key,
    )


def test_the_error_record_of_an_invalid_message_sorts_by_its_fields(redis_client, records_6x6):
    from knights_tour.batches.jobs import error_record

    jobs, records = records_6x6
    bid = create_batch(redis_client, jobs)
    for rec in records:
        save_record(redis_client, bid, rec)
    odd = error_record(
        {"rows": "x", "cols": None, "start": "b3", "solver": 7},
        "bad",
        batch_id=bid,
        job_key="invalid:0123456789abcdef",
    )
    assert (odd.rows, odd.cols, odd.start, odd.solver) == (0, 0, (0, 0), "7")
    save_record(redis_client, bid, odd)
    got = collect(redis_client, bid)
    assert got == sorted([*records, odd], key=record_sort_key)
    assert got[0] == odd  # board 0x0 sorts first
