"""descbench's workbench descriptor settings against the C++ DescriptorWorkbench's own rows
(tests/data/dw/workbench_descriptors.npz, built by tests/data/dw/make_descriptor_fixtures.py: its
wrappers run on the demo scene v_coins, images 1 and 2, at its keypoints, raw and after its
runner's default post-processing). Each setting must equal the runner's rows to 1e-6 (unit rows),
and each kernel the wrapper's raw rows to 1e-6 of their L2 norm (HoWH: see its test)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from descbench.datasets.demo import generate_scene
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import colourhist as C
from descbench.keypoints import ImageKeypoints

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "dw" / "workbench_descriptors.npz"
SIFT_SET = {"detector": "sift"}
TOL = 1e-6

# the workbench's DescriptorType -> descbench's setting that reproduces its runner's rows
SETTINGS = {
    "vSIFT": ("sift", {"convention": "vsift"}),
    "RGBSIFT": ("rgbsift", {"convention": "workbench"}),
    "RGBSIFT_CHANNEL_AVG": ("rgbsift", {"convention": "workbench", "channels": "average"}),
    "HoNC": ("honc", {}),
    "DSPSIFT_V2": ("dspsift", {"convention": "workbench"}),
    "DSPRGBSIFT_V2": ("dsprgbsift", {"convention": "workbench"}),
    "DSPHOWH_V2": ("dsp", {"base": {"family": "howh"}, "image": "base_pyramid"}),
    # DSPHOWH_V2 with use_color: true (the harness's variant; the runner's default hands it the grey image)
    "DSPHOWH_V2_COLOR": ("dsp", {"base": {"family": "howh"}, "image": "base_pyramid", "colour": True}),
    "DSPHONC_V2": ("dsp", {"base": {"family": "honc"}, "image": "base_pyramid", "colour": True}),
    "DSPSIFT": ("dspsift", {"convention": "workbench_v1"}),
    # DSPSIFT with scales [0.85, 1.0, 1.3] (resampled to 0.85, 1.075, 1.3; one more octave) and [1.5]
    "DSPSIFT_S085_130": ("dspsift", {"convention": "workbench_v1", "scales": [0.85, 1.0, 1.3]}),
    "DSPSIFT_S150": ("dspsift", {"convention": "workbench_v1", "scales": [1.5]}),
}


@pytest.fixture(scope="module")
def fixture():
    return np.load(FIXTURE, allow_pickle=False)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = tmp_path_factory.mktemp("dwdesc")
    generate_scene("v_coins", out, seed=0)
    return out / "v_coins"


def keypoints(fx, img: str, key: str = "keypoints") -> ImageKeypoints:
    k = fx[f"{key}__{img}"]
    n = len(k)
    f32 = lambda c: k[:, c].astype(np.float32)  # noqa: E731
    return ImageKeypoints(f32(0), f32(1), f32(2), f32(3), f32(4), k[:, 5].astype(np.int32), k[:, 6].astype(np.int32),
                          np.arange(n, dtype=np.int32))


@pytest.mark.parametrize("img", ["1", "2"])
@pytest.mark.parametrize("dtype", sorted(SETTINGS))
def test_setting_equals_the_workbench_runners_rows(fixture, images, dtype, img):
    family, params = SETTINGS[dtype]
    kps = keypoints(fixture, img)
    want = fixture[f"{dtype}__pipeline__{img}"]
    got = compute_descriptors(family, check_descriptor_params(family, params, "d"), images / f"{img}.ppm", kps, SIFT_SET, "d")
    assert got.shape == want.shape and got.dtype == np.float32
    diff = float(np.abs(got.astype(np.float64) - want).max())
    assert diff <= TOL, f"{dtype} image {img}: max abs difference {diff:.3g}"


def variation(fx, key: str) -> float:
    """How far the workbench's own array ``key`` moves between its builds (meta: -march=native,
    OpenCV without AVX2): the precision the workbench itself has on it."""
    meta = json.loads(str(fx["meta"][0]))
    return max(v[key][0] for v in meta["variation"].values())


@pytest.mark.parametrize("img", ["1", "2"])
def test_kernels_equal_the_workbench_wrappers_raw_rows(fixture, images, img):
    """Before the runner's normalisation: HoNC (the wrapper's L2-normalised rows), vSIFT (rows of
    L2 norm 512), DSPSIFT (the mean of rows of norm 512) and RGBSIFT_CHANNEL_AVG (unnormalised)
    within 1e-6 of their rows' L2 norm. HoWH
    (rows of L2 norm 307.2): within the workbench's own build-to-build variation (meta), not 1e-6: on this
    nearly grey image (channels differ by <= 13 of 255) the hue, 60 (g - b) / (max - min) of the
    blurred values, moves by whole bins with the pyramid's last bits, which differ between OpenCV
    builds (the workbench's own rows move by up to 0.009 between its builds)."""
    import cv2

    from descbench.descriptors import rgbsift as R
    from descbench.descriptors import sift_kernel as K

    kps = keypoints(fixture, img)
    bgr = cv2.imread(str(images / f"{img}.ppm"), cv2.IMREAD_COLOR)
    blocks = [R.workbench_sift_on_channel(np.ascontiguousarray(bgr[:, :, c]), kps, kps.octave, norm_factor=3.0) for c in (0, 1, 2)]
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    from descbench.descriptors.dspsift import workbench_v1_dsp

    ours = {"HoNC": K.cv_normalize_rows(C.family_rows("honc", bgr, kps, kps.octave, "d")),
            "DSPSIFT": workbench_v1_dsp(grey, kps, kps.octave, [1.0, 1.5, 2.0]),
            "vSIFT": R.workbench_sift_on_channel(grey, kps, kps.octave),
            "RGBSIFT_CHANNEL_AVG": R.average_blocks(blocks),
            "HoWH": C.family_rows("howh", bgr, kps, kps.octave, "d")}
    for dtype, got in ours.items():
        want = fixture[f"{dtype}__{img}"]
        scale = float(np.linalg.norm(want.astype(np.float64), axis=1).max())  # the rows' L2 norm
        diff = float(np.abs(got.astype(np.float64) - want).max())
        tol = max(TOL * scale, variation(fixture, f"{dtype}__{img}")) if dtype == "HoWH" else TOL * scale
        assert diff <= tol, f"{dtype} image {img}: max abs difference {diff:.3g} on rows of L2 norm {scale:.4g}"


@pytest.mark.parametrize("img", ["1", "2"])
@pytest.mark.parametrize("dtype", ["DSPHONC_V2", "DSPHOWH_V2", "DSPSIFT_V2", "DSPRGBSIFT_V2"])
def test_dsp_levels_are_the_workbenchs(fixture, img, dtype):
    """computeDSP's pyramid level per (keypoint, scale), clamping and skipping included, as the
    harness recorded them (``<TYPE>__dspindex__<img>``)."""
    from descbench.descriptors.dspsift import workbench_dsp_layout, workbench_scale_geometry

    kps = keypoints(fixture, img)
    rec = fixture[f"{dtype}__dspindex__{img}"]
    first, n_oct = workbench_dsp_layout(kps.octave, [1.0, 1.5, 2.0])
    n_levels = n_oct * 6
    assert set(rec[:, 6]) == {n_levels}
    for s, a in enumerate([1.0, 1.5, 2.0]):
        level, *_, ok = workbench_scale_geometry(kps, a, first, n_levels)
        mine = rec[rec[:, 1] == s]
        np.testing.assert_array_equal(mine[:, 0], np.arange(len(kps)))
        np.testing.assert_array_equal(np.where(ok, level, -1), np.where(mine[:, 7] == 2, -1, mine[:, 5]))


def test_the_fixture_is_the_one_these_settings_reproduce(fixture):
    meta = json.loads(str(fixture["meta"][0]))
    assert meta["workbench_commit"] == "b834e17" and meta["default_params"]["scales"] == [1.0, 1.5, 2.0]
    assert {t: m["input"] for t, m in meta["types"].items() if t in ("DSPHOWH_V2", "DSPHONC_V2", "HoNC")} == {
        "DSPHOWH_V2": "gray", "DSPHONC_V2": "color", "HoNC": "color"}  # colour: false / true in SETTINGS


@pytest.mark.parametrize("img", ["1", "2"])
@pytest.mark.parametrize("level", ["keypoint_octave", "from_size"])
def test_orb_rows_equal_the_workbench_orbwrappers_bit_for_bit(fixture, images, img, level):
    """ORBWrapper (OpenCV 4.6 C++) against descbench's orb (the installed cv2) on 40 ORB keypoints
    per image: Hamming distance 0 on every row. ORBWrapper returns ORB's rows in ORB's order (grouped
    by octave; ``ORB__order__<img>``: the keypoint each row describes), not the keypoints' order. On
    ORB's own keypoints ``from_size`` picks their octave, so both levels agree."""
    kps = keypoints(fixture, img, "keypoints_orb")
    order = fixture[f"ORB__order__{img}"]
    assert sorted(order) == list(range(len(kps))) and not np.array_equal(order, np.arange(len(kps)))
    assert len(set(kps.octave)) >= 4
    ours = compute_descriptors("orb", check_descriptor_params("orb", {"level": level}, "d"), images / f"{img}.ppm", kps,
                               {"detector": "orb"}, "d")
    hamming = np.unpackbits(ours[order] ^ fixture[f"ORB__{img}"], axis=1).sum(axis=1)
    assert hamming.max() == 0, f"image {img}: {int((hamming > 0).sum())} rows differ, up to {int(hamming.max())} bits"


def test_the_workbench_orb_on_sift_keypoints_and_after_its_runner(fixture, images):
    """On SIFT keypoints (packed octave fields) OpenCV's ORB fails and ORBWrapper returns no rows
    (meta records the exception); descbench's ``level: keypoint_octave`` refuses them by name. The
    runner's default ``normalize_after_pooling`` L2-normalises ORB's uint8 rows in uint8: every
    byte becomes 0."""
    from descbench.errors import DataError

    meta = json.loads(str(fixture["meta"][0]))
    for img in ("1", "2"):
        assert fixture[f"ORB_ON_SIFT_KEYPOINTS__{img}"].size == 0
        assert any("Insufficient memory" in line for line in meta["orb_harness_manifest"]["sift_keypoints"][img])
        assert fixture[f"ORB__pipeline__{img}"].shape == (40, 32) and not fixture[f"ORB__pipeline__{img}"].any()
    params = check_descriptor_params("orb", {"level": "keypoint_octave"}, "d")
    with pytest.raises(DataError, match="SIFT set's packed octave field"):
        compute_descriptors("orb", params, images / "1.ppm", keypoints(fixture, "1"), SIFT_SET, "d")
