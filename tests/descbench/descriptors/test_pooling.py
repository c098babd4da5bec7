"""Domain-size pooling of any float family (family ``dsp``, descbench.descriptors.pooling).

References are written here without the module under test: the base rows come from python-family
callables whose rows are known functions of the keypoint (size, octave field, position, image),
and the expected pooled rows from a plain numpy loop over the scales with the workbench's formula
(``DomainSizePooling.cpp``): weighted mean (or element-wise max / min, or the blocks side by side:
``aggregateDescriptors``) of the per-scale rows (normalised / rooted before), then rooted /
normalised after.
"""

from __future__ import annotations

import math
import re
import sys
import types
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.config import validate_config
from descbench.datasets.layout import read_image
from descbench.descriptors import PatchJob, check_descriptor_params, compute_descriptors, image_patch_rows
from descbench.descriptors import pooling as P
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import detect
from descbench.keypoints.sift import sift_octave_from_size
from descbench.params import config_schema, fragment_defaults
from descbench.patches import describe as PD

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SIFT_SET = {"detector": "sift", "params": fragment_defaults(config_schema()["definitions"]["sift_detector_params"])}

# ----------------------------------------------------------------------------- python-family callables


def size_rows(image, keypoints):
    """Rows that are a known function of the size alone, with a negative entry (signed rooting)."""
    s = keypoints.size.astype(np.float32)
    return np.stack([s, np.full_like(s, -1.0), s * s, np.float32(3.0) / s], axis=1)


def octave_rows(image, keypoints):
    """(size, octave field): what the base family was handed."""
    return np.stack([keypoints.size.astype(np.float32), keypoints.octave.astype(np.float32)], axis=1)


