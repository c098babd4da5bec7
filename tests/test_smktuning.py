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


# ----------------------------------------------------------------------------- version gate (issue 18)


def _no_patching(monkeypatch):
    """configure() must not touch the test process's Snakemake: record what it would apply."""
    calls = []
    monkeypatch.setattr(smktuning, "apply", lambda: calls.append("apply") or {"benchmark_interval": True,
                                                                              "single_reevaluation_timer": True})
    monkeypatch.setattr(smktuning, "stop_jobs_on_interrupt", lambda: calls.append("interrupt") or True)
    return calls


@pytest.mark.parametrize("version, tested", [("9.27.1", True), ("9.27.9", True), ("9.27.0", False), ("9.27.1rc1", False),
                                             ("9.28.0", False), ("10.0.0", False), ("8.30.0", False), ("not-a-version", False)])
def test_tested_versions_are_a_half_open_range(version, tested):
    assert smktuning.TESTED_SNAKEMAKE == ("9.27.1", "9.28")
    assert smktuning.is_tested(version) is tested


def test_the_installed_snakemake_is_a_tested_one():
    """A new Snakemake in the environment: rerun this file, the e2e and SLURM tests on it, then move
    TESTED_SNAKEMAKE (until then the adjustments are off there and the run says so)."""
    import snakemake

    assert smktuning.is_tested(snakemake.__version__), snakemake.__version__


def test_a_tested_version_gets_all_three_and_no_note(monkeypatch):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.27.1", environ={})
    assert calls == ["apply", "interrupt"]
    assert rec == {"version": "9.27.1", "tested": ">=9.27.1,<9.28", "mode": "on", "note": None,
                   "applied": {"benchmark_interval": True, "single_reevaluation_timer": True, "stop_jobs_on_interrupt": True}}


def test_an_untested_version_gets_none_and_one_warning_line(monkeypatch):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.28.0", environ={})
    assert calls == []
    assert not any(rec["applied"].values()) and rec["mode"] == "on"
    note = rec["note"]
    assert "\n" not in note and "9.28.0" in note and ">=9.27.1,<9.28" in note and "DESCBENCH_SMK_TUNING=force" in note


@pytest.mark.parametrize("value", ["0", "off", " OFF "])
def test_the_opt_out_applies_nothing(monkeypatch, value):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.27.1", environ={"DESCBENCH_SMK_TUNING": value})
    assert calls == [] and rec["mode"] == "off" and not any(rec["applied"].values())
    assert "DESCBENCH_SMK_TUNING=0" in rec["note"]


def test_force_applies_on_an_untested_version(monkeypatch):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.30.2", environ={"DESCBENCH_SMK_TUNING": "force"})
    assert calls == ["apply", "interrupt"] and rec["mode"] == "force" and all(rec["applied"].values())


def test_a_missing_attribute_is_said(monkeypatch):
    monkeypatch.setattr(smktuning, "apply", lambda: {"benchmark_interval": True, "single_reevaluation_timer": False})
    monkeypatch.setattr(smktuning, "stop_jobs_on_interrupt", lambda: True)
    rec = smktuning.configure("9.27.1", environ={})
    assert "single_reevaluation_timer" in rec["note"] and "benchmark_interval" not in rec["note"]


def test_a_bad_switch_value_names_the_variable():
    with pytest.raises(ValueError, match=r"DESCBENCH_SMK_TUNING='yes please'.*0 .*1 .*force"):
        smktuning.tuning_mode({"DESCBENCH_SMK_TUNING": "yes please"})


# ----------------------------------------------------------------------------- config merging (issue 18)


def test_merged_entries_names_what_config_yaml_adds_to_a_section_the_file_defines():
    base = {"keypoint_sets": {"sift": {}}, "descriptors": {"sift": {}, "rootsift": {}}, "sweeps": {}, "scoring": {"tau_px": 3}}
    # the file defines descriptors (one of config.yaml's and its own) and scoring; no keypoint sets
    mine = {"descriptors": {"rootsift": {}, "orb": {}}, "scoring": {"tau_px": 5}}
    assert smktuning.merged_entries(base, mine) == {"descriptors": ["sift"]}
    mine["keypoint_sets"] = {"orb": {}}
    assert smktuning.merged_entries(base, mine) == {"keypoint_sets": ["sift"], "descriptors": ["sift"]}
    assert smktuning.merged_entries(base, {"dataset": "hpatches"}) == {}  # config.yaml's sets, as intended


def test_merge_message_is_one_line_naming_the_keys_and_the_flag():
    msg = smktuning.merge_message({"keypoint_sets": ["sift"], "descriptors": ["sift", "rootsift"]}, ["my.yaml"])
    assert "\n" not in msg
    assert "--configfile my.yaml" in msg and "keypoint_sets sift" in msg and "descriptors sift, rootsift" in msg
    assert msg.endswith("add --replace-workflow-config")
    assert smktuning.merge_message({}, ["my.yaml"]) is None
    assert smktuning.merge_message({"descriptors": ["sift"]}, []) is None  # --config alone merges on purpose
