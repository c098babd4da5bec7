"""cv_warp: OpenCV 4.6-4.10's fixed-point warpAffine against the uint8 patches recorded from C++
OpenCV 4.6 (``tests/data/dw/workbench_patches.npz``), against the test suite's independent numpy
port (``opencv46_warp_affine``, ``tests/data/dw/make_libtorch_fixtures.py``) on random matrices,
and against hand-worked values."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.descriptors import cv_warp as W
from conftest import raises_naming

DW = Path(__file__).resolve().parents[2] / "data" / "dw"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, DW / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PORT = load("make_libtorch_fixtures").opencv46_warp_affine
GEN = load("make_warp_fixtures")
# forward matrices: rotation, scale 0.3-5, a centre within 12 px of the image (patches cross the border),
# moved to (n/2, n/2) plus a fractional offset (make_warp_fixtures.py)
random_matrices = GEN.random_matrices


def test_constants_are_cv2s():
    assert (W.INTER_LINEAR, W.BORDER_REPLICATE) == (cv2.INTER_LINEAR, cv2.BORDER_REPLICATE)


@pytest.mark.parametrize("wrapper", ["libtorch", "dnn"])
def test_the_recorded_opencv46_patches_bit_for_bit(wrapper):
    """The 31 patches per wrapper that C++ OpenCV 4.6's warpAffine gave (border keypoints, a flat block,
    sizes 1e-3..40 px, angles), from the recorded matrices."""
    with np.load(DW / "workbench_patches.npz", allow_pickle=False) as z:
        img, ms, want = z["image"], z[f"m_{wrapper}"], z[f"u8_{wrapper}"]
    got = W.warp_affine_fixed_point(img, ms, (32, 32))
    assert got.dtype == np.uint8 and got.shape == want.shape
    assert np.array_equal(got, want)
    assert np.array_equal(W.warp_affine_fixed_point(img, ms[5], (32, 32)), want[5])  # one matrix: one patch


@pytest.mark.parametrize("case", ["noise", "tiny", "tie"])
def test_cpp_opencv46s_warps_of_random_matrices_bit_for_bit(case):
    """``opencv46_warp.npz`` (make_warp_fixtures.py: C++ OpenCV 4.6's warpAffine through dw_warp.cpp):
    200 16 x 16 patches of a noise image, 100 8 x 8 patches of a 5 x 7 image (mostly border) and the
    cvRound tie case."""
    with np.load(DW / "opencv46_warp.npz", allow_pickle=False) as z:
        img, ms, want = z[f"{case}__image"], z[f"{case}__m"], z[f"{case}__u8"]
    assert np.array_equal(W.warp_affine_fixed_point(img, ms, want.shape[1:][::-1]), want)


@pytest.mark.parametrize("shape,n", [((80, 100), 32), ((7, 5), 32), ((240, 320), 64), ((1, 1), 8)])
def test_equals_the_port_on_random_matrices(shape, n):
    rng = np.random.default_rng(shape[0] * 1000 + n)
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    ms = random_matrices(rng, 400, shape[1], shape[0], n)
    got = W.warp_affine_fixed_point(img, ms, (n, n))
    want = np.stack([PORT(img, m, n) for m in ms])
    assert np.array_equal(got, want), f"{(got != want).any(axis=(1, 2)).sum()} of {len(ms)} patches differ"


def test_differs_from_cv2s_float_warp():
    """OpenCV >= 4.11's float warp (pip cv2 5.0) gives other patches for the same matrices (a few grey levels)."""
    if tuple(int(v) for v in cv2.__version__.split(".")[:2]) < (4, 11):
        pytest.skip("cv2 < 4.11 has the fixed-point warp itself")  # descbench's pinned cv2 is 5.0
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (80, 100), dtype=np.uint8)
    ms = random_matrices(rng, 50, 100, 80, 32)
    ours = W.warp_affine_fixed_point(img, ms, (32, 32)).astype(int)
    theirs = np.stack([cv2.warpAffine(img, m, (32, 32), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
                       for m in ms]).astype(int)
    d = np.abs(ours - theirs)
    assert 0 < d.max() <= 8 and (d > 0).any(axis=(1, 2)).all()  # noise: steep steps, 1/32 px moves them by more


def test_hand_worked_values():
    """Identity: the image; a half-pixel shift right: ``(a + b + 1) >> 1`` of horizontal neighbours
    (weights 16384 each, + 2^14, >> 15); past the right edge the last column repeats (BORDER_REPLICATE);
    a non-square dsize is (w, h)."""
    img = np.arange(48, dtype=np.uint8).reshape(6, 8) * 5
    ident = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    assert np.array_equal(W.warp_affine_fixed_point(img, ident, (8, 6)), img)
    half = np.array([[1.0, 0, -0.5], [0, 1.0, 0]])  # dst x reads src x + 0.5
    got = W.warp_affine_fixed_point(img, half, (8, 6)).astype(int)
    a = img.astype(int)
    want = np.concatenate([(a[:, :-1] + a[:, 1:] + 1) >> 1, a[:, -1:]], axis=1)
    assert np.array_equal(got, want)
    assert W.warp_affine_fixed_point(img, ident, (3, 5)).shape == (5, 3)


def test_cvround_ties_go_to_even():
    """Forward x' = 2048 x - 29 (inverse exact: x = (x' + 29) / 2048): destination x reads 1/1024 px
    positions ``X0 = cvRound(14.5) = 14`` (+16) plus ``adelta = cvRound(0.5 x)``; on a 0 | 255 step
    at column 1 the 1/32 px fraction is 0, 0, 0, 1 -> values 0, 0, 0, 8 (``(1024 * 255 + 2^14) >> 15``).
    Rounding ties up instead would give 8 at x = 1. C++ OpenCV 4.6's warpAffine (Debian's
    libopencv-dev, a ten-line program) prints 0 0 0 8."""
    img = np.zeros((4, 8), np.uint8)
    img[:, 1:] = 255
    got = W.warp_affine_fixed_point(img, np.array([[2048.0, 0, -29], [0, 1, 0]]), (4, 2))
    assert got.tolist() == [[0, 0, 0, 8]] * 2


def test_inverse_is_warpaffines_float64_order():
    """The inverse map of step 1 (``M[1] *= -D`` etc.), and D = 0 for a singular matrix (every pixel reads
    the origin)."""
    m = np.array([[0.7, 0.3, 5.25], [-0.3, 0.7, -2.5]])
    d = 1.0 / (0.7 * 0.7 - 0.3 * -0.3)
    a00, a01, a10, a11 = 0.7 * d, 0.3 * -d, -0.3 * -d, 0.7 * d
    want = np.array([[a00, a01, -a00 * 5.25 - a01 * -2.5], [a10, a11, -a10 * 5.25 - a11 * -2.5]])
    assert np.array_equal(W.inverse_affine(m), want)
    img = np.arange(20, dtype=np.uint8).reshape(4, 5) + 3
    out = W.warp_affine_fixed_point(img, np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0]]), (4, 4))  # singular
    assert (out == img[0, 0]).all()


