"""Jobs: what a worker is asked to do, how it is validated, and how it is run.

A :class:`Job` is one start square of one board for one solver. It travels over the broker as
a small JSON object (:meth:`Job.to_dict`), and every worker re-validates it with
:meth:`Job.from_dict` because a broker message is untrusted input. :func:`run_job` turns a job
into a JSON record (see :mod:`knights_tour.tours.record`) and never raises: any failure becomes an
``error`` record with the message. One module on purpose: a job's fields, their validation,
running it and the order its record sorts in change together (a field added to :class:`Job`
is validated, run and ordered here).

This module is pure: it imports neither Celery nor Redis.
"""

from __future__ import annotations

import copy
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard

import msgspec

from knights_tour._numba import job_clock
from knights_tour.board import MAX_SIDE, Board, parse_board
from knights_tour.errors import InvalidJobError, KnightsTourError
from knights_tour.settings import get_settings
from knights_tour.solvers import DEFAULT_SOLVER, check_limits, cross_check_names, get_backend
from knights_tour.solvers.api import solve
from knights_tour.solvers.crosscheck import cross_check
from knights_tour.tours.record import Record, Status
from knights_tour.worker.messages import TIME_LIMIT_EXCEPTIONS, ItemDict, invalid_key

_FIELDS = (
    "rows",
    "cols",
    "start",
    "solver",
    "closed",
    "verify",
    "time_limit_s",
    "exhaustive",
    "node_limit",
)
_REQUIRED = ("rows", "cols", "start", "solver")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class JobOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How every job of a batch is to be run: the options a user gives once for all its start
    squares (``ktour run``'s job options), the same fields as on :class:`Job`."""

    solver: str = DEFAULT_SOLVER
    """Registered backend name (:func:`knights_tour.solvers.backends`)."""
    closed: bool = False
    """Ask for a closed (re-entrant) tour."""
    verify: str | None = None
    """A backend that can cross-check (``"cpsat"``: also decide each job with the CP-SAT model
    and compare); None: no cross-check."""
    time_limit_s: float | None = None
    """Solver wall-clock limit per job, in seconds (None: ``KT_JOB_TIME_LIMIT_S``)."""
    exhaustive: bool = False
    """Complete search without a node budget (engine only)."""
    node_limit: int | None = None
    """Override of the engine's node budget per job."""

    def to_dict(self) -> dict[str, object]:
        """The options as a JSON-ready dict (stored in a batch's params)."""
        return msgspec.structs.asdict(self)


class Job(msgspec.Struct, frozen=True):
    """One job: decide whether a knight's tour exists from ``start`` on a ``rows × cols`` board.

    Attributes
    ----------
    rows, cols : int
        Board size.
    start : (row, col)
        Start square, zero-based, row 0 at the top.
    solver, closed, verify, time_limit_s, exhaustive, node_limit
        As in :class:`JobOptions` (:attr:`options` gives them as one).

    Build jobs with the constructor (trusted code), :meth:`of` (a board, a square and
    options) or :meth:`from_dict` (untrusted input); all validate.
    """

    rows: int
    cols: int
    start: tuple[int, int]
    solver: str = DEFAULT_SOLVER
    closed: bool = False
    verify: str | None = None
    time_limit_s: float | None = None
    exhaustive: bool = False
    node_limit: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.start, list):
            msgspec.structs.force_setattr(self, "start", tuple(self.start))
        if _is_int(self.time_limit_s):
            msgspec.structs.force_setattr(self, "time_limit_s", float(self.time_limit_s))
        _validate(self)

    @classmethod
    def of(cls, board: Board, start: tuple[int, int], options: JobOptions) -> Job:
        """The job of ``start`` on ``board`` with ``options``.

        Raises
        ------
        InvalidJobError
            As the constructor.
        """
        return cls(board.rows, board.cols, start, **msgspec.structs.asdict(options))

    @property
    def options(self) -> JobOptions:
        """The job's :class:`JobOptions`."""
        return JobOptions(
            solver=self.solver,
            closed=self.closed,
            verify=self.verify,
            time_limit_s=self.time_limit_s,
            exhaustive=self.exhaustive,
            node_limit=self.node_limit,
        )

    # -- identity ---------------------------------------------------------------------------
    @property
    def board(self) -> Board:
        return Board(self.rows, self.cols)

    @property
    def budget_s(self) -> float:
        """The job's wall-clock budget in seconds: :attr:`time_limit_s`, else
        ``KT_JOB_TIME_LIMIT_S``."""
        return get_settings().job_time_limit_s if self.time_limit_s is None else self.time_limit_s

    @property
    def key(self) -> str:
        """Stable key from (board, start, solver, closed), e.g. ``"8x8:0,0:warnsdorff:open"``.

        The same job delivered twice gets the same key, so it keeps one record instead of
        getting two.
        """
        kind = "closed" if self.closed else "open"
        return f"{self.rows}x{self.cols}:{self.start[0]},{self.start[1]}:{self.solver}:{kind}"

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> ItemDict:
        """The job's JSON object (:func:`wire_form`; messages, stored jobs) as a dict, read back
        by :meth:`from_dict`: ``rows``, ``cols``, ``start`` (``[row, col]``), ``solver``, etc."""
        return msgspec.json.decode(msgspec.json.encode(wire_form(self)))

    @classmethod
    def from_dict(cls, data: object) -> Job:
        """Validate an untrusted job dict (e.g. a broker message) and build the job.

        Every field is checked: types (no bools for numbers, no strings for bools), ranges,
        start square on the board, a registered solver, a known verify name, a board size the
        solver (and the CP-SAT cross-check, if asked) can take. Unknown fields are refused.

        Raises
        ------
        InvalidJobError
            Naming the first bad field and why.
        """
        if not isinstance(data, Mapping):
            raise InvalidJobError(f"a job must be a JSON object, got {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in _FIELDS)
        if unknown:
            raise InvalidJobError(
                f"job has unknown field(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}"
            )
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise InvalidJobError(f"job is missing field(s) {', '.join(missing)}")
        start = data["start"]
        if (
            not isinstance(start, (list, tuple))
            or len(start) != 2
            or not all(_is_int(v) for v in start)
        ):
            raise InvalidJobError(f"job start must be [row, col] integers, got {start!r}")
        return cls(
            rows=data["rows"],
            cols=data["cols"],
            start=(start[0], start[1]),
            solver=data["solver"],
            closed=data.get("closed", False),
            verify=data.get("verify"),
            time_limit_s=data.get("time_limit_s"),
            exhaustive=data.get("exhaustive", False),
            node_limit=data.get("node_limit"),
        )


_WireJob = msgspec.defstruct(
    "WireJob",
    [
        (f.name, f.type, msgspec.NODEFAULT if f.name == "solver" else f.default)
        for f in msgspec.structs.fields(Job)
    ],
    omit_defaults=True,
)


def wire_form(job: Job) -> msgspec.Struct:
    """``job`` as a struct msgspec encodes to the JSON object a job travels and is stored as
    (``solver`` always, the other optional fields where not at their defaults), in C."""
    return _WireJob(*msgspec.structs.astuple(job))


def _validate(job: Job) -> None:
    """Check every field of ``job``; raise :class:`InvalidJobError` on the first bad one."""
    for name in ("rows", "cols"):
        value = getattr(job, name)
        if not _is_int(value):
            raise InvalidJobError(f"job {name} must be an integer, got {value!r}")
        if not 1 <= value <= MAX_SIDE:
            raise InvalidJobError(f"job {name} must be between 1 and {MAX_SIDE}, got {value}")
    start = job.start
    if not isinstance(start, tuple) or len(start) != 2 or not all(_is_int(v) for v in start):
        raise InvalidJobError(f"job start must be a (row, col) pair of integers, got {start!r}")
    if not (0 <= start[0] < job.rows and 0 <= start[1] < job.cols):
        raise InvalidJobError(
            f"job start {start} is off the {job.rows}x{job.cols} board "
            f"(rows 0..{job.rows - 1}, cols 0..{job.cols - 1})"
        )
    if not isinstance(job.solver, str):
        raise InvalidJobError(f"job solver must be a string, got {job.solver!r}")
    try:
        backend = get_backend(job.solver)
    except KnightsTourError as exc:
        raise InvalidJobError(str(exc)) from None
    for name in ("closed", "exhaustive"):
        value = getattr(job, name)
        if not isinstance(value, bool):
            raise InvalidJobError(f"job {name} must be true or false, got {value!r}")
    checkers = cross_check_names()
    if job.verify is not None and job.verify not in checkers:
        raise InvalidJobError(
            f"job verify must be null or one of {', '.join(checkers)}, got {job.verify!r}"
        )
    check_limits(job.time_limit_s, job.node_limit, "job ")
    squares = job.rows * job.cols
    roles = [(backend, "solver")]
    if job.verify is not None:
        roles.append((get_backend(job.verify), "cross-check"))
    for who, role in roles:
        limit = who.max_squares
        if limit is not None and squares > limit:
            raise InvalidJobError(
                f"board {job.rows}x{job.cols} ({squares} squares) is too large for the "
                f"{who.name} {role} (at most {limit} squares)"
            )


def _moved(job: Job, start: tuple[int, int]) -> Job:
    """``job`` from another start square of its board, not validated again: for a ``start``
    taken from :meth:`~knights_tour.board.Board.squares` of the job's board, every other field
    having been validated with ``job``."""
    moved = copy.copy(job)  # a struct's copy runs no __post_init__
    msgspec.structs.force_setattr(moved, "start", start)
    return moved


def make_batch_jobs(
    boards: Iterable[Board | int | str | Sequence[int]],
    options: JobOptions | None = None,
    **fields: Any,
) -> list[Job]:
    """One job per start square of every board, boards in the given order, squares row-major.

    ``boards`` items are anything :func:`knights_tour.board.parse_board` reads (``8``,
    ``"6x8"``, ``(6, 8)``, a :class:`Board`). For n = 5..12 this gives the classic 620 jobs.
    The jobs' options are ``options``, or :class:`JobOptions` built from the keyword
    ``fields`` (``make_batch_jobs([8], solver="cpsat")``).

    Raises
    ------
    InvalidBoardError
        For a malformed board.
    InvalidJobError
        For a bad solver, verify name, limit, or a board too large for the solver.
    TypeError
        For a keyword that is not a field of :class:`JobOptions`.
    """
    if options is None:
        options = JobOptions(**fields)
    elif fields:
        raise TypeError("give either options or option fields, not both")
    jobs: list[Job] = []
    for spec in boards:
        board = parse_board(spec)
        first = Job.of(board, (0, 0), options)  # one validation per board, not per square
        jobs.extend(_moved(first, sq) for sq in board.squares())
    return jobs


# -- running ----------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def error_record(
    job: Job | Mapping[str, Any] | Any,
    exc: BaseException | str,
    batch_id: str | None = None,
    job_key: str | None = None,
) -> Record:
    """An ``error`` record for a job that failed (or a job message that could not be validated).

    The message goes in ``reason``; the exception class name in ``error_type``; no traceback.
    For a message that is not a valid job, the fields it held that fit the record are kept
    (``rows``/``cols`` 0 and ``start`` ``(0, 0)`` where they do not), and ``job_key`` is the
    caller's key for the message.
    """
    if isinstance(exc, BaseException):
        message, error_type = (str(exc) or type(exc).__name__), type(exc).__name__
    else:
        message, error_type = str(exc), "Error"
    if isinstance(job, Job):
        return Record(
            rows=job.rows,
            cols=job.cols,
            start=job.start,
            solver=job.solver,
            closed=job.closed,
            status=Status.ERROR,
            reason=message,
            batch_id=batch_id,
            job_key=job_key or job.key,
            verify=job.verify,
            error_type=error_type,
        )
    raw = dict(job) if isinstance(job, Mapping) else {}
    rows, cols, start = raw.get("rows"), raw.get("cols"), raw.get("start")
    if not (
        isinstance(start, (list, tuple)) and len(start) == 2 and all(_is_int(v) for v in start)
    ):
        start = (0, 0)
    verify = raw.get("verify")
    return Record(
        rows=rows if _is_int(rows) else 0,
        cols=cols if _is_int(cols) else 0,
        start=(start[0], start[1]),
        solver=str(_plain(raw.get("solver"))),
        closed=raw.get("closed") is True,
        status=Status.ERROR,
        reason=message,
        batch_id=batch_id,
        job_key=job_key,
        verify=verify if isinstance(verify, str) else None,
        error_type=error_type,
    )


