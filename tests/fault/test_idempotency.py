"""Idempotency: the same job delivered twice at the same moment (duplicate messages, a
resubmitted batch) runs once and leaves one record; ``collect`` is deterministic (sorted)."""

from __future__ import annotations

import pytest
from _faultkit import audit, drive

from knights_tour.batches.client import resend_jobs
from knights_tour.batches.jobs import make_batch_jobs, record_sort_key
from knights_tour.batches.store import collect, create_batch
from knights_tour.cli import main
from knights_tour.settings import get_settings
from knights_tour.store.connection import connect

pytestmark = [pytest.mark.fault, pytest.mark.timeout(180)]


def test_duplicate_deliveries_run_each_job_once(
    fault_redis, worker_pool, capsys, monkeypatch, tmp_path
):
    url = fault_redis.url
    worker_pool.start_all("idem-a", "idem-b")
    r = connect(url)
    jobs = make_batch_jobs([6], solver="cpsat")  # 36 jobs of a few tenths of a second
    batch_id = create_batch(r, jobs, {"test": "duplicates"})
    # Every chunk twice in a row: the two workers take the two copies at the same time.
    dicts = [j.to_dict() for j in jobs]
    for chunk in (dicts[i : i + 4] for i in range(0, len(dicts), 4)):
        resend_jobs(url, batch_id, chunk)
        resend_jobs(url, batch_id, chunk)
    d = drive(r, url, batch_id, timeout_s=150)
    assert d.status.get("complete"), d.status
    records = audit(r, batch_id, jobs)
    assert d.overwritten == set()
    assert all(rec.attempts == 1 for rec in records), "a job was started twice"
    print(
        f"\nduplicates: {len(jobs)} jobs, every message delivered twice, "
        f"{len(records)} records, executions {sum(rec.attempts for rec in records)}"
    )

    # collect is deterministic and sorted, in the API and on the command line.
    assert collect(r, batch_id) == records
    assert records == sorted(records, key=record_sort_key)
    starts = [tuple(rec.start) for rec in records]
    assert starts == sorted(starts)
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "kt-data"))
    get_settings.cache_clear()
    capsys.readouterr()
    outputs = []
    for _ in range(2):
        assert main(["collect", batch_id, "--format", "jsonl", "--redis", url]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == len(jobs)
