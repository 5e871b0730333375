"""The frontier DP's layers on disk: one folder per sweep, named by its plan's digest.

A sweep's folder (``<name>-<digest>`` under the checkpoint directory) holds its last finished
layer as ``layer-K.part-J.npy`` files of ``(key, count)`` rows (``uint64``), a
``manifest.json`` naming them with every step's figures, and layers kept for other sweeps
(``kept-K.npy``). Files are written to a temporary name, synced and renamed, the manifest last,
so a killed run leaves the previous layer readable; layers are read back memory-mapped. The
digest covers the plan's tables, so a different count never resumes from another's layers.

Pure: no Celery, no Redis.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knights_tour.counting import frontier
from knights_tour.counting import frontier_kernel as fk


@dataclass
class LayerStat:
    """One step: states after it, successors generated (all parts), seconds, parts used."""

    step: int
    states: int
    transitions: int
    seconds: float
    parts: int = 1

    def to_dict(self) -> dict[str, int | float]:
        """The step as reported and kept in a sweep's manifest: ``step``, ``states``,
        ``transitions``, ``seconds`` (to the millisecond), ``parts``."""
        return {
            "step": self.step,
            "states": self.states,
            "transitions": self.transitions,
            "seconds": round(self.seconds, 3),
            "parts": self.parts,
        }


def plan_digest(plan: frontier.SweepPlan) -> str:
    """A short hash of a sweep's name and tables: equal digests, equal sweeps."""
    h = hashlib.sha256(plan.name.encode())
    scal = plan.tables[0]
    if not scal[:, fk.C_RESERVE_B :].any():
        scal = scal[:, : fk.C_RESERVE_B]  # plans without a reserved end hash as before
    for arr in (scal, *plan.tables[1:]):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def sweep_dir(root: Path, plan: frontier.SweepPlan) -> Path:
    """The folder under ``root`` (the checkpoint directory) that holds ``plan``'s layers:
    ``<name>-<digest>``. Not created here."""
    return root / f"{plan.name}-{plan_digest(plan)}"


class Checkpoints:
    """Layers of one sweep on disk: ``layer-K.part-J.npy`` files and ``manifest.json``."""

    def __init__(self, root: Path, plan: frontier.SweepPlan) -> None:
        self.dir = sweep_dir(root, plan)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest = self.dir / "manifest.json"

    def load_last(self) -> tuple[int, list[np.ndarray], list[LayerStat]] | None:
        try:
            record = json.loads(self.manifest.read_text())
        except (OSError, ValueError):
            return None
        k = int(record["step"])
        parts = [np.load(self.dir / name, mmap_mode="r") for name in record["files"]]
        stats = [LayerStat(**d) for d in record["layers"]]
        return k, parts, stats

    def save(self, k: int, parts: list[np.ndarray], stats: list[LayerStat]) -> list[np.ndarray]:
        names = []
        for j, arr in enumerate(parts):
            name = f"layer-{k}.part-{j}.npy"
            tmp = self.dir / (name + ".tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, arr)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.dir / name)
            names.append(name)
        record = {"step": k, "files": names, "layers": [s.to_dict() for s in stats]}
        tmp = self.manifest.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            fh.write(json.dumps(record))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.manifest)
        # the rename itself on disk before the previous layer's files go
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        for old in self.dir.glob("layer-*.npy"):
            if not old.name.startswith(f"layer-{k}."):
                old.unlink(missing_ok=True)
        return [np.load(self.dir / name, mmap_mode="r") for name in names]

    def save_kept(self, k: int, parts: list[np.ndarray]) -> np.ndarray:
        """Keep layer ``k`` (beyond the next save) as ``kept-K.npy``; returns it mapped."""
        path = self.dir / f"kept-{k}.npy"
        tmp = self.dir / f"kept-{k}.npy.tmp"
        with open(tmp, "wb") as fh:
            np.save(fh, np.concatenate(parts) if len(parts) > 1 else np.asarray(parts[0]))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return np.load(path, mmap_mode="r")

    def load_kept(self, k: int) -> np.ndarray | None:
        path = self.dir / f"kept-{k}.npy"
        return np.load(path, mmap_mode="r") if path.exists() else None


def sweep_done(plan: frontier.SweepPlan, checkpoint_dir: str | Path) -> bool:
    """True if ``checkpoint_dir`` holds the last layer of ``plan`` (its count is on disk)."""
    manifest = sweep_dir(Path(checkpoint_dir), plan) / "manifest.json"
    try:
        return int(json.loads(manifest.read_text())["step"]) == plan.n_steps - 1
    except (OSError, ValueError, KeyError, TypeError):
        return False


__all__ = ["Checkpoints", "LayerStat", "plan_digest", "sweep_done"]
