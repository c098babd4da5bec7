"""descbench.descriptors.rgbsift: SIFT per colour channel, blocks against OpenCV's SIFT on each
channel image, the grey-file error and the convention check."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import rgbsift as R
from descbench.errors import ConfigError, DataError
from descbench.keypoints.detectors import keypoints_from_cv
from descbench.keypoints.sift import sift_octave_from_size


@pytest.fixture(scope="module")
def image_kps(pristine: Path):
    image = pristine / "1.ppm"
    cv_kps = cv2.SIFT_create(nfeatures=30).detect(read_image(image), None)
    return image, keypoints_from_cv(cv_kps), cv_kps


def l2(d):
    d = d.astype(np.float64)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def test_descbench_blocks_are_unit_opencv_sift_of_r_g_b(image_kps):
    image, kps, cv_kps = image_kps
    params = check_descriptor_params("rgbsift", {}, "d")
    rows = R.rgbsift_descriptors(image, kps, params, {"detector": "sift"})
    assert rows.shape == (len(kps), 384) and rows.dtype == np.float32
    bgr = cv2.imread(str(image), cv2.IMREAD_COLOR)
    sift = cv2.SIFT_create()
    for block, channel in enumerate((2, 1, 0)):  # R, G, B
        ref = sift.compute(np.ascontiguousarray(bgr[:, :, channel]), cv_kps)[1]
        np.testing.assert_allclose(rows[:, 128 * block:128 * (block + 1)], l2(ref), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(compute_descriptors("rgbsift", params, image, kps, {"detector": "sift"}, "d"), rows)


def test_root_is_applied_to_the_whole_row(image_kps):
    image, kps, _ = image_kps
    plain = R.rgbsift_descriptors(image, kps, check_descriptor_params("rgbsift", {}, "d"), {"detector": "sift"})
    rooted = R.rgbsift_descriptors(image, kps, check_descriptor_params("rgbsift", {"root": True}, "d"), {"detector": "sift"})
    p = plain.astype(np.float64)
    np.testing.assert_allclose(rooted, np.sqrt(p / p.sum(axis=1, keepdims=True)), rtol=1e-6, atol=1e-7)


def test_octaves_are_the_sets_own_on_sift_sets_else_from_size(image_kps):
    _, kps, _ = image_kps
    np.testing.assert_array_equal(R.keypoint_octaves(kps, {"detector": "sift"}, (303, 384)), kps.octave)
    np.testing.assert_array_equal(R.keypoint_octaves(kps, {"detector": "orb"}, (303, 384)), sift_octave_from_size(kps.size, (303, 384)))


@pytest.mark.bad_input
def test_grey_file_and_unknown_convention_are_errors(image_kps, tmp_path):
    image, kps, _ = image_kps
    grey = tmp_path / "grey.png"
    cv2.imwrite(str(grey), read_image(image))
    with pytest.raises(DataError, match=rf"^image {grey} is greyscale \(1 channel\) but descriptor family 'rgbsift' needs a colour image"):
        R.read_colour(grey, "rgbsift")
    assert R.read_colour(image, "rgbsift").shape[2] == 3
    with pytest.raises(ConfigError, match=r"^descriptor family 'rgbsift': convention must be one of descbench, workbench, got 'x'$"):
        R.check_convention({"convention": "x"}, "rgbsift")
    assert R.rgbsift_descriptors(image, kps.take(np.arange(0)), {"convention": "descbench"}, {}).shape == (0, 384)


@pytest.mark.bad_input
def test_channels_is_checked_against_its_values(image_kps):
    with pytest.raises(ConfigError, match=r"descriptors\.x\.params\.channels: 'mean' is not one of 'concat', 'average'"):
        check_descriptor_params("rgbsift", {"channels": "mean"}, "descriptors.x.params")
    image, kps, _ = image_kps
    params = check_descriptor_params("rgbsift", {"channels": "average"}, "d")
    assert params == {"convention": "descbench", "root": False, "channels": "average"}
    rows = compute_descriptors("rgbsift", params, image, kps, {"detector": "sift"}, "d")
    assert rows.shape == (len(kps), 128) and np.allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-6)
