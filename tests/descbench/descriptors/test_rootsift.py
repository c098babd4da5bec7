"""descbench.descriptors.rootsift: RootSIFT = sqrt(d / ||d||_1) of the ``sift`` family's rows."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import compute_descriptors
from descbench.descriptors.rootsift import SIFT_PARAMS, root_normalise, rootsift_descriptors
from descbench.keypoints.detectors import keypoints_from_cv


@pytest.fixture(scope="module")
def image_kps(pristine: Path):
    image = pristine / "1.ppm"
    cv_kps = cv2.SIFT_create(nfeatures=40).detect(read_image(image), None)
    return image, keypoints_from_cv(cv_kps), cv_kps


def test_root_normalise_by_hand():
    d = np.array([[1.0, 3.0, 0.0, 12.0], [0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]], dtype=np.float32)
    got = root_normalise(d)
    np.testing.assert_allclose(got, [[0.25, np.sqrt(3) / 4, 0.0, np.sqrt(0.75)], [0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]], rtol=1e-6)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got[[0, 2]], axis=1), 1.0, rtol=1e-6)  # unit L2 (the Hellinger identity)


def test_rows_are_rooted_opencv_sift(image_kps):
    image, kps, cv_kps = image_kps
    rows = rootsift_descriptors(image, kps, {}, {"detector": "sift"})
    assert rows.shape == (len(kps), 128) and rows.dtype == np.float32 and SIFT_PARAMS["convention"] == "opencv"
    ref = cv2.SIFT_create().compute(read_image(image), cv_kps)[1].astype(np.float64)
    np.testing.assert_allclose(rows, np.sqrt(ref / ref.sum(axis=1, keepdims=True)), rtol=1e-6, atol=1e-7)
    # Hellinger kernel: the dot product of two rooted rows is the Bhattacharyya coefficient of the L1-normalised rows
    p = ref / ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(rows[0].astype(np.float64) @ rows[1], np.sqrt(p[0] * p[1]).sum(), rtol=1e-5)
    np.testing.assert_array_equal(compute_descriptors("rootsift", {}, image, kps, {"detector": "sift"}, "d"), rows)
