"""kornia's KeyNetAffNetHardNet as a joint network (descbench.keypoints.joint, ``keynet_affnet_hardnet``).

kornia's constructor downloads its four sub-networks (``pretrained=True``); the reference here is
that constructor with kornia's download function replaced by one returning descbench's random
sub-networks' state dicts (``{"state_dict": ...}``, as the published checkpoints hold them), so the
reference is kornia's own class, called directly on ``gray / 255``. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import cv2
import kornia.feature as KF
import numpy as np
import pytest
import torch

from descbench.errors import ConfigError
from descbench.keypoints import joint as J
from descbench.keypoints.keynet import keypoints_from_lafs
from tests.conftest import raises_naming
from tests.descbench.keypoints.test_joint import params, write_image

NET = "keynet_affnet_hardnet"
LOADERS = {"keynet": "kornia.feature.keynet", "orinet": "kornia.feature.orientation",
           "affnet": "kornia.feature.affine_shape", "hardnet": "kornia.feature.hardnet"}


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    return write_image(tmp_path_factory.mktemp("kah"), 96, 128)


def grey(path: Path) -> np.ndarray:
    return cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)


def parts(module) -> dict:
    """The sub-networks of descbench's module, by kornia's checkpoint names."""
    d = {"keynet": module.detector.model, "affnet": module.detector.aff, "hardnet": module.descriptor.descriptor}
    if isinstance(module.detector.ori, KF.LAFOrienter):
        d["orinet"] = module.detector.ori.angle_detector
    return d


def kornias(module, **kwargs):
    """kornia's ``KeyNetAffNetHardNet(**kwargs)``, its downloads answered with ``module``'s sub-networks."""
    sd = {k: m.state_dict() for k, m in parts(module).items()}
    with mock.patch.multiple(LOADERS["keynet"], load_state_dict_from_url=lambda *a, **k: {"state_dict": sd["keynet"]}), \
         mock.patch.multiple(LOADERS["orinet"], load_state_dict_from_url=lambda *a, **k: {"state_dict": sd["orinet"]}), \
         mock.patch.multiple(LOADERS["affnet"], load_state_dict_from_url=lambda *a, **k: {"state_dict": sd["affnet"]}), \
         mock.patch.multiple(LOADERS["hardnet"], load_state_dict_from_url=lambda *a, **k: {"state_dict": sd["hardnet"]}):
        return KF.KeyNetAffNetHardNet(**kwargs).eval()


def reference(module, path: Path, **kwargs):
    torch.set_num_threads(1)
    x = torch.from_numpy(grey(path))[None, None].float() / 255.0
    with torch.inference_mode():
        lafs, resp, desc = kornias(module, **kwargs)(x)
    f = KF.laf_is_filled(lafs)[0]
    return lafs[0, f].numpy(), resp[0, f].numpy(), desc[0, f].numpy()


@pytest.mark.parametrize("upright", [False, True])
def test_keypoints_and_rows_equal_kornias_module_bit_for_bit(image, upright):
    p = params(NET, num_features=150, upright=upright, scale_laf=1.5)
    r = J.runner(NET, p)
    kps, rows = r.detect(image, grey(image))
    lafs, resp, desc = reference(r.module, image, num_features=150, upright=upright, scale_laf=1.5)
    assert 50 < len(kps) <= 150 and rows.shape == (len(kps), 128)
    want = keypoints_from_lafs(lafs, resp)  # keynet's LAF -> keypoint rule, size and angle from the (scaled) LAF
    for f in ("x", "y", "size", "angle", "response"):
        assert np.array_equal(getattr(kps, f), getattr(want, f)), f
    assert np.array_equal(rows, desc)
    assert np.array_equal(kps.source_index, np.arange(len(kps)))


def test_on_other_keypoints_the_rows_are_hardnet_on_their_isotropic_lafs(image):
    p = params(NET, num_features=100)
    r = J.runner(NET, p)
    kps, _ = r.detect(image, grey(image))
    kps.angle[:5] = -1.0  # unset: upright
    rows = r.describe(image, grey(image), kps)
    xy = torch.from_numpy(np.stack([kps.x, kps.y], 1))[None]
    ori = torch.from_numpy(np.where(kps.angle == -1, 0, -kps.angle).astype(np.float32))[None, :, None]
    lafs = KF.laf_from_center_scale_ori(xy, torch.from_numpy(kps.size / 2)[None, :, None, None], ori)
    x = torch.from_numpy(grey(image))[None, None].float() / 255.0
    with torch.inference_mode():
        want = KF.LAFDescriptor(r.module.descriptor.descriptor, patch_size=32)(x, lafs)[0].numpy()
    assert np.array_equal(rows, want)
    back = keypoints_from_lafs(lafs[0].numpy(), kps.response)  # the LAF keeps the keypoint's size and angle
    assert np.allclose(back.size, kps.size, rtol=1e-5)
    assert np.allclose(np.where(kps.angle == -1, 0, kps.angle), back.angle, atol=1e-3)


def test_resize_maps_the_frames_back_by_its_transform(image):
    p = params(NET, num_features=100, resize=64)
    r = J.runner(NET, p)
    kps, rows = r.detect(image, grey(image))
    import kornia

    x = kornia.geometry.transform.resize(torch.from_numpy(grey(image))[None, None].float() / 255.0, (48, 64),
                                         interpolation="bilinear", antialias=True)
    with torch.inference_mode():
        lafs, resp, desc = kornias(r.module, num_features=100)(x)
    f = KF.laf_is_filled(lafs)[0]
    back = (lafs[0, f].numpy().astype(np.float64) / np.array([0.5, 0.5])[:, None]).astype(np.float32)
    want = keypoints_from_lafs(back, resp[0, f].numpy())
    assert len(kps) > 5 and np.array_equal(kps.x, want.x) and np.array_equal(kps.size, want.size)
    assert np.array_equal(rows, desc[0, f].numpy())


def test_weights_files_load_into_each_sub_network(image, tmp_path):
    r = J.JointRunner(NET, params(NET, num_features=80))  # (not the cached runner: its weights are changed here)
    files = {}
    for key, name in (("weights", "keynet"), ("orinet_weights", "orinet"), ("affnet_weights", "affnet"),
                      ("hardnet_weights", "hardnet")):
        files[key] = str(tmp_path / f"{name}.pth")
        torch.manual_seed(1)
        with torch.no_grad():
            for t in parts(r.module)[name].parameters():
                t.add_(torch.randn_like(t) * 0.01)  # other weights than the seed's
        torch.save({"state_dict": parts(r.module)[name].state_dict()}, files[key])
    p = params(NET, num_features=80, **files)
    r2 = J.runner(NET, p)
    kps, rows = r2.detect(image, grey(image))
    lafs, resp, desc = reference(r.module, image, num_features=80)
    assert np.array_equal(rows, desc) and np.array_equal(kps.x, lafs[:, 0, 2])
    assert r2.label.startswith("weights=sha256:") and "; hardnet_weights=sha256:" in r2.label
    assert all(J.identity(NET, p)[k].startswith("sha256:") for k in files)


@pytest.mark.bad_input
def test_weight_keys_are_checked_naming_the_key_and_fix(tmp_path):
    w = "keypoint_sets.k.params"
    raises_naming(lambda: params(NET, upright=True, orinet_weights="random"), f"{w}.orinet_weights",
                  "upright: true runs no OriNet", "fix:", exc=ConfigError)
    hardnet = tmp_path / "hardnet.pth"
    torch.save({"state_dict": KF.HardNet(False).state_dict()}, hardnet)
    raises_naming(lambda: params(NET, weights=str(hardnet)), f"{w}.orinet_weights", "not given, but weights is a file",
                  "fix: give orinet_weights", exc=ConfigError)
    raises_naming(lambda: params(NET, affnet_weights=str(hardnet)), f"{w}.affnet_weights", "hardnet.pth",
                  "does not fit LAFAffNetShapeEstimator", exc=ConfigError)
    raises_naming(lambda: params(NET, hardnet_weights=str(tmp_path / "nowhere.pth")), f"{w}.hardnet_weights",
                  "nowhere.pth does not exist", "liberty_aug", exc=ConfigError)
    raises_naming(lambda: params(NET, num_features=0), w, "num_features", exc=ConfigError)


def test_defaults_are_kornias_constructors():
    import inspect

    p = params(NET)
    sig = inspect.signature(KF.KeyNetAffNetHardNet).parameters
    assert (p["num_features"], p["upright"], p["scale_laf"], p["score_threshold"]) == \
        tuple(sig[k].default for k in ("num_features", "upright", "scale_laf", "score_threshold"))
