"""descbench.descriptors.l2net and family ``l2net`` (the workbench's LIBTORCH_L2NET): the architecture
against an independent definition of the workbench's, a traced TorchScript file (as the workbench makes
simple_l2net.pt) loads and gives the traced module's rows on the same patches, bad weights files, config.

Every network here is made in the test (random weights, random BatchNorm statistics): nothing is
downloaded, and the workbench's own file is not needed.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from descbench.config import validate_config
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import kornia_nets as KN
from descbench.descriptors import l2net as L2
from descbench.descriptors import patch_sampling as ps
from descbench.descriptors.sift_kernel import l2_rows
from descbench.errors import ConfigError
from descbench.fileops import file_sha256
from descbench.patches import describe as D

from conftest import raises_naming
from tests.descbench.descriptors.test_kornia_nets import image, keypoints  # noqa: F401 (image: a fixture)

WHERE = "descriptors.d.params"
RUN_WHERE = "descriptor family 'l2net' params.weights"  # a job's errors name the family's params (KN.where_of)


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


class WorkbenchNet(nn.Module):
    """The network of the workbench's create_simple_l2net() (download_pytorch_models.py:118-155), written
    independently of descbench's: the layer list spelled out, so its state-dict keys are the traced file's."""

    def __init__(self):
        super().__init__()
        conv = lambda i, o: nn.Conv2d(i, o, kernel_size=3, stride=1, padding=1)  # noqa: E731
        self.features = nn.Sequential(
            conv(1, 32), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2),
            conv(32, 64), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2, 2),
            conv(64, 128), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2, 2),
            conv(128, 128), nn.BatchNorm2d(128), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(128, 128)

    def forward(self, x):
        y = self.fc(self.avgpool(self.features(x)).view(x.shape[0], -1))
        return y / y.norm(p=2, dim=1, keepdim=True).clamp_min(1e-12)


def workbench_net(seed: int = 7) -> nn.Module:
    """A WorkbenchNet as the script initialises it (kaiming / xavier normal) plus random BatchNorm
    statistics and affine parameters (so eval-mode BatchNorm is not the identity), in eval mode."""
    torch.manual_seed(seed)
    net = WorkbenchNet()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
                m.bias.uniform_(-0.1, 0.1)
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
    return net.eval()


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """(path, module): WorkbenchNet traced with torch.jit.trace on a 1 x 1 x 32 x 32 input and saved,
    as the workbench makes models/simple_l2net.pt."""
    net = workbench_net()
    module = torch.jit.trace(net, torch.randn(1, 1, 32, 32))
    path = tmp_path_factory.mktemp("models") / "simple_l2net.pt"
    module.save(str(path))
    return path, torch.jit.load(str(path))


def rows(params, image, kps=None):
    filled = check_descriptor_params("l2net", params, WHERE)
    return compute_descriptors("l2net", filled, image, keypoints(12) if kps is None else kps, {}, "test")


def grey(path) -> np.ndarray:
    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2GRAY)


# ----------------------------------------------------------------------------- the architecture


def test_architecture_has_the_workbench_networks_keys_and_shapes():
    ours = L2.simple_l2net().state_dict()
    theirs = WorkbenchNet().state_dict()
    assert [(k, tuple(v.shape)) for k, v in ours.items()] == [(k, tuple(v.shape)) for k, v in theirs.items()]
    assert L2.build("workbench_simple").__class__.__name__ == "SimpleL2Net"


def test_traced_file_gives_the_traced_modules_rows_on_the_same_patches(traced, image):
    """The family on the workbench-style TorchScript file = that traced module run directly on the
    LibTorch-convention patches, rows L2-normalised (the wrapper's tensorToMat)."""
    path, module = traced
    kps = keypoints(12)
    got = rows({"weights": str(path), "device": "cpu"}, image, kps)
    patches = ps.sample_patches(grey(image), kps, ps.LIBTORCH)
    with torch.inference_mode():
        ref = l2_rows(module(torch.from_numpy(patches[:, None])).numpy())
    diff = float(np.abs(got - ref).max())
    assert got.shape == (len(kps), 128) and got.dtype == np.float32
    assert diff <= 1e-6, diff  # measured: 0.0 (torch 2.13 CPU, one thread: the same kernels)
    assert np.all(np.abs(np.linalg.norm(got, axis=1) - 1) < 1e-6)


def test_a_state_dict_of_the_architecture_gives_the_same_rows(traced, image, tmp_path):
    path, module = traced
    sd = tmp_path / "l2net_state.pt"
    torch.save(workbench_net().state_dict(), sd)
    assert np.array_equal(rows({"weights": str(sd), "device": "cpu"}, image), rows({"weights": str(path), "device": "cpu"}, image))


def test_patch_hook_is_resize_then_the_net(traced):
    path, module = traced
    rng = np.random.default_rng(11)
    hp = np.stack([cv2.GaussianBlur(rng.integers(0, 256, (65, 65), dtype=np.uint8), (0, 0), s) for s in (1.0, 2.0)])
    got = D.describe_patches(hp, "l2net", {"weights": str(path)})
    u8 = np.stack([cv2.resize(p, (32, 32), interpolation=cv2.INTER_LINEAR) for p in hp])
    with torch.inference_mode():
        ref = l2_rows(module(torch.from_numpy(ps.normalise_patches(u8, ps.LIBTORCH)[:, None])).numpy())
    assert np.array_equal(got, ref)


def test_random_weights_are_seeded_and_labelled(image):
    KN.loaded_net.cache_clear()
    a = rows({"weights": "random"}, image)
    b = rows({"weights": "random", "weights_seed": 0}, image)
    c = rows({"weights": "random", "weights_seed": 1}, image)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    prov = KN.runtime_provenance("l2net", check_descriptor_params("l2net", {"weights": "random"}, "d"))
    assert prov["weights"] == "random(seed=0, key=l2net)" and prov["network"] == "descbench.descriptors.l2net (workbench_simple)"


def test_runtime_provenance_of_a_file(traced):
    path, _ = traced
    prov = KN.runtime_provenance("l2net", check_descriptor_params("l2net", {"weights": str(path)}, "d"))
    assert prov["weights"] == f"sha256:{file_sha256(path)}" and prov["weights_file"] == str(path)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.bad_input
def test_torchscript_of_another_network_names_the_file_and_the_first_key(image, tmp_path):
    path = tmp_path / "other.pt"
    other = nn.Module()
    other.features = nn.Sequential(nn.Conv2d(1, 4, 3))
    other.forward = lambda x: other.features(x).flatten(1)
    torch.jit.trace(other.eval(), torch.zeros(1, 1, 32, 32)).save(str(path))
    raises_naming(lambda: rows({"weights": str(path)}, image), RUN_WHERE, str(path), "does not fit SimpleL2Net",
                  "key 'features.0.weight' has shape (4, 1, 3, 3), the module expects (32, 1, 3, 3)",
                  "simple_l2net.pt", exc=ConfigError)


@pytest.mark.bad_input
def test_state_dict_with_a_wrong_shape_names_the_key(image, tmp_path):
    sd = dict(workbench_net().state_dict())
    sd["fc.weight"] = torch.zeros(64, 128)
    path = tmp_path / "bad.pt"
    torch.save(sd, path)
    raises_naming(lambda: rows({"weights": str(path)}, image), str(path),
                  "key 'fc.weight' has shape (64, 128), the module expects (128, 128)", exc=ConfigError)


@pytest.mark.bad_input
def test_a_damaged_torchscript_archive_is_named(traced, image, tmp_path):
    path = tmp_path / "damaged.pt"
    with zipfile.ZipFile(traced[0]) as src, zipfile.ZipFile(path, "w") as dst:
        for name in src.namelist():
            if "/data/" not in name:  # the tensors' storage left out
                dst.writestr(name, src.read(name))
    raises_naming(lambda: rows({"weights": str(path)}, image), RUN_WHERE, str(path),
                  "looks like a TorchScript archive but torch.jit.load cannot read it", "fix:", exc=ConfigError)


@pytest.mark.bad_input
def test_not_a_torch_file_is_named(image, tmp_path):
    path = tmp_path / "simple_l2net.pt"
    path.write_bytes(b"<html>not found</html>")
    raises_naming(lambda: rows({"weights": str(path)}, image), str(path), "is not a torch file", exc=ConfigError)


@pytest.mark.bad_input
def test_missing_file_says_it_cannot_be_regenerated(tmp_path):
    path = tmp_path / "simple_l2net.pt"
    raises_naming(lambda: check_descriptor_params("l2net", {"weights": str(path)}, WHERE), f"{WHERE}.weights", str(path),
                  "cannot be regenerated", "models/ folder", exc=ConfigError)


# ----------------------------------------------------------------------------- config


SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
BASE = {"keypoint_sets": {"s": {"detector": "sift"}}}


@pytest.mark.bad_input
def test_config_validates_and_names_a_bad_architecture():
    cfg = validate_config({**BASE, "descriptors": {"d": {"family": "l2net", "params": {"weights": "random"}}}}, SCHEMA)
    assert cfg["descriptors"]["d"]["params"]["architecture"] == "workbench_simple"
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.architecture"):
        validate_config({**BASE, "descriptors": {"d": {"family": "l2net", "params": {"weights": "random",
                                                                                    "architecture": "tian2017"}}}}, SCHEMA)


def test_validated_params_are_the_libtorch_convention():
    filled = check_descriptor_params("l2net", {"weights": "random"}, "d")
    assert {k: filled[k] for k in KN.CONVENTION_FIELDS} == dict(vars(ps.LIBTORCH))
    assert get_family("l2net").whole_patch


def test_kornia_is_not_needed(monkeypatch, image):
    monkeypatch.setitem(sys.modules, "kornia", None)
    filled = check_descriptor_params("l2net", {"weights": "random"}, "d")
    KN.loaded_net.cache_clear()
    assert compute_descriptors("l2net", filled, image, keypoints(3), {}, "t").shape == (3, 128)
