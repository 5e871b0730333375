"""Records as an Apache Parquet file: the compact output for large sweeps, read directly by
pandas, polars, DuckDB or Spark (``pandas.read_parquet("results.parquet")``).

One row per record and one column per field of :class:`~knights_tour.tours.record.Record`, in its
order, with ``checks`` as ``checks_verifier`` and ``checks_cpsat`` (as in CSV) and ``tour`` as
two columns (docs/records.md, "Parquet"):

* ``tour_moves``, ``binary``: the tour as its moves from the start square ``start``, one byte
  each, an index 0-7 into :data:`knights_tour.tours.stored.KNIGHT_MOVES` (a knight's tour of
  R x C squares has R*C - 1 moves: ``numpy.frombuffer(value, numpy.uint8)``);
* ``tour_squares``, ``list<fixed_size_list<int32>[2]>``: the squares ``[row, col]`` of a tour
  that is not a chain of knight moves from ``start`` (only an ``error`` record can hold one);
  null otherwise. A record without a tour has both null.

``start`` is a ``fixed_size_list<int32>[2]``. Enumerations are strings. Rows are written a row
group at a time (:data:`PAGE` records or :data:`ROW_GROUP_BYTES`), so memory stays bounded by
one row group whatever the number of records. Compression: zstd. A batch's records can be
written from their stored form (:func:`write_pages` of
:func:`knights_tour.tours.pages.moves_page`): the moves are read out of it, never made into
squares. The columns are made from their buffers, never by ``pyarrow.array`` of a list, which
would load pandas where it is installed.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.tours.pages import MovesPage
from knights_tour.tours.record import Checks, Record
from knights_tour.tours.stored import KNIGHT_MOVES

if TYPE_CHECKING:
    from knights_tour.tours.stored_columns import Columns

PAGE = 4096
"""Records per row group, at most (:data:`ROW_GROUP_BYTES` may end one sooner)."""
ROW_GROUP_BYTES = 64 << 20
"""Bytes of Arrow data past which a row group is written (a page's tours on large boards)."""


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa  # noqa: PLC0415 - loaded only for this format
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:  # a dependency: only a broken install lacks it
        raise KnightsTourError(
            "--format parquet needs pyarrow, which is missing: pip install pyarrow"
        ) from None
    return pa, pq


def _columns() -> list[tuple[str, str]]:
    """(column, kind) per field: kind is int, float, bool, str, start, tour."""
    kinds = {
        "start": "start",
        "rows": "int",
        "cols": "int",
        "nodes": "int",
        "restarts": "int",
        "cpsat_nodes": "int",
        "attempts": "int",
        "closed": "bool",
        "mismatch": "bool",
        "cpsat_tour_accepted": "bool",
        "elapsed_s": "float",
        "cpsat_elapsed_s": "float",
        "job_elapsed_s": "float",
        "finished_at": "float",
    }
    out: list[tuple[str, str]] = []
    for name in Record.__struct_fields__:
        if name == "checks":
            out.extend((f"checks_{c}", "bool") for c in Checks.__struct_fields__)
        elif name == "tour":
            out.extend([("tour_moves", "moves"), ("tour_squares", "squares")])
        else:
            out.append((name, kinds.get(name, "str")))
    return out


COLUMNS = _columns()
"""The Parquet columns and their kinds, in order."""


@functools.cache
def schema() -> Any:
    """The pyarrow schema of :func:`write`'s files."""
    pa, _ = _pyarrow()
    return pa.schema([(name, _TYPES[kind](pa)) for name, kind in COLUMNS])


def _validity(pa: Any, values: list[Any]) -> tuple[Any, int]:
    """The validity bitmap of ``values`` (None: null; plain values, which compare with None
    as a bool) as an Arrow buffer, and the nulls."""
    nulls = values.count(None)
    if not nulls:
        return None, 0
    present = np.fromiter(map(operator.is_not, values, itertools.repeat(None)), np.bool_)
    return pa.py_buffer(np.packbits(present, bitorder="little")), nulls


def _column(pa: Any, kind: str, values: list[Any]) -> Any:
    """The Arrow array of one column's ``values`` (None: null) of ``kind`` (:data:`COLUMNS`),
    made from its buffers."""
    count = len(values)
    validity, nulls = _validity(pa, values)
    if nulls == count:
        return pa.nulls(count, _TYPES[kind](pa))
    if kind in ("int", "float", "bool"):
        numbers = np.array([0 if v is None else v for v in values] if nulls else values)
        if kind == "bool":
            buffer = pa.py_buffer(np.packbits(numbers.astype(np.bool_), bitorder="little"))
        else:
            buffer = pa.py_buffer(numbers.astype(np.int64 if kind == "int" else np.float64))
        return pa.Array.from_buffers(_TYPES[kind](pa), count, [validity, buffer], nulls)
    if not nulls and values.count(values[0]) == count:  # one value throughout the page
        one = values[0].encode("utf-8")
        offsets = np.arange(count + 1, dtype=np.int64) * len(one)
        return _strings(pa, count, None, 0, offsets, one * count)
    texts = [v if v is not None else "" for v in values] if nulls else values
    joined = "".join(texts)
    data = joined.encode("utf-8")
    if len(data) == len(joined):  # ASCII: a character is a byte
        sizes = np.fromiter(map(len, texts), dtype=np.int64, count=count)
    else:
        encoded = [t.encode("utf-8") for t in texts]
        sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return _strings(pa, count, validity, nulls, offsets, data)


def _strings(
    pa: Any, count: int, validity: Any, nulls: int, offsets: np.ndarray, data: bytes
) -> Any:
    """A string array of its buffers (``offsets``: ``count + 1`` byte positions in ``data``).

    Raises
    ------
    ValueError
        If the strings exceed 2 GiB (an Arrow string array's 32-bit offsets)."""
    if offsets[-1] >= 2**31:
        raise ValueError("a page's text exceeds 2 GiB")
    return pa.Array.from_buffers(
        pa.string(),
        count,
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        nulls,
    )


_TYPES = {
    "int": lambda pa: pa.int64(),
    "float": lambda pa: pa.float64(),
    "bool": lambda pa: pa.bool_(),
    "str": lambda pa: pa.string(),
    "start": lambda pa: pa.list_(pa.int32(), 2),
    "moves": lambda pa: pa.binary(),
    "squares": lambda pa: pa.list_(pa.list_(pa.int32(), 2)),
}
"""The Arrow type of each kind of column (:data:`COLUMNS`)."""


def _int32s(pa: Any, values: np.ndarray) -> Any:
    return pa.Array.from_buffers(
        pa.int32(), len(values), [None, pa.py_buffer(values.astype(np.int32))]
    )


def _squares_column(pa: Any, tours: list[np.ndarray | None]) -> Any:
    if all(t is None for t in tours):
        return pa.nulls(len(tours), _TYPES["squares"](pa))
    lengths = np.array([0 if t is None else len(t) for t in tours], dtype=np.int32)
    offsets = np.zeros(len(tours) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    held = [t for t in tours if t is not None and len(t)]
    flat = np.concatenate(held).astype(np.int32).ravel() if held else np.empty(0, dtype=np.int32)
    squares = pa.FixedSizeListArray.from_arrays(_int32s(pa, flat), 2)
    present = np.array([t is not None for t in tours], dtype=np.bool_)
    validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    nulls = len(tours) - int(present.sum())
    return pa.ListArray.from_buffers(
        _TYPES["squares"](pa),
        len(tours),
        [validity, pa.py_buffer(offsets)],
        nulls,
        children=[squares],
    )


def _moves_column(pa: Any, page: MovesPage) -> Any:
    if page.offsets[-1] >= 2**31:
        raise ValueError("a page's tours exceed 2 GiB of moves")
    validity = pa.py_buffer(np.packbits(page.present, bitorder="little").tobytes())
    offsets = pa.py_buffer(page.offsets.astype(np.int32))
    return pa.Array.from_buffers(
        pa.binary(), len(page.records), [validity, offsets, pa.py_buffer(page.moves)]
    )


def table(records: list[Record] | MovesPage) -> Any:
    """The pyarrow Table of a page: records holding their tours, or a :class:`MovesPage`."""
    pa, _ = _pyarrow()
    page = (
        records
        if isinstance(records, MovesPage)
        else MovesPage.of(
            [msgspec.structs.replace(r, tour=None) for r in records], [r.tour for r in records]
        )
    )
    if page.columns is not None:
        return pa.Table.from_arrays(_read_arrays(pa, page, page.columns), schema=schema())
    recs = page.records
    count = len(recs)
    fields = dict(
        zip(Record.__struct_fields__, map(list, zip(*map(msgspec.structs.astuple, recs))))
    )
    arrays = []
    for name, kind in COLUMNS:
        if kind == "moves":
            arrays.append(_moves_column(pa, page))
        elif kind == "squares":
            arrays.append(_squares_column(pa, [page.squares.get(i) for i in range(count)]))
        elif kind == "start":
            flat = np.array(fields.get("start", ()), dtype=np.int32).reshape(-1)
            arrays.append(pa.FixedSizeListArray.from_arrays(_int32s(pa, flat), 2))
        elif name.startswith("checks_"):
            check = operator.attrgetter(name[len("checks_") :])
            arrays.append(_column(pa, kind, list(map(check, fields.get("checks", ())))))
        else:
            arrays.append(_column(pa, kind, fields.get(name, [])))
    return pa.Table.from_arrays(arrays, schema=schema())


def _read_arrays(pa: Any, page: MovesPage, columns: Columns) -> list[Any]:
    """The Arrow arrays of a page whose fields were read out as :class:`Columns`: each
    field's validity bitmap and count of nulls made for all fields at once."""
    count = len(page.records)
    valid = {False: columns.valid, True: columns.valid_second}
    present = {second: rows.sum(axis=1) for second, rows in valid.items()}
    bitmaps = {
        second: np.packbits(rows, axis=1, bitorder="little") for second, rows in valid.items()
    }
    arrays = []
    for name, kind in COLUMNS:
        f = _FIELD_OF[name]
        if kind == "moves":
            arrays.append(_moves_column(pa, page))
            continue
        if kind == "start":
            flat = np.stack([columns.first[f], columns.second[f]], axis=1).reshape(-1)
            arrays.append(pa.FixedSizeListArray.from_arrays(_int32s(pa, flat), 2))
            continue
        second = name == "checks_cpsat"
        nulls = count - int(present[second][f])
        if kind == "squares" or nulls == count:  # a page read in one pass holds no squares
            arrays.append(_nulls(pa, count, kind))
            continue
        values = columns.second[f] if second else columns.first[f]
        validity = pa.py_buffer(bitmaps[second][f]) if nulls else None
        if kind == "str":
            sizes = np.where(valid[second][f], columns.second[f], 0)
            offsets = np.zeros(count + 1, dtype=np.int64)
            np.cumsum(sizes, out=offsets[1:])
            where = np.repeat(values - offsets[:-1], sizes) + np.arange(offsets[-1])
            text = columns.text[where].tobytes()
            arrays.append(_strings(pa, count, validity, nulls, offsets, text))
            continue
        if kind == "float":
            buffer = pa.py_buffer(columns.number[f])
        elif kind == "bool":
            buffer = pa.py_buffer(np.packbits(values.astype(np.bool_), bitorder="little"))
        else:
            buffer = pa.py_buffer(values)
        arrays.append(pa.Array.from_buffers(_TYPES[kind](pa), count, [validity, buffer], nulls))
    return arrays


_FIELD_OF = {
    name: Record.__struct_fields__.index(
        "checks" if name.startswith("checks_") else "tour" if name.startswith("tour_") else name
    )
    for name, _ in COLUMNS
}
"""The record field each Parquet column is read from."""


@functools.cache
def _nulls(pa: Any, count: int, kind: str) -> Any:
    """An array of ``count`` nulls of ``kind`` (immutable: shared by the pages)."""
    return pa.nulls(count, _TYPES[kind](pa))


def _pages(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    page: list[Record] = []
    for rec in records:
        page.append(rec)
        if len(page) >= size:
            yield page
            page = []
    if page:
        yield page


def write(path: str | os.PathLike[str], records: Iterable[Record], page: int = PAGE) -> int:
    """Write ``records`` to the Parquet file ``path`` a page of ``page`` records at a time,
    as :func:`write_pages` does (atomically, raising what it raises); returns the number of
    records."""
    return write_pages(path, _pages(records, page), page)


def write_pages(
    path: str | os.PathLike[str],
    pages: Iterable[list[Record] | MovesPage | Any],
    group_rows: int = PAGE,
) -> int:
    """Write pages of records to the Parquet file ``path`` atomically (a temporary file beside
    it, renamed when complete); returns the number of records. A page is a list of records, a
    :class:`MovesPage`, or the :func:`table` of one (made elsewhere, such as on the threads
    that read the pages). Pages in a row are written as one row group once they hold
    ``group_rows`` records or :data:`ROW_GROUP_BYTES` bytes: each row group costs the writer
    a column chunk per column, and a reader a seek.

    Raises
    ------
    KnightsTourError
        If pyarrow is not installed.
    OutputPathError
        If the file cannot be written (the message names it and why).
    """
    pa, pq = _pyarrow()
    target = Path(path)
    if target.is_symlink():  # the rename goes where the link points; the link stays
        target = Path(os.path.realpath(target))
    tmp = target.with_name(f".{target.name}.tmp")
    count = 0
    try:
        # the tours: no repeats for a dictionary to find, no use for a page's min and max
        plain = {"tour_moves", "tour_squares"}
        others = [name for name, _ in COLUMNS if name not in plain]
        with pq.ParquetWriter(
            tmp, schema(), compression="zstd", use_dictionary=others, write_statistics=others
        ) as writer:
            count = _write_groups(pa, writer, pages, group_rows)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}", exc.errno) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return count


def _write_groups(
    pa: Any, writer: Any, pages: Iterable[list[Record] | MovesPage | Any], group_rows: int
) -> int:
    """Write ``pages`` with ``writer`` in row groups (:func:`write_pages`); returns the number
    of records. A row group is written on a thread of its own (the writer's encoding and
    compression release the GIL) while the next one's pages are gathered."""
    count = 0
    with ThreadPoolExecutor(1, thread_name_prefix="kt-parquet") as pool:
        written: Future[None] | None = None
        group: list[Any] = []
        rows = size = 0
        for chunk in itertools.chain(pages, [None]):
            if chunk is not None:
                part = table(chunk) if isinstance(chunk, (list, MovesPage)) else chunk
                group.append(part)
                rows += part.num_rows
                size += part.nbytes
            if group and (chunk is None or rows >= group_rows or size >= ROW_GROUP_BYTES):
                if written is not None:
                    written.result()
                written = pool.submit(
                    writer.write_table, pa.concat_tables(group), row_group_size=rows
                )
                count += rows
                group, rows, size = [], 0, 0
        if written is not None:
            written.result()
    return count


def read(path: str | os.PathLike[str]) -> list[Record]:
    """The records of a Parquet file written by :func:`write` (for round trips and tests).

    Raises
    ------
    KnightsTourError
        If pyarrow is not installed.
    """
    _, pq = _pyarrow()
    data = pq.read_table(path).to_pylist()
    steps = np.asarray(KNIGHT_MOVES, dtype=np.int32)
    out = []
    for row in data:
        row["checks"] = {c: row.pop(f"checks_{c}") for c in Checks.__struct_fields__}
        moves, squares = row.pop("tour_moves"), row.pop("tour_squares")
        if moves is not None:
            tour = np.empty((len(moves) + 1, 2), dtype=np.int32)
            tour[0] = row["start"]
            np.cumsum(steps[np.frombuffer(moves, dtype=np.uint8)], axis=0, out=tour[1:])
            tour[1:] += tour[0]
            row["tour"] = tour
        else:
            row["tour"] = squares
        out.append(Record.from_dict(row))
    return out


__all__ = ["PAGE", "COLUMNS", "schema", "table", "write", "write_pages", "read"]
