"""SURF detector (Fast-Hessian) in numba, from Bay, Tuytelaars, Van Gool, "SURF: Speeded Up Robust
Features" (ECCV 2006) and Bay, Ess, Tuytelaars, Van Gool (CVIU 110(3), 2008).

OpenCV's SURF is non-free: the opencv-contrib wheels export ``cv2.xfeatures2d.SURF_create`` but
calling it raises (built without ``OPENCV_ENABLE_NONFREE``). :func:`make_surf_detector` uses
OpenCV's when it can be created and this implementation otherwise.

Conventions (chosen so that parameters and keypoint fields are comparable with OpenCV's SURF)

* **Image**: grey levels in [0, 255] (uint8, or float on the same scale); the integral image is
  float64 (exact for integer images up to 2**53 / 255 pixels).
* **Box filters** of side ``L`` (``L`` divisible by 3), lobe ``b = L / 3`` (the paper's lobe is
  a third of the filter size), filter top-left corner ``(t, l)``:

  - ``Dyy``: three lobes of height ``b`` stacked vertically (weights +1, -2, +1), width
    ``2b - 1`` for odd ``L`` (the paper's 5 px at ``L = 9``) and ``2b - 2`` for even ``L`` (so that
    the lobe stays centred; ``= 5L/9`` at ``L = 18``), centred horizontally. ``Dxx`` is its
    transpose.
  - ``Dxy``: four ``b x b`` squares around the centre, +1 top-left and bottom-right, -1 the other
    two (``d2/dxdy`` with x right, y down), separated by a central gap of 1 px (odd ``L``) or
    2 px (even ``L``).
  - Responses are divided by the filter area ``L**2`` (the scale normalisation: a box response
    grows as ``L**2`` under image dilation, so this makes responses of different ``L``
    comparable, like the ``sigma**2`` factor of scale-normalised Gaussian derivatives).
  - ``det = Dxx Dyy - (0.9 Dxy)**2`` (the paper's relative weight 0.9), ``trace = Dxx + Dyy``.
    With the [0, 255] image and the ``1 / L**2`` normalisation this is OpenCV's convention, so
    ``hessian_threshold`` (default 100) means what it means in OpenCV's ``hessianThreshold``.

* **Scale space** (OpenCV's layout, so that ``n_octaves``/``n_octave_layers`` are OpenCV's):
  octave ``o = 0..n_octaves-1`` has ``n_octave_layers + 2`` layers of side
  ``L = (9 + 6 k) 2**o`` (``k = 0..n_octave_layers+1``; octave 0 = 9, 15, 21, 27, 33: the paper's
  9, 15, 21, 27 plus one layer for the default 3 middle layers) sampled every ``2**o`` px
  (the sampling step doubles per octave, as in the paper). The paper's own layout (octave ``o``
  starting at the previous octave's second filter, e.g. 15, 27, 39, 51) would duplicate
  detections with 3 middle layers; OpenCV's does not. All layers of an octave share one sample
  grid: sample ``(i, j)`` is the filter centre ``((9 2**o - 1)/2 + j 2**o, (9 2**o - 1)/2 + i 2**o)``
  (half-integer for even ``L``: the centre of an even box lies between pixels).
* **Detection**: a middle-layer sample is a keypoint if ``det > hessian_threshold`` and it is
  strictly greater than its 26 neighbours in the 3x3x3 (x, y, layer) block; only samples whose
  whole 3x3 neighbourhood has the *largest* filter of the block inside the image are tested
  (no zero-padded responses take part in detection).
* **Interpolation**: a quadratic fit of ``det`` in (x, y, layer) around the sample (finite
  differences, Brown & Lowe 2002, as the paper says); the keypoint is kept if every component
  of the offset is at most 1 sample (OpenCV's permissive rule) and moved by it: position
  ``+ offset * 2**o``, filter side ``L + offset_layer * 6 * 2**o``.
* **Keypoint fields** (as OpenCV's SURF reports them): ``size`` = the interpolated filter side
  ``L`` in pixels (so ``size = 9`` is the smallest scale); the SURF scale is
  ``s = 1.2 L / 9 = 1.2 size / 9`` (a 9x9 box approximates a Gaussian of sigma 1.2);
  ``response`` = ``det`` at the sample (not interpolated); ``octave`` = ``o``; ``class_id`` = the
  sign of the Laplacian (``trace``): -1 bright blob, +1 dark blob, 0 flat (OpenCV stores it
  there; descriptors may use it to skip matching blobs of opposite contrast); ``angle`` = the
  SURF orientation (:func:`surf_orientations`), in degrees in [0, 360), measured from the +x
  axis towards +y in image coordinates (y down), i.e. ``atan2(sum dy, sum dx)``: the same
  convention as OpenCV's SIFT ``KeyPoint.angle``. With ``upright`` (U-SURF) the angle is 0: the
  descriptor frame is the image frame.
* **Order**: by response, descending; ties keep the scan order (octave, layer, row, column), so
  the output is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from descbench.errors import DataError

#: SURF scale per unit of keypoint size: ``s = SURF_SCALE_PER_SIZE * size`` (``1.2 / 9``; size =
#: box filter side, a 9x9 box ~ Gaussian sigma 1.2).
SURF_SCALE_PER_SIZE = 1.2 / 9.0
#: The paper's Frobenius-norm weight of Dxy in the determinant (0.9**2 = 0.81).
DXY_WEIGHT = 0.9
#: Orientation: samples every s within radius 6 s, Haar wavelets of nominal side 4 s (pixel-centred,
#: see haar_xy), Gaussian sigma 2 s (paper; OpenCV uses 2.5 s), sliding window of pi/3.
ORI_RADIUS = 6
ORI_SIGMA = 2.0
ORI_WINDOW = math.pi / 3.0

OPENCV_DEFAULTS = {"hessian_threshold": 100.0, "n_octaves": 4, "n_octave_layers": 3, "upright": False}


# ----------------------------------------------------------------------------------------------
# Input checks and the integral image
# ----------------------------------------------------------------------------------------------


def as_gray(gray: np.ndarray, what: str = "image array") -> np.ndarray:
    """A 2-D float64 view of a grey image in [0, 255]; anything else is a :class:`DataError`."""
    arr = np.asarray(gray)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim != 2:
        raise DataError(f"{what} has shape {arr.shape}, not a 2-D grey image; convert it to grey first "
                        "(descbench.datasets.layout.read_image reads images as grey uint8)")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating) or arr.dtype == bool):
        raise DataError(f"{what} has dtype {arr.dtype}; pass a uint8 (or float in [0, 255]) grey image")
    arr = arr.astype(np.float64)
    if arr.size and not np.all(np.isfinite(arr)):
        raise DataError(f"{what} contains NaN/inf; pass a finite grey image in [0, 255]")
    return arr


def integral_image(gray: np.ndarray) -> np.ndarray:
    """``ii[y, x] = sum(gray[:y, :x])``, shape (H+1, W+1), float64 (the zero first row/column
    make every box sum four lookups without special cases)."""
    img = as_gray(gray)
    ii = np.zeros((img.shape[0] + 1, img.shape[1] + 1), dtype=np.float64)
    ii[1:, 1:] = img.cumsum(axis=0).cumsum(axis=1)
    return ii


@njit(cache=True)
def _clip_box(ii, r0, c0, r1, c1):
    """The box rows [r0, r1) x columns [c0, c1) clipped to the image of integral image ``ii``."""
    h = ii.shape[0] - 1
    w = ii.shape[1] - 1
    return min(max(r0, 0), h), min(max(c0, 0), w), min(max(r1, 0), h), min(max(c1, 0), w)


@njit(cache=True)
def box_sum(ii, r0, c0, r1, c1):
    """Sum of the pixels in rows [r0, r1) x columns [c0, c1), clipped to the image: pixels outside
    the image count as 0 (zero padding, by clamping the integral-image lookups)."""
    r0, c0, r1, c1 = _clip_box(ii, r0, c0, r1, c1)
    if r1 <= r0 or c1 <= c0:
        return 0.0
    return ii[r1, c1] - ii[r0, c1] - ii[r1, c0] + ii[r0, c0]


@njit(cache=True)
def hessian_boxes(ii, t, l, size):
    """(Dxx, Dyy, Dxy) of the box filters of side ``size`` with top-left pixel (row t, column l),
    each divided by ``size**2`` (module docstring: lobe ``b = size/3``; see there for the layout)."""
    b = size // 3
    wv = 2 * b - 1 if size % 2 == 1 else 2 * b - 2
    m = (size - wv) // 2
    # a lobe pattern (+1, -2, +1) is the whole strip minus 3x its middle third
    dyy = box_sum(ii, t, l + m, t + size, l + m + wv) - 3.0 * box_sum(ii, t + b, l + m, t + 2 * b, l + m + wv)
    dxx = box_sum(ii, t + m, l, t + m + wv, l + size) - 3.0 * box_sum(ii, t + m, l + b, t + m + wv, l + 2 * b)
    gap = 1 if size % 2 == 1 else 2
    h = (size - gap) // 2  # first row/column after the top/left squares
    a0 = h - b
    a1 = h + gap
    dxy = (box_sum(ii, t + a0, l + a0, t + h, l + h) + box_sum(ii, t + a1, l + a1, t + a1 + b, l + a1 + b)
           - box_sum(ii, t + a0, l + a1, t + h, l + a1 + b) - box_sum(ii, t + a1, l + a0, t + a1 + b, l + h))
    inv = 1.0 / (size * size)
    return dxx * inv, dyy * inv, dxy * inv


@njit(cache=True)
def _octave_responses(ii, octave, n_layers, nr, nc):
    """det and trace of every layer of an octave on its shared sample grid (module docstring)."""
    st = 1 << octave
    det = np.empty((n_layers, nr, nc), dtype=np.float64)
    tr = np.empty((n_layers, nr, nc), dtype=np.float64)
    w2 = DXY_WEIGHT * DXY_WEIGHT
    for k in range(n_layers):
        size = (9 + 6 * k) * st
        shift = 3 * k  # layer k's top-left lies 3k samples before layer 0's: (L_k - L_0)/2 = 3k st
        for i in range(nr):
            t = (i - shift) * st
            for j in range(nc):
                dxx, dyy, dxy = hessian_boxes(ii, t, (j - shift) * st, size)
                det[k, i, j] = dxx * dyy - w2 * dxy * dxy
                tr[k, i, j] = dxx + dyy
    return det, tr


@njit(cache=True)
def _solve3(a, b):
    """x with a x = b for a 3x3 ``a`` (Cramer's rule); ok False if ``a`` is singular."""
    d = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]) - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
         + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
    x = np.zeros(3)
    if abs(d) < 1e-300:
        return x, False
    for c in range(3):
        m = a.copy()
        for r in range(3):
            m[r, c] = b[r]
        x[c] = (m[0, 0] * (m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]) - m[0, 1] * (m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0])
                + m[0, 2] * (m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0])) / d
    return x, True


