"""The ``ktour`` command line (click; rich for tables and the progress bar).

Commands: ``solve`` (one job in-process), ``verify`` (check a tour file), ``run`` (a whole batch,
with an embedded Redis and local workers unless a Redis URL is given), ``submit``, ``status``,
``collect``, ``batches``, ``draw`` and ``report`` (pictures; see :mod:`knights_tour.commands.pictures`).
:func:`main` takes an argument list and returns the exit code, so tests call it in-process.

Exit codes (all commands):

* ``0`` – success (``solve``: the job was decided, ``found`` or ``no_tour``; ``verify``: valid;
  ``run``/``collect --wait``: every job decided, no error, no mismatch).
* ``1`` – the command ran but the answer is not a clean success: ``solve`` ended ``unknown``
  (limit reached) or ``error``; ``verify`` found the tour invalid; ``run`` had undecided jobs,
  errors or a CP-SAT disagreement.
* ``2`` – bad input or unusable environment (unknown solver, off-board start square, malformed
  size, unreadable tour file, unreachable Redis, usage error): one line ``ktour: error: ...`` on
  stderr, nothing written.
* ``130`` – interrupted (Ctrl-C); everything the command started is shut down first.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from knights_tour.board import Board, parse_board
from knights_tour.errors import KnightsTourError
from knights_tour.result import Status, TourResult
from knights_tour.solvers import DEFAULT_SOLVER, check_solver_name, solver_names
from knights_tour.verify import is_closed, verify_tour

if TYPE_CHECKING:  # embedded pulls in psutil/redis; imported lazily where a command needs it
    from knights_tour.service.local import LocalWorkers

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _err(message: str) -> None:
    """One line on stderr, prefixed ``ktour: error:``."""
    first = " ".join(str(message).split())
    click.echo(f"ktour: error: {first}", err=True)


def _solver_option(f):
    return click.option(
        "--solver",
        default=DEFAULT_SOLVER,
        show_default=True,
        metavar="NAME",
        help=f"Solver backend: {', '.join(solver_names())}.",
    )(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="knights-tour", prog_name="ktour")
def cli() -> None:
    """ktour: find knight's tours (or prove there are none), one at a time or in batches."""


# -- solve --------------------------------------------------------------------------------


def _status_line(result: TourResult) -> str:
    kind = "closed" if result.closed else "open"
    where = f"{kind} tour of {result.rows}x{result.cols} from {result.start_square}"
    parts = [f"status {result.status.value}"]
    if result.status == Status.FOUND:
        tour = result.tour if result.tour is not None else []  # a list, or numpy (N, 2)
        parts.append(f"{'closed' if is_closed(tour) else 'open'} tour of "
                     f"{result.rows}x{result.cols} from {result.start_square}")
    elif result.status == Status.NO_TOUR:
        parts.append(f"no {where}")
    else:
        parts.append(f"{where}: {result.reason or 'undecided'}")
    proof = result.proof.value if result.proof is not None else "-"
    if result.proof_detail:
        proof += f" ({result.proof_detail})"
    parts.append(f"proof {proof}")
    parts.append(f"solver {result.solver}")
    parts.append(f"nodes {result.nodes}")
    parts.append(f"time {result.elapsed_s:.3f} s")
    return "# " + "; ".join(parts)


@cli.command()
@click.argument("size")
@click.argument("start")
@_solver_option
@click.option("--closed", is_flag=True, help="Ask for a closed (re-entrant) tour.")
@click.option(
    "--exhaustive",
    is_flag=True,
    help="Search without a node budget, so a finished search proves no_tour (engine).",
)
@click.option("--time-limit", "time_limit", type=float, default=None, metavar="S",
              help="Wall-clock limit in seconds; on expiry the status is unknown.")
@click.option("--node-limit", type=int, default=None, metavar="N",
              help="Override the engine's node budget.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead.")
@click.option("--labels", is_flag=True, help="Print rank/file labels around the board.")
@click.option("--ascii", "ascii_board", is_flag=True,
              help="Print the board as an ASCII picture: labels, start [ 1], end (N).")
@click.option("--colour", "--color", "colour_board", is_flag=True,
              help="Print the board in colour (the default on a terminal; plain when piped).")
@click.option("--svg", "svg_out", default=None, metavar="FILE",
              help="Also draw the tour (or the board and start square) as SVG to FILE.")
def solve(
    size: str,
    start: str,
    solver: str,
    closed: bool,
    exhaustive: bool,
    time_limit: float | None,
    node_limit: int | None,
    as_json: bool,
    labels: bool,
    ascii_board: bool = False,
    colour_board: bool = False,
    svg_out: str | None = None,
) -> int:
    """Solve one job in-process: a knight's tour of SIZE (8 or 6x8) from START (a1 or r,c).

    Prints the board with step numbers (1 = start square, row 0 at the top) and a status line
    starting with '#', so the output can be piped into 'ktour verify -'. Exit 0 when the job is
    decided (found or no_tour), 1 when it is unknown or an error.
    """
    from knights_tour.solvers.api import solve as api_solve
    from knights_tour.output.tourfile import format_step_matrix

    check_solver_name(solver)
    board = parse_board(size)
    start_sq = board.parse_square(start)
    if time_limit is not None and time_limit <= 0:
        raise click.BadParameter("must be positive", param_hint="--time-limit")
    if node_limit is not None and node_limit <= 0:
        raise click.BadParameter("must be positive", param_hint="--node-limit")
    from knights_tour.core.jobs import Job

    # The limits of a batch job apply here too: a finite time limit, a board the solver can
    # take (e.g. CP-SAT at most 2500 squares). InvalidJobError -> exit 2.
    Job(rows=board.rows, cols=board.cols, start=start_sq, solver=solver, closed=closed,
        time_limit_s=time_limit, exhaustive=exhaustive, node_limit=node_limit)
    result = api_solve(
        board, start_sq, solver=solver, closed=closed, time_limit_s=time_limit,
        exhaustive=exhaustive, node_limit=node_limit,
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), separators=(",", ":")))
    else:
        if result.tour is not None and result.status == Status.FOUND:
            from knights_tour.output.render import print_board

            out = click.get_text_stream("stdout")
            if ascii_board:
                print_board(result, ascii=True, file=out)
            elif colour_board or out.isatty():  # pictures: knights_tour.output.render
                print_board(result, ascii=None, caption=False, file=out)
            else:
                click.echo(format_step_matrix(board, result.tour, labels=labels), nl=False)
        click.echo(_status_line(result))
    if svg_out is not None:
        from knights_tour.commands.pictures import write_output
        from knights_tour.output.svg import tour_svg

        write_output(svg_out, tour_svg(result) + "\n", "--svg")
    return EXIT_OK if result.status in (Status.FOUND, Status.NO_TOUR) else EXIT_NOT_OK


