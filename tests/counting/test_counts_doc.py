"""The published 7x7 grid (docs/counts/7x7-open.json) against facts from outside the code: it sums
to OEIS A165134(7), is invariant under the 8 symmetries of the square, and is 0 on every square
of the minority colour (a 49-square tour alternates colours, so both ends are on the 25-square
colour)."""

from __future__ import annotations

import json
from pathlib import Path

from knights_tour.board import Board
from knights_tour.counting.symmetry import symmetries

DOC = Path(__file__).resolve().parents[2] / "docs" / "counts" / "7x7-open.json"
A165134_7 = 165_575_218_320


def test_published_7x7_grid_is_complete_and_consistent():
    record = json.loads(DOC.read_text(encoding="utf-8"))
    grid = record["grid"]
    board = Board(7, 7)
    assert len(grid) == 7 and all(len(row) == 7 for row in grid)
    assert sum(map(sum, grid)) == record["total"] == A165134_7
    for sym in symmetries(board):
        for sq in board.squares():
            r, c = sym(sq)
            assert grid[r][c] == grid[sq[0]][sq[1]]
    for r, c in board.squares():
        minority = Board.colour((r, c)) != Board.colour((0, 0))
        assert (grid[r][c] == 0) == minority
    assert record["peak_rss_bytes"] > 0 and record["wall_s"] > 0 and record["command"]
