"""``import knights_tour`` is light and leaves other packages working: numpy is not loaded until
a name needs it (PEP 562), and redis-py's ``redis.asyncio``, whose ``__init__`` is deferred
until something uses it, still works in full for code that does (each case in a fresh
interpreter, since the deferral is installed once per process). redis-py finds hiredis, a
dependency, and packs commands and parses replies with it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.process  # each case runs a fresh interpreter: not the fast loop


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_importing_the_package_loads_neither_numpy_nor_redis_asyncio_client():
    out = _python(
        """
        import sys
        import knights_tour, redis
        print("numpy" in sys.modules, "redis.asyncio.client" in sys.modules)
        """
    )
    assert out.split() == ["False", "False"]


def test_redis_asyncio_works_after_the_package_is_imported():
    out = _python(
        """
        import knights_tour
        import redis.asyncio
        from redis.asyncio import Redis
        client = redis.asyncio.Redis(host="127.0.0.1", port=1)
        print(Redis is redis.asyncio.Redis, type(client).__module__)
        """
    )
    assert out.split() == ["True", "redis.asyncio.client"]


def test_a_star_import_of_redis_asyncio_works_after_the_package_is_imported():
    out = _python(
        """
        import knights_tour
        from redis.asyncio import *
        print(Redis.__module__, ConnectionPool.__module__)
        """
    )
    assert out.split() == ["redis.asyncio.client", "redis.asyncio.connection"]


def test_the_first_uses_from_two_threads_run_the_deferred_init_once():
    out = _python(
        """
        import threading
        import knights_tour
        import redis.asyncio as ra
        seen, errors = [], []
        def use():
            try:
                seen.append(ra.Redis)
            except Exception as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=use) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(len(seen), len({id(c) for c in seen}), errors)
        """
    )
    assert out.split() == ["8", "1", "[]"]


def test_redis_py_packs_and_parses_with_hiredis():
    out = _python(
        """
        import knights_tour, redis
        from redis.connection import DefaultParser
        connection = redis.Connection(host="127.0.0.1", port=1)
        print(DefaultParser.__name__, type(connection._command_packer).__name__)
        """
    )
    assert out.split() == ["_HiredisParser", "HiredisRespSerializer"]
