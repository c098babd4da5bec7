"""OpenCV descriptor families (descbench.descriptors.opencv_binary / opencv_float) against plain OpenCV.

The references are OpenCV extractors built here with OpenCV's own defaults and called one
keypoint at a time (so a dropped keypoint is seen as such, whatever the extractor does with the
others), independently of descbench's realignment.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import detect, keypoints_from_cv

XF = cv2.xfeatures2d

BINARY = {"orb": 32, "brisk": 64, "akaze": 61, "freak": 64, "brief": 32, "latch": 32, "beblid": 64, "teblid": 32, "binboost": 32}
FLOAT = {"kaze": 64, "akaze_kaze": 64, "daisy": 200, "vgg": 120, "boostdesc": 64}
# plain OpenCV drops keypoints near the border (BRISK and FREAK also large ones) for these only
DROPPING = {"orb", "brisk", "freak", "brief", "latch"}
SINGLE_SCALE = {"brisk", "freak", "brief", "latch"}  # descriptors of the full-resolution image only

DETECTOR_PARAMS = {
    "sift": {},
    "orb": {"n_features": 500, "scale_factor": 1.2, "n_levels": 8, "edge_threshold": 31, "patch_size": 31,
            "fast_threshold": 20, "score_type": "harris"},
    "akaze": {"threshold": 0.001, "n_octaves": 4, "n_octave_layers": 4, "diffusivity": "pm_g2"},
    "kaze": {"threshold": 0.001, "n_octaves": 4, "n_octave_layers": 4, "diffusivity": "pm_g2"},
    "brisk": {"threshold": 30, "octaves": 3, "pattern_scale": 1.0},
}
# each family's own detector, where it has one
OWN = {"orb": "orb", "brisk": "brisk", "akaze": "akaze", "akaze_kaze": "akaze", "kaze": "kaze"}

# OpenCV's documented window ratios (BEBLID/TEBLID; VGG/BoostDesc) by detector
BEBLID_SCALE = {"sift": 6.75, "orb": 1.0, "akaze": 5.0, "brisk": 5.0, "kaze": 6.25}
VGG_SCALE = {"sift": 6.75, "orb": 0.75, "akaze": 5.0, "brisk": 5.0, "kaze": 6.25}


def reference_extractor(family: str, detector: str):
    """The OpenCV extractor with OpenCV's defaults (and the documented scale for the detector)."""
    return {
        "orb": lambda: cv2.ORB_create(),
        "brisk": lambda: XF.BRISK_create(),
        "akaze": lambda: XF.AKAZE_create(),
        "akaze_kaze": lambda: XF.AKAZE_create(descriptor_type=XF.AKAZE_DESCRIPTOR_KAZE),
        "freak": lambda: XF.FREAK_create(),
        "brief": lambda: XF.BriefDescriptorExtractor_create(),
        "latch": lambda: XF.LATCH_create(),
        "beblid": lambda: XF.BEBLID_create(BEBLID_SCALE[detector]),
        "teblid": lambda: XF.TEBLID_create(BEBLID_SCALE[detector]),
        "binboost": lambda: XF.BoostDesc_create(scale_factor=VGG_SCALE[detector]),
        "kaze": lambda: XF.KAZE_create(),
        "daisy": lambda: XF.DAISY_create(),
        "vgg": lambda: XF.VGG_create(scale_factor=VGG_SCALE[detector]),
        "boostdesc": lambda: XF.BoostDesc_create(desc=200, scale_factor=VGG_SCALE[detector]),  # 200 = LBGM
    }[family]()


