"""HoNC and HoWH: the C++ DescriptorWorkbench's SIFT-shaped colour histograms (families ``honc``, ``howh``).

Both describe a keypoint on one level of a colour Gaussian pyramid with SIFT's window: a 4 x 4
grid of cells around the keypoint, rotated by its angle, each cell an 8-bin histogram (128
values). What the bins count (exact formulas: :mod:`descbench.descriptors.colourhist_kernel`):

* ``honc``: the workbench's ``HoNC`` (Histogram of Normalised Colours, ``keypoints/HoNC.cpp``,
  DescriptorType ``HoNC``, ``HoNCWrapper``). The window's colours are normalised together (their
  mean brought to 127.5 and their mean standard deviation to 48), then each sample votes,
  weighted by SIFT's Gaussian window, into a 2 x 2 x 2 RGB histogram with soft (linear) dark and
  bright halves per channel. Rows are clipped at 0.2 and rescaled like SIFT's.
* ``howh``: the workbench's ``HoWH`` (Histogram of Weighted Hue, ``keypoints/HoWH.cpp``): the
  pyramid is converted to HSV and each sample votes for its hue (8 circular bins over 360
  degrees, trilinear interpolation, not rotated with the keypoint), weighted by its saturation and
  SIFT's Gaussian window; clipped and rescaled like SIFT's, then times 0.6. The workbench has no
  DescriptorType for HoWH alone (only ``DSPHOWH_V2``); ``howh`` is ``HoWH::compute`` followed
  by the same post-processing as ``honc``.

Keypoints and pyramid are VanillaSIFT's with provided keypoints (as the ``rgbsift`` family's
``workbench`` convention): the image is read as BGR (``IMREAD_COLOR``); the pyramid is built from
the 3-channel float image, its first octave ``min(0, min o)`` and octave count ``max o - first +
1`` from the keypoints' packed octave fields ``o`` (the set's own on a SIFT set, else derived from
the size as the ``sift`` family does); each keypoint is described on its own level ``(o -
first)(L + 3) + layer`` at its position and half-size scaled by ``2^-o``, with orientation ``360 -
angle`` (never recomputed).

Post-processing, the workbench's pipeline with default ``DescriptorParams``: the wrapper
L2-normalises every row (``normalize_after_pooling``, ``NORM_L2``), then ``NoPooling``
L2-normalises it again; both are applied here in that order, as ``cv::normalize`` computes them
(:func:`descbench.descriptors.sift_kernel.cv_normalize_rows`).
``root: true`` applies RootSIFT (``sqrt(d / ||d||_1)``) last, as the ``rgbsift`` family does
(the workbench's ``rooting_stage: after_pooling`` roots a HoNC row twice, once in the wrapper and
once in ``NoPooling``; that is not reproduced).

Inputs: a file that decodes to a single channel is a DataError (colour descriptors). A ``honc``
keypoint whose window has no colour spread (all three standard deviations 0, e.g. a uniform or
saturated region, or a float32 variance below 0) is a DataError naming it (``flat_window: error``,
the default): the workbench divides by that spread and returns NaN, which no distance can use.
``flat_window: unstretched`` describes such windows instead, with their colours shifted but not
stretched (``gain = 0``, a NaN deviation counted as 0; every other window exactly as the
workbench): on the demo's photometric scenes, saturated regions hold such keypoints.

Domain-size pooling: ``family: dsp`` with ``image: base_pyramid`` is the workbench's
``DSPVanillaSIFTWrapper::computeDSP`` over these families: ``DSPHONC_V2`` is ``dsp`` over
``honc`` with ``colour: true``, ``DSPHOWH_V2`` is ``dsp`` over ``howh`` with the default
``colour: false`` (the workbench's runner hands ``DSPHOWH_V2`` the grey image: its YAML loader
forces ``use_color`` for ``DSPHONC_V2`` only). One colour pyramid (one more octave when there are
several scales and the smallest is < 1), each scale ``a`` described at size ``a s`` on the level
``floor``-derived from ``log2(a s / 3.2)`` (keypoints below the pyramid skipped for that scale), see
:mod:`descbench.descriptors.pooling`. That pyramid is *not* converted to HSV (computeDSP builds it
with ``createInitialColorImage`` and never calls ``cvtColor``), so ``DSPHOWH_V2`` reads channel 0
as the hue in degrees and channel 1 as the saturation: on its default grey input both are the
blurred grey value (hue ``grey * 8 / 360``, bins 0..5 only, weighted by the grey value).
Reproduced as the workbench computes it.

Agreement with the workbench (``tests/interop/test_dw_descriptors.py``, its own rows on the demo
scene): ``honc`` 4.6e-7, ``DSPHONC_V2`` 6.9e-7, ``DSPHOWH_V2`` 1.5e-7 (largest element difference
of the unit rows). ``howh``'s raw rows differ from the ``HoWH`` class's by up to 0.0075 on rows of
norm 307.2 on that nearly grey image: the hue ``60 (g - b) / (max - min)`` of almost grey pixels
follows the last bits of the blurred pyramid, which differ between OpenCV builds (the workbench's
own rows move by 0.009 between two builds of it).

Patches: ``honc`` describes a grey patch as the colour image of three equal channels (the
workbench's patch benchmark converts every patch with ``cvtColor(GRAY2BGR)``; HoNC is one of its
patch descriptors), with SIFT's support; ``howh`` does not (a grey patch has saturation 0
everywhere, so every row would be zero).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob, lazy_module
from descbench.descriptors.dspsift import workbench_dsp_layout, workbench_scale_geometry
from descbench.descriptors.rgbsift import keypoint_octaves, read_colour
from descbench.descriptors.rootsift import root_normalise
from descbench.descriptors.sift import sift_patch_support
from descbench.errors import DataError
from descbench.jobfacts import Cost
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

K = lazy_module("descbench.descriptors.sift_kernel")  # numba kernels, loaded when a descriptor is computed
CK = lazy_module("descbench.descriptors.colourhist_kernel")

HSV = {"honc": False, "howh": True}  # whether the family's own pyramid is converted to HSV
FLAT_WINDOW = ("error", "unstretched")


def _kernel(family: str, params: dict):
    if family == "honc":
        unstretched = params.get("flat_window", "error") == "unstretched"
        return lambda *geometry: CK.honc_rows(*geometry, unstretched=unstretched)
    return CK.howh_rows


def _geometry(kps: ImageKeypoints, octave: np.ndarray, where: str):
    try:
        return K.opencv_geometry(kps.x, kps.y, kps.size, kps.angle, octave)
    except ValueError as exc:
        raise DataError(f"{where}: {exc}; the keypoints' packed SIFT octave fields must lie in octaves >= -1 and "
                        "layers <= 5 (keypoints of a SIFT set, or a set whose octave field is derived from the size)") from exc


def _check_finite(rows: np.ndarray, kps: ImageKeypoints, family: str, where: str, params: dict) -> None:
    bad = np.flatnonzero(~np.all(np.isfinite(rows), axis=1))
    if bad.size:
        i = int(bad[0])
        fix = ("params.flat_window: unstretched describes such windows by their colours unstretched (where the "
               "workbench has NaN), or" if params.get("flat_window", "error") == "error" else "")
        raise DataError(
            f"{where}: descriptor family '{family}' is undefined at {bad.size} keypoints (first: row {i}, x {kps.x[i]}, "
            f"y {kps.y[i]}, size {kps.size[i]}): the colours in its window have no spread (standard deviation 0) or it "
            f"has no pixel inside the image, and the workbench's HoNC divides by that spread (it returns NaN there); "
            f"{fix} describe keypoints on textured regions, or use family howh or rgbsift")


def family_rows(family: str, bgr: np.ndarray, kps: ImageKeypoints, octave: np.ndarray, where: str,
                params: dict | None = None) -> np.ndarray:
    """The workbench's raw rows (wrapper output before any normalisation) of ``family`` on a BGR
    uint8 image at ``kps`` with packed SIFT octave fields ``octave``."""
    params = params or {}
    first, n_oct, level, ptx, pty, ori, scl = _geometry(kps, octave, where)
    pyr = CK.colour_pyramid(bgr, first, n_oct, HSV[family])
    rows = _kernel(family, params)(pyr, level, ptx, pty, ori, scl)
    _check_finite(rows, kps, family, where, params)
    return rows


def post_process(rows: np.ndarray, params: dict) -> np.ndarray:
    """The wrapper's and NoPooling's L2 normalisations, then ``root``."""
    out = K.cv_normalize_rows(K.cv_normalize_rows(rows))
    return root_normalise(out) if params.get("root") else np.ascontiguousarray(out, dtype=np.float32)


def _descriptors(family: str):
    def compute(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
        bgr = read_colour(Path(image_path), family)
        if len(kps) == 0:
            return np.zeros((0, 128), dtype=np.float32)
        octave = keypoint_octaves(kps, kpset, bgr.shape[:2])
        return post_process(family_rows(family, bgr, kps, octave, str(image_path), params), params)

    compute.__name__ = f"{family}_descriptors"
    compute.__doc__ = f"128-D {family} rows at ``kps`` (module docstring)."
    return compute


honc_descriptors = _descriptors("honc")
howh_descriptors = _descriptors("howh")


# ----------------------------------------------------------------------------- DSP (computeDSP)


def _pyramid_rows(family: str):
    def pyramid_rows(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict, scales: list[float],
                     colour: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """computeDSP's per-scale rows before pooling: for each scale ``a``, ([N, 128] float32 raw
        rows, [N] bool valid), on one pyramid (never HSV, as the workbench's computeDSP) of the BGR
        image (``colour``) or of its ``cvtColor(BGR2GRAY)`` grey in three equal channels."""
        if colour:
            bgr = read_colour(Path(image_path), family)
        else:
            import cv2

            grey = cv2.cvtColor(read_image(Path(image_path), color=True), cv2.COLOR_BGR2GRAY)
            bgr = np.ascontiguousarray(np.repeat(grey[:, :, None], 3, axis=2))
        if len(kps) == 0:
            return [np.zeros((0, 128), dtype=np.float32) for _ in scales], [np.zeros(0, dtype=bool) for _ in scales]
        octave = keypoint_octaves(kps, kpset, bgr.shape[:2])
        first, n_oct = workbench_dsp_layout(octave, scales)
        pyr = CK.colour_pyramid(bgr, first, n_oct, False)
        ori = K.opencv_angle(kps.angle)
        rows, valid = [], []
        for a in scales:
            level, ptx, pty, scl, ok = workbench_scale_geometry(kps, a, first, pyr.n_levels)
            d = _kernel(family, params)(pyr, level, ptx, pty, ori, scl)
            _check_finite(d[ok], kps.take(np.flatnonzero(ok)), family, f"{image_path} (scale {a})", params)
            rows.append(d)
            valid.append(np.asarray(ok, dtype=bool))
        return rows, valid

    return pyramid_rows


# ----------------------------------------------------------------------------- patches


def honc_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """:func:`honc_descriptors` on each grey patch as the colour image of three equal channels
    (what ``compute`` gives on that patch saved as a 3-channel image), one patch at a time."""
    kps = job.keypoint
    octave = keypoint_octaves(kps, job.kpset, job.shape)

    def row(i):
        bgr = np.repeat(job.patches[i][:, :, None], 3, axis=2)
        return family_rows("honc", bgr, kps, octave, job.name(i), params)

    return post_process(job.per_patch(row), params)


#: One histogram per keypoint (as SIFT's) on a pyramid of 3 channels.
HIST_COST = Cost(per_keypoint=1.0, per_pixel=3.0)

# root: RootSIFT of the whole row, applied last; flat_window (honc): a window without colour spread is
# an error (the workbench: NaN) or described by its colours unstretched
PARAMS_SCHEMA = {"honc": object_fragment(root={"type": "boolean", "default": False},
                                         flat_window={"enum": list(FLAT_WINDOW), "default": "error"}),
                 "howh": object_fragment(root={"type": "boolean", "default": False})}

FAMILIES = (
    DescriptorFamily("honc", honc_descriptors, PARAMS_SCHEMA["honc"], cost=HIST_COST,
                     patch_support=sift_patch_support, patch_rows=honc_patch_rows, pyramid_rows=_pyramid_rows("honc")),
    DescriptorFamily("howh", howh_descriptors, PARAMS_SCHEMA["howh"], cost=HIST_COST, pyramid_rows=_pyramid_rows("howh"),
                     not_on_patches="HPatches patches are greyscale: their saturation is 0 everywhere, so every HoWH row "
                                    "would be zero (the workbench's patch benchmark does not offer HoWH either); describe "
                                    "patches with 'honc' or 'sift'"),
)
