"""One network run gives a keypoint set and its descriptor: the keypoint job of a joint network
(descbench.keypoints.joint) writes its rows of the kept keypoints in a side file, derived sets
copy theirs, and the descriptor job of the same network reads them instead of running it again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from descbench.config import validate_config
from descbench.descriptors import compute_descriptors, get_family
from descbench.io import read_meta
from descbench.jobs.common import load_keypoints, read_features
from descbench.jobs.descriptors import describe_scene
from descbench.jobs.keypoints import derive_scene, detect_scene
from descbench.keypoints import joint as J
from descbench.paths import ResultPaths
from conftest import raises_naming

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
NET = {"weights": "random", "device": "cpu", "threads": 1}


def config(**extra_sets) -> dict:
    sets = {"dk": {"detector": "disk", "max_keypoints": 60, "params": {**NET, "resize": 128}},
            "small": {"source": "dk", "filters": [{"per_image_top_n_by_size": 25}]}, **extra_sets}
    return validate_config({"keypoint_sets": sets,
                            "descriptors": {"disk": {"family": "disk", "params": {**NET, "resize": 128}},
                                            "disk2": {"family": "disk", "params": {**NET, "resize": 128, "weights_seed": 5}}}},
                           SCHEMA)


@pytest.fixture
def built(scene, tmp_path):
    """The scene's ``dk`` keypoints (DISK at 128 px, cap 60) and a derived set, as the jobs write them."""
    cfg = config()
    paths = ResultPaths(tmp_path / "res", {"b0": [scene.name]})
    kp = Path(paths.keypoints("dk", scene.name))
    detect_scene(scene, "dk", cfg["keypoint_sets"]["dk"], kp)
    small = Path(paths.keypoints("small", scene.name))
    derive_scene(paths, scene.name, "small", cfg["keypoint_sets"]["small"], small, None)
    return cfg, paths, kp, small


def test_the_keypoint_job_keeps_the_networks_rows_of_its_kept_keypoints(scene, built):
    cfg, _, kp, _ = built
    per_image, meta = load_keypoints(kp)
    side_meta, arrays = J.read_side_file(J.side_path(kp))
    assert side_meta["identity"] == J.identity("disk", cfg["keypoint_sets"]["dk"]["params"])
    assert side_meta["weights"] == "random(seed=0, key=disk)" == meta["runtime"]["weights"]
    p = cfg["keypoint_sets"]["dk"]["params"]
    for k, kps in per_image.items():
        raw, rows = J.runner("disk", p).detect(scene / f"{k}.ppm", None)
        assert 0 < len(kps) <= 60 < len(raw)
        assert np.array_equal(arrays[f"source_index_{k}"], kps.source_index)
        assert np.array_equal(arrays[f"rows_{k}"], rows[kps.source_index])


def test_its_descriptor_reads_them_and_they_equal_a_recompute(scene, built, tmp_path):
    cfg, paths, kp, small = built
    dspec, kspec = cfg["descriptors"]["disk"], cfg["keypoint_sets"]["dk"]
    for name, kfile in (("dk", kp), ("small", small)):
        out = tmp_path / f"{name}.parquet"
        describe_scene(scene, kfile, "disk", dspec, kspec, out)
        feats = read_features(kfile, out)
        assert read_meta(out)["runtime"]["rows"] == "keypoint_job"
        for k, kps in feats.per_image.items():
            recomputed = compute_descriptors("disk", dspec["params"], scene / f"{k}.ppm", kps, kspec, "w")
            assert len(kps) and np.array_equal(feats.by_image[k], recomputed), (name, k)
    assert len(feats.per_image[1]) == 25  # the derived set: its own side file, a subset
    assert J.side_path(small).exists()


def test_the_descriptor_job_reads_the_side_file_once_per_scene(scene, built, tmp_path, monkeypatch):
    cfg, _, kp, _ = built
    reads = []
    real = J.read_side_file
    monkeypatch.setattr(J, "read_side_file", lambda path: reads.append(Path(path)) or real(path))
    out = tmp_path / "once.parquet"
    describe_scene(scene, kp, "disk", cfg["descriptors"]["disk"], cfg["keypoint_sets"]["dk"], out)
    assert len(read_features(kp, out).per_image) > 1
    assert reads == [J.side_path(kp)]


