"""``ktour retry`` and ``ktour job`` over a real Redis and real Celery worker processes.

Facts from outside the code: every square of 6x6 starts an open knight's tour (Conrad et al.
1994), so a search with a budget of fewer nodes than squares ends ``unknown`` on each of the
36 and one with room enough finds 36 tours.
"""

from __future__ import annotations

import json

import pytest
from _cli import run_cli

from knights_tour.settings import get_settings

pytestmark = pytest.mark.timeout(400)

WAIT_S = "240"


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "kt-data"))
    monkeypatch.chdir(tmp_path)  # a default results-<batch>.jsonl lands here, not in the repo
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_retry_reruns_the_unknown_jobs_keeps_their_attempts_and_collect_shows_the_latest(
    local_workers, module_redis_url, capsys, tmp_path
):
    url = module_redis_url
    code, out, _ = run_cli(capsys, "submit", "--sizes", "6", "--node-limit", "5", "--redis", url)
    batch_id = out.splitlines()[-1]
    code, _, _ = run_cli(capsys, "collect", batch_id, "--wait", "--timeout", WAIT_S, "--redis", url)
    assert code == 1  # 36 unknown: complete, not clean
    code, out, _ = run_cli(capsys, "job", batch_id, "a1", "--redis", url)
    assert code == 0 and "unknown (node_limit)" in out and "attempt" not in out

    out_file = tmp_path / "retried.jsonl"
    code, out, err = run_cli(
        capsys, "retry", batch_id, "--node-limit", "100000", "--out", str(out_file),
        "--timeout", WAIT_S, "--redis", url,
    )  # fmt: skip
    assert code == 0, err
    assert f"retrying 36 job(s) of batch {batch_id}" in err
    assert out.splitlines()[-1] == batch_id
    records = _records(out_file)
    assert len(records) == 36 and {r["status"] for r in records} == {"found"}

    code, out, _ = run_cli(capsys, "collect", batch_id, "--format", "jsonl", "--redis", url)
    assert code == 0 and len(out.splitlines()) == 36
    code, out, _ = run_cli(capsys, "job", batch_id, "a1", "--json", "--redis", url)
    (view,) = json.loads(out)
    assert code == 0 and view["state"] == "recorded"
    assert view["job"]["node_limit"] == 100000 and view["record"]["status"] == "found"
    assert view["record"]["worker"] in local_workers.node_names
    assert [e["status"] for e in view["earlier"]] == ["unknown"]
    assert view["earlier"][0]["reason"] == "node_limit" and view["earlier"][0]["nodes"] <= 5

    # nothing is unknown any more: a second retry retires nothing and re-runs nothing
    code, out, err = run_cli(capsys, "retry", batch_id, "--out", str(out_file), "--redis", url)
    assert code == 0 and "no job of batch" in err and "is complete" in err
    code, out, _ = run_cli(capsys, "job", batch_id, "5,0", "--json", "--redis", url)
    assert len(json.loads(out)[0]["earlier"]) == 1


def test_retry_and_job_refuse_bad_input_with_one_line(local_workers, module_redis_url, capsys):
    url = module_redis_url
    code, out, _ = run_cli(capsys, "submit", "--sizes", "5", "--redis", url)
    batch_id = out.splitlines()[-1]
    cases = [
        (["retry", batch_id, "--status", "lost"], "unknown status 'lost'"),
        (["retry", batch_id, "--solver", "nope"], "unknown solver 'nope'"),
        (["retry", batch_id, "--time-limit", "-1"], "--time-limit"),
        (["retry", "no-such-batch"], "unknown batch 'no-such-batch'"),
        (["job", batch_id, "f9"], "off the 5x5 board"),
        (["job", batch_id, "a1", "--board", "6"], "has no 6x6 board"),
        (["job", "no-such-batch", "a1"], "unknown batch 'no-such-batch'"),
    ]
    for args, fragment in cases:
        code, _, err = run_cli(capsys, *args, "--redis", url)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and fragment in lines[0], (args, err)
        assert lines[0].startswith("ktour: error: ")
