"""``ktour dead-letters`` lists the malformed queue messages the workers set aside, newest first,
one line each, shows an entry that is not what a worker writes as corrupted (never a
traceback), and ``--clear`` empties the list and says how many it held; ``ktour status``'s
dead-letter line names the command.

Entries are written as the workers write them (:func:`knights_tour.worker.dead_letters.entry`,
:func:`~knights_tour.worker.dead_letters.park`) into the session's real Redis, plus garbage
pushed by hand; the command runs in this process through ``main([...])``. 1_800_000_000 Unix
seconds is 2027-01-15 08:00:00 UTC.
"""

from __future__ import annotations

import json

from knights_tour.cli import main
from knights_tour.commands.status import _dead_letter_lines
from knights_tour.store import keys
from knights_tour.worker import dead_letters

AT = 1_800_000_000
ENVELOPE = {
    "body": "e30=",
    "content-encoding": "utf-8",
    "content-type": "application/json",
    "headers": {"task": "knights_tour.run_jobs", "id": "bad-1"},
    "properties": {"delivery_tag": "y", "body_encoding": "base64"},
}


def _fill(r) -> None:
    """Oldest to newest: a raw entry, a Celery envelope, a long multi-line one, then two
    corrupted entries (not JSON; not even UTF-8)."""
    key = keys.dead_letters()
    r.lpush(key, dead_letters.entry("the queue entry is not JSON: Expecting value", "garbage{", AT))
    r.lpush(key, dead_letters.entry("not enough values to unpack", ENVELOPE, AT + 1))
    r.lpush(key, dead_letters.entry("unknown task", "x\ny  " + "z" * 200, AT + 2))
    r.lpush(key, "garbage{")
    r.lpush(key, b"\xff not utf-8")


def _run(capsys, *args):
    code = main(["dead-letters", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_the_list_is_shown_newest_first_one_line_each(redis_client, redis_db_url, capsys):
    _fill(redis_client)
    code, lines, err = _run(capsys, "--redis", redis_db_url)
    assert code == 0 and err == ""
    assert lines == [
        "dead letters: 5 malformed queue message(s) in Redis list kt:dead-letters, newest first",
        "-  a corrupted entry (not the JSON a worker writes); message: \ufffd not utf-8",
        "-  a corrupted entry (not the JSON a worker writes); message: garbage{",
        "2027-01-15 08:00:02 UTC  unknown task; message: x y " + "z" * 73 + "...",
        "2027-01-15 08:00:01 UTC  not enough values to unpack; task knights_tour.run_jobs id "
        'bad-1; message: {"body": "e30=", "content-encoding": "utf-8", "content-type": '
        '"application/js...',
        "2027-01-15 08:00:00 UTC  the queue entry is not JSON: Expecting value; message: garbage{",
    ]

    code, lines, _ = _run(capsys, "--redis", redis_db_url, "--limit", "2")
    assert code == 0 and len(lines) == 4
    assert lines[-1] == "... 3 more (--limit 0 lists all)"

    code, out, _ = _run(capsys, "--redis", redis_db_url, "--json", "--limit", "0")
    view = json.loads("\n".join(out))
    assert view["key"] == keys.dead_letters() and view["count"] == 5
    assert [e.get("corrupt", False) for e in view["entries"]] == [True, True, False, False, False]
    assert view["entries"][1] == {
        "at": None,
        "reason": None,
        "message": "garbage{",
        "corrupt": True,
    }
    assert json.loads(view["entries"][3]["message"]) == ENVELOPE
    assert view["entries"][4] == {
        "at": AT,
        "reason": "the queue entry is not JSON: Expecting value",
        "message": "garbage{",
    }


def test_clear_empties_the_list_and_says_how_many(redis_client, redis_db_url, capsys):
    _fill(redis_client)
    dead_letters.park(redis_client, "unknown task", b"{}")
    code, lines, _ = _run(capsys, "--redis", redis_db_url, "--clear")
    assert code == 0
    assert lines == ["dead letters: removed 6 from Redis list kt:dead-letters"]
    assert redis_client.exists(keys.dead_letters()) == 0
    code, lines, _ = _run(capsys, "--redis", redis_db_url)
    assert code == 0 and lines == ["dead letters: none in Redis list kt:dead-letters"]
    code, out, _ = _run(capsys, "--redis", redis_db_url, "--clear", "--json")
    assert code == 0 and json.loads("\n".join(out)) == {"key": keys.dead_letters(), "removed": 0}


def test_a_key_of_another_type_is_one_error_line(redis_client, redis_db_url, capsys):
    redis_client.set(keys.dead_letters(), "x")
    for extra in ((), ("--clear",)):
        code, lines, err = _run(capsys, "--redis", redis_db_url, *extra)
        assert code == 2 and lines == []
        assert err.startswith("ktour: error:") and len(err.splitlines()) == 1
        assert keys.dead_letters() in err
    assert redis_client.get(keys.dead_letters()) == "x"  # --clear refused it, left it as it is


def test_the_status_line_counts_them_names_the_command_and_survives_garbage(redis_client):
    _fill(redis_client)
    summary = dead_letters.summary(redis_client)
    assert summary["count"] == 5 and summary["latest"]["corrupt"]
    (line,) = _dead_letter_lines(summary | {"key": keys.dead_letters()})
    assert line == (
        "dead letters: 5 malformed queue message(s) set aside in Redis list kt:dead-letters; "
        "the latest: a corrupted entry (`ktour dead-letters` lists them)"
    )
    redis_client.lpush(keys.dead_letters(), dead_letters.entry("unknown task", "{}", AT))
    (line,) = _dead_letter_lines(dead_letters.summary(redis_client) | {"key": "K"})
    assert line.endswith(
        "the latest at 2027-01-15 08:00:00 UTC: unknown task (`ktour dead-letters` lists them)"
    )
