"""The CP-SAT cross-check of a job's answer: decide the job again with the CP-SAT model
(:mod:`knights_tour.solvers.cpsat`), check the solver's tour against the model, and record
whether the two agree (:func:`cross_check_cpsat`). A disagreement is recorded, never hidden.

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import time

from knights_tour.settings import get_settings
from knights_tour.solvers import get_checker, get_solver
from knights_tour.solvers.api import check_result
from knights_tour.tours.record import Record, Status

MIN_CHECK_S = 0.01
"""The least CP-SAT time a cross-check is given, in seconds, when the solver used up the job's
budget: CP-SAT then answers ``unknown`` (reason ``time_limit``) at once, and the record says
the cross-check did not decide."""


def cross_check_cpsat(result: Record, time_limit_s: float | None = None) -> None:
    """Decide the job of ``result`` (its board, start and tour kind) again with the CP-SAT
    model and compare with ``result``, within ``time_limit_s`` wall-clock seconds for the
    re-decision and the model's check of the solver's tour together (default: the CP-SAT
    backend's own, ``KT_CPSAT_TIME_LIMIT_S``; at least :data:`MIN_CHECK_S` each), filling in its
    cross-check fields: ``checks.cpsat`` (True: CP-SAT agrees and, if the solver found a tour,
    the model accepts it; False: a disagreement; None: CP-SAT could not decide, or the solver
    did not, or the model's check of the tour ran out of time), ``cpsat_status``,
    ``cpsat_proof``, ``cpsat_reason``, ``cpsat_model_status``, ``cpsat_elapsed_s``,
    ``cpsat_nodes``, ``cpsat_tour_accepted`` (model check of the solver's tour; None without a
    tour or when the check ran out of time), ``mismatch`` and ``cpsat_note`` (why
    ``checks.cpsat`` is None or False).
    """
    board = result.board
    began = time.perf_counter()
    budget_s = get_settings().cpsat_time_limit_s if time_limit_s is None else time_limit_s
    cp = get_solver("cpsat")(
        board, result.start, closed=result.closed, time_limit_s=max(budget_s, MIN_CHECK_S)
    )
    cp = check_result(cp)
    cp_elapsed = cp.elapsed_s or (time.perf_counter() - began)

    accepted: bool | None = None
    if result.status == Status.FOUND and result.tour is not None:
        t0 = time.perf_counter()
        left_s = max(budget_s - (t0 - began), MIN_CHECK_S)
        verdict = get_checker("cpsat")(
            board, result.tour, result.start, closed=result.closed, time_limit_s=left_s
        )
        accepted = None if verdict is None else bool(verdict)  # None: out of time
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
        note = (
            f"the {result.solver} solver did not decide ({result.status.value}); "
            "CP-SAT answer recorded"
        )
    elif (result.status == Status.FOUND) != (cp.status == Status.FOUND):
        ok, mismatch = False, True
        note = (
            f"disagreement: {result.solver} says {result.status.value}, "
            f"CP-SAT says {cp.status.value}"
        )
    elif accepted is None and result.status == Status.FOUND and result.tour is not None:
        ok = None
        note = "the CP-SAT model's check of the tour ran out of time; the tour is not checked"
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


__all__ = ["MIN_CHECK_S", "cross_check_cpsat"]
