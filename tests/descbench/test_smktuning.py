"""descbench.smktuning: nothing of Snakemake is patched by default; the opt-in coalesces its re-evaluation timers."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from descbench import smktuning

ROOT = Path(__file__).resolve().parents[2]


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


def test_pending_timers_are_cancelled_and_never_fire():
    fired = []
    timers = [threading.Timer(30, fired.append, args=(i,)) for i in range(3)]  # non-daemon, as Snakemake's
    for t in timers:
        t.start()
    assert smktuning.cancel_pending_timers() >= 3
    for t in timers:
        t.join(timeout=2.0)
        assert not t.is_alive()
    assert fired == []


def test_the_interpreter_does_not_wait_for_a_cancelled_timer():
    code = ("import threading; from descbench import smktuning; "
            "threading.Timer(30, print).start(); print(smktuning.cancel_pending_timers())")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=25, check=True)
    assert out.stdout.strip() == "1" and time.monotonic() - start < 10


def test_a_timer_left_pending_at_exit_is_cancelled_without_waiting_for_it():
    """A run that ends without onsuccess / onerror (--no-hooks, an exception in the scheduler)
    exits at once instead of waiting one timespan; the workflow arranges it when it is read."""
    code = ("import threading; from descbench import smktuning; "
            "threading.Timer(30, print, ['fired']).start(); print(smktuning.cancel_timers_at_exit())")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=25, check=True)
    assert out.stdout.strip() == "True" and time.monotonic() - start < 10
    assert "\nsmktuning.cancel_timers_at_exit()\n" in (ROOT / "workflow" / "rules" / "common.smk").read_text()


def test_the_workflow_cancels_them_at_the_end_of_every_run_and_thins_the_rounds():
    rules = (ROOT / "workflow" / "rules" / "report.smk").read_text()
    for handler in ("onsuccess:", "onerror:"):
        block = rules.split(handler, 1)[1].split("\n\n", 1)[0]
        assert "smktuning.cancel_pending_timers()" in block, handler
    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    count, span = profile["max-jobs-per-timespan"].split("/")
    # Snakemake's average rate (100/1s); a timespan of 600 s, so that the re-evaluation chains
    # started by finished jobs fire rarely (their rounds grow with the square of a run's length)
    assert span == "600s" and int(count) == 60000

def test_the_opt_in_finds_what_it_replaces_in_the_installed_snakemake(monkeypatch):
    pytest.importorskip("snakemake")
    from snakemake.scheduling.job_scheduler import JobScheduler

    # restored after the test: the test process's Snakemake stays as installed
    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation", JobScheduler._schedule_reevalutation)
    # The Snakemake this project pins has the method; if a new version renames it, this test says
    # so instead of the opt-in silently doing nothing.
    assert smktuning.single_reevaluation_timer() is True
    assert JobScheduler._schedule_reevalutation is smktuning._coalesced_reevaluation


def test_scoring_jobs_import_numba_without_scipy_linalg_and_scipy_still_works():
    """descbench.jobs.common.import_numba_without_blas_probe: numba's numpy support loads without
    importing scipy.linalg, kernels compile and run, and scipy.linalg imports normally after."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from descbench.jobs.common import import_numba_without_blas_probe\n"
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
    """configure() must not touch the test process's Snakemake or signals: record what it would apply."""
    calls = []
    monkeypatch.setattr(smktuning, "stop_jobs_on_sigint", lambda: calls.append("sigint") or True)
    monkeypatch.setattr(smktuning, "single_reevaluation_timer", lambda: calls.append("timer") or True)
    return calls


@pytest.mark.parametrize("version, tested", [("9.27.1", True), ("9.27.9", True), ("9.27.0", False), ("9.27.1rc1", False),
                                             ("9.28.0", False), ("10.0.0", False), ("8.30.0", False), ("not-a-version", False)])
def test_tested_versions_are_a_half_open_range(version, tested):
    assert smktuning.TESTED_SNAKEMAKE == ("9.27.1", "9.28")
    assert smktuning.is_tested(version) is tested


def test_the_installed_snakemake_is_a_tested_one():
    """A new Snakemake in the environment: rerun this file, the e2e and SLURM tests on it, then move
    TESTED_SNAKEMAKE (until then the opt-in adjustments are refused there and the run says so)."""
    import snakemake

    assert smktuning.is_tested(snakemake.__version__), snakemake.__version__


@pytest.mark.parametrize("environ", [{}, {"DESCBENCH_SMK_TUNING": "0"}, {"DESCBENCH_SMK_TUNING": " OFF "}])
def test_by_default_no_snakemake_internal_is_patched(monkeypatch, environ):
    """Only the SIGINT handler (the signal module); Snakemake's methods stay its own, no note."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    before = JobScheduler._schedule_reevalutation
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.27.1", environ=environ)
    assert calls == ["sigint"] and JobScheduler._schedule_reevalutation is before
    assert rec == {"version": "9.27.1", "tested": ">=9.27.1,<9.28", "mode": "off", "note": None,
                   "applied": {"stop_jobs_on_interrupt": True, "single_reevaluation_timer": False}}


@pytest.mark.parametrize("value", ["1", "on", " ON "])
def test_the_opt_in_applies_on_a_tested_version(monkeypatch, value):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.27.1", environ={"DESCBENCH_SMK_TUNING": value})
    assert calls == ["sigint", "timer"] and rec["mode"] == "on" and rec["note"] is None
    assert rec["applied"] == {"stop_jobs_on_interrupt": True, "single_reevaluation_timer": True}


def test_the_opt_in_on_an_untested_version_applies_nothing_and_says_so_in_one_line(monkeypatch):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.28.0", environ={"DESCBENCH_SMK_TUNING": "1"})
    assert calls == ["sigint"] and not rec["applied"]["single_reevaluation_timer"]
    note = rec["note"]
    assert "\n" not in note and "9.28.0" in note and ">=9.27.1,<9.28" in note and "DESCBENCH_SMK_TUNING=force" in note


def test_force_applies_on_an_untested_version(monkeypatch):
    calls = _no_patching(monkeypatch)
    rec = smktuning.configure("9.30.2", environ={"DESCBENCH_SMK_TUNING": "force"})
    assert calls == ["sigint", "timer"] and rec["mode"] == "force" and all(rec["applied"].values())


@pytest.mark.bad_input
def test_a_missing_attribute_is_said(monkeypatch):
    _no_patching(monkeypatch)
    monkeypatch.setattr(smktuning, "single_reevaluation_timer", lambda: False)
    rec = smktuning.configure("9.27.1", environ={"DESCBENCH_SMK_TUNING": "1"})
    assert "_schedule_reevalutation" in rec["note"] and not rec["applied"]["single_reevaluation_timer"]


@pytest.mark.bad_input
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
