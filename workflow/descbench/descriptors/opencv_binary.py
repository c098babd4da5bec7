"""Binary OpenCV descriptors: uint8 rows of packed bits, compared by Hamming distance.

Families (parameters: snake_case of OpenCV's constructor arguments, defaults = OpenCV's):

- ``orb``: rBRIEF, 32 bytes, on ORB's Gaussian pyramid. ``scale_factor`` 1.2, ``n_levels`` 8,
  ``edge_threshold`` 31, ``patch_size`` 31 (``WTA_K`` is fixed at 2: 3 and 4 give 2-bit codes
  that need NORM_HAMMING2, not the bit Hamming distance the metrics use); ``level`` (which
  pyramid level describes a keypoint) ``from_size`` (default) or ``keypoint_octave``, below.
- ``brisk``: 64 bytes; ``pattern_scale`` 1.0 (the detection threshold and octaves do not
  affect ``compute``).
- ``akaze``: M-LDB on AKAZE's nonlinear scale space; ``upright`` false (true: MLDB_UPRIGHT),
  ``descriptor_size`` 0 (0: all 486 bits = 61 bytes, else that many bits), ``descriptor_channels``
  3, and the scale space: ``n_octaves`` 4, ``n_octave_layers`` 4, ``diffusivity`` pm_g2. (AKAZE's
  KAZE-type float descriptor is the float family ``akaze_kaze``.)
- ``freak``: 64 bytes; ``orientation_normalized`` true, ``scale_normalized`` true,
  ``pattern_scale`` 22.0, ``n_octaves`` 4.
- ``brief``: ``bytes`` 32 (16, 32 or 64), ``use_orientation`` false.
- ``latch``: ``bytes`` 32 (1, 2, 4, 8, 16, 32 or 64), ``rotation_invariance`` true,
  ``half_ssd_size`` 3, ``sigma`` 2.0.
- ``beblid``: ``n_bits`` 512 (256 or 512); ``teblid``: ``n_bits`` 256 (256 or 512). Both take
  ``scale_factor`` (OpenCV requires one; no default there): ``null`` (the default here) picks
  OpenCV's documented value for the keypoint set's root detector: orb 1.0, sift 6.75, kaze 6.25,
  akaze/brisk/fast 5.0, anything else (gftt, precomputed) 6.25, the value OpenCV calls default.
- ``binboost``: the binary BoostDesc variants; ``desc`` binboost_256 (OpenCV's default;
  binboost_128, binboost_64, bgm, bgm_hard, bgm_bilinear), ``use_scale_orientation`` true,
  ``scale_factor`` null = by root detector as for VGG (orb 0.75, sift 6.75, kaze 6.25,
  akaze/brisk/fast 5.0, else 6.25). The float BoostDesc (LBGM) is the float family ``boostdesc``.

One row per keypoint (see :mod:`descbench.descriptors.cv_compute`): ORB, BRIEF, LATCH, BRISK
and FREAK drop keypoints near the border (BRISK and FREAK also large ones); those are recomputed
on the image padded with ``BORDER_REFLECT_101``, the rest equal plain OpenCV exactly. A keypoint
that cannot be rescued raises DataError.

What each family reads of the keypoint, and foreign keypoints (any other detector's):

- ``orb`` uses ``angle`` as given (OpenCV convention: -1 "undefined" is used as -1 degree) and
  reads the pyramid level from ``octave`` (OpenCV's ``ORB_Impl::detectAndCompute`` with provided
  keypoints: it builds as many levels as the largest ``octave`` needs, whatever ``n_levels``, and
  asserts ``octave >= 0``; the keypoint size is not read). ``level: from_size``: every keypoint
  gets the level whose patch ``patch_size * scale_factor^level`` is closest in log scale to its
  size, clamped to ``[0, n_levels - 1]``; for ORB's own keypoints with the same
  ``scale_factor``/``patch_size`` this is exactly their detected level (ORB gives a level-l
  keypoint the size ``patch_size * scale_factor^l``), for smaller keypoints (e.g. SIFT's) it is
  level 0. ``level: keypoint_octave``: the keypoints' own ``octave`` field is the level, as the C++
  DescriptorWorkbench's ``ORBWrapper`` passes it (``ORBWrapper.cpp:14-32``: ``cv::ORB::create()``,
  ``compute`` on the keypoints as they come). Levels past ``n_levels - 1`` are used as OpenCV uses
  them (more pyramid levels). An ``octave`` OpenCV cannot describe is a DataError naming the
  keypoint: a negative one (OpenCV asserts), or one whose pyramid level would be empty
  (``round(W / scale_factor^octave) < 1`` or the same for H), which is what a SIFT set's packed
  octave field (``octave | layer << 8 | xi << 16``, e.g. 0x00ff0201) is. There OpenCV 4.6 sizes a
  buffer for every level up to that octave (65 GB for the 384 x 303 demo image) and fails with
  ``Insufficient memory``; the workbench's ``ORBWrapper`` catches that and returns no rows, so its
  runner skips the image (recorded in ``tests/data/dw/workbench_descriptors.npz``). The
  workbench's wrapper also returns ORB's rows in ORB's order (grouped by level) without
  reordering them to its keypoints; descbench keeps one row per keypoint in keypoint order.
- ``brisk`` and ``freak`` (with ``orientation_normalized``) assign their own orientation and
  ignore ``angle``; they use ``size`` to pick the pattern scale.
- ``brief`` ignores size and angle (unless ``use_orientation``); ``latch`` uses the angle when
  ``rotation_invariance``; ``beblid``/``teblid``/``binboost`` use size x ``scale_factor`` as the
  window and the angle.
- ``akaze`` reads the scale level from ``class_id`` and its octave from ``octave`` (OpenCV asserts
  a valid level). On an AKAZE keypoint set whose ``n_octaves``/``n_octave_layers``/``diffusivity``
  equal the family's, keypoints keep the detector's level. Otherwise (other detectors, other
  scale-space parameters, invalid levels) the level is derived from the size: AKAZE gives level
  ``i`` the size ``3 * 1.6 * 2^(i / n_octave_layers)``, so ``i = round(L log2(size / 4.8))``,
  clamped to the levels AKAZE builds for the image (an octave exists while the image halved that
  many times stays at least 80 x 40 px) and ``octave = i // L``. AKAZE's compute uses the angle
  as given (its orientation is assigned by its detector); samples outside the image are skipped
  by OpenCV itself, so AKAZE never drops keypoints and is run on the unpadded image (padding
  would change its global contrast factor and hence every descriptor).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors.cv_compute import BEBLID_SCALE, VGG_BOOST_SCALE, choice, scale_factor
from descbench.descriptors.opencv_common import (
    AKAZE_COST, AKAZE_PARAMS, BOOL, SCALE_FACTOR, CvSetup, akaze_setup, cv_family, fixed_support, window_support,
)
from descbench.errors import DataError
from descbench.jobfacts import Cost
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import cv_attr
from descbench.params import object_fragment

# ----------------------------------------------------------------------------- parameters
# The one declaration of each family's parameters: type, allowed values (OpenCV's constraints
# where they are cheap to state) and default (OpenCV's). descbench.params checks them at config time.

# BoostDesc's ``desc`` codes (OpenCV's enum; the Python bindings do not export them).
BINBOOST_DESC = {"binboost_256": 302, "binboost_128": 301, "binboost_64": 300, "bgm": 100, "bgm_hard": 101, "bgm_bilinear": 102}
BRIEF_BYTES = (16, 32, 64)
LATCH_BYTES = (1, 2, 4, 8, 16, 32, 64)
BLID_BITS = (256, 512)

PARAMS_SCHEMA = {
    "orb": object_fragment(
        scale_factor={"type": "number", "exclusiveMinimum": 1, "default": 1.2},
        n_levels={"type": "integer", "minimum": 1, "default": 8},
        edge_threshold={"type": "integer", "minimum": 0, "default": 31},
        patch_size={"type": "integer", "minimum": 2, "default": 31},
        level={"enum": ["from_size", "keypoint_octave"], "default": "from_size"}),
    "brisk": object_fragment(pattern_scale={"type": "number", "exclusiveMinimum": 0, "default": 1.0}),
    "akaze": AKAZE_PARAMS,
    "freak": object_fragment(
        orientation_normalized={**BOOL, "default": True}, scale_normalized={**BOOL, "default": True},
        pattern_scale={"type": "number", "exclusiveMinimum": 0, "default": 22.0},
        n_octaves={"type": "integer", "minimum": 1, "default": 4}),
    "brief": object_fragment(bytes={"enum": list(BRIEF_BYTES), "default": 32}, use_orientation={**BOOL, "default": False}),
    "latch": object_fragment(
        bytes={"enum": list(LATCH_BYTES), "default": 32}, rotation_invariance={**BOOL, "default": True},
        half_ssd_size={"type": "integer", "minimum": 1, "default": 3},
        sigma={"type": "number", "minimum": 0, "default": 2.0}),
    "beblid": object_fragment(scale_factor=SCALE_FACTOR, n_bits={"enum": list(BLID_BITS), "default": 512}),
    "teblid": object_fragment(scale_factor=SCALE_FACTOR, n_bits={"enum": list(BLID_BITS), "default": 256}),
    "binboost": object_fragment(
        desc={"enum": list(BINBOOST_DESC), "default": "binboost_256"},
        use_scale_orientation={**BOOL, "default": True}, scale_factor=SCALE_FACTOR),
}

# Each family's setup (descbench.descriptors.opencv_common): the OpenCV extractor for its params
# and the keypoint fields it reads; the same for an image and for a patch.


# --------------------------------------------------------------------------- ORB


def orb_level_from_size(size: np.ndarray, patch_size: int, scale_factor: float, n_levels: int) -> np.ndarray:
    """ORB pyramid level whose patch ``patch_size * scale_factor^level`` best matches ``size`` (log scale)."""
    t = np.log(np.maximum(np.asarray(size, dtype=np.float64), 1e-6) / patch_size) / np.log(scale_factor)
    return np.clip(np.rint(t), 0, n_levels - 1).astype(np.int32)


def orb_top_level(shape: tuple, scale_factor: float) -> int:
    """The largest ORB pyramid level that is not empty on an image of ``shape`` (H, W): level l has
    ``round(W / s_l) x round(H / s_l)`` pixels, ``s_l = (float) scale_factor^l`` (OpenCV's
    ``getScale``, ``cvRound`` = half to even)."""
    h, w = shape[:2]
    level = 0
    while True:
        s = np.float32(float(scale_factor) ** (level + 1))
        if min(np.rint(w / s), np.rint(h / s)) < 1:  # w / s in double as OpenCV's int / float
            return level
        level += 1


def orb_keypoint_levels(kps: ImageKeypoints, shape: tuple, scale_factor: float, where: Path) -> np.ndarray:
    """The keypoints' own ``octave`` fields as ORB levels (``level: keypoint_octave``); a DataError
    for one OpenCV's ORB cannot describe (negative, or past the last non-empty pyramid level)."""
    octave = np.asarray(kps.octave, dtype=np.int64)
    top = orb_top_level(shape, scale_factor)
    bad = np.flatnonzero((octave < 0) | (octave > top))
    if bad.size:
        i = int(bad[0])
        sift = " (a SIFT set's packed octave field: octave | layer << 8 | xi << 16)" if octave[i] > 255 else ""
        raise DataError(
            f"image {where}: {bad.size} keypoints have an octave field ORB cannot use as its pyramid level with "
            f"'level: keypoint_octave' (first at keypoint row {i}: octave {int(octave[i])}{sift}; levels 0..{top} "
            f"exist on this {shape[1]}x{shape[0]} image at scale_factor {scale_factor}). OpenCV's ORB fails there "
            "(the workbench's ORBWrapper then returns no rows and its runner skips the image): use 'level: from_size', "
            "or keypoints whose octave is an ORB level (ORB's own)")
    return octave.astype(np.int32)


