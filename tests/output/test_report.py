"""Batch reports (knights_tour.output.report): the HTML page parses, summarises each board correctly
(colour parity on 5x5: tours only from the 13 majority-colour squares' side of the argument),
embeds every tour so it can be drawn, references nothing outside itself, stays small for a
620-job batch, and renders in headless Chromium (screenshot, and the script draws the tour
selected in the URL); the Markdown summary pastes as a table with start-square maps."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from _picture_tours import backtrack_tour, record

from knights_tour.board import KNIGHT_OFFSETS, Board, Square
from knights_tour.output.grouping import group_records
from knights_tour.output.report import encode_tour, html_report, markdown_report, start_map
from knights_tour.tours.verify import verify_tour


def decode_tour(cols: int, entry: Mapping[str, Any]) -> list[Square]:
    """An entry of the report's data (:func:`~knights_tour.output.report.encode_tour`) read
    back as its script reads it: the list of ``(row, col)``."""
    if "t" in entry:
        return [divmod(int(i), cols) for i in entry["t"]]
    r, c = divmod(int(entry["s"]), cols)
    out = [(r, c)]
    for ch in entry["m"]:
        dr, dc = KNIGHT_OFFSETS[int(ch)]
        r, c = r + dr, c + dc
        out.append((r, c))
    return out


SVG_NS = {"s": "http://www.w3.org/2000/svg"}
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "source", "wbr"}


# -- a small batch, tours from the test's own backtracking search -----------------------------
def five_by_five_batch() -> list[dict]:
    """Every start square of 5x5. A tour alternates colours, so on 25 squares an open tour
    starts on the majority colour (13 squares, (r+c) even); the 12 others are parity no-tours."""
    recs = []
    for sq in Board(5, 5).squares():
        if Board.colour(sq) == 1:
            recs.append(
                record(
                    5,
                    5,
                    sq,
                    None,
                    status="no_tour",
                    proof="parity",
                    proof_detail="colour parity: the start is on the minority colour",
                )
            )
        else:
            tour = backtrack_tour(5, 5, sq)
            assert tour is not None
            recs.append(record(5, 5, sq, tour, checks={"verifier": True, "cpsat": True}))
    return recs


def six_closed_batch() -> list[dict]:
    b = Board(6, 6)
    a1, b2, c3, d4, e5 = (b.parse_square(s) for s in ("a1", "b2", "c3", "d4", "e5"))
    recs = [
        record(6, 6, a1, backtrack_tour(6, 6, a1, closed=True), closed=True),
        record(
            6,
            6,
            b2,
            backtrack_tour(6, 6, b2, closed=True),
            closed=True,
            checks={"verifier": True, "cpsat": False},
            mismatch=True,
            cpsat_elapsed_s=0.5,
            cpsat_note="disagreement: warnsdorff says found, CP-SAT says no_tour",
        ),
        record(6, 6, c3, None, closed=True, status="unknown", reason="time_limit"),
        record(6, 6, e5, None, closed=True, status="error", reason="worker lost"),
        record(6, 6, d4, backtrack_tour(6, 6, d4, closed=True), closed=True),
        record(6, 6, d4, None, closed=True, status="no_tour", proof="cpsat", solver="cpsat"),
    ]
    return recs


@pytest.fixture(scope="module")
def batch() -> list[dict]:
    return five_by_five_batch() + six_closed_batch()


class PageParser(HTMLParser):
    """Collects what the tests look at, and checks that non-void tags are balanced."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.cells: list[dict] = []
        self.refs: list[str] = []
        self.sum_rows: list[list[str]] = []
        self.scripts: dict[str, str] = {}
        self._in_sum = False
        self._row: list[str] | None = None
        self._text: list[str] | None = None
        self._script_id: str | None = None
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href", "xlink:href", "action"):
            if a.get(k):
                self.refs.append(a[k])
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "table" and "sum" in (a.get("class") or ""):
            self._in_sum = True
        if self._in_sum and tag == "tr":
            self._row = []
        if self._in_sum and tag in ("td", "th"):
            self._text = []
        if tag == "td" and a.get("id"):
            self.cells.append(a)
        if tag == "script":
            self._script_id = a.get("id") or f"script{len(self.scripts)}"
            self.scripts[self._script_id] = ""

    def handle_startendtag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href", "xlink:href"):
            if a.get(k):
                self.refs.append(a[k])

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()
        if tag == "table":
            self._in_sum = False
        in_cell = self._text is not None and self._row is not None
        if self._in_sum and tag in ("td", "th") and in_cell:
            self._row.append("".join(self._text).strip())
            self._text = None
        if self._in_sum and tag == "tr" and self._row is not None:
            self.sum_rows.append(self._row)
            self._row = None
        if tag == "script":
            self._script_id = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)
        if self._script_id is not None:
            self.scripts[self._script_id] += data


