"""DSP-SIFT (domain-size pooling) and its colour version DSPRGBSIFT.

Domain-size pooling (Dong & Soatto, "Domain-Size Pooling in Local Descriptors: DSP-SIFT",
CVPR 2015): the SIFT histogram of a keypoint of size ``s`` is computed at the sizes ``a s`` for
every ``a`` in a list of scales and the results are averaged element-wise. Parameter ``scales``
(list of positive numbers, ``null`` = the convention's default, which is then what the run
uses); ``convention`` chooses the rest:

* ``dong_soatto`` (default scales: 10 values evenly spaced from 1/6 to 3, the authors' defaults as
  recorded in the project's protocol notes): the *raw* (unclipped, unnormalised) 4x4x8 histograms
  are averaged, then SIFT's normalisation is applied once (clip at 0.2 of the L2 norm,
  renormalise) and the row is scaled to unit L2 norm. Each size ``a s`` is described as OpenCV's
  ``SIFT.compute`` would describe a keypoint of that size (level from
  :func:`descbench.keypoints.sift.sift_octave_from_size`, clamped to the pyramid; pyramid doubled
  iff some keypoint falls in octave -1 at that size), without the rounding. What is implemented is this definition; it was not compared with the
  authors' MATLAB/VLFeat code in this session.
* ``workbench`` (default scales [1.0, 1.5, 2.0]): exactly the C++ DescriptorWorkbench's
  ``dspsift_v2`` / ``dsprgbsift_v2`` (``src/core/descriptor/extractors/wrappers/
  DSPSIFTWrapperV2.hpp`` and ``DSPRGBSIFTWrapperV2.cpp`` -> ``keypoints/DSPVanillaSIFTWrapper.h``,
  ``computeDSP``), verified in its source:

  - scales: ``DescriptorParams::scales`` default ``{1.0, 1.5, 2.0}`` (``include/thesis_project/
    types.hpp``); the ``{0.85, 1.075, 1.30}`` of ``detail::defaultScales()`` is used only when the
    list is empty, which the config default never is. Aggregation default ``AVERAGE``.
  - pyramid: first octave ``min(0, min unpackOctave(kpt.octave))`` (so the keypoints' own packed
    octave fields decide whether the image is doubled), octave count ``max - first + 1``, one
    more octave when there is more than one scale and the smallest is < 1; VanillaSIFT's
    ``createInitialImage``/``buildGaussianPyramid`` (= OpenCV's). Grey: ``cvtColor(BGR2GRAY)``
    of the colour image. Colour (RGBSIFT): a 3-channel pyramid of the BGR image.
  - per scale ``a``: ``size = kpt.size * a`` (float), ``t = log2(size / (2 sigma))``,
    ``octave = floor(t)``, ``layer = floor((t - octave) L)`` (floor, not round), position and size
    scaled by ``2^-octave``, level index ``(octave - first)(L + 3) + layer`` clamped to the
    pyramid (the position scale is *not* corrected when the index is clamped); an index < 0 marks
    the row invalid for that scale (filled with -1 and skipped by the average, element by
    element). Orientation: the keypoint's angle (``360 - angle``), never recomputed.
  - the per-scale descriptor is VanillaSIFT's (RGBSIFT's for colour) ``calcSIFTDescriptor``:
    clipped and scaled to 512 per descriptor (per channel for colour, per the protocol notes;
    ``RGBSIFT.cpp`` is not in the searchable copy), *not* rounded; no normalisation before
    pooling (``normalize_before_pooling = false``); the average is element-wise over valid
    scales (so the colour version pools each channel block separately); then every row is
    L2-normalised (``normalize_after_pooling = true``, ``NORM_L2``; for colour over all 384 values).

* ``workbench_v1`` (``dspsift`` only; default scales [1.0, 1.5, 2.0]): exactly the workbench's
  older ``DSPSIFT`` type (``src/core/descriptor/extractors/wrappers/DSPSIFTWrapper.cpp:12-37`` ->
  ``keypoints/DSPSIFT.cpp``, ``DSPSIFT::compute`` / ``operator()`` 8-argument version and
  ``calcDescriptors`` 8-argument version, lines 132-252 and 266-347), verified in its source and
  against its own rows (``tests/interop/test_dw_descriptors.py``):

  - scales: the wrapper keeps only the *count* ``n`` and the smallest and largest value of
    ``DescriptorParams::scales`` (a ``vector<float>``: each value is rounded to float32 first) and
    the class resamples them linearly: factor ``i`` is ``lo + i (hi - lo) / (n - 1)`` in double
    (:func:`workbench_v1_factors`), so ``[0.85, 1.0, 1.3]`` is computed as ``[0.85, 1.075, 1.3]``;
    the run's parameters record the factors used. With more than one factor each is applied as in
    ``workbench`` above (same pyramid rule, same floor level rule, same clamping and -1 rows), except
    that ``size = (float)(kpt.size * factor)`` is rounded once from double.
  - one scale (``n = 1``): the factor is ``hi`` and the keypoint's *own* packed octave and layer
    choose the level (as SIFT's ``compute``), the size is ``kpt.size 2^-octave`` times the factor in
    float32; no averaging.
  - the per-scale descriptor is VanillaSIFT's unrounded ``calcSIFTDescriptor`` (L2 norm 512), the
    average is element-wise over valid scales as in ``workbench``, and the wrapper does *not*
    normalise: the runner's ``cv::normalize(row, NORM_L2)`` (:func:`descbench.descriptors.
    sift_kernel.cv_normalize_rows`) is applied once. A keypoint with no valid scale (``size x
    factor < 3.2 x 2^first`` for every factor, ``first`` the pyramid's first octave: on SIFT's own
    keypoints only when every factor is below 0.9) gets NaN in the workbench (0 / 0); here it is an
    error naming the keypoint.

  With the default scales it computes what ``workbench`` (``DSPSIFT_V2``) computes, normalised
  once instead of twice (the workbench's own rows of the two types: 3e-8 apart on the demo fixture).

``root: true`` applies RootSIFT (``sqrt(d / ||d||_1)``, the workbench's ``R_AFTER_POOLING``) last.
For the colour family the ``dong_soatto`` blocks are R, G, B, each unit-L2 (as ``rgbsift``'s
``descbench`` convention); ``workbench`` blocks are B, G, R.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob, lazy_module
from descbench.descriptors.rgbsift import COLOUR_COST, COLOUR_WIDTH, check_convention, keypoint_octaves, read_colour
from descbench.descriptors.rootsift import root_normalise
from descbench.descriptors.sift import sift_patch_support
from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import sift_octave_from_size
from descbench.jobfacts import Cost
from descbench.params import fragment_defaults, object_fragment

K = lazy_module("descbench.descriptors.sift_kernel")  # numba kernels, loaded when a descriptor is computed

CONVENTIONS = ("dong_soatto", "workbench", "workbench_v1")
RGB_CONVENTIONS = ("dong_soatto", "workbench")  # dsprgbsift: the workbench has no colour DSPSIFT (v1)
DEFAULT_SCALES = {
    "dong_soatto": [float(v) for v in np.linspace(1.0 / 6.0, 3.0, 10)],
    "workbench": [1.0, 1.5, 2.0],
    "workbench_v1": [1.0, 1.5, 2.0],
}
N_LAYERS = 3
SIGMA = 1.6


def workbench_v1_factors(scales: list[float]) -> list[float]:
    """The scale factors ``DSPSIFTWrapper`` + ``DSPSIFT::calcDescriptors`` use for ``scales``
    (DSPSIFTWrapper.cpp:19-24, DSPSIFT.cpp:138-143): each value rounded to float32 (``scales`` is a
    ``vector<float>``), then ``n`` factors from the smallest to the largest,
    ``lo + i (hi - lo) / (n - 1)`` in double; one scale: ``[hi]``."""
    f = [float(np.float32(s)) for s in scales]
    lo, hi, n = min(f), max(f), len(f)
    return [hi] if n == 1 else [lo + i * (hi - lo) / (n - 1) for i in range(n)]


def effective_scales(params: dict) -> list[float]:
    scales = params.get("scales")
    out = list(DEFAULT_SCALES[params["convention"]]) if scales is None else [float(s) for s in scales]
    return workbench_v1_factors(out) if params["convention"] == "workbench_v1" else out


def check_params(params: dict, where: str) -> dict:
    """Config-time rule across keys (types and values are the schema's): ``scales: null`` is the
    convention's default list, recorded as the list actually used so that the run's parameters name
    it (``workbench_v1``: the resampled factors, :func:`workbench_v1_factors`)."""
    return {**params, "scales": effective_scales(params)}


# ----------------------------------------------------------------------------- workbench (DSPSIFT_V2)


def workbench_dsp_layout(octave_field: np.ndarray, scales: list[float]) -> tuple[int, int]:
    """(first_octave, n_octaves) of computeDSP's pyramid."""
    o, _ = K.unpack_octave(octave_field)
    first = int(min(0, o.min()))
    n_oct = int(o.max()) - first + 1
    if len(scales) > 1 and min(scales) < 1.0:
        n_oct += 1
    return first, max(n_oct, 1)


def workbench_scale_geometry(kps: ImageKeypoints, a: float, first: int, n_levels: int, size: np.ndarray | None = None):
    """Per-keypoint (level, ptx, pty, scl, valid) of computeDSP at scale ``a`` (float32 as in C++);
    ``size``: the scaled sizes when computed otherwise (``workbench_v1``: rounded once from double)."""
    if size is None:
        size = (kps.size.astype(np.float32) * np.float32(a)).astype(np.float32)
    t = np.log2(size.astype(np.float64) / (2.0 * SIGMA)).astype(np.float32)
    octave = np.floor(t).astype(np.int64)
    layer = np.floor((t - octave.astype(np.float32)) * np.float32(N_LAYERS)).astype(np.int64)
    scale = K.octave_scale(octave)
    wanted = (octave - first) * (N_LAYERS + 3) + layer
    level = np.clip(wanted, 0, n_levels - 1)
    ptx = kps.x.astype(np.float32) * scale
    pty = kps.y.astype(np.float32) * scale
    scl = (size * scale) * np.float32(0.5)
    return np.where(wanted < 0, -1, level), ptx, pty, scl, wanted >= 0


def workbench_dsp(channels: list[np.ndarray], kps: ImageKeypoints, octave_field: np.ndarray, scales: list[float]) -> np.ndarray:
    """DSPVanillaSIFTWrapper::computeDSP with AVERAGE aggregation, before the final L2 step."""
    first, n_oct = workbench_dsp_layout(octave_field, scales)
    pyrs = [K.build_pyramid(ch, first, n_oct, N_LAYERS, SIGMA) for ch in channels]
    ori = K.opencv_angle(kps.angle)
    dim = K.DESCR_SIZE * len(channels)
    acc = np.zeros((len(kps), dim), dtype=np.float32)
    cnt = np.zeros((len(kps), 1), dtype=np.int32)
    for a in scales:
        level, ptx, pty, scl, valid = workbench_scale_geometry(kps, a, first, pyrs[0].n_levels)
        desc = np.concatenate([K.normalise_sift(K.raw_histograms(p, level, ptx, pty, ori, scl)) for p in pyrs], axis=1)
        # invalid rows are -1 in the workbench and skipped element-wise; a valid element equal to
        # -1 is impossible (descriptor values are >= 0)
        acc += np.where(valid[:, None], desc, np.float32(0.0))
        cnt += valid[:, None]
    out = np.where(cnt > 0, acc / np.maximum(cnt, 1).astype(np.float32), np.float32(0.0)).astype(np.float32)
    return K.l2_rows(out)


def workbench_v1_dsp(grey: np.ndarray, kps: ImageKeypoints, octave_field: np.ndarray, factors: list[float]) -> np.ndarray:
    """DSPSIFT::operator() with provided keypoints (DSPSIFT.cpp:266-347, calcDescriptors 132-252) at
    :func:`workbench_v1_factors`, before the runner's L2 step: average of VanillaSIFT rows (norm 512)."""
    first, n_oct = workbench_dsp_layout(octave_field, factors)
    pyr = K.build_pyramid(grey, first, n_oct, N_LAYERS, SIGMA)
    ori = K.opencv_angle(kps.angle)
    if len(factors) == 1:  # the keypoints' own octave and layer; size times the factor in float32
        o, layer = K.unpack_octave(octave_field)
        if layer.max() > N_LAYERS + 2:
            raise DataError(f"a keypoint's packed octave field has layer {int(layer.max())} > {N_LAYERS + 2}: "
                            "DSPSIFT asserts (DSPSIFT.cpp:183); fix the keypoints' octave fields")
        scale = K.octave_scale(o)
        level = np.clip((o - first) * (N_LAYERS + 3) + layer, 0, pyr.n_levels - 1)
        scl = ((kps.size.astype(np.float32) * scale) * np.float32(factors[0])) * np.float32(0.5)
        return K.normalise_sift(K.raw_histograms(pyr, level, kps.x.astype(np.float32) * scale,
                                                 kps.y.astype(np.float32) * scale, ori, scl))
    acc = np.zeros((len(kps), K.DESCR_SIZE), dtype=np.float32)
    cnt = np.zeros((len(kps), 1), dtype=np.int32)
    for a in factors:
        size = (kps.size.astype(np.float64) * a).astype(np.float32)
        level, ptx, pty, scl, valid = workbench_scale_geometry(kps, a, first, pyr.n_levels, size=size)
        desc = K.normalise_sift(K.raw_histograms(pyr, level, ptx, pty, ori, scl))
        acc += np.where(valid[:, None], desc, np.float32(0.0))
        cnt += valid[:, None]
    if (cnt == 0).any():
        i = int(np.flatnonzero(cnt[:, 0] == 0)[0])
        least = 2.0 * SIGMA * 2.0 ** first / max(factors)
        raise DataError(f"keypoint row {i} (size {float(kps.size[i]):.3f}) lies below the pyramid's first octave at "
                        f"every DSPSIFT scale factor {factors}; the workbench's DSPSIFT gives it a NaN row (0/0): "
                        f"use scales whose largest is >= 1 (the default [1.0, 1.5, 2.0]) or drop keypoints smaller "
                        f"than {least:.3g} px (the keypoint set's filter min_size)")
    return (acc / cnt.astype(np.float32)).astype(np.float32)


# ----------------------------------------------------------------------------- Dong & Soatto


def dong_soatto_dsp(channel: np.ndarray, kps: ImageKeypoints, scales: list[float]) -> np.ndarray:
    """Average of raw histograms at sizes ``a * size`` (OpenCV's size -> level rule), then SIFT's
    normalisation, then unit L2."""
    shape = channel.shape[:2]
    fields = [sift_octave_from_size(kps.size.astype(np.float64) * a, shape, N_LAYERS, SIGMA) for a in scales]
    # each size is described exactly as OpenCV's SIFT.compute would describe it (its own first
    # octave: the image is doubled iff some keypoint is in octave -1); a pyramid depends only on
    # its first octave (more octaves only append levels), so at most two are built
    layouts = [(int(min(0, K.unpack_octave(f)[0].min())), int(K.unpack_octave(f)[0].max())) for f in fields]
    pyrs = {}
    for first in {fo for fo, _ in layouts}:
        top = max(mo for fo, mo in layouts if fo == first)
        pyrs[first] = K.build_pyramid(channel, first, top - first + 1, N_LAYERS, SIGMA)
    ori = K.opencv_angle(kps.angle)
    acc = np.zeros((len(kps), K.DESCR_SIZE), dtype=np.float64)
    for a, f, (first, _) in zip(scales, fields, layouts):
        o, layer = K.unpack_octave(f)
        scale = K.octave_scale(o)
        level = (o - first) * (N_LAYERS + 3) + layer
        size = (kps.size.astype(np.float64) * a).astype(np.float32)
        acc += K.raw_histograms(pyrs[first], level, kps.x.astype(np.float32) * scale, kps.y.astype(np.float32) * scale,
                                ori, (size * scale) * np.float32(0.5))
    return K.l2_rows(K.normalise_sift((acc / len(scales)).astype(np.float32)))


# ----------------------------------------------------------------------------- families


def _grey_for(image_path: Path, conv: str) -> np.ndarray:
    import cv2

    if conv.startswith("workbench"):  # the workbench converts its BGR read with cvtColor
        return cv2.cvtColor(read_image(image_path, color=True), cv2.COLOR_BGR2GRAY)
    return read_image(image_path)


def dspsift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    conv = check_convention(params, "dspsift", CONVENTIONS)
    if len(kps) == 0:
        return np.zeros((0, 128), dtype=np.float32)
    scales = effective_scales(params)
    grey = _grey_for(Path(image_path), conv)
    if conv == "workbench":
        out = workbench_dsp([grey], kps, keypoint_octaves(kps, kpset, grey.shape[:2]), scales)
    elif conv == "workbench_v1":
        out = K.cv_normalize_rows(workbench_v1_dsp(grey, kps, keypoint_octaves(kps, kpset, grey.shape[:2]), scales))
    else:
        out = dong_soatto_dsp(grey, kps, scales)
    return root_normalise(out) if params.get("root") else out


def dsprgbsift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    conv = check_convention(params, "dsprgbsift", RGB_CONVENTIONS)
    bgr = read_colour(Path(image_path), "dsprgbsift")
    if len(kps) == 0:
        return np.zeros((0, 384), dtype=np.float32)
    scales = effective_scales(params)
    if conv == "workbench":
        chans = [np.ascontiguousarray(bgr[:, :, c]) for c in (0, 1, 2)]
        out = workbench_dsp(chans, kps, keypoint_octaves(kps, kpset, bgr.shape[:2]), scales)
    else:
        out = np.concatenate([dong_soatto_dsp(np.ascontiguousarray(bgr[:, :, c]), kps, scales) for c in (2, 1, 0)], axis=1)
    return root_normalise(out) if params.get("root") else out


# scales: the domain-size pooling scales (null: the convention's, DEFAULT_SCALES); root: RootSIFT last
_SCALES = {"type": ["array", "null"], "items": {"type": "number", "exclusiveMinimum": 0}, "minItems": 1, "default": None}
PARAMS_SCHEMA = {
    family: object_fragment(convention={"enum": list(conventions), "default": "dong_soatto"}, scales=_SCALES,
                            root={"type": "boolean", "default": False})
    for family, conventions in (("dspsift", CONVENTIONS), ("dsprgbsift", RGB_CONVENTIONS))
}
_PARAMS = PARAMS_SCHEMA["dspsift"]


def dspsift_cost(params: dict) -> Cost:
    """SIFT's compute once per scale on every keypoint (params not filled yet: the schema's defaults)."""
    return Cost(per_keypoint=float(len(effective_scales({**fragment_defaults(_PARAMS), **params}))))


def dsprgbsift_cost(params: dict) -> Cost:
    """dspsift's on each of the 3 channels."""
    return Cost(per_keypoint=COLOUR_COST.per_keypoint * dspsift_cost(params).per_keypoint, per_pixel=COLOUR_COST.per_pixel)

def dspsift_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """:func:`dspsift_descriptors` on each patch as an image (the grey patch is its own
    ``cvtColor`` grey), one patch at a time; RootSIFT on the whole result."""
    conv = check_convention(params, "dspsift", CONVENTIONS)
    scales = effective_scales(params)
    kps = job.keypoint
    if conv == "workbench":
        octave = keypoint_octaves(kps, job.kpset, job.shape)
        out = job.per_patch(lambda i: workbench_dsp([job.patches[i]], kps, octave, scales))
    elif conv == "workbench_v1":
        octave = keypoint_octaves(kps, job.kpset, job.shape)
        out = job.per_patch(lambda i: K.cv_normalize_rows(workbench_v1_dsp(job.patches[i], kps, octave, scales)))
    else:
        out = job.per_patch(lambda i: dong_soatto_dsp(job.patches[i], kps, scales))
    return root_normalise(out) if params.get("root") else out


FAMILIES = (
    DescriptorFamily("dspsift", dspsift_descriptors, PARAMS_SCHEMA["dspsift"], check=check_params, cost=dspsift_cost,
                     patch_support=sift_patch_support, patch_rows=dspsift_patch_rows),
    DescriptorFamily("dsprgbsift", dsprgbsift_descriptors, PARAMS_SCHEMA["dsprgbsift"], check=check_params,
                     cost=dsprgbsift_cost, width=COLOUR_WIDTH,
                     not_on_patches="needs colour images, but HPatches patches are greyscale; on a grey patch it would be "
                                    "three copies of one DSP-SIFT block and add nothing to family 'dspsift': describe "
                                    "patches with 'dspsift'"),
)
