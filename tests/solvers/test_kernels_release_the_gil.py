"""Every compiled kernel releases the GIL (``nogil=True``): a worker's lease heartbeat is a
thread of the process that runs the kernel, and a kernel holding the GIL for longer than the
lease (a 7x7 DP layer takes a minute) got its live job re-sent as lost."""

from __future__ import annotations

import numba
import pytest

from knights_tour._numba import compile_module
from knights_tour.counting import count_kernel, frontier_join, frontier_kernel
from knights_tour.solvers.construct import kernel as construct_kernel
from knights_tour.solvers.engine import kernel

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "module", [kernel, count_kernel, frontier_kernel, frontier_join, construct_kernel]
)
def test_every_kernel_is_compiled_without_the_gil(module):
    compile_module(module)
    kernels = {
        name: obj
        for name, obj in vars(module).items()
        if isinstance(obj, numba.core.registry.CPUDispatcher)
    }
    assert kernels, f"no kernel found in {module.__name__}"
    holding = [name for name, k in kernels.items() if not k.targetoptions.get("nogil")]
    assert holding == []
