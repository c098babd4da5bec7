"""Patch sampling for patch-based (learned) descriptors: the workbench's two conventions.

A patch descriptor network sees an ``n x n`` grey patch around each keypoint. How the patch is
cut from the image (geometry) and how its intensities are scaled (normalisation) is a
:class:`PatchConvention`. The C++ DescriptorWorkbench has two, read from its source (paraphrased):

**Geometry** (both wrappers, ``src/core/descriptor/extractors/wrappers/DNNPatchWrapper.cpp``
``makePatch_`` and ``LibTorchWrapper.cpp`` ``makePatch``): one ``cv::warpAffine`` of the *uint8*
grey image (``INTER_LINEAR``, ``BORDER_REPLICATE``, output ``n x n`` uint8) with the 2 x 3 matrix
of :func:`patch_affine`: the image is rotated by ``a`` degrees and scaled by ``scale = n / S``
about the keypoint, and the keypoint is moved to ``(n/2, n/2)``, where

    S = max(min_side_px, support_multiplier * max(size, min_size_px))     (float32, as in C++)
    a = -angle if rotate_to_upright and angle >= 0 else 0                 (angle -1 = unset: 0)

A destination pixel ``(u, v)`` samples the image at ``kp + [[cos a, -sin a], [sin a, cos a]]
((u, v) - n/2) / scale`` (image x right, y down): with angle 90 a step right in the patch is a step
up in the image and a step down is a step right. The keypoint lands on the *pixel centre*
``n/2`` (16 for n = 32), not on the grid centre ``(n - 1)/2``. Because the warp is done on the
uint8 image, each patch value is the interpolation rounded to uint8 before it is divided by 255.

**The warp itself** (``warp``): the workbench's OpenCV (4.10 in its Dockerfile; Debian's 4.6
here alike) computes ``warpAffine`` in fixed point (source positions rounded to 1/32 px, integer
weights); OpenCV 4.11 and later, descbench's pip ``cv2`` 5.0 among them, in floating point
(opencv/opencv#25984): for the same matrix the uint8 patches differ by 1-3 grey levels at about
8-12% of the pixels, which moves the workbench's unit HardNet / SOSNet rows by up to 0.026 and
its DNN_PATCH rows by up to 9.1e-5. ``opencv_fixed_point`` (the default of both named
conventions, which reproduce the workbench) is the old path recomputed,
:func:`descbench.descriptors.cv_warp.warp_affine_fixed_point`; ``opencv`` is the installed
``cv2.warpAffine`` (the dataclass's default for any other convention).

**Normalisation** (the patch as float32 in [0, 1], ``p = u8 * float32(1/255)``):

* ``per_patch``: ``(p - mu) / d`` with ``mu``, ``sigma`` the patch mean and *population* standard
  deviation (``cv::meanStdDev``), ``d = max(sigma, 1e-6)`` in the DNN wrapper (``eps_mode`` "max")
  or ``sigma + 1e-8`` in the LibTorch wrapper ("add");
* ``mean_std``: ``(p - mean) / std`` (mean, std as float32, C++ floats);
* ``none``: ``p``.

The two named conventions (factories :func:`dnn_convention`, :func:`libtorch_convention`; the
workbench's defaults of each: :data:`DNN`, :data:`LIBTORCH`):

* ``DNN`` (``DNNPatchWrapper``, the workbench's ONNX path via ``cv::dnn``): ``min_size_px`` 1,
  ``min_side_px`` 1, the configured ``support_multiplier`` (``DescriptorParams::
  dnn_support_multiplier``, default 1.0 in ``include/thesis_project/types.hpp``: the side is the
  keypoint size), per-patch eps 1e-6 as a floor; ``mean_std`` is applied by the workbench only
  when mean != 0 or std != 1 (with 0 / 1 it is the identity anyway).
* ``LIBTORCH`` (``LibTorchWrapper``, HardNet / SOSNet through TorchScript): ``scale = n / size``
  (it converts the size to a radius and maps it to n/2: ``n / (2 * size/2)``), so the side is the
  keypoint size itself; size clamped at 1e-3, no side clamp. Its constructor takes a support
  multiplier (``LibTorchFactory.cpp`` passes 2.0 for HardNet and SOSNet) that ``makePatch`` never
  reads: the convention's ``support_multiplier`` is 1 whatever the factory passes. Normalisation:
  ``per_patch`` with ``sigma + 1e-8`` when ``per_patch_standardize`` (the factory's HardNet and
  SOSNet setting), else ImageNet's single-channel ``(p - 0.485) / 0.229`` (its mean/std
  arguments are not read either).

**Each wrapper's own arithmetic** (``wrapper``: ``dnn`` or ``libtorch``, set by the two named
conventions). The matrices are algebraically identical but computed in a different order, and
their last bits (up to ~1e-11 in an entry) can move a source position across a rounding boundary
of the warp (the fixed-point warp's 1/32 px, ``INTER_BITS``, or the float warp's own rounding), so
a pixel of the uint8 patch by one level (measured before this was followed: up to 2.6e-4 on 13 of
13,483 unit HardNet rows of KeyNet keypoints; up to 1.4e-3 on the flip rows of
``tests/data/dw/workbench_libtorch.npz``). :func:`patch_affine` follows each:

* ``dnn`` (``DNNPatchWrapper.cpp:60-62``): ``getRotationMatrix2D(kp, a, scale)``, whose
  translation is ``(1 - alpha) x - beta y`` / ``beta x + (1 - alpha) y``, then ``+= n/2 - x`` /
  ``+= n/2 - y``;
* ``libtorch`` (``LibTorchWrapper.cpp:121-137``): ``scale = n / (2 (size / 2))`` (the radius in
  float32), ``getRotationMatrix2D((0, 0), a, scale)``, translation set to
  ``(n/2 - M00 x) - M01 y`` / ``(n/2 - M10 x) - M11 y``.

Both standardise with an OpenCV matrix expression, ``(p - m) / d``, which OpenCV evaluates as one
``convertTo(p, alpha = 1/d, beta = -m (1/d))`` (``MatExpr``: ``/ d`` multiplies the expression by
``1./d``; assigning an ``AddEx`` with a scalar calls ``convertTo``), i.e. in float32
``p * float(alpha) + float(beta)``, fused (one rounding: ``v_fma`` in OpenCV's AVX2 build, which its
dispatcher runs on any AVX2 CPU); :func:`normalise_patches` computes exactly that
(:func:`fma_f32`). ``m``, ``d`` per wrapper: ``dnn`` per_patch ``float(mu)``, ``float(max(sigma,
1e-6))``; ``libtorch`` per_patch ``mu``, ``sigma + 1e-8`` (doubles); ``mean_std`` (both) the float
mean and std. ``mu`` and ``sigma`` are ``cv::meanStdDev``'s: ``mu = sum / N``, ``sigma =
sqrt(max(sumsq / N - mu^2, 0))`` in double. A flat patch is therefore *not* exactly zero: ``p *
float(1e8) + float(-p 1e8)`` leaves the float32 rounding of ``p 1e8`` (up to +-1) in the LibTorch
convention, as the workbench does. The fixture ``tests/data/dw/workbench_patches.npz`` (OpenCV
4.6, the workbench's wrappers' ``makePatch`` / ``makePatch_`` arithmetic compiled in C++) is
matched bit for bit: the matrices, the uint8 patches (with ``warp: opencv_fixed_point``) and the
standardised patches.

**HPatches patches** (:func:`resize_hpatches_patches`): hpatches-benchmark's learned baselines do
not re-sample about a keypoint; they resize the whole 65 x 65 patch to the network input with
``cv2.resize`` (default ``INTER_LINEAR``), e.g. HardNet's HPatches extraction script.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints

NORMALISATIONS = ("none", "per_patch", "mean_std")
EPS_MODES = ("max", "add")
WRAPPERS = ("dnn", "libtorch")
# the uint8 warp (module docstring): OpenCV 4.6-4.10's fixed-point warpAffine (cv_warp), or the installed cv2's
WARPS = ("opencv_fixed_point", "opencv")
WORKBENCH_WARP = "opencv_fixed_point"


@dataclass(frozen=True)
class PatchConvention:
    """How a keypoint's ``n x n`` patch is sampled and normalised (module docstring)."""

    input_size: int            # N: patches are N x N pixels
    support_multiplier: float  # S = max(min_side_px, support_multiplier * max(size, min_size_px)) image px
    min_size_px: float         # keypoint size clamp (DNN wrapper: 1.0; LibTorch wrapper: 1e-3)
    min_side_px: float         # side clamp (DNN wrapper: 1.0; LibTorch wrapper: 0.0)
    rotate_to_upright: bool    # angle >= 0: rotated by -angle about the keypoint; angle < 0 (unset, -1): 0
    normalisation: str         # "per_patch" (x - mean) / d, "mean_std" (x - mean) / std, "none"
    mean: float                # for mean_std
    std: float                 # for mean_std
    std_eps: float             # per_patch: d = max(sigma, eps) ("max") or sigma + eps ("add")
    eps_mode: str              # "max" | "add"
    wrapper: str = "dnn"       # whose order of float operations: "dnn" (DNNPatchWrapper) | "libtorch" (LibTorchWrapper)
    warp: str = "opencv"       # the uint8 warp: "opencv_fixed_point" (OpenCV <= 4.10, the workbench's) | "opencv" (cv2's)

    def __post_init__(self):
        # a programming error, not a user input (configs are checked by the families' schemas)
        assert self.normalisation in NORMALISATIONS, self.normalisation
        assert self.eps_mode in EPS_MODES, self.eps_mode
        assert self.wrapper in WRAPPERS, self.wrapper
        assert self.warp in WARPS, self.warp
        assert int(self.input_size) == self.input_size and self.input_size >= 1, self.input_size


