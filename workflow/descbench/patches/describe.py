"""Registry descriptors on HPatches patches, hpatches-benchmark's CSV files, and patch-descriptor Parquet.

**What a patch descriptor is.** A 65 x 65 patch is described as if it were an image of its own
with one keypoint at its centre: ``describe_patches(patches, family, params)[i]`` equals, bit for
bit, ``get_family(family).compute(<patch i saved as a 65 x 65 image>, <the centre keypoint>,
params, kpset)``, the registry's computation on that single image (tested for every family
below). Whatever the family does at an image border happens at the patch border: SIFT skips the
samples outside the image, SURF uses the in-image part of its wavelets, and the OpenCV families
that drop a keypoint whose pattern does not fit get the registry's rescue, a recomputation on the
patch padded with ``BORDER_REFLECT_101`` (:mod:`descbench.descriptors._cv_compute`); a keypoint
still dropped, or a NaN/inf row, is a :class:`~descbench.errors.DataError` naming the patch.
A row is never zero-filled. Neighbouring patches never influence each other (each is its own
image; no mosaic).

**The centre keypoint** (OpenCV conventions: pixel centres at integers, the patch spans
-0.5 .. 64.5):

* position ``(32.5, 32.5)`` = ``PATCH_SIZE / 2``, hpatches-benchmark's ``get_center_kp`` in
  ``python/extract_opencv_sift.py`` (the pixel-grid centre is 32.0; SIFT rounds the position to
  its sampling grid, ``cvRound(32.5) = 32``, so for SIFT both are the same);
* ``size`` = ``support`` (default per family, table below);
* ``angle`` = 0 by default: *upright* for every family that reads the angle (SIFT maps
  ``360 - 0`` to 0). hpatches-benchmark leaves ``cv2.KeyPoint()``'s default angle -1, which is
  not "no angle" to OpenCV: SIFT describes with orientation ``360 - (-1) = 361`` degrees, i.e.
  exactly as with angle 359 (measured: identical output), a 1 degree rotation; ORB, LATCH,
  BEBLID/TEBLID, BoostDesc and VGG use -1 degree. Families that assign their own orientation
  (BRISK, FREAK with ``orientation_normalized``, KAZE, SURF unless ``upright``) ignore it;
* ``octave`` field 0, response 0, class_id -1 (``cv2.KeyPoint()``'s defaults). With
  ``sift_octave="size"`` (default) the SIFT families (sift, rootsift, dspsift) derive the
  scale-space level from the size, the registry's rule for keypoints of any other detector
  (:func:`descbench.keypoints.sift.sift_octave_from_size`; 12.257 px -> octave 1, layer 3);
  ``sift_octave="zero"`` reads the field 0 as given: octave 0, layer 0, the full-resolution
  level hpatches-benchmark's keypoint gets. ``describe_patches(p, "sift", {},
  **HPATCHES_BENCHMARK)`` (angle -1, octave 0) reproduces ``extract_opencv_sift.py`` exactly.

**Support per family** (``support`` = the KeyPoint size in patch pixels; the rule: the family's
nominal window spans the patch, as hpatches-benchmark's SIFT window does; "measured" footprints
are the half-width of the square of pixels that change the descriptor, on a random texture):

=====================================  =========================  ==================================================
family                                 default ``support``         window on the 65 x 65 patch
=====================================  =========================  ==================================================
sift, rootsift, dspsift, python        65 / 5.303 = 12.257         hpatches-benchmark's size: SIFT's 4 x 4 bins of
                                                                  3 sigma = 1.5 size px span 6 size = 73.5 px;
                                                                  samples beyond the patch are skipped
surf                                   65 * 9 / 24 = 24.375        window 20 s, s = 1.2 size / 9 = 3.25: 65 px
                                                                  (rotated corners and wavelets beyond the border:
                                                                  in-image part only, SURF's border rule)
orb                                    65                          pyramid level round(log(65/31)/log 1.2) = 4:
                                                                  31 x 1.2^4 = 64.3 px (measured: whole patch)
brisk                                  20                          OpenCV's BRISK keeps the centre keypoint of a
                                                                  65 x 65 image up to size 20.2 (its own border
                                                                  test on pattern + smoothing); measured +-30 px
freak                                  9                           FREAK keeps it up to size 9.6; measured +-29 px
brief                                  48 (size not read)          fixed 48 x 48 pattern, 9 x 9 box: measured +-27
latch                                  48 (size not read)          fixed 48 px pattern + SSD windows: measured +-29
beblid, teblid, binboost, vgg,         65 / scale_factor           window size x scale_factor = 65 px (10.4 at
boostdesc                              (``null`` -> 6.25)          ``scale_factor: null``, OpenCV's default 6.25)
daisy                                  12.257 (size not read)      ``params.radius`` (15 px) plus its smoothing
kaze, akaze_kaze                       6                           M-SURF grid 24 x round(size / 2) = 72 px
akaze                                  6                           M-LDB pattern 2 x 10 x round(size / 2) = 60 px
stack                                  each part's own default    (``support`` given: every part gets it)
=====================================  =========================  ==================================================

Families that make no sense on patches raise :class:`~descbench.errors.ConfigError`:
``rgbsift`` / ``dsprgbsift`` (HPatches patches are greyscale; on a grey patch they would be three
copies of one SIFT block, no information beyond ``sift`` / ``dspsift``) and ``precomputed``
(patch descriptors computed elsewhere are read with :func:`read_hpatches_csv`).

**How it is batched.** One registry computation per patch, in memory: the extractor (OpenCV
object, SIFT object, resolved callable) and the centre keypoint are built once per call, then
each patch costs one native call (OpenCV's ``compute``, the numba SURF / DSP-SIFT kernels, the
user callable), so the Python loop adds a few microseconds per patch; whole-array steps
(RootSIFT, the workbench L2 step, the NaN check) run once on the [N, D] result. A mosaic of
patches in one image was rejected: SIFT skips samples outside *its* image, KAZE/AKAZE normalise
by a whole-image contrast factor, and float keypoint coordinates far from the origin round
differently (BRISK/FREAK interpolation), so a mosaic cannot equal the single-patch computation.
Each family's extractor construction mirrors its registry module line for line (same
parameters, same helpers imported from there); ``tests/test_patch_describe.py`` compares every
family with the registry on single-patch files, which catches any drift.

**CSV files (hpatches-benchmark layout).** ``<root>/<sequence>/<type>.csv`` for the 16 strips
(:data:`~descbench.patches.PATCH_TYPES`), one comma-separated row per patch, no header
(``python/utils/hpatch.py``, ``hpatch_descr``). Float rows are read as float32. ``bin_packed``
rows are bytes 0..255 of packed bits: hpatches-benchmark unpacks them and compares with L2,
which on 0/1 vectors is ``sqrt(Hamming)``, a monotone function of the Hamming distance that
descbench computes on the packed bytes: the same rankings, hence the same nearest neighbours,
ROC and AP. They are kept packed (uint8).

**Parquet (one file per descriptor and sequence).** Columns ``type`` (int8, index into
:data:`~descbench.patches.PATCH_TYPES`: 0 = ref, 1..5 = e1..e5, 6..10 = h1..h5, 11..15 = t1..t5;
the list is also in the provenance as ``patch_types``), ``index`` (int32, the patch's row in its
strip) and ``descriptor`` (fixed-size list of float32, or of uint8 packed bits); rows sorted by
(type, index). Provenance (``descbench`` metadata key): stage ``patch_descriptors``, the
caller's settings (:func:`patch_settings`: family, filled params, support, angle, sift_octave),
versions, and ``sequence``/``n_patches``/``dim``/``binary``.
"""