# -- verify -------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--closed", is_flag=True, help="Require a closed (re-entrant) tour.")
@click.option("--start", "start", default=None, metavar="SQ",
              help="Require the tour to start on this square (a1 or r,c).")
@click.option("--record", type=int, default=None, metavar="N",
              help="For a JSON Lines file: check the N-th record (1-based).")
@click.option("--all", "all_records", is_flag=True,
              help="For a JSON Lines file (e.g. from 'ktour run'): check the tour of every "
              "record.")
def verify(file: str, closed: bool, start: str | None, record: int | None,
           all_records: bool = False) -> int:
    """Check the tour in FILE ('-' = stdin).

    FILE is a step-number matrix (one line per row, top row first; the number k on a square
    means the knight visits it at step k, 1-based or 0-based; lines starting with '#' are
    ignored) or a JSON record as written by 'ktour solve --json' / 'ktour collect'. A record
    that says closed: true, or names a start, is held to it. Exit 0 valid, 1 invalid (with the
    verifier's reason), 2 unreadable file.
    """
    from knights_tour.output.tourfile import read_tour_file

    if all_records:
        if start is not None or record is not None:
            raise click.UsageError("--all cannot be combined with --start or --record")
        return _verify_all(file, closed)
    board, tour, meta = read_tour_file(file, record=record)
    start_sq = board.parse_square(start) if start is not None else meta.get("start")
    need_closed = closed or bool(meta.get("closed"))
    verdict = verify_tour(board, tour, start=start_sq, closed=need_closed)
    if not verdict.ok:
        click.echo(f"invalid: {verdict.reason}")
        return EXIT_NOT_OK
    kind = "closed" if is_closed(tour) else "open"
    click.echo(f"valid {kind} tour of {board.label} from {board.algebraic(tour[0])}")
    return EXIT_OK


def _verify_all(file: str, closed: bool) -> int:
    """``verify --all``: every record of a JSON Lines file that holds (or claims) a tour."""
    from knights_tour.output.tourfile import read_jsonl, record_to_tour

    records = read_jsonl(file)
    valid = invalid = without = 0
    for i, rec in enumerate(records, start=1):
        where = f"record {i}"
        if rec.get("tour") is None:
            if rec.get("status") == "found":
                invalid += 1
                click.echo(f"{where}: invalid: status found but the record holds no tour")
            else:
                without += 1
            continue
        board, tour, meta = record_to_tour(rec, where)
        verdict = verify_tour(board, tour, start=meta.get("start"),
                              closed=closed or bool(meta.get("closed")))
        if verdict.ok:
            valid += 1
        else:
            invalid += 1
            click.echo(f"{where} ({board.label} from {rec.get('start_square')}): "
                       f"invalid: {verdict.reason}")
    click.echo(f"{len(records)} records: {valid} valid tours, {invalid} invalid, "
               f"{without} without a tour")
    return EXIT_OK if invalid == 0 else EXIT_NOT_OK


# -- batches: shared helpers -------------------------------------------------------------------

_redis_option = click.option(
    "--redis",
    "redis_url",
    default=None,
    metavar="URL",
    help="Redis URL (redis://:PASSWORD@host:6379/0); default KT_REDIS_URL, else the embedded "
    "Redis under the data dir.",
)


def _configured_redis_url(redis_url: str | None) -> str | None:
    """``--redis`` if given, else ``KT_REDIS_URL`` (via settings), else None (= embedded)."""
    if redis_url:
        return redis_url
    from knights_tour.settings import get_settings

    return get_settings().redis_url or None


def _embedded_dir():
    from knights_tour.settings import get_settings

    return get_settings().data_dir / "redis"


def _start_embedded(stack):
    """Start (or attach to) the embedded Redis on the data dir; stopped when ``stack`` closes.
    A fresh random password protects the loopback port; it lives only in the 0600 state file."""
    import secrets

    from knights_tour.service.local import EmbeddedRedis

    server = EmbeddedRedis(_embedded_dir(), password=secrets.token_urlsafe(18), reuse=True)
    stack.enter_context(server)
    return server


def _open_store(stack, redis_url: str | None):
    """A connected redis client: to ``redis_url``/KT_REDIS_URL, or to the embedded server.

    Returns ``(client, url, embedded_server_or_None)``.

    Raises
    ------
    BackendUnavailableError
        If the server cannot be reached (password masked in the message).
    """
    from knights_tour.store import batches as store

    url = _configured_redis_url(redis_url)
    server = None
    if url is None:
        server = _start_embedded(stack)
        url = server.url
    client = store.connect(url)
    stack.callback(client.close)
    return client, url, server


