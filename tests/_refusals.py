"""Each way a reachable Redis refuses writes, brought on and lifted on a real server of the
test's own: full under ``noeviction`` (``OOM``: ``maxmemory`` set well below what it uses), a
failed snapshot with ``stop-writes-on-bgsave-error`` (``MISCONF``: its directory removed under
it) and a read-only replica (``READONLY``: ``REPLICAOF`` a master that is not there)."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from knights_tour.local.prelaunch import free_port

CODES = ("OOM", "MISCONF", "READONLY")
"""The reply codes of a refused write, one per way."""


class Refusal:
    """One way for a reachable Redis to refuse writes (``code``), brought on and lifted.
    ``r`` is an administrator's client of the server; ``tmp`` a directory of the test's own."""

    def __init__(self, code: str, r: redis.Redis, tmp: Path) -> None:
        self.code, self.r, self.tmp = code, r, tmp
        self.dir = r.config_get("dir")["dir"]
        self.save = r.config_get("save")["save"]

    def begin(self) -> None:
        if self.code == "OOM":  # far below what it uses: deleting a few entries cannot help
            self.r.config_set("maxmemory", str(self.r.info("memory")["used_memory"] // 2))
        elif self.code == "READONLY":  # a replica of a master that is not there
            self.r.replicaof("127.0.0.1", free_port())
        else:  # MISCONF: with save points, a snapshot that fails (its directory is gone)
            self.r.config_set("save", "3600 1")
            gone = self.tmp / "gone"
            gone.mkdir()
            self.r.config_set("dir", str(gone))
            gone.rmdir()
            self._snapshot("err")

    def end(self) -> None:
        if self.code == "OOM":
            self.r.config_set("maxmemory", "0")
        elif self.code == "READONLY":
            self.r.replicaof("NO", "ONE")
        else:
            self.r.config_set("dir", self.dir)
            self._snapshot("ok")
            self.r.config_set("save", self.save)

    def _snapshot(self, want: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            persistence = self.r.info("persistence")
            if not persistence["rdb_bgsave_in_progress"]:
                if persistence["rdb_last_bgsave_status"] == want:
                    return
                try:
                    self.r.bgsave()
                except redis.ResponseError:  # one already running
                    pass
            time.sleep(0.1)
        raise AssertionError(f"the snapshot never ended {want}")
