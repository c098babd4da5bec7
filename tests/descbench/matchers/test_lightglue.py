"""descbench.matchers.lightglue: kornia's LightGlue built without downloading, its matches and scores
those of the kornia module called directly (bit for bit on the CPU) with the inputs
kornia.feature.LightGlueMatcher builds, weights read from a file or seeded; bad weights, features
and descriptors refused at config time naming the key, the file and the fix."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from conftest import raises_naming
from descbench.config import validate_config
from descbench.errors import ConfigError, DataError
from descbench.matchers import MatchSide, check_matcher_params, get_matcher, run_matcher
from descbench.matchers import lightglue as LG
from tests.descbench.matchers.test_kornia_matching import SCHEMA, cpu, pair, shipped_config

torch = pytest.importorskip("torch")
kornia = pytest.importorskip("kornia")
LightGlue = kornia.feature.LightGlue


def kornia_net(features: str, seed: int):
    """kornia's LightGlue for ``features`` (its configuration, no download) with weights drawn by its
    constructor under ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    return LightGlue(None, **{**LightGlue.features[features], "weights": None}).eval()


@pytest.fixture(scope="module")
def weight_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("lightglue")
    out = {}
    for f in ("sift", "disk", "doghardnet", "keynet_affnet_hardnet", "superpoint"):
        out[f] = d / f"{f}_lightglue.pth"
        torch.save(kornia_net(f, 7).state_dict(), out[f])
    return out


def direct_inputs(side: MatchSide, features: str) -> dict:
    """LightGlue's input of one image, written here from LightGlueMatcher's conventions (the module
    docstring's mapping), in torch."""
    k = side.keypoints
    n = len(k)
    angle = torch.tensor(np.where(k.angle < 0, 0, k.angle).astype(np.float32))
    size = torch.tensor(k.size)
    out = {"keypoints": torch.tensor(np.stack([k.x, k.y], 1)).reshape(1, n, 2),
           "descriptors": torch.tensor(side.descriptors).reshape(1, n, -1),
           "image_size": torch.tensor([list(side.image_size)], dtype=torch.float32)}
    if features == "sift":
        o = torch.deg2rad(angle)
        out["scales"], out["oris"] = (size / 2).reshape(1, n), torch.where(o > math.pi, o - 2 * math.pi, o).reshape(1, n)
    elif features in ("doghardnet", "dog_affnet_hardnet"):
        o = -torch.deg2rad(angle)
        out["scales"], out["oris"] = (size * 6).reshape(1, n), torch.where(o < 0, o + 2 * math.pi, o).reshape(1, n)
    elif features == "keynet_affnet_hardnet":
        ori = torch.tensor(np.where(k.angle < 0, 0, -k.angle).astype(np.float32)).reshape(1, n, 1)
        out["lafs"] = kornia.feature.laf_from_center_scale_ori(out["keypoints"], (size / 2).reshape(1, n, 1, 1), ori)
    return out


@pytest.mark.parametrize("features, extra", [("sift", {}), ("disk", {"filter_threshold": 0.01}), ("doghardnet", {}),
                                             ("keynet_affnet_hardnet", {}), ("superpoint", {"depth_confidence": -1})])
def test_matches_are_the_kornia_modules(weight_files, features, extra):
    a, b = pair(n=110, inliers=80, d=256 if features == "superpoint" else 128)
    p = cpu(check_matcher_params("lightglue", {"features": features, "weights": str(weight_files[features]), **extra}, "matchers.lg.params"))
    m = run_matcher("lightglue", p, a, b, "w")
    net = LightGlue(None, **{**LightGlue.features[features], "weights": None,
                             **{k: p[k] for k in ("depth_confidence", "width_confidence", "filter_threshold")}})
    net.load_state_dict(torch.load(weight_files[features], weights_only=True))
    with torch.inference_mode():
        pred = net.eval()({"image0": direct_inputs(a, features), "image1": direct_inputs(b, features)})
    m0, s0 = pred["matches0"][0], pred["matching_scores0"][0]
    ia = torch.where(m0 > -1)[0]
    assert len(m) > 10
    np.testing.assert_array_equal(m.idx_a, ia.numpy())
    np.testing.assert_array_equal(m.idx_b, m0[ia].numpy())
    np.testing.assert_array_equal(m.score, s0[ia].numpy().astype(np.float64))
    assert (m.score > p["filter_threshold"]).all()