def image_rows(image, keypoints):
    """(x, y, size, height, width, image mean, the 3 x 3 pixels around the rounded keypoint (sum of channels))."""
    h, w = image.shape[:2]
    n = len(keypoints)
    xi, yi = np.rint(keypoints.x).astype(int), np.rint(keypoints.y).astype(int)
    img = image.reshape(h, w, -1).sum(axis=2).astype(np.float64)
    window = [img[yi + dy, xi + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    cols = [keypoints.x, keypoints.y, keypoints.size, np.full(n, h), np.full(n, w), np.full(n, image.mean()), *window]
    return np.stack(cols, axis=1).astype(np.float32)


def drops_when_large(image, keypoints):
    """One row fewer once a keypoint is larger than 12 px."""
    n = len(keypoints) - int((keypoints.size > 12).any())
    return np.ones((n, 3), np.float32)


def nan_when_large(image, keypoints):
    out = np.ones((len(keypoints), 3), np.float32)
    out[keypoints.size > 12] = np.nan
    return out


def wider_when_large(image, keypoints):
    return np.ones((len(keypoints), 4 if (keypoints.size > 12).any() else 3), np.float32)


CALLABLES = types.ModuleType("dsp_test_callables")
for _fn in (size_rows, octave_rows, image_rows, drops_when_large, nan_when_large, wider_when_large):
    setattr(CALLABLES, _fn.__name__, _fn)
sys.modules[CALLABLES.__name__] = CALLABLES


def py(name: str, **extra) -> dict:
    return {"family": "python", "params": {"callable": f"dsp_test_callables:{name}", **extra}}


def kps_of(x, y, size, octave=None) -> ImageKeypoints:
    n = len(x)
    f = lambda v: np.asarray(v, np.float32)  # noqa: E731
    return ImageKeypoints(f(x), f(y), f(size), f(np.zeros(n)), f(np.zeros(n)),
                          np.asarray(octave if octave is not None else np.zeros(n), np.int32), np.full(n, -1, np.int32),
                          np.arange(n, dtype=np.int32))


@pytest.fixture(scope="module")
def small_image(tmp_path_factory) -> Path:
    """A 64 x 80 grey gradient with noise."""
    rng = np.random.default_rng(3)
    img = (np.add.outer(np.arange(64), np.arange(80)) + rng.integers(0, 40, (64, 80))).clip(0, 255).astype(np.uint8)
    path = tmp_path_factory.mktemp("dsp") / "img.png"
    assert cv2.imwrite(str(path), img)
    return path


HAND_KPS = kps_of([10.0, 40.5, 70.0], [12.0, 30.0, 50.25], [2.0, 5.5, 10.0])


def dsp(params: dict, image: Path, kps: ImageKeypoints, kpset: dict | None = None) -> np.ndarray:
    filled = check_descriptor_params("dsp", params, "descriptors.d.params")
    return compute_descriptors("dsp", filled, image, kps, kpset or {}, "descriptors d")


# ----------------------------------------------------------------------------- the reference


def norm_rows(d, norm):
    if norm == "none":
        return d
    n = np.linalg.norm(d, ord=1 if norm == "l1" else 2, axis=1, keepdims=True)
    return d / np.where(n > 0, n, 1)


def signed_root(d):
    d = norm_rows(d, "l1")
    return np.sign(d) * np.sqrt(np.abs(d))


def reference(rows_at, scales, weights, before="none", after="l2", root="none"):
    """The workbench's pooling as a plain loop; ``rows_at(a)`` is the base rows at scale ``a``."""
    acc, total = 0.0, 0.0
    for a, w in zip(scales, weights):
        if w <= 0:
            continue
        d = norm_rows(rows_at(a).astype(np.float64), before)
        if root == "before":
            d = signed_root(d)
        acc, total = acc + w * d, total + w
    pooled = acc / total
    if root == "after":
        pooled = signed_root(pooled)
    return norm_rows(pooled, after)


def reference_unweighted(rows_at, scales, aggregation, before="none", after="l2", root="none"):
    """max / min / concatenate as a plain loop (``aggregateDescriptors``): every scale unweighted;
    element by element the largest / smallest value, or the scales' blocks side by side in the
    listed order; then rooted / normalised after over the whole row."""
    blocks = []
    for a in scales:
        d = norm_rows(rows_at(a).astype(np.float64), before)
        blocks.append(signed_root(d) if root == "before" else d)
    if aggregation == "concatenate":
        pooled = np.hstack(blocks)
    else:
        pick = max if aggregation == "max" else min
        pooled = blocks[0].copy()
        for d in blocks[1:]:
            for i, j in np.ndindex(*d.shape):
                pooled[i, j] = pick(pooled[i, j], d[i, j])
    if root == "after":
        pooled = signed_root(pooled)
    return norm_rows(pooled, after)


def size_rows_at(kps):
    return lambda a: size_rows(None, kps_of(kps.x, kps.y, (kps.size.astype(np.float32) * np.float32(a)).astype(np.float32)))


SCALES = [0.8, 1.0, 1.25, 2.0]
# sigma 0.5: the triangular weight of 2.0 (|ln 2| = 0.69 > 0.5) is 0, so that scale drops out
WEIGHTINGS = {
    "uniform": ({"weighting": "uniform"}, [1.0, 1.0, 1.0, 1.0]),
    "gaussian": ({"weighting": "gaussian", "weight_sigma": 0.5},
                 [math.exp(-2 * math.log(a) ** 2) for a in SCALES]),
    "triangular": ({"weighting": "triangular", "weight_sigma": 0.5},
                   [max(0.0, 1 - abs(math.log(a)) / 0.5) for a in SCALES]),
    "explicit": ({"weights": [0.5, 2.0, 1.0, 0.25]}, [0.5, 2.0, 1.0, 0.25]),
}


@pytest.mark.parametrize("root", ["none", "before", "after"])
@pytest.mark.parametrize("after", ["none", "l1", "l2"])
@pytest.mark.parametrize("before", ["none", "l1", "l2"])
@pytest.mark.parametrize("weighting", sorted(WEIGHTINGS))
def test_pooled_rows_equal_the_plain_loop(small_image, weighting, before, after, root):
    extra, weights = WEIGHTINGS[weighting]
    got = dsp({"base": py("size_rows"), "scales": SCALES, **extra, "normalise_before": before, "normalise_after": after,
               "rootsift": root}, small_image, HAND_KPS)
    want = reference(size_rows_at(HAND_KPS), SCALES, weights, before, after, root)
    assert got.dtype == np.float32 and got.shape == (3, 4)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("weighting", sorted(WEIGHTINGS))
def test_the_default_aggregation_is_the_weighted_mean_bit_for_bit(small_image, weighting):
    """No aggregation key = aggregation average = the weighted mean of the plain loop, to the bit
    (float64 sums in scale order, one division by the weight sum), with the module's own weights
    (pinned by hand below); the rows of configs written before aggregation existed."""
    extra, _ = WEIGHTINGS[weighting]
    for before in ("none", "l1", "l2"):
        for after in ("none", "l1", "l2"):
            for root in ("none", "before", "after"):
                params = {"base": py("size_rows"), "scales": SCALES, **extra, "normalise_before": before,
                          "normalise_after": after, "rootsift": root}
                weights = P.scale_weights(check_descriptor_params("dsp", params, "p"))
                want = reference(size_rows_at(HAND_KPS), SCALES, weights, before, after, root).astype(np.float32)
                got = dsp(params, small_image, HAND_KPS)
                assert np.array_equal(got, want), (before, after, root)
                assert np.array_equal(dsp({**params, "aggregation": "average"}, small_image, HAND_KPS), got)


@pytest.mark.parametrize("root", ["none", "before", "after"])
@pytest.mark.parametrize("after", ["none", "l1", "l2"])
@pytest.mark.parametrize("before", ["none", "l1", "l2"])
@pytest.mark.parametrize("aggregation", ["max", "min", "concatenate"])
def test_unweighted_aggregations_equal_the_plain_loop(small_image, aggregation, before, after, root):
    got = dsp({"base": py("size_rows"), "scales": SCALES, "aggregation": aggregation, "normalise_before": before,
               "normalise_after": after, "rootsift": root}, small_image, HAND_KPS)
    want = reference_unweighted(size_rows_at(HAND_KPS), SCALES, aggregation, before, after, root)
    assert got.dtype == np.float32 and got.shape == (3, 4 * len(SCALES) if aggregation == "concatenate" else 4)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    if (before, after, root) == ("none", "none", "none"):  # no arithmetic: the base's values themselves
        assert np.array_equal(got, want.astype(np.float32))


def test_max_min_concatenate_by_hand(small_image):
    """One keypoint of size 2 at scales listed [2, 0.5, 1]: size_rows (s, -1, s^2, 3/s) at sizes 4,
    1, 2 are (4, -1, 16, 0.75), (1, -1, 1, 3), (2, -1, 4, 1.5)."""
    kps = kps_of([20.0], [20.0], [2.0])
    run = lambda agg, **kw: dsp({"base": py("size_rows"), "scales": [2.0, 0.5, 1.0], "aggregation": agg,  # noqa: E731
                                 "normalise_after": "none", **kw}, small_image, kps)
    np.testing.assert_array_equal(run("max"), [[4.0, -1.0, 16.0, 3.0]])
    np.testing.assert_array_equal(run("min"), [[1.0, -1.0, 1.0, 0.75]])
    # concatenate: block j is scale scales[j], in the order listed (not sorted)
    blocks = [[4.0, -1.0, 16.0, 0.75], [1.0, -1.0, 1.0, 3.0], [2.0, -1.0, 4.0, 1.5]]
    np.testing.assert_array_equal(run("concatenate"), [sum(blocks, [])])
    # normalise_after: the whole concatenated row (L2 norm sqrt(308.8125)), not each block
    np.testing.assert_allclose(run("concatenate", normalise_after="l2"), [np.array(sum(blocks, [])) / math.sqrt(308.8125)],
                               rtol=1e-6)
    # unit blocks before, unit row after: each block has L2 norm 1/sqrt(3)
    unit = run("concatenate", normalise_before="l2", normalise_after="l2").reshape(3, 4)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), [3 ** -0.5] * 3, rtol=1e-6)
    # rootsift after: L1 over the whole row (21.75 + 6 + 8.5 = 36.25), then the signed root of each entry
    rooted = run("concatenate", rootsift="after")[0]
    np.testing.assert_allclose(rooted, np.sign(sum(blocks, [])) * np.sqrt(np.abs(sum(blocks, [])) / 36.25), rtol=1e-6)
    # max after normalise_before l1 (row L1 norms 21.75, 6, 8.5): each column from another scale
    np.testing.assert_allclose(run("max", normalise_before="l1"),
                               [[2 / 8.5, -1 / 21.75, 16 / 21.75, 3 / 6]], rtol=1e-6)