@pytest.mark.bad_input
@pytest.mark.parametrize("img,what", [
    (np.zeros((8, 8), np.float32), "float32"),
    (np.zeros((8, 8, 3), np.uint8), "(8, 8, 3)"),
    (np.zeros(8, np.uint8), "(8,)"),
])
def test_refuses_other_images(img, what):
    raises_naming(lambda: W.warp_affine_fixed_point(img, np.eye(2, 3), (4, 4)), "uint8 single-channel", what, "fix",
                  exc=ValueError)


@pytest.mark.bad_input
@pytest.mark.parametrize("kw", [{"interpolation": cv2.INTER_NEAREST}, {"interpolation": cv2.INTER_CUBIC},
                                {"border_mode": cv2.BORDER_CONSTANT}, {"border_mode": cv2.BORDER_REFLECT_101}])
def test_refuses_other_modes(kw):
    img = np.zeros((8, 8), np.uint8)
    raises_naming(lambda: W.warp_affine_fixed_point(img, np.eye(2, 3), (4, 4), **kw), "only INTER_LINEAR",
                  "BORDER_REPLICATE", "cv2.warpAffine", exc=ValueError)


@pytest.mark.bad_input
@pytest.mark.parametrize("m,what", [
    (np.eye(3), "2 x 3"),
    (np.array([[1.0, 0, np.nan], [0, 1, 0]]), "not finite"),
    (np.array([[1.0, 0, -1e7], [0, 1, 0]]), "beyond"),
    (np.array([[1e-9, 0, 0], [0, 1, 0]]), "overflows"),
])
def test_refuses_bad_matrices(m, what):
    raises_naming(lambda: W.warp_affine_fixed_point(np.zeros((8, 8), np.uint8), m, (4, 4)), what, exc=ValueError)


@pytest.mark.bad_input
def test_refuses_bad_sizes():
    img = np.zeros((8, 8), np.uint8)
    raises_naming(lambda: W.warp_affine_fixed_point(img, np.eye(2, 3), (0, 4)), "dsize", exc=ValueError)
    raises_naming(lambda: W.warp_affine_fixed_point(np.zeros((0, 4), np.uint8), np.eye(2, 3), (4, 4)), "empty",
                  exc=ValueError)