@pytest.mark.parametrize("features, laf_scale", [("sift", 3.0), ("doghardnet", 6.0), ("dog_affnet_hardnet", 6.0), ("disk", 1.0)])
def test_scales_and_orientations_are_lightgluematchers(features, laf_scale):
    """kornia's LightGlueMatcher reads scales and orientations off LAFs: those of OpenCV keypoints
    (kornia orientation = -angle) at 3 x size (the 6-sigma DoG frame: OpenCV's size is 2 sigma) for
    sift and 6 x size (12 sigma) for the doghardnet weights give descbench's values."""
    from kornia.feature.integrated import _lightglue_keypoint_scale_ori

    a, _ = pair(n=60, inliers=40)
    k = a.keypoints
    n = len(k)
    xy = torch.tensor(np.stack([k.x, k.y], 1)).reshape(1, n, 2)
    lafs = kornia.feature.laf_from_center_scale_ori(xy, torch.tensor(laf_scale * k.size).reshape(1, n, 1, 1),
                                                    torch.tensor(-k.angle).reshape(1, n, 1))
    ks, ko = _lightglue_keypoint_scale_ori(lafs, features)
    mine = LG.scales_oris(k, features)
    if features == "disk":
        assert mine is None
        return
    np.testing.assert_allclose(mine[0], ks.reshape(-1).numpy(), rtol=2e-6)
    diff = np.abs(mine[1] - ko.reshape(-1).numpy())
    assert (np.minimum(diff, 2 * np.pi - diff) < 2e-5).all()


def test_random_weights_seeded_and_recorded():
    a, b = pair(n=80, inliers=60)
    p = cpu(check_matcher_params("lightglue", {"features": "sift", "weights": "random", "weights_seed": 4}, "m"))
    first, again = run_matcher("lightglue", p, a, b, "w"), run_matcher("lightglue", p, a, b, "w")
    other = run_matcher("lightglue", {**p, "weights_seed": 5}, a, b, "w")
    assert len(first) > 0 and np.array_equal(first.score, again.score) and not np.array_equal(first.score, other.score)
    rec = get_matcher("lightglue").provenance(p)
    assert rec["weights"] == "random(seed=4, key=lightglue)" and rec["weights_file"] is None and rec["device"] == "cpu"
    assert get_matcher("lightglue").weights_labels_of(p) == ["RANDOM(seed=4)"] and get_matcher("lightglue").files_of(p) == []


def test_features_and_defaults_are_kornias():
    assert LG.FEATURES == tuple(LightGlue.features)
    for f in LG.FEATURES:
        p = check_matcher_params("lightglue", {"features": f, "weights": "random"}, "m")
        for key in LG.KORNIA_DEFAULTED:
            assert p[key] == LightGlue.features[f].get(key, LightGlue.default_conf[key])
    assert check_matcher_params("lightglue", {"features": "sift", "weights": "random"}, "m")["depth_confidence"] == 0.95
    assert check_matcher_params("lightglue", {"features": "doghardnet", "weights": "random"}, "m")["width_confidence"] == -1
    given = check_matcher_params("lightglue", {"features": "doghardnet", "weights": "random", "width_confidence": 0.9}, "m")
    assert given["width_confidence"] == 0.9  # a value given is used (kornia's constructor would override it)


def test_published_file_key_names_are_renamed(tmp_path):
    """A state dict with the published files' old names (``self_attn.<i>`` / ``cross_attn.<i>``, a
    ``matcher.`` prefix) and no ``confidence_thresholds`` loads as kornia loads it."""
    import re

    net = kornia_net("disk", 3)
    old = {"matcher." + re.sub(r"^transformers\.(\d+)\.(self_attn|cross_attn)\.", r"\2.\1.", k): v
           for k, v in net.state_dict().items() if k != "confidence_thresholds"}
    assert "matcher.self_attn.0.Wqkv.weight" in old and "matcher.cross_attn.8.to_out.weight" in old
    path = tmp_path / "published.pth"
    torch.save(old, path)
    p = cpu(check_matcher_params("lightglue", {"features": "disk", "weights": str(path)}, "m"))
    loaded, label, _ = LG.loaded_net(*LG.net_key(p), "w")
    for k, v in net.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    assert label.startswith("sha256:") and not loaded.training


