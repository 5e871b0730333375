"""Collection benchmark: how long a collection takes to report finished batches.

One command (starts its own embedded Redis, stops it at the end; no workers needed)::

    python benchmarks/bench_collect.py [--batches 20] [--sizes 5-12] [--json out.json]

It registers ``--batches`` batches of the sweep ``--sizes`` (n=5..12 = 620 jobs each) and fills
them with records produced by the engine in this process (once; the same records are stored in
every batch), then times: the first collection (writes every report), a second one (finds
nothing new), and a collection with one batch unfinished. Figures depend on the machine;
nothing here is asserted.

``--split`` instead measures collecting one batch into a JSON Lines file, stage by stage
(sorted keys, one ``HMGET`` per page of stored records, bulk decode, JSON, write), with the
Redis memory of the records hash::

    python benchmarks/bench_collect.py --split --sizes 5-20

``--formats`` writes one batch's records as JSON Lines, CSV and Parquet and prints each file's
bytes and write time (no Redis)::

    python benchmarks/bench_collect.py --formats --sizes 5-40
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

import msgspec

from knights_tour.batches.collector import collect_finished
from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.records import PAGE, fetch, record_keys
from knights_tour.batches.saving import save_record
from knights_tour.batches.store import create_batch, iter_records
from knights_tour.board import parse_board_list
from knights_tour.local.embedded_redis import EmbeddedRedis
from knights_tour.output.atomicfile import atomic_write_lines
from knights_tour.output.recordfile import jsonl_bytes
from knights_tour.store import keys
from knights_tour.store.connection import connect
from knights_tour.tours.stored import decode_many


def split(sizes: str) -> dict:
    """Stage times (seconds) of collecting one batch into a JSON Lines file: sorted keys, one
    HMGET per page, bulk decode, JSON, write; and the Redis memory of its records hash."""
    jobs = make_batch_jobs(parse_board_list(sizes))
    records = [run_job(j, worker="bench@local") for j in jobs]
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "redis") as server:
        r = connect(server.url)
        bid = create_batch(r, jobs)
        for rec in records:
            save_record(r, bid, rec)
        out: dict = {
            "jobs": len(jobs),
            "hash_bytes_per_record": r.memory_usage(keys.batch_records(bid), samples=0)
            // len(jobs),
        }
        t = time.perf_counter()
        names = record_keys(r, bid)
        out["keys_sort_s"] = time.perf_counter() - t
        fetch_s = decode_s = format_s = 0.0
        lines: list[bytes] = []
        for i in range(0, len(names), PAGE):
            t = time.perf_counter()
            raw = fetch(r, bid, names[i : i + PAGE])
            t1 = time.perf_counter()
            page = decode_many(raw)
            t2 = time.perf_counter()
            lines.extend(map(jsonl_bytes, page))
            t3 = time.perf_counter()
            fetch_s, decode_s, format_s = fetch_s + t1 - t, decode_s + t2 - t1, format_s + t3 - t2
        out.update(fetch_s=fetch_s, decode_s=decode_s, format_s=format_s)
        t = time.perf_counter()
        atomic_write_lines(Path(tmp) / "stream.jsonl", lines)
        out["write_s"] = time.perf_counter() - t
        t = time.perf_counter()
        atomic_write_lines(Path(tmp) / "again.jsonl", map(jsonl_bytes, iter_records(r, bid)))
        out["streamed_total_s"] = time.perf_counter() - t
        out["identical"] = (Path(tmp) / "stream.jsonl").read_bytes() == (
            Path(tmp) / "again.jsonl"
        ).read_bytes()
        out["bytes_per_line"] = (Path(tmp) / "again.jsonl").stat().st_size // len(jobs)
        r.close()
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def formats(sizes: str) -> dict:
    """Bytes and write seconds of one batch's records in each file format (no Redis)."""
    from knights_tour.output import parquet
    from knights_tour.output.recordfile import record_lines

    records = [run_job(j, worker="bench@local") for j in make_batch_jobs(parse_board_list(sizes))]
    out: dict = {"jobs": len(records)}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("jsonl", "csv", "parquet"):
            path = Path(tmp) / f"records.{fmt}"
            t = time.perf_counter()
            if fmt == "parquet":
                parquet.write(path, records)
            else:
                atomic_write_lines(path, record_lines(records, fmt))
            out[f"{fmt}_write_s"] = round(time.perf_counter() - t, 3)
            out[f"{fmt}_bytes"] = path.stat().st_size
    out["parquet_over_jsonl"] = round(out["parquet_bytes"] / out["jsonl_bytes"], 3)
    return out


