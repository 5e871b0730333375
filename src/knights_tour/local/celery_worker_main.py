"""Start local Celery workers of the project's app without Celery's command line: one warmed parent
process that forks its K worker nodes.

``python -m knights_tour.local.celery_worker_main REPORT_FD PREFIX HOST COUNT CONCURRENCY QUEUE
LOGLEVEL DEATH_SIGNAL LOG_DIR`` imports Celery, the app and the engine once, then forks COUNT
worker nodes ``{PREFIX}{i}@{HOST}`` (i from 1), each running what ``celery -A knights_tour.worker
worker --pool prefork -c CONCURRENCY -n NODE --without-gossip --without-mingle --without-heartbeat
-Q QUEUE --loglevel LOGLEVEL`` runs (:func:`run_worker`: ``app.Worker(...).start()``, as
``celery.bin.worker`` does, minus the import of Celery's command line, which loads every installed
``celery.commands`` plugin). Each node logs to ``LOG_DIR/{PREFIX}{i}.log`` (``-``: the parent's
output) and has its own prefork pool, as Celery's prefork pool forks its pool processes from a main
process that has loaded the tasks.

A fresh interpreter pays about a second of CPU before its first job (Celery, kombu, redis-py, numpy,
and numba with the kernels from its cache: ``benchmarks/README.md``, start-up); forked from the
warmed parent, a node pays only Celery's own set-up. The parent does not load numba before it
forks the first node, whose pool process leaves the engine's kernels to its jobs (its first
small jobs run them as plain Python: :func:`knights_tour.worker.celery.leave_warm_up_to_jobs`);
for more nodes the parent loads the kernels once the first has said it is ready (at most
:data:`WARM_UP_WAIT_S` later), and the other nodes start warm. At
most one node per core is starting at a time, so K nodes give their first job as soon as one.

``python -m knights_tour.local.celery_worker_main --await-config`` is a parent started ahead
(:mod:`knights_tour.local.prelaunch`): it loads all this, then reads that command line from
its stdin (:func:`await_config`).

The parent writes ``pid I PID`` when it forks node I and ``exit I CODE`` when it reaps it (CODE as
``subprocess`` gives it: -N for a node ended by signal N) to the file descriptor REPORT_FD (``-``:
none; :class:`~knights_tour.local.worker_pool.WorkerPool` reads them). A signal to the parent
(SIGTERM, SIGINT, SIGQUIT, SIGHUP: the client's ``PR_SET_PDEATHSIG`` included) is passed on to
every node that has said it is ready (one still starting holds no message and is killed) and no
further node is forked; a node still running :data:`STOP_GRACE_S` later is killed
with its pool processes. The parent exits once its nodes have, with the first non-zero exit code
among theirs. Each node gets DEATH_SIGNAL from Linux if the parent dies (SIGKILL included).
:class:`~knights_tour.local.workers.LocalWorkers` starts its workers this way; ``celery -A
knights_tour.worker.celery worker`` remains the way to start one by hand.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from typing import Any

from knights_tour import solvers
from knights_tour.local.prelaunch import AWAIT_CONFIG, pdeathsig
from knights_tour.settings import PRIVATE_FILE_MODE
from knights_tour.worker.lazy import celery_worker

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
"""Signals the parent passes on to its nodes (and after which it forks no more)."""

EX_SOFTWARE = 70
"""Exit status of a node whose start raised (sysexits.h ``EX_SOFTWARE``)."""

STOP_GRACE_S: dict[int, float] = {int(signal.SIGQUIT): 5.0}
"""Seconds the nodes get to exit after the parent passed a signal on, by signal, before the
parent SIGKILLs them with their pool processes (:data:`DEFAULT_STOP_GRACE_S` for the others). A
node's Celery notes a shutdown signal and acts on it in its event loop, so a node still
connecting to a Redis that is gone (the client's embedded one, stopped) would never act on it.
A job killed this way is recovered as any job of a killed worker."""

WARM_UP_WAIT_S = 1.0
"""Seconds the parent of several nodes waits at most, after forking the first, for it to say
it is ready before the parent loads the kernels for the others: the load does not take the
CPU from the first node's start (and the client's), which the first job waits for, and a first
node that cannot connect does not hold the others back for longer."""

DEFAULT_STOP_GRACE_S = 30.0
"""Grace after a warm-shutdown signal (SIGTERM, SIGINT, SIGHUP): more than
:meth:`~knights_tour.local.workers.LocalWorkers.stop` waits before its own SIGKILL."""


def _celery_worker_modules() -> Any:
    """Load Celery's worker, consumer and prefork pool modules (the parent loads them for its
    nodes, once its collector is off: :func:`main`); returns Celery's ``worker_ready``
    signal."""
    import celery.apps.worker  # noqa: F401
    import celery.concurrency.prefork  # noqa: F401
    import celery.worker.components  # noqa: F401
    import celery.worker.consumer  # noqa: F401
    from celery.signals import worker_ready

    return worker_ready


def run_worker(node: str, concurrency: int, queue: str, loglevel: str) -> int:
    """Run a prefork worker of :data:`knights_tour.worker.celery.app` in this process until it shuts
    down.

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
    # The engine's modules (numpy, the kernels' modules; numba only once the kernels are
    # loaded) are imported before the pool forks, so the pool process has them. Its kernels
    # were loaded by a warmed parent, or are left to its jobs (leave_warm_up_to_jobs).
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
    """Import the backends' modules that have a warm-up (the engine's, not its kernels:
    :func:`knights_tour.solvers.import_warm_up_modules`); a failure is left to the pool
    process's warm-up, which logs it (a missing engine must not keep the worker from other
    solvers)."""
    try:
        solvers.import_warm_up_modules()
    except ImportError:
        pass


