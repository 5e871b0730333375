"""Counting knight's tours: every tour from a start square, not just one.

Owns the plan of a count and its report (:mod:`.plan`), enumeration of a prefix's tours
(:mod:`.search`, kernel :mod:`.count_kernel`), the frontier dynamic programme (:mod:`.frontier`,
:mod:`.frontier_run`, :mod:`.frontier_store`, kernels :mod:`.frontier_kernel` and
:mod:`.frontier_join`), which method a count uses (:mod:`.method`), the board's symmetries
(:mod:`.symmetry`), a DP count as separate jobs (:mod:`.dp_jobs`), a count's records as they
cross the wire and are stored (:mod:`.records`); and a count on the cluster:
its stored partials (:mod:`.store`), the client that sends and waits (:mod:`.client`,
:mod:`.dp_client`) and the worker side of its sub-jobs (:mod:`.execution`,
:mod:`.dp_execution`).

May import: ``batches`` (cancelling a count's messages),
``worker``, ``store``, ``solvers``, ``tours`` and the ground floor. The enumeration, the DP and
their kernels import no Celery, Redis, click or rich (the ``pure`` contract).
"""