def test_an_intersection_keeping_the_network_side_carries_its_rows(scene, tmp_path):
    cfg = config(sift={"detector": "sift", "max_keypoints": 400},
                 both={"intersection": {"sources": ["sift", "dk"], "tol_px": 4.0, "keep": "dk"}})
    paths = ResultPaths(tmp_path / "res", {"b0": [scene.name]})
    for name in ("dk", "sift"):
        detect_scene(scene, name, cfg["keypoint_sets"][name], Path(paths.keypoints(name, scene.name)))
    both = Path(paths.keypoints("both", scene.name))
    derive_scene(paths, scene.name, "both", cfg["keypoint_sets"]["both"], both, None)
    out = tmp_path / "both.parquet"
    describe_scene(scene, both, "disk", cfg["descriptors"]["disk"], cfg["keypoint_sets"]["dk"], out)
    feats = read_features(both, out)
    assert read_meta(out)["runtime"]["rows"] == "keypoint_job"
    assert sum(len(k) for k in feats.per_image.values()) > 0
    for k, kps in feats.per_image.items():
        recomputed = compute_descriptors("disk", cfg["descriptors"]["disk"]["params"], scene / f"{k}.ppm", kps,
                                         cfg["keypoint_sets"]["dk"], "w")
        assert np.array_equal(feats.by_image[k], recomputed), k


def test_another_identity_recomputes_instead(scene, built, tmp_path):
    cfg, _, kp, _ = built
    out = tmp_path / "d2.parquet"
    J.side_path(kp).unlink()  # not read: the descriptor's weights are another network's
    describe_scene(scene, kp, "disk2", cfg["descriptors"]["disk2"], cfg["keypoint_sets"]["dk"], out)
    assert read_meta(out)["runtime"]["rows"] == "network"


@pytest.mark.bad_input
def test_a_missing_side_file_names_the_file_and_the_fix(scene, built, tmp_path):
    cfg, _, kp, _ = built
    J.side_path(kp).unlink()
    raises_naming(lambda: describe_scene(scene, kp, "disk", cfg["descriptors"]["disk"], cfg["keypoint_sets"]["dk"],
                                         tmp_path / "d.parquet"), str(J.side_path(kp)), "--forcerun keypoints")


def test_other_keypoints_are_described_by_the_network(scene, built, tmp_path):
    cfg = config(sift={"detector": "sift", "max_keypoints": 30})
    fam = get_family("disk")
    assert fam.own_rows(cfg["descriptors"]["disk"]["params"], cfg["keypoint_sets"]["sift"], Path("x.parquet")) is None
    assert fam.not_on_patches and fam.runtime_of({}) == "torch"


def test_keynet_affnet_hardnet_side_rows_equal_a_recompute_of_the_network(scene, tmp_path):
    kah = {**NET, "num_features": 300, "resize": 160}
    cfg = validate_config({"keypoint_sets": {"kah": {"detector": "keynet_affnet_hardnet", "max_keypoints": 40, "params": kah}},
                           "descriptors": {"kah": {"family": "keynet_affnet_hardnet",
                                                   "params": {k: v for k, v in kah.items() if k != "num_features"}}}},
                          SCHEMA)
    kspec, dspec = cfg["keypoint_sets"]["kah"], cfg["descriptors"]["kah"]
    kp = Path(ResultPaths(tmp_path / "res", {"b0": [scene.name]}).keypoints("kah", scene.name))
    detect_scene(scene, "kah", kspec, kp)
    out = tmp_path / "kah.parquet"
    describe_scene(scene, kp, "kah", dspec, kspec, out)
    feats = read_features(kp, out)
    assert read_meta(out)["runtime"]["rows"] == "keypoint_job"
    for k, kps in feats.per_image.items():
        import cv2

        raw, rows = J.runner("keynet_affnet_hardnet", kspec["params"]).detect(
            scene / f"{k}.ppm", cv2.imread(str(scene / f"{k}.ppm"), cv2.IMREAD_GRAYSCALE))
        assert 0 < len(kps) <= 40 < len(raw)
        assert np.array_equal(feats.by_image[k], rows[kps.source_index]), k
        assert np.array_equal(kps.size, raw.size[kps.source_index]) and np.array_equal(kps.angle, raw.angle[kps.source_index])


def test_dedode_side_rows_equal_a_recompute_of_the_network(scene, tmp_path):
    dd = {**NET, "resize": 128}
    cfg = validate_config({"keypoint_sets": {"dd": {"detector": "dedode", "max_keypoints": 40, "border_px": 0, "params": {**dd, "n": 3000}}},
                           "descriptors": {"dd": {"family": "dedode", "params": dd}}}, SCHEMA)
    kspec, dspec = cfg["keypoint_sets"]["dd"], cfg["descriptors"]["dd"]
    kp = Path(ResultPaths(tmp_path / "res", {"b0": [scene.name]}).keypoints("dd", scene.name))
    detect_scene(scene, "dd", kspec, kp)
    out = tmp_path / "dd.parquet"
    describe_scene(scene, kp, "dd", dspec, kspec, out)
    feats = read_features(kp, out)
    assert read_meta(out)["runtime"]["rows"] == "keypoint_job"
    for k, kps in feats.per_image.items():
        raw, rows = J.runner("dedode", kspec["params"]).detect(scene / f"{k}.ppm", None)
        assert 0 < len(kps) <= 40 < len(raw)
        assert np.array_equal(feats.by_image[k], rows[kps.source_index]), k