from __future__ import annotations

import io as _io
import math
import re
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.patches import PATCH_SIZE, PATCH_TYPES

CENTRE = PATCH_SIZE / 2.0  # 32.5: hpatches-benchmark's centre keypoint position (x and y)
HPATCHES_SIFT_SIZE = PATCH_SIZE / 5.303  # 12.257: hpatches-benchmark's centre keypoint size
# describe_patches(..., **HPATCHES_BENCHMARK): the rest of hpatches-benchmark's cv2.KeyPoint()
HPATCHES_BENCHMARK = {"angle": -1.0, "sift_octave": "zero"}
SIFT_OCTAVES = ("size", "zero")

NOT_ON_PATCHES = {
    "rgbsift": "needs colour images, but HPatches patches are greyscale; on a grey patch it would be three copies of "
               "one SIFT block and add nothing to family 'sift': describe patches with 'sift'",
    "dsprgbsift": "needs colour images, but HPatches patches are greyscale; on a grey patch it would be three copies "
                  "of one DSP-SIFT block and add nothing to family 'dspsift': describe patches with 'dspsift'",
    "precomputed": "reads the feature files of a keypoint set; patch descriptors computed elsewhere are read from "
                   "hpatches-benchmark CSV files (descbench.patches.describe.read_hpatches_csv)",
}


# ----------------------------------------------------------------------------- the centre keypoint


def default_support(family: str, params: dict) -> float:
    """The default ``support`` (KeyPoint size, px) of ``family`` with filled ``params`` (module table)."""
    from descbench.descriptors._cv_compute import OPENCV_DEFAULT_SCALE

    if family == "surf":
        return PATCH_SIZE * 9.0 / 24.0
    if family == "orb":
        return float(PATCH_SIZE)
    if family == "brisk":
        return 20.0
    if family == "freak":
        return 9.0
    if family in ("brief", "latch"):
        return 48.0
    if family in ("beblid", "teblid", "binboost", "vgg", "boostdesc"):
        sf = params.get("scale_factor")
        return PATCH_SIZE / float(OPENCV_DEFAULT_SCALE if sf is None else sf)
    if family in ("kaze", "akaze", "akaze_kaze"):
        return 6.0
    return HPATCHES_SIFT_SIZE


def centre_keypoint(support: float, angle: float = 0.0) -> ImageKeypoints:
    """The one keypoint every patch is described at: (32.5, 32.5), size ``support``, ``angle``,
    response 0, octave field 0, class_id -1 (``cv2.KeyPoint()``'s defaults), source_index 0."""
    f32 = lambda v: np.array([v], dtype=np.float32)  # noqa: E731
    return ImageKeypoints(f32(CENTRE), f32(CENTRE), f32(support), f32(angle), f32(0.0), np.zeros(1, np.int32),
                          np.full(1, -1, np.int32), np.zeros(1, np.int32))


