"""A batch's JSON Lines file written while it runs (batches/record_stream.py): the same bytes
as ``ktour collect`` writes, whatever order the records arrive in, with no file before the end."""

from __future__ import annotations

import pytest

from knights_tour.batches import record_stream
from knights_tour.batches.client import send_order
from knights_tour.batches.jobs import error_record, make_batch_jobs, run_job
from knights_tour.batches.record_stream import RecordStream, stored_pages
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import collect, create_batch
from knights_tour.batches.verdict import Tally
from knights_tour.output import parquet
from knights_tour.output.recordfile import records_to_jsonl


@pytest.fixture(scope="module")
def batch_records():
    jobs = make_batch_jobs([5, 6, 10])  # 10x10 sorts after 6x6 in record order
    return jobs, [run_job(j, worker="w1@host") for j in jobs]


def _collected(r, bid) -> bytes:
    return records_to_jsonl(collect(r, bid)).encode()


def test_records_arriving_in_any_order_give_the_collected_file(
    redis_client, batch_records, tmp_path
):
    jobs, records = batch_records
    bid = create_batch(redis_client, jobs)
    out = tmp_path / "run.jsonl"
    stream = RecordStream(redis_client, bid, [j.key for j in send_order(jobs)], out)
    assert stream.advance() == 0
    arrival = records[::-1][:40] + records[50:60]  # largest boards first, then a gap
    for rec in arrival:
        save_record(redis_client, bid, rec)
    assert stream.advance() == len(arrival)
    assert stream.advance() == 0  # nothing new: nothing fetched twice
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing before the end
    for rec in records:
        save_record(redis_client, bid, rec)  # the rest (a second save keeps the first)
    tally = stream.finish()
    assert out.read_bytes() == _collected(redis_client, bid)
    assert tally.records == len(records)
    assert list(tmp_path.iterdir()) == [out]


def test_a_record_under_a_key_that_is_not_a_job_is_written_in_its_place(
    redis_client, batch_records, tmp_path
):
    jobs, records = batch_records
    bid = create_batch(redis_client, jobs)
    stream = RecordStream(redis_client, bid, [j.key for j in jobs], tmp_path / "o.jsonl")
    for rec in records:
        save_record(redis_client, bid, rec)
    stream.advance(budget_s=60)
    odd = error_record({"rows": "x"}, "bad", batch_id=bid, job_key="invalid:0123456789abcdef")
    save_record(redis_client, bid, odd)
    tally = stream.finish()
    assert (tmp_path / "o.jsonl").read_bytes() == _collected(redis_client, bid)
    assert tally.records == len(records) + 1


def test_a_batch_left_unfinished_leaves_no_file(redis_client, batch_records, tmp_path):
    jobs, records = batch_records
    bid = create_batch(redis_client, jobs)
    stream = RecordStream(redis_client, bid, [j.key for j in jobs], tmp_path / "o.jsonl")
    for rec in records[:30]:
        save_record(redis_client, bid, rec)
    assert stream.advance() == 30
    stream.discard()
    assert list(tmp_path.iterdir()) == []


def test_parquet_pages_gathered_into_row_groups_hold_every_tour(
    redis_client, batch_records, tmp_path, monkeypatch
):
    # pages of three records: many more pages than are made ahead, gathered into row groups
    # of several pages while later pages are made (each page's moves are its own)
    monkeypatch.setattr(record_stream, "PAGE", 3)
    jobs, records = batch_records
    bid = create_batch(redis_client, jobs)
    for rec in records:
        save_record(redis_client, bid, rec)
    for make in (None, parquet.table):  # the pages, or their tables made on the threads
        path = tmp_path / "r.parquet"
        tally = Tally()
        pages = (
            stored_pages(redis_client, bid, tally)
            if make is None
            else stored_pages(redis_client, bid, tally, make)
        )
        parquet.write_pages(path, pages, group_rows=10)
        assert tally.records == len(records) > 8 * record_stream.RENDER_THREADS
        assert records_to_jsonl(parquet.read(path)).encode() == _collected(redis_client, bid)