def parse_page(html: str) -> PageParser:
    p = PageParser()
    p.feed(html)
    p.close()
    assert p.errors == [] and p.stack == [], (p.errors, p.stack)
    return p


def test_html_parses_and_summarises_each_board(batch):
    html = html_report(batch, title="test batch")
    page = parse_page(html)
    rows = {(r[0], r[1]): r for r in page.sum_rows[1:]}
    header = page.sum_rows[0]
    col = {name: i for i, name in enumerate(header)}
    five = rows[("5×5", "open")]
    assert five[col["starts"]] == "25" and five[col["found"]] == "13"
    assert five[col["no tour"]] == "12" and five[col["proofs"]] == "12 parity"
    assert five[col["CP-SAT check"]] == "13/13 agree"
    six = rows[("6×6", "closed")]
    assert six[col["starts"]] == "5"
    assert six[col["found"]] == "3"  # a1, b2 and d4 (d4 best outcome; also a conflict)
    assert (six[col["unknown"]], six[col["error"]]) == ("1", "1")
    assert six[col["CP-SAT check"]] == "0/1 agree (1 DISAGREE), 1 MISMATCH"
    assert six[col["CP-SAT time"]] == "500 ms" and five[col["CP-SAT time"]] == "–"
    assert "1 start square(s) have conflicting answers" in html
    total = rows[("all", "")]
    assert total[col["starts"]] == "30" and total[col["found"]] == "16"


def test_html_grid_cells_match_outcomes_and_every_tour_is_embedded(batch):
    page = parse_page(html_report(batch))
    data = json.loads(page.scripts["kt-data"])
    groups = data["groups"]
    assert [(g["rows"], g["cols"], g["closed"]) for g in groups] == [(5, 5, False), (6, 6, True)]
    cells = {c["id"]: c for c in page.cells}
    assert len([k for k in cells if k.startswith("5x5-open-")]) == 25
    assert len([k for k in cells if k.startswith("6x6-closed-")]) == 5
    b5 = Board(5, 5)
    for sq in b5.squares():
        cell = cells[f"5x5-open-{b5.algebraic(sq)}"]
        if Board.colour(sq) == 1:
            assert cell["class"] == "no_tour p-parity" and "data-t" not in cell
        else:
            assert cell["class"] == "found"
            tour = decode_tour(5, groups[0]["tours"][int(cell["data-t"])])
            assert verify_tour(b5, tour, start=sq).ok
    b6 = Board(6, 6)
    assert cells["6x6-closed-d4"]["class"] == "conflict"
    assert cells["6x6-closed-c3"]["class"] == "unknown"
    assert cells["6x6-closed-e5"]["class"] == "error"
    a1 = groups[1]["tours"][int(cells["6x6-closed-a1"]["data-t"])]
    assert a1["c"] is True
    assert verify_tour(b6, decode_tour(6, a1), start="a1", closed=True).ok
    assert "time_limit" in cells["6x6-closed-c3"]["title"]
    assert "CP-SAT says no_tour" in cells["6x6-closed-b2"]["title"]
    assert "by parity (colour parity: the start is on" in cells["5x5-open-b5"]["title"]


def test_tour_encoding_round_trips_and_keeps_odd_paths(batch):
    for rec in batch:
        if rec["tour"]:
            tour = [tuple(sq) for sq in rec["tour"]]
            enc = encode_tour(rec["cols"], tour)
            assert len(enc["m"]) == len(tour) - 1  # one character a move
            assert decode_tour(rec["cols"], enc) == tour
    odd = [(0, 0), (0, 1), (2, 2)]  # (0,0)->(0,1) is not a knight move: kept as indices
    assert encode_tour(5, odd) == {"t": [0, 1, 12]}
    assert decode_tour(5, encode_tour(5, odd)) == odd


