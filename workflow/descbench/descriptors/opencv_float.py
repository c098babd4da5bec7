"""Float OpenCV descriptors (float32 rows, compared by L2).

Families (parameters: snake_case of OpenCV's constructor arguments, defaults = OpenCV's):

- ``kaze``: KAZE's M-SURF descriptor on its nonlinear scale space; ``extended`` false (64-D;
  true: 128-D), ``upright`` false, and the scale space: ``n_octaves`` 4, ``n_octave_layers`` 4,
  ``diffusivity`` pm_g2.
- ``akaze_kaze``: AKAZE's KAZE-type (M-SURF, 64-D) descriptor on AKAZE's scale space
  (OpenCV ``DESCRIPTOR_KAZE``; ``upright`` true: ``DESCRIPTOR_KAZE_UPRIGHT``), ``n_octaves`` 4,
  ``n_octave_layers`` 4, ``diffusivity`` pm_g2. AKAZE's default binary M-LDB is ``akaze``.
- ``daisy``: 200-D with the defaults; ``radius`` 15, ``q_radius`` 3, ``q_theta`` 8, ``q_hist`` 8,
  ``norm`` none (none, partial, full, sift), ``interpolation`` true, ``use_orientation`` false.
  DAISY ignores the keypoint size (a fixed ``radius`` in pixels); no homography is exposed.
- ``vgg``: ``desc`` 120 (120, 80, 64 or 48 dimensions), ``isigma`` 1.4, ``img_normalize`` true,
  ``use_scale_orientation`` true, ``scale_factor`` null. ``dsc_normalize`` is fixed false: true
  would return uint8 values that the metrics would take for packed bits. ``rows`` ``opencv``
  (default: OpenCV's rows as they are) or ``workbench`` (the C++ DescriptorWorkbench's VGG: its
  experiment runner's ``normalize_after_pooling`` L2-normalises every row, ``cv::normalize``
  ``NORM_L2`` in OpenCV's arithmetic, :func:`descbench.descriptors.fusion.normalize_rows_l2`;
  its ``VGGWrapper`` makes the same ``VGG::create`` call with these defaults).
- ``boostdesc``: the float BoostDesc, LBGM (64-D; the only float variant: OpenCV's default
  BINBOOST_256 and the BGM variants are binary, family ``binboost``); ``use_scale_orientation``
  true, ``scale_factor`` null.

``scale_factor: null`` (vgg, boostdesc) picks OpenCV's documented window ratio for the keypoint
set's root detector: orb 0.75, sift 6.75, kaze 6.25, akaze/brisk/fast 5.0, otherwise (gftt,
precomputed) 6.25, the value OpenCV calls its default.

None of these drops keypoints in OpenCV 5 (samples outside the image are skipped or
border-interpolated by OpenCV itself); the realignment of
:mod:`descbench.descriptors.cv_compute` still checks that every keypoint came back and
rescues any that would not on a ``BORDER_REFLECT_101``-padded image. KAZE and AKAZE are never
padded: their contrast factor is a statistic of the whole image.

Foreign keypoints: ``kaze`` and ``akaze_kaze`` read the scale level from ``class_id`` (OpenCV
asserts it is valid). Keypoints of a KAZE (resp. AKAZE) set with the family's scale-space
parameters keep the detector's level; any other keypoint gets the level derived from its size:
KAZE gives level ``i`` the size ``2 * 1.6 * 2^(i / L)`` (before its sub-level refinement), so
``i = round(L log2(size / 3.2))`` clamped to ``[1, n_octaves L - 1]`` (KAZE keeps every level at
full resolution; level 0, the undiffused image, has no derivatives in OpenCV, its descriptors
would be NaN, and KAZE's detector never reports it); AKAZE as in :mod:`descbench.descriptors.opencv_binary`. KAZE's compute assigns
its own orientation (dominant gradient direction, unless ``upright``) and ignores ``angle``;
AKAZE's uses ``angle`` as given. VGG and BoostDesc use size x ``scale_factor`` as the window and
the angle (when ``use_scale_orientation``); DAISY uses the angle only with ``use_orientation``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors.cv_compute import VGG_BOOST_SCALE, choice, scale_factor
from descbench.descriptors.opencv_common import (
    BOOL, DIFFUSIVITY, DIFFUSIVITY_PARAM, KAZE_COST, OCTAVES, SCALE_FACTOR, CvSetup, akaze_setup, check_msurf_scale, cv_family,
    fixed_support, same_scale_space, window_support,
)
from descbench.descriptors.sift import sift_patch_support
from descbench.jobfacts import Cost
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import cv_attr
from descbench.params import object_fragment

# ----------------------------------------------------------------------------- parameters
# The one declaration of each family's parameters (type, allowed values, OpenCV's default).

DAISY_NORM = {"none": "DAISY_NRM_NONE", "partial": "DAISY_NRM_PARTIAL", "full": "DAISY_NRM_FULL", "sift": "DAISY_NRM_SIFT"}
# VGG's ``desc`` codes by dimension (OpenCV's enum; the Python bindings do not export them).
VGG_DESC = {120: 100, 80: 101, 64: 102, 48: 103}
POSITIVE_INT = {"type": "integer", "minimum": 1}

PARAMS_SCHEMA = {
    "kaze": object_fragment(extended={**BOOL, "default": False}, upright={**BOOL, "default": False},
                            n_octaves=OCTAVES, n_octave_layers=OCTAVES, diffusivity=DIFFUSIVITY_PARAM),
    "akaze_kaze": object_fragment(upright={**BOOL, "default": False}, n_octaves=OCTAVES, n_octave_layers=OCTAVES,
                                  diffusivity=DIFFUSIVITY_PARAM),
    "daisy": object_fragment(
        radius={"type": "number", "exclusiveMinimum": 0, "default": 15.0},
        q_radius={**POSITIVE_INT, "default": 3}, q_theta={**POSITIVE_INT, "default": 8}, q_hist={**POSITIVE_INT, "default": 8},
        norm={"enum": list(DAISY_NORM), "default": "none"},
        interpolation={**BOOL, "default": True}, use_orientation={**BOOL, "default": False}),
    "vgg": object_fragment(
        desc={"enum": list(VGG_DESC), "default": 120}, isigma={"type": "number", "exclusiveMinimum": 0, "default": 1.4},
        img_normalize={**BOOL, "default": True}, use_scale_orientation={**BOOL, "default": True}, scale_factor=SCALE_FACTOR,
        rows={"enum": ["opencv", "workbench"], "default": "opencv"}),
    "boostdesc": object_fragment(use_scale_orientation={**BOOL, "default": True}, scale_factor=SCALE_FACTOR),
}


def kaze_levels(kps: ImageKeypoints, params: dict, kpset: dict):
    """(class_id, octave) for KAZE's compute: the detector's own where valid, else from the size."""
    L = int(params["n_octave_layers"])
    n = int(params["n_octaves"]) * L
    # level 0 is the input image before any diffusion: OpenCV's KAZE computes no derivatives for
    # it (descriptors there are 0/0 = NaN), and its detector never reports it
    derived = np.clip(np.rint(L * np.log2(np.maximum(kps.size.astype(np.float64), 1e-6) / 3.2)), 1, max(1, n - 1)).astype(np.int32)
    level = derived
    if same_scale_space(kpset, params, "kaze"):
        level = np.where((kps.class_id >= 1) & (kps.class_id < n), kps.class_id, derived).astype(np.int32)
    return level, (level // L).astype(np.int32)


# Each family's setup (descbench.descriptors.opencv_common): the OpenCV extractor for its params
# and the keypoint fields it reads; the same for an image and for a patch.


def kaze_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    kaze = cv_attr("KAZE_create")(extended=bool(p["extended"]), upright=bool(p["upright"]), nOctaves=int(p["n_octaves"]),
                                   nOctaveLayers=int(p["n_octave_layers"]),
                                   diffusivity=cv_attr(choice("kaze", p, "diffusivity", DIFFUSIVITY)))
    level, octave = kaze_levels(kps, p, kpset)
    check_msurf_scale(kps.size, np.zeros_like(octave), "kaze", where)  # KAZE has no downsampled octaves
    return CvSetup(kaze, octave, level, tag=False)


def daisy_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    return CvSetup(cv_attr("DAISY_create")(radius=float(p["radius"]), q_radius=int(p["q_radius"]), q_theta=int(p["q_theta"]),
                                           q_hist=int(p["q_hist"]), norm=cv_attr(choice("daisy", p, "norm", DAISY_NORM)),
                                           interpolation=bool(p["interpolation"]), use_orientation=bool(p["use_orientation"])))


def vgg_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    return CvSetup(cv_attr("VGG_create")(desc=choice("vgg", p, "desc", VGG_DESC), isigma=float(p["isigma"]),
                                         img_normalize=bool(p["img_normalize"]), use_scale_orientation=bool(p["use_scale_orientation"]),
                                         scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE), dsc_normalize=False))


def vgg_rows(rows: np.ndarray, p: dict) -> np.ndarray:
    """``rows: workbench``: every row L2-normalised as the workbench's runner does (module docstring)."""
    from descbench.descriptors.fusion import normalize_rows_l2

    return normalize_rows_l2(rows) if p.get("rows", "opencv") == "workbench" else rows


