"""The local workers' parent started at the very start of ``ktour run``, before the command line
is loaded, with the standard library alone.

The first job of a local run waits for one chain of CPU-bound Python: the workers' parent
(:mod:`~knights_tour.local.celery_worker_main`: Celery, the app, numpy and numba) and then
its first node and pool process. :func:`prelaunch` starts that parent as the first thing
``ktour run`` does, so the parent's imports overlap the command's own (click, the settings, the
command modules, the estimate) instead of following them. The parent is not told what to start
yet: it loads what it will need and waits for its configuration on its stdin. The embedded
Redis it will use is chosen here (a free port, a new password, given to the parent as
``KT_REDIS_URL``); :func:`~knights_tour.local.launching.launch_ahead` launches the server on
them and hands the parent its nodes' count, names and log
(:meth:`~knights_tour.local.worker_pool.WorkerSpec.adopt`), or, when the run needs no local
workers after all (a server already running on the data dir, ``--workers 0``) or the server
had to move to another port (another process bound this one first), kills it. A
parent never configured is killed when the command ends (:func:`dismiss`), and gets a death
signal from Linux if the command dies.

``ktour run --redis URL`` (or with ``KT_REDIS_URL`` set) and ``ktour run --help`` start nothing
here.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import secrets
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass

AWAIT_CONFIG = "--await-config"
"""The parent's command-line argument that makes it wait for its configuration on stdin."""

DEATH_SIGNAL = signal.SIGQUIT
"""What Linux sends the parent when the command dies (as for workers launched ahead)."""

ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}
"""numpy's OpenBLAS with one thread, unless the environment says otherwise: ``ktour`` and its
workers do no linear algebra (and K workers already fill the cores), while each extra
OpenBLAS thread costs every numpy import its start, its buffers and its spinning."""

WORKER_ENV_DEFAULTS = {"PYTHONUNBUFFERED": "1", **ONE_BLAS_THREAD}
"""Environment of the workers' parent where the caller's does not set these: output written
as it comes, and :data:`ONE_BLAS_THREAD`."""


def pdeathsig(
    sig: int = signal.SIGTERM, parent_pid: int | None = None
) -> None:  # pragma: no cover - runs in the child
    """In a child process: ask Linux to send ``sig`` to it when the thread that started it
    dies (best effort). If the parent is already gone (it died between fork and here), send
    it now."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(sig))  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), int(sig))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prelaunched:
    """A workers' parent started by :func:`prelaunch`, waiting for its configuration.

    ``report_r`` is the read end of its report pipe (``report_fd`` is the write end's number,
    the same in the parent); ``port`` and ``password`` are those of the embedded Redis it was
    given as ``KT_REDIS_URL`` (not launched yet); ``node_prefix`` names its nodes as
    :class:`~knights_tour.local.worker_pool.WorkerSpec` does."""

    proc: subprocess.Popen[bytes]
    report_r: int
    report_fd: int
    port: int
    password: str
    node_prefix: str

    @property
    def url(self) -> str:
        """The embedded Redis's URL, as :attr:`EmbeddedRedis.url` gives it."""
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        """SIGKILL the parent (it has forked nothing yet) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            os.close(self.report_r)


_ahead: Prelaunched | None = None


def wanted(argv: list[str], environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether the command line ``argv`` (without the program name) is a ``ktour run`` that
    may start local workers: not with ``--redis`` or ``KT_REDIS_URL``, not ``--help``."""
    if argv[:1] != ["run"] or environ.get("KT_REDIS_URL"):
        return False
    return not any(a in ("--help", "-h", "--redis") or a.startswith("--redis=") for a in argv)


def prelaunch(argv: list[str]) -> None:
    """Start the workers' parent for ``ktour ARGV`` now if :func:`wanted` (see the module
    docstring); :func:`take` hands it over. Best effort: a parent that cannot be started is
    started later, the usual way."""
    global _ahead
    if _ahead is not None or not wanted(argv):
        return
    port, password = free_port(), secrets.token_urlsafe(18)
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    env = dict(WORKER_ENV_DEFAULTS)
    env.update(os.environ, KT_REDIS_URL=url)
    report_r, report_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "knights_tour.local.celery_worker_main", AWAIT_CONFIG],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(report_w,),
            preexec_fn=functools.partial(pdeathsig, DEATH_SIGNAL, os.getpid()),
        )
    except OSError:
        os.close(report_r)
        return
    finally:
        os.close(report_w)
    _ahead = Prelaunched(proc, report_r, report_w, port, password, f"kt{os.getpid()}-w")


def take() -> Prelaunched | None:
    """The parent :func:`prelaunch` started, if any and still running; from now on the
    caller's (to configure, or to :meth:`~Prelaunched.kill`)."""
    global _ahead
    ahead, _ahead = _ahead, None
    if ahead is not None and ahead.proc.poll() is not None:
        ahead.kill()
        return None
    return ahead


def dismiss() -> None:
    """Kill the parent :func:`prelaunch` started if nothing took it."""
    ahead = take()
    if ahead is not None:
        ahead.kill()


__all__ = [
    "AWAIT_CONFIG",
    "DEATH_SIGNAL",
    "ONE_BLAS_THREAD",
    "WORKER_ENV_DEFAULTS",
    "Prelaunched",
    "dismiss",
    "free_port",
    "pdeathsig",
    "prelaunch",
    "take",
    "wanted",
]
