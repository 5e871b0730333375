"""Bad input everywhere: every parser either returns a well-formed value or raises a
:class:`KnightsTourError` (never another exception), the CLI turns every bad argument or file into
one ``ktour: error:`` line and exit code 2 (no traceback, nothing written), and a broker message
of any shape becomes ``error`` records, never a crash.

Facts from outside the code: algebraic notation (files a.., rank 1 at the bottom: on 8x8 the
square (0, 0) is a8 and (7, 0) is a1); a tour visits each of the rows*cols squares once.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from knights_tour.batches.jobs import Job, error_record, record_sort_key
from knights_tour.board import Board, parse_board, parse_board_list
from knights_tour.cli import main
from knights_tour.errors import KnightsTourError
from knights_tour.output.tourfile import parse_step_matrix, read_tour_file, record_to_tour
from knights_tour.tours.record import json_bytes, record_from_json
from knights_tour.tours.stored import decode_stored

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
size_text = st.text(alphabet="0123456789x×X-,; abc+.", max_size=8)


# -- board and square parsers -----------------------------------------------------------------
@FUZZ
@given(size_text | st.integers(-5, 10**6) | st.tuples(st.integers(-3, 200), st.integers(-3, 200)))
def test_parse_board_returns_a_board_or_a_clear_error(spec):
    try:
        board = parse_board(spec)
    except KnightsTourError as exc:
        assert str(exc)
        return
    assert isinstance(board, Board) and board.rows >= 1 and board.cols >= 1


@FUZZ
@given(size_text)
def test_parse_board_list_returns_boards_or_a_clear_error(spec):
    try:
        boards = parse_board_list(spec)
    except KnightsTourError as exc:
        assert str(exc)
        return
    assert boards and all(isinstance(b, Board) for b in boards)


@FUZZ
@given(
    st.integers(1, 30),
    st.integers(1, 30),
    st.text(alphabet=string.ascii_letters + string.digits + ",-() ", max_size=8),
)
def test_parse_square_is_on_the_board_or_a_clear_error(rows, cols, text):
    board = Board(rows, cols)
    try:
        r, c = board.parse_square(text)
    except KnightsTourError as exc:
        assert str(exc)
        return
    assert 0 <= r < rows and 0 <= c < cols


@FUZZ
@given(st.integers(1, 30), st.integers(1, 30), st.data())
def test_algebraic_notation_round_trips(rows, cols, data):
    board = Board(rows, cols)
    sq = (data.draw(st.integers(0, rows - 1)), data.draw(st.integers(0, cols - 1)))
    assert board.parse_square(board.algebraic(sq)) == sq
    assert board.parse_square(f"{sq[0]},{sq[1]}") == sq


def test_algebraic_notation_matches_the_chessboard():
    b = Board(8, 8)
    assert (b.algebraic((0, 0)), b.algebraic((7, 0)), b.algebraic((7, 7))) == ("a8", "a1", "h1")


# -- tour files ------------------------------------------------------------------------------
@FUZZ
@given(st.text(alphabet="0123456789 -+#\nx.\t", max_size=80))
def test_step_matrix_parser_on_noise(text):
    try:
        board, tour = parse_step_matrix(text)
    except KnightsTourError as exc:
        assert str(exc)
        return
    assert len(tour) == board.rows * board.cols == len(set(tour))
    assert all(0 <= r < board.rows and 0 <= c < board.cols for r, c in tour)


@FUZZ
@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.randoms(use_true_random=False),
    st.sampled_from(["ok", "ragged", "duplicate", "word", "gap"]),
    st.booleans(),
)
def test_step_matrix_permutations_and_their_corruptions(rows, cols, rnd, damage, zero_based):
    assume(not (damage == "ragged" and rows == 1))  # one longer row is simply a wider board
    n = rows * cols
    steps = list(range(n))
    rnd.shuffle(steps)
    base = 0 if zero_based else 1
    grid = [[steps[r * cols + c] + base for c in range(cols)] for r in range(rows)]
    lines = [[str(v) for v in row] for row in grid]
    if damage == "ragged":
        lines[-1].append(str(n + base))
    elif damage == "duplicate" and n > 1:
        lines[0][0] = lines[-1][-1]  # two different squares with the same step number
    elif damage == "word":
        lines[rnd.randrange(rows)][rnd.randrange(cols)] = "seven"
    elif damage == "gap":
        r, c = rnd.randrange(rows), rnd.randrange(cols)
        lines[r][c] = str(n + base + 5)
    text = "\n".join(" ".join(row) for row in lines) + "\n"
    must_fail = damage in ("ragged", "word", "gap") or (damage == "duplicate" and n > 1)
    if must_fail:
        with pytest.raises(KnightsTourError):
            parse_step_matrix(text)
        return
    board, tour = parse_step_matrix(text)
    assert (board.rows, board.cols) == (rows, cols)
    for r in range(rows):
        for c in range(cols):
            assert tour[grid[r][c] - base] == (r, c)


@FUZZ
@given(json_values)
def test_record_reader_on_any_json(value):
    try:
        board, tour, meta = record_to_tour(value)
    except KnightsTourError as exc:
        assert str(exc)
        return
    assert isinstance(board, Board) and all(len(sq) == 2 for sq in tour)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.binary(max_size=200))
def test_read_tour_file_on_random_bytes(tmp_path, data):
    path = tmp_path / "noise.txt"
    path.write_bytes(data)
    try:
        read_tour_file(path)
    except KnightsTourError as exc:
        assert str(exc)


def test_a_huge_tour_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.txt"
    path.write_text("1 2\n3 4\n" * 10)
    with pytest.raises(KnightsTourError, match="limit"):
        read_tour_file(path, max_bytes=64)


# -- jobs as they arrive over the broker -----------------------------------------------------
job_like = st.fixed_dictionaries(
    {},
    optional={
        "rows": st.integers(-2, 12) | st.just(10**7) | json_scalars,
        "cols": st.integers(-2, 12) | json_scalars,
        "start": st.lists(st.integers(-2, 12), max_size=3) | json_scalars,
        "solver": st.sampled_from(["warnsdorff", "cpsat", "bogus", ""]) | json_scalars,
        "closed": st.booleans() | json_scalars,
        "verify": st.sampled_from([None, "cpsat", "z3"]),
        "time_limit_s": st.floats(allow_nan=True, allow_infinity=True) | json_scalars,
        "exhaustive": st.booleans() | json_scalars,
        "node_limit": st.integers(-5, 10**9) | json_scalars,
        "extra": json_scalars,
    },
)


@FUZZ
@given(job_like | json_values)
def test_job_from_dict_validates_every_field(data):
    try:
        job = Job.from_dict(data)
    except KnightsTourError as exc:
        assert str(exc)
        record = error_record(data, exc, "b", job_key="invalid:x")
        assert record_from_json(json_bytes(record)) == record  # it can always be stored
        record_sort_key(record)  # ... and sorted with the others by collect
        return
    assert 0 <= job.start[0] < job.rows and 0 <= job.start[1] < job.cols
    assert Job.from_dict(json.loads(json.dumps(job.to_dict()))) == job


def test_any_message_body_becomes_records_not_a_crash(task_env):
    """The task body on malformed messages: each entry is one record (error for the invalid
    ones), nothing raises; a batch id is still required to be a string by Celery's signature."""
    from knights_tour.batches.client import make_jobs
    from knights_tour.batches.jobs import JobOptions
    from knights_tour.batches.store import create_batch
    from knights_tour.store.connection import connect
    from knights_tour.tasks import run_jobs

    r = connect(task_env)
    bodies = [
        "not a list",
        42,
        None,
        {"rows": 5},
        [1, "two", None, [3]],
        [{"rows": 5, "cols": 5, "start": [9, 9], "solver": "warnsdorff"}],
        [{"rows": 5, "cols": 5, "start": [0, 0], "solver": "warnsdorff", "pickle": "x"}],
        [{"rows": True, "cols": 5, "start": [0, 0], "solver": "warnsdorff"}],
        [{"rows": 5, "cols": 5, "start": [0, 0], "solver": "cpsat", "time_limit_s": -1}],
        [{"rows": 60, "cols": 60, "start": [0, 0], "solver": "cpsat"}],
    ]
    # the batches exist, as a submitted batch does: a chunk of a batch Redis does not hold is
    # dropped before its jobs are read
    _, some_jobs, params = make_jobs(["5"], JobOptions())
    for i, body in enumerate(bodies):
        batch_id = f"fuzz{i}"
        create_batch(r, some_jobs[:1], params, batch_id=batch_id)
        summary = run_jobs.run(batch_id, body)
        n = len(body) if isinstance(body, list) else 1
        assert summary["jobs"] == n
        raw = r.execute_command("HVALS", f"kt:batch:{batch_id}:records", NEVER_DECODE=True)
        stored = [decode_stored(v) for v in raw]
        assert len(stored) == len({rec.job_key for rec in stored})
        assert stored and all(rec.status == "error" for rec in stored), stored
        assert all(rec.error_type == "InvalidJobError" and rec.reason for rec in stored)


