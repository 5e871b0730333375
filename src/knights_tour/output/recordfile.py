"""Record files: the records of a batch as JSON Lines (the documented output of ``ktour run``
and ``ktour collect``), one JSON array, or CSV, produced a line at a time so that a batch of any
size is written in bounded memory (with :func:`knights_tour.output.tourfile.atomic_write_lines`).

JSON is written with the stdlib ``json`` module: compact separators for JSON Lines, keys in the
record's order, non-ASCII escaped, floats as ``repr`` writes them.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

from knights_tour.core.records import TourJSON


def jsonl_line(record: dict[str, Any]) -> str:
    """One record as a JSON Lines line: compact JSON (stdlib ``json``, ASCII-escaped, keys in
    the record's order) and a newline. A ``tour`` that is a
    :class:`~knights_tour.core.records.TourJSON` is written as the JSON text it holds (the same
    bytes as the list would give)."""
    tour = record.get("tour")
    if not isinstance(tour, TourJSON):
        return json.dumps(record, separators=(",", ":")) + "\n"
    items = list(record.items())
    at = next(i for i, (key, _) in enumerate(items) if key == "tour")
    parts = [json.dumps(dict(part), separators=(",", ":"))[1:-1]
             for part in (items[:at], items[at + 1:]) if part]
    parts.insert(1 if at else 0, '"tour":' + tour)
    return "{" + ",".join(parts) + "}\n"


def records_to_jsonl(records: Iterable[dict[str, Any]]) -> str:
    """JSON Lines text: one compact JSON object per line, each line ending in a newline."""
    return "".join(map(jsonl_line, records))


def record_lines(records: Iterable[dict[str, Any]], fmt: str = "jsonl") -> Iterator[str]:
    """The text of ``records`` in ``fmt``, a line (or a record's lines) at a time, consuming
    ``records`` lazily.

    Parameters
    ----------
    records : iterable of dict
        JSON record dicts.
    fmt : {"jsonl", "json", "csv"}
        JSON Lines (:func:`records_to_jsonl`); one JSON array indented by 2, as
        ``json.dumps(list, indent=2)`` writes it, plus a newline; or CSV
        (:func:`records_to_csv`).

    Raises
    ------
    ValueError
        For another ``fmt``.
    """
    if fmt == "jsonl":
        return map(jsonl_line, records)
    if fmt == "json":
        return _json_array_lines(records)
    if fmt == "csv":
        return _csv_lines(records)
    raise ValueError(f"unknown record format {fmt!r}")


def _json_array_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    sep = "[\n"
    for rec in records:
        yield sep + textwrap.indent(json.dumps(rec, indent=2), "  ")
        sep = ",\n"
    yield "[]\n" if sep == "[\n" else "\n]\n"


CSV_FIELDS = (
    "rows", "cols", "start_square", "start", "solver", "closed", "status", "proof",
    "reason", "checks_verifier", "checks_cpsat", "nodes", "elapsed_s", "batch_id", "tour",
)
"""Columns of :func:`records_to_csv` (``start`` and ``tour`` as compact JSON)."""


def records_to_csv(records: Iterable[dict[str, Any]]) -> str:
    """CSV text with a header row (:data:`CSV_FIELDS`), one row per record."""
    return "".join(_csv_lines(records))


def _csv_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for rec in records:
        checks = rec.get("checks") or {}
        row = []
        for f in CSV_FIELDS:
            if f == "checks_verifier":
                v = checks.get("verifier")
            elif f == "checks_cpsat":
                v = checks.get("cpsat")
            else:
                v = rec.get(f)
            if isinstance(v, (list, dict)):
                v = json.dumps(v, separators=(",", ":"))
            elif v is None:
                v = ""
            row.append(v)
        writer.writerow(row)
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():
        yield buf.getvalue()


__all__ = ["jsonl_line", "records_to_jsonl", "record_lines", "records_to_csv", "CSV_FIELDS"]
