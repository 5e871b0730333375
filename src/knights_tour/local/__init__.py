"""The embedded default: a Redis server and Celery workers on this machine, started and stopped.

Owns opening a backend (:mod:`.backend`: the embedded Redis or a given URL, local workers), the
processes launched with the standard library alone (:mod:`.launching`, :mod:`.prelaunch`,
:mod:`.worker_pool`, :mod:`.celery_worker_main`), the embedded Redis
(:mod:`.embedded_redis`, shared by several processes through :mod:`.embedded_redis_sharing`,
watched by :mod:`.embedded_redis_watchdog`; a redis-server process :mod:`.redis_process`), the
local workers (:mod:`.workers`) and the configuration of a Redis and workers for many hosts
(:mod:`.serving`).

May import: ``worker`` (Celery only through :mod:`knights_tour.worker.lazy`), ``store`` and the
ground floor.
"""
