"""Domain-size pooling (DSP) of any float descriptor family: family ``dsp``.

The C++ DescriptorWorkbench's generic pooling strategy (``src/core/pooling/DomainSizePooling.cpp``
and ``pooling_utils.hpp``, options parsed in ``src/core/config/YAMLConfigLoader.cpp``, defaults in
``src/include/thesis_project/types.hpp`` ``DescriptorParams``; described in
``docs/pooling_semantics.md``): a keypoint of size ``s`` is described by the ``base`` family at the
sizes ``a s`` for every ``a`` in ``scales`` (position, angle and every other field kept) and the
rows are combined. With filled params, for each keypoint (row operations in float64, float32 out):

    w_a      = weight of scale a (below); scales with w_a = 0 are not computed (they add nothing)
    d_a      = root_before(norm_before(base rows at the keypoints of size a s))
    pooled   = sum_a w_a d_a / sum_a w_a          (aggregation: average, the default)
             | max_a d_a  /  min_a d_a            (max / min: element-wise over the scales)
             | [d_a1, d_a2, ...]                  (concatenate: in the order of scales)
    row      = norm_after(root_after(pooled))

``normalise_before`` / ``normalise_after`` (``none`` | ``l1`` | ``l2``: each row divided by its L1
or L2 norm, an all-zero row stays zero) are the workbench's ``normalize_before_pooling`` /
``normalize_after_pooling`` with its ``norm_type`` (its defaults: no, yes with L2). ``rootsift``
(``none`` | ``before`` | ``after``, its ``rooting_stage``): :func:`signed_root`, the row divided by
its L1 norm, then ``sign(v) sqrt(|v|)`` element-wise (the workbench's
``DomainSizePooling::applyRooting``; on non-negative rows it is RootSIFT); ``before`` applies it
to each ``d_a`` after ``normalise_before``, ``after`` to the pooled row before ``normalise_after``.

Weights (:func:`scale_weights`; ``ln`` the natural log, ``a`` the scale as float32, as the
workbench's ``float`` scales): ``weighting: uniform`` ``w = 1``; ``gaussian``
``w = exp(-ln(a)^2 / (2 sigma^2))``; ``triangular`` ``w = max(0, 1 - |ln(a)| / sigma)`` with
``sigma = weight_sigma`` (the workbench's ``scale_weight_sigma``, default 0.15); or explicit
``weights``, one number >= 0 per scale (its ``scale_weights``). Weights need not sum to 1: the
pooled row is divided by their sum. The workbench applies weights only with
``pooling_aggregation: weighted_avg`` (its default ``average`` ignores them: ``w = 1``); here
giving weights is that choice (``aggregation: average`` with ``weights`` or a procedural
``weighting`` is its ``weighted_avg``; there is no separate ``weighted_avg`` value).

``aggregation`` (the workbench's ``pooling_aggregation``, ``PoolingAggregation`` in ``types.hpp``,
applied by ``DomainSizePooling::aggregateDescriptors``): ``average`` (default, above), ``max`` /
``min`` (``cv::max`` / ``cv::min`` of the scales' rows, element by element: each column the
largest / smallest ``d_a`` value; rounding to float32 keeps the order, so the result differs from
the workbench's float32 one only by the rounding of the normalisations) and ``concatenate``
(``cv::hconcat``: the scales' ``d_a`` side by side in the order ``scales`` lists them, columns
``j D .. (j + 1) D - 1`` scale ``scales[j]``, so a row has ``len(scales) x D`` columns for a base
of ``D``). ``normalise_before`` and ``rootsift: before`` apply to each ``d_a`` as for an average;
``rootsift: after`` and ``normalise_after`` to the aggregated row (for ``concatenate`` the whole
concatenated row: its L1 / L2 norm over all blocks, as the workbench's ``normalizeRows`` of the
``hconcat`` result). The workbench computes the weights with every aggregation but uses them only
in ``weighted_avg``: with ``max``, ``min`` or ``concatenate`` it takes every scale unweighted (a
weight of 0 does not drop the scale either). Here ``weights`` or a ``weighting`` other than
``uniform`` with those aggregations is a ConfigError naming the key. Its other spellings
(``avg``, ``concat``, ``weighted``) and any unknown value, which its
``YAMLConfigLoader::stringToPoolingAggregation`` reads as ``average``, are ConfigErrors here.

Scaled keypoints (:func:`scaled_keypoints`): ``size' = float32(size) * float32(a)`` in float32
(C++ ``kp.size * alpha``), every other field kept, the ``octave`` field included: every version of
the workbench's DomainSizePooling copies the keypoint and changes only its size (and, on a pyramid
level, its position): ``src/core/pooling/DomainSizePooling.cpp:78-83`` at b834e17, ``:33-36``,
``:155-158`` and ``:260-263`` at ecf962d (the parent of b9b6b46). On a keypoint set whose field
is OpenCV SIFT's packed octave (root detector ``sift``, or ``locked`` with ``octave: sift``) a
SIFT-family base reads the field as it is (``descbench.descriptors.sift.sift_setup``), so it
describes each scaled keypoint on the *detected* keypoint's scale-space level with a window ``a``
times as wide, as the workbench's OpenCV SIFT does. ``octave_field`` (``image: original`` only):
``kept`` (default, the workbench's) or ``from_size``, descbench's own choice (the only behaviour
before the workbench's was reproduced): on such a set the field is re-derived from the scaled
size at ``a != 1`` (:func:`descbench.keypoints.sift.sift_octave_from_size`, with the set's
``n_octave_layers`` and ``sigma``), so that the base describes each keypoint at the scaled size's
level, as it does on sets of other detectors (where it derives the level from the size itself);
at ``a = 1`` the field is kept. On the 40 + 40 keypoints of ``tests/interop/test_dw_dsp_pooling.py``
``from_size`` differs from the workbench's rows by up to 0.124 per element (scales [1, 1.5, 2]).
``scales: [1]`` with uniform weights and no normalisation is the base family's rows exactly (for
``sift`` ``convention: workbench``: the rows before its final L2 step, below). A scaled size that
is not finite and positive (float32 overflow of a huge scale) is a DataError naming the scale and
rows.

Base rows (``image: original`` and ``workbench_pyramid``): the workbench's DomainSizePooling pools
what its extractor's ``extract`` returns (``DomainSizePooling.cpp:86``), before the row
normalisation its runner's ``NoPooling`` gives a plain run (``NoPooling.cpp``). So the base is
computed with its family's ``pool_params`` (:func:`pooled_base_params`): ``sift`` with
``convention: workbench`` pools the workbench ``SIFTWrapper``'s rows (``SIFTWrapper.cpp:10-17``:
OpenCV's SIFT on the ``cvtColor`` grey, integers, L2 norm about 512), not the convention's unit
rows; with the defaults (``normalise_before: none``) the norms weigh the average (up to 1.7e-4
per element on the fixture's keypoints). Measured against the workbench's own DomainSizePooling
and SIFTWrapper compiled at b834e17 (``tests/data/dw/workbench_dsp_pooling.npz``,
``tests/interop/test_dw_dsp_pooling.py``): ``dsp`` over ``sift`` ``convention: workbench`` with
``image: workbench_pyramid`` (its ``pooling: domain_size_pooling``) and with ``image: original``
(its documented definition, the harness's loop over its SIFTWrapper) equal its rows within 3.0e-8,
at scales [1, 1.5, 2] and [0.85, 1, 1.3]. Every other base pools its family's rows as a plain run
gives them (e.g. ``vsift``, ``rgbsift``, ``honc``: normalised rows where the workbench pools its
wrapper's); those combinations, and every base with ``octave_field: from_size``, are descbench's
own, not compared with the workbench.

Shared rows (:func:`dsp_shareable`): with ``image: original``, scale 1 among the weighted scales
and a base whose ``pool_params`` are its params (``sift`` ``convention: opencv`` or ``vsift``,
``rgbsift``, learned bases; not ``sift`` ``convention: workbench``, which pools the unnormalised
rows), the rows at scale 1 are the base descriptor's own rows at the same keypoints. A
descriptor of the config with exactly that family and params on the same keypoint set then gives
them: the job reads its files (their sha256 in ``part_files_sha256``) and computes the other
scales only (:func:`descbench.config.shared_parts`), the same rows bit for bit.

``image`` chooses the image each scale is described on:

* ``original`` (default): the image unchanged, only the keypoint size scaled: the definition in
  the workbench's ``docs/pooling_semantics.md`` ("fixed image, variable support": the keypoint
  copied with its size times ``a``), and Dong & Soatto's. Of its code only the overloads of
  ``DomainSizePooling::computeDescriptors`` that take the old ``experiment_config`` followed it
  (``DomainSizePooling.cpp:11-117`` and ``:135-224`` at ecf962d, the parent of b9b6b46). Its YAML
  experiments' overload (``DescriptorConfig``, ``:227-310`` there, the one
  ``cli/experiment_runner.cpp`` calls) resized the image by ``a`` (``cv::resize``, ``INTER_LINEAR``)
  and multiplied each keypoint's position and size by ``a`` (``:251-263``): the same support at
  another resolution, which no mode here reproduces. Commit b9b6b46 (30 Sep 2025) replaced that
  overload with the pyramid below and made the ``experiment_config`` ones blur the image by
  ``1.6 a`` first; ba07b47 (4 Oct 2025) removed those.
* ``workbench_pyramid``: what ``DomainSizePooling::computeDescriptors`` does since then
  (:func:`pyramid_level`, :func:`pyramid_image`): a Gaussian pyramid of the grey image
  (``cvtColor(BGR2GRAY)`` of the colour read; the BGR image with ``colour: true``, its
  ``use_color``): 4 octaves of 6 levels, level 0 of octave 0 the image itself (no initial blur),
  level 0 of octave ``o > 0`` ``pyrDown`` of level 3 of octave ``o - 1``, level ``l`` a
  ``GaussianBlur`` of level ``l - 1`` with ``sigma = sqrt(s_l^2 - s_{l-1}^2)``,
  ``s_l = 1.6 * 2^(l/3)``; scale ``a`` reads level ``(max(0, o), max(0, l))`` with
  ``t = logf(a) / ln 2``, ``o = floor(t)``, ``l = round((t - o) 3)`` (so a < 1 reads a *more*
  blurred level of octave 0, e.g. 0.85 -> level 2, as the workbench does), and the keypoint is
  ``x 2^-o``, ``y 2^-o``, size ``s * a * 2^-o`` there (its octave field kept, as the workbench
  does). The level image is handed to the base family as a lossless PNG file. Scales with
  ``floor(log2 a) >= 4``, which the workbench skips silently, are a ConfigError.

Differences from the workbench, each a config or data error here where the workbench goes on
silently: a scale <= 0 (it skips the scale), a scale listed twice (it counts it twice), a weight
list of the wrong length (it falls back to the procedural weights), an all-zero weight sum (it
returns the first scale's rows), a base that changes the row count or gives NaN at some scale (it
returns no descriptors for the image), weights with ``max``, ``min`` or ``concatenate`` (it ignores
them), a base whose width changes with the size under ``concatenate`` (its ``hconcat`` joins rows of
any widths; here every scale gives ``D`` columns, so the width is ``len(scales) x D``). Sums are
float64 (it accumulates float32), and a row is divided by any positive norm (``cv::normalize``
zeroes rows of norm <= DBL_EPSILON).

* ``base_pyramid``: the workbench's other DSP, ``DSPVanillaSIFTWrapper::computeDSP``
  (``keypoints/DSPVanillaSIFTWrapper.h``: its ``DSPHONC_V2`` and ``DSPHOWH_V2``), for a base family
  that declares the ``pyramid_rows`` hook (``honc``, ``howh``: its own SIFT-style pyramid, built
  once, with one more octave when there are several scales and the smallest is < 1), of the image
  the workbench's runner hands it: ``cvtColor(BGR2GRAY)`` of the colour read, made 3-channel again
  by the wrapper (``GRAY2BGR``), or with ``colour: true`` (its ``use_color``) the BGR image. Its
  YAML loader forces ``use_color`` for ``DSPHONC_V2`` but not for ``DSPHOWH_V2``: ``DSPHONC_V2`` is
  ``colour: true`` over ``honc``, ``DSPHOWH_V2`` the default ``colour: false`` over ``howh``. Scale ``a``
  describes a keypoint of size ``s`` at ``t = log2(float32(s a) / 3.2)``, octave ``floor(t)``,
  layer ``floor((t - octave) 3)``, level index clamped to the pyramid, position and size scaled
  by ``2^-octave``; a keypoint whose index is < 0 is skipped at that scale (the workbench fills its
  row with -1). Pooling as above over the scales that described the keypoint: ``normalise_before``
  and ``rootsift: before`` on those rows only, ``average`` / ``max`` / ``min`` element-wise over
  them (0 where none did), ``concatenate`` with the skipped rows as -1 (as the workbench's
  ``hconcat``), in float32 as the workbench computes them; then the workbench runner's
  ``NoPooling`` steps, which it applies to the wrapper's rows: ``normalise_before``, the rooting
  (at either stage) and ``normalise_after`` once more (with the defaults: a second L2
  normalisation). Weights (explicit or a ``weighting`` other than uniform) are refused here: the
  workbench weighs these scales by its own rule (``buildWeights``: triangular on ``|a - 1|``),
  which is not implemented.

DSPSIFT's exact kernels (:mod:`descbench.descriptors.dspsift`) stay as they are; ``dsp`` is the
generic path for families that have none. The workbench's computeDSP over VanillaSIFT and RGBSIFT
(``DSPSIFT_V2``, ``DSPRGBSIFT_V2``) are the families ``dspsift`` and ``dsprgbsift`` (``convention:
workbench``), not ``dsp`` over ``sift`` / ``rgbsift``: those have no ``pyramid_rows`` hook, and
``image: base_pyramid`` over them is a ConfigError naming the family to use. ``dsp`` over ``sift``
with ``convention: workbench`` (the workbench's DomainSizePooling over its SIFT) is close to, not
equal to, ``dspsift`` ``convention: workbench`` (``tests/descbench/descriptors/test_pooling.py``
measures it on the demo: row L2 distance median 0.131; 0.064 with ``octave_field: from_size``):
dspsift pools VanillaSIFT's unrounded rows with computeDSP's level rule (``floor`` of the scaled
size's level) in one pyramid for all scales; dsp pools OpenCV's rounded rows on the detected level
(``from_size``: ``sift_octave_from_size``'s ``round``), one ``SIFT.compute`` (and pyramid) per scale.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import (DescriptorFamily, PatchJob, check_descriptor_params, compute_descriptors, family_names,
                                   get_family, lazy_module)
from descbench.descriptors.stack import normalise_rows, part_kind
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import has_sift_octaves, sift_octave_from_size
from descbench.params import config_schema, fill_defaults, object_fragment

NORMS = ("none", "l1", "l2")
WEIGHTINGS = ("uniform", "gaussian", "triangular")
ROOT_STAGES = ("none", "before", "after")
IMAGES = ("original", "workbench_pyramid", "base_pyramid")
# image original on a set with SIFT octaves: the keypoint's octave field kept (the workbench's) or from the scaled size
OCTAVE_FIELDS = ("kept", "from_size")
# the workbench's pooling_aggregation values; average with weights is its weighted_avg
AGGREGATIONS = ("average", "max", "min", "concatenate")
# families that cannot be the base, and why
REFUSED_BASES = {
    "dsp": "pooling a pooled descriptor pools over the products of the two scale lists; list all the scales (and "
           "weights) in one dsp",
    "stack": "a stack normalises and weights its parts; pool each part instead (a stack whose parts are dsp descriptors)",
    "composite": "its components are descriptors computed on other keypoint sets of the config, which dsp cannot rescale; "
                 "pool each component instead",
    "precomputed": "its descriptors are read from files at the detected keypoints and cannot be recomputed at other sizes",
}
# bases whose workbench computeDSP (DSPVanillaSIFTWrapper<T>) is a family of its own: (family, workbench type)
POOLED_ELSEWHERE = {"sift": ("dspsift", "DSPSIFT_V2"), "rgbsift": ("dsprgbsift", "DSPRGBSIFT_V2")}
# workbench_pyramid (DomainSizePooling::buildGaussianPyramid's arguments in computeDescriptors)
PYRAMID_OCTAVES = 4
PYRAMID_LAYERS = 3
PYRAMID_SIGMA = 1.6
K = lazy_module("descbench.descriptors.sift_kernel")  # numba kernels, loaded when a descriptor is computed

PARAMS_SCHEMA = {"dsp": object_fragment(
    required=("base",),
    # the pooled family and its params (checked against that family by check_dsp)
    base=object_fragment(required=("family",), family={"type": "string", "minLength": 1},
                         params={"type": ["object", "null"], "default": None}),
    scales={"type": "array", "items": {"type": "number", "exclusiveMinimum": 0}, "minItems": 1,
            "default": [1.0, 1.5, 2.0]},
    weighting={"enum": list(WEIGHTINGS), "default": "uniform"},
    # gaussian: sigma of ln(a); triangular: the radius in ln(a) (the workbench clamps it to >= 1e-6)
    weight_sigma={"type": "number", "minimum": 1e-6, "default": 0.15},
    # explicit weights, one per scale (null: from weighting)
    weights={"type": ["array", "null"], "items": {"type": "number", "minimum": 0}, "default": None},
    normalise_before={"enum": list(NORMS), "default": "none"},
    normalise_after={"enum": list(NORMS), "default": "l2"},
    rootsift={"enum": list(ROOT_STAGES), "default": "none"},
    # how the scales' rows are combined (max, min, concatenate: unweighted)
    aggregation={"enum": list(AGGREGATIONS), "default": "average"},
    image={"enum": list(IMAGES), "default": "original"},
    # image original: the scaled keypoint's SIFT octave field (module docstring)
    octave_field={"enum": list(OCTAVE_FIELDS), "default": "kept"},
    # workbench_pyramid only: the pyramid of the BGR image instead of the grey one
    colour={"type": "boolean", "default": False},
)}


# ----------------------------------------------------------------------------- config


def scale_weights(params: dict) -> list[float]:
    """One weight per scale of filled ``params`` (module docstring): the explicit ``weights``, or
    ``weighting`` of ``ln(float32(a))`` with ``weight_sigma``."""
    explicit, weighting, sigma = params["weights"], params["weighting"], params["weight_sigma"]
    if explicit is not None:
        return [float(w) for w in explicit]
    out = []
    for a in params["scales"]:
        x = math.log(float(np.float32(a)))
        if weighting == "gaussian":
            out.append(math.exp(-0.5 * x * x / (sigma * sigma)))
        elif weighting == "triangular":
            out.append(max(0.0, 1.0 - abs(x) / sigma))
        else:
            out.append(1.0)
    return out


def check_dsp(params: dict, where: str) -> dict:
    """Rules the schema cannot state: the base is a registered float family (its params checked
    and filled), not one of :data:`REFUSED_BASES`; scales distinct; explicit weights one per scale
    and not with a procedural ``weighting``; no weights of either kind with an unweighted
    ``aggregation``; a positive weight sum; ``octave_field: from_size`` with ``image: original``
    only; ``colour`` with a pyramid ``image`` only, the pyramid's
    scale range with ``image: workbench_pyramid``; ``base_pyramid``: a base with the
    ``pyramid_rows`` hook and no weights."""
    fam = params["base"]["family"]
    if fam in REFUSED_BASES:
        raise ConfigError(f"{where}.base.family: '{fam}' cannot be pooled by dsp: {REFUSED_BASES[fam]}")
    base = {"family": fam, "params": check_descriptor_params(fam, params["base"]["params"], f"{where}.base.params")}
    if part_kind(base):
        raise ConfigError(f"{where}.base.family: '{fam}' gives packed bits (Hamming); an average of bits is not a "
                          "descriptor of that kind: pool a float descriptor")
    scales = params["scales"]
    if len(set(map(float, scales))) != len(scales):
        raise ConfigError(f"{where}.scales: {scales} lists a scale twice; give each scale once (weight a scale with "
                          "weights)")
    agg = params["aggregation"]
    if agg != "average":
        given = "weights" if params["weights"] is not None else "weighting" if params["weighting"] != "uniform" else None
        if given:
            raise ConfigError(f"{where}.{given}: aggregation '{agg}' does not weight the scales (the workbench ignores "
                              f"scale weights unless it averages, and takes every scale); remove {given}, or use "
                              "aggregation: average for a weighted average")
    if params["weights"] is not None:
        if len(params["weights"]) != len(scales):
            raise ConfigError(f"{where}.weights: {len(params['weights'])} weights for {len(scales)} scales {scales}; "
                              "give one weight per scale, or null for weighting")
        if params["weighting"] != "uniform":
            raise ConfigError(f"{where}: weights and weighting '{params['weighting']}' both give the scale weights; "
                              "remove one of them")
    total = sum(scale_weights(params))
    if not total > 0:
        raise ConfigError(f"{where}: the scale weights {scale_weights(params)} (scales {scales}, "
                          f"{'weights' if params['weights'] is not None else 'weighting ' + params['weighting']}) sum to 0; "
                          "give at least one scale a positive weight (e.g. a larger weight_sigma)")
    if params["image"] == "base_pyramid":
        if get_family(fam).pyramid_rows is None:
            able = sorted(n for n in family_names() if get_family(n).pyramid_rows is not None)
            own = (f"; the workbench's computeDSP over it ({POOLED_ELSEWHERE[fam][1]}) is family '{POOLED_ELSEWHERE[fam][0]}' "
                   "with convention: workbench") if fam in POOLED_ELSEWHERE else ""
            raise ConfigError(f"{where}.image: base_pyramid describes every scale on the base family's own pyramid, but "
                              f"family '{fam}' has none (no pyramid_rows hook){own}; use a base with one "
                              f"({', '.join(able)}) or image: original / workbench_pyramid")
        given = "weights" if params["weights"] is not None else "weighting" if params["weighting"] != "uniform" else None
        if given:
            raise ConfigError(f"{where}.{given}: image base_pyramid pools the scales unweighted (the workbench's "
                              "computeDSP weighs them by a rule of its own, not implemented here); remove "
                              f"{given}, or use image: original / workbench_pyramid for weighted pooling")
    if params["image"] == "workbench_pyramid":
        far = [a for a in scales if pyramid_level(a)[0] >= PYRAMID_OCTAVES]
        if far:
            raise ConfigError(f"{where}.scales: {far} lie beyond the workbench pyramid's {PYRAMID_OCTAVES} octaves "
                              f"(floor(log2 a) >= {PYRAMID_OCTAVES}; the workbench skips them); use scales < "
                              f"{2 ** PYRAMID_OCTAVES}")
    if params["octave_field"] != "kept" and params["image"] != "original":
        raise ConfigError(f"{where}.octave_field: '{params['octave_field']}' applies to image: original only (image "
                          f"{params['image']} describes each scale at its own pyramid level, keeping the field as the "
                          "workbench does); remove octave_field")
    if params["colour"] and params["image"] == "original":
        raise ConfigError(f"{where}.colour applies to image: workbench_pyramid or base_pyramid only (the image the "
                          "pyramid is built from); with image: original the base family reads the image its own way: "
                          "remove colour")
    return {**params, "base": base}


# ----------------------------------------------------------------------------- geometry


def scaled_keypoints(kps: ImageKeypoints, a: float, kpset: dict, image_shape: tuple[int, int] | None, where: str,
                     octave_field: str = "kept") -> ImageKeypoints:
    """``kps`` with size ``float32(size) * float32(a)`` (float32), every other field kept (the
    workbench's copy of the keypoint), except, with ``octave_field: from_size``, the SIFT octave
    field re-derived from the new size at ``a != 1`` on a set with SIFT octaves
    (:func:`has_sift_octaves`; the set's ``n_octave_layers`` and ``sigma``, clamped to the pyramid
    of an image of ``image_shape``). DataError naming ``where`` when a size is not finite and > 0."""
    with np.errstate(over="ignore"):  # an overflow is reported below, naming the scale
        size = (kps.size.astype(np.float32) * np.float32(a)).astype(np.float32)
    bad = np.flatnonzero(~(np.isfinite(size) & (size > 0)))
    if bad.size:
        raise DataError(f"{where}: the scaled keypoint size is {size[bad[0]]} (not finite and positive) for {bad.size} "
                        f"keypoints (first: row {int(bad[0])}, size {kps.size[bad[0]]}); use a smaller scale")
    octave = kps.octave
    if octave_field == "from_size" and a != 1 and has_sift_octaves(kpset):
        sift = fill_defaults({"$ref": "#/definitions/sift_detector_params"},
                             dict(kpset.get("params", {})) if kpset.get("detector") == "sift" else {}, config_schema())
        octave = sift_octave_from_size(size, image_shape, int(sift["n_octave_layers"]), float(sift["sigma"]))
    return dataclasses.replace(kps, size=size, octave=np.asarray(octave, dtype=np.int32))


def pyramid_level(a: float) -> tuple[int, int]:
    """(octave, level) of scale ``a`` in the workbench pyramid (``findPyramidLevel``):
    ``t = logf(float32 a) / ln 2`` (C++ ``std::log`` of a float is float), ``o = floor(t)``,
    ``l = round((t - o) * 3)`` (half away from zero), then ``(max(0, o), max(0, l))``."""
    t = float(np.log(np.float32(a))) / math.log(2.0)
    o = math.floor(t)
    level = math.floor((t - o) * PYRAMID_LAYERS + 0.5)
    return max(0, o), max(0, level)


def pyramid_image(base: np.ndarray, octave: int, level: int, cache: dict) -> np.ndarray:
    """Level ``(octave, level)`` of the workbench pyramid of ``base`` (``buildGaussianPyramid``;
    module docstring), built from the levels below it and memoised in ``cache``."""
    import cv2

    key = (octave, level)
    if key not in cache:
        if level == 0:
            cache[key] = base if octave == 0 else cv2.pyrDown(pyramid_image(base, octave - 1, PYRAMID_LAYERS, cache))
        else:
            k = 2.0 ** (1.0 / PYRAMID_LAYERS)
            prev, cur = PYRAMID_SIGMA * k ** (level - 1), PYRAMID_SIGMA * k ** level
            cache[key] = cv2.GaussianBlur(pyramid_image(base, octave, level - 1, cache), (0, 0), math.sqrt(cur * cur - prev * prev))
    return cache[key]


def pyramid_keypoints(kps: ImageKeypoints, a: float, octave: int) -> ImageKeypoints:
    """``kps`` on pyramid octave ``octave`` at scale ``a``: x, y times ``f = float32(2^-octave)``,
    size times ``float32(a) * f`` (float32, as C++), every other field kept (the octave field too)."""
    f = np.float32(1.0 / (1 << octave))
    return dataclasses.replace(kps, x=(kps.x * f).astype(np.float32), y=(kps.y * f).astype(np.float32),
                               size=(kps.size * (np.float32(a) * f)).astype(np.float32))


# ----------------------------------------------------------------------------- pooling


def signed_root(d: np.ndarray) -> np.ndarray:
    """The workbench's rooting: each row divided by its L1 norm, then ``sign(v) sqrt(|v|)``
    (float64; RootSIFT on non-negative rows; an all-zero row stays zero)."""
    d = normalise_rows(d, "l1")
    return np.sign(d) * np.sqrt(np.abs(d))


def pool_rows(rows: list[np.ndarray], weights: list[float], params: dict) -> np.ndarray:
    """The pooled float32 rows of the per-scale base rows ``rows`` with ``weights`` (module
    docstring formula; rows and weights of zero-weight scales may be left out; ``max``, ``min``
    and ``concatenate`` ignore ``weights``, which check_dsp keeps at 1)."""
    root, agg = params["rootsift"], params["aggregation"]
    acc = None
    per_scale = []
    for d, w in zip(rows, weights):
        d = normalise_rows(d, params["normalise_before"])
        if root == "before":
            d = signed_root(d)
        if agg == "average":
            acc = w * d if acc is None else acc + w * d
        else:
            per_scale.append(d)
    if agg == "average":
        pooled = acc / sum(weights)
    elif agg == "concatenate":
        pooled = np.concatenate(per_scale, axis=1)
    else:
        pooled = (np.maximum if agg == "max" else np.minimum).reduce(per_scale)
    if root == "after":
        pooled = signed_root(pooled)
    return normalise_rows(pooled, params["normalise_after"]).astype(np.float32)


def _cv_root(d: np.ndarray) -> np.ndarray:
    """The workbench's rooting of float32 rows: ``cv::normalize`` L1, then ``sqrt`` (values <= 0: 0)."""
    d = K.cv_normalize_rows(d, "l1")
    return np.where(d > 0, np.sqrt(np.maximum(d, 0)), np.float32(0.0)).astype(np.float32)


def pool_pyramid_rows(rows: list[np.ndarray], valid: list[np.ndarray], params: dict) -> np.ndarray:
    """``image: base_pyramid``'s pooling (module docstring) of the per-scale rows ``rows`` of which
    ``valid`` marks the keypoints each scale described, in float32 as ``computeDSP`` computes it
    (sums in scale order, ``cv::normalize``), followed by the runner's ``NoPooling`` steps (the
    same normalisations and rooting once more, as the workbench applies them to every
    ``DSP*_V2`` row)."""
    before, root, agg, after = params["normalise_before"], params["rootsift"], params["aggregation"], params["normalise_after"]
    per_scale = []
    for d, ok in zip(rows, valid):
        d = np.array(d, dtype=np.float32)
        if before != "none" or root == "before":
            v = K.cv_normalize_rows(d[ok], before)
            d[ok] = _cv_root(v) if root == "before" else v
        d[~ok] = -1.0  # the workbench's mark of a keypoint a scale could not describe
        per_scale.append(d)
    if agg == "concatenate":
        pooled = np.concatenate(per_scale, axis=1)
    elif agg == "average":
        acc = np.zeros_like(per_scale[0])
        for d, ok in zip(per_scale, valid):
            acc = np.where(ok[:, None], acc + d, acc)
        count = np.stack(valid).sum(axis=0).astype(np.float32)[:, None]
        pooled = np.where(count > 0, acc / np.maximum(count, np.float32(1.0)), np.float32(0.0))
    else:
        ok = np.stack(valid)[:, :, None]
        stack = np.stack(per_scale)
        pooled = np.where(ok, stack, -np.inf).max(axis=0) if agg == "max" else np.where(ok, stack, np.inf).min(axis=0)
        pooled = np.where(np.isfinite(pooled), pooled, 0.0)
    pooled = np.asarray(pooled, dtype=np.float32)
    if root == "after":
        pooled = _cv_root(pooled)
    pooled = K.cv_normalize_rows(pooled, after)
    # the runner's NoPooling on the wrapper's rows: normalise_before, rooting (either stage), normalise_after
    pooled = K.cv_normalize_rows(pooled, before)
    if root != "none":
        pooled = _cv_root(pooled)
    return np.ascontiguousarray(K.cv_normalize_rows(pooled, after), dtype=np.float32)


def pooled_base_params(params: dict) -> dict:
    """The base's params for ``image: original`` / ``workbench_pyramid``: its family's
    ``pool_params`` of them (the rows the workbench's DomainSizePooling pools, e.g. ``sift``'s
    ``convention: workbench`` without its runner's normalisation), or the params as given."""
    fam = get_family(params["base"]["family"])
    return fam.pool_params(params["base"]["params"]) if fam.pool_params else params["base"]["params"]


def _where(params: dict, a: float) -> str:
    return f"dsp scale {a} (base family '{params['base']['family']}' at keypoint size x {a})"


def _check_scale_rows(rows: list[np.ndarray], scales: list[float], params: dict) -> None:
    """Every scale gave the same number of columns (a base that changes D with the size, e.g. a
    python callable, is a DataError naming both scales)."""
    for d, a in zip(rows[1:], scales[1:]):
        if d.shape[1] != rows[0].shape[1]:
            raise DataError(f"{_where(params, a)}: {d.shape[1]} columns, but {rows[0].shape[1]} at scale {scales[0]}; "
                            "the base family must give rows of one length at every size")


def dsp_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict,
                    given: list[np.ndarray | None] | None = None) -> np.ndarray:
    """Domain-size pooling of the base family on one image (module docstring). ``given``: ``[rows]``,
    the base's plain rows at ``kps`` read from another descriptor's files, used as its rows at scale
    1 (allowed where :func:`dsp_shareable` names the base), or ``[None]`` / None: computed."""
    image_mode, colour = params["image"], params["colour"]
    weights = scale_weights(params)
    base = params["base"]
    used = [(a, w) for a, w in zip(params["scales"], weights) if w > 0]
    at_one = given[0] if given else None
    if at_one is not None and dsp_shareable(params) == [None]:
        raise ValueError("dsp: base rows given for scale 1, but with these params its rows there are not the base's own")
    rows = []
    if image_mode == "base_pyramid":
        scales = [float(a) for a in params["scales"]]
        fam = get_family(base["family"])
        try:
            rows, valid = fam.pyramid_rows(Path(image_path), kps, base["params"], kpset, scales, colour)
        except DataError as exc:
            raise DataError(f"dsp over base family '{base['family']}' (image: base_pyramid): {exc}") from exc
        _check_scale_rows(rows, scales, params)
        return pool_pyramid_rows(rows, valid, params)
    base_params = pooled_base_params(params)
    if image_mode == "original":
        from_size = params["octave_field"] == "from_size" and has_sift_octaves(kpset) and any(a != 1 for a, _ in used)
        shape = read_image(image_path).shape[:2] if from_size else None
        for a, _ in used:
            at = _where(params, a)
            if at_one is not None and float(a) == 1.0:  # scaled_keypoints(kps, 1) is kps: the same rows
                rows.append(at_one)
                continue
            scaled = scaled_keypoints(kps, a, kpset, shape, at, params["octave_field"])
            rows.append(compute_descriptors(base["family"], base_params, image_path, scaled, kpset, at))
    else:
        import tempfile

        import cv2

        bgr = read_image(image_path, color=True)
        work = bgr if colour else cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        cache: dict = {}
        with tempfile.TemporaryDirectory(prefix="descbench-dsp-") as tmp:
            for j, (a, _) in enumerate(used):
                octave, level = pyramid_level(a)
                path = Path(tmp) / f"{Path(image_path).stem}.dsp{j}.png"
                if not cv2.imwrite(str(path), pyramid_image(work, octave, level, cache)):
                    raise DataError(f"{_where(params, a)}: could not write the pyramid level image {path}")
                at = f"{_where(params, a)}, pyramid octave {octave} level {level} of {image_path}"
                rows.append(compute_descriptors(base["family"], base_params, path, pyramid_keypoints(kps, a, octave), kpset, at))
    _check_scale_rows(rows, [a for a, _ in used], params)
    return pool_rows(rows, [w for _, w in used], params)


