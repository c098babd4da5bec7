"""SuperPoint's keypoint job and descriptor job: one network run, keypoints and rows equal to
descbench.keypoints.superpoint.detect_and_describe on the set's grey image after descbench's
border rule and cap; its descriptor on its own set reads the side file, equal to a recompute."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from descbench.config import validate_config
from descbench.descriptors import compute_descriptors
from descbench.io import read_meta
from descbench.jobs.common import load_keypoints, read_features
from descbench.jobs.descriptors import describe_scene
from descbench.jobs.keypoints import detect_scene
from descbench.keypoints import ImageKeypoints, border_upper_inclusive, filter_keypoints
from descbench.keypoints import joint as J
from descbench.keypoints import superpoint as SP
from descbench.paths import ResultPaths
from descbench.torchrt import random_seed

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
NET = {"weights": "random", "device": "cpu", "threads": 1}


@pytest.mark.parametrize("layout", ["magicleap", "rpautrat"])
def test_keypoint_job_and_descriptor_equal_detect_and_describe_after_border_and_cap(layout, scene, tmp_path):
    cfg = validate_config({"keypoint_sets": {"sp": {"detector": "superpoint", "max_keypoints": 80, "border_px": 20,
                                                    "params": {**NET, "layout": layout}}},
                           "descriptors": {"sp": {"family": "superpoint", "params": {**NET, "layout": layout}}}}, SCHEMA)
    kspec, dspec = cfg["keypoint_sets"]["sp"], cfg["descriptors"]["sp"]
    kp = Path(ResultPaths(tmp_path / "res", {"b0": [scene.name]}).keypoints("sp", scene.name))
    detect_scene(scene, "sp", kspec, kp)
    per_image, meta = load_keypoints(kp)
    assert meta["runtime"]["weights"] == "random(seed=0, key=superpoint)"
    _, arrays = J.read_side_file(J.side_path(kp))
    out = tmp_path / "d.parquet"
    describe_scene(scene, kp, "sp", dspec, kspec, out)
    feats = read_features(kp, out)
    assert read_meta(out)["runtime"]["rows"] == "keypoint_job"
    torch.set_num_threads(1)
    torch.manual_seed(random_seed(0, "superpoint"))
    model = SP.superpoint_net(layout).eval()
    for k, kps in per_image.items():
        gray = cv2.imread(str(scene / f"{k}.ppm"), cv2.IMREAD_GRAYSCALE)
        xy, score, desc = SP.detect_and_describe(gray / 255.0, model)
        n = len(xy)
        raw = ImageKeypoints(xy[:, 0].copy(), xy[:, 1].copy(), np.full(n, 12.0, np.float32), np.full(n, -1.0, np.float32),
                             score, np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))
        want = filter_keypoints(raw, gray.shape[1], gray.shape[0], 20, 80, border_upper_inclusive(kspec))
        assert 0 < len(kps) == len(want) == 80 < n
        for f in ("x", "y", "response", "source_index", "size", "angle"):
            assert np.array_equal(getattr(kps, f), getattr(want, f)), (k, f)
        assert np.array_equal(arrays[f"rows_{k}"], desc[want.source_index])
        assert np.array_equal(feats.by_image[k], desc[want.source_index])  # the family's rows: the side file's
        # ... and a recompute (the network run again on the set's keypoints) gives them too
        assert np.array_equal(compute_descriptors("superpoint", dspec["params"], scene / f"{k}.ppm", kps, kspec, "w"),
                              feats.by_image[k])