# -- the command line ----------------------------------------------------------------------------
def _bad_files(tmp_path):
    files = {
        "ragged": "1 2 3\n4 5\n6 7 8\n",
        "words": "1 2 x\n4 5 6\n7 8 9\n",
        "duplicate": "1 1 3\n4 5 6\n7 8 9\n",
        "empty": "",
        "json": '{"rows": 3, "cols": ',
        "json-no-tour": '{"rows": 3, "cols": 3, "status": "no_tour"}',
        "json-bad-square": '{"rows": 3, "cols": 3, "tour": [[0, 0], "b2"]}',
    }
    out = {}
    for name, text in files.items():
        p = tmp_path / f"{name}.txt"
        p.write_text(text)
        out[name] = str(p)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(bytes(range(256)) * 4)
    out["binary"] = str(binary)
    out["missing"] = str(tmp_path / "nope.txt")
    out["directory"] = str(tmp_path)
    return out


DEAD_REDIS = "redis://127.0.0.1:1/0"

BAD_ARGS = [
    ["solve", "0", "a1"],
    ["solve", "abc", "a1"],
    ["solve", "8x", "a1"],
    ["solve", "100001", "a1"],
    ["solve", "8", "z9"],
    ["solve", "8", "8,0"],
    ["solve", "8", "--", "-1,-1"],
    ["solve", "8", "a1", "--solver", "bogus"],
    ["solve", "60", "a1", "--solver", "cpsat"],
    ["solve", "6000x6000", "a1"],
    ["solve", "8", "a1", "--time-limit", "-1"],
    ["solve", "8", "a1", "--time-limit", "nan"],
    ["solve", "8", "a1", "--time-limit", "inf"],
    ["solve", "8", "a1", "--time-limit", "soon"],
    ["solve", "8", "a1", "--node-limit", "0"],
    ["solve", "-3", "a1"],
    ["run", "--sizes", "0", "--redis", DEAD_REDIS],
    ["run", "--sizes", "5-4", "--redis", DEAD_REDIS],
    ["run", "--sizes", "60", "--solver", "cpsat", "--redis", DEAD_REDIS],
    ["run", "--sizes", "5", "--solver", "nope", "--redis", DEAD_REDIS],
    ["run", "--sizes", "5", "--chunk-size", "0", "--redis", DEAD_REDIS],
    ["run", "--sizes", "5", "--time-limit", "nan", "--redis", DEAD_REDIS],
    ["run", "--sizes", "5", "--redis", DEAD_REDIS],
    ["submit", "--sizes", "5", "--redis", "notaurl"],
    ["status", "b", "--redis", DEAD_REDIS],
    ["collect", "b", "--redis", DEAD_REDIS],
]


