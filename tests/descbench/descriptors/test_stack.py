"""Stacked descriptors and user descriptors given as a Python callable."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from descbench.config import validate_config
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import stack as ST
from descbench.errors import ConfigError, DataError
from descbench.keypoints.detectors import detect
from descbench.datasets.layout import read_image

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data"))
SIFT_SET = {"detector": "sift", "params": {"n_features": 0, "n_octave_layers": 3, "contrast_threshold": 0.04,
                                           "edge_threshold": 10, "sigma": 1.6}}


@pytest.fixture(scope="module")
def image_kps(pristine):
    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), SIFT_SET["params"])
    return img, kps.take(np.arange(0, len(kps), 7))


def run(family, params, image_kps, where="descriptors.d.params"):
    img, kps = image_kps
    return compute_descriptors(family, check_descriptor_params(family, params, where), img, kps, SIFT_SET, where)


def l2(d):
    d = d.astype(np.float64)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def test_float_stack_is_normalised_blocks_then_normalised_row(image_kps):
    sift = run("sift", {}, image_kps)
    patch = run("python", {"callable": "my_descriptors:mean_patch"}, image_kps)
    got = run("stack", {"parts": [{"family": "sift"}, {"family": "python", "params": {"callable": "my_descriptors:mean_patch"}}],
                        "weights": [1.0, 0.5]}, image_kps)
    want = l2(np.concatenate([l2(sift), 0.5 * l2(patch)], axis=1))
    assert got.shape == (len(sift), 128 + 81) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    raw = run("stack", {"parts": [{"family": "sift"}, {"family": "rootsift"}], "block_norm": "none", "final_norm": "none"}, image_kps)
    np.testing.assert_array_equal(raw, np.concatenate([sift, run("rootsift", {}, image_kps)], axis=1))


def test_binary_stack_concatenates_bits_so_hamming_adds(image_kps):
    p = {"callable": "my_descriptors:sign_bits", "descriptor_kind": "binary"}
    a = run("python", p, image_kps)
    b = run("python", {**p, "kwargs": {"radius": 2}}, image_kps)
    s = run("stack", {"parts": [{"family": "python", "params": p}, {"family": "python", "params": {**p, "kwargs": {"radius": 2}}}],
                      "block_norm": "none", "final_norm": "none"}, image_kps)
    assert s.dtype == np.uint8 and np.array_equal(s, np.concatenate([a, b], axis=1))
    ham = lambda x, i, j: int(np.unpackbits(x[i] ^ x[j]).sum())  # noqa: E731
    assert ham(s, 0, 1) == ham(a, 0, 1) + ham(b, 0, 1)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "params, message",
    [
        ({"parts": [{"family": "sift"}]}, r"parts: list at least two"),
        ({"parts": [{"family": "sift"}, {"family": "nope"}]}, r"descriptors\.d\.params\.parts\.1\.family.*unknown descriptor family 'nope'"),
        ({"parts": [{"family": "sift"}, {"family": "sift", "params": {"sigmaa": 1}}]}, r"unknown config key 'descriptors\.d\.params\.parts\.1\.params\.sigmaa'"),
        ({"parts": [{"family": "sift"}, {"family": "stack"}]}, r"cannot be a part of a stack"),
        ({"parts": [{"family": "sift"}, {"family": "rootsift"}], "weights": [1]}, r"weights: give one positive number per part"),
        ({"parts": [{"family": "sift"}, {"family": "rootsift"}], "block_norm": "max"}, r"block_norm: 'max' is not one of"),
    ],
)
def test_bad_stack_names_the_key(params, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({"keypoint_sets": {"s": {"detector": "sift"}}, "descriptors": {"d": {"family": "stack", "params": params}}}, SCHEMA)


def test_python_callable_rows_are_the_callables_output(image_kps):
    img, kps = image_kps
    from my_descriptors import mean_patch

    got = run("python", {"callable": "my_descriptors.mean_patch", "kwargs": {"radius": 3}}, image_kps)
    np.testing.assert_array_equal(got, mean_patch(read_image(img), kps, radius=3))


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "fn, message",
    [
        ("drops_one", r"callable 'my_descriptors:drops_one' returned shape \(\d+, 8\) for the \d+ keypoints of .*1\.ppm"),
        ("flat", r"returned shape \(\d+,\)"),
        ("not_an_array", r"returned list .*return a numpy array"),
    ],
)
def test_python_callable_bad_output_names_callable_and_image(image_kps, fn, message):
    with pytest.raises(DataError, match=message):
        run("python", {"callable": f"my_descriptors:{fn}"}, image_kps)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "path, message",
    [("no_such_module:f", r"descriptors\.d\.params\.callable: cannot import module 'no_such_module'"),
     ("my_descriptors:nope", r"module 'my_descriptors' has no callable 'nope'"),
     ("justaname", r"is not 'package\.module:function'")],
)
def test_python_callable_that_cannot_be_found_is_a_config_error(path, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({"keypoint_sets": {"s": {"detector": "sift"}},
                         "descriptors": {"d": {"family": "python", "params": {"callable": path}}}}, SCHEMA)


def test_registry_and_config_validation_import_neither_numba_nor_opencv():
    """Every job and the workflow's DAG build import the registry: family modules stay light
    (numba kernels and OpenCV are imported by the jobs that compute them)."""
    import subprocess

    code = ("import sys, yaml; from descbench.config import validate_config; "
            f"validate_config(yaml.safe_load(open({str(ROOT / 'config.yaml')!r})), {str(SCHEMA)!r}); "
            "from descbench.descriptors import family_names, get_family; [get_family(f) for f in family_names()]; "
            "bad = [m for m in ('numba', 'cv2') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_combine_blocks_normalises_weights_and_concatenates():
    """descbench.descriptors.stack directly: each block normalised, weighted, side by side, normalised."""
    a = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    b = np.array([[1.0, 1.0, 2.0], [2.0, 0.0, 0.0]], np.float32)
    params = {"parts": [{"family": "x"}, {"family": "y"}], "weights": [2.0, 1.0], "block_norm": "l1", "final_norm": "none"}
    np.testing.assert_allclose(ST.combine_blocks([a, b], params), [[6 / 7, 8 / 7, 0.25, 0.25, 0.5], [0, 0, 1, 0, 0]], rtol=1e-6)
    row = ST.combine_blocks([a, b], {**params, "final_norm": "l2"})
    np.testing.assert_allclose(np.linalg.norm(row, axis=1), 1.0, rtol=1e-6)
    bits = ST.combine_blocks([np.array([[1, 2]], np.uint8), np.array([[3]], np.uint8)], params)
    assert bits.dtype == np.uint8 and bits.tolist() == [[1, 2, 3]]
    with pytest.raises(DataError, match="both packed bits and floats on img"):
        ST.combine_blocks([np.zeros((1, 2), np.uint8), a[:1]], params, "img")
    assert ST.normalise_rows(np.array([[1.0, -3.0]]), "none").tolist() == [[1.0, -3.0]]
    assert ST.stack_width({}, [128, 64]) == 192 and ST.stack_width({}, []) == 128
