"""The result model: one :class:`TourResult` per job, serialised as one JSON object.

The JSON record (``TourResult.to_dict()``) is what crosses the wire and what is stored in Redis
and written to JSON Lines files. Its fields:

==============  =============================================================================
``rows, cols``  board size
``start``       ``[row, col]``, row 0 at the top
``start_square`` algebraic name of the start (rank 1 at the bottom)
``solver``      backend name (see :mod:`knights_tour.solvers`)
``closed``      whether a closed (re-entrant) tour was asked for
``status``      ``found`` | ``no_tour`` | ``unknown`` | ``error``
``proof``       for ``no_tour``: ``parity`` | ``exhaustive`` | ``cpsat`` | ``theorem``; else null
``proof_detail`` words and source of the proof (e.g. the theorem cited), or null
``reason``      for ``unknown``/``error``: why (``node_limit``, ``time_limit``, a message)
``tour``        list of ``[row, col]`` of length rows*cols, or null
``checks``      ``{"verifier": bool or null, "cpsat": bool or null}``
``nodes``       search nodes the solver expanded (0 when not applicable)
``elapsed_s``   wall seconds the solver took
``batch_id``    the batch the job ran in, when it ran in one
==============  =============================================================================

Extra fields are allowed (``extra``) and are merged into the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from knights_tour.board import Board, Square


class Status(str, Enum):
    """Outcome of a job."""

    FOUND = "found"
    NO_TOUR = "no_tour"
    UNKNOWN = "unknown"
    ERROR = "error"


class Proof(str, Enum):
    """Why a ``no_tour`` answer is true.

    * ``parity`` – colour parity: a tour alternates colours, so on a board with an odd number of
      squares an open tour starts and ends on the majority colour, and no closed tour exists.
    * ``exhaustive`` – a complete backtracking search finished without a tour.
    * ``cpsat`` – the CP-SAT Hamiltonian-path model is INFEASIBLE.
    * ``theorem`` – a published theorem (cited in ``proof_detail``), e.g. Schwenk 1991 for closed
      tours, Cull & De Curtins 1978 / Conrad et al. 1994 for open tours.
    """

    PARITY = "parity"
    EXHAUSTIVE = "exhaustive"
    CPSAT = "cpsat"
    THEOREM = "theorem"


def _tour_json(tour: Any) -> list[list[int]] | None:
    """The tour as JSON lists ``[[row, col], ...]``; accepts a list of pairs or (for huge boards,
    see the ``warnsdorff`` backend) a numpy integer array of shape (N, 2)."""
    if tour is None:
        return None
    if hasattr(tour, "tolist"):
        return tour.tolist()
    return [[int(r), int(c)] for r, c in tour]


@dataclass
class TourResult:
    """The answer to one job. See the module docstring for the JSON record it serialises to."""

    rows: int
    cols: int
    start: Square
    solver: str
    closed: bool = False
    status: Status = Status.UNKNOWN
    proof: Proof | None = None
    proof_detail: str | None = None
    reason: str | None = None
    tour: list[Square] | None = None  # or a numpy (N, 2) int array for huge boards
    checks: dict[str, bool | None] = field(
        default_factory=lambda: {"verifier": None, "cpsat": None}
    )
    nodes: int = 0
    elapsed_s: float = 0.0
    batch_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def board(self) -> Board:
        return Board(self.rows, self.cols)

    @property
    def start_square(self) -> str:
        """Algebraic name of the start square."""
        return self.board.algebraic(self.start)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready record (plain dicts, lists, str, int, float, bool, None)."""
        record: dict[str, Any] = {
            "rows": self.rows,
            "cols": self.cols,
            "start": [self.start[0], self.start[1]],
            "start_square": self.start_square,
            "solver": self.solver,
            "closed": self.closed,
            "status": Status(self.status).value,
            "proof": Proof(self.proof).value if self.proof is not None else None,
            "proof_detail": self.proof_detail,
            "reason": self.reason,
            "tour": _tour_json(self.tour),
            "checks": dict(self.checks),
            "nodes": int(self.nodes),
            "elapsed_s": round(float(self.elapsed_s), 6),
            "batch_id": self.batch_id,
        }
        for key, value in self.extra.items():
            record.setdefault(key, value)
        return record

    def to_json(self) -> str:
        """The record as one line of JSON."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> TourResult:
        """Rebuild a result from its record (the inverse of :meth:`to_dict`).

        Raises
        ------
        KeyError, ValueError
            If a required field is missing or has an invalid value.
        """
        known = {
            "rows", "cols", "start", "start_square", "solver", "closed", "status", "proof",
            "proof_detail", "reason", "tour", "checks", "nodes", "elapsed_s", "batch_id",
        }
        tour = record.get("tour")
        return cls(
            rows=int(record["rows"]),
            cols=int(record["cols"]),
            start=(int(record["start"][0]), int(record["start"][1])),
            solver=str(record["solver"]),
            closed=bool(record.get("closed", False)),
            status=Status(record["status"]),
            proof=Proof(record["proof"]) if record.get("proof") else None,
            proof_detail=record.get("proof_detail"),
            reason=record.get("reason"),
            tour=[(int(r), int(c)) for r, c in tour] if tour is not None else None,
            checks=dict(record.get("checks") or {"verifier": None, "cpsat": None}),
            nodes=int(record.get("nodes") or 0),
            elapsed_s=float(record.get("elapsed_s") or 0.0),
            batch_id=record.get("batch_id"),
            extra={k: v for k, v in record.items() if k not in known},
        )