# The DNN wrapper's fixed constants (DNNPatchWrapper.cpp makePatch_): size and side clamps, eps.
DNN_MIN_SIZE_PX = 1.0
DNN_MIN_SIDE_PX = 1.0
DNN_STD_EPS = 1e-6
# The LibTorch wrapper's fixed constants (LibTorchWrapper.cpp makePatch / matToTensor).
LIBTORCH_MIN_SIZE_PX = 1e-3
LIBTORCH_STD_EPS = 1e-8
IMAGENET_GREY_MEAN = 0.485
IMAGENET_GREY_STD = 0.229


def dnn_convention(input_size: int, support_multiplier: float, rotate_to_upright: bool, normalisation: str,
                   mean: float | None = None, std: float | None = None, warp: str = WORKBENCH_WARP) -> PatchConvention:
    """The DNN wrapper's convention (``DNNPatchWrapper::makePatch_``) with the given settings;
    ``mean`` / ``std`` are read only for ``mean_std`` (elsewhere the identity 0 / 1); the warp the
    workbench's OpenCV's unless ``warp`` says otherwise."""
    if normalisation == "mean_std":
        assert mean is not None and std is not None, "mean_std needs mean and std"
    else:
        mean, std = 0.0, 1.0  # unused: the identity
    return PatchConvention(int(input_size), float(support_multiplier), DNN_MIN_SIZE_PX, DNN_MIN_SIDE_PX,
                           bool(rotate_to_upright), normalisation, float(mean), float(std), DNN_STD_EPS, "max", "dnn", warp)


