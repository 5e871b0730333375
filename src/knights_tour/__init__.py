"""knights-tour: batch and distributed knight's tour solver.

Quick use::

    >>> import knights_tour
    >>> r = knights_tour.solve(8, "a1")
    >>> r.status.value, knights_tour.verify_tour(8, r.tour, start="a1").ok
    ('found', True)

The names below are loaded on first use (PEP 562 module ``__getattr__``), so importing any
module of the package does not load numpy and the solvers with it: ``ktour``'s client, its
Redis watchdog and its workers each import only what they run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from knights_tour.board import Board, Square, parse_board
    from knights_tour.errors import (
        InvalidBoardError,
        InvalidJobError,
        InvalidSquareError,
        KnightsTourError,
        UnknownSolverError,
    )
    from knights_tour.solvers.api import solve
    from knights_tour.tours.record import Proof, Status, TourResult
    from knights_tour.tours.verify import Verdict, verify_tour

__version__ = "0.1.0"

_LAZY = {
    "Board": "knights_tour.board",
    "Square": "knights_tour.board",
    "parse_board": "knights_tour.board",
    "solve": "knights_tour.solvers.api",
    "verify_tour": "knights_tour.tours.verify",
    "Verdict": "knights_tour.tours.verify",
    "TourResult": "knights_tour.tours.record",
    "Status": "knights_tour.tours.record",
    "Proof": "knights_tour.tours.record",
    "KnightsTourError": "knights_tour.errors",
    "InvalidBoardError": "knights_tour.errors",
    "InvalidSquareError": "knights_tour.errors",
    "UnknownSolverError": "knights_tour.errors",
    "InvalidJobError": "knights_tour.errors",
}
"""Public name -> the module that defines it."""

__all__ = [
    "Board",
    "Square",
    "parse_board",
    "solve",
    "verify_tour",
    "Verdict",
    "TourResult",
    "Status",
    "Proof",
    "KnightsTourError",
    "InvalidBoardError",
    "InvalidSquareError",
    "UnknownSolverError",
    "InvalidJobError",
]


def __getattr__(name: str) -> Any:
    """``knights_tour.NAME`` for a name of :data:`__all__`: imported from its module on first
    use, then kept. Raises ``AttributeError`` for any other name."""
    if name not in _LAZY:
        raise AttributeError(f"module 'knights_tour' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


_DEFERRED_INIT_LOCK = threading.RLock()
_DEFERRED_RUNNING: set[str] = set()


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs on first access to one of its names; its submodules
    import as usual (``__path__`` is set), without running it."""

    def __getattr__(self, name: str) -> Any:
        spec = self.__spec__
        if (name.startswith("__") and name != "__all__") or spec is None or spec.loader is None:
            raise AttributeError(name)
        with _DEFERRED_INIT_LOCK:  # other threads' first uses wait for the one run
            if type(self) is _DeferredPackage:
                if self.__name__ in _DEFERRED_RUNNING:  # its own __init__, a name not yet set
                    raise AttributeError(name)
                _DEFERRED_RUNNING.add(self.__name__)
                try:
                    spec.loader.exec_module(self)
                    self.__class__ = types.ModuleType  # type: ignore[assignment]
                finally:  # a failed run is retried on the next use
                    _DEFERRED_RUNNING.discard(self.__name__)
        return getattr(self, name)


def _defer_package_init(package: str, sub: str) -> None:
    """Defer ``package.sub``'s ``__init__`` until something uses it.

    redis-py 8 imports :mod:`redis.asyncio` (and :mod:`asyncio`) from ``redis/__init__.py``,
    a noticeable part of the start of every process of ``ktour``, none of which uses it.
    Installed before ``package`` is imported, and only then; a package laid out differently is
    left alone.
    """
    name = f"{package}.{sub}"
    if package in sys.modules or name in sys.modules:
        return
    top = importlib.util.find_spec(package)  # a top-level name: found, not imported
    if top is None or not top.submodule_search_locations:
        return
    where = os.path.join(next(iter(top.submodule_search_locations)), sub)
    init = os.path.join(where, "__init__.py")
    if not os.path.isfile(init):
        return
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[where])
    if spec is None or spec.loader is None:
        return
    module = _DeferredPackage(name)
    module.__spec__ = spec
    module.__file__ = init
    module.__path__ = [where]
    module.__loader__ = spec.loader
    module.__package__ = name
    sys.modules[name] = module


_defer_package_init("redis", "asyncio")