def _preload_worker(app_module: ModuleType) -> None:
    """Load in the parent what every node would otherwise load for itself after the fork: the
    app's tasks (Celery's worker modules are imported with this module)."""
    app_module.app.loader.import_default_modules()
    app_module.app.finalize(auto=True)


@dataclass
class PoolSpec:
    """What the parent starts (its command line, see the module docstring)."""

    report_fd: int  # -1: no report
    prefix: str
    host: str
    count: int
    concurrency: int
    queue: str
    loglevel: str
    death_signal: int
    log_dir: str | None

    @classmethod
    def from_argv(cls, argv: list[str]) -> PoolSpec:
        """Parse the parent's command line (the arguments after the module name)."""
        fd, prefix, host, count, concurrency, queue, loglevel, death, log_dir = argv
        return cls(
            -1 if fd == "-" else int(fd),
            prefix,
            host,
            int(count),
            int(concurrency),
            queue,
            loglevel,
            int(death),
            None if log_dir == "-" else log_dir,
        )

    def node(self, i: int) -> str:
        """Node ``i``'s Celery name (i from 1)."""
        return f"{self.prefix}{i}@{self.host}"


@dataclass
class _Parent:
    """The parent's bookkeeping: nodes forked, starting, their exit codes."""

    spec: PoolSpec
    ready_r: int
    ready_w: int
    next_node: int = 1
    live: dict[int, int] = field(default_factory=dict)  # pid -> node index
    starting: set[int] = field(default_factory=set)
    stopping: int = 0  # the signal received, -1 after a failed start, 0 if neither
    kill_at: float | None = None  # when the nodes left get SIGKILL
    code: int = 0

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = signum
        grace = STOP_GRACE_S.get(signum, DEFAULT_STOP_GRACE_S)
        kill_at = time.monotonic() + grace
        self.kill_at = kill_at if self.kill_at is None else min(self.kill_at, kill_at)
        for pid, i in self.live.items():
            with contextlib.suppress(ProcessLookupError):
                if i in self.starting:
                    # Not consuming yet, so it holds no message; and Celery, which acts on the
                    # signal only once its event loop runs, would keep the stop waiting.
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signum)

    def kill_late(self) -> None:
        """SIGKILL every node left, with its pool processes (its process group), once the
        grace after a stop signal has passed."""
        if self.kill_at is None or time.monotonic() < self.kill_at:
            return
        for pid in self.live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def report(self, line: str) -> None:
        if self.spec.report_fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self.spec.report_fd, line.encode() + b"\n")

    def fork_next(self) -> None:
        i = self.next_node
        self.next_node += 1
        sys.stdout.flush()
        sys.stderr.flush()
        # What the parent loaded is never garbage: out of the collector's sight, it is not
        # walked again by a node's collections (Celery's prefork pool runs a full one before
        # it forks each pool process), and its pages stay shared with the nodes.
        gc.freeze()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the node process
            os._exit(self._become_node(i, parent))
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the node does itself: whichever runs first
        self.live[pid] = i
        self.starting.add(i)
        self.report(f"pid {i} {pid}")

    def _become_node(self, i: int, parent: int) -> int:  # pragma: no cover - the node process
        gc.enable()  # off in the parent while it loads (main)
        try:
            for signum in _FORWARDED:
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setpgid(0, 0)  # with its pool processes: what kill_late kills
            pdeathsig(self.spec.death_signal, parent)
            os.close(self.ready_r)
            if self.spec.report_fd >= 0:
                os.close(self.spec.report_fd)
            if self.spec.log_dir is not None:
                log = os.open(
                    os.path.join(self.spec.log_dir, f"{self.spec.prefix}{i}.log"),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                    PRIVATE_FILE_MODE,
                )
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(log)
            ready_w = self.ready_w

            def said_ready(**_: object) -> None:
                with contextlib.suppress(OSError):
                    os.write(ready_w, f"{i}\n".encode())

            _celery_worker_modules().connect(said_ready, weak=False)
            code = run_worker(
                self.spec.node(i), self.spec.concurrency, self.spec.queue, self.spec.loglevel
            )
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else EX_SOFTWARE
        except BaseException:  # noqa: BLE001 - a node must never return into the parent's loop
            traceback.print_exc()
            code = EX_SOFTWARE
        with contextlib.suppress(Exception):
            logging.shutdown()  # the node ends by os._exit: no exit handlers run
            sys.stdout.flush()
            sys.stderr.flush()
        return code

    def reap(self) -> None:
        while self.live:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.live.clear()
                return
            if pid == 0:
                return
            i = self.live.pop(pid, None)
            if i is None:
                continue
            code = os.waitstatus_to_exitcode(status)  # -N: ended by signal N
            if i in self.starting:
                self.starting.discard(i)
                if code and not self.stopping:
                    self.stopping = -1  # a node that fails to start: the others would too
            self.code = self.code or (128 - code if code < 0 else code)
            self.report(f"exit {i} {code}")

    def read_ready(self) -> None:
        with contextlib.suppress(BlockingIOError):
            for line in os.read(self.ready_r, 4096).split():
                self.starting.discard(int(line))


