"""descbench.descriptors.cv_compute: OpenCV's ``compute`` with one row per input keypoint, in
input order, against plain OpenCV called one keypoint at a time."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.descriptors.cv_compute import (
    FIRST_MARGIN,
    OPENCV_DEFAULT_SCALE,
    VGG_BOOST_SCALE,
    choice,
    compute_rows,
    cv_keypoints,
    scale_factor,
)
from descbench.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def gray() -> np.ndarray:
    rng = np.random.default_rng(0)
    img = cv2.GaussianBlur(rng.integers(0, 256, (160, 200), dtype=np.uint8), (5, 5), 1.5)
    return np.ascontiguousarray(img)


def test_cv_keypoints_carry_every_field():
    kps = cv_keypoints([1.5, 2], [3, 4.25], [7, 8], [-1, 90], [0, 65793], [-1, 5], np.array([0.5, 2.0], dtype=np.float32))
    assert [(k.pt, k.size, k.angle, k.response, k.octave, k.class_id) for k in kps] == \
        [((1.5, 3.0), 7.0, -1.0, 0.5, 0, -1), ((2.0, 4.25), 8.0, 90.0, 2.0, 65793, 5)]
    assert cv_keypoints([1], [1], [2], [0], [0], [0])[0].response == 0.0


def test_interior_rows_are_plain_opencv_and_border_rows_are_rescued_in_order(gray):
    orb = cv2.ORB_create()
    xs, ys = [100.0, 2.0, 60.0, 150.0], [80.0, 3.0, 50.0, 120.0]  # row 1 is inside ORB's border
    kps = cv_keypoints(xs, ys, [31.0] * 4, [10.0, 0.0, 200.0, 45.0], [0] * 4, [-1] * 4)
    rows = compute_rows(orb, gray, kps, family="orb", image_path=Path("img.png"))
    assert rows.shape == (4, 32) and rows.dtype == np.uint8
    for i in (0, 2, 3):
        _, d = orb.compute(gray, [kps[i]])
        np.testing.assert_array_equal(rows[i], d[0])
    assert orb.compute(gray, [kps[1]])[1] is None  # plain OpenCV drops it ...
    padded = cv2.copyMakeBorder(gray, FIRST_MARGIN, FIRST_MARGIN, FIRST_MARGIN, FIRST_MARGIN, cv2.BORDER_REFLECT_101)
    k = cv2.KeyPoint(2.0 + FIRST_MARGIN, 3.0 + FIRST_MARGIN, 31.0, 0.0)
    np.testing.assert_array_equal(rows[1], orb.compute(padded, [k])[1][0])  # ... the reflect-padded image keeps it
    np.testing.assert_array_equal(compute_rows(orb, gray, kps, family="orb", image_path=Path("img.png")), rows)


def test_float_extractor_rows_and_no_keypoints(gray):
    sift = cv2.SIFT_create()
    kps = cv_keypoints([50.0, 120.0], [40.0, 90.0], [12.0, 20.0], [30.0, 300.0], [0, 0], [-1, -1])
    rows = compute_rows(sift, gray, kps, family="sift", image_path=Path("i"))
    assert rows.dtype == np.float32 and rows.shape == (2, 128)
    np.testing.assert_array_equal(rows, sift.compute(gray, kps)[1])
    empty = compute_rows(sift, gray, [], family="sift", image_path=Path("i"))
    assert empty.shape == (0, 128) and empty.dtype == np.float32


@pytest.mark.bad_input
def test_non_finite_and_hopeless_keypoints_are_data_errors_naming_the_image(gray):
    orb = cv2.ORB_create()
    nan = cv_keypoints([50.0, np.nan], [50.0, 10.0], [31.0, 31.0], [0.0, 0.0], [0, 0], [-1, -1])
    with pytest.raises(DataError, match=r"^image img\.png: 1 keypoints have a non-finite .* row 1\); descriptor 'orb'"):
        compute_rows(orb, gray, nan, family="orb", image_path=Path("img.png"))
    far = cv_keypoints([50.0, 1e6], [50.0, 1e6], [31.0, 31.0], [0.0, 0.0], [0, 0], [-1, -1])
    with pytest.raises(DataError, match="img.png"):
        compute_rows(orb, gray, far, family="orb", image_path=Path("img.png"))


@pytest.mark.bad_input
def test_scale_factor_and_choice():
    assert scale_factor({"scale_factor": None}, {"detector": "orb"}, VGG_BOOST_SCALE) == 0.75
    assert scale_factor({}, {"detector": "gftt"}, VGG_BOOST_SCALE) == OPENCV_DEFAULT_SCALE
    assert scale_factor({"scale_factor": 2}, {"detector": "orb"}, VGG_BOOST_SCALE) == 2.0
    assert choice("daisy", {"norm": "full"}, "norm", {"none": 0, "full": 2}) == 2
    for bad in ("fulll", ["full"]):
        with pytest.raises(ConfigError, match=r"^descriptor family 'daisy': params.norm = .* is not one of 'none', 'full'$"):
            choice("daisy", {"norm": bad}, "norm", {"none": 0, "full": 2})
