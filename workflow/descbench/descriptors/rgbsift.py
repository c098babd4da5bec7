"""RGBSIFT: SIFT on each colour channel, three 128-D blocks concatenated (384-D).

Conventions (parameter ``convention``):

* ``descbench`` (default): OpenCV's SIFT (``cv2.SIFT.compute``, rounded to integers as OpenCV
  returns it) on the R, G and B channel images separately, at the same keypoints with the same
  octave field as the ``sift`` family; each 128-D block is L2-normalised; blocks in R, G, B order.
* ``workbench``: the C++ DescriptorWorkbench's RGBSIFT (``RGBSIFTWrapper.cpp`` ->
  ``cv::RGBSIFT``, ``keypoints/RGBSIFT.h``, a subclass of ``keypoints/VanillaSIFT``). What was
  verified in its source: the wrapper calls ``RGBSIFT::compute`` (no domain-size pooling despite a
  comment saying so) and then, with the default ``normalize_after_pooling = true`` /
  ``norm_type = NORM_L2`` (``include/thesis_project/types.hpp``, ``DescriptorParams``), L2-normalises
  every 384-D row; RootSIFT there is L1-normalise + sqrt on the whole row (``rooting_stage``).
  The pipeline reads images with ``cv::imread(IMREAD_COLOR)`` (BGR, ``processing.cpp``).
  ``VanillaSIFT``'s descriptor is OpenCV's ``calcSIFTDescriptor`` with the final uchar rounding
  removed, on a pyramid whose octave range comes from the keypoints' packed octave fields
  (``unpackOctave``), with orientations taken from the keypoints (never recomputed).
  ``RGBSIFT.cpp`` itself is not in the searchable copy of the repository, so these points are
  taken from the project's protocol notes, not verified here: the B, G, R channels of the
  (unconverted) BGR image are blurred separately into one pyramid each, the histogram of each
  channel is clipped at 0.2 and scaled per channel, blocks in B, G, R memory order. This module
  implements exactly that with :mod:`descbench.descriptors.sift_kernel` (unrounded floats), then
  the row L2 normalisation.

Colour input: a file that decodes to a single channel (grey PGM/PNG/JPEG) raises
:class:`DataError`; a three-channel file whose channels happen to be equal is treated as colour
(the decision is made on the file, as OpenCV reports it, so it never depends on pixel values).

``channels: average`` (default ``concat``) averages the three 128-D blocks element-wise instead
of concatenating them, then L2-normalises the 128-D row: with ``convention: workbench`` the
workbench's ``RGBSIFT_CHANNEL_AVG`` (``RGBSIFTChannelAverageWrapper.cpp``): RGBSIFT's raw row
(each channel block clipped at 0.2 of its norm and scaled to ``512 / sqrt 3``, ``RGBSIFT::
normalizeHistogram``; *not* normalised as a row), blocks
averaged as ``float32(b0 / 3 + b1 / 3) + float32(b2 / 3)`` (its ``addWeighted`` then ``+=``,
:func:`average_blocks`), no normalisation in the wrapper; its pipeline's ``NoPooling`` then L2-normalises the row
(``normalize_after_pooling``). With ``convention: descbench`` the averaged blocks are the unit
OpenCV blocks. The block order does not matter for the average.

``root: true`` applies RootSIFT (``sqrt(d / ||d||_1)`` on the whole row) last.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, lazy_module
from descbench.descriptors.rootsift import root_normalise
from descbench.errors import ConfigError, DataError
from descbench.jobfacts import Cost
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import has_sift_octaves, keypoints_to_cv, make_sift, sift_octave_from_size
from descbench.params import object_fragment

K = lazy_module("descbench.descriptors.sift_kernel")  # numba kernels, loaded when a descriptor is computed

CONVENTIONS = ("descbench", "workbench")
CHANNELS = ("concat", "average")


def read_colour(image_path: Path, family: str) -> np.ndarray:
    """The image as BGR uint8; a file that decodes to one channel is a :class:`DataError`."""
    import cv2

    bgr = read_image(image_path, color=True)  # validates existence, decoding, truncation
    raw = cv2.imdecode(np.fromfile(image_path, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if raw is None or raw.ndim == 2 or raw.shape[2] == 1:
        raise DataError(
            f"image {image_path} is greyscale (1 channel) but descriptor family '{family}' needs a colour "
            "image; use a grey descriptor, e.g. sift, or a colour dataset"
        )
    return bgr


def keypoint_octaves(kps: ImageKeypoints, kpset: dict, image_shape: tuple[int, int]) -> np.ndarray:
    """The packed SIFT octave field the descriptor uses: the keypoints' own on a SIFT set (or locked
    keypoints exported from one), else derived from size (same rule as the ``sift`` family)."""
    return np.asarray(kps.octave, dtype=np.int32) if has_sift_octaves(kpset) else sift_octave_from_size(kps.size, image_shape)


def check_convention(params: dict, family: str, allowed=CONVENTIONS) -> str:
    conv = params.get("convention")
    if conv not in allowed:
        raise ConfigError(f"descriptor family '{family}': convention must be one of {', '.join(allowed)}, got {conv!r}")
    return conv


def opencv_sift_on_channel(channel: np.ndarray, kps: ImageKeypoints, octave: np.ndarray) -> np.ndarray:
    """OpenCV's SIFT (rounded values, float32) on one 8-bit channel image."""
    sift = make_sift({})
    cv_kps = keypoints_to_cv(kps, octave)
    out, desc = sift.compute(np.ascontiguousarray(channel), cv_kps)
    if desc is None or len(out) != len(cv_kps):
        raise RuntimeError(f"OpenCV SIFT returned {0 if desc is None else len(out)} of {len(cv_kps)} descriptors")
    return np.asarray(desc, dtype=np.float32)


