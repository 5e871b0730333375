"""Job model, validation of broker input, batch expansion and run_job (pure: no Redis/Celery).

Facts used (from outside the code): a knight move changes square colour, so on a board with an
odd number of squares an open tour must start on the majority colour (colour parity); there is
no open knight's tour of 4×4 (Conrad et al. 1994); n = 5..12 have 620 start squares in all.
"""

from __future__ import annotations

import json
import time

import pytest

from knights_tour.batches.jobs import Job, error_record, make_batch_jobs, record_sort_key, run_job
from knights_tour.board import Board
from knights_tour.errors import InvalidJobError
from knights_tour.tours.record import Proof, Record, Status
from knights_tour.tours.verify import verify_tour

GOOD = {"rows": 6, "cols": 8, "start": [2, 3], "solver": "warnsdorff"}


def test_round_trip_through_json():
    job = Job(
        6,
        8,
        (2, 3),
        solver="cpsat",
        closed=True,
        verify="cpsat",
        time_limit_s=5,
        exhaustive=True,
        node_limit=1000,
    )
    again = Job.from_dict(json.loads(json.dumps(job.to_dict())))
    assert again == job
    assert again.time_limit_s == 5.0 and isinstance(again.time_limit_s, float)


def test_defaults_when_optional_fields_absent():
    job = Job.from_dict(GOOD)
    assert (job.closed, job.verify, job.time_limit_s, job.exhaustive, job.node_limit) == (
        False,
        None,
        None,
        False,
        None,
    )


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"rows": "8"}, "rows must be an integer"),
        ({"rows": True}, "rows must be an integer"),
        ({"cols": 0}, "cols must be between"),
        ({"rows": 10**9}, "rows must be between"),
        ({"start": [6, 0]}, "off the 6x8 board"),
        ({"start": [0, -1]}, "off the 6x8 board"),
        ({"start": "a1"}, "start must be [row, col]"),
        ({"start": [0, 1, 2]}, "start must be [row, col]"),
        ({"start": [0.0, 1]}, "start must be [row, col]"),
        ({"solver": "dijkstra"}, "unknown solver 'dijkstra'; valid solvers: cpsat, warnsdorff"),
        ({"solver": 3}, "solver must be a string"),
        ({"closed": "yes"}, "closed must be true or false"),
        ({"exhaustive": 1}, "exhaustive must be true or false"),
        ({"verify": "z3"}, "verify must be null or one of cpsat"),
        ({"time_limit_s": -1}, "time_limit_s must be > 0"),
        ({"time_limit_s": float("nan")}, "time_limit_s must be a number"),
        ({"time_limit_s": "10"}, "time_limit_s must be a number"),
        ({"time_limit_s": False}, "time_limit_s must be a number"),
        ({"node_limit": 0}, "node_limit must be a positive integer"),
        ({"surprise": 1}, "unknown field(s) surprise"),
        (
            {"rows": 60, "cols": 60, "start": [0, 0], "solver": "cpsat"},
            "too large for the cpsat solver",
        ),
        (
            {"rows": 60, "cols": 60, "start": [0, 0], "verify": "cpsat"},
            "too large for the cpsat cross-check",
        ),
    ],
)
def test_from_dict_rejects_every_bad_field(change, needle):
    with pytest.raises(InvalidJobError) as info:
        Job.from_dict({**GOOD, **change})
    assert needle in str(info.value)


@pytest.mark.parametrize("missing", ["rows", "cols", "start", "solver"])
def test_from_dict_requires_fields(missing):
    data = dict(GOOD)
    del data[missing]
    with pytest.raises(InvalidJobError, match=f"missing field.*{missing}"):
        Job.from_dict(data)


@pytest.mark.parametrize("not_a_dict", [None, [1, 2], "job", 7])
def test_from_dict_rejects_non_objects(not_a_dict):
    with pytest.raises(InvalidJobError, match="JSON object"):
        Job.from_dict(not_a_dict)


def test_key_identifies_board_start_solver_and_closure():
    a = Job(8, 8, (0, 0))
    assert a.key == Job.from_dict(a.to_dict()).key  # stable across the wire
    others = [
        Job(8, 8, (0, 1)),
        Job(8, 9, (0, 0)),
        Job(8, 8, (0, 0), closed=True),
        Job(8, 8, (0, 0), solver="cpsat"),
    ]
    assert len({a.key, *(o.key for o in others)}) == 5
    # A limit is not part of the job's identity: a re-run with another limit overwrites.
    assert Job(8, 8, (0, 0), time_limit_s=3).key == a.key


