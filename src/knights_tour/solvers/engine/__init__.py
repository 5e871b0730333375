"""Compiled search kernels of the ``warnsdorff`` backend (numba). Pure: no Celery, no Redis."""
