"""descbench.smktuning: nothing of Snakemake is patched; its pending re-evaluation timers never delay the end of a run."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from descbench import smktuning

ROOT = Path(__file__).resolve().parents[2]


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


# ----------------------------------------------------------------------------- configure


@pytest.mark.parametrize("environ", [{}, {"PATH": "/usr/bin"}])
def test_configure_installs_the_sigint_handler_and_touches_no_snakemake_method(monkeypatch, environ):
    """The record for the provenance: the version and the SIGINT handler; Snakemake's scheduler
    stays its own (configure() must not touch the test process's signals: the handler is faked)."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    before = dict(vars(JobScheduler))
    calls = []
    monkeypatch.setattr(smktuning, "stop_jobs_on_sigint", lambda: calls.append("sigint") or True)
    rec = smktuning.configure("9.27.1", environ=environ)
    assert calls == ["sigint"] and dict(vars(JobScheduler)) == before
    assert rec == {"version": "9.27.1", "applied": {"stop_jobs_on_interrupt": True}, "note": None}


@pytest.mark.bad_input
@pytest.mark.parametrize("value", ["1", "force", "0"])
def test_the_former_opt_in_switch_is_named_in_one_line(monkeypatch, value):
    monkeypatch.setattr(smktuning, "stop_jobs_on_sigint", lambda: True)
    rec = smktuning.configure("9.27.1", environ={"DESCBENCH_SMK_TUNING": value})
    note = rec["note"]
    assert "\n" not in note and f"DESCBENCH_SMK_TUNING={value!r} is no longer read" in note and note.endswith("unset it")
    assert rec["applied"] == {"stop_jobs_on_interrupt": True}


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


class _Job:
    def __init__(self, rule, output):
        self.rule = type("Rule", (), {"name": rule})()
        self.output = [output] if output else []


class _Dag:
    """Snakemake's DAG as until_stuck reads it: a job is in the --until when its rule is named or
    one of its outputs is (Snakemake's DAG.in_until)."""

    def __init__(self, deps, needrun, until_rules=(), until_files=()):
        self.deps, self._needrun, self.until_rules, self.until_files = deps, set(needrun), set(until_rules), set(until_files)

    def needrun_jobs(self):
        return iter(self._needrun)

    def job_dependencies(self, job):
        return self.deps.get(job, [])

    def needrun(self, job):
        return job in self._needrun

    def in_until(self, job):
        return job.rule.name in self.until_rules or bool(self.until_files & set(job.output))


def test_until_stuck_names_the_jobs_that_need_a_job_the_until_stops_at_and_are_to_run():
    kp = _Job("keypoints", "results/demo/keypoints/sift/batch000")
    sift = _Job("descriptors", "results/demo/descriptors/sift/sift/batch000")
    root = _Job("descriptors", "results/demo/descriptors/sift/rootsift/batch000")
    score = _Job("score", "results/demo/scores/sift/rootsift/batch000")
    deps = {sift: [kp], root: [kp, sift], score: [root]}
    dag = _Dag(deps, [kp, sift, root], until_rules=["descriptors"])
    assert smktuning.until_stuck(dag) == [(root, sift)]
    msg = smktuning.until_message(smktuning.until_stuck(dag))
    assert msg == ("--until: Snakemake never starts a job that needs a job the --until stops at (here descriptors jobs), "
                   "and this run has results/demo/descriptors/sift/rootsift/batch000 needs "
                   "results/demo/descriptors/sift/sift/batch000; fix: stop after that stage with --omit-from distractors "
                   "score keypoint_stats match instead")
    # sift's files complete already: rootsift's job starts once the keypoints are there
    assert smktuning.until_stuck(_Dag(deps, [kp, root], until_rules=["descriptors"])) == []
    # the keypoints are in the --until and are to run: every descriptor job waits on them
    stuck = smktuning.until_stuck(_Dag(deps, [kp, sift, root], until_rules=["keypoints", "descriptors"]))
    assert stuck == [(root, sift), (root, kp), (sift, kp)]
    msg = smktuning.until_message(stuck, shown=2)
    assert "(here descriptors and keypoints jobs)" in msg and " and 1 more; " in msg
    assert msg.endswith("--omit-from distractors score keypoint_stats match instead")  # not descriptors: it is in the --until
    # an --until by output file: only that job stops the run
    assert smktuning.until_stuck(_Dag(deps, [kp, sift, root], until_files=[root.output[0]])) == []
    assert smktuning.until_stuck(_Dag(deps, [kp, sift, root], until_files=[sift.output[0]])) == [(root, sift)]
    assert smktuning.until_stuck(_Dag(deps, [kp, sift, root, score], until_rules=["score"])) == []
    assert smktuning.until_message([]) is None
    assert smktuning.until_message([(score, _Job("match", "m"))]).endswith(
        "fix: stop with --omit-from the rules after it instead, or build what those jobs need first")