def documented_fields(family: str, kps: ImageKeypoints, shape, detector: str):
    """(octave, class_id) the module docstrings promise for keypoints of ``detector``."""
    size = kps.size.astype(np.float64)
    if family == "orb":  # level of the closest patch 31 * 1.2^l
        return np.clip(np.rint(np.log(size / 31) / np.log(1.2)), 0, 7).astype(int), kps.class_id
    if family in ("akaze", "akaze_kaze"):
        if detector == "akaze":
            return kps.octave, kps.class_id
        h, w = shape
        octaves = 1 + sum(1 for i in range(1, 4) if w >> i >= 80 and h >> i >= 40)
        level = np.clip(np.rint(4 * np.log2(size / 4.8)), 0, 4 * octaves - 1).astype(int)
        return level // 4, level
    if family == "kaze":
        if detector == "kaze":
            return kps.octave, kps.class_id
        level = np.clip(np.rint(4 * np.log2(size / 3.2)), 1, 15).astype(int)
        return level // 4, level
    return kps.octave, kps.class_id


def to_cv(kps: ImageKeypoints, octave, class_id, dx: float = 0.0) -> list:
    return [cv2.KeyPoint(float(x) + dx, float(y) + dx, float(s), float(a), float(r), int(o), int(c))
            for x, y, s, a, r, o, c in zip(kps.x, kps.y, kps.size, kps.angle, kps.response, octave, class_id)]


def one_by_one(ext, gray, cv_kps, dim):
    """Plain OpenCV, one keypoint per call: (rows, kept mask)."""
    rows = np.zeros((len(cv_kps), dim), dtype=np.float64)
    kept = np.zeros(len(cv_kps), dtype=bool)
    for i, k in enumerate(cv_kps):
        out, d = ext.compute(gray, [k])
        if len(out) == 1:
            rows[i], kept[i] = d[0], True
    return rows, kept


def merge(*parts: ImageKeypoints) -> ImageKeypoints:
    return ImageKeypoints(*(np.concatenate([getattr(p, f) for p in parts]) for f in ImageKeypoints.__dataclass_fields__))


@pytest.fixture(scope="module")
def image(pristine: Path) -> Path:
    return pristine / "1.ppm"


@pytest.fixture(scope="module")
def gray(image: Path) -> np.ndarray:
    return read_image(image)


def border_keypoints(shape) -> ImageKeypoints:
    """Keypoints OpenCV drops: on the border and in the corners, and one too large for BRISK/FREAK."""
    h, w = shape
    return keypoints_from_cv([
        cv2.KeyPoint(0, 0, 10, 30), cv2.KeyPoint(w - 1, h - 1, 5, 100), cv2.KeyPoint(5, 100, 3, 200),
        cv2.KeyPoint(w / 2, 2, 12, 10), cv2.KeyPoint(100, 100, 200, 45), cv2.KeyPoint(30, 30, 20, 10),
        cv2.KeyPoint(w - 20, h / 2, 60, 300),
    ])


@pytest.fixture(scope="module")
def keypoint_sets(gray) -> dict:
    """Raw detections (no border rule: keypoints near the border stay) per detector."""
    sets = {d: detect(d, gray, p) for d, p in DETECTOR_PARAMS.items()}
    sets["sift"] = merge(sets["sift"], border_keypoints(gray.shape))
    return sets


CASES = [(f, "sift") for f in sorted({**BINARY, **FLOAT})] + [(f, d) for f, d in sorted(OWN.items())]


@pytest.mark.parametrize("family, detector", CASES)
def test_one_row_per_keypoint_equal_to_plain_opencv(family, detector, image, gray, keypoint_sets):
    kps = keypoint_sets[detector]
    kpset = {"detector": detector, "params": DETECTOR_PARAMS[detector]}
    params = check_descriptor_params(family, {}, "descriptors.d.params")
    ours = compute_descriptors(family, params, image, kps, kpset, "test")
    width = {**BINARY, **FLOAT}[family]
    assert ours.shape == (len(kps), width) and len(kps) > 50
    assert ours.dtype == (np.uint8 if family in BINARY else np.float32)
    assert get_family(family).binary == (family in BINARY)
    np.testing.assert_array_equal(compute_descriptors(family, params, image, kps, kpset, "test"), ours)  # deterministic

    octave, class_id = documented_fields(family, kps, gray.shape, detector)
    ref_kps = to_cv(kps, octave, class_id)
    ext = reference_extractor(family, detector)
    if family in DROPPING:
        ref, kept = one_by_one(ext, gray, ref_kps, width)
        assert detector != "sift" or (~kept).sum() >= 4, "the border keypoints must exercise the rescue"
    else:  # OpenCV keeps every keypoint: one batch call (KAZE/AKAZE/DAISY rebuild their image pyramid per call)
        out, ref = ext.compute(gray, ref_kps)
        assert len(out) == len(ref_kps)
        kept = np.ones(len(kps), dtype=bool)
    np.testing.assert_array_equal(ours[kept], ref[kept].astype(ours.dtype))


