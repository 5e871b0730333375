"""A frontier-DP sweep cut off part way, as a killed worker leaves it: its ``progress``
callback raises when the sweep reaches a given layer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Killed(Exception):
    """Raised by :func:`killed_at`'s callback: the sweep ends there, as if killed."""


def killed_at(step: int) -> Callable[[str, Any, int], None]:
    """A ``progress(name, stat, n_steps)`` callback that raises :class:`Killed` once the
    sweep reports layer ``step``."""

    def progress(name: str, stat: Any, n_steps: int) -> None:
        if stat.step == step:
            raise Killed

    return progress
