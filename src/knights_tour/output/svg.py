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

from dataclasses import dataclass

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
    if size_px is None:
        size_px = default_size_px(b)
    if size_px <= 0:
        raise ValueError(f"size_px must be positive, got {size_px}")
    lay = _Layout.of(b, size_px, labels)
    if numbers is None:
        numbers = lay.font_px >= MIN_FONT_PX and lay.side <= 40
    dwg = _document(view, lay, id_prefix)
    _draw_board(dwg, b, lay)
    if lay.labels:
        _draw_labels(dwg, b, lay)
    _draw_ends(dwg, view, lay)
    if view.tour:
        _draw_path(dwg, view, lay, id_prefix, numbers)
    return dwg.tostring()


@dataclass(frozen=True)
class _Layout:
    """Geometry of one drawing, in px: square size, margins, stroke and font sizes."""

    side: int
    cell: float
    labels: bool
    label_px: float
    margin: float
    ox: float
    oy: float
    width: float
    height: float
    dense: bool
    stroke: float
    font_px: float

    @classmethod
    def of(cls, b: Board, size_px: int, labels: bool | None) -> _Layout:
        side = max(b.rows, b.cols)
        cell = size_px / side
        if labels is None:
            labels = cell >= 14 and side <= 52
        label_px = max(9.0, min(16.0, cell * 0.32))
        margin = label_px * 1.9 if labels else 0.0
        pad = max(1.0, cell * 0.04)
        ox, oy = margin + pad, pad
        dense = cell < DENSE_CELL_PX
        return cls(
            side=side,
            cell=cell,
            labels=labels,
            label_px=label_px,
            margin=margin,
            ox=ox,
            oy=oy,
            width=ox + b.cols * cell + pad,
            height=oy + b.rows * cell + margin + pad,
            dense=dense,
            stroke=max(0.6, cell * (0.1 if dense else 0.07)),
            font_px=number_font_px(b, cell),
        )

    def centre(self, sq: tuple[int, int]) -> tuple[float, float]:
        """Centre of square ``sq`` (row, col)."""
        return self.ox + (sq[1] + 0.5) * self.cell, self.oy + (sq[0] + 0.5) * self.cell


def _document(view: TourView, lay: _Layout, id_prefix: str) -> svgwrite.Drawing:
    """The ``<svg>`` element with its data attributes, scoped CSS and the vertex-dot marker."""
    b = view.board
    dwg = svgwrite.Drawing(size=(_f(lay.width), _f(lay.height)), profile="full", debug=False)
    dwg.viewbox(0, 0, float(_f(lay.width)), float(_f(lay.height)))
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
    font_px = lay.font_px
    css = (
        f"#{id_prefix} .kt-lab{{font:{_f(lay.label_px)}px sans-serif;fill:#555;"
        "text-anchor:middle;dominant-baseline:central}"
        f"#{id_prefix} .kt-n{{font:600 {_f(font_px)}px sans-serif;fill:#111;text-anchor:middle;"
        f"dominant-baseline:central;paint-order:stroke;stroke:#fff;"
        f"stroke-width:{_f(max(0.5, font_px * 0.22))}px;stroke-linejoin:round}}"
    )
    dwg.defs.add(dwg.style(css))
    dot = dwg.marker(id=f"{id_prefix}-dot", insert=(1, 1), size=(2, 2), orient="auto")
    dot.attribs["markerUnits"] = "strokeWidth"
    dot.add(dwg.circle(center=(1, 1), r=1, fill=PATH))
    dwg.defs.add(dot)
    return dwg


def _draw_board(dwg: svgwrite.Drawing, b: Board, lay: _Layout) -> None:
    """Light background, all dark squares as one path."""
    light, dark_fill = (LIGHT_DENSE, DARK_DENSE) if lay.dense else (LIGHT, DARK)
    ox, oy, cell = lay.ox, lay.oy, lay.cell
    dwg.add(
        dwg.rect(
            insert=(_f(ox), _f(oy)),
            size=(_f(b.cols * cell), _f(b.rows * cell)),
            fill=light,
            class_="kt-board",
        )
    )
    c = _f(cell)
    dark = "".join(
        f"M{_f(ox + col * cell)} {_f(oy + row * cell)}h{c}v{c}h-{c}z"
        for row in range(b.rows)
        for col in range(b.cols)
        if (row + col) % 2 == 1
    )
    if dark:
        dwg.add(dwg.path(d=dark, fill=dark_fill, class_="kt-dark"))


def _draw_labels(dwg: svgwrite.Drawing, b: Board, lay: _Layout) -> None:
    """Rank numbers on the left, file letters below."""
    for row in range(b.rows):
        y = lay.centre((row, 0))[1]
        dwg.add(
            dwg.text(
                str(b.rows - row), insert=(_f(lay.ox - lay.margin / 2), _f(y)), class_="kt-lab"
            )
        )
    bottom = lay.oy + b.rows * lay.cell + lay.margin / 2
    for col in range(b.cols):
        dwg.add(
            dwg.text(
                Board.file_name(col),
                insert=(_f(lay.centre((0, col))[0]), _f(bottom)),
                class_="kt-lab",
            )
        )


def _draw_ends(dwg: svgwrite.Drawing, view: TourView, lay: _Layout) -> None:
    """The start square (green) and, if different, the end square (red)."""
    marks = [(view.start, 0.34, START, "kt-start")]
    if view.end != view.start:
        marks.append((view.end, 0.28, END, "kt-end"))
    for sq, radius, fill, cls in marks:
        if sq is not None:
            x, y = lay.centre(sq)
            dwg.add(
                dwg.circle(
                    center=(_f(x), _f(y)),
                    r=_f(lay.cell * radius),
                    fill=fill,
                    stroke="#fff",
                    stroke_width=_f(lay.stroke * 0.6),
                    class_=cls,
                )
            )


def _draw_path(
    dwg: svgwrite.Drawing, view: TourView, lay: _Layout, id_prefix: str, numbers: bool
) -> None:
    """The knight's path as one polyline (closed tours return to the start), and step numbers."""
    tour = view.tour or []
    pts = [lay.centre(sq) for sq in tour]
    if view.closed and len(tour) > 1:
        pts.append(pts[0])
    line = dwg.polyline(
        points=[(float(_f(x)), float(_f(y))) for x, y in pts],
        fill="none",
        stroke=PATH,
        stroke_width=_f(lay.stroke),
        stroke_linejoin="round",
        stroke_linecap="round",
        stroke_opacity="0.85",
        class_="kt-path",
    )
    if lay.cell >= 6:
        line.attribs["marker-mid"] = f"url(#{id_prefix}-dot)"
    dwg.add(line)
    if numbers:
        g = dwg.g(class_="kt-nums")
        for k, sq in enumerate(tour, start=1):
            x, y = lay.centre(sq)
            g.add(dwg.text(str(k), insert=(_f(x), _f(y)), class_="kt-n"))
        dwg.add(g)


__all__ = ["tour_svg", "default_size_px", "number_font_px"]
