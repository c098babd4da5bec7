"""SURF descriptor kernels (numba): the vectors of :mod:`descbench.descriptors.surf`'s docstring.

Kept apart from the family module so that the descriptor registry (imported by every job and by
the workflow's config validation) never imports numba; only a job computing SURF does.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from descbench.errors import DataError
from descbench.keypoints.surf import SURF_SCALE_PER_SIZE, half_width, as_gray, haar_xy, integral_image, surf_orientations

#: Gaussian weight of the descriptor samples, in units of s (paper: sigma = 3.3 s).
DESC_SIGMA = 3.3


@njit(cache=True)
def _describe(ii, x, y, s, theta, extended, out):
    """Fill ``out[k]`` with the SURF vector of keypoint k (:mod:`descbench.descriptors.surf`)."""
    per = 8 if extended else 4
    for k in range(x.shape[0]):
        sk = s[k]
        c = math.cos(theta[k])
        sn = math.sin(theta[k])
        half = half_width(2.0 * sk)
        vec = out[k]
        vec[:] = 0.0
        for b in range(20):  # v index
            v = (b - 9.5)
            for a in range(20):  # u index
                u = (a - 9.5)
                px = x[k] + (u * c - v * sn) * sk
                py = y[k] + (u * sn + v * c) * sk
                dx, dy = haar_xy(ii, px, py, half)
                w = math.exp(-(u * u + v * v) / (2.0 * DESC_SIGMA * DESC_SIGMA))
                du = (dx * c + dy * sn) * w
                dv = (-dx * sn + dy * c) * w
                base = ((b // 5) * 4 + (a // 5)) * per
                if not extended:
                    vec[base] += du
                    vec[base + 1] += dv
                    vec[base + 2] += abs(du)
                    vec[base + 3] += abs(dv)
                else:
                    o = 0 if dv < 0 else 2
                    vec[base + o] += du
                    vec[base + o + 1] += abs(du)
                    o = 4 if du < 0 else 6
                    vec[base + o] += dv
                    vec[base + o + 1] += abs(dv)
        norm = 0.0
        for d in range(vec.shape[0]):
            norm += vec[d] * vec[d]
        if norm > 0.0:
            inv = 1.0 / math.sqrt(norm)
            for d in range(vec.shape[0]):
                vec[d] *= inv


def surf_describe(gray: np.ndarray, x, y, size, extended: bool = False, upright: bool = False,
                  what: str = "image array") -> np.ndarray:
    """SURF descriptors (float32 [N, 64 or 128], input order) of keypoints (x, y, OpenCV size)
    on a grey image in [0, 255] (:mod:`descbench.descriptors.surf`). ``what`` names the image in errors."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    size = np.asarray(size, dtype=np.float64).reshape(-1)
    dim = 128 if extended else 64
    if not (x.shape == y.shape == size.shape):
        raise DataError(f"{what}: keypoint arrays differ in length (x {x.shape}, y {y.shape}, size {size.shape}); "
                        "fix the keypoint file")
    bad = ~(np.isfinite(x) & np.isfinite(y) & np.isfinite(size) & (size > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{what}: {int(bad.sum())} keypoints have a non-finite position or a size <= 0 "
                        f"(first at row {i}: x={x[i]}, y={y[i]}, size={size[i]}); SURF takes its scale from the size "
                        "(s = 1.2 size / 9): fix or filter the keypoints")
    img = as_gray(gray, what)
    if len(x) == 0:
        return np.zeros((0, dim), dtype=np.float32)
    ii = integral_image(img)
    s = size * SURF_SCALE_PER_SIZE
    if upright:
        theta = np.zeros(len(x))
    else:
        theta = np.radians(surf_orientations(ii, x, y, size))
    out = np.empty((len(x), dim), dtype=np.float64)
    _describe(ii, x, y, s, theta, bool(extended), out)
    return out.astype(np.float32)
