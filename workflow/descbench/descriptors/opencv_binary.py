"""Binary OpenCV descriptors: uint8 rows of packed bits, compared by Hamming distance.

Families (parameters: snake_case of OpenCV's constructor arguments, defaults = OpenCV's):

- ``orb``: rBRIEF, 32 bytes, on ORB's Gaussian pyramid. ``scale_factor`` 1.2, ``n_levels`` 8,
  ``edge_threshold`` 31, ``patch_size`` 31 (``WTA_K`` is fixed at 2: 3 and 4 give 2-bit codes
  that need NORM_HAMMING2, not the bit Hamming distance the metrics use).
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

One row per keypoint (see :mod:`descbench.descriptors._cv_compute`): ORB, BRIEF, LATCH, BRISK
and FREAK drop keypoints near the border (BRISK and FREAK also large ones); those are recomputed
on the image padded with ``BORDER_REFLECT_101``, the rest equal plain OpenCV exactly. A keypoint
that cannot be rescued raises DataError.

What each family reads of the keypoint, and foreign keypoints (any other detector's):

- ``orb`` uses ``angle`` as given (OpenCV convention: -1 "undefined" is used as -1 degree) and
  reads the pyramid level from ``octave``. Every keypoint gets the level whose patch
  ``patch_size * scale_factor^level`` is closest in log scale to its size, clamped to
  ``[0, n_levels - 1]``; for ORB's own keypoints with the same ``scale_factor``/``patch_size``
  this is exactly their detected level (ORB gives a level-l keypoint the size
  ``patch_size * scale_factor^l``), for smaller keypoints (e.g. SIFT's) it is level 0.
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

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily
from descbench.descriptors._cv_compute import BEBLID_SCALE, VGG_BOOST_SCALE, choice, compute_rows, cv_keypoints, scale_factor
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import _cv_attr


def _rows(extractor, image_path: Path, kps: ImageKeypoints, family: str, octave=None, class_id=None, tag=True) -> np.ndarray:
    gray = read_image(image_path) if len(kps) else np.zeros((1, 1), np.uint8)
    cv = cv_keypoints(kps.x, kps.y, kps.size, kps.angle, kps.octave if octave is None else octave,
                      kps.class_id if class_id is None else class_id, kps.response)
    return compute_rows(extractor, gray, cv, family=family, image_path=image_path, tag=tag)


# --------------------------------------------------------------------------- ORB


def orb_level_from_size(size: np.ndarray, patch_size: int, scale_factor: float, n_levels: int) -> np.ndarray:
    """ORB pyramid level whose patch ``patch_size * scale_factor^level`` best matches ``size`` (log scale)."""
    t = np.log(np.maximum(np.asarray(size, dtype=np.float64), 1e-6) / patch_size) / np.log(scale_factor)
    return np.clip(np.rint(t), 0, n_levels - 1).astype(np.int32)


def orb_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    import cv2

    p = params
    orb = cv2.ORB_create(scaleFactor=float(p["scale_factor"]), nlevels=int(p["n_levels"]), edgeThreshold=int(p["edge_threshold"]),
                         firstLevel=0, WTA_K=2, patchSize=int(p["patch_size"]))
    level = orb_level_from_size(kps.size, int(p["patch_size"]), float(p["scale_factor"]), int(p["n_levels"]))
    return _rows(orb, image_path, kps, "orb", octave=level)


# --------------------------------------------------------------------------- AKAZE


def akaze_n_levels(shape: tuple, n_octaves: int, n_octave_layers: int) -> int:
    """Number of scale levels AKAZE builds for an image of ``shape`` (H, W): octave i > 0 exists
    while ``W >> i >= 80`` and ``H >> i >= 40``."""
    h, w = shape[:2]
    octaves = 1
    while octaves < n_octaves and (w >> octaves) >= 80 and (h >> octaves) >= 40:
        octaves += 1
    return octaves * n_octave_layers


def akaze_levels(kps: ImageKeypoints, shape: tuple, params: dict, kpset: dict, detector: str = "akaze"):
    """(class_id, octave) for AKAZE's compute: the detector's own where valid, else from the size."""
    L = int(params["n_octave_layers"])
    n = akaze_n_levels(shape, int(params["n_octaves"]), L)
    derived = np.clip(np.rint(L * np.log2(np.maximum(kps.size.astype(np.float64), 1e-6) / 4.8)), 0, n - 1).astype(np.int32)
    level = derived
    if _same_scale_space(kpset, params, detector):
        own = (kps.class_id >= 0) & (kps.class_id < n) & (kps.octave == kps.class_id // L)
        level = np.where(own, kps.class_id, derived).astype(np.int32)
    return level, (level // L).astype(np.int32)


def _same_scale_space(kpset: dict, params: dict, detector: str) -> bool:
    """True iff the set was detected by ``detector`` with the scale space of ``params``."""
    if kpset.get("detector") != detector:
        return False
    d = kpset.get("params") or {}
    defaults = {"n_octaves": 4, "n_octave_layers": 4, "diffusivity": "pm_g2"}
    return all(d.get(k, v) == params[k] for k, v in defaults.items())


DIFFUSIVITY = {"pm_g1": "KAZE_DIFF_PM_G1", "pm_g2": "KAZE_DIFF_PM_G2", "weickert": "KAZE_DIFF_WEICKERT",
               "charbonnier": "KAZE_DIFF_CHARBONNIER"}


def make_akaze(family: str, params: dict, descriptor_type: str):
    diff = _cv_attr(choice(family, params, "diffusivity", DIFFUSIVITY))
    return _cv_attr("AKAZE_create")(descriptor_type=_cv_attr(descriptor_type),
                                     descriptor_size=int(params.get("descriptor_size", 0)),
                                     descriptor_channels=int(params.get("descriptor_channels", 3)),
                                     nOctaves=int(params["n_octaves"]), nOctaveLayers=int(params["n_octave_layers"]),
                                     diffusivity=diff)


def akaze_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    kind = "AKAZE_DESCRIPTOR_MLDB_UPRIGHT" if params["upright"] else "AKAZE_DESCRIPTOR_MLDB"
    return akaze_family_rows("akaze", kind, image_path, kps, params, kpset)


def akaze_family_rows(family: str, kind: str, image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """AKAZE's compute (MLDB or KAZE-type descriptor) at ``kps`` with levels from :func:`akaze_levels`."""
    akaze = make_akaze(family, params, kind)
    if len(kps) == 0:
        return _rows(akaze, image_path, kps, family, tag=False)
    gray = read_image(image_path)
    level, octave = akaze_levels(kps, gray.shape, params, kpset)
    if kind.startswith("AKAZE_DESCRIPTOR_KAZE"):
        from descbench.descriptors.opencv_float import check_msurf_scale

        check_msurf_scale(kps.size, octave, family, image_path)
    cv = cv_keypoints(kps.x, kps.y, kps.size, kps.angle, octave, level, kps.response)
    return compute_rows(akaze, gray, cv, family=family, image_path=image_path, tag=False)


