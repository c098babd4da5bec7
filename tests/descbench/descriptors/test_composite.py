"""Composite descriptors on paired keypoint sets (descbench.descriptors.composite), checked
against numpy written out here, and through the descriptor job on the demo scene."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from descbench.config import validate_config
from descbench.descriptors import check_descriptor_params
from descbench.descriptors.composite import aggregate, check_alignment, paired, resolve_components
from descbench.errors import ConfigError, DataError
from descbench.fileops import file_sha256
from descbench.paths import ResultPaths
from descbench.jobs.common import read_features
from descbench.jobs.descriptors import describe_batch
from descbench.jobs.keypoints import detect_batch
from descbench.keypoints.sets import root_detector_spec

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
RNG = np.random.default_rng(7)


def params(aggregation, n=2, **kw):
    comps = kw.pop("components", None) or [{"descriptor": f"d{i}"} for i in range(n)]
    return check_descriptor_params("composite", {"components": comps, "aggregation": aggregation, **kw}, "descriptors.c.params")


def blocks(dims=(4, 4), n=5, scale=(1.0, 1.0)):
    return [(RNG.normal(size=(n, d)) * s).astype(np.float32) for d, s in zip(dims, scale)]


def l2(d):
    d = np.asarray(d, dtype=np.float64)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


NAMES = ["0 (a)", "1 (b)"]


@pytest.mark.parametrize("final_norm", ["none", "l2"])
def test_each_aggregation_equals_numpy_by_hand(final_norm):
    a, b = blocks()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    expected = {
        "concatenate": np.hstack([a64, b64]),
        "average": (a64 + b64) / 2,
        "max": np.maximum(a64, b64),
        "min": np.minimum(a64, b64),
    }
    for agg, want in expected.items():
        got = aggregate([a, b], params(agg, final_norm=final_norm), NAMES, "here")
        want = l2(want) if final_norm == "l2" else want
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=agg)


def test_weighted_average_divides_by_the_sum_of_weights():
    a, b = blocks()
    p = params("weighted_avg", components=[{"descriptor": "a", "weight": 3}, {"descriptor": "b", "weight": 1}], final_norm="none")
    want = (3 * a.astype(np.float64) + 1 * b.astype(np.float64)) / 4
    np.testing.assert_allclose(aggregate([a, b], p, NAMES, "here"), want, rtol=1e-6)
    # the workbench's 0.5 / 0.5 is the average
    p = params("weighted_avg", components=[{"descriptor": "a", "weight": 0.5}, {"descriptor": "b", "weight": 0.5}], final_norm="none")
    np.testing.assert_allclose(aggregate([a, b], p, NAMES, "here"), aggregate([a, b], params("average", final_norm="none"), NAMES, "h"),
                               rtol=1e-7)


def test_component_norm_applies_before_aggregation():
    a, b = blocks(scale=(512.0, 1.0))
    p = params("average", components=[{"descriptor": "a", "norm": "l2"}, {"descriptor": "b", "norm": "l1"}], final_norm="none")
    b1 = b.astype(np.float64) / np.abs(b.astype(np.float64)).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(aggregate([a, b], p, NAMES, "here"), (l2(a) + b1) / 2, rtol=1e-6)
    # without it the 512-scale component dominates (the workbench's behaviour, documented)
    raw = aggregate([a, b], params("average", final_norm="none"), NAMES, "here")
    np.testing.assert_allclose(raw, (a.astype(np.float64) + b) / 2, rtol=1e-6)


@pytest.mark.parametrize("out_dim", [128, 384])
@pytest.mark.parametrize("grey_first", [True, False])
def test_channel_wise_fuses_grey_with_each_colour_block(out_dim, grey_first):
    g, c = blocks(dims=(128, 384))
    g64, c64 = g.astype(np.float64), c.astype(np.float64)
    fused = [(g64 + c64[:, 128 * k:128 * (k + 1)]) / 2 for k in range(3)]
    want = np.hstack(fused) if out_dim == 384 else (fused[0] + fused[1] + fused[2]) / 3
    p = params("channel_wise", output_dimension=out_dim, final_norm="none")
    got = aggregate([g, c] if grey_first else [c, g], p, NAMES, "here")
    assert got.shape == (5, out_dim)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("agg", ["concatenate", "average", "max", "min"])
def test_a_composite_of_one_component_is_that_component(agg):
    (a,) = blocks(dims=(6,), scale=(3.0,))
    p = params(agg, n=1, final_norm="none")
    np.testing.assert_array_equal(aggregate([a], p, NAMES[:1], "here"), a)
    np.testing.assert_allclose(aggregate([a], params(agg, n=1), NAMES[:1], "here"), l2(a), rtol=1e-6)


@pytest.mark.bad_input
def test_dimension_rules_are_the_workbench_s():
    a, b = blocks(dims=(4, 6))
    for agg in ("average", "max", "min"):
        with pytest.raises(DataError, match=rf"aggregation {agg} needs components of one dimension, got 0 \(a\) 4-D, 1 \(b\) 6-D; use aggregation concatenate"):
            aggregate([a, b], params(agg), NAMES, "scene x")
    assert aggregate([a, b], params("concatenate"), NAMES, "here").shape == (5, 10)
    with pytest.raises(DataError, match="channel_wise fuses a 128-D grey and a 384-D colour descriptor, got 0 \\(a\\) 4-D"):
        aggregate([a, b], params("channel_wise"), NAMES, "here")
    with pytest.raises(DataError, match="different numbers of rows \\(0 \\(a\\): 5, 1 \\(b\\): 4\\)"):
        aggregate([a, b[:4]], params("concatenate"), NAMES, "here")
    with pytest.raises(DataError, match="component 1 \\(b\\) gave packed bits"):
        aggregate([a, np.zeros((5, 4), np.uint8)], params("concatenate"), NAMES, "here")


@pytest.mark.bad_input
@pytest.mark.parametrize("raw, message", [
    ({"components": [{"descriptor": "a"}], "aggregation": "sum"}, r"aggregation: 'sum' is not one of"),
    ({"components": [{"descriptor": "a", "wieght": 1}], "aggregation": "average"}, r"components.0.*wieght"),
    ({"components": [{"descriptor": "a", "weight": 1}, {"descriptor": "b"}], "aggregation": "weighted_avg"},
     r"weighted_avg needs a positive weight on every component \(missing on component 1\)"),
    ({"components": [{"descriptor": "a", "weight": 1}], "aggregation": "average"}, r"weight applies to aggregation weighted_avg only"),
    ({"components": [{"descriptor": "a"}], "aggregation": "channel_wise"}, r"channel_wise fuses exactly two components"),
    ({"components": [{"descriptor": "a"}], "aggregation": "max", "output_dimension": 384}, r"output_dimension applies to aggregation channel_wise only"),
    ({"components": [{"descriptor": "a", "weight": -1}], "aggregation": "weighted_avg"}, r"components.0.weight"),
    ({"components": [], "aggregation": "average"}, r"components"),
])
def test_bad_composite_params_name_the_key(raw, message):
    with pytest.raises(ConfigError, match=message):
        check_descriptor_params("composite", raw, "descriptors.c.params")


KPSETS = {
    "sift": {"detector": "sift"}, "orb": {"detector": "orb"},
    "both_sift": {"intersection": {"sources": ["sift", "orb"], "keep": "sift"}},
    "both_orb": {"intersection": {"sources": ["sift", "orb"], "keep": "orb"}},
    "both_orb_wide": {"intersection": {"sources": ["sift", "orb"], "keep": "orb", "tol_px": 4.0}},
    "swapped": {"intersection": {"sources": ["orb", "sift"], "keep": "orb"}},
}


def config(composite: dict, kpsets=None, extra=None):
    return {"keypoint_sets": kpsets or KPSETS,
            "descriptors": {"sift": {"family": "sift"}, "orb": {"family": "orb"}, "rootsift": {"family": "rootsift"},
                            "c": {"family": "composite", **composite}, **(extra or {})}}


def fusion(**kw):
    return {"keypoint_sets": ["both_sift"], "params": {"aggregation": "average", "components": [
        {"descriptor": "sift", "keypoint_set": "both_sift"}, {"descriptor": "rootsift", "keypoint_set": "both_orb"}], **kw}}


def test_a_valid_composite_on_the_two_sides_of_an_intersection_validates():
    cfg = validate_config(config(fusion()), SCHEMA)
    comps = resolve_components(cfg["descriptors"]["c"]["params"], "both_sift", cfg["descriptors"], cfg["keypoint_sets"])
    assert [(c["descriptor"], c["keypoint_set"], c["tol_px"], c["family"]) for c in comps] == [
        ("sift", "both_sift", None, "sift"), ("rootsift", "both_orb", 2.0, "rootsift")]


@pytest.mark.bad_input
@pytest.mark.parametrize("change, message", [
    ({"keypoint_sets": None}, r"descriptors.c.keypoint_sets: a composite is scored on the keypoint set you name"),
    ({"params": {"aggregation": "average", "components": [{"descriptor": "nope"}]}},
     r"descriptors.c.params.components.0.descriptor: 'nope' is not a descriptor of this config"),
    ({"params": {"aggregation": "average", "components": [{"descriptor": "orb"}]}}, r"'orb' \(family orb\) gives packed bits"),
    ({"params": {"aggregation": "average", "components": [{"descriptor": "sift", "keypoint_set": "sift"}]}},
     r"components.0.keypoint_set: 'sift' is not row-aligned with 'both_sift'"),
    ({"params": {"aggregation": "average", "components": [{"descriptor": "sift", "keypoint_set": "both_orb_wide"}]}},
     r"'both_orb_wide' is not row-aligned"),
    ({"params": {"aggregation": "average", "components": [{"descriptor": "sift", "keypoint_set": "swapped"}]}},
     r"'swapped' is not row-aligned"),
    ({"params": {"aggregation": "average", "components": [{"descriptor": "sift", "keypoint_set": "nowhere"}]}},
     r"components.0.keypoint_set: unknown keypoint set 'nowhere'"),
])
def test_bad_composites_are_refused_at_parse_time(change, message):
    comp = {**fusion(), **change}
    if comp.get("keypoint_sets") is None:
        comp.pop("keypoint_sets")
    with pytest.raises(ConfigError, match=message):
        validate_config(config(comp), SCHEMA)


@pytest.mark.bad_input
def test_a_composite_of_a_composite_is_refused():
    inner = {"family": "composite", "keypoint_sets": ["both_sift"], "params": {"aggregation": "max", "components": [{"descriptor": "sift"}]}}
    comp = {**fusion(), "params": {"aggregation": "average", "components": [{"descriptor": "inner"}]}}
    with pytest.raises(ConfigError, match="'inner' is itself a composite"):
        validate_config(config(comp, extra={"inner": inner}), SCHEMA)


def test_paired_sets():
    assert paired(KPSETS, "both_sift", "both_sift") and paired(KPSETS, "sift", "sift")
    assert paired(KPSETS, "both_sift", "both_orb") and paired(KPSETS, "both_orb", "both_sift")
    assert not paired(KPSETS, "both_sift", "both_orb_wide")
    assert not paired(KPSETS, "both_sift", "swapped")
    assert not paired(KPSETS, "sift", "both_sift")


@pytest.mark.bad_input
def test_alignment_check(pristine):
    from descbench.keypoints import ImageKeypoints

    def kps(xy):
        n = len(xy)
        xy = np.asarray(xy, np.float32).reshape(n, 2)
        z = np.zeros(n, np.float32)
        return ImageKeypoints(xy[:, 0], xy[:, 1], z + 5, z - 1, z, z.astype(np.int32), z.astype(np.int32) - 1, np.arange(n, dtype=np.int32))

    a = kps([[10, 10], [20, 20]])
    check_alignment(a, kps([[10, 10], [20, 20]]), None, "w")
    check_alignment(a, kps([[11, 10], [20, 22]]), 2.0, "w")
    with pytest.raises(DataError, match="keypoint row 1 is 2.5 px from the scored keypoint"):
        check_alignment(a, kps([[11, 10], [20, 22.5]]), 2.0, "w")
    with pytest.raises(DataError, match="keypoint row 0 is 1 px"):
        check_alignment(a, kps([[11, 10], [20, 20]]), None, "w")
    with pytest.raises(DataError, match="1 keypoints, but the scored set has 2"):
        check_alignment(a, kps([[10, 10]]), 2.0, "w")


def test_the_descriptor_job_fuses_the_two_sides_of_an_intersection(scene, tmp_path, monkeypatch):
    """sift + orb keypoints intersected; sift described on the sift side, rootsift on the orb side:
    the composite file equals aggregate() of the two component files, image by image; the scored
    set's keypoint file, which a component shares, is read once."""
    cfg = validate_config({"keypoint_sets": {
        "sift": {"detector": "sift"}, "orb": {"detector": "orb"},
        "both_sift": {"intersection": {"sources": ["sift", "orb"], "keep": "sift", "tol_px": 3.0}},
        "both_orb": {"intersection": {"sources": ["sift", "orb"], "keep": "orb", "tol_px": 3.0}}},
        "descriptors": {"sift": {"family": "sift"}, "rootsift": {"family": "rootsift"},
                        "c": {"family": "composite", "keypoint_sets": ["both_orb"], "params": {
                            "aggregation": "weighted_avg", "components": [
                                {"descriptor": "sift", "keypoint_set": "both_sift", "weight": 1.0, "norm": "l2"},
                                {"descriptor": "rootsift", "weight": 3.0}]}}}}, SCHEMA)
    paths = ResultPaths(tmp_path / "res", {"batch0": [scene.name]})
    ks, ds = cfg["keypoint_sets"], cfg["descriptors"]
    for s in ("sift", "orb", "both_sift", "both_orb"):
        Path(paths.keypoints_dir(s, "batch0")).mkdir(parents=True)
        detect_batch(paths, scene.parent, "batch0", s, ks[s])
    for s, d in (("both_sift", "sift"), ("both_orb", "rootsift")):
        Path(paths.descriptors_dir(s, d, "batch0")).mkdir(parents=True)
        describe_batch(paths, scene.parent, "batch0", s, d, ds[d], root_detector_spec(ks, s))
    spec = {**ds["c"], "components": resolve_components(ds["c"]["params"], "both_orb", ds, ks)}
    Path(paths.descriptors_dir("both_orb", "c", "batch0")).mkdir(parents=True)
    from collections import Counter

    from descbench import io

    reads, read_table, read_table_sha256 = Counter(), io.read_table, io.read_table_sha256
    monkeypatch.setattr(io, "read_table", lambda path, *a, **k: reads.update([Path(path)]) or read_table(path, *a, **k))
    monkeypatch.setattr(io, "read_table_sha256", lambda path, *a, **k: reads.update([Path(path)]) or read_table_sha256(path, *a, **k))
    describe_batch(paths, scene.parent, "batch0", "both_orb", "c", spec, {})
    monkeypatch.undo()
    assert reads[Path(paths.keypoints("both_orb", scene.name))] == 1 and reads[Path(paths.keypoints("both_sift", scene.name))] == 1
    got = read_features(Path(paths.keypoints("both_orb", scene.name)), Path(paths.descriptors("both_orb", "c", scene.name)))
    a = read_features(Path(paths.keypoints("both_sift", scene.name)), Path(paths.descriptors("both_sift", "sift", scene.name)))
    b = read_features(Path(paths.keypoints("both_orb", scene.name)), Path(paths.descriptors("both_orb", "rootsift", scene.name)))
    assert sum(len(got.per_image[k]) for k in range(1, 7)) > 20
    for k in range(1, 7):
        want = (1.0 * l2(a.by_image[k]) + 3.0 * b.by_image[k].astype(np.float64)) / 4.0
        np.testing.assert_allclose(got.by_image[k], l2(want), rtol=1e-6, atol=1e-7)
    assert got.dmeta["params"]["components"][1]["keypoint_set"] == "both_orb"
    assert got.dmeta["component_files_sha256"] == [
        file_sha256(paths.descriptors("both_sift", "sift", scene.name)), file_sha256(paths.descriptors("both_orb", "rootsift", scene.name))]
    assert got.dmeta["keypoints_sha256"] == file_sha256(paths.keypoints("both_orb", scene.name))
    # a component file from a different keypoint set version is refused
    other = Path(paths.keypoints("both_sift", scene.name))
    other.write_bytes(Path(paths.keypoints("both_orb", scene.name)).read_bytes())
    with pytest.raises(DataError, match="computed from a different version"):
        describe_batch(paths, scene.parent, "batch0", "both_orb", "c", spec, {})


