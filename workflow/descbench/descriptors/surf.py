"""SURF descriptors (Bay et al., ECCV 2006 / CVIU 2008) in numba, at any keypoints.

OpenCV's SURF is used instead when this OpenCV build has the non-free module
(:func:`descbench.keypoints.surf.opencv_surf`); it is absent from the pip wheels.

The descriptor (Bay et al. 2008, section 4.1), for a keypoint at (x, y) with SURF scale s and
orientation theta:

* a square window of side 20 s centred on the keypoint, its axes rotated by theta
  (u along ``(cos theta, sin theta)``, v along ``(-sin theta, cos theta)``, image y down);
* 20 x 20 sample points spaced s (``u, v = (-9.5 .. 9.5) s``), 4 x 4 sub-regions of 5 x 5
  samples;
* at each sample the Haar wavelet responses (dx, dy) of nominal side 2 s on the integral
  image (pixel-centred, footprint ``2 round(s) + 1`` px, see
  :func:`descbench.keypoints.surf.haar_xy`), axis-aligned, then expressed in the keypoint frame
  (``du = dx cos + dy sin``, ``dv = -dx sin + dy cos``) - the paper's approximation of
  rotating the wavelets themselves; weighted by a Gaussian of sigma 3.3 s centred on the
  keypoint;
* per sub-region ``(sum du, sum dv, sum |du|, sum |dv|)``: 64-D; with ``extended`` the sums of
  du and |du| are split by the sign of dv (dv < 0, dv >= 0) and those of dv and |dv| by the
  sign of du: 128-D, per sub-region ``(sum du, sum |du|)`` for dv < 0, then for dv >= 0, then
  ``(sum dv, sum |dv|)`` for du < 0, then for du >= 0;
* sub-regions in row-major order of (v, u); the vector is scaled to unit L2 norm (a constant
  window, whose vector is all zero, stays all zero).

Keypoints of any detector:

* scale: ``s = 1.2 size / 9`` with ``size`` the OpenCV ``KeyPoint.size`` (for SURF keypoints the
  box filter side; the mapping OpenCV's SURF applies to any keypoint), so the window side is
  ``20 s = 2.67 size``; ``size`` must be finite and > 0.
* orientation: with ``upright`` false, SURF's own orientation is computed at every keypoint
  (:func:`descbench.keypoints.surf.surf_orientations`) and the keypoint's ``angle`` is ignored:
  other detectors' angles follow other conventions (or are -1), and recomputing SURF's own is
  cheap, deterministic and gives SURF keypoints the angle their detector gave them. With
  ``upright`` (U-SURF) theta = 0.
* border: keypoints are never dropped. Haar wavelets reaching outside the image use only
  their in-image pixels (each half's mean over its in-image part; a half entirely outside
  gives 0), see :func:`descbench.keypoints.surf.haar_xy`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

# extended: 128-D instead of 64-D; upright: U-SURF (no orientation)
PARAMS_SCHEMA = {"surf": object_fragment(extended={"type": "boolean", "default": False},
                                         upright={"type": "boolean", "default": False})}


def _opencv_compute(gray: np.ndarray, kps: ImageKeypoints, extended: bool, upright: bool) -> np.ndarray | None:
    """OpenCV's SURF descriptors when available and it keeps every keypoint, else None."""
    from descbench.keypoints.surf import opencv_surf

    surf = opencv_surf({"upright": upright}, extended=extended)
    if surf is None:
        return None
    import cv2

    cv_kps = [cv2.KeyPoint(float(x), float(y), float(s), -1.0) for x, y, s in zip(kps.x, kps.y, kps.size)]
    out_kps, desc = surf.compute(gray, cv_kps)
    if desc is None or len(out_kps) != len(cv_kps):
        return None  # OpenCV drops keypoints whose wavelets do not fit: use ours for the whole image
    return np.ascontiguousarray(desc, dtype=np.float32)


def surf_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """The ``surf`` family: one SURF vector per keypoint, in input order (module docstring)."""
    extended = bool(params.get("extended", False))
    upright = bool(params.get("upright", False))
    if len(kps) == 0:
        return np.zeros((0, 128 if extended else 64), dtype=np.float32)
    gray = read_image(image_path)
    desc = _opencv_compute(gray, kps, extended, upright)
    if desc is not None:
        return desc
    from descbench.descriptors.surf_kernels import surf_describe  # numba: imported by SURF jobs only

    return surf_describe(gray, kps.x, kps.y, kps.size, extended, upright, what=f"keypoints of image {image_path}")


def surf_patch_support(params: dict, side: int) -> float:
    """Window 20 s with s = 1.2 size / 9 spans the patch: size = side * 9 / 24 (24.375 on 65 px);
    rotated corners and wavelets beyond the border use their in-image part (SURF's border rule)."""
    return side * 9.0 / 24.0


def surf_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """:func:`surf_descriptors` on each patch as an image (OpenCV's SURF when it keeps the
    keypoint, else the numba kernel), one patch at a time."""
    extended = bool(params.get("extended", False))
    upright = bool(params.get("upright", False))
    kps = job.keypoint

    def row(i):
        desc = _opencv_compute(job.patches[i], kps, extended, upright)
        if desc is not None:
            return desc
        from descbench.descriptors.surf_kernels import surf_describe

        return surf_describe(job.patches[i], kps.x, kps.y, kps.size, extended, upright, what=job.name(i))

    return job.per_patch(row)


def surf_width(params: dict, part_widths: list[int]) -> int:
    return 128 if params.get("extended") else 64


FAMILIES = (DescriptorFamily("surf", surf_descriptors, PARAMS_SCHEMA["surf"], patch_support=surf_patch_support,
                             patch_rows=surf_patch_rows, width=surf_width),)
