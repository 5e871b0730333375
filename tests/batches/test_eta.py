"""The ETA of a batch (:func:`knights_tour.batches.estimate.eta_s`): the batch's estimate until
the measured rate is worth more.

The case the rule exists for: a batch of 620 jobs (``--sizes 5-12``) whose first two jobs took
14 s (workers starting, kernels compiling) and whose 618 others took 9 s; the rate measured at
2 of 620 jobs promised more than an hour.
"""

from __future__ import annotations

import pytest

from knights_tour.batches.client import make_jobs
from knights_tour.batches.estimate import estimate_batch, eta_s, parse_sizes, planned_s_per_job
from knights_tour.batches.jobs import JobOptions

JOBS, STARTUP_S, REST_S = 620, 14.0, 9.0


def test_early_on_the_estimate_counts_more_than_the_first_jobs_rate():
    planned = (STARTUP_S + REST_S) / JOBS  # an estimate that is right
    measured_only = eta_s(JOBS - 2, 2, STARTUP_S, None)
    assert measured_only == pytest.approx((JOBS - 2) * STARTUP_S / 2)  # over an hour
    assert measured_only > 3600
    eta = eta_s(JOBS - 2, 2, STARTUP_S, planned)
    assert eta is not None and eta < 2 * (STARTUP_S + REST_S)


def test_late_on_the_measured_rate_counts_more_than_the_estimate():
    measured = 0.5  # seconds per job, as measured
    for planned in (0.01, 50.0):  # a wrong estimate either way
        eta = eta_s(10, JOBS - 10, (JOBS - 10) * measured, planned)
        assert eta is not None
        assert abs(eta - 10 * measured) < abs(10 * planned - 10 * measured) / 20


def test_the_estimate_alone_before_any_job_and_nothing_without_either():
    assert eta_s(JOBS, 0, 5.0, 0.1) == pytest.approx(JOBS * 0.1)
    assert eta_s(JOBS, 0, 5.0, None) is None
    assert eta_s(0, JOBS, 30.0, None) == 0.0 and eta_s(0, JOBS, 30.0, 0.1) == 0.0


def test_the_weight_of_the_measured_rate_grows_with_the_jobs_done():
    etas = [eta_s(JOBS - d, d, d * 1.0, 0.1) / (JOBS - d) for d in (1, 100, 300, 600)]
    assert etas == sorted(etas) and 0.1 < etas[0] < etas[-1] < 1.0


def test_the_planned_time_per_job_is_the_batch_estimate_on_its_workers():
    _, jobs, params = make_jobs(["5-12"], JobOptions(verify="cpsat", time_limit_s=20.0))
    est = estimate_batch(parse_sizes(["5-12"]), verify="cpsat", time_limit_s=20.0)
    assert len(jobs) == est.jobs == JOBS
    for workers in (1, 2, 8):
        assert planned_s_per_job(params, workers) == pytest.approx(est.cpu_s / workers / est.jobs)
    assert planned_s_per_job(params, 0) is None
    assert planned_s_per_job({}, 2) is None
    assert planned_s_per_job({"sizes": "5x"}, 2) is None
