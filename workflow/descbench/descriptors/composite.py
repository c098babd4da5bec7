"""Composite descriptors on paired keypoint sets (the C++ DescriptorWorkbench's ``composite``).

A composite combines the rows of two or more *components*. A component is a descriptor of this
config (``descriptors.<name>``, its own family and params) computed on a keypoint set of its own:
``{descriptor, keypoint_set, weight, norm}``. The composite is scored on the keypoint set it is
listed under (``descriptors.<composite>.keypoint_sets``); every component's set must be *paired*
with it, i.e. row-aligned by construction (:func:`paired`): the same set, or the other side of
the same intersection (two ``intersection`` sets with the same ``sources`` and ``tol_px`` keep the
same pairs in the same order, each the keypoints of one side). This is the workbench's "paired
keypoint sets" (``CompositeDescriptorExtractor.cpp``, components with ``keypoint_set_name``):
e.g. SIFT described on the SIFT side and HardNet on the KeyNet side of a SIFT x KeyNet
intersection, fused row by row. The descriptor job checks the pairing again on the data: equal
row counts per image, and each component keypoint within ``tol_px`` of the scored keypoint.

Row ``i`` of the composite, from component rows ``d_c = norm_c(row_c)`` (``norm``: ``none`` (the
workbench: each family's own output), ``l1``, ``l2``), in float64:

* ``concatenate``: ``[d_1, ..., d_n]`` (any dimensions);
* ``average``: ``(1/n) sum_c d_c``;
* ``weighted_avg``: ``sum_c w_c d_c / sum_c w_c`` (the workbench renormalises the weights to sum
  1 the same way; weights are required and positive);
* ``max`` / ``min``: element-wise over the components;
* ``channel_wise``: exactly two components, one 128-D (grey) and one 384-D (colour, 3 blocks of
  128): each colour block ``k`` becomes ``(g + c_k) / 2``; ``output_dimension: 384`` keeps the three
  fused blocks, ``128`` (the workbench's default) averages them: ``(1/3) sum_k (g + c_k) / 2``.

``average``, ``weighted_avg``, ``max`` and ``min`` need equal dimensions; every component must be
float (packed binary rows have no element-wise mean). Then ``final_norm`` (``l2``, the
workbench's ``normalize_after_pooling: true`` with ``NORM_L2`` applied to every descriptor; or
``none``) and float32. Note that with ``norm: none`` components of different scales (OpenCV SIFT
rows have L2 norm ~512, HardNet's 1) are combined as they are, as in the workbench: the larger one
dominates an average; set ``norm: l2`` on the components to weigh them as the weights say.

A composite of one component is that component's rows (after ``norm`` and ``final_norm``).

``arithmetic: workbench`` computes the same aggregations with the workbench's float32 arithmetic
instead of float64: :func:`descbench.descriptors.fusion.fuse_rows` (the one definition, shared
with the patch fusion of :mod:`descbench.patches.workbench`), then ``final_norm: l2`` as
``cv::normalize`` (:func:`~descbench.descriptors.fusion.normalize_rows_l2`). ``weighted_avg``
weights are renormalised only when their sum differs from 1 by more than 1e-6, as
``CompositeDescriptorExtractor`` does (its patch fusion uses them as given). The workbench fuses
its extractors' own rows, so component ``norm`` must be ``none``, and its image ``channel_wise``
(``cv::addWeighted``, not the patch fusion's) is not offered with it. Which rows are "its
extractors' own" is the component descriptor's business: e.g. the workbench's SIFT extractor gives
OpenCV's raw rows (norm ~512: ``sift`` with ``convention: opencv``), which its pipeline
L2-normalises only after the composite; descbench's ``convention: workbench`` rows are already
unit. ``arithmetic: descbench`` (default) is the float64 definition above.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily
from descbench.errors import ConfigError, DataError
from descbench.jobfacts import FILE_DESCRIPTOR, Cost
from descbench.keypoints import ImageKeypoints
from descbench.params import check_params, object_fragment

AGGREGATIONS = ("concatenate", "weighted_avg", "average", "max", "min", "channel_wise")
NORMS = ("none", "l1", "l2")
SAME_DIMENSION = ("weighted_avg", "average", "max", "min")
ARITHMETICS = ("descbench", "workbench")  # float64 as above; the workbench's float32 (descbench.descriptors.fusion)
CHANNEL_BLOCK = 128  # channel_wise: the grey descriptor's dimension and each colour block's (workbench)

COMPONENT_SCHEMA = object_fragment(
    required=("descriptor",),
    # a descriptor of this config (descriptors.<name>), computed on keypoint_set
    descriptor={"type": "string", "minLength": 1},
    # null: the set the composite is scored on
    keypoint_set={"type": ["string", "null"], "default": None},
    # weighted_avg only (the workbench's component ``weight``)
    weight={"type": ["number", "null"], "exclusiveMinimum": 0, "default": None},
    norm={"enum": list(NORMS), "default": "none"},
)

PARAMS_SCHEMA = {"composite": object_fragment(
    required=("components", "aggregation"),
    components={"type": "array", "minItems": 1},  # each: COMPONENT_SCHEMA (checked by check_composite)
    aggregation={"enum": list(AGGREGATIONS)},
    # channel_wise only: 128 (collapse to grey, the workbench's default) or 384 (keep R, G, B blocks)
    output_dimension={"enum": [128, 384], "default": 128},
    final_norm={"enum": ["none", "l2"], "default": "l2"},
    arithmetic={"enum": list(ARITHMETICS), "default": "descbench"},
)}


def check_composite(params: dict, where: str) -> dict:
    """Rules within the composite's own params (the rules that need the rest of the config, e.g.
    that the components name descriptors and paired keypoint sets, are :func:`check_in_config`)."""
    agg = params["aggregation"]
    comps = []
    for i, c in enumerate(params["components"]):
        comps.append(check_params(COMPONENT_SCHEMA, c, f"{where}.components.{i}", "a composite component"))
    weights = [c["weight"] for c in comps]
    if agg == "weighted_avg" and any(w is None for w in weights):
        missing = ", ".join(str(i) for i, w in enumerate(weights) if w is None)
        raise ConfigError(f"{where}.components: aggregation weighted_avg needs a positive weight on every component "
                          f"(missing on component {missing}); e.g. weight: 0.5 on each of two")
    if agg != "weighted_avg" and any(w is not None for w in weights):
        raise ConfigError(f"{where}.components: a component weight applies to aggregation weighted_avg only, "
                          f"not {agg}; remove the weights or use weighted_avg")
    if agg == "channel_wise" and len(comps) != 2:
        raise ConfigError(f"{where}.components: aggregation channel_wise fuses exactly two components "
                          f"(a 128-D grey and a 384-D colour descriptor), got {len(comps)}")
    if params["arithmetic"] == "workbench":
        if agg == "channel_wise":
            raise ConfigError(f"{where}.arithmetic: workbench is not offered with aggregation channel_wise (the workbench's "
                              "image composite computes it with cv::addWeighted, which descbench does not reproduce); "
                              "use arithmetic: descbench, or another aggregation")
        normed = [str(i) for i, c in enumerate(comps) if c["norm"] != "none"]
        if normed:
            raise ConfigError(f"{where}.components: arithmetic: workbench fuses the components' own rows, as the workbench "
                              f"does; remove norm from component {', '.join(normed)} (or use arithmetic: descbench)")
    if agg != "channel_wise" and params["output_dimension"] != PARAMS_SCHEMA["composite"]["properties"]["output_dimension"]["default"]:
        raise ConfigError(f"{where}.output_dimension applies to aggregation channel_wise only; remove it")
    return {**params, "components": comps}


def paired(kpsets: dict, scored: str, component: str) -> bool:
    """Whether keypoint set ``component`` is row-aligned with ``scored`` by construction: the same
    set, or two intersection sets with the same ``sources`` (in order) and ``tol_px``."""
    if component == scored:
        return True
    a, b = kpsets.get(scored, {}), kpsets.get(component, {})
    if "intersection" not in a or "intersection" not in b:
        return False
    ia, ib = a["intersection"], b["intersection"]
    return list(ia["sources"]) == list(ib["sources"]) and float(ia.get("tol_px", 2.0)) == float(ib.get("tol_px", 2.0))


def component_set(component: dict, scored: str) -> str:
    """The keypoint set a (filled) component is computed on."""
    return component["keypoint_set"] or scored


def check_in_config(name: str, spec: dict, descriptors: dict, kpsets: dict) -> None:
    """Rules that need the whole config: a composite lists the sets it is scored on; each
    component names another (non-composite) descriptor of the config and a keypoint set paired with
    every scored set; a component whose family is known to give packed bits is refused."""
    from descbench.descriptors import get_family
    from descbench.descriptors.stack import part_kind

    where = f"descriptors.{name}"
    scored = spec.get("keypoint_sets")
    if not scored:
        raise ConfigError(f"{where}.keypoint_sets: a composite is scored on the keypoint set you name; list it "
                          "(e.g. the intersection side whose keypoints the scores use)")
    for i, c in enumerate(spec["params"]["components"]):
        at = f"{where}.params.components.{i}"
        other = descriptors.get(c["descriptor"])
        if other is None:
            raise ConfigError(f"{at}.descriptor: '{c['descriptor']}' is not a descriptor of this config; "
                              f"defined: {', '.join(sorted(descriptors))}")
        if other["family"] == "composite":
            raise ConfigError(f"{at}.descriptor: '{c['descriptor']}' is itself a composite; list its components here instead")
        if part_kind(other) is True or (get_family(other["family"]).binary is True):
            raise ConfigError(f"{at}.descriptor: '{c['descriptor']}' (family {other['family']}) gives packed bits; "
                              "a composite combines float descriptors (use family stack to concatenate binary ones)")
        for ks in scored:
            cs = component_set(c, ks)
            if cs not in kpsets:
                raise ConfigError(f"{at}.keypoint_set: unknown keypoint set '{cs}'; defined: {', '.join(sorted(kpsets))}")
            if not paired(kpsets, ks, cs):
                raise ConfigError(
                    f"{at}.keypoint_set: '{cs}' is not row-aligned with '{ks}', the set {where} is scored on; a component "
                    "uses the scored set itself or the other side of the same intersection (two sets with the same "
                    "intersection.sources and tol_px, differing only in keep)")


def resolve_components(params: dict, scored: str, descriptors: dict, kpsets: dict) -> list[dict]:
    """What the descriptor job of a composite scored on ``scored`` reads, per component: its
    ``descriptor`` and ``keypoint_set``, ``tol_px`` (the intersection's pairing distance; None for
    the scored set itself, whose positions are equal) and the descriptor's ``family`` and
    ``params`` (recorded in the composite's provenance)."""
    out = []
    for c in params["components"]:
        cs = component_set(c, scored)
        tol = None if cs == scored else float(kpsets[scored]["intersection"]["tol_px"])
        d = descriptors[c["descriptor"]]
        out.append({"descriptor": c["descriptor"], "keypoint_set": cs, "tol_px": tol, "family": d["family"], "params": d.get("params", {})})
    return out


def normalise(rows: np.ndarray, norm: str) -> np.ndarray:
    """Rows (float64) divided by their L1 (``l1``) or L2 (``l2``) norm; an all-zero row stays zero."""
    d = np.asarray(rows, dtype=np.float64)
    if norm == "none":
        return d
    n = np.abs(d).sum(axis=1, keepdims=True) if norm == "l1" else np.linalg.norm(d, axis=1, keepdims=True)
    return d / np.where(n > 0, n, 1.0)


def aggregate(blocks: list[np.ndarray], params: dict, names: list[str], where: str, patches: bool = False) -> np.ndarray:
    """The composite rows (module docstring) of the components' rows ``blocks`` ([N, D_c] each, in
    component order; ``names`` name them in errors), float32 [N, D]. ``patches``: rows of patch
    descriptors (:mod:`descbench.patches`): with ``arithmetic: workbench`` the weights are used as
    given, as the workbench's patch fusion does (``PatchFusionExtractor.cpp:24-31``)."""
    agg = params["aggregation"]
    comps = params["components"]
    if any(b.dtype == np.uint8 for b in blocks):
        bad = ", ".join(n for n, b in zip(names, blocks) if b.dtype == np.uint8)
        raise DataError(f"{where}: component {bad} gave packed bits (uint8); a composite combines float descriptors")
    rows = {b.shape[0] for b in blocks}
    if len(rows) != 1:
        said = ", ".join(f"{n}: {b.shape[0]}" for n, b in zip(names, blocks))
        raise DataError(f"{where}: the components have different numbers of rows ({said}); they must describe the same keypoints")
    dims = [b.shape[1] for b in blocks]
    if agg in SAME_DIMENSION and len(set(dims)) > 1:
        said = ", ".join(f"{n} {d}-D" for n, d in zip(names, dims))
        raise DataError(f"{where}: aggregation {agg} needs components of one dimension, got {said}; "
                        "use aggregation concatenate for different dimensions")
    if params.get("arithmetic", "descbench") == "workbench":
        return workbench_aggregate(blocks, params, renormalise_weights=not patches)
    d = [normalise(b, c["norm"]) for b, c in zip(blocks, comps)]
    if agg == "concatenate":
        out = np.concatenate(d, axis=1)
    elif agg == "average":
        out = np.sum(d, axis=0) / len(d)
    elif agg == "weighted_avg":
        w = np.array([c["weight"] for c in comps], dtype=np.float64)
        out = np.tensordot(w, np.stack(d), axes=1) / w.sum()
    elif agg == "max":
        out = np.max(np.stack(d), axis=0)
    elif agg == "min":
        out = np.min(np.stack(d), axis=0)
    else:  # channel_wise
        if sorted(dims) != [CHANNEL_BLOCK, 3 * CHANNEL_BLOCK]:
            said = ", ".join(f"{n} {dd}-D" for n, dd in zip(names, dims))
            raise DataError(f"{where}: aggregation channel_wise fuses a {CHANNEL_BLOCK}-D grey and a {3 * CHANNEL_BLOCK}-D "
                            f"colour descriptor, got {said}")
        grey, colour = (d[0], d[1]) if dims[0] == CHANNEL_BLOCK else (d[1], d[0])
        fused = [(grey + colour[:, k * CHANNEL_BLOCK:(k + 1) * CHANNEL_BLOCK]) / 2.0 for k in range(3)]
        out = np.concatenate(fused, axis=1) if params["output_dimension"] == 3 * CHANNEL_BLOCK else np.sum(fused, axis=0) / 3.0
    return normalise(out, params["final_norm"]).astype(np.float32)


def workbench_aggregate(blocks: list[np.ndarray], params: dict, renormalise_weights: bool) -> np.ndarray:
    """``arithmetic: workbench`` (module docstring): :func:`descbench.descriptors.fusion.fuse_rows`
    of the float32 blocks, then ``final_norm``. ``renormalise_weights``: the image composite's rule
    (weights divided by their float64 sum when it differs from 1 by more than 1e-6); False: as
    given (the patch fusion)."""
    from descbench.descriptors.fusion import fuse_rows, normalize_rows_l2

    weights = None
    if params["aggregation"] == "weighted_avg":
        weights = [float(c["weight"]) for c in params["components"]]
        total = 0.0
        for w in weights:  # in component order, as its constructor's loop
            total += w
        if renormalise_weights and abs(total - 1.0) > 1e-6:
            weights = [w / total for w in weights]
    rows = fuse_rows([np.asarray(b, dtype=np.float32) for b in blocks], params["aggregation"], weights)
    return normalize_rows_l2(rows) if params["final_norm"] == "l2" else rows


def check_alignment(scored: ImageKeypoints, component: ImageKeypoints, tol_px: float | None, where: str) -> None:
    """A component's keypoints are the scored keypoints' pairs, row by row: equal counts and each
    within ``tol_px`` (None: the same set, so equal positions)."""
    if len(component) != len(scored):
        raise DataError(f"{where}: {len(component)} keypoints, but the scored set has {len(scored)}; the component's "
                        "keypoint set is not row-aligned with it (rebuild both sets' keypoints)")
    if len(scored) == 0:
        return
    dist = np.hypot(component.xy[:, 0] - scored.xy[:, 0], component.xy[:, 1] - scored.xy[:, 1])
    # float32 storage of both sides: a pair exactly tol_px apart may read back a few ulps further
    limit = 0.0 if tol_px is None else float(tol_px) * (1 + 1e-6) + 1e-4
    far = np.flatnonzero(dist > limit)
    if far.size:
        i = int(far[0])
        raise DataError(f"{where}: keypoint row {i} is {dist[i]:.4g} px from the scored keypoint of that row (allowed "
                        f"{limit:.4g}); the component's keypoint set is not row-aligned with the scored set (rebuild them)")


def _not_from_an_image(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    raise ConfigError("descriptor family 'composite' combines its components' descriptor files; the descriptor job "
                      "(descbench.jobs.descriptors.describe_composite_scene) computes it, not an image")


def component_names(params: dict) -> list[str]:
    """The descriptors whose files it combines, in component order."""
    return [c["descriptor"] for c in params.get("components") or [] if "descriptor" in c]


def composite_width(params: dict, part_widths: list[int]) -> int:
    """concatenate: the components' widths side by side; otherwise its output_dimension."""
    if params.get("aggregation", "concatenate") == "concatenate":
        return sum(part_widths) or 128
    return int(params.get("output_dimension") or 128)


FAMILIES = (
    DescriptorFamily("composite", _not_from_an_image, PARAMS_SCHEMA["composite"], binary=False, check=check_composite,
                     components=component_names, width=composite_width, cost=Cost(model=FILE_DESCRIPTOR),
                     check_in_config=check_in_config,
                     not_on_patches="combines other descriptors of the config; on patches the describe job "
                                    "(descbench.patches.stages.describe) describes each component and fuses them"),
)
