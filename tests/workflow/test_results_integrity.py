"""Results that are what they claim to be (descbench.specfiles, descbench.runguard, workflow/rules/common.smk):

* a changed setting or user file reruns exactly the jobs that read it, decided by Snakemake's own
  job graph from spec and digest files, whether or not ``.snakemake`` has its records
  (``rm -rf .snakemake``, a second working directory sharing ``results_dir``);
* a weights file replaced by another with an older date reruns every job that uses it;
* one run at a time per results folder (``<results>/descbench.lock``), and the jobs a killed run
  left running are stopped before a new run takes the folder;
* a config with a wildcard-like text (a locked set's per-image pattern) builds the DAG.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from descbench import runguard
from smkrun import snakemake, snakemake_cmd, snakemake_rc, write_config

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------ unit tests


def test_a_spec_file_is_rewritten_only_when_its_value_changes(tmp_path):
    from descbench.specfiles import read_spec, write_spec

    f = tmp_path / "specs" / "a.json"
    assert write_spec(f, '{"x": 1}') is True
    first = f.read_text()
    os.utime(f, (1000.0, 1000.0))
    assert write_spec(f, '{"x": 1}') is False
    assert f.stat().st_mtime == 1000.0 and f.read_text() == first  # same value: the old date, nothing reruns
    assert write_spec(f, '{"x": 2}') is True
    assert f.stat().st_mtime > 1000.0 and read_spec(f) == {"x": 2}
    assert not list(f.parent.glob(".*.tmp"))
    # back to the first value: new bytes all the same (a unique token), so that Snakemake's
    # recorded input checksum of a job that ran with {"x": 1} elsewhere does not match
    assert write_spec(f, '{"x": 1}') is True
    assert read_spec(f) == {"x": 1} and f.read_text() != first


def test_a_digest_follows_the_content_not_the_date(tmp_path):
    import hashlib

    from descbench.specfiles import digest_file

    weights = tmp_path / "w.pt"
    weights.write_bytes(b"new network")
    digests = tmp_path / "specs" / "files"
    d = digest_file(weights, digests)
    assert d.read_text().split("\n")[0] == "sha256 " + hashlib.sha256(b"new network").hexdigest()
    os.utime(d, (1000.0, 1000.0))
    # touched, same bytes: the digest keeps its date
    os.utime(weights, None)
    assert digest_file(weights, digests) == d and d.stat().st_mtime == 1000.0
    # replaced by an *older* file with other bytes (mv of an earlier download): rewritten
    old = tmp_path / "old.pt"
    old.write_bytes(b"old network")
    os.utime(old, (10.0, 10.0))
    os.replace(old, weights)
    assert digest_file(weights, digests) == d and d.stat().st_mtime > 1000.0
    assert hashlib.sha256(b"old network").hexdigest() in d.read_text()
    second = d.read_text()
    os.replace(tmp_path / "w.pt", tmp_path / "w.pt")
    weights.write_bytes(b"new network")  # back to the first bytes: a new token, not the first file's bytes
    digest_file(weights, digests)
    assert d.read_text().split("\n")[0] == "sha256 " + hashlib.sha256(b"new network").hexdigest()
    assert d.read_text() != second
    # a same-named file elsewhere has its own digest; write=False only names it
    other = tmp_path / "sub" / "w.pt"
    other.parent.mkdir()
    other.write_bytes(b"new network")
    assert digest_file(other, digests, write=False) != d and not digest_file(other, digests, write=False).exists()


def test_a_changed_file_with_the_same_stat_is_not_rehashed_but_new_stat_is(tmp_path, monkeypatch):
    from descbench import specfiles

    f = tmp_path / "m.onnx"
    f.write_bytes(b"a")
    calls = []
    real = specfiles.file_sha256
    monkeypatch.setattr(specfiles, "file_sha256", lambda p: calls.append(p) or real(p))
    specfiles.digest_file(f, tmp_path / "d")
    specfiles.digest_file(f, tmp_path / "d")
    assert len(calls) == 1  # the stat cache
    f.write_bytes(b"b")
    specfiles.digest_file(f, tmp_path / "d")
    assert len(calls) == 2


@pytest.mark.bad_input
def test_a_job_reads_its_settings_from_a_spec_file_and_names_a_bad_one(tmp_path):
    from descbench.errors import DescbenchError
    from descbench.jobs.common import json_arg

    spec = tmp_path / "s.json"
    spec.write_text('{"a": [1, 2]}')
    assert json_arg(f"@{spec}") == {"a": [1, 2]} and json_arg('{"a": 1}') == {"a": 1}
    with pytest.raises(DescbenchError, match=f"cannot read the settings file {tmp_path / 'missing.json'}"):
        json_arg(f"@{tmp_path / 'missing.json'}")
    spec.write_text("{")
    with pytest.raises(DescbenchError, match=f"settings file {spec} is not valid JSON.*delete it and rerun"):
        json_arg(f"@{spec}")


def _me(tmp_path, pid=None, host=None):
    me = runguard.holder_info(tmp_path, ["snakemake", "--cores", "1"])
    if pid is not None:
        me["pid"], me["pid_started"] = pid, None
    if host is not None:
        me["host"] = host
    return me


def test_lock_is_taken_released_and_names_the_last_run(tmp_path):
    res = tmp_path / "results" / "demo"
    me = _me(tmp_path)
    assert runguard.acquire(res, me, None) is None
    assert runguard.read_lock(res)["run_id"] == me["run_id"]
    assert runguard.last_run(res)["run_id"] == me["run_id"]
    assert not runguard.release(res, _me(tmp_path))  # not the holder
    assert runguard.release(res, me)
    assert runguard.read_lock(res) is None and runguard.last_run(res)["workdir"] == str(tmp_path.resolve())


def test_a_live_run_holds_the_lock_a_dead_one_does_not(tmp_path):
    res = tmp_path / "res"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        other = _me(tmp_path / "A", pid=live.pid)
        runguard.acquire(res, other, None)
        with pytest.raises(runguard.ResultsLocked, match=f"pid {live.pid} on {socket.gethostname()}"):
            runguard.acquire(res, _me(tmp_path / "B"), other["run_id"])
    finally:
        live.kill()
        live.wait()
    # its process is gone: taken over, with a warning naming it
    me = _me(tmp_path / "B")
    warning = runguard.acquire(res, me, other["run_id"])
    assert warning and f"pid {live.pid}" in warning and "ended without releasing" in warning
    assert runguard.read_lock(res)["run_id"] == me["run_id"]
    runguard.release(res, me)


def test_taking_over_a_killed_runs_lock_stops_the_jobs_it_left_running(tmp_path):
    """kill -9 of snakemake leaves its jobs running; the next run stops them (SIGTERM: a job
    removes its partial outputs) before it takes the folder, and says how many it stopped."""
    res = tmp_path / "res"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = _me(tmp_path / "A", pid=gone.pid)
    runguard.acquire(res, dead, None)
    env = {**os.environ, runguard.JOBS_ENV: runguard.jobs_env_value(res, dead)}
    code = ("import time, signal, sys\nfrom descbench import jobrecord\nrecord = jobrecord.register_job()\n"
            "print(record, flush=True)\n"
            "signal.signal(signal.SIGTERM, lambda *a: (record.unlink(), sys.exit(143)))\ntime.sleep(120)\n")
    job = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    record = Path(job.stdout.readline().strip())
    assert record.exists() and json.loads(record.read_text())["run_id"] == dead["run_id"]
    # a job of another run (a live one elsewhere) is not touched
    bystander = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, runguard.JOBS_ENV: runguard.jobs_env_value(res, _me(tmp_path / "C"))})
    assert bystander.stdout.readline().strip()
    try:
        t0 = time.time()
        warning = runguard.acquire(res, _me(tmp_path / "B"), dead["run_id"])
        assert job.wait(timeout=5) == 143 and time.time() - t0 < runguard.STALE_GRACE_S
        assert "stopped 1 job(s) it had left running" in warning and f"pid {gone.pid}" in warning
        assert not record.exists() and bystander.poll() is None
    finally:
        for p in (job, bystander):
            p.kill()
            p.wait()


def test_a_job_of_no_run_records_nothing(tmp_path):
    from descbench import jobrecord

    assert jobrecord.register_job({}) is None
    assert jobrecord.register_job({runguard.JOBS_ENV: "not json"}) is None


def test_a_lock_from_another_host_is_never_guessed_dead(tmp_path):
    res = tmp_path / "res"
    other = _me(tmp_path / "A", pid=1, host="some-other-node")
    runguard.acquire(res, other, None)
    with pytest.raises(runguard.ResultsLocked, match="another host .some-other-node.*delete .*descbench.lock"):
        runguard.acquire(res, _me(tmp_path / "B"), other["run_id"])


def test_a_run_that_wrote_meanwhile_makes_this_one_stop(tmp_path):
    res = tmp_path / "res"
    first = _me(tmp_path / "A")
    runguard.acquire(res, first, None)
    runguard.release(res, first)
    # this run read the folder before `first` took the lock: its view is out of date
    with pytest.raises(runguard.ResultsLocked, match="while this one was starting"):
        runguard.acquire(res, _me(tmp_path / "B"), None)


# ----------------------------------------------------------------------------- workflow (e2e)


def tiny_config(data_dir: Path) -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    cfg["data_dir"] = str(data_dir)  # absolute: copies of the working directory read the same scenes
    return cfg


def true_map(results: Path) -> dict[str, float]:
    table = pd.read_csv(results / "report" / "comparison.csv")
    return dict(zip(table.descriptor, table.true_map_micro))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """One finished run (2 demo scenes, sift); tests work on copies (mtimes and .snakemake kept)."""
    root = tmp_path_factory.mktemp("integrity")
    cfg = tiny_config(root / "data")
    write_config(root / "base", cfg)
    snakemake(root / "base", "--cores", "2")
    return root, cfg


def clone(base, name: str) -> Path:
    root, _ = base
    dst = root / name
    shutil.copytree(root / "base", dst, symlinks=True)
    return dst


def job_counts(out: str) -> dict[str, int]:
    """Snakemake's "Job stats" table of a run or dry run: {rule: jobs}."""
    table = out.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def jobs_of(out: str, rule: str) -> list[str]:
    """The output of each job of ``rule`` that a run or dry run lists."""
    return re.findall(rf"^(?:local)?rule {rule}:\n(?:    .*\n)*?    output: (\S+)", out, re.M)


