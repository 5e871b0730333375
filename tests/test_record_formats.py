"""Every record file format carries every field of the record and reads back to the same
records: JSON Lines, CSV and Parquet, on real records of the 5x5 board (13 open tours from the
majority colour, 12 starts without one by colour parity) and a CP-SAT cross-checked job."""

from __future__ import annotations

import csv
import io
import json

import pytest

from knights_tour.core.jobs import Job, error_record, make_batch_jobs, run_job
from knights_tour.output import parquet
from knights_tour.output.recordfile import (
    CSV_FIELDS,
    format_for_path,
    record_from_csv_row,
    record_lines,
    records_to_csv,
)
from knights_tour.result import Record, Status, record_from_json


@pytest.fixture(scope="module")
def records() -> list[Record]:
    recs = [run_job(j, batch_id="b1", worker="w1@host") for j in make_batch_jobs([5])]
    recs.append(run_job(Job(rows=6, cols=6, start=(0, 0), verify="cpsat"), worker="w2@host"))
    recs.append(error_record({"rows": "x"}, "bad message", batch_id="b1", job_key="invalid:1"))
    return recs


def test_the_records_are_the_facts_of_5x5(records):
    five = [r for r in records if r.rows == 5]
    assert sum(r.status == Status.FOUND for r in five) == 13
    assert sum(r.status == Status.NO_TOUR and r.proof == "parity" for r in five) == 12


def test_csv_round_trips_every_field(records):
    text = records_to_csv(records)
    header = next(csv.reader(io.StringIO(text)))
    assert tuple(header) == CSV_FIELDS and "cpsat_status" in header and "attempts" in header
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [record_from_csv_row(row) for row in rows] == records
    assert {row["closed"] for row in rows} == {"false"}
    assert rows[-2]["checks_cpsat"] == "true" and rows[-2]["cpsat_model_status"] == "OPTIMAL"


def test_json_lines_and_the_json_array_read_back(records):
    lines = list(record_lines(records, "jsonl"))
    assert [record_from_json(line) for line in lines] == records
    array = json.loads(b"".join(record_lines(records, "json")))
    assert [Record.from_dict(d) for d in array] == records
    assert all(len(line) < 2000 for line in lines)  # compact, one record a line


def test_parquet_round_trips_every_field_in_pages(records, tmp_path):
    path = tmp_path / "r.parquet"
    assert parquet.write(path, records, page=4) == len(records)
    assert parquet.read(path) == records
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == len(records) and meta.num_row_groups == -(-len(records) // 4)
    assert [c for c, _ in parquet.COLUMNS] == list(CSV_FIELDS)


def test_a_file_name_picks_its_format():
    assert [format_for_path(n) for n in ("r.csv", "R.CSV", "r.parquet", "r.jsonl", "-", "r")] == [
        "csv",
        "csv",
        "parquet",
        "jsonl",
        "jsonl",
        "jsonl",
    ]
