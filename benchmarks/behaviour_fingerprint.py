"""Behaviour fingerprint of the ``ktour`` CLI: one text file that two trees must share when a
change is meant to leave behaviour alone (a restructure), and a diff of two such files.

It drives only the installed ``ktour`` command, each call a subprocess (never an import of the
package, whose module paths are what a restructure changes), on a fresh data dir of its own
(``KT_DATA_DIR`` in a temporary directory; every other ``KT_`` variable is removed from the
environment) with ``COLUMNS=100``, ``NO_COLOR=1`` and ``TERM=dumb``. The fingerprint holds:

* help: ``ktour --version``, ``ktour --help`` and ``--help`` of every command it lists
  (recursively for command groups), stdout, stderr and exit status;
* batches, each a ``ktour run ... --workers 2 --out FILE`` on the embedded Redis and local
  workers: ``5-6`` open with the CP-SAT cross-check (tours, parity proofs), ``5-6 --closed``,
  ``3x4,4,3x7 --exhaustive`` (theorem and exhaustive-search proofs, rectangles),
  ``7 --node-limit 3`` (unknown, exit 1) and ``5 --solver cpsat``: the run's stdout (summary
  table, batch id), its exit status and the records file; then for each batch ``ktour collect
  BATCH`` as a table and with ``--out`` in every format it writes (jsonl, json, csv, parquet;
  Parquet as its schema with metadata and its rows read back with pyarrow, sorted);
* ``ktour verify --all``, ``ktour report --from-jsonl ... --markdown -`` and ``ktour draw``
  (terminal board, ``--svg -``) of the first batch's records;
* counts: ``ktour count 5 --json`` by enumeration and by the frontier DP;
* ``ktour solve``: the text board (plain, ``--labels``, ``--ascii``), ``--json`` and the
  ``--svg`` file's bytes, for tours, a closed tour, a no_tour proof, an unknown and the cpsat
  backend;
* processes left behind: after each command that starts the embedded Redis, the number of
  processes still running whose environment or command line names the temporary directory
  (redis-server, its watchdog, workers) once a 30 s grace has passed (0 expected; they are
  then stopped by PID).

Normalized, because they vary from run to run (everything else is kept byte for byte):

* JSON values of these keys, when not null, become ``"<KEY>"`` (the raw text is rewritten in
  place, so spacing, key order and number formats stay as written): ``elapsed_s``,
  ``job_elapsed_s``, ``cpsat_elapsed_s``, ``finished_at`` (a timestamp), ``worker`` (name,
  PID and host of a worker), ``seconds``, ``wall_s``, ``subjob_s``, ``counting_s``,
  ``peak_rss_bytes``, ``peak_rss_bytes_per_worker`` (keyed by worker names); the same column
  names in CSV (non-empty cells) and in the Parquet rows;
* table columns, by header: ``job s`` (the summary table), ``time total``, ``median``,
  ``max``, ``CP-SAT time`` (the Markdown report): each cell becomes ``~`` (in a Rich table
  padded to the cell's width);
* ``time X s`` in the ``#`` status line of ``ktour solve``;
* batch ids: each id a run printed is replaced everywhere by ``<batch:NAME>`` (NAME of the
  batch above), so a record carrying the wrong id still shows;
* the temporary directory's path becomes ``<tmp>``.

Not in the fingerprint: the stderr of ``run`` and ``count`` (progress lines with
rates, ETAs and timings; their exit status is kept), the HTML report (it embeds the date and
timings), and commands on live state (``status``, ``workers``, ``batches``, ``job``).

Usage::

    python benchmarks/behaviour_fingerprint.py --out FILE      # write the fingerprint (~1 min)
    python benchmarks/behaviour_fingerprint.py --compare A B   # exit 1 with a diff if A != B
    python benchmarks/behaviour_fingerprint.py --check BASELINE  # write to a temp file, compare

``--ktour PATH`` names the command (default: ``ktour`` beside this Python, else on PATH).
The baseline from before the restructure of issue 31 is
``benchmarks/fingerprints/before-restructure.txt`` (commit 16cba90).
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow.parquet as pq

VARYING_KEYS = (
    "elapsed_s",
    "job_elapsed_s",
    "cpsat_elapsed_s",
    "finished_at",
    "worker",
    "seconds",
    "wall_s",
    "subjob_s",
    "counting_s",
    "peak_rss_bytes",
    "peak_rss_bytes_per_worker",
)
"""Keys (JSON, CSV and Parquet columns) whose non-null values vary between runs."""

VARYING_COLUMNS = ("job s", "time total", "median", "max", "CP-SAT time")
"""Table columns (by header) holding timings."""

BATCHES: tuple[tuple[str, list[str]], ...] = (
    ("open-5-6-verify", ["--sizes", "5-6", "--verify", "cpsat"]),
    ("closed-5-6", ["--sizes", "5-6", "--closed"]),
    ("exhaustive-rect", ["--sizes", "3x4,4,3x7", "--exhaustive"]),
    ("node-limit-7", ["--sizes", "7", "--node-limit", "3"]),
    ("cpsat-5", ["--sizes", "5", "--solver", "cpsat"]),
)
"""(name, arguments of ``ktour run``) of the batches run, in order."""

COLLECT_FORMATS = ("jsonl", "json", "csv", "parquet")

SOLVES: tuple[tuple[list[str], str | None], ...] = (
    (["8", "a1"], None),
    (["8", "a1", "--json"], None),
    (["6x8", "b2", "--closed", "--labels"], None),
    (["5", "a1", "--ascii"], None),
    (["5", "b1", "--json"], None),
    (["4", "a1", "--exhaustive"], "no-tour.svg"),
    (["6", "c3", "--solver", "cpsat", "--json"], "cpsat.svg"),
    (["8", "d4", "--closed"], "closed.svg"),
    (["7", "a1", "--node-limit", "3"], "unknown.svg"),
)
"""(arguments of ``ktour solve``, SVG file name or None) of the solves run."""

GRACE_S = 30.0
"""How long processes started for a command may take to exit after it returns."""

_JSON_SCALAR = r'(?:-?[0-9][0-9.eE+-]*|"(?:[^"\\]|\\.)*"|true|false|\{[^{}]*\})'
_JSON_KEY = re.compile(
    r'(?<!\\)"(' + "|".join(map(re.escape, VARYING_KEYS)) + r')"(\s*:\s*)' + _JSON_SCALAR
)
_SOLVE_TIME = re.compile(r"(; time )[0-9.]+( s)")
_BATCH_LINE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]+$")


class Fingerprint:
    """The fingerprint being written: sections of text, and the replacements every text gets
    (temporary directory, batch ids)."""

    def __init__(self, ktour: str, tmp: Path) -> None:
        self.ktour = ktour
        self.tmp = tmp
        self.parts: list[str] = []
        self.values: dict[str, str] = {str(tmp): "<tmp>"}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KT_")}
        self.env.update(
            KT_DATA_DIR=str(tmp / "data"),
            COLUMNS="100",
            NO_COLOR="1",
            TERM="dumb",
            LC_ALL="C.UTF-8",
        )
        self.env.pop("FORCE_COLOR", None)
        self.env.pop("CLICOLOR_FORCE", None)

    def normalize(self, text: str) -> str:
        """``text`` with known varying values, varying JSON keys, solve times and timing
        columns replaced (see the module docstring)."""
        for value, label in self.values.items():
            text = text.replace(value, label)
        text = _JSON_KEY.sub(lambda m: f'"{m.group(1)}"{m.group(2)}"<{m.group(1)}>"', text)
        text = _SOLVE_TIME.sub(r"\1~\2", text)
        return _normalize_tables(text)

    def learn(self, value: str, label: str) -> None:
        """Replace ``value`` by ``label`` from now on and in what is written so far."""
        self.values[value] = label
        self.parts = [part.replace(value, label) for part in self.parts]

    def section(self, title: str) -> None:
        self.parts.append(f"\n==== {title}\n")

    def add(self, label: str, text: str) -> None:
        body = text if text.endswith("\n") or not text else text + "\n"
        self.parts.append(f"--- {label} ({len(text.splitlines())} lines)\n{body}")

    def ktour_run(
        self, args: list[str], *, stderr: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """Run ``ktour ARGS`` in the temporary directory; record the command, exit status,
        stdout and (if ``stderr``) stderr, normalized. Returns the raw result."""
        done = subprocess.run(
            [self.ktour, *args],
            cwd=self.tmp,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        command = self.normalize(" ".join(args))
        self.parts.append(f"$ ktour {command}\n[exit {done.returncode}]\n")
        self.add("stdout", self.normalize(done.stdout))
        if stderr:
            self.add("stderr", self.normalize(done.stderr))
        return done

    def add_file(self, name: str) -> None:
        path = self.tmp / name
        if name.endswith(".parquet"):
            text = _parquet_text(path)
        elif name.endswith(".csv"):
            text = _csv_text(path.read_text(encoding="utf-8"))
        else:
            text = path.read_text(encoding="utf-8")
        self.add(f"file {name}", self.normalize(text))

    def leftovers(self) -> None:
        """Record how many processes naming the temporary directory outlive the grace; stop
        them by PID."""
        deadline = time.monotonic() + GRACE_S
        pids = _processes_naming(str(self.tmp))
        while pids and time.monotonic() < deadline:
            time.sleep(0.5)
            pids = _processes_naming(str(self.tmp))
        self.parts.append(f"processes left after {GRACE_S:.0f} s: {len(pids)}\n")
        for pid in pids:
            print(f"behaviour_fingerprint: stopping leftover process {pid}", file=sys.stderr)
            _stop(pid)

    def text(self) -> str:
        return "".join(self.parts)


def _processes_naming(needle: str) -> list[int]:
    """PIDs (other than this process) whose command line, environment, working directory or
    open files name ``needle`` (a redis-server rewrites its command line and environment, but
    works in and writes to its data dir); empty where /proc is not there."""
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            blob = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            paths = [os.readlink(entry / "cwd")]
            paths += [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if needle.encode() in blob or any(path.startswith(needle) for path in paths):
            found.append(int(entry.name))
    return sorted(found)


def _stop(pid: int) -> None:
    """SIGTERM ``pid``, then SIGKILL it if it is still there after 5 s."""
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            time.sleep(0.1)
            os.kill(pid, 0)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _normalize_tables(text: str) -> str:
    """Cells of the VARYING_COLUMNS in Rich tables (header ``┃``, rows ``│``) and Markdown
    tables (``|``) replaced by ``~`` (padded to the cell's width in a Rich table)."""
    out: list[str] = []
    varying: set[int] = set()
    sep = ""
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("┃", "|")):
            names = [cell.strip() for cell in line.split(stripped[0])]
            if any(name in VARYING_COLUMNS for name in names):
                varying = {i for i, name in enumerate(names) if name in VARYING_COLUMNS}
                sep = "│" if stripped[0] == "┃" else "|"
                out.append(line)
                continue
        if sep and stripped.startswith(sep):
            cells = line.split(sep)
            for i in varying:
                if i < len(cells) - 1 and set(cells[i].strip()) - set("-:"):
                    cells[i] = " ~".ljust(len(cells[i])) if sep == "│" else " ~ "
            line = sep.join(cells)
        elif sep and not stripped.startswith(_RULES):
            varying, sep = set(), ""
        out.append(line)
    return "\n".join(out)