@pytest.mark.bad_input
def test_concatenate_needs_one_width_at_every_scale(small_image):
    """The workbench's hconcat would join rows of different widths; here the width is len(scales) x D."""
    with pytest.raises(DataError, match=r"dsp scale 4\.0 \(base family 'python'.*4 columns, but 3 at scale 1\.0"):
        dsp({"base": py("wider_when_large"), "scales": [1.0, 4.0], "aggregation": "concatenate"}, small_image, HAND_KPS)


def test_weights_are_the_workbench_formulas_by_hand():
    """Numbers worked by hand: gaussian exp(-ln(a)^2 / (2 sigma^2)), triangular max(0, 1 - |ln a| / sigma)."""
    p = lambda **kw: {"scales": [0.5, 1.0, 2.0], "weighting": "uniform", "weight_sigma": 0.15, "weights": None, **kw}  # noqa: E731
    assert P.scale_weights(p()) == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(P.scale_weights(p(weighting="gaussian", weight_sigma=0.5)), [0.382546, 1.0, 0.382546], rtol=1e-5)
    np.testing.assert_allclose(P.scale_weights(p(weighting="triangular", weight_sigma=1.0)), [0.306853, 1.0, 0.306853], rtol=1e-5)
    assert P.scale_weights(p(weighting="triangular")) == [0.0, 1.0, 0.0]  # |ln 2| = 0.69 > 0.15
    assert P.scale_weights(p(weights=[3, 0, 1])) == [3.0, 0.0, 1.0]


def test_defaults_are_the_workbench_defaults():
    d = fragment_defaults(P.PARAMS_SCHEMA["dsp"])
    assert d["scales"] == [1.0, 1.5, 2.0] and d["weighting"] == "uniform" and d["weight_sigma"] == 0.15
    assert (d["normalise_before"], d["normalise_after"], d["rootsift"]) == ("none", "l2", "none")
    assert d["aggregation"] == "average"


def test_a_zero_weight_scale_is_not_computed(small_image):
    """Triangular weight 0 at scale 3 (sigma 0.5): a base that would drop a row there is never asked."""
    kps = kps_of([20.0], [20.0], [5.0])
    got = dsp({"base": py("drops_when_large"), "scales": [1.0, 3.0], "weighting": "triangular", "weight_sigma": 0.5,
               "normalise_after": "none"}, small_image, kps)
    np.testing.assert_array_equal(got, np.ones((1, 3), np.float32))


