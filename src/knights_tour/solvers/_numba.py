"""numba, imported for the engine's kernels: ``from knights_tour.solvers._numba import njit``.

When numba first loads its array-math registry (``numba.np.arraymath``, on the first compile or
load from its on-disk cache) it probes for BLAS by importing ``scipy.linalg``, if scipy is
installed: about a quarter of a second in every process that runs the engine, for linear
algebra the kernels never use (no ``np.dot``, no ``np.linalg``). That registry is loaded here
with ``scipy.linalg`` hidden, so numba records "no BLAS" and does not import it. A kernel that used
linear algebra would fail to compile with numba's "scipy ... is required" error, not silently.
Pure: no Celery, no Redis.
"""

from __future__ import annotations

import sys

from numba import njit


def _load_array_math_without_scipy() -> None:
    if "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules:
        return  # scipy.linalg is imported already (the probe is free) or numba has probed
    sys.modules["scipy.linalg"] = None  # type: ignore[assignment]  # `import` now fails
    try:
        import numba.np.arraymath  # noqa: F401 - runs the BLAS probe now, without scipy
    finally:
        del sys.modules["scipy.linalg"]


_load_array_math_without_scipy()

__all__ = ["njit"]
