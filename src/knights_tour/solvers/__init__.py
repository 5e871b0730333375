"""Solver backends, registered by name in one place: :data:`SOLVERS`.

Every backend is a module with a function of this shape (imported lazily by :func:`_load`, the
one place this layer imports its heavy dependencies - numba for the engine, OR-Tools for CP-SAT -
so that e.g. OR-Tools is loaded only by jobs that use it)::

    def solve(board: Board, start: Square, *, closed: bool = False,
              time_limit_s: float | None = None, exhaustive: bool = False,
              node_limit: int | None = None) -> TourResult

A backend returns its *claim*; :func:`knights_tour.solvers.api.solve` runs the verifier on any tour
before it is reported as found. Backends import neither Celery nor Redis.

The limits every backend takes are checked here, once, for every edge they come in by (a task
message's job, the command line): :func:`check_limits`. What a job gets when it names no time
limit is ``KT_JOB_TIME_LIMIT_S`` (:mod:`knights_tour.settings`), for every backend.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from knights_tour.board import Board, Square
from knights_tour.errors import InvalidJobError, UnknownSolverError

if TYPE_CHECKING:  # the result type (numpy behind it) is a backend's, not the registry's
    from knights_tour.tours.record import TourResult

SOLVERS: dict[str, str] = {
    "warnsdorff": "knights_tour.solvers.warnsdorff:solve",
    "cpsat": "knights_tour.solvers.cpsat:solve",
}
"""Registered backends: name -> ``"module:function"``. The only place a backend is named."""

CHECKERS: dict[str, str] = {"cpsat": "knights_tour.solvers.cpsat:check_tour"}
"""Model checks of a finished tour: name -> ``"module:function"`` with the shape
``check(board, tour, start, closed=False, time_limit_s=None) -> bool | None`` (None: undecided
within the time limit; used by the ``verify="cpsat"`` cross-check)."""

ENGINE_WARM_UP = "knights_tour.solvers.warnsdorff:warm_up"
"""The engine's ``warm_up()``: compiles or loads its numba kernels (see :func:`warm_up_engine`)."""

DEFAULT_SOLVER = "warnsdorff"

MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
"""Upper bound on a job's ``time_limit_s`` (one week), to catch unit mistakes."""


class SolverFn(Protocol):
    """The shape of a backend's ``solve`` (see the module docstring)."""

    def __call__(
        self,
        board: Board,
        start: Square,
        *,
        closed: bool = False,
        time_limit_s: float | None = None,
        exhaustive: bool = False,
        node_limit: int | None = None,
    ) -> TourResult: ...


def solver_names() -> list[str]:
    """Names of the registered backends, sorted."""
    return sorted(SOLVERS)


def check_solver_name(name: str) -> str:
    """Return ``name`` if it is a registered backend.

    Raises
    ------
    UnknownSolverError
        Naming the valid backends.
    """
    if name not in SOLVERS:
        raise UnknownSolverError(
            f"unknown solver {name!r}; valid solvers: {', '.join(solver_names())}"
        )
    return name


def check_limits(time_limit_s: object, node_limit: object, what: str = "") -> None:
    """The one check of a job's limits, wherever they come from (a task message, the command
    line): ``time_limit_s`` None or a finite number of seconds in ``(0, MAX_TIME_LIMIT_S]``,
    ``node_limit`` None or an integer >= 1.

    Raises
    ------
    InvalidJobError
        On the first bad limit; the message starts with ``what`` (e.g. ``"job "``) and the
        field's name (``time_limit_s`` / ``node_limit``).
    """
    tl = time_limit_s
    if tl is not None:
        if (
            isinstance(tl, bool)
            or not isinstance(tl, (int, float))
            or (isinstance(tl, float) and not math.isfinite(tl))  # an int of any size is finite
        ):
            raise InvalidJobError(f"{what}time_limit_s must be a number of seconds, got {tl!r}")
        if not 0 < tl <= MAX_TIME_LIMIT_S:
            raise InvalidJobError(
                f"{what}time_limit_s must be > 0 and <= {MAX_TIME_LIMIT_S:g} seconds, got {tl!r}"
            )
    nl = node_limit
    if nl is not None and (isinstance(nl, bool) or not isinstance(nl, int) or nl < 1):
        raise InvalidJobError(f"{what}node_limit must be a positive integer, got {nl!r}")


def get_solver(name: str) -> SolverFn:
    """The backend's ``solve`` function, imported on first use.

    Raises
    ------
    UnknownSolverError
        If ``name`` is not registered (the message lists the valid names).
    """
    return _load(SOLVERS[check_solver_name(name)])


def get_checker(name: str) -> Callable[..., bool | None]:
    """The tour check of :data:`CHECKERS` ``[name]``, imported on first use.

    Raises
    ------
    UnknownSolverError
        If ``name`` has no registered check.
    """
    if name not in CHECKERS:
        raise UnknownSolverError(
            f"no tour check named {name!r}; valid: {', '.join(sorted(CHECKERS))}"
        )
    return _load(CHECKERS[name])


def warm_up_engine() -> None:
    """Load (or compile) the engine's numba kernels now, so the first job does not pay for it.

    Raises
    ------
    ImportError
        If the engine (numba) cannot be imported.
    """
    _load(ENGINE_WARM_UP)()


def _load(path: str) -> Any:
    """``"package.module:name"`` -> that object (``"package.module"`` -> the module), importing
    the module on first use."""
    module_name, _, attr = path.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module