def orb_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    import cv2

    orb = cv2.ORB_create(scaleFactor=float(p["scale_factor"]), nlevels=int(p["n_levels"]), edgeThreshold=int(p["edge_threshold"]),
                         firstLevel=0, WTA_K=2, patchSize=int(p["patch_size"]))
    if p["level"] == "keypoint_octave":
        return CvSetup(orb, octave=orb_keypoint_levels(kps, shape, float(p["scale_factor"]), where))
    return CvSetup(orb, octave=orb_level_from_size(kps.size, int(p["patch_size"]), float(p["scale_factor"]), int(p["n_levels"])))


# --------------------------------------------------------------------------- single-scale patterns


def brisk_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    return CvSetup(cv_attr("BRISK_create")(patternScale=float(p["pattern_scale"])))


def freak_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    return CvSetup(cv_attr("FREAK_create")(orientationNormalized=bool(p["orientation_normalized"]),
                                           scaleNormalized=bool(p["scale_normalized"]),
                                           patternScale=float(p["pattern_scale"]), nOctaves=int(p["n_octaves"])))


def brief_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    nbytes = choice("brief", p, "bytes", {b: b for b in BRIEF_BYTES})
    return CvSetup(cv_attr("BriefDescriptorExtractor_create")(bytes=nbytes, use_orientation=bool(p["use_orientation"])))


