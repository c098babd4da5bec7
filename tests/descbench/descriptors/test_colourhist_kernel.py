"""descbench.descriptors.colourhist_kernel: HoWH and HoNC histograms against a plain float64
re-derivation from the workbench's source (keypoints/HoWH.cpp, keypoints/HoNC.cpp), hand-worked
hue cases, the colour weights, and the HSV pyramid."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from descbench.descriptors import colourhist_kernel as CK
from descbench.descriptors.sift_kernel import Pyramid, build_pyramid

F = np.float32


def one_level(img: np.ndarray) -> Pyramid:
    return Pyramid([np.ascontiguousarray(img, dtype=np.float32)], 0, 3)


def samples(img, ptx, pty, ori, scl):
    """SIFT's window (bin coordinates in float32, as the kernel and the C++, so that the same
    samples are in; everything else below is float64): (rbin, cbin, weight, pixel) in C++ order."""
    rows, cols = img.shape[:2]
    px, py = int(np.rint(F(ptx))), int(np.rint(F(pty)))
    hw = F(3.0) * F(scl)
    radius = min(int(np.rint(hw * F(1.4142135623730951) * F(5) * F(0.5))), int(math.sqrt(cols * cols + rows * rows)))
    ang = F(ori) * F(np.pi / 180)
    cos_t, sin_t = F(math.cos(ang)) / hw, F(math.sin(ang)) / hw
    for i in range(-radius, radius + 1):
        for j in range(-radius, radius + 1):
            c_rot = F(j) * cos_t - F(i) * sin_t
            r_rot = F(j) * sin_t + F(i) * cos_t
            rbin, cbin = (r_rot + F(2)) - F(0.5), (c_rot + F(2)) - F(0.5)
            r, c = py + i, px + j
            if -1 < rbin < 4 and -1 < cbin < 4 and 0 < r < rows - 1 and 0 < c < cols - 1:
                yield float(rbin), float(cbin), math.exp(-(float(c_rot) ** 2 + float(r_rot) ** 2) / 8.0), img[r, c].astype(np.float64)


def vote(hist, rbin, cbin, obin, value, circular=True):
    r0, c0, o0 = math.floor(rbin), math.floor(cbin), math.floor(obin)
    for dr, wr in ((0, 1 - (rbin - r0)), (1, rbin - r0)):
        for dc, wc in ((0, 1 - (cbin - c0)), (1, cbin - c0)):
            for do, wo in ((0, 1 - (obin - o0)), (1, obin - o0)):
                r, c, o = r0 + dr, c0 + dc, (o0 + do) % 8
                if 0 <= r < 4 and 0 <= c < 4:
                    hist[r, c, o] += value * wr * wc * wo


def sift_normalise(h, factor=1.0):
    h = h.ravel()
    h = np.minimum(h, 0.2 * np.linalg.norm(h))
    return factor * h * 512.0 / max(np.linalg.norm(h), np.finfo(np.float32).eps)


def ref_howh(hsv, ptx, pty, ori, scl):
    hist = np.zeros((4, 4, 8))
    for rbin, cbin, w, px in samples(hsv, ptx, pty, ori, scl):
        vote(hist, rbin, cbin, px[0] * 8 / 360, px[1] * w)
    return sift_normalise(hist, 0.6)


def ref_honc(bgr, ptx, pty, ori, scl):
    ss = list(samples(bgr, ptx, pty, ori, scl))
    rgb = np.array([s[3][::-1] for s in ss])  # R, G, B
    mean, std = rgb.mean(axis=0), rgb.std(axis=0)
    norm = (rgb - mean) * (48.0 / std.mean()) + mean + (127.5 - mean.mean())
    dark = 1.0 - np.clip((norm - 63.5) / 128.0, 0.0, 1.0)
    hist = np.zeros((4, 4, 8))
    for (rbin, cbin, w, _), u in zip(ss, dark):
        for bit_r in (0, 1):
            for bit_g in (0, 1):
                for bit_b in (0, 1):
                    share = [u[0], 1 - u[0]][bit_r] * [u[1], 1 - u[1]][bit_g] * [u[2], 1 - u[2]][bit_b]
                    vote(hist, rbin, cbin, 4 * bit_r + 2 * bit_g + bit_b, w * share)  # integer bin: no spill
    return sift_normalise(hist)


@pytest.fixture(scope="module")
def level():
    rng = np.random.default_rng(7)
    img = cv2.GaussianBlur(rng.uniform(0, 255, (60, 70, 3)).astype(np.float32), (0, 0), 2.0)
    return img


KPS = [(30.0, 25.0, 0.0, 4.0), (35.3, 30.8, 37.5, 5.2), (12.0, 40.0, 300.0, 3.1), (3.0, 3.0, 90.0, 6.0)]


def run(fn, pyr, kps):
    x, y, ori, scl = (np.array(v, dtype=np.float32) for v in zip(*kps))
    return fn(pyr, np.zeros(len(kps), dtype=np.int64), x, y, ori, scl)


def test_honc_equals_a_float64_rederivation(level):
    got = run(CK.honc_rows, one_level(level), KPS)
    assert got.shape == (len(KPS), 128) and got.dtype == np.float32
    for row, kp in zip(got, KPS):
        np.testing.assert_allclose(row, ref_honc(level, *kp), rtol=2e-4, atol=2e-3)
        assert abs(np.linalg.norm(row) - 512) < 1e-2


def test_howh_equals_a_float64_rederivation(level):
    hsv = cv2.cvtColor(level, cv2.COLOR_BGR2HSV)
    got = run(CK.howh_rows, one_level(hsv), KPS)
    for row, kp in zip(got, KPS):
        np.testing.assert_allclose(row, ref_howh(hsv, *kp), rtol=2e-4, atol=2e-3)
        assert abs(np.linalg.norm(row) - 0.6 * 512) < 1e-2


@pytest.mark.parametrize("hue, bins", [(45.0, {1: 1.0}), (22.5, {0: 0.5, 1: 0.5}), (348.75, {7: 0.25, 0: 0.75})])
def test_howh_of_one_hue_fills_its_bins_in_every_cell(hue, bins):
    """A constant hue h votes h * 8 / 360 into two neighbouring circular bins of every cell, in the
    proportion of its fractional part, whatever the keypoint angle (hand-worked; SIFT's clipping at
    0.2 of the norm then caps the larger share, so unequal shares are checked in order only)."""
    hsv = np.zeros((50, 50, 3), dtype=np.float32)
    hsv[..., 0], hsv[..., 1] = hue, 0.5
    row = run(CK.howh_rows, one_level(hsv), [(25.0, 25.0, 30.0, 3.0)])[0].reshape(16, 8)
    assert np.all(row.sum(axis=1) > 0)
    for b in range(8):
        if b not in bins:
            assert not row[:, b].any()
    (b1, s1), (b2, s2) = sorted(bins.items(), key=lambda kv: -kv[1]) if len(bins) == 2 else (next(iter(bins.items())),) * 2
    if s1 == s2:
        np.testing.assert_allclose(row[:, b1], row[:, b2], rtol=1e-6)
    else:
        assert np.all(row[:, b1] >= row[:, b2]) and np.all(row[:, b2] > 0) and np.any(row[:, b1] > row[:, b2])


def test_honc_of_a_grey_window_is_symmetric_in_the_channels():
    """R = G = B: every channel gets the same dark weight u, so bins 1, 2, 4 (one bright channel)
    are equal, as are 3, 5, 6, and bin 0 holds u^3, bin 7 (1 - u)^3 (hand-worked)."""
    rng = np.random.default_rng(3)
    grey = cv2.GaussianBlur(rng.uniform(0, 255, (50, 50)).astype(np.float32), (0, 0), 1.5)
    row = run(CK.honc_rows, one_level(np.repeat(grey[:, :, None], 3, axis=2)), [(25.0, 25.0, 0.0, 3.0)])[0].reshape(16, 8)
    np.testing.assert_allclose(row[:, 1], row[:, 2], rtol=1e-6)
    np.testing.assert_allclose(row[:, 1], row[:, 4], rtol=1e-6)
    np.testing.assert_allclose(row[:, 3], row[:, 5], rtol=1e-6)
    np.testing.assert_allclose(row[:, 3], row[:, 6], rtol=1e-6)


def test_honc_of_a_flat_window_is_nan_as_the_workbench_or_unstretched():
    """A flat window: NaN (the workbench); unstretched, every colour becomes m + (127.5 - m) = 127.5,
    dark weight 1/2 in each channel, so each cell spreads its weight evenly over the 8 bins."""
    flat = np.full((40, 40, 3), 10.0, dtype=np.float32)  # exact float32 sums: standard deviation exactly 0
    assert np.all(np.isnan(run(CK.honc_rows, one_level(flat), [(20.0, 20.0, 0.0, 3.0)])))
    x, y, ori, scl = (np.float32([v]) for v in (20.0, 20.0, 0.0, 3.0))
    row = CK.honc_rows(one_level(flat), np.zeros(1, dtype=np.int64), x, y, ori, scl, unstretched=True)[0].reshape(16, 8)
    assert np.all(row > 0)
    np.testing.assert_allclose(row, row[:, :1] * np.ones((1, 8)), rtol=1e-6)
    textured = run(CK.honc_rows, one_level(cv2.GaussianBlur(np.random.default_rng(1).uniform(0, 255, (40, 40, 3)).astype(np.float32),
                                                           (0, 0), 1.0)), [(20.0, 20.0, 0.0, 3.0)])
    np.testing.assert_array_equal(textured, CK.honc_rows(one_level(cv2.GaussianBlur(
        np.random.default_rng(1).uniform(0, 255, (40, 40, 3)).astype(np.float32), (0, 0), 1.0)), np.zeros(1, dtype=np.int64), x, y,
        ori, scl, unstretched=True))  # a window with spread: unchanged


def test_dark_weight_is_the_clamped_ramp():
    assert [float(CK._dark_weight(np.float32(v))) for v in (0.0, 63.5, 127.5, 191.5, 300.0)] == [1.0, 1.0, 0.5, 0.0, 0.0]
    assert math.isnan(CK._dark_weight(np.float32("nan")))


def test_invalid_level_rows_are_zero(level):
    pyr = one_level(level)
    out = CK.honc_rows(pyr, np.array([-1, 0]), np.float32([30, 30]), np.float32([25, 25]), np.float32([0, 0]), np.float32([4, 4]))
    assert not out[0].any() and out[1].any()


def test_colour_pyramid_is_sifts_per_channel_and_hsv_per_level(level):
    bgr = np.clip(level, 0, 255).astype(np.uint8)
    pyr = CK.colour_pyramid(bgr, -1, 2, hsv=False)
    grey_b = build_pyramid(np.ascontiguousarray(bgr[:, :, 0]), -1, 2)
    assert pyr.n_levels == grey_b.n_levels == 12
    for i in (0, 5, 6, 11):
        lv = pyr.buf[pyr.offs[i]:pyr.offs[i] + pyr.rows[i] * pyr.cols[i] * 3].reshape(pyr.rows[i], pyr.cols[i], 3)
        ref = grey_b.buf[grey_b.offs[i]:grey_b.offs[i] + grey_b.rows[i] * grey_b.cols[i]].reshape(grey_b.rows[i], grey_b.cols[i])
        np.testing.assert_allclose(lv[:, :, 0], ref, atol=1e-3)
    hsv = CK.colour_pyramid(bgr, -1, 2, hsv=True)
    lv = pyr.buf[pyr.offs[7]:pyr.offs[7] + pyr.rows[7] * pyr.cols[7] * 3].reshape(pyr.rows[7], pyr.cols[7], 3)
    got = hsv.buf[hsv.offs[7]:hsv.offs[7] + hsv.rows[7] * hsv.cols[7] * 3].reshape(hsv.rows[7], hsv.cols[7], 3)
    np.testing.assert_array_equal(got, cv2.cvtColor(lv, cv2.COLOR_BGR2HSV))
