"""Every record file format carries every field of the record and reads back to the same
records: JSON Lines, CSV and Parquet, on real records of the 5x5 board (13 open tours from the
majority colour, 12 starts without one by colour parity) and a CP-SAT cross-checked job."""

from __future__ import annotations

import csv
import io
import json

import msgspec
import numpy as np
import pytest

from knights_tour.batches.jobs import Job, error_record, make_batch_jobs, run_job
from knights_tour.output import parquet
from knights_tour.output.recordfile import (
    CSV_FIELDS,
    format_for_path,
    record_from_csv_row,
    record_lines,
    records_to_csv,
)
from knights_tour.tours.record import Record, Status, record_from_json
from knights_tour.tours.stored import KNIGHT_MOVES


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
    tour_at = CSV_FIELDS.index("tour")  # the tour is two columns: moves, or squares
    expected = [*CSV_FIELDS[:tour_at], "tour_moves", "tour_squares", *CSV_FIELDS[tour_at + 1 :]]
    assert [c for c, _ in parquet.COLUMNS] == expected


def _odd_tours(records: list[Record]) -> list[Record]:
    """An error record whose tour is not a chain of knight moves, one whose chain starts
    elsewhere than its start square, and one with an empty tour."""
    base = next(r for r in records if r.status == Status.FOUND)
    jump = base.tour.copy()
    jump[[3, 9]] = jump[[9, 3]]
    shifted = base.tour[1:]
    return [
        msgspec.structs.replace(base, status=Status.ERROR, tour=jump, reason="x"),
        msgspec.structs.replace(base, status=Status.ERROR, tour=shifted, reason="y"),
        msgspec.structs.replace(base, status=Status.ERROR, tour=base.tour[:0], reason="z"),
    ]


def test_parquet_keeps_tours_as_moves_and_others_as_squares(records, tmp_path):
    odd = _odd_tours(records)
    path = tmp_path / "r.parquet"
    parquet.write(path, records + odd)
    assert parquet.read(path) == records + odd
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["tour_moves", "tour_squares"]).to_pylist()
    found = [i for i, r in enumerate(records) if r.tour is not None]
    for i in found:  # a knight's tour of R x C squares: R*C - 1 moves, a byte each
        assert len(table[i]["tour_moves"]) == records[i].rows * records[i].cols - 1
        assert table[i]["tour_squares"] is None
    assert [row["tour_moves"] is None for row in table[len(records) :]] == [True] * 3
    assert table[len(records)]["tour_squares"] == odd[0].tour.tolist()


def test_parquet_is_read_by_pyarrow_pandas_and_duckdb(records, tmp_path):
    import duckdb
    import pandas as pd
    import pyarrow.parquet as pq

    path = tmp_path / "r.parquet"
    parquet.write(path, records)
    assert pq.read_table(path).schema == parquet.schema()
    frame = pd.read_parquet(path)
    assert list(frame.columns) == [c for c, _ in parquet.COLUMNS]
    assert frame["status"].tolist() == [r.status.value for r in records]
    first = records[0]
    steps = np.asarray(KNIGHT_MOVES)[np.frombuffer(frame["tour_moves"][0], dtype=np.uint8)]
    assert np.array_equal(np.cumsum(np.vstack([first.start, steps]), axis=0), first.tour)
    rows = duckdb.sql(
        f"SELECT rows, cols, status, octet_length(tour_moves) AS moves FROM '{path}'"
    ).fetchall()
    assert rows == [
        (r.rows, r.cols, r.status.value, None if r.tour is None else len(r.tour) - 1)
        for r in records
    ]


def test_parquet_pages_in_a_row_are_written_as_one_row_group(records, tmp_path):
    import pyarrow.parquet as pq

    from knights_tour.tours.pages import moves_page
    from knights_tour.tours.stored import encode_record

    values = [encode_record(r) for r in records]
    pages = [moves_page(values[i : i + 3]) for i in range(0, len(values), 3)]
    path = tmp_path / "r.parquet"
    assert parquet.write_pages(path, pages, group_rows=7) == len(records)
    meta = pq.ParquetFile(path).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sizes == [9] * (len(records) // 9) + ([len(records) % 9] if len(records) % 9 else [])
    assert parquet.read(path) == records
    # tables made elsewhere (on the threads that read the pages) are written as they are
    again = tmp_path / "again.parquet"
    assert parquet.write_pages(again, [parquet.table(p) for p in pages], group_rows=7) == len(
        records
    )
    assert pq.read_table(again).equals(pq.read_table(path))


_WRITE_WITHOUT_PANDAS = """
import sys
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.output import parquet
records = [run_job(j, batch_id="b1") for j in make_batch_jobs([5])]
records[1].proof_detail = "\u00e9 \u2192"
parquet.write(sys.argv[1], records)
print("pandas" in sys.modules)
assert parquet.read(sys.argv[1]) == records  # pyarrow's reading may load it
"""


@pytest.mark.process
def test_writing_parquet_does_not_load_pandas(tmp_path):
    # pyarrow.array of a Python list imports pandas where it is installed (as here): a
    # second of a user's collect spent on a library it never uses
    import subprocess
    import sys

    import pandas  # noqa: F401 - installed, so that the check below can fail

    path = tmp_path / "r.parquet"
    done = subprocess.run(
        [sys.executable, "-c", _WRITE_WITHOUT_PANDAS, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False"]


def test_a_file_name_picks_its_format():
    assert [format_for_path(n) for n in ("r.csv", "R.CSV", "r.parquet", "r.jsonl", "-", "r")] == [
        "csv",
        "csv",
        "parquet",
        "jsonl",
        "jsonl",
        "jsonl",
    ]
