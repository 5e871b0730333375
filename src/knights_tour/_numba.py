"""numba, imported for the engine's kernels: ``from knights_tour._numba import njit``.

When numba first loads its array-math registry (``numba.np.arraymath``, on the first compile or
load from its on-disk cache) it probes for BLAS by importing ``scipy.linalg``, if scipy is
installed: about a quarter of a second in every process that runs the engine, for linear
algebra the kernels never use (no ``np.dot``, no ``np.linalg``). That registry is loaded here
with ``scipy.linalg`` hidden, so numba records "no BLAS" and does not import it. A kernel that used
linear algebra would fail to compile with numba's "scipy ... is required" error, not silently.
Likewise numba's typing of cffi functions (``numba.core.typing.cffi_utils``) builds a
``cffi.FFI()`` when cffi is installed, which imports pycparser: it is loaded here with cffi
hidden (the kernels call no cffi function; one that did would fail to type, not silently).
Every kernel is compiled with ``nogil=True`` (this module's :func:`njit` sets it unless told
otherwise): it releases the GIL while it runs, so the
other threads of its process go on - in a Celery worker, the lease heartbeat thread
(:mod:`knights_tour.worker.lease_keeper`), without which a layer of the frontier DP or a long
search would outlast the lease and have its job re-sent to another worker while it still runs.
Pure: no Celery, no Redis.
"""

from __future__ import annotations

import sys
from typing import Any

import numba


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


def njit(*args: Any, **options: Any) -> Any:
    """numba's :func:`numba.njit` (``@njit`` or ``@njit(cache=True, ...)``), with
    ``nogil=True`` unless ``options`` say otherwise."""
    options.setdefault("nogil", True)
    return numba.njit(*args, **options)


_load_array_math_without_scipy()
_load_cffi_typing_without_cffi()

__all__ = ["njit"]
