"""Patch sampling (descbench.descriptors.patch_sampling): the workbench's patch geometry and
normalisation, checked against values worked out by hand.

The image is a linear ramp ``I(x, y) = 2 x + 3 y + 10``: bilinear interpolation reproduces a
linear function exactly, so a patch sampled at integer or half-integer positions has known
integer values, and every expected patch below is the ramp evaluated where the geometry says.
"""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest

from descbench.descriptors import patch_sampling as S
from descbench.keypoints import ImageKeypoints

W, H = 60, 40
YY, XX = np.mgrid[0:H, 0:W]
RAMP = (2 * XX + 3 * YY + 10).astype(np.uint8)


def ramp(x, y):
    """The ramp at (x, y), replicated beyond the border (BORDER_REPLICATE)."""
    return 2 * np.clip(x, 0, W - 1) + 3 * np.clip(y, 0, H - 1) + 10


def kps(*rows) -> ImageKeypoints:
    """Keypoints from (x, y, size, angle) tuples."""
    a = np.array(rows, dtype=np.float32).reshape(-1, 4)
    n = len(a)
    return ImageKeypoints(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.zeros(n, np.float32), np.zeros(n, np.int32),
                          np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


def conv(n=8, mult=1.0, rotate=True, normalisation="none", mean=None, std=None):
    return S.dnn_convention(n, mult, rotate, normalisation, mean, std)


U = np.arange(8)[None, :]  # patch column index (broadcast over rows)
V = np.arange(8)[:, None]  # patch row index


# ----------------------------------------------------------------------------- the affine matrix


def test_affine_matrix_by_hand():
    # n = 8, size 16, multiplier 1: S = 16, scale 0.5; the keypoint (20, 15) goes to (4, 4)
    m = S.patch_affine(20, 15, 16, 0, conv())
    assert m.dtype == np.float64 and m.shape == (2, 3)
    assert np.array_equal(m, [[0.5, 0, 0.5 * 20 + (4 - 20)], [0, 0.5, 0.5 * 15 + (4 - 15)]])
    assert np.array_equal(m @ [20, 15, 1], [4, 4])
    # angle 90, upright: getRotationMatrix2D's angle is -90, alpha = 0, beta = -0.5
    m90 = S.patch_affine(20, 15, 16, 90, conv())
    assert np.allclose(m90, [[0, -0.5, 20 + 0.5 * 15 + (4 - 20)], [0.5, 0, -0.5 * 20 + 15 + (4 - 15)]], atol=1e-12)
    # exactly OpenCV's matrix plus the shift, for an arbitrary keypoint
    x, y, size, angle = 33.7, 12.25, 11.3, 37.5
    want = cv2.getRotationMatrix2D((x, y), -float(np.float32(angle)), 8 / float(np.float32(11.3)))
    want[:, 2] += [4 - float(np.float32(x)), 4 - float(np.float32(y))]
    assert np.array_equal(S.patch_affine(x, y, size, angle, conv()), want)


def test_unset_angle_and_not_upright_mean_no_rotation():
    identity = S.patch_affine(20, 15, 8, 0, conv())
    assert np.array_equal(S.patch_affine(20, 15, 8, -1, conv()), identity)
    assert np.array_equal(S.patch_affine(20, 15, 8, 90, conv(rotate=False)), identity)
    assert not np.allclose(S.patch_affine(20, 15, 8, 90, conv()), identity)


def test_side_and_size_clamps():
    assert S.patch_side(16, conv(mult=2.0)) == 32.0
    # the DNN wrapper: size clamped at 1 px, then the side at 1 px
    assert S.patch_side(0.25, S.DNN) == 1.0
    assert S.patch_side(1.5, conv(mult=0.5)) == 1.0
    assert S.patch_side(3.0, conv(mult=0.5)) == 1.5
    # the LibTorch wrapper: side = size (multiplier 1 whatever its factory passes), size clamped at 1e-3, no side clamp
    assert S.LIBTORCH.support_multiplier == 1.0 and S.LIBTORCH.min_side_px == 0.0
    assert S.patch_side(0.25, S.LIBTORCH) == 0.25
    assert S.patch_side(1e-5, S.LIBTORCH) == float(np.float32(1e-3))
    assert S.patch_side(8, S.libtorch_convention(32, True, False)) == 8.0


# ----------------------------------------------------------------------------- patches on the ramp


def test_position_on_the_ramp():
    p = S.warp_patches(RAMP, kps((20, 15, 8, 0), (20.5, 15, 8, 0)), conv())
    assert p.dtype == np.uint8 and p.shape == (2, 8, 8)
    # scale 1: patch pixel (u, v) is image pixel (x + u - 4, y + v - 4)
    assert np.array_equal(p[0], ramp(20 + U - 4, 15 + V - 4))
    # half a pixel right: the mean of two neighbours (an integer on this ramp of slope 2)
    assert np.array_equal(p[1], ramp(20.5 + U - 4, 15 + V - 4))


def test_scale_is_input_size_over_side():
    want = ramp(20 + 2 * (U - 4), 15 + 2 * (V - 4))  # side 16 on 8 px: every other image pixel
    assert np.array_equal(S.warp_patches(RAMP, kps((20, 15, 16, 0)), conv())[0], want)
    assert np.array_equal(S.warp_patches(RAMP, kps((20, 15, 8, 0)), conv(mult=2.0))[0], want)
    # the LibTorch wrapper's scale n / size: side 8 on 32 px, 4 patch px per image px
    lt = S.warp_patches(RAMP, kps((20, 15, 8, 0)), S.LIBTORCH)[0]
    assert lt.shape == (32, 32)
    assert lt[16, 16] == ramp(20, 15) and lt[16, 20] == ramp(21, 15) and lt[20, 16] == ramp(20, 16)


def test_rotation_by_90_degrees_maps_columns_to_rows():
    # angle 90: a step right in the patch is a step up in the image, a step down a step right
    p = S.warp_patches(RAMP, kps((20, 15, 8, 90), (20, 15, 8, 180)), conv())
    assert np.array_equal(p[0], ramp(20 + (V - 4), 15 - (U - 4)))
    assert np.array_equal(p[1], ramp(20 - (U - 4), 15 - (V - 4)))
    upright = S.warp_patches(RAMP, kps((20, 15, 8, 0)), conv())[0]
    # the unrotated patch turned a quarter clockwise (rows become columns), shifted one column
    # since the keypoint sits on pixel n/2 = 4, not on the grid centre 3.5
    assert np.array_equal(p[0][:, 1:], np.rot90(upright, -1)[:, :7])


def test_border_replicate_near_the_image_edge():
    p = S.warp_patches(RAMP, kps((1, 2, 8, 0), (W - 2, H - 1, 8, 0)), conv())
    assert np.array_equal(p[0], ramp(1 + U - 4, 2 + V - 4))
    assert np.array_equal(p[1], ramp(W - 2 + U - 4, H - 1 + V - 4))


def test_size_clamp_in_the_warp():
    tiny, one = S.warp_patches(RAMP, kps((20, 15, 0.25, 0), (20, 15, 1, 0)), conv())
    assert np.array_equal(tiny, one)  # DNN: S = max(1, max(0.25, 1)) = 1
    lt = S.warp_patches(RAMP, kps((20, 15, 0.25, 0), (20, 15, 1, 0)), S.LIBTORCH)
    assert not np.array_equal(lt[0], lt[1])


def test_warp_is_on_uint8_so_values_are_rounded_before_the_division():
    slope1 = np.tile(np.arange(W, dtype=np.uint8), (H, 1))
    u8 = S.warp_patches(slope1, kps((20.5, 15, 8, 0)), conv())[0]
    assert set(np.unique(u8 - np.arange(8)[None, :])) <= {16, 17}  # x + 0.5 rounded to an integer
    p = S.sample_patches(slope1, kps((20.5, 15, 8, 0)), conv())[0]
    assert p.dtype == np.float32
    assert np.array_equal(p, u8.astype(np.float32) * np.float32(1 / 255))


# ----------------------------------------------------------------------------- normalisation


@pytest.fixture(scope="module")
def random_patches():
    rng = np.random.default_rng(5)
    out = rng.integers(0, 256, (4, 8, 8), dtype=np.uint8)
    out[3] = 77  # uniform: sigma 0
    return out


def test_per_patch_standardisation_dnn(random_patches):
    got = S.normalise_patches(random_patches, conv(normalisation="per_patch"))
    p = random_patches.astype(np.float64) / 255
    mu, sd = p.mean(axis=(1, 2), keepdims=True), p.std(axis=(1, 2), keepdims=True)  # population sigma
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[:3], ((p - mu) / np.maximum(sd, 1e-6))[:3], rtol=2e-6, atol=2e-6)
    # flat: OpenCV's convertTo leaves the float32 roundings of p * float(1e6) and of its float offset: constant, small
    assert np.unique(got[3]).size == 1 and abs(float(got[3, 0, 0])) <= 1 / 16
    np.testing.assert_allclose(got[:3].std(axis=(1, 2)), 1, rtol=1e-5)