def patch_kpset(sift_octave: str) -> dict:
    """The keypoint-set spec the registry sees: ``{}`` (a foreign keypoint: SIFT derives its octave
    from the size) or, for ``zero``, locked keypoints carrying SIFT's own octave field (0)."""
    return {"detector": "locked", "params": {"octave": "sift"}} if sift_octave == "zero" else {}


def _check_geometry(support, angle, sift_octave, config_key: str) -> None:
    base = config_key.removesuffix(".params")
    if not isinstance(support, (int, float)) or isinstance(support, bool) or not math.isfinite(support) or support <= 0:
        raise ConfigError(f"invalid config value at '{base}.support': {support!r}; give the keypoint size in patch "
                          "pixels, a positive number (or null for the family's default)")
    if not isinstance(angle, (int, float)) or isinstance(angle, bool) or not math.isfinite(angle):
        raise ConfigError(f"invalid config value at '{base}.angle': {angle!r}; give degrees (0 = upright)")
    if sift_octave not in SIFT_OCTAVES:
        raise ConfigError(f"invalid config value at '{base}.sift_octave': {sift_octave!r}; allowed: {', '.join(SIFT_OCTAVES)}")


def patch_settings(family: str, params: dict | None = None, support: float | None = None, angle: float = 0.0,
                   sift_octave: str = "size", config_key: str = "descriptor.params") -> dict:
    """The full description settings (filled params, resolved support; a stack lists its parts'),
    for the provenance of :func:`write_sequence_descriptors`."""
    params = _filled(family, params, config_key)
    default = 1.0 if family == "stack" else default_support(family, params)
    _check_geometry(default if support is None else support, angle, sift_octave, config_key)
    out = {"family": family, "params": params, "angle": float(angle), "sift_octave": sift_octave,
           "centre": [CENTRE, CENTRE]}
    if family == "stack":
        out["support"] = [support if support is not None else default_support(p["family"], p["params"])
                          for p in params["parts"]]
    else:
        out["support"] = float(support if support is not None else default_support(family, params))
    return out


def _filled(family: str, params: dict | None, config_key: str) -> dict:
    if family in NOT_ON_PATCHES:
        key = config_key.removesuffix(".params") + ".family"
        raise ConfigError(f"invalid config value at '{key}': descriptor family '{family}' cannot describe patches: "
                          f"it {NOT_ON_PATCHES[family]}")
    return check_descriptor_params(family, params, config_key)


# ----------------------------------------------------------------------------- describe_patches


def check_patches(patches, where: str) -> np.ndarray:
    """``patches`` as a C-contiguous uint8 [N, 65, 65] array (N >= 1); else DataError naming ``where``."""
    if not isinstance(patches, np.ndarray) or patches.dtype != np.uint8 or patches.ndim != 3 \
            or patches.shape[1:] != (PATCH_SIZE, PATCH_SIZE) or patches.shape[0] == 0:
        got = f"{type(patches).__name__} {getattr(patches, 'dtype', '')} {getattr(patches, 'shape', '')}"
        raise DataError(f"{where}: expected patches as a uint8 array [N, {PATCH_SIZE}, {PATCH_SIZE}] with N >= 1, got {got}; "
                        "pass the patches of one strip (descbench.patches.layout reads them)")
    return np.ascontiguousarray(patches)


def describe_patches(patches: np.ndarray, family: str, params: dict | None = None, *, support: float | None = None,
                     angle: float = 0.0, sift_octave: str = "size", where: str = "patches",
                     config_key: str = "descriptor.params") -> np.ndarray:
    """Descriptor ``family`` of each 65 x 65 patch at its centre keypoint: [N, D] float32 (L2 families)
    or uint8 packed bits (Hamming families); row i describes ``patches[i]``.

    ``params``: the family's parameters (defaults filled, unknown keys a ConfigError at
    ``config_key``). ``support``: the keypoint size in patch pixels (None: the family's default,
    module table). ``angle``: the keypoint angle in degrees (0: upright). ``sift_octave``: ``size``
    (the SIFT families derive their scale-space level from the size) or ``zero`` (octave 0, layer 0
    as hpatches-benchmark). ``where`` names the patches in errors (e.g. the strip's file).
    Row i equals the registry's ``compute`` on patch i saved as an image (module docstring).
    """
    patches = check_patches(patches, where)
    params = _filled(family, params, config_key)
    if family == "stack":  # parts at their own default supports unless one is given
        _check_geometry(1.0 if support is None else support, angle, sift_octave, config_key)
        out = _stack_rows(patches, params, support, angle, sift_octave, where, config_key)
    else:
        support = default_support(family, params) if support is None else support
        _check_geometry(support, angle, sift_octave, config_key)
        kps = centre_keypoint(float(support), float(angle))
        kpset = patch_kpset(sift_octave)
        engine = ENGINES.get(family, _file_rows)
        out = engine(patches, family, params, kps, kpset, where, config_key)
    return _checked(out, family, where)


