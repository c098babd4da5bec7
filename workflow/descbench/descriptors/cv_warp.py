"""OpenCV 4.6-4.10's fixed-point ``warpAffine`` of a uint8 grey image, recomputed in numba.

``cv::warpAffine(src, M, dsize, INTER_LINEAR, BORDER_REPLICATE)`` of OpenCV up to 4.10 (the C++
DescriptorWorkbench's: its Dockerfile builds 4.10.0; Debian 12's 4.6 behaves the same) does not
interpolate in floating point: it rounds each source position to 1/32 px and interpolates with
integer weights. OpenCV 4.11 replaced that path by a floating-point kernel (opencv/opencv#25984),
and descbench's pip ``cv2`` (5.0) has the new one: for the same matrix its uint8 patches differ
from 4.10's by 1-3 grey levels at about 8-12% of the pixels. :func:`warp_affine_fixed_point`
recomputes the old path, following OpenCV 4.x ``modules/imgproc/src/imgwarp.cpp``
(``warpAffine``, ``WarpAffineInvoker::operator()``, ``remapBilinear`` with ``initInterTab2D``);
the constants are OpenCV's (``INTER_BITS`` 5, ``INTER_TAB_SIZE`` 32, ``AB_BITS`` 10,
``AB_SCALE`` 1024, ``INTER_REMAP_COEF_BITS`` 15):

1. **The inverse map** (``warpAffine`` without ``WARP_INVERSE_MAP``), in float64 in OpenCV's
   order: ``D = M00 M11 - M01 M10``, ``D = D != 0 ? 1 / D : 0``, ``A = [[M11 D, M01 (-D),
   -A00 M02 - A01 M12], [M10 (-D), M00 D, -A10 M02 - A11 M12]]``. Destination pixel ``(x, y)``
   reads source position ``A (x, y, 1)``.
2. **Source positions in 1/1024 px** (``WarpAffineInvoker``): per destination column
   ``adelta[x] = cvRound(A00 x 1024)``, ``bdelta[x] = cvRound(A10 x 1024)``; per destination row
   ``X0 = cvRound((A01 y + A02) 1024) + 16``, ``Y0 = cvRound((A11 y + A12) 1024) + 16`` (16 =
   ``AB_SCALE / INTER_TAB_SIZE / 2``: rounding to the nearest 1/32 px); ``cvRound`` rounds half
   to even (SSE2 ``cvtsd2si``). Then ``X = (X0 + adelta[x]) >> 5``, ``Y = (Y0 + bdelta[x]) >> 5``
   (1/32 px, arithmetic shifts: floor), the integer pixel ``sx = X >> 5``, ``sy = Y >> 5``
   (saturated to int16, OpenCV's ``short`` map) and the fraction ``tx = X & 31``, ``ty = Y & 31``.
3. **Bilinear interpolation** (``remapBilinear``, 8-bit, the integer table of ``initInterTab2D``:
   the float weights ``(1 - ty/32 | ty/32) x (1 - tx/32 | tx/32)`` times 32768, which are exact
   integers summing to 32768): ``w00 = 32 (32 - ty)(32 - tx)``, ``w01 = 32 (32 - ty) tx``,
   ``w10 = 32 ty (32 - tx)``, ``w11 = 32 ty tx`` on the pixels ``(sx, sy)``, ``(sx + 1, sy)``,
   ``(sx, sy + 1)``, ``(sx + 1, sy + 1)``, each coordinate clamped to the image (``BORDER_REPLICATE``'s
   ``borderInterpolate``; inside the image this is the SIMD inlier path, same arithmetic); value
   ``(sum w v + 2^14) >> 15`` saturated to uint8 (``FixedPtCast<int, uchar, 15>``).

Checked bit for bit against Debian's C++ OpenCV 4.6: the workbench wrappers' 62 recorded patches
(``tests/data/dw/workbench_patches.npz``), 300 patches of random matrices and a ``cvRound`` tie
(``tests/data/dw/opencv46_warp.npz``; once also 10,000 random 16-64 px patches of five images, all
equal), and against the test suite's independent numpy port (``opencv46_warp_affine`` in
``tests/data/dw/make_libtorch_fixtures.py``) on random matrices.

Only what the workbench's patch wrappers use is implemented: uint8 single-channel images,
``INTER_LINEAR``, ``BORDER_REPLICATE``; anything else is refused by name. Matrices must be finite
and keep every source position within +-2^19 px (so OpenCV's int32 fixed-point sums cannot
overflow, which C++ leaves undefined); others are refused.

Speed: 10,000 32 x 32 patches from a 1000 x 800 image (random rotations, scales 0.3-5, best of 5
after compilation): 0.049 s in one call (~5 us a patch), against 0.036 s for 10,000
``cv2.warpAffine`` calls (pip cv2 5.0, one thread): 1.4x cv2's time, on a shared 2-core machine;
either is small beside the network.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# OpenCV's constants (imgproc.hpp / imgwarp.cpp)
INTER_BITS = 5
INTER_TAB_SIZE = 1 << INTER_BITS  # 32: positions in 1/32 px
AB_BITS = max(10, INTER_BITS)
AB_SCALE = 1 << AB_BITS  # 1024: the invoker's positions in 1/1024 px
ROUND_DELTA = AB_SCALE // INTER_TAB_SIZE // 2  # 16
INTER_REMAP_COEF_BITS = 15
INTER_REMAP_COEF_SCALE = 1 << INTER_REMAP_COEF_BITS  # 32768: the integer weights' sum
# cv2's flag values of the only supported modes (cv2.INTER_LINEAR, cv2.BORDER_REPLICATE)
INTER_LINEAR = 1
BORDER_REPLICATE = 1
# the largest |source position| (px) accepted: keeps OpenCV's int32 sums in range (module docstring)
MAX_SOURCE_PX = float(1 << 19)


def inverse_affine(m: np.ndarray) -> np.ndarray:
    """float64 [..., 2, 3]: ``warpAffine``'s inverse of forward matrices ``m`` [..., 2, 3], in its
    float64 order of operations (module docstring, step 1); a singular matrix gives ``D = 0``, as
    there (every destination pixel then reads the source's origin)."""
    m = np.asarray(m, np.float64)
    m00, m01, m02, m10, m11, m12 = (m[..., r, c] for r in (0, 1) for c in (0, 1, 2))
    d = m00 * m11 - m01 * m10
    with np.errstate(divide="ignore"):
        d = np.where(d != 0, 1.0 / np.where(d != 0, d, 1.0), 0.0)
    a00, a11 = m11 * d, m00 * d
    a01, a10 = m01 * -d, m10 * -d
    a02 = -a00 * m02 - a01 * m12
    a12 = -a10 * m02 - a11 * m12
    return np.stack([np.stack([a00, a01, a02], -1), np.stack([a10, a11, a12], -1)], -2)


@njit(cache=True)
def _cv_round(v: float) -> int:
    """``cvRound``: the nearest integer, halves to even (callers keep ``v`` within int32)."""
    return int(np.rint(v))


@njit(cache=True)
def _warp_kernel(src, inv, out):
    """``out[i]`` = the fixed-point warp of ``src`` (uint8 [H, W]) through inverse map ``inv[i]``
    (float64 [N, 2, 3]); ``out`` uint8 [N, h, w] (module docstring, steps 2-3)."""
    h, w = src.shape
    oh, ow = out.shape[1], out.shape[2]
    shift = AB_BITS - INTER_BITS
    mask = INTER_TAB_SIZE - 1
    wscale = INTER_REMAP_COEF_BITS - 2 * INTER_BITS  # the table's weights are (..)(..) << 5
    half = 1 << (INTER_REMAP_COEF_BITS - 1)
    adelta = np.empty(ow, np.int64)
    bdelta = np.empty(ow, np.int64)
    for i in range(inv.shape[0]):
        a00, a01, a02 = inv[i, 0, 0], inv[i, 0, 1], inv[i, 0, 2]
        a10, a11, a12 = inv[i, 1, 0], inv[i, 1, 1], inv[i, 1, 2]
        for x in range(ow):
            adelta[x] = _cv_round(a00 * x * AB_SCALE)
            bdelta[x] = _cv_round(a10 * x * AB_SCALE)
        for y in range(oh):
            x0 = _cv_round((a01 * y + a02) * AB_SCALE) + ROUND_DELTA
            y0 = _cv_round((a11 * y + a12) * AB_SCALE) + ROUND_DELTA
            for x in range(ow):
                gx = (x0 + adelta[x]) >> shift
                gy = (y0 + bdelta[x]) >> shift
                sx = min(max(gx >> INTER_BITS, -32768), 32767)  # saturate_cast<short>
                sy = min(max(gy >> INTER_BITS, -32768), 32767)
                tx = gx & mask
                ty = gy & mask
                c0 = min(max(sx, 0), w - 1)  # BORDER_REPLICATE
                c1 = min(max(sx + 1, 0), w - 1)
                r0 = min(max(sy, 0), h - 1)
                r1 = min(max(sy + 1, 0), h - 1)
                v = (((INTER_TAB_SIZE - ty) * (INTER_TAB_SIZE - tx) << wscale) * np.int64(src[r0, c0])
                     + ((INTER_TAB_SIZE - ty) * tx << wscale) * np.int64(src[r0, c1])
                     + (ty * (INTER_TAB_SIZE - tx) << wscale) * np.int64(src[r1, c0])
                     + (ty * tx << wscale) * np.int64(src[r1, c1]))
                out[i, y, x] = min(max((v + half) >> INTER_REMAP_COEF_BITS, 0), 255)


def warp_affine_fixed_point(src: np.ndarray, m: np.ndarray, dsize: tuple[int, int],
                            interpolation: int = INTER_LINEAR, border_mode: int = BORDER_REPLICATE) -> np.ndarray:
    """uint8 ``[h, w]`` for one forward matrix ``m`` [2, 3], or ``[N, h, w]`` for a stack [N, 2, 3]:
    ``cv::warpAffine(src, m, dsize = (w, h), interpolation, borderMode)`` as OpenCV 4.6-4.10
    computes it (module docstring). ``src``: uint8 [H, W]; ``interpolation`` must be
    ``cv2.INTER_LINEAR`` and ``border_mode`` ``cv2.BORDER_REPLICATE`` (the only modes implemented);
    anything else raises ``ValueError`` naming what is supported."""
    src = np.asarray(src)
    if src.dtype != np.uint8 or src.ndim != 2:
        raise ValueError(f"warp_affine_fixed_point: src must be a uint8 single-channel image [H, W], got {src.dtype} "
                         f"{src.shape}; fix: convert to grey uint8 first (cv2.cvtColor, then astype(np.uint8))")
    if interpolation != INTER_LINEAR or border_mode != BORDER_REPLICATE:
        raise ValueError(f"warp_affine_fixed_point: interpolation {interpolation}, border_mode {border_mode}: only "
                         f"INTER_LINEAR ({INTER_LINEAR}) with BORDER_REPLICATE ({BORDER_REPLICATE}) is implemented "
                         "(the workbench's patch warp); fix: use cv2.warpAffine for other modes")
    m = np.asarray(m, np.float64)
    one = m.ndim == 2
    ms = m[None] if one else m
    if ms.ndim != 3 or ms.shape[1:] != (2, 3):
        raise ValueError(f"warp_affine_fixed_point: m must be a 2 x 3 matrix or a stack [N, 2, 3], got shape {m.shape}")
    w, h = (int(v) for v in dsize)
    if w < 1 or h < 1:
        raise ValueError(f"warp_affine_fixed_point: dsize (w, h) must be positive, got {tuple(dsize)}")
    if src.size == 0:
        raise ValueError(f"warp_affine_fixed_point: src is empty ({src.shape}); fix: pass a non-empty image")
    inv = inverse_affine(ms)
    corners = np.array([[0.0, 0.0, 1.0], [w - 1.0, 0.0, 1.0], [0.0, h - 1.0, 1.0], [w - 1.0, h - 1.0, 1.0]])
    with np.errstate(invalid="ignore", over="ignore"):
        reach = np.abs(inv @ corners.T)  # [N, 2, 4]: the source positions of the destination's corners
    bad = ~np.isfinite(ms).all(axis=(1, 2)) | ~(reach <= MAX_SOURCE_PX).all(axis=(1, 2))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"warp_affine_fixed_point: matrix {i} ({ms[i].tolist()}) is not finite or maps the destination "
                         f"to source positions beyond +-{MAX_SOURCE_PX:.0f} px, where OpenCV's int32 fixed point "
                         "overflows; fix: pass finite matrices that keep the patch near the image")
    out = np.empty((len(ms), h, w), np.uint8)
    _warp_kernel(np.ascontiguousarray(src), np.ascontiguousarray(inv), out)
    return out[0] if one else out


