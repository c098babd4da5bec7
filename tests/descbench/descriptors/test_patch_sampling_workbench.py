"""patch_sampling against the workbench's own patch arithmetic: ``tests/data/dw/workbench_patches.npz``
(``make_patch_fixtures.py``: the ``LibTorchWrapper`` / ``DNNPatchWrapper`` steps written in C++ with
OpenCV 4.6's calls, ``dw_patches.cpp``). Each wrapper's matrix (its own order of operations), its
uint8 patch (the fixed-point warp, ``warp: opencv_fixed_point``) and each standardisation
(OpenCV's fused ``convertTo``) bit for bit; on keypoints where the two orders give different
``cv2.warpAffine`` patches (``warp: opencv``), each convention's patch is its own wrapper's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.descriptors import patch_sampling as S
from descbench.keypoints import ImageKeypoints

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "dw" / "workbench_patches.npz"
WRAPPERS = {"libtorch": S.LIBTORCH, "dnn": S.DNN}


@pytest.fixture(scope="module")
def ref():
    with np.load(FIXTURE, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def kps(a: np.ndarray) -> ImageKeypoints:
    n = len(a)
    return ImageKeypoints(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.zeros(n, np.float32), np.zeros(n, np.int32),
                          np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_each_conventions_matrix_is_its_wrappers_bit_for_bit(ref, wrapper):
    got = np.stack([S.patch_affine(*row, WRAPPERS[wrapper]) for row in ref["keypoints"]])
    assert np.array_equal(got, ref[f"m_{wrapper}"])


def test_the_two_orders_differ_in_the_last_bits(ref):
    """The two wrappers' matrices are algebraically equal (same side for sizes >= 1) but not bit-equal:
    following one wrapper's order for the other would be wrong on these keypoints."""
    big = ref["keypoints"][:, 2] >= 1
    d = np.abs(ref["m_libtorch"][big] - ref["m_dnn"][big])
    assert d.max() < 1e-11 and (d > 0).any(axis=(1, 2)).sum() >= 10


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_each_conventions_patch_is_the_recorded_opencv46_patch_bit_for_bit(ref, wrapper):
    """With the named conventions' default warp (opencv_fixed_point) the uint8 patches are the ones the
    wrapper's arithmetic gave with C++ OpenCV 4.6, bit for bit, on all 31 keypoints (border ones too)."""
    conv = WRAPPERS[wrapper]
    assert conv.warp == "opencv_fixed_point"
    assert np.array_equal(S.warp_patches(ref["image"], kps(ref["keypoints"]), conv), ref[f"u8_{wrapper}"])


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_warp_opencv_is_cv2s_warpaffine_of_its_wrappers_matrix(ref, wrapper):
    """warp: opencv is the installed cv2.warpAffine of the wrapper's matrix; with OpenCV >= 4.11 (pip cv2 5.0,
    its float warp) that is not the recorded OpenCV 4.6 patch."""
    img = ref["image"]
    want = np.stack([cv2.warpAffine(img, m, (32, 32), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
                     for m in ref[f"m_{wrapper}"]])
    got = S.warp_patches(img, kps(ref["keypoints"]), replace(WRAPPERS[wrapper], warp="opencv"))
    assert np.array_equal(got, want)
    if tuple(int(v) for v in cv2.__version__.split(".")[:2]) >= (4, 11):
        assert not np.array_equal(got, ref[f"u8_{wrapper}"])


def test_keypoints_where_the_orders_give_different_patches(ref):
    """The fixture's first keypoints were searched for (4,000 candidates) so that the two orders' uint8
    patches differ under descbench's OpenCV (5.0, envs/test-constraints.txt; ``warp: opencv``): there each
    convention gives its own wrapper's patch, not the other's. (On OpenCV 4.6's fixed-point warp the two
    orders give the same patches at these keypoints: the recorded u8_libtorch and u8_dnn are equal.)"""
    meta = json.loads(str(ref["meta"][0]))
    k = meta["keypoints"]["orders_differ"]
    assert k >= 1
    img, pts = ref["image"], kps(ref["keypoints"][:k])
    lt = S.warp_patches(img, pts, replace(S.LIBTORCH, warp="opencv"))
    dnn = S.warp_patches(img, pts, replace(S.DNN, warp="opencv"))
    assert (lt != dnn).any(axis=(1, 2)).all(), "OpenCV changed: search the keypoints again (make_patch_fixtures.py)"
    assert np.abs(lt.astype(int) - dnn.astype(int)).max() == 1


@pytest.mark.parametrize("name, conv", [
    ("libtorch_per_patch", S.LIBTORCH),
    ("libtorch_imagenet", S.libtorch_convention(32, True, False)),
    ("dnn_none", S.DNN),
    ("dnn_per_patch", S.dnn_convention(32, 1.0, True, "per_patch")),
    ("dnn_mean_std", S.dnn_convention(32, 1.0, True, "mean_std", 0.5, 0.25)),
])
def test_standardisation_is_opencvs_bit_for_bit(ref, name, conv):
    """On the wrapper's own uint8 patches, including flat ones (the fixed keypoint in the flat block: OpenCV's
    fused convertTo leaves a constant, not zero)."""
    u8 = ref[f"u8_{conv.wrapper}"]
    got = S.normalise_patches(u8, conv)
    assert np.array_equal(got, ref[name])
    flat = ref["keypoints"].tolist().index([20.0, 20.0, 2.0, 0.0])
    assert np.unique(u8[flat]).size == 1


def test_fma_rounds_once():
    """fma_f32 = x * a + b with one rounding, also where the float64 sum lands exactly halfway between
    two float32 values: x a = 2^-24 - 2^-70, b = 1 + 2^-23; the exact sum lies just below the midpoint
    1 + 3 2^-24 (float32 answer 1 + 2^-23), the float64 sum is the midpoint (ties to even: 1 + 2^-22)."""
    x = np.array([1 + 2.0 ** -23], np.float32)
    a = np.float32((1 - 2.0 ** -23) * 2.0 ** -24)
    b = np.float32(1 + 2.0 ** -23)
    assert float(x[0]) * float(a) + float(b) == 1 + 3 * 2.0 ** -24  # the float64 sum: the midpoint
    assert S.fma_f32(x, a, b)[0] == b
    # |y| >= 2^-20 here, so y * 3 + 0.5 is exact in float64 and rounding it once to float32 is the fma
    y = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    assert np.abs(y).min() > 2.0 ** -20
    once = (y.astype(np.float64) * 3 + 0.5).astype(np.float32)
    assert np.array_equal(S.fma_f32(y, np.float32(3.0), np.float32(0.5)), once)
    assert not np.array_equal(y * np.float32(3) + np.float32(0.5), once)  # two roundings differ


def _round_to_f32(q) -> np.float32:
    """The float32 nearest the rational ``q`` (ties to even), chosen among the float32 neighbours
    of ``float32(float(q))`` by exact rational distance: a reference independent of fma_f32."""
    from fractions import Fraction

    f = np.float32(float(q))
    cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    dist = [abs(Fraction(float(c)) - q) for c in cands]
    best = min(dist)
    ties = [c for c, d in zip(cands, dist) if d == best]
    return min(ties, key=lambda c: int(np.array(c, np.float32).view(np.uint32)) & 1)


def test_fma_equals_exact_rational_rounding_per_patch():
    """fma_f32 with per-patch a, b broadcast over [N, n, n] (how normalise_patches calls it) equals
    x a + b computed exactly in rationals and rounded once to float32, element by element,
    including values built to land on float32 midpoints in float64."""
    from fractions import Fraction

    rng = np.random.default_rng(7)
    x = (rng.integers(0, 256, (40, 4, 4)).astype(np.float32) * np.float32(1.0 / 255.0))
    a = rng.uniform(1.0, 1e8, (40, 1, 1)).astype(np.float32)
    b = (-rng.uniform(0.0, 1.0, (40, 1, 1)) * a).astype(np.float32)
    x[0, 0, 0], a[0, 0, 0], b[0, 0, 0] = np.float32(1 + 2.0 ** -23), np.float32((1 - 2.0 ** -23) * 2.0 ** -24), \
        np.float32(1 + 2.0 ** -23)  # test_fma_rounds_once's midpoint
    got = S.fma_f32(x, a, b)
    assert got.shape == x.shape and got.dtype == np.float32
    for i, j, k in np.ndindex(*x.shape):
        q = Fraction(float(x[i, j, k])) * Fraction(float(a[i, 0, 0])) + Fraction(float(b[i, 0, 0]))
        assert got[i, j, k] == _round_to_f32(q), (i, j, k)
