"""descbench's ``hardnet`` / ``sosnet`` (``patch_convention: workbench_libtorch``) against the C++
DescriptorWorkbench's own LibTorchWrapper rows (``tests/data/dw/workbench_libtorch.npz``, built by
``tests/data/dw/make_libtorch_fixtures.py``: LIBTORCH_HARDNET / LIBTORCH_SOSNET through its runner's
NoPooling, on v_coins images 1 and 2, at 40 SIFT keypoints and at random keypoints with fractional
positions, sizes and angles; nets with seeded random weights, traced as the workbench traces them).

Measured (unit rows, max abs difference):

* descbench as it is (``warp: opencv_fixed_point``, the convention's default: OpenCV <= 4.10's
  fixed-point ``warpAffine``, :mod:`descbench.descriptors.cv_warp`): 3.1e-7 (HardNet), 3.0e-8
  (SOSNet) on every row, flip rows included (the convention follows the LibTorch wrapper's matrix
  order).
* ``warp: opencv`` (pip cv2 5.0's float warp of OpenCV >= 4.11, opencv/opencv#25984): up to 0.026
  (HardNet 0.023, SOSNet 0.026); its uint8 patches differ by up to 3 grey levels on ~1/8 of the
  pixels.
* descbench's normalisation and net on the test's own port of the old warp
  (``opencv46_warp_affine``) at the DNN wrapper's matrix order: <= 3.1e-7 on every row except the
  rows whose matrix order flips the 1/32 px rounding (``flip__warp__<img>``: 3 and 4 rows, <= 1.4e-3);
  at the LibTorch wrapper's own matrix order: <= 3.2e-7 on every row.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from descbench.datasets.demo import generate_scene
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import kornia_nets as kn
from descbench.descriptors import patch_sampling as ps
from descbench.keypoints import ImageKeypoints

DW = Path(__file__).resolve().parents[1] / "data" / "dw"
FIXTURE = DW / "workbench_libtorch.npz"
TYPES = {"LIBTORCH_HARDNET": "hardnet", "LIBTORCH_SOSNET": "sosnet"}
CASES = [(t, s, i) for t in TYPES for s in ("sift", "warp") for i in ("1", "2")]
TOL = 1e-6
# warp: opencv (pip cv2 5.0's float warpAffine) against the workbench's OpenCV warp (measured 0.026)
CV5_WARP_BOUND = 0.03
# rows whose patch moves by one 1/32 px rounding step between the two matrix orders (measured 1.4e-3)
FLIP_BOUND = 2e-3


def generator():
    """make_libtorch_fixtures.py as a module: the seeded nets, the matrices, the OpenCV 4.6 warp port."""
    spec = importlib.util.spec_from_file_location("make_libtorch_fixtures", DW / "make_libtorch_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


G = generator()


@pytest.fixture(scope="module")
def fixture():
    return np.load(FIXTURE, allow_pickle=False)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = tmp_path_factory.mktemp("dwlibtorch")
    generate_scene("v_coins", out, seed=0)
    return out / "v_coins"


@pytest.fixture(scope="module")
def params(tmp_path_factory):
    """Per family: params loading the state dict the fixture's TorchScript model was traced from."""
    import torch

    out = tmp_path_factory.mktemp("dwweights")
    got = {}
    for family in TYPES.values():
        path = out / f"{family}.pth"
        torch.save(G.seeded_net(family).state_dict(), path)
        got[family] = check_descriptor_params(family, {"weights": str(path)}, "d")
    return got


def keypoints(k: np.ndarray) -> ImageKeypoints:
    f32 = lambda c: k[:, c].astype(np.float32)  # noqa: E731
    return ImageKeypoints(f32(0), f32(1), f32(2), f32(3), f32(4), k[:, 5].astype(np.int32), k[:, 6].astype(np.int32),
                          np.arange(len(k), dtype=np.int32))


def workbench_warp_rows(family: str, params: dict, image: Path, k: np.ndarray, affine) -> np.ndarray:
    """descbench's normalisation and net on patches warped as the workbench's OpenCV does."""
    grey = kn.grey_image(image)
    u8 = np.stack([G.opencv46_warp_affine(grey, affine(r)) for r in k])
    return kn.forward(family, ps.normalise_patches(u8, ps.LIBTORCH), params)


def row_diff(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got.astype(np.float64) - want).max(axis=1)


