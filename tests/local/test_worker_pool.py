"""Local workers are forked by one warmed parent (local/celery_worker_main.py): K nodes, each
with its own name, log and pool process, all children of that parent; and a parent told to stop
leaves no node behind, even one that would never act on the signal. Real Redis and Celery
processes; every wait polls a condition with a generous deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from _polling import wait_for

from knights_tour.local.prelaunch import free_port
from knights_tour.local.workers import LocalWorkers

DEADLINE_S = 120.0  # a busy 2-core machine

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def test_k_workers_are_forked_by_one_parent_each_with_its_name_log_and_pool(
    module_redis_url: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    with LocalWorkers(
        module_redis_url, count=3, node_prefix="forked", log_dir=logs, ready_timeout_s=DEADLINE_S
    ) as local:
        assert local.pool is not None
        parent = psutil.Process(local.pool.proc.pid)
        nodes = [psutil.Process(pid) for pid in local.pids]
        assert len(nodes) == 3 and all(node.ppid() == parent.pid for node in nodes)
        # numpy's OpenBLAS with one thread unless this environment says otherwise
        blas = os.environ.get("OPENBLAS_NUM_THREADS", "1")
        assert parent.environ().get("OPENBLAS_NUM_THREADS") == blas
        assert all(len(node.children()) == 1 for node in nodes)  # its own pool process
        for i, node in enumerate(nodes, start=1):
            log = logs / f"forked{i}.log"
            assert str(log) in {f.path for f in node.open_files()}
        family = [parent, *parent.children(recursive=True)]
    wait_for(lambda: not any(p.is_running() and p.status() != "zombie" for p in family), "gone")


def test_a_stopped_parent_leaves_no_worker_behind_even_one_still_connecting(tmp_path: Path) -> None:
    # Nothing listens on the port: each node's consumer retries the connection for ever, and
    # Celery acts on a shutdown signal only in its event loop, which it never reaches.
    url = f"redis://127.0.0.1:{free_port()}/0"
    logs = tmp_path / "logs"
    local = LocalWorkers(url, count=2, node_prefix="stuck", log_dir=logs).spawn()
    try:
        assert local.pool is not None

        def connecting(i: int) -> bool:
            log = logs / f"stuck{i}.log"
            return log.exists() and "keeps trying to connect" in log.read_text(errors="replace")

        wait_for(lambda: connecting(1) and connecting(2), "both workers connecting")
        parent = psutil.Process(local.pool.proc.pid)
        family = [parent, *parent.children(recursive=True)]
        parent.send_signal(signal.SIGQUIT)  # as Linux does when the client dies
        wait_for(lambda: local.pool is not None and local.pool.proc.poll() is not None, "parent")
        wait_for(
            lambda: not any(p.is_running() and p.status() != "zombie" for p in family), "workers"
        )
    finally:
        local.kill()


PRESSES_CHILD = r"""
import json, os, signal, sys, threading, time
import psutil
from knights_tour.local.workers import LocalWorkers

deadline_s = float(sys.argv[2])
local = LocalWorkers(sys.argv[1], count=2, node_prefix="presses", ready_timeout_s=deadline_s)
local.start()
parent = psutil.Process(local.pool.proc.pid)
family = [parent, *parent.children(recursive=True)]
go, stop = threading.Event(), threading.Event()

def press():
    go.wait()
    # Process-directed, from another thread: the kernel may hand it to either thread.
    while not stop.is_set():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.0002)

def alive():
    return [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

signal.signal(signal.SIGINT, signal.default_int_handler)
presser = threading.Thread(target=press, daemon=True)
presser.start()
interrupts = 0
while True:
    try:
        go.set()
        if local.pool is None:  # kill() took the workers: whatever came after, it is done
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            break
        getattr(local, sys.argv[3])()
    except KeyboardInterrupt:
        interrupts += 1
stop.set()
presser.join()
# Asked while this process lives: its death would end them anyway (their death signal).
end = time.monotonic() + deadline_s
while alive() and time.monotonic() < end:
    time.sleep(0.1)
print(json.dumps({"family": len(family), "alive": alive(), "interrupts": interrupts}), flush=True)
"""


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_ctrl_c_pressed_again_and_again_while_stopping_leaves_no_worker(
    module_redis_url: str, how: str
) -> None:
    # Ctrl-C after Ctrl-C while ``ktour run`` kills or stops its workers must not cut that
    # short: the embedded Redis is stopped right after, and a worker left running would
    # outlive it.
    child = subprocess.run(
        [sys.executable, "-c", PRESSES_CHILD, module_redis_url, str(DEADLINE_S), how],
        capture_output=True,
        text=True,
        timeout=3 * DEADLINE_S,
    )
    assert child.returncode == 0, child.stderr
    said = json.loads(child.stdout.splitlines()[-1])
    assert said["family"] == 5  # the parent, two nodes, a pool process each
    assert said["interrupts"] >= 1  # the presses did reach the killing
    assert said["alive"] == []
