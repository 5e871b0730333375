"""Solver backends, registered by name in one place: :data:`SOLVERS`.

Every backend is a module with a function of this shape (imported lazily, so that e.g. OR-Tools
is loaded only by jobs that use it)::

    def solve(board: Board, start: Square, *, closed: bool = False,
              time_limit_s: float | None = None, exhaustive: bool = False,
              node_limit: int | None = None) -> TourResult

A backend returns its *claim*; :func:`knights_tour.solvers.api.solve` runs the verifier on any tour
before it is reported as found. Backends import neither Celery nor Redis.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from knights_tour.board import Board, Square
from knights_tour.errors import UnknownSolverError
from knights_tour.result import TourResult

SOLVERS: dict[str, str] = {
    "warnsdorff": "knights_tour.solvers.warnsdorff:solve",
    "cpsat": "knights_tour.solvers.cpsat:solve",
}
"""Registered backends: name -> ``"module:function"``. The only place a backend is named."""

DEFAULT_SOLVER = "warnsdorff"


class SolverFn(Protocol):
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


def get_solver(name: str) -> SolverFn:
    """The backend's ``solve`` function, imported on first use.

    Raises
    ------
    UnknownSolverError
        If ``name`` is not registered (the message lists the valid names).
    """
    module_name, func_name = SOLVERS[check_solver_name(name)].split(":")
    return getattr(importlib.import_module(module_name), func_name)
