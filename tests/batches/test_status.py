"""``ktour status`` from the leases: the registry of worker leases, who holds which jobs, the
counts, ``stalled`` and the params as written - over the test Redis, with leases opened and
claims made the way a worker makes them (no worker process: see
tests/commands/test_status_leases.py for the real two-worker run)."""

from __future__ import annotations

import json
import time

import pytest
from _polling import wait_for

from knights_tour.batches import saving, store
from knights_tour.batches.cancelling import cancel_batch
from knights_tour.batches.client import make_jobs
from knights_tour.batches.estimate import planned_s_per_job
from knights_tour.batches.jobs import JobOptions, make_batch_jobs, run_job
from knights_tour.batches.status import assess, batch_view, shown_params, stalled_batches
from knights_tour.cli import main
from knights_tour.commands.status import WORKER_LINES, Redraw, _status_lines
from knights_tour.settings import LeaseTiming, get_settings
from knights_tour.store import keys
from knights_tour.worker import leases
from knights_tour.worker.holders import Holding, LeaseView, lease_view
from knights_tour.worker.ledger import Ledger


def _server_now(r) -> float:
    sec, usec = r.time()
    return int(sec) + int(usec) / 1e6


def _last_beat(r, token: str) -> None:
    """The last heartbeat of ``token``'s process: its lease renewed for 50 ms, then it dies."""
    assert leases.renew(r, token, 50)
    wait_for(lambda: not r.exists(keys.lease(token)), what=f"the lease of {token} to lapse")


# -- the registry of worker leases -------------------------------------------------------------


def test_opening_and_renewing_a_lease_notes_when_it_runs_out(redis_client):
    r = redis_client
    before = _server_now(r)
    assert leases.open_lease(r, "h:1:a", 60_000)
    after = _server_now(r)
    end = r.zscore(keys.workers(), "h:1:a")
    assert before + 60 <= end <= after + 60  # the server's clock plus the lease
    assert not leases.open_lease(r, "h:1:a", 60_000)  # a token is never reused
    assert r.zscore(keys.workers(), "h:1:a") == end

    assert leases.renew(r, "h:1:a", 120_000)
    assert r.zscore(keys.workers(), "h:1:a") >= before + 120

    # a lapsed lease is not renewed, and its entry keeps the time it ran out
    assert leases.open_lease(r, "h:2:b", 50)
    wait_for(lambda: not r.exists(keys.lease("h:2:b")), what="the 50 ms lease to lapse")
    ran_out = r.zscore(keys.workers(), "h:2:b")
    assert not leases.renew(r, "h:2:b", 60_000)
    assert r.zscore(keys.workers(), "h:2:b") == ran_out <= _server_now(r)


def test_registry_entries_a_day_old_are_dropped_when_a_lease_opens(redis_client):
    r = redis_client
    now = _server_now(r)
    r.zadd(keys.workers(), {"old:1:x": now - leases.REGISTRY_KEEP_S - 60, "recent:1:y": now - 60})
    assert leases.open_lease(r, "h:3:c", 10_000)
    assert r.zrange(keys.workers(), 0, -1) == ["recent:1:y", "h:3:c"]


# -- who holds what ----------------------------------------------------------------------------


def test_lease_view_groups_the_claims_by_process(redis_client):
    r = redis_client
    jobs = make_batch_jobs([5])
    batch_id = store.create_batch(r, jobs, {})
    led = Ledger.for_batch(batch_id)
    names = [j.key for j in jobs]
    assert leases.open_lease(r, "vm:101:aa", 60_000) and leases.open_lease(r, "vm:102:bb", 60_000)
    t0 = time.time()
    leases.claim(r, led, "vm:101:aa", names[:5])
    got = leases.claim(r, led, "vm:102:bb", names[5:8])
    leases.begin(r, led, "vm:102:bb", names[6], got.claim)
    _last_beat(r, "vm:102:bb")

    lv = lease_view(r, led)
    assert lv.live_tokens == ["vm:101:aa"]
    alive, dead = lv.holdings
    assert (alive.token, alive.live, alive.items, alive.worker) == (
        "vm:101:aa",
        True,
        sorted(names[:5]),
        "vm:101",
    )
    assert (dead.token, dead.live, dead.items, dead.started) == (
        "vm:102:bb",
        False,
        sorted(names[5:8]),
        names[6],
    )
    assert t0 - 1 <= alive.since <= time.time() + 1
    assert (lv.held(live=True), lv.held(live=False)) == (5, 3)
    assert lv.last_lease_end == pytest.approx(r.zscore(keys.workers(), "vm:101:aa"))


# -- the counts and the state ------------------------------------------------------------------


