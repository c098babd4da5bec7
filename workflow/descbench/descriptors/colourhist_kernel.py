"""Colour histogram kernels: the workbench's HoWH and HoNC descriptors recomputed in numba.

Both are SIFT-shaped (a 4 x 4 grid of 8-bin histograms, 128 values) and share SIFT's sampling
window (:mod:`descbench.descriptors.sift_kernel`): samples on the integer grid of one level of a
*colour* Gaussian pyramid within radius ``round(3 scl sqrt(2) 5 / 2)`` (clipped to the level's
diagonal), rotated by the keypoint angle into bin coordinates ``rbin = (r_rot + 2) - 0.5``, kept
when ``-1 < rbin, cbin < 4`` and the pixel is not on the level's border, Gaussian weight
``w = exp(-(u^2 + v^2) / 8)`` in bin units, bilinear interpolation over the (row, column) cells.
What each sample votes for:

* HoWH (:func:`howh_rows`; ``keypoints/HoWH.cpp``): the pixel's channel 0 read as a hue in
  degrees, ``h = c0 * 8 / 360``, trilinearly interpolated into 8 circular hue bins (the hue is
  *not* rotated by the keypoint angle), with weight ``c1 * w`` (channel 1 read as the saturation).
  Normalisation: SIFT's clip at ``0.2 ||h||_2`` and rescale to 512, then times 0.6
  (``(0.6 v) s`` in that order). On the HSV pyramid (:func:`colour_pyramid` with ``hsv=True``)
  c0, c1 are OpenCV's float hue (0..360) and saturation (0..1).
* HoNC (:func:`honc_rows`; ``keypoints/HoNC.cpp``): the window's B, G, R values are first
  normalised together: with the window means ``m_c`` and standard deviations ``s_c =
  sqrt(mean(c^2) - m_c^2)`` (float32 sums in sample order), ``bias = 127.5 - (m_r + m_g + m_b)
  / 3``, ``gain = 48 / ((s_r + s_g + s_b) / 3)``, every value ``v -> ((v - m_c) gain + m_c) +
  bias``. Each normalised value gives a weight ``u = 1 - clamp((v - 63.5) / 128, 0, 1)``
  (float64, then float32) for the dark half and ``1 - u`` for the bright half; the sample votes
  ``w * u_r(red) * u_g(green) * u_b(blue)`` (in that multiplication order) into colour bin
  ``4 red + 2 green + blue`` of each of its four cells (no orientation). Normalisation: SIFT's clip
  and rescale to 512. A window whose colour spread is zero (all three ``s_c`` 0: a flat window)
  or whose float32 variance is negative gives NaN in the workbench; the rows here are NaN there
  too, and the family reports them. With ``unstretched`` (the family's ``flat_window:
  unstretched``) a NaN ``s_c`` counts as 0 and a zero spread gives ``gain = 0``: the window's
  colours are only shifted (``v -> m_c + bias``); every other window is unchanged.

All arithmetic is float32 in the C++ operation order (no fused multiply-adds). The expected
differences from the workbench are those of SIFT's kernel: ``exp`` (libm vs OpenCV's
``hal::exp32f``, <= 1 ulp) and the cv2 build's Gaussian filters.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from descbench.descriptors.sift_kernel import (DESCR_BINS, DESCR_MAG_THR, DESCR_SCL_FCTR, DESCR_SIZE, DESCR_WIDTH,
                                               INT_DESCR_FCTR, Pyramid, build_pyramid, fold_circular_bins,
                                               trilinear_vote)

HOWH, HONC = 0, 1
HOWH_FACTOR = 0.6  # HoWH's final weight ("helps when stacked with SIFT")
HONC_TARGET_STD = 48.0  # HoNC's AVG_STD_DEV
_FLT_EPS = np.float32(np.finfo(np.float32).eps)


def colour_pyramid(bgr_u8: np.ndarray, first_octave: int, n_octaves: int, hsv: bool) -> Pyramid:
    """The workbench's colour pyramid (``createInitialColorImage`` + ``buildGaussianPyramid`` on
    the 3-channel float image: SIFT's pyramid, every channel blurred alike), channels interleaved
    in ``buf`` (pixel (r, c) channel k of level i at ``offs[i] + 3 (r cols + c) + k``).
    ``hsv``: every level converted with ``cvtColor(BGR2HSV)`` (float: hue in degrees 0..360,
    saturation 0..1), as ``HoWH::operator()`` does."""
    import cv2

    pyr = build_pyramid(np.ascontiguousarray(bgr_u8), first_octave, n_octaves)
    if hsv:
        for i in range(pyr.n_levels):
            n = int(pyr.rows[i] * pyr.cols[i] * 3)
            view = pyr.buf[pyr.offs[i]:pyr.offs[i] + n].reshape(int(pyr.rows[i]), int(pyr.cols[i]), 3)
            view[...] = cv2.cvtColor(view, cv2.COLOR_BGR2HSV)
    return pyr


@njit(cache=True)
def _window(ptx, pty, ori, scl, rows, cols):
    """SIFT's window: (px, py, cos_t / hist_width, sin_t / hist_width, radius, exp_scale)."""
    f32 = np.float32
    d = DESCR_WIDTH
    px = int(np.rint(ptx))
    py = int(np.rint(pty))
    ang = ori * f32(np.pi / 180)
    cos_t = f32(math.cos(ang))
    sin_t = f32(math.sin(ang))
    exp_scale = f32(-1.0) / (f32(d * d) * f32(0.5))
    hist_width = f32(DESCR_SCL_FCTR) * scl
    radius = int(np.rint(hist_width * f32(1.4142135623730951) * f32(d + 1) * f32(0.5)))
    diag = int(math.sqrt(float(cols) * cols + float(rows) * rows))
    radius = min(radius, diag)
    return px, py, cos_t / hist_width, sin_t / hist_width, radius, exp_scale