@pytest.mark.parametrize("family", sorted(SINGLE_SCALE))
def test_rescued_rows_equal_opencv_on_a_reflect_padded_image(family, image, gray, keypoint_sets):
    """Keypoints plain OpenCV drops get the descriptor of the BORDER_REFLECT_101 extension of the
    image; for BRIEF, LATCH and FREAK that does not depend on the margin (here 700 px, descbench
    uses 32, 64, ...). BRISK's pattern positions are float sums of the keypoint coordinates, so a
    different shift flips a few bits by rounding (measured on the demo image: 22 of 42368 bytes
    differ over all keypoints, interior ones included): BRISK is held to >= 99 % equal bits."""
    kps = keypoint_sets["sift"]
    ours = compute_descriptors(family, check_descriptor_params(family, {}, "p"), image, kps, {"detector": "sift"}, "test")
    ext = reference_extractor(family, "sift")
    _, kept = one_by_one(ext, gray, to_cv(kps, kps.octave, kps.class_id), ours.shape[1])
    m = 700
    padded = cv2.copyMakeBorder(gray, m, m, m, m, cv2.BORDER_REFLECT_101)
    ref, kept_padded = one_by_one(ext, padded, to_cv(kps, kps.octave, kps.class_id, dx=m), ours.shape[1])
    assert kept_padded.all() and (~kept).sum() >= 4
    rescued = ~kept
    if family == "brisk":
        assert 1 - np.unpackbits(ours[rescued] ^ ref[rescued].astype(np.uint8), axis=1).mean() >= 0.99
    else:
        np.testing.assert_array_equal(ours[rescued], ref[rescued].astype(np.uint8))


def test_orb_rescue_agreement_with_padded_image(image, gray, keypoint_sets):
    """ORB resamples its pyramid from the padded image, so a rescued keypoint above level 0 may
    differ from the same computation with another margin; at level 0 it may not."""
    kps = keypoint_sets["sift"]
    ours = compute_descriptors("orb", check_descriptor_params("orb", {}, "p"), image, kps, {"detector": "sift"}, "test")
    octave, _ = documented_fields("orb", kps, gray.shape, "sift")
    _, kept = one_by_one(cv2.ORB_create(), gray, to_cv(kps, octave, kps.class_id), 32)
    m = 700
    padded = cv2.copyMakeBorder(gray, m, m, m, m, cv2.BORDER_REFLECT_101)
    ref, kept_padded = one_by_one(cv2.ORB_create(), padded, to_cv(kps, octave, kps.class_id, dx=m), 32)
    rescued = ~kept
    assert kept_padded.all() and rescued.sum() >= 4
    level0 = rescued & (octave == 0)
    assert level0.sum() >= 4
    np.testing.assert_array_equal(ours[level0], ref[level0].astype(np.uint8))
    upper = rescued & (octave > 0)
    assert upper.any()
    # measured on the demo image: 89.8 % of the bits agree (the pyramid grids differ by a
    # fraction of a pixel); a descriptor of unrelated content would agree on about 50 %
    agree = 1 - np.unpackbits(ours[upper] ^ ref[upper].astype(np.uint8), axis=1).mean()
    assert agree >= 0.85