def test_make_batch_jobs_covers_every_start_square_row_major():
    jobs = make_batch_jobs(range(5, 13))
    assert len(jobs) == sum(n * n for n in range(5, 13)) == 620
    assert len({j.key for j in jobs}) == 620
    first8 = [j for j in jobs if j.rows == 8]
    assert [j.start for j in first8] == [(r, c) for r in range(8) for c in range(8)]
    rect = make_batch_jobs(["3x4"], solver="cpsat", closed=True, verify="cpsat")
    assert [(j.rows, j.cols, j.solver, j.closed, j.verify) for j in rect] == [
        (3, 4, "cpsat", True, "cpsat")
    ] * 12


def test_to_dict_leaves_out_the_optional_fields_at_their_defaults():
    plain = Job(6, 8, (2, 3))
    assert plain.to_dict() == GOOD  # what a broker message and the stored jobs carry
    assert Job.from_dict(plain.to_dict()) == plain
    changed = {
        "closed": True,
        "verify": "cpsat",
        "time_limit_s": 5.0,
        "exhaustive": True,
        "node_limit": 1000,
    }
    for name, value in changed.items():
        job = Job(6, 8, (2, 3), **{name: value})
        assert job.to_dict() == {**GOOD, name: value}
        assert Job.from_dict(json.loads(json.dumps(job.to_dict()))) == job


def test_make_batch_jobs_equals_jobs_validated_one_by_one():
    """The batch's jobs are validated once per board; each is the job the validating
    constructor builds for its square."""
    boards = [Board(5, 5), Board(3, 4), Board(6, 8)]
    options = {"solver": "cpsat", "closed": True, "time_limit_s": 2, "node_limit": 50}
    jobs = make_batch_jobs(boards, **options)
    assert jobs == [Job(b.rows, b.cols, sq, **options) for b in boards for sq in b.squares()]
    assert all(Job.from_dict(j.to_dict()) == j for j in jobs)
    assert all(isinstance(j.start, tuple) and isinstance(j.time_limit_s, float) for j in jobs)


def test_make_batch_jobs_validates_options():
    with pytest.raises(InvalidJobError, match="unknown solver"):
        make_batch_jobs([5], solver="nope")


def test_run_job_found_tour_passes_the_verifier():
    rec = run_job(Job(5, 5, (0, 0)), batch_id="b1", worker="w1@here")
    assert isinstance(rec, Record) and rec.status == Status.FOUND
    assert verify_tour(5, rec.tour, start=(0, 0)).ok
    assert (rec.batch_id, rec.job_key, rec.worker) == ("b1", "5x5:0,0:warnsdorff:open", "w1@here")
    assert rec.mismatch is False and rec.checks.cpsat is None and rec.checks.verifier is True
    assert rec.job_elapsed_s >= rec.elapsed_s >= 0
    again = json.loads(json.dumps(rec.to_dict()))  # JSON all the way
    assert again["status"] == "found" and again["tour"] == rec.tour.tolist()
    assert Record.from_dict(again) == rec


def test_run_job_parity_start_is_no_tour():
    # (0, 1) has colour 1, the minority colour of 5x5 (12 of 25 squares).
    assert Board.colour((0, 1)) == 1
    rec = run_job(Job(5, 5, (0, 1)))
    assert (rec.status, rec.proof, rec.tour) == (Status.NO_TOUR, Proof.PARITY, None)


def test_cpsat_cross_check_agrees_on_found_and_no_tour():
    found = run_job(Job(6, 6, (0, 0), verify="cpsat"))
    assert found.status == Status.FOUND and verify_tour(6, found.tour, start=(0, 0)).ok
    assert (found.checks.verifier, found.checks.cpsat) == (True, True)
    assert (found.cpsat_status, found.cpsat_tour_accepted, found.mismatch) == (
        Status.FOUND,
        True,
        False,
    )
    assert found.cpsat_model_status in ("OPTIMAL", "FEASIBLE")
    began = time.perf_counter()
    none = run_job(Job(4, 4, (0, 0), verify="cpsat"))  # no open tour on 4x4
    outside = time.perf_counter() - began
    assert none.status == Status.NO_TOUR and none.cpsat_status == Status.NO_TOUR
    assert none.checks.cpsat is True and none.mismatch is False
    assert none.cpsat_model_status == "INFEASIBLE"
    # The cross-check's time is part of the job's, which the caller's clock bounds (the
    # fields are rounded to the microsecond).
    for rec in (found, none):
        assert 0 < rec.cpsat_elapsed_s
        assert rec.elapsed_s + rec.cpsat_elapsed_s <= rec.job_elapsed_s + 2e-6
    assert none.job_elapsed_s <= outside + 1e-6


