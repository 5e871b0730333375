"""Reading and writing tours as files: step-number matrices, JSON records and JSON Lines.

A **step-number matrix** is the way knight's tours are usually printed: one line per board row,
row 0 (the top row, rank ``rows`` in algebraic notation) first, whitespace-separated numbers, the
number ``k`` on a square meaning the knight visits that square at step ``k``. Steps are 1-based
as in the literature (``1 .. rows*cols``); a 0-based matrix (``0 .. rows*cols-1``) is also
accepted and detected by its smallest number. For example the 5×5 open tour from a5::

     1 14  9 20  3
    24 19  2 15 10
    13  8 25  4 21
    18 23  6 11 16
     7 12 17 22  5

Lines starting with ``#`` are comments (``ktour solve`` writes its status line that way, so its
output can be piped into ``ktour verify``). A matrix printed with rank/file labels (a rank number
in front of each row and a final line of file letters, as ``ktour solve --labels`` prints it) is
read too.

A **JSON record** is one object as written by :meth:`knights_tour.tours.record.TourResult.to_dict`
(fields ``rows``, ``cols``, ``tour`` = list of ``[row, col]``; ``start``, ``closed`` optional). A
JSON Lines file holds one record per line.

Writing is elsewhere: files are written atomically by :mod:`knights_tour.output.atomicfile`
and records as lines by :mod:`knights_tour.output.recordfile`.

This module imports neither Celery nor Redis.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from knights_tour.board import Board, Square
from knights_tour.errors import InvalidBoardError, NoTourError, StepNumbersError, TourFormatError

T = TypeVar("T")

MAX_TOUR_FILE_BYTES = 64 * 1024 * 1024
"""Largest tour file :func:`read_tour_file` reads (64 MiB: a 2000×2000 step matrix fits)."""

_INT_RE = re.compile(r"^[+-]?\d+$")
_FILES_RE = re.compile(r"^[a-z]+$")


def _data_lines(text: str) -> list[tuple[int, str]]:
    """Non-blank, non-comment lines with their 1-based line numbers."""
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            out.append((lineno, stripped))
    return out


def parse_step_matrix(text: str) -> tuple[Board, list[Square]]:
    """Read a step-number matrix (see the module docstring) into a board and a tour.

    Parameters
    ----------
    text : str
        The matrix: one line per row, row 0 (top) first; 1-based or 0-based step numbers.

    Returns
    -------
    (Board, list of (row, col))
        The board (``rows`` = number of lines, ``cols`` = numbers per line) and the tour, i.e.
        the squares in step order, a list of length ``rows*cols``. Whether the tour is a *knight's*
        tour is not checked here: that is :func:`knights_tour.tours.verify.verify_tour`'s job.

    Raises
    ------
    TourFormatError
        With the line (and column) of the problem: no numbers at all, ragged rows, a token that
        is not an integer, numbers that do not start at 0 or 1, a number out of range, a number
        used twice, or a number missing (the last four as :class:`StepNumbersError`: a
        well-formed matrix that is not a tour).
    """
    board, tour, _base = _parse_matrix(text)
    return board, tour


def _strip_labels(rows_tokens: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
    """Drop the optional labels: a last line of file letters "a b c ..." and a rank number
    before each row (checked); rows without labels are returned as they are."""
    last_lineno, last_tokens = rows_tokens[-1]
    if len(rows_tokens) > 1 and all(_FILES_RE.match(t) for t in last_tokens):
        expected = [Board.file_name(c) for c in range(len(last_tokens))]
        if last_tokens != expected:
            raise TourFormatError(
                f"line {last_lineno}: file labels {' '.join(last_tokens)!r} are not "
                f"{' '.join(expected)!r}"
            )
        rows_tokens = rows_tokens[:-1]
        n_rows = len(rows_tokens)
        stripped = []
        for i, (lineno, tokens) in enumerate(rows_tokens):
            if len(tokens) != len(last_tokens) + 1:
                raise TourFormatError(
                    f"line {lineno}: expected a rank label and {len(last_tokens)} numbers, "
                    f"found {len(tokens)} fields"
                )
            if tokens[0] != str(n_rows - i):
                raise TourFormatError(
                    f"line {lineno}: rank label {tokens[0]!r} should be {n_rows - i}"
                )
            stripped.append((lineno, tokens[1:]))
        rows_tokens = stripped
    return rows_tokens


def _parse_matrix(text: str) -> tuple[Board, list[Square], int]:
    """:func:`parse_step_matrix`, also returning the detected base (0 or 1)."""
    lines = _data_lines(text)
    if not lines:
        raise TourFormatError("no step numbers found (empty file?)")
    rows_tokens = _strip_labels([(lineno, line.split()) for lineno, line in lines])
    n_rows = len(rows_tokens)
    n_cols = len(rows_tokens[0][1])
    for lineno, tokens in rows_tokens:
        if len(tokens) != n_cols:
            raise TourFormatError(
                f"line {lineno}: ragged rows: {len(tokens)} numbers, but the first row has {n_cols}"
            )
    try:
        board = Board(n_rows, n_cols)
    except InvalidBoardError as exc:  # pragma: no cover - Board limits are far above the cap
        raise TourFormatError(f"matrix is not a valid board: {exc}") from None

    numbers: list[list[int]] = []
    for lineno, tokens in rows_tokens:
        row = []
        for col, token in enumerate(tokens, start=1):
            if not _INT_RE.match(token):
                raise TourFormatError(
                    f"line {lineno}, column {col}: {token!r} is not a step number"
                )
            row.append(int(token))
        numbers.append(row)

    n = board.n_squares
    base = min(min(row) for row in numbers)
    if base not in (0, 1):
        raise StepNumbersError(f"step numbers must start at 1 (or 0), but the smallest is {base}")
    where: dict[int, tuple[int, int]] = {}
    for r, row in enumerate(numbers):
        lineno = rows_tokens[r][0]
        for c, k in enumerate(row):
            if not base <= k < base + n:
                raise StepNumbersError(
                    f"step {k} is out of range {base}..{base + n - 1} for a {board.label} "
                    f"board (line {lineno}, column {c + 1})"
                )
            if k in where:
                pr, pc = where[k]
                raise StepNumbersError(
                    f"step {k} appears twice (line {rows_tokens[pr][0]}, column {pc + 1} and "
                    f"line {lineno}, column {c + 1})"
                )
            where[k] = (r, c)
    # All n numbers are distinct and in a range of n values, so none is missing.
    tour = [where[k] for k in range(base, base + n)]
    return board, tour, base


def format_step_matrix(
    board: Board, tour: Sequence[Sequence[int]], *, labels: bool = False, base: int = 1
) -> str:
    """Print a tour as a step-number matrix: row 0 at the top, columns right-aligned.

    Parameters
    ----------
    board : Board
    tour : sequence of (row, col)
        Squares in visiting order, length ``rows*cols`` (a partial tour leaves ``.`` on the
        squares never visited).
    labels : bool
        Prefix each row with its rank and add a final line of file letters (algebraic
        notation: rank 1 at the bottom, file ``a`` on the left).
    base : int
        Number of the first step, 1 (default, as in the literature) or 0.

    Returns
    -------
    str
        The matrix, one line per row, ending with a newline. :func:`parse_step_matrix` reads it
        back.

    Raises
    ------
    TourFormatError
        If a square of the tour is off the board or repeated.
    """
    grid: list[list[str]] = [["." for _ in range(board.cols)] for _ in range(board.rows)]
    for step, sq in enumerate(tour):
        r, c = int(sq[0]), int(sq[1])
        if not board.contains((r, c)):
            raise TourFormatError(f"step {step + base} {(r, c)} is off the {board.label} board")
        if grid[r][c] != ".":
            raise TourFormatError(f"square {(r, c)} is visited twice")
        grid[r][c] = str(step + base)
    width = max(len(str(board.n_squares - 1 + base)), 1)
    rank_width = len(str(board.rows))
    lines = []
    for r, row in enumerate(grid):
        cells = " ".join(cell.rjust(width) for cell in row)
        lines.append(f"{str(board.rows - r).rjust(rank_width)}  {cells}" if labels else cells)
    if labels:
        files = " ".join(Board.file_name(c).rjust(width) for c in range(board.cols))
        lines.append(" " * (rank_width + 2) + files)
    return "\n".join(lines) + "\n"


def _read_limited(path: str | os.PathLike[str], max_bytes: int) -> str:
    """Read a text file (``"-"`` = stdin), refusing anything larger than ``max_bytes``."""
    if str(path) == "-":
        data = (
            sys.stdin.buffer.read(max_bytes + 1)
            if hasattr(sys.stdin, "buffer")
            else (sys.stdin.read(max_bytes + 1).encode())
        )
        name = "stdin"
    else:
        name = str(path)
        try:
            size = os.path.getsize(path)
            if size > max_bytes:
                raise TourFormatError(
                    f"{name}: file is {size} bytes, larger than the {max_bytes}-byte limit"
                )
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except FileNotFoundError:
            raise TourFormatError(f"{name}: no such file") from None
        except IsADirectoryError:
            raise TourFormatError(f"{name}: is a directory") from None
        except PermissionError:
            raise TourFormatError(f"{name}: permission denied") from None
    if len(data) > max_bytes:
        raise TourFormatError(f"{name}: input is larger than the {max_bytes}-byte limit")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TourFormatError(
            f"{name}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
        ) from None


def record_to_tour(record: Any, where: str = "record") -> tuple[Board, list[Square], dict]:
    """Take the board and tour out of a JSON record (a :meth:`TourResult.to_dict` object).

    Returns
    -------
    (Board, tour, meta)
        ``meta`` has ``format="json"``, the ``record`` itself and, when present in the record,
        ``start`` (a square) and ``closed`` (bool).

    Raises
    ------
    TourFormatError
        If the record is not an object, lacks ``rows``/``cols``, or ``tour`` is not a list of
        ``[row, col]`` integer pairs; :class:`~knights_tour.errors.NoTourError` (holding the
        record) if it has no tour.
    """
    if not isinstance(record, dict):
        raise TourFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key in ("rows", "cols"):
        if not isinstance(record.get(key), int) or isinstance(record.get(key), bool):
            raise TourFormatError(f"{where}: field {key!r} must be an integer")
    try:
        board = Board(record["rows"], record["cols"])
    except InvalidBoardError as exc:
        raise TourFormatError(f"{where}: {exc}") from None
    tour_raw = record.get("tour")
    if tour_raw is None:
        status = record.get("status")
        detail = f" (status {status})" if status else ""
        raise NoTourError(f"{where}: the record holds no tour{detail}", record)
    if not isinstance(tour_raw, list):
        raise TourFormatError(f"{where}: field 'tour' must be a list of [row, col] pairs")
    tour: list[Square] = []
    for i, sq in enumerate(tour_raw, start=1):
        if (
            not isinstance(sq, list)
            or len(sq) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in sq)
        ):
            raise TourFormatError(f"{where}: tour step {i} is not a [row, col] pair: {sq!r}")
        tour.append((sq[0], sq[1]))
    meta: dict[str, Any] = {"format": "json", "record": record}
    start = record.get("start")
    if isinstance(start, list) and len(start) == 2 and all(isinstance(v, int) for v in start):
        meta["start"] = (start[0], start[1])
    if isinstance(record.get("closed"), bool):
        meta["closed"] = record["closed"]
    return board, tour, meta


def read_tour_file(
    path: str | os.PathLike[str], *, record: int | None = None, max_bytes: int = MAX_TOUR_FILE_BYTES
) -> tuple[Board, list[Square], dict[str, Any]]:
    """Read one tour from a file: a step-number matrix, a JSON record, or a JSON Lines file.

    The format is detected from the first non-blank character (``{`` means JSON).

    Parameters
    ----------
    path : path or ``"-"``
        The file; ``"-"`` reads standard input.
    record : int, optional
        For a JSON Lines file with several records: which one (1-based line among non-blank
        lines). Required when the file holds more than one record.
    max_bytes : int
        Refuse larger inputs (default :data:`MAX_TOUR_FILE_BYTES`).

    Returns
    -------
    (Board, tour, meta)
        ``tour`` is a list of ``(row, col)`` of length ``rows*cols`` (row 0 at the top) — if the
        file is well-formed; a JSON record's tour is returned as stored, for the verifier to
        judge. ``meta["format"]`` is ``"matrix"`` or ``"json"``; a matrix adds ``base`` (0 or 1),
        a record adds ``record`` and, if present, ``start`` and ``closed``.

    Raises
    ------
    TourFormatError
        If the file cannot be read or parsed (message names the file and line).
    """
    name = "stdin" if str(path) == "-" else str(path)
    text = _read_limited(path, max_bytes)
    if text.lstrip().startswith("{"):
        return _json_tour(text, name, record)
    try:
        board, tour, base = _parse_matrix(text)
    except StepNumbersError as exc:
        raise StepNumbersError(f"{name}: {exc}", exc.reason) from None
    except TourFormatError as exc:
        raise TourFormatError(f"{name}: {exc}") from None
    return board, tour, {"format": "matrix", "base": base}


def _json_tour(
    text: str, name: str, record: int | None
) -> tuple[Board, list[Square], dict[str, Any]]:
    """The tour of a JSON file ``name`` (one record, or JSON Lines: record number ``record``,
    1-based among non-blank lines, required when there are several); see
    :func:`read_tour_file`."""
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            records.append((lineno, line))
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return record_to_tour(whole, name)
    parsed = []
    for lineno, line in records:
        try:
            parsed.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TourFormatError(
                f"{name}: line {lineno}, column {exc.colno}: invalid JSON ({exc.msg})"
            ) from None
    lineno, obj = numbered(
        parsed,
        record,
        choose=lambda: (
            f"{name}: holds {len(parsed)} JSON records; choose one with --record N "
            "(or check every record with --all)"
        ),
        missing=lambda n: f"{name}: no record {n} (the file holds {len(parsed)})",
    )
    return record_to_tour(obj, f"{name}: line {lineno}")


def numbered(
    items: Sequence[T],
    number: int | None,
    *,
    choose: Callable[[], str],
    missing: Callable[[int], str],
) -> T:
    """Item ``number`` (1-based) of ``items``, or with no ``number`` the only one.

    Raises
    ------
    TourFormatError
        ``choose()`` if no ``number`` is given and there is not exactly one item;
        ``missing(number)`` if there is no item ``number``.
    """
    if number is None:
        if len(items) != 1:
            raise TourFormatError(choose())
        number = 1
    if not 1 <= number <= len(items):
        raise TourFormatError(missing(number))
    return items[number - 1]


def read_jsonl(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_TOUR_FILE_BYTES * 16
) -> list[dict]:
    """Read a JSON Lines file of records.

    Raises
    ------
    TourFormatError
        On a line that is not a JSON object (message gives the line number).
    """
    name = "stdin" if str(path) == "-" else str(path)
    text = _read_limited(path, max_bytes)
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TourFormatError(f"{name}: line {lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TourFormatError(f"{name}: line {lineno}: not a JSON object")
        out.append(obj)
    return out


__all__ = [
    "MAX_TOUR_FILE_BYTES",
    "parse_step_matrix",
    "format_step_matrix",
    "read_tour_file",
    "record_to_tour",
    "read_jsonl",
    "numbered",
]