def libtorch_convention(input_size: int, rotate_to_upright: bool, per_patch_standardize: bool,
                        warp: str = WORKBENCH_WARP) -> PatchConvention:
    """The LibTorch wrapper's convention (``LibTorchWrapper::makePatch`` / ``matToTensor``): side =
    keypoint size (any support multiplier given to its constructor is ignored), size clamp 1e-3, no
    side clamp; ``per_patch`` with ``sigma + 1e-8``, else ImageNet's grey ``(p - 0.485) / 0.229``;
    the warp the workbench's OpenCV's unless ``warp`` says otherwise."""
    if per_patch_standardize:
        normalisation, mean, std = "per_patch", 0.0, 1.0  # mean, std unused
    else:
        normalisation, mean, std = "mean_std", IMAGENET_GREY_MEAN, IMAGENET_GREY_STD
    return PatchConvention(int(input_size), 1.0, LIBTORCH_MIN_SIZE_PX, 0.0, bool(rotate_to_upright), normalisation,
                           mean, std, LIBTORCH_STD_EPS, "add", "libtorch", warp)


# The workbench's DNN patch defaults (types.hpp DescriptorParams: dnn_input_size 32,
# dnn_support_multiplier 1.0, dnn_rotate_upright true, dnn_per_patch_standardize false with
# dnn_mean 0 / dnn_std 1, i.e. no normalisation); the onnx family's schema defaults are these.
DNN = dnn_convention(32, 1.0, True, "none")
# The workbench's LibTorch HardNet / SOSNet (LibTorchFactory.cpp: 32 x 32, upright, per-patch).
LIBTORCH = libtorch_convention(32, True, True)


def with_input_size(conv: PatchConvention, n: int) -> PatchConvention:
    """``conv`` with patches of ``n x n`` pixels."""
    return replace(conv, input_size=int(n))