def test_html_is_self_contained(batch):
    html = html_report(batch)
    page = parse_page(html)
    assert all(ref.startswith("#") for ref in page.refs), page.refs
    # the only URLs are XML namespace names, which browsers never fetch
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/2001/xml-events",
        "http://www.w3.org/1999/xlink",
    }, urls
    assert "<link" not in html and "@import" not in html


def test_html_inline_svgs_are_well_formed_and_start_on_a1(batch):
    html = html_report(batch)
    body = html.split("<script")[0]  # the script has SVG markup in strings
    svgs = re.findall(r"<svg .*?</svg>", body, flags=re.S)
    assert len(svgs) == 2  # one server-drawn tour per board
    for text in svgs:
        root = ET.fromstring(text)
        rows, cols = int(root.get("data-rows")), int(root.get("data-cols"))
        line = root.find(".//s:polyline[@class='kt-path']", SVG_NS)
        n_points = len(line.get("points").split())
        assert n_points == rows * cols + (1 if root.get("data-closed") == "true" else 0)
        assert root.get("data-start") == "a1"  # a1 shown first when it has a tour


def test_html_escapes_text_from_records():
    rec = record(5, 5, (0, 1), None, status="error", reason="<script>alert(1)</script>&")
    html = html_report([rec], title="<b>t</b>")
    assert "<script>alert(1)" not in html
    assert "&lt;b&gt;t&lt;/b&gt;" in html
    parse_page(html)


def test_unreadable_records_are_counted_not_fatal(batch):
    bad = [{"rows": "x"}, {"rows": 5, "cols": 5, "start": [9, 9]}]
    groups, skipped = group_records(batch + bad)
    assert skipped == 2 and sum(len(g.records) for g in groups) == len(batch)
    assert "2 unreadable record(s) skipped" in html_report(batch + [{"rows": "x"}, {}])


def test_620_job_batch_stays_under_5_mb():
    # Size depends on the number of squares, not on the moves; a row-by-row order of the
    # squares stands in for each tour (620 jobs = every start of 5x5..12x12).
    recs = []
    for n in range(5, 13):
        snake = [(r, c if r % 2 == 0 else n - 1 - c) for r in range(n) for c in range(n)]
        for sq in Board(n, n).squares():
            recs.append(record(n, n, sq, snake, nodes=123456, elapsed_s=0.0123))
    assert len(recs) == 620
    html = html_report(recs)
    size = len(html.encode("utf-8"))
    assert size < 5 * 1024 * 1024, size
    page = parse_page(html)
    assert len(page.cells) == 620


def test_markdown_table_and_parity_map(batch):
    md = markdown_report(batch, title="Sweep")
    assert md.startswith("# Sweep\n")
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2  # header, rule, two boards
    assert table[2].startswith("| 5×5 | open | 25 | 13 | 12 (12 parity) |")
    assert "conflicting answers" in md
    groups, _ = group_records(batch)
    grid = start_map(groups[0]).splitlines()
    # parity: 'T' exactly on (r + c) even, 'p' on odd; rank 5 on top, files a..e underneath
    for r, line in enumerate(grid[:5]):
        rank, *syms = line.split()
        assert rank == str(5 - r)
        assert syms == ["T" if (r + c) % 2 == 0 else "p" for c in range(5)]
    assert grid[5].split() == list("abcde")
    assert "X" in start_map(groups[1])  # d4 conflict


# -- headless Chromium ------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of the chromium binary; installs Debian's package when it is missing."""
    path = shutil.which("chromium")
    if path is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, capture_output=True, timeout=900, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"],
            check=True,
            capture_output=True,
            timeout=1800,
            env=env,
        )
        path = shutil.which("chromium")
    assert path is not None, "chromium could not be installed"
    return path


def _no_network_prefix() -> list[str]:
    """``unshare -n`` (an empty network namespace) when this user may use it."""
    unshare = shutil.which("unshare")
    if unshare:
        ok = subprocess.run([unshare, "-n", "true"], capture_output=True, timeout=10)
        if ok.returncode == 0:
            return [unshare, "-n"]
    return []


