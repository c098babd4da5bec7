"""Results that are what they claim to be (descbench.runguard, workflow/rules/common.smk):

* settings changed while Snakemake has no record of the results (``rm -rf .snakemake``, or a
  second working directory sharing ``results_dir``): the run stops at DAG build and names the
  ``--forcerun`` that works, instead of "Nothing to be done" over the old numbers;
* one run at a time per results folder (``<results>/descbench.lock``);
* a config with a wildcard-like text (a locked set's per-image pattern) builds the DAG.
"""

from __future__ import annotations

import json
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

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ unit tests


def _cfg():
    from descbench.config import validate_config

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    cfg = validate_config(cfg, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    return {k: v for k, v in cfg.items() if k != "patches"}


def _state(cfg, scenes=("i_rocket", "v_coins"), data="/d/demo/seed0"):
    return {"config": cfg, "scenes": list(scenes), "data": data}


def _changed(edit, verification=True, **state_kw):
    old = _cfg()
    new = json.loads(json.dumps(old))
    edit(new)
    return runguard.rules_to_rerun(_state(old), _state(new, **state_kw), verification)


def test_a_setting_names_the_rules_whose_jobs_it_changes():
    assert _changed(lambda c: None) == {}
    assert _changed(lambda c: c["scoring"].update(tau_px=1.0)) == {"distractors": ["scoring.tau_px: 3.0 -> 1.0"],
                                                                    "score": ["scoring.tau_px: 3.0 -> 1.0"]}
    assert list(_changed(lambda c: c["scoring"].update(tau_px=1.0), verification=False)) == ["score"]
    assert list(_changed(lambda c: c["keypoint_sets"]["sift"].update(border_px=20))) == ["keypoints"]
    assert list(_changed(lambda c: c["descriptors"]["sift"]["params"].update(convention="x"))) == ["descriptors"]
    assert list(_changed(lambda c: c["descriptors"]["sift"].update(overrides={"scoring": {"tau_px": 5}}))) == [
        "distractors", "score"]
    assert list(_changed(lambda c: c["matching"].update(repeatability_px=2.0))) == ["keypoint_stats", "distractors", "score"]
    assert list(_changed(lambda c: c["statistics"].update(seed=1))) == ["report"]
    # a name added or removed: the report's list of entries (Snakemake computes the new one)
    added = _changed(lambda c: c["descriptors"].update(rootsift={"family": "rootsift"}))
    assert added == {"report": ["descriptors.rootsift: added"]}
    # the scene list, the scene folder, the batch size: everything from the keypoints on
    assert list(_changed(lambda c: None, scenes=["v_coins"])) == ["keypoints"]
    assert list(_changed(lambda c: None, data="/elsewhere")) == ["keypoints"]
    assert list(_changed(lambda c: c["execution"].update(scenes_per_job=1))) == ["keypoints"]


def test_settings_that_change_no_result_ask_for_no_rerun():
    def edit(c):
        c["scoring"].update(threads=4, chunk_mb=8)
        c["execution"]["numba_cache_dir"] = "/tmp/numba"
        c["results_dir"] = "/abs/results"
        c["experiment"] = "demo"

    assert _changed(edit) == {}


def test_forcerun_must_reach_every_required_rule():
    need = ["distractors", "score"]
    assert runguard.forced(need, ["distractors", "score"], False, True)
    assert runguard.forced(need, ["keypoints"], False, True)
    assert runguard.forced(need, ["descriptors"], False, True)
    assert not runguard.forced(need, ["score"], False, True)  # the distractor bank keeps its old draw
    assert runguard.forced(["score"], ["score"], False, False)
    assert not runguard.forced(need, ["report"], False, True)
    assert not runguard.forced(need, [], False, True)
    assert runguard.forced(need, [], True, True)  # --forceall
    assert runguard.forced(["report"], ["score"], False, True)
    assert not runguard.forced(["keypoint_stats"], ["descriptors"], False, True)


def test_the_suggested_command_is_the_users_with_forcerun():
    argv = ["/x/snakemake/__main__.py", "--cores", "2", "--config", "a=b c"]
    cmd = runguard.command_with_forcerun(argv, ["score", "distractors"], ["report"])
    assert cmd == "snakemake --cores 2 --config 'a=b c' --forcerun report distractors score"


def test_outputs_without_a_record_of_their_current_version(tmp_path):
    f = tmp_path / "a.parquet"
    f.write_text("x")
    d = tmp_path / "batch000"
    d.mkdir()
    (d / ".snakemake_timestamp").write_text("")
    os.utime(d / ".snakemake_timestamp", (1000.0, 1000.0))
    missing = tmp_path / "missing"
    recs = {str(f): {"record_format_version": 6, "endtime": f.stat().st_mtime},
            str(d): {"record_format_version": 6, "endtime": 1000.0}}
    assert runguard.unrecorded_outputs([str(f), str(d), str(missing)], recs.get) == []
    # rewritten since (another working directory), no record, a record without params
    os.utime(f, (f.stat().st_mtime + 5, f.stat().st_mtime + 5))
    recs[str(d)] = {"record_format_version": 5, "endtime": 1000.0}
    why = runguard.unrecorded_outputs([str(f), str(d), str(tmp_path / "x")], recs.get)
    assert len(why) == 2 and "rewritten since" in why[0] and "no record" in why[1]


def _me(tmp_path, pid=None, host=None):
    me = runguard.holder_info(tmp_path, ["snakemake", "--cores", "1"], {"config": {}})
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


def snakemake(workdir: Path, *args: str, check: bool = True) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    if check:
        assert res.returncode == 0, out[-4000:]
    return res.returncode, out


def write_config(workdir: Path, cfg: dict) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


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


@pytest.mark.e2e
def test_changed_setting_without_snakemake_records_stops_and_names_the_fix(base):
    """w06: run; rm -rf .snakemake; change scoring.tau_px; rerun."""
    _, cfg = base
    work = clone(base, "w06")
    before = (work / "results/demo/report/comparison.csv").read_bytes()
    shutil.rmtree(work / ".snakemake")
    changed = json.loads(json.dumps(cfg))
    changed["scoring"]["tau_px"] = 1.0
    write_config(work, changed)
    for args in (["--cores", "2"], ["-n"]):
        rc, out = snakemake(work, *args, check=False)
        assert rc == 1, out[-3000:]
        assert "scoring.tau_px: 3.0 -> 1.0" in out
        assert "results/demo/scores/sift/sift/batch000: no record in .snakemake" in out
        assert f"--directory {work} {' '.join(args)} --forcerun distractors score" in out
        assert "Nothing to be done" not in out
    assert (work / "results/demo/report/comparison.csv").read_bytes() == before
    assert not (work / "results/demo/descbench.lock").exists()
    # not enough: the distractor bank would keep its draw (and its descriptors)
    rc, out = snakemake(work, "--cores", "2", "--forcerun", "score", check=False)
    assert rc == 1 and "--forcerun score distractors" in out
    # the command it names works, and replaces the tau 3 numbers
    _, out = snakemake(work, "--cores", "2", "--forcerun", "distractors", "score")
    assert "descbench results, written by this run" in out
    assert true_map(work / "results/demo") != true_map(root_results(base))
    assert "Nothing to be done" in snakemake(work, "-n")[1]
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
    _, out = snakemake(work, "-n")
    assert "descbench: the results in" not in out
    assert "Params have changed since last execution" in out and "rule score:" in out and "rule report:" in out
    _, out = snakemake(work, "--cores", "2")
    assert "descbench results, written by this run" in out
    assert true_map(work / "results/demo") != true_map(root_results(base))


@pytest.mark.e2e
def test_two_working_directories_on_one_results_folder(base):
    """w02c: A (sift) and B (rootsift) share results_dir; run A, then B, then A."""
    root, cfg = base
    a = clone(base, "w02c_A")
    b_cfg = json.loads(json.dumps(cfg))
    b_cfg["descriptors"] = {"rootsift": {"family": "rootsift"}}
    b_cfg["results_dir"] = str(a / "results")
    b = root / "w02c_B"
    write_config(b, b_cfg)
    rc, out = snakemake(b, "--cores", "2", check=False)
    assert rc == 1, out[-3000:]
    assert "descriptors.sift: removed" in out and "descriptors.rootsift: added" in out
    assert f"the last run that wrote to {a / 'results/demo'} ran in another working directory: {root / 'base'}" in out
    assert "--forcerun report" in out and "Nothing to be done" not in out
    assert list(true_map(a / "results/demo")) == ["sift"]
    _, out = snakemake(b, "--cores", "2", "--forcerun", "report")
    assert list(true_map(a / "results/demo")) == ["rootsift"]
    # back in A: its records are of files B has rewritten since
    rc, out = snakemake(a, "-n", check=False)
    assert rc == 1 and f"ran in another working directory: {b}" in out
    assert "rewritten since Snakemake here recorded it" in out


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
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(a), "--cores", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
        rc, out = snakemake(b, "--cores", "1", check=False)
        assert rc == 1, out[-3000:]
        assert f"another run is writing to {a / 'results/shared'}: pid {proc.pid}" in out
        assert f"working directory {a}" in out
        assert "Traceback" not in out
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
    _, out = snakemake(work, "--cores", "2")
    assert "WildcardError" not in out
    table = pd.read_csv(work / "results/demo/report/comparison.csv")
    assert list(zip(table.keypoint_set, table.descriptor)) == [("lk", "sift")]
    assert table.true_map_micro.notna().all()
    stats = pd.read_csv(work / "results/demo/report/keypoint_stats.csv")
    assert list(stats.keypoint_set) == ["lk"]
    prov = json.loads((work / "results/demo/report/provenance.json").read_text())
    assert prov["params"]["config"]["keypoint_sets"]["lk"]["params"]["path"] == "kp/{scene}_{image}.csv"
    assert "Nothing to be done" in snakemake(work, "-n")[1]
