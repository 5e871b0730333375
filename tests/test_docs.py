"""Rules written in docs/ hold: the record table of docs/records.md names every field of the
record, in order, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from knights_tour.tours.record import Record

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_record_table_lists_every_field_in_order():
    text = (DOCS / "records.md").read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| `")]
    named = [name for line in table for name in re.findall(r"`([a-z_]+)`", line.split("|")[1])]
    assert named == list(Record.__struct_fields__)
