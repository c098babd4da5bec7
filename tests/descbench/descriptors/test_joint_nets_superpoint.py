"""The descriptor family ``superpoint`` (descbench.descriptors.joint_nets over descbench.keypoints.superpoint)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from conftest import raises_naming
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import joint_nets
from descbench.errors import ConfigError
from descbench.keypoints import joint as J
from descbench.keypoints import superpoint as SP
from descbench.keypoints.detectors import detect
from descbench.params import config_schema
from descbench.torchrt import random_seed


def params(**given) -> dict:
    return check_descriptor_params("superpoint", {"weights": "random", "device": "cpu", "threads": 1, **given},
                                   "descriptors.sp.params")


def test_params_are_the_networks_own_keys_of_the_detectors_definition():
    props = get_family("superpoint").params_schema["properties"]
    assert props is joint_nets.PARAMS_SCHEMA["superpoint"]["properties"]
    definition = config_schema()["definitions"]["superpoint_detector_params"]["properties"]
    assert list(props) == list(J.NETS["superpoint"].net_keys) == ["weights", "weights_seed", "device", "threads", "resize",
                                                                   "layout", "sampling"]
    assert all(props[k] is definition[k] for k in props)  # one definition, not a copy
    assert not set(J.NETS["superpoint"].detect_keys) & set(props)


@pytest.mark.parametrize("layout, sampling", [("magicleap", "auto"), ("rpautrat", "auto"), ("rpautrat", "superglue")])
def test_on_sift_keypoints_the_rows_are_superpoints_describe(layout, sampling, pristine):
    img = pristine / "1.ppm"
    gray = cv2.imread(str(img), cv2.IMREAD_GRAYSCALE)
    sift = detect("sift", gray, {"n_features": 0, "n_octave_layers": 3, "contrast_threshold": 0.04, "edge_threshold": 10,
                                 "sigma": 1.6})
    kps = sift.take(np.arange(0, len(sift), max(1, len(sift) // 25)))
    p = params(layout=layout, sampling=sampling)
    rows = compute_descriptors("superpoint", p, img, kps, {"detector": "sift", "params": {}}, "w")
    torch.set_num_threads(1)
    torch.manual_seed(random_seed(0, "superpoint"))
    ref = SP.describe(gray / 255.0, SP.superpoint_net(layout).eval(), np.stack([kps.x, kps.y], 1), {"sampling": sampling})
    assert len(kps) > 10 and np.array_equal(rows, ref) and rows.shape == (len(kps), 256)
    assert get_family("superpoint").width_of(p, []) == 256
    assert compute_descriptors("superpoint", p, img, kps.take(np.arange(0)), {"detector": "sift", "params": {}},
                               "w").shape == (0, 256)


def test_it_reads_the_grey_image_its_keypoint_set_names(tmp_path):
    coarse = np.random.default_rng(0).integers(0, 256, (24, 32, 3)).astype(np.uint8)
    img = tmp_path / "colour.png"
    cv2.imwrite(str(img), cv2.resize(coarse, (128, 96), interpolation=cv2.INTER_CUBIC))
    kps = J.ImageKeypoints(*(np.float32([20, 60, 90]),) * 2, *(np.zeros(3, np.float32),) * 3, np.zeros(3, np.int32),
                           np.zeros(3, np.int32), np.arange(3, dtype=np.int32))
    p = params()
    for grey, ref in (("bgr2gray", cv2.cvtColor(cv2.imread(str(img)), cv2.COLOR_BGR2GRAY)),
                      ("imread", cv2.imread(str(img), cv2.IMREAD_GRAYSCALE))):
        rows = compute_descriptors("superpoint", p, img, kps, {"detector": "sift", "params": {}, "grey": grey}, "w")
        assert np.array_equal(rows, J.runner("superpoint", p, detection=False).describe(img, ref, kps)), grey


@pytest.mark.bad_input
@pytest.mark.parametrize("given, key", [({"nms_radius": 3}, "nms_radius"), ({"layout": "x"}, "layout"),
                                        ({"sampling": "x"}, "sampling")])
def test_detection_keys_and_bad_values_are_refused_naming_the_key(given, key):
    raises_naming(lambda: params(**given), "descriptors.sp.params", key, exc=ConfigError)


@pytest.mark.bad_input
def test_a_weights_file_of_another_network_names_the_key_file_and_fix(tmp_path):
    path = tmp_path / "other.pth"
    torch.save({"conv.weight": torch.zeros(3, 3)}, path)
    raises_naming(lambda: params(weights=str(path)), "descriptors.sp.params.weights", str(path),
                  "not a SuperPoint checkpoint", "fix: give", exc=ConfigError)
