"""docs/architecture.md says what lives where: every module of the package is named there.

A module is named when the prose has it in backticks (``client``, ``batches/client.py``) or
the package tree at the top of the page lists its file name. A module added without its line
fails here, so the page stays true as the tree changes.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "knights_tour"
DOC = ROOT / "docs" / "architecture.md"

_FENCE = re.compile(r"```.*?```", re.S)


def _named(text: str) -> tuple[set[str], str]:
    """(the backticked names of the prose, the text of the fenced blocks)."""
    blocks = " ".join(_FENCE.findall(text))
    prose = _FENCE.sub("", text)
    return set(re.findall(r"`([^`\n]+)`", prose)), blocks


def _unnamed(text: str, package: Path) -> list[str]:
    ticks, blocks = _named(text)
    missing = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(package).as_posix()
        in_prose = any(
            t in (path.stem, path.name, rel) or t.endswith("/" + path.name) for t in ticks
        )
        in_tree = re.search(r"(?<![\w/])" + re.escape(path.name), blocks) is not None
        if not (in_prose or in_tree):
            missing.append(rel)
    return missing


def test_every_module_is_named_in_the_architecture_page():
    missing = _unnamed(DOC.read_text(encoding="utf-8"), PACKAGE)
    assert missing == [], "modules docs/architecture.md does not name:\n" + "\n".join(missing)


def test_a_module_the_page_does_not_name_is_found(tmp_path):
    pkg = tmp_path / "knights_tour"
    (pkg / "service").mkdir(parents=True)
    for name in ("__init__.py", "board.py", "service/__init__.py", "service/batches.py"):
        (pkg / name).write_text("")
    (pkg / "service" / "newcomer.py").write_text("")
    doc = "```\nboard.py  the ground floor\n```\n\n| `service/` | `batches` (submit) |\n"
    assert _unnamed(doc, pkg) == ["service/newcomer.py"]
