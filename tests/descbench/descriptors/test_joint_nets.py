"""The descriptor families ``disk``, ``aliked``, ``xfeat`` (descbench.descriptors.joint_nets)."""

from __future__ import annotations


import cv2
import numpy as np
import pytest

from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import joint_nets
from descbench.errors import ConfigError
from descbench.keypoints import joint as J
from descbench.keypoints.detectors import detect
from descbench.params import config_schema
from conftest import raises_naming

NETS = ("disk", "aliked", "xfeat", "dedode", "keynet_affnet_hardnet")


def params(net: str, **given) -> dict:
    return check_descriptor_params(net, {"weights": "random", "device": "cpu", "threads": 1, **given}, f"descriptors.{net}.params")


@pytest.mark.parametrize("net", NETS)
def test_params_are_the_networks_own_keys_of_the_detectors_definition(net):
    props = get_family(net).params_schema["properties"]
    assert props is joint_nets.PARAMS_SCHEMA[net]["properties"]
    definition = config_schema()["definitions"][f"{net}_detector_params"]["properties"]
    assert list(props) == list(J.NETS[net].net_keys)
    assert all(props[k] is definition[k] for k in props)  # one definition, not a copy
    assert not set(J.NETS[net].detect_keys) & set(props)


@pytest.mark.parametrize("net", NETS)
def test_on_sift_keypoints_the_rows_are_the_network_at_those_keypoints(net, pristine):
    img = pristine / "1.ppm"
    sift = detect("sift", cv2.imread(str(img), cv2.IMREAD_GRAYSCALE), {"n_features": 0, "n_octave_layers": 3,
                                                                        "contrast_threshold": 0.04, "edge_threshold": 10, "sigma": 1.6})
    kps = sift.take(np.arange(0, len(sift), max(1, len(sift) // 25)))
    p = params(net)
    kpset = {"detector": "sift", "params": {}}
    rows = compute_descriptors(net, p, img, kps, kpset, "w")
    gray = cv2.imread(str(img), cv2.IMREAD_GRAYSCALE) if J.NETS[net].image == "grey" else None
    assert np.array_equal(rows, J.runner(net, p, detection=False).describe(img, gray, kps))
    assert rows.shape == (len(kps), J.dim_of(net, p))
    assert np.allclose(np.linalg.norm(rows, axis=1), 1, atol=1e-5) != (net == "dedode")  # (DeDoDe's: not normalised)
    assert compute_descriptors(net, p, img, kps.take(np.arange(0)), kpset, "w").shape == (0, J.dim_of(net, p))


def test_xfeat_reads_the_grey_image_its_keypoint_set_names(tmp_path):
    coarse = np.random.default_rng(0).integers(0, 256, (24, 32, 3)).astype(np.uint8)
    img = tmp_path / "colour.png"
    cv2.imwrite(str(img), cv2.resize(coarse, (128, 96), interpolation=cv2.INTER_CUBIC))
    kps = J.ImageKeypoints(*(np.float32([20, 60, 100]),) * 2, *(np.zeros(3, np.float32),) * 3, np.zeros(3, np.int32),
                           np.zeros(3, np.int32), np.arange(3, dtype=np.int32))
    p = params("xfeat")
    for grey, ref in (("bgr2gray", cv2.cvtColor(cv2.imread(str(img)), cv2.COLOR_BGR2GRAY)),
                      ("imread", cv2.imread(str(img), cv2.IMREAD_GRAYSCALE))):
        rows = compute_descriptors("xfeat", p, img, kps, {"detector": "sift", "params": {}, "grey": grey}, "w")
        assert np.array_equal(rows, J.runner("xfeat", p, detection=False).describe(img, ref, kps)), grey
    assert not np.array_equal(cv2.cvtColor(cv2.imread(str(img)), cv2.COLOR_BGR2GRAY), cv2.imread(str(img), cv2.IMREAD_GRAYSCALE))


def test_aliked_t16_rows_are_64_wide():
    assert J.dim_of("aliked", params("aliked", model_name="aliked-t16")) == 64
    assert get_family("aliked").width_of(params("aliked", model_name="aliked-t16"), []) == 64


@pytest.mark.bad_input
@pytest.mark.parametrize("net, given, key", [("disk", {"max_num_keypoints": 5}, "max_num_keypoints"),
                                             ("aliked", {"model_name": "x"}, "model_name"),
                                             ("xfeat", {"resize": 8}, "resize")])
def test_detection_keys_and_bad_values_are_refused_naming_the_key(net, given, key):
    raises_naming(lambda: params(net, **given), f"descriptors.{net}.params", key, exc=ConfigError)


@pytest.mark.bad_input
def test_a_weights_file_of_another_network_names_the_key_and_file(tmp_path):
    import torch
    import kornia.feature as KF

    path = tmp_path / "xfeat.pt"
    torch.save(KF.XFeat().net.state_dict(), path)
    raises_naming(lambda: params("disk", weights=str(path)), "descriptors.disk.params.weights", str(path),
                  "is not a DISK checkpoint", "fix:", exc=ConfigError)