# ----------------------------------------------------------------------------- patches


def _base_family(params: dict) -> DescriptorFamily:
    fam = get_family(params["base"]["family"])
    problem = fam.patch_problem()
    if problem:
        raise ConfigError(f"dsp base: descriptor family '{fam.name}' cannot describe patches: it {problem}")
    return fam


def dsp_patch_params_problem(params: dict) -> str | None:
    """For filled ``params``: a base that describes a patch as a whole (``whole_patch``: resized to a
    network input, e.g. hardnet, onnx) has no support to scale, so dsp over it describes patches at
    scale 1 only (it describes images at every scale)."""
    fam = get_family(params["base"]["family"])
    scaled = [a for a, w in zip(params["scales"], scale_weights(params)) if w > 0 and float(a) != 1.0]
    if fam.patch_problem() is None and fam.whole_patch and scaled:
        return (f"pools its base '{fam.name}' at scales {', '.join(f'{a:g}' for a in scaled)}, but '{fam.name}' "
                "describes a patch by resizing the whole patch to its network input (hpatches-benchmark's "
                "convention), so it has no support to scale; fix: scales: [1.0] on patches, or leave it out of "
                "patches.descriptors (dsp over it describes images at every scale)")
    return None


def dsp_patch_support(params: dict, side: int) -> float:
    """The base family's support: the scales multiply it."""
    return _base_family(params).patch_support(params["base"]["params"], side)


