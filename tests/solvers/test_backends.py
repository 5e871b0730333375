"""A solver backend is one module and one descriptor (:class:`knights_tour.solvers.Backend`):
a toy backend (``tests/_toy_backend.py``: plain backtracking, at most 16 squares) registered
through the public API is validated, priced, cross-checked and summarized by what its
descriptor says, and runs a batch on real workers, which load it from ``KT_EXTRA_BACKENDS``.

Facts used (from outside the code): the 4x4 board has no knight's tour (open or closed), and
a knight's tour of any board passes the verifier (:func:`verify_tour`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli import run_cli
from _toy_backend import TOY
from _workers import workers_on

from knights_tour import solvers
from knights_tour.batches.chunking import estimated_cost_s
from knights_tour.batches.estimate import JOB_OVERHEAD_S, estimate_batch
from knights_tour.batches.jobs import Job, run_job
from knights_tour.board import Board
from knights_tour.errors import InvalidJobError, UnknownSolverError
from knights_tour.settings import get_settings
from knights_tour.tours.record import Proof, Status
from knights_tour.tours.stored import from_legacy
from knights_tour.tours.verify import verify_tour

TESTS_DIR = str(Path(__file__).resolve().parents[1])
EXTRA = "_toy_backend:TOY"


@pytest.fixture
def toy() -> Iterator[solvers.Backend]:
    """The toy backend, registered in this process for the test's duration."""
    solvers.register(TOY)
    yield TOY
    solvers.unregister(TOY.name)


def test_a_registered_backend_is_named_validated_and_run(toy) -> None:
    assert toy.name in solvers.solver_names()
    assert toy.name not in solvers.cross_check_names()  # it has no tour check
    with pytest.raises(InvalidJobError, match=rf"the toy solver \(at most {toy.max_squares} "):
        Job(toy.max_squares + 1, 1, (0, 0), solver=toy.name)
    with pytest.raises(InvalidJobError, match="job verify must be null or one of cpsat"):
        Job(3, 4, (0, 0), verify=toy.name)
    rec = run_job(Job(3, 4, (0, 0), solver=toy.name, verify="cpsat"))
    assert rec.solver == toy.name and rec.status == Status.FOUND, rec.reason
    assert rec.checks.verifier is True and rec.checks.cpsat is True and not rec.mismatch


def test_chunking_and_the_estimate_price_a_backend_by_its_descriptor(toy) -> None:
    board = Board(3, 5)
    job = Job(3, 5, (0, 0), solver=toy.name, verify="cpsat")
    cpsat = solvers.get_backend("cpsat")
    assert estimated_cost_s(job) == toy.cost.chunk_cost_s(15) + cpsat.cost.chunk_cost_s(15)
    settings = get_settings()
    est = estimate_batch([board], toy.name, "cpsat", settings=settings)
    per_job = (
        JOB_OVERHEAD_S
        + toy.cost.estimate_s(15, toy.time_limit_s(settings))
        + cpsat.cost.estimate_s(15, cpsat.time_limit_s(settings))
    )
    assert est.jobs == 15 and est.cpu_s == pytest.approx(15 * per_job)
    assert est.cpu_s != estimate_batch([board], "warnsdorff", "cpsat", settings=settings).cpu_s


def test_another_descriptor_under_a_taken_name_is_refused(toy) -> None:
    solvers.register(TOY)  # the same descriptor again: nothing to do
    with pytest.raises(ValueError, match="another backend is registered as 'toy'"):
        solvers.register(solvers.Backend(name="toy", solve="x:y", cost=TOY.cost))
    with pytest.raises(ValueError, match="built in"):
        solvers.unregister("cpsat")


def test_kt_extra_backends_registers_in_every_process(monkeypatch) -> None:
    monkeypatch.setenv("KT_EXTRA_BACKENDS", f" {EXTRA} ,")
    try:
        assert solvers.get_backend("toy") is TOY
        assert "toy" in solvers.solver_names()
    finally:
        solvers.unregister("toy")
    monkeypatch.delenv("KT_EXTRA_BACKENDS")
    with pytest.raises(UnknownSolverError, match="valid solvers: cpsat, warnsdorff$"):
        solvers.get_backend("toy")


def test_a_bad_kt_extra_backends_is_one_error_line(monkeypatch, capsys) -> None:
    monkeypatch.setenv("KT_EXTRA_BACKENDS", "no_such_module_here:TOY")
    code, out, err = run_cli(capsys, "solve", "5", "a1")
    assert code == 2 and out == ""
    assert err.startswith("ktour: error: invalid configuration: KT_EXTRA_BACKENDS: ")
    assert "no_such_module_here" in err and len(err.splitlines()) == 1, err


@pytest.fixture(scope="module")
def toy_workers(module_redis_url: str) -> Iterator[object]:
    """Two real Celery workers whose environment names the toy backend in
    ``KT_EXTRA_BACKENDS`` (this folder on their ``PYTHONPATH``)."""
    path = os.pathsep.join(p for p in (TESTS_DIR, os.environ.get("PYTHONPATH")) if p)
    with workers_on(module_redis_url, {"KT_EXTRA_BACKENDS": EXTRA, "PYTHONPATH": path}) as w:
        yield w


@pytest.mark.process
@pytest.mark.timeout(300)
def test_a_toy_backend_runs_a_batch_on_real_workers(
    toy, toy_workers, module_redis_url, tmp_path, capsys
) -> None:
    out = tmp_path / "toy.jsonl"
    code, stdout, err = run_cli(
        capsys,
        "run",
        "--sizes",
        "3x4,4",
        "--solver",
        "toy",
        "--verify",
        "cpsat",
        "--redis",
        module_redis_url,
        "--workers",
        "0",
        "--timeout",
        "240",
        "--out",
        str(out),
    )
    records = [from_legacy(json.loads(line)) for line in out.read_text().splitlines()]
    starts = {(r.rows, r.cols, r.start) for r in records}
    boards = (Board(3, 4), Board(4, 4))
    assert starts == {(b.rows, b.cols, sq) for b in boards for sq in b.squares()}, err
    assert len(records) == len(starts)
    assert {r.solver for r in records} == {"toy"}
    assert {r.worker for r in records} <= set(toy_workers.node_names)  # run by the workers
    for r in records:
        assert r.checks.cpsat is True and not r.mismatch, r  # CP-SAT agrees with the toy
        if r.status == Status.FOUND:
            assert r.checks.verifier is True
            assert verify_tour((r.rows, r.cols), r.tour, start=r.start).ok
        else:
            assert (r.status, r.proof) == (Status.NO_TOUR, Proof.EXHAUSTIVE), r
    assert all(r.status == Status.NO_TOUR for r in records if r.rows == r.cols == 4)
    assert any(r.status == Status.FOUND for r in records if (r.rows, r.cols) == (3, 4))
    assert code == 0, err
    found = sum(r.status == Status.FOUND for r in records)
    total = next(line for line in stdout.splitlines() if "total" in line)
    assert [cell.strip() for cell in total.split("│")[2:4]] == [str(len(records)), str(found)]
    code, report, err = run_cli(capsys, "report", "--from-jsonl", str(out), "--markdown", "-")
    assert code == 0, err
    assert "Solvers: toy. CP-SAT cross-check: " in report
