"""Collected records are data to check again: the JSON Lines and Parquet of a page of stored
records are made straight from the stored moves, byte for byte the text of the records'
own JSON, and a ``found`` record whose tour is not a knight's tour comes out as an ``error``
(tours/stored.py ``jsonl_page``, ``moves_page``; tours/tour_text.py); ``ktour collect`` over a
real Redis outputs a tampered record as an error and exits 1."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import msgspec
import numpy as np
import pytest

from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.tours.pages import REJECTED, jsonl_page, moves_page, reverified
from knights_tour.tours.record import Record, Status, json_bytes, tour_json
from knights_tour.tours.stored import (
    KNIGHT_MOVES,
    decode_many,
    decode_moves,
    encode_moves,
    encode_record,
    move_codes,
)
from knights_tour.tours.tour_text import read_moves, render_moves
from knights_tour.tours.verify import verify_tour

_RNG = np.random.default_rng(20261127)


@pytest.fixture(scope="module")
def solved() -> list[Record]:
    jobs = make_batch_jobs([5, 6, (5, 7)]) + make_batch_jobs([8], closed=True)[:3]
    return [run_job(j, batch_id="b1", worker="w1@host") for j in jobs]


def _walk(start: tuple[int, int], moves: int) -> np.ndarray:
    """A random chain of knight moves from ``start`` (any coordinates: not a tour)."""
    steps = np.asarray(KNIGHT_MOVES, dtype=np.int32)[_RNG.integers(0, 8, moves)]
    return np.cumsum(np.vstack([np.asarray(start, dtype=np.int32), steps]), axis=0)


def _unknown(tour: np.ndarray, rows: int, cols: int) -> Record:
    """An undecided record holding a tour (its text is written; nothing is checked)."""
    return Record(
        rows=rows,
        cols=cols,
        start=(int(tour[0, 0]), int(tour[0, 1])),
        solver="warnsdorff",
        status=Status.UNKNOWN,
        reason="node_limit",
        tour=tour,
        elapsed_s=0.25,
    )


def _old_lines(values: list) -> bytes:
    return b"".join(json_bytes(reverified(r)) + b"\n" for r in decode_many(values))


def _text(values: list) -> bytes:
    return b"".join(jsonl_page(values).chunks)


@pytest.mark.parametrize("top", [0, 7, 63, 64, 999, 1000, 9999, 10_000, 123_456, 2_000_000])
def test_tour_json_is_what_the_stdlib_writes(top):
    tour = _RNG.integers(0, top + 1, size=(300, 2)).astype(np.int32)
    tour[0] = (top, top)
    for arr in (tour, tour.astype(np.int64), tour[::3], np.asfortranarray(tour), tour[:1]):
        assert tour_json(arr) == json.dumps(arr.tolist(), separators=(",", ":")).encode()
    assert tour_json(tour[:0]) == b"[]"
    below = tour - top - 1  # off the board: only a record failing verification holds one
    assert tour_json(below) == json.dumps(below.tolist(), separators=(",", ":")).encode()


def test_walks_of_every_length_give_their_squares_text_and_moves():
    # the moves are read eight (three bytes) at a time: every remainder, on either table
    tours = [_walk((40, 40), n) + side for side in (0, 200) for n in range(27)]
    sides = [100 if t.max() < 100 else 400 for t in tours]
    args = (
        [encode_moves(t) for t in tours],
        sides,
        sides,
        [tuple(t[0]) for t in tours],
        [False] * len(tours),
        [False] * len(tours),
    )
    text, at, end, _ = render_moves(*args)
    codes, c_at, c_end, _ = render_moves(*args, write=False)
    for i, tour in enumerate(tours):
        assert bytes(text[at[i] : end[i]]) == tour_json(tour)
        assert bytes(codes[c_at[i] : c_end[i]]) == move_codes(tour).tobytes()


def test_a_new_buffer_has_room_for_a_larger_page():
    # a batch's pages grow with its boards: a buffer sized to the page exactly would be
    # dropped, and a new one faulted in, for nearly every page
    tours = [_walk((40, 40), 300) for _ in range(4)]

    def page(count: int, out: np.ndarray | None = None) -> np.ndarray:
        return render_moves(
            [encode_moves(t) for t in tours[:count]],
            [100] * count,
            [100] * count,
            [tuple(t[0]) for t in tours[:count]],
            [False] * count,
            [False] * count,
            out,
        )[0]

    first = page(3)
    assert page(4, first) is first


def test_a_moves_page_reuses_a_written_page_buffer(solved):
    values = [encode_record(r) for r in solved]
    first = moves_page(values)
    again = moves_page(values, first.buffer)
    assert first.buffer is not None and again.buffer is first.buffer
    assert again.offsets.tolist() == first.offsets.tolist()
    found = [r for r in decode_many(values) if r.tour is not None]
    assert [
        bytes(again.moves[a:b]) for a, b in zip(again.offsets[:-1], again.offsets[1:]) if b > a
    ] == [move_codes(r.tour).tobytes() for r in found]


def test_a_page_gives_the_records_json_byte_for_byte(solved):
    walks = [  # the table paths (sides up to 100 and above), digit by digit, and squares
        _unknown(_walk((50, 60), 400) + 200, 400, 400),
        _unknown(_walk((3, 4), 30) + 10, 20, 20),
        _unknown(_walk((9990, 9990), 50) + 50, 10_100, 10_100),
        _unknown(_walk((20_000, 5), 50) + 100, 30_000, 300),
        _unknown(np.array([[0, 0], [5, 5], [1, 1]], dtype=np.int32), 6, 6),
    ]
    records = solved + walks
    values = [encode_record(r) for r in records]
    values.insert(3, None)  # a key deleted meanwhile
    values.append(json.dumps(solved[0].to_dict()))  # a plain JSON record, as stored long ago
    page = jsonl_page(values)
    assert b"".join(page.chunks) == _old_lines(values)
    assert page.sizes == [len(json_bytes(reverified(r))) + 1 for r in decode_many(values)]
    assert [r.status for r in page.records] == [r.status for r in decode_many(values)]
    # a second page into the first one's buffer gives the same text
    again = jsonl_page(values, page.buffer)
    assert b"".join(again.chunks) == _old_lines(values)


def test_a_page_of_tours_stored_as_moves_is_written_in_one_pass(solved):
    # every record in the stored form with its tour as moves, or none: the page is encoded
    # once and its lines written with their tours in one compiled pass, into one chunk
    proved = next(r for r in solved if r.status == Status.NO_TOUR)
    quoted = msgspec.structs.replace(
        proved, proof_detail='a "quoted", [bracketed] {braced}, back\\slashed \u00e9 \u2192 text'
    )
    walks = [  # the table paths (sides up to 100 and above), digit by digit
        _unknown(_walk((50, 60), 400) + 200, 400, 400),
        _unknown(_walk((3, 4), 30) + 10, 20, 20),
        _unknown(_walk((9990, 9990), 50) + 50, 10_100, 10_100),
        _unknown(_walk((20_000, 5), 50) + 100, 30_000, 300),
    ]
    values = [encode_record(r) for r in [*solved, *walks, quoted]]
    values.insert(3, None)  # a key deleted meanwhile
    page = jsonl_page(values)
    assert len(page.chunks) == 1
    assert b"".join(page.chunks) == _old_lines(values)
    assert page.sizes == [len(json_bytes(reverified(r))) + 1 for r in decode_many(values)]
    assert [r.status for r in page.records] == [r.status for r in decode_many(values)]
    assert all(r.tour is None for r in page.records)
    again = jsonl_page(values, page.buffer)
    assert again.buffer is page.buffer and b"".join(again.chunks) == _old_lines(values)


def _tampered(found: Record) -> dict[str, Record]:
    tour = found.tour
    swapped = tour.copy()
    swapped[[4, 11]] = swapped[[11, 4]]
    back = np.vstack([tour[:-1], tour[-3:-2]])  # the last move goes back to a visited square
    off = _walk((int(tour[0, 0]), int(tour[0, 1])), len(tour) - 1)
    elsewhere = tour[::-1].copy()
    return {
        "not knight moves": msgspec.structs.replace(found, tour=swapped),
        "a square twice": msgspec.structs.replace(found, tour=back),
        "off the board": msgspec.structs.replace(found, tour=off),
        "another start": msgspec.structs.replace(found, tour=elsewhere),
        "too short": msgspec.structs.replace(found, tour=tour[:-1]),
        "not closed": msgspec.structs.replace(found, closed=True),
        "no tour": msgspec.structs.replace(found, tour=None),
    }


def test_a_found_record_whose_tour_is_not_a_tour_is_an_error(solved):
    found = next(r for r in solved if r.status == Status.FOUND and r.rows == 6)
    cases = _tampered(found)
    values = [encode_record(found)] + [encode_record(r) for r in cases.values()]
    page = jsonl_page(values)
    assert page.records[0].status == Status.FOUND
    for rec, (what, bad) in zip(page.records[1:], cases.items(), strict=True):
        assert rec.status == Status.ERROR, what
        assert rec.reason.startswith(REJECTED) and rec.checks.verifier is False, what
        if bad.tour is not None:
            verdict = verify_tour((6, 6), bad.tour, start=bad.start, closed=bad.closed)
            assert rec.reason == REJECTED + verdict.reason, what
    assert b"".join(page.chunks) == _old_lines(values)
    parquet_page = moves_page(values)
    assert [r.status for r in parquet_page.records] == [r.status for r in page.records]
    assert [r.reason for r in parquet_page.records] == [r.reason for r in page.records]


def test_the_walk_and_the_verifier_agree_on_altered_moves(solved):
    founds = [r for r in solved if r.status == Status.FOUND]
    payloads, recs = [], []
    for rec in founds * 8:
        codes = np.frombuffer(encode_moves(rec.tour)[12:], dtype=np.uint8).copy()
        if _RNG.random() < 0.8:  # flip a few bits of the moves
            at = _RNG.integers(0, len(codes), 2)
            codes[at] ^= _RNG.integers(1, 256, 2).astype(np.uint8)
        payloads.append(encode_moves(rec.tour)[:12] + codes.tobytes())
        recs.append(rec)
    _, _, _, ok = render_moves(
        payloads,
        [r.rows for r in recs],
        [r.cols for r in recs],
        [r.start for r in recs],
        [r.closed for r in recs],
        [True] * len(recs),
    )
    verdicts = [
        verify_tour((r.rows, r.cols), decode_moves(p), start=r.start, closed=r.closed).ok
        for r, p in zip(recs, payloads, strict=True)
    ]
    assert ok.tolist() == verdicts
    assert 0 < sum(verdicts) < len(verdicts)


def _stored_tour(payload: bytes) -> bytes:
    """A tour's moves as a stored record holds them: a MessagePack extension of type 1."""
    return msgspec.msgpack.encode(msgspec.msgpack.Ext(1, payload))


