"""The ``keynet`` detector (descbench.keypoints.keynet): kornia's KeyNetDetector as OpenCV keypoints.

Nothing is downloaded: the networks are randomly initialised under a fixed torch seed and saved
to a tmp state-dict file, and the reference is kornia's own KeyNetDetector with those weights.
"""

from __future__ import annotations

import shutil

import math
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import kornia.feature as KF

from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import detect_scene
from descbench.config import validate_config
from descbench.datasets.layout import read_image
from descbench.errors import ConfigError
from descbench.keypoints import border_mask
from descbench.keypoints.detectors import DETECTORS, detect
from descbench.keypoints.keynet import keypoints_from_lafs

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
SEED = 1  # a torch seed whose default-initialised KeyNet has maxima on IMAGE (seed 0's is 0 everywhere)
FIELDS = ("x", "y", "size", "angle", "response")


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    """120 x 160 uint8 texture: uniform noise on a 30 x 40 grid, upsampled (bicubic)."""
    coarse = np.random.default_rng(0).integers(0, 256, (30, 40)).astype(np.uint8)
    return cv2.resize(coarse, (160, 120), interpolation=cv2.INTER_CUBIC)


def saved(tmp_path: Path, name: str, module: torch.nn.Module) -> str:
    """``module``'s state dict in a tmp file (torch.save), the way a published weights file is given."""
    path = tmp_path / f"{name}.pth"
    torch.save(module.state_dict(), path)
    return str(path)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> dict:
    """Default-initialised (torch.manual_seed) KeyNet, OriNet and AffNet state dicts, in files."""
    tmp = tmp_path_factory.mktemp("weights")
    torch.manual_seed(SEED)
    return {"weights": saved(tmp, "keynet", KF.KeyNet(pretrained=False)),
            "orinet_weights": saved(tmp, "orinet", KF.OriNet(pretrained=False)),
            "affnet_weights": saved(tmp, "affnet", KF.LAFAffNetShapeEstimator(pretrained=False))}


def params(**given) -> dict:
    """``keynet`` params validated by the config schema (defaults filled), on 1 CPU thread."""
    cfg = {"keypoint_sets": {"k": {"detector": "keynet", "params": {"device": "cpu", "threads": 1, **given}}},
           "descriptors": {"d": {"family": "sift"}}}
    return validate_config(cfg, SCHEMA)["keypoint_sets"]["k"]["params"]


def loaded(module: torch.nn.Module, path: str) -> torch.nn.Module:
    module.load_state_dict(torch.load(path, weights_only=True))
    return module.eval()


def kornia_lafs(image: np.ndarray, weights: dict, ori=None, aff=None, **kwargs):
    """kornia's KeyNetDetector on ``image`` (/ 255, float32), the filled slots: (lafs, responses)."""
    torch.set_num_threads(1)
    det = KF.KeyNetDetector(pretrained=False, ori_module=ori, aff_module=aff, **kwargs)
    loaded(det.model, weights["weights"])
    with torch.inference_mode():
        lafs, resp = det.eval()(torch.from_numpy(image).float()[None, None] / 255.0)
    filled = KF.laf_is_filled(lafs)[0]
    return lafs[0, filled], resp[0, filled]


def by_the_rule(lafs: torch.Tensor, resp: torch.Tensor) -> dict:
    """The documented LAF -> OpenCV rule, restated per keypoint with Python's math (float64)."""
    rows = []
    for (a11, a12, cx), (a21, a22, cy) in lafs.tolist():
        deg = math.atan2(a21, a11) * 180.0 / math.pi
        rows.append((cx, cy, math.sqrt(a11 * a11 + a21 * a21) + math.sqrt(a12 * a12 + a22 * a22), deg + 360.0 if deg < 0 else deg))
    out = dict(zip(FIELDS, np.array(rows, dtype=np.float32).reshape(-1, 4).T))
    out["response"] = resp.numpy()
    return out


def assert_fields_equal(ours, ref: dict) -> None:
    for f in FIELDS:
        assert np.array_equal(getattr(ours, f), ref[f]), f


def test_keynet_is_a_registered_detector():
    import yaml

    assert DETECTORS["keynet"].schema_definition == "keynet_detector_params"
    schema = yaml.safe_load(SCHEMA.read_text())
    assert "keynet" in schema["properties"]["keypoint_sets"]["additionalProperties"]["properties"]["detector"]["enum"]