def workbench_sift_on_channel(channel: np.ndarray, kps: ImageKeypoints, octave: np.ndarray,
                              norm_factor: float = 1.0) -> np.ndarray:
    """VanillaSIFT on one channel: OpenCV's pyramid and descriptor, unrounded (clip 0.2, scale 512;
    ``norm_factor`` 3: RGBSIFT's per-block scale ``512 / sqrt(3 ||.||^2)``)."""
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(kps.x, kps.y, kps.size, kps.angle, octave)
    pyr = K.build_pyramid(channel, first, n_oct)
    return K.normalise_sift(K.raw_histograms(pyr, level, ptx, pty, ori, scl), norm_factor=norm_factor)


def rgbsift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    conv = check_convention(params, "rgbsift")
    bgr = read_colour(Path(image_path), "rgbsift")
    if len(kps) == 0:
        return np.zeros((0, rgbsift_width(params, [])), dtype=np.float32)
    octave = keypoint_octaves(kps, kpset, bgr.shape[:2])
    if conv == "descbench":
        blocks = [K.l2_rows(opencv_sift_on_channel(bgr[:, :, c], kps, octave)) for c in (2, 1, 0)]
        out = np.concatenate(blocks, axis=1)
    elif params.get("channels", "concat") == "concat":
        blocks = [workbench_sift_on_channel(bgr[:, :, c], kps, octave) for c in (0, 1, 2)]
        out = K.l2_rows(np.concatenate(blocks, axis=1))
    else:  # RGBSIFT's raw blocks, each of norm 512 / sqrt 3
        blocks = [workbench_sift_on_channel(bgr[:, :, c], kps, octave, norm_factor=3.0) for c in (0, 1, 2)]
    if params.get("channels", "concat") == "average":
        out = K.cv_normalize_rows(average_blocks(blocks))
    return root_normalise(out) if params.get("root") else np.ascontiguousarray(out, dtype=np.float32)


def average_blocks(blocks: list[np.ndarray]) -> np.ndarray:
    """``RGBSIFTChannelAverageWrapper::averageChannels`` as OpenCV computes it (float32 rows):
    with ``w = float32(1/3)``, ``addWeighted(b0, w, b1, w, 0)`` is ``fma(b0, w, float32(b1 w))``
    (its AVX2 kernel; one rounding: the float32 products are exact in float64), then
    ``+= b2 / 3.0`` is ``+ float32(b2 w)`` in float32."""
    w = np.float64(np.float32(1.0 / 3.0))
    b0, b1, b2 = (np.asarray(b, dtype=np.float32).astype(np.float64) for b in blocks)
    first = (b0 * w + (b1 * w).astype(np.float32)).astype(np.float32)
    return first + (b2 * w).astype(np.float32)


def rgbsift_width(params: dict, part_widths: list[int]) -> int:
    """384 (three blocks), 128 with ``channels: average``."""
    return 128 if params.get("channels") == "average" else COLOUR_WIDTH


# root: RootSIFT of the whole row, applied last; channels: the three blocks concatenated or averaged
PARAMS_SCHEMA = {"rgbsift": object_fragment(convention={"enum": list(CONVENTIONS), "default": "descbench"},
                                            root={"type": "boolean", "default": False},
                                            channels={"enum": list(CHANNELS), "default": "concat"})}

#: One SIFT pass per channel of the colour image: 3 times SIFT's time, 3 blocks of 128.
COLOUR_COST = Cost(per_keypoint=3.0, per_pixel=3.0)
COLOUR_WIDTH = 384

FAMILIES = (DescriptorFamily("rgbsift", rgbsift_descriptors, PARAMS_SCHEMA["rgbsift"], cost=COLOUR_COST, width=rgbsift_width,
                             not_on_patches="needs colour images, but HPatches patches are greyscale; on a grey patch it "
                                            "would be three copies of one SIFT block and add nothing to family 'sift': "
                                            "describe patches with 'sift'"),)