def patch_side(size: float, conv: PatchConvention) -> float:
    """``S = max(min_side_px, support_multiplier * max(size, min_size_px))`` in float32 (C++ floats)."""
    f = np.float32
    return float(max(f(conv.min_side_px), f(conv.support_multiplier) * max(f(size), f(conv.min_size_px))))


def patch_rotation(angle: float, conv: PatchConvention) -> float:
    """The rotation (degrees) given to ``getRotationMatrix2D``: ``-angle`` for an upright patch of a
    keypoint with an angle (>= 0), else 0 (angle < 0: OpenCV's unset -1)."""
    return -float(np.float32(angle)) if conv.rotate_to_upright and angle >= 0 else 0.0


def patch_affine(x: float, y: float, size: float, angle: float, conv: PatchConvention) -> np.ndarray:
    """float64 2 x 3 matrix mapping image to patch coordinates (``warpAffine``'s forward map):

        scale = n / S,  alpha = scale cos(a),  beta = scale sin(a)   (a = :func:`patch_rotation`, radians)
        M = [[ alpha, beta, t_x],
             [-beta,  alpha, t_y]]

    the keypoint going to ``(n/2, n/2)``, with the translation in the order of operations of
    ``conv.wrapper`` (module docstring): ``dnn``: ``t_x = ((1 - alpha) x - beta y) + (n/2 - x)``,
    ``t_y = (beta x + (1 - alpha) y) + (n/2 - y)`` (``cv2.getRotationMatrix2D((x, y), a, scale)``
    plus ``(n/2 - x, n/2 - y)``); ``libtorch``: ``t_x = (n/2 - alpha x) - beta y``, ``t_y = (n/2 -
    (-beta) x) - alpha y`` (and ``scale = n / (2 * float32(size / 2))``, equal to ``n / S``). x, y are
    taken as float32 (``cv::Point2f``)."""
    n = conv.input_size
    x, y = float(np.float32(x)), float(np.float32(y))
    a = patch_rotation(angle, conv) * (math.pi / 180.0)
    if conv.wrapper == "libtorch":
        radius = np.float32(patch_side(size, conv)) / np.float32(2.0)  # kpSize / 2.0f
        scale = float(n) / (2.0 * float(radius))
        alpha, beta = math.cos(a) * scale, math.sin(a) * scale
        return np.array([[alpha, beta, (n * 0.5 - alpha * x) - beta * y],
                         [-beta, alpha, (n * 0.5 - (-beta) * x) - alpha * y]], dtype=np.float64)
    scale = float(n) / patch_side(size, conv)
    alpha, beta = math.cos(a) * scale, math.sin(a) * scale
    return np.array([[alpha, beta, ((1.0 - alpha) * x - beta * y) + (n * 0.5 - x)],
                     [-beta, alpha, (beta * x + (1.0 - alpha) * y) + (n * 0.5 - y)]], dtype=np.float64)


