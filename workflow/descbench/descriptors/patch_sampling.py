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

The LibTorch wrapper writes the translation as ``n/2 - M00 x - M01 y`` while the DNN wrapper adds
``n/2 - x`` to ``getRotationMatrix2D``'s ``(1 - alpha) x - beta y``: algebraically identical;
:func:`patch_affine` uses the DNN wrapper's order of operations (they differ by ~1e-13 px).
The uint8 patch is OpenCV's own ``warpAffine``; the normalised values follow the wrappers' float32 /
float64 steps but are computed with numpy, so they may differ from OpenCV's matrix expressions in
the last bit or two.

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

    def __post_init__(self):
        # a programming error, not a user input (configs are checked by the families' schemas)
        assert self.normalisation in NORMALISATIONS, self.normalisation
        assert self.eps_mode in EPS_MODES, self.eps_mode
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
                   mean: float | None = None, std: float | None = None) -> PatchConvention:
    """The DNN wrapper's convention (``DNNPatchWrapper::makePatch_``) with the given settings;
    ``mean`` / ``std`` are read only for ``mean_std`` (elsewhere the identity 0 / 1)."""
    if normalisation == "mean_std":
        assert mean is not None and std is not None, "mean_std needs mean and std"
    else:
        mean, std = 0.0, 1.0  # unused: the identity
    return PatchConvention(int(input_size), float(support_multiplier), DNN_MIN_SIZE_PX, DNN_MIN_SIDE_PX,
                           bool(rotate_to_upright), normalisation, float(mean), float(std), DNN_STD_EPS, "max")


def libtorch_convention(input_size: int, rotate_to_upright: bool, per_patch_standardize: bool) -> PatchConvention:
    """The LibTorch wrapper's convention (``LibTorchWrapper::makePatch`` / ``matToTensor``): side =
    keypoint size (any support multiplier given to its constructor is ignored), size clamp 1e-3, no
    side clamp; ``per_patch`` with ``sigma + 1e-8``, else ImageNet's grey ``(p - 0.485) / 0.229``."""
    if per_patch_standardize:
        normalisation, mean, std = "per_patch", 0.0, 1.0  # mean, std unused
    else:
        normalisation, mean, std = "mean_std", IMAGENET_GREY_MEAN, IMAGENET_GREY_STD
    return PatchConvention(int(input_size), 1.0, LIBTORCH_MIN_SIZE_PX, 0.0, bool(rotate_to_upright), normalisation,
                           mean, std, LIBTORCH_STD_EPS, "add")


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
        M = [[ alpha, beta, (1 - alpha) x - beta y + (n/2 - x)],
             [-beta,  alpha, beta x + (1 - alpha) y + (n/2 - y)]]

    i.e. ``cv2.getRotationMatrix2D((x, y), a, scale)`` plus ``(n/2 - x, n/2 - y)``: the keypoint
    goes to ``(n/2, n/2)``; x, y are taken as float32 (``cv::Point2f``)."""
    n = conv.input_size
    x, y = float(np.float32(x)), float(np.float32(y))
    scale = float(n) / patch_side(size, conv)
    a = patch_rotation(angle, conv) * (math.pi / 180.0)
    alpha, beta = math.cos(a) * scale, math.sin(a) * scale
    return np.array([[alpha, beta, ((1.0 - alpha) * x - beta * y) + (n * 0.5 - x)],
                     [-beta, alpha, (beta * x + (1.0 - alpha) * y) + (n * 0.5 - y)]], dtype=np.float64)


def warp_patches(gray: np.ndarray, kps: ImageKeypoints, conv: PatchConvention) -> np.ndarray:
    """uint8 [N, n, n]: each keypoint's patch, ``cv2.warpAffine(gray, patch_affine(...), (n, n),
    INTER_LINEAR, BORDER_REPLICATE)`` of the uint8 grey image (module docstring)."""
    import cv2

    if gray.dtype != np.uint8 or gray.ndim != 2:
        raise DataError(f"patch sampling needs a uint8 grey image [H, W], got {gray.dtype} {gray.shape}")
    n = conv.input_size
    out = np.empty((len(kps), n, n), dtype=np.uint8)
    for i in range(len(kps)):
        m = patch_affine(kps.x[i], kps.y[i], kps.size[i], kps.angle[i], conv)
        out[i] = cv2.warpAffine(gray, m, (n, n), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out


def normalise_patches(patches_u8: np.ndarray, conv: PatchConvention) -> np.ndarray:
    """float32 [N, n, n]: ``p = u8 * float32(1/255)`` (OpenCV's ``convertTo(CV_32F, 1/255.)``), then

    * per_patch: ``(p - mu) / d``, ``mu`` and the population ``sigma`` of each patch in float64
      (``cv::meanStdDev``), ``d = max(sigma, eps)`` ("max") or ``sigma + eps`` ("add");
    * mean_std: ``(p - mean) / std``;  none: ``p``.
    """
    p = patches_u8.astype(np.float32) * np.float32(1.0 / 255.0)
    f32 = lambda v: np.asarray(v, np.float32).astype(np.float64)  # noqa: E731  a C++ float, used as a double
    if conv.normalisation == "per_patch":
        p64 = p.astype(np.float64)
        mu = p64.mean(axis=(1, 2), keepdims=True)
        sigma = p64.std(axis=(1, 2), keepdims=True)
        if conv.eps_mode == "max":  # DNN wrapper: float(mu), float(max(sigma, 1e-6f))
            mu, d = f32(mu), f32(np.maximum(sigma, f32(conv.std_eps)))
        else:  # LibTorch wrapper: double mu, sigma + 1e-8 in double
            d = sigma + conv.std_eps
        return ((p64 - mu) / d).astype(np.float32)
    if conv.normalisation == "mean_std":  # both wrappers hold mean and std as float
        return ((p.astype(np.float64) - f32(conv.mean)) / f32(conv.std)).astype(np.float32)
    return p


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
