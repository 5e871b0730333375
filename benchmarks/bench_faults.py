"""Faults, one run each, on a realistic batch: records lost / duplicated / recovery seconds.

Every fault runs against a fresh embedded Redis (AOF, ``appendfsync everysec``) and local
Celery workers on 127.0.0.1, started and stopped by this script (by recorded PID), with the
product's default lease (``--lease-s``, ``KT_LEASE_S``)::

    python benchmarks/bench_faults.py                        # every fault, sizes 5-8 + CP-SAT
    python benchmarks/bench_faults.py --only redis-kill,cancel --sizes 5-9

The batch is every start square of ``--sizes`` (default ``5,6,7,8``: 174 jobs), each answer
cross-checked with CP-SAT (``--verify cpsat``), on two single-process workers. Per fault:

* ``lost``: jobs without a record when the batch is complete (or at the time-out);
* ``dup``: records beyond one per job (in Redis, or lines of ``ktour run``'s output file);
* ``rerun``: records rewritten after they were first seen (a job executed twice);
* ``recovery_s``: the fault to the batch complete; ``normal_s``: the same batch without a
  fault (for ``ktour run``: the whole command, start-up included);
* ``note``: what else was measured (re-sent jobs, records at the fault, ...).

The helpers of the fault test tier (``tests/fault/_faultkit.py``) drive and audit the batch.
Figures depend on the machine and its other load; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fault"))

from _faultkit import WorkerPool, drive, leased_by, poison_entries  # noqa: E402

from knights_tour.batches.cancelling import cancel_batch  # noqa: E402
from knights_tour.batches.client import resume_batch, submit_batch  # noqa: E402
from knights_tour.batches.jobs import make_batch_jobs  # noqa: E402
from knights_tour.batches.store import collect, repair_results  # noqa: E402
from knights_tour.board import Board, parse_board_list  # noqa: E402
from knights_tour.counting import store as count_store  # noqa: E402
from knights_tour.counting.client import submit_count  # noqa: E402
from knights_tour.counting.plan import plan_count  # noqa: E402
from knights_tour.local.embedded_redis import EmbeddedRedis  # noqa: E402
from knights_tour.settings import get_settings  # noqa: E402
from knights_tour.store import keys  # noqa: E402
from knights_tour.store.connection import REDIS_ERRORS, connect  # noqa: E402
from knights_tour.tours.stored import decode_stored  # noqa: E402
from knights_tour.worker import celery as worker  # noqa: E402
from knights_tour.worker import dead_letters, holders, ledger, queue  # noqa: E402

DOWN_S = 3.0
"""How long Redis stays down in the Redis faults."""


class Rig:
    """A fresh embedded Redis and ``workers`` single-process Celery workers, in ``tmp``."""

    def __init__(self, tmp: Path, lease_s: float, workers: int = 2) -> None:
        self.tmp, self.lease_s, self.count = tmp, lease_s, workers
        self.redis = EmbeddedRedis(tmp / "redis", password=secrets.token_hex(8), reuse=False)
        self.pool: WorkerPool | None = None
        self.workers: list = []
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> Rig:
        self.redis.start()
        self._saved = {k: os.environ.get(k) for k in ("KT_REDIS_URL", "KT_LEASE_S")}
        os.environ.update(KT_REDIS_URL=self.redis.url, KT_LEASE_S=str(self.lease_s))
        get_settings.cache_clear()
        self.pool = WorkerPool(
            self.redis.url, self.tmp / "logs", env={"KT_LEASE_S": str(self.lease_s)}
        )
        self.workers = [self.pool.start(f"bf{i}-") for i in range(self.count)]
        self.r = connect(self.redis.url)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.pool is not None:
                self.pool.stop_all()
        finally:
            self.redis.stop()
            for k, v in self._saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            get_settings.cache_clear()

    @property
    def url(self) -> str:
        return self.redis.url

    def _busy_family(self, batch_id: str) -> tuple[list, set[str]]:
        """The processes of the first worker whose pool child holds a lease of ``batch_id``
        (polled for up to 30 s; then the first worker's), and the job keys it holds."""
        deadline = time.monotonic() + 30
        while True:
            for w in self.workers:
                family = self.pool.family(w)
                held = leased_by(self.r, batch_id, {p.pid for p in family[1:]})
                if held:
                    return family, held
            if time.monotonic() > deadline:
                return self.pool.family(self.workers[0]), set()
            time.sleep(0.01)

    def kill_child(self, batch_id: str) -> str:
        """SIGKILL the pool child of a worker while it runs a job (Celery starts a new one)."""
        family, held = self._busy_family(batch_id)
        os.kill(family[1].pid, signal.SIGKILL)
        return f"killed while holding {len(held)} job(s)"

    def kill_main(self, batch_id: str) -> str:
        """SIGKILL the main process of a worker while its pool child runs a job; the child is
        left to exit by itself."""
        family, held = self._busy_family(batch_id)
        os.kill(family[0].pid, signal.SIGKILL)
        self.pool.strays.extend(family[1:])
        return f"killed while holding {len(held)} job(s)"

    def redis_down(self, sigkill: bool) -> str:
        """Stop Redis (SIGKILL, or a clean SHUTDOWN SAVE), keep it down ``DOWN_S``, restart it
        on the same port and data dir."""
        if sigkill:
            os.kill(self.redis.pid, signal.SIGKILL)
            psutil.wait_procs([psutil.Process(self.redis.pid)], timeout=10)
            self.redis._kill()  # noqa: SLF001 - reap our Popen and the watchdog
        else:
            self.redis.stop()
        time.sleep(DOWN_S)  # the fault itself: Redis down for this long
        self.redis.start()
        return f"down {DOWN_S:g} s"


def _tally(r, batch_id: str, jobs, d) -> dict[str, Any]:
    """lost / dup / rerun of a batch from its stored records and what ``drive`` saw."""
    records = collect(r, batch_id)
    got = [rec.job_key for rec in records]
    want = {j.key for j in jobs}
    return {
        "jobs": len(jobs),
        "lost": len(want - set(got)),
        "dup": len(got) - len(set(got)),
        "rerun": len(d.overwritten),
        "complete": bool(d.status.get("complete")),
    }


def batch_fault(
    rig: Rig,
    jobs,
    fault: Callable[[str], str] | None,
    *,
    at: float = 1 / 3,
    recover: bool = True,
    timeout_s: float = 600,
) -> dict[str, Any]:
    """Submit ``jobs``, fire ``fault(batch_id)`` (which returns a note) once ``at`` of them
    have records, drive the batch to the end (``recover``: as a waiting client does); returns
    the row."""
    began = time.monotonic()
    batch_id = submit_batch(rig.url, jobs, {"bench": "faults"})
    state: dict[str, Any] = {}

    def on_tick(st: dict[str, Any]) -> None:
        if fault is None or "at" in state or st.get("done", 0) < at * len(jobs):
            return
        state["at"], state["done"] = time.monotonic(), st.get("done", 0)
        state["what"] = fault(batch_id)

    d = drive(rig.r, rig.url, batch_id, timeout_s, on_tick=on_tick, recover=recover)
    end = began + d.seconds
    row = _tally(rig.r, batch_id, jobs, d)
    row["recovery_s"] = round(end - state["at"], 1) if "at" in state else None
    row["batch_s"] = round(d.seconds, 1)
    row["note"] = (
        f"fault at {state['done']} records ({state['what']}); " if state else ""
    ) + f"client re-sent {len(d.resent)}; {d.redis_errors} polls without Redis"
    return row


def _kill_main_when_queue_empty(
    rig: Rig, held_by: Callable[[set[int]], set[str]], deadline_s: float = 600
) -> tuple[float, set[str]]:
    """Poll until the queue is empty and the first worker's pool child holds a lease, then
    SIGKILL that worker's main process; returns (wall time of the kill, what it held)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        family = rig.pool.family(rig.workers[0])
        held = held_by({p.pid for p in family[1:]}) if len(family) >= 2 else set()
        if held and queue.lists_empty(rig.r, worker.queue_lists()):
            os.kill(family[0].pid, signal.SIGKILL)
            rig.pool.strays.extend(family[1:])
            return time.time(), held
        time.sleep(0.02)
    raise RuntimeError("the first worker never held a lease with the queue empty")


def main_kill_queue_empty(rig: Rig, jobs) -> dict[str, Any]:
    """The main process killed when the queue is empty, nobody waiting (recover=False)."""
    batch_id = submit_batch(rig.url, jobs, {"bench": "faults"})
    began = time.monotonic()
    killed_at, held = _kill_main_when_queue_empty(
        rig, lambda pids: leased_by(rig.r, batch_id, pids)
    )
    d = drive(rig.r, rig.url, batch_id, 600, recover=False)
    row = _tally(rig.r, batch_id, jobs, d)
    records = collect(rig.r, batch_id)
    row["recovery_s"] = round(max(rec.finished_at for rec in records) - killed_at, 1)
    row["batch_s"] = round(time.monotonic() - began, 1)
    row["note"] = f"{len(held)} job(s) held by the killed worker; nobody waiting"
    return row


def count_run(rig: Rig, n: int, kill: bool) -> dict[str, Any]:
    """Count the open tours of n x n per start square; with ``kill``: the two heaviest
    sub-jobs go last and the first worker's main process is killed while they run."""
    plan = plan_count(Board(n, n), depth=1)
    cid = count_store.count_id_for(plan)
    count_store.register_count(rig.r, cid, plan)
    began = time.monotonic()
    subjobs = sorted(plan.subjobs, key=lambda sj: sj.key in ("6x6:o:0.13", "6x6:o:1.12"))
    heavy = subjobs[-2:] if kill else []
    submit_count(rig.url, cid, subjobs[: len(subjobs) - len(heavy)])
    killed_at = None
    if kill:
        deadline = time.monotonic() + 600
        while count_store.count_status(rig.r, cid)["done"] < len(subjobs) - 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the light sub-jobs did not finish in 600 s")
            time.sleep(0.05)
        submit_count(rig.url, cid, heavy)
        led = ledger.Ledger.for_count(cid)

        def held_by(pids: set[int]) -> set[str]:
            out = set()
            for k in holders.running(rig.r, led):
                parts = str(rig.r.get(led.lease(k)) or "").split(":")
                if len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) in pids:
                    out.add(k)
            return out

        killed_at, _ = _kill_main_when_queue_empty(rig, held_by)
    while not (st := count_store.count_status(rig.r, cid))["complete"]:
        time.sleep(0.1)
    total = count_store.assemble_count(rig.r, cid, plan).total
    return {
        "jobs": len(subjobs),
        "lost": 0 if n != 6 or total == 6_637_920 else "wrong total",
        "dup": 0,
        "rerun": "-",
        "complete": True,
        "recovery_s": round(time.time() - killed_at, 1) if killed_at else None,
        "batch_s": round(time.monotonic() - began, 1),
        "note": f"total {total:,} (OEIS A165134: 6,637,920); {st['errors']} errors",
    }