def _checked(out: np.ndarray, family: str, where: str) -> np.ndarray:
    """The registry's output contract: uint8 packed bits, or float32 with every value finite."""
    if out.dtype == np.uint8:
        return out
    out = np.ascontiguousarray(out, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
    if bad.size:
        raise DataError(
            f"{where}: descriptor '{family}' produced NaN/inf for {bad.size} of {len(out)} patches (first: patch "
            f"{int(bad[0])}); e.g. a uniform patch gives KAZE/AKAZE a zero contrast factor: drop such patches from "
            "the strip or describe them with another family"
        )
    return out


def _per_patch(n: int, row: Callable[[int], np.ndarray]) -> np.ndarray:
    """[n, D] from ``row(i)`` (a [D] or [1, D] array) for i in 0..n-1, allocated from the first row."""
    first = np.asarray(row(0)).reshape(-1)
    out = np.empty((n, first.shape[0]), dtype=first.dtype)
    out[0] = first
    for i in range(1, n):
        out[i] = np.asarray(row(i)).reshape(-1)
    return out


def _patch_name(where: str, i: int) -> str:
    return f"{where} patch {i}"


# --- SIFT, RootSIFT (sift.sift_descriptors, rootsift.rootsift_descriptors)


def _sift_rows(patches, family, params, kps, kpset, where, config_key) -> np.ndarray:
    """OpenCV SIFT per patch exactly as :func:`descbench.descriptors.sift.sift_descriptors` runs it
    on a 65 x 65 image. Its ``workbench`` grey image, ``cvtColor(BGR2GRAY)`` of the colour read of a
    grey file, is the grey patch itself (the BGR->grey weights sum to exactly 1 in fixed point);
    the test against the registry on PNG files checks it."""
    from descbench.descriptors.sift import CONVENTIONS
    from descbench.keypoints.sift import keypoints_to_cv, make_sift, sift_octave_from_size

    convention = params.get("convention", "opencv")  # rootsift has no parameters: OpenCV's SIFT
    if convention not in CONVENTIONS:
        raise ConfigError(f"invalid config value at '{config_key}.convention': {convention!r}; allowed: {', '.join(CONVENTIONS)}")
    own = kpset.get("detector") == "locked" and kpset.get("params", {}).get("octave") == "sift"
    octave = None if own else sift_octave_from_size(kps.size, (PATCH_SIZE, PATCH_SIZE))
    cv_kps = keypoints_to_cv(kps, octave)
    sift = make_sift({})

    def row(i):
        out_kps, desc = sift.compute(patches[i], cv_kps)
        if desc is None or len(out_kps) != 1:
            raise DataError(f"{_patch_name(where, i)}: OpenCV SIFT returned no descriptor at the centre keypoint")
        return desc

    out = _per_patch(len(patches), row).astype(np.float32)
    if convention == "workbench":
        from descbench.descriptors.sift_kernel import l2_rows

        out = l2_rows(out)
    if family == "rootsift":
        from descbench.descriptors.rootsift import root_normalise

        out = root_normalise(out)
    return out


# --- DSP-SIFT (dspsift.dspsift_descriptors)


def _dspsift_rows(patches, family, params, kps, kpset, where, config_key) -> np.ndarray:
    from descbench.descriptors import dspsift as D
    from descbench.descriptors.rgbsift import check_convention, keypoint_octaves
    from descbench.descriptors.rootsift import root_normalise

    conv = check_convention(params, "dspsift", D.CONVENTIONS)
    scales = D.effective_scales(params)
    if conv == "workbench":
        octave = keypoint_octaves(kps, kpset, (PATCH_SIZE, PATCH_SIZE))
        out = _per_patch(len(patches), lambda i: D.workbench_dsp([patches[i]], kps, octave, scales))
    else:
        out = _per_patch(len(patches), lambda i: D.dong_soatto_dsp(patches[i], kps, scales))
    return root_normalise(out) if params.get("root") else out


# --- SURF (surf.surf_descriptors)


def _surf_rows(patches, family, params, kps, kpset, where, config_key) -> np.ndarray:
    from descbench.descriptors.surf import _opencv_compute

    extended = bool(params.get("extended", False))
    upright = bool(params.get("upright", False))

    def row(i):
        desc = _opencv_compute(patches[i], kps, extended, upright)
        if desc is not None:
            return desc
        from descbench.descriptors.surf_kernels import surf_describe

        return surf_describe(patches[i], kps.x, kps.y, kps.size, extended, upright, what=_patch_name(where, i))

    return _per_patch(len(patches), row)


# --- OpenCV families (opencv_binary, opencv_float)


def _cv_extractor(family: str, params: dict, kps: ImageKeypoints, kpset: dict):
    """(extractor, OpenCV keypoints, tag) exactly as the family's registry function builds them
    for ``kps`` on a 65 x 65 image (``tag=False``: the extractor reads class_id, KAZE/AKAZE)."""
    import cv2

    from descbench.descriptors import opencv_binary as B
    from descbench.descriptors import opencv_float as F
    from descbench.descriptors._cv_compute import BEBLID_SCALE, VGG_BOOST_SCALE, choice, cv_keypoints, scale_factor
    from descbench.keypoints.detectors import _cv_attr

    p = params
    octave, class_id, tag = kps.octave, kps.class_id, True
    if family == "orb":
        ex = cv2.ORB_create(scaleFactor=float(p["scale_factor"]), nlevels=int(p["n_levels"]), edgeThreshold=int(p["edge_threshold"]),
                            firstLevel=0, WTA_K=2, patchSize=int(p["patch_size"]))
        octave = B.orb_level_from_size(kps.size, int(p["patch_size"]), float(p["scale_factor"]), int(p["n_levels"]))
    elif family == "brisk":
        ex = _cv_attr("BRISK_create")(patternScale=float(p["pattern_scale"]))
    elif family == "freak":
        ex = _cv_attr("FREAK_create")(orientationNormalized=bool(p["orientation_normalized"]), scaleNormalized=bool(p["scale_normalized"]),
                                      patternScale=float(p["pattern_scale"]), nOctaves=int(p["n_octaves"]))
    elif family == "brief":
        nbytes = choice("brief", p, "bytes", {16: 16, 32: 32, 64: 64})
        ex = _cv_attr("BriefDescriptorExtractor_create")(bytes=nbytes, use_orientation=bool(p["use_orientation"]))
    elif family == "latch":
        nbytes = choice("latch", p, "bytes", {b: b for b in (1, 2, 4, 8, 16, 32, 64)})
        ex = _cv_attr("LATCH_create")(bytes=nbytes, rotationInvariance=bool(p["rotation_invariance"]),
                                      half_ssd_size=int(p["half_ssd_size"]), sigma=float(p["sigma"]))
    elif family == "beblid":
        bits = choice("beblid", p, "n_bits", {256: "BEBLID_SIZE_256_BITS", 512: "BEBLID_SIZE_512_BITS"})
        ex = _cv_attr("BEBLID_create")(scale_factor(p, kpset, BEBLID_SCALE), _cv_attr(bits))
    elif family == "teblid":
        bits = choice("teblid", p, "n_bits", {256: "TEBLID_SIZE_256_BITS", 512: "TEBLID_SIZE_512_BITS"})
        ex = _cv_attr("TEBLID_create")(scale_factor(p, kpset, BEBLID_SCALE), _cv_attr(bits))
    elif family == "binboost":
        ex = _cv_attr("BoostDesc_create")(desc=choice("binboost", p, "desc", B.BINBOOST_DESC),
                                          use_scale_orientation=bool(p["use_scale_orientation"]),
                                          scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE))
    elif family == "vgg":
        ex = _cv_attr("VGG_create")(desc=choice("vgg", p, "desc", F.VGG_DESC), isigma=float(p["isigma"]),
                                    img_normalize=bool(p["img_normalize"]), use_scale_orientation=bool(p["use_scale_orientation"]),
                                    scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE), dsc_normalize=False)
    elif family == "boostdesc":
        ex = _cv_attr("BoostDesc_create")(desc=F.LBGM, use_scale_orientation=bool(p["use_scale_orientation"]),
                                          scale_factor=scale_factor(p, kpset, VGG_BOOST_SCALE))
    elif family == "daisy":
        ex = _cv_attr("DAISY_create")(radius=float(p["radius"]), q_radius=int(p["q_radius"]), q_theta=int(p["q_theta"]),
                                      q_hist=int(p["q_hist"]), norm=_cv_attr(choice("daisy", p, "norm", F.DAISY_NORM)),
                                      interpolation=bool(p["interpolation"]), use_orientation=bool(p["use_orientation"]))
    elif family == "kaze":
        ex = _cv_attr("KAZE_create")(extended=bool(p["extended"]), upright=bool(p["upright"]), nOctaves=int(p["n_octaves"]),
                                     nOctaveLayers=int(p["n_octave_layers"]),
                                     diffusivity=_cv_attr(choice("kaze", p, "diffusivity", B.DIFFUSIVITY)))
        class_id, octave = F.kaze_levels(kps, p, kpset)
        F.check_msurf_scale(kps.size, np.zeros_like(octave), "kaze", Path("<patch>"))
        tag = False
    elif family in ("akaze", "akaze_kaze"):
        if family == "akaze":
            kind = "AKAZE_DESCRIPTOR_MLDB_UPRIGHT" if p["upright"] else "AKAZE_DESCRIPTOR_MLDB"
        else:
            kind = "AKAZE_DESCRIPTOR_KAZE_UPRIGHT" if p["upright"] else "AKAZE_DESCRIPTOR_KAZE"
        ex = B.make_akaze(family, p, kind)
        class_id, octave = B.akaze_levels(kps, (PATCH_SIZE, PATCH_SIZE), p, kpset)
        if family == "akaze_kaze":
            F.check_msurf_scale(kps.size, octave, family, Path("<patch>"))
        tag = False
    else:
        raise KeyError(family)
    return ex, cv_keypoints(kps.x, kps.y, kps.size, kps.angle, octave, class_id, kps.response), tag


