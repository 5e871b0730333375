"""Terminal pictures of a knight's tour: the board with step numbers, plain or coloured.

Two renderings of the same picture:

* :func:`board_text` — plain ASCII for pipes, files and dumb terminals. Step numbers are
  right-aligned in equal-width cells for any board size; the start square is bracketed
  ``[ 1]`` and the last square parenthesised ``(64)``; rank numbers (rank 1 at the bottom)
  run down the left and file letters along the bottom, as in algebraic notation.
* :func:`board_rich` — a :class:`rich.text.Text` with checkered squares and the start (green)
  and end (red) highlighted.

:func:`print_board` picks one: ASCII when the output is not a terminal (or when asked).

Every function takes a *tour-like* object: a :class:`~knights_tour.tours.record.TourResult`, a JSON
record (``dict`` as written by ``TourResult.to_dict()``) or a :class:`TourView`. Step numbers
are 1-based as in the literature (the knight stands on step 1 at the start square).

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from knights_tour.board import Board, Square, is_knight_move
from knights_tour.errors import TourFormatError
from knights_tour.tours.record import TourResult


@dataclass(frozen=True)
class TourView:
    """What the pictures need from a result: board, tour, start, closed flag, status words.

    ``tour`` is a list of ``(row, col)`` in visiting order (row 0 at the top), or ``None`` when
    the job found no tour; it may be shorter than ``rows*cols`` (a partial path is drawn as
    far as it goes). ``closed`` is true only if a closed tour was asked for AND the tour really
    closes (its last square is a knight move from its first), so a picture never shows a
    closing move that is not there.
    """

    board: Board
    tour: list[Square] | None
    start: Square | None
    closed: bool
    status: str = "found"
    solver: str = ""
    proof: str | None = None

    @property
    def end(self) -> Square | None:
        """Last square of the tour, or ``None``."""
        return self.tour[-1] if self.tour else None

    def steps(self) -> list[list[int | None]]:
        """Step-number matrix: ``steps[row][col]`` is the 1-based step on that square, or
        ``None`` for a square the tour does not visit."""
        grid: list[list[int | None]] = [[None] * self.board.cols for _ in range(self.board.rows)]
        for k, (r, c) in enumerate(self.tour or (), start=1):
            grid[r][c] = k
        return grid

    def caption(self) -> str:
        """One line of words, e.g.
        ``"8x8 knight's tour from a1, open, 64 squares [warnsdorff]"``."""
        b = self.board
        where = f" from {b.algebraic(self.start)}" if self.start is not None else ""
        kind = "closed" if self.closed else "open"
        if self.tour and self.status == "found":
            n = len(self.tour)
            text = f"{b.label} knight's tour{where}, {kind}, {n} square{'s' if n != 1 else ''}"
        else:
            proof = f" ({self.proof})" if self.proof else ""
            text = f"{b.label}{where}: {self.status.replace('_', ' ')}{proof}"
        return text + (f" [{self.solver}]" if self.solver else "")


TourLike = TourResult | Mapping[str, Any] | TourView


def tour_view(obj: TourLike) -> TourView:
    """Normalise a :class:`TourResult`, a JSON record or a :class:`TourView` to a TourView.

    Raises
    ------
    TourFormatError
        If a record lacks ``rows``/``cols`` or its tour has squares off the board (a picture
        cannot place them; run the verifier for the full judgement).
    """
    if isinstance(obj, TourView):
        return obj
    if isinstance(obj, TourResult):
        obj = obj.to_dict()
    if not isinstance(obj, Mapping):
        raise TourFormatError(f"expected a tour record or TourResult, got {type(obj).__name__}")
    try:
        board = Board(int(obj["rows"]), int(obj["cols"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise TourFormatError(f"record needs integer 'rows' and 'cols' ({exc})") from None
    raw = obj.get("tour")
    tour: list[Square] | None = None
    if raw is not None:
        try:
            tour = [(int(r), int(c)) for r, c in raw]
        except (TypeError, ValueError):
            raise TourFormatError("record 'tour' must be a list of [row, col] pairs") from None
        bad = next((sq for sq in tour if not board.contains(sq)), None)
        if bad is not None:
            raise TourFormatError(f"tour square {bad} is off the {board.label} board")
    start_raw = obj.get("start")
    start: Square | None = None
    if start_raw is not None:
        start = board.check_square(tuple(int(v) for v in start_raw))
    elif tour:
        start = tour[0]
    closed = (
        bool(obj.get("closed", False))
        and tour is not None
        and len(tour) > 0
        and (len(tour) == 1 or is_knight_move(tour[-1], tour[0]))
    )
    status = str(obj.get("status") or ("found" if tour else "unknown"))
    return TourView(
        board=board,
        tour=tour,
        start=start,
        closed=closed,
        status=status,
        solver=str(obj.get("solver") or ""),
        proof=obj.get("proof"),
    )


def _cell_width(view: TourView) -> int:
    return len(str(view.board.n_squares))


def _grid(obj: TourLike, labels: bool) -> tuple[TourView, int, list[list[int | None]], int]:
    """What both board pictures start from: the view, the cell width (digits of rows*cols),
    the step number of each square, and the width of the rank labels (0 without labels)."""
    view = tour_view(obj)
    rank_w = len(str(view.board.rows)) if labels else 0
    return view, _cell_width(view), view.steps(), rank_w


def board_text(obj: TourLike, *, labels: bool = True) -> str:
    """The board as plain ASCII text with aligned step numbers.

    Parameters
    ----------
    obj : TourResult, record dict or TourView
    labels : bool
        Print rank numbers on the left and file letters underneath (algebraic notation).

    Returns
    -------
    str
        ``rows`` lines of cells (plus a file-letter line when ``labels``), each cell
        ``width + 2`` characters where ``width`` is the number of digits of ``rows*cols``.
        The start square is written ``[ 1]``, the last square ``(64)``, an unvisited square
        ``.``; with no tour the start square shows ``S`` in brackets. The final
        line is a legend naming the start and end squares. Ends with a newline.

    Raises
    ------
    TourFormatError
        See :func:`tour_view`.

    See Also
    --------
    board_rich : the same picture in colour, for a terminal.
    """
    view, w, steps, rank_w = _grid(obj, labels)
    b = view.board
    lines = []
    for r in range(b.rows):
        cells = []
        for c in range(b.cols):
            k = steps[r][c]
            body = str(k) if k is not None else ("S" if (r, c) == view.start else ".")
            left, right = " ", " "
            if (r, c) == view.start:
                left, right = "[", "]"
            elif (r, c) == view.end:
                left, right = "(", ")"
            cells.append(f"{left}{body:>{w}}{right}")
        prefix = f"{b.rows - r:>{rank_w}} " if labels else ""
        lines.append((prefix + "".join(cells)).rstrip())
    if labels:
        files = "".join(f" {Board.file_name(c):>{w}} " for c in range(b.cols))
        lines.append((" " * (rank_w + 1) + files).rstrip())
    legend = view.caption()
    if view.start is not None:
        legend += f"; [ ] = start {b.algebraic(view.start)}"
    if view.end is not None and view.end != view.start:
        legend += f", ( ) = end {b.algebraic(view.end)}"
    lines.append(legend)
    return "\n".join(lines) + "\n"


LIGHT = "black on grey85"
DARK = "black on grey62"
START = "bold white on green4"
END = "bold white on red3"


def board_rich(obj: TourLike, *, labels: bool = True, caption: bool = True) -> Text:
    """The board as a :class:`rich.text.Text`: checkered squares (light where
    ``(row + col) % 2 == 0``, as a1 is dark on 8×8), step numbers centred in equal-width cells,
    the start square green and the last square red, followed by a caption line (unless
    ``caption`` is false: then the text reads back with
    :func:`knights_tour.output.tourfile.parse_step_matrix`, labels and all).

    Raises
    ------
    TourFormatError
        See :func:`tour_view`.
    """
    view, w, steps, rank_w = _grid(obj, labels)
    b = view.board
    text = Text(no_wrap=True, overflow="ignore")
    for r in range(b.rows):
        if labels:
            text.append(f"{b.rows - r:>{rank_w}} ", style="dim")
        for c in range(b.cols):
            k = steps[r][c]
            body = str(k) if k is not None else ("S" if (r, c) == view.start else "")
            if (r, c) == view.start:
                style = START
            elif (r, c) == view.end:
                style = END
            else:
                style = LIGHT if Board.colour((r, c)) == 0 else DARK
            text.append(f" {body:>{w}} ", style=style)
        text.append("\n")
    if labels:
        text.append(" " * (rank_w + 1))
        text.append("".join(f" {Board.file_name(c):>{w}} " for c in range(b.cols)), style="dim")
        text.append("\n")
    if caption:
        text.append(view.caption(), style="italic")
    else:
        text.rstrip()
    return text


def print_board(
    obj: TourLike,
    *,
    ascii: bool | None = None,
    labels: bool = True,
    caption: bool = True,
    file: IO[str] | None = None,
) -> None:
    """Print the board to ``file`` (default standard output).

    Parameters
    ----------
    ascii : bool, optional
        ``True``: plain :func:`board_text`; ``False``: coloured :func:`board_rich`; ``None``
        (default): plain when ``file`` is not a terminal (pipes, redirects) or colour is off
        (``NO_COLOR``, ``TERM=dumb``), coloured otherwise.
    labels : bool
        Rank and file labels.
    caption : bool
        The coloured board's caption line (the ASCII board always has its legend).
    """
    out = file if file is not None else sys.stdout
    if ascii is None:
        console = Console(file=out)
        ascii = not console.is_terminal or console.no_color or console.color_system is None
    if ascii:
        out.write(board_text(obj, labels=labels))
        out.flush()
        return
    console = Console(file=out, highlight=False, soft_wrap=True)
    console.print(board_rich(obj, labels=labels, caption=caption))


__all__ = ["TourView", "TourLike", "tour_view", "board_text", "board_rich", "print_board"]
