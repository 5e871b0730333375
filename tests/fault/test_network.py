"""Faults of the network and of a stalled Redis, without root: a fault-injecting TCP proxy
(``_proxy.FaultProxy``) between a worker or the client and Redis, and SIGSTOP/restart of the
Redis process (scenarios in ``_netfaults``, timings scaled down: ``_netfaults.SCALED``).

In every scenario: each job has exactly one record and none is rewritten, the batch completes,
a worker that was cut off takes a task again within 15 s of the heal, the waiting client ends
normally with one line per job, no traceback is logged, and a warning that repeats while the
fault lasts is shown at most once a minute. ``benchmarks/bench_network_faults.py`` runs the
same scenarios with the product's timings (and Redis paused 60 s) for docs/reliability.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from _netfaults import (
    SCALED,
    Outcome,
    Scenario,
    busy_worker_blackholed,
    client_blackholed,
    redis_paused,
    redis_restarted_client_blackholed,
    rig,
)

pytestmark = [pytest.mark.fault, pytest.mark.timeout(300)]

JOBS = 80
"""CP-SAT jobs on 20x20 (about a tenth of a second each) per scenario: the batch outlasts
the fault."""

CONSUME_WITHIN_S = 15.0
"""A worker cut off from Redis takes a task again at most this long after the heal."""


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """One Redis (password, AOF), worker ``cut`` behind a proxy, worker ``direct``, and a
    proxy for the waiting client, shared by the scenarios of this module (each runs its own
    batch); everything is stopped at the end of the module."""
    sc = rig(tmp_path_factory.mktemp("net"), SCALED)
    try:
        yield sc
    finally:
        sc.close()


def _check(out: Outcome, began: float) -> None:
    print(f"\n{out}")
    assert out.note != "the cut worker never held a job"
    assert out.complete, out
    assert (out.lost, out.duplicated, out.rewritten) == (0, 0, 0), out
    for name, seconds in out.consume_after_heal_s.items():
        assert seconds is not None and seconds <= CONSUME_WITHIN_S, (name, out, out.log_tail)
    if out.client_exit is not None:
        assert out.client_exit == 0, out.client_stderr[-3000:]
        assert out.client_lines == out.jobs, out
    assert out.tracebacks == 0, out.traceback_text
    minutes = 1 + int((time.monotonic() - began) / 60)
    over = {k: n for k, n in out.repeated_warnings.items() if n > minutes}
    assert not over, over


def test_a_busy_worker_blackholed_for_two_leases_consumes_again_after_the_heal(net):
    began = time.monotonic()
    _check(busy_worker_blackholed(net, fault_s=2 * SCALED.lease_s, limit=JOBS), began)


def test_the_waiting_client_blackholed_then_healed(net):
    began = time.monotonic()
    _check(client_blackholed(net, fault_s=10.0, limit=JOBS), began)


def test_redis_paused_with_sigstop_while_workers_run_and_a_client_waits(net):
    began = time.monotonic()
    _check(redis_paused(net, fault_s=12.0, limit=JOBS), began)


def test_redis_restarted_while_the_waiting_client_is_blackholed(net):
    began = time.monotonic()
    _check(redis_restarted_client_blackholed(net, fault_s=10.0, limit=JOBS), began)
