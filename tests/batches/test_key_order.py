"""Job keys put in record order in bulk (numpy) sort exactly as their records do
(:func:`~knights_tour.batches.jobs.order_key`, the spec), and every key the bulk parse cannot
read, or reads as a tie, is left to the one-key-at-a-time sort: a key not of the job-key form
is never taken for one."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from knights_tour.batches.jobs import order_key
from knights_tour.batches.key_order import sorted_job_keys
from knights_tour.batches.records import _JOB_KEY, in_record_order


def _spec(job_key: str) -> tuple[Any, ...]:
    """The record order of a key of the job-key form, from the key's fields (the oracle)."""
    m = _JOB_KEY.fullmatch(job_key)
    assert m is not None, job_key
    rows, cols, row, col, solver, kind = m.groups()
    return order_key(int(rows), int(cols), (int(row), int(col)), solver, kind == "closed", job_key)


# Solvers that compare awkwardly: prefixes of one another, the same bytes in another order,
# across an 8-byte boundary, holding digits (which sort before the key's ':'), 'x' and ',' (the
# key's own separators), upper case before lower.
SOLVERS = [
    "a",
    "a0",
    "ab",
    "ba",
    "b",
    "cpsat",
    "warnsdorff",
    "warnsdorfa",
    "warnsdorff2",
    "x1,2",
    "Z",
    "9",
]


def _key(rows: int, cols: int, row: int, col: int, solver: str, closed: bool) -> str:
    return f"{rows}x{cols}:{row},{col}:{solver}:{'closed' if closed else 'open'}"


AWKWARD = [
    _key(rows, cols, row, col, solver, closed)
    for rows, cols in ((9, 9), (10, 10), (9, 10), (10, 9), (1000, 1000))  # 10 after 9
    for row, col in ((0, 0), (0, 10), (2, 1), (10, 2), (999, 999))
    for solver in SOLVERS
    for closed in (False, True)  # closed after open
] + [
    _key(123456789012345678, 1, 0, 0, "a", False),  # 18 digits: the longest read in bulk
    _key(1, 1, 0, 0, "s" * 64, False),  # and the longest solver
]


def test_awkward_job_keys_sort_in_bulk_as_their_records_do():
    shuffled = list(AWKWARD)
    random.Random(3).shuffle(shuffled)
    want = sorted(AWKWARD, key=_spec)
    assert sorted_job_keys(shuffled) == want
    assert in_record_order(shuffled) == want


NUMBERS = st.sampled_from([0, 1, 2, 9, 10, 11, 99, 100, 1000])
"""Few values, so that keys often share their first fields and the later ones decide."""


@settings(max_examples=300, deadline=None)
@given(
    st.sets(
        st.tuples(
            NUMBERS,
            NUMBERS,
            NUMBERS,
            NUMBERS,
            st.one_of(st.sampled_from(SOLVERS), st.text("abwxyz019,AZ", min_size=1, max_size=20)),
            st.booleans(),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_job_keys_sort_in_bulk_as_their_records_do(fields):
    keys = [_key(*f) for f in fields]
    assert sorted_job_keys(keys) == sorted(keys, key=_spec)


# Keys the bulk parse leaves to the one-at-a-time sort, beside plain keys: job keys it cannot
# read or that tie on their fields (ordered there as their records are), and keys of
# another form (which make the whole list not a batch's job keys).
PLAIN = [_key(5, 5, 0, 0, "warnsdorff", False), _key(6, 6, 1, 2, "cpsat", True)]
UNREAD_JOB_KEYS = [
    "05x5:0,0:warnsdorff:open",  # leading zero: ties with 5x5's fields
    "5x5:00,0:warnsdorff:open",
    "\u0665x5:0,0:warnsdorff:open",  # an Arabic-Indic 5: a digit to int(), not ASCII
    "5x5:0,0:\u00e9:open",  # a solver not in ASCII
    "5x5:0,0:a\x00:open",  # a NUL in the solver
    _key(1234567890123456789, 5, 0, 0, "a", False),  # 19 digits
    _key(5, 5, 0, 0, "s" * 65, False),  # a solver of 65 bytes
]
OTHER_FORMS = [
    "invalid:0123456789abcdef",
    "5x5:0,0:warnsdorff:opened",
    "5x5:0,0:warnsdorff:ope",
    "5x5:0,0::open",
    "5x5:0:warnsdorff:open",
    "5x5x5:0,0:warnsdorff:open",
    "x5:0,0:warnsdorff:open",
    "5x:0,0:warnsdorff:open",
    "5x5:0,:warnsdorff:open",
    "5x5:,0:warnsdorff:open",
    "5x5:0,0:warnsdorff:open:",
    "5x5:0,0:warns:dorff:open",
    "5x5:0,0:warnsdorff:open\n6x6:0,0:warnsdorff:open",  # a newline in a key
    "5x5:0,0:warnsdorff:Open",
    "5 x5:0,0:warnsdorff:open",
    "",
]


def test_keys_not_read_in_bulk_are_left_to_the_one_at_a_time_sort():
    for odd in UNREAD_JOB_KEYS:
        keys = [*PLAIN, odd]
        assert sorted_job_keys(keys) is None, odd
        assert in_record_order(keys[::-1]) == sorted(keys, key=_spec), odd
    tied = ["5x5:0,0:a:open", "05x5:0,0:a:open"]  # the same fields, nothing else
    assert sorted_job_keys(tied) is None
    assert in_record_order(tied) == sorted(tied, key=_spec)
    for odd in OTHER_FORMS:
        assert sorted_job_keys([*PLAIN, odd]) is None, odd
        assert sorted_job_keys([odd]) is None, odd


def _edited(key: str, edits: list[tuple[int, str, bool]]) -> str:
    """``key`` with each edit applied: at a position, ``text`` put in place of the character
    there (True) or before it (False)."""
    for at, text, replace in edits:
        at %= len(key) + 1
        key = key[:at] + text + key[at + replace :]
    return key


EDITS = st.lists(
    st.tuples(
        st.integers(0, 40),
        st.sampled_from(["", "x", ",", ":", "0", "7", "\n", "\x00", "o", "d", "\u0665", "\u00e9"]),
        st.booleans(),
    ),
    max_size=2,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(
            _edited,
            st.builds(
                _key,
                st.integers(1, 12),
                st.integers(1, 12),
                st.integers(0, 11),
                st.integers(0, 11),
                st.sampled_from(SOLVERS),
                st.booleans(),
            ),
            EDITS,
        ),
        min_size=1,
        max_size=8,
        unique=True,
    )
)
def test_a_key_not_of_the_job_key_form_is_never_taken_for_one(names):
    got = sorted_job_keys(names)
    if got is not None:
        assert all(_JOB_KEY.fullmatch(k) for k in names)
        assert got == sorted(names, key=_spec)
    if all(_JOB_KEY.fullmatch(k) for k in names):
        assert in_record_order(names) == sorted(names, key=_spec)
