"""descbench.descriptors.python: a user's callable as a descriptor (resolve, signature check,
output check), with tests/data/my_descriptors.py and callables defined here."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import python as P
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data"))  # my_descriptors

import my_descriptors  # noqa: E402


def kps_at(xy) -> ImageKeypoints:
    xy = np.asarray(xy, dtype=np.float32)
    n = len(xy)
    return ImageKeypoints(xy[:, 0], xy[:, 1], np.full(n, 8, np.float32), np.zeros(n, np.float32), np.ones(n, np.float32),
                          np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


@pytest.mark.bad_input
def test_resolve_both_spellings_and_its_errors():
    assert P.resolve("my_descriptors:mean_patch") is my_descriptors.mean_patch
    assert P.resolve("my_descriptors.sign_bits") is my_descriptors.sign_bits
    with pytest.raises(ConfigError, match=r"^w: cannot import module 'no_such_module_xyz'"):
        P.resolve("no_such_module_xyz:f", "w")
    with pytest.raises(ConfigError, match=r"^w: module 'my_descriptors' has no callable 'nope'$"):
        P.resolve("my_descriptors:nope", "w")
    for bad in ("", "nodots"):
        with pytest.raises(ConfigError, match="^w: "):
            P.resolve(bad, "w")


@pytest.mark.bad_input
def test_signature_check_names_the_kwarg():
    P.check_signature(my_descriptors.mean_patch, "m", {"radius": 2}, "d")
    with pytest.raises(ConfigError, match=r"^d\.kwargs\.radus: the callable 'm' takes no keyword 'radus' \(did you mean 'radius'\?\)"):
        P.check_signature(my_descriptors.mean_patch, "m", {"radus": 2}, "d")

    def needs(image, keypoints, k):
        return None

    with pytest.raises(ConfigError, match=r"^d\.kwargs: the callable 'n' cannot be called"):
        P.check_signature(needs, "n", {}, "d")


def test_rows_are_the_callables_output(pristine):
    image = pristine / "1.ppm"
    kps = kps_at([(50, 60), (100.4, 80.6), (0, 0)])
    params = {"callable": "my_descriptors:mean_patch", "kwargs": {"radius": 2}, "color": False, "descriptor_kind": None}
    rows = P.python_descriptors(image, kps, params, {})
    np.testing.assert_array_equal(rows, my_descriptors.mean_patch(read_image(image), kps, radius=2))
    assert rows.shape == (3, 25) and rows.dtype == np.float32
    bits = P.python_descriptors(image, kps, {**params, "callable": "my_descriptors:sign_bits", "descriptor_kind": "binary"}, {})
    assert bits.dtype == np.uint8 and bits.shape == (3, 4)


@pytest.mark.bad_input
@pytest.mark.parametrize("out, kind, message", [
    ([[0.0]], None, r"returned list for img; return a numpy array \[1, D\]"),
    (np.zeros(1, np.float32), None, r"returned shape \(1,\) for the 1 keypoint of img"),
    (np.zeros((1, 0), np.float32), None, r"returned shape \(1, 0\) for img: rows without a value"),
    (np.zeros((1, 4), np.uint8), None, r"returned uint8 for img, which may be packed bits or 8-bit values; say which with K"),
    (np.zeros((1, 4), np.int32), None, r"returned dtype int32 for img"),
    (np.zeros((1, 4), np.float32), "binary", r"returned float32 for img, but K is binary"),
])
def test_bad_output_is_a_data_error_naming_callable_and_image(out, kind, message):
    with pytest.raises(DataError, match=r"^descriptor callable 'c' " + message):
        P.checked_output(out, 1, "c", "img", kind, "K")


def test_good_output_types():
    assert P.checked_output(np.ones((2, 3), np.float64), 2, "c", "i", None, "K").dtype == np.float32
    assert P.checked_output(np.ones((2, 3), np.uint8), 2, "c", "i", "float", "K").dtype == np.float32
    assert P.checked_output(np.ones((2, 3), np.uint8), 2, "c", "i", "binary", "K").dtype == np.uint8


@pytest.mark.bad_input
def test_an_exception_in_the_callable_names_it_and_where():
    def broken(image, keypoints):
        raise ValueError("boom")

    with pytest.raises(DataError, match=r"^descriptor callable 'b' raised ValueError on img, at .*test_python\.py:\d+ in broken\(\): boom"):
        P.call_descriptor(broken, "b", (np.zeros((4, 4), np.uint8), kps_at([(1, 1)])), {}, "img")


@pytest.mark.bad_input
def test_a_descbench_error_in_the_callable_passes_unchanged():
    """An error that already names its case (e.g. a check inside a family the callable runs) is not
    wrapped a second time."""
    def checks(image, keypoints):
        raise DataError("scene x, image 2: NaN in the rows")

    with pytest.raises(DataError, match=r"^scene x, image 2: NaN in the rows$"):
        P.call_descriptor(checks, "b", (np.zeros((4, 4), np.uint8), kps_at([(1, 1)])), {}, "img")
