"""Configuration: the one module that reads the environment (variables prefixed ``KT_``).

Every setting has a documented default; nothing else in the package reads ``os.environ`` for
``KT_`` variables. Read with :func:`get_settings` (cached; call ``get_settings.cache_clear()``
after changing the environment in tests).

=============================  ========================================================  =========
variable                       meaning                                                   default
=============================  ========================================================  =========
``KT_REDIS_URL``               broker and result store; unset = embedded Redis           unset
``KT_DATA_DIR``                embedded Redis data, reports (platformdirs user data)     per-user
``KT_SOFT_TIME_LIMIT_S``       Celery soft time limit per task, seconds                  300
``KT_HARD_TIME_LIMIT_S``       Celery hard time limit per task, seconds                  360
``KT_VISIBILITY_TIMEOUT_S``    Redis visibility timeout, seconds (> hard limit)          420
``KT_JOB_TIME_LIMIT_S``        time budget per job (solver + cross-check), seconds       60
``KT_CPSAT_TIME_LIMIT_S``      CP-SAT limit when no job budget is given, seconds         60
``KT_RESULT_TTL_S``            expire stored records after this many seconds; 0 = never  0
``KT_WORKERS``                 local worker processes for the embedded run               cores
``KT_LOG_LEVEL``               worker log level                                          WARNING
``KT_SCHEDULE_FILE``           TOML schedule for ``celery beat`` (see schedule.py)       unset
``KT_REPORTS_DIR``             collection reports; unset = ``{KT_DATA_DIR}/reports``     unset
``KT_COLLECT_INTERVAL_S``      collect every S seconds when the schedule file says not   60
``KT_COLLECT_LOCK_TIMEOUT_S``  lifetime of the collection lock, seconds                  300
``KT_LEASE_S``                 job lease: a job whose worker is silent this long is      10
                               re-sent by recovery (heartbeat every third of it)
``KT_MAX_ATTEMPTS``            worker deaths on one job before it gets an error record   3
``KT_CONFIRM_JOBS``            ask (or ``--yes``) before submitting more jobs than this  50000
``KT_CONFIRM_OUTPUT_MB``       ask before a batch whose records would exceed this, MB    200
``KT_CONFIRM_HOURS``           ask before a batch or count estimated to take longer on   1
                               this machine's workers (``KT_WORKERS``), hours
``KT_PROGRESS_S``              seconds between progress lines when stderr is not a       10
                               terminal (a live bar when it is)
``KT_LOG_KEEP``                worker log files kept in ``{KT_DATA_DIR}/logs`` (the      40
                               oldest are deleted when local workers start)
``KT_LOG_MAX_MB``              and at most this many MB of them                          50
=============================  ========================================================  =========

Redis connections (every one the project opens: the broker's, the store's, the client's; why
each default is what it is: ``docs/deploy.md``, Network settings):

==============================  ======================================================  =======
variable                        meaning                                                 default
==============================  ======================================================  =======
``KT_REDIS_SOCKET_TIMEOUT_S``   longest wait for one reply; then the connection is      10
                                dropped and the command retried
``KT_REDIS_CONNECT_TIMEOUT_S``  longest wait to open a connection, seconds              5
``KT_REDIS_KEEPALIVE_S``        TCP keepalive: first probe after this many idle         10
                                seconds, then every third of it; 3 unanswered = dead
``KT_REDIS_HEALTH_CHECK_S``     PING a connection idle this long before using it; also  5
                                kombu's check of its BRPOP and pub/sub connections
``KT_REDIS_RECONNECT_MAX_S``    longest pause between a worker's reconnect attempts     2
``KT_ALLOW_EVICTING_REDIS``     accept a Redis whose ``maxmemory-policy`` may evict     false
                                keys (records and queued jobs can then vanish)
==============================  ======================================================  =======
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("knights-tour", appauthor=False))


class Settings(BaseSettings):
    """All ``KT_`` settings; see the module docstring for the table."""

    model_config = SettingsConfigDict(env_prefix="KT_", extra="ignore")

    redis_url: str | None = None
    data_dir: Path = Field(default_factory=_default_data_dir)
    soft_time_limit_s: float = Field(300.0, gt=0)
    hard_time_limit_s: float = Field(360.0, gt=0)
    visibility_timeout_s: float = Field(420.0, gt=0)
    job_time_limit_s: float = Field(60.0, gt=0)
    cpsat_time_limit_s: float = Field(60.0, gt=0)
    result_ttl_s: int = Field(0, ge=0)
    workers: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), ge=1)
    log_level: str = "WARNING"
    schedule_file: Path | None = None
    reports_dir: Path | None = None
    collect_interval_s: float = Field(60.0, gt=0)
    collect_lock_timeout_s: float = Field(300.0, gt=0)
    lease_s: float = Field(10.0, ge=1.0)
    max_attempts: int = Field(3, ge=1)
    confirm_jobs: int = Field(50_000, ge=1)
    confirm_output_mb: float = Field(200.0, gt=0)
    confirm_hours: float = Field(1.0, gt=0)
    progress_s: float = Field(10.0, gt=0)
    log_keep: int = Field(40, ge=1)
    log_max_mb: float = Field(50.0, gt=0)
    redis_socket_timeout_s: float = Field(10.0, gt=0)
    redis_connect_timeout_s: float = Field(5.0, gt=0)
    redis_keepalive_s: int = Field(10, ge=1)
    redis_health_check_s: int = Field(5, ge=1)
    redis_reconnect_max_s: float = Field(2.0, gt=0)
    allow_evicting_redis: bool = False

    @property
    def reports_path(self) -> Path:
        """``KT_REPORTS_DIR`` if set, else ``{KT_DATA_DIR}/reports``."""
        return self.reports_dir if self.reports_dir is not None else self.data_dir / "reports"

    @field_validator("data_dir", "schedule_file", "reports_dir", mode="before")
    @classmethod
    def _path_not_empty(cls, value: object) -> object:
        """An empty path would silently mean the current directory: refuse it."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("must be a path, not empty (unset it for the default)")
        return value

    @model_validator(mode="after")
    def _limits_in_order(self) -> Settings:
        if self.hard_time_limit_s <= self.soft_time_limit_s:
            raise ValueError("KT_HARD_TIME_LIMIT_S must be greater than KT_SOFT_TIME_LIMIT_S")
        if self.visibility_timeout_s <= self.hard_time_limit_s:
            raise ValueError("KT_VISIBILITY_TIMEOUT_S must be greater than KT_HARD_TIME_LIMIT_S")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment."""
    return Settings()