def _fake_cpsat(status, proof=None, reason=None):
    def fake(board, start, *, closed=False, time_limit_s=None, exhaustive=False, node_limit=None):
        return Record(
            rows=board.rows,
            cols=board.cols,
            start=start,
            solver="cpsat",
            closed=closed,
            status=Status(status),
            proof=Proof(proof) if proof else None,
            reason=reason,
        )

    return fake


def test_disagreement_is_recorded_as_mismatch(monkeypatch):
    import knights_tour.solvers.cpsat as cpsat

    monkeypatch.setattr(cpsat, "solve", _fake_cpsat("no_tour", "cpsat"))  # a wrong answer
    rec = run_job(Job(5, 5, (0, 0), verify="cpsat"))
    assert rec.status == Status.FOUND  # the engine's verified answer is kept...
    assert rec.mismatch is True and rec.checks.cpsat is False  # ...and the clash shown
    assert rec.cpsat_status == Status.NO_TOUR and rec.cpsat_proof == Proof.CPSAT
    assert "disagreement" in rec.cpsat_note


def test_cpsat_unknown_is_not_a_mismatch_but_says_so(monkeypatch):
    import knights_tour.solvers.cpsat as cpsat

    monkeypatch.setattr(cpsat, "solve", _fake_cpsat("unknown", reason="time_limit"))
    rec = run_job(Job(5, 5, (0, 0), verify="cpsat"))
    assert rec.mismatch is False and rec.checks.cpsat is None
    assert rec.cpsat_status == Status.UNKNOWN and "did not decide" in rec.cpsat_note
    assert rec.cpsat_reason == "time_limit"
    assert rec.cpsat_tour_accepted is True  # the model still accepted the engine's tour


def test_model_rejecting_a_verified_tour_is_a_mismatch(monkeypatch):
    import knights_tour.solvers.cpsat as cpsat

    monkeypatch.setattr(cpsat, "check_tour", lambda *a, **k: False)
    rec = run_job(Job(5, 5, (0, 0), verify="cpsat"))
    assert rec.mismatch is True and rec.checks.cpsat is False


def test_an_exception_in_a_job_becomes_an_error_record(monkeypatch):
    import knights_tour.solvers.warnsdorff as engine

    def explode(*args, **kwargs):
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(engine, "solve", explode)
    rec = run_job(Job(6, 6, (1, 1)), batch_id="b9")
    assert rec.status == Status.ERROR
    assert rec.reason == "engine exploded" and rec.error_type == "RuntimeError"
    assert "Traceback" not in rec.to_json()
    assert (rec.job_key, rec.batch_id, rec.start) == ("6x6:1,1:warnsdorff:open", "b9", (1, 1))
    assert rec.to_dict()["start"] == [1, 1]


def test_error_record_for_an_unparseable_job_dict():
    bad = {"rows": "x", "start": object()}
    try:
        Job.from_dict(bad)
    except InvalidJobError as exc:
        rec = error_record(bad, exc, "b2", job_key="invalid:1")
    assert rec.status == Status.ERROR and rec.error_type == "InvalidJobError"
    assert (rec.job_key, rec.batch_id) == ("invalid:1", "b2") and "missing field" in rec.reason
    assert json.loads(rec.to_json())["status"] == "error"
    # Sorting must cope with such records next to normal ones, whatever the input order: the
    # record of a message without a valid board has rows = cols = 0, so it sorts first.
    normal = run_job(Job(5, 5, (0, 0)))
    assert (rec.rows, rec.cols) == (0, 0)
    for pair in ([rec, normal], [normal, rec]):
        assert [id(r) for r in sorted(pair, key=record_sort_key)] == [id(rec), id(normal)]


_INTERRUPTED_IMPORT = r"""
import json, sys
from billiard.exceptions import SoftTimeLimitExceeded

from knights_tour.batches.jobs import Job, run_job

RAISE = {"exit": SystemExit(-15), "soft": SoftTimeLimitExceeded()}[sys.argv[1]]


class SignalDuringInit:
    # OR-Tools' cp_model_helper (a pybind11 module) imports this module while it initialises:
    # raising here is what a worker's signal handler does when the signal lands at that moment.
    def find_spec(self, name, path=None, target=None):
        if name == "ortools.util.python.sorted_interval_list":
            raise RAISE
        return None


sys.meta_path.insert(0, SignalDuringInit())
try:
    rec = run_job(Job(5, 5, (0, 0), solver="cpsat"))
except BaseException as exc:
    print(json.dumps({"raised": type(exc).__name__, "args": list(exc.args)}))
else:
    print(json.dumps({"record": rec.to_dict()}))
"""


