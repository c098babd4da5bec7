"""descbench.report.timings: which jobs' timing files a (descriptor, keypoint set) row adds up, exactly,
and how a row counts jobs made before descbench recorded times (no timing file)."""

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
from descbench.report.summary import untimed_rows_note

BATCHES = {"batch000": ["a", "b"], "batch001": ["c"]}
CFG = {"descriptors": {"sift": {"family": "sift"}, "sift_t5": {"family": "sift", "features_of": "sift"},
                       "hardnet": {"family": "hardnet"}},
       "verification": {"enabled": True}, "matching": {"enabled": False}}  # scoring tasks: scores, verification
COMBOS = [("kp", "sift"), ("kp", "sift_t5"), ("kp", "hardnet"), ("kp2", "sift")]


def write(paths, stage, kpset, descriptor, batch, wall, cpu, device="cpu", name="Xeon"):
    f = paths.job_timing(stage, kpset, descriptor, batch, "scores" if stage == "scoring" else None)
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
    f = timings.job_files(paths, "kp", "sift_t5", "sift", "scores")
    assert {s: [str(x) for x in v] for s, v in f.items()} == {
        "keypoints": [paths.job_timing("keypoints", "kp", None, b) for b in BATCHES],
        "descriptors": [paths.job_timing("descriptors", "kp", "sift", b) for b in BATCHES],  # its base's files
        "scoring": [paths.job_timing("scoring", "kp", "sift_t5", b, "scores") for b in BATCHES],  # the first task's folder
    }
    assert timings.row_files(paths, [("kp", "sift_t5")], CFG) == [f]
    assert timings.job_files(paths, "kp", "sift", None, None)["scoring"] == []


