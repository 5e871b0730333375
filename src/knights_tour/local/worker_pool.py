"""Local worker processes launched with the standard library alone: the warmed parent that
forks K Celery worker nodes (:mod:`~knights_tour.local.celery_worker_main`), a handle on each
node for the client, their logs, and the death signal that ties a child to the thread that
started it.

:func:`~knights_tour.local.launching.launch_ahead` and
:class:`~knights_tour.local.workers.LocalWorkers` start workers through
:meth:`WorkerSpec.spawn`. Nothing here imports redis-py, psutil or Celery (``ktour run``
launches its workers before it loads them).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knights_tour.local.prelaunch import WORKER_ENV_DEFAULTS, Prelaunched, pdeathsig
from knights_tour.settings import PRIVATE_FILE_MODE, get_settings, private_dir
from knights_tour.store import keys


def rotate_logs(log_dir: Path, keep: int, max_bytes: int) -> list[Path]:
    """Delete the oldest ``*.log`` files of ``log_dir`` (by last write) until at most ``keep``
    remain and they hold at most ``max_bytes`` together; returns the files deleted. Each
    ``ktour run`` writes new files (one per worker, named by its process), so this rotates
    the logs run by run (``KT_LOG_KEEP``, ``KT_LOG_MAX_MB``). A file another process still
    writes to may go: its data stays readable to that process, only the name is gone."""
    files = []
    for path in log_dir.glob("*.log"):
        with contextlib.suppress(OSError):
            st = path.stat()
            files.append((st.st_mtime, st.st_size, path))
    files.sort(key=lambda f: (f[0], str(f[2])), reverse=True)  # newest first
    kept_n = kept_bytes = 0
    removed = []
    for _mtime, size, path in files:
        if kept_n < keep and kept_bytes + size <= max_bytes:
            kept_n += 1
            kept_bytes += size
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


@dataclass
class WorkerSpec:
    """How local workers are launched: one warmed parent process
    (``python -m knights_tour.local.celery_worker_main``,
    :mod:`~knights_tour.local.celery_worker_main`) that forks worker nodes named
    ``{node_prefix}{i}@{hostname}`` on ``redis_url``. See
    :class:`~knights_tour.local.workers.LocalWorkers` for the meaning of each field."""

    redis_url: str
    concurrency: int = 1
    node_prefix: str = field(default_factory=lambda: f"kt{os.getpid()}-w")
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    loglevel: str | None = None
    death_signal: int = signal.SIGTERM
    hostname: str = field(default_factory=socket.gethostname)

    def command(self, count: int, loglevel: str, report_fd: int) -> list[str]:
        """The command line of the parent of nodes 1 .. ``count``, which reports their PIDs and
        exit codes on ``report_fd`` (see :mod:`~knights_tour.local.celery_worker_main`)."""
        return [
            sys.executable,
            "-m",
            "knights_tour.local.celery_worker_main",
            str(report_fd),
            self.node_prefix,
            self.hostname,
            str(count),
            str(self.concurrency),
            keys.QUEUE,
            loglevel,
            str(int(self.death_signal)),
            str(self.log_dir) if self.log_dir is not None else "-",
        ]

    def _first_log(self, count: int) -> Path | None:
        """The first worker's log file (the parent's output goes there too), in a log dir made
        private, where the oldest logs have made room for this start's ``count`` files within
        ``KT_LOG_KEEP``; None without a log dir."""
        if self.log_dir is None:
            return None
        settings = get_settings()
        private_dir(self.log_dir)
        rotate_logs(self.log_dir, max(0, settings.log_keep - count), int(settings.log_max_mb * 1e6))
        return self.log_dir / f"{self.node_prefix}1.log"

    def adopt(self, ahead: Prelaunched, count: int) -> WorkerPool:
        """Configure the parent that :func:`~knights_tour.local.prelaunch.prelaunch` started
        (waiting, on this spec's ``redis_url``: ``ahead.url``) to fork workers 1 .. ``count``,
        without waiting for it; returns it. A parent that has died meanwhile is reported as a
        worker that exited, as by :meth:`spawn`."""
        first_log = self._first_log(count)
        argv = self.command(count, self.loglevel or get_settings().log_level, ahead.report_fd)
        config = {"argv": argv[3:], "log": None if first_log is None else str(first_log)}
        stdin = ahead.proc.stdin
        assert stdin is not None
        with contextlib.suppress(OSError):  # BrokenPipeError: the parent is gone
            stdin.write(json.dumps(config).encode() + b"\n")
            stdin.flush()
        with contextlib.suppress(OSError):
            stdin.close()
        return WorkerPool(ahead.proc, ahead.report_r, count)

    def spawn(self, count: int) -> WorkerPool:
        """Start the parent of workers 1 .. ``count`` without waiting for it; returns it.
        Call it from the thread that outlives the workers (``death_signal``). The parent's
        own output goes to the first worker's log."""
        loglevel = self.loglevel or get_settings().log_level
        env = dict(WORKER_ENV_DEFAULTS)
        env.update(os.environ)
        env.update(self.env)
        env["KT_REDIS_URL"] = self.redis_url
        out: Any = subprocess.DEVNULL
        first_log = self._first_log(count)
        if first_log is not None:
            out = open(  # noqa: SIM115 - closed below, once the parent has it
                os.open(first_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE), "ab"
            )
        report_r, report_w = os.pipe()
        try:
            proc = subprocess.Popen(
                self.command(count, loglevel, report_w),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(report_w,),
                preexec_fn=functools.partial(pdeathsig, self.death_signal, os.getpid()),
            )
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
            if out is not subprocess.DEVNULL:
                out.close()
        return WorkerPool(proc, report_r, count)


class WorkerPool:
    """The parent process of K local worker nodes (:meth:`WorkerSpec.spawn`) and a handle on
    each node (:attr:`workers`), from what the parent reports on its pipe.

    Parameters
    ----------
    proc : subprocess.Popen
        The parent.
    report_fd : int
        Read end of its report pipe (owned from now on; closed by :meth:`close`).
    count : int
        Nodes it forks.
    """

    def __init__(self, proc: subprocess.Popen[bytes], report_fd: int, count: int) -> None:
        self.proc = proc
        self._fd: int | None = report_fd
        os.set_blocking(report_fd, False)
        self._pending = b""
        self.pids: dict[int, int] = {}
        self.codes: dict[int, int] = {}
        self._started_at: dict[int, str] = {}
        self.workers = [ForkedWorker(self, i) for i in range(1, count + 1)]

    def refresh(self) -> None:
        """Read what the parent has reported so far (never blocks)."""
        while self._fd is not None:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.close()
                return
            lines = (self._pending + data).split(b"\n")
            self._pending = lines.pop()
            for line in lines:
                what, i, value = line.decode().split()
                if what == "pid":
                    self.pids[int(i)] = int(value)
                    self._started_at[int(i)] = _start_time(int(value)) or ""
                else:
                    self.codes[int(i)] = int(value)

    def alive(self, i: int) -> bool:
        """Whether node ``i`` runs (a zombie or another process on its PID does not)."""
        pid = self.pids.get(i)
        return pid is not None and _start_time(pid) == self._started_at.get(i) != ""

    def close(self) -> None:
        """Close the report pipe."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (field 22 of ``/proc/PID/stat``), or None if it has ended
    (or is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


class ForkedWorker:
    """Worker node ``index`` of a :class:`WorkerPool`, with the part of ``subprocess.Popen``
    that :class:`~knights_tour.local.workers.LocalWorkers` uses (``pid``, ``poll``,
    ``wait``, ``send_signal``, ``kill``, ``returncode``). Until the parent has reported it,
    its ``pid`` is None; if the parent ends without forking it, it has the parent's exit code."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self._killed = False

    @property
    def pid(self) -> int | None:
        """The node's PID, once the parent has reported it."""
        self.pool.refresh()
        return self.pool.pids.get(self.index)

    @property
    def returncode(self) -> int | None:
        """Its exit code once it has exited (as :meth:`poll`), else None."""
        return self.poll()

    def poll(self) -> int | None:
        """None while the node runs (or may still be forked), else its exit code (-N if ended by
        signal N; -1 if the parent could not report it)."""
        pool = self.pool
        pool.refresh()
        if self.index in pool.codes:
            return pool.codes[self.index]
        if self.index not in pool.pids:
            parent = pool.proc.poll()
            return None if parent is None else (parent or -1)
        if pool.alive(self.index):
            return None
        if pool.proc.poll() is None:
            # Reaped by the parent a moment ago: its exit line is on the way.
            for _ in range(100):
                pool.refresh()
                if self.index in pool.codes or pool.proc.poll() is not None:
                    break
                time.sleep(0.01)
        pool.refresh()
        # The parent died before it could report: -SIGKILL if we killed the node, else unknown.
        return pool.codes.get(self.index, -signal.SIGKILL if self._killed else -1)

    def wait(self, timeout: float | None = None) -> int:
        """Wait until the node has exited; its exit code.

        Raises
        ------
        subprocess.TimeoutExpired
            If it still runs after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker node {self.index}", timeout or 0.0)
            time.sleep(pause)
            pause = min(0.05, pause * 2)
        return code

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the node if it runs (to the parent, which passes it on, if it has
        not been reported yet)."""
        if self.pid is None:
            if self.pool.proc.poll() is None:
                self.pool.proc.send_signal(sig)
            return
        if self.pool.alive(self.index):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pool.pids[self.index], sig)

    def kill(self) -> None:
        """SIGKILL the node if it runs."""
        self._killed = True
        self.send_signal(signal.SIGKILL)


__all__ = ["ForkedWorker", "WorkerPool", "WorkerSpec", "rotate_logs"]