@pytest.mark.parametrize("family, kwargs", [
    ("akaze", {}),
    ("akaze_kaze", {"descriptor_type": XF.AKAZE_DESCRIPTOR_KAZE}),
])
def test_akaze_on_its_own_keypoints_equals_detect_and_compute(family, kwargs, image, gray):
    ref_kps, ref = XF.AKAZE_create(**kwargs).detectAndCompute(gray, None)
    kps = keypoints_from_cv(ref_kps)
    kpset = {"detector": "akaze", "params": DETECTOR_PARAMS["akaze"]}
    ours = compute_descriptors(family, check_descriptor_params(family, {}, "p"), image, kps, kpset, "test")
    np.testing.assert_array_equal(ours, ref)
    # AKAZE's size rule: the level derived from the size is the detected level
    foreign = compute_descriptors(family, check_descriptor_params(family, {}, "p"), image, kps, {"detector": "sift"}, "test")
    np.testing.assert_array_equal(foreign, ref)


def test_kaze_on_its_own_keypoints_equals_compute_on_them(image, gray):
    """KAZE's levels are kept on its own set. (Plain OpenCV's KAZE detectAndCompute itself differs
    from compute on the keypoints it detected, by up to 0.73 per value on the demo image: a
    descriptor family computes at given keypoints, so compute is the reference.)"""
    kaze = XF.KAZE_create()
    ref_kps, ref = kaze.compute(gray, kaze.detect(gray, None))
    kps = keypoints_from_cv(kaze.detect(gray, None))
    kpset = {"detector": "kaze", "params": DETECTOR_PARAMS["kaze"]}
    ours = compute_descriptors("kaze", check_descriptor_params("kaze", {}, "p"), image, kps, kpset, "test")
    np.testing.assert_array_equal(ours, ref)
    # with another scale space the detector's levels are not used: levels come from the sizes
    other = compute_descriptors("kaze", check_descriptor_params("kaze", {"n_octave_layers": 3}, "p"), image, kps, kpset, "test")
    assert other.shape == ref.shape and not np.array_equal(other, ref)


def test_orb_level_from_size_is_the_detected_level(gray, keypoint_sets):
    from descbench.descriptors.opencv_binary import orb_level_from_size

    kps = keypoint_sets["orb"]
    assert len(np.unique(kps.octave)) >= 4
    np.testing.assert_array_equal(orb_level_from_size(kps.size, 31, 1.2, 8), kps.octave)


@pytest.mark.bad_input
def test_unrescuable_keypoint_raises_dataerror_naming_the_file(scene):
    image = scene / "1.ppm"
    kps = keypoints_from_cv([cv2.KeyPoint(50, 50, 10, 0), cv2.KeyPoint(-5000, 40, 10, 0)])
    for family in ("brief", "orb", "freak"):
        with pytest.raises(DataError, match=r"1\.ppm.*dropped 1 of 2 keypoints.*'" + family + "'.*outside"):
            compute_descriptors(family, check_descriptor_params(family, {}, "p"), image, kps, {"detector": "sift"}, "test")


@pytest.mark.bad_input
@pytest.mark.parametrize("family", sorted({**BINARY, **FLOAT}))
def test_non_finite_keypoints_raise_dataerror(family, scene):
    """OpenCV would drop them (BRIEF), return garbage (BEBLID) or zeros (VGG): never a row."""
    kps = keypoints_from_cv([cv2.KeyPoint(50, 50, 10, 0), cv2.KeyPoint(float("nan"), 40, 10, 0)])
    with pytest.raises(DataError, match=r"1\.ppm: 1 keypoints have a non-finite.*row 1"):
        compute_descriptors(family, check_descriptor_params(family, {}, "p"), scene / "1.ppm", kps, {"detector": "sift"}, "t")


