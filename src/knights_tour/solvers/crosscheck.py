"""The cross-check of a job's answer by a second backend, one whose descriptor has a tour check
(:attr:`knights_tour.solvers.Backend.check`; today the CP-SAT model,
:mod:`knights_tour.solvers.cpsat`): decide the job again with it, check the solver's tour with
its check, and record whether the two agree (:func:`cross_check`). A disagreement is recorded,
never hidden.

The record keeps a cross-check's answer in its ``cpsat_*`` fields (their names are the stored
and JSON form of the records, and CP-SAT is the one backend that cross-checks): a second
cross-checking backend would write there too, or get fields of its own in
:class:`~knights_tour.tours.record.Record`.

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import time

from knights_tour.settings import get_settings
from knights_tour.solvers import get_backend, get_checker, get_solver
from knights_tour.solvers.api import check_result
from knights_tour.tours.record import Record, Status

MIN_CHECK_S = 0.01
"""The least time a cross-check is given, in seconds, when the solver used up the job's
budget: the cross-check (CP-SAT) then answers ``unknown`` (reason ``time_limit``) at once, and
the record says the cross-check did not decide."""


def cross_check(result: Record, name: str, time_limit_s: float | None = None) -> None:
    """Decide the job of ``result`` (its board, start and tour kind) again with the backend
    ``name`` and compare with ``result``, within ``time_limit_s`` wall-clock seconds for the
    re-decision and the backend's check of the solver's tour together (default: the backend's
    own, :meth:`~knights_tour.solvers.Backend.time_limit_s`: ``KT_CPSAT_TIME_LIMIT_S`` for
    CP-SAT; at least :data:`MIN_CHECK_S` each), filling in its cross-check fields:
    ``checks.cpsat`` (True: the backend agrees and, if the solver found a tour, its check
    accepts it; False: a disagreement; None: it could not decide, or the solver did not, or
    the check of the tour ran out of time), ``cpsat_status``, ``cpsat_proof``,
    ``cpsat_reason``, ``cpsat_model_status``, ``cpsat_elapsed_s``, ``cpsat_nodes``,
    ``cpsat_tour_accepted`` (the check of the solver's tour; None without a tour or when the
    check ran out of time), ``mismatch`` and ``cpsat_note`` (why ``checks.cpsat`` is None or
    False).

    Raises
    ------
    UnknownSolverError
        If ``name`` is no backend with a tour check.
    """
    check = get_checker(name)
    backend = get_backend(name)
    label = backend.label
    board = result.board
    began = time.perf_counter()
    budget_s = backend.time_limit_s(get_settings()) if time_limit_s is None else time_limit_s
    cp = get_solver(name)(
        board, result.start, closed=result.closed, time_limit_s=max(budget_s, MIN_CHECK_S)
    )
    cp = check_result(cp)
    cp_elapsed = cp.elapsed_s or (time.perf_counter() - began)

    accepted: bool | None = None
    if result.status == Status.FOUND and result.tour is not None:
        t0 = time.perf_counter()
        left_s = max(budget_s - (t0 - began), MIN_CHECK_S)
        verdict = check(board, result.tour, result.start, closed=result.closed, time_limit_s=left_s)
        accepted = None if verdict is None else bool(verdict)  # None: out of time
        cp_elapsed += time.perf_counter() - t0

    note: str | None = None
    mismatch = False
    ok: bool | None
    if accepted is False:
        ok, mismatch = False, True
        note = f"the {label} model rejected the engine's tour (which the verifier accepted)"
    elif cp.status == Status.ERROR:
        ok = False
        note = f"{label} answer failed verification: {cp.reason}"
    elif not cp.is_decided:
        ok = None
        note = f"{label} did not decide ({cp.status.value}: {cp.reason}); no existence cross-check"
    elif not result.is_decided:
        ok = None
        note = (
            f"the {result.solver} solver did not decide ({result.status.value}); "
            f"{label} answer recorded"
        )
    elif (result.status == Status.FOUND) != (cp.status == Status.FOUND):
        ok, mismatch = False, True
        note = (
            f"disagreement: {result.solver} says {result.status.value}, "
            f"{label} says {cp.status.value}"
        )
    elif accepted is None and result.status == Status.FOUND and result.tour is not None:
        ok = None
        note = f"the {label} model's check of the tour ran out of time; the tour is not checked"
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


__all__ = ["MIN_CHECK_S", "cross_check"]