SCALE_BATCH = "bench-collect-scale"
"""The batch id of the cached ``--scale`` batch (its records carry it)."""


def _solve_stored(job):  # in a pool process: the job's row as a worker stores it
    from knights_tour.tours.stored import encode_record

    rec = run_job(job, batch_id=SCALE_BATCH, worker="bench@local")
    rec.attempts = 1
    return (job.key, rec.status.value, bool(rec.mismatch), encode_record(rec))


def scale_rows(sizes: str, cache: Path) -> tuple[list, list]:
    """The jobs of the sweep ``sizes`` and their stored rows ``(job_key, status, mismatch,
    payload)`` as workers store them, solved once on every core and kept in ``cache``
    (MessagePack) for the next run."""
    jobs = make_batch_jobs(parse_board_list(sizes))
    if cache.exists():
        rows = [tuple(row) for row in msgspec.msgpack.decode(cache.read_bytes())]
        if len(rows) == len(jobs):
            return jobs, rows
    t = time.perf_counter()
    with Pool(os.cpu_count()) as pool:
        rows = pool.map(_solve_stored, jobs, chunksize=64)
    print(f"solved {len(jobs)} jobs in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(msgspec.msgpack.encode(rows))
    return jobs, rows


def _ktour(src: Path, args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds of ``python -m knights_tour ARGS`` run from the source tree ``src``, and
    the process's user and system CPU seconds."""
    env = {**env, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "knights_tour", *args], env=env, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def _base_tree(commit: str, where: Path) -> Path:
    """A work tree of ``commit`` at ``where`` (made with ``git worktree add`` if missing)."""
    if not where.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(where), commit],
            check=True,
            capture_output=True,
        )
    return where / "src"


