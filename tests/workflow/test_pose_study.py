"""config/pose_study.yaml (issue 28's relative pose study: sift + mnn / ratio, superpoint + lightglue,
disk + lightglue with random weights, OpenCV and PoseLib) runs in one command on the offline posed
demo, writes the pose table, figure and per-pair files, labels the random networks, and skips the
homography-based stages; a rerun has nothing to do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from descbench.tasks.pose import read_pose, summarize_pose
from smkrun import snakemake_cmd

ROOT = Path(__file__).resolve().parents[2]
ROWS = [("sift", "sift", "mnn"), ("sift", "sift", "ratio"), ("superpoint", "superpoint", "lightglue_superpoint"),
        ("disk", "disk", "lightglue_disk")]
SCENES = ["posed_00", "posed_01"]  # two of the four scenes: the study's own file, a shorter run

pytestmark = pytest.mark.e2e


def smk(workdir: Path, *args: str, timeout=1500):
    return subprocess.run(snakemake_cmd(workdir,
                           "--configfile", str(workdir / "pose_study.yaml"), "--replace-workflow-config", *args),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    pytest.importorskip("poselib", reason="the study's poselib estimator needs the estimators extra")
    pytest.importorskip("pycolmap", reason="the study's pycolmap estimator needs the estimators extra")
    work = tmp_path_factory.mktemp("pose_study")
    cfg = yaml.safe_load((ROOT / "config" / "pose_study.yaml").read_text())
    cfg["scenes"] = SCENES
    (work / "pose_study.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = smk(work, "--cores", "2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    return work, cfg, r


def test_the_study_writes_one_row_per_combination_labelled(study):
    work, cfg, r = study
    report = work / "results" / "pose_study" / "report"
    table = pd.read_parquet(report / "pose.parquet")
    assert list(zip(table.keypoint_set, table.descriptor, table.matcher)) == ROWS
    random_rows = table[table.keypoint_set != "sift"]
    assert random_rows.weights.str.contains("RANDOM").all() and (table[table.keypoint_set == "sift"].weights == "").all()
    for e in ("opencv", "poselib", "pycolmap"):
        assert {f"{e}_auc_at_5", f"{e}_auc_at_10", f"{e}_auc_at_20", f"{e}_mAA", f"{e}_ransac_th"} <= set(table.columns)
    sift = table.iloc[0]
    # SIFT on the rendered demo recovers most poses (a regression guard, not a peer's number)
    assert sift.opencv_auc_at_20 > 0.5 and sift.poselib_auc_at_20 > 0.5 and sift.pairs == 20
    md = (report / "pose.md").read_text()
    assert "opencv: ransac_th 0.5, 1 px" in md and "poselib: ransac_th 0.5, 1, 1.5, 2, 2.5, 3 px" in md and "poselib 2" in md
    assert "pycolmap: ransac_th 4 px" in md and "pycolmap 4" in md
    assert (report / "plots" / "pose_error.png").stat().st_size > 10_000
    assert {"reproj_prec_at_3", "covisible_percent", "gt_match_recall_at_3", "gt_match_precision_at_3"} <= set(table.columns)
    # descbench's extension, labelled as such
    assert {"mma_at_3", "true_map", "queries_without_depth_percent"} <= set(table.columns) and "descbench's extension" in md
    assert 0 < sift.true_map < 1 and 0 < sift.mma_at_3 <= 1
    assert "reproj_prec_at_3" in md and "depth metrics on" in r.stderr
    assert "descbench pose results, written by this run" in r.stdout and str(Path("report") / "pose.md") in r.stdout
    assert not (report / "comparison.csv").exists()  # the homography-based stages did not run
    assert "is posed (relative poses, no homographies)" in r.stderr


def test_the_table_is_the_summary_of_the_per_pair_files(study):
    work, cfg, _ = study
    res = work / "results" / "pose_study"
    table = pd.read_parquet(res / "report" / "pose.parquet")
    batch = res / "pose" / "sift" / "sift" / "mnn" / "batch000"
    pairs, est = read_pose([batch / f"{s}.pairs.parquet" for s in SCENES], [batch / f"{s}.estimates.parquet" for s in SCENES])
    # one row per pair, estimator and threshold: OpenCV 2, PoseLib 6, pycolmap 1
    assert len(pairs) == 20 and len(est) == 20 * sum(len(e["ransac_th"]) for e in cfg["pose"]["estimators"].values()) == 20 * 9
    want = summarize_pose(pairs, est, {"auc_thresholds": [5, 10, 20], "epipolar_thresholds": [1e-4, 5e-4, 1e-3],
                                       "estimators": cfg["pose"]["estimators"], "depth": True})
    got = table.iloc[0]
    for k, v in want.items():
        assert got[k] == pytest.approx(v, nan_ok=True), k


def test_a_rerun_has_nothing_to_do(study):
    work, _, _ = study
    r = smk(work, "--cores", "2", "--dry-run")
    assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr
