"""Detection mode ``projected``: positions, sizes and angles through H's local Jacobian, against
hand-worked similarity transforms and finite differences; the border rule in image k's size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import detect_scene
from descbench.config import validate_config
from descbench.datasets.layout import image_size, read_homography, scene_files
from descbench.errors import ConfigError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.projected import homography_jacobian, project_keypoints

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def kps(xy, size, angle):
    xy = np.asarray(xy, np.float32)
    n = len(xy)
    return ImageKeypoints(xy[:, 0], xy[:, 1], np.asarray(size, np.float32), np.asarray(angle, np.float32),
                          np.arange(n, dtype=np.float32), np.full(n, 5, np.int32), np.arange(n, dtype=np.int32) + 10,
                          np.arange(n, dtype=np.int32))


def test_similarity_by_hand():
    # x' = 2 R(90 deg) x + (300, 10): with y down, R(90) maps direction (1, 0) to (0, 1), i.e. angle +90
    H = np.array([[0.0, -2.0, 300.0], [2.0, 0.0, 10.0], [0.0, 0.0, 1.0]])
    k = kps([[50, 60], [100, 20]], [4.0, 10.0], [0.0, 300.0])
    out = project_keypoints(k, H, 1000, 1000, border_px=0)
    np.testing.assert_allclose(out.x, [300 - 120, 300 - 40])
    np.testing.assert_allclose(out.y, [10 + 100, 10 + 200])
    np.testing.assert_allclose(out.size, [8.0, 20.0])
    np.testing.assert_allclose(out.angle, [90.0, 30.0], atol=1e-4)
    assert np.array_equal(out.response, k.response) and np.array_equal(out.class_id, k.class_id)
    assert np.array_equal(out.octave, k.octave) and np.array_equal(out.source_index, [0, 1])


def test_jacobian_equals_finite_differences_of_a_perspective_map():
    H = np.array([[0.9, 0.1, 20.0], [-0.05, 1.1, 5.0], [2e-4, -1e-4, 1.0]])
    xy = np.array([[100.0, 200.0], [400.0, 50.0]])
    p, J, front = homography_jacobian(H, xy)
    assert front.all()
    eps = 1e-4
    for i in range(2):
        for c in range(2):
            d = np.zeros(2)
            d[c] = eps
            num = (homography_jacobian(H, xy[i] + d)[0] - homography_jacobian(H, xy[i] - d)[0])[0] / (2 * eps)
            np.testing.assert_allclose(J[i, :, c], num, rtol=1e-6)


def test_undefined_angle_stays_undefined_and_border_uses_the_target_size():
    H = np.array([[1.0, 0, 200.0], [0, 1.0, 0], [0, 0, 1.0]])  # shift right by 200
    k = kps([[10, 50], [90, 50], [150, 50]], [5, 5, 5], [-1, -1, 45])
    out = project_keypoints(k, H, 400, 300, border_px=40)  # x' = 210, 290, 350; keep 40 <= x' < 360
    np.testing.assert_array_equal(out.x, [210, 290, 350])
    np.testing.assert_array_equal(out.angle, [-1, -1, 45])
    narrow = project_keypoints(k, H, 300, 300, border_px=40)  # keep x' < 260
    np.testing.assert_array_equal(narrow.source_index, [0])


def test_points_behind_the_camera_are_dropped():
    H = np.array([[1.0, 0, 0], [0, 1.0, 0], [-0.01, 0, 1.0]])  # w = 1 - 0.01 x: x > 100 is behind
    out = project_keypoints(kps([[50, 50], [150, 50]], [4, 4], [0, 0]), H, 10_000, 10_000, border_px=0)
    np.testing.assert_array_equal(out.source_index, [0])


def test_projected_scene_maps_image_1_through_each_homography(pristine, tmp_path):
    spec = {"detector": "sift", "mode": "projected", "border_px": 40, "max_keypoints": 300,
            "params": {"n_features": 0, "n_octave_layers": 3, "contrast_threshold": 0.04, "edge_threshold": 10, "sigma": 1.6}}
    out = tmp_path / "p.parquet"
    detect_scene(pristine, "proj", spec, out)
    per_image, meta = load_keypoints(out)
    files = scene_files(pristine)
    assert len(per_image[1]) == 300
    for k in range(2, 7):
        H = read_homography(files.homographies[k])
        w, h = image_size(files.images[k - 1])
        src = per_image[1].take(per_image[k].source_index)
        p, J, _ = homography_jacobian(H, src.xy)
        np.testing.assert_allclose(per_image[k].xy, p, atol=1e-3)
        np.testing.assert_allclose(per_image[k].size, src.size * np.sqrt(np.abs(np.linalg.det(J))), rtol=1e-5)
        assert per_image[k].x.min() >= 40 and per_image[k].x.max() < w - 40 and per_image[k].y.max() < h - 40
        assert 0 < len(per_image[k]) <= 300
    assert meta["params"]["mode"] == "projected"


@pytest.mark.bad_input
def test_projected_precomputed_is_refused():
    cfg = {"keypoint_sets": {"n": {"detector": "precomputed", "mode": "projected", "params": {"method": "m"}}},
           "descriptors": {"d": {"family": "precomputed", "keypoint_sets": ["n"]}}}
    with pytest.raises(ConfigError, match=r"keypoint_sets\.n\.mode"):
        validate_config(cfg, SCHEMA)


@pytest.mark.bad_input
def test_mode_on_a_derived_set_names_the_key():
    cfg = {"keypoint_sets": {"s": {"detector": "sift"}, "a": {"source": "s", "mode": "projected"}},
           "descriptors": {"d": {"family": "sift"}}}
    with pytest.raises(ConfigError, match=r"keypoint_sets\.a\.mode"):
        validate_config(cfg, SCHEMA)
