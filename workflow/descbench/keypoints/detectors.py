"""Detector registry: one entry per detector name of ``keypoint_sets.<set>.detector``.

Each detector turns a grayscale uint8 image and its ``params`` (schema names, defaults filled by
:func:`descbench.config.validate_config` from ``workflow/schemas/config.schema.yaml``, the one
place where each parameter and its default is defined) into the raw keypoints, in the detector's
own output order. The border rule and the response cap are applied afterwards by
:func:`descbench.keypoints.filter_keypoints`, the same for every detector.

OpenCV 5 moved BRISK, AKAZE and KAZE to ``cv2.xfeatures2d`` (opencv-contrib); they are looked up
there first, then in ``cv2``. SURF is non-free in every OpenCV wheel; ``precomputed`` keypoints
come from files (:mod:`descbench.precomputed`) and are handled by the keypoint stage itself.
``keynet`` is kornia's KeyNet (:mod:`descbench.keypoints.keynet`, torch): not an OpenCV
Feature2D, but an object with the same ``detect(gray, mask) -> list[cv2.KeyPoint]``.

The ``octave`` field keeps the detector's own meaning (SIFT: packed octave/layer; ORB, BRISK,
AKAZE, KAZE: pyramid level; GFTT, FAST, KeyNet: 0). Descriptors that need SIFT's packed octave
recompute it from the size when the keypoints are not SIFT's
(:func:`descbench.keypoints.sift.sift_octave_from_size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from descbench.keypoints import ImageKeypoints


def cv_attr(name: str):
    """An OpenCV name from ``cv2.xfeatures2d`` (opencv-contrib; where OpenCV 5 moved BRISK, AKAZE,
    KAZE and their constants) or else ``cv2``."""
    import cv2

    for mod in (getattr(cv2, "xfeatures2d", None), cv2):
        if mod is not None and hasattr(mod, name):
            return getattr(mod, name)
    raise RuntimeError(f"the installed OpenCV ({cv2.__version__}) has no {name}; install opencv-contrib-python-headless")


def _orb(p: dict):
    import cv2

    score = {"harris": cv2.ORB_HARRIS_SCORE, "fast": cv2.ORB_FAST_SCORE}[p["score_type"]]
    return cv2.ORB_create(nfeatures=p["n_features"], scaleFactor=p["scale_factor"], nlevels=p["n_levels"],
                          edgeThreshold=p["edge_threshold"], firstLevel=0, WTA_K=2, scoreType=score,
                          patchSize=p["patch_size"], fastThreshold=p["fast_threshold"])


def _brisk(p: dict):
    return cv_attr("BRISK_create")(thresh=p["threshold"], octaves=p["octaves"], patternScale=p["pattern_scale"])


def _diffusivity(name: str) -> int:
    return cv_attr({"pm_g1": "KAZE_DIFF_PM_G1", "pm_g2": "KAZE_DIFF_PM_G2", "weickert": "KAZE_DIFF_WEICKERT",
                     "charbonnier": "KAZE_DIFF_CHARBONNIER"}[name])


def _akaze(p: dict):
    return cv_attr("AKAZE_create")(threshold=p["threshold"], nOctaves=p["n_octaves"],
                                      nOctaveLayers=p["n_octave_layers"], diffusivity=_diffusivity(p["diffusivity"]))


def _kaze(p: dict):
    # KAZE's detect gives no orientation (angle 0) whatever `upright`: that is a descriptor option
    return cv_attr("KAZE_create")(threshold=p["threshold"], nOctaves=p["n_octaves"],
                                     nOctaveLayers=p["n_octave_layers"], diffusivity=_diffusivity(p["diffusivity"]))


def _gftt(p: dict):
    import cv2

    return cv2.GFTTDetector_create(maxCorners=p["max_corners"], qualityLevel=p["quality_level"], minDistance=p["min_distance"],
                                   blockSize=p["block_size"], useHarrisDetector=p["use_harris"], k=p["harris_k"])


def _fast(p: dict):
    import cv2

    kind = {"9_16": cv2.FAST_FEATURE_DETECTOR_TYPE_9_16, "7_12": cv2.FAST_FEATURE_DETECTOR_TYPE_7_12,
            "5_8": cv2.FAST_FEATURE_DETECTOR_TYPE_5_8}[p["type"]]
    return cv2.FastFeatureDetector_create(threshold=p["threshold"], nonmaxSuppression=p["nonmax_suppression"], type=kind)


def _sift(p: dict):
    from descbench.keypoints.sift import make_sift

    return make_sift(p)


def _surf(p: dict):
    # OpenCV's SURF when the OpenCV build has the non-free module, else descbench's numba SURF
    from descbench.keypoints.surf import make_surf_detector

    return make_surf_detector(p)


def _keynet(p: dict):
    # kornia's KeyNet (torch, the learned extra), wrapped with an OpenCV-style detect()
    from descbench.keypoints.keynet import cached_detector

    return cached_detector(p)


@dataclass(frozen=True)
class Detector:
    """A detector: ``create(params)`` returns an OpenCV Feature2D (or an object with its
    ``detect(gray, mask)``, e.g. KeyNet's) whose ``detect`` is used."""

    name: str
    create: Callable[[dict], object]
    schema_definition: str  # its params' definition in config.schema.yaml


DETECTORS: dict[str, Detector] = {
    d.name: d
    for d in (
        Detector("sift", _sift, "sift_detector_params"),
        Detector("orb", _orb, "orb_detector_params"),
        Detector("brisk", _brisk, "brisk_detector_params"),
        Detector("akaze", _akaze, "akaze_detector_params"),
        Detector("kaze", _kaze, "kaze_detector_params"),
        Detector("gftt", _gftt, "gftt_detector_params"),
        Detector("fast", _fast, "fast_detector_params"),
        Detector("surf", _surf, "surf_detector_params"),
        Detector("keynet", _keynet, "keynet_detector_params"),
    )
}


def keypoints_from_cv(kps) -> ImageKeypoints:
    """OpenCV KeyPoints -> :class:`ImageKeypoints` (all fields; ``source_index`` = output order)."""
    n = len(kps)
    return ImageKeypoints(
        x=np.array([k.pt[0] for k in kps], dtype=np.float32).reshape(n),
        y=np.array([k.pt[1] for k in kps], dtype=np.float32).reshape(n),
        size=np.array([k.size for k in kps], dtype=np.float32).reshape(n),
        angle=np.array([k.angle for k in kps], dtype=np.float32).reshape(n),
        response=np.array([k.response for k in kps], dtype=np.float32).reshape(n),
        octave=np.array([k.octave for k in kps], dtype=np.int32).reshape(n),
        class_id=np.array([k.class_id for k in kps], dtype=np.int32).reshape(n),
        source_index=np.arange(n, dtype=np.int32),
    )


def detect(name: str, gray: np.ndarray, params: dict) -> ImageKeypoints:
    """Raw keypoints of detector ``name`` on a grayscale uint8 image, in its output order."""
    if name not in DETECTORS:
        raise KeyError(f"unknown detector '{name}'; known: {', '.join(sorted(DETECTORS))}, precomputed")
    return keypoints_from_cv(DETECTORS[name].create(params).detect(gray, None))