def test_one_scale_of_one_is_the_base_exactly(pristine, small_image):
    """scales [1], uniform, no normalisation: the base family's rows bit for bit (sift on a SIFT set,
    whose own octave field is kept at a = 1; the python family), with every aggregation; sift's
    ``convention: workbench`` pools the workbench's SIFTWrapper rows (its family's pool_params): its
    rows before the L2 normalisation (the runner's NoPooling) that the convention adds."""
    from descbench.descriptors import sift as S
    from descbench.descriptors.sift_kernel import l2_rows

    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), SIFT_SET["params"])
    kps = kps.take(np.arange(0, len(kps), 9))
    one = {"scales": [1.0], "normalise_after": "none"}
    workbench = {"family": "sift", "params": {"convention": "workbench"}}
    extractor = compute_descriptors("sift", {"convention": S.EXTRACTOR}, img, kps, SIFT_SET, "b")
    unit = compute_descriptors("sift", check_descriptor_params("sift", workbench["params"], "b"), img, kps, SIFT_SET, "b")
    assert np.array_equal(l2_rows(extractor), unit) and not np.array_equal(extractor, unit)
    assert np.array_equal(extractor, np.round(extractor))  # OpenCV's rounded rows, not normalised
    for base in ({"family": "sift"}, workbench, py("size_rows")):
        want = extractor if base is workbench else compute_descriptors(
            base["family"], check_descriptor_params(base["family"], base.get("params"), "b"), img, kps, SIFT_SET, "b")
        for agg in P.AGGREGATIONS:
            assert np.array_equal(dsp({"base": base, **one, "aggregation": agg}, img, kps, SIFT_SET), want), (base, agg)


# ----------------------------------------------------------------------------- shared rows at scale 1


def test_the_base_is_shareable_only_where_its_rows_at_scale_1_are_its_own():
    """dsp_shareable (DescriptorFamily.shareable): the base spec with image original, scale 1
    weighted and pool_params = params; otherwise None."""
    def shareable(**params):
        return P.dsp_shareable(check_descriptor_params("dsp", params, "d"))

    sift = {"family": "sift", "params": {"convention": "opencv"}}
    assert shareable(base={"family": "sift"}) == [sift]  # default scales [1, 1.5, 2]
    assert shareable(base={"family": "sift"}, scales=[2.0, 1]) == [sift]
    assert shareable(base={"family": "sift"}, scales=[1.5, 2.0]) == [None]
    assert shareable(base={"family": "sift"}, weights=[0.0, 1.0, 1.0]) == [None]  # scale 1 not computed
    assert shareable(base={"family": "sift"}, image="workbench_pyramid") == [None]
    assert shareable(base={"family": "sift", "params": {"convention": "workbench"}}) == [None]  # pools other rows
    assert shareable(base=py("size_rows")) == [check_descriptor_params("dsp", {"base": py("size_rows")}, "d")["base"]]


def test_given_rows_at_scale_1_replace_only_that_scale(pristine):
    """compute_descriptors with ``given``: the rows at scale 1 are the given ones (the others
    computed), so the base's own rows give the computed result bit for bit; given rows where the
    params do not pool the base's own rows at 1 are refused."""
    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), SIFT_SET["params"])
    kps = kps.take(np.arange(0, len(kps), 7))
    params = check_descriptor_params("dsp", {"base": {"family": "sift"}, "scales": [1.5, 1.0, 2.0]}, "d")
    own = compute_descriptors("sift", params["base"]["params"], img, kps, SIFT_SET, "b")
    computed = compute_descriptors("dsp", params, img, kps, SIFT_SET, "d")
    assert np.array_equal(compute_descriptors("dsp", params, img, kps, SIFT_SET, "d", [own]), computed)
    assert np.array_equal(compute_descriptors("dsp", params, img, kps, SIFT_SET, "d", [None]), computed)
    other = own[::-1].copy()
    got = compute_descriptors("dsp", params, img, kps, SIFT_SET, "d", [other])
    alone = {**params, "scales": [1.5, 2.0]}
    rest = compute_descriptors("dsp", {**alone, "normalise_after": "none"}, img, kps, SIFT_SET, "d").astype(np.float64)
    want = (rest * 2 + other) / 3  # the mean of three rows, then L2
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not np.allclose(got, computed, atol=1e-3)
    with pytest.raises(ValueError, match="scale 1"):
        compute_descriptors("dsp", {**params, "scales": [1.5, 2.0]}, img, kps, SIFT_SET, "d", [own])


# ----------------------------------------------------------------------------- the octave field