def test_every_row_says_what_its_networks_were_loaded_with():
    from descbench.config import learned_weights

    cfg = {"keypoint_sets": {"kn": {"detector": "keynet", "params": {"weights": "random", "weights_seed": 3}},
                             "sift": {"detector": "sift", "params": {}},
                             "a": {"intersection": {"sources": ["sift", "kn"], "keep": "sift", "tol_px": 3.0}},
                             "b": {"intersection": {"sources": ["sift", "kn"], "keep": "kn", "tol_px": 3.0}}},
           "descriptors": {"hn": {"family": "hardnet", "params": {"weights": "/models/hardnet_liberty.pth"}},
                           "sift": {"family": "sift", "params": {}},
                           "pooled": {"family": "dsp", "params": {"base": {"family": "sosnet", "params": {"weights": "random"}}}},
                           "fused": {"family": "composite", "keypoint_sets": ["a"], "params": {"aggregation": "concatenate", "components": [
                               {"descriptor": "sift", "keypoint_set": None}, {"descriptor": "hn", "keypoint_set": "b"}]}}}}
    assert learned_weights(cfg, "sift", "sift") == ""
    assert learned_weights(cfg, "sift", "hn") == "hn: hardnet_liberty.pth"
    assert learned_weights(cfg, "kn", "pooled") == "pooled: RANDOM(seed=0); keypoints kn: RANDOM(seed=3)"
    assert learned_weights(cfg, "a", "fused") == "keypoints kn: RANDOM(seed=3); hn: hardnet_liberty.pth"


