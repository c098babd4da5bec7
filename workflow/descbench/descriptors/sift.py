"""SIFT descriptors (OpenCV), computed at the given keypoints.

Parameter ``convention``: ``opencv`` (default) is OpenCV's output as it is (values rounded to
integers 0..255, stored as float32). ``workbench`` is the C++ DescriptorWorkbench's ``sift``:
its ``SIFTWrapper.cpp`` calls ``cv::SIFT::create()->compute`` on the grey image it gets from
``cvtColor(BGR2GRAY)`` of an ``IMREAD_COLOR`` read (``processing.cpp``), i.e. OpenCV 4's
float32 output, which OpenCV also rounds to integers; every row is then L2-normalised (the
project's measurement of its pipeline: true mAP agrees to ~1e-9 with, ~1e-5 without; its rows
within 3.0e-8 of the runner's own, ``tests/interop/test_dw_dsp_pooling.py``). That L2 step is the
runner's (``NoPooling``), not ``SIFTWrapper``'s, so the workbench's domain-size pooling pools the
rows without it: ``dsp`` computes this convention without the step (:func:`sift_pool_params`,
:mod:`descbench.descriptors.pooling`). The unrounded-float SIFT of the workbench's own ``VanillaSIFT`` is used by its RGBSIFT and DSP
descriptors (see :mod:`descbench.descriptors.rgbsift`, :mod:`descbench.descriptors.dspsift`).

``vsift`` is the workbench's ``vSIFT`` (``VSIFTWrapper.cpp``: ``VanillaSIFT::compute`` with
provided keypoints, then its pipeline's ``NoPooling`` row L2 normalisation): that unrounded
VanillaSIFT (:mod:`descbench.descriptors.sift_kernel`, the ``rgbsift`` family's per-channel
SIFT) on the ``cvtColor(BGR2GRAY)`` grey of the colour read, with VanillaSIFT's own pyramid
(3 layers, sigma 1.6, whatever the keypoint set's SIFT parameters) and each keypoint's packed
octave field (the set's own on a SIFT set, else derived from the size), rows L2-normalised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import has_sift_octaves, keypoints_to_cv, make_sift, sift_octave_from_size
from descbench.params import object_fragment


def sift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """128-D OpenCV SIFT at ``kps`` (float32; OpenCV rounds the values to integers 0..255).

    On a SIFT keypoint set the pyramid parameters are the set's SIFT parameters and each keypoint
    keeps its own octave field (the descriptor sees the scale space the keypoint was detected in).
    On keypoints of any other detector (or from files) the pyramid is OpenCV's default and the
    octave field, which would otherwise be read as a SIFT octave/layer it is not, is derived from
    the keypoint size (:func:`descbench.keypoints.sift.sift_octave_from_size`).
    """
    convention = params.get("convention", "opencv")
    if convention not in (*CONVENTIONS, EXTRACTOR):
        raise ConfigError(f"descriptor family 'sift': convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    if len(kps) == 0:
        return np.zeros((0, 128), dtype=np.float32)
    if convention == "vsift":
        import cv2

        gray = cv2.cvtColor(read_image(image_path, color=True), cv2.COLOR_BGR2GRAY)
        return vanilla_sift(gray, kps, kpset, str(image_path))
    if convention in ("workbench", EXTRACTOR):
        import cv2

        gray = cv2.cvtColor(read_image(image_path, color=True), cv2.COLOR_BGR2GRAY)
    else:
        gray = read_image(image_path)
    sift, cv_kps = sift_setup(kps, kpset, gray.shape[:2])
    out_kps, desc = sift.compute(gray, cv_kps)
    if desc is None or len(out_kps) != len(cv_kps):
        raise RuntimeError(f"OpenCV SIFT returned {0 if desc is None else len(out_kps)} of {len(cv_kps)} descriptors for {image_path}")
    desc = np.ascontiguousarray(desc, dtype=np.float32)
    if convention == "workbench":
        from descbench.descriptors.sift_kernel import l2_rows

        desc = l2_rows(desc)
    return desc


def sift_setup(kps: ImageKeypoints, kpset: dict, shape: tuple[int, int]):
    """(OpenCV SIFT, OpenCV keypoints) for ``kps`` on an image of ``shape`` (H, W).

    On a SIFT keypoint set the pyramid parameters are the set's SIFT parameters and each keypoint
    keeps its own octave field (the descriptor sees the scale space the keypoint was detected in).
    On keypoints of any other detector (or from files) the pyramid is OpenCV's default and the
    octave field, which would otherwise be read as a SIFT octave/layer it is not, is derived from
    the keypoint size (:func:`descbench.keypoints.sift.sift_octave_from_size`).
    """
    sift_params = kpset.get("params", {}) if kpset.get("detector") == "sift" else {}
    # a SIFT set, or locked keypoints whose file carries SIFT's own packed octave (exported from one)
    octave = None if has_sift_octaves(kpset) else sift_octave_from_size(kps.size, shape)
    return make_sift(sift_params), keypoints_to_cv(kps, octave)


def vanilla_sift(gray: np.ndarray, kps: ImageKeypoints, kpset: dict, where: str) -> np.ndarray:
    """The workbench's vSIFT rows (module docstring) on a grey uint8 image, L2-normalised."""
    from descbench.descriptors import sift_kernel as K

    octave = kps.octave if has_sift_octaves(kpset) else sift_octave_from_size(kps.size, gray.shape[:2])
    try:
        first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(kps.x, kps.y, kps.size, kps.angle, octave)
    except ValueError as exc:
        raise DataError(f"{where}: {exc}; convention vsift reads the keypoints' packed SIFT octave fields (octave >= -1, "
                        "layer <= 5)") from exc
    pyr = K.build_pyramid(np.ascontiguousarray(gray), first, n_oct)
    return K.cv_normalize_rows(K.normalise_sift(K.raw_histograms(pyr, level, ptx, pty, ori, scl)))