@pytest.mark.e2e
def test_changed_descriptor_setting_without_snakemake_records_reruns_exactly_its_jobs(base):
    """rm -rf .snakemake, then one descriptor's setting changed: its descriptor, distractor and
    scoring jobs rerun (and the report after them), nothing of the other descriptor or the keypoints."""
    _, cfg = base
    work = clone(base, "w06d")
    two = json.loads(json.dumps(cfg))
    two["descriptors"] = {"sift": {"family": "sift"}, "sift2": {"family": "sift", "params": {"convention": "opencv"}}}
    write_config(work, two)
    snakemake(work, "--cores", "2")
    sift_before = (work / "results/demo/descriptors/sift/sift/batch000/v_coins.parquet").read_bytes()
    shutil.rmtree(work / ".snakemake")
    assert "Nothing to be done" in snakemake(work, "-n")  # no record, nothing changed: nothing reruns
    two["descriptors"]["sift2"]["params"]["convention"] = "workbench"
    write_config(work, two)
    out = snakemake(work, "--cores", "2")
    counts = job_counts(out)
    # (the inspector page too: it shows sift against sift2)
    assert counts == {"descriptors": 1, "distractors": 1, "score": 1, "report": 1, "plots": 1, "results_db": 1, "inspector": 1,
                      "all": 1}, counts
    assert jobs_of(out, "descriptors") == ["results/demo/descriptors/sift/sift2/batch000"]
    assert jobs_of(out, "score")[0].startswith("results/demo/scores/sift/sift2/")
    assert (work / "results/demo/descriptors/sift/sift/batch000/v_coins.parquet").read_bytes() == sift_before
    assert "Nothing to be done" in snakemake(work, "-n")


