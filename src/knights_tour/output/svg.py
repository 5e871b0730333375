"""SVG drawings of a knight's tour: a chessboard with the knight's path on it.

:func:`tour_svg` draws, with :mod:`svgwrite`:

* the board, checkered (light where ``(row + col) % 2 == 0``, so a1 is dark on 8×8 as on a real
  chessboard), row 0 at the top, with rank numbers on the left (rank 1 at the bottom) and file
  letters underneath when there is room;
* the tour as ONE ``<polyline class="kt-path">`` through the centres of the squares in visiting
  order — ``rows*cols`` points for an open tour, one more (back to the start) for a closed
  (re-entrant) tour, so the closing move is drawn;
* the start square marked by a green disc (``class="kt-start"``) and the last square by a red
  disc (``class="kt-end"``);
* step numbers (1-based) on the squares, when asked or when they fit.

Legibility from 1×1 to beyond 100×100: the picture's size, stroke width, vertex dots and font
all scale with the square size, and step numbers are dropped automatically when they would be
smaller than :data:`MIN_FONT_PX`. Dark squares are one ``<path>``, vertex dots are an SVG
marker, and styling is one ``<style>`` block, so a 100×100 drawing stays a few hundred kB.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import os
from pathlib import Path

import svgwrite

from knights_tour.board import Board
from knights_tour.output.render import TourLike, TourView, tour_view

LIGHT = "#f0d9b5"
DARK = "#b58863"
LIGHT_DENSE = "#f8f1e6"
DARK_DENSE = "#e2cdb0"
DENSE_CELL_PX = 24.0
"""Below this square size the board is drawn in muted colours and the path a little thicker,
so the path, not the checkering, is what the eye follows on big boards."""
PATH = "#1d3f8f"
START = "#2e7d32"
END = "#c62828"

MIN_FONT_PX = 8.0
"""Step numbers smaller than this (in px at the drawing's own size) are left out when
``numbers=None``."""

MAX_AUTO_PX = 1600
MIN_AUTO_PX = 320


def default_size_px(board: Board) -> int:
    """The drawing size used when ``size_px`` is not given: 60 px per square on the longer
    side, clamped to 320..1600 px (so 8×8 is 480 px and 100×100 is 1600 px = 16 px squares)."""
    return int(min(MAX_AUTO_PX, max(MIN_AUTO_PX, 60 * max(board.rows, board.cols))))


def _f(x: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def number_font_px(board: Board, cell: float) -> float:
    """Font size for step numbers on squares of ``cell`` px: at most 32 % of the square, and
    narrow enough for the widest number (digits of ``rows*cols``, ~0.6 em each)."""
    digits = len(str(board.n_squares))
    return min(cell * 0.32, cell * 0.8 / (0.6 * digits))


def tour_svg(
    record_or_result: TourLike,
    numbers: bool | None = None,
    size_px: int | None = None,
    *,
    labels: bool | None = None,
    id_prefix: str = "kt",
) -> str:
    """Draw a tour as an SVG document (see the module docstring for what is drawn).

    Parameters
    ----------
    record_or_result : TourResult, JSON record dict or TourView
        The tour to draw; a record without a tour (``no_tour``/``unknown``) draws the board with
        the start square marked.
    numbers : bool, optional
        Show 1-based step numbers. ``None`` (default): only when they are at least
        :data:`MIN_FONT_PX` px high and the board is at most 40 squares on a side.
    size_px : int, optional
        Length in px of the board's longer side (labels add a margin). Default
        :func:`default_size_px`. The SVG has a ``viewBox``, so it scales cleanly.
    labels : bool, optional
        Rank/file labels; default when squares are at least 14 px and the board is at most
        52 squares on a side.
    id_prefix : str
        The ``id`` of the ``<svg>`` element and prefix of the ids inside it (the vertex-dot
        marker); the CSS is scoped to it, so several drawings can be inlined in one HTML page
        if each has its own prefix.

    Returns
    -------
    str
        The ``<svg>`` element as text (no XML declaration), with attributes
        ``data-rows``, ``data-cols``, ``data-start`` (algebraic) and ``data-closed``.

    Raises
    ------
    TourFormatError
        If the record cannot be read (see :func:`knights_tour.output.render.tour_view`).
    ValueError
        If ``size_px`` is not positive.
    """
    view = tour_view(record_or_result)
    b = view.board
    side = max(b.rows, b.cols)
    if size_px is None:
        size_px = default_size_px(b)
    if size_px <= 0:
        raise ValueError(f"size_px must be positive, got {size_px}")
    cell = size_px / side
    if labels is None:
        labels = cell >= 14 and side <= 52
    label_px = max(9.0, min(16.0, cell * 0.32))
    margin = label_px * 1.9 if labels else 0.0
    pad = max(1.0, cell * 0.04)
    ox, oy = margin + pad, pad
    width = ox + b.cols * cell + pad
    height = oy + b.rows * cell + margin + pad
    dense = cell < DENSE_CELL_PX
    light, dark_fill = (LIGHT_DENSE, DARK_DENSE) if dense else (LIGHT, DARK)
    stroke = max(0.6, cell * (0.1 if dense else 0.07))
    font_px = number_font_px(b, cell)
    if numbers is None:
        numbers = font_px >= MIN_FONT_PX and side <= 40

    def centre(sq: tuple[int, int]) -> tuple[float, float]:
        return ox + (sq[1] + 0.5) * cell, oy + (sq[0] + 0.5) * cell

    dwg = svgwrite.Drawing(size=(_f(width), _f(height)), profile="full", debug=False)
    dwg.viewbox(0, 0, float(_f(width)), float(_f(height)))
    dwg.attribs["id"] = id_prefix
    dwg.attribs["class"] = "kt-tour"
    dwg.attribs["data-rows"] = str(b.rows)
    dwg.attribs["data-cols"] = str(b.cols)
    if view.start is not None:
        dwg.attribs["data-start"] = b.algebraic(view.start)
    dwg.attribs["data-closed"] = "true" if view.closed else "false"
    dwg.set_desc(title=view.caption())

    # Selectors are scoped by the root id: a <style> inside inline SVG applies to the whole
    # HTML page, and several drawings with different font sizes may share one page.
    css = (
        f"#{id_prefix} .kt-lab{{font:{_f(label_px)}px sans-serif;fill:#555;text-anchor:middle;"
        "dominant-baseline:central}"
        f"#{id_prefix} .kt-n{{font:600 {_f(font_px)}px sans-serif;fill:#111;text-anchor:middle;"
        f"dominant-baseline:central;paint-order:stroke;stroke:#fff;"
        f"stroke-width:{_f(max(0.5, font_px * 0.22))}px;stroke-linejoin:round}}"
    )
    dwg.defs.add(dwg.style(css))
    dot = dwg.marker(id=f"{id_prefix}-dot", insert=(1, 1), size=(2, 2), orient="auto")
    dot.attribs["markerUnits"] = "strokeWidth"
    dot.add(dwg.circle(center=(1, 1), r=1, fill=PATH))
    dwg.defs.add(dot)

    # Board: light background, all dark squares as one path.
    dwg.add(dwg.rect(insert=(_f(ox), _f(oy)), size=(_f(b.cols * cell), _f(b.rows * cell)),
                     fill=light, class_="kt-board"))
    c = _f(cell)
    dark = "".join(
        f"M{_f(ox + col * cell)} {_f(oy + row * cell)}h{c}v{c}h-{c}z"
        for row in range(b.rows)
        for col in range(b.cols)
        if (row + col) % 2 == 1
    )
    if dark:
        dwg.add(dwg.path(d=dark, fill=dark_fill, class_="kt-dark"))

    if labels:
        for row in range(b.rows):
            y = centre((row, 0))[1]
            dwg.add(dwg.text(str(b.rows - row), insert=(_f(ox - margin / 2), _f(y)),
                             class_="kt-lab"))
        for col in range(b.cols):
            dwg.add(dwg.text(Board.file_name(col),
                             insert=(_f(centre((0, col))[0]), _f(oy + b.rows * cell + margin / 2)),
                             class_="kt-lab"))

    if view.start is not None:
        x, y = centre(view.start)
        dwg.add(dwg.circle(center=(_f(x), _f(y)), r=_f(cell * 0.34), fill=START,
                           stroke="#fff", stroke_width=_f(stroke * 0.6), class_="kt-start"))
    if view.end is not None and view.end != view.start:
        x, y = centre(view.end)
        dwg.add(dwg.circle(center=(_f(x), _f(y)), r=_f(cell * 0.28), fill=END,
                           stroke="#fff", stroke_width=_f(stroke * 0.6), class_="kt-end"))

    if view.tour:
        pts = [centre(sq) for sq in view.tour]
        if view.closed and len(view.tour) > 1:
            pts.append(pts[0])
        line = dwg.polyline(
            points=[(float(_f(x)), float(_f(y))) for x, y in pts],
            fill="none",
            stroke=PATH,
            stroke_width=_f(stroke),
            stroke_linejoin="round",
            stroke_linecap="round",
            stroke_opacity="0.85",
            class_="kt-path",
        )
        if cell >= 6:
            line.attribs["marker-mid"] = f"url(#{id_prefix}-dot)"
        dwg.add(line)
        if numbers:
            g = dwg.g(class_="kt-nums")
            for k, sq in enumerate(view.tour, start=1):
                x, y = centre(sq)
                g.add(dwg.text(str(k), insert=(_f(x), _f(y)), class_="kt-n"))
            dwg.add(g)
    return dwg.tostring()


def write_svg(
    record_or_result: TourLike,
    path: str | os.PathLike[str],
    numbers: bool | None = None,
    size_px: int | None = None,
) -> Path:
    """Write :func:`tour_svg` to ``path`` (UTF-8, with an XML declaration); return the path.

    Raises
    ------
    TourFormatError
        If the record cannot be read. ``OSError`` if the file cannot be written.
    """
    out = Path(path)
    text = tour_svg(record_or_result, numbers=numbers, size_px=size_px)
    out.write_text('<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n", encoding="utf-8")
    return out


__all__ = ["tour_svg", "write_svg", "default_size_px", "number_font_px", "TourView"]
