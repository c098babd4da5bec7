"""kornia's DeDoDe as a joint network (descbench.keypoints.joint, ``dedode``).

The reference is kornia's ``DeDoDe`` built under ``torch.manual_seed(random_seed(weights_seed,
"dedode"))`` (its constructor downloads nothing for ``descriptor_model: B``) and called directly on
the RGB image ``/ 255``. ``G`` (DINOv2, downloaded by kornia) is never constructed here.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import kornia.feature as KF
import numpy as np
import pytest
import torch

from descbench.errors import ConfigError
from descbench.keypoints import joint as J
from descbench.torchrt import random_seed
from tests.conftest import raises_naming
from tests.descbench.keypoints.test_joint import params, write_image

NET = "dedode"


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    return write_image(tmp_path_factory.mktemp("dedode"), 96, 128)


@pytest.fixture(scope="module")
def odd_image(tmp_path_factory) -> Path:
    return write_image(tmp_path_factory.mktemp("dedode_odd"), 101, 133, seed=1)


def rgb(path: Path):
    im = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    return torch.from_numpy(im).permute(2, 0, 1)[None].float() / 255.0


def kornias(seed: int = 0):
    torch.set_num_threads(1)
    torch.manual_seed(random_seed(seed, NET))
    return KF.DeDoDe(detector_model="L", descriptor_model="B", amp_dtype=torch.float16).eval()


@pytest.mark.parametrize("which, pad", [("image", True), ("odd_image", True), ("odd_image", False)])
def test_keypoints_and_rows_equal_kornias_module_bit_for_bit(which, pad, request):
    path = request.getfixturevalue(which)
    p = params(NET, n=300, pad_if_not_divisible=pad)
    kps, rows = J.runner(NET, p).detect(path, None)
    with torch.inference_mode():
        xy, score, desc = kornias()(rgb(path), n=300, pad_if_not_divisible=pad)
    xy = xy[0].numpy()
    assert len(kps) == 300 and rows.shape == (300, 256)
    assert np.array_equal(kps.x, xy[:, 0] - np.float32(0.5)) and np.array_equal(kps.y, xy[:, 1] - np.float32(0.5))
    assert np.array_equal(kps.response, score[0].numpy()) and np.array_equal(rows, desc[0].numpy())
    assert (kps.size == 12).all() and (kps.angle == -1).all()
    # pixel i (kornia's i + 0.5, up to the float32 rounding of its normalised grid)
    assert np.abs(kps.x - np.round(kps.x)).max() < 1e-4 and np.abs(kps.y - np.round(kps.y)).max() < 1e-4


def test_on_other_keypoints_the_rows_are_kornias_describe_at_their_normalised_positions(image):
    p = params(NET, n=200)
    r = J.runner(NET, p)
    kps, rows = r.detect(image, None)
    other = J.ImageKeypoints(kps.x[:50] + np.float32(0.3), *(getattr(kps, f)[:50] for f in
                             ("y", "size", "angle", "response", "octave", "class_id", "source_index")))
    got = r.describe(image, None, other)
    k = torch.from_numpy(np.stack([2 * (other.x + 0.5) / 128 - 1, 2 * (other.y + 0.5) / 96 - 1], 1).astype(np.float32))
    with torch.inference_mode():
        want = kornias().describe(rgb(image), keypoints=k[None])[0].numpy()
    assert np.array_equal(got, want)
    own = r.describe(image, None, kps)  # its own keypoints: the round trip i -> i + 0.5 -> normalised
    assert np.allclose(own, rows, rtol=1e-5, atol=1e-6)


def test_resize_maps_keypoints_back_by_its_transform(image):
    import kornia

    p = params(NET, n=100, resize=64)
    kps, rows = J.runner(NET, p).detect(image, None)
    x = kornia.geometry.transform.resize(rgb(image), (48, 64), interpolation="bilinear", antialias=True)
    with torch.inference_mode():
        xy, _, desc = kornias()(x, n=100)
    back = ((xy[0].numpy() - np.float32(0.5)).astype(np.float64) / 0.5).astype(np.float32)
    assert np.array_equal(kps.x, back[:, 0]) and np.array_equal(rows, desc[0].numpy())


def test_weights_files_load_into_detector_and_descriptor(image, tmp_path):
    m = kornias()
    torch.manual_seed(3)
    with torch.no_grad():
        for t in m.parameters():
            t.add_(torch.randn_like(t) * 0.01)
    torch.save(m.detector.state_dict(), tmp_path / "det.pth")
    torch.save(m.descriptor.state_dict(), tmp_path / "desc.pth")
    p = params(NET, n=100, weights=str(tmp_path / "det.pth"), descriptor_weights=str(tmp_path / "desc.pth"))
    kps, rows = J.JointRunner(NET, p).detect(image, None)
    with torch.inference_mode():
        xy, _, desc = m(rgb(image), n=100)
    assert np.array_equal(kps.x, xy[0, :, 0].numpy() - np.float32(0.5)) and np.array_equal(rows, desc[0].numpy())
    ident = J.identity(NET, p)
    assert ident["weights"].startswith("sha256:") and ident["descriptor_weights"].startswith("sha256:")


@pytest.mark.bad_input
def test_g_other_files_and_missing_keys_are_config_errors(tmp_path):
    w = "keypoint_sets.k.params"
    raises_naming(lambda: params(NET, descriptor_model="G"), f"{w}.descriptor_model", "DINOv2",
                  "fix: descriptor_model: B", exc=ConfigError)
    det = tmp_path / "det.pth"
    torch.save(kornias().detector.state_dict(), det)
    raises_naming(lambda: params(NET, weights=str(det)), f"{w}.descriptor_weights", "not given, but weights is a file",
                  "dedode_descriptor_B.pth", exc=ConfigError)
    raises_naming(lambda: params(NET, descriptor_weights=str(det)), f"{w}.descriptor_weights", "det.pth",
                  "does not fit DeDoDeDescriptor", exc=ConfigError)
    raises_naming(lambda: params(NET, detector_model="XL"), w, "detector_model", exc=ConfigError)
    raises_naming(lambda: params(NET, n=0), w, "n", exc=ConfigError)


def test_defaults_are_kornias_forward_and_constructor():
    import inspect

    p = params(NET)
    fwd = inspect.signature(KF.DeDoDe.forward).parameters
    ctor = inspect.signature(KF.DeDoDe).parameters
    assert p["n"] == fwd["n"].default and p["pad_if_not_divisible"] == fwd["pad_if_not_divisible"].default
    assert p["detector_model"] == ctor["detector_model"].default
    assert getattr(torch, p["amp_dtype"]) == ctor["amp_dtype"].default
    assert p["descriptor_model"] == "B" != ctor["descriptor_model"].default  # kornia's G needs DINOv2: refused
