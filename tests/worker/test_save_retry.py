"""How long a task waits for a Redis that refuses writes: ``KT_SAVE_RETRY_S`` (default 30 s).

The refusal is a real reply of the session's Redis: a script that answers with Redis's own
``READONLY`` error, as a read-only replica answers a write (the project's client types it as
:class:`~knights_tour.errors.StorageFullError`)."""

from __future__ import annotations

import logging

import pytest

from knights_tour.errors import StorageFullError
from knights_tour.settings import SettingsError, default_of, get_settings, settings_from
from knights_tour.worker.claims import retrying

READONLY = 'return redis.error_reply("READONLY You can\'t write against a read only replica.")'


@pytest.fixture
def save_retry_s(monkeypatch):
    """``KT_SAVE_RETRY_S`` = 0.5 for this test."""
    monkeypatch.setenv("KT_SAVE_RETRY_S", "0.5")
    get_settings.cache_clear()
    yield 0.5
    get_settings.cache_clear()


def test_a_task_gives_up_on_refused_writes_after_the_configured_window(
    redis_client, save_retry_s, caplog
):
    calls = []

    def refused() -> object:
        calls.append(1)
        return redis_client.eval(READONLY, 0)

    with caplog.at_level(logging.ERROR, logger="knights_tour.worker.claims"):
        with pytest.raises(StorageFullError) as raised:
            retrying(refused)
    assert raised.value.reason.startswith("READONLY "), raised.value.reason
    assert len(calls) >= 2  # it retried before giving up
    assert "retrying for up to 0.5 s" in caplog.text, caplog.text


def test_the_window_defaults_to_30_s_and_must_be_positive():
    assert default_of("save_retry_s") == 30.0
    assert settings_from({"KT_SAVE_RETRY_S": "4"}).save_retry_s == 4.0
    with pytest.raises(SettingsError, match="KT_SAVE_RETRY_S"):
        settings_from({"KT_SAVE_RETRY_S": "0"})