def run_pool(spec: PoolSpec) -> int:
    """Be the warmed parent of ``spec.count`` worker nodes (see the module docstring) until
    they have all exited; returns the first non-zero exit code among theirs (128 + N for a
    node ended by signal N), else 0."""
    if spec.report_fd >= 0:
        os.set_blocking(spec.report_fd, False)
    ready_r, ready_w = os.pipe()
    os.set_blocking(ready_r, False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    parent = _Parent(spec, ready_r, ready_w)
    for signum in _FORWARDED:
        signal.signal(signum, parent.on_signal)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop (set_wakeup_fd)
    signal.set_wakeup_fd(wake_w)
    _celery_worker_modules()
    app_module = celery_worker()
    _import_engine()
    _preload_worker(app_module)
    starting_at_once = max(1, os.cpu_count() or 1)
    # The first node's first jobs do not wait for the kernels: a small job runs them as
    # plain Python, a larger one loads them.
    app_module.leave_warm_up_to_jobs()
    if not parent.stopping:
        parent.fork_next()
    # Loaded once here, the kernels are the other nodes' without a load each.
    warm_at = time.monotonic() + WARM_UP_WAIT_S if spec.count > 1 else None
    while parent.live or (parent.next_node <= spec.count and not parent.stopping):
        if warm_at is not None and not parent.stopping:
            if 1 not in parent.starting or time.monotonic() >= warm_at:
                app_module.warm_up_engine_in_this_process()
                warm_at = None
        while (
            not parent.stopping
            and warm_at is None
            and parent.next_node <= spec.count
            and len(parent.starting) < starting_at_once
        ):
            parent.fork_next()
        wait_s = 0.5 if warm_at is None else min(0.5, max(0.0, warm_at - time.monotonic()))
        with contextlib.suppress(InterruptedError):
            select.select([ready_r, wake_r], [], [], wait_s)
        with contextlib.suppress(BlockingIOError):
            os.read(wake_r, 4096)
        parent.read_ready()
        parent.reap()
        parent.kill_late()
    return parent.code


def await_config() -> list[str]:
    """For a parent started ahead (:mod:`knights_tour.local.prelaunch`, command line
    :data:`~knights_tour.local.prelaunch.AWAIT_CONFIG`): load what the nodes need, then read
    the configuration from stdin (one JSON line: ``argv``, the command line that a parent
    started the usual way gets; ``log``, the file for this process's output, or null) and
    return ``argv``. Exits at once if stdin closes first (the command needed no workers). An
    error while loading is written to the log once it is known, and ends the process."""
    failed = None
    try:
        _celery_worker_modules()
        app_module = celery_worker()
        _import_engine()
        _preload_worker(app_module)
    except Exception:  # noqa: BLE001 - reported in the log, which is not known yet
        failed = traceback.format_exc()
    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(0)
    config = json.loads(line)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the nodes do not hold the command's pipe
    os.close(devnull)
    if config["log"] is not None:
        log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    if failed is not None:
        sys.stderr.write(failed)
        sys.stderr.flush()
        os._exit(1)
    return list(config["argv"])


def main(argv: list[str]) -> None:
    """The parent's entry point: :func:`run_pool` (once configured, for a parent started
    ahead: :func:`await_config`), then exit at once with its code. An interpreter that has
    loaded Celery, numpy and numba takes a second or more to finalize (collections over all
    of it) for nothing: the parent holds nothing to flush but its own output, and the client
    waits for it.

    The parent runs without the garbage collector: what it loads (Celery, numpy, the engine)
    is kept for good, and collections during the imports would walk it again and again for
    nothing (:func:`gc.freeze` before each fork, so a node's collections never walk it either;
    each node turns its own collector back on)."""
    gc.disable()
    if argv == [AWAIT_CONFIG]:
        argv = await_config()
    code = run_pool(PoolSpec.from_argv(argv))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover - the parent process
    main(sys.argv[1:])
