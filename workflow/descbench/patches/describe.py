"""Registry descriptors on HPatches patches, hpatches-benchmark's CSV files, and patch-descriptor Parquet.

**What a patch descriptor is.** A 65 x 65 patch is described as if it were an image of its own
with one keypoint at its centre: ``describe_patches(patches, family, params)[i]`` equals, bit for
bit, ``get_family(family).compute(<patch i saved as a 65 x 65 image>, <the centre keypoint>,
params, kpset)``, the registry's computation on that single image (tested for every family
below), with one exception, the learned families (``onnx``, ``hardnet``, ``hardnet8``,
``sosnet``, ``hynet``, ``tfeat``): they follow hpatches-benchmark's learned baselines (e.g.
HardNet's HPatches extraction script) and resize the whole 65 x 65 patch to the network input
(``cv2.resize``, bilinear; :func:`descbench.descriptors.patch_sampling.resize_hpatches_patches`)
instead of re-sampling it about the centre keypoint. Whatever the family does at an image border happens at the patch border: SIFT skips the
samples outside the image, SURF uses the in-image part of its wavelets, and the OpenCV families
that drop a keypoint whose pattern does not fit get the registry's rescue, a recomputation on the
patch padded with ``BORDER_REFLECT_101`` (:mod:`descbench.descriptors.cv_compute`); a keypoint
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
are the half-width of the square of pixels that change the descriptor, on a random texture). Each
value is the family's own ``patch_support`` hook (:class:`~descbench.descriptors.DescriptorFamily`,
in its module); this module has no table of families:

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
dsp                                    the base's                 the base's hook at every scaled size
onnx, hardnet, hardnet8, sosnet,       65 (the whole patch)       resized to the net input (another support, or
hynet, tfeat                                                      an upright angle > 0, is a ConfigError)
=====================================  =========================  ==================================================

Families that make no sense on patches raise :class:`~descbench.errors.ConfigError`, with the
reason their module gives (``not_on_patches``): ``rgbsift`` / ``dsprgbsift`` (HPatches patches are
greyscale; on a grey patch they would be three copies of one SIFT block, no information beyond
``sift`` / ``dspsift``), ``composite`` (it combines other descriptors of the config: the patch
describe job, :func:`descbench.patches.stages.describe`, describes each component here and fuses
the rows with :func:`descbench.descriptors.composite.aggregate`, the workbench's
``PatchFusionExtractor`` with ``arithmetic: workbench``) and ``precomputed`` (patch descriptors computed elsewhere are read with
:func:`read_hpatches_csv`). A family that declares neither patch hooks nor such a reason (e.g. one
added to the registry without them) is refused the same way, naming the hooks to add
(:func:`patch_problem`); it never falls back to another family's support or code path.

**How it is batched.** One registry computation per patch, in memory: the extractor (OpenCV
object, SIFT object, resolved callable) and the centre keypoint are built once per call, then
each patch costs one native call (OpenCV's ``compute``, the numba SURF / DSP-SIFT kernels, the
user callable), so the Python loop adds a few microseconds per patch; whole-array steps
(RootSIFT, the workbench L2 step, the NaN check) run once on the [N, D] result. A mosaic of
patches in one image was rejected: SIFT skips samples outside *its* image, KAZE/AKAZE normalise
by a whole-image contrast factor, and float keypoint coordinates far from the origin round
differently (BRISK/FREAK interpolation), so a mosaic cannot equal the single-patch computation.
This module builds the centre keypoint and a :class:`~descbench.descriptors.PatchJob` (the
patches, the keypoint, the batching loop :func:`_per_patch`) and calls the family's
``patch_rows`` hook, which lives in the family's module next to its image ``compute`` and shares
its construction (the OpenCV families build their extractor with one *setup* function for both,
:mod:`descbench.descriptors.opencv_common`); ``tests/descbench/patches/test_describe.py`` compares every
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
from pathlib import Path
from typing import Callable

import numpy as np

from descbench.descriptors import PatchJob, check_descriptor_params, get_family
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.patches import PATCH_SIZE, PATCH_TYPES

CENTRE = PATCH_SIZE / 2.0  # 32.5: hpatches-benchmark's centre keypoint position (x and y)
HPATCHES_SIFT_SIZE = PATCH_SIZE / 5.303  # 12.257: hpatches-benchmark's centre keypoint size
# describe_patches(..., **HPATCHES_BENCHMARK): the rest of hpatches-benchmark's cv2.KeyPoint()
HPATCHES_BENCHMARK = {"angle": -1.0, "sift_octave": "zero"}
SIFT_OCTAVES = ("size", "zero")

# ----------------------------------------------------------------------------- the centre keypoint


def patch_problem(family: str) -> str | None:
    """Why descriptor family ``family`` cannot describe patches, phrased to follow "it"
    (:meth:`~descbench.descriptors.DescriptorFamily.patch_problem`: its ``not_on_patches``
    reason or its missing hooks); None when it can, or is not registered (the params check says so)."""
    try:
        fam = get_family(family)
    except ConfigError:
        return None
    return fam.patch_problem()


def default_support(family: str, params: dict) -> float | list[float]:
    """The default ``support`` (KeyPoint size, px) of ``family`` with filled ``params``: its
    ``patch_support`` hook on a 65 x 65 patch (module table; a stack: one per part)."""
    problem = patch_problem(family)
    if problem:
        raise ConfigError(f"descriptor family '{family}' cannot describe patches: it {problem}")
    return get_family(family).patch_support(params, PATCH_SIZE)


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


def _check_geometry(support, angle, sift_octave, config_key: str, support_from: str | None = None) -> None:
    """The centre keypoint: ``support`` a finite size > 0, ``angle`` finite, ``sift_octave`` known.

    These are arguments of :func:`describe_patches` / :func:`patch_settings` (checked there). At
    config validation the only rule left is the one across keys that the schema cannot state: the
    support a family's validated params give (:func:`default_support`, e.g. 65 / scale_factor) must
    be finite; :func:`descbench.patches.checks.check_source` checks it with ``support_from``, the
    params key it derives from, and patches.centre_keypoint's angle and octave.
    """
    base = config_key.removesuffix(".params")
    if not isinstance(support, (int, float)) or isinstance(support, bool) or not math.isfinite(support) or support <= 0:
        if support_from is not None:
            raise ConfigError(f"invalid config value at '{support_from}': it gives the patches' centre keypoint a size of "
                              f"{support!r} patch pixels; give a value whose keypoint size is a finite positive number")
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
    default = get_family(family).patch_support(params, PATCH_SIZE)
    composite = isinstance(default, list)  # a stack: one default support per part
    _check_geometry((1.0 if composite else default) if support is None else support, angle, sift_octave, config_key)
    out = {"family": family, "params": params, "angle": float(angle), "sift_octave": sift_octave,
           "centre": [CENTRE, CENTRE]}
    if composite:
        out["support"] = [support if support is not None else s for s in default]
    else:
        out["support"] = float(support if support is not None else default)
    return out


def _filled(family: str, params: dict | None, config_key: str) -> dict:
    """The family's filled params; ConfigError at ``<config_key minus .params>.family`` when the
    family cannot describe patches (:func:`patch_problem`)."""
    problem = patch_problem(family)
    if problem:
        key = config_key.removesuffix(".params") + ".family"
        raise ConfigError(f"invalid config value at '{key}': descriptor family '{family}' cannot describe patches: "
                          f"it {problem}")
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
    fam = get_family(family)
    default = fam.patch_support(params, PATCH_SIZE) if support is None else None
    if isinstance(default, list):  # a composite (stack): its parts at their own default supports
        _check_geometry(1.0, angle, sift_octave, config_key)
        kps = None
    else:
        support = default if support is None else support
        _check_geometry(support, angle, sift_octave, config_key)
        kps = centre_keypoint(float(support), float(angle))

    def part(i: int, part_family: str, part_params: dict) -> np.ndarray:
        return describe_patches(patches, part_family, part_params, support=support, angle=angle, sift_octave=sift_octave,
                                where=f"{where} (stack part {i}, {part_family})", config_key=f"{config_key}.parts.{i}.params")

    job = PatchJob(patches, kps, patch_kpset(sift_octave), where, config_key, lambda row: _per_patch(len(patches), row),
                   describe=part)
    return _checked(fam.patch_rows(job, params), family, where)


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


def _read_csv_matrix(path: Path, types: list | None = None) -> np.ndarray:
    """A headerless comma-separated numeric CSV as a float64 [R, C] array (strict; DataError naming
    ``path``). ``types``, if given, receives whether each column was written as integers."""
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
        if types is not None:
            types.append(pa.types.is_integer(col.type))
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
    column (wrong delimiter) are DataErrors naming the file.

    A pandas row index (``DataFrame.to_csv`` writes one unless ``index=False``) is refused. The
    rule: in all 16 strips of the sequence the first column is exactly 0, 1, ..., N-1 (N >= 2
    patches), and either it is written as integers in front of float values (pandas' index in
    front of a float descriptor), or N >= 8 (integer or byte descriptors, where the text does not
    tell: a real descriptor whose first value equals the patch's row number in all 16 x N rows,
    at least 128 coincidences, does not happen in practice; with fewer rows an integer-valued
    ramp can, and is accepted). Such a column in only some files is reported with the dimension
    mismatch it causes, and in a bin_packed file as soon as it passes 255 (no byte)."""
    out: dict[str, np.ndarray] = {}
    first: tuple[Path, int, bool] | None = None
    indexed, typed = [], []  # per strip: the first column is 0..N-1; it is integers in front of floats
    for t in PATCH_TYPES:
        path = hpatches_csv_path(root, seq, t)
        types: list[bool] = []
        m = _read_csv_matrix(path, types)
        typed.append(types[0] and not all(types[1:]))
        if m.shape[0] != n_patches:
            raise DataError(f"patch descriptor file {path} has {m.shape[0]} rows, the patch strip has {n_patches} patches; "
                            "write one row per patch, in strip order")
        bad = ~np.isfinite(m)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            raise DataError(f"patch descriptor file {path}: row {r + 1}, column {c + 1} is {m[r, c]}; descriptors must "
                            "be finite: fix the descriptor that wrote it")
        indexed.append(m.shape[0] >= 2 and np.array_equal(m[:, 0], np.arange(m.shape[0], dtype=np.float64)))
        if first is None:
            first = (path, m.shape[1], indexed[-1])
        elif m.shape[1] != first[1]:
            which = path if indexed[-1] else first[0] if first[2] else None
            hint = f" ({which} starts with the column 0, 1, ..., {m.shape[0] - 1}: {_PANDAS_INDEX})" if which else ""
            raise DataError(f"patch descriptor file {path} has {m.shape[1]} values per row, {first[0]} has {first[1]}{hint}; "
                            "all strips of a sequence must hold one descriptor")
        if binary_packed:
            if not ((m >= 0) & (m <= 255) & (m == np.floor(m))).all():
                r, c = (int(v) for v in np.argwhere(~((m >= 0) & (m <= 255) & (m == np.floor(m))))[0])
                if c == 0 and indexed[-1]:
                    raise DataError(f"patch descriptor file {path} starts with the column 0, 1, ..., {m.shape[0] - 1}: "
                                    f"{_PANDAS_INDEX}")
                raise DataError(f"patch descriptor file {path}: row {r + 1}, column {c + 1} is {m[r, c]}, not a byte 0..255; "
                                "bin_packed files hold packed bits as integers 0..255 (or read it as float descriptors)")
            out[t] = m.astype(np.uint8)
        else:
            out[t] = m.astype(np.float32)
    if all(indexed) and (all(typed) or n_patches >= _INDEX_MIN_ROWS):
        raise DataError(f"patch descriptor files {hpatches_csv_path(root, seq, PATCH_TYPES[0])} .. "
                        f"{hpatches_csv_path(root, seq, PATCH_TYPES[-1]).name} (all 16 strips of sequence {seq}) start "
                        f"with the column 0, 1, ..., {n_patches - 1}: {_PANDAS_INDEX}")
    return out


_INDEX_MIN_ROWS = 8  # read_hpatches_csv: a first column 0..N-1 in all strips is an index from this N on
_PANDAS_INDEX = ("the row index pandas writes by default (DataFrame.to_csv with index=True), not a descriptor value; "
                 "rewrite the files with df.to_csv(path, header=False, index=False)")


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
    "CENTRE", "HPATCHES_SIFT_SIZE", "HPATCHES_BENCHMARK", "SIFT_OCTAVES", "patch_problem", "default_support",
    "centre_keypoint", "patch_kpset", "patch_settings", "check_patches", "describe_patches",
    "check_sequence_descriptors", "hpatches_csv_path", "read_hpatches_csv", "format_csv", "write_hpatches_csv",
    "write_sequence_descriptors", "read_sequence_descriptors",
]