@njit(cache=True, error_model="numpy")
def _howh_histogram(buf, off, rows, cols, ptx, pty, ori, scl, out):
    """Raw HoWH histogram of one keypoint on one interleaved 3-channel level."""
    f32 = np.float32
    d = DESCR_WIDTH
    n = DESCR_BINS
    px, py, cos_t, sin_t, radius, exp_scale = _window(ptx, pty, ori, scl, rows, cols)
    bins_per_degree = f32(n) / f32(360.0)
    hist = np.zeros((d + 2) * (d + 2) * (n + 2), dtype=np.float32)
    for i in range(-radius, radius + 1):
        fi = f32(i)
        for j in range(-radius, radius + 1):
            fj = f32(j)
            c_rot = fj * cos_t - fi * sin_t
            r_rot = fj * sin_t + fi * cos_t
            rbin = (r_rot + f32(d // 2)) - f32(0.5)
            cbin = (c_rot + f32(d // 2)) - f32(0.5)
            r = py + i
            c = px + j
            if rbin > -1 and rbin < d and cbin > -1 and cbin < d and r > 0 and r < rows - 1 and c > 0 and c < cols - 1:
                p = off + (r * cols + c) * 3
                w = f32(math.exp((c_rot * c_rot + r_rot * r_rot) * exp_scale))
                trilinear_vote(hist, d, n, rbin, cbin, buf[p] * bins_per_degree, buf[p + 1] * w)
    fold_circular_bins(hist, DESCR_WIDTH, DESCR_BINS, out)


@njit(cache=True)
def _dark_weight(v):
    """HoNC's ``1 - min(max((v - 63.5) / 128, 0), 1)`` (float64 clamp, std::max / std::min's
    comparison order, so NaN passes through), as float32."""
    t = (float(v) - 63.5) / 128.0
    t = 0.0 if t < 0.0 else t
    t = 1.0 if 1.0 < t else t
    return np.float32(1.0) - np.float32(t)


@njit(cache=True, error_model="numpy")
def _honc_histogram(buf, off, rows, cols, ptx, pty, ori, scl, unstretched, out):
    """Raw HoNC histogram of one keypoint on one interleaved BGR level (``unstretched``: a window
    without colour spread keeps its colours, module docstring)."""
    f32 = np.float32
    d = DESCR_WIDTH
    n = DESCR_BINS
    px, py, cos_t, sin_t, radius, exp_scale = _window(ptx, pty, ori, scl, rows, cols)
    cap = (2 * radius + 1) * (2 * radius + 1)
    rbins = np.empty(cap, dtype=np.float32)
    cbins = np.empty(cap, dtype=np.float32)
    wts = np.empty(cap, dtype=np.float32)
    red = np.empty(cap, dtype=np.float32)
    green = np.empty(cap, dtype=np.float32)
    blue = np.empty(cap, dtype=np.float32)
    rbar = f32(0.0)
    gbar = f32(0.0)
    bbar = f32(0.0)
    r2bar = f32(0.0)
    g2bar = f32(0.0)
    b2bar = f32(0.0)
    k = 0
    for i in range(-radius, radius + 1):
        fi = f32(i)
        for j in range(-radius, radius + 1):
            fj = f32(j)
            c_rot = fj * cos_t - fi * sin_t
            r_rot = fj * sin_t + fi * cos_t
            rbin = (r_rot + f32(d // 2)) - f32(0.5)
            cbin = (c_rot + f32(d // 2)) - f32(0.5)
            r = py + i
            c = px + j
            if rbin > -1 and rbin < d and cbin > -1 and cbin < d and r > 0 and r < rows - 1 and c > 0 and c < cols - 1:
                p = off + (r * cols + c) * 3
                wts[k] = (c_rot * c_rot + r_rot * r_rot) * exp_scale
                rbins[k] = rbin
                cbins[k] = cbin
                rv = buf[p + 2]
                gv = buf[p + 1]
                bv = buf[p]
                red[k] = rv
                green[k] = gv
                blue[k] = bv
                rbar += rv
                gbar += gv
                bbar += bv
                r2bar += rv * rv
                g2bar += gv * gv
                b2bar += bv * bv
                k += 1
    m = k
    fm = f32(m)
    rbar = rbar / fm
    gbar = gbar / fm
    bbar = bbar / fm
    r2bar = r2bar / fm
    g2bar = g2bar / fm
    b2bar = b2bar / fm
    rsig = np.sqrt(r2bar - rbar * rbar)
    gsig = np.sqrt(g2bar - gbar * gbar)
    bsig = np.sqrt(b2bar - bbar * bbar)
    bias = f32(127.5) - ((rbar + gbar) + bbar) / f32(3.0)
    if unstretched:
        rsig = rsig if rsig >= f32(0.0) else f32(0.0)  # a float32 variance rounded below 0 (NaN): no spread
        gsig = gsig if gsig >= f32(0.0) else f32(0.0)
        bsig = bsig if bsig >= f32(0.0) else f32(0.0)
        spread = ((rsig + gsig) + bsig) / f32(3.0)
        gain = f32(HONC_TARGET_STD) / spread if spread > f32(0.0) else f32(0.0)
    else:
        gain = f32(HONC_TARGET_STD) / (((rsig + gsig) + bsig) / f32(3.0))
    for k in range(m):
        red[k] = ((red[k] - rbar) * gain + rbar) + bias
        green[k] = ((green[k] - gbar) * gain + gbar) + bias
        blue[k] = ((blue[k] - bbar) * gain + bbar) + bias
    hist = np.zeros((d + 2) * (d + 2) * (n + 2), dtype=np.float32)
    rw = np.empty(2, dtype=np.float32)
    gw = np.empty(2, dtype=np.float32)
    bw = np.empty(2, dtype=np.float32)
    for k in range(m):
        w = f32(math.exp(wts[k]))
        rw[0] = _dark_weight(red[k])
        rw[1] = f32(1.0) - rw[0]
        gw[0] = _dark_weight(green[k])
        gw[1] = f32(1.0) - gw[0]
        bw[0] = _dark_weight(blue[k])
        bw[1] = f32(1.0) - bw[0]
        rbin = rbins[k]
        cbin = cbins[k]
        r0 = int(math.floor(rbin))
        c0 = int(math.floor(cbin))
        rb = rbin - f32(r0)
        cb = cbin - f32(c0)
        v_r1 = w * rb
        v_r0 = w - v_r1
        v_rc11 = v_r1 * cb
        v_rc10 = v_r1 - v_rc11
        v_rc01 = v_r0 * cb
        v_rc00 = v_r0 - v_rc01
        for ri in range(2):
            for gi in range(2):
                for bi in range(2):
                    idx = ((r0 + 1) * (d + 2) + c0 + 1) * (n + 2) + 4 * ri + 2 * gi + bi
                    hist[idx] += v_rc00 * rw[ri] * gw[gi] * bw[bi]
                    hist[idx + (n + 2)] += v_rc01 * rw[ri] * gw[gi] * bw[bi]
                    hist[idx + (d + 2) * (n + 2)] += v_rc10 * rw[ri] * gw[gi] * bw[bi]
                    hist[idx + (d + 3) * (n + 2)] += v_rc11 * rw[ri] * gw[gi] * bw[bi]
    fold_circular_bins(hist, DESCR_WIDTH, DESCR_BINS, out)


@njit(cache=True, error_model="numpy")
def _batch(kind, buf, offs, rows, cols, level, ptx, pty, ori, scl, unstretched, out):
    for k in range(level.shape[0]):
        lv = level[k]
        if lv < 0:
            continue  # the caller marks these rows
        if kind == HOWH:
            _howh_histogram(buf, offs[lv], rows[lv], cols[lv], ptx[k], pty[k], ori[k], scl[k], out[k])
        else:
            _honc_histogram(buf, offs[lv], rows[lv], cols[lv], ptx[k], pty[k], ori[k], scl[k], unstretched, out[k])


@njit(cache=True, error_model="numpy")
def _normalise(raw, out, factor):
    """SIFT's clip at 0.2 ||h|| and rescale to 512; ``factor`` != 1: ``(factor v) s`` (HoWH)."""
    f32 = np.float32
    for r in range(raw.shape[0]):
        nrm2 = f32(0.0)
        for k in range(raw.shape[1]):
            nrm2 += raw[r, k] * raw[r, k]
        thr = np.sqrt(nrm2) * f32(DESCR_MAG_THR)
        nrm2 = f32(0.0)
        for k in range(raw.shape[1]):
            v = raw[r, k]
            v = thr if thr < v else v  # std::min(v, thr)
            out[r, k] = v
            nrm2 += v * v
        nrm = np.sqrt(nrm2)
        s = f32(INT_DESCR_FCTR) / (_FLT_EPS if nrm < _FLT_EPS else nrm)
        for k in range(raw.shape[1]):
            out[r, k] = out[r, k] * s if factor == f32(1.0) else (factor * out[r, k]) * s


def _rows(kind: int, pyr: Pyramid, level, ptx, pty, ori, scl, unstretched: bool = False) -> np.ndarray:
    n = len(level)
    raw = np.zeros((n, DESCR_SIZE), dtype=np.float32)
    if n:
        _batch(kind, pyr.buf, pyr.offs, pyr.rows, pyr.cols, np.ascontiguousarray(level, dtype=np.int64),
               np.ascontiguousarray(ptx, dtype=np.float32), np.ascontiguousarray(pty, dtype=np.float32),
               np.ascontiguousarray(ori, dtype=np.float32), np.ascontiguousarray(scl, dtype=np.float32),
               bool(unstretched), raw)
    out = np.empty_like(raw)
    if n:
        _normalise(raw, out, np.float32(HOWH_FACTOR if kind == HOWH else 1.0))
    return out


def howh_rows(pyr: Pyramid, level, ptx, pty, ori, scl) -> np.ndarray:
    """[N, 128] float32 HoWH rows (clipped, scaled to 512, times 0.6) on ``pyr`` (channel 0 read
    as hue in degrees, channel 1 as saturation); rows with ``level < 0`` are 0."""
    return _rows(HOWH, pyr, level, ptx, pty, ori, scl)


def honc_rows(pyr: Pyramid, level, ptx, pty, ori, scl, unstretched: bool = False) -> np.ndarray:
    """[N, 128] float32 HoNC rows (clipped, scaled to 512) on the BGR ``pyr``; a flat window's row
    is NaN (as the workbench's), or with ``unstretched`` its colours are shifted, not stretched;
    rows with ``level < 0`` are 0."""
    return _rows(HONC, pyr, level, ptx, pty, ori, scl, unstretched)