@njit(cache=True)
def _octave_keypoints(det, tr, octave, threshold, height, width):
    """Thresholded 3x3x3 maxima of one octave, interpolated; returns (x, y, size, response, sign)."""
    n_layers, nr, nc = det.shape
    st = 1 << octave
    c0 = (9.0 * st - 1.0) / 2.0
    cap = 64
    out = np.empty((cap, 5), dtype=np.float64)
    n = 0
    a = np.empty((3, 3))
    g = np.empty(3)
    for k in range(1, n_layers - 1):
        big = (9 + 6 * (k + 1)) * st
        sh = 3 * (k + 1)
        # the largest filter of the block must fit at rows i-1 and i+1: (i-1-sh) st >= 0 and
        # (i+1-sh) st + big <= H
        i_lo = max(1, sh + 1)
        i_hi = min(nr - 2, (height - big) // st + sh - 1)
        j_lo = max(1, sh + 1)
        j_hi = min(nc - 2, (width - big) // st + sh - 1)
        for i in range(i_lo, i_hi + 1):
            for j in range(j_lo, j_hi + 1):
                v = det[k, i, j]
                if v <= threshold:
                    continue
                is_max = True
                for dk in range(-1, 2):
                    for di in range(-1, 2):
                        for dj in range(-1, 2):
                            if (dk != 0 or di != 0 or dj != 0) and det[k + dk, i + di, j + dj] >= v:
                                is_max = False
                if not is_max:
                    continue
                # quadratic fit in (x, y, layer), finite differences in sample units
                g[0] = (det[k, i, j + 1] - det[k, i, j - 1]) / 2.0
                g[1] = (det[k, i + 1, j] - det[k, i - 1, j]) / 2.0
                g[2] = (det[k + 1, i, j] - det[k - 1, i, j]) / 2.0
                a[0, 0] = det[k, i, j + 1] + det[k, i, j - 1] - 2.0 * v
                a[1, 1] = det[k, i + 1, j] + det[k, i - 1, j] - 2.0 * v
                a[2, 2] = det[k + 1, i, j] + det[k - 1, i, j] - 2.0 * v
                a[0, 1] = (det[k, i + 1, j + 1] - det[k, i + 1, j - 1] - det[k, i - 1, j + 1] + det[k, i - 1, j - 1]) / 4.0
                a[0, 2] = (det[k + 1, i, j + 1] - det[k + 1, i, j - 1] - det[k - 1, i, j + 1] + det[k - 1, i, j - 1]) / 4.0
                a[1, 2] = (det[k + 1, i + 1, j] - det[k + 1, i - 1, j] - det[k - 1, i + 1, j] + det[k - 1, i - 1, j]) / 4.0
                a[1, 0] = a[0, 1]
                a[2, 0] = a[0, 2]
                a[2, 1] = a[1, 2]
                off, ok = _solve3(a, -g)
                if not ok or abs(off[0]) > 1.0 or abs(off[1]) > 1.0 or abs(off[2]) > 1.0:
                    continue
                size = (9 + 6 * k) * st + off[2] * 6.0 * st
                if size <= 0.0:
                    continue
                if n == cap:
                    cap *= 2
                    grown = np.empty((cap, 5), dtype=np.float64)
                    grown[:n] = out[:n]
                    out = grown
                out[n, 0] = c0 + (j + off[0]) * st
                out[n, 1] = c0 + (i + off[1]) * st
                out[n, 2] = size
                out[n, 3] = v
                t = tr[k, i, j]
                out[n, 4] = 1.0 if t > 0 else (-1.0 if t < 0 else 0.0)
                n += 1
    return out[:n]


# ----------------------------------------------------------------------------------------------
# Haar wavelets and the orientation
# ----------------------------------------------------------------------------------------------


@njit(cache=True)
def _box_mean(ii, r0, c0, r1, c1):
    """Mean over the part of the box inside the image, and that part's area (0: none)."""
    r0, c0, r1, c1 = _clip_box(ii, r0, c0, r1, c1)
    area = (r1 - r0) * (c1 - c0)
    if area <= 0:
        return 0.0, 0
    return (ii[r1, c1] - ii[r0, c1] - ii[r1, c0] + ii[r0, c0]) / area, area


@njit(cache=True)
def haar_xy(ii, x, y, half):
    """Haar wavelet responses (dx, dy) of half-width ``half`` centred on the pixel nearest (x, y).

    With ``(cx, cy) = floor((x, y) + 0.5)`` and the square ``[cx - half, cx + half]`` x
    ``[cy - half, cy + half]``: dx = mean(columns cx+1..cx+half) - mean(columns cx-half..cx-1),
    dy likewise with rows (the centre column/row is left out). The wavelet is centred exactly on
    a pixel, so it is symmetric under flips and 90-degree rotations of the image (an even-sided
    wavelet, as in the paper's "side 2s", would be centred between pixels, half a pixel off in
    one direction, which breaks that symmetry); its footprint ``2 half + 1`` is the nominal side
    plus one (:func:`half_width`). Means over the pixels inside the image: near the border
    only the in-image part is used (no artificial edge against a zero padding), and a half
    entirely outside gives 0. Means (not sums) make the response independent of the side up to
    the image gradient, which is all the normalised orientation and descriptor need.
    """
    cx = int(math.floor(x + 0.5))
    cy = int(math.floor(y + 0.5))
    r0 = cy - half
    r1 = cy + half + 1
    c0 = cx - half
    c1 = cx + half + 1
    ml, al = _box_mean(ii, r0, c0, r1, cx)
    mr, ar = _box_mean(ii, r0, cx + 1, r1, c1)
    mt, at = _box_mean(ii, r0, c0, cy, c1)
    mb, ab = _box_mean(ii, cy + 1, c0, r1, c1)
    dx = mr - ml if (al > 0 and ar > 0) else 0.0
    dy = mb - mt if (at > 0 and ab > 0) else 0.0
    return dx, dy


@njit(cache=True)
def half_width(side):
    """Half-width (>= 1) of the pixel-centred wavelet of nominal side ``side``: round(side / 2)."""
    return max(1, int(math.floor(side / 2.0 + 0.5)))


@njit(cache=True)
def _orientation(ii, x, y, s):
    """SURF orientation (radians, [0, 2 pi)) of a keypoint at (x, y) with scale s.

    Haar responses of nominal side 4s (:func:`haar_xy`) at the grid points ``(x + i s, y + j s)``, ``i**2 + j**2 <= 36``
    (radius 6s), weighted by a Gaussian of sigma 2s centred at the keypoint, are summed within
    every window of angular width pi/3 starting at a response's angle (an exact sliding window
    over the sorted response angles); the orientation is the direction of the longest sum
    vector (Bay et al. 2008, section 3.1). 0 when no response is non-zero.
    """
    half = half_width(4.0 * s)
    nmax = (2 * ORI_RADIUS + 1) ** 2
    ang = np.empty(nmax)
    vx = np.empty(nmax)
    vy = np.empty(nmax)
    n = 0
    for i in range(-ORI_RADIUS, ORI_RADIUS + 1):
        for j in range(-ORI_RADIUS, ORI_RADIUS + 1):
            r2 = i * i + j * j
            if r2 > ORI_RADIUS * ORI_RADIUS:
                continue
            dx, dy = haar_xy(ii, x + i * s, y + j * s, half)
            if dx == 0.0 and dy == 0.0:
                continue
            wgt = math.exp(-r2 / (2.0 * ORI_SIGMA * ORI_SIGMA))
            vx[n] = dx * wgt
            vy[n] = dy * wgt
            a = math.atan2(dy, dx)
            ang[n] = a + 2.0 * math.pi if a < 0 else a
            n += 1
    if n == 0:
        return 0.0
    order = np.argsort(ang[:n], kind="mergesort")
    sa = ang[:n][order]
    sx = vx[:n][order]
    sy = vy[:n][order]
    best = -1.0
    bx = 0.0
    by = 0.0
    # two pointers over the angles unrolled twice around the circle
    end = 0
    sumx = 0.0
    sumy = 0.0
    for start in range(n):
        if end < start:
            end = start
            sumx = 0.0
            sumy = 0.0
        while end < start + n:
            e = end % n
            ae = sa[e] + (2.0 * math.pi if end >= n else 0.0)
            if ae - sa[start] >= ORI_WINDOW:
                break
            sumx += sx[e]
            sumy += sy[e]
            end += 1
        m = sumx * sumx + sumy * sumy
        if m > best:
            best = m
            bx = sumx
            by = sumy
        # slide: drop the start sample before moving on
        sumx -= sx[start]
        sumy -= sy[start]
    a = math.atan2(by, bx)
    return a + 2.0 * math.pi if a < 0 else a


@njit(cache=True)
def _orientations(ii, x, y, s):
    out = np.empty(x.shape[0])
    for k in range(x.shape[0]):
        out[k] = _orientation(ii, x[k], y[k], s[k])
    return out


def surf_orientations(ii: np.ndarray, x: np.ndarray, y: np.ndarray, size: np.ndarray) -> np.ndarray:
    """SURF orientations in degrees [0, 360) (module docstring) of keypoints with OpenCV ``size``
    (SURF scale ``s = 1.2 size / 9``) on the integral image ``ii``."""
    s = np.asarray(size, dtype=np.float64) * SURF_SCALE_PER_SIZE
    rad = _orientations(ii, np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), s)
    deg = np.degrees(rad)
    return np.where(deg >= 360.0, deg - 360.0, deg)


# ----------------------------------------------------------------------------------------------
# The detector
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SurfKeypoints:
    """Keypoints as arrays (OpenCV KeyPoint fields; module docstring for their meaning)."""

    x: np.ndarray  # float32
    y: np.ndarray  # float32
    size: np.ndarray  # float32, box filter side L
    angle: np.ndarray  # float32, degrees
    response: np.ndarray  # float32, det(H) at the sample
    octave: np.ndarray  # int32
    class_id: np.ndarray  # int32, sign of the Laplacian

    def __len__(self) -> int:
        return int(self.x.shape[0])


def _check_params(hessian_threshold: float, n_octaves: int, n_octave_layers: int) -> None:
    if not (np.isfinite(hessian_threshold) and hessian_threshold >= 0):
        raise DataError(f"SURF hessian_threshold {hessian_threshold!r} must be a finite number >= 0; fix surf_detector_params")
    if int(n_octaves) < 1 or int(n_octave_layers) < 1:
        raise DataError(f"SURF n_octaves ({n_octaves}) and n_octave_layers ({n_octave_layers}) must be >= 1; "
                        "fix surf_detector_params")


def hessian_keypoints(gray: np.ndarray, hessian_threshold: float = 100.0, n_octaves: int = 4,
                      n_octave_layers: int = 3, ii: np.ndarray | None = None) -> np.ndarray:
    """Fast-Hessian keypoints, unsorted: rows (x, y, size, response, laplacian sign, octave)."""
    _check_params(hessian_threshold, n_octaves, n_octave_layers)
    img = as_gray(gray)
    height, width = img.shape
    if ii is None:
        ii = integral_image(img)
    parts = []
    n_layers = int(n_octave_layers) + 2
    for o in range(int(n_octaves)):
        st = 1 << o
        l0 = 9 * st
        nr = (height - l0) // st + 1
        nc = (width - l0) // st + 1
        # fewer than 3x3 samples: no neighbourhood to test here nor in any coarser octave
        if nr < 3 or nc < 3:
            break
        det, tr = _octave_responses(ii, o, n_layers, nr, nc)
        kp = _octave_keypoints(det, tr, o, float(hessian_threshold), height, width)
        parts.append(np.column_stack([kp, np.full(len(kp), o, dtype=np.float64)]))
    if not parts:
        return np.zeros((0, 6))
    return np.concatenate(parts)


def detect_surf(gray: np.ndarray, hessian_threshold: float = 100.0, n_octaves: int = 4, n_octave_layers: int = 3,
                upright: bool = False, mask: np.ndarray | None = None) -> SurfKeypoints:
    """SURF keypoints of a grey image (fields and conventions: module docstring).

    ``mask`` (optional, same shape as the image): keep keypoints whose rounded position is on a
    non-zero mask pixel. Sorted by response, descending (stable).
    """
    img = as_gray(gray)
    ii = integral_image(img)
    kp = hessian_keypoints(img, hessian_threshold, n_octaves, n_octave_layers, ii=ii)
    if mask is not None:
        m = np.asarray(mask)
        if m.shape[:2] != img.shape:
            raise DataError(f"SURF mask has shape {m.shape}, the image {img.shape}; pass a mask of the image's size")
        xi = np.clip(np.floor(kp[:, 0] + 0.5).astype(np.int64), 0, img.shape[1] - 1)
        yi = np.clip(np.floor(kp[:, 1] + 0.5).astype(np.int64), 0, img.shape[0] - 1)
        kp = kp[m[yi, xi] != 0]
    kp = kp[np.argsort(-kp[:, 3], kind="stable")]
    if upright:
        angle = np.zeros(len(kp))
    else:
        angle = surf_orientations(ii, kp[:, 0], kp[:, 1], kp[:, 2])
    return SurfKeypoints(
        x=kp[:, 0].astype(np.float32), y=kp[:, 1].astype(np.float32), size=kp[:, 2].astype(np.float32),
        angle=angle.astype(np.float32), response=kp[:, 3].astype(np.float32),
        octave=kp[:, 5].astype(np.int32), class_id=kp[:, 4].astype(np.int32),
    )


def to_cv_keypoints(kps: SurfKeypoints) -> list:
    """OpenCV KeyPoints with every field of ``kps``."""
    import cv2

    return [cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), int(o), int(c))
            for x, y, s, a, r, o, c in zip(kps.x, kps.y, kps.size, kps.angle, kps.response, kps.octave, kps.class_id)]


