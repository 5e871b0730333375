"""The compact stored form of records and the streamed, sorted collection."""

from __future__ import annotations

import json

import pytest

from knights_tour.board import Board
from knights_tour.core.jobs import Job, make_batch_jobs, record_sort_key, run_job
from knights_tour.core.records import (COMPACT_PREFIX, KNIGHT_MOVES, TourJSON, decode_record,
                                       decode_tour, encode_record, encode_tour, tour_json)
from knights_tour.output.recordfile import jsonl_line
from knights_tour.store import keys
from knights_tour.store.batches import (collect, create_batch, iter_records, record_keys,
                                        save_record)
from knights_tour.verify import verify_tour


@pytest.fixture(scope="module")
def records_6x6():
    jobs = make_batch_jobs([6])
    return jobs, [run_job(j, worker="w1@host") for j in jobs]


def test_the_eight_knight_moves_are_distinct_and_each_a_knight_move():
    assert len(set(KNIGHT_MOVES)) == 8
    assert all({abs(dr), abs(dc)} == {1, 2} for dr, dc in KNIGHT_MOVES)


def test_a_tour_round_trips_through_its_move_sequence(records_6x6):
    _, records = records_6x6
    tours = [rec["tour"] for rec in records if rec["tour"]]
    assert tours
    for tour in tours:
        text = encode_tour(tour)
        assert len(text) == len(f"{tour[0][0]},{tour[0][1]}:") + len(tour) - 1
        assert decode_tour(text) == tour
        assert verify_tour(Board(6, 6), [tuple(sq) for sq in decode_tour(text)]).ok


def test_a_value_that_is_not_a_chain_of_knight_moves_is_not_encoded():
    assert encode_tour(None) is None
    assert encode_tour([]) is None
    assert encode_tour([[0, 0], [0, 1]]) is None          # a king's step
    assert encode_tour([[0, 0], [True, 2]]) is None       # a bool is not a row
    assert encode_tour([[0, 0], "b3"]) is None


def test_a_record_round_trips_with_its_key_order_and_bytes(records_6x6):
    _, records = records_6x6
    odd = {"rows": "x", "cols": 5, "tour": [[0, 0], [5, 5]], "start": None, "note": "é"}
    for rec in [*records, odd]:
        stored = encode_record(rec)
        assert stored.startswith(COMPACT_PREFIX)
        back = decode_record(stored)
        assert json.dumps(back) == json.dumps(rec)      # same keys, order, values


@pytest.mark.parametrize("rows, cols, start", [(5, 5, (0, 0)), (6, 6, (2, 3)), (3, 10, (0, 0)),
                                               (8, 8, (7, 0)), (7, 40, (3, 20))])
def test_a_jsonl_line_with_the_tour_as_json_text_has_the_same_bytes(rows, cols, start):
    """The fast JSON Lines path (tour rendered from its move sequence) writes exactly what
    json.dumps writes for the decoded record, wherever the tour sits among the keys."""
    rec = run_job(Job(rows, cols, start), worker="w1@host")
    assert rec["status"] == "found"
    stored = encode_record(rec)
    fast = decode_record(stored, tour_as_json=True)
    assert isinstance(fast["tour"], TourJSON) and fast["tour"] == json.dumps(
        rec["tour"], separators=(",", ":"))
    assert jsonl_line(fast) == jsonl_line(decode_record(stored)) == jsonl_line(rec)
    keys_ = list(rec)
    for order in (["tour", *[k for k in keys_ if k != "tour"]],
                  [*[k for k in keys_ if k != "tour"], "tour"], ["tour"]):
        moved = {k: rec[k] for k in order}
        moved_fast = {k: fast[k] for k in order}
        assert jsonl_line(moved_fast) == json.dumps(moved, separators=(",", ":")) + "\n"


def test_a_move_sequence_that_leaves_the_board_is_refused():
    with pytest.raises(ValueError, match="leaves the 3x3 board"):
        tour_json("0,0:0000", 3, 3)


def test_a_40x40_tour_record_is_stored_in_under_a_tenth_of_its_json():
    rec = run_job(make_batch_jobs([40])[0])
    plain = json.dumps(rec, separators=(",", ":"))
    assert len(encode_record(rec)) * 10 < len(plain)
    assert decode_record(encode_record(rec)) == rec


def test_records_stored_as_plain_json_by_older_code_still_read(redis_client, records_6x6):
    jobs, records = records_6x6
    bid = create_batch(redis_client, jobs)
    for rec in records[:10]:
        save_record(redis_client, bid, rec)
    for rec in records[10:]:   # the form older code stored
        redis_client.hset(keys.batch_records(bid), rec["job_key"],
                          json.dumps(rec, separators=(",", ":")))
    assert collect(redis_client, bid) == sorted(records, key=record_sort_key)


def test_records_stream_in_sorted_order_across_chunks(redis_client):
    jobs = make_batch_jobs([5, 6, 10])   # 10x10 sorts after 6x6, not between 1 and 6
    records = [run_job(j) for j in jobs]
    bid = create_batch(redis_client, jobs)
    for rec in reversed(records):
        save_record(redis_client, bid, rec)
    streamed = list(iter_records(redis_client, bid, chunk=7))
    assert streamed == sorted(records, key=record_sort_key)
    assert [r["job_key"] for r in streamed] == record_keys(redis_client, bid)


def test_a_record_under_an_odd_key_is_ordered_by_its_fields(redis_client, records_6x6):
    jobs, records = records_6x6
    bid = create_batch(redis_client, jobs)
    for rec in records:
        save_record(redis_client, bid, rec)
    odd = {"rows": "x", "cols": None, "start": "b3", "solver": 7, "status": "error",
           "job_key": "invalid:0123456789abcdef"}
    save_record(redis_client, bid, odd)
    got = collect(redis_client, bid)
    assert got == sorted([*records, odd], key=record_sort_key)
    assert got[-1] == odd
