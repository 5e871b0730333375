"""Batches of tour jobs: plan, submit, run, wait, collect, resume, retry, cancel, status.

Owns the job (:mod:`.jobs`: ``Job``/``JobOptions``, ``run_job``), chunks and their time limits
(:mod:`.chunking`), estimates before submitting (:mod:`.estimate`), the client side of a batch
(:mod:`.client`: make jobs, submit, resend, recover, wait, resume, collect), the worker side of a
chunk (:mod:`.execution`), a batch's data in Redis (:mod:`.store`, :mod:`.records`,
:mod:`.progress`, :mod:`.saving`), its status (:mod:`.status`, :mod:`.verdict`), one job's view
(:mod:`.job_view`), retrying (:mod:`.retrying`), cancelling (:mod:`.cancelling`), cleanup
(:mod:`.cleanup`), the records file of a running batch (:mod:`.record_stream`), reports
collected on a schedule (:mod:`.collector`, :mod:`.schedule`, :mod:`.schedule_file`).

May import: ``worker`` (Celery only through :mod:`knights_tour.worker.lazy`; the beat schedule
modules import Celery directly), ``store``, ``output``, ``solvers``, ``tours`` and the ground
floor. Never click or rich.
"""
