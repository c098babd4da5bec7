"""SIFT descriptor kernel: OpenCV's SIFT descriptor recomputed in numba, without the uchar rounding.

Why: OpenCV's ``SIFT.compute`` (also in OpenCV 5, whose ``SIFT_create`` has no ``descriptorType``
argument) returns float32 values that are already rounded to integers 0..255 (measured: every
value of the installed cv2 5.0.0 output is integral). The C++ DescriptorWorkbench's own SIFT
code (``keypoints/VanillaSIFT.cpp``, ``calcSIFTDescriptor``: an OpenCV 2.4-era copy whose final
``saturate_cast<uchar>`` is commented out) keeps the unrounded floats, and its RGBSIFT and
DSPSIFT_V2 / DSPRGBSIFT_V2 are built on that class. To reproduce those to float precision this
module rebuilds both halves of OpenCV's SIFT descriptor:

* the Gaussian pyramid exactly as OpenCV (and ``VanillaSIFT::createInitialImage`` /
  ``buildGaussianPyramid``) build it, using cv2's own resize and GaussianBlur: grey uint8 ->
  float32 (scale 1), optionally doubled with bilinear resize, blurred to ``sigma`` assuming an
  input blur of 0.5 (1.0 on the doubled image); per octave ``L + 3`` layers, each blurred from
  the previous one by ``sqrt(s_i^2 - s_{i-1}^2)``, ``s_i = sigma 2^(i / L)``; the next octave's
  base is layer ``L`` of the previous octave halved by nearest-neighbour resize;
* the 4 x 4 x 8 histogram (:func:`_raw_histogram`): samples on the integer grid of the pyramid
  level within radius ``round(3 scl sqrt(2) 5 / 2)``, rotated by the keypoint angle into bin
  coordinates, gradient by central differences, orientation by OpenCV's polynomial
  ``fastAtan2`` (reimplemented here bit for bit), Gaussian weight ``exp(-(u^2+v^2)/8)`` in bin
  units, trilinear interpolation into (row, column, orientation) bins, circular orientation wrap;
* SIFT's normalisation (:func:`normalise_sift`): clip at 0.2 x L2 norm, rescale to L2 norm 512,
  and (OpenCV only) round + saturate to 0..255.

All arithmetic is float32 in OpenCV's operation order, so the only expected differences from
OpenCV are ``exp`` (libm vs OpenCV's table-based ``hal::exp32f``, <= 1 ulp) and the summation
order of the norms (OpenCV sums with SIMD lanes). Agreement with cv2's rounded output is
measured in ``tests/descbench/descriptors/test_sift.py`` (see that module's docstring for the figures).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

DESCR_WIDTH = 4  # d: spatial bins per side
DESCR_BINS = 8  # n: orientation bins
DESCR_SIZE = DESCR_WIDTH * DESCR_WIDTH * DESCR_BINS  # 128
DESCR_MAG_THR = 0.2  # clip threshold, relative to the L2 norm
INT_DESCR_FCTR = 512.0  # OpenCV's scale before uchar conversion
DESCR_SCL_FCTR = 3.0  # histogram bin width in units of the keypoint scale
INIT_SIGMA = 0.5  # blur assumed already present in the input image

_F32 = np.float32
# OpenCV's fastAtan2 polynomial coefficients (degrees), float32 as OpenCV stores them
_ATAN_P1 = np.float32(0.9997878412794807 * (180 / np.pi))
_ATAN_P3 = np.float32(-0.3258083974640975 * (180 / np.pi))
_ATAN_P5 = np.float32(0.1555786518463281 * (180 / np.pi))
_ATAN_P7 = np.float32(-0.04432655554792128 * (180 / np.pi))
_DBL_EPS_F32 = np.float32(np.finfo(np.float64).eps)
_FLT_EPS = np.float32(np.finfo(np.float32).eps)


# ----------------------------------------------------------------------------- pyramid


class Pyramid:
    """One channel's Gaussian pyramid, flattened for numba: ``buf`` holds every level row-major;
    level ``i`` starts at ``offs[i]`` and is ``rows[i] x cols[i]``. Level index of (octave o,
    layer l) is ``(o - first_octave) (L + 3) + l``."""

    def __init__(self, levels: list[np.ndarray], first_octave: int, n_layers: int):
        self.first_octave = first_octave
        self.n_layers = n_layers
        self.n_levels = len(levels)
        sizes = [lv.size for lv in levels]
        self.offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.rows = np.array([lv.shape[0] for lv in levels], dtype=np.int64)
        self.cols = np.array([lv.shape[1] for lv in levels], dtype=np.int64)
        self.buf = np.concatenate([lv.ravel() for lv in levels]).astype(np.float32)


def initial_image(channel_u8: np.ndarray, double: bool, sigma: float = 1.6) -> np.ndarray:
    """OpenCV's ``createInitialImage`` for one 8-bit channel (float32, values 0..255)."""
    import cv2

    img = channel_u8.astype(np.float32)
    if double:
        sig_diff = math.sqrt(max(sigma * sigma - INIT_SIGMA * INIT_SIGMA * 4, 0.01))
        dbl = cv2.resize(img, (img.shape[1] * 2, img.shape[0] * 2), interpolation=cv2.INTER_LINEAR)
        return cv2.GaussianBlur(dbl, (0, 0), sig_diff, sigmaY=sig_diff)
    sig_diff = math.sqrt(max(sigma * sigma - INIT_SIGMA * INIT_SIGMA, 0.01))
    return cv2.GaussianBlur(img, (0, 0), sig_diff, sigmaY=sig_diff)