def test_job_facts():
    from descbench.config import job_resources, model_files, needs_learned_extra

    p = check_matcher_params("lightglue", {"features": "sift", "weights": "random", "threads": 2}, "m")
    assert job_resources(p, matcher="lightglue") == {"threads": 2, "gpu": 0} and needs_learned_extra(p, matcher="lightglue")
    assert model_files({**p, "weights": "/x/sift_lightglue.pth"}, matcher="lightglue") == ["/x/sift_lightglue.pth"]


@pytest.mark.bad_input
def test_weights_of_other_features_refused(weight_files):
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "disk", "weights": str(weight_files["superpoint"])},
                                               "matchers.lg.params"),
                  "matchers.lg.params.weights", str(weight_files["superpoint"]), "features 'disk'", "'superpoint'",
                  "fix: set matchers.lg.params.features", exc=ConfigError)
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "disk", "weights": str(weight_files["sift"])}, "matchers.lg.params"),
                  "matchers.lg.params.weights", "'sift'", exc=ConfigError)


def test_config_check_reads_the_file_on_the_cpu(weight_files, monkeypatch):
    """device: cuda is the job's (a cluster's GPU node); the config check reads the weights without a GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    p = check_matcher_params("lightglue", {"features": "sift", "weights": str(weight_files["sift"]), "device": "cuda"}, "m")
    assert p["device"] == "cuda"


@pytest.mark.bad_input
def test_weights_of_another_model_refused(tmp_path):
    path = tmp_path / "hardnet.pth"
    torch.save(kornia.feature.HardNet(pretrained=False).state_dict(), path)
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "sift", "weights": str(path)}, "matchers.lg.params"),
                  "matchers.lg.params.weights", str(path), "none of kornia's features", "fix:", exc=ConfigError)
    bad = tmp_path / "text.pth"
    bad.write_text("not torch")
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "sift", "weights": str(bad)}, "matchers.lg.params"),
                  "matchers.lg.params.weights", str(bad), "not a torch file", exc=ConfigError)


@pytest.mark.bad_input
def test_missing_file_and_unknown_features_refused(tmp_path):
    missing = tmp_path / "nope.pth"
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "sift", "weights": str(missing)}, "matchers.lg.params"),
                  "matchers.lg.params.weights", str(missing), "does not exist", "huggingface.co/kornia/lightglue", exc=ConfigError)
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "orb", "weights": "random"}, "matchers.lg.params"),
                  "matchers.lg.params.features", exc=ConfigError)
    raises_naming(lambda: check_matcher_params("lightglue", {"features": "sift"}, "matchers.lg.params"), "weights", exc=ConfigError)


@pytest.mark.bad_input
def test_config_requires_listed_compatible_descriptors():
    cfg = shipped_config()
    cfg["matchers"] = {"lg": {"matcher": "lightglue", "params": {"features": "sift", "weights": "random"}}}
    raises_naming(lambda: validate_config(cfg, SCHEMA), "matchers.lg.descriptors", "fix: set matchers.lg.descriptors", exc=ConfigError)
    cfg["descriptors"]["orb"] = {"family": "orb"}
    cfg["matchers"]["lg"]["descriptors"] = ["sift", "orb"]
    raises_naming(lambda: validate_config(cfg, SCHEMA), "matchers.lg.descriptors", "'orb'", "packed binary", exc=ConfigError)
    cfg["descriptors"]["rgb"] = {"family": "rgbsift"}
    cfg["matchers"]["lg"]["descriptors"] = ["rgb"]
    raises_naming(lambda: validate_config(cfg, SCHEMA), "matchers.lg.descriptors", "'rgb' has 384 columns", "takes 128",
                  "fix:", exc=ConfigError)
    cfg["matchers"]["lg"]["descriptors"] = ["sift", "rootsift"]
    assert validate_config(cfg, SCHEMA)["matchers"]["lg"]["params"]["filter_threshold"] == 0.1


@pytest.mark.bad_input
def test_descriptor_width_and_range_checked_in_the_job():
    a, b = pair(n=30, inliers=20, d=64)
    p = cpu(check_matcher_params("lightglue", {"features": "sift", "weights": "random"}, "m"))
    raises_naming(lambda: run_matcher("lightglue", p, a, b, "w"), "features 'sift'", "128 columns", "have 64", "fix:")
    a, b = pair(n=30, inliers=20)
    far = MatchSide(dataclasses.replace(a.keypoints, y=a.keypoints.y + 2000), a.descriptors, a.image_size)
    raises_naming(lambda: run_matcher("lightglue", p, far, b, "w"), "keypoint 0 of image a", "640 x 480", "fix:")