@pytest.mark.bad_input
def test_kaze_rejects_keypoints_too_small_for_its_sampling_step(scene):
    kps = keypoints_from_cv([cv2.KeyPoint(50, 50, 10, 0), cv2.KeyPoint(60, 60, 0.8, 0)])
    for family in ("kaze", "akaze_kaze"):
        with pytest.raises(DataError, match=r"1\.ppm.*1 keypoints are too small.*row 1"):
            compute_descriptors(family, check_descriptor_params(family, {}, "p"), scene / "1.ppm", kps, {"detector": "sift"}, "t")


@pytest.mark.bad_input
def test_missing_image_is_a_dataerror(tmp_path):
    kps = keypoints_from_cv([cv2.KeyPoint(50, 50, 10, 0)])
    with pytest.raises(DataError, match="does not exist"):
        compute_descriptors("brief", check_descriptor_params("brief", {}, "p"), tmp_path / "nope.ppm", kps, {"detector": "sift"}, "t")


def test_empty_keypoints_give_empty_rows_of_the_right_width(image):
    empty = keypoints_from_cv([])
    for family, width in {**BINARY, **FLOAT}.items():
        d = compute_descriptors(family, check_descriptor_params(family, {}, "p"), image, empty, {"detector": "sift"}, "t")
        assert d.shape == (0, width) and d.dtype == (np.uint8 if family in BINARY else np.float32), family


@pytest.mark.parametrize("family, params, ref, width", [
    ("brief", {"bytes": 16}, lambda: XF.BriefDescriptorExtractor_create(16), 16),
    ("latch", {"bytes": 64, "rotation_invariance": False}, lambda: XF.LATCH_create(64, False), 64),
    ("beblid", {"n_bits": 256, "scale_factor": 3.0}, lambda: XF.BEBLID_create(3.0, XF.BEBLID_SIZE_256_BITS), 32),
    ("teblid", {"n_bits": 512}, lambda: XF.TEBLID_create(6.75, XF.TEBLID_SIZE_512_BITS), 64),
    ("binboost", {"desc": "bgm_hard"}, lambda: XF.BoostDesc_create(desc=101, scale_factor=6.75), 16),
    ("akaze", {"descriptor_size": 256, "upright": True}, lambda: XF.AKAZE_create(XF.AKAZE_DESCRIPTOR_MLDB_UPRIGHT, 256), 32),
    ("kaze", {"extended": True}, lambda: XF.KAZE_create(extended=True), 128),
    ("daisy", {"norm": "sift", "q_hist": 4}, lambda: XF.DAISY_create(norm=XF.DAISY_NRM_SIFT, q_hist=4), 100),
    ("vgg", {"desc": 64, "scale_factor": 5.0}, lambda: XF.VGG_create(desc=102, scale_factor=5.0), 64),
])
def test_parameters_reach_opencv(family, params, ref, width, image, gray):
    kps = detect("sift", gray, {})
    kps = kps.take(np.flatnonzero((kps.x > 60) & (kps.x < gray.shape[1] - 60) & (kps.y > 60) & (kps.y < gray.shape[0] - 60)))
    ours = compute_descriptors(family, check_descriptor_params(family, params, "p"), image, kps, {"detector": "sift"}, "t")
    octave, class_id = documented_fields(family, kps, gray.shape, "sift")
    out, expected = ref().compute(gray, to_cv(kps, octave, class_id))
    assert ours.shape == (len(kps), width) and len(out) == len(kps) > 50
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("detector, scale", [("orb", 1.0), ("sift", 6.75), ("gftt", 6.25), ("precomputed", 6.25), ("fast", 5.0)])
def test_beblid_scale_factor_follows_the_root_detector(detector, scale, image, gray):
    kps = detect("sift", gray, {})
    ours = compute_descriptors("beblid", check_descriptor_params("beblid", {}, "p"), image, kps, {"detector": detector}, "t")
    _, ref = XF.BEBLID_create(scale).compute(gray, to_cv(kps, kps.octave, kps.class_id))
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.bad_input
@pytest.mark.parametrize("family, key, value", [
    ("brief", "bytes", 20), ("vgg", "desc", 100), ("daisy", "norm", "l2"), ("binboost", "desc", "lbgm"),
    ("beblid", "n_bits", 128), ("akaze", "diffusivity", "gauss"),
])
def test_invalid_parameter_values_are_config_errors(family, key, value, image, gray):
    kps = keypoints_from_cv([cv2.KeyPoint(100, 100, 10, 0)])
    with pytest.raises(ConfigError, match=f"'{family}'.*{key}"):
        compute_descriptors(family, check_descriptor_params(family, {key: value}, "p"), image, kps, {"detector": "sift"}, "t")


