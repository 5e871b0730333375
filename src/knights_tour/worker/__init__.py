"""The cluster: the Celery app, its Redis transport, and what keeps work safe across workers.

Owns the Celery app (:mod:`.celery`: ``celery -A knights_tour.worker worker`` finds it there),
the task names and message shapes without Celery (:mod:`.messages`), the lazy door through which
the rest of the package reaches Celery (:mod:`.lazy`), kombu's hardened Redis transport
(:mod:`.transport`) and the worker's log filter (:mod:`.logs`); the lease protocol: the Redis
side (:mod:`.ledger`, :mod:`.leases`, :mod:`.holders`, :mod:`.orphans`, :mod:`.nodes`), the
worker's policy (:mod:`.lease_keeper`), a chunk's claim and frame (:mod:`.claims`) and recovery
(:mod:`.recovery`); the broker's queue (:mod:`.queue`), the dead letters (:mod:`.dead_letters`)
and the workers seen by broadcast (:mod:`.monitor`).

May import: ``store``, ``solvers``, ``tours`` and the ground floor; Celery and kombu only in
:mod:`.celery`, :mod:`.transport`, :mod:`.logs` and :mod:`.lazy`. Its Redis-only modules import
no Celery (the ``store`` contract).
"""
