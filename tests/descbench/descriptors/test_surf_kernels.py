"""descbench.descriptors.surf_kernels: the numba SURF vectors (Bay et al. 2008, section 4.1) by
their invariances: Haar responses ignore a brightness offset, the unit norm a contrast gain; the
upright descriptor of a mirrored image negates the du sums in mirrored sub-regions. (The
descriptor's rotation and scale behaviour: tests/descbench/keypoints/test_surf.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from descbench.descriptors.surf_kernels import DESC_SIGMA, surf_describe
from descbench.errors import DataError


@pytest.fixture(scope="module")
def image():
    yy, xx = np.mgrid[0:160, 0:200].astype(np.float64)
    rng = np.random.default_rng(1)
    img = 100 + 40 * np.sin(xx / 7.0) * np.cos(yy / 11.0) + 20 * np.sin((xx + 2 * yy) / 5.0) + rng.normal(0, 3, xx.shape)
    return np.clip(img, 0, 200).astype(np.float32)


X, Y, SIZE = [60.0, 100.0, 140.0], [60.0, 80.0, 100.0], [15.0, 20.0, 12.0]


def test_shape_dtype_norm_and_determinism(image):
    for extended, dim in ((False, 64), (True, 128)):
        d = surf_describe(image, X, Y, SIZE, extended=extended)
        assert d.shape == (3, dim) and d.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(surf_describe(image, X, Y, SIZE, extended=extended), d)
    assert DESC_SIGMA == 3.3


def test_extended_splits_the_sums_of_the_64d_vector(image):
    d64 = surf_describe(image, X, Y, SIZE, upright=True).reshape(3, 16, 4)
    d128 = surf_describe(image, X, Y, SIZE, extended=True, upright=True).reshape(3, 16, 8)
    # before normalisation the 64-D sums are the sums of their two halves: compare directions
    # extended per sub-region: du, |du| for dv < 0 and dv >= 0, then dv, |dv| for du < 0 and du >= 0
    merged = np.stack([d128[..., 0] + d128[..., 2], d128[..., 4] + d128[..., 6], d128[..., 1] + d128[..., 3],
                       d128[..., 5] + d128[..., 7]], axis=-1).reshape(3, 64)
    merged /= np.linalg.norm(merged, axis=1, keepdims=True)
    np.testing.assert_allclose(merged, d64.reshape(3, 64), atol=1e-5)


def test_brightness_offset_and_contrast_gain_change_nothing(image):
    d = surf_describe(image, X, Y, SIZE)
    np.testing.assert_allclose(surf_describe(image + 30.0, X, Y, SIZE), d, atol=1e-5)
    np.testing.assert_allclose(surf_describe(image * 0.5, X, Y, SIZE), d, atol=1e-5)


def test_upright_mirror_negates_du_in_mirrored_subregions(image):
    w = image.shape[1]
    d = surf_describe(image, X, Y, SIZE, upright=True).reshape(3, 4, 4, 4)  # [kp, v row, u column, (du, dv, |du|, |dv|)]
    m = surf_describe(image[:, ::-1].copy(), [w - 1 - x for x in X], Y, SIZE, upright=True).reshape(3, 4, 4, 4)
    expect = d[:, :, ::-1, :] * np.array([-1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(m, expect, atol=1e-5)


@pytest.mark.bad_input
def test_bad_keypoints_are_data_errors_naming_the_image(image):
    with pytest.raises(DataError, match=r"^img\.png: 1 keypoints have a non-finite position or a size <= 0 \(first at row 1"):
        surf_describe(image, [10.0, 20.0], [10.0, 20.0], [5.0, 0.0], what="img.png")
    with pytest.raises(DataError, match=r"^img\.png: keypoint arrays differ in length"):
        surf_describe(image, [10.0], [10.0, 2.0], [5.0], what="img.png")
    assert surf_describe(image, [], [], []).shape == (0, 64)
