"""Durations in words for people: a measured time (``fmt_seconds``: ``180 µs``, ``4.56 s``) and
a time still to go (``format_eta``: ``3m05s``). Standard library only, so the progress lines
and ``ktour status`` format an ETA without loading the record type behind the reports."""

from __future__ import annotations


def fmt_seconds(x: float | None) -> str:
    """Seconds in words: ``180 µs``, ``12.3 ms``, ``4.56 s``, ``2.5 min``."""
    if x is None:
        return "–"
    if x >= 120:
        return f"{x / 60:.1f} min"
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 1:
        return f"{x:.3g} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.0f} µs"


def format_eta(seconds: float | None) -> str:
    """``"-"``, ``"0s"``, ``"42s"``, ``"3m05s"``, ``"2h03m"``."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


__all__ = ["fmt_seconds", "format_eta"]
