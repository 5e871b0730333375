"""Tests of the ``ktour`` command line, called in-process through ``main([...])``.

Facts from outside the code: colour parity (a tour alternates colours, so on 5x5 with 13
squares of one colour and 12 of the other an open tour starts on the majority colour, and no
closed tour exists on a board with an odd number of squares); Euler's closed 8x8 tour as given
in OEIS A226697; no open knight's tour exists on 4x4 (OEIS A165134: a(4) = 0;
Conrad et al. 1994).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import click
import pytest
from _cli import run_cli

from knights_tour.board import Board
from knights_tour.cli import COMMANDS, cli, main
from knights_tour.commands._errors import ExitCode
from knights_tour.output.tourfile import parse_step_matrix
from knights_tour.settings import get_settings
from knights_tour.tours.verify import verify_tour

DATA = Path(__file__).parent / "data"
EULER = DATA / "euler_8x8_closed_a226697.txt"
RECORD_FIELDS = {
    "rows",
    "cols",
    "start",
    "start_square",
    "solver",
    "closed",
    "status",
    "proof",
    "proof_detail",
    "reason",
    "tour",
    "checks",
    "nodes",
    "elapsed_s",
    "batch_id",
}


pytestmark = pytest.mark.usefixtures("data_dir")  # no KT_REDIS_URL unless a test sets one


# -- the entry point ----------------------------------------------------------------------------


def test_every_registered_command_loads_under_its_name_with_its_summary():
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name, (_target, summary) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name
        # ktour --help shows the registry's summary: it must say what the command's help says
        for limit in (45, 70, 1000):
            listed = click.Command(None, help=summary).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit), name
    assert cli.get_command(ctx, "no-such-command") is None


def test_main_returns_exit_codes_as_the_enum(capsys, tmp_path):
    assert main(["--version"]) is ExitCode.OK
    assert main(["verify", str(EULER)]) is ExitCode.OK
    assert main(["verify", str(EULER), "--start", "b1"]) is ExitCode.NOT_OK
    assert main(["verify", str(tmp_path / "missing.txt")]) is ExitCode.BAD_INPUT
    assert main(["no-such-command"]) is ExitCode.BAD_INPUT
    assert [int(c) for c in ExitCode] == [0, 1, 2, 130, 141]


# -- solve ------------------------------------------------------------------------------------


@pytest.mark.parametrize("size, start, rows, cols", [("8", "a1", 8, 8), ("6x8", "2,3", 6, 8)])
def test_solve_prints_a_board_that_is_a_valid_tour(capsys, size, start, rows, cols):
    code, out, err = run_cli(capsys, "solve", size, start)
    assert code == 0, err
    board, tour = parse_step_matrix(out)
    assert board == Board(rows, cols)
    assert tour[0] == board.parse_square(start)
    assert verify_tour(board, tour, start=start).ok
    status = [ln for ln in out.splitlines() if ln.startswith("#")]
    assert len(status) == 1 and "status found" in status[0] and "nodes" in status[0]


def test_solve_large_board_prints_a_valid_tour(capsys):
    """Above 40,000 squares the engine hands back a numpy array; the printout must not care."""
    code, out, err = run_cli(capsys, "solve", "201x200", "a1")
    assert code == 0, err
    board, tour = parse_step_matrix(out)
    assert board == Board(201, 200) and verify_tour(board, tour, start="a1").ok


def test_solve_labels_put_rank_1_at_the_bottom(capsys):
    code, out, _ = run_cli(capsys, "solve", "5", "a1", "--labels")
    assert code == 0
    lines = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert lines[-1].split() == ["a", "b", "c", "d", "e"]
    bottom = lines[-2].split()
    assert bottom[0] == "1" and bottom[1] == "1"  # rank 1, file a holds step 1
    board, tour = parse_step_matrix(out)
    assert verify_tour(board, tour, start="a1").ok


def test_solve_json_record(capsys):
    code, out, _ = run_cli(capsys, "solve", "6", "c4", "--json")
    assert code == 0
    rec = json.loads(out)
    assert RECORD_FIELDS <= set(rec)
    assert (rec["rows"], rec["cols"], rec["start_square"], rec["status"]) == (6, 6, "c4", "found")
    # c4 on 6x6 is row 6-4 = 2, column 2
    assert rec["start"] == [2, 2] and rec["tour"][0] == [2, 2]
    assert rec["checks"]["verifier"] is True
    assert verify_tour(6, rec["tour"], start="c4").ok


def test_solve_minority_colour_start_is_no_tour_by_parity(capsys):
    # b5 = (0, 1) is on the minority colour of 5x5 (12 squares vs 13).
    code, out, _ = run_cli(capsys, "solve", "5", "b5", "--json")
    rec = json.loads(out)
    assert code == 0
    assert rec["status"] == "no_tour" and rec["proof"] == "parity" and rec["tour"] is None


def test_solve_closed_on_odd_board_is_no_tour(capsys):
    code, out, _ = run_cli(capsys, "solve", "5", "a5", "--closed")
    assert code == 0
    assert "status no_tour" in out and "no closed tour of 5x5 from a5" in out


def test_solve_4x4_has_no_open_tour(capsys):
    code, out, _ = run_cli(capsys, "solve", "4", "a1", "--json")
    rec = json.loads(out)
    assert code == 0 and rec["status"] == "no_tour" and rec["proof"] is not None


def test_solve_cpsat_backend(capsys):
    code, out, _ = run_cli(capsys, "solve", "5", "c3", "--solver", "cpsat", "--json")
    rec = json.loads(out)
    assert code == 0 and rec["solver"] == "cpsat" and rec["status"] == "found"
    assert verify_tour(5, rec["tour"], start="c3").ok


def test_solve_output_pipes_into_verify(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, "solve", "7", "d4", "--labels")
    assert code == 0
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(out.encode())))
    code, out2, _ = run_cli(capsys, "verify", "-", "--start", "d4")
    assert code == 0 and out2.startswith("valid open tour of 7x7 from d4")


def test_solve_undecided_exits_1(capsys):
    # 63 moves are needed for a tour of 8x8, so a budget of one search node cannot decide it
    code, out, _ = run_cli(capsys, "solve", "8", "a1", "--node-limit", "1")
    assert code == 1
    assert "status unknown" in out and "node_limit" in out


# -- errors: one line, exit 2 -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["solve", "8", "a1", "--solver", "nope"],
            "ktour: error: unknown solver 'nope'; valid solvers: cpsat, warnsdorff",
        ),
        (["solve", "8", "z9"], "ktour: error: square 'z9' is off the 8x8 board"),
        (["solve", "8", "8,0"], "ktour: error: square (8, 0) is off the 8x8 board"),
        (["solve", "8x", "a1"], "ktour: error: cannot read board size '8x'"),
        (["solve", "0", "a1"], "ktour: error: board rows must be between"),
        (["solve", "8"], "ktour: error: Missing argument 'START'"),
        (["solve", "8", "a1", "--time-limit", "abc"], "ktour: error:"),
        (["run", "--sizes", "5-x"], "ktour: error: cannot read board size '5-x'"),
        (["run", "--sizes", "5", "--solver", "nope"], "ktour: error: unknown solver 'nope'"),
        (
            ["status", "b1", "--redis", "redis://127.0.0.1:1/0"],
            "ktour: error: cannot reach Redis at redis://127.0.0.1:1/0",
        ),
        (
            ["collect", "b1", "--redis", "redis://:hunter2@127.0.0.1:1/0"],
            "ktour: error: cannot reach Redis at redis://:***@127.0.0.1:1/0",
        ),
        (["batches", "--redis", "redis://127.0.0.1:1/0"], "ktour: error: cannot reach Redis"),
        (
            ["submit", "--sizes", "5", "--redis", "redis://127.0.0.1:1/0"],
            "ktour: error: cannot reach Redis",
        ),
        (
            ["run", "--sizes", "5", "--redis", "redis://127.0.0.1:1/0"],
            "ktour: error: cannot reach Redis",
        ),
        (["submit", "--sizes", "5"], "ktour: error: submit needs a Redis URL"),
        (["nosuchcommand"], "ktour: error: No such command"),
    ],
)
def test_errors_give_one_line_and_exit_2(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), err
    assert "Traceback" not in err and "hunter2" not in err
    assert not list(tmp_path.glob("results-*.jsonl"))


@pytest.mark.parametrize(
    "var, value, message",
    [
        ("KT_WORKERS", "many", "ktour: error: invalid configuration: KT_WORKERS: "),
        (
            "KT_HARD_TIME_LIMIT_S",
            "1",
            "ktour: error: invalid configuration: "
            "KT_HARD_TIME_LIMIT_S must be greater than KT_SOFT_TIME_LIMIT_S",
        ),
    ],
)
def test_bad_configuration_is_one_line_exit_2(capsys, monkeypatch, var, value, message):
    monkeypatch.setenv(var, value)
    get_settings.cache_clear()
    code, out, err = run_cli(capsys, "batches")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(message), err


def test_run_refuses_unwritable_out_before_starting_anything(capsys, tmp_path):
    code, out, err = run_cli(
        capsys, "run", "--sizes", "5", "--out", str(tmp_path / "missing-dir" / "r.jsonl")
    )
    assert code == 2 and "does not exist" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "kt-data").exists()  # no embedded Redis was started


# -- verify -----------------------------------------------------------------------------------


def test_verify_euler_closed_tour(capsys):
    code, out, _ = run_cli(capsys, "verify", str(EULER), "--closed", "--start", "a4")
    assert code == 0 and out.strip() == "valid closed tour of 8x8 from a4"


def test_verify_wrong_start_is_invalid(capsys):
    code, out, _ = run_cli(capsys, "verify", str(EULER), "--start", "a1")
    assert code == 1 and out.strip() == "invalid: tour starts on a4, not on a1"


def test_verify_broken_tour_gives_the_reason(capsys, tmp_path):
    text = EULER.read_text()
    swapped = text.replace(" 26 ", " XX ").replace(" 15 ", " 26 ").replace(" XX ", " 15 ")
    assert swapped != text
    path = tmp_path / "broken.txt"
    path.write_text(swapped)
    code, out, _ = run_cli(capsys, "verify", str(path))
    assert code == 1
    assert re.match(r"invalid: step \d+ -> \d+ \(\w+ -> \w+\) is not a knight move", out)


def test_verify_open_tour_asked_to_be_closed(capsys, tmp_path):
    # The 5x5 open tour from a5 (1-based step matrix); 5x5 has no closed tour (parity).
    path = tmp_path / "t5.txt"
    path.write_text(
        " 1 14  9 20  3\n24 19  2 15 10\n13  8 25  4 21\n18 23  6 11 16\n 7 12 17 22  5\n"
    )
    assert run_cli(capsys, "verify", str(path))[:2] == (0, "valid open tour of 5x5 from a5\n")
    code, out, _ = run_cli(capsys, "verify", str(path), "--closed")
    assert code == 1 and "not closed" in out


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("1 2 3\n4 5\n", "line 2: ragged rows"),
        ("1 2\n3 four\n", "line 2, column 2: 'four' is not a step number"),
        ("", "no step numbers"),
        ('{"rows": 5, "cols": 5, "status": "no_tour", "tour": null}', "holds no tour"),
    ],
)
def test_verify_malformed_file_exits_2(capsys, tmp_path, content, fragment):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    code, out, err = run_cli(capsys, "verify", str(path))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and fragment in err and err.startswith("ktour: error: ")


def test_verify_json_record_holds_the_tour_to_its_claims(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "solve", "6", "a1", "--json")
    rec = json.loads(out)
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    assert run_cli(capsys, "verify", str(path))[0] == 0
    rec["start"] = [0, 0]  # claim a different start than the tour's first square
    path.write_text(json.dumps(rec))
    code, out, _ = run_cli(capsys, "verify", str(path))
    assert code == 1 and "not on a6" in out


def test_verify_all_checks_every_record_of_a_jsonl_file(capsys, tmp_path):
    records = []
    for start in ("a1", "b1", "c3"):  # b1 is on the minority colour of 5x5: no tour
        code, out, _ = run_cli(capsys, "solve", "5", start, "--json")
        records.append(json.loads(out))
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = run_cli(capsys, "verify", str(path), "--all")
    assert code == 0 and out.strip() == "3 records: 2 valid tours, 0 invalid, 1 without a tour"
    code, _, err = run_cli(capsys, "verify", str(path))
    assert code == 2 and "holds 3 JSON records" in err
    tour = records[2]["tour"]
    tour[5], tour[6] = tour[6], tour[5]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = run_cli(capsys, "verify", str(path), "--all")
    assert code == 1
    assert "record 3 (5x5 from c3): invalid: step 5 -> 6" in out
    assert out.splitlines()[-1] == "3 records: 1 valid tours, 1 invalid, 1 without a tour"


# -- batches against a real Redis with real workers (conftest fixtures) ------------------------


def _records(text: str) -> list[dict]:
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def _check_sweep(records: list[dict], boards: dict[int, int]) -> None:
    """One record per start square; every found tour valid; parity facts hold on odd boards."""
    by_board: dict[int, list[dict]] = {}
    for r in records:
        by_board.setdefault(r["rows"], []).append(r)
    assert {n: len(v) for n, v in by_board.items()} == boards
    for n, recs in by_board.items():
        assert len({tuple(r["start"]) for r in recs}) == n * n
        for r in recs:
            if r["status"] == "found":
                assert verify_tour(n, r["tour"], start=r["start"]).ok
            if n % 2 == 1 and (r["start"][0] + r["start"][1]) % 2 == 1:
                assert r["status"] == "no_tour" and r["proof"] == "parity"


def test_submit_status_collect_batches(capsys, tmp_path, local_workers, module_redis_url):
    url = module_redis_url
    code, out, err = run_cli(capsys, "submit", "--sizes", "5", "--sizes", "3x4", "--redis", url)
    assert code == 0, err
    batch_id = out.splitlines()[-1]
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]+", batch_id)

    out_file = tmp_path / "c.jsonl"
    code, _, err = run_cli(
        capsys,
        "collect",
        batch_id,
        "--wait",
        "--timeout",
        "120",
        "--format",
        "jsonl",
        "--out",
        str(out_file),
        "--redis",
        url,
    )
    assert code in (0, 1), err
    records = _records(out_file.read_text())
    assert len(records) == 25 + 12
    assert {r["batch_id"] for r in records} == {batch_id}
    five = [r for r in records if r["rows"] == 5]
    _check_sweep(five, {5: 25})
    # 5x5 open tours exist exactly from the 13 majority-colour squares (OEIS A165134 counts
    # 1728 directed tours; parity excludes the other 12 start squares)
    assert sum(r["status"] == "found" for r in five) == 13

    code, out, _ = run_cli(capsys, "status", batch_id, "--redis", url)
    assert code == 0 and f"batch {batch_id}: 37/37 jobs done (complete)" in out
    code, out, _ = run_cli(capsys, "status", batch_id, "--json", "--redis", url)
    assert json.loads(out)["done"] == 37

    code, out, _ = run_cli(capsys, "collect", batch_id, "--format", "csv", "--redis", url)
    assert len(out.splitlines()) == 1 + 37
    csv_file = tmp_path / "r.csv"  # the name asks for CSV: the same bytes as --format csv
    run_cli(capsys, "collect", batch_id, "--out", str(csv_file), "--redis", url)
    assert csv_file.read_text() == out

    code, out, _ = run_cli(capsys, "batches", "--json", "--redis", url)
    assert batch_id in [b["batch_id"] for b in json.loads(out)]

    code, _, err = run_cli(capsys, "status", "no-such-batch", "--redis", url)
    assert code == 2 and "unknown batch" in err


def test_run_against_listening_workers(capsys, tmp_path, local_workers, module_redis_url):
    out_file = tmp_path / "r.jsonl"
    code, out, err = run_cli(
        capsys,
        "run",
        "--sizes",
        "5",
        "--verify",
        "cpsat",
        "--redis",
        module_redis_url,
        "--out",
        str(out_file),
    )
    assert code == 0, err
    batch_id = out.splitlines()[-1]
    records = _records(out_file.read_text())
    _check_sweep(records, {5: 25})
    assert all(r["checks"]["cpsat"] is True and r["mismatch"] is False for r in records)
    assert "5x5" in out and "25/25" in out  # summary table row with CP-SAT agreements
    code, out, _ = run_cli(
        capsys, "collect", batch_id, "--format", "jsonl", "--redis", module_redis_url
    )
    assert _records(out) == records


@pytest.mark.integration
def test_run_embedded_then_collect_from_a_new_start(capsys, tmp_path, monkeypatch):
    """`ktour run` with no Redis URL: embedded Redis + 2 local workers, everything stopped at the
    end; then `ktour collect` (a fresh embedded Redis on the same data dir) returns the same
    records."""
    import psutil

    monkeypatch.chdir(tmp_path)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    code, out, err = run_cli(capsys, "run", "--sizes", "5,6", "--workers", "2")
    assert code == 0, err
    batch_id = out.splitlines()[-1]
    out_file = tmp_path / f"results-{batch_id}.jsonl"
    records = _records(out_file.read_text())
    _check_sweep(records, {5: 25, 6: 36})
    assert sum(r["status"] == "found" for r in records if r["rows"] == 6) == 36
    assert f"{batch_id}: 61/61 jobs done" in err
    # nothing left running
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    assert not (tmp_path / "kt-data" / "redis" / "embedded-redis.json").exists()

    code, out, err = run_cli(capsys, "collect", batch_id, "--format", "jsonl")
    assert code == 0, err
    assert _records(out) == records
    assert out == out_file.read_text()  # byte-identical to the file of `run`
    code, out, _ = run_cli(capsys, "batches")
    assert batch_id in out
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_collect_reports_a_cpsat_mismatch_loudly_and_exits_1(capsys, redis_client, redis_db_url):
    """A stored record that disagrees with CP-SAT must never pass quietly."""
    import msgspec

    from knights_tour.batches import saving, store
    from knights_tour.batches.jobs import Job, run_job
    from knights_tour.tours.record import Checks, Status

    jobs = [Job(5, 5, (0, 0), verify="cpsat"), Job(5, 5, (0, 1), verify="cpsat")]
    batch_id = store.create_batch(redis_client, jobs, params={"sizes": "5x5"})
    good = run_job(jobs[0], batch_id=batch_id)
    assert good.status == Status.FOUND and good.checks.cpsat is True
    bad = run_job(jobs[1], batch_id=batch_id)
    assert bad.status == Status.NO_TOUR and bad.cpsat_status == Status.NO_TOUR
    # simulate a backend claiming the opposite of what CP-SAT found
    bad = msgspec.structs.replace(
        bad,
        status=Status.FOUND,
        mismatch=True,
        cpsat_status=Status.NO_TOUR,
        cpsat_note="disagreement: warnsdorff says found, CP-SAT says no_tour",
        checks=Checks(verifier=bad.checks.verifier, cpsat=False),
    )
    saving.save_record(redis_client, batch_id, good)
    saving.save_record(redis_client, batch_id, bad)

    code, out, err = run_cli(capsys, "collect", batch_id, "--redis", redis_db_url)
    assert code == 1
    assert "CP-SAT CROSS-CHECK FAILED for 1 job(s)" in err
    # a found claim without a tour fails verification on the way out: an error, still loud
    assert "5x5 from b5: warnsdorff says error, CP-SAT says no_tour" in err
    row = next(ln for ln in out.splitlines() if "5x5" in ln)
    cells = [c.strip() for c in row.strip("│┃ ").split("│")]
    assert cells[:7] == ["5x5", "2", "1", "0", "0", "1", "1"]
    assert cells[7] == "1/2"