def test_the_nets_are_the_fixtures(fixture):
    """The seeded weights the test loads are the ones the fixture's models were traced from."""
    meta = json.loads(str(fixture["meta"][0]))
    assert meta["workbench_commit"] == "b834e17" and meta["weights_seed"] == G.WEIGHTS_SEED
    for family in TYPES.values():
        got = G.weights_checksum(G.seeded_net(family))
        assert got.keys() == meta["weights"][family].keys()
        np.testing.assert_allclose([got[k] for k in got], [meta["weights"][family][k] for k in got], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype,kset,img", CASES)
def test_rows_with_descbenchs_warp(fixture, images, params, dtype, kset, img):
    """descbench as it is (the convention's fixed-point warp): every row within 1e-6 of the workbench's
    (measured 3.1e-7), flip rows included."""
    family = TYPES[dtype]
    assert params[family]["warp"] == "opencv_fixed_point"
    k = fixture[f"keypoints__{kset}__{img}"]
    want = fixture[f"{dtype}__pipeline__{kset}__{img}"]
    got = compute_descriptors(family, params[family], images / f"{img}.ppm", keypoints(k), {}, "d")
    assert got.shape == want.shape and got.dtype == np.float32
    diff = float(row_diff(got, want).max())
    assert diff <= TOL, f"{dtype} {kset} image {img}: max abs difference {diff:.3g}"


@pytest.mark.parametrize("dtype,kset,img", CASES)
def test_rows_with_cv2s_float_warp(fixture, images, params, dtype, kset, img):
    """``warp: opencv`` (pip cv2 5.0's warpAffine): within CV5_WARP_BOUND, and over 1e-6 where cv2's warp is
    the float one of OpenCV >= 4.11 (module docstring)."""
    import cv2

    family = TYPES[dtype]
    k = fixture[f"keypoints__{kset}__{img}"]
    want = fixture[f"{dtype}__pipeline__{kset}__{img}"]
    float_warp = check_descriptor_params(family, {"weights": params[family]["weights"], "warp": "opencv"}, "d")
    assert float_warp["warp"] == "opencv"  # a config key, recorded
    got = compute_descriptors(family, float_warp, images / f"{img}.ppm", keypoints(k), {}, "d")
    diff = float(row_diff(got, want).max())
    assert diff <= CV5_WARP_BOUND, f"{dtype} {kset} image {img}: max abs difference {diff:.3g}"
    if tuple(int(v) for v in cv2.__version__.split(".")[:2]) >= (4, 11):
        assert diff > TOL


@pytest.mark.parametrize("dtype,kset,img", CASES)
def test_rows_with_the_workbenchs_warp(fixture, images, params, dtype, kset, img):
    """On the test's port of the workbench's warp, at the DNN wrapper's matrix order: every row within
    1e-6 but the recorded flip rows (the matrix order moves their 1/32 px rounding), those within
    FLIP_BOUND; at the LibTorch wrapper's own matrix order every row within 1e-6."""
    family = TYPES[dtype]
    k = fixture[f"keypoints__{kset}__{img}"]
    want = fixture[f"{dtype}__pipeline__{kset}__{img}"]
    image = images / f"{img}.ppm"
    flip = fixture[f"flip__warp__{img}"].astype(bool) if kset == "warp" else np.zeros(len(k), bool)
    ours = row_diff(workbench_warp_rows(family, params[family], image, k, lambda r: G.dnn_order_affine(*r[:4])), want)
    over = np.flatnonzero(ours > TOL)
    assert set(over) <= set(np.flatnonzero(flip)), f"{dtype} {kset} image {img}: rows over 1e-6 that are not flip rows: {over}"
    assert float(ours.max()) <= FLIP_BOUND
    theirs = row_diff(workbench_warp_rows(family, params[family], image, k, lambda r: G.libtorch_affine(*r[:4])), want)
    assert float(theirs.max()) <= TOL, f"{dtype} {kset} image {img}: max abs difference {theirs.max():.3g}"


@pytest.mark.parametrize("kset,img", [(s, i) for s in ("sift", "warp") for i in ("1", "2")])
def test_the_warp_port_gives_the_workbenchs_patches(fixture, images, kset, img):
    """The patches LibTorchWrapper hands its network (recorded through a flattening model, then
    L2-normalised by its tensorToMat) are the port's warp at its matrix order, normalised by
    descbench's per-patch convention, to float32 rounding; descbench's warp_patches gives the port's
    uint8 patches. With OpenCV >= 4.11's warp (pip cv2 5.0) every one of these patches differs."""
    import cv2

    rows = fixture[f"patch_rows__{kset}__{img}"]
    k = fixture[f"keypoints__{kset}__{img}"][rows]
    grey = kn.grey_image(images / f"{img}.ppm")
    u8 = np.stack([G.opencv46_warp_affine(grey, G.libtorch_affine(*r[:4])) for r in k])
    z = ps.normalise_patches(u8, ps.LIBTORCH).reshape(len(k), -1).astype(np.float64)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    want = fixture[f"PATCH__{kset}__{img}"]
    assert float(np.abs(z - want).max()) <= 1e-7
    # descbench's own patches (cv_warp's fixed-point warp at the convention's matrix) are the port's
    assert np.array_equal(ps.warp_patches(grey, keypoints(k), ps.LIBTORCH), u8)
    if tuple(int(v) for v in cv2.__version__.split(".")[:2]) >= (4, 11):
        new = np.stack([cv2.warpAffine(grey, G.libtorch_affine(*r[:4]), (32, 32), flags=cv2.INTER_LINEAR,
                                       borderMode=cv2.BORDER_REPLICATE) for r in k])
        assert (new != u8).any(axis=(1, 2)).all()