@pytest.mark.parametrize("args", BAD_ARGS, ids=lambda a: " ".join(a))
def test_bad_arguments_exit_2_with_one_clear_line(data_dir, tmp_path, capsys, args):
    out_file = tmp_path / "out.jsonl"
    if args[0] == "run":
        args = [*args, "--out", str(out_file)]
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith("ktour: error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not out_file.exists()  # nothing half-written


@pytest.mark.parametrize(
    "name",
    [
        "ragged",
        "words",
        "empty",
        "json",
        "json-no-tour",
        "json-bad-square",
        "binary",
        "missing",
        "directory",
    ],
)
def test_malformed_tour_files_exit_2(data_dir, tmp_path, capsys, name):
    files = _bad_files(tmp_path)
    code = main(["verify", files[name]])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("ktour: error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_well_formed_matrix_with_a_repeated_step_is_invalid_not_an_error(
    data_dir, tmp_path, capsys
):
    """Read as a matrix, but step 1 appears twice: not a tour (exit 1, the reason), not an
    unreadable file (exit 2)."""
    code = main(["verify", _bad_files(tmp_path)["duplicate"]])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err
    assert "invalid" in out + err and "1 appears twice" in out + err


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    size=st.text(alphabet="0123456789x-,", max_size=2),
    start=st.text(alphabet="abcz0123456789,-", min_size=1, max_size=4),
)
def test_cli_solve_never_crashes(data_dir, capsys, size, start):
    if start.startswith("-"):
        start = "a" + start
    code = main(["solve", size or "0", start, "--time-limit", "5"])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2) and "Traceback" not in err
    if code == 2:
        assert err.startswith("ktour: error:")