_RULES = ("├", "┡", "└", "┏", "┗", "┌", "╇", "┃", "┠", "┢", "╞")


def _csv_text(raw: str) -> str:
    """A CSV file with the VARYING_KEYS columns' non-empty cells replaced, written back with
    the csv module; a first line says whether the csv module writes the original back byte
    for byte (so the normalized text stands for the file's bytes)."""
    rows = list(csv.reader(io.StringIO(raw, newline="")))

    def write(rows: Iterable[list[str]]) -> str:
        buffer = io.StringIO(newline="")
        csv.writer(buffer, lineterminator=_line_end(raw)).writerows(rows)
        return buffer.getvalue()

    exact = write(rows) == raw
    if rows:
        header = rows[0]
        varying = [i for i, name in enumerate(header) if name in VARYING_KEYS]
        for row in rows[1:]:
            for i in varying:
                if i < len(row) and row[i]:
                    row[i] = f"<{header[i]}>"
    return f"(csv module round trip exact: {exact})\n" + write(rows)


def _line_end(raw: str) -> str:
    return "\r\n" if "\r\n" in raw else "\n"


def _parquet_text(path: Path) -> str:
    """A Parquet file as its schema (with metadata) and its rows, VARYING_KEYS values
    replaced, one JSON object a line, sorted."""
    table = pq.read_table(path)
    rows = []
    for row in table.to_pylist():
        for key in VARYING_KEYS:
            if row.get(key) is not None:
                row[key] = f"<{key}>"
        rows.append(json.dumps(row, ensure_ascii=False, default=repr))
    schema = table.schema.to_string(show_schema_metadata=True, truncate_metadata=False)
    return f"schema:\n{schema}\nrows: {table.num_rows}\n" + "\n".join(sorted(rows)) + "\n"


