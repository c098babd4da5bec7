"""config/seed_study.yaml runs with one command and gives the seed's table layout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {
    ("SIFT", "sift_all"), ("SIFT", "sift_scale"), ("SIFT", "sift_surf_intersection"),
    *((d, s) for d in ("DSPSIFT_V2", "RGBSIFT", "DSPRGBSIFT_V2") for s in ("sift_scale", "sift_surf_intersection")),
    ("SURF", "surf_sift_intersection"), ("SURF", "sift_surf_intersection"),
}


@pytest.mark.e2e
def test_seed_study_runs_with_one_command(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--cores", "2",
         "--configfile", "config/seed_study.yaml", "--replace-workflow-config", "--config", "scenes=[i_rocket,v_coins]"],
        capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    report = tmp_path / "results" / "demo" / "report"
    table = pd.read_csv(report / "comparison.csv")
    assert set(zip(table.descriptor, table.keypoint_set)) == EXPECTED  # config.yaml's sets/descriptors not merged in
    for col in ("true_map_micro", "viewpoint_map", "illumination_map", "workbench_verification_map"):
        assert table[col].between(0, 1).all(), col
    stats = pd.read_csv(report / "keypoint_stats.csv").set_index("keypoint_set")
    assert list(stats.index) == ["sift_all", "sift_scale", "surf_all", "sift_surf_intersection", "surf_sift_intersection"]
    # the two sides of the intersection are row-aligned: same counts per image
    assert stats.loc["sift_surf_intersection", "keypoints_total"] == stats.loc["surf_sift_intersection", "keypoints_total"] > 0
    assert stats.loc["sift_scale", "keypoints_total"] == min(8000, stats.loc["sift_all", "keypoints_total"])
    assert stats.loc["sift_scale", "size_median"] >= stats.loc["sift_all", "size_median"]