def test_rows_add_up_exactly_the_jobs_they_count(paths):
    t = timings.build(paths, COMBOS, CFG)
    assert t.columns.tolist() == timings.COLUMNS
    expected = pd.DataFrame([
        # descriptor, kpset, keypoints (wall, cpu, jobs, timed, gpu jobs, gpu wall), descriptors (...), scoring (...), totals,
        # n, n timed, device
        ["sift", "kp", 201.0, 302.0, 2, 2, 0, np.nan, 401.0, 602.0, 2, 2, 0, np.nan, 21.0, 42.0, 2, 2, 0, np.nan, 623.0, 946.0,
         6, 6, "Xeon"],
        # a scoring variant: its base's descriptor jobs, its own scoring jobs
        ["sift_t5", "kp", 201.0, 302.0, 2, 2, 0, np.nan, 401.0, 602.0, 2, 2, 0, np.nan, 21.0, 42.0, 2, 2, 0, np.nan, 623.0, 946.0,
         6, 6, "Xeon"],
        # one descriptor job on the GPU (batch000, 400 ms), one on the CPU
        ["hardnet", "kp", 201.0, 302.0, 2, 2, 0, np.nan, 801.0, 182.0, 2, 2, 1, 400.0, 21.0, 42.0, 2, 2, 0, np.nan, 1023.0, 526.0,
         6, 6, "Xeon; H100"],
        ["sift", "kp2", 101.0, 82.0, 2, 2, 0, np.nan, 41.0, 62.0, 2, 2, 0, np.nan, 11.0, 14.0, 2, 2, 0, np.nan, 153.0, 158.0,
         6, 6, "Xeon"],
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
    assert md[4] == "| hardnet | kp | 201 | 302 | 801 | 182 | 21 | 42 | 1023 | 526 | 6 | 6 | Xeon; H100 |"
    assert "<table" in (tmp_path / "report" / "timings.html").read_text()


@pytest.mark.bad_input
@pytest.mark.parametrize("text, what", [('{"wall_ms": ', "not readable JSON"), ('{"wall_ms": 3}', "lacks batch, cpu")])
def test_a_corrupt_timing_file_names_it_and_the_rule(paths, text, what):
    f = paths.job_timing("descriptors", "kp", "hardnet", "batch001")
    Path(f).write_text(text)
    raises_naming(lambda: timings.build(paths, COMBOS, CFG), f, what, "--forcerun descriptors")
    f = paths.job_timing("scoring", "kp2", "sift", "batch000", "scores")
    Path(f).write_text(text)
    raises_naming(lambda: timings.build(paths, [("kp2", "sift")], CFG), f, what, "--forcerun score")


@pytest.mark.bad_input
def test_a_missing_job_folder_is_an_error_naming_the_file(paths):
    f = Path(paths.job_timing("keypoints", "kp2", None, "batch001"))
    f.unlink()
    f.parent.rmdir()  # no results at all there: not a job made before timings, an incomplete results folder
    raises_naming(lambda: timings.build(paths, [("kp2", "sift")], CFG), str(f), "is missing", "--forcerun keypoints")


def test_jobs_made_before_timings_are_counted_not_timed(paths):
    # results made before descbench recorded times: complete job folders without job_timing.json
    for b in BATCHES:
        Path(paths.job_timing("scoring", "kp", "sift", b, "scores")).unlink()  # both of a row's scoring jobs
    Path(paths.job_timing("descriptors", "kp", "hardnet", "batch001")).unlink()  # one of two descriptor jobs
    t = timings.build(paths, COMBOS, CFG).set_index("descriptor", drop=False)
    sift = t[t.keypoint_set == "kp"].loc["sift"]
    assert (sift.scoring_jobs, sift.scoring_jobs_timed, sift.n_jobs, sift.n_jobs_timed) == (2, 0, 6, 4)
    assert np.isnan([sift.scoring_wall_ms, sift.scoring_cpu_time_ms, sift.total_wall_ms, sift.total_cpu_time_ms]).all()
    assert (sift.keypoints_wall_ms, sift.descriptors_wall_ms) == (201.0, 401.0)  # its other stages stay timed
    hn = t.loc["hardnet"]  # part of a stage timed: the stage's time is unknown, not the timed part's sum
    assert (hn.descriptors_jobs, hn.descriptors_jobs_timed, hn.descriptors_gpu_jobs) == (2, 1, 1)
    assert np.isnan([hn.descriptors_wall_ms, hn.descriptors_cpu_time_ms, hn.descriptors_gpu_wall_ms, hn.total_wall_ms]).all()
    assert np.isnan(timings.on_device(t, "descriptors", True).loc["hardnet"])  # not its timed GPU job's 400 ms
    assert np.isnan(timings.on_device(t, "descriptors", False).loc["hardnet"])
    assert t.loc["sift_t5"].n_jobs_timed == 6  # untouched rows stay whole
    # the report job's line: how many jobs (each once), that they predate timings, how to time them
    missing = timings.untimed(paths, COMBOS, CFG)
    assert sorted(map(str, missing)) == sorted([paths.job_timing("scoring", "kp", "sift", b, "scores") for b in BATCHES]
                                               + [paths.job_timing("descriptors", "kp", "hardnet", "batch001")])
    note = timings.untimed_note(missing)
    assert note.startswith("descbench: 3 keypoint, descriptor or scoring job(s) have no timing file") and "\n" not in note
    assert "made before descbench recorded times" in note and note.endswith("--forcerun keypoints descriptors score")
    assert timings.untimed_note(timings.untimed(paths, [("kp2", "sift")], CFG)) is None
    # the end-of-run summary's note, from timings.csv
    assert untimed_rows_note(t).startswith("2 of 4 rows hold jobs without a timing file")
    assert untimed_rows_note(t[t.n_jobs_timed == t.n_jobs]) is None
    # the files: NaN in the CSV, "nan" in the Markdown
    timings.write(t.reset_index(drop=True), paths.root / "report")
    back = pd.read_csv(paths.root / "report" / "timings.csv")
    assert back.scoring_wall_ms.isna().tolist() == [True, False, False, False]
