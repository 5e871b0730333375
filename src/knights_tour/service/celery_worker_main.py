"""Start one Celery worker of the project's app in this process, without Celery's command line.

``python -m knights_tour.service.celery_worker_main NODE CONCURRENCY QUEUE LOGLEVEL`` runs
what ``celery -A knights_tour.worker worker --pool prefork -c CONCURRENCY -n NODE
--without-gossip --without-mingle --without-heartbeat -Q QUEUE --loglevel LOGLEVEL`` runs
(``app.Worker(...).start()``, as ``celery.bin.worker`` does), minus the import of Celery's
command line, which loads every installed ``celery.commands`` plugin (Flower's included) in
each worker process. :class:`~knights_tour.service.local_workers.LocalWorkers` starts its
workers this way; ``celery -A knights_tour.worker worker`` remains the way to start one by
hand. NODE is the full node name (``name@host``).
"""

from __future__ import annotations

import sys

from knights_tour.service._celery import celery_worker


def run_worker(node: str, concurrency: int, queue: str, loglevel: str) -> int:
    """Run a prefork worker of :data:`knights_tour.worker.app` until it shuts down.

    Parameters
    ----------
    node : str
        Node name, ``name@host``.
    concurrency : int
        Pool processes.
    queue : str
        The queue to consume.
    loglevel : str
        Celery log level name (``WARNING``, ``INFO``, ...).

    Returns
    -------
    int
        The worker's exit code (0 after a warm shutdown).
    """
    app_module = celery_worker()
    # The engine's modules (numpy, numba, the kernels) are imported before the pool forks, so
    # the pool process has them; it loads the kernels (numba's registries and its on-disk
    # cache, worker_process_init) while this process connects to the broker, on another core.
    # Loaded whole before the fork, the worker took its first message later.
    _import_engine()
    worker = app_module.app.Worker(
        hostname=node,
        pool_cls="prefork",
        concurrency=concurrency,
        queues=[queue],
        loglevel=loglevel.upper(),
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
    )
    worker.start()
    return int(worker.exitcode or 0)


def _import_engine() -> None:
    """Import the engine's modules (not its kernels); a failure is left to the pool process's
    warm-up, which logs it (a missing engine must not keep the worker from other solvers)."""
    try:
        import knights_tour.solvers.warnsdorff  # noqa: F401
    except ImportError:
        pass


if __name__ == "__main__":  # pragma: no cover - the worker process
    sys.exit(run_worker(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