def test_moves_read_out_are_checked_as_the_verifier_checks_them(solved):
    # one record a page: a page with a tour the check rejects is for the plain way (None)
    founds = [r for r in solved if r.status == Status.FOUND]
    assert any(r.closed for r in founds)
    cases = []
    for rec in founds * 6:
        codes = np.frombuffer(encode_moves(rec.tour)[12:], dtype=np.uint8).copy()
        if _RNG.random() < 0.7:  # flip a few bits of the moves
            at = _RNG.integers(0, len(codes), 2)
            codes[at] ^= _RNG.integers(1, 256, 2).astype(np.uint8)
        cases.append((rec, encode_moves(rec.tour)[:12] + codes.tobytes()))
    for rec in founds[:3]:
        for bad in _tampered(rec).values():
            if bad.tour is not None and (moves := encode_moves(bad.tour)) is not None:
                cases.append((bad, moves))
    for rec, payload in cases:
        tour = decode_moves(payload)
        verdict = verify_tour((rec.rows, rec.cols), tour, start=rec.start, closed=rec.closed)
        args = ([rec.rows], [rec.cols], [rec.start], [rec.closed])
        done = read_moves([_stored_tour(payload)], 1, *args, [True])
        assert (done is not None) == verdict.ok
        if tuple(tour[0]) != tuple(rec.start):  # not from its start square: never read out
            assert read_moves([_stored_tour(payload)], 1, *args, [False]) is None
            continue
        out, offsets, present = read_moves([_stored_tour(payload)], 1, *args, [False])
        assert present.tolist() == [True]
        assert bytes(out[offsets[0] : offsets[1]]) == move_codes(tour).tobytes()
    assert (
        0
        < sum(
            read_moves([_stored_tour(p)], 1, [r.rows], [r.cols], [r.start], [r.closed], [True])
            is not None
            for r, p in cases
        )
        < len(cases)
    )