def warp_patches(gray: np.ndarray, kps: ImageKeypoints, conv: PatchConvention) -> np.ndarray:
    """uint8 [N, n, n]: each keypoint's patch, ``warpAffine(gray, patch_affine(...), (n, n),
    INTER_LINEAR, BORDER_REPLICATE)`` of the uint8 grey image by ``conv.warp`` (module docstring):
    :func:`descbench.descriptors.cv_warp.warp_affine_fixed_point` (``opencv_fixed_point``) or
    ``cv2.warpAffine`` (``opencv``)."""
    import cv2

    if gray.dtype != np.uint8 or gray.ndim != 2:
        raise DataError(f"patch sampling needs a uint8 grey image [H, W], got {gray.dtype} {gray.shape}")
    n = conv.input_size
    ms = np.array([patch_affine(kps.x[i], kps.y[i], kps.size[i], kps.angle[i], conv) for i in range(len(kps))],
                  dtype=np.float64).reshape(len(kps), 2, 3)
    if conv.warp == "opencv_fixed_point":
        from descbench.descriptors.cv_warp import warp_affine_fixed_point  # numba: imported by the jobs only

        return warp_affine_fixed_point(gray, ms, (n, n))
    out = np.empty((len(kps), n, n), dtype=np.uint8)
    for i in range(len(kps)):
        out[i] = cv2.warpAffine(gray, ms[i], (n, n), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out


def fma_f32(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 ``x * a + b`` rounded once (a fused multiply-add; ``x``, ``a``, ``b`` float32 arrays
    that broadcast). The product is exact in float64; the float64 sum ``s`` is rounded, and rounding
    ``s`` again to float32 can differ from one rounding only where ``s`` lies exactly halfway between
    two float32 values: there the exact remainder of the sum (TwoSum) decides the direction.
    Computed per element in numba (:func:`descbench.descriptors.cv_warp.fma_f32_rows`), without the
    float64 temporaries of the whole array."""
    from descbench.descriptors.cv_warp import fma_f32_rows  # numba: imported by the jobs only

    x, a, b = (np.asarray(v, np.float32) for v in (x, a, b))
    shape = np.broadcast_shapes(x.shape, a.shape, b.shape)
    # [R, K] views: the leading axis and the rest merged (a per-patch a or b stays a zero-stride view)
    rows = (shape[0] if shape else 1, -1)
    x2, a2, b2 = (np.broadcast_to(v, shape).reshape(rows) for v in (x, a, b))
    return fma_f32_rows(x2, a2, b2).reshape(shape)


def normalise_patches(patches_u8: np.ndarray, conv: PatchConvention) -> np.ndarray:
    """float32 [N, n, n]: ``p = u8 * float32(1/255)`` (OpenCV's ``convertTo(CV_32F, 1/255.)``), then
    ``(p - m) / d`` as OpenCV evaluates it, ``fma_f32(p, float(1/d), float(-m (1/d)))`` (module
    docstring), with, per patch, ``mu`` and the population ``sigma`` of ``cv::meanStdDev`` (float64
    ``sum / N`` and ``sqrt(max(sumsq / N - mu^2, 0))``) and

    * per_patch: ``m = mu``, ``d = sigma + eps`` ("add", the LibTorch wrapper: doubles), or ``m =
      float(mu)``, ``d = float(max(sigma, float(eps)))`` ("max", the DNN wrapper);
    * mean_std: ``m``, ``d`` = ``mean``, ``std`` as floats;  none: ``p``.
    """
    p = patches_u8.astype(np.float32) * np.float32(1.0 / 255.0)
    f32 = lambda v: np.asarray(v, np.float32).astype(np.float64)  # noqa: E731  a C++ float, used as a double
    if conv.normalisation == "per_patch":
        p64 = p.astype(np.float64)
        count = p64.shape[1] * p64.shape[2]
        mu = p64.sum(axis=(1, 2), keepdims=True) / count  # exact sums: k/255 floats need < 53 bits
        sigma = np.sqrt(np.maximum((p64 * p64).sum(axis=(1, 2), keepdims=True) / count - mu * mu, 0.0))
        if conv.eps_mode == "max":  # DNN wrapper: float(mu), float(max(sigma, 1e-6f))
            m, d = f32(mu), f32(np.maximum(sigma, f32(conv.std_eps)))
        else:  # LibTorch wrapper: double mu, sigma + 1e-8 in double
            m, d = mu, sigma + conv.std_eps
    elif conv.normalisation == "mean_std":  # both wrappers hold mean and std as float
        m, d = f32(conv.mean), f32(conv.std)
    else:
        return p
    alpha = 1.0 / d
    return fma_f32(p, np.float32(alpha) if np.ndim(alpha) == 0 else alpha.astype(np.float32),
                   (-m * alpha).astype(np.float32))


def sample_patches(gray: np.ndarray, kps: ImageKeypoints, conv: PatchConvention) -> np.ndarray:
    """float32 [N, n, n]: ``normalise_patches(warp_patches(gray, kps, conv), conv)``."""
    return normalise_patches(warp_patches(gray, kps, conv), conv)


def resize_hpatches_patches(patches_u8: np.ndarray, n: int) -> np.ndarray:
    """uint8 [N, n, n]: each (65 x 65) HPatches patch resized to the network input with
    ``cv2.resize(patch, (n, n), interpolation=cv2.INTER_LINEAR)``, the convention of
    hpatches-benchmark's learned baselines (e.g. HardNet's HPatches extraction script: cv2.resize to
    32 x 32 with the default interpolation, INTER_LINEAR); no keypoint, no rotation."""
    import cv2

    out = np.empty((len(patches_u8), n, n), dtype=np.uint8)
    for i in range(len(patches_u8)):
        out[i] = cv2.resize(patches_u8[i], (n, n), interpolation=cv2.INTER_LINEAR)
    return out