def run_chromium(chromium: str, tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = _no_network_prefix() + [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--window-size=1200,900",
        # belt and braces when no network namespace is available: nothing resolves or connects
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        *extra,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def png_info(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_report_screenshot_in_headless_chromium(chromium, batch, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(html_report(batch), encoding="utf-8")
    shot = tmp_path / "shot.png"
    proc = run_chromium(chromium, tmp_path, page.as_uri(), f"--screenshot={shot}")
    assert shot.exists(), proc.stderr[-2000:]
    width, height, raw = png_info(shot.read_bytes())
    assert (width, height) == (1200, 900)
    assert len(set(raw)) > 20  # not a blank page: many distinct pixel values


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_report_script_draws_the_tour_named_in_the_url(chromium, batch, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(html_report(batch), encoding="utf-8")
    proc = run_chromium(chromium, tmp_path, page.as_uri() + "#6x6-closed-b2", "--dump-dom")
    dom = proc.stdout
    drawn = re.findall(r'<svg [^>]*id="js-g1".*?</svg>', dom, flags=re.S)
    assert len(drawn) == 1, proc.stderr[-2000:]
    root = ET.fromstring(drawn[0])
    pts = [
        tuple(map(float, p.split(",")))
        for p in root.find(".//s:polyline[@class='kt-path']", SVG_NS).get("points").split()
    ]
    assert len(pts) == 36 + 1 and pts[0] == pts[-1]  # closed tour: back to the start
    # the start disc sits on b2: second file from the left, second rank from the bottom
    rect = root.find(".//s:rect[@class='kt-board']", SVG_NS)
    bx, by, bw, bh = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
    start = root.find(".//s:circle[@class='kt-start']", SVG_NS)
    col = int((float(start.get("cx")) - bx) / (bw / 6))
    row = int((float(start.get("cy")) - by) / (bh / 6))
    assert Board(6, 6).algebraic((row, col)) == "b2"
    # the script decoded the tour: every drawn step is a knight move, every square visited once
    cell = bw / 6
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        assert sorted((round(abs(x1 - x0) / cell), round(abs(y1 - y0) / cell))) == [1, 2]
    assert len({(round((x - bx) / cell - 0.5), round((y - by) / cell - 0.5)) for x, y in pts}) == 36
    assert 'class="found sel"' in dom or 'class="sel found"' in dom


# -- ktour report ----------------------------------------------------------------------------
def test_cli_report_from_jsonl_offline(batch, tmp_path, capsys):
    from knights_tour.cli import main

    src = tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in batch))
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    assert (
        main(
            [
                "report",
                "--from-jsonl",
                str(src),
                "--html",
                str(html),
                "--markdown",
                str(md),
                "--title",
                "Sweep",
            ]
        )
        == 0
    )
    page = parse_page(html.read_text())
    assert len(page.cells) == 30
    assert md.read_text().startswith("# Sweep\n")
    # no output file named: Markdown on stdout
    capsys.readouterr()
    assert main(["report", "--from-jsonl", str(src)]) == 0
    assert "| 5×5 | open | 25 | 13 |" in capsys.readouterr().out
    assert main(["report", "B", "--from-jsonl", str(src)]) == 2  # both BATCH and --from-jsonl
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["report", "--from-jsonl", str(empty)]) == 1


def test_cli_report_batch_from_redis(batch, redis_client, redis_db_url, tmp_path, capsys):
    from knights_tour.batches import saving, store
    from knights_tour.batches.jobs import Job
    from knights_tour.cli import main
    from knights_tour.tours.record import Record

    # stored as a warnsdorff batch (jobs need a registered solver); the d4 conflict stays two
    # jobs: warnsdorff and cpsat
    batch = [{**r, "solver": "warnsdorff" if r["solver"] == "test" else r["solver"]} for r in batch]
    jobs = [
        Job(
            rows=r["rows"],
            cols=r["cols"],
            start=tuple(r["start"]),
            solver=r["solver"],
            closed=r["closed"],
        )
        for r in batch
    ]
    assert main(["report", "--redis", redis_db_url]) == 2  # no BATCH, and no batch yet
    assert "no batches yet" in capsys.readouterr().err
    batch_id = store.create_batch(redis_client, jobs, params={"sizes": "5,6"})
    for job, rec in zip(jobs, batch, strict=True):
        saving.save_record(redis_client, batch_id, Record.from_dict({**rec, "job_key": job.key}))
    html = tmp_path / "b.html"
    assert main(["report", batch_id, "--redis", redis_db_url, "--html", str(html)]) == 0
    text = html.read_text()
    assert batch_id in text
    assert len(parse_page(text).cells) == 30
    capsys.readouterr()
    assert main(["report", "--redis", redis_db_url]) == 0  # BATCH: the newest, as for status
    assert capsys.readouterr().out.startswith(f"# Knight's tours: batch {batch_id}\n")