def test_a_page_of_moves_is_read_out_in_one_pass(solved):
    walks = [
        _unknown(_walk((50, 60), 400) + 200, 400, 400),
        _unknown(_walk((3, 4), 30) + 10, 20, 20),
    ]
    records = [*solved, *walks]
    tours = [_stored_tour(encode_moves(r.tour)) if r.tour is not None else b"\xc0" for r in records]
    done = read_moves(
        tours,
        1,
        [r.rows for r in records],
        [r.cols for r in records],
        [r.start for r in records],
        [r.closed for r in records],
        [r.status == Status.FOUND for r in records],
    )
    assert done is not None
    out, offsets, present = done
    assert present.tolist() == [r.tour is not None for r in records]
    for i, rec in enumerate(records):
        expected = b"" if rec.tour is None else move_codes(rec.tour).tobytes()
        assert bytes(out[offsets[i] : offsets[i + 1]]) == expected
    # the same page through moves_page: its records as decoded, each tour left out
    values = [encode_record(r) for r in records]
    values.insert(4, None)
    page = moves_page(values)
    assert page.offsets.tolist() == offsets.tolist() and bytes(page.moves) == bytes(
        out[: offsets[-1]]
    )
    assert [msgspec.structs.replace(r, tour=None) for r in page.records] == [
        msgspec.structs.replace(r, tour=None) for r in records
    ]
    # a tour that is not a chain from its record's start square goes the plain way: squares
    shifted = msgspec.structs.replace(walks[1], tour=walks[1].tour[1:], status=Status.ERROR)
    odd = moves_page([*values, encode_record(shifted)])
    assert list(odd.squares) == [len(records)]
    assert np.array_equal(odd.squares[len(records)], shifted.tour)


