"""The CP-SAT cross-check of a job's answer: decide the job again with the CP-SAT model
(:mod:`knights_tour.solvers.cpsat`), check the solver's tour against the model, and record
whether the two agree (:func:`cross_check_cpsat`). A disagreement is recorded, never hidden.

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import time

from knights_tour.result import Record, Status
from knights_tour.settings import get_settings
from knights_tour.solvers import get_checker, get_solver
from knights_tour.solvers.api import check_result

def cross_check_cpsat(result: Record) -> None:
    """Decide the job of ``result`` (its board, start and tour kind) again with the CP-SAT
    model and compare with ``result``, filling in its
    cross-check fields: ``checks.cpsat`` (True: CP-SAT agrees and, if the solver found a tour,
    the model accepts it; False: a disagreement; None: CP-SAT could not decide, or the solver
    did not), ``cpsat_status``, ``cpsat_proof``, ``cpsat_reason``, ``cpsat_model_status``,
    ``cpsat_elapsed_s``, ``cpsat_nodes``, ``cpsat_tour_accepted`` (model check of the solver's
    tour, or None), ``mismatch`` and ``cpsat_note`` (why ``checks.cpsat`` is None or False).
    """
    board = result.board
    began = time.perf_counter()
    cp = get_solver("cpsat")(
        board, result.start, closed=result.closed, time_limit_s=get_settings().cpsat_time_limit_s
    )
    cp = check_result(cp)
    cp_elapsed = cp.elapsed_s or (time.perf_counter() - began)

    accepted: bool | None = None
    if result.status == Status.FOUND and result.tour is not None:
        t0 = time.perf_counter()
        accepted = bool(get_checker("cpsat")(board, result.tour, result.start, closed=result.closed))
        cp_elapsed += time.perf_counter() - t0

    note: str | None = None
    mismatch = False
    ok: bool | None
    if accepted is False:
        ok, mismatch = False, True
        note = "the CP-SAT model rejected the engine's tour (which the verifier accepted)"
    elif cp.status == Status.ERROR:
        ok = False
        note = f"CP-SAT answer failed verification: {cp.reason}"
    elif not cp.is_decided:
        ok = None
        note = f"CP-SAT did not decide ({cp.status.value}: {cp.reason}); no existence cross-check"
    elif not result.is_decided:
        ok = None
        note = f"the {result.solver} solver did not decide ({result.status.value}); CP-SAT answer recorded"
    elif (result.status == Status.FOUND) != (cp.status == Status.FOUND):
        ok, mismatch = False, True
        note = (
            f"disagreement: {result.solver} says {result.status.value}, "
            f"CP-SAT says {cp.status.value}"
        )
    else:
        ok = True
    result.checks.cpsat = ok
    result.cpsat_status = cp.status
    result.cpsat_proof = cp.proof
    result.cpsat_reason = cp.reason
    result.cpsat_model_status = cp.cpsat_model_status
    result.cpsat_elapsed_s = round(cp_elapsed, 6)
    result.cpsat_nodes = int(cp.nodes)
    result.cpsat_tour_accepted = accepted
    result.mismatch = mismatch
    result.cpsat_note = note


__all__ = ["cross_check_cpsat"]