def test_sift_octave_field_is_kept_or_follows_the_scaled_size(small_image):
    """The workbench's copy of the keypoint (default ``octave_field: kept``): the field passed on as it
    is at every scale, on every set. ``octave_field: from_size``: on a set with SIFT octaves it is
    re-derived from the scaled size at a != 1 (kept at a = 1); on other sets passed on as it is."""
    kps = kps_of([20.0, 40.0], [20.0, 30.0], [3.0, 7.0], octave=[0x0102, 0x02FF])  # arbitrary packed fields
    sets = (("sift", SIFT_SET), ("locked", {"detector": "locked", "params": {"octave": "sift"}}), ("gftt", {"detector": "gftt"}))
    got = {}
    for field in P.OCTAVE_FIELDS:
        for a in (1.0, 2.0):
            for name, kpset in sets:
                got[field, a, name] = dsp({"base": py("octave_rows"), "scales": [a], "normalise_after": "none",
                                           "octave_field": field}, small_image, kps, kpset)
    for name, _ in sets:
        for a in (1.0, 2.0):
            np.testing.assert_array_equal(got["kept", a, name], np.stack([[3.0 * a, 7.0 * a], [0x0102, 0x02FF]], axis=1))
        np.testing.assert_array_equal(got["from_size", 1.0, name][:, 1], [0x0102, 0x02FF])
    assert P.PARAMS_SCHEMA["dsp"]["properties"]["octave_field"]["default"] == "kept"
    want = sift_octave_from_size(np.float32([6.0, 14.0]), (64, 80))
    for name in ("sift", "locked"):
        np.testing.assert_array_equal(got["from_size", 2.0, name], np.stack([[6.0, 14.0], want], axis=1))
    np.testing.assert_array_equal(got["from_size", 2.0, "gftt"][:, 1], [0x0102, 0x02FF])
    # the set's own SIFT scale space (layers per octave, sigma) decides the level
    own = {"detector": "sift", "params": {**SIFT_SET["params"], "n_octave_layers": 4, "sigma": 2.0}}
    field = dsp({"base": py("octave_rows"), "scales": [2.0], "normalise_after": "none", "octave_field": "from_size"},
                small_image, kps, own)[:, 1]
    np.testing.assert_array_equal(field, sift_octave_from_size(np.float32([6.0, 14.0]), (64, 80), 4, 2.0))
    assert not np.array_equal(field, want)
    # workbench_pyramid: the workbench's copy of the keypoint, field included
    kept = dsp({"base": py("octave_rows"), "scales": [2.0], "image": "workbench_pyramid", "normalise_after": "none"},
               small_image, kps, SIFT_SET)
    np.testing.assert_array_equal(kept[:, 1], [0x0102, 0x02FF])


def test_sift_base_at_a_scale_describes_the_scaled_keypoint(pristine):
    """dsp(sift) at one scale 2 on a SIFT set = sift on keypoints of twice the size with their
    detected octave field (the workbench's, default), i.e. at the detected scale-space level; with
    ``octave_field: from_size`` with the level taken from that size (what sift does on keypoints of
    any other detector)."""
    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), SIFT_SET["params"])
    kps = kps.take(np.arange(0, len(kps), 9))
    doubled = ImageKeypoints(kps.x, kps.y, kps.size * np.float32(2), kps.angle, kps.response, kps.octave, kps.class_id,
                             kps.source_index)
    sift = check_descriptor_params("sift", {}, "s")
    at_detected, at_size = (compute_descriptors("sift", sift, img, doubled, kpset, "s") for kpset in (SIFT_SET, {}))
    assert not np.array_equal(at_detected, at_size)
    for field, want in (("kept", at_detected), ("from_size", at_size)):
        got = dsp({"base": {"family": "sift"}, "scales": [2.0], "normalise_after": "none", "octave_field": field}, img, kps,
                  SIFT_SET)
        assert np.array_equal(got, want), field


# ----------------------------------------------------------------------------- the base misbehaving


@pytest.mark.bad_input
@pytest.mark.parametrize("fn, message", [
    ("drops_when_large", r"dsp scale 4\.0 \(base family 'python'.*returned shape \(2, 3\) for the 3 keypoints"),
    ("nan_when_large", r"dsp scale 4\.0 \(base family 'python'.*NaN"),
    ("wider_when_large", r"dsp scale 4\.0 \(base family 'python'.*4 columns, but 3 at scale 1\.0"),
])
def test_a_base_that_loses_rows_or_gives_nan_names_the_scale(small_image, fn, message):
    with pytest.raises(DataError, match=message):
        dsp({"base": py(fn), "scales": [1.0, 4.0]}, small_image, HAND_KPS)


@pytest.mark.bad_input
def test_a_degenerate_scaled_size_names_the_scale(small_image):
    with pytest.raises(DataError, match=r"dsp scale 1e\+38 .*scaled keypoint size is inf .*row 1"):
        dsp({"base": py("size_rows"), "scales": [1e38]}, small_image, kps_of([5.0, 6.0], [5.0, 6.0], [1.0, 5.0]))


# ----------------------------------------------------------------------------- config validation


