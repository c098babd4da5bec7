"""SIFT descriptors (OpenCV), computed at the given keypoints.

Parameter ``convention``: ``opencv`` (default) is OpenCV's output as it is (values rounded to
integers 0..255, stored as float32). ``workbench`` is the C++ DescriptorWorkbench's ``sift``:
its ``SIFTWrapper.cpp`` calls ``cv::SIFT::create()->compute`` on the grey image it gets from
``cvtColor(BGR2GRAY)`` of an ``IMREAD_COLOR`` read (``processing.cpp``), i.e. OpenCV 4's
float32 output, which OpenCV also rounds to integers; every row is then L2-normalised (the
project's measurement of its pipeline: true mAP agrees to ~1e-9 with, ~1e-5 without). The
unrounded-float SIFT of the workbench's own ``VanillaSIFT`` is used by its RGBSIFT and DSP
descriptors (see :mod:`descbench.descriptors.rgbsift`, :mod:`descbench.descriptors.dspsift`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily
from descbench.errors import ConfigError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import keypoints_to_cv, make_sift, sift_octave_from_size


def sift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """128-D OpenCV SIFT at ``kps`` (float32; OpenCV rounds the values to integers 0..255).

    On a SIFT keypoint set the pyramid parameters are the set's SIFT parameters and each keypoint
    keeps its own octave field (the descriptor sees the scale space the keypoint was detected in).
    On keypoints of any other detector (or from files) the pyramid is OpenCV's default and the
    octave field, which would otherwise be read as a SIFT octave/layer it is not, is derived from
    the keypoint size (:func:`descbench.keypoints.sift.sift_octave_from_size`).
    """
    convention = params.get("convention", "opencv")
    if convention not in CONVENTIONS:
        raise ConfigError(f"descriptor family 'sift': convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    if len(kps) == 0:
        return np.zeros((0, 128), dtype=np.float32)
    if convention == "workbench":
        import cv2

        gray = cv2.cvtColor(read_image(image_path, color=True), cv2.COLOR_BGR2GRAY)
    else:
        gray = read_image(image_path)
    is_sift_set = kpset.get("detector") == "sift"
    sift_params = kpset.get("params", {}) if is_sift_set else {}
    # locked keypoints whose file carries SIFT's own packed octave (e.g. exported from a sift set)
    is_sift_set = is_sift_set or (kpset.get("detector") == "locked" and kpset.get("params", {}).get("octave") == "sift")
    sift = make_sift(sift_params)
    octave = None if is_sift_set else sift_octave_from_size(kps.size, gray.shape[:2])
    cv_kps = keypoints_to_cv(kps, octave)
    out_kps, desc = sift.compute(gray, cv_kps)
    if desc is None or len(out_kps) != len(cv_kps):
        raise RuntimeError(f"OpenCV SIFT returned {0 if desc is None else len(out_kps)} of {len(cv_kps)} descriptors for {image_path}")
    desc = np.ascontiguousarray(desc, dtype=np.float32)
    if convention == "workbench":
        from descbench.descriptors.sift_kernel import l2_rows

        desc = l2_rows(desc)
    return desc


CONVENTIONS = ("opencv", "workbench")


def _check(params: dict, where: str) -> dict:
    if params.get("convention") not in CONVENTIONS:
        raise ConfigError(f"invalid config value at '{where}.convention': {params.get('convention')!r}; "
                          f"allowed: {', '.join(CONVENTIONS)}")
    return params


FAMILIES = (DescriptorFamily("sift", sift_descriptors, defaults={"convention": "opencv"}, check=_check),)
