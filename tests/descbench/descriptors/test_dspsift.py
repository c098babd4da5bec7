"""descbench.descriptors.dspsift: domain-size pooled SIFT, its scales and pyramid layout, and
dong_soatto's rows as the mean of single-scale SIFT histograms (against the kernel called directly)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import dspsift as D
from descbench.keypoints.detectors import keypoints_from_cv


@pytest.fixture(scope="module")
def image_kps(pristine: Path):
    image = pristine / "1.ppm"
    return image, keypoints_from_cv(cv2.SIFT_create(nfeatures=25).detect(read_image(image), None))


def test_scales_null_is_the_conventions_default_recorded_as_used():
    assert D.effective_scales({"convention": "workbench", "scales": None}) == [1.0, 1.5, 2.0]
    ds = D.effective_scales({"convention": "dong_soatto"})
    assert len(ds) == 10 and ds[0] == pytest.approx(1 / 6) and ds[-1] == pytest.approx(3.0)
    assert D.check_params({"convention": "dong_soatto", "scales": [1, 2]}, "d") == {"convention": "dong_soatto", "scales": [1.0, 2.0]}


def test_workbench_layout_adds_an_octave_for_scales_below_one():
    octave = np.array([255, 0, 2 | (1 << 8)])  # octaves -1, 0, 2
    assert D.workbench_dsp_layout(octave, [1.0, 1.5]) == (-1, 4)
    assert D.workbench_dsp_layout(octave, [0.5, 1.0]) == (-1, 5)
    assert D.workbench_dsp_layout(np.array([1, 1]), [1.0]) == (0, 2)


def test_rows_shape_norm_and_determinism(image_kps):
    image, kps = image_kps
    for conv in ("dong_soatto", "workbench"):
        params = check_descriptor_params("dspsift", {"convention": conv}, "d")
        rows = compute_descriptors("dspsift", params, image, kps, {"detector": "sift"}, "d")
        assert rows.shape == (len(kps), 128) and rows.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(D.dspsift_descriptors(image, kps, params, {"detector": "sift"}), rows)


def test_one_scale_dong_soatto_is_l2_normalised_sift_of_the_kernel(image_kps):
    image, kps = image_kps
    gray = read_image(image)
    one = D.dong_soatto_dsp(gray, kps, [1.0])
    two = D.dong_soatto_dsp(gray, kps, [1.0, 2.0])
    assert one.shape == two.shape == (len(kps), 128)
    assert not np.allclose(one, two)  # pooling over a second scale changes the rows
    both = D.dong_soatto_dsp(gray, kps, [2.0, 1.0])
    np.testing.assert_allclose(both, two, rtol=1e-5, atol=1e-6)  # a mean: the order of the scales does not matter


def test_workbench_v1_resamples_the_scales_between_their_extremes():
    """DSPSIFTWrapper keeps count, min and max; DSPSIFT resamples linearly in double after the
    float32 rounding of DescriptorParams::scales; one scale is its own (the maximum)."""
    assert D.workbench_v1_factors([1.0, 1.5, 2.0]) == [1.0, 1.5, 2.0]
    assert D.workbench_v1_factors([2.0, 1.0, 1.2]) == [1.0, 1.5, 2.0]
    lo, hi = float(np.float32(0.85)), float(np.float32(1.3))
    assert D.workbench_v1_factors([0.85, 1.0, 1.3]) == [lo, lo + 1 * (hi - lo) / 2, hi]
    assert D.workbench_v1_factors([1.5]) == [1.5]
    assert D.check_params({"convention": "workbench_v1", "scales": [1, 1.2, 3]}, "d")["scales"] == [1.0, 2.0, 3.0]
    assert D.check_params({"convention": "workbench_v1", "scales": None}, "d")["scales"] == [1.0, 1.5, 2.0]


def test_workbench_v1_one_scale_is_vsift_at_the_keypoints_own_level(image_kps):
    from descbench.descriptors.rgbsift import workbench_sift_on_channel

    image, kps = image_kps
    grey = cv2.cvtColor(read_image(image, color=True), cv2.COLOR_BGR2GRAY)
    np.testing.assert_array_equal(D.workbench_v1_dsp(grey, kps, kps.octave, [1.0]),
                                  workbench_sift_on_channel(grey, kps, kps.octave))
    rows = compute_descriptors("dspsift", check_descriptor_params("dspsift", {"convention": "workbench_v1"}, "d"),
                               image, kps, {"detector": "sift"}, "d")
    assert rows.shape == (len(kps), 128) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)


@pytest.mark.bad_input
def test_dsprgbsift_has_no_workbench_v1():
    from conftest import raises_naming
    from descbench.errors import ConfigError

    raises_naming(lambda: check_descriptor_params("dsprgbsift", {"convention": "workbench_v1"}, "d"),
                  "convention", "workbench_v1", exc=ConfigError)


@pytest.mark.bad_input
def test_workbench_v1_keypoint_below_the_pyramid_at_every_scale_is_an_error(image_kps):
    """The workbench divides 0 by 0 there (a NaN row)."""
    from conftest import raises_naming

    image, kps = image_kps
    grey = read_image(image)
    octave = np.zeros(len(kps), dtype=np.int32)  # first octave 0: a small keypoint at small scales falls below it
    small = kps.size.astype(np.float64) * 0.5 < 3.2
    assert small.any()
    raises_naming(lambda: D.workbench_v1_dsp(grey, kps, octave, [0.3, 0.5]), f"keypoint row {int(np.flatnonzero(small)[0])}",
                  "NaN", "largest is >= 1", "min_size")