def _job_options(f):
    """Options shared by ``run`` and ``submit`` (what each job asks)."""
    opts = [
        click.option("--sizes", "sizes", multiple=True, required=True, metavar="LIST",
                     help="Boards: 5-12 (range of n x n), 8,10, 6x8; repeat to add more."),
        _solver_option,
        click.option("--verify", "verify", type=click.Choice(["none", "cpsat"]),
                     default="none", show_default=True,
                     help="Cross-check every job with the CP-SAT model."),
        click.option("--closed", is_flag=True, help="Ask for closed (re-entrant) tours."),
        click.option("--exhaustive", is_flag=True,
                     help="Engine searches without a node budget (proves no_tour)."),
        click.option("--time-limit", "time_limit", type=float, default=None, metavar="S",
                     help="Solver wall-clock limit per job, seconds (default: backend's)."),
        click.option("--node-limit", type=int, default=None, metavar="N",
                     help="Engine node budget per job."),
        click.option("--chunk-size", type=int, default=None, metavar="N",
                     help="Jobs per Celery task (default 16)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _make_jobs(sizes, solver, verify, closed, exhaustive, time_limit, node_limit):
    from knights_tour.board import parse_board_list
    from knights_tour.core.jobs import make_batch_jobs

    check_solver_name(solver)
    boards: list[Board] = []
    for spec in sizes:
        for b in parse_board_list(spec):
            if b not in boards:
                boards.append(b)
    if time_limit is not None and time_limit <= 0:
        raise click.BadParameter("must be positive", param_hint="--time-limit")
    jobs = make_batch_jobs(
        boards, solver=solver, closed=closed, verify=None if verify == "none" else verify,
        time_limit_s=time_limit, exhaustive=exhaustive, node_limit=node_limit,
    )
    params = {
        "sizes": ",".join(b.label for b in boards), "solver": solver, "closed": closed,
        "verify": None if verify == "none" else verify, "time_limit_s": time_limit,
        "exhaustive": exhaustive, "node_limit": node_limit,
    }
    return boards, jobs, params


def _chunk(chunk_size: int | None) -> int:
    from knights_tour.service.batches import DEFAULT_CHUNK_SIZE

    if chunk_size is None:
        return DEFAULT_CHUNK_SIZE
    if chunk_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--chunk-size")
    return chunk_size


def _check_out_path(out: str | None) -> None:
    """Fail before any work if the output file's directory is missing or not writable."""
    import os
    from pathlib import Path

    if out is None or out == "-":
        return
    parent = Path(out).parent
    if not parent.is_dir():
        raise KnightsTourError(f"cannot write {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise KnightsTourError(f"cannot write {out}: directory {parent} is not writable")


def _is_clean(rec: dict[str, Any]) -> bool:
    checks = rec.get("checks") or {}
    return (
        rec.get("status") in ("found", "no_tour")
        and not rec.get("mismatch")
        and checks.get("verifier") is not False
        and checks.get("cpsat") is not False
    )


def _problems(records: list[dict[str, Any]], total: int) -> list[str]:
    """Why a batch is not a clean success (empty list: it is)."""
    from collections import Counter

    out = []
    if len(records) < total:
        out.append(f"{total - len(records)} of {total} jobs have no record")
    counts = Counter(r.get("status") for r in records)
    if counts.get("unknown"):
        out.append(f"{counts['unknown']} jobs undecided (unknown)")
    if counts.get("error"):
        out.append(f"{counts['error']} jobs ended in error")
    mism = sum(1 for r in records if r.get("mismatch"))
    if mism:
        out.append(f"{mism} CP-SAT mismatches")
    bad_cp = sum(
        1 for r in records if (r.get("checks") or {}).get("cpsat") is False and not r.get("mismatch")
    )
    if bad_cp:
        out.append(f"{bad_cp} failed CP-SAT checks")
    return out


def _report_mismatches(records: list[dict[str, Any]]) -> None:
    """Loud report of every CP-SAT disagreement / failed check, on stderr."""
    from rich.console import Console

    bad = [r for r in records if r.get("mismatch") or (r.get("checks") or {}).get("cpsat") is False]
    if not bad:
        return
    con = Console(stderr=True, highlight=False)
    con.print(f"[bold red]CP-SAT CROSS-CHECK FAILED for {len(bad)} job(s):[/]")
    for r in bad[:50]:
        con.print(
            f"[red]  {r.get('rows')}x{r.get('cols')} from {r.get('start_square')}: "
            f"{r.get('solver')} says {r.get('status')}, CP-SAT says {r.get('cpsat_status')}"
            f" - {r.get('cpsat_note') or ''}[/]"
        )
    if len(bad) > 50:
        con.print(f"[red]  ... and {len(bad) - 50} more (see the records)[/]")


def summary_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-board summary of records: starts, found, no_tour by proof, unknown, errors,
    mismatches, CP-SAT agreements and summed job seconds. Boards in record order."""
    from collections import Counter

    rows: dict[tuple, dict[str, Any]] = {}
    for rec in records:
        key = (rec.get("rows"), rec.get("cols"))
        row = rows.setdefault(key, {
            "board": f"{key[0]}x{key[1]}", "starts": 0, "found": 0, "no_tour": Counter(),
            "unknown": 0, "error": 0, "mismatch": 0, "cpsat_agree": 0, "cpsat_checked": 0,
            "seconds": 0.0,
        })
        row["starts"] += 1
        status = rec.get("status")
        if status == "found":
            row["found"] += 1
        elif status == "no_tour":
            row["no_tour"][rec.get("proof") or "?"] += 1
        elif status == "unknown":
            row["unknown"] += 1
        else:
            row["error"] += 1
        row["mismatch"] += bool(rec.get("mismatch"))
        cp = (rec.get("checks") or {}).get("cpsat")
        if cp is not None:
            row["cpsat_checked"] += 1
            row["cpsat_agree"] += cp is True
        row["seconds"] += float(rec.get("job_elapsed_s") or rec.get("elapsed_s") or 0.0)
    return list(rows.values())


def _summary_table(records: list[dict[str, Any]], title: str):
    from rich.table import Table

    rows = summary_rows(records)
    verify = any(r["cpsat_checked"] for r in rows)
    table = Table(title=title)
    for col in ("board", "starts", "found", "no tour (proof)", "unknown", "errors",
                "mismatches"):
        table.add_column(col, justify="left" if col in ("board", "no tour (proof)") else "right")
    if verify:
        table.add_column("cpsat agrees", justify="right")
    table.add_column("job s", justify="right")
    tot = {"starts": 0, "found": 0, "nt": 0, "unknown": 0, "error": 0, "mismatch": 0,
           "agree": 0, "checked": 0, "seconds": 0.0}
    for r in rows:
        nt = sum(r["no_tour"].values())
        proofs = ", ".join(f"{k} {v}" for k, v in sorted(r["no_tour"].items()))
        cells = [r["board"], str(r["starts"]), str(r["found"]),
                 f"{nt}" + (f" ({proofs})" if proofs else ""), str(r["unknown"]),
                 str(r["error"]), str(r["mismatch"])]
        if verify:
            cells.append(f"{r['cpsat_agree']}/{r['cpsat_checked']}")
        cells.append(f"{r['seconds']:.2f}")
        table.add_row(*cells)
        tot["starts"] += r["starts"]; tot["found"] += r["found"]; tot["nt"] += nt
        tot["unknown"] += r["unknown"]; tot["error"] += r["error"]
        tot["mismatch"] += r["mismatch"]; tot["agree"] += r["cpsat_agree"]
        tot["checked"] += r["cpsat_checked"]; tot["seconds"] += r["seconds"]
    if len(rows) > 1:
        cells = ["total", str(tot["starts"]), str(tot["found"]), str(tot["nt"]),
                 str(tot["unknown"]), str(tot["error"]), str(tot["mismatch"])]
        if verify:
            cells.append(f"{tot['agree']}/{tot['checked']}")
        cells.append(f"{tot['seconds']:.2f}")
        table.add_section()
        table.add_row(*cells, style="bold")
    return table


def _stdout_console():
    """Console on stdout; when stdout is not a terminal, wide enough not to wrap ids."""
    from rich.console import Console

    console = Console(file=sys.stdout, highlight=False)
    if not console.is_terminal:
        console = Console(file=sys.stdout, highlight=False, width=160)
    return console


def _write_records(out: str, records: list[dict[str, Any]], fmt: str = "jsonl") -> None:
    from knights_tour.output.tourfile import atomic_write_text, records_to_csv, records_to_jsonl

    if fmt == "csv":
        text = records_to_csv(records)
    elif fmt == "json":
        text = json.dumps(records, indent=2) + "\n"
    else:
        text = records_to_jsonl(records)
    if out == "-":
        click.echo(text, nl=False)
    else:
        atomic_write_text(out, text)


REDIS_OUTAGE_S = 120.0
"""How long a waiting ``run`` / ``collect --wait`` keeps retrying while Redis is unreachable."""


def _wait_with_progress(client, batch_id: str, total: int, timeout_s: float | None,
                        workers=None, label: str = "jobs",
                        recover_url: str | None = None) -> dict[str, Any]:
    """Poll the batch until complete (or timeout / all local workers gone), showing a rich
    progress bar on stderr. Returns the last batch status. With ``recover_url`` (the broker),
    jobs lost with a dead worker are re-sent on every poll (:mod:`knights_tour.store.leases`)."""
    import time

    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from knights_tour.store import batches as store

    from knights_tour.errors import BackendUnavailableError

    console = Console(stderr=True)
    began = time.monotonic()
    outage_began: float | None = None
    status: dict[str, Any] = {"done": 0, "total": total, "complete": False}
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
        console=console, transient=False, disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(label, total=total, info="")

        def on_progress(st: dict[str, Any]) -> None:
            counts = st.get("counts", {})
            info = " ".join(f"{k} {v}" for k, v in counts.items())
            if st.get("mismatches"):
                info += f" [red]mismatch {st['mismatches']}[/]"
            progress.update(task, completed=st["done"], total=st["total"], info=info)

        while True:
            try:
                status = store.wait_for_batch(client, batch_id, timeout_s=1.0,
                                              on_progress=on_progress)
            except BackendUnavailableError:
                # Redis restarting or briefly unreachable: keep waiting (workers reconnect too)
                # for up to REDIS_OUTAGE_S, then give up with exit 2.
                if outage_began is None:
                    outage_began = time.monotonic()
                    click.echo("ktour: lost contact with Redis; retrying", err=True)
                if time.monotonic() - outage_began > REDIS_OUTAGE_S:
                    raise
                if timeout_s is not None and time.monotonic() - began > timeout_s:
                    break
                continue
            if outage_began is not None:
                outage_began = None
                click.echo("ktour: Redis is back", err=True)
            if status["complete"]:
                break
            if recover_url is not None:
                _recover(client, recover_url, batch_id)
            if timeout_s is not None and time.monotonic() - began > timeout_s:
                break
            _check_local_workers(workers, f"batch {batch_id}", status, "jobs")
    elapsed = time.monotonic() - began
    click.echo(
        f"ktour: batch {batch_id}: {status['done']}/{status['total']} {label} done in "
        f"{elapsed:.1f} s" + ("" if status["complete"] else " (INCOMPLETE)"),
        err=True,
    )
    return status


def _recover(client, url: str, batch_id: str) -> None:
    """Re-send jobs of the batch lost with their worker (lease expired, no record); a note on
    stderr. Redis being unreachable is left to the next poll."""
    from knights_tour.store.batches import REDIS_ERRORS
    from knights_tour.service.batches import recover_lost_jobs

    try:
        resent = recover_lost_jobs(client, url, batch_id)
    except REDIS_ERRORS:
        return
    if resent:
        click.echo(f"ktour: re-sent {len(resent)} job(s) whose worker was lost", err=True)


# -- run ------------------------------------------------------------------------------------


@cli.command()
@_job_options
@click.option("--workers", "workers", type=int, default=None, metavar="K",
              help="Local worker processes to start (default KT_WORKERS = cores; with --redis "
              "none: the workers already listening there are used).")
@click.option("--out", "out", default=None, metavar="FILE",
              help="JSON Lines file for all records (default results-<batch>.jsonl; '-' = "
              "stdout).")
@_redis_option
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="Stop waiting after S seconds (records so far are written; exit 1).")
def run(sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size,
        workers, out, redis_url, timeout) -> int:
    """Run a batch: one job per start square of every board, in parallel, and collect it.

    Without --redis (and KT_REDIS_URL) an embedded Redis is started with its data under the
    data dir (KT_DATA_DIR), plus K local Celery workers; both are shut down at the end, Ctrl-C
    included. Prints a summary table per board, writes every record as JSON Lines, and prints
    the batch id on the last line. Exit 0 only if every job was decided (found / no_tour) with
    no error and no CP-SAT mismatch; 1 otherwise.
    """
    import contextlib
    import signal
    import threading

    from knights_tour.service.local import LocalWorkers
    from knights_tour.settings import get_settings
    from knights_tour.store.batches import collect, mask_url
    from knights_tour.service.batches import submit_batch

    boards, jobs, params = _make_jobs(sizes, solver, verify, closed, exhaustive, time_limit,
                                      node_limit)
    chunk = _chunk(chunk_size)
    _check_out_path(out)
    if workers is not None and workers < 0:
        raise click.BadParameter("must be >= 0", param_hint="--workers")
    if timeout is not None and timeout <= 0:
        raise click.BadParameter("must be positive", param_hint="--timeout")

    old_term = None
    if threading.current_thread() is threading.main_thread():
        def _on_term(signum, frame):  # SIGTERM: shut down like Ctrl-C
            raise KeyboardInterrupt
        old_term = signal.signal(signal.SIGTERM, _on_term)
    try:
        with contextlib.ExitStack() as stack:
            client, url, server = _open_store(stack, redis_url)
            where = "embedded Redis" if server else f"Redis at {mask_url(url)}"
            k = workers if workers is not None else (get_settings().workers if server else 0)
            local = None
            if k > 0:
                click.echo(f"ktour: starting {k} local worker(s) on {where}", err=True)
                local = LocalWorkers(url, k, log_dir=get_settings().data_dir / "logs")
                stack.enter_context(local)
            else:
                _warn_if_no_workers(url)
            batch_id = submit_batch(url, jobs, params=params, chunk_size=chunk)
            click.echo(f"ktour: batch {batch_id}: {len(jobs)} jobs on "
                       f"{len(boards)} board(s) submitted to {where}", err=True)
            try:
                status = _wait_with_progress(client, batch_id, len(jobs), timeout,
                                             workers=local, recover_url=url)
            except BaseException:
                if server is not None and server.owned:
                    _purge_queue(url, batch_id)
                raise
            records = collect(client, batch_id)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)

    out_path = out or f"results-{batch_id}.jsonl"
    _write_records(out_path, records)
    console = _stdout_console()
    if out_path != "-":
        console.print(_summary_table(records, f"batch {batch_id}"))
        console.print(f"{len(records)} records written to {out_path}")
    _report_mismatches(records)
    problems = _problems(records, status["total"])
    for p in problems:
        click.echo(f"ktour: {p}", err=True)
    click.echo(batch_id if out_path != "-" else f"batch {batch_id}", err=out_path == "-")
    return EXIT_OK if not problems else EXIT_NOT_OK


def _check_local_workers(
    workers: LocalWorkers | None, what: str, status: dict[str, Any], unit: str
) -> None:
    """Raise if every local worker process we started has exited (the wait would never end).

    Raises
    ------
    KnightsTourError
        Naming ``what`` was awaited, how far it got, and where the worker logs are.
    """
    if workers is not None and workers.procs and all(
        p.poll() is not None for p in workers.procs
    ):
        raise KnightsTourError(
            f"all local workers exited before {what} finished "
            f"({status['done']}/{status['total']} {unit} done); see the worker logs in "
            f"{workers.log_dir}"
        )


def _purge_queue(url: str, batch_id: str) -> None:
    """After an interrupted run on our own embedded Redis: drop the batch's queued tasks, so the
    next run's workers do not start with the abandoned batch. Its stored records stay."""
    from knights_tour.worker import app

    try:
        with app.connection_for_write(url) as conn:
            dropped = app.control.purge(connection=conn)
    except Exception:  # noqa: BLE001 - best effort while shutting down
        return
    if dropped:
        click.echo(f"ktour: batch {batch_id} abandoned; dropped {dropped} queued task(s)",
                   err=True)


def _warn_if_no_workers(url: str) -> None:
    """Warn on stderr if no Celery worker answers a ping on ``url`` (the batch would wait)."""
    from knights_tour.worker import use_redis

    try:
        # control.ping sends on the app's broker whatever connection= says, so point the app
        # at this URL first
        replies = use_redis(url).control.ping(timeout=1.0)
    except Exception:  # noqa: BLE001 - only a hint
        return
    if not replies:
        click.echo("ktour: warning: no worker answered a ping on this Redis; jobs wait until "
                   "one starts (celery -A knights_tour.worker worker -Q knights_tour)", err=True)


# -- submit / status / collect / batches ----------------------------------------------------


@cli.command()
@_job_options
@_redis_option
def submit(sizes, solver, verify, closed, exhaustive, time_limit, node_limit, chunk_size,
           redis_url) -> int:
    """Submit a batch to the workers listening on a Redis server and return at once.

    Needs --redis or KT_REDIS_URL (for a local batch use 'ktour run'). Prints the batch id alone
    on the last line of stdout; follow it with 'ktour status' / 'ktour collect'.
    """
    from knights_tour.store.batches import connect, mask_url
    from knights_tour.service.batches import submit_batch

    url = _configured_redis_url(redis_url)
    if url is None:
        raise KnightsTourError(
            "submit needs a Redis URL with workers listening (--redis URL or KT_REDIS_URL); "
            "for a local batch use 'ktour run'"
        )
    boards, jobs, params = _make_jobs(sizes, solver, verify, closed, exhaustive, time_limit,
                                      node_limit)
    chunk = _chunk(chunk_size)
    connect(url).close()
    _warn_if_no_workers(url)
    batch_id = submit_batch(url, jobs, params=params, chunk_size=chunk)
    click.echo(f"submitted {len(jobs)} jobs on {len(boards)} board(s) to {mask_url(url)}")
    click.echo(batch_id)
    return EXIT_OK


@cli.command()
@click.argument("batch_id", metavar="[BATCH]", required=False)
@_redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", is_flag=True, help="Refresh until the batch is complete (Ctrl-C stops).")
@click.option("--interval", type=float, default=2.0, show_default=True, metavar="S",
              help="With --watch: seconds between refreshes.")
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="With --watch: stop after S seconds.")
def status(batch_id: str | None, redis_url: str | None, as_json: bool, watch: bool = False,
           interval: float = 2.0, timeout: float | None = None) -> int:
    """Progress of BATCH (default: the newest batch): jobs done / running / queued / failed,
    counts by status, mismatches and an ETA. Running jobs are those in a chunk a live worker
    is executing (Celery inspect). Exit 0 if complete, 1 if not.
    """
    from knights_tour.commands.ops import show_status

    return show_status(batch_id, redis_url, as_json, watch, interval, timeout)


@cli.command()
@click.argument("batch_id", metavar="BATCH")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl", "csv"]),
              default="table", show_default=True,
              help="table = per-board summary; json/jsonl/csv = every record.")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Write the records (json/jsonl/csv) to FILE atomically instead of stdout.")
@click.option("--wait", is_flag=True, help="Wait until every job of the batch has a record.")
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="With --wait: give up after S seconds.")
@_redis_option
def collect(batch_id: str, fmt: str, out: str | None, wait: bool, timeout: float | None,
            redis_url: str | None) -> int:
    """Records of BATCH, one per job, sorted by board and start square.

    Without --redis / KT_REDIS_URL the embedded Redis is started on the data dir (so a batch
    from 'ktour run' can be collected from a new shell) and stopped again. Exit 0 if the batch
    is complete and clean (every job decided, no error, no mismatch), 1 otherwise.
    """
    import contextlib

    from knights_tour.store import batches as store

    _check_out_path(out)
    if out is not None and fmt == "table":
        fmt = "jsonl"
    with contextlib.ExitStack() as stack:
        client, _url, _server = _open_store(stack, redis_url)
        st = store.batch_status(client, batch_id)
        if wait and not st["complete"]:
            st = _wait_with_progress(client, batch_id, st["total"], timeout, recover_url=_url)
        records = store.collect(client, batch_id)
    if fmt == "table":
        _stdout_console().print(_summary_table(records, f"batch {batch_id}"))
        if not st["complete"]:
            click.echo(f"batch incomplete: {st['done']}/{st['total']} jobs done")
    else:
        _write_records(out or "-", records, fmt)
        if out:
            click.echo(f"{len(records)} records written to {out}", err=True)
    _report_mismatches(records)
    return EXIT_OK if not _problems(records, st["total"]) else EXIT_NOT_OK


