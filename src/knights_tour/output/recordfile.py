"""Record files: the records of a batch as JSON Lines (the documented output of ``ktour run``
and ``ktour collect``), one JSON array, or CSV, produced a line at a time so that a batch of any
size is written in bounded memory (with :func:`knights_tour.output.atomicfile.atomic_write_lines`);
and Parquet (:mod:`knights_tour.output.parquet`), written a page at a time.

Every format carries every field of :class:`~knights_tour.tours.record.Record`, in its order. JSON
is written by :mod:`msgspec` (compact, UTF-8, floats as ``repr`` writes them), the tour through
:func:`knights_tour.tours.record.tour_json` (numpy, no Python loop per square).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from knights_tour.tours.record import Checks, Record, as_tour, json_bytes, tour_json

FORMATS = ("json", "jsonl", "csv", "parquet")
"""Record file formats, as ``--format`` names them (``ktour collect`` offers them in this order,
after its summary ``table``)."""


def jsonl_line(record: Record) -> str:
    """One record as a JSON Lines line: its compact JSON object and a newline."""
    return json_bytes(record).decode() + "\n"


def jsonl_bytes(record: Record) -> bytes:
    """One record as a JSON Lines line in UTF-8: :func:`jsonl_line` without a round trip
    through ``str`` (what a file or a pipe is written with)."""
    return json_bytes(record) + b"\n"


def records_to_jsonl(records: Iterable[Record]) -> str:
    """JSON Lines text: one compact JSON object per line, each line ending in a newline."""
    return "".join(map(jsonl_line, records))


def format_for_path(path: str) -> str:
    """The record format a file name asks for: ``"parquet"`` for ``*.parquet``, ``"csv"`` for
    ``*.csv``, else ``"jsonl"`` (JSON Lines; also for ``-``, stdout)."""
    lower = path.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith(".csv"):
        return "csv"
    return "jsonl"


def record_lines(records: Iterable[Record], fmt: str = "jsonl") -> Iterator[bytes]:
    """The text of ``records`` in ``fmt`` as UTF-8 bytes, a line (or a record's lines) at a
    time, consuming ``records`` lazily (JSON Lines never goes through ``str``: a sweep's
    file is mostly tours, and decoding then re-encoding them cost as much as writing them).

    Parameters
    ----------
    records : iterable of Record
    fmt : {"jsonl", "json", "csv"}
        JSON Lines (:func:`records_to_jsonl`); one JSON array with one compact record per line;
        or CSV (:func:`records_to_csv`).

    Raises
    ------
    ValueError
        For another ``fmt`` (Parquet is binary: :func:`knights_tour.output.parquet.write`).
    """
    if fmt == "jsonl":
        return map(jsonl_bytes, records)
    if fmt == "json":
        return _json_array_lines(records)
    if fmt == "csv":
        return (line.encode() for line in _csv_lines(records))
    raise ValueError(f"unknown record format {fmt!r}")


def _json_array_lines(records: Iterable[Record]) -> Iterator[bytes]:
    sep = b"[\n"
    for rec in records:
        yield sep + json_bytes(rec)
        sep = b",\n"
    yield b"[]\n" if sep == b"[\n" else b"\n]\n"


def _csv_columns() -> tuple[str, ...]:
    cols: list[str] = []
    for name in Record.__struct_fields__:
        if name == "checks":
            cols.extend(f"checks_{c}" for c in Checks.__struct_fields__)
        else:
            cols.append(name)
    return tuple(cols)


CSV_FIELDS = _csv_columns()
"""Columns of :func:`records_to_csv`: every field of :class:`Record` in order, ``checks``
as ``checks_verifier`` and ``checks_cpsat``."""


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, tuple):
        return f"[{value[0]},{value[1]}]"
    if hasattr(value, "ndim"):  # a tour
        return tour_json(value).decode()
    if hasattr(value, "value"):  # an enum
        return str(value.value)
    return str(value)


def csv_row(record: Record) -> list[str]:
    """The CSV cells of one record, in :data:`CSV_FIELDS` order: ``true``/``false`` for
    booleans, empty for None, compact JSON for ``start`` and ``tour``."""
    row: list[str] = []
    for name in Record.__struct_fields__:
        value = getattr(record, name)
        if name == "checks":
            row.extend(_csv_value(getattr(value, c)) for c in Checks.__struct_fields__)
        else:
            row.append(_csv_value(value))
    return row


def record_from_csv_row(row: dict[str, str]) -> Record:
    """The record of one CSV row (a :class:`csv.DictReader` row of :func:`records_to_csv`'s
    text): the inverse of :func:`csv_row`.

    Raises
    ------
    ValueError
        If a cell does not parse as its field's type.
    """
    types = {f.name: f.type for f in msgspec.structs.fields(Record)}
    data: dict[str, Any] = {}
    for name, cell in row.items():
        if name.startswith("checks_"):
            data.setdefault("checks", {})[name[len("checks_") :]] = _parse_cell(cell, "bool")
        elif name in types:
            data[name] = _parse_cell(cell, types[name])
    data["tour"] = as_tour(data.get("tour"))
    return Record.from_dict(data)


def _parse_cell(cell: str, kind: Any) -> Any:
    if cell == "":
        return None
    text = str(kind)
    if "tuple" in text or "ndarray" in text:
        return msgspec.json.decode(cell)
    if "bool" in text:
        if cell not in ("true", "false"):
            raise ValueError(f"not a boolean: {cell!r}")
        return cell == "true"
    if "int" in text:
        return int(cell)
    if "float" in text:
        return float(cell)
    return cell


def records_to_csv(records: Iterable[Record]) -> str:
    """CSV text with a header row (:data:`CSV_FIELDS`), one row per record."""
    return "".join(_csv_lines(records))


def _csv_lines(records: Iterable[Record]) -> Iterator[str]:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for rec in records:
        writer.writerow(csv_row(rec))
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():
        yield buf.getvalue()


__all__ = [
    "FORMATS",
    "jsonl_line",
    "jsonl_bytes",
    "records_to_jsonl",
    "record_lines",
    "records_to_csv",
    "CSV_FIELDS",
    "csv_row",
    "record_from_csv_row",
    "format_for_path",
]
