"""descbench's ``composite`` and ``onnx`` families against the C++ DescriptorWorkbench's own
CompositeDescriptorExtractor and DNNPatchWrapper rows (``tests/data/dw/workbench_composite_dnn.npz``,
built by ``tests/data/dw/make_composite_dnn_fixtures.py``; v_coins, the 40 SIFT keypoints of
workbench_descriptors.npz and, for DNN_PATCH, the random keypoints of workbench_libtorch.npz).

Measured (max abs difference; composite rows: the aggregation's own scale, unit rows after L2):

* COMPOSITE, every aggregation (average, weighted_avg 0.3 / 0.7, max, min, concatenate of HoNC and
  DSPSIFT_V2; channel_wise 128 and 384 of DSPSIFT_V2 and RGBSIFT), image 2: descbench's
  ``composite.aggregate`` (float64, then float32) on the workbench's own component rows equals its
  float32 aggregation to 6e-8 (``final_norm: none`` against ``extract()``, ``l2`` against the
  runner's rows): one float32 rounding; with descbench's own component rows, 4.5e-7.
* DNN_PATCH (``tests/data/dw/tiny_patch_cnn.onnx``): descbench as it is (``warp:
  opencv_fixed_point``, the default: the workbench's OpenCV (<= 4.10) fixed-point warpAffine,
  :mod:`descbench.descriptors.cv_warp`), 3e-8 on every row with either backend; the same on the
  test's own port of that warp (``opencv46_warp_affine``); with ``warp: opencv`` (pip cv2 5.0's float
  warpAffine, test_dw_libtorch.py) 9.1e-5 (measured 9.0e-5).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from descbench.datasets.demo import generate_scene
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import composite as C
from descbench.descriptors import kornia_nets as kn
from descbench.descriptors import onnx_net as O
from descbench.descriptors import patch_sampling as ps
from descbench.keypoints import ImageKeypoints

DW = Path(__file__).resolve().parents[1] / "data" / "dw"
FIXTURE = DW / "workbench_composite_dnn.npz"
MODEL = DW / "tiny_patch_cnn.onnx"
SIFT_SET = {"detector": "sift"}
TOL = 1e-6
AGGREGATION_TOL = 1e-7  # float64 then float32 against float32 arithmetic: one float32 rounding (measured 6e-8)
CV5_WARP_BOUND = 2e-4  # warp: opencv (pip cv2 5.0's float warp) against the workbench's OpenCV warp (measured 9.1e-5)
# the components' workbench types -> descbench's settings (as tests/interop/test_dw_descriptors.py)
COMPONENTS = {"HoNC": ("honc", {}), "DSPSIFT_V2": ("dspsift", {"convention": "workbench"}),
              "RGBSIFT": ("rgbsift", {"convention": "workbench"})}
DNN_CASES = [(b, s, i) for b in ("opencv", "onnxruntime") for s in ("sift", "warp") for i in ("1", "2")]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, DW / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


G = load("make_composite_dnn_fixtures")  # COMPOSITES: the harness's composites
WARP = load("make_libtorch_fixtures").opencv46_warp_affine


@pytest.fixture(scope="module")
def fixture():
    return np.load(FIXTURE, allow_pickle=False)


@pytest.fixture(scope="module")
def others():
    return np.load(DW / "workbench_descriptors.npz", allow_pickle=False), np.load(DW / "workbench_libtorch.npz", allow_pickle=False)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = tmp_path_factory.mktemp("dwcompdnn")
    generate_scene("v_coins", out, seed=0)
    return out / "v_coins"


def keypoints(k: np.ndarray) -> ImageKeypoints:
    f32 = lambda c: k[:, c].astype(np.float32)  # noqa: E731
    return ImageKeypoints(f32(0), f32(1), f32(2), f32(3), f32(4), k[:, 5].astype(np.int32), k[:, 6].astype(np.int32),
                          np.arange(len(k), dtype=np.int32))


def composite_params(name: str, final_norm: str) -> dict:
    comps, agg, weights, out_dim = G.COMPOSITES[name]
    raw = {"components": [{"descriptor": c, **({"weight": weights[i]} if weights else {})} for i, c in enumerate(comps)],
           "aggregation": agg, "final_norm": final_norm, **({"output_dimension": out_dim} if out_dim else {})}
    return check_descriptor_params("composite", raw, "d")


@pytest.fixture(scope="module")
def our_components(others, images):
    base, _ = others
    kps = keypoints(base["keypoints__2"])
    return {t: compute_descriptors(f, check_descriptor_params(f, p, "d"), images / "2.ppm", kps, SIFT_SET, "d")
            for t, (f, p) in COMPONENTS.items()}


@pytest.mark.parametrize("name", sorted(G.COMPOSITES))
def test_aggregation_of_the_workbenchs_component_rows(fixture, others, name):
    base, _ = others
    comps = G.COMPOSITES[name][0]
    blocks = [base[f"{c}__2"] for c in comps]  # the component wrappers' extract() rows
    for final_norm, key in (("none", f"{name}__2"), ("l2", f"{name}__pipeline__2")):
        got = C.aggregate(blocks, composite_params(name, final_norm), comps, "d")
        want = fixture[key]
        assert got.shape == want.shape and got.dtype == np.float32
        diff = float(np.abs(got.astype(np.float64) - want).max())
        assert diff <= AGGREGATION_TOL, f"{name} final_norm {final_norm}: max abs difference {diff:.3g}"


@pytest.mark.parametrize("name", sorted(G.COMPOSITES))
def test_composite_of_descbenchs_components(fixture, our_components, name):
    comps = G.COMPOSITES[name][0]
    got = C.aggregate([our_components[c] for c in comps], composite_params(name, "l2"), comps, "d")
    diff = float(np.abs(got.astype(np.float64) - fixture[f"{name}__pipeline__2"]).max())
    assert diff <= TOL, f"{name}: max abs difference {diff:.3g}"


def onnx_params(backend: str) -> dict:
    return check_descriptor_params("onnx", {"model": str(MODEL), "backend": backend}, "d")


def dnn_keypoints(others, kset: str, img: str) -> np.ndarray:
    base, lt = others
    return base[f"keypoints__{img}"] if kset == "sift" else lt[f"keypoints__warp__{img}"]


@pytest.mark.parametrize("backend,kset,img", DNN_CASES)
def test_dnn_patch_rows(fixture, others, images, backend, kset, img):
    """descbench as it is (the fixed-point warp): within 1e-6; with ``warp: opencv`` (cv2 5.0's float
    warp, module docstring) within CV5_WARP_BOUND and over 1e-6; its normalisation, network run and
    rows on the test's port of the workbench's warp: within 1e-6."""
    import cv2

    params = onnx_params(backend)
    assert params["warp"] == "opencv_fixed_point"
    k = dnn_keypoints(others, kset, img)
    want = fixture[f"DNN_PATCH__pipeline__{kset}__{img}"].astype(np.float64)
    got = compute_descriptors("onnx", params, images / f"{img}.ppm", keypoints(k), {}, "d")
    assert got.shape == want.shape and got.dtype == np.float32
    diff = float(np.abs(got - want).max())
    assert diff <= TOL, f"DNN_PATCH {backend} {kset} image {img}: max abs difference {diff:.3g}"
    float_warp = check_descriptor_params("onnx", {"model": str(MODEL), "backend": backend, "warp": "opencv"}, "d")
    cv2_warp = compute_descriptors("onnx", float_warp, images / f"{img}.ppm", keypoints(k), {}, "d")
    diff = float(np.abs(cv2_warp - want).max())
    assert diff <= CV5_WARP_BOUND, f"DNN_PATCH {backend} {kset} image {img} warp opencv: max abs difference {diff:.3g}"
    if tuple(int(v) for v in cv2.__version__.split(".")[:2]) >= (4, 11):
        assert diff > TOL
    grey = kn.grey_image(images / f"{img}.ppm")
    net, conv = O.load_net(params, "d"), O.convention(params)
    u8 = np.stack([WARP(grey, ps.patch_affine(*r[:4], conv)) for r in k])
    diff = float(np.abs(O.describe_patches_u8(u8, net, params, conv) - want).max())
    assert diff <= TOL, f"DNN_PATCH {backend} {kset} image {img} on the workbench's warp: max abs difference {diff:.3g}"


def test_the_fixture_is_the_harness_s(fixture):
    import json

    meta = json.loads(str(fixture["meta"][0]))
    assert meta["workbench_commit"] == "b834e17" and set(meta["composites"]) == set(G.COMPOSITES)
    assert MODEL.stat().st_size < 100_000