class SurfDetector:
    """This module's SURF behind OpenCV's ``detect(gray, mask)`` interface."""

    def __init__(self, hessian_threshold: float = 100.0, n_octaves: int = 4, n_octave_layers: int = 3,
                 upright: bool = False):
        _check_params(hessian_threshold, n_octaves, n_octave_layers)
        self.hessian_threshold = float(hessian_threshold)
        self.n_octaves = int(n_octaves)
        self.n_octave_layers = int(n_octave_layers)
        self.upright = bool(upright)

    def detect_arrays(self, gray: np.ndarray, mask: np.ndarray | None = None) -> SurfKeypoints:
        return detect_surf(gray, self.hessian_threshold, self.n_octaves, self.n_octave_layers, self.upright, mask)

    def detect(self, gray: np.ndarray, mask: np.ndarray | None = None) -> list:
        return to_cv_keypoints(self.detect_arrays(gray, mask))


def opencv_surf(params: dict | None = None, extended: bool = False):
    """OpenCV's SURF object if this OpenCV build has the non-free module, else None."""
    import cv2

    p = {**OPENCV_DEFAULTS, **(params or {})}
    xf = getattr(cv2, "xfeatures2d", None)
    if xf is None or not hasattr(xf, "SURF_create"):
        return None
    try:
        return xf.SURF_create(hessianThreshold=float(p["hessian_threshold"]), nOctaves=int(p["n_octaves"]),
                              nOctaveLayers=int(p["n_octave_layers"]), extended=bool(extended),
                              upright=bool(p["upright"]))
    except cv2.error:  # exported but built without OPENCV_ENABLE_NONFREE
        return None


def make_surf_detector(params: dict | None = None):
    """The ``surf`` detector (schema names: hessian_threshold, n_octaves, n_octave_layers,
    upright): OpenCV's when this OpenCV build has it, else :class:`SurfDetector`."""
    p = {**OPENCV_DEFAULTS, **(params or {})}
    cv = opencv_surf(p)
    if cv is not None:
        return cv
    return SurfDetector(p["hessian_threshold"], p["n_octaves"], p["n_octave_layers"], p["upright"])
