"""SuperPoint as a joint network (descbench.keypoints.joint, backend descbench.keypoints.superpoint).

Nothing is downloaded: ``weights: random`` is ``superpoint_net(layout)`` built under
``torch.manual_seed(random_seed(weights_seed, "superpoint"))``; the reference in every test is
:func:`descbench.keypoints.superpoint.detect_and_describe` / ``describe`` called directly on the
set's grey image ``/ 255``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import raises_naming
from descbench.errors import ConfigError
from descbench.keypoints import joint as J
from descbench.keypoints import superpoint as SP
from descbench.keypoints.detectors import DETECTORS
from descbench.params import config_schema
from descbench.torchrt import random_seed
from tests.descbench.keypoints.test_joint import grey, image, odd_image, write_image  # noqa: F401 (fixtures)
from tests.descbench.keypoints.test_joint import params as joint_params

LAYOUTS = ("magicleap", "rpautrat")


def params(**given) -> dict:
    """SuperPoint's detector params validated by the config schema (test_joint's helper)."""
    return joint_params("superpoint", **given)


def random_net(layout: str, seed: int = 0):
    torch.set_num_threads(1)
    torch.manual_seed(random_seed(seed, "superpoint"))
    return SP.superpoint_net(layout).eval()


def post(p: dict) -> dict:
    return {k: p[k] for k in SP.DEFAULTS}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("given", [{}, {"nms": "greedy", "nms_radius": 2, "detection_threshold": 0.0,
                                        "remove_borders": 0, "max_keypoints": 40, "sampling": "superglue"}])
def test_keypoints_scores_and_rows_equal_detect_and_describe_bit_for_bit(layout, given, image, odd_image):
    p = params(layout=layout, **given)
    for path in (image, odd_image):
        kps, rows = J.runner("superpoint", p).detect(path, grey(path))
        xy, score, desc = SP.detect_and_describe(grey(path) / 255.0, random_net(layout), post(p))
        assert len(kps) > 20 and (given.get("max_keypoints") is None or len(kps) == 40)
        assert np.array_equal(kps.x, xy[:, 0]) and np.array_equal(kps.y, xy[:, 1])
        assert np.array_equal(kps.response, score)
        assert np.array_equal(rows, desc) and rows.shape == (len(kps), 256) and rows.dtype == np.float32
        assert np.array_equal(kps.source_index, np.arange(len(kps)))
        assert (kps.size == 12.0).all() and (kps.angle == -1).all() and (kps.octave == 0).all() and (kps.class_id == -1).all()


def test_random_weights_with_layout_auto_build_the_magicleap_layout(image):
    p = params()
    assert p["layout"] == "auto"
    module, label = J.load_module("superpoint", p, "w")
    assert module.layout == "magicleap" and label == "random(seed=0, key=superpoint)"
    _, rows = J.runner("superpoint", p).detect(image, grey(image))
    assert np.array_equal(rows, SP.detect_and_describe(grey(image) / 255.0, random_net("magicleap"))[2])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sampling", ["auto", "superglue"])
def test_describing_its_own_keypoints_gives_its_own_rows(layout, sampling, image, odd_image):
    p = params(layout=layout, sampling=sampling)
    for path in (image, odd_image):
        kps, rows = J.runner("superpoint", p).detect(path, grey(path))
        again = J.runner("superpoint", p, detection=False).describe(path, grey(path), kps)
        assert np.array_equal(again, rows), path.name


@pytest.mark.parametrize("layout", LAYOUTS)
def test_on_other_keypoints_the_rows_are_superpoints_describe(layout, odd_image):
    p = params(layout=layout)
    kps, _ = J.runner("superpoint", p).detect(odd_image, grey(odd_image))
    other = J.ImageKeypoints(kps.x[:30] + 0.37, kps.y[:30] - 0.81, *(getattr(kps, f)[:30] for f in
                             ("size", "angle", "response", "octave", "class_id", "source_index")))
    rows = J.runner("superpoint", p, detection=False).describe(odd_image, grey(odd_image), other)
    ref = SP.describe(grey(odd_image) / 255.0, random_net(layout), np.stack([other.x, other.y], 1), post(p))
    assert np.array_equal(rows, ref) and len(rows) == 30


def test_defaults_are_superpoints_own():
    d = config_schema()["definitions"]["superpoint_detector_params"]["properties"]
    assert {k: d[k]["default"] for k in SP.DEFAULTS} == SP.DEFAULTS  # the one source: superpoint.DEFAULTS
    assert tuple(d["nms"]["enum"]) == SP.NMS_MODES and tuple(d["sampling"]["enum"]) == ("auto", *SP.SAMPLINGS)
    assert tuple(d["layout"]["enum"]) == ("auto", *SP.LAYOUTS)
    p = params()
    assert post(p) == SP.DEFAULTS and p["resize"] is None and p["weights_seed"] == 0 and p["default_size_px"] == 12.0
    assert DETECTORS["superpoint"].network == "superpoint" and DETECTORS["superpoint"].runtime == "torch"
    assert DETECTORS["superpoint"].cap_of(params(max_keypoints=300)) == 300 and DETECTORS["superpoint"].cap_of(p) is None
    assert J.dim_of("superpoint", p) == 256
    # descbench's own network: torch only (kornia for resize)
    assert J.required_modules("superpoint", p) == ("torch",)
    assert J.required_modules("superpoint", params(resize=64)) == ("torch", "kornia")


def test_resize_runs_it_on_glue_factorys_resized_image_and_maps_keypoints_back(odd_image):
    from kornia.geometry.transform import resize

    p = params(resize=64)
    kps, rows = J.runner("superpoint", p).detect(odd_image, grey(odd_image))
    x = resize(torch.from_numpy(grey(odd_image).astype(np.float32) / np.float32(255.0))[None, None], (48, 64),
               interpolation="bilinear", antialias=True, align_corners=None)
    xy, score, desc = SP.detect_and_describe(x[0, 0].clamp(0, 1).numpy(), random_net("magicleap"))
    xy = (xy.astype(np.float64) / np.array([64 / 133, 48 / 101])).astype(np.float32)
    assert len(kps) > 5 and np.array_equal(kps.x, xy[:, 0]) and np.array_equal(kps.y, xy[:, 1])
    assert np.array_equal(kps.response, score) and np.array_equal(rows, desc)
    again = J.runner("superpoint", p, detection=False).describe(odd_image, grey(odd_image), kps)
    assert np.abs(again - rows).max() < 1e-5


def test_the_network_input_is_clipped_to_0_1_as_superpoint_requires():
    # (kornia's antialiased resize may round a white region past 1; superpoint refuses values outside [0, 1])
    x = torch.tensor([[[[1.0000001, 0.5], [0.0, -1e-7]]]], dtype=torch.float32)
    g = J._superpoint_grey(x)
    assert g.dtype == np.float32 and g.tolist() == [[1.0, 0.5], [0.0, 0.0]]
    x = torch.rand(1, 1, 9, 10)
    assert np.array_equal(J._superpoint_grey(x), x[0, 0].numpy())  # a no-op inside [0, 1]


def test_identity_is_layout_sampling_and_weights_not_the_detection_params():
    p = params()
    spec = {"detector": "superpoint", "params": params(nms="greedy", nms_radius=2, max_keypoints=10)}
    assert J.reads_own_rows("superpoint", p, spec)
    assert not J.reads_own_rows("superpoint", {**p, "sampling": "superglue"}, spec)
    assert not J.reads_own_rows("superpoint", {**p, "layout": "rpautrat"}, spec)
    assert not J.reads_own_rows("superpoint", {**p, "weights_seed": 1}, spec)


# ----------------------------------------------------------------------------- weights files


def saved(layout: str, tmp_path: Path, seed: int = 3) -> Path:
    """A seeded SuperPointNet's state dict saved in the layout's key names (the published files' layout)."""
    torch.manual_seed(seed)
    path = tmp_path / f"superpoint_{layout}.pth"
    torch.save(SP.superpoint_net(layout).state_dict(), path)
    return path


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("given", ["auto", "layout"])
def test_a_weights_file_in_either_layout_loads(layout, given, image, tmp_path):
    path = saved(layout, tmp_path)
    p = params(weights=str(path), layout=layout if given == "layout" else "auto")
    module, label = J.load_module("superpoint", p, "w")
    assert module.layout == layout and label.startswith("sha256:") and not module.training
    ref, found = SP.load_superpoint(path)
    assert found == layout
    kps, rows = J.runner("superpoint", p).detect(image, grey(image))
    xy, score, desc = SP.detect_and_describe(grey(image) / 255.0, ref)
    assert len(kps) and np.array_equal(kps.x, xy[:, 0]) and np.array_equal(kps.response, score) and np.array_equal(rows, desc)
    assert J.runner("superpoint", p).provenance()["network"] == "descbench.keypoints.superpoint.SuperPointNet"


@pytest.mark.bad_input
def test_another_models_weights_file_is_a_config_error_naming_key_file_and_fix(tmp_path):
    import kornia.feature as KF

    path = tmp_path / "xfeat.pt"
    torch.save(KF.XFeat().net.state_dict(), path)
    raises_naming(lambda: params(weights=str(path)), "keypoint_sets.k.params.weights", str(path),
                  "not a SuperPoint checkpoint of a known layout", "fix: give", "superpoint_v1.pth",
                  "superpoint_v6_from_tf.pth", exc=ConfigError)


@pytest.mark.bad_input
def test_a_layout_that_does_not_fit_the_file_names_both_keys_and_the_fix(tmp_path):
    path = saved("magicleap", tmp_path)
    raises_naming(lambda: params(weights=str(path), layout="rpautrat"), "keypoint_sets.k.params.weights",
                  "keypoint_sets.k.params.layout: rpautrat", str(path), "is in layout magicleap",
                  "fix: use layout 'auto' or 'magicleap'", exc=ConfigError)
    state = {k: v for k, v in torch.load(path, weights_only=True).items() if k != "convDb.bias"}
    torch.save(state, tmp_path / "cut.pth")
    raises_naming(lambda: params(weights=str(tmp_path / "cut.pth")), "keypoint_sets.k.params.weights", "cut.pth",
                  "convDb.bias", "fix: give the unmodified", exc=ConfigError)


@pytest.mark.bad_input
def test_missing_or_unreadable_weights_are_config_errors(tmp_path):
    raises_naming(lambda: params(weights=str(tmp_path / "nowhere.pth")), "keypoint_sets.k.params.weights",
                  "nowhere.pth does not exist", "superpoint_v6_from_tf.pth", exc=ConfigError)
    (tmp_path / "bad.pth").write_text("not torch")
    raises_naming(lambda: params(weights=str(tmp_path / "bad.pth")), "keypoint_sets.k.params.weights", "bad.pth",
                  "is not a torch file", "fix:", exc=ConfigError)


@pytest.mark.bad_input
@pytest.mark.parametrize("given, key", [({"nms": "fast"}, "nms"), ({"nms_radius": -1}, "nms_radius"),
                                        ({"detection_threshold": 1.0}, "detection_threshold"),
                                        ({"remove_borders": -2}, "remove_borders"), ({"max_keypoints": 0}, "max_keypoints"),
                                        ({"max_keypoints": -2}, "max_keypoints"), ({"layout": "tf"}, "layout"),
                                        ({"sampling": "bicubic"}, "sampling"), ({"top_k": 5}, "top_k"),
                                        ({"resize": 8}, "resize")])
def test_param_checks_name_the_key(given, key):
    raises_naming(lambda: params(**given), "keypoint_sets.k.params", key, exc=ConfigError)