def latch_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    nbytes = choice("latch", p, "bytes", {b: b for b in LATCH_BYTES})
    return CvSetup(cv_attr("LATCH_create")(bytes=nbytes, rotationInvariance=bool(p["rotation_invariance"]),
                                           half_ssd_size=int(p["half_ssd_size"]), sigma=float(p["sigma"])))


def beblid_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    bits = choice("beblid", p, "n_bits", {256: "BEBLID_SIZE_256_BITS", 512: "BEBLID_SIZE_512_BITS"})
    return CvSetup(cv_attr("BEBLID_create")(scale_factor(p, kpset, BEBLID_SCALE), cv_attr(bits)))


def teblid_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    bits = choice("teblid", p, "n_bits", {256: "TEBLID_SIZE_256_BITS", 512: "TEBLID_SIZE_512_BITS"})
    return CvSetup(cv_attr("TEBLID_create")(scale_factor(p, kpset, BEBLID_SCALE), cv_attr(bits)))


def binboost_setup(p: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
    return CvSetup(cv_attr("BoostDesc_create")(desc=choice("binboost", p, "desc", BINBOOST_DESC),
                                               use_scale_orientation=bool(p["use_scale_orientation"]),
                                               scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE)))


# --------------------------------------------------------------------------- patch support
# The default keypoint size on a side x side patch (descbench.patches.describe's table; the
# constants were measured on 65 x 65 patches).