def _cv_rows(patches, family, params, kps, kpset, where, config_key) -> np.ndarray:
    """One OpenCV ``compute`` per patch; a keypoint OpenCV drops goes through the registry's
    :func:`~descbench.descriptors._cv_compute.compute_rows` (reflect-padded recomputation, or DataError)."""
    from descbench.descriptors._cv_compute import compute_rows

    try:
        ex, cv_kps, tag = _cv_extractor(family, params, kps, kpset)
    except DataError as exc:  # check_msurf_scale: a support too small for M-SURF
        raise DataError(f"{where}: {exc}; on patches: raise 'support'") from exc

    def row(i):
        if tag:
            got, desc = ex.compute(patches[i], cv_kps)
            if desc is not None and len(got) == 1:
                return desc  # kept on the unpadded patch: what compute_rows' first pass returns
        try:
            return compute_rows(ex, patches[i], cv_kps, family=family, image_path=_patch_name(where, i), tag=tag)
        except DataError as exc:
            raise DataError(f"{exc}; on patches: lower 'support' (the keypoint size) or the family's pattern scale so "
                            "its pattern fits the padded patch") from exc

    return _per_patch(len(patches), row)


# --- the user's callable (python.python_descriptors)


def _python_rows(patches, family, params, kps, kpset, where, config_key) -> np.ndarray:
    """The callable once per patch, ``fn(patch, centre_keypoint, **kwargs)``, with the registry's
    output checks; ``color: true`` passes the grey patch as 3 equal BGR channels (what reading a
    grey file in colour gives)."""
    import cv2

    from descbench.descriptors.python import resolve

    fn = resolve(params["callable"], config_key + ".callable")
    name = params["callable"]
    kwargs = params["kwargs"]
    color = bool(params["color"])
    first: list[tuple[bool, int]] = []  # (binary, D) of patch 0's row

    def row(i):
        image = cv2.cvtColor(patches[i], cv2.COLOR_GRAY2BGR) if color else patches[i]
        out = fn(image, kps, **kwargs)
        what = f"descriptor callable '{name}' returned"
        if not isinstance(out, np.ndarray):
            raise DataError(f"{what} {type(out).__name__} for {_patch_name(where, i)}; return a numpy array [1, D]")
        if out.ndim != 2 or out.shape[0] != 1:
            raise DataError(f"{what} shape {out.shape} for the 1 keypoint of {_patch_name(where, i)}; "
                            "return one row per keypoint, in order: shape (1, D)")
        if out.dtype != np.uint8 and out.dtype.kind != "f":
            raise DataError(f"{what} dtype {out.dtype} for {_patch_name(where, i)}; return floats, or uint8 packed bits")
        k = (out.dtype == np.uint8, out.shape[1])
        if not first:
            first.append(k)
        elif first[0] != k:
            kinds = [f"{'uint8' if b else 'float'} [1, {d}]" for b, d in (k, first[0])]
            raise DataError(f"{what} {kinds[0]} for {_patch_name(where, i)} but {kinds[1]} for patch 0; "
                            "return one dtype and width for every patch")
        if out.dtype == np.uint8:
            return out
        with np.errstate(over="ignore"):
            return out.astype(np.float32)

    return _per_patch(len(patches), row)