def test_defaults_are_the_workbench_script_and_kornia_config():
    cfg = {"keypoint_sets": {"k": {"detector": "keynet", "params": {"weights": "random"}}}, "descriptors": {"d": {"family": "sift"}}}
    p = validate_config(cfg, SCHEMA)["keypoint_sets"]["k"]["params"]
    # scripts/generate_keynet_keypoints.py: --max_keypoints 2000 is KeyNetDetector's num_features
    assert p["num_features"] == 2000
    assert {k: p[k] for k in KF.keynet.keynet_default_config["Detector_conf"]} == KF.keynet.keynet_default_config["Detector_conf"]
    assert (p["score_threshold"], p["orientation"], p["affine"], p["weights_seed"], p["device"], p["threads"]) == (0.0, "none", "none", 0, "auto", 1)
    assert p["orinet_weights"] is None and p["affnet_weights"] is None


def test_equals_kornia_keynetdetector_converted_as_the_workbench_does(image, weights):
    ours = detect("keynet", image, params(weights=weights["weights"]))
    lafs, resp = kornia_lafs(image, weights, num_features=2000)
    assert len(ours) == len(lafs) > 100
    # the workbench's conversion, literally (generate_keynet_keypoints.py, _lafs_to_keypoints)
    wb = []
    for laf, r in zip(lafs, resp):
        size = (torch.norm(laf[:, 0]).item() + torch.norm(laf[:, 1]).item()) / 2.0 * 2.0
        kp = cv2.KeyPoint(float(laf[0, 2]), float(laf[1, 2]), size, torch.atan2(laf[1, 0], laf[0, 0]).item() * 180.0 / np.pi)
        kp.response = float(r)
        wb.append(kp)
    assert_fields_equal(ours, {"x": np.float32([k.pt[0] for k in wb]), "y": np.float32([k.pt[1] for k in wb]),
                               "size": np.float32([k.size for k in wb]), "angle": np.float32([k.angle for k in wb]),
                               "response": np.float32([k.response for k in wb])})
    assert_fields_equal(ours, by_the_rule(lafs, resp))
    # upright frames: angle 0 (not OpenCV's -1 "unset"), size 2 * s_mult at level 0, kornia's order
    assert np.all(ours.angle == 0) and not np.any(np.signbit(ours.angle))
    assert 44.0 in ours.size and np.all(np.diff(ours.response) <= 0)
    assert np.all(ours.octave == 0) and np.all(ours.class_id == -1)
    np.testing.assert_array_equal(ours.source_index, np.arange(len(ours)))


PUBLISHED_KEYNET = Path(__file__).resolve().parents[2] / "data" / "weights" / "keynet_pytorch.pth"


def test_the_published_keynet_file_loads_as_kornia_loads_it(image):
    """Key.Net's published file (tests/data/weights/README.md): a training checkpoint whose state dict
    sits under "state_dict". descbench's keypoints from it equal kornia's KeyNetDetector with the
    weights loaded by kornia's own call (KeyNet.__init__ with pretrained=True:
    load_state_dict(checkpoint["state_dict"], strict=True)), converted by the rule."""
    checkpoint = torch.load(PUBLISHED_KEYNET, map_location="cpu", weights_only=True)
    assert set(checkpoint) == {"state_dict", "optimizer"}
    assert any(k.endswith("num_batches_tracked") for k in checkpoint["state_dict"])
    ours = detect("keynet", image, params(weights=str(PUBLISHED_KEYNET)))
    torch.set_num_threads(1)
    det = KF.KeyNetDetector(pretrained=False, num_features=2000)
    det.model.load_state_dict(checkpoint["state_dict"], strict=True)
    with torch.inference_mode():
        lafs, resp = det.eval()(torch.from_numpy(image).float()[None, None] / 255.0)
    filled = KF.laf_is_filled(lafs)[0]
    assert len(ours) == int(filled.sum()) > 100
    assert_fields_equal(ours, by_the_rule(lafs[0, filled], resp[0, filled]))


def test_extraction_params_reach_kornia(image, weights):
    given = {"num_features": 50, "nms_size": 9, "up_levels": 0, "pyramid_levels": 2, "scale_factor_levels": 1.5,
             "s_mult": 10.0, "score_threshold": 0.029}  # 0.029: about the median response of the 50 strongest
    ours = detect("keynet", image, params(weights=weights["weights"], **given))
    conf = {**KF.keynet.keynet_default_config, "Detector_conf": {k: given[k] for k in
                                                                 ("nms_size", "up_levels", "pyramid_levels", "scale_factor_levels", "s_mult")}}
    ref = by_the_rule(*kornia_lafs(image, weights, num_features=50, keynet_conf=conf, score_threshold=0.029))
    assert 10 < len(ours) < 40 and np.all(ours.response > np.float32(0.029))
    assert_fields_equal(ours, ref)
    assert not np.array_equal(ours.size, detect("keynet", image, params(weights=weights["weights"], num_features=50)).size[:len(ours)])


