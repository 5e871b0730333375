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

``start`` is a ``fixed_size_list<int32>[2]``. Enumerations are strings. Rows are written a page
at a time (a Parquet row group per page), so memory stays bounded by one page whatever the
number of records. Compression: zstd. A batch's records can be written from their stored form
(:func:`write_pages` of :func:`knights_tour.tours.pages.moves_page`): the moves are read out
of it, never made into squares.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.tours.pages import MovesPage
from knights_tour.tours.record import Checks, Record
from knights_tour.tours.stored import KNIGHT_MOVES

PAGE = 4096
"""Records per row group."""


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


def schema() -> Any:
    """The pyarrow schema of :func:`write`'s files."""
    pa, _ = _pyarrow()
    square = pa.list_(pa.int32(), 2)
    types = {
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "str": pa.string(),
        "start": square,
        "moves": pa.binary(),
        "squares": pa.list_(square),
    }
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def _squares_column(pa: Any, tours: list[np.ndarray | None]) -> Any:
    lengths = np.array([0 if t is None else len(t) for t in tours], dtype=np.int32)
    offsets = np.zeros(len(tours) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [t for t in tours if t is not None and len(t)]
    flat = (
        np.concatenate(present).astype(np.int32).ravel() if present else np.empty(0, dtype=np.int32)
    )
    squares = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.int32()), 2)
    mask = pa.array([t is None for t in tours])
    return pa.ListArray.from_arrays(pa.array(offsets), squares, mask=mask)


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
    recs = page.records
    sch = schema()
    fields = dict(zip(Record.__struct_fields__, zip(*map(msgspec.structs.astuple, recs))))
    arrays = []
    for (name, kind), fld in zip(COLUMNS, sch):
        if kind == "moves":
            arrays.append(_moves_column(pa, page))
        elif kind == "squares":
            arrays.append(_squares_column(pa, [page.squares.get(i) for i in range(len(recs))]))
        elif kind == "start":
            flat = np.array(fields.get("start", ()), dtype=np.int32).reshape(-1)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.int32()), 2))
        elif name.startswith("checks_"):
            check = name[len("checks_") :]
            values = [getattr(c, check) for c in fields.get("checks", ())]
            arrays.append(pa.array(values, type=fld.type))
        else:  # an enumeration is a str
            arrays.append(pa.array(list(fields.get(name, ())), type=fld.type))
    return pa.Table.from_arrays(arrays, schema=sch)


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
    return write_pages(path, _pages(records, page))


def write_pages(path: str | os.PathLike[str], pages: Iterable[list[Record] | MovesPage]) -> int:
    """Write pages of records (a row group each) to the Parquet file ``path`` atomically (a
    temporary file beside it, renamed when complete); returns the number of records.

    Raises
    ------
    KnightsTourError
        If pyarrow is not installed.
    OutputPathError
        If the file cannot be written (the message names it and why).
    """
    _, pq = _pyarrow()
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
            for chunk in pages:
                part = table(chunk)
                writer.write_table(part)
                count += part.num_rows
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}", exc.errno) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
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