@pytest.mark.e2e
def test_changed_setting_without_snakemake_records_reruns_its_jobs(base):
    """w06: run; rm -rf .snakemake; change scoring.tau_px; rerun: the scoring jobs rerun by
    Snakemake's own rules (their spec file is newer), with the new numbers."""
    _, cfg = base
    work = clone(base, "w06")
    shutil.rmtree(work / ".snakemake")
    changed = json.loads(json.dumps(cfg))
    changed["scoring"]["tau_px"] = 1.0
    write_config(work, changed)
    out = snakemake(work, "--cores", "2")
    counts = job_counts(out)
    assert counts.get("score") == 1 and "keypoints" not in counts and "descriptors" not in counts, counts
    assert "descbench results, written by this run" in out
    assert true_map(work / "results/demo") != true_map(root_results(base))
    assert "Nothing to be done" in snakemake(work, "-n")
    assert not (work / "results/demo/descbench.lock").exists()


def root_results(base) -> Path:
    root, _ = base
    return root / "base" / "results" / "demo"


@pytest.mark.e2e
def test_changed_setting_with_snakemake_records_reruns_its_jobs(base):
    """The normal case: same working directory, .snakemake kept, a setting changed in place."""
    _, cfg = base
    work = clone(base, "in_place")
    changed = json.loads(json.dumps(cfg))
    changed["scoring"]["tau_px"] = 1.0
    write_config(work, changed)
    out = snakemake(work, "-n")
    assert "results/demo/specs/.dry-run/score/sift.json" in out and "rule score:" in out and "rule report:" in out
    out = snakemake(work, "--cores", "2")
    assert "descbench results, written by this run" in out
    assert true_map(work / "results/demo") != true_map(root_results(base))