# --- stack (stack.stack_descriptors)


def _stack_rows(patches, params, support, angle, sift_octave, where, config_key) -> np.ndarray:
    """Each part described by :func:`describe_patches` (its own default support unless ``support``
    is given), combined exactly as :func:`descbench.descriptors.stack.stack_descriptors`."""
    from descbench.descriptors.stack import combine_blocks

    blocks = [describe_patches(patches, p["family"], p["params"], support=support, angle=angle, sift_octave=sift_octave,
                               where=f"{where} (stack part {i}, {p['family']})", config_key=f"{config_key}.parts.{i}.params")
              for i, p in enumerate(params["parts"])]
    return combine_blocks(blocks, params)


# --- any other registered family: the registry itself, one temporary image per patch


def _file_rows(patches, family, params, kps, kpset, where, config_key) -> np.ndarray:
    """Fallback for families without an in-memory path: each patch written as a binary PGM to a
    private temporary directory and described by the registry (exact by construction, slower)."""
    header = f"P5 {PATCH_SIZE} {PATCH_SIZE} 255\n".encode()
    with tempfile.TemporaryDirectory(prefix="descbench-patch-") as tmp:
        path = Path(tmp) / "patch.pgm"

        def row(i):
            path.write_bytes(header + patches[i].tobytes())
            return compute_descriptors(family, params, path, kps, kpset, _patch_name(where, i))

        return _per_patch(len(patches), row)


ENGINES = {
    "sift": _sift_rows, "rootsift": _sift_rows, "dspsift": _dspsift_rows, "surf": _surf_rows, "python": _python_rows,
    **{f: _cv_rows for f in ("orb", "brisk", "freak", "brief", "latch", "beblid", "teblid", "binboost", "vgg", "boostdesc",
                             "daisy", "kaze", "akaze", "akaze_kaze")},
}


# ----------------------------------------------------------------------------- strips of a sequence


def check_sequence_descriptors(descs: dict, where: str) -> tuple[int, int, np.dtype]:
    """(N, D, dtype) of a sequence's 16 strips of descriptors; DataError naming ``where`` unless
    exactly the 16 types are present, each a 2-D float32 or uint8 array, with one N, D and dtype,
    and float values finite."""
    if not isinstance(descs, dict) or set(descs) != set(PATCH_TYPES):
        have = sorted(descs) if isinstance(descs, dict) else type(descs).__name__
        missing = [t for t in PATCH_TYPES if not isinstance(descs, dict) or t not in descs]
        raise DataError(f"{where}: descriptors must be given for exactly the 16 patch strips {', '.join(PATCH_TYPES)}; "
                        f"got {have} (missing: {', '.join(missing) or 'none'}); describe every strip of the sequence")
    ref = descs[PATCH_TYPES[0]]
    for t in PATCH_TYPES:
        d = descs[t]
        if not isinstance(d, np.ndarray) or d.ndim != 2 or d.dtype not in (np.float32, np.uint8) or d.shape[1] == 0:
            raise DataError(f"{where}: strip '{t}': descriptors must be a 2-D float32 or uint8 (packed bits) array with "
                            f"D >= 1, got {getattr(d, 'dtype', type(d).__name__)} {getattr(d, 'shape', '')}")
        if d.shape[0] != ref.shape[0]:
            raise DataError(f"{where}: strip '{t}' has {d.shape[0]} descriptor rows, strip 'ref' has {ref.shape[0]}; "
                            "all strips of a sequence hold the same patches")
        if d.dtype != ref.dtype or d.shape[1] != ref.shape[1]:
            raise DataError(f"{where}: strip '{t}' has {d.dtype} descriptors of dimension {d.shape[1]}, strip 'ref' "
                            f"{ref.dtype} of dimension {ref.shape[1]}; describe all strips with one descriptor")
        if d.dtype == np.float32 and not np.isfinite(d).all():
            r = int(np.flatnonzero(~np.isfinite(d).all(axis=1))[0])
            raise DataError(f"{where}: strip '{t}' row {r} holds NaN/inf; fix the descriptor or its input")
    return ref.shape[0], ref.shape[1], ref.dtype