def dsp_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """:func:`dsp_descriptors` on each patch as an image: for each scale, the base family's own
    ``patch_rows`` on a job whose keypoint is the scaled one (``image: workbench_pyramid``: whose
    patches are that pyramid level of each grey patch, every patch's level built the same way as
    on an image), then :func:`pool_rows`. Exact whenever the base's hook is (its contract).
    ``image: base_pyramid``: the base's ``pyramid_rows`` on each grey patch saved as a 3-channel
    PNG (three equal channels, as the workbench's patch benchmark converts patches for its colour
    descriptors), pooled by :func:`pool_pyramid_rows`."""
    fam = _base_family(params)
    problem = dsp_patch_params_problem(params)
    if problem:
        raise ConfigError(f"{job.config_key.removesuffix('.params')}: descriptor family 'dsp' cannot describe patches: it {problem}")
    if params["image"] == "base_pyramid":
        return _pyramid_patch_rows(fam, job, params)
    weights = scale_weights(params)
    used = [(a, w) for a, w in zip(params["scales"], weights) if w > 0]
    base_params = pooled_base_params(params)
    rows = []
    for a, _ in used:
        at = f"{job.where}: {_where(params, a)}"
        if params["image"] == "original":
            sub = dataclasses.replace(job, keypoint=scaled_keypoints(job.keypoint, a, job.kpset, job.shape, at,
                                                                     params["octave_field"]), describe=None, where=at)
        else:
            octave, level = pyramid_level(a)
            # a grey patch: its colour read has three equal channels, whose pyramid (colour: true) is the grey one's
            levels = np.ascontiguousarray(np.stack([pyramid_image(p, octave, level, {}) for p in job.patches]))
            sub = dataclasses.replace(job, patches=levels, keypoint=pyramid_keypoints(job.keypoint, a, octave), describe=None,
                                      where=at)
        d = fam.patch_rows(sub, base_params)
        if d.shape[0] != len(job.patches) or not np.all(np.isfinite(d)):
            raise DataError(f"{at}: the base gave shape {d.shape} with {int((~np.isfinite(d)).any(axis=1).sum())} "
                            f"non-finite rows for {len(job.patches)} patches; it must give finite rows, one per patch")
        rows.append(d)
    _check_scale_rows(rows, [a for a, _ in used], params)
    return pool_rows(rows, [w for _, w in used], params)