@pytest.mark.bad_input
@pytest.mark.parametrize("params, message", [
    ({"base": {"family": "sift"}, "scale": [1]}, r"unknown config key 'descriptors\.d\.params\.scale' \(did you mean 'scales'\?\)"),
    ({"base": {"family": "sift", "parms": {}}}, r"unknown config key 'descriptors\.d\.params\.base\.parms'"),
    ({"base": {"family": "sift", "params": {"sigmaa": 1}}}, r"unknown config key 'descriptors\.d\.params\.base\.params\.sigmaa'"),
    ({"base": {"family": "nope"}}, r"descriptors\.d\.params\.base\.family.*unknown descriptor family 'nope'"),
    ({}, r"descriptors\.d\.params\.base: missing"),
    ({"base": {"family": "orb"}}, r"base\.family: 'orb' gives packed bits"),
    ({"base": {"family": "python", "params": {"callable": "dsp_test_callables:size_rows", "descriptor_kind": "binary"}}},
     r"base\.family: 'python' gives packed bits"),
    ({"base": {"family": "dsp", "params": {"base": {"family": "sift"}}}}, r"base\.family: 'dsp' cannot be pooled by dsp: .*one dsp"),
    ({"base": {"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "rootsift"}]}}},
     r"base\.family: 'stack' cannot be pooled"),
    ({"base": {"family": "precomputed"}}, r"base\.family: 'precomputed' cannot be pooled"),
    ({"base": {"family": "composite"}}, r"base\.family: 'composite' cannot be pooled"),
    ({"base": {"family": "sift"}, "scales": []}, r"descriptors\.d\.params\.scales: \[\] has fewer than 1 item"),
    ({"base": {"family": "sift"}, "scales": [1, -0.5]}, r"descriptors\.d\.params\.scales\.1: -0\.5 must be greater than 0"),
    ({"base": {"family": "sift"}, "scales": [0]}, r"descriptors\.d\.params\.scales\.0: 0 must be greater than 0"),
    ({"base": {"family": "sift"}, "scales": [1, 2, 1.0]}, r"scales: \[1, 2, 1\.0\] lists a scale twice"),
    ({"base": {"family": "sift"}, "weights": [1, 2]}, r"descriptors\.d\.params\.weights: 2 weights for 3 scales"),
    ({"base": {"family": "sift"}, "weights": [1, -1, 2]}, r"weights\.1: -1 is less than the minimum 0"),
    ({"base": {"family": "sift"}, "weights": [1, 1, 1], "weighting": "gaussian"}, r"weights and weighting 'gaussian' both"),
    ({"base": {"family": "sift"}, "weights": [0, 0, 0]}, r"scale weights \[0\.0, 0\.0, 0\.0\] .* sum to 0"),
    ({"base": {"family": "sift"}, "scales": [2, 3], "weighting": "triangular"}, r"sum to 0"),
    ({"base": {"family": "sift"}, "weight_sigma": 0}, r"weight_sigma: 0 is less than the minimum 1e-06"),
    ({"base": {"family": "sift"}, "rootsift": "yes"}, r"rootsift: 'yes' is not one of 'none', 'before', 'after'"),
    ({"base": {"family": "sift"}, "normalise_after": "max"}, r"normalise_after: 'max' is not one of"),
    ({"base": {"family": "sift"}, "colour": True}, r"colour applies to image: workbench_pyramid or base_pyramid only"),
    ({"base": {"family": "sift"}, "octave_field": "detected"}, r"octave_field: 'detected' is not one of 'kept', 'from_size'"),
    ({"base": {"family": "sift"}, "image": "workbench_pyramid", "octave_field": "from_size"},
     r"params\.octave_field: 'from_size' applies to image: original only .*remove octave_field"),
    ({"base": {"family": "sift"}, "image": "workbench_pyramid", "scales": [1, 16]}, r"scales: \[16\] lie beyond"),
    ({"base": {"family": "sift"}, "aggregation": "max", "weights": [1, 2, 3]},
     r"descriptors\.d\.params\.weights: aggregation 'max' does not weight the scales \(the workbench ignores scale weights "
     r"unless it averages, and takes every scale\); remove weights, or use aggregation: average"),
    ({"base": {"family": "sift"}, "aggregation": "min", "weights": [0, 0, 0]}, r"params\.weights: aggregation 'min' does not"),
    ({"base": {"family": "sift"}, "aggregation": "concatenate", "weighting": "gaussian"},
     r"params\.weighting: aggregation 'concatenate' does not weight the scales .*remove weighting"),
    ({"base": {"family": "sift"}, "aggregation": "weighted_avg"},
     r"aggregation: 'weighted_avg' is not one of 'average', 'max', 'min', 'concatenate'"),
    ({"base": {"family": "sift"}, "aggregation": "concat"}, r"aggregation: 'concat' is not one of"),
])
def test_bad_dsp_config_names_the_key(params, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({"keypoint_sets": {"s": {"detector": "sift"}}, "descriptors": {"d": {"family": "dsp", "params": params}}},
                        SCHEMA)


def test_good_config_is_filled_recursively():
    cfg = validate_config({"keypoint_sets": {"s": {"detector": "sift"}},
                           "descriptors": {"d": {"family": "dsp", "params": {"base": {"family": "sift"}, "scales": [1, 1.5]}}}},
                          SCHEMA)
    p = cfg["descriptors"]["d"]["params"]
    assert p["base"] == {"family": "sift", "params": {"convention": "opencv"}} and p["scales"] == [1, 1.5]
    assert check_descriptor_params("dsp", p, "again") == p  # the filled params check again unchanged


# ----------------------------------------------------------------------------- workbench_pyramid


def test_pyramid_levels_of_the_workbench():
    """findPyramidLevel by hand: t = log2 a, (max(0, floor t), max(0, round(3 (t - floor t))))."""
    table = {0.85: (0, 2), 1.0: (0, 0), 1.075: (0, 0), 1.3: (0, 1), 1.5: (0, 2), 1.9: (0, 3), 2.0: (1, 0), 3.0: (1, 2),
             8.0: (3, 0), 15.0: (3, 3)}
    assert {a: P.pyramid_level(a) for a in table} == table
    # logf(0.5) / ln 2 is a hair below -1 in float: floor -2, layer round(3 * 0.99...) = 3 (what the workbench computes)
    assert P.pyramid_level(0.5) == (0, 3)


def workbench_level(grey: np.ndarray, octave: int, level: int) -> np.ndarray:
    """buildGaussianPyramid written out: blur steps sqrt(s_l^2 - s_{l-1}^2), pyrDown of level 3."""
    img = grey
    for o in range(octave + 1):
        stop = level if o == octave else 3
        for lv in range(1, stop + 1):
            s1, s0 = 1.6 * 2 ** (lv / 3), 1.6 * 2 ** ((lv - 1) / 3)
            img = cv2.GaussianBlur(img, (0, 0), math.sqrt(s1 * s1 - s0 * s0))
        if o < octave:
            img = cv2.pyrDown(img)
    return img


def test_pyramid_mode_describes_the_level_image(tmp_path):
    """Each scale's base rows are the base on the workbench's pyramid level (grey image) with
    position x 2^-o and size x a 2^-o; pooled as the plain loop."""
    rng = np.random.default_rng(9)
    img = tmp_path / "colour.png"
    assert cv2.imwrite(str(img), cv2.GaussianBlur(rng.integers(0, 256, (151, 203, 3), dtype=np.uint8), (0, 0), 1.2))
    grey = cv2.cvtColor(read_image(img, color=True), cv2.COLOR_BGR2GRAY)
    rng = np.random.default_rng(5)
    n = 40
    kps = kps_of(rng.uniform(4, grey.shape[1] - 5, n).round(2), rng.uniform(4, grey.shape[0] - 5, n).round(2),
                 rng.uniform(2, 20, n))
    scales = [0.85, 1.0, 1.3, 2.0, 3.0]
    levels = [(0, 2), (0, 0), (0, 1), (1, 0), (1, 2)]

    def rows_at(a):
        o, lv = levels[scales.index(a)]
        f = 2.0 ** -o
        k = kps_of(kps.x * f, kps.y * f, kps.size * np.float32(a * f))
        return image_rows(workbench_level(grey, o, lv), k)

    pyramid = {"base": py("image_rows"), "image": "workbench_pyramid", "normalise_after": "none"}
    got = dsp({**pyramid, "scales": scales}, img, kps)
    np.testing.assert_allclose(got, reference(rows_at, scales, [1] * 5, after="none"), rtol=1e-6)
    for a in scales:  # each level pixel for pixel
        np.testing.assert_array_equal(dsp({**pyramid, "scales": [a]}, img, kps), rows_at(a), err_msg=f"scale {a}")
    one = dsp({**pyramid, "scales": [2.0]}, img, kps)
    np.testing.assert_array_equal(one[:, :5], np.stack([kps.x / 2, kps.y / 2, kps.size, np.full(n, (grey.shape[0] + 1) // 2),
                                                        np.full(n, (grey.shape[1] + 1) // 2)], axis=1))
    colour = dsp({"base": py("image_rows", color=True), "scales": [1.3], "image": "workbench_pyramid", "colour": True,
                  "normalise_after": "none"}, img, kps)
    want = image_rows(cv2.GaussianBlur(read_image(img, color=True), (0, 0), math.sqrt(1.6 ** 2 * (2 ** (2 / 3) - 1))),
                      kps_of(kps.x, kps.y, kps.size * np.float32(1.3)))
    np.testing.assert_allclose(colour, want, rtol=1e-6)


# ----------------------------------------------------------------------------- patches


@pytest.fixture(scope="module")
def patches() -> np.ndarray:
    rng = np.random.default_rng(11)
    return np.stack([cv2.GaussianBlur(rng.integers(0, 256, (65, 65), dtype=np.uint8), (0, 0), s) for s in (1.0, 2.0, 3.0)])


@pytest.mark.parametrize("params", [
    {"base": {"family": "sift"}},
    {"base": {"family": "sift", "params": {"convention": "workbench"}}, "rootsift": "after", "scales": [0.75, 1.0, 1.5]},
    {"base": py("size_rows"), "weighting": "gaussian", "normalise_before": "l1"},
    {"base": {"family": "sift"}, "image": "workbench_pyramid", "scales": [0.85, 1.0, 2.0]},
    {"base": {"family": "surf"}, "scales": [1.0, 1.4]},
    {"base": {"family": "sift"}, "aggregation": "concatenate", "rootsift": "after", "scales": [1.0, 1.5]},
    {"base": {"family": "surf"}, "aggregation": "max", "normalise_before": "l2", "image": "workbench_pyramid",
     "scales": [1.0, 2.0]},
])
@pytest.mark.parametrize("sift_octave", ["size", "zero"])
def test_patch_rows_equal_dsp_on_each_patch_as_an_image(patches, params, sift_octave):
    """The in-memory hook equals dsp's own compute on each patch written as an image, at the base
    family's support."""
    filled = check_descriptor_params("dsp", params, "p")
    base = params["base"]
    support = PD.default_support(base["family"], check_descriptor_params(base["family"], base.get("params"), "b"))
    assert P.dsp_patch_support(filled, 65) == support
    got = PD.describe_patches(patches, "dsp", params, sift_octave=sift_octave)
    job = PatchJob(patches, PD.centre_keypoint(support), PD.patch_kpset(sift_octave), "w", "p",
                   lambda row: PD._per_patch(len(patches), row))
    assert np.array_equal(got, image_patch_rows("dsp")(job, filled))


@pytest.mark.bad_input
@pytest.mark.parametrize("bad", ["nan", "rows"])
def test_a_base_patch_hook_that_loses_rows_or_gives_nan_names_the_scale(patches, monkeypatch, bad):
    """A base family whose patch hook breaks its contract at some size (here sift's, wrapped)."""
    import dataclasses

    from descbench.descriptors import _registry

    sift = _registry()["sift"]

    def broken(job, params):
        out = sift.patch_rows(job, params)
        if job.keypoint.size[0] > 20:
            out = out[1:] if bad == "rows" else np.where(out > -1, np.nan, out)
        return out

    monkeypatch.setitem(_registry(), "sift", dataclasses.replace(sift, patch_rows=broken))
    with pytest.raises(DataError, match=r"w: dsp scale 2\.0 \(base family 'sift'.*it must give finite rows, one per patch"):
        PD.describe_patches(patches, "dsp", {"base": {"family": "sift"}}, where="w")


@pytest.mark.bad_input
def test_a_base_that_cannot_describe_patches_is_refused():
    with pytest.raises(ConfigError, match=r"dsp base: descriptor family 'rgbsift' cannot describe patches"):
        PD.describe_patches(np.zeros((1, 65, 65), np.uint8), "dsp", {"base": {"family": "rgbsift"}})



@pytest.mark.bad_input
@pytest.mark.parametrize("base", [{"family": "hardnet", "params": {"weights": "random"}}, {"family": "onnx", "params": {"model": "m.onnx"}}])
def test_dsp_over_a_whole_patch_network_is_refused_on_patches_at_scales_other_than_1(base):
    """It passed check-config and then failed in the job, twice, naming descriptors.p.support (no such key).
    At scale 1 alone it is the base (tests/workflow/test_patch_workflow.py runs it)."""
    filled = {**fragment_defaults(P.PARAMS_SCHEMA["dsp"]), "base": base}
    problem = r"pools its base '\w+' at scales 1\.5, 2, but '\w+' describes a patch by resizing the whole patch"
    assert re.match(problem, P.dsp_patch_params_problem(filled))
    assert P.dsp_patch_params_problem({**filled, "scales": [1.0]}) is None
    assert P.dsp_patch_params_problem({**filled, "scales": [1.0, 2.0], "weights": [1.0, 0.0]}) is None  # unused scale
    assert P.dsp_patch_params_problem({**filled, "base": {"family": "sift", "params": {}}}) is None
    if base["family"] == "hardnet":
        pytest.importorskip("kornia")
        spec = {"family": "dsp", "params": {"base": base}}
        cfg = {"keypoint_sets": {"s": {"detector": "sift"}}, "descriptors": {"p": spec},
               "patches": {"enabled": True, "descriptors": ["p"]}}
        with pytest.raises(ConfigError, match=rf"^patches\.descriptors: 'p' \(family dsp\) cannot describe patches: it {problem}"):
            validate_config(cfg, SCHEMA)
        params = check_descriptor_params("dsp", spec["params"], "descriptors.p.params")
        with pytest.raises(ConfigError, match=rf"^descriptors\.p: descriptor family 'dsp' cannot describe patches: it {problem}"):
            PD.describe_patches(np.zeros((1, 65, 65), np.uint8), "dsp", params, config_key="descriptors.p.params")


def test_dsp_over_sift_is_close_to_dspsift_workbench(pristine):
    """Same scales [1, 1.5, 2], uniform, no normalisation before, L2 after: the two differ by the
    per-scale SIFT (dsp: the workbench SIFTWrapper's rows, OpenCV's rounded to integers; dspsift:
    VanillaSIFT's unrounded rows; both of L2 norm about 512), the level (dsp, image original: the
    detected keypoint's level by default, as the workbench's DomainSizePooling keeps the octave
    field; with ``octave_field: from_size`` the scaled size's, sift_octave_from_size's round, where
    computeDSP floors) and the pyramid (dsp: one OpenCV SIFT.compute per scale; dspsift: one pyramid
    for all scales). Measured on 655 SIFT keypoints of v_coins image 1 (SIFT set), row L2 distance:
    default median 0.131, p90 0.214, max 0.375; ``octave_field: from_size`` median 0.064, p90 0.131,
    max 0.486 (with computeDSP's layer rule changed to round, the median falls to 0.016: rounding and
    pyramids)."""
    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), SIFT_SET["params"])
    b = compute_descriptors("dspsift", check_descriptor_params("dspsift", {"convention": "workbench"}, "b"), img, kps, SIFT_SET, "b")
    assert len(kps) == 655
    for field, (lo, hi, p90, top) in (("kept", (0.10, 0.16, 0.3, 0.5)), ("from_size", (0.04, 0.09, 0.2, 0.6))):
        a = dsp({"base": {"family": "sift", "params": {"convention": "workbench"}}, "octave_field": field}, img, kps, SIFT_SET)
        dist = np.linalg.norm(a.astype(np.float64) - b, axis=1)
        assert lo < np.median(dist) < hi and np.quantile(dist, 0.9) < p90 and dist.max() < top, field