def collect_fingerprint(ktour: str, log: Callable[[str], None]) -> str:
    """The fingerprint text of the ``ktour`` at path ``ktour`` (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="kt-fingerprint-")).resolve()
    try:
        fp = Fingerprint(ktour, tmp)
        fp.parts.append("# ktour behaviour fingerprint (benchmarks/behaviour_fingerprint.py)\n")
        log("help")
        fp.section("help")
        fp.ktour_run(["--version"])
        _help(fp, [])
        for name, args in BATCHES:
            log(f"batch {name}")
            fp.section(f"batch {name}")
            out = f"run-{name}.jsonl"
            done = fp.ktour_run(["run", *args, "--workers", "2", "--out", out], stderr=False)
            last = done.stdout.strip().splitlines()[-1:] or [""]
            if not _BATCH_LINE.match(last[0]):
                raise SystemExit(f"ktour run {args}: no batch id on its last line: {done}")
            fp.learn(last[0], f"<batch:{name}>")
            fp.leftovers()
            fp.add_file(out)
            fp.ktour_run(["collect", last[0]])
            fp.leftovers()
            for fmt in COLLECT_FORMATS:
                fp.ktour_run(
                    ["collect", last[0], "--format", fmt, "--out", f"collect-{name}.{fmt}"]
                )
                fp.leftovers()
                fp.add_file(f"collect-{name}.{fmt}")
        log("records offline")
        fp.section("records offline")
        records = f"run-{BATCHES[0][0]}.jsonl"
        fp.ktour_run(["verify", "--all", records])
        fp.ktour_run(["report", "--from-jsonl", records, "--markdown", "-"])
        fp.ktour_run(["draw", records, "--index", "3"])
        fp.ktour_run(["draw", records, "--start", "c3", "--size", "6", "--svg", "-"])
        for method in ("enumerate", "dp"):
            log(f"count {method}")
            fp.section(f"count {method}")
            fp.ktour_run(
                ["count", "5", "--method", method, "--workers", "2", "--json"], stderr=False
            )
            fp.leftovers()
        log("solve")
        fp.section("solve")
        for args, svg in SOLVES:
            fp.ktour_run(["solve", *args, *(["--svg", svg] if svg else [])])
            if svg:
                fp.add_file(svg)
        return fp.text()
    finally:
        for pid in _processes_naming(str(tmp)):
            _stop(pid)
        shutil.rmtree(tmp, ignore_errors=True)


def _help(fp: Fingerprint, path: list[str]) -> None:
    """Record ``ktour PATH --help`` and, for each command it lists, that command's help."""
    done = fp.ktour_run([*path, "--help"])
    for command in _listed_commands(done.stdout):
        _help(fp, [*path, command])


