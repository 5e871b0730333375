"""A page's fields read out of the stored form as columns (tours/stored_columns.py) make the same
Parquet table as the decoded records do (output/parquet.py), on real records (the open tours of
5x5, 6x6 and 5x7 and closed tours of 8x8) and on records holding every kind of value a field
can hold; a value not laid out as a stored record is left to the decoded records."""

from __future__ import annotations

import msgspec
import pytest

from knights_tour.batches.jobs import error_record, make_batch_jobs, run_job
from knights_tour.output import parquet
from knights_tour.tours.pages import moves_page
from knights_tour.tours.record import Checks, Proof, Record, Status
from knights_tour.tours.stored import STORED_PREFIX, encode_record
from knights_tour.tours.stored_columns import (
    BOOL,
    CHECKS,
    FLOAT,
    INT,
    KINDS,
    START,
    STR,
    TOUR,
    record_columns,
)


@pytest.fixture(scope="module")
def records() -> list[Record]:
    jobs = make_batch_jobs([5, 6, (5, 7)]) + make_batch_jobs([8], closed=True)[:3]
    return [run_job(j, batch_id="b1", worker="w1@host") for j in jobs]


def _varied(records: list[Record]) -> list[Record]:
    found = next(r for r in records if r.status == Status.FOUND)
    proved = next(r for r in records if r.status == Status.NO_TOUR)
    replace = msgspec.structs.replace
    return [
        replace(
            found,
            checks=Checks(verifier=True, cpsat=False),
            mismatch=True,
            cpsat_status=Status.NO_TOUR,
            cpsat_proof=Proof.CPSAT,
            cpsat_model_status="INFEASIBLE",
            cpsat_elapsed_s=0.125,
            cpsat_nodes=2**40,
            cpsat_tour_accepted=False,
            cpsat_note="disagrees \u00e9 \u2192",
            via="cache",
            verify="cpsat",
            restarts=None,
            attempts=3,
        ),
        replace(
            proved,
            proof_detail='a "quoted" theorem, \u00e9\u00e8 \U0001f40e',
            checks=Checks(verifier=None, cpsat=True),
            job_elapsed_s=None,
            finished_at=None,
            worker=None,
            batch_id=None,
            nodes=-7,
        ),
        replace(found, status=Status.UNKNOWN, reason="node_limit", tour=None, checks=Checks()),
        error_record({"rows": 5, "cols": 5, "start": [0, 0]}, "bad message", job_key="x:1"),
    ]


def _same_table(values: list) -> bool:
    page = moves_page(values)
    assert page.columns is not None
    return parquet.table(page).equals(parquet.table(page._replace(columns=None)))


def test_columns_read_out_make_the_table_the_records_make(records):
    values = [encode_record(r) for r in [*records, *_varied(records)]]
    values.insert(3, None)  # a key deleted meanwhile
    assert _same_table(values)
    table = parquet.table(moves_page(values))
    assert table.column("cpsat_nodes").to_pylist()[len(records)] == 2**40
    assert table.column("cpsat_note").to_pylist()[len(records)] == "disagrees \u00e9 \u2192"
    assert table.column("checks_verifier").to_pylist()[len(records) + 1] is None


def test_an_integer_stored_in_a_float_field_reads_as_a_float(records):
    # MessagePack written by another encoder may hold 3 for 3.0; the decode takes it as a float
    fields = msgspec.msgpack.decode(encode_record(records[0])[len(STORED_PREFIX) :])
    at = Record.__struct_fields__.index("elapsed_s")
    fields[at] = 3
    value = STORED_PREFIX + msgspec.msgpack.encode(fields)
    assert _same_table([value, encode_record(records[1])])
    assert parquet.table(moves_page([value])).column("elapsed_s").to_pylist() == [3.0]


def test_a_value_laid_out_otherwise_is_left_to_the_decoded_records(records):
    whole = encode_record(records[0])
    fields = msgspec.msgpack.decode(whole[len(STORED_PREFIX) :])
    short = STORED_PREFIX + msgspec.msgpack.encode(fields[:-1])  # an older, shorter form
    assert record_columns([whole]) is not None
    assert record_columns([short]) is None
    assert record_columns([whole + b"\xc0"]) is None  # a value after the record
    page = moves_page([whole, short])
    assert page.columns is None
    assert parquet.table(page).num_rows == 2


def test_each_field_is_read_as_its_parquet_column_holds_it():
    read_as = {"int": INT, "float": FLOAT, "bool": BOOL, "str": STR, "start": START}
    for name, kind in parquet.COLUMNS:
        field = Record.__struct_fields__.index(
            "checks" if name.startswith("checks_") else "tour" if name.startswith("tour_") else name
        )
        expected = CHECKS if name.startswith("checks_") else read_as.get(kind, TOUR)
        assert KINDS[field] == expected, name
    assert len(KINDS) == len(Record.__struct_fields__)


def test_cut_or_garbled_values_are_never_read_past_their_end(records):
    # not what the decode lets through; still, no read leaves the page's bytes
    whole = encode_record(records[0])
    rng = __import__("random").Random(20261128)
    for _ in range(300):
        cut = whole[: rng.randrange(3, len(whole))]
        garbled = bytearray(whole)
        for _ in range(3):
            garbled[rng.randrange(2, len(garbled))] = rng.randrange(256)
        for value in (cut, bytes(garbled)):
            columns = record_columns([whole, value])
            assert columns is None or columns.first.shape == (len(KINDS), 2)