def test_a_name_that_is_no_descriptor_of_the_config_has_no_weights():
    from descbench.config import learned_weights

    # the patch benchmarks' descriptors read from CSV files are not in descriptors:
    assert learned_weights({"descriptors": {}, "keypoint_sets": {}}, None, "from_csv") == ""


# ----------------------------------------------------------------------------- arithmetic: workbench


@pytest.mark.parametrize("final_norm", ["none", "l2"])
@pytest.mark.parametrize("agg, weights", [("concatenate", None), ("average", None), ("max", None), ("min", None),
                                           ("weighted_avg", (0.5, 0.5)), ("weighted_avg", (0.3, 0.7))])
def test_workbench_arithmetic_is_the_workbench_fusion_bit_for_bit(agg, weights, final_norm):
    """The image composite with arithmetic: workbench gives exactly descbench.patches.workbench.fuse
    (the patch fusion, bit for bit against the compiled C++) on the same rows: raw SIFT-like rows
    (norm ~500) and unit rows, as the fusion study fuses them."""
    from descbench.descriptors.fusion import fuse_rows
    from descbench.patches.workbench import fuse

    a = np.round(np.abs(RNG.normal(size=(40, 16))) * 60).astype(np.float32)  # OpenCV SIFT: integers, norm ~ hundreds
    b = l2(RNG.normal(size=(40, 16))).astype(np.float32)  # a learned descriptor's unit rows
    comps = [{"descriptor": "d0"}, {"descriptor": "d1"}]
    if weights:
        comps = [{**c, "weight": w} for c, w in zip(comps, weights)]
    p = params(agg, components=comps, final_norm=final_norm, arithmetic="workbench")
    got = aggregate([a, b], p, NAMES, "here")
    want = fuse([a, b], agg, weights) if final_norm == "l2" else fuse_rows([a, b], agg, weights)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if agg == "weighted_avg" and final_norm == "l2":
        # the raw rows dominate the average; descbench's arithmetic with unit components does not
        unit = aggregate([a, b], params(agg, components=[{**c, "norm": "l2"} for c in comps]), NAMES, "here")
        assert np.abs(got - unit).max() > 0.1