@njit(cache=True)
def _fma_f32_kernel(x, a, b, out):
    # x, a, b, out: [R, K] (a, b may be zero-stride broadcasts); patch_sampling.fma_f32 says what it
    # computes. Scalar IEEE float64 operations in this order, with no contraction (numba's default,
    # fastmath off), give the same bits as the numpy expression they replace.
    for r in range(x.shape[0]):
        for k in range(x.shape[1]):
            prod = np.float64(x[r, k]) * np.float64(a[r, k])  # exact: 24 + 24 significant bits
            b64 = np.float64(b[r, k])
            s = prod + b64
            bv = s - prod
            err = (prod - (s - bv)) + (b64 - bv)  # s + err == prod + b64 exactly (TwoSum)
            f = np.float32(s)
            f64 = np.float64(f)
            if err != 0.0 and f64 != s:
                other = np.nextafter(f, np.float32(np.inf) if s > f64 else np.float32(-np.inf))
                if (f64 + np.float64(other)) * 0.5 == s:  # s is a float32 midpoint: err decides
                    f = np.float32(np.nextafter(s, np.inf if err > 0 else -np.inf))
            out[r, k] = f


def fma_f32_rows(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 ``x * a + b`` rounded once, for float32 ``x``, ``a``, ``b`` of one shape ``[R, K]``
    (``a``, ``b`` may be broadcast views): the kernel of
    :func:`descbench.descriptors.patch_sampling.fma_f32`, which defines it."""
    out = np.empty(x.shape, np.float32)
    _fma_f32_kernel(x, a, b, out)
    return out
