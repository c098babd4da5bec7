"""descbench.smktuning: Snakemake's re-evaluation timers are coalesced, nothing else changes."""

import threading
import time

import pytest

from descbench import smktuning


class FakeScheduler:
    """Has what JobScheduler's re-evaluation touches: a semaphore that a round acquires."""

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def test_many_requests_while_pending_start_one_timer_and_release_once():
    sched = FakeScheduler()
    before = threading.active_count()
    for _ in range(50):
        smktuning._coalesced_reevaluation(sched, 0.2)
    # Snakemake's own version would have started 50 timer threads here.
    assert threading.active_count() - before == 1
    assert not sched._open_jobs.acquire(timeout=0.05)  # not before the delay
    assert sched._open_jobs.acquire(timeout=2.0)  # then exactly one round
    assert not sched._open_jobs.acquire(timeout=0.3)


def test_a_request_after_the_timer_fired_is_served_again():
    sched = FakeScheduler()
    smktuning._coalesced_reevaluation(sched, 0.05)
    assert sched._open_jobs.acquire(timeout=2.0)
    time.sleep(0.05)  # the timer thread has cleared its pending flag before releasing
    smktuning._coalesced_reevaluation(sched, 0.05)
    assert sched._open_jobs.acquire(timeout=2.0)


def test_timer_is_a_daemon_so_exit_does_not_wait_for_it():
    sched = FakeScheduler()
    smktuning._coalesced_reevaluation(sched, 30)
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]
    assert timers and all(t.daemon for t in timers)
    for t in timers:
        t.cancel()


def test_apply_patches_the_installed_snakemake():
    pytest.importorskip("snakemake")
    import snakemake.benchmark as smk_benchmark
    from snakemake.scheduling.job_scheduler import JobScheduler

    applied = smktuning.apply()
    # The Snakemake this project pins has both attributes; if a new version renames them, this
    # test says so instead of the optimisation silently disappearing.
    assert applied == {"benchmark_interval": True, "single_reevaluation_timer": True}
    assert JobScheduler._schedule_reevalutation is smktuning._coalesced_reevaluation
    assert smk_benchmark.BENCHMARK_INTERVAL_SHORT >= smktuning.BENCHMARK_INTERVAL_S


def test_scoring_jobs_import_numba_without_scipy_linalg_and_scipy_still_works():
    """descbench.cli.import_numba_without_blas_probe: numba's numpy support loads without
    importing scipy.linalg, kernels compile and run, and scipy.linalg imports normally after."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from descbench.cli import import_numba_without_blas_probe\n"
        "numba = import_numba_without_blas_probe()\n"
        "assert 'numba.np.arraymath' in sys.modules\n"
        "assert 'scipy.linalg' not in sys.modules, 'scipy.linalg was imported'\n"
        "import numpy as np\n"
        "from descbench.metrics.kernels import sqdist64\n"
        "a = np.arange(4, dtype=np.float32)\n"
        "assert sqdist64(a, a[::-1].copy()) == 20.0\n"
        "assert 'scipy.linalg' not in sys.modules\n"
        "import scipy.linalg\n"
        "assert abs(scipy.linalg.det(np.eye(2)) - 1) < 1e-12\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
