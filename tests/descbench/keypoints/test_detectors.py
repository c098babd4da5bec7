"""Detector registry (descbench.keypoints.detectors) and SIFT's octave field for other keypoints."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.config import validate_config
from descbench.datasets.layout import read_image
from descbench.errors import ConfigError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import DETECTORS, detect
from descbench.keypoints.sift import make_sift, sift_octave_from_size

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


def _cv(name):
    xf = getattr(cv2, "xfeatures2d", None)
    return getattr(xf, name) if xf is not None and hasattr(xf, name) else getattr(cv2, name)


# OpenCV's detectors built with OpenCV's own defaults, independently of descbench's mapping.
OPENCV_DEFAULT = {
    "sift": lambda: cv2.SIFT_create(),
    "orb": lambda: cv2.ORB_create(),
    "brisk": lambda: _cv("BRISK_create")(),
    "akaze": lambda: _cv("AKAZE_create")(),
    "kaze": lambda: _cv("KAZE_create")(),
    "gftt": lambda: cv2.GFTTDetector_create(),
    "fast": lambda: cv2.FastFeatureDetector_create(),
}


def default_params(detector: str) -> dict:
    cfg = validate_config({"keypoint_sets": {"k": {"detector": detector}}, "descriptors": {"d": {"family": "sift"}}}, SCHEMA)
    return cfg["keypoint_sets"]["k"]["params"]


def as_tuples(k: ImageKeypoints):
    return np.stack([k.x, k.y, k.size, k.angle, k.response, k.octave.astype(np.float32)], axis=1)


def test_registry_covers_the_schema_enum():
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text())
    enum = schema["properties"]["keypoint_sets"]["additionalProperties"]["properties"]["detector"]["enum"]
    assert sorted(enum) == sorted([*DETECTORS, "precomputed", "locked"])
    # SURF is descbench's own (OpenCV's is non-free; tests/descbench/keypoints/test_surf.py checks it)
    # and KeyNet is kornia's (tests/descbench/keypoints/test_keynet.py checks it against kornia), as are
    # the joint networks (descbench.keypoints.joint.NETS; tests/descbench/keypoints/test_joint*.py)
    from descbench.keypoints.joint import NETS

    assert set(OPENCV_DEFAULT) == set(DETECTORS) - {"surf", "keynet", *NETS}


@pytest.mark.parametrize("name", sorted(OPENCV_DEFAULT))
def test_schema_defaults_are_opencvs_defaults(name, pristine):
    gray = read_image(pristine / "1.ppm")
    ours = detect(name, gray, default_params(name))
    ref = OPENCV_DEFAULT[name]().detect(gray, None)
    assert len(ours) == len(ref) > 20, name
    np.testing.assert_array_equal(as_tuples(ours), np.array([[*k.pt, k.size, k.angle, k.response, k.octave] for k in ref], dtype=np.float32))
    np.testing.assert_array_equal(ours.source_index, np.arange(len(ref)))
    # deterministic
    np.testing.assert_array_equal(as_tuples(detect(name, gray, default_params(name))), as_tuples(ours))


@pytest.mark.parametrize(
    "name, key, value, kwargs",
    [
        ("orb", "n_features", 50, {"nfeatures": 50}),
        ("orb", "score_type", "fast", {"scoreType": cv2.ORB_FAST_SCORE}),
        ("brisk", "threshold", 60, {"thresh": 60}),
        ("akaze", "threshold", 0.01, {"threshold": 0.01}),
        ("kaze", "n_octaves", 2, {"nOctaves": 2}),
        ("gftt", "use_harris", True, {"useHarrisDetector": True}),
        ("gftt", "max_corners", 37, {"maxCorners": 37}),
        ("fast", "threshold", 40, {"threshold": 40}),
        ("fast", "nonmax_suppression", False, {"nonmaxSuppression": False}),
    ],
)
def test_a_parameter_reaches_opencv(name, key, value, kwargs, pristine):
    gray = read_image(pristine / "1.ppm")
    params = {**default_params(name), key: value}
    ours = detect(name, gray, params)
    factory = {"orb": cv2.ORB_create, "gftt": cv2.GFTTDetector_create, "fast": cv2.FastFeatureDetector_create}.get(name)
    factory = factory or _cv({"brisk": "BRISK_create", "akaze": "AKAZE_create", "kaze": "KAZE_create"}[name])
    ref = factory(**kwargs).detect(gray, None)
    default = detect(name, gray, default_params(name))
    assert len(ours) == len(ref)
    np.testing.assert_array_equal(ours.x, np.array([k.pt[0] for k in ref], dtype=np.float32))
    assert len(ours) != len(default) or not np.array_equal(as_tuples(ours), as_tuples(default)), "the parameter changed nothing"


def test_fast_and_gftt_find_the_corners_of_a_square():
    """Hand-worked: a bright 40 x 40 square on black has exactly four corners. (Slightly blurred:
    on a perfectly flat synthetic square FAST's scores tie and its non-maximum suppression, which
    keeps strict maxima only, removes every corner.)"""
    img = np.zeros((120, 120), np.uint8)
    img[40:80, 40:80] = 200
    img = cv2.GaussianBlur(img, (0, 0), 1.0)
    corners = np.array([[40, 40], [79, 40], [40, 79], [79, 79]], float)
    for name, params in (("fast", {**default_params("fast"), "threshold": 30}), ("gftt", {**default_params("gftt"), "min_distance": 10})):
        k = detect(name, img, params)
        xy = k.xy
        # every corner has a detection within 2 px, and every detection is within 2 px of a corner
        d = np.linalg.norm(xy[:, None, :] - corners[None, :, :], axis=2)
        assert (d.min(axis=0) <= 2).all(), (name, xy)
        assert (d.min(axis=1) <= 2).all(), (name, xy)


@pytest.mark.bad_input
def test_unknown_or_invalid_detector_params_name_the_key():
    base = {"descriptors": {"d": {"family": "sift"}}}
    with pytest.raises(ConfigError, match=r"keypoint_sets\.k\.params\.nfeatures.*n_features"):
        validate_config({**base, "keypoint_sets": {"k": {"detector": "orb", "params": {"nfeatures": 10}}}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"keypoint_sets\.k\.params\.type"):
        validate_config({**base, "keypoint_sets": {"k": {"detector": "fast", "params": {"type": "9_17"}}}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"keypoint_sets\.k\.detector"):
        validate_config({**base, "keypoint_sets": {"k": {"detector": "surfish"}}}, SCHEMA)


def _unpack(octave: np.ndarray):
    o = (octave & 255).astype(np.int64)
    o = np.where(o >= 128, o - 256, o)
    return o, ((octave >> 8) & 255).astype(np.int64)


def test_octave_from_size_matches_opencvs_own_sift_octaves(pristine):
    """OpenCV's detector is the independent reference: its keypoints' octave/layer give the blur
    level o + l/L; the size-derived field must give the same level (a keypoint's sub-layer offset
    can move it by at most one layer at a rounding boundary)."""
    gray = read_image(pristine / "1.ppm")
    kps = make_sift({}).detect(gray, None)
    size = np.array([k.size for k in kps])
    o_cv, l_cv = _unpack(np.array([k.octave for k in kps], dtype=np.int64))
    o, l = _unpack(sift_octave_from_size(size, gray.shape[:2]).astype(np.int64))
    level_cv, level = o_cv * 3 + l_cv, o * 3 + l
    assert np.abs(level - level_cv).max() <= 1
    assert np.mean(level == level_cv) >= 0.7
    # hand-worked values (sigma 1.6, 3 layers): size 3.2 -> t = 0 -> (0, 0); 6.4 -> (1, 0);
    # 3.2 * 2^(1/3) -> (0, 1); tiny -> clamped to (-1, 0); huge -> the last octave's layer 3
    o, l = _unpack(sift_octave_from_size(np.array([3.2, 6.4, 3.2 * 2 ** (1 / 3), 0.1, 1e6]), (600, 800)).astype(np.int64))
    assert o.tolist() == [0, 1, 0, -1, round(np.log2(600)) - 3]
    assert l.tolist() == [0, 0, 1, 0, 3]


def test_sift_descriptors_on_other_keypoints_use_the_size_derived_octave(pristine):
    """SIFT keypoints presented as another detector's (octave field 0, as a file or ORB would give):
    with the size-derived octave the descriptors stay close to SIFT's own; reading the foreign
    field as a SIFT octave (what OpenCV would do) is far off."""
    from descbench.descriptors.sift import sift_descriptors
    from descbench.keypoints.detectors import keypoints_from_cv

    img = pristine / "1.ppm"
    gray = read_image(img)
    raw = keypoints_from_cv(make_sift({}).detect(gray, None))
    big = raw.take(np.flatnonzero(raw.size >= 8)[:300])  # keypoints whose octave is not 0
    own = sift_descriptors(img, big, {}, {"detector": "sift", "params": default_params("sift")})
    foreign = ImageKeypoints(big.x, big.y, big.size, big.angle, big.response, np.zeros_like(big.octave), big.class_id, big.source_index)
    derived = sift_descriptors(img, foreign, {}, {"detector": "orb", "params": {}})
    _, naive = make_sift({}).compute(gray, [cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), 0)
                                            for x, y, s, a, r in zip(big.x, big.y, big.size, big.angle, big.response)])
    err_derived = np.linalg.norm(derived - own, axis=1) / 512
    err_naive = np.linalg.norm(naive - own, axis=1) / 512
    assert np.median(err_derived) < 0.1
    assert np.median(err_naive) > 2 * np.median(err_derived)


def test_keypoint_stage_runs_an_opencv_detector_and_records_its_params(pristine, tmp_path):
    from descbench.io import read_meta
    from descbench.jobs.common import load_keypoints
    from descbench.jobs.keypoints import detect_scene

    cfg = validate_config({"keypoint_sets": {"orb500": {"detector": "orb", "params": {"n_features": 300}}},
                           "descriptors": {"d": {"family": "sift"}}}, SCHEMA)
    spec = cfg["keypoint_sets"]["orb500"]
    out = tmp_path / "kp.parquet"
    detect_scene(pristine, "orb500", spec, out)
    per_image, meta = load_keypoints(out)
    for k, kps in per_image.items():
        w, h = meta["image_sizes"][str(k)]
        assert 0 < len(kps) <= 300
        assert ((kps.x >= 40) & (kps.x < w - 40) & (kps.y >= 40) & (kps.y < h - 40)).all()
    params = read_meta(out)["params"]
    assert params["detector"] == "orb" and params["params"]["n_features"] == 300 and params["params"]["score_type"] == "harris"
