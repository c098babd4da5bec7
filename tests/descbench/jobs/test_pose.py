"""descbench.jobs.pose: the commands a posed run's jobs call, on one posed demo scene (render,
keypoints, descriptors, matches, ``score-pose``, ``pose-report``): one row per matcher whose
numbers are the summary of the per-pair files; bad input (a sequence scene, another matcher's
file) named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from descbench import cli
from descbench.config import validate_config
from descbench.errors import DataError
from descbench.jobs.pose import score_pose_batch
from descbench.paths import ResultPaths
from descbench.tasks.pose import extension_settings
from descbench.tasks.pose import read_pose, summarize_pose

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SCENE = "posed_02"


def ok(*args) -> None:
    assert cli.main([str(a) for a in args]) == 0


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("posejobs")
    cfg = validate_config({"dataset": "posed_demo", "keypoint_sets": {"kp": {"detector": "sift", "max_keypoints": 600}},
                           "descriptors": {"desc": {"family": "sift"}},
                           "matchers": {"mnn": {"matcher": "mnn"}, "r08": {"matcher": "nn", "params": {"ratio": 0.8}}},
                           "pose": {"estimators": {"opencv": {"ransac_th": [0.5, 1.0]}, "usac_magsac": {}}, "depth": True}}, SCHEMA)
    data, root, batches = tmp / "data", tmp / "results", {"batch000": [SCENE]}
    ok("posed-demo-scene", "--scene", SCENE, "--out-dir", data)
    common = ["--results-root", root, "--scene-root", data, "--batches", json.dumps(batches), "--batch", "batch000", "--threads", "0"]
    ok("keypoints", *common, "--name", "kp", "--spec", json.dumps(cfg["keypoint_sets"]["kp"]))
    ok("descriptors", *common, "--keypoint-set", "kp", "--name", "desc", "--spec", json.dumps(cfg["descriptors"]["desc"]),
       "--keypoint-set-spec", json.dumps(cfg["keypoint_sets"]["kp"]))
    for m in cfg["matchers"]:
        job = [*common, "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", m, "--spec", json.dumps(cfg["matchers"][m])]
        ok("match", *job)
        ok("score-pose", *job, "--section", json.dumps({**cfg["pose"], "extension": extension_settings(cfg)}))
    combos = [["kp", "desc", m] for m in cfg["matchers"]]
    ok("pose-report", "--results-root", root, "--batches", json.dumps(batches), "--combos", json.dumps(combos),
       "--config", json.dumps(cfg), "--out-dir", root / "report", "--plots-dir", root / "report" / "plots")
    return cfg, data, root, ResultPaths(root, batches)


def test_the_report_rows_are_the_summaries_of_the_per_pair_files(run):
    cfg, _, root, paths = run
    table = pd.read_parquet(root / "report" / "pose.parquet")
    assert table.matcher.tolist() == ["mnn", "r08"]
    for i, m in enumerate(cfg["matchers"]):
        files = [Path(paths.match_task_file("pose", "kp", "desc", m, SCENE, k)) for k in ("pairs.parquet", "estimates.parquet")]
        pairs, est = read_pose([files[0]], [files[1]])
        assert len(pairs) == 10 and sorted(est.estimator.unique()) == ["opencv", "usac_magsac"] and len(est) == 10 * 3
        assert pairs.image0.iloc[0] == "0.png" and pairs.image1.iloc[-1] == "4.png"
        for k, v in summarize_pose(pairs, est, cfg["pose"]).items():
            assert table.iloc[i][k] == pytest.approx(v, nan_ok=True), k
    assert table.opencv_auc_at_20.min() > 0.3  # SIFT recovers most of the rendered scene's poses
    # the demo's depth maps were read: every match covisible (the room's walls fill every view)
    assert (table.covisible_percent == 100.0).all() and table.gt_match_recall_at_3.between(0.05, 1).all()
    timing = json.loads(Path(paths.match_task_file("pose", "kp", "desc", "mnn", SCENE, "timing.json")).read_text())
    assert set(timing["estimator_seconds"]) == {"opencv", "usac_magsac"}
    assert (root / "report" / "plots" / "pose_error.png").exists() and (root / "report" / "pose.md").read_text().startswith("Relative pose")


@pytest.mark.bad_input
def test_another_matchers_file_is_refused_naming_it(run):
    cfg, data, _, paths = run
    with pytest.raises(DataError, match=r"holds the matches of matcher 'r08' .* not 'mnn'"):
        _swapped(paths, data, cfg)


def _swapped(paths, data, cfg):
    """score-pose for matcher mnn while mnn's file holds r08's matches (a copied file)."""
    import shutil

    mnn, r08 = Path(paths.matches("kp", "desc", "mnn", SCENE)), Path(paths.matches("kp", "desc", "r08", SCENE))
    keep = mnn.read_bytes()
    shutil.copyfile(r08, mnn)
    try:
        score_pose_batch(paths, data, "batch000", "kp", "desc", "mnn", cfg["matchers"]["mnn"], cfg["pose"])
    finally:
        mnn.write_bytes(keep)


@pytest.mark.bad_input
def test_a_sequence_scene_is_refused(tmp_path, run):
    cfg, _, _, paths = run
    ok("demo-scene", "--scene", "v_coins", "--out-dir", tmp_path)
    p = ResultPaths(paths.root, {"batch000": ["v_coins"]})
    with pytest.raises(DataError, match="is not a posed scene"):
        score_pose_batch(p, tmp_path, "batch000", "kp", "desc", "mnn", cfg["matchers"]["mnn"], cfg["pose"])


def test_a_score_pose_job_writes_its_timing_file(run):
    from descbench import jobtiming

    _, _, _, paths = run
    rec = jobtiming.read_timing(Path(paths.job_timing("pose", "kp", "desc", "batch000", matcher="mnn")))
    assert rec["stage"] == "pose" and rec["scenes"] == [SCENE] and rec["wall_ms"] > 0


def test_a_calibrated_pairs_file_gives_the_views_layouts_numbers(run, tmp_path):
    """The same scene as one pairs_calibrated.txt (K, T_0to1 written from views.txt): the same
    keypoints, matches, epipolar precision and pose estimates, bit for bit."""
    import shutil

    from descbench.datasets.posed import read_scene, relative_pose

    cfg, data, root, paths = run
    src = data / SCENE
    cal = tmp_path / "data" / SCENE
    shutil.copytree(src / "images", cal / "images")
    scene = read_scene(src)
    lines = []
    for a, b in scene.pairs:
        R, t = relative_pose(scene.views[a], scene.views[b])
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, t
        lines.append(" ".join([f"images/{a}", f"images/{b}", *map(repr, scene.views[a].K().ravel().tolist()),
                               *map(repr, scene.views[b].K().ravel().tolist()), *map(repr, T.ravel().tolist())]))
    (cal / "pairs_calibrated.txt").write_text("\n".join(lines) + "\n")
    batches = {"batch000": [SCENE]}
    root2 = tmp_path / "results"
    common = ["--results-root", root2, "--scene-root", tmp_path / "data", "--batches", json.dumps(batches), "--batch", "batch000",
              "--threads", "0"]
    ok("keypoints", *common, "--name", "kp", "--spec", json.dumps(cfg["keypoint_sets"]["kp"]))
    ok("descriptors", *common, "--keypoint-set", "kp", "--name", "desc", "--spec", json.dumps(cfg["descriptors"]["desc"]),
       "--keypoint-set-spec", json.dumps(cfg["keypoint_sets"]["kp"]))
    job = [*common, "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "mnn", "--spec", json.dumps(cfg["matchers"]["mnn"])]
    ok("match", *job)
    ok("score-pose", *job, "--section", json.dumps({**cfg["pose"], "depth": False}))
    p2 = ResultPaths(root2, batches)
    for kind in ("pairs.parquet", "estimates.parquet"):
        a = pd.read_parquet(paths.match_task_file("pose", "kp", "desc", "mnn", SCENE, kind))
        b = pd.read_parquet(p2.match_task_file("pose", "kp", "desc", "mnn", SCENE, kind))
        assert (b.image0 == "images/" + a.image0).all()
        same = [c for c in b.columns if c not in ("image0", "image1")]
        pd.testing.assert_frame_equal(a[same], b[same])