# --------------------------------------------------------------------------- single-scale patterns


def brisk_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    return _rows(_cv_attr("BRISK_create")(patternScale=float(params["pattern_scale"])), image_path, kps, "brisk")


def freak_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    p = params
    freak = _cv_attr("FREAK_create")(orientationNormalized=bool(p["orientation_normalized"]), scaleNormalized=bool(p["scale_normalized"]),
                                     patternScale=float(p["pattern_scale"]), nOctaves=int(p["n_octaves"]))
    return _rows(freak, image_path, kps, "freak")


def brief_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    nbytes = choice("brief", params, "bytes", {16: 16, 32: 32, 64: 64})
    brief = _cv_attr("BriefDescriptorExtractor_create")(bytes=nbytes, use_orientation=bool(params["use_orientation"]))
    return _rows(brief, image_path, kps, "brief")


def latch_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    p = params
    nbytes = choice("latch", p, "bytes", {b: b for b in (1, 2, 4, 8, 16, 32, 64)})
    latch = _cv_attr("LATCH_create")(bytes=nbytes, rotationInvariance=bool(p["rotation_invariance"]),
                                     half_ssd_size=int(p["half_ssd_size"]), sigma=float(p["sigma"]))
    return _rows(latch, image_path, kps, "latch")


def beblid_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    bits = choice("beblid", params, "n_bits", {256: "BEBLID_SIZE_256_BITS", 512: "BEBLID_SIZE_512_BITS"})
    ex = _cv_attr("BEBLID_create")(scale_factor(params, kpset, BEBLID_SCALE), _cv_attr(bits))
    return _rows(ex, image_path, kps, "beblid")


def teblid_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    bits = choice("teblid", params, "n_bits", {256: "TEBLID_SIZE_256_BITS", 512: "TEBLID_SIZE_512_BITS"})
    ex = _cv_attr("TEBLID_create")(scale_factor(params, kpset, BEBLID_SCALE), _cv_attr(bits))
    return _rows(ex, image_path, kps, "teblid")


# BoostDesc's ``desc`` codes (OpenCV's enum; the Python bindings do not export them).
BINBOOST_DESC = {"binboost_256": 302, "binboost_128": 301, "binboost_64": 300, "bgm": 100, "bgm_hard": 101, "bgm_bilinear": 102}


def binboost_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    desc = choice("binboost", params, "desc", BINBOOST_DESC)
    ex = _cv_attr("BoostDesc_create")(desc=desc, use_scale_orientation=bool(params["use_scale_orientation"]),
                                      scale_factor=scale_factor(params, kpset, VGG_BOOST_SCALE))
    return _rows(ex, image_path, kps, "binboost")


FAMILIES = (
    DescriptorFamily("orb", orb_descriptors, {"scale_factor": 1.2, "n_levels": 8, "edge_threshold": 31, "patch_size": 31}, binary=True),
    DescriptorFamily("brisk", brisk_descriptors, {"pattern_scale": 1.0}, binary=True),
    DescriptorFamily("akaze", akaze_descriptors, {"upright": False, "descriptor_size": 0, "descriptor_channels": 3, "n_octaves": 4,
                                                  "n_octave_layers": 4, "diffusivity": "pm_g2"}, binary=True),
    DescriptorFamily("freak", freak_descriptors, {"orientation_normalized": True, "scale_normalized": True, "pattern_scale": 22.0,
                                                  "n_octaves": 4}, binary=True),
    DescriptorFamily("brief", brief_descriptors, {"bytes": 32, "use_orientation": False}, binary=True),
    DescriptorFamily("latch", latch_descriptors, {"bytes": 32, "rotation_invariance": True, "half_ssd_size": 3, "sigma": 2.0}, binary=True),
    DescriptorFamily("beblid", beblid_descriptors, {"scale_factor": None, "n_bits": 512}, binary=True),
    DescriptorFamily("teblid", teblid_descriptors, {"scale_factor": None, "n_bits": 256}, binary=True),
    DescriptorFamily("binboost", binboost_descriptors, {"desc": "binboost_256", "use_scale_orientation": True, "scale_factor": None},
                     binary=True),
)
