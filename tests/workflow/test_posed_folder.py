"""A posed dataset in the user's own folder (dataset: posed, posed.path) runs end to end; its files
are tracked by content (an edited pairs.txt reruns the jobs that read it); a missing image stops the
DAG build with a message naming the file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from descbench.datasets.posed_demo import write_scene
from smkrun import snakemake_cmd

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def smk(work: Path, *args: str):
    return subprocess.run(snakemake_cmd(work,
                           "--configfile", str(work / "cfg.yaml"), "--replace-workflow-config", "--cores", "2", *args),
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("posedfolder")
    write_scene(work / "mine", 1, seed=4)
    cfg = {"dataset": "posed", "posed": {"path": str(work / "mine")},
           "keypoint_sets": {"sift": {"detector": "sift", "max_keypoints": 800}},
           "descriptors": {"sift": {"family": "sift", "keypoint_sets": ["sift"]}}, "matchers": {"mnn": {"matcher": "mnn"}}}
    (work / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    r = smk(work)
    assert r.returncode == 0, r.stderr[-5000:]
    return work


def test_a_posed_folder_runs_into_its_own_results_folder(work):
    table = pd.read_parquet(work / "results" / "posed-mine" / "report" / "pose.parquet")
    assert table.matcher.tolist() == ["mnn"] and table.pairs.tolist() == [10] and table.opencv_auc_at_20.iloc[0] > 0.3
    assert table.covisible_percent.iloc[0] == 100.0  # the folder's depth maps were found and read


def test_an_edited_pairs_file_reruns_the_jobs_that_read_it(work):
    pairs = work / "mine" / "posed_01" / "pairs.txt"
    keep = pairs.read_text()
    pairs.write_text("".join(keep.splitlines(keepends=True)[:4]))  # the first 4 pairs (views 0-4)
    try:
        r = smk(work)
        assert r.returncode == 0, r.stderr[-5000:]
        assert "rule keypoints" in r.stdout + r.stderr and "rule score_pose" in r.stdout + r.stderr
        assert pd.read_parquet(work / "results" / "posed-mine" / "report" / "pose.parquet").pairs.tolist() == [4]
    finally:
        pairs.write_text(keep)


@pytest.mark.bad_input
def test_a_missing_image_stops_the_dag_build_naming_it(work):
    image = work / "mine" / "posed_01" / "images" / "3.png"
    data = image.read_bytes()
    image.unlink()
    try:
        r = smk(work, "--dry-run")
        out = r.stdout + r.stderr
        assert r.returncode != 0
        assert f"{image} (the image of view '3.png'" in out and "Traceback" not in out, out
    finally:
        image.write_bytes(data)


@pytest.mark.bad_input
def test_a_missing_depth_map_switches_the_depth_metrics_off_or_stops_a_run_that_requires_them(work):
    depth = work / "mine" / "posed_01" / "depths" / "2.png"
    data = depth.read_bytes()
    depth.unlink()
    cfg_path = work / "cfg.yaml"
    keep = cfg_path.read_text()
    try:
        r = smk(work, "--dry-run")
        assert r.returncode == 0 and "depth metrics off: 1 view(s) have no depth map (posed_01/2.png)" in r.stdout + r.stderr
        cfg = yaml.safe_load(keep)
        cfg["pose"] = {"depth": True}
        cfg_path.write_text(yaml.safe_dump(cfg))
        r = smk(work, "--dry-run")
        out = r.stdout + r.stderr
        assert r.returncode != 0 and "pose.depth: true, but 1 view(s) have no depth map" in out and "posed_01/2.png" in out
    finally:
        depth.write_bytes(data)
        cfg_path.write_text(keep)


def test_a_large_posed_folder_runs_in_parts_on_one_resized_copy(tmp_path):
    """130 views (the posed demo's five, each seen 26 times under new names) and 129 pairs of
    consecutive views: more than the 127 views a scene may have, so two parts; resized (long side
    320) once for the whole folder, cameras and depth maps with it."""
    demo = write_scene(tmp_path / "demo", 1, seed=4)
    big = tmp_path / "sets" / "big"
    (big / "images").mkdir(parents=True)
    (big / "depths").mkdir()
    lines = (demo / "views.txt").read_text().splitlines()
    views = []
    for k in range(130):
        src = lines[k % 5].split(" ", 1)
        name = f"v{k:03d}.png"
        (big / "images" / name).write_bytes((demo / "images" / src[0]).read_bytes())
        (big / "depths" / name).write_bytes((demo / "depths" / src[0]).read_bytes())
        views.append(f"{name} {src[1]}\n")
    (big / "views.txt").write_text("".join(views))
    (big / "pairs.txt").write_text("".join(f"v{k:03d}.png v{k + 1:03d}.png\n" for k in range(129)))
    cfg = {"dataset": "posed", "posed": {"path": str(tmp_path / "sets")}, "resize": {"size": 320, "side": "long"},
           "keypoint_sets": {"sift": {"detector": "sift", "max_keypoints": 300}},
           "descriptors": {"sift": {"family": "sift", "keypoint_sets": ["sift"]}}, "matchers": {"mnn": {"matcher": "mnn"}}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    r = smk(tmp_path)
    assert r.returncode == 0, r.stderr[-5000:]
    log = r.stdout + r.stderr
    assert log.count("rule resize_scene:") == 1 and "cameras and depth maps adjusted" in log
    table = pd.read_parquet(tmp_path / "results" / "posed-sets-long320" / "report" / "pose.parquet")
    assert table.pairs.tolist() == [129] and table.covisible_percent.iloc[0] == 100.0
    copy = next((tmp_path / "data" / "resized").glob("*/long320/big"))
    assert " PINHOLE 320 240 " in (copy / "views.txt").read_text().splitlines()[0]
    pairs = pd.concat([pd.read_parquet(p) for p in (tmp_path / "results" / "posed-sets-long320" / "pose").rglob("*pairs*.parquet")])
    assert sorted(pairs.scene.unique()) == ["big@000", "big@001"] and len(pairs) == 129
