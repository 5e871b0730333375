"""The periods derived from the lease lifetime (``KT_LEASE_S``): one object,
:class:`~knights_tour.settings.LeaseTiming`, holds them all, and the relations between them
that the lease design relies on hold for any lease a user may set."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import knights_tour
from knights_tour.settings import LeaseTiming, Settings, settings_from
from knights_tour.worker.lease_keeper import LeaseKeeper

pytestmark = pytest.mark.unit

LEASES_S = [1.0, 2.5, 10.0, 60.0, 3600.0]  # the least KT_LEASE_S accepted, the default, longer


@pytest.mark.parametrize("lease_s", LEASES_S)
def test_a_lease_is_renewed_at_least_twice_before_it_lapses(lease_s):
    t = LeaseTiming(lease_s)
    # renewed at t0; the heartbeats at t0 + h and t0 + 2h both come before it lapses at t0 + L,
    # so one renewal lost or late leaves it alive
    assert 2 * t.heartbeat_s < t.lease_s
    assert t.lease_ms == round(lease_s * 1000)


@pytest.mark.parametrize("lease_s", LEASES_S)
def test_a_healthy_process_trusts_its_lease_between_heartbeats_and_never_past_its_end(lease_s):
    t = LeaseTiming(lease_s)
    assert t.heartbeat_s < t.known_alive_s < t.lease_s
    assert t.renew_margin_s > 0


@pytest.mark.parametrize("lease_s", LEASES_S)
def test_recovery_notices_a_lapse_within_a_lease_and_resends_within_two(lease_s):
    t = LeaseTiming(lease_s)
    assert 0 < t.recovery_pass_s < t.lease_s  # a pass sooner could find no new lapse
    assert t.quiet_s >= t.lease_s  # a message taken by a live worker is claimed within a lease
    assert t.lease_s + t.recovery_tick_s <= 2 * t.lease_s


@pytest.mark.parametrize("lease_s", LEASES_S)
def test_status_calls_a_batch_stalled_only_after_its_last_lease_has_surely_lapsed(lease_s):
    t = LeaseTiming(lease_s)
    # no live lease for longer than a lease (one renewing worker reconnecting is not gone) ...
    assert t.stalled_after_s > t.lease_s + t.heartbeat_s
    # ... and workers killed at t0 make their batch stalled before t0 + 3 leases
    assert t.lease_s + t.stalled_after_s < 3 * t.lease_s


def test_the_settings_give_the_timing_of_kt_lease_s():
    s = settings_from({"KT_LEASE_S": "4"})
    assert s.lease_timing == LeaseTiming(4.0)
    assert Settings().lease_timing == LeaseTiming(Settings().lease_s)
    assert LeaseKeeper(lease_s=4).timing == s.lease_timing


@pytest.mark.parametrize("lease_s", [0.0, -1.0, float("nan")])
def test_a_lease_that_is_not_positive_is_refused(lease_s):
    with pytest.raises(ValueError, match="positive"):
        LeaseTiming(lease_s)


def test_no_module_but_settings_derives_a_period_from_the_lease():
    """A fraction or multiple of the lease written anywhere else is a second copy of a rule."""
    root = Path(knights_tour.__file__).parent
    scaled = re.compile(r"lease_s\s*[/*]|[/*]\s*[\w.()]*lease_s\b|STALL_AFTER")
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "settings.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if scaled.search(line)
    ]
    assert found == []