def build_pyramid(channel_u8: np.ndarray, first_octave: int, n_octaves: int, n_layers: int = 3,
                  sigma: float = 1.6) -> Pyramid:
    """OpenCV's ``buildGaussianPyramid`` from :func:`initial_image` (doubled iff first_octave < 0)."""
    import cv2

    base = initial_image(channel_u8, first_octave < 0, sigma)
    sig = [sigma]
    k = 2.0 ** (1.0 / n_layers)
    for i in range(1, n_layers + 3):
        prev = k ** (i - 1) * sigma
        total = prev * k
        sig.append(math.sqrt(total * total - prev * prev))
    levels: list[np.ndarray] = []
    for o in range(max(n_octaves, 1)):
        for i in range(n_layers + 3):
            if o == 0 and i == 0:
                levels.append(base)
            elif i == 0:
                src = levels[(o - 1) * (n_layers + 3) + n_layers]
                levels.append(cv2.resize(src, (src.shape[1] // 2, src.shape[0] // 2), interpolation=cv2.INTER_NEAREST))
            else:
                levels.append(cv2.GaussianBlur(levels[-1], (0, 0), sig[i], sigmaY=sig[i]))
    return Pyramid(levels, first_octave, n_layers)


def unpack_octave(octave_field: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's ``unpackOctave``: (octave as signed byte, layer) from the packed field."""
    f = np.asarray(octave_field, dtype=np.int64)
    o = f & 255
    o = np.where(o < 128, o, o - 256)
    return o, (f >> 8) & 255


def octave_scale(octave: np.ndarray) -> np.ndarray:
    """float32 ``1 / 2^o`` (``2^-o`` for o < 0), as unpackOctave computes it."""
    return np.ldexp(np.float32(1.0), -np.asarray(octave, dtype=np.int32)).astype(np.float32)


# ----------------------------------------------------------------------------- numba kernel


@njit(cache=True)
def _fast_atan2_deg(y, x):
    """OpenCV's ``fastAtan2`` (degrees, 0..360) in float32, same operation order."""
    ax = abs(x)
    ay = abs(y)
    if ax >= ay:
        c = ay / (ax + _DBL_EPS_F32)
        c2 = c * c
        a = (((_ATAN_P7 * c2 + _ATAN_P5) * c2 + _ATAN_P3) * c2 + _ATAN_P1) * c
    else:
        c = ax / (ay + _DBL_EPS_F32)
        c2 = c * c
        a = np.float32(90.0) - (((_ATAN_P7 * c2 + _ATAN_P5) * c2 + _ATAN_P3) * c2 + _ATAN_P1) * c
    if x < 0:
        a = np.float32(180.0) - a
    if y < 0:
        a = np.float32(360.0) - a
    return a


@njit(cache=True, inline="always")
def trilinear_vote(hist, d, n, rbin, cbin, obin, value):
    """Add ``value`` to the (d+2) x (d+2) x (n+2) histogram ``hist`` at row bin ``rbin``, column bin
    ``cbin`` and circular bin ``obin`` (wrapped into [0, n)), split over the 8 neighbouring bins by
    OpenCV ``calcSIFTDescriptor``'s trilinear weights, in its float32 order of operations. Shared by
    SIFT (orientation bins) and HoWH (hue bins, :mod:`descbench.descriptors.colourhist_kernel`)."""
    f32 = np.float32
    r0 = int(math.floor(rbin))
    c0 = int(math.floor(cbin))
    o0 = int(math.floor(obin))
    rb = rbin - f32(r0)
    cb = cbin - f32(c0)
    ob = obin - f32(o0)
    if o0 < 0:
        o0 += n
    if o0 >= n:
        o0 -= n
    v_r1 = value * rb
    v_r0 = value - v_r1
    v_rc11 = v_r1 * cb
    v_rc10 = v_r1 - v_rc11
    v_rc01 = v_r0 * cb
    v_rc00 = v_r0 - v_rc01
    v_rco111 = v_rc11 * ob
    v_rco110 = v_rc11 - v_rco111
    v_rco101 = v_rc10 * ob
    v_rco100 = v_rc10 - v_rco101
    v_rco011 = v_rc01 * ob
    v_rco010 = v_rc01 - v_rco011
    v_rco001 = v_rc00 * ob
    v_rco000 = v_rc00 - v_rco001
    idx = ((r0 + 1) * (d + 2) + c0 + 1) * (n + 2) + o0
    hist[idx] += v_rco000
    hist[idx + 1] += v_rco001
    hist[idx + (n + 2)] += v_rco010
    hist[idx + (n + 3)] += v_rco011
    hist[idx + (d + 2) * (n + 2)] += v_rco100
    hist[idx + (d + 2) * (n + 2) + 1] += v_rco101
    hist[idx + (d + 3) * (n + 2)] += v_rco110
    hist[idx + (d + 3) * (n + 2) + 1] += v_rco111


@njit(cache=True, inline="always")
def fold_circular_bins(hist, d, n, out):
    """Fold the circular bins n, n+1 of each cell of ``hist`` (:func:`trilinear_vote`'s layout) into
    bins 0, 1 and copy the d x d x n cells into ``out``, as ``calcSIFTDescriptor``."""
    for i in range(d):
        for j in range(d):
            idx = ((i + 1) * (d + 2) + (j + 1)) * (n + 2)
            hist[idx] += hist[idx + n]
            hist[idx + 1] += hist[idx + n + 1]
            for k in range(n):
                out[(i * d + j) * n + k] = hist[idx + k]


@njit(cache=True)
def _raw_histogram(buf, off, rows, cols, ptx, pty, ori, scl, out):
    """The 4x4x8 SIFT histogram of one keypoint on one pyramid level (OpenCV's
    ``calcSIFTDescriptor`` up to, not including, the normalisation). ``ptx, pty``: position in
    level pixels; ``ori``: OpenCV's ``360 - angle`` in degrees; ``scl``: half the size in level
    pixels. Writes 128 float32 values into ``out``."""
    d = DESCR_WIDTH
    n = DESCR_BINS
    f32 = np.float32
    px = int(np.rint(ptx))  # cvRound: round half to even, as rint
    py = int(np.rint(pty))
    ang = ori * f32(np.pi / 180)
    cos_t = f32(math.cos(ang))
    sin_t = f32(math.sin(ang))
    bins_per_rad = f32(n) / f32(360.0)
    exp_scale = f32(-1.0) / (f32(d * d) * f32(0.5))
    hist_width = f32(DESCR_SCL_FCTR) * scl
    radius = int(np.rint(hist_width * f32(1.4142135623730951) * f32(d + 1) * f32(0.5)))
    diag = int(math.sqrt(float(cols) * cols + float(rows) * rows))
    radius = min(radius, diag)
    cos_t = cos_t / hist_width
    sin_t = sin_t / hist_width
    hist = np.zeros((d + 2) * (d + 2) * (n + 2), dtype=np.float32)
    half = f32(d // 2) - f32(0.5)
    for i in range(-radius, radius + 1):
        fi = f32(i)
        for j in range(-radius, radius + 1):
            fj = f32(j)
            c_rot = fj * cos_t - fi * sin_t
            r_rot = fj * sin_t + fi * cos_t
            rbin = r_rot + half
            cbin = c_rot + half
            r = py + i
            c = px + j
            if rbin > -1 and rbin < d and cbin > -1 and cbin < d and r > 0 and r < rows - 1 and c > 0 and c < cols - 1:
                dx = buf[off + r * cols + c + 1] - buf[off + r * cols + c - 1]
                dy = buf[off + (r - 1) * cols + c] - buf[off + (r + 1) * cols + c]
                w = f32(math.exp((c_rot * c_rot + r_rot * r_rot) * exp_scale))
                o = _fast_atan2_deg(dy, dx)
                mag = f32(math.sqrt(dx * dx + dy * dy)) * w
                trilinear_vote(hist, d, n, rbin, cbin, (o - ori) * bins_per_rad, mag)
    fold_circular_bins(hist, d, n, out)


@njit(cache=True)
def _raw_batch(buf, offs, rows, cols, level, ptx, pty, ori, scl, out):
    for k in range(level.shape[0]):
        lv = level[k]
        if lv < 0:
            continue  # the caller marks these rows
        _raw_histogram(buf, offs[lv], rows[lv], cols[lv], ptx[k], pty[k], ori[k], scl[k], out[k])


@njit(cache=True)
def _normalise_rows(raw, out, round_uchar, norm_factor):
    f32 = np.float32
    for r in range(raw.shape[0]):
        nrm2 = f32(0.0)
        for k in range(raw.shape[1]):
            nrm2 += raw[r, k] * raw[r, k]
        thr = f32(math.sqrt(nrm2)) * f32(DESCR_MAG_THR)
        nrm2 = f32(0.0)
        for k in range(raw.shape[1]):
            v = min(raw[r, k], thr)
            out[r, k] = v
            nrm2 += v * v
        s = f32(INT_DESCR_FCTR) / max(f32(math.sqrt(norm_factor * nrm2)), _FLT_EPS)
        for k in range(raw.shape[1]):
            v = out[r, k] * s
            if round_uchar:
                v = min(max(np.rint(v), f32(0.0)), f32(255.0))
            out[r, k] = v


# ----------------------------------------------------------------------------- python entry points


def raw_histograms(pyr: Pyramid, level: np.ndarray, ptx: np.ndarray, pty: np.ndarray, ori: np.ndarray,
                   scl: np.ndarray) -> np.ndarray:
    """[N, 128] float32 raw (unnormalised) histograms; rows with ``level < 0`` stay zero."""
    n = len(level)
    out = np.zeros((n, DESCR_SIZE), dtype=np.float32)
    if n:
        _raw_batch(pyr.buf, pyr.offs, pyr.rows, pyr.cols, np.ascontiguousarray(level, dtype=np.int64),
                   np.ascontiguousarray(ptx, dtype=np.float32), np.ascontiguousarray(pty, dtype=np.float32),
                   np.ascontiguousarray(ori, dtype=np.float32), np.ascontiguousarray(scl, dtype=np.float32), out)
    return out


def normalise_sift(raw: np.ndarray, round_uchar: bool = False, norm_factor: float = 1.0) -> np.ndarray:
    """SIFT's normalisation per row: clip at ``0.2 ||h||_2``, rescale to ``||.||_2 = 512``;
    ``round_uchar`` additionally rounds and saturates to 0..255 as OpenCV does. ``norm_factor``
    ``f``: rescale by ``512 / sqrt(f ||clipped||^2)`` instead (the workbench's RGBSIFT blocks:
    ``f = 3``, each block of norm ``512 / sqrt 3``; ``f = 1`` is SIFT's exactly)."""
    raw = np.ascontiguousarray(raw, dtype=np.float32)
    out = np.empty_like(raw)
    if raw.shape[0]:
        _normalise_rows(raw, out, bool(round_uchar), np.float32(norm_factor))
    return out


def l2_rows(desc: np.ndarray) -> np.ndarray:
    """``cv::normalize(row, row, 1, 0, NORM_L2)`` per row (the workbench's
    ``normalize_after_pooling``): divide by the double-precision L2 norm; zero rows stay zero."""
    d = desc.astype(np.float64)
    nrm = np.sqrt((d * d).sum(axis=1, keepdims=True))
    return (d / np.where(nrm > 0, nrm, 1.0)).astype(np.float32)


def cv_normalize_rows(desc: np.ndarray, norm: str = "l2") -> np.ndarray:
    """``cv::normalize(row, row, 1, 0, NORM_L2 | NORM_L1)`` per float32 row, as OpenCV computes it:
    the norm as a double sum (of squares, then sqrt; or of absolute values), the scale
    ``(float)(1 / norm)`` (0 when ``norm <= DBL_EPSILON``), the row times it in float32.
    ``norm: none`` returns the rows unchanged. (:func:`l2_rows`, which divides in double, differs
    from it by at most 1 ulp per value.)"""
    d = np.asarray(desc, dtype=np.float32)
    if norm == "none":
        return d
    d64 = d.astype(np.float64)
    n = np.sqrt((d64 * d64).sum(axis=1)) if norm == "l2" else np.abs(d64).sum(axis=1)
    scale = np.where(n > np.finfo(np.float64).eps, 1.0 / np.where(n > 0, n, 1.0), 0.0).astype(np.float32)
    return d * scale[:, None]


def opencv_angle(angle: np.ndarray) -> np.ndarray:
    """``360 - angle`` with 360 mapped to 0 (OpenCV's calcDescriptors, float32)."""
    a = np.float32(360.0) - np.asarray(angle, dtype=np.float32)
    return np.where(np.abs(a - np.float32(360.0)) < _FLT_EPS, np.float32(0.0), a).astype(np.float32)


def opencv_geometry(x, y, size, angle, octave_field, n_layers: int = 3):
    """Pyramid layout and per-keypoint sampling geometry of OpenCV's ``SIFT::compute`` (and of the
    workbench's ``VanillaSIFT`` with provided keypoints): first octave ``min(0, min o)``, octave
    count ``max o - first + 1``, level ``(o - first)(L + 3) + l``, position and size scaled by
    ``2^-o``. Returns (first_octave, n_octaves, level, ptx, pty, ori, scl)."""
    o, layer = unpack_octave(octave_field)
    first = int(min(0, o.min())) if len(o) else 0
    n_oct = int(o.max()) - first + 1 if len(o) else 1
    if first < -1 or (len(layer) and layer.max() > n_layers + 2):
        raise ValueError("SIFT octave field out of range (octave < -1 or layer > L + 2)")
    scale = octave_scale(o)
    level = (o - first) * (n_layers + 3) + layer
    ptx = np.asarray(x, dtype=np.float32) * scale
    pty = np.asarray(y, dtype=np.float32) * scale
    scl = (np.asarray(size, dtype=np.float32) * scale) * np.float32(0.5)
    return first, n_oct, level, ptx, pty, opencv_angle(angle), scl