@pytest.mark.e2e
def test_two_working_directories_on_one_results_folder(base):
    """w02c: A (sift) and B (rootsift) share results_dir; run A, then B, then A: each run's report
    holds its own descriptors, computed where missing, by Snakemake's own rules."""
    root, cfg = base
    a = clone(base, "w02c_A")
    b_cfg = json.loads(json.dumps(cfg))
    b_cfg["descriptors"] = {"rootsift": {"family": "rootsift"}}
    b_cfg["results_dir"] = str(a / "results")
    b = root / "w02c_B"
    write_config(b, b_cfg)
    out = snakemake(b, "--cores", "2")
    assert list(true_map(a / "results/demo")) == ["rootsift"]
    assert "keypoints" not in job_counts(out)  # A's keypoints are B's too
    out = snakemake(a, "--cores", "2")
    assert list(true_map(a / "results/demo")) == ["sift"]
    assert set(job_counts(out)) == {"report", "plots", "results_db", "inspector", "all"}, job_counts(out)  # the page showed rootsift


@pytest.mark.bad_input
@pytest.mark.e2e
def test_a_failing_jobs_own_message_is_on_the_terminal_above_snakemakes_error_block(base):
    """The job's one-line error stands right above Snakemake's block for it (within its first 10
    lines), and the command Snakemake prints is short: settings are spec files, not JSON."""
    work = clone(base, "failing")
    bad = next((work / "results/demo/keypoints/sift/batch000").glob("*.parquet"))
    bad.write_text("not a parquet file")
    rc, out = snakemake_rc(work, "--cores", "1", "--forcerun", "descriptors", "--until", "descriptors")
    assert rc == 1
    lines = out.splitlines()
    block = next(i for i, l in enumerate(lines) if l.startswith("Error in rule descriptors:"))
    start = max(i for i in range(block) if lines[i].startswith("RuleException:"))
    error = next(i for i, l in enumerate(lines) if l.startswith("descbench: error: cannot read"))
    assert error == start - 1, lines[error:block + 1]  # right above the block's first line
    assert f"rm -r results/demo/keypoints/sift/batch000" in lines[error]
    shell = lines[lines.index("    shell:", block) + 1]
    assert len(shell) < 600 and "{" not in shell, shell  # was the config as JSON, ~6 KB


