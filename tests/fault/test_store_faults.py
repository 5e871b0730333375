"""Fault: what is stored in Redis goes wrong under a batch - a corrupted key, records lost (an
evicting Redis), a Redis that refuses writes - and a full disk under ``ktour run --out``.

Every command that reads the batch answers with one ``ktour: error:`` line naming the key (exit
2; ``batches`` lists every other batch and marks the bad one, exit 1), never a traceback; a
batch whose records are lost or unreadable is never complete, and ``ktour resume`` (after
``collect --repair`` for unreadable records) runs exactly those jobs again, over real workers.

Fact: every 5x5 job is decided (an open tour from the 13 majority-colour squares, OEIS
A165134; none from the other 12 by parity), so a complete 5x5 batch has 25 decided records.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest
import redis

from knights_tour.batches import progress, saving, store
from knights_tour.batches.client import make_jobs
from knights_tour.batches.jobs import JobOptions, run_job
from knights_tour.cli import main
from knights_tour.errors import CorruptKeyError, StorageFullError
from knights_tour.store import keys
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault, pytest.mark.timeout(300)]


def _complete_batch(r: redis.Redis, size: str = "5") -> tuple[str, int]:
    """A batch of ``size`` with every record stored (the jobs run here, as a worker runs
    them); its id and number of jobs."""
    _, jobs, params = make_jobs([size], JobOptions())
    batch_id = store.create_batch(r, jobs, params)
    saving.save_records(
        r,
        batch_id,
        [
            (rec.job_key, rec.status.value, bool(rec.mismatch), _encoded(rec))
            for rec in (run_job(j, batch_id) for j in jobs)
        ],
    )
    return batch_id, len(jobs)


def _encoded(rec):
    from knights_tour.tours.stored import encode_record

    return encode_record(rec)


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return int(code), out, err


def _one_line(code: int, err: str, *fragments: str, reader: str = "") -> None:
    lines = err.splitlines()
    assert code in (1, 2), (reader, err)
    assert "Traceback" not in err
    errors = [line for line in lines if line.startswith("ktour: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def _first_job(r: redis.Redis, batch_id: str) -> str:
    return sorted(r.hkeys(keys.batch_records(batch_id)))[0]


def _corrupt(r: redis.Redis, batch_id: str, kind: str) -> tuple[str, str | None]:
    """Corrupt one key of the batch; returns the key (and field) the error must name."""
    if kind == "record":
        job = _first_job(r, batch_id)
        r.hset(keys.batch_records(batch_id), job, "garbage{")
        return keys.batch_records(batch_id), job
    if kind == "meta":
        r.hset(keys.batch(batch_id), "meta", "garbage{")
        return keys.batch(batch_id), "meta"
    if kind == "total":
        r.hset(keys.batch(batch_id), "total", "abc")
        return keys.batch(batch_id), "total"
    if kind == "wrongtype-batch":
        r.delete(keys.batch(batch_id))
        r.set(keys.batch(batch_id), "not a hash")
        return keys.batch(batch_id), None
    if kind == "wrongtype-records":
        r.delete(keys.batch_records(batch_id))
        r.set(keys.batch_records(batch_id), "not a hash")
        return keys.batch_records(batch_id), None
    if kind == "wrongtype-status":
        r.delete(keys.batch_status(batch_id))
        r.rpush(keys.batch_status(batch_id), "not a hash")
        return keys.batch_status(batch_id), None
    raise AssertionError(kind)


READERS = {
    "status": lambda b: ["status", b],
    "collect": lambda b: ["collect", b],
    "collect-jsonl": lambda b: ["collect", b, "--format", "jsonl"],
    "report": lambda b: ["report", b],
    "resume": lambda b: ["resume", b],
    "job": lambda b: ["job", b, "0,0"],  # the job whose record "record" corrupts
}

# which readers read the corrupted key (the status of a batch never decodes its records)
READS = {
    "record": {"collect", "collect-jsonl", "report", "resume", "job"},
    "meta": set(READERS),
    "total": {"status", "collect", "collect-jsonl", "resume"},
    "wrongtype-batch": set(READERS),
    "wrongtype-records": set(READERS),
    "wrongtype-status": set(READERS) - {"report", "job"},  # these read no status
}


@pytest.mark.parametrize("kind", sorted(READS))
def test_a_corrupted_key_is_one_line_naming_it_and_batches_lists_the_others(
    capsys, redis_db_url, kind, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # where `ktour resume` writes the records of a complete batch
    r = connect(redis_db_url)
    good, _ = _complete_batch(r)
    bad, n = _complete_batch(r)
    key, field = _corrupt(r, bad, kind)
    for name, argv in READERS.items():
        code, _out, err = _cli(capsys, *argv(bad), "--redis", redis_db_url)
        if name in READS[kind]:
            _one_line(code, err, key, *([repr(field)] if field else []), reader=name)
        else:
            assert code == 0 and "Traceback" not in err, (name, err)
    code, out, err = _cli(capsys, "batches", "--json", "--redis", redis_db_url)
    listed = {b["batch_id"]: b for b in json.loads(out)}
    assert "Traceback" not in err and listed[good]["state"] == "complete"
    if kind in ("meta", "total", "wrongtype-batch", "wrongtype-status", "wrongtype-records"):
        assert code == 1 and listed[bad]["state"] == "unreadable", listed[bad]
        assert key in listed[bad]["reason"]
        code, _out, err = _cli(capsys, "batches", "--redis", redis_db_url)
        assert code == 1 and f"batch {bad}: Redis key {key}" in err and "Traceback" not in err
    else:
        assert code == 0 and listed[bad]["done"] == n
    code, _out, err = _cli(capsys, "forget", bad, "--redis", redis_db_url)  # the way out
    assert code == 0 and "Traceback" not in err, err
    code, out, err = _cli(capsys, "batches", "--json", "--redis", redis_db_url)
    assert code == 0 and [b["batch_id"] for b in json.loads(out)] == [good], err


def test_a_tally_that_is_not_numbers_is_counted_again(capsys, redis_db_url, tmp_path, monkeypatch):
    """The tally is a cache of the status hash: readers count without it, a save restarts the
    count it cannot add to, and a resume counts it again."""
    monkeypatch.chdir(tmp_path)
    r = connect(redis_db_url)
    bad, n = _complete_batch(r)
    r.hset(keys.batch_tally(bad), "found", "x")
    code, out, err = _cli(capsys, "status", bad, "--redis", redis_db_url)
    assert code == 0 and f"{n}/{n} jobs done (complete)" in out, err
    code, out, err = _cli(capsys, "resume", bad, "--redis", redis_db_url)
    assert code == 0 and "Traceback" not in err
    assert store.repair_results(r, bad) == []
    tally = r.hgetall(keys.batch_tally(bad))
    assert sum(int(v) for k, v in tally.items() if k != "mismatch") == n


def test_the_store_raises_one_typed_error_naming_the_key(redis_db_url):
    r = connect(redis_db_url)
    bad, _ = _complete_batch(r)
    r.delete(keys.batch_tally(bad))
    r.set(keys.batch_tally(bad), "a string")
    with pytest.raises(CorruptKeyError) as caught:
        progress.batch_progress(r, bad)
    assert caught.value.key == keys.batch_tally(bad)
    assert isinstance(caught.value, redis.ResponseError)  # callers of redis-py still catch it
    with pytest.raises(CorruptKeyError) as caught:
        r.hgetall(keys.batch_tally(bad))
    assert caught.value.key == keys.batch_tally(bad)


def test_unreadable_records_are_repaired_and_run_again_by_workers(
    capsys, local_workers, module_redis_url, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    r = connect(module_redis_url)
    batch_id, n = _complete_batch(r)
    broken = sorted(r.hkeys(keys.batch_records(batch_id)))[:3]
    for job in broken:
        r.hset(keys.batch_records(batch_id), job, b"k2\xff\x00garbage{")
    code, _out, err = _cli(capsys, "collect", batch_id, "--redis", module_redis_url)
    _one_line(code, err, keys.batch_records(batch_id), "--repair")

    code, _out, err = _cli(capsys, "collect", batch_id, "--repair", "--redis", module_redis_url)
    assert code == 1 and f"3 job(s) of batch {batch_id} had no readable record" in err, err
    assert f"batch incomplete: {n - 3}/{n} jobs done" in _out

    code, out, err = _cli(
        capsys, "resume", batch_id, "--redis", module_redis_url, "--timeout", "200"
    )
    assert code == 0, err
    assert f"{n - 3} of {n} jobs already recorded, not recomputed; 3 sent" in err
    records = store.collect(r, batch_id)
    assert len(records) == n and {rec.job_key for rec in records} >= set(broken)
    assert all(rec.status.value in ("found", "no_tour") for rec in records)


@pytest.mark.parametrize("loss", ["fields", "whole key"])
def test_lost_records_are_never_complete_and_resume_sends_them_again(
    capsys, local_workers, module_redis_url, tmp_path, monkeypatch, loss
):
    """An evicting Redis (``KT_ALLOW_EVICTING_REDIS=1``) deletes whole keys; a key deleted by
    hand, fields. Either way the status hash still counts the jobs."""
    monkeypatch.chdir(tmp_path)
    r = connect(module_redis_url)
    batch_id, n = _complete_batch(r)
    if loss == "fields":
        lost = sorted(r.hkeys(keys.batch_records(batch_id)))[-4:]
        r.hdel(keys.batch_records(batch_id), *lost)
    else:
        lost = list(r.hkeys(keys.batch_records(batch_id)))
        r.delete(keys.batch_records(batch_id))
    code, out, err = _cli(capsys, "status", batch_id, "--redis", module_redis_url)
    assert code == 1 and f"{n - len(lost)}/{n} jobs done" in out, out + err
    assert f"lost: {len(lost)} job(s) counted done have no record" in out
    assert not progress.batch_status(r, batch_id)["complete"]
    code, out, err = _cli(capsys, "batches", "--json", "--redis", module_redis_url)
    listed = {b["batch_id"]: b for b in json.loads(out)}
    assert listed[batch_id]["state"] != "complete"

    code, out, err = _cli(
        capsys, "resume", batch_id, "--redis", module_redis_url, "--timeout", "200"
    )
    assert code == 0, err
    assert f"{len(lost)} sent" in err, err
    st = progress.batch_status(r, batch_id)
    assert st["complete"] and st["done"] == n
    assert len(store.collect(r, batch_id)) == n


def test_a_redis_refusing_writes_is_one_line(capsys, fault_redis):
    """maxmemory reached under noeviction: every write is refused (``OOM``)."""
    r = connect(fault_redis.url)
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        _, jobs, params = make_jobs(["5"], JobOptions())
        with pytest.raises(StorageFullError) as caught:
            store.create_batch(r, jobs, params)
        assert isinstance(caught.value, redis.exceptions.OutOfMemoryError)
        assert str(caught.value).startswith("Redis refuses writes: OOM ")
        code, _out, err = _cli(capsys, "submit", "--sizes", "5", "--redis", fault_redis.url)
        _one_line(code, err, "Redis refuses writes: OOM command not allowed")
    finally:
        r.config_set("maxmemory", "0")


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_run_out_past_the_file_size_limit_names_the_path_and_the_batch(
    tmp_path, local_workers, module_redis_url
):
    """A file system that takes no more (here: RLIMIT_FSIZE of 1 KiB, as a full disk answers
    a write, without root) under the output file and its spill file beside it."""
    out = tmp_path / "r.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env["KT_DATA_DIR"] = str(tmp_path / "kt-data")
    # the limit is for ktour's files: Python's own write of a module's bytecode cache under it
    # is cut at 1 KiB without an error, and the truncated .pyc breaks every later import
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "knights_tour", "run", "--sizes", "5", "--redis", module_redis_url]
        + ["--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=_limit_file_size,  # noqa: PLW1509 - the child only sets its own limit
    )
    _one_line(proc.returncode, proc.stderr, f"cannot write {out}", "ktour collect ")
    line = proc.stderr.splitlines()[-1]
    batch_id = line.split("ktour collect ")[1].split()[0]
    assert progress.batch_status(connect(module_redis_url), batch_id)["complete"]
    assert not out.exists() and list(tmp_path.glob(".r.jsonl.*")) == []


def test_the_data_dir_is_private_whatever_the_umask_and_out_follows_it(tmp_path):
    """``ktour run`` under umask 000: the data dir it creates, the embedded Redis's directory,
    append-only file and log, the state and lock files and the workers' logs are the user's
    alone; the ``--out`` file is 0666 less the umask, as ``open(2)`` makes it."""
    data, out = tmp_path / "kt-data", tmp_path / "r.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "KT_REDIS_URL"}
    env["KT_DATA_DIR"] = str(data)
    proc = subprocess.run(
        [sys.executable, "-m", "knights_tour", "run", "--sizes", "5", "--workers", "1"]
        + ["--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        umask=0,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_mode & 0o777 == 0o666
    paths = [data, *data.rglob("*")]
    modes = {str(p.relative_to(tmp_path)): p.stat().st_mode & 0o777 for p in paths}
    assert any(p.name.endswith(".aof") for p in paths), modes  # the append-only file is there
    assert any(p.parent.name == "logs" for p in paths), modes  # and a worker's log
    for p in paths:
        want = 0o700 if p.is_dir() else 0o600
        assert p.stat().st_mode & 0o777 == want, (str(p), oct(p.stat().st_mode & 0o777), modes)


def test_the_collection_of_finished_batches_goes_past_an_unreadable_one(redis_db_url, tmp_path):
    """The beat's collection (``collect_finished``): a batch with an unreadable record is
    listed ``unreadable`` and left for the next collection; the batches after it are still
    reported."""
    from knights_tour.batches.collector import collect_finished

    r = connect(redis_db_url)
    bad, _ = _complete_batch(r)
    good, _ = _complete_batch(r)
    r.hset(keys.batch_records(bad), _first_job(r, bad), "garbage{")
    result = collect_finished(r, tmp_path)
    assert result["unreadable"] == [bad] and result["written"] == [good]
    assert (tmp_path / f"{good}.jsonl").exists() and not (tmp_path / f"{bad}.jsonl").exists()
    assert len(store.repair_results(r, bad, unreadable=True)) == 1
    assert collect_finished(r, tmp_path)["unfinished"] == [bad]  # its job now waits for a rerun
