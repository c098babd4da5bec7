"""descbench.jobtiming: a job's timing file (wall and CPU time, threads, device), written only when
the job ends well, read back checked."""

from __future__ import annotations

import json
import time

import pytest
from conftest import raises_naming

from descbench import jobtiming, torchrt
from descbench.errors import DataError


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))


def test_a_finished_job_writes_its_timing(tmp_path):
    """In a fresh process, as a job runs: the CPU time is the process's, so threads that other
    tests left spinning in this one (BLAS workers) would count."""
    import subprocess
    import sys

    out = tmp_path / "keypoints" / "kp" / "batch000" / "job_timing.json"
    code = f"""
import time
from pathlib import Path
from descbench import jobtiming
out = Path({str(out)!r})
t0 = time.perf_counter()
with jobtiming.timed([out], "keypoints", "kp", None, "batch000", ["a", "b"], 3):
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:
        sum(range(1000))
    assert not out.exists()  # written when the job ends, not before
print(1000 * (time.perf_counter() - t0))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed_ms = float(run.stdout)
    r = jobtiming.read_timing(out)
    assert sorted(r) == sorted(jobtiming.FIELDS)
    assert (r["stage"], r["keypoint_set"], r["descriptor"], r["batch"], r["scenes"], r["threads"]) == \
        ("keypoints", "kp", None, "batch000", ["a", "b"], 3)
    assert 50 <= r["wall_ms"] <= elapsed_ms  # the block's wall time
    assert 0 < r["cpu_time_ms"] <= r["wall_ms"] + 50  # one busy thread: about its wall time, at most that (+ clock ticks)
    assert r["device"] == "cpu" and r["device_name"] == torchrt.cpu_name() == r["cpu"] and r["device_name"]


def test_a_failed_job_leaves_no_timing(tmp_path):
    out = tmp_path / "t.json"
    with pytest.raises(RuntimeError), jobtiming.timed([out], "scoring", "kp", "d", "batch000", ["a"], 1):
        raise RuntimeError("job failed")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_without_a_file_nothing_is_written_and_the_stage_is_checked(tmp_path):
    with jobtiming.timed(None, "descriptors", "kp", "d", "batch000", [], 1):
        pass
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="unknown stage 'score'"), jobtiming.timed([tmp_path / "t.json"], "score", "kp", "d", "b", [], 1):
        pass


def test_a_matcher_stage_job_records_its_matcher_and_only_it_does(tmp_path):
    out = tmp_path / "pipelines" / "kp" / "d" / "m" / "batch000" / "job_timing.json"
    with jobtiming.timed([out], "pipelines", "kp", "d", "batch000", ["a"], 1, matcher="m"):
        pass
    r = jobtiming.read_timing(out)
    assert sorted(r) == sorted((*jobtiming.FIELDS, "matcher")) and (r["stage"], r["matcher"]) == ("pipelines", "m")
    with pytest.raises(ValueError, match="stage 'matches' needs the matcher's name"), \
            jobtiming.timed([tmp_path / "t.json"], "matches", "kp", "d", "b", [], 1):
        pass
    with pytest.raises(ValueError, match="stage 'scoring' has no matcher"), \
            jobtiming.timed([tmp_path / "t.json"], "scoring", "kp", "d", "b", [], 1, matcher="m"):
        pass
    assert not (tmp_path / "t.json").exists()


def test_a_scoring_job_writes_the_same_timing_into_each_folder_it_names_at_the_end(tmp_path):
    # its folders follow from its settings, which the job checks first: asked for when the block has ended
    outs = [tmp_path / "scores" / "job_timing.json", tmp_path / "matching" / "job_timing.json"]
    asked = []
    with jobtiming.timed(lambda: asked.append(1) or outs, "scoring", "kp", "d", "batch000", ["a"], 2):
        assert not asked
    assert asked == [1] and outs[0].read_text() == outs[1].read_text()
    assert jobtiming.read_timing(outs[1])["threads"] == 2


def test_a_job_on_a_gpu_names_the_gpu(tmp_path, monkeypatch):
    # torchrt.configure records the devices it set up; a CUDA one makes the job a GPU job
    monkeypatch.setattr(torchrt, "devices_used", lambda: {("cuda", "NVIDIA H100 80GB HBM3"), ("cpu", "x")})
    assert jobtiming.device() == ("cuda", "NVIDIA H100 80GB HBM3")
    with jobtiming.timed([tmp_path / "t.json"], "descriptors", "kp", "hardnet", "batch000", ["a"], 4):
        pass
    r = jobtiming.read_timing(tmp_path / "t.json")
    assert (r["device"], r["device_name"], r["cpu"]) == ("cuda", "NVIDIA H100 80GB HBM3", torchrt.cpu_name())
    monkeypatch.setattr(torchrt, "devices_used", lambda: {("cpu", "x")})
    assert jobtiming.device() == ("cpu", torchrt.cpu_name())


def test_configure_records_its_device(monkeypatch):
    monkeypatch.setattr(torchrt, "_DEVICES_USED", set())
    assert torchrt.devices_used() == set()
    torchrt.configure("cpu", 1)
    assert torchrt.devices_used() == {("cpu", torchrt.cpu_name())}


def test_process_cpu_seconds_counts_this_process():
    a = jobtiming.process_cpu_seconds()
    busy(0.05)
    assert jobtiming.process_cpu_seconds() - a >= 0.02


def _record(**changes) -> dict:
    r = {"stage": "keypoints", "keypoint_set": "kp", "descriptor": None, "batch": "batch000", "scenes": ["a"], "wall_ms": 1.5,
         "cpu_time_ms": 2.0, "threads": 1, "device": "cpu", "device_name": "x", "cpu": "x"}
    r.update(changes)
    return r


@pytest.mark.bad_input
@pytest.mark.parametrize("text, what", [
    (None, "is missing"),
    ("{not json", "is not readable JSON"),
    (json.dumps(_record(wall_ms=-1.0)), "wall_ms is -1.0"),
    (json.dumps(_record(cpu_time_ms="3")), "cpu_time_ms is '3'"),
    (json.dumps(_record(wall_ms=float("nan"))), "wall_ms is nan"),
    (json.dumps({k: v for k, v in _record().items() if k != "device_name"}), "lacks device_name"),
    (json.dumps(_record(device="tpu")), "device is 'tpu'"),
    (json.dumps([1, 2]), "lacks stage, keypoint_set"),
    (json.dumps(_record(stage="matches")), "of a 'matches' job lacks matcher"),
])
def test_a_missing_or_malformed_timing_names_the_file_and_the_fix(tmp_path, text, what):
    f = tmp_path / "batch000.json"
    if text is not None:
        f.write_text(text)
    raises_naming(lambda: jobtiming.read_timing(f, "keypoints"), str(f), what, "--forcerun keypoints", exc=DataError)