def test_status_counts_running_queued_and_orphaned_from_the_leases(redis_client):
    r = redis_client
    jobs = make_batch_jobs([5])  # 25 jobs
    batch_id = store.create_batch(r, jobs, {"sizes": "5x5", "sizes_asked": "5"})
    led = Ledger.for_batch(batch_id)
    names = [j.key for j in jobs]
    for job in jobs[:4]:
        saving.save_record(r, batch_id, run_job(job, batch_id=batch_id, worker="t@here"))
    for token, chunk in (("vm:201:a", names[4:10]), ("vm:202:b", names[10:13])):
        assert leases.open_lease(r, token, 60_000)
        assert leases.claim(r, led, token, chunk).claimed() == chunk
    assert leases.open_lease(r, "vm:203:c", 60_000)  # a process that died holding two jobs
    leases.claim(r, led, "vm:203:c", names[13:15])
    _last_beat(r, "vm:203:c")

    p = batch_view(r, batch_id)
    assert (p["done"], p["running"], p["orphaned"], p["queued"]) == (4, 9, 2, 10)
    assert p["state"] == "running" and p["reason"] is None and p["eta_s"] is not None
    assert p["workers_busy"] == ["vm:201", "vm:202"] and p["live_workers"] == 2
    by_worker = {w["worker"]: w for w in p["workers"]}
    assert by_worker["vm:201"]["jobs"] == 6 and by_worker["vm:201"]["live"] is True
    assert by_worker["vm:201"]["first"] == min(names[4:10])
    assert by_worker["vm:203"]["jobs"] == 2 and by_worker["vm:203"]["live"] is False
    assert all(w["since"] is not None and w["for_s"] >= 0 for w in p["workers"])

    # a record lands: that job leaves its holder
    saving.save_record(r, batch_id, run_job(jobs[4], batch_id=batch_id, worker="t@here"))
    p = batch_view(r, batch_id)
    assert (p["done"], p["running"], p["orphaned"], p["queued"]) == (5, 8, 2, 10)

    cancel_batch(r, batch_id)
    p = batch_view(r, batch_id)
    assert p["state"] == "cancelled" and p["queued"] == 0 and p["eta_s"] is None


def test_the_eta_starts_from_the_batch_estimate_on_the_live_workers(redis_client):
    """Before any job is done there is no rate to measure: the ETA is the batch's estimate on
    the worker processes with a live lease."""
    r = redis_client
    _, jobs, params = make_jobs(["5"], JobOptions(verify="cpsat"))
    batch_id = store.create_batch(r, jobs, params)
    for token in ("vm:401:a", "vm:402:b"):
        assert leases.open_lease(r, token, 60_000)
    p = batch_view(r, batch_id)
    planned = planned_s_per_job(params, 2)
    assert planned is not None and p["planned_s_per_job"] == pytest.approx(planned)
    assert p["done"] == 0 and p["eta_s"] == round(len(jobs) * planned, 1)


def test_a_batch_nobody_serves_is_stalled_with_the_reason(redis_client):
    r = redis_client
    lease_s = 0.4
    jobs = make_batch_jobs([5])
    batch_id = store.create_batch(r, jobs, {})
    led = Ledger.for_batch(batch_id)
    assert leases.open_lease(r, "vm:301:a", 60_000)
    leases.claim(r, led, "vm:301:a", [j.key for j in jobs[:12]])
    p = batch_view(r, batch_id, lease_s=lease_s)
    assert p["state"] == "running" and p["running"] == 12  # its worker is alive

    assert leases.renew(r, "vm:301:a", int(lease_s * 1000))  # its last heartbeat...
    died = _server_now(r)  # ...and it dies
    p = wait_for(
        lambda: (q := batch_view(r, batch_id, lease_s=lease_s))["state"] == "stalled" and q,
        what="the batch to show stalled",
    )
    assert p["reason"].startswith("no live worker lease for ")
    assert p["reason"].endswith("; 12 job(s) held by expired leases")
    assert (p["running"], p["orphaned"], p["queued"], p["eta_s"]) == (0, 12, 13, None)
    # stalled within three lease periods of the death (its lease ran out within one)
    assert p["stalled_since"] <= died + 3 * lease_s

    # a live worker anywhere on the server: not stalled (it recovers the orphans)
    assert leases.open_lease(r, "vm:302:b", 60_000)
    p = batch_view(r, batch_id, lease_s=lease_s)
    assert p["state"] == "queued" and p["reason"] is None and p["orphaned"] == 12


def test_a_batch_submitted_where_no_worker_ever_was_stalls_too(redis_client):
    r = redis_client
    lease_s = 0.2
    batch_id = store.create_batch(r, make_batch_jobs(["3x4"]), {})
    p = batch_view(r, batch_id, lease_s=lease_s)
    if p["state"] == "queued":  # (a busy machine may have taken longer than 0.3 s already)
        assert p["reason"] is None
    p = wait_for(
        lambda: (q := batch_view(r, batch_id, lease_s=lease_s))["state"] == "stalled" and q,
        what="the batch to show stalled",
    )
    assert "(none since the batch was submitted)" in p["reason"]
    assert p["queued"] == 12 and "held by expired leases" not in p["reason"]


