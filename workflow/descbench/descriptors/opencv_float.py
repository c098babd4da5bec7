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
  would return uint8 values that the metrics would take for packed bits.
- ``boostdesc``: the float BoostDesc, LBGM (64-D; the only float variant: OpenCV's default
  BINBOOST_256 and the BGM variants are binary, family ``binboost``); ``use_scale_orientation``
  true, ``scale_factor`` null.

``scale_factor: null`` (vgg, boostdesc) picks OpenCV's documented window ratio for the keypoint
set's root detector: orb 0.75, sift 6.75, kaze 6.25, akaze/brisk/fast 5.0, otherwise (gftt,
precomputed) 6.25, the value OpenCV calls its default.

None of these drops keypoints in OpenCV 5 (samples outside the image are skipped or
border-interpolated by OpenCV itself); the realignment of
:mod:`descbench.descriptors._cv_compute` still checks that every keypoint came back and
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

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily
from descbench.descriptors._cv_compute import VGG_BOOST_SCALE, choice, compute_rows, cv_keypoints, scale_factor
from descbench.descriptors.opencv_binary import DIFFUSIVITY, _rows, _same_scale_space, akaze_family_rows
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import _cv_attr


def kaze_levels(kps: ImageKeypoints, params: dict, kpset: dict):
    """(class_id, octave) for KAZE's compute: the detector's own where valid, else from the size."""
    L = int(params["n_octave_layers"])
    n = int(params["n_octaves"]) * L
    # level 0 is the input image before any diffusion: OpenCV's KAZE computes no derivatives for
    # it (descriptors there are 0/0 = NaN), and its detector never reports it
    derived = np.clip(np.rint(L * np.log2(np.maximum(kps.size.astype(np.float64), 1e-6) / 3.2)), 1, max(1, n - 1)).astype(np.int32)
    level = derived
    if _same_scale_space(kpset, params, "kaze"):
        level = np.where((kps.class_id >= 1) & (kps.class_id < n), kps.class_id, derived).astype(np.int32)
    return level, (level // L).astype(np.int32)


def check_msurf_scale(size: np.ndarray, octave: np.ndarray, family: str, image_path: Path) -> None:
    """M-SURF (KAZE, AKAZE's KAZE type) samples with step ``round(size / 2 / 2^octave)`` and Gaussian
    weights of sigma 2.5 x step: a step of 0 gives 0/0 = NaN rows, so such keypoints are an error."""
    from descbench.errors import DataError

    step = np.rint(0.5 * size.astype(np.float64) / np.exp2(octave.astype(np.float64)))  # rint = cvRound (half to even)
    bad = np.flatnonzero(step < 1)
    if bad.size:
        raise DataError(
            f"image {image_path}: {bad.size} keypoints are too small for descriptor '{family}' (first at keypoint row "
            f"{int(bad[0])}, size {float(size[bad[0]]):.3f} px; M-SURF needs size > 2^octave px, here its sampling step "
            "would be 0 and the descriptor NaN); filter the keypoint set with min_size or use another descriptor"
        )


def kaze_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    p = params
    kaze = _cv_attr("KAZE_create")(extended=bool(p["extended"]), upright=bool(p["upright"]), nOctaves=int(p["n_octaves"]),
                                    nOctaveLayers=int(p["n_octave_layers"]),
                                    diffusivity=_cv_attr(choice("kaze", p, "diffusivity", DIFFUSIVITY)))
    if len(kps) == 0:
        return _rows(kaze, image_path, kps, "kaze", tag=False)
    gray = read_image(image_path)
    level, octave = kaze_levels(kps, params, kpset)
    check_msurf_scale(kps.size, np.zeros_like(octave), "kaze", image_path)  # KAZE has no downsampled octaves
    cv = cv_keypoints(kps.x, kps.y, kps.size, kps.angle, octave, level, kps.response)
    return compute_rows(kaze, gray, cv, family="kaze", image_path=image_path, tag=False)


def akaze_kaze_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    kind = "AKAZE_DESCRIPTOR_KAZE_UPRIGHT" if params["upright"] else "AKAZE_DESCRIPTOR_KAZE"
    return akaze_family_rows("akaze_kaze", kind, image_path, kps, params, kpset)


DAISY_NORM = {"none": "DAISY_NRM_NONE", "partial": "DAISY_NRM_PARTIAL", "full": "DAISY_NRM_FULL", "sift": "DAISY_NRM_SIFT"}


def daisy_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    p = params
    daisy = _cv_attr("DAISY_create")(radius=float(p["radius"]), q_radius=int(p["q_radius"]), q_theta=int(p["q_theta"]),
                                     q_hist=int(p["q_hist"]), norm=_cv_attr(choice("daisy", p, "norm", DAISY_NORM)),
                                     interpolation=bool(p["interpolation"]), use_orientation=bool(p["use_orientation"]))
    return _rows(daisy, image_path, kps, "daisy")


# VGG's ``desc`` codes by dimension (OpenCV's enum; the Python bindings do not export them).
VGG_DESC = {120: 100, 80: 101, 64: 102, 48: 103}


def vgg_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    p = params
    vgg = _cv_attr("VGG_create")(desc=choice("vgg", p, "desc", VGG_DESC), isigma=float(p["isigma"]),
                                 img_normalize=bool(p["img_normalize"]), use_scale_orientation=bool(p["use_scale_orientation"]),
                                 scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE), dsc_normalize=False)
    return _rows(vgg, image_path, kps, "vgg")


LBGM = 200  # BoostDesc::LBGM


def boostdesc_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    ex = _cv_attr("BoostDesc_create")(desc=LBGM, use_scale_orientation=bool(params["use_scale_orientation"]),
                                      scale_factor=scale_factor(params, kpset, VGG_BOOST_SCALE))
    return _rows(ex, image_path, kps, "boostdesc")


FAMILIES = (
    DescriptorFamily("kaze", kaze_descriptors, {"extended": False, "upright": False, "n_octaves": 4, "n_octave_layers": 4,
                                                "diffusivity": "pm_g2"}),
    DescriptorFamily("akaze_kaze", akaze_kaze_descriptors, {"upright": False, "n_octaves": 4, "n_octave_layers": 4,
                                                            "diffusivity": "pm_g2"}),
    DescriptorFamily("daisy", daisy_descriptors, {"radius": 15.0, "q_radius": 3, "q_theta": 8, "q_hist": 8, "norm": "none",
                                                  "interpolation": True, "use_orientation": False}),
    DescriptorFamily("vgg", vgg_descriptors, {"desc": 120, "isigma": 1.4, "img_normalize": True, "use_scale_orientation": True,
                                              "scale_factor": None}),
    DescriptorFamily("boostdesc", boostdesc_descriptors, {"use_scale_orientation": True, "scale_factor": None}),
)
