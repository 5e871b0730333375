"""The batch verdict rules (knights_tour.batches.verdict) on real records.

Facts from outside the code: on 5x5 an open tour exists from exactly the 13 squares of the
majority colour and from none of the 12 others (colour parity: 25 squares, a tour alternates
colours); 4x4 has no open tour at all (OEIS A165134: a(4) = 0; Conrad et al. 1994).
"""

from __future__ import annotations

import msgspec
import pytest

from knights_tour.batches.jobs import make_batch_jobs, run_job
from knights_tour.batches.verdict import Tally, mismatches, problems, summary_rows, summary_total
from knights_tour.tours.record import Checks, Record, Status


@pytest.fixture(scope="module")
def records() -> list[Record]:
    """The records of the 5x5 and 4x4 open batches, as the workers write them."""
    return [run_job(job, batch_id="verdict") for job in make_batch_jobs([5, 4])]


def test_a_decided_batch_is_clean_and_summarised_per_board(records):
    assert problems(records, total=41) == []
    assert mismatches(records) == []
    rows = summary_rows(records)
    assert [r["board"] for r in rows] == ["4x4", "5x5"]
    four, five = rows
    assert (five["starts"], five["found"], dict(five["no_tour"])) == (25, 13, {"parity": 12})
    assert (four["starts"], four["found"], sum(four["no_tour"].values())) == (16, 0, 16)
    total = summary_total(rows)
    assert (total["starts"], total["found"], total["no_tour"]) == (41, 13, 28)
    assert total["seconds"] == pytest.approx(five["seconds"] + four["seconds"])


def test_the_summary_lists_boards_by_size_whatever_order_the_records_came_in(records):
    """Records arrive in completion order (a large board's job may end first); the table is
    by rows then columns, numerically (10x10 after 5x5)."""
    ten = run_job(make_batch_jobs([10])[0], batch_id="verdict")
    for order in ([ten, *records], [*reversed(records), ten], [*records[:3], ten, *records[3:]]):
        assert [r["board"] for r in summary_rows(order)] == ["4x4", "5x5", "10x10"]


def test_each_kind_of_problem_is_named(records):
    bad = [msgspec.structs.replace(r) for r in records[:-1]]  # one job without a record
    bad[0] = msgspec.structs.replace(bad[0], status=Status.UNKNOWN, tour=None)
    bad[1] = msgspec.structs.replace(bad[1], status=Status.ERROR)
    bad[2] = msgspec.structs.replace(
        bad[2], mismatch=True, checks=Checks(verifier=True, cpsat=False)
    )
    bad[3] = msgspec.structs.replace(bad[3], checks=Checks(verifier=True, cpsat=False))
    assert problems(bad, total=41) == [
        "1 of 41 jobs have no record",
        "1 jobs undecided (unknown)",
        "1 jobs ended in error",
        "1 CP-SAT mismatches",
        "1 failed CP-SAT checks",
    ]
    assert mismatches(bad) == [bad[2], bad[3]]
    five = next(row for row in summary_rows(bad) if row["board"] == "5x5")
    assert five["unknown"] == 1 and five["error"] == 1


def _counts(tally: Tally) -> tuple:
    return (
        tally.records,
        dict(tally.statuses),
        tally.mismatch,
        tally.bad_cpsat,
        tally.failed,
        tally.failed_count,
        tally.rows(),
    )


def test_a_page_counted_at_once_counts_as_its_records_one_by_one(records):
    ten = run_job(make_batch_jobs([10])[0], batch_id="verdict")
    odd = [msgspec.structs.replace(r) for r in records[:8]]
    odd[0] = msgspec.structs.replace(odd[0], status=Status.UNKNOWN, tour=None, elapsed_s=0.5)
    odd[1] = msgspec.structs.replace(odd[1], status=Status.ERROR, job_elapsed_s=None)
    odd[2] = msgspec.structs.replace(
        odd[2], mismatch=True, checks=Checks(verifier=True, cpsat=False)
    )
    odd[3] = msgspec.structs.replace(odd[3], checks=Checks(verifier=True, cpsat=False))
    odd[4] = msgspec.structs.replace(odd[4], checks=Checks(verifier=True, cpsat=True))
    odd[5] = msgspec.structs.replace(odd[5], status=Status.NO_TOUR, proof=None, tour=None)
    # boards in runs and interleaved, a board's run split across pages; more failures than kept
    many = [odd[2]] * (Tally.keep_failed + 3)
    stream = [*records, ten, *odd, ten, *records[5:9], *many, *odd[::-1]]
    one_by_one = Tally()
    for rec in stream:
        one_by_one.add(rec)
    paged = Tally()
    for at in range(0, len(stream), 7):
        paged.add_many(stream[at : at + 7])
    assert _counts(paged) == _counts(one_by_one)
    assert paged.failed_count == Tally.keep_failed + 3 + 2 * 2
    assert [r["board"] for r in paged.rows()] == ["4x4", "5x5", "10x10"]