def test_status_of_a_complete_batch(redis_client):
    r = redis_client
    jobs = make_batch_jobs(["3x4"])
    batch_id = store.create_batch(r, jobs, {})
    for job in jobs:
        saving.save_record(r, batch_id, run_job(job, batch_id=batch_id, worker="t@here"))
    p = batch_view(r, batch_id, lease_s=0.01)  # never stalled once complete
    assert p["complete"] and p["state"] == "complete" and p["reason"] is None
    assert (p["done"], p["running"], p["queued"], p["orphaned"], p["eta_s"]) == (12, 0, 0, 0, 0)


# -- the rule, on its own ----------------------------------------------------------------------


def _view(now: float, last_end: float | None, live: bool = False) -> LeaseView:
    holding = Holding("vm:1:x", live=live, items=["a", "b"], since=now - 100)
    return LeaseView(now, [holding], ["vm:1:x"] if live else [], last_end)


@pytest.mark.parametrize("lease_s", [2.0, 10.0])
def test_workers_dead_at_t_make_a_batch_stalled_within_three_lease_periods(lease_s):
    died = 1000.0
    for last_end in (died, died + lease_s / 3, died + lease_s):  # a lease ends within a period
        first = None
        for i in range(1, 400):
            now = died + i * lease_s / 100
            reason, since = assess(_view(now, last_end), submitted=0.0, orphaned=2, lease_s=lease_s)
            if reason:
                first = now
                assert since <= now
                break
        assert first is not None and first <= died + 3 * lease_s
        assert first >= last_end + LeaseTiming(lease_s).stalled_after_s - 1e-9


def test_no_stall_while_a_lease_is_live_or_soon_after_the_batch_is_submitted():
    assert assess(_view(5000.0, 5010.0, live=True), 0.0, 0, 10.0) == (None, None)
    # the last lease ended long ago, but the batch was submitted a moment ago (workers starting)
    assert assess(_view(5000.0, 1000.0), submitted=4995.0, orphaned=0, lease_s=10.0) == (None, None)
    reason, since = assess(_view(5000.0, 1000.0), submitted=4980.0, orphaned=0, lease_s=10.0)
    assert reason == "no live worker lease for 20 s (none since the batch was submitted)"
    assert since == 4995.0
    # a registered lease whose key is gone before its end counts as ended now
    assert assess(_view(5000.0, 5008.0), submitted=0.0, orphaned=0, lease_s=10.0) == (None, None)


# -- params as the user wrote them -------------------------------------------------------------


def test_params_are_shown_as_written():
    _boards, _jobs, params = make_jobs(["5-8", "6x8"], JobOptions())
    assert params["sizes"] == "5x5,6x6,7x7,8x8,6x8" and params["sizes_asked"] == "5-8,6x8"
    shown = shown_params(params)
    assert shown["sizes"] == "5-8,6x8" and "sizes_asked" not in shown
    assert "closed" not in shown  # unset options are not printed
    assert shown_params({"sizes": "5x5,6x6"}) == {"sizes": "5x5,6x6"}  # a batch from before


def test_batches_lists_a_batch_nobody_serves_as_stalled(
    capsys, redis_client, redis_db_url, monkeypatch
):
    r = redis_client
    jobs = make_batch_jobs(["3x4"])
    waiting = store.create_batch(r, jobs, {"sizes": "3x4", "sizes_asked": "3-4x4"})
    done = store.create_batch(r, jobs, {})
    for job in jobs:
        saving.save_record(r, done, run_job(job, batch_id=done, worker="t@here"))
    monkeypatch.setenv("KT_LEASE_S", "1")  # (the least a lease may be)
    get_settings.cache_clear()
    try:
        got = wait_for(lambda: stalled_batches(r, [waiting]), what="the batch to show stalled")
        assert list(got) == [waiting] and got[waiting].startswith("no live worker lease for ")
        assert main(["batches", "--json", "--redis", redis_db_url]) == 0
        listed = {b["batch_id"]: b for b in json.loads(capsys.readouterr().out)}
        assert listed[waiting]["state"] == "stalled" and listed[done]["state"] == "complete"
        assert listed[waiting]["reason"].startswith("no live worker lease for ")
        assert main(["batches", "--redis", redis_db_url]) == 0
        assert "3-4x4" in capsys.readouterr().out  # the sizes as written

        assert leases.open_lease(r, "vm:401:a", 60_000)  # a live worker: nothing is stalled
        assert stalled_batches(r, [waiting]) == {}
    finally:
        get_settings.cache_clear()