# ----------------------------------------------------------------------------- CSV (hpatches-benchmark)


def hpatches_csv_path(root: Path | str, seq: str, ptype: str) -> Path:
    """``<root>/<seq>/<type>.csv``, hpatches-benchmark's descriptor file of one strip."""
    return Path(root) / seq / f"{ptype}.csv"


def _read_csv_matrix(path: Path) -> np.ndarray:
    """A headerless comma-separated numeric CSV as a float64 [R, C] array (strict; DataError naming ``path``)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    fix = "write one comma-separated row of numbers per patch, no header (hpatches-benchmark layout)"
    if not path.is_file():
        raise DataError(f"patch descriptor file {path} does not exist; {fix}, one file <root>/<sequence>/<type>.csv per "
                        f"patch strip ({', '.join(PATCH_TYPES)})")
    try:
        table = pcsv.read_csv(path, read_options=pcsv.ReadOptions(autogenerate_column_names=True, use_threads=False),
                              parse_options=pcsv.ParseOptions(delimiter=","),
                              convert_options=pcsv.ConvertOptions(null_values=[""], strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        if "Empty CSV file" in msg:
            raise DataError(f"patch descriptor file {path} is empty (0 rows); {fix}") from exc
        m = re.search(r"Expected (\d+) columns, got (\d+)", msg)
        if m:
            raise DataError(f"patch descriptor file {path} has ragged rows (a row with {m.group(2)} values, the first row "
                            f"has {m.group(1)}): {msg.splitlines()[0]}; {fix}") from exc
        if "conversion error" in msg:
            raise DataError(f"patch descriptor file {path} holds a value that is not a number ({msg.splitlines()[0]}); "
                            f"{fix}") from exc
        raise DataError(f"patch descriptor file {path} cannot be parsed as CSV ({msg.splitlines()[0]}); {fix}") from exc
    except OSError as exc:
        raise DataError(f"patch descriptor file {path} cannot be read ({exc}); restore it") from exc
    if table.num_columns == 1:
        raise DataError(f"patch descriptor file {path} has a single column: wrong delimiter? hpatches-benchmark reads "
                        "comma-separated values and refuses one column; write the values of a row separated by ','")
    cols = []
    for j, col in enumerate(table.columns):
        if col.null_count:  # only "" is read as null ("nan" is NaN, reported by the caller)
            r = next(i for i, v in enumerate(col.to_pylist()) if v is None)
            raise DataError(f"patch descriptor file {path}: row {r + 1}, column {j + 1} is empty (a trailing or doubled "
                            f"comma?); {fix}")
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            values = col.to_pylist()
            r = next((i for i, v in enumerate(values) if not _is_number(v)), 0)
            raise DataError(f"patch descriptor file {path}: row {r + 1}, column {j + 1} is {values[r]!r}, not a number; {fix}")
        cols.append(np.asarray(col.to_numpy(), dtype=np.float64))
    return np.stack(cols, axis=1)


def _is_number(v) -> bool:
    if v is None:
        return False
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def read_hpatches_csv(root: Path | str, seq: str, n_patches: int, binary_packed: bool = False) -> dict[str, np.ndarray]:
    """The 16 strips' descriptors of sequence ``seq`` from ``<root>/<seq>/<type>.csv``: float32
    [N, D], or with ``binary_packed`` (hpatches-benchmark's ``bin_packed``) uint8 packed bits [N, D]
    (values must be integers 0..255). Every file must have ``n_patches`` rows (the strip's patch
    count) and all strips one D; NaN/inf, empty or non-numeric values, ragged rows and a single
    column (wrong delimiter) are DataErrors naming the file."""
    out: dict[str, np.ndarray] = {}
    first: tuple[Path, int] | None = None
    for t in PATCH_TYPES:
        path = hpatches_csv_path(root, seq, t)
        m = _read_csv_matrix(path)
        if m.shape[0] != n_patches:
            raise DataError(f"patch descriptor file {path} has {m.shape[0]} rows, the patch strip has {n_patches} patches; "
                            "write one row per patch, in strip order")
        bad = ~np.isfinite(m)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            raise DataError(f"patch descriptor file {path}: row {r + 1}, column {c + 1} is {m[r, c]}; descriptors must "
                            "be finite: fix the descriptor that wrote it")
        if first is None:
            first = (path, m.shape[1])
        elif m.shape[1] != first[1]:
            raise DataError(f"patch descriptor file {path} has {m.shape[1]} values per row, {first[0]} has {first[1]}; "
                            "all strips of a sequence must hold one descriptor")
        if binary_packed:
            if not ((m >= 0) & (m <= 255) & (m == np.floor(m))).all():
                r, c = (int(v) for v in np.argwhere(~((m >= 0) & (m <= 255) & (m == np.floor(m))))[0])
                raise DataError(f"patch descriptor file {path}: row {r + 1}, column {c + 1} is {m[r, c]}, not a byte 0..255; "
                                "bin_packed files hold packed bits as integers 0..255 (or read it as float descriptors)")
            out[t] = m.astype(np.uint8)
        else:
            out[t] = m.astype(np.float32)
    return out


def format_csv(desc: np.ndarray) -> str:
    """Rows of ``desc`` as comma-separated text: uint8 as integers, float32 with ``%.9g`` (9
    significant digits: parsed back, via float64 or directly, every float32 is recovered exactly)."""
    buf = _io.StringIO()
    if desc.dtype == np.uint8:
        np.savetxt(buf, desc, fmt="%d", delimiter=",")
    else:
        np.savetxt(buf, desc.astype(np.float64), fmt="%.9g", delimiter=",")
    return buf.getvalue()


def write_hpatches_csv(root: Path | str, seq: str, descs: dict[str, np.ndarray]) -> list[Path]:
    """Write ``<root>/<seq>/<type>.csv`` for the 16 strips (:func:`format_csv`; atomic per file);
    read back with :func:`read_hpatches_csv` (``binary_packed=True`` for uint8). Returns the paths."""
    from descbench.io import write_text

    where = f"patch descriptors for {Path(root) / seq}"
    check_sequence_descriptors(descs, where)
    paths = []
    for t in PATCH_TYPES:
        path = hpatches_csv_path(root, seq, t)
        write_text(path, format_csv(descs[t]))
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------- Parquet


def write_sequence_descriptors(path: Path | str, descs: dict[str, np.ndarray], meta: dict) -> None:
    """One Parquet file with a sequence's 16 strips of descriptors (module docstring: columns
    ``type`` int8, ``index`` int32, ``descriptor``); ``meta`` (e.g. :func:`patch_settings`, plus
    ``sequence``) becomes the provenance. Same input, byte-identical file."""
    from descbench.io import patch_descriptors_table, provenance, write_table

    path = Path(path)
    n, d, dtype = check_sequence_descriptors(descs, f"cannot write {path}")
    types = np.repeat(np.arange(len(PATCH_TYPES), dtype=np.int8), n)
    index = np.tile(np.arange(n, dtype=np.int32), len(PATCH_TYPES))
    stacked = np.concatenate([descs[t] for t in PATCH_TYPES], axis=0)
    extra = {"patch_types": list(PATCH_TYPES), "n_patches": n, "dim": d, "binary": dtype == np.uint8}
    write_table(patch_descriptors_table(types, index, stacked), path, provenance("patch_descriptors", meta, **extra))


def read_sequence_descriptors(path: Path | str) -> tuple[dict[str, np.ndarray], dict]:
    """(descriptors per strip type, provenance) of a :func:`write_sequence_descriptors` file; a file
    whose rows are not the 16 strips x N patches in order, or whose type list differs, is a DataError."""
    from descbench.io import PATCH_DESCRIPTORS, column_array, descriptors_array, read_table

    path = Path(path)
    table, meta = read_table(path, PATCH_DESCRIPTORS)
    fix = "delete it and rerun the patch description to rebuild it"
    if meta.get("stage") != "patch_descriptors" or meta.get("patch_types") != list(PATCH_TYPES):
        raise DataError(f"{path} is not a patch-descriptor file of this descbench (stage {meta.get('stage')!r}, "
                        f"patch types {meta.get('patch_types')!r}); {fix}")
    n = meta.get("n_patches")
    types = column_array(table.column("type"))
    index = column_array(table.column("index"))
    if not isinstance(n, int) or table.num_rows != n * len(PATCH_TYPES) \
            or not np.array_equal(types, np.repeat(np.arange(len(PATCH_TYPES), dtype=np.int8), n)) \
            or not np.array_equal(index, np.tile(np.arange(n, dtype=np.int32), len(PATCH_TYPES))):
        raise DataError(f"{path}: rows are not the {len(PATCH_TYPES)} strips x {n} patches in (type, index) order; {fix}")
    col = table.column("descriptor").type
    if not (hasattr(col, "list_size") and str(col.value_type) in ("float", "uint8")):
        raise DataError(f"{path}: column 'descriptor' is {col}, not a fixed-size list of float32 or uint8; {fix}")
    desc = descriptors_array(table)
    out = {t: np.array(desc[k * n:(k + 1) * n]) for k, t in enumerate(PATCH_TYPES)}
    check_sequence_descriptors(out, str(path))
    return out, meta


__all__ = [
    "CENTRE", "HPATCHES_SIFT_SIZE", "HPATCHES_BENCHMARK", "SIFT_OCTAVES", "NOT_ON_PATCHES", "default_support",
    "centre_keypoint", "patch_kpset", "patch_settings", "check_patches", "describe_patches",
    "check_sequence_descriptors", "hpatches_csv_path", "read_hpatches_csv", "format_csv", "write_hpatches_csv",
    "write_sequence_descriptors", "read_sequence_descriptors",
]
