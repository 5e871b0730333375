"""numba, for the project's kernels: ``from knights_tour._numba import njit``.

**Compiled on first use.** ``@njit`` (or ``@njit(cache=True, ...)``) makes a :class:`Kernel`:
importing a kernel module imports neither numba nor anything of it. The first call of a kernel
of a module imports numba and gives every kernel of that module (and every kernel it names from
another module) its numba dispatcher, ``numba.njit(**options)(py_func)``, in the module's
namespace, where the kernels' bodies find each other; the dispatcher loads the machine code from
numba's on-disk cache or compiles it, as an eagerly decorated kernel would. Importing numba and
loading a module's kernels cost a fresh process about half a second of CPU, so a process that
only plans, reads or renders does not pay it.

**Plain Python for small work.** Inside :func:`plain_kernels`, a kernel whose module has not
been compiled runs its own Python code (``py_func``, the body numba would compile) with the
interpreter instead: the same search on the same numpy arrays, so the same answer, at a few
microseconds a step instead of nanoseconds. A caller uses it where the work is small enough that
the interpreter finishes before numba would have loaded (the engine's first small jobs in a
fresh worker: :mod:`knights_tour.solvers.warnsdorff_attempts`). A kernel body meant for both
keeps its integer arithmetic in int64 where numpy's scalar rules would otherwise narrow it (a
sum of ``int8`` cells is ``int8`` to numpy, ``int64`` to numba).

**Loading is off a job's clock.** :func:`compile_module` and a caller's first calls of the
kernels (which make numba read its cache), wrapped in :func:`loading`, add their seconds to
the process's loading seconds; :func:`job_clock` leaves them out, so a job that has to load
the kernels takes its start time, deadline and elapsed seconds from it and does not spend its
time limit on the load (:func:`knights_tour.solvers.warnsdorff.warm_up`, run before a job
takes its clock, or inside it where its plain Python budget runs out).

**Loaded with two optional libraries hidden.** When numba first loads its array-math registry
(``numba.np.arraymath``, on the first compile or load from its on-disk cache) it probes for BLAS
by importing ``scipy.linalg``, if scipy is installed: about a quarter of a second in every
process that runs a kernel, for linear algebra the kernels never use (no ``np.dot``, no
``np.linalg``). That registry is loaded with ``scipy.linalg`` hidden, so numba records "no BLAS"
and does not import it. A kernel that used linear algebra would fail to compile with numba's
"scipy ... is required" error, not silently. Likewise numba's typing of cffi functions
(``numba.core.typing.cffi_utils``) builds a ``cffi.FFI()`` when cffi is installed, which imports
pycparser: it is loaded with cffi hidden (the kernels call no cffi function; one that did would
fail to type, not silently).

Every kernel is compiled with ``nogil=True`` (:func:`njit` sets it unless told otherwise): it
releases the GIL while it runs, so the other threads of its process go on - in a Celery worker,
the lease heartbeat thread (:mod:`knights_tour.worker.lease_keeper`), without which a layer of
the frontier DP or a long search would outlast the lease and have its job re-sent to another
worker while it still runs. Pure: no Celery, no Redis.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

_lock = threading.RLock()
_plain_depth = 0
_loading_depth = 0
_loading_s = 0.0


def _load_array_math_without_scipy() -> None:
    if "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules:
        return  # scipy.linalg is imported already (the probe is free) or numba has probed
    sys.modules["scipy.linalg"] = None  # type: ignore[assignment]  # `import` now fails
    try:
        import numba.np.arraymath  # noqa: F401 - runs the BLAS probe now, without scipy
    finally:
        del sys.modules["scipy.linalg"]


def _load_cffi_typing_without_cffi() -> None:
    if "numba.core.typing.cffi_utils" in sys.modules:
        return  # numba has loaded it
    # Hidden even when cffi is imported already (billiard, hence every Celery worker, imports
    # it): importing cffi is cheap, building the FFI is not (pycparser and its C grammar).
    imported = sys.modules.get("cffi")
    sys.modules["cffi"] = None  # type: ignore[assignment]  # `import cffi` now fails
    try:
        import numba.core.typing.cffi_utils  # noqa: F401 - numba records "no cffi"
    finally:
        if imported is None:
            del sys.modules["cffi"]
        else:
            sys.modules["cffi"] = imported


def _numba() -> ModuleType:
    """numba, with its array-math registry and cffi typing loaded as the module docstring says."""
    import numba

    _load_array_math_without_scipy()
    _load_cffi_typing_without_cffi()
    return numba


class Kernel:
    """A function for numba, compiled when first called outside :func:`plain_kernels` (see the
    module docstring). ``py_func`` is the Python function; ``dispatcher`` numba's dispatcher,
    None until its module is compiled."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = py_func
        self.options = options
        self.dispatcher: Any = None
        functools.update_wrapper(self, py_func)

    def __call__(self, *args: Any) -> Any:
        dispatcher = self.dispatcher
        if dispatcher is None:
            if _plain_depth:
                return self.py_func(*args)
            dispatcher = self.compile()
        return dispatcher(*args)

    def compile(self) -> Any:
        """Give this kernel's module its dispatchers (:func:`compile_module`); returns this
        kernel's."""
        if self.dispatcher is None:
            compile_module(sys.modules[self.py_func.__module__])
        return self.dispatcher


