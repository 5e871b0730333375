"""SVG tour drawings (knights_tour.output.svg): well-formed XML, one path point per square (+1
back to the start when closed), every point in the centre of its square with row 0 at the top, start
and end where they belong, legible from 1x1 to 100x100."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET

import pytest
from _picture_tours import backtrack_tour, lit_5x5, record

from knights_tour.board import Board
from knights_tour.output.svg import MIN_FONT_PX, tour_svg
from knights_tour.tours.record import Status, TourResult

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(svg_text: str) -> ET.Element:
    root = ET.fromstring(svg_text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def board_rect(root: ET.Element) -> tuple[float, float, float, float]:
    rect = root.find(".//s:rect[@class='kt-board']", NS)
    assert rect is not None
    return tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))  # type: ignore[return-value]


def path_points(root: ET.Element) -> list[tuple[float, float]]:
    line = root.find(".//s:polyline[@class='kt-path']", NS)
    assert line is not None
    return [tuple(map(float, p.split(","))) for p in line.get("points").split()]  # type: ignore[misc]


def square_at(root: ET.Element, rows: int, cols: int, x: float, y: float) -> tuple[int, int]:
    """Which square (row, col) of the drawn board contains the point (x, y)."""
    bx, by, bw, bh = board_rect(root)
    assert bx <= x <= bx + bw and by <= y <= by + bh
    return int((y - by) / (bh / rows)), int((x - bx) / (bw / cols))


def circle_centre(root: ET.Element, cls: str) -> tuple[float, float] | None:
    c = root.find(f".//s:circle[@class='{cls}']", NS)
    return None if c is None else (float(c.get("cx")), float(c.get("cy")))


def test_open_5x5_literature_tour_points_squares_and_markers():
    tour = lit_5x5()
    root = parse(tour_svg(record(5, 5, (0, 0), tour)))
    pts = path_points(root)
    assert len(pts) == 25
    for (x, y), sq in zip(pts, tour, strict=True):
        assert square_at(root, 5, 5, x, y) == sq
    # start a5 = (0, 0) is the TOP-left square; the end (step 25) is a1, bottom-left
    assert square_at(root, 5, 5, *circle_centre(root, "kt-start")) == (0, 0)
    assert square_at(root, 5, 5, *circle_centre(root, "kt-end")) == (4, 0)
    assert root.get("data-start") == "a5" and root.get("data-closed") == "false"
    # every step of the drawn path is a knight move: length sqrt(5) squares
    cell = board_rect(root)[2] / 5
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        assert math.hypot(x1 - x0, y1 - y0) == pytest.approx(math.sqrt(5) * cell, abs=0.05)


def test_closed_tour_returns_to_the_start():
    tour = backtrack_tour(6, 6, (5, 0), closed=True)
    root = parse(tour_svg(record(6, 6, (5, 0), tour, closed=True)))
    pts = path_points(root)
    assert len(pts) == 36 + 1 and pts[-1] == pts[0]
    assert root.get("data-closed") == "true" and root.get("data-start") == "a1"
    # a1 is the bottom-left square: left sixth and bottom sixth of the board
    bx, by, bw, bh = board_rect(root)
    sx, sy = circle_centre(root, "kt-start")
    assert bx < sx < bx + bw / 6 and by + bh * 5 / 6 < sy < by + bh


def test_step_numbers_on_their_squares_and_optional():
    tour = lit_5x5()
    root = parse(tour_svg(record(5, 5, (0, 0), tour)))
    texts = root.findall(".//s:text[@class='kt-n']", NS)
    assert sorted(int(t.text) for t in texts) == list(range(1, 26))
    for t in texts:
        assert square_at(root, 5, 5, float(t.get("x")), float(t.get("y"))) == tour[int(t.text) - 1]
    off = parse(tour_svg(record(5, 5, (0, 0), tour), numbers=False))
    assert off.findall(".//s:text[@class='kt-n']", NS) == []
    assert len(path_points(off)) == 25


def test_dark_squares_follow_the_chessboard_a1_is_dark():
    tour = backtrack_tour(8, 8, (7, 0), closed=True)
    root = parse(tour_svg(record(8, 8, (7, 0), tour, closed=True), size_px=400))
    dark = root.find(".//s:path[@class='kt-dark']", NS).get("d")
    starts = [tuple(map(float, m)) for m in re.findall(r"M([\d.]+) ([\d.]+)", dark)]
    assert len(starts) == 32
    bx, by, bw, bh = board_rect(root)
    cell = bw / 8
    dark_squares = {(round((y - by) / cell), round((x - bx) / cell)) for x, y in starts}
    assert (7, 0) in dark_squares  # a1 dark (laws of chess: h1 is a light square)
    assert (7, 7) not in dark_squares
    assert dark_squares == {(r, c) for r in range(8) for c in range(8) if Board.colour((r, c))}


def test_one_by_one_board():
    root = parse(tour_svg(record(1, 1, (0, 0), [(0, 0)])))
    assert len(path_points(root)) == 1
    assert circle_centre(root, "kt-start") is not None
    assert circle_centre(root, "kt-end") is None  # the end is the start


def test_no_tour_draws_board_and_start_only():
    res = TourResult(rows=5, cols=5, start=(0, 1), solver="test", status=Status.NO_TOUR)
    root = parse(tour_svg(res))
    assert root.find(".//s:polyline", NS) is None
    assert square_at(root, 5, 5, *circle_centre(root, "kt-start")) == (0, 1)
    assert "no tour" in root.find("s:title", NS).text


def test_100x100_stays_legible_and_small():
    # Legibility and size depend on the number of squares, not on the moves: a row-by-row
    # path of 10000 squares stands in for a tour here (drawing does not judge tours).
    n = 100
    path = [(r, c if r % 2 == 0 else n - 1 - c) for r in range(n) for c in range(n)]
    text = tour_svg(record(n, n, (0, 0), path))
    root = parse(text)
    assert len(path_points(root)) == n * n
    assert root.findall(".//s:text[@class='kt-n']", NS) == []  # numbers dropped: too dense
    cell = board_rect(root)[2] / n
    assert cell >= 10  # default size gives squares big enough to follow the path
    line = root.find(".//s:polyline[@class='kt-path']", NS)
    stroke = float(line.get("stroke-width"))
    assert 0.5 <= stroke <= cell / 5  # scaled with the square, thin enough not to merge
    assert len(text) < 1_000_000


def test_numbers_auto_follow_font_size():
    tour = backtrack_tour(12, 12, (11, 0))
    rec = record(12, 12, (11, 0), tour)
    big = parse(tour_svg(rec, size_px=720))
    assert len(big.findall(".//s:text[@class='kt-n']", NS)) == 144
    # 12x12 at 120 px: 10 px squares, 3-digit numbers would be ~4 px: left out
    small = parse(tour_svg(rec, size_px=120))
    assert small.findall(".//s:text[@class='kt-n']", NS) == []
    assert MIN_FONT_PX > 4
    forced = parse(tour_svg(rec, size_px=120, numbers=True))
    assert len(forced.findall(".//s:text[@class='kt-n']", NS)) == 144


def test_two_drawings_can_share_a_page():
    a = tour_svg(record(5, 5, (0, 0), lit_5x5()), id_prefix="one")
    b = tour_svg(record(5, 5, (0, 0), lit_5x5()), id_prefix="two")
    page = parse(f'<svg xmlns="http://www.w3.org/2000/svg">{a}{b}</svg>')
    ids = [e.get("id") for e in page.iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    assert "#one .kt-n" in a and "#two .kt-n" in b


def test_the_drawing_parses_with_every_square_of_the_tour_and_refuses_a_bad_size():
    root = ET.fromstring(tour_svg(record(5, 5, (0, 0), lit_5x5())))
    assert len(path_points(root)) == 25
    with pytest.raises(ValueError):
        tour_svg(record(5, 5, (0, 0), lit_5x5()), size_px=0)


# -- ktour draw / ktour solve --svg ---------------------------------------------------------
def test_cli_draw_jsonl_by_start_and_size(tmp_path):
    import json

    from knights_tour.cli import main

    t6 = backtrack_tour(6, 6, (5, 0), closed=True)
    recs = [
        record(5, 5, (4, 0), backtrack_tour(5, 5, (4, 0))),
        record(6, 6, (5, 0), t6, closed=True),
    ]
    src = tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "a1.svg"
    assert main(["draw", str(src), "--start", "a1", "--size", "6", "--svg", str(out)]) == 0
    root = ET.parse(out).getroot()
    assert (root.get("data-rows"), root.get("data-start"), root.get("data-closed")) == (
        "6",
        "a1",
        "true",
    )
    assert len(path_points(root)) == 37
    # a1 exists on both boards: without --size the choice is refused (exit 2), not guessed
    assert main(["draw", str(src), "--start", "a1", "--svg", str(tmp_path / "x.svg")]) == 2
    assert not (tmp_path / "x.svg").exists()
    assert main(["draw", str(src), "--index", "1", "--svg", str(tmp_path / "y.svg")]) == 0
    assert ET.parse(tmp_path / "y.svg").getroot().get("data-rows") == "5"


def test_cli_draw_of_records_whose_sizes_are_written_two_ways(tmp_path, capsys):
    """A file whose records write a board's size as a number in one and as text in another
    (bad data a user may hand in): the matches are listed or picked, never a traceback."""
    import json

    from knights_tour.cli import main

    recs = [
        record(5, 5, (4, 0), backtrack_tour(5, 5, (4, 0))),
        record(6, 6, (5, 0), backtrack_tour(6, 6, (5, 0), closed=True), closed=True),
    ]
    recs[1]["rows"], recs[1]["cols"] = "6", "6"
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["draw", str(src), "--start", "a1"]) == 2
    assert "boards 5x5, 6x6" in capsys.readouterr().err
    assert main(["draw", str(src), "--start", "a1", "--index", "2", "--svg", "-"]) == 0
    assert 'data-rows="6"' in capsys.readouterr().out


def test_cli_draw_step_matrix_to_terminal_and_svg(tmp_path, capsys):
    from _picture_tours import LIT_5X5

    from knights_tour.cli import main

    src = tmp_path / "tour.txt"
    src.write_text(LIT_5X5)
    assert main(["draw", str(src)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("5 [ 1] 20 ")  # ASCII: captured stdout is no TTY
    assert main(["draw", str(src), "--svg", str(tmp_path / "t.svg"), "--no-numbers"]) == 0
    root = ET.parse(tmp_path / "t.svg").getroot()
    assert len(path_points(root)) == 25 and root.get("data-start") == "a5"
    assert root.findall(".//s:text[@class='kt-n']", NS) == []


def test_cli_draw_warns_about_an_invalid_tour(tmp_path, capsys):
    from knights_tour.cli import main

    src = tmp_path / "bad.txt"
    src.write_text("1 2\n3 4\n")  # 2x2: consecutive squares are not knight moves
    assert main(["draw", str(src), "--svg", str(tmp_path / "b.svg")]) == 0
    assert "not a valid knight's tour" in capsys.readouterr().err
    assert main(["draw", str(tmp_path / "missing.txt")]) == 2


def test_cli_solve_svg_and_ascii(tmp_path, capsys):
    from knights_tour.cli import main

    out = tmp_path / "s.svg"
    rc = main(["solve", "5", "a1", "--ascii", "--svg", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "[ 1]" in text.splitlines()[4]  # rank 1 is the fifth line: a1 bottom-left
    root = ET.parse(out).getroot()
    assert len(path_points(root)) == 25 and root.get("data-start") == "a1"


def test_cli_draw_of_a_no_tour_record_draws_what_solve_svg_draws(tmp_path, capsys):
    """b1 of 5x5 is on the minority colour: no open tour (colour parity). ``solve --svg``
    draws its board and start square; ``draw`` of its record draws the same picture."""
    from knights_tour.cli import main

    solved = tmp_path / "solve.svg"
    assert main(["solve", "5", "b1", "--json", "--svg", str(solved)]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["status"] == "no_tour" and rec["tour"] is None
    src = tmp_path / "rec.json"
    src.write_text(json.dumps(rec))
    drawn = tmp_path / "draw.svg"
    assert main(["draw", str(src), "--svg", str(drawn)]) == 0
    assert "holds no tour (status no_tour)" in capsys.readouterr().err
    assert drawn.read_text() == solved.read_text()
    root = ET.parse(drawn).getroot()
    assert root.get("data-start") == "b1"
    assert root.find(".//s:polyline[@class='kt-path']", NS) is None  # no path: no tour
    assert main(["draw", str(src)]) == 0  # and on the terminal: the board, start marked
    assert "[ S]" in capsys.readouterr().out.splitlines()[4]
    assert main(["verify", str(src)]) == 2  # nothing to verify, as before


def test_cli_solve_svg_to_an_unwritable_path_fails_before_solving(tmp_path, capsys):
    from knights_tour.cli import main

    for bad in (tmp_path / "missing" / "s.svg", tmp_path):
        assert main(["solve", "5", "a1", "--svg", str(bad)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"ktour: error: cannot write {bad}")