def test_eps_rules(random_patches):
    p = random_patches[:3].astype(np.float64) / 255
    mu, sd = p.mean(axis=(1, 2), keepdims=True), p.std(axis=(1, 2), keepdims=True)
    assert (sd < 1).all()
    big = replace(conv(normalisation="per_patch"), std_eps=1.0)  # max(sigma, 1) = 1: only the mean is removed
    np.testing.assert_allclose(S.normalise_patches(random_patches[:3], big), p - mu, rtol=1e-6, atol=1e-6)
    add = replace(big, eps_mode="add")  # sigma + 1
    np.testing.assert_allclose(S.normalise_patches(random_patches[:3], add), (p - mu) / (sd + 1), rtol=1e-6, atol=1e-6)
    lt = S.normalise_patches(random_patches, S.LIBTORCH)  # sigma + 1e-8
    np.testing.assert_allclose(lt[:3], (p - mu) / (sd + 1e-8), rtol=2e-6, atol=2e-6)
    assert np.unique(lt[3]).size == 1 and abs(float(lt[3, 0, 0])) <= 1  # flat: the rounding of p * 1e8 (ulp 2)


def test_mean_std_and_none(random_patches):
    p = random_patches.astype(np.float64) / 255
    imagenet = S.normalise_patches(random_patches, S.libtorch_convention(8, True, False))
    np.testing.assert_allclose(imagenet, (p - 0.485) / 0.229, rtol=1e-6, atol=1e-6)
    custom = S.normalise_patches(random_patches, conv(normalisation="mean_std", mean=0.5, std=0.25))
    np.testing.assert_allclose(custom, (p - 0.5) / 0.25, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(S.normalise_patches(random_patches, conv()), p, rtol=1e-7)


def test_workbench_defaults():
    assert (S.DNN.input_size, S.DNN.support_multiplier, S.DNN.rotate_to_upright, S.DNN.normalisation) == (32, 1.0, True, "none")
    assert (S.DNN.min_size_px, S.DNN.min_side_px, S.DNN.std_eps, S.DNN.eps_mode) == (1.0, 1.0, 1e-6, "max")
    assert (S.LIBTORCH.input_size, S.LIBTORCH.normalisation, S.LIBTORCH.std_eps, S.LIBTORCH.eps_mode) == (32, "per_patch", 1e-8, "add")


# ----------------------------------------------------------------------------- HPatches resize


def test_resize_hpatches_patches_is_cv2_resize():
    rng = np.random.default_rng(2)
    patches = rng.integers(0, 256, (3, 65, 65), dtype=np.uint8)
    got = S.resize_hpatches_patches(patches, 32)
    assert got.dtype == np.uint8 and got.shape == (3, 32, 32)
    for i in range(3):
        assert np.array_equal(got[i], cv2.resize(patches[i], (32, 32)))
        assert np.array_equal(got[i], cv2.resize(patches[i], (32, 32), interpolation=cv2.INTER_LINEAR))
    assert not np.array_equal(got[0], cv2.resize(patches[0], (32, 32), interpolation=cv2.INTER_AREA))