def compile_module(module: ModuleType) -> None:
    """Replace every :class:`Kernel` in ``module``'s namespace (its own and those it imported
    from other kernel modules) by its numba dispatcher, creating the dispatchers of its own;
    numba loads or compiles each on its first call. Idempotent."""
    with _lock, loading():
        space = vars(module)
        kernels = {name: obj for name, obj in space.items() if isinstance(obj, Kernel)}
        if not kernels:
            return
        numba = _numba()
        for obj in kernels.values():
            if obj.py_func.__module__ == module.__name__ and obj.dispatcher is None:
                obj.dispatcher = numba.njit(**obj.options)(obj.py_func)
        for name, obj in kernels.items():
            space[name] = obj.dispatcher if obj.dispatcher is not None else obj.compile()


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Time the block as loading kernels (numba, a module's dispatchers, the first calls that
    read numba's cache): its seconds are added to the process's loading seconds and so left off
    :func:`job_clock`. Nestable (the outermost block is timed); process-wide."""
    global _loading_depth, _loading_s
    with _lock:
        _loading_depth += 1
        began = time.perf_counter()
    try:
        yield
    finally:
        with _lock:
            _loading_depth -= 1
            if not _loading_depth:
                _loading_s += time.perf_counter() - began


def job_clock() -> float:
    """The clock of a job's budget, deadline and elapsed seconds: :func:`time.perf_counter`
    less the seconds spent in :func:`loading` blocks (nested ones counted once), so a job that
    loads the kernels does not spend its time limit on it. Process-wide: a load in one thread
    stops the clock of a job in another too."""
    return time.perf_counter() - _loading_s


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module``'s kernels have their dispatchers (:func:`compile_module`)."""
    return not any(isinstance(obj, Kernel) for obj in vars(module).values())


@contextlib.contextmanager
def plain_kernels() -> Iterator[None]:
    """Within this block, a kernel whose module is not compiled runs as plain Python (module
    docstring); a compiled one runs compiled. Nestable; process-wide, not per thread."""
    global _plain_depth
    with _lock:
        _plain_depth += 1
    try:
        yield
    finally:
        with _lock:
            _plain_depth -= 1


def runs_plain(kernel: object) -> bool:
    """Whether a call of ``kernel`` now would run as plain Python: it is a :class:`Kernel` not
    yet compiled, called inside :func:`plain_kernels`."""
    return bool(_plain_depth) and isinstance(kernel, Kernel) and kernel.dispatcher is None


def njit(*args: Any, **options: Any) -> Any:
    """numba's :func:`numba.njit` (``@njit`` or ``@njit(cache=True, ...)``), with
    ``nogil=True`` unless ``options`` say otherwise, compiled on first use (a :class:`Kernel`)."""
    options.setdefault("nogil", True)
    if args and callable(args[0]):
        return Kernel(args[0], options)
    return lambda py_func: Kernel(py_func, options)


__all__ = [
    "njit",
    "Kernel",
    "compile_module",
    "is_compiled",
    "plain_kernels",
    "runs_plain",
    "loading",
    "job_clock",
]
