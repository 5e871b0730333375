"""Terminal board pictures (knights_tour.output.render): step numbers in the right squares,
aligned for any size, start/end marked, rank 1 at the bottom, ASCII for pipes, colour with rich."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from _picture_tours import backtrack_tour, lit_5x5, record

from knights_tour.board import Board
from knights_tour.errors import TourFormatError
from knights_tour.output.render import END, START, board_rich, board_text, print_board, tour_view
from knights_tour.tours.record import Proof, Status, TourResult

CELL_RE = re.compile(r"[\[( ]\s*(\d+|\.|S)[\])\s]")


def board_rows(text: str, rows: int) -> list[str]:
    return text.splitlines()[:rows]


def cells_of(line: str, rank_w: int, w: int, cols: int) -> list[str]:
    """Cut a board line into its ``cols`` cells of width ``w + 2`` after the rank label."""
    body = line[rank_w + 1 :].ljust(cols * (w + 2))
    return [body[i * (w + 2) : (i + 1) * (w + 2)] for i in range(cols)]


def test_ascii_numbers_sit_on_the_tour_squares_with_rank_1_at_the_bottom():
    tour = lit_5x5()
    text = board_text(record(5, 5, tour[0], tour))
    lines = text.splitlines()
    # The literature matrix, row 0 (rank 5) first: the picture shows the same numbers.
    expected = [
        row.split()
        for row in ["1 20 17 12 3", "16 11 2 7 18", "21 24 19 4 13", "10 15 6 23 8", "25 22 9 14 5"]
    ]
    for r in range(5):
        assert lines[r].split()[0] == str(5 - r)  # rank label: 5 at the top, 1 at the bottom
        cells = cells_of(lines[r], 1, 2, 5)
        assert [c.strip(" []()") for c in cells] == expected[r]
    assert lines[5].split() == ["a", "b", "c", "d", "e"]
    # start a5 bracketed, last square (step 25 on a1) parenthesised
    assert cells_of(lines[0], 1, 2, 5)[0] == "[ 1]"
    assert cells_of(lines[4], 1, 2, 5)[0] == "(25)"
    assert "start a5" in lines[-1] and "end a1" in lines[-1]


@pytest.mark.parametrize(
    "rows,cols,start",
    [
        (1, 1, (0, 0)),
        (3, 4, (0, 0)),
        (6, 6, (5, 0)),
        (10, 10, (0, 0)),
        (12, 12, (11, 0)),
        (8, 5, (7, 4)),
    ],
)
def test_ascii_columns_align_for_any_size(rows, cols, start):
    tour = backtrack_tour(rows, cols, start)
    rec = record(rows, cols, start, tour, status="found" if tour else "no_tour")
    text = board_text(rec)
    w = len(str(rows * cols))
    rank_w = len(str(rows))
    lines = board_rows(text, rows)
    seen = []
    for r, line in enumerate(lines):
        # every number ends at the same column in every row: right-aligned in width w
        for c, cell in enumerate(cells_of(line, rank_w, w, cols)):
            assert len(cell) == w + 2
            body = cell[1:-1]
            assert body == body.strip().rjust(w)
            if tour:
                assert int(body) == tour.index((r, c)) + 1
                seen.append(int(body))
    if tour:
        assert sorted(seen) == list(range(1, rows * cols + 1))
    else:
        # 3x4 has an open tour only from some squares; without one the start shows S
        assert "S" in lines[start[0]]


def test_no_tour_record_marks_start_and_says_why():
    # b5 on 5x5: (0, 1) has colour 1, the minority colour of 25 squares -> parity (no tour)
    assert Board.colour((0, 1)) == 1
    rec = record(5, 5, (0, 1), None, status="no_tour", proof="parity")
    text = board_text(rec)
    first = text.splitlines()[0]
    assert "[ S]" in first and first.index("[ S]") > first.index(".")
    assert "no tour (parity)" in text
    assert not re.search(r"\d\d", "".join(text.splitlines()[:5])[2:])


def test_tourresult_and_record_render_the_same():
    tour = lit_5x5()
    res = TourResult(
        rows=5,
        cols=5,
        start=(0, 0),
        solver="test",
        status=Status.FOUND,
        tour=np.array(tour, dtype=np.int32),
    )
    assert board_text(res) == board_text(res.to_dict()) == board_text(record(5, 5, (0, 0), tour))
    assert tour_view(res).end == (4, 0)


def test_print_board_is_plain_ascii_when_not_a_terminal():
    tour = lit_5x5()
    buf = io.StringIO()  # not a TTY, like a pipe
    print_board(record(5, 5, (0, 0), tour), file=buf)
    out = buf.getvalue()
    assert "\x1b[" not in out
    assert out == board_text(record(5, 5, (0, 0), tour))


def test_rich_board_highlights_start_end_and_checkers_squares():
    tour = backtrack_tour(6, 6, (5, 0), closed=True)
    text = board_rich(record(6, 6, (5, 0), tour, closed=True))
    styles = {}
    for span in text.spans:
        chunk = text.plain[span.start : span.end]
        if chunk.strip().isdigit() and str(span.style) != "dim":  # dim = rank labels
            styles[int(chunk)] = str(span.style)
    assert len(styles) == 36
    assert styles[1] == START and styles[36] == END
    # other squares alternate two backgrounds by colour (r + c) % 2, as on a chessboard
    by_colour: dict[int, set[str]] = {0: set(), 1: set()}
    for k in range(2, 36):
        by_colour[Board.colour(tour[k - 1])].add(styles[k])
    assert len(by_colour[0]) == 1 and len(by_colour[1]) == 1 and by_colour[0] != by_colour[1]
    # a1 is (5, 0) on 6x6: colour 1, the dark squares (a1 is dark on a chessboard)
    assert "62" in next(iter(by_colour[1]))


def test_rich_board_renders_colour_escape_codes_on_a_terminal():
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, force_terminal=True, color_system="256").print(
        board_rich(record(5, 5, (0, 0), lit_5x5()))
    )
    assert "\x1b[" in buf.getvalue()
    assert "25" in buf.getvalue()


def test_closed_flag_only_when_the_tour_really_closes():
    tour = lit_5x5()  # an open tour: a1 (end) is not a knight move from a5 (start)
    assert not tour_view(record(5, 5, (0, 0), tour, closed=True)).closed
    t6 = backtrack_tour(6, 6, (5, 0), closed=True)
    assert tour_view(record(6, 6, (5, 0), t6, closed=True)).closed


def test_off_board_tour_is_a_format_error():
    with pytest.raises(TourFormatError):
        board_text(record(5, 5, (0, 0), [(0, 0), (9, 9)]))
    with pytest.raises(TourFormatError):
        board_text({"cols": 5, "tour": None})


def test_proof_appears_in_caption_for_tourresult():
    res = TourResult(
        rows=4, cols=4, start=(0, 0), solver="test", status=Status.NO_TOUR, proof=Proof.EXHAUSTIVE
    )
    assert "no tour (exhaustive)" in board_text(res)
