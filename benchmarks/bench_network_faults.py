"""Network faults and a stalled Redis, one run each, with the product's timings: the table of
docs/reliability.md.

The scenarios are those of the fault tier (``tests/fault/_netfaults.py``: a fault-injecting
TCP proxy in front of Redis for a worker's or the client's link, SIGSTOP and restart for
Redis), run here with the defaults of ``knights_tour.settings`` (lease 10 s, socket timeout
10 s, health check 5 s, ...; ``_netfaults.PRODUCT``) and the fault lengths users meet (a
blackhole of 2 leases and one of 150 s, Redis paused 60 s)::

    python benchmarks/bench_network_faults.py                 # every row, about 20 minutes
    python benchmarks/bench_network_faults.py --only worker-blackhole-20,redis-sigstop-60
    python benchmarks/bench_network_faults.py --json results.json
    python benchmarks/bench_network_faults.py --only client-blackhole-30 --fault-s 2 --sizes 6

``--fault-s`` and ``--sizes`` give every chosen row another fault length and batch (every start
square of those boards): a quick check that the script runs, not a row of the table.

Per row: ``lost`` (jobs without a record when the batch is complete or at the time-out),
``dup`` (records beyond one per job), ``rewritten`` (a record changed after it was first
seen), ``consume`` (the heal to the first task the cut workers take; for the Redis rows,
every worker), ``complete`` (the heal to the last record; for the client rows, to the
client's exit), ``client`` (the waiting ``ktour collect --wait``: exit code, lines written),
``tb`` (tracebacks in the workers' logs and the client's stderr) and ``repeats`` (the most
times one warning was repeated in one process's log within the run).

The ``old-timeouts`` row runs the 150 s blackhole with the timeouts of the tree before they
were set (socket timeout 30 s - the store's; the broker's had none -, kombu's health check
25 s, keepalive only after the kernel's 2 hours, reconnect pauses up to 30 s). It is an
approximation, not the old tree: the reconnect schedule stays this tree's 0, 1, 2, ... s
(kombu's was 2, 4, 6, ... s). Figures depend on the machine and its other load; nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [
    str(ROOT / "tests" / "fault"),
    str(ROOT / "tests"),
]  # its scenarios and their helpers

from _netfaults import PRODUCT, SCENARIOS, Outcome, Timing, rig  # noqa: E402

PRE_FIX = Timing(
    lease_s=10,
    socket_timeout_s=30,
    connect_timeout_s=5,
    health_check_s=25,
    keepalive_s=7200,
    reconnect_max_s=30,
)
"""Approximately the timings before this benchmark's fixes (see the module docstring)."""

ROWS: dict[str, tuple[str, Timing, float, dict]] = {
    "worker-blackhole-20": ("worker-blackhole", PRODUCT, 20.0, {"sizes": (20,), "limit": 400}),
    "worker-blackhole-150": (
        "worker-blackhole",
        PRODUCT,
        150.0,
        {"sizes": (20, 22), "limit": None},
    ),
    "worker-blackhole-150-old-timeouts": (
        "worker-blackhole",
        PRE_FIX,
        150.0,
        {"sizes": (20, 22), "limit": None},
    ),
    "redis-sigstop-60": ("redis-sigstop", PRODUCT, 60.0, {"sizes": (20,), "limit": 400}),
    "redis-restart-client-blackhole-30": (
        "redis-restart-client-blackhole",
        PRODUCT,
        30.0,
        {"sizes": (20,), "limit": 400},
    ),
    "client-blackhole-30": ("client-blackhole", PRODUCT, 30.0, {"sizes": (20,), "limit": 400}),
}
"""Row name -> (scenario, timings, fault seconds, batch)."""


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def table(rows: list[tuple[str, Outcome]]) -> str:
    """The outcomes as a Markdown table."""
    head = (
        "| row | fault | fault s | jobs | lost | dup | rewritten | consume s | complete s "
        "| client | tb | repeats |"
    )
    out = [head, "|" + "---|" * 12]
    for name, o in rows:
        client = "-" if o.client_exit is None else f"exit {o.client_exit}, {o.client_lines} lines"
        consume = ", ".join(f"{_fmt(v)}" for v in o.consume_after_heal_s.values()) or "-"
        repeats = max(o.repeated_warnings.values(), default=1)
        out.append(
            f"| {name} | {o.kind} | {o.fault_s:g} | {o.jobs} | {o.lost} | "
            f"{o.duplicated} | {o.rewritten} | {consume} | "
            f"{_fmt(o.complete_after_heal_s)} | {client} | {o.tracebacks} | {repeats} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated row names: " + ", ".join(ROWS))
    ap.add_argument("--json", type=Path, help="write the outcomes as JSON here")
    ap.add_argument(
        "--fault-s",
        type=float,
        default=None,
        help="every row's fault length in seconds instead of its own",
    )
    ap.add_argument(
        "--sizes",
        default=None,
        metavar="N,N",
        help="every row's batch: every start square of these boards",
    )
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(ROWS)
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        ap.error(f"unknown row(s): {', '.join(unknown)}")
    done: list[tuple[str, Outcome]] = []
    for name in names:
        scenario, timing, fault_s, batch = ROWS[name]
        if args.fault_s is not None:
            fault_s = args.fault_s
        if args.sizes:
            batch = {"sizes": tuple(int(n) for n in args.sizes.split(",")), "limit": None}
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="kt-netfault-") as tmp:
            sc = rig(Path(tmp), timing)  # a fresh Redis and workers for every row
            try:
                outcome = SCENARIOS[scenario](sc, fault_s, **batch)
            finally:
                sc.close()
        print(f"{name}: {time.monotonic() - began:.0f} s  {outcome}", file=sys.stderr, flush=True)
        done.append((name, outcome))
    print(table(done))
    if args.json:
        args.json.write_text(json.dumps({n: asdict(o) for n, o in done}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