def parse_jobs(
    job_dicts: object, batch_id: str, worker: str | None, keep: Callable[[Record], None]
) -> tuple[list[Job], list[str]]:
    """The valid jobs of a chunk's message (``job_dicts``: a list of job dicts, or one; untrusted)
    and the validation errors of the others, in order. Each invalid one becomes an ``error``
    record (:func:`error_record`, keyed by :func:`~knights_tour.worker.messages.invalid_key` so
    a re-delivery adds none, ``worker`` set) handed to ``keep``."""
    valid: list[Job] = []
    invalid: list[str] = []
    for raw in job_dicts if isinstance(job_dicts, list) else [job_dicts]:
        try:
            valid.append(Job.from_dict(raw))
        except Exception as exc:  # noqa: BLE001 - invalid input becomes an error record
            record = error_record(raw, exc, batch_id, job_key=invalid_key(raw))
            record.worker = worker
            keep(record)
            invalid.append(str(exc))
    return valid, invalid


def unwrap_interruption(exc: Exception) -> BaseException:
    """What a job's failure ``exc`` is reported as: the first exception of its ``__cause__`` /
    ``__context__`` chain that is not an :class:`Exception` (``SystemExit``: the caller
    re-raises it) or is named in :data:`TIME_LIMIT_EXCEPTIONS`; else ``exc`` itself.

    A signal can land while a C extension initialises (OR-Tools' ``cp_model_helper`` on a
    process's first CP-SAT job); pybind11 reports whatever that raised as
    ``ImportError("initialization failed")`` caused by it, which would pass a worker's terminate
    signal (billiard raises ``SystemExit``) or soft time limit off as a broken install.
    """
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if not isinstance(link, Exception) or type(link).__name__ in TIME_LIMIT_EXCEPTIONS:
            return link
        link = link.__cause__ or link.__context__
    return exc


