"""The records of a count, as they cross the wire and are stored: a frontier-DP count's
sub-jobs (:class:`DpSubJob`), their progress (:class:`DpProgress`) and results
(:class:`DpResult`), the figures of a start class or a trunk, and what a count's report says
beyond its grid (:class:`CountExtra`).

Each is a :class:`msgspec.Struct` whose fields are the keys of its JSON object, in order; a
field left unset (``UNSET``) is left out of it, so a record's JSON is what the count wrote
before these types. Pure: no Celery, no Redis.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from knights_tour.board import Board, Square
from knights_tour.errors import InvalidJobError
from knights_tour.worker.messages import DP_KIND

LayerRow = dict[str, int | float]
"""One step of a sweep as reported: ``step``, ``states``, ``transitions``, ``seconds``,
``parts`` (:meth:`knights_tour.counting.frontier_store.LayerStat.to_dict`)."""


class ClassFigures(msgspec.Struct, kw_only=True):
    """How the frontier DP counted one start class (its ``representative``): ``count`` and
    ``method`` in words, and what applies of: the upper half's peak states and the pairs
    checked when two halves met, a full sweep's peak states, the transitions, the layers
    (:data:`LayerRow`), the seconds and the worker that counted it. Unset fields are left out
    of its JSON object."""

    representative: tuple[int, int]
    count: int
    method: str | UnsetType = UNSET
    upper_peak_states: int | UnsetType = UNSET
    peak_states: int | UnsetType = UNSET
    pairs: int | UnsetType = UNSET
    transitions: int | UnsetType = UNSET
    layers: list[LayerRow] | UnsetType = UNSET
    seconds: float | None | UnsetType = UNSET
    worker: str | None | UnsetType = UNSET


class CountExtra(msgspec.Struct, kw_only=True):
    """What a :class:`CountReport` says beyond the grid, by how it was counted (unset fields
    are left out of its JSON): the DP's ``method``, per-class figures (``dp_classes``),
    ``wall_s``, peak resident memory (bytes; on the workers the largest process's and each
    worker's), the layers of its lower halves and trunks; a count on the workers its
    ``count_id``, the sub-jobs' summed seconds (``subjob_s``), the span of this run's counting
    (``counting_s``, None when it counted nothing) and the sub-jobs reused from an earlier
    run."""

    method: str | UnsetType = UNSET
    dp_classes: list[ClassFigures] | UnsetType = UNSET
    wall_s: float | UnsetType = UNSET
    peak_rss_bytes: int | UnsetType = UNSET
    peak_rss_bytes_per_worker: dict[str, int] | UnsetType = UNSET
    lower_halves: list[list[LayerRow]] | UnsetType = UNSET
    trunks: list[list[LayerRow]] | UnsetType = UNSET
    count_id: str | UnsetType = UNSET
    subjob_s: float | UnsetType = UNSET
    counting_s: float | None | UnsetType = UNSET
    reused_subjobs: int | UnsetType = UNSET


class DpSubJob(msgspec.Struct, frozen=True, kw_only=True):
    """One sub-job of a DP count, as sent to the workers and stored with the count: a trunk
    (``role`` ``"trunk"``, trunk ``group`` of :func:`dp_plan`) or the tail of one searched
    class (``role`` ``"tail"``: the class of ``square``, which waits for its trunk's layer
    ``after``), of the count of the ``rows`` x ``cols`` board (``start``'s class only when
    given); ``memory_bytes`` bounds one layer's table. ``key`` names it within the count;
    ``generation`` the registration of the count it was sent for
    (:func:`knights_tour.counting.store.count_generation`; unset: not checked): a worker
    stores nothing of a sub-job of an earlier one (a task left from before ``--fresh``).
    Encoded (field order as declared) it is the JSON object the workers read."""

    kind: str = DP_KIND
    key: str
    rows: int
    cols: int
    start: tuple[int, int] | None
    role: str
    group: int = -1
    square: tuple[int, int] | None = None
    after: int = -1
    memory_bytes: int
    generation: str | UnsetType = UNSET

    @classmethod
    def of(
        cls,
        board: Board,
        start: Square | None,
        role: str,
        *,
        group: int = -1,
        square: Square | None = None,
        after: int = -1,
        memory_bytes: int,
    ) -> DpSubJob:
        """The sub-job of ``role`` in the count of ``board`` (see the class)."""
        name = (
            f"trunk{group}" if square is None or role == "trunk" else f"sq{square[0]}.{square[1]}"
        )
        return cls(
            key=f"{board.label}:dp:{name}",
            rows=board.rows,
            cols=board.cols,
            start=start,
            role=role,
            group=group,
            square=square,
            after=after,
            memory_bytes=int(memory_bytes),
        )

    @property
    def board(self) -> Board:
        return Board(self.rows, self.cols)

    @property
    def fence(self) -> str:
        """The generation a result of this sub-job is checked against ("": none)."""
        return "" if self.generation is UNSET else self.generation

    def to_dict(self) -> dict[str, object]:
        """The JSON object of the sub-job (read back by :meth:`from_dict`)."""
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, raw: Any) -> DpSubJob:
        """Validate ``raw`` (a decoded message: untrusted).

        Raises
        ------
        InvalidJobError
            If a field is missing or out of range.
        """
        try:
            board = Board(int(raw["rows"]), int(raw["cols"]))
            start = None if raw.get("start") is None else board.check_square(tuple(raw["start"]))
            role = raw["role"]
            square = None if raw.get("square") is None else board.check_square(tuple(raw["square"]))
            group = int(raw.get("group", -1))
            after = int(raw.get("after", -1))
            memory = int(raw["memory_bytes"])
            key = raw["key"]
            generation = raw.get("generation", UNSET)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidJobError(f"malformed DP sub-job: {exc!r}") from None
        if role not in ("trunk", "tail") or memory < 1 or not isinstance(key, str):
            raise InvalidJobError("malformed DP sub-job: role, memory_bytes or key")
        if generation is not UNSET and not isinstance(generation, str):
            raise InvalidJobError("malformed DP sub-job: generation is not a string")
        if (role == "tail") != (square is not None):
            raise InvalidJobError("malformed DP sub-job: a tail names its square, a trunk not")
        made = cls.of(
            board, start, role, group=group, square=square, after=after, memory_bytes=memory
        )
        return msgspec.structs.replace(made, key=key, generation=generation)  # as it was sent


class TrunkFigures(msgspec.Struct, kw_only=True):
    """What a trunk's sub-job reports: its ``layers`` (:meth:`LayerStat.to_dict` rows), their
    ``peak_states``, and ``method`` when it was not run."""

    layers: list[LayerRow]
    peak_states: int
    method: str | msgspec.UnsetType = msgspec.UNSET


class DpResult(msgspec.Struct, kw_only=True):
    """What a DP sub-job stores beside its partial count: its ``role``, its figures (a class's
    :class:`~knights_tour.counting.records.ClassFigures`, a trunk's :class:`TrunkFigures`) and
    the peak resident memory of the process that ran it (bytes)."""

    role: str
    figures: ClassFigures | TrunkFigures
    peak_rss_bytes: int


class CountEntry(msgspec.Struct, kw_only=True):
    """One sub-job's stored entry: its partial ``count`` (None: the sub-job failed, ``error``
    says why), the search ``nodes`` (a DP sub-job's transitions), ``elapsed_s``, when it was
    stored (``finished_at``, unix seconds; none from an older tree) and the ``worker``; a DP
    sub-job's :class:`DpResult` fields follow (``figures`` read back as the JSON object they
    are)."""

    count: int | None
    nodes: int = 0
    elapsed_s: float = 0.0
    finished_at: float | None = None
    worker: str | None = None
    role: str | UnsetType = UNSET
    figures: dict[str, object] | UnsetType = UNSET
    peak_rss_bytes: int | UnsetType = UNSET
    error: str | UnsetType = UNSET


class DpProgress(msgspec.Struct, kw_only=True):
    """How far the sweep of one DP sub-job got, stored after every checkpointed layer (its
    last one overwrites the one before): the layer's figures (``step`` of ``n_steps``,
    ``states``, ``transitions``, ``seconds``, ``parts``), the sweep's totals over every task
    it ran in (``done_transitions``, ``done_s``, ``tasks``), the process's peak resident memory
    (bytes), the ``worker`` and when (``at``, unix seconds)."""

    sweep: str
    role: str
    step: int
    n_steps: int
    states: int
    transitions: int
    seconds: float
    parts: int
    done_transitions: int
    done_s: float
    tasks: int
    peak_rss_bytes: int
    worker: str | None
    at: float


__all__ = [
    "LayerRow",
    "ClassFigures",
    "CountExtra",
    "DpSubJob",
    "TrunkFigures",
    "DpResult",
    "DpProgress",
    "CountEntry",
]
