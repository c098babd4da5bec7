"""descbench.report.timings: which jobs' timing files a (descriptor, keypoint set) row adds up, exactly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import raises_naming

from descbench.paths import ResultPaths
from descbench.report import timings

BATCHES = {"batch000": ["a", "b"], "batch001": ["c"]}
CFG = {"descriptors": {"sift": {"family": "sift"}, "sift_t5": {"family": "sift", "features_of": "sift"},
                       "hardnet": {"family": "hardnet"}}}
COMBOS = [("kp", "sift"), ("kp", "sift_t5"), ("kp", "hardnet"), ("kp2", "sift")]


def write(paths, stage, kpset, descriptor, batch, wall, cpu, device="cpu", name="Xeon"):
    f = paths.job_timing(stage, kpset, descriptor, batch)
    rec = {"stage": stage, "keypoint_set": kpset, "descriptor": descriptor, "batch": batch, "scenes": BATCHES[batch],
           "wall_ms": wall, "cpu_time_ms": cpu, "threads": 2, "device": device, "device_name": name, "cpu": "Xeon"}
    Path(f).parent.mkdir(parents=True, exist_ok=True)
    Path(f).write_text(json.dumps(rec))


@pytest.fixture
def paths(tmp_path):
    p = ResultPaths(tmp_path, BATCHES)
    for i, b in enumerate(BATCHES):  # batch001 adds 1 to every wall time, 2 to every CPU time
        write(p, "keypoints", "kp", None, b, 100 + i, 150 + 2 * i)
        write(p, "keypoints", "kp2", None, b, 50 + i, 40 + 2 * i)
        write(p, "descriptors", "kp", "sift", b, 200 + i, 300 + 2 * i)
        write(p, "descriptors", "kp2", "sift", b, 20 + i, 30 + 2 * i)
        write(p, "descriptors", "kp", "hardnet", b, 400 + i, 90 + 2 * i, "cuda" if i == 0 else "cpu", "H100" if i == 0 else "Xeon")
        for d in ("sift", "sift_t5", "hardnet"):
            write(p, "scoring", "kp", d, b, 10 + i, 20 + 2 * i)
        write(p, "scoring", "kp2", "sift", b, 5 + i, 6 + 2 * i)
    return p


def test_job_files_of_a_row(paths):
    f = timings.job_files(paths, "kp", "sift_t5", "sift")
    assert {s: [str(x) for x in v] for s, v in f.items()} == {
        "keypoints": [paths.job_timing("keypoints", "kp", None, b) for b in BATCHES],
        "descriptors": [paths.job_timing("descriptors", "kp", "sift", b) for b in BATCHES],  # its base's files
        "scoring": [paths.job_timing("scoring", "kp", "sift_t5", b) for b in BATCHES],
    }


def test_rows_add_up_exactly_the_jobs_they_count(paths):
    t = timings.build(paths, COMBOS, CFG)
    assert t.columns.tolist() == timings.COLUMNS
    expected = pd.DataFrame([
        # descriptor, kpset, keypoints (wall, cpu, jobs, gpu jobs, gpu wall), descriptors (...), scoring (...), totals, n, device
        ["sift", "kp", 201.0, 302.0, 2, 0, np.nan, 401.0, 602.0, 2, 0, np.nan, 21.0, 42.0, 2, 0, np.nan, 623.0, 946.0, 6, "Xeon"],
        # a scoring variant: its base's descriptor jobs, its own scoring jobs
        ["sift_t5", "kp", 201.0, 302.0, 2, 0, np.nan, 401.0, 602.0, 2, 0, np.nan, 21.0, 42.0, 2, 0, np.nan, 623.0, 946.0, 6, "Xeon"],
        # one descriptor job on the GPU (batch000, 400 ms), one on the CPU
        ["hardnet", "kp", 201.0, 302.0, 2, 0, np.nan, 801.0, 182.0, 2, 1, 400.0, 21.0, 42.0, 2, 0, np.nan, 1023.0, 526.0, 6,
         "Xeon; H100"],
        ["sift", "kp2", 101.0, 82.0, 2, 0, np.nan, 41.0, 62.0, 2, 0, np.nan, 11.0, 14.0, 2, 0, np.nan, 153.0, 158.0, 6, "Xeon"],
    ], columns=timings.COLUMNS)
    pd.testing.assert_frame_equal(t, expected, check_dtype=False)


def test_on_device_splits_a_stage_by_device(paths):
    t = timings.build(paths, COMBOS, CFG)
    cpu, gpu = timings.on_device(t, "descriptors", False), timings.on_device(t, "descriptors", True)
    assert cpu.tolist() == [401.0, 401.0, 401.0, 41.0]  # hardnet: its batch001 job on the CPU
    assert gpu.tolist()[2] == 400.0 and all(math.isnan(v) for i, v in enumerate(gpu) if i != 2)
    all_gpu = t.assign(descriptors_gpu_jobs=2, descriptors_gpu_wall_ms=t.descriptors_wall_ms)
    assert timings.on_device(all_gpu, "descriptors", False).isna().all()  # nothing on the CPU: NaN, not 0


def test_the_report_files(paths, tmp_path):
    t = timings.build(paths, COMBOS, CFG)
    timings.write(t, tmp_path / "report")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "report" / "timings.csv"), t, check_dtype=False)
    md = (tmp_path / "report" / "timings.md").read_text().splitlines()
    assert md[0].startswith("| descriptor | keypoint_set | keypoints_wall_ms | keypoints_cpu_time_ms |")
    assert md[4] == "| hardnet | kp | 201 | 302 | 801 | 182 | 21 | 42 | 1023 | 526 | 6 | Xeon; H100 |"
    assert "<table" in (tmp_path / "report" / "timings.html").read_text()


@pytest.mark.bad_input
def test_a_missing_or_corrupt_timing_file_names_it_and_the_rule(paths):
    f = paths.job_timing("descriptors", "kp", "hardnet", "batch001")
    Path(f).write_text('{"wall_ms": ')
    raises_naming(lambda: timings.build(paths, COMBOS, CFG), f, "not readable JSON", "--forcerun descriptors")
    Path(f).unlink()
    raises_naming(lambda: timings.build(paths, COMBOS, CFG), f, "is missing", "--forcerun descriptors")
    Path(paths.job_timing("scoring", "kp2", "sift", "batch000")).unlink()
    raises_naming(lambda: timings.build(paths, [("kp2", "sift")], CFG), paths.job_timing("scoring", "kp2", "sift", "batch000"),
                  "--forcerun score")
