"""Solver backends, each one module and one descriptor (:class:`Backend`), registered by name:
:func:`backends`. Every reader of a backend's traits reads its descriptor: job validation (its
square limit), chunk sizing and the batch estimate (its cost model and time limit), the
cross-check (``--verify``: the backends with a tour check), ``--solver`` / ``--verify`` and the
summaries (its label). The built-in backends' descriptors are :data:`ENGINE` and :data:`CPSAT`,
here, so that naming a backend imports neither numba nor OR-Tools; another backend is added
with :func:`register` (in this process) or named in ``KT_EXTRA_BACKENDS``
(:func:`knights_tour.settings.extra_backends`: every process, workers included, loads it on
its first look at the registry).

A backend's module has a function of the shape :class:`SolverFn` (``solve(board, start,
**limits)``, the keywords of :class:`Limits`), imported lazily by :func:`_load`, the one place
this layer imports its heavy dependencies, so that e.g. OR-Tools is loaded only by jobs that use
it. A backend returns its *claim*; :func:`knights_tour.solvers.api.solve` runs the verifier on
any tour before it is reported as found. Backends import neither Celery nor Redis.

The limits every backend takes are checked here, once, for every edge they come in by (a task
message's job, the command line): :func:`check_limits`. What a job gets when it names no time
limit is ``KT_JOB_TIME_LIMIT_S`` (:mod:`knights_tour.settings`), for every backend.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from knights_tour.board import Board, Square
from knights_tour.errors import InvalidJobError, UnknownSolverError
from knights_tour.settings import Settings, SettingsError, extra_backends

if TYPE_CHECKING:  # the result type (numpy behind it) is a backend's, not the registry's
    from knights_tour.tours.record import TourResult


@dataclass(frozen=True, kw_only=True)
class CostModel:
    """A backend's rough run time per job, linear in the board's squares, as its two readers
    price it (two fits, measured apart: ``benchmarks/README.md``).

    Attributes
    ----------
    fixed_s, per_square_s : float
        Chunk sizing (:mod:`knights_tour.batches.chunking`): ``fixed_s + squares *
        per_square_s`` seconds.
    estimate_per_square_s : float
        The batch estimate (:mod:`knights_tour.batches.estimate`): ``estimate_per_square_s *
        squares`` seconds, at most the job's time limit.
    """

    fixed_s: float
    per_square_s: float
    estimate_per_square_s: float

    def chunk_cost_s(self, squares: int) -> float:
        """Seconds of one job on a board of ``squares`` squares, for sizing chunks."""
        return self.fixed_s + squares * self.per_square_s

    def estimate_s(self, squares: int, limit_s: float) -> float:
        """Seconds of one job on a board of ``squares`` squares for the batch estimate, at most
        ``limit_s`` (the job's time limit)."""
        return min(limit_s, self.estimate_per_square_s * squares)


@dataclass(frozen=True, kw_only=True)
class Backend:
    """The descriptor of one solver backend: everything the rest of the package knows of it.

    Attributes
    ----------
    name : str
        The name jobs, records and ``--solver`` use (``"warnsdorff"``); its ``solve`` puts it
        in the records' ``solver``.
    solve : str
        ``"module:function"`` of its solve function (the shape in the module docstring),
        imported on first use.
    cost : CostModel
        Its rough run time per job (chunk sizing, the batch estimate).
    max_squares : int or None
        Largest board (rows*cols) a job may ask of it; None: no limit of its own.
    time_limit_setting : str
        The :class:`~knights_tour.settings.Settings` field whose value is its time limit
        where no job budget is given (the estimate's cap; the cross-check's default).
    check : str or None
        ``"module:function"`` of its check of a finished tour, with the shape
        ``check(board, tour, start, closed=False, time_limit_s=None) -> bool | None`` (None:
        undecided within the time limit); a backend with one can cross-check (``--verify``).
    warm_up : str or None
        ``"module:function"`` run once when a worker starts (compiles its kernels), if any.
    label : str
        Its name in sentences (``"CP-SAT"``); default ``name``.
    """

    name: str
    solve: str
    cost: CostModel
    max_squares: int | None = None
    time_limit_setting: str = "job_time_limit_s"
    check: str | None = None
    warm_up: str | None = None
    label: str = ""

    def __post_init__(self) -> None:
        """Raises ValueError for a descriptor that could not be used (see :func:`register`)."""
        if not isinstance(self.name, str) or not self.name or self.name == "none":
            raise ValueError(f"a backend needs a name other than 'none', got {self.name!r}")
        for path in (self.solve, self.check, self.warm_up):
            if path is not None and (not isinstance(path, str) or ":" not in path):
                raise ValueError(f"backend {self.name}: {path!r} is not 'module:function'")
        if self.max_squares is not None and (
            not isinstance(self.max_squares, int) or self.max_squares < 1
        ):
            raise ValueError(f"backend {self.name}: max_squares must be None or >= 1")
        if self.time_limit_setting not in Settings.__struct_fields__:
            raise ValueError(f"backend {self.name}: {self.time_limit_setting!r} is not a setting")
        if not self.label:
            object.__setattr__(self, "label", self.name)

    @property
    def cross_checks(self) -> bool:
        """True if it can cross-check other backends' answers (it has a tour check)."""
        return self.check is not None

    def time_limit_s(self, settings: Settings) -> float:
        """Its time limit in seconds where no job budget is given (:attr:`time_limit_setting`)."""
        return float(getattr(settings, self.time_limit_setting))


ENGINE = Backend(
    name="warnsdorff",
    solve="knights_tour.solvers.warnsdorff:solve",
    max_squares=25_000_000,
    cost=CostModel(fixed_s=2e-4, per_square_s=5e-7, estimate_per_square_s=3e-7),
    warm_up="knights_tour.solvers.warnsdorff:warm_up",
    label="engine",
)
"""Our DFS + Warnsdorff engine (:mod:`knights_tour.solvers.warnsdorff`): linear in rows*cols,
5000×5000 its stated target."""

CPSAT = Backend(
    name="cpsat",
    solve="knights_tour.solvers.cpsat:solve",
    max_squares=2_500,
    cost=CostModel(fixed_s=2e-3, per_square_s=5e-5, estimate_per_square_s=1e-3),
    time_limit_setting="cpsat_time_limit_s",
    check="knights_tour.solvers.cpsat:check_tour",
    label="CP-SAT",
)
"""The OR-Tools CP-SAT model (:mod:`knights_tour.solvers.cpsat`), also the cross-check: one
Boolean per directed knight move (about 8 per square), so practical on small boards only; its
time grows faster than linearly on large boards (the job's time limit caps the estimate)."""

_BACKENDS: dict[str, Backend] = {b.name: b for b in (ENGINE, CPSAT)}
_BUILT_IN = frozenset(_BACKENDS)
_loaded: dict[str, str] = {}
"""The ``KT_EXTRA_BACKENDS`` entries loaded so far: path -> the name of its backend."""

DEFAULT_SOLVER = ENGINE.name

MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
"""Upper bound on a job's ``time_limit_s`` (one week), to catch unit mistakes."""


class Limits(TypedDict, total=False):
    """What a job asks of a backend beyond its board and start square, the keywords every
    backend's ``solve`` takes (:class:`SolverFn`).

    Attributes
    ----------
    closed : bool
        Ask for a closed (re-entrant) tour; default False.
    time_limit_s : float or None
        Wall-clock limit in seconds; on expiry ``unknown`` (reason ``time_limit``). Default:
        none for the engine, ``KT_CPSAT_TIME_LIMIT_S`` for CP-SAT.
    exhaustive : bool
        Search without a node budget, so a finished search proves ``no_tour`` (engine only).
    node_limit : int or None
        The engine's node budget (default by board size; engine only).
    """

    closed: bool
    time_limit_s: float | None
    exhaustive: bool
    node_limit: int | None


class SolverFn(Protocol):
    """The shape of a backend's ``solve``: a board, a start square ``(row, col)`` (row 0 at
    the top) and the job's :class:`Limits` as keywords, to its claim, a ``TourResult``."""

    def __call__(self, board: Board, start: Square, **limits: Unpack[Limits]) -> TourResult: ...


def register(backend: Backend) -> Backend:
    """Add ``backend`` to the registry of this process (a worker process gets it from
    ``KT_EXTRA_BACKENDS``) and return it. Registering an equal descriptor again does nothing.

    Raises
    ------
    ValueError
        If another descriptor has its name, or it is no :class:`Backend`.
    """
    if not isinstance(backend, Backend):
        raise ValueError(f"a backend is registered as a Backend, not {type(backend).__name__}")
    known = _BACKENDS.get(backend.name)
    if known is not None and known != backend:
        raise ValueError(f"another backend is registered as {backend.name!r}")
    _BACKENDS[backend.name] = backend
    return backend


def unregister(name: str) -> None:
    """Remove the backend ``name`` added by :func:`register` (nothing if there is none).

    Raises
    ------
    ValueError
        For a built-in backend.
    """
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is built in")
    _BACKENDS.pop(name, None)


def backends() -> Mapping[str, Backend]:
    """Every registered backend by name: the built-in ones, those of :func:`register` and
    those ``KT_EXTRA_BACKENDS`` names (imported on the first call that finds them new).

    Raises
    ------
    SettingsError
        If an entry of ``KT_EXTRA_BACKENDS`` cannot be imported or is no :class:`Backend`.
    """
    for path in extra_backends():
        if _loaded.get(path) not in _BACKENDS:
            try:
                _loaded[path] = register(_load(path)).name
            except Exception as exc:  # noqa: BLE001 - any failure is the setting's
                raise SettingsError(
                    f"invalid configuration: KT_EXTRA_BACKENDS: {path!r}: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
    return _BACKENDS


def get_backend(name: str) -> Backend:
    """The descriptor of the backend ``name``.

    Raises
    ------
    UnknownSolverError
        Naming the valid backends.
    """
    backend = backends().get(name) if isinstance(name, str) else None
    if backend is None:
        raise UnknownSolverError(
            f"unknown solver {name!r}; valid solvers: {', '.join(solver_names())}"
        )
    return backend


def solver_names() -> list[str]:
    """Names of the registered backends, sorted."""
    return sorted(backends())


def cross_check_names() -> list[str]:
    """Names of the backends that can cross-check (``--verify``), sorted."""
    return sorted(name for name, b in backends().items() if b.cross_checks)


def import_warm_up_modules() -> None:
    """Import the module of every registered backend's warm-up without running it (the
    engine's: numpy and its kernels' modules; numba is imported when the kernels are loaded),
    so that processes forked after it have them; ``KT_EXTRA_BACKENDS`` included where it
    loads.

    Raises
    ------
    ImportError
        If such a module cannot be imported (the engine without numba).
    """
    for backend in list(_known()[0].values()):
        if backend.warm_up is not None:
            _load(backend.warm_up.partition(":")[0])


def cross_check_label(name: str | None) -> str:
    """The name sentences give the cross-check ``name`` of a record (its ``verify``): the
    label of its descriptor (``"CP-SAT"``); ``name`` itself for a backend not registered in
    this process; for None, the label of :data:`CPSAT`, whose answers the record's
    ``cpsat_*`` fields hold."""
    if name is None:
        return CPSAT.label
    backend = _known()[0].get(name)
    return name if backend is None else backend.label


def _known() -> tuple[Mapping[str, Backend], SettingsError | None]:
    """:func:`backends`, or where ``KT_EXTRA_BACKENDS`` cannot be loaded, those registered
    without it and the error."""
    try:
        return backends(), None
    except SettingsError as exc:
        return _BACKENDS, exc


def check_solver_name(name: str) -> str:
    """Return ``name`` if it is a registered backend.

    Raises
    ------
    UnknownSolverError
        Naming the valid backends.
    """
    return get_backend(name).name


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
    return _load(get_backend(name).solve)


def get_checker(name: str) -> Callable[..., bool | None]:
    """The tour check of the backend ``name`` (:attr:`Backend.check`), imported on first use.

    Raises
    ------
    UnknownSolverError
        If ``name`` is no backend with a tour check.
    """
    backend = backends().get(name)
    if backend is None or backend.check is None:
        raise UnknownSolverError(
            f"no tour check named {name!r}; valid: {', '.join(cross_check_names())}"
        )
    return _load(backend.check)


def warm_up_backends() -> None:
    """Load every registered backend (``KT_EXTRA_BACKENDS`` included) and run its warm-up now
    (the engine compiles or loads its numba kernels), so the first job does not pay for it.

    Raises
    ------
    SettingsError
        If ``KT_EXTRA_BACKENDS`` names a backend that cannot be loaded.
    ImportError
        If a backend's warm-up cannot be imported (the engine without numba).
    """
    known, failure = _known()
    for backend in list(known.values()):
        if backend.warm_up is not None:
            _load(backend.warm_up)()
    if failure is not None:
        raise failure


def _load(path: str) -> Any:
    """``"package.module:name"`` -> that object (``"package.module"`` -> the module), importing
    the module on first use."""
    module_name, _, attr = path.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module