@pytest.mark.bad_input
def test_unknown_parameter_names_are_config_errors():
    with pytest.raises(ConfigError, match="did you mean 'n_bits'"):
        check_descriptor_params("teblid", {"nbits": 256}, "descriptors.t.params")


def test_orb_keypoint_octave_reads_the_octave_field_as_the_level(image, gray, keypoint_sets):
    """``level: keypoint_octave`` passes each keypoint's own octave to ORB (the workbench's
    ORBWrapper); a level past n_levels - 1 is used as OpenCV uses it (one more pyramid level)."""
    kps = keypoint_sets["orb"]
    p = check_descriptor_params("orb", {"level": "keypoint_octave"}, "p")
    assert p["level"] == "keypoint_octave" and check_descriptor_params("orb", {}, "p")["level"] == "from_size"
    shifted = ImageKeypoints(**{**{f: getattr(kps, f) for f in ImageKeypoints.__dataclass_fields__},
                                "octave": np.full(len(kps), 9, dtype=np.int32)})
    ours = compute_descriptors("orb", p, image, shifted, {"detector": "orb"}, "t")
    inner = np.flatnonzero((kps.x > 40) & (kps.x < gray.shape[1] - 40) & (kps.y > 40) & (kps.y < gray.shape[0] - 40))
    cv_kps = to_cv(shifted, shifted.octave, np.arange(len(kps)))
    got, ref = cv2.ORB_create().compute(gray, [cv_kps[i] for i in inner])
    np.testing.assert_array_equal(ours[[k.class_id for k in got]], ref)
    default = compute_descriptors("orb", check_descriptor_params("orb", {}, "p"), image, shifted, {"detector": "orb"}, "t")
    assert not np.array_equal(default, ours)  # from_size ignores the octave field


def test_orb_top_level_is_the_last_non_empty_pyramid_level():
    from descbench.descriptors.opencv_binary import orb_top_level

    # the 384 x 303 demo image: 303 / 1.2^35 = 0.51 rounds to 1 px, 303 / 1.2^36 = 0.43 to 0
    assert orb_top_level((303, 384), 1.2) == 35
    assert orb_top_level((1, 1), 1.2) == 3  # 1 / 1.2^3 = 0.58 rounds to 1, 1 / 1.2^4 = 0.48 to 0
    assert orb_top_level((1, 1), 2.0) == 0


@pytest.mark.bad_input
@pytest.mark.parametrize("octave, why", [(0x00ff0201, "a SIFT set's packed octave field"), (-1, "octave -1"), (36, "octave 36")])
def test_orb_keypoint_octave_refuses_octaves_opencv_cannot_describe(octave, why, scene):
    from conftest import raises_naming

    kps = keypoints_from_cv([cv2.KeyPoint(50, 50, 10, 0, 0, 0), cv2.KeyPoint(60, 60, 10, 0, 0, octave)])
    p = check_descriptor_params("orb", {"level": "keypoint_octave"}, "p")
    raises_naming(lambda: compute_descriptors("orb", p, scene / "1.ppm", kps, {"detector": "sift"}, "t"),
                  "1.ppm", "keypoint row 1", why, "'level: keypoint_octave'", "use 'level: from_size'")