def write_floor(size: int, where: Path) -> tuple[float, float]:
    """Wall and CPU seconds of writing ``size`` bytes (4 MiB blocks) to a file in ``where`` and
    fsyncing it: what the disk alone costs a JSON Lines file of that size."""
    block = b"x" * (4 << 20)
    path = where / "write-floor.tmp"
    cpu = time.process_time()
    t = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(size // len(block) + 1):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    took = time.perf_counter() - t
    path.unlink()
    return took, time.process_time() - cpu


_TO_JSON = """
import json, time
from knights_tour.solvers.api import solve
solve(1000, (0, 0))  # warm: the engine loaded
solves, texts = [], []
for _ in range(5):
    t = time.perf_counter(); rec = solve(1000, (0, 0)); solves.append(time.perf_counter() - t)
    t = time.perf_counter(); rec.to_json(); texts.append(time.perf_counter() - t)
print(json.dumps({"solve_1000_s": round(min(solves), 3), "to_json_1000_s": round(min(texts), 3)}))
"""


def to_json_cost(src: Path) -> dict:
    """Best of five, in a warm process run from the tree ``src``: seconds of solving a 1000x1000
    open tour from a1000 and of its record's ``to_json``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", _TO_JSON], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def verify_cost(rows: list, page: int = PAGE) -> dict:
    """CPU seconds of rendering every page's tours from their stored moves with the walk's
    check of each found tour and without it, and of checking the decoded tours with
    :func:`knights_tour.tours.verify.verify_tour` one by one."""
    from knights_tour.tours import stored
    from knights_tour.tours.tour_text import render_moves
    from knights_tour.tours.verify import verify_tour

    out: dict = {"render_checked_cpu_s": 0.0, "render_unchecked_cpu_s": 0.0}
    verifier = 0.0
    values = [row[3] for row in rows]
    for i in range(0, len(values), page):
        recs = [stored._ARRAY_DECODER.decode(memoryview(v)[2:]) for v in values[i : i + page]]
        recs = [rec for rec in recs if stored._pending(rec)]
        args = (
            [rec.tour for rec in recs],
            [rec.rows for rec in recs],
            [rec.cols for rec in recs],
            [rec.start for rec in recs],
            [rec.closed for rec in recs],
        )
        for checked in (True, False):
            t = time.process_time()
            render_moves(*args, [checked and rec.status == "found" for rec in recs])
            out[f"render_{'checked' if checked else 'unchecked'}_cpu_s"] += time.process_time() - t
        tours = [stored.decode_moves(rec.tour.tobytes()) for rec in recs]
        t = time.process_time()
        for rec, tour in zip(recs, tours):
            if rec.status == "found":
                verify_tour((rec.rows, rec.cols), tour, start=rec.start, closed=rec.closed)
        verifier += time.process_time() - t
    out["walk_check_cpu_s"] = out["render_checked_cpu_s"] - out["render_unchecked_cpu_s"]
    out["verify_tour_each_cpu_s"] = verifier
    return {k: round(v, 3) for k, v in out.items()}


def phases(url: str, where: Path) -> dict:
    """CPU seconds of each phase of collecting the ``--scale`` batch into JSON Lines and into
    Parquet, run one after the other in this process on one thread (``ktour collect``
    overlaps them on several): sorted record keys, one HMGET per page (read), decoding the
    stored form, rendering (the walk of the tours with their check, and each record's JSON;
    for Parquet, the moves), counting, building the Arrow table, writing, and the fsync and
    rename. ``render_jsonl`` is a page's :func:`jsonl_page` less a separate decode of the
    same values as it decodes them (``decode``: :func:`decode_raw_tours`), ``moves_parquet``
    a page's :func:`moves_page` less the same decode of them; ``count`` is
    :meth:`~knights_tour.batches.verdict.Tally.add_many` of a page's records;
    ``parquet_table`` is timed on its own, then again within ``parquet_write``, which is
    reported less it (the writer encodes and compresses on a thread of its own: its CPU is
    counted all the same)."""
    from knights_tour.batches.verdict import Tally
    from knights_tour.output import parquet
    from knights_tour.output.atomicfile import AtomicFile
    from knights_tour.tours.pages import jsonl_page, moves_page
    from knights_tour.tours.stored import decode_raw_tours

    r = connect(url)
    cpu = time.process_time
    out = dict.fromkeys(("keys", "read", "decode", "render_jsonl", "count", "write_jsonl"), 0.0)
    jsonl_page([fetch(r, SCALE_BATCH, record_keys(r, SCALE_BATCH)[:1])[0]])  # numba loaded
    t = cpu()
    names = record_keys(r, SCALE_BATCH)
    out["keys"] = cpu() - t
    file, tally, buffer = AtomicFile(where / "phases.jsonl"), Tally(), None
    for i in range(0, len(names), PAGE):
        t0 = cpu()
        values = fetch(r, SCALE_BATCH, names[i : i + PAGE])
        t1 = cpu()
        decode_raw_tours(values)
        t2 = cpu()
        page = jsonl_page(values, buffer)
        t3 = cpu()
        tally.add_many(page.records)
        t4 = cpu()
        file.writelines(page.chunks)
        buffer = page.buffer
        t5 = cpu()
        for phase, took in zip(out, (0, t1 - t0, t2 - t1, t3 - t2 - (t2 - t1), t4 - t3, t5 - t4)):
            out[phase] += took
    t = cpu()
    file.commit()
    out["fsync_rename_jsonl"] = cpu() - t
    pages, out["moves_parquet"], out["parquet_table"], light = [], 0.0, 0.0, 0.0
    for i in range(0, len(names), PAGE):
        values = fetch(r, SCALE_BATCH, names[i : i + PAGE])
        t = cpu()
        decode_raw_tours(values)
        t1 = cpu()
        pages.append(moves_page(values))
        out["moves_parquet"] += cpu() - t1
        light += t1 - t
    for page in pages:
        t = cpu()
        parquet.table(page)
        out["parquet_table"] += cpu() - t
    t = cpu()
    parquet.write_pages(where / "phases.parquet", pages)
    out["parquet_write"] = cpu() - t - out["parquet_table"]
    r.close()
    out["moves_parquet"] -= light
    return {f"phase_{k}_cpu_s": round(v, 2) for k, v in out.items()}


def scale(sizes: str, cache: Path, base_src: Path | None, repeat: int = 1) -> dict:
    """``ktour collect`` of the cached sweep ``sizes`` to JSON Lines and to Parquet, each run
    by this tree and by ``base_src`` (another tree's ``src``) in turn, in new processes
    against one embedded Redis holding the batch: wall seconds, file bytes, whether the two
    trees' JSON Lines are byte-identical; the records hash's bytes per record; the check's
    cost (:func:`verify_cost`)."""
    from knights_tour.batches.saving import save_records

    jobs, rows = scale_rows(sizes, cache)
    here = Path(__file__).resolve().parents[1] / "src"
    trees = {"after": here} if base_src is None else {"before": base_src, "after": here}
    out: dict = {"jobs": len(jobs), "load_before": round(os.getloadavg()[0], 2)}
    with (
        tempfile.TemporaryDirectory(dir=cache.parent) as tmp,
        EmbeddedRedis(Path(tmp) / "redis") as server,
    ):
        r = connect(server.url)
        create_batch(r, jobs, params={"sizes": sizes, "bench": True}, batch_id=SCALE_BATCH)
        for i in range(0, len(rows), 5000):
            save_records(r, SCALE_BATCH, rows[i : i + 5000])
        out["hash_bytes_per_record"] = r.memory_usage(
            keys.batch_records(SCALE_BATCH), samples=0
        ) // len(rows)
        env = {**os.environ, "KT_DATA_DIR": str(Path(tmp) / "data")}
        for fmt in ("jsonl", "parquet"):
            runs: dict[str, list] = {name: [] for name in trees}
            for _ in range(repeat):  # the trees in turn, so that a change of load hits both
                for name, src in trees.items():
                    path = Path(tmp) / f"{name}.{fmt}"
                    path.unlink(missing_ok=True)
                    runs[name].append(
                        _ktour(
                            src,
                            ["collect", SCALE_BATCH, "--out", str(path), "--redis", server.url],
                            env,
                        )
                        + (os.getloadavg()[0],)
                    )
            for name in trees:
                path = Path(tmp) / f"{name}.{fmt}"
                wall, user, system, load = min(runs[name])
                out[f"{fmt}_{name}_s"] = round(wall, 2)
                out[f"{fmt}_{name}_cpu_user_s"] = round(user, 2)
                out[f"{fmt}_{name}_cpu_sys_s"] = round(system, 2)
                out[f"{fmt}_{name}_load_after"] = round(load, 2)
                out[f"{fmt}_{name}_mb"] = round(path.stat().st_size / 1e6, 1)
                out[f"{fmt}_{name}_runs"] = [[round(x, 2) for x in run] for run in runs[name]]
            if "before" in trees:
                out[f"{fmt}_after_over_before"] = round(
                    out[f"{fmt}_after_s"] / out[f"{fmt}_before_s"], 3
                )
                cpu = {
                    name: out[f"{fmt}_{name}_cpu_user_s"] + out[f"{fmt}_{name}_cpu_sys_s"]
                    for name in trees
                }
                out[f"{fmt}_cpu_after_over_before"] = round(cpu["after"] / cpu["before"], 3)
        if "before" in trees:
            out["jsonl_identical"] = (Path(tmp) / "before.jsonl").read_bytes() == (
                Path(tmp) / "after.jsonl"
            ).read_bytes()
        for name in trees:
            (Path(tmp) / f"{name}.jsonl").unlink()
        out.update(phases(server.url, Path(tmp)))
        r.close()
    out["jsonl_mb_per_s"] = round(out["jsonl_after_mb"] / out["jsonl_after_s"], 1)
    floor = write_floor(int(out["jsonl_after_mb"] * 1e6), cache.parent)
    out["write_floor_s"], out["write_floor_cpu_s"] = round(floor[0], 2), round(floor[1], 2)
    out.update(verify_cost(rows))
    for name, src in trees.items():
        out.update({f"{k}_{name}": v for k, v in to_json_cost(src).items()})
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--sizes", default="5-12")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--split", action="store_true", help="stage times of one collection")
    ap.add_argument(
        "--formats",
        action="store_true",
        help="bytes and write time of the records in each file format",
    )
    ap.add_argument(
        "--scale",
        action="store_true",
        help="ktour collect of the sweep --sizes (default here 5-66) to JSONL and Parquet, "
        "this tree against --base",
    )
    ap.add_argument("--base", default="b152d27", help="with --scale: the commit to compare with")
    ap.add_argument("--no-base", action="store_true", help="with --scale: this tree only")
    ap.add_argument("--repeat", type=int, default=1, help="with --scale: runs each (best kept)")
    ap.add_argument(
        "--cache",
        default=None,
        help="with --scale: the solved records' file "
        "(default .kt-data/bench-collect/SIZES.msgpack)",
    )
    args = ap.parse_args()
    if args.scale:
        sizes = args.sizes if args.sizes != "5-12" else "5-66"
        root = Path(__file__).resolve().parents[1]
        cache = Path(args.cache or root / ".kt-data" / "bench-collect" / f"{sizes}.msgpack")
        base = None if args.no_base else _base_tree(args.base, cache.parent / f"base-{args.base}")
        out = scale(sizes, cache, base, args.repeat)
        print(json.dumps(out, indent=2))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
        return
    if args.formats:
        print(json.dumps(formats(args.sizes), indent=2))
        return
    if args.split:
        print(json.dumps(split(args.sizes), indent=2))
        return

    jobs = make_batch_jobs(parse_board_list(args.sizes))
    t0 = time.perf_counter()
    records = [run_job(j, worker="bench@local") for j in jobs]
    t_solve = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "redis") as server:
        r = connect(server.url)
        ids = []
        t0 = time.perf_counter()
        for _ in range(args.batches):
            bid = create_batch(r, jobs, params={"sizes": args.sizes, "bench": True})
            pipe_records = [msgspec.structs.replace(rec, batch_id=bid) for rec in records]
            for rec in pipe_records:
                save_record(r, bid, rec)
            ids.append(bid)
        t_fill = time.perf_counter() - t0
        reports = Path(tmp) / "reports"
        t0 = time.perf_counter()
        first = collect_finished(r, reports)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        second = collect_finished(r, reports)
        t_second = time.perf_counter() - t0
        extra = create_batch(r, jobs, params={"sizes": args.sizes, "bench": True})
        save_record(r, extra, msgspec.structs.replace(records[0], batch_id=extra))
        t0 = time.perf_counter()
        third = collect_finished(r, reports)
        t_third = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in reports.iterdir())
        r.close()
    out = {
        "batches": args.batches,
        "jobs_per_batch": len(jobs),
        "solve_s": round(t_solve, 3),
        "fill_s": round(t_fill, 3),
        "first_collection_s": round(t_first, 3),
        "reports_written": len(first["written"]),
        "per_batch_ms": round(1000 * t_first / max(1, len(first["written"])), 2),
        "second_collection_s": round(t_second, 4),
        "second_written": len(second["written"]),
        "with_unfinished_s": round(t_third, 4),
        "unfinished": len(third["unfinished"]),
        "report_bytes": size,
    }
    print(json.dumps(out, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