def test_the_status_text_agrees_with_itself_and_lists_at_most_sixteen_processes():
    held = [
        {"worker": f"vm:{i}", "jobs": 2, "first": "5x5:0,0:warnsdorff:open"}
        | {"last": "5x5:0,1:warnsdorff:open", "since": 1e9, "for_s": 3.0, "running_job": None}
        | {"live": i > 0}
        for i in range(WORKER_LINES + 4)
    ]
    p = {
        "batch_id": "B",
        "done": 1,
        "total": 45,
        "state": "stalled",
        "counts": {"found": 1},
        "mismatches": 0,
        "running": 38,
        "queued": 4,
        "orphaned": 2,
        "failed": 0,
        "eta_s": None,
        "complete": False,
        "workers": held,
        "workers_busy": [w["worker"] for w in held[1:]],
        "live_workers": WORKER_LINES + 3,
        "reason": "no live worker lease for 20 s; 2 job(s) held by expired leases",
        "params": {"sizes": "5x5", "sizes_asked": "5", "solver": "warnsdorff", "closed": False},
    }
    lines = _status_lines(p)
    assert lines[0] == "batch B: 1/45 jobs done (stalled); found 1; mismatches 0"
    assert lines[1].endswith("queued 4, orphaned 2, failed 0; ETA -; state stalled")
    assert lines[2].startswith("stalled: no live worker lease for 20 s; 2 job(s) held by")
    assert lines[3] == f"workers: {WORKER_LINES + 3} live, {WORKER_LINES + 3} on this batch"
    listed = [ln for ln in lines if ln.startswith("  vm:")]
    assert len(listed) == WORKER_LINES and "[lease expired]" in listed[0]
    assert "5x5:0,0:warnsdorff:open .. 5x5:0,1:warnsdorff:open, claimed 3s ago" in listed[1]
    assert lines[-2] == "  ... 4 more (--json lists every one)"
    assert lines[-1] == "params: sizes=5, solver=warnsdorff"


def test_watch_on_a_terminal_redraws_over_the_rows_it_wrote(capsys):
    """``status --watch`` on a terminal: each line is cut to the terminal's width (so none
    wraps), each refresh moves the cursor back up over the rows the previous one wrote and
    clears from there."""
    screen = Redraw(size=lambda: (10, 24))
    screen.show(["abc", "x" * 25, "y" * 10])
    first = capsys.readouterr().out
    assert first == "abc\n" + "x" * 10 + "\n" + "y" * 10 + "\n"  # nothing to move back over
    screen.show(["done"])
    assert capsys.readouterr().out == "\x1b[3F\x1b[Jdone\n"
    screen.show(["again"])
    assert capsys.readouterr().out == "\x1b[1F\x1b[Jagain\n"


class _Screen:
    """A terminal of ``rows`` x ``columns`` that understands what :class:`Redraw` writes
    (text, newlines, ``CSI n F`` and ``CSI J``) and scrolls as a terminal does."""

    def __init__(self, columns: int, rows: int) -> None:
        self.columns, self.rows = columns, rows
        self.lines: list[str] = [""]
        self.scrolled_off: list[str] = []

    def feed(self, text: str) -> None:
        import re

        for part in re.split(r"(\x1b\[\d*[FJ])", text):
            if part.startswith("\x1b["):
                if part.endswith("F"):
                    n = int(part[2:-1] or 1)
                    self.cursor = max(0, self.cursor - n)
                else:
                    del self.lines[self.cursor :]
                    self.lines.append("")
                continue
            for i, chunk in enumerate(part.split("\n")):
                if i:
                    self.cursor += 1
                    if self.cursor == len(self.lines):
                        self.lines.append("")
                    if len(self.lines) > self.rows:
                        self.scrolled_off.append(self.lines.pop(0))
                        self.cursor -= 1
                assert len(self.lines[self.cursor]) + len(chunk) <= self.columns, "a line wrapped"
                self.lines[self.cursor] += chunk

    cursor = 0


def test_watch_on_a_terminal_shorter_than_the_status_keeps_its_first_lines(capsys):
    """A status taller than the terminal (many workers listed) is cut to the terminal: the
    batch and progress lines stay on screen at every refresh, the last row says how many
    lines were left out, and no earlier refresh is left on screen or pushed into the
    scrollback."""
    screen, term = Redraw(size=lambda: (40, 12)), _Screen(40, 12)
    for frame in range(3):
        screen.show([f"frame {frame} line {k}" for k in range(21)])
        term.feed(capsys.readouterr().out)
    assert term.lines[0] == "frame 2 line 0" and term.lines[1] == "frame 2 line 1"
    assert term.lines[10] == "  ... 11 more line(s) (--json shows all)"
    assert not [ln for ln in term.lines if ln.startswith(("frame 0", "frame 1"))]
    assert term.scrolled_off == []