def test_gradient_orientation_turns_angles_as_kornias_lap_orienter(image, weights):
    upright = detect("keynet", image, params(weights=weights["weights"]))
    ours = detect("keynet", image, params(weights=weights["weights"], orientation="gradient"))
    lafs, resp = kornia_lafs(image, weights, num_features=2000, ori=KF.LAFOrienter())
    assert_fields_equal(ours, by_the_rule(lafs, resp))
    # the frames only turn: same centres, responses and (isotropic) sizes to rounding
    for f in ("x", "y", "response"):
        np.testing.assert_array_equal(getattr(ours, f), getattr(upright, f))
    np.testing.assert_allclose(ours.size, upright.size, rtol=1e-6)
    # OpenCV angle in [0, 360) = minus kornia's orientation (get_laf_orientation), mod 360
    assert np.all((ours.angle >= 0) & (ours.angle < 360)) and np.count_nonzero(ours.angle) > len(ours) // 2
    kornia_ori = KF.get_laf_orientation(lafs[None])[0, :, 0].numpy().astype(np.float64)
    diff = (ours.angle + kornia_ori + 180.0) % 360.0 - 180.0
    assert np.abs(diff).max() < 1e-3


def test_orinet_and_affnet_from_weights_files(image, weights):
    # kornia runs the two networks on every slot, padding included: a short num_features keeps this fast
    ours = detect("keynet", image, params(orientation="orinet", affine="affnet", num_features=100, **weights))
    ori = KF.LAFOrienter(angle_detector=loaded(KF.OriNet(pretrained=False), weights["orinet_weights"]))
    aff = loaded(KF.LAFAffNetShapeEstimator(pretrained=False), weights["affnet_weights"])
    lafs, resp = kornia_lafs(image, weights, num_features=100, ori=ori, aff=aff)
    assert len(ours) == 100
    assert_fields_equal(ours, by_the_rule(lafs, resp))
    upright = detect("keynet", image, params(weights=weights["weights"], num_features=100))
    assert not np.array_equal(ours.size, upright.size) and np.count_nonzero(ours.angle) > 0


def test_conversion_rule_on_handmade_frames():
    s, t = 3.0, math.radians(30.0)
    lafs = np.array([[[s * math.cos(t), s * math.sin(t), 5.0], [-s * math.sin(t), s * math.cos(t), 7.0]],  # kornia ori +30
                     [[s * math.cos(t), -s * math.sin(t), 1.0], [s * math.sin(t), s * math.cos(t), 2.0]],  # kornia ori -30
                     [[2.0, 0.0, 0.0], [-0.0, 4.0, 0.0]],  # upright, anisotropic, a21 = -0
                     [[1.0, 0.0, 0.0], [-1e-12, 1.0, 0.0]]], dtype=np.float32)  # just below 0 degrees
    k = keypoints_from_lafs(lafs, np.float32([4, 3, 2, 1]))
    np.testing.assert_allclose(k.angle, [330.0, 30.0, 0.0, 0.0], atol=1e-4)
    assert not np.signbit(k.angle[2]) and k.angle[3] == 0.0  # never -0, never 360
    np.testing.assert_allclose(k.size, [6.0, 6.0, 6.0, 2.0], rtol=1e-6)
    np.testing.assert_array_equal(k.x, np.float32([5, 1, 0, 0]))
    np.testing.assert_array_equal(k.response, np.float32([4, 3, 2, 1]))


@pytest.mark.bad_input
def test_opencv_style_detect_returns_the_same_keypoints_and_refuses_a_mask(image):
    from descbench.keypoints.keynet import KeyNetKeypointDetector

    det = KeyNetKeypointDetector(params(weights="random", weights_seed=2, num_features=30))
    kps = det.detect(image, None)
    ref = det.detect_keypoints(image)
    assert len(kps) == len(ref) == 30 and isinstance(kps[0], cv2.KeyPoint)
    assert_fields_equal(ref, {"x": np.float32([k.pt[0] for k in kps]), "y": np.float32([k.pt[1] for k in kps]),
                              "size": np.float32([k.size for k in kps]), "angle": np.float32([k.angle for k in kps]),
                              "response": np.float32([k.response for k in kps])})
    with pytest.raises(ValueError, match="masks are not supported"):
        det.detect(image, np.ones_like(image))


def test_random_weights_are_deterministic_per_seed(image):
    a = detect("keynet", image, params(weights="random", weights_seed=2))
    b = detect("keynet", image, params(weights="random", weights_seed=2))
    c = detect("keynet", image, params(weights="random", weights_seed=3))
    assert len(a) > 50
    assert_fields_equal(a, {f: getattr(b, f) for f in FIELDS})
    assert len(a) != len(c) or not np.array_equal(a.response, c.response)