@pytest.mark.e2e
def test_a_second_run_on_a_results_folder_in_use_stops(base):
    """w02b: B starts while A is running on the same results folder."""
    root, cfg = base
    a = clone(base, "w02b_A")
    shutil.copy(ROOT / "tests" / "data" / "my_descriptors.py", a)
    hold = a / "hold"
    hold.write_text("")
    a_cfg = json.loads(json.dumps(cfg))
    a_cfg["scenes"] = ["v_coins"]
    a_cfg["experiment"] = "shared"
    a_cfg["descriptors"] = {"slow": {"family": "python", "params": {"callable": "my_descriptors:waits_for_file",
                                                                    "kwargs": {"hold": str(hold)}}}}
    write_config(a, a_cfg)
    proc = subprocess.Popen(snakemake_cmd(a, "--cores", "1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log = a / "results/shared/logs/descriptors/sift/slow/batch000.log"
        deadline = time.time() + 300
        while not log.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert log.exists(), "A's descriptor job never started"
        lock = json.loads((a / "results/shared/descbench.lock").read_text())
        assert lock["workdir"] == str(a) and lock["pid"] == proc.pid
        b_cfg = json.loads(json.dumps(a_cfg))
        b_cfg["results_dir"] = str(a / "results")
        b = root / "w02b_B"
        write_config(b, b_cfg)
        shutil.copy(ROOT / "tests" / "data" / "my_descriptors.py", b)
        rc, out = snakemake_rc(b, "--cores", "1")
        assert rc == 1, out[-3000:]
        assert f"another run is writing to {a / 'results/shared'}: pid {proc.pid}" in out
        assert f"working directory {a}" in out
        # the message alone: no Snakemake traceback lines (WorkflowError in file common.smk ...)
        assert "Traceback" not in out and "WorkflowError" not in out and "common.smk" not in out, out[-3000:]
    finally:
        hold.unlink(missing_ok=True)
        a_out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, a_out[-3000:]
    assert not (a / "results/shared/descbench.lock").exists()
    assert json.loads((a / "results/shared/.descbench_runs").read_text())["workdir"] == str(a)


@pytest.mark.e2e
def test_locked_keypoints_with_a_per_image_pattern_run_end_to_end(base):
    """l06a: `path: 'kp/{scene}_{image}.csv'` (README) used to fail the DAG build with
    WildcardError in rule report (the config, braces included, was a params string)."""
    import cv2

    root, cfg = base
    work = root / "l06a"
    work.mkdir()
    data = Path(cfg["data_dir"]) / "demo" / "seed0"
    for scene in cfg["scenes"]:
        for k in range(1, 7):
            h, w = cv2.imread(str(data / scene / f"{k}.ppm"), cv2.IMREAD_GRAYSCALE).shape
            rows = [(x, y, 12.0, 0.0, 1.0) for y in range(48, h - 48, 16) for x in range(48, w - 48, 16)]
            (work / "kp").mkdir(exist_ok=True)
            pd.DataFrame(rows, columns=["x", "y", "size", "angle", "response"]).to_csv(
                work / "kp" / f"{scene}_{k}.csv", index=False)
    lk = json.loads(json.dumps(cfg))
    lk["keypoint_sets"] = {"lk": {"detector": "locked", "params": {"path": "kp/{scene}_{image}.csv"}}}
    write_config(work, lk)
    out = snakemake(work, "--cores", "2")
    assert "WildcardError" not in out
    table = pd.read_csv(work / "results/demo/report/comparison.csv")
    assert list(zip(table.keypoint_set, table.descriptor)) == [("lk", "sift")]
    assert table.true_map_micro.notna().all()
    stats = pd.read_csv(work / "results/demo/report/keypoint_stats.csv")
    assert list(stats.keypoint_set) == ["lk"]
    prov = json.loads((work / "results/demo/report/provenance.json").read_text())
    assert prov["params"]["config"]["keypoint_sets"]["lk"]["params"]["path"] == "kp/{scene}_{image}.csv"
    assert "Nothing to be done" in snakemake(work, "-n")