# -- ktour run as a real process ---------------------------------------------------------------


def _run_env(data: Path, lease_s: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env.update(KT_DATA_DIR=str(data), KT_WORKERS="2", KT_LEASE_S=str(lease_s))
    return env


def _records_now(data: Path) -> dict[str, float]:
    """job_key -> finished_at of the records of the run's (only) batch in its embedded Redis;
    empty if it does not answer."""
    try:
        state = json.loads((data / "redis" / "embedded-redis.json").read_text())
        r = connect(f"redis://:{state['password']}@127.0.0.1:{state['port']}/0")
        ids = r.zrange(keys.batches(), 0, -1)
        raw = (
            r.execute_command("HGETALL", keys.batch_records(ids[-1]), NEVER_DECODE=True)
            if ids
            else {}
        )
        r.close()
    except (OSError, ValueError, KeyError, *REDIS_ERRORS):
        return {}
    return {k.decode(): decode_stored(v).finished_at for k, v in raw.items()}


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal's Ctrl-C (a script started in the background
    inherits it ignored, and Python then keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _family(proc: subprocess.Popen) -> list[psutil.Process]:
    p = psutil.Process(proc.pid)
    return [p, *p.children(recursive=True)]


def _end_family(family: list[psutil.Process], timeout_s: float = 30) -> int:
    """Wait for the processes a killed run leaves to end; SIGKILL (by PID) any still alive
    then. Returns how many had to be killed."""
    _, alive = psutil.wait_procs(family, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    return len(alive)


def ktour_run(tmp: Path, args: list[str], lease_s: float, interrupt: int | None) -> dict[str, Any]:
    """``ktour run ARGS``; with ``interrupt`` (a signal), send it once a third of the jobs
    have records, then run the same command again. Returns the row."""
    data = tmp / "data"
    env = _run_env(data, lease_s)
    cmd = [sys.executable, "-m", "knights_tour", "run", *args]
    out1, out2 = tmp / "first.jsonl", tmp / "second.jsonl"
    began = time.monotonic()
    total = None
    note = ""
    if interrupt is not None:
        first = subprocess.Popen(
            [*cmd, "--out", str(out1)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_default_sigint,
        )
        total = len(make_batch_jobs(_sizes(args)))
        while first.poll() is None and len(before := _records_now(data)) < total / 3:
            time.sleep(0.1)
        family = _family(first)
        fault_at = time.monotonic()
        first.send_signal(interrupt)
        try:
            first.wait(60)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait(10)
        left = _end_family(family)
        note = f"first run exit {first.returncode}; {left} of its processes killed after 30 s; "
    second = subprocess.run(
        [*cmd, "--out", str(out2)], env=env, capture_output=True, text=True, timeout=900
    )
    end = time.monotonic()
    lines = [json.loads(x) for x in out2.read_text().splitlines()] if out2.exists() else []
    keys_ = [rec["job_key"] for rec in lines]
    total = total or len(make_batch_jobs(_sizes(args)))
    resumed = [ln for ln in second.stderr.splitlines() if "resuming" in ln]
    after = {rec["job_key"]: rec["finished_at"] for rec in lines}
    rerun = "-" if interrupt is None else sum(after.get(k) != v for k, v in before.items())
    return {
        "jobs": total,
        "lost": total - len(set(keys_)),
        "dup": len(keys_) - len(set(keys_)),
        "rerun": rerun,
        "complete": second.returncode == 0,
        "recovery_s": round(end - fault_at, 1) if interrupt is not None else None,
        "batch_s": round(end - began, 1),
        "note": note
        + f"re-run exit {second.returncode}"
        + (f"; {resumed[0].split(': ', 1)[-1]}" if resumed else ""),
    }


def _sizes(args: list[str]) -> list:
    return parse_board_list(args[args.index("--sizes") + 1])


def cancel_mid_batch(rig: Rig, jobs) -> dict[str, Any]:
    """``cancel`` once a third of the jobs have records: how long until nothing of the batch
    runs, and that nothing of it runs again (watched for two leases more)."""
    batch_id = submit_batch(rig.url, jobs, {"bench": "faults"})
    began = time.monotonic()
    while len(rig.r.hkeys(keys.batch_records(batch_id))) < len(jobs) / 3:
        time.sleep(0.05)
    at = time.monotonic()
    dropped = cancel_batch(rig.r, batch_id)
    n_at = rig.r.hlen(keys.batch_records(batch_id))
    while holders.running(rig.r, batch_id):
        time.sleep(0.05)
    settled = time.monotonic()
    n_settled = rig.r.hlen(keys.batch_records(batch_id))
    time.sleep(2 * rig.lease_s)  # an observation window: recovery must not re-send anything
    n_after = rig.r.hlen(keys.batch_records(batch_id))
    return {
        "jobs": len(jobs),
        "lost": "-",
        "dup": 0,
        "rerun": "-",
        "complete": False,
        "recovery_s": round(settled - at, 1),
        "batch_s": round(settled - began, 1),
        "note": f"{dropped} queued tasks dropped; {n_at} records at the cancel, "
        f"{n_settled - n_at} more from tasks already running, "
        f"{n_after - n_settled} in the {2 * rig.lease_s:g} s after",
    }


# -- faults of the store: keys corrupted or lost under a batch --------------------------------


def _ktour(url: str, *args: str) -> str:
    """``ktour ARGS --redis URL`` as a user runs it: ``"exit N, L line(s)"``, ``tb`` if its
    stderr holds a traceback, and its first error line."""
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "knights_tour", *args, "--redis", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ktour: error: ")]
    tb = ", tb" if "Traceback" in proc.stderr else ""
    said = f": {errors[0][len('ktour: error: ') :][:70]}..." if errors else ""
    return f"`{args[0]}` exit {proc.returncode}, {len(errors)} error line(s){tb}{said}"


def _heal(rig: Rig, jobs, batch_id: str, *, unreadable: bool) -> dict[str, Any]:
    """``collect --repair`` (with ``unreadable``) and ``resume`` as a user does them, the
    batch then driven to the end; the row, ``recovery_s`` from the repair to complete."""
    at = time.monotonic()
    dropped = repair_results(rig.r, batch_id, unreadable=unreadable)
    reused, sent = resume_batch(rig.url, batch_id)
    d = drive(rig.r, rig.url, batch_id, 600)
    row = _tally(rig.r, batch_id, jobs, d)
    row["recovery_s"] = round(time.monotonic() - at, 1)
    row["note"] = f"repair dropped {len(dropped)}, resume kept {reused} and sent {sent}"
    return row


def _complete_batch(rig: Rig, jobs) -> tuple[str, float]:
    """A batch of ``jobs`` run to the end; its id and seconds."""
    began = time.monotonic()
    batch_id = submit_batch(rig.url, jobs, {"bench": "faults"})
    drive(rig.r, rig.url, batch_id, 600)
    return batch_id, round(time.monotonic() - began, 1)


def unreadable_records(rig: Rig, jobs, n: int = 3) -> dict[str, Any]:
    """``n`` records of a complete batch overwritten with ``garbage{``; what ``collect`` says,
    then ``collect --repair`` and ``resume``."""
    batch_id, batch_s = _complete_batch(rig, jobs)
    for job in sorted(rig.r.hkeys(keys.batch_records(batch_id)))[:n]:
        rig.r.hset(keys.batch_records(batch_id), job, "garbage{")
    said = _ktour(rig.url, "collect", batch_id)
    row = _heal(rig, jobs, batch_id, unreadable=True)
    row["batch_s"] = batch_s
    row["note"] = f"{said}; {row['note']}"
    return row


def lost_records(rig: Rig, jobs) -> dict[str, Any]:
    """The record hash of a complete batch deleted (what an evicting Redis does to a key);
    what ``status`` says, then ``resume``."""
    batch_id, batch_s = _complete_batch(rig, jobs)
    rig.r.delete(keys.batch_records(batch_id))
    said = _ktour(rig.url, "status", batch_id)
    row = _heal(rig, jobs, batch_id, unreadable=False)
    row["batch_s"] = batch_s
    row["note"] = f"{said} (not complete); {row['note']}"
    return row


def corrupt_tally(rig: Rig, jobs) -> dict[str, Any]:
    """The batch's tally set to ``x`` a third of the way in; nobody repairs anything."""
    notes: list[str] = []

    def fault(batch_id: str) -> str:
        rig.r.hset(keys.batch_tally(batch_id), "found", "x")
        notes.append(_ktour(rig.url, "status", batch_id))
        return "tally set to x"

    row = batch_fault(rig, jobs, fault)
    row["note"] = f"{notes[0] if notes else ''}; {row['note']}"
    return row


def corrupt_meta(rig: Rig, jobs) -> dict[str, Any]:
    """A complete batch's meta set to ``garbage{`` beside a sound batch: what the commands
    say (not repaired: the meta holds how the batch was asked for)."""
    bad, batch_s = _complete_batch(rig, jobs)
    good, _ = _complete_batch(rig, jobs[:5])
    rig.r.hset(keys.batch(bad), "meta", "garbage{")
    said = [_ktour(rig.url, cmd, bad) for cmd in ("status", "collect", "resume")]
    said.append(_ktour(rig.url, "batches"))
    said.append(f"the sound batch: {_ktour(rig.url, 'collect', good)}")
    records = len(rig.r.hkeys(keys.batch_records(bad)))
    return {
        "jobs": len(jobs),
        "lost": len(jobs) - records,
        "dup": 0,
        "rerun": 0,
        "complete": False,
        "recovery_s": None,
        "batch_s": batch_s,
        "note": "; ".join(said),
    }


# -- worker-side faults: poison messages, a Redis refusing writes ------------------------------


def poison_messages(rig: Rig, jobs) -> dict[str, Any]:
    """Every kind of malformed queue entry (``_faultkit.poison_entries``) pushed a third of the
    way into the batch, nobody repairing anything: the batch's records, the dead letters set
    aside, whether a worker died."""
    pids = [p.pid for w in rig.workers for p in rig.pool.family(w)[:1]]
    pushed: dict[str, int] = {}

    def push(batch_id: str) -> str:
        entries = poison_entries(rig.r, rig.url, jobs[0].to_dict())
        for entry in entries.values():
            rig.r.lpush(keys.QUEUE, entry)
        pushed["n"] = len(entries)
        return f"{len(entries)} malformed messages pushed"

    row = batch_fault(rig, jobs, push)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and dead_letters.summary(rig.r)["count"] < pushed["n"]:
        time.sleep(0.2)
    parked = dead_letters.summary(rig.r)["count"]
    died = sum(not psutil.pid_exists(p) for p in pids)
    row["note"] += f"; {parked} set aside as dead letters, {died} worker(s) died"
    return row


FULL_S = 40.0
"""How long Redis refuses writes in the ``redis-full`` fault: longer than a task waits for it
(``KT_SAVE_RETRY_S``), so tasks give their claims back."""


def redis_full(rig: Rig, jobs) -> dict[str, Any]:
    """A third of the way in, ``maxmemory`` set to half of what Redis uses (``noeviction``:
    every write refused with ``-OOM``) for :data:`FULL_S`, then lifted; nobody waiting and
    nobody restarting anything (``recover=False``). ``recovery_s`` includes the fault; the
    note says how long the batch took once Redis accepted writes again."""
    healed: dict[str, float] = {}

    def fill(batch_id: str) -> str:
        rig.r.config_set("maxmemory", str(rig.r.info("memory")["used_memory"] // 2))
        time.sleep(FULL_S)  # the fault itself: Redis refusing writes for this long
        rig.r.config_set("maxmemory", "0")
        healed["at"] = time.monotonic()
        return f"refusing writes {FULL_S:g} s"

    row = batch_fault(rig, jobs, fill, recover=False)
    if row["recovery_s"] is not None:
        row["note"] += f"; complete {row['recovery_s'] - FULL_S:.1f} s after writes were accepted"
    return row


# -- the table ---------------------------------------------------------------------------------


def scenarios(sizes: str, lease_s: float) -> dict[str, tuple[str, Callable[[Path], dict]]]:
    """name -> (the fault, as the table spells it; a function of a temp dir giving the row)."""
    jobs = make_batch_jobs(parse_board_list(sizes), verify="cpsat")
    run_args = ["--sizes", sizes, "--verify", "cpsat"]

    def on_rig(fn: Callable[[Rig], dict]) -> Callable[[Path], dict]:
        def go(tmp: Path) -> dict:
            with Rig(tmp, lease_s) as rig:
                return fn(rig)

        return go

    return {
        "none": ("no fault (the normal batch)", on_rig(lambda g: batch_fault(g, jobs, None))),
        "child-kill": (
            "pool child SIGKILL mid-batch",
            on_rig(lambda g: batch_fault(g, jobs, g.kill_child)),
        ),
        "main-kill": (
            "worker main SIGKILL mid-batch (client waiting)",
            on_rig(lambda g: batch_fault(g, jobs, g.kill_main)),
        ),
        "main-kill-empty": (
            "worker main SIGKILL, queue empty, nobody waiting (batch)",
            on_rig(lambda g: main_kill_queue_empty(g, jobs)),
        ),
        "count": ("no fault (6x6 count)", on_rig(lambda g: count_run(g, 6, kill=False))),
        "main-kill-count": (
            "worker main SIGKILL, queue empty, nobody waiting (6x6 count)",
            on_rig(lambda g: count_run(g, 6, kill=True)),
        ),
        "redis-kill": (
            f"Redis SIGKILL mid-batch, restarted after {DOWN_S:g} s (AOF everysec)",
            on_rig(lambda g: batch_fault(g, jobs, lambda _: g.redis_down(True))),
        ),
        "redis-restart": (
            f"Redis clean restart mid-batch ({DOWN_S:g} s down)",
            on_rig(lambda g: batch_fault(g, jobs, lambda _: g.redis_down(False))),
        ),
        "cancel": (
            "`ktour cancel` mid-batch (recovery_s: until nothing of it runs)",
            on_rig(lambda g: cancel_mid_batch(g, jobs)),
        ),
        "unreadable-records": (
            "3 records of a complete batch overwritten with `garbage{` (recovery_s: "
            "`collect --repair` + `resume` to complete)",
            on_rig(lambda g: unreadable_records(g, jobs)),
        ),
        "lost-records": (
            "the record hash of a complete batch deleted, as an evicting Redis does "
            "(recovery_s: `resume` to complete)",
            on_rig(lambda g: lost_records(g, jobs)),
        ),
        "corrupt-tally": (
            "the batch's tally set to `x` mid-batch (nobody repairs it)",
            on_rig(lambda g: corrupt_tally(g, jobs)),
        ),
        "corrupt-meta": (
            "a complete batch's meta set to `garbage{` (not repairable: what the commands say)",
            on_rig(lambda g: corrupt_meta(g, jobs)),
        ),
        "poison": (
            "every kind of malformed queue message pushed mid-batch (nobody repairs anything)",
            on_rig(lambda g: poison_messages(g, jobs)),
        ),
        "redis-full": (
            f"Redis refuses writes (-OOM) for {FULL_S:g} s mid-batch, nobody waiting or "
            "restarting anything",
            on_rig(lambda g: redis_full(g, jobs)),
        ),
        "run": (
            "no fault (`ktour run`, start-up included)",
            lambda tmp: ktour_run(tmp, run_args, lease_s, None),
        ),
        "run-kill": (
            "`ktour run` SIGKILL, then the same command (resume)",
            lambda tmp: ktour_run(tmp, run_args, lease_s, signal.SIGKILL),
        ),
        "run-ctrl-c": (
            "`ktour run` Ctrl-C (SIGINT), then the same command (resume)",
            lambda tmp: ktour_run(tmp, run_args, lease_s, signal.SIGINT),
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the chosen faults one after the other and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5,6,7,8")
    ap.add_argument(
        "--lease-s",
        type=float,
        default=None,
        help="KT_LEASE_S for the workers (default: the product's)",
    )
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_faults.json")
    args = ap.parse_args(argv)
    lease_s = args.lease_s or float(get_settings().lease_s)
    table = scenarios(args.sizes, lease_s)
    names = [n for n in args.only.split(",") if n] or list(table)
    rows = []
    for name in names:
        label, fn = table[name]
        with tempfile.TemporaryDirectory(prefix=f"bench-faults-{name}-") as tmp:
            row = {"fault": label, **fn(Path(tmp))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\nbatch: sizes {args.sizes}, --verify cpsat; 2 workers; KT_LEASE_S {lease_s:g}\n")
    print("| fault | jobs | lost | dup | rerun | recovery_s | batch_s | note |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        rec = "-" if r["recovery_s"] is None else r["recovery_s"]
        print(
            f"| {r['fault']} | {r['jobs']} | {r['lost']} | {r['dup']} | {r['rerun']} | "
            f"{rec} | {r['batch_s']} | {r['note']} |"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"sizes": args.sizes, "lease_s": lease_s, "rows": rows}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