@cli.command()
@_redis_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def batches(redis_url: str | None, as_json: bool) -> int:
    """List known batches, oldest first."""
    import contextlib

    from rich.table import Table

    from knights_tour.store import batches as store

    with contextlib.ExitStack() as stack:
        client, _url, _server = _open_store(stack, redis_url)
        items = store.list_batches(client)
        from knights_tour.service.monitor import batch_states

        states = batch_states(client, items)  # queued / running / complete / collected
        for b in items:
            b["state"] = states.get(b["batch_id"])
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return EXIT_OK
    table = Table(title="batches")
    for col in ("batch", "created (UTC)", "state", "done", "sizes", "solver", "verify",
                "closed"):
        table.add_column(col)
    for b in items:
        p = b.get("params") or {}
        table.add_row(b["batch_id"], str(b.get("created_iso") or ""), str(b.get("state")),
                      f"{b['done']}/{b['total']}", str(p.get("sizes", "")),
                      str(p.get("solver", "")), str(p.get("verify") or "-"),
                      "yes" if p.get("closed") else "no")
    _stdout_console().print(table)
    if not items:
        click.echo("no batches")
    return EXIT_OK


# -- count (issue 7): tours per start square, distributed over the workers ------------------


def _format_count_grid(report) -> list[str]:
    """The per-square grid as text lines: rank labels on the left (rank 1 at the bottom), file
    letters below; ``-`` for a square that was not counted."""
    board = Board(report.rows, report.cols)
    cells = [["-" if v is None else str(v) for v in row] for row in report.grid]
    width = max(len(c) for row in cells for c in row)
    label_w = len(str(board.rows))
    lines = []
    for r, row in enumerate(cells):
        lines.append(f"{board.rows - r:>{label_w}}  " + " ".join(c.rjust(width) for c in row))
    lines.append(" " * (label_w + 2) + " ".join(
        board.file_name(c).rjust(width) for c in range(board.cols)))
    return lines