@pytest.mark.bad_input
def test_too_many_pyramid_levels_for_the_image_is_one_line_naming_the_key():
    from descbench.errors import DataError
    from descbench.keypoints.keynet import KeyNetKeypointDetector

    det = KeyNetKeypointDetector(params(weights="random", pyramid_levels=12))
    gray = np.random.default_rng(0).integers(0, 256, (240, 320), dtype=np.uint8)
    with pytest.raises(DataError, match=r"^detector 'keynet' params\.pyramid_levels: 12 levels are too many for a 240 x 320 "
                                        r"image .*; fix: use fewer pyramid_levels"):
        det.detect_keypoints(gray)
    KeyNetKeypointDetector(params(weights="random", pyramid_levels=4)).detect_keypoints(gray)  # the default runs


@pytest.mark.bad_input
@pytest.mark.parametrize("key, published", [("weights", "keynet_pytorch.pth"), ("orinet_weights", "OriNet.pth"),
                                            ("affnet_weights", "AffNet.pth")])
def test_missing_weights_file_names_the_key_the_file_and_the_published_weights(image, weights, tmp_path, key, published):
    missing = tmp_path / "nowhere.pth"
    # at config time (the workflow's DAG build), naming the config key
    with pytest.raises(ConfigError, match=rf"keypoint_sets\.k\.params\.{key}: .*nowhere\.pth does not exist.*{published}"):
        params(orientation="orinet", affine="affnet", **{**weights, key: str(missing)})
    # and in the job, if the file went away after validation
    shutil.copy(weights[key], missing)
    p = params(orientation="orinet", affine="affnet", **{**weights, key: str(missing)})
    missing.unlink()
    with pytest.raises(ConfigError, match=rf"params\.{key}: .*nowhere\.pth does not exist.*{published}"):
        detect("keynet", image, p)


@pytest.mark.bad_input
def test_weights_of_another_network_are_refused(image, weights):
    with pytest.raises(ConfigError, match=r"params\.weights: .*orinet\.pth does not fit KeyNet"):
        detect("keynet", image, params(weights=weights["orinet_weights"]))


@pytest.mark.bad_input
@pytest.mark.parametrize("given, message", [
    ({"weights": "random", "nms_sise": 5}, r"unknown config key 'keypoint_sets\.k\.params\.nms_sise' \(did you mean 'keypoint_sets\.k\.params\.nms_size'"),
    ({}, r"'weights' is a required property"),
    ({"weights": "random", "orientation": "orinet"}, r"params\.orinet_weights': None is not of type 'string'"),
    ({"weights": "random", "orinet_weights": "o.pth"}, r"params\.orinet_weights': 'o\.pth' is not of type 'null'"),
    ({"weights": "random", "affine": "affnet"}, r"params\.affnet_weights': None is not of type 'string'"),
    ({"weights": "random", "affnet_weights": "a.pth"}, r"params\.affnet_weights': 'a\.pth' is not of type 'null'"),
    ({"weights": "random", "orientation": "dominant"}, r"params\.orientation'"),
    ({"weights": "random", "device": "gpu"}, r"params\.device'"),
    ({"weights": "random", "score_threshold": -0.1}, r"params\.score_threshold'"),
])
def test_config_validation(given, message):
    cfg = {"keypoint_sets": {"k": {"detector": "keynet", "params": given}}, "descriptors": {"d": {"family": "sift"}}}
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg, SCHEMA)


@pytest.mark.bad_input
def test_without_torch_the_error_names_the_pip_command(image, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(ConfigError, match=r"detector 'keynet' needs torch and kornia.*pip install -e '\.\[learned\]'"):
        detect("keynet", image, params(weights="random"))


def test_a_keynet_set_runs_through_detect_scene(scene, tmp_path):
    spec = validate_config({"keypoint_sets": {"kn": {"detector": "keynet", "max_keypoints": 300,
                                                     "params": {"weights": "random", "weights_seed": 2, "device": "cpu", "up_levels": 0}}},
                            "descriptors": {"d": {"family": "sift"}}}, SCHEMA)["keypoint_sets"]["kn"]
    out = tmp_path / "kn.parquet"
    detect_scene(scene, "kn", spec, out)
    per_image, meta = load_keypoints(out)
    for k, kps in per_image.items():
        h, w = read_image(scene / f"{k}.ppm").shape
        assert 0 < len(kps) <= 300 < meta["raw_counts"][str(k)]
        assert border_mask(kps.x, kps.y, w, h, spec["border_px"]).all()