def test_workbench_arithmetic_renormalises_weights_as_the_image_composite():
    """CompositeDescriptorExtractor divides the weights by their sum when it is not 1 (within 1e-6);
    then float32 w * x. Weights 1 and 3 fuse as 0.25 and 0.75."""
    from descbench.descriptors.fusion import fuse_rows

    a, b = blocks()
    comps = [{"descriptor": "d0", "weight": 1.0}, {"descriptor": "d1", "weight": 3.0}]
    got = aggregate([a, b], params("weighted_avg", components=comps, final_norm="none", arithmetic="workbench"), NAMES, "x")
    np.testing.assert_array_equal(got, fuse_rows([a, b], "weighted_avg", [0.25, 0.75]))
    np.testing.assert_array_equal(got, np.float32(0.25) * a + np.float32(0.75) * b)


@pytest.mark.bad_input
@pytest.mark.parametrize("raw, message", [
    ({"components": [{"descriptor": "a"}, {"descriptor": "b"}], "aggregation": "channel_wise", "arithmetic": "workbench"},
     r"descriptors.c.params.arithmetic: workbench is not offered with aggregation channel_wise.*use arithmetic: descbench"),
    ({"components": [{"descriptor": "a", "norm": "l2"}, {"descriptor": "b"}], "aggregation": "average", "arithmetic": "workbench"},
     r"descriptors.c.params.components: arithmetic: workbench fuses the components' own rows.*remove norm from component 0"),
    ({"components": [{"descriptor": "a"}], "aggregation": "average", "arithmetic": "float32"}, r"arithmetic"),
])
def test_workbench_arithmetic_refuses_what_it_does_not_reproduce(raw, message):
    with pytest.raises(ConfigError, match=message):
        check_descriptor_params("composite", raw, "descriptors.c.params")