def solve_job(job: Job) -> Record:
    """The solver's answer to ``job`` in this process, verified
    (:func:`knights_tour.solvers.api.solve`): the solver gets the job's whole budget
    (:attr:`Job.budget_s`); no cross-check (:func:`run_job` adds it).

    Raises
    ------
    Exception
        Whatever the backend raises (:func:`run_job` records it as an ``error``).
    """
    return solve(
        job.board,  # validated with the job: solve() takes a Board as it is
        job.start,
        solver=job.solver,
        closed=job.closed,
        time_limit_s=job.budget_s,
        exhaustive=job.exhaustive,
        node_limit=job.node_limit,
    )


def run_job(job: Job, batch_id: str | None = None, worker: str | None = None) -> Record:
    """Run one job in this process and return its record. Raises no ordinary exception.

    Solves with :func:`knights_tour.solvers.api.solve` (which runs the verifier: a tour failing
    it is reported as ``error``). If ``job.verify`` names a backend (``"cpsat"``) the job is
    also decided by it (its tour, if any, checked by the verifier too), the solver's tour is
    checked by its tour check (:func:`knights_tour.solvers.cpsat.check_tour`), and the two
    answers must agree on whether a tour exists; see
    :func:`knights_tour.solvers.crosscheck.cross_check` for the fields.
    A disagreement is recorded as ``mismatch`` True (never hidden).

    ``job.time_limit_s`` (default ``KT_JOB_TIME_LIMIT_S``) is the wall-clock budget of the
    whole job in seconds: the solver gets all of it, and the cross-check what the solver left.

    Parameters
    ----------
    job : Job
    batch_id : str, optional
        Copied into the record.
    worker : str, optional
        Node name of the worker (e.g. ``w1@host``); defaults to this machine's hostname.

    Returns
    -------
    Record
        The solver's record plus ``job_key``, ``verify``, ``worker``, ``job_elapsed_s`` (wall
        seconds for the whole job incl. cross-check, less any load of the compiled kernels:
        :func:`knights_tour._numba.job_clock`), ``finished_at`` (unix seconds) and, with
        verify, the ``cpsat_*`` fields. On any exception: status ``error``, the message in
        ``reason``, the class in ``error_type`` (of the interruption inside it, if any:
        :func:`unwrap_interruption`).

    Raises ``SystemExit``/``KeyboardInterrupt`` found wrapped in an ordinary exception (the
    process is being stopped: the job must be redelivered, not recorded).
    """
    began = job_clock()  # a load of the engine's kernels inside the job is not its time
    try:
        record = solve_job(job)
        record.batch_id = batch_id
        if job.verify is not None:  # the cross-check has what the solver left of the budget
            left_s = job.budget_s - (job_clock() - began)
            cross_check(record, job.verify, time_limit_s=left_s)
        record.job_key = job.key
        record.verify = job.verify
    except Exception as exc:  # noqa: BLE001 - a job must never crash its worker
        cause = unwrap_interruption(exc)
        if not isinstance(cause, Exception):
            raise cause from exc
        record = error_record(job, cause, batch_id)
    record.worker = worker or socket.gethostname()
    record.job_elapsed_s = round(job_clock() - began, 6)
    record.finished_at = round(time.time(), 3)
    return record


def order_key(rows: Any, cols: Any, start: Any, solver: Any, closed: Any, job_key: Any) -> tuple:
    """Deterministic order of records and jobs: (rows, cols, start, solver, closed, job key),
    robust to the odd values an invalid-job error record may carry."""

    def num(v: Any) -> tuple[int, Any]:
        return (0, v) if _is_int(v) else (1, str(v))

    if isinstance(start, (list, tuple)) and len(start) == 2:
        s = (num(start[0]), num(start[1]))
    else:
        s = ((1, str(start)), (1, ""))
    return (num(rows), num(cols), s, str(solver), bool(closed), str(job_key))


def record_sort_key(record: Record) -> tuple:
    """:func:`order_key` of a record: (rows, cols, start, solver, closed, job key)."""
    return order_key(
        record.rows, record.cols, record.start, record.solver, record.closed, record.job_key
    )


__all__ = [
    "parse_jobs",
    "Job",
    "JobOptions",
    "make_batch_jobs",
    "solve_job",
    "run_job",
    "error_record",
    "record_sort_key",
    "order_key",
    "unwrap_interruption",
]
