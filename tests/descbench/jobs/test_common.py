"""descbench.jobs.common: what the job modules share (settings arguments, result paths, the
scene a scoring task's writer gets)."""

from __future__ import annotations

import argparse
import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from descbench.errors import DescbenchError
from descbench import jobtiming
from descbench.jobs.common import TIMED_COMMANDS, batch_args, job_timing, json_arg, read_features, result_paths
from descbench.tasks import score_tasks_on
from descbench.tasks.base import SceneJob
from jobcli import SCENES, features, ok, scored


@pytest.mark.bad_input
def test_json_arg_reads_json_or_a_spec_file(tmp_path):
    (tmp_path / "s.json").write_text('{"b": 2}')
    assert json_arg('{"a": 1}') == {"a": 1} and json_arg(f"@{tmp_path / 's.json'}") == {"b": 2}
    with pytest.raises(DescbenchError, match="cannot read the settings file"):
        json_arg(f"@{tmp_path / 'missing.json'}")


@pytest.mark.bad_input
def test_result_paths_check_the_batch():
    p = argparse.ArgumentParser()
    batch_args(p)
    a = p.parse_args(["--results-root", "r", "--scene-root", "s", "--batches", json.dumps({"b0": ["x"], "b1": ["y"]}), "--batch", "b1"])
    assert result_paths(a).keypoints("k", "y") == str(Path("r") / "keypoints" / "k" / "b1" / "y.parquet")
    a.batch = "b2"
    with pytest.raises(DescbenchError, match=r"--batch 'b2' is not among --batches \(b0, b1\)"):
        result_paths(a)


def test_a_scene_job_times_a_task_from_its_share_of_the_pass(tmp_path):
    run = features(tmp_path)
    f = read_features(Path(run.paths.keypoints("kp", SCENES[0])), Path(run.paths.descriptors("kp", "desc", SCENES[0])))
    job = SceneJob(run.scene_root / SCENES[0], f, {"scoring": {}}, argparse.Namespace(seconds={"retrieval": 5.0}))
    import time

    assert 4.9 < time.perf_counter() - job.t0_of("retrieval") < 60
    job.write_timing(tmp_path / "t.json", job.t0_of("retrieval"))
    assert json.loads((tmp_path / "t.json").read_text())["scene"] == SCENES[0]


def test_each_batch_job_writes_its_timing_file_into_its_folder(tmp_path):
    # the commands of the keypoint, descriptor and scoring rules (tests/jobcli.py, as the rules run them)
    run = scored(tmp_path)
    tasks = score_tasks_on(run.cfg)
    assert len(tasks) > 1  # a scoring job writes the same file into every task folder it fills
    files = [run.paths.job_timing("keypoints", "kp", None, "batch000"), run.paths.job_timing("descriptors", "kp", "desc", "batch000"),
             *(run.paths.job_timing("scoring", "kp", "desc", "batch000", t) for t in tasks)]
    for f in files:
        r = jobtiming.read_timing(f)
        stage, desc = ("keypoints", None) if "keypoints" in f else ("descriptors", "desc") if "descriptors" in f else ("scoring", "desc")
        assert (r["stage"], r["keypoint_set"], r["descriptor"], r["batch"], r["scenes"]) == (stage, "kp", desc, "batch000", SCENES)
        assert r["wall_ms"] > 0 and r["cpu_time_ms"] > 0 and r["threads"] == 0 and r["device"] == "cpu" and r["device_name"]
    assert len({Path(f).read_text() for f in files[2:]}) == 1
    # a command that is not a batch job writes none
    assert isinstance(job_timing(argparse.Namespace(cmd="report")), nullcontext)
    assert set(TIMED_COMMANDS) == {"keypoints", "descriptors", "score", "match", "score-pipelines", "score-pose"}
    assert {v[0] for v in TIMED_COMMANDS.values()} == set(jobtiming.STAGES + jobtiming.MATCHER_STAGES)


def test_the_matcher_stage_jobs_write_their_timing_file_into_their_folders(tmp_path):
    # the commands of the match and score_pipelines rules; pipelines-report (a report job) writes none
    run = features(tmp_path)
    common = [*run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "m", "--spec", json.dumps({"matcher": "mnn"})]
    ok("match", *common)
    ok("score-pipelines", *common, "--sections", json.dumps({k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}))
    for stage, folder in (("matches", run.paths.matches_dir("kp", "desc", "m", "batch000")),
                          ("pipelines", run.paths.match_task_dir("pipelines", "kp", "desc", "m", "batch000"))):
        f = run.paths.job_timing(stage, "kp", "desc", "batch000", matcher="m")
        assert Path(f).parent == Path(folder)
        r = jobtiming.read_timing(f)
        assert (r["stage"], r["keypoint_set"], r["descriptor"], r["matcher"], r["batch"], r["scenes"]) == \
            (stage, "kp", "desc", "m", "batch000", SCENES)
        assert r["wall_ms"] > 0 and r["cpu_time_ms"] > 0 and r["threads"] == 0 and r["device"] == "cpu"
    report = argparse.Namespace(cmd="pipelines-report")
    assert isinstance(job_timing(report), nullcontext)
