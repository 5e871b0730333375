"""Records as an Apache Parquet file: the compact output for large sweeps, read directly by
pandas, polars, DuckDB or Spark (``pandas.read_parquet("results.parquet")``).

One row per record and one column per field of :class:`~knights_tour.result.Record`, in its
order, with ``checks`` as ``checks_verifier`` and ``checks_cpsat`` (as in CSV). ``start`` is a
``fixed_size_list<int32>[2]``; ``tour`` a ``list<fixed_size_list<int32>[2]>``: the squares of
the tour in visiting order, written from the tour arrays without a Python loop per square.
Enumerations are strings. Rows are written a page at a time (a Parquet row group per page),
so memory stays bounded by one page whatever the number of records. Compression: zstd.

pyarrow is an optional dependency (``pip install "knights-tour[parquet]"``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from knights_tour.errors import KnightsTourError, OutputPathError
from knights_tour.result import Checks, Record

PAGE = 4096
"""Records per row group."""


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa  # noqa: PLC0415 - optional, loaded only for this format
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:
        raise KnightsTourError(
            "--format parquet needs pyarrow: pip install 'knights-tour[parquet]'"
        ) from None
    return pa, pq


def _columns() -> list[tuple[str, str]]:
    """(column, kind) per field: kind is int, float, bool, str, start, tour."""
    kinds = {
        "start": "start",
        "tour": "tour",
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
        "tour": pa.list_(square),
    }
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def _value(record: Record, column: str) -> Any:
    if column.startswith("checks_"):
        return getattr(record.checks, column[len("checks_") :])
    value = getattr(record, column)
    return value.value if isinstance(value, Enum) else value


def _tour_column(pa: Any, records: list[Record]) -> Any:
    tours = [r.tour if r.tour is not None else None for r in records]
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


def table(records: list[Record]) -> Any:
    """The pyarrow Table of ``records`` (one page)."""
    pa, _ = _pyarrow()
    sch = schema()
    arrays = []
    for (name, kind), fld in zip(COLUMNS, sch):
        if kind == "tour":
            arrays.append(_tour_column(pa, records))
        elif kind == "start":
            flat = np.array([r.start for r in records], dtype=np.int32).reshape(-1)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.int32()), 2))
        else:
            arrays.append(pa.array([_value(r, name) for r in records], type=fld.type))
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
    """Write ``records`` to the Parquet file ``path`` a page at a time, atomically (a
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
        with pq.ParquetWriter(tmp, schema(), compression="zstd") as writer:
            for chunk in _pages(records, page):
                writer.write_table(table(chunk))
                count += len(chunk)
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
    out = []
    for row in data:
        row["checks"] = {c: row.pop(f"checks_{c}") for c in Checks.__struct_fields__}
        out.append(Record.from_dict(row))
    return out


__all__ = ["PAGE", "COLUMNS", "schema", "table", "write", "read"]
