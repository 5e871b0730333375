"""The counting span of a count (store/counts.counting_span_s): from the first sub-job's start
to the last one's end, by the workers' stored clocks, whatever order they finished in."""

from __future__ import annotations

import pytest

from knights_tour.store.counts import counting_span_s


def test_span_from_the_first_start_to_the_last_end():
    entries = [
        {"count": 1, "elapsed_s": 0.5, "finished_at": 100.5},  # ran 100.0-100.5
        {"count": 2, "elapsed_s": 2.0, "finished_at": 101.0},  # ran 99.0-101.0: first start
        {"count": 3, "elapsed_s": 0.25, "finished_at": 101.75},  # the last end
    ]
    assert counting_span_s(entries) == pytest.approx(2.75)
    assert counting_span_s(reversed(entries)) == pytest.approx(2.75)


def test_no_span_without_timed_entries():
    assert counting_span_s([]) is None
    assert counting_span_s([{"count": 1, "elapsed_s": 1.0}]) is None  # stored by an older tree