LBGM = 200  # BoostDesc::LBGM


def boostdesc_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    return CvSetup(cv_attr("BoostDesc_create")(desc=LBGM, use_scale_orientation=bool(p["use_scale_orientation"]),
                                               scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE)))


# The default keypoint size on a side x side patch (descbench.patches.describe's table).
PATCH_SUPPORT = {
    "kaze": fixed_support(6.0),  # M-SURF grid 24 x round(size / 2) = 72 px
    "akaze_kaze": fixed_support(6.0),
    "daisy": sift_patch_support,  # size not read (params.radius); hpatches-benchmark's SIFT size
    "vgg": window_support, "boostdesc": window_support,
}

SETUP = {"kaze": kaze_setup,
         "akaze_kaze": akaze_setup("akaze_kaze", ("AKAZE_DESCRIPTOR_KAZE", "AKAZE_DESCRIPTOR_KAZE_UPRIGHT")),
         "daisy": daisy_setup, "vgg": vgg_setup, "boostdesc": boostdesc_setup}
COST = {"kaze": KAZE_COST, "akaze_kaze": KAZE_COST}  # the others: OpenCV SIFT's compute model
POST = {"vgg": vgg_rows}
FAMILIES = tuple(cv_family(name, SETUP[name], PARAMS_SCHEMA[name], PATCH_SUPPORT[name], cost=COST.get(name, Cost()),
                           post=POST.get(name)) for name in PARAMS_SCHEMA)
