"""End to end: ``protocol: gluefactory_hpatches`` on the demo (two scenes). The resize_scene jobs
write each scene's copy with the short side at 480 px and glue-factory's adjusted homographies;
every stage reads the copies; the results go to their own experiment folder; the pipelines table
reports the preset's estimators and names the protocol; a rerun does nothing, another size makes
another copy and another experiment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from descbench.datasets.layout import image_size, read_homography
from descbench.datasets.resize import resize_homography, resized_size, scale_matrix
from descbench.jobs.common import load_keypoints
from smkrun import job_counts, snakemake, write_config

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e
SCENES = ["i_rocket", "v_coins"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("protocol")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = SCENES
    cfg["protocol"] = "gluefactory_hpatches"
    cfg["matchers"] = {"mnn": {"matcher": "mnn"}}
    write_config(work, cfg)
    out = snakemake(work, "--cores", "2")
    return work, cfg, out


def test_the_copies_are_resized_and_their_homographies_adjusted(run):
    work, _, out = run
    assert "protocol gluefactory_hpatches: hpatches.subset='d2net108', resize={'size': 480, 'side': 'short'}" in out
    for scene in SCENES:
        src, copy = work / "data" / "demo" / "seed0" / scene, work / "data" / "resized" / "demo-seed0" / "short480" / scene
        assert (copy / "resized.json").is_file()
        sizes = {}
        for k in range(1, 7):
            w, h = image_size(src / f"{k}.ppm")
            sizes[k] = ((h, w), resized_size(h, w, 480, "short"))
            assert image_size(copy / f"{k}.ppm") == sizes[k][1][::-1] and min(sizes[k][1]) == 480
        for k in range(2, 7):
            expected = resize_homography(read_homography(src / f"H_1_{k}"), scale_matrix(*sizes[1]), scale_matrix(*sizes[k]))
            assert np.array_equal(read_homography(copy / f"H_1_{k}"), expected)


def test_every_stage_reads_the_copies(run):
    work, _, _ = run
    res = work / "results" / "demo-short480"
    assert not (work / "results" / "demo").exists()
    per_image, _ = load_keypoints(next((res / "keypoints" / "sift").rglob("i_rocket.*")))
    w, h = image_size(work / "data" / "resized" / "demo-seed0" / "short480" / "i_rocket" / "1.ppm")
    kp = per_image[1]
    assert kp.x.max() < w and kp.y.max() < h and kp.x.max() > 640  # the 719 px wide copy, not the 640 px source


def test_the_pipelines_table_reports_the_presets_estimators(run):
    work, _, _ = run
    report = work / "results" / "demo-short480" / "report"
    t = pd.read_parquet(report / "pipelines.parquet")
    assert list(t.descriptor) == ["sift", "rootsift"]
    for c in ("dlt_auc_at_1", "dlt_auc_at_5", "poselib_auc_at_1", "poselib_auc_at_3", "poselib_auc_at_5"):
        assert np.all((t[c] >= 0) & (t[c] <= 1)), c
    assert np.all(t.poselib_ransac_th == 1.0) and np.all(t.poselib_auc_at_5 > 0.5)
    assert (report / "pipelines.md").read_text().startswith(
        "Protocol gluefactory_hpatches; images resized: short side 480 px, homographies adjusted.\n\n| keypoint_set")


def test_a_rerun_does_nothing_and_another_size_is_another_experiment(run):
    work, cfg, _ = run
    assert "Nothing to be done" in snakemake(work, "-n")
    write_config(work, {**cfg, "resize": {"size": 400, "side": "short"}})
    try:
        counts = job_counts(snakemake(work, "-n"))
        assert counts.get("resize_scene") == 2 and counts.get("keypoints") and "demo_scene" not in counts
    finally:
        write_config(work, cfg)
