"""A job's limits at the command line: one budget per job (``--time-limit``, default
``KT_JOB_TIME_LIMIT_S`` for ``solve`` as for a batch), shown by ``--help``, and one check of
the limits for every edge (the options of ``solve``, ``run`` and ``submit``, and a job message
a worker receives), each bad value reported in one line.
"""

from __future__ import annotations

import json
import re

import pytest

from knights_tour.batches.jobs import Job
from knights_tour.cli import main
from knights_tour.errors import InvalidJobError
from knights_tour.settings import get_settings

DEAD_REDIS = "redis://127.0.0.1:1/0"


def _help_of(capsys, command: str, option: str) -> str:
    """The help text of ``option`` in ``ktour COMMAND --help``, on one line."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    block = out[out.index(option) :]
    nxt = re.search(r"\n  -", block[2:])
    block = block[: nxt.start() + 2] if nxt else block
    return " ".join(block.split())


@pytest.mark.parametrize("command", ["solve", "run", "submit"])
def test_help_shows_where_the_job_limits_default_from(data_dir, capsys, command):
    time_help = _help_of(capsys, command, "--time-limit")
    assert "[default:" in time_help and "KT_JOB_TIME_LIMIT_S" in time_help, time_help
    node_help = _help_of(capsys, command, "--node-limit")
    assert "[default:" in node_help and "engine" in node_help, node_help


def test_solve_without_a_time_limit_has_the_job_budget(data_dir, capsys, monkeypatch):
    """CP-SAT takes seconds to find a tour of 50x50; with the job budget at 0.3 s (and CP-SAT's
    own default far away) the solve ends undecided at the budget."""
    monkeypatch.setenv("KT_JOB_TIME_LIMIT_S", "0.3")
    monkeypatch.setenv("KT_CPSAT_TIME_LIMIT_S", "1000")
    get_settings.cache_clear()
    code = main(["solve", "50", "a1", "--solver", "cpsat", "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (rec["status"], rec["reason"]) == ("unknown", "time_limit")


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--time-limit", "0", "time_limit_s"),
        ("--time-limit", "nan", "time_limit_s"),
        ("--time-limit", "1e9", "time_limit_s"),
        ("--node-limit", "0", "node_limit"),
    ],
)
def test_a_bad_limit_gets_the_same_line_at_every_edge(
    data_dir, tmp_path, capsys, option, value, field
):
    lines = {}
    for command in (
        ["solve", "8", "a1"],
        ["run", "--sizes", "5", "--redis", DEAD_REDIS, "--out", str(tmp_path / "o.jsonl")],
        ["submit", "--sizes", "5", "--redis", DEAD_REDIS],
    ):
        code = main([*command, option, value])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith(f"ktour: error: Invalid value for '{option}': {field} must"), err
        lines[command[0]] = err.split(f"'{option}': ", 1)[1].split(" (see", 1)[0]
    # A job message with the same limit is refused by the same check, in the same words.
    number = float(value) if field == "time_limit_s" else int(value)
    job = Job(5, 5, (0, 0)).to_dict() | {field: number}
    with pytest.raises(InvalidJobError) as caught:
        Job.from_dict(job)
    assert len(set(lines.values())) == 1
    assert str(caught.value) == "job " + lines["solve"]
    assert not (tmp_path / "o.jsonl").exists()