@pytest.mark.process  # a fresh interpreter imports OR-Tools: seconds, not the fast loop
@pytest.mark.parametrize("signal_kind", ["exit", "soft"])
def test_a_signal_while_ortools_initialises_is_not_a_broken_install(signal_kind):
    """pybind11 reports anything raised during a module's initialisation as
    ``ImportError('initialization failed')``; a worker's terminate signal (billiard raises
    SystemExit) must still stop the job unrecorded, and a soft time limit must still read as one."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, signal_kind],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if signal_kind == "exit":
        assert result == {"raised": "SystemExit", "args": [-15]}
    else:
        rec = result["record"]
        assert (rec["status"], rec["error_type"]) == ("error", "SoftTimeLimitExceeded")


def test_unwrap_interruption_keeps_ordinary_causes():
    from knights_tour.batches.jobs import unwrap_interruption

    try:
        try:
            raise KeyError("k")
        except KeyError as inner:
            raise ValueError("bad") from inner
    except ValueError as exc:
        assert unwrap_interruption(exc) is exc


def _recording_cpsat(monkeypatch, default_s: str) -> list[tuple[str, float]]:
    """The CP-SAT backend's ``solve`` and ``check_tour`` replaced by a stand-in that records the
    time limit it was given (the list returned) and answers as the real model would for an open
    tour on 5x5 from a corner (one exists); ``KT_CPSAT_TIME_LIMIT_S`` set to ``default_s`` (the
    caller clears the settings cache at its end)."""
    import knights_tour.solvers.cpsat as cpsat
    from knights_tour.settings import get_settings

    monkeypatch.setenv("KT_CPSAT_TIME_LIMIT_S", default_s)
    get_settings.cache_clear()
    calls: list[tuple[str, float]] = []

    undecided = _fake_cpsat(Status.UNKNOWN, reason="time_limit")

    def solve(board, start, *, time_limit_s=None, **options):
        calls.append(("solve", time_limit_s))
        return undecided(board, start, time_limit_s=time_limit_s, **options)

    def check_tour(board, tour, start, closed=False, time_limit_s=None):
        calls.append(("check", time_limit_s))
        return True

    monkeypatch.setattr(cpsat, "solve", solve)
    monkeypatch.setattr(cpsat, "check_tour", check_tour)
    return calls


@pytest.mark.parametrize("budget_s", [0.5, 30.0])
def test_the_job_budget_covers_the_cross_check(monkeypatch, budget_s):
    """``time_limit_s`` is the budget of the whole job: the cross-check's CP-SAT calls get what
    the solver left of it (never more), not KT_CPSAT_TIME_LIMIT_S."""
    from knights_tour.settings import get_settings

    calls = _recording_cpsat(monkeypatch, "1000")
    try:
        rec = run_job(Job(5, 5, (0, 0), verify="cpsat", time_limit_s=budget_s))
    finally:
        get_settings.cache_clear()
    assert rec.status == Status.FOUND and rec.cpsat_reason == "time_limit"
    assert [name for name, _ in calls] == ["solve", "check"]
    (_, solve_s), (_, check_s) = calls
    assert 0 < check_s <= solve_s <= budget_s - rec.elapsed_s + 1e-6  # elapsed_s: rounded to 1 us
    assert rec.checks.cpsat is None and "did not decide" in rec.cpsat_note


def test_without_a_job_budget_the_cross_check_has_the_cpsat_default(monkeypatch):
    """The CP-SAT backend's own default (KT_CPSAT_TIME_LIMIT_S) applies where no job budget
    is given: a cross-check called on its own."""
    from knights_tour.settings import get_settings
    from knights_tour.solvers.crosscheck import cross_check

    calls = _recording_cpsat(monkeypatch, "7")
    try:
        rec = run_job(Job(5, 5, (0, 0)))
        cross_check(rec, "cpsat")
    finally:
        get_settings.cache_clear()
    assert calls[0] == ("solve", 7.0) and 0 < calls[1][1] <= 7.0


def test_a_disagreement_on_existence_is_a_mismatch_even_when_the_tour_check_runs_out(monkeypatch):
    """The engine's verified 5x5 corner tour (one exists: Conrad et al. 1994) against a CP-SAT
    answer of 'no tour' whose check of that tour ran out of time: still a mismatch, never
    'not checked' - a disagreement is never hidden by a time-out of the tour check."""
    import knights_tour.solvers.cpsat as cpsat

    monkeypatch.setattr(cpsat, "solve", _fake_cpsat("no_tour", "cpsat"))
    monkeypatch.setattr(cpsat, "check_tour", lambda *args, **kwargs: None)
    rec = run_job(Job(5, 5, (0, 0), verify="cpsat"))
    assert rec.status == Status.FOUND and rec.checks.verifier is True
    assert rec.cpsat_tour_accepted is None
    assert rec.mismatch is True and rec.checks.cpsat is False
    assert "disagreement" in rec.cpsat_note
