"""``ktour worker`` and ``ktour redis``: the processes a deployment on many hosts runs, with
the project's options (:mod:`knights_tour.local.serving`). Each runs in the foreground until
Ctrl-C (or SIGTERM).

``ktour worker`` is Celery's own worker (``celery -A knights_tour.worker worker``, prefork pool)
on the project queue, so nobody writes that line by hand; ``ktour redis`` is the bundled
``redis-server`` configured as the workers require, and prints the URL to give them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from knights_tour.commands._checks import require_positive
from knights_tour.commands._errors import ExitCode, exit_code
from knights_tour.commands._options import url_redis_option
from knights_tour.errors import KnightsTourError
from knights_tour.local.launching import configured_redis_url, redis_server_binary
from knights_tour.local.serving import server_password, server_url, worker_options, write_config
from knights_tour.settings import PRIVATE_UMASK, get_settings
from knights_tour.store.urls import check_redis_url
from knights_tour.worker.lazy import celery_worker


@click.command("worker")
@url_redis_option
@click.option(
    "-c",
    "--concurrency",
    "concurrency",
    type=int,
    default=None,
    metavar="N",
    help="Pool processes, one job at a time each (default KT_WORKERS = cores).",
)
@click.option(
    "-n",
    "--name",
    "name",
    default="solver@%h",
    show_default=True,
    metavar="NAME@%h",
    help="Celery node name (%h = this host's name); give each worker on one host its own.",
)
@click.option(
    "--loglevel",
    "loglevel",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default=None,
    help="Log level (default KT_LOG_LEVEL).",
)
def worker(
    redis_url: str | None, concurrency: int | None, name: str, loglevel: str | None
) -> ExitCode | int:
    """Run a Celery worker of the project's queue on a Redis server, until Ctrl-C.

    Celery's own worker (prefork pool) with the project's settings (KT_ variables) and names:
    what 'celery -A knights_tour.worker worker -Q knights_tour -n NAME@%h -c N' runs. Needs
    --redis or KT_REDIS_URL (e.g. the URL 'ktour redis' prints). A wrong password or a Redis
    that may evict keys stops it at once (exit 78); an unreachable one is retried. Exit 0
    after a warm shutdown.
    """
    url = configured_redis_url(redis_url)
    if url is None:
        raise KnightsTourError("worker needs the Redis URL (--redis URL or KT_REDIS_URL)")
    check_redis_url(url)
    if concurrency is not None:
        require_positive(concurrency, "--concurrency")
    if "@" not in name or not name.split("@", 1)[0]:
        raise click.BadParameter("must be NAME@HOST (e.g. solver1@%h)", param_hint="--name")
    settings = get_settings()
    argv_level = loglevel or settings.log_level
    # The worker reads its broker from the settings when the Celery app is imported.
    os.environ["KT_REDIS_URL"] = url
    get_settings.cache_clear()
    app = celery_worker().app
    node = app.Worker(**worker_options(name, concurrency or settings.workers, argv_level))
    node.start()
    return exit_code(int(node.exitcode or 0))


@click.command("redis")
@click.option(
    "--bind",
    "bind",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDR",
    help="Address to listen on; 0.0.0.0 for workers on other hosts.",
)
@click.option("--port", "port", type=int, default=6379, show_default=True, metavar="PORT")
@click.option(
    "--password",
    "password",
    default=None,
    metavar="PW",
    help="Password clients must give (default: one generated for the directory and kept "
    "in its 'password' file).",
)
@click.option(
    "--dir",
    "data_dir",
    default=None,
    metavar="DIR",
    help="Where the server keeps its data (default <KT_DATA_DIR>/shared-redis-PORT).",
)
def redis_server(bind: str, port: int, password: str | None, data_dir: str | None) -> ExitCode:
    """Run a Redis server for workers and clients on many hosts, until Ctrl-C.

    The redis-server bundled with the package (also in the virtual environment's bin),
    configured as the workers require: a password always, durable (append-only file), never
    evicting a key. Prints the URL to give 'ktour worker', 'submit', 'status' and 'collect'
    (--redis URL or KT_REDIS_URL), then runs the server in the foreground.
    """
    if not 1 <= port <= 65535:
        raise click.BadParameter("must be 1..65535", param_hint="--port")
    where = Path(data_dir) if data_dir else get_settings().data_dir / f"shared-redis-{port}"
    secret = server_password(where, password)
    try:
        conf = write_config(where, bind, port, secret)
    except OSError as exc:
        raise KnightsTourError(f"cannot write the server's directory {where}: {exc}") from None
    binary = redis_server_binary()
    click.echo(f"ktour: redis-server on {bind}:{port}, data in {where}", err=True)
    click.echo(server_url(bind, port, secret), nl=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.umask(PRIVATE_UMASK)  # its append-only file is its owner's alone
    os.execv(binary, [binary, str(conf)])  # noqa: S606 - the bundled server, no shell
    return ExitCode.OK  # pragma: no cover - execv does not return


__all__ = ["worker", "redis_server"]