def _wait_count_with_progress(client, count_id: str, total: int, timeout_s: float | None,
                              workers=None) -> dict[str, Any]:
    """Poll a count until complete (or an error entry, timeout, all local workers gone) with a
    rich progress bar of sub-jobs on stderr. Returns the last count status."""
    import time

    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from knights_tour.store import counts as count_store

    console = Console(stderr=True)
    began = time.monotonic()
    status: dict[str, Any] = {"done": 0, "total": total, "complete": False, "errors": 0}
    with Progress(
        TextColumn("[bold]sub-jobs"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
        console=console, transient=False, disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("count", total=total, info="")

        def on_progress(st: dict[str, Any]) -> None:
            progress.update(task, completed=st["done"], total=st["total"],
                            info=f"nodes {st['nodes']:,}")

        while True:
            status = count_store.wait_for_count(client, count_id, timeout_s=1.0,
                                                on_progress=on_progress)
            if status["complete"] or status["errors"]:
                break
            if timeout_s is not None and time.monotonic() - began > timeout_s:
                break
            _check_local_workers(workers, f"count {count_id}", status, "sub-jobs")
    return status


@cli.command()
@click.argument("size")
@click.option("--start", "start", default=None, metavar="SQ",
              help="Count only the tours from this square (a1 or r,c) and its symmetric images.")
@click.option("--workers", "workers", type=int, default=None, metavar="K",
              help="Local worker processes to start (default KT_WORKERS = cores; with --redis "
              "none: the workers already listening there are used).")
@click.option("--closed", is_flag=True, help="Count closed (re-entrant) tours instead.")
@click.option("--depth", type=int, default=None, metavar="K",
              help="Moves fixed per sub-job (default: about 12 sub-jobs per counted square; "
              "no split up to 25 squares).")
@click.option("--no-symmetry", "no_symmetry", is_flag=True,
              help="Count every square directly instead of one per symmetry class.")
@click.option("--fresh", is_flag=True,
              help="Discard partial counts stored by an earlier run of the same count.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead.")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Also write the report as JSON to FILE.")
@_redis_option
@click.option("--timeout", "timeout", type=float, default=None, metavar="S",
              help="Stop waiting after S seconds (partial counts stay stored; exit 1).")
def count(size, start, workers, closed, depth, no_symmetry, fresh, as_json, out, redis_url,
          timeout) -> int:
    """Count the knight's tours from every start square of SIZE (exhaustively), in parallel.

    Directed open tours are counted (an open tour is counted once from each end; the grid of
    n x n sums to OEIS A165134: 1728 for 5, 6,637,920 for 6). One square per symmetry class is
    counted and copied to its class. Each count is split into sub-jobs (first moves fixed) that
    run as Celery tasks; partial counts are stored in Redis per sub-job, so running the same
    command again resumes: finished sub-jobs are not counted twice. Without --redis an embedded
    Redis and K local workers are started, as for 'ktour run'. Exit 0 when the count is
    complete, 1 if not (timeout, failed sub-jobs).
    """
    import contextlib
    import signal
    import threading
    import time

    from knights_tour.store import counts as count_store
    from knights_tour.core.counting import plan_count
    from knights_tour.service.local import LocalWorkers
    from knights_tour.settings import get_settings
    from knights_tour.store.batches import mask_url
    from knights_tour.service.counts import submit_count

    board = parse_board(size)
    start_sq = board.parse_square(start) if start is not None else None
    if depth is not None and depth < 0:
        raise click.BadParameter("must be >= 0", param_hint="--depth")
    if workers is not None and workers < 0:
        raise click.BadParameter("must be >= 0", param_hint="--workers")
    if timeout is not None and timeout <= 0:
        raise click.BadParameter("must be positive", param_hint="--timeout")
    _check_out_path(out)
    plan = plan_count(board, start_sq, closed=closed, depth=depth,
                      use_symmetry=not no_symmetry)
    count_id = count_store.count_id_for(plan, start_sq)
    if board.n_squares > 36:
        click.echo(f"ktour: warning: an exhaustive count on {board.label} may take CPU-days or "
                   "more; each sub-job must finish within the task hard time limit "
                   "(KT_HARD_TIME_LIMIT_S), so split finer with --depth", err=True)
    params = {"size": board.label, "start": None if start_sq is None else list(start_sq),
              "closed": closed, "depth": plan.depth, "symmetry": not no_symmetry}

    old_term = None
    if threading.current_thread() is threading.main_thread():
        def _on_term(signum, frame):  # SIGTERM: shut down like Ctrl-C
            raise KeyboardInterrupt
        old_term = signal.signal(signal.SIGTERM, _on_term)
    began = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            client, url, server = _open_store(stack, redis_url)
            where = "embedded Redis" if server else f"Redis at {mask_url(url)}"
            if fresh:
                count_store.delete_count(client, count_id)
            count_store.register_count(client, count_id, plan, params)
            missing = count_store.missing_subjobs(client, count_id, plan)
            reused = len(plan.subjobs) - len(missing)
            status = count_store.count_status(client, count_id)
            if missing:
                k = workers if workers is not None else (get_settings().workers if server else 0)
                local = None
                if k > 0:
                    click.echo(f"ktour: starting {k} local worker(s) on {where}", err=True)
                    local = LocalWorkers(url, k, log_dir=get_settings().data_dir / "logs")
                    stack.enter_context(local)
                else:
                    _warn_if_no_workers(url)
                submit_count(url, count_id, missing)
                click.echo(f"ktour: count {count_id}: {len(missing)} of {len(plan.subjobs)} "
                           f"sub-jobs submitted to {where}"
                           + (f" ({reused} already counted)" if reused else ""), err=True)
                try:
                    status = _wait_count_with_progress(client, count_id, len(plan.subjobs),
                                                       timeout, workers=local)
                except BaseException:
                    if server is not None and server.owned:
                        _purge_queue(url, count_id)
                    raise
            elif not plan.subjobs:
                click.echo(f"ktour: count {count_id}: every start square is ruled out without "
                           "search (no sub-jobs)", err=True)
            else:
                click.echo(f"ktour: count {count_id}: all {len(plan.subjobs)} sub-jobs already "
                           "counted; summing the stored partial counts", err=True)
            report = None
            if status["complete"]:
                report = count_store.assemble_count(client, count_id, plan,
                                                    elapsed_s=time.monotonic() - began)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)

    if report is None:
        why = (f"{status['errors']} sub-job(s) failed" if status.get("errors")
               else "timed out")
        click.echo(f"ktour: count {count_id} incomplete ({why}): {status['done']}/"
                   f"{status['total']} sub-jobs done; run the same command again to resume",
                   err=True)
        return EXIT_NOT_OK
    record = report.to_dict()
    record["reused_subjobs"] = reused
    if out is not None:
        from knights_tour.output.tourfile import atomic_write_text

        atomic_write_text(out, json.dumps(record, indent=1) + "\n")
    if as_json:
        click.echo(json.dumps(record, separators=(",", ":")))
        return EXIT_OK
    kind = "closed" if closed else "open"
    click.echo(f"directed {kind} knight's tours per start square, {board.label}:")
    for line in _format_count_grid(report):
        click.echo(line)
    total = report.total
    if total is not None:
        click.echo(f"total: {total:,}")
    else:
        sq = start_sq if start_sq is not None else next(iter(plan.classes))
        click.echo(f"tours from {board.algebraic(sq)}: "
                   f"{report.grid[sq[0]][sq[1]]:,}")
    click.echo(report.symmetry_note)
    click.echo(f"sub-jobs: {report.subjobs} (depth {report.depth}; {reused} reused from an "
               f"earlier run); nodes {report.nodes:,}; summed sub-job time "
               f"{record['subjob_s']:.2f} s; wall {report.elapsed_s:.2f} s")
    click.echo(f"count id: {count_id}")
    return EXIT_OK


# -- pictures: draw, report (commands in picture_cli.py) -------------------------------------

from knights_tour.commands.pictures import draw, report  # noqa: E402

cli.add_command(draw)
cli.add_command(report)

# -- operations: schedule show, reports, workers (commands in ops_cli.py) ---------------------

from knights_tour.commands.ops import reports, schedule_group, workers  # noqa: E402

cli.add_command(schedule_group)
cli.add_command(reports)
cli.add_command(workers)


# -- entry point ------------------------------------------------------------------------------


def _settings_error(exc: ValidationError) -> str:
    """First problem of a settings ValidationError in words, naming the KT_ variable."""
    err = exc.errors()[0]
    loc = [str(x) for x in err.get("loc", ()) if x]
    name = f"KT_{loc[0].upper()}: " if loc else ""
    msg = str(err.get("msg", exc)).removeprefix("Value error, ")
    value = err.get("input")
    shown = f" (got {value!r})" if loc and isinstance(value, (str, int, float)) else ""
    return f"{name}{msg}{shown}"


def main(argv: list[str] | None = None) -> int:
    """Run ``ktour`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Never raises for user errors: a :class:`KnightsTourError`, a click usage error or an
    ``OSError`` (e.g. an unwritable ``--out``) becomes one ``ktour: error: ...`` line on
    stderr and exit code 2; Ctrl-C gives 130.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name="ktour", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return EXIT_BAD_INPUT
    except click.UsageError as exc:
        hint = ""
        if exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        _err(f"{exc.format_message()}{hint}")
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        _err(exc.format_message())
        return exc.exit_code if exc.exit_code else EXIT_BAD_INPUT
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("ktour: interrupted", err=True)
        return EXIT_INTERRUPTED
    except KnightsTourError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except ValidationError as exc:  # KT_ settings that do not parse (knights_tour.settings)
        _err(f"invalid configuration: {_settings_error(exc)}")
        return EXIT_BAD_INPUT
    except OSError as exc:
        _err(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
        return EXIT_BAD_INPUT
    if isinstance(rv, int):
        return rv
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