def orb_support(params: dict, side: int) -> float:
    """ORB: size = side picks pyramid level round(log(65/31)/log 1.2) = 4, a 64.3 px patch."""
    return float(side)


PATCH_SUPPORT = {
    "orb": orb_support,
    "brisk": fixed_support(20.0),  # OpenCV's BRISK keeps the centre keypoint of a 65 x 65 image up to size 20.2
    "akaze": fixed_support(6.0),  # M-LDB pattern 2 x 10 x round(size / 2) = 60 px
    "freak": fixed_support(9.0),  # FREAK keeps it up to size 9.6
    "brief": fixed_support(48.0),  # size not read: fixed 48 x 48 pattern
    "latch": fixed_support(48.0),  # size not read: fixed 48 px pattern
    "beblid": window_support, "teblid": window_support, "binboost": window_support,
}

SETUP = {"orb": orb_setup, "brisk": brisk_setup,
         "akaze": akaze_setup("akaze", ("AKAZE_DESCRIPTOR_MLDB", "AKAZE_DESCRIPTOR_MLDB_UPRIGHT")),
         "freak": freak_setup, "brief": brief_setup, "latch": latch_setup, "beblid": beblid_setup,
         "teblid": teblid_setup, "binboost": binboost_setup}
COST = {"akaze": AKAZE_COST}  # the others: OpenCV SIFT's compute model
FAMILIES = tuple(cv_family(name, SETUP[name], PARAMS_SCHEMA[name], PATCH_SUPPORT[name], binary=True, cost=COST.get(name, Cost()))
                 for name in PARAMS_SCHEMA)