def _listed_commands(help_text: str) -> list[str]:
    """Command names of the ``Commands:`` section of a Click help text."""
    names: list[str] = []
    inside = False
    for line in help_text.splitlines():
        if line.strip() == "Commands:":
            inside = True
        elif inside and line.startswith("  ") and not line.startswith("   "):
            names.append(line.split()[0])
        elif inside and line and not line.startswith(" "):
            inside = False
    return names


def compare(a: Path, b: Path) -> int:
    """Print a unified diff of fingerprint files ``a`` and ``b``; 0 if identical, else 1."""
    old = a.read_text(encoding="utf-8").splitlines(keepends=True)
    new = b.read_text(encoding="utf-8").splitlines(keepends=True)
    if old == new:
        print(f"identical: {a} and {b} ({len(old)} lines)")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old, new, str(a), str(b)))
    return 1


def _default_ktour() -> str:
    beside = Path(sys.executable).with_name("ktour")
    return str(beside) if beside.exists() else shutil.which("ktour") or "ktour"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="write the fingerprint to this file")
    mode.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    mode.add_argument("--check", type=Path, metavar="BASELINE", help="fingerprint and compare")
    parser.add_argument("--ktour", default=_default_ktour(), help="the ktour command")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)

    def log(step: str) -> None:
        print(f"behaviour_fingerprint: {step}", file=sys.stderr, flush=True)

    text = collect_fingerprint(args.ktour, log)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({len(text.encode())} bytes)", file=sys.stderr)
        return 0
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
    print(f"fingerprint written to {f.name}", file=sys.stderr)
    return compare(args.check, Path(f.name))


if __name__ == "__main__":
    sys.exit(main())