CONVENTIONS = ("opencv", "workbench", "vsift")
# not a config value: ``workbench`` without its runner's row normalisation, the rows of the workbench's
# SIFTWrapper::extract, which its DomainSizePooling pools (sift_pool_params; module docstring)
EXTRACTOR = "workbench_extractor"


def sift_pool_params(params: dict) -> dict:
    """``dsp``'s base params (DescriptorFamily.pool_params): ``convention: workbench`` pools the
    workbench's SIFTWrapper rows (OpenCV's SIFT rows on the ``cvtColor`` grey, not normalised), as its
    DomainSizePooling does; the other conventions as they are."""
    return {**params, "convention": EXTRACTOR} if params.get("convention") == "workbench" else params


# The family's parameters, their allowed values and defaults (the one declaration; descbench.params).
PARAMS_SCHEMA = {"sift": object_fragment(convention={"enum": list(CONVENTIONS), "default": "opencv"})}

# ----------------------------------------------------------------------------- patches

HPATCHES_SIFT_RATIO = 5.303  # hpatches-benchmark's keypoint size on a patch of side S: S / 5.303


def sift_patch_support(params: dict, side: int) -> float:
    """hpatches-benchmark's size (``extract_opencv_sift.py``): SIFT's 4 x 4 bins of 3 sigma =
    1.5 size px span 6 size = 73.5 px on a 65 px patch; samples beyond the patch are skipped."""
    return side / HPATCHES_SIFT_RATIO


def sift_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """OpenCV SIFT per patch exactly as :func:`sift_descriptors` runs it on the patch saved as an
    image. Its ``workbench`` grey image, ``cvtColor(BGR2GRAY)`` of the colour read of a grey file,
    is the grey patch itself (the BGR->grey weights sum to exactly 1 in fixed point);
    ``tests/descbench/patches/test_describe.py`` checks it against the registry on PNG files."""
    convention = params.get("convention", "opencv")
    if convention not in (*CONVENTIONS, EXTRACTOR):
        raise ConfigError(f"invalid config value at '{job.config_key}.convention': {convention!r}; allowed: {', '.join(CONVENTIONS)}")
    if convention == "vsift":  # the grey patch is its own cvtColor grey (sift_patch_rows' docstring)
        return job.per_patch(lambda i: vanilla_sift(job.patches[i], job.keypoint, job.kpset, job.name(i)))
    sift, cv_kps = sift_setup(job.keypoint, job.kpset, job.shape)

    def row(i):
        out_kps, desc = sift.compute(job.patches[i], cv_kps)
        if desc is None or len(out_kps) != 1:
            raise DataError(f"{job.name(i)}: OpenCV SIFT returned no descriptor at the centre keypoint")
        return desc

    out = job.per_patch(row).astype(np.float32)
    if convention == "workbench":
        from descbench.descriptors.sift_kernel import l2_rows

        out = l2_rows(out)
    return out


FAMILIES = (DescriptorFamily("sift", sift_descriptors, PARAMS_SCHEMA["sift"], patch_support=sift_patch_support,
                             patch_rows=sift_patch_rows, pool_params=sift_pool_params),)