def test_collect_outputs_a_tampered_record_as_an_error_and_exits_1(
    redis_db_url, redis_client, solved, tmp_path
):
    from knights_tour.batches.jobs import Job
    from knights_tour.batches.saving import save_records
    from knights_tour.batches.store import create_batch
    from knights_tour.cli import main

    records = [r for r in solved if r.rows == 5]
    jobs = [Job(rows=r.rows, cols=r.cols, start=r.start) for r in records]
    bid = create_batch(redis_client, jobs)
    rows = [(r.job_key, r.status.value, False, encode_record(r)) for r in records]
    victim = next(i for i, r in enumerate(records) if r.status == Status.FOUND)
    bad = _tampered(records[victim])["a square twice"]
    rows[victim] = (bad.job_key, "found", False, encode_record(bad))
    save_records(redis_client, bid, rows)
    for out in ("o.jsonl", "o.parquet"):
        code = main(["collect", bid, "--out", str(tmp_path / out), "--redis", redis_db_url])
        assert code == 1
    lines = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    wrong = [d for d in lines if d["status"] == "error"]
    assert len(wrong) == 1 and wrong[0]["job_key"] == bad.job_key
    assert wrong[0]["reason"].startswith(REJECTED) and wrong[0]["checks"]["verifier"] is False
    from knights_tour.output import parquet

    assert [r.to_dict() for r in parquet.read(tmp_path / "o.parquet")] == [
        Record.from_dict(d).to_dict() for d in lines
    ]


_PLAIN_PAGE = """
import base64, json, sys
from knights_tour.tours.pages import jsonl_page
values = [base64.b64decode(v) if v else None for v in json.loads(sys.stdin.read())]
text = b"".join(jsonl_page(values).chunks)
print(json.dumps({"text": base64.b64encode(text).decode(),
                  "walk_loaded": "knights_tour.tours.tour_text" in sys.modules}))
"""


@pytest.mark.process
def test_a_small_page_is_written_the_plain_way_without_loading_the_walk(solved):
    # A fresh process: this module has loaded the walk. The same bytes, numba never loaded;
    # the tampered tour is an error record as the walk would make it.
    tampered = _tampered(next(r for r in solved if r.status == Status.FOUND))["a square twice"]
    values = [encode_record(r) for r in [*solved, tampered]]
    values.insert(2, None)
    done = subprocess.run(
        [sys.executable, "-c", _PLAIN_PAGE],
        input=json.dumps([base64.b64encode(v).decode() if v else None for v in values]),
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(done.stdout)
    assert got["walk_loaded"] is False
    assert base64.b64decode(got["text"]) == _old_lines(values) == _text(values)
    assert REJECTED.encode() in base64.b64decode(got["text"])
