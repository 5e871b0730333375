"""Tests for knights_tour.output.tourfile (step-number matrices, JSON records) and
knights_tour.output.atomicfile (atomic writes).

The reference tour is OEIS A226697: the closed 8x8 knight's tour attributed to L. Euler (1759)
(Gardner, *Mathematical Magic Show*, 1989, fig. 86), written as a 1-based step-number matrix.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knights_tour.board import Board
from knights_tour.errors import TourFormatError
from knights_tour.output.atomicfile import AtomicFile, atomic_write_text
from knights_tour.output.recordfile import records_to_csv, records_to_jsonl
from knights_tour.output.tourfile import (
    format_step_matrix,
    parse_step_matrix,
    read_jsonl,
    read_tour_file,
)
from knights_tour.tours.record import Proof, Record, Status
from knights_tour.tours.verify import verify_tour

DATA = Path(__file__).resolve().parents[1] / "data"
EULER = (DATA / "euler_8x8_closed_a226697.txt").read_text()


def test_euler_matrix_parses_to_a_closed_tour_from_a4():
    board, tour = parse_step_matrix(EULER)
    assert board == Board(8, 8)
    # A226697: a(5,1) = 1, i.e. the knight starts on row 5, column 1 (1-based) = a4.
    assert tour[0] == (4, 0) and board.algebraic(tour[0]) == "a4"
    assert verify_tour(board, tour, start="a4", closed=True).ok


def test_zero_based_matrix_gives_the_same_tour(tmp_path):
    zero = "\n".join(" ".join(str(int(t) - 1) for t in line.split()) for line in EULER.splitlines())
    assert parse_step_matrix(zero) == parse_step_matrix(EULER)
    path = tmp_path / "zero.txt"
    path.write_text(zero)
    assert read_tour_file(path)[2] == {"format": "matrix", "base": 0}


@pytest.mark.parametrize("labels", [False, True])
def test_format_then_parse_round_trips(labels):
    board, tour = parse_step_matrix(EULER)
    text = format_step_matrix(board, tour, labels=labels)
    assert parse_step_matrix(text) == (board, tour)
    lines = text.splitlines()
    if labels:
        assert lines[-1].split() == list("abcdefgh")
        assert [ln.split()[0] for ln in lines[:-1]] == [str(r) for r in range(8, 0, -1)]
        # the square labelled a4 holds step 1
        assert lines[8 - 4].split()[1] == "1"
    else:
        assert len(lines) == 8 and all(len(ln.split()) == 8 for ln in lines)


def test_columns_are_aligned_on_a_two_digit_board():
    board, tour = parse_step_matrix(EULER)
    lines = format_step_matrix(board, tour).splitlines()
    assert len({len(ln) for ln in lines}) == 1


def test_comments_and_blank_lines_are_ignored():
    text = "# a comment\n\n" + EULER + "\n# status found\n"
    assert parse_step_matrix(text) == parse_step_matrix(EULER)


def test_swapped_steps_parse_but_fail_verification():
    swapped = EULER.replace(" 26 ", " XX ").replace(" 15 ", " 26 ").replace(" XX ", " 15 ")
    assert swapped != EULER
    board, tour = parse_step_matrix(swapped)
    verdict = verify_tour(board, tour)
    assert not verdict.ok and "not a knight move" in verdict.reason


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "no step numbers"),
        ("1 2 3\n4 5\n6 7 8\n", "line 2: ragged rows"),
        ("1 2\n3 x\n", "line 2, column 2: 'x' is not a step number"),
        ("1 2\n3 3\n", "step 3 appears twice"),
        ("1 2\n3 9\n", "out of range"),
        ("2 3\n4 5\n", "must start at 1 (or 0)"),
        ("1 2.5\n3 4\n", "not a step number"),
        ("8  1 2\n   x y\n", "file labels"),
    ],
)
def test_malformed_matrices_raise_tour_format_error(text, fragment):
    with pytest.raises(TourFormatError) as info:
        parse_step_matrix(text)
    assert fragment in str(info.value)


def test_read_tour_file_json_record_and_jsonl(tmp_path):
    board, tour = parse_step_matrix(EULER)
    record = Record(
        rows=8,
        cols=8,
        start=(4, 0),
        solver="warnsdorff",
        closed=True,
        status=Status.FOUND,
        tour=np.array(tour, dtype=np.int32),
    )
    single = tmp_path / "one.json"
    single.write_text(json.dumps(record.to_dict(), indent=2))
    b, t, meta = read_tour_file(single)
    assert (b, t) == (board, tour) and meta["closed"] is True and meta["start"] == (4, 0)

    many = tmp_path / "many.jsonl"
    no_tour = Record(
        rows=8,
        cols=8,
        start=(4, 0),
        solver="warnsdorff",
        closed=True,
        status=Status.NO_TOUR,
        proof=Proof.EXHAUSTIVE,
    )
    many.write_text(records_to_jsonl([no_tour, record]))
    with pytest.raises(TourFormatError, match="holds 2 JSON records"):
        read_tour_file(many)
    with pytest.raises(TourFormatError, match="holds no tour .status no_tour"):
        read_tour_file(many, record=1)
    assert read_tour_file(many, record=2)[1] == tour
    assert read_jsonl(many) == [no_tour.to_dict(), record.to_dict()]


@pytest.mark.parametrize(
    "content, fragment",
    [
        ('{"rows": 8, "cols": 8}\n{"rows": \n', "line 2"),
        ('{"rows": 8, "tour": []}', "'cols' must be an integer"),
        ('{"rows": 2, "cols": 2, "tour": [[0, 0], "b2"]}', "step 2 is not a [row, col] pair"),
    ],
)
def test_bad_json_records(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TourFormatError) as info:
        read_tour_file(path)
    assert fragment in str(info.value)


def test_size_cap_and_missing_file(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(EULER)
    with pytest.raises(TourFormatError, match="larger than the 100-byte limit"):
        read_tour_file(path, max_bytes=100)
    with pytest.raises(TourFormatError, match="no such file"):
        read_tour_file(tmp_path / "missing.txt")


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "out.jsonl"
    atomic_write_text(target, "old\n")
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "no-such-dir" / "x.jsonl", "data")


def test_a_list_of_chunks_is_written_whole_in_order(tmp_path):
    # more chunks than one writev call takes, bytes and memoryviews into one buffer, after
    # lines that went through the write buffer
    text = np.frombuffer(b"".join(b"%d," % i for i in range(5000)), dtype=np.uint8)
    views = [memoryview(text.data)[i : i + 7] for i in range(0, len(text), 7)]
    chunks = [piece for view in views for piece in (b"<", view, b">\n")]
    out = AtomicFile(tmp_path / "o.jsonl")
    out.writelines(iter([b"first\n"]))
    out.writelines(chunks)
    out.writelines([b"last\n"])
    out.commit()
    want = b"first\n" + b"".join(bytes(c) for c in chunks) + b"last\n"
    assert (tmp_path / "o.jsonl").read_bytes() == want
    assert len(chunks) > 4096


def test_csv_has_header_and_one_row_per_record():
    import csv
    import io

    from knights_tour.output.recordfile import CSV_FIELDS, record_from_csv_row
    from knights_tour.tours.record import Checks

    recs = [
        Record(
            rows=5,
            cols=5,
            start=(0, 0),
            solver="warnsdorff",
            status=Status.FOUND,
            checks=Checks(verifier=True),
            tour=np.array([[0, 0], [2, 1]], np.int32),
        ),
        Record(
            rows=5,
            cols=5,
            start=(0, 1),
            solver="warnsdorff",
            status=Status.NO_TOUR,
            proof=Proof.PARITY,
            checks=Checks(cpsat=True),
            elapsed_s=0.25,
        ),
    ]
    text = records_to_csv(recs)
    assert text.splitlines()[0] == ",".join(CSV_FIELDS)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["start_square"] for r in rows] == ["a5", "b5"]
    assert rows[0]["checks_verifier"] == "true" and rows[1]["proof"] == "parity"
    assert rows[0]["checks_cpsat"] == "" and rows[1]["checks_cpsat"] == "true"
    assert rows[0]["closed"] == "false" and rows[1]["start"] == "[0,1]"
    assert rows[0]["tour"] == "[[0,0],[2,1]]" and rows[1]["tour"] == ""
    assert [record_from_csv_row(r) for r in rows] == recs


@st.composite
def _board_and_order(draw):
    rows = draw(st.integers(1, 9))
    cols = draw(st.integers(1, 9))
    board = Board(rows, cols)
    order = draw(st.permutations(list(board.squares())))
    return board, order


@settings(max_examples=40, deadline=None)
@given(_board_and_order(), st.booleans(), st.sampled_from([0, 1]))
def test_any_visiting_order_round_trips_through_the_matrix(case, labels, base):
    """format_step_matrix / parse_step_matrix are inverse on every order of the squares (the
    parser does not judge knight moves: that is the verifier's job)."""
    board, order = case
    text = format_step_matrix(board, order, labels=labels, base=base)
    assert parse_step_matrix(text) == (board, order)


def test_streamed_record_lines_match_the_whole_text_formats(tmp_path):
    import json as _json

    from knights_tour.batches.jobs import Job, error_record, make_batch_jobs, run_job
    from knights_tour.output.atomicfile import atomic_write_lines
    from knights_tour.output.recordfile import record_lines, records_to_csv

    odd = error_record(Job(5, 5, (0, 0)), 'é\n"quoted"', "b1")  # not ASCII, not one line
    recs = [run_job(j) for j in make_batch_jobs([5])[:4]] + [odd]
    for rs in (recs, [], recs[:1]):
        array = b"".join(record_lines(iter(rs), "json")).decode()
        assert _json.loads(array) == [r.to_dict() for r in rs]
        assert len(array.splitlines()) == (len(rs) + 2 if rs else 1)  # one record a line
        jsonl = b"".join(record_lines(iter(rs), "jsonl")).decode()
        assert jsonl == records_to_jsonl(rs)
        assert [_json.loads(line) for line in jsonl.splitlines()] == [r.to_dict() for r in rs]
        assert b"".join(record_lines(iter(rs), "csv")).decode() == records_to_csv(rs)
    target = tmp_path / "out.jsonl"
    atomic_write_lines(target, record_lines(iter(recs), "jsonl"))
    assert target.read_text() == records_to_jsonl(recs)

    def failing():
        yield recs[0]
        raise RuntimeError("Redis went away")

    with pytest.raises(RuntimeError):
        atomic_write_lines(tmp_path / "half.jsonl", record_lines(failing(), "jsonl"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_a_link_is_written_through_and_stays_a_link(tmp_path):
    from knights_tour.output import parquet
    from knights_tour.output.atomicfile import atomic_write_text

    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    pq_real, pq_link = tmp_path / "real.parquet", tmp_path / "link.parquet"
    pq_link.symlink_to(pq_real)
    assert parquet.write(pq_link, []) == 0
    assert pq_link.is_symlink() and pq_real.stat().st_size > 0


@pytest.mark.process  # a child interpreter writes through the link
def test_a_link_to_this_processs_stdout_redirected_to_a_file_writes_in_order(tmp_path):
    """As ``ktour run --out /dev/stdout > FILE`` (``/dev/stdout`` links to /proc/self/fd/1):
    the lines go through stdout's own open file, between what is printed before and after,
    and the link is not replaced by a file (a link of the test's own stands for /dev/stdout)."""
    import subprocess
    import sys

    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    script = (
        "import sys\n"
        "from knights_tour.output.atomicfile import atomic_write_lines\n"
        "print('before', flush=True)\n"
        "atomic_write_lines(sys.argv[1], [b'line 1\\n', b'line 2\\n'])\n"
        "print('after')\n"
    )
    out = tmp_path / "out.txt"
    with open(out, "wb") as fh:
        subprocess.run([sys.executable, "-c", script, str(link)], stdout=fh, check=True)
    assert out.read_text() == "before\nline 1\nline 2\nafter\n"
    assert link.is_symlink()