def _pyramid_patch_rows(fam: DescriptorFamily, job: PatchJob, params: dict) -> np.ndarray:
    import tempfile

    import cv2

    scales = [float(a) for a in params["scales"]]
    with tempfile.TemporaryDirectory(prefix="descbench-dsp-patch-") as tmp:
        path = Path(tmp) / "patch.png"

        def row(i):
            if not cv2.imwrite(str(path), np.repeat(job.patches[i][:, :, None], 3, axis=2)):
                raise DataError(f"{job.name(i)}: could not write the patch image {path}")
            rows, valid = fam.pyramid_rows(path, job.keypoint, params["base"]["params"], job.kpset, scales, params["colour"])
            return pool_pyramid_rows(rows, valid, params)

        return job.per_patch(row)


def dsp_runtime_provenance(params: dict) -> dict:
    """The base family's runtime provenance (a learned base: its device, versions, weights), or {}."""
    base = get_family(params["base"]["family"])
    return base.runtime_provenance(params["base"]["params"]) if base.runtime_provenance else {}


def dsp_base(params: dict) -> list[dict]:
    """The pooled base's spec (its job runs it at every scale)."""
    return [params["base"]] if params.get("base") else []


def dsp_shareable(params: dict) -> list[dict | None]:
    """The base whose plain rows a job may read instead of computing them at scale 1
    (``DescriptorFamily.shareable``; module docstring, "Shared rows"): ``[base]`` with ``image:
    original``, scale 1 among the weighted scales and the base's ``pool_params`` equal to its params
    (its rows there are then the base descriptor's own); else ``[None]``."""
    used = [float(a) for a, w in zip(params["scales"], scale_weights(params)) if w > 0]
    if params["image"] == "original" and 1.0 in used and pooled_base_params(params) == params["base"]["params"]:
        return [params["base"]]
    return [None]


def dsp_scale_count(params: dict) -> int:
    """How many scales it describes each keypoint at (left out: the schema's default)."""
    return len(params.get("scales") or PARAMS_SCHEMA["dsp"]["properties"]["scales"]["default"])


def dsp_width(params: dict, part_widths: list[int]) -> int:
    """The base's width; aggregation concatenate: one base row per scale side by side."""
    base = part_widths[0] if part_widths else 128
    return base * dsp_scale_count(params) if params.get("aggregation") == "concatenate" else base


FAMILIES = (
    DescriptorFamily("dsp", dsp_descriptors, PARAMS_SCHEMA["dsp"], binary=False, check=check_dsp,
                     patch_support=dsp_patch_support, patch_rows=dsp_patch_rows, patch_params_problem=dsp_patch_params_problem, runtime_provenance=dsp_runtime_provenance,
                     children=dsp_base, repeats=dsp_scale_count, width=dsp_width, combines=dsp_descriptors,
                     shareable=dsp_shareable),
)
