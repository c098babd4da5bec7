"""kornia descriptor families (hardnet, hardnet8, sosnet, hynet, tfeat): rows equal to kornia's
module on the same patches, weights, errors, patch hooks, provenance, config validation.

Every net is randomly initialised under a fixed seed (its BatchNorm running statistics too, so the
eval-mode BatchNorm is not the identity) and saved with torch.save(state_dict): nothing is downloaded.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import cv2
import kornia.feature as KF
import numpy as np
import pytest
import torch

from descbench import torchrt
from descbench.config import validate_config
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import kornia_nets as KN
from descbench.descriptors import patch_sampling as ps
from descbench.descriptors.sift_kernel import l2_rows
from descbench.errors import ConfigError
from descbench.fileops import file_sha256
from descbench.keypoints import ImageKeypoints
from descbench.patches import describe as D
from descbench.rng import key_seed as rng_key_seed

FAMILIES = [f for f, spec in KN.NETS.items() if KN.is_kornia(spec)]  # l2net: test_l2net.py
PIP = "pip install -e '.[learned]'"


@pytest.fixture(autouse=True)
def one_thread():
    """The reference calls run on the thread count the families set (threads: 1, the default)."""
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """A 60 x 80 colour PNG texture: its cvtColor grey differs from OpenCV's grey decode."""
    rng = np.random.default_rng(3)
    bgr = cv2.GaussianBlur(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8), (0, 0), 1.5)
    path = tmp_path_factory.mktemp("img") / "img.png"
    assert cv2.imwrite(str(path), bgr)
    return path


def keypoints(n: int = 9) -> ImageKeypoints:
    """Sizes 0 (clamped), small and large, angles unset (-1), 0 and arbitrary; some at the border."""
    rng = np.random.default_rng(5)
    f = lambda v: np.asarray(v, np.float32)  # noqa: E731
    x = f(np.r_[0.0, 79.0, rng.uniform(5, 75, n - 2)])
    y = f(np.r_[0.0, 59.0, rng.uniform(5, 55, n - 2)])
    size = f(np.r_[0.0, 40.0, rng.uniform(3, 30, n - 2)])
    angle = f(np.r_[-1.0, 0.0, rng.uniform(0, 360, n - 2)])
    return ImageKeypoints(x, y, size, angle, f(np.zeros(n)), np.zeros(n, np.int32), np.full(n, -1, np.int32),
                          np.arange(n, dtype=np.int32))


def kornia_net(family: str, seed: int = 0):
    """The kornia module, random weights and random BatchNorm statistics, in eval mode."""
    torch.manual_seed(seed)
    net = getattr(KF, KN.NETS[family].kornia_class)(pretrained=False)
    with torch.no_grad():
        for name, buf in net.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_(0, 0.1)
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 2.0)
    return net.eval()


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """family -> a state dict file of a random net."""
    root = tmp_path_factory.mktemp("weights")
    out = {}
    for i, fam in enumerate(FAMILIES):
        out[fam] = root / f"{fam}.pt"
        torch.save(kornia_net(fam, seed=10 + i).state_dict(), out[fam])
    return out


@functools.cache
def reference_net(family: str, weights_file: Path):
    """kornia's module with the state dict of ``weights_file``, loaded by torch alone."""
    net = getattr(KF, KN.NETS[family].kornia_class)(pretrained=False)
    net.load_state_dict(torch.load(weights_file, weights_only=True))
    return net.eval()


def direct(family: str, weights_file: Path, patches: np.ndarray) -> np.ndarray:
    """kornia's module on float32 patches [N, n, n], one batch, no descbench code."""
    net = reference_net(family, weights_file)
    with torch.inference_mode():
        return net(torch.from_numpy(patches[:, None])).numpy()


def grey(path) -> np.ndarray:
    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2GRAY)


def rows(family, params, image, kps=None):
    filled = check_descriptor_params(family, params, "descriptors.d.params")
    return compute_descriptors(family, filled, image, keypoints() if kps is None else kps, {}, "test")


# ----------------------------------------------------------------------------- the nets as kornia defines them


@pytest.mark.parametrize("family", FAMILIES)
def test_spec_is_kornias(family):
    spec = KN.NETS[family]
    cls = getattr(KF, spec.kornia_class)
    assert cls.patch_size == spec.input_size == ps.LIBTORCH.input_size
    with torch.inference_mode():
        assert cls(pretrained=False).eval()(torch.rand(2, 1, 32, 32)).shape == (2, spec.dim)
    assert "https://" in KN.published_source(spec)


# ----------------------------------------------------------------------------- rows = kornia on the same patches


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("l2", [False, True])
def test_rows_equal_kornia_on_the_same_patches(family, l2, image, weights):
    got = rows(family, {"weights": str(weights[family]), "l2_normalise": l2, "device": "cpu"}, image)
    # the workbench's LibTorch convention; HyNet's default is its reference input, [0, 1] (no standardisation)
    conv = replace(ps.LIBTORCH, normalisation="none") if family == "hynet" else ps.LIBTORCH
    patches = ps.sample_patches(grey(image), keypoints(), conv)
    ref = direct(family, weights[family], patches)
    ref = l2_rows(ref) if l2 else ref
    assert got.dtype == np.float32 and got.shape == (len(keypoints()), 128)
    assert np.array_equal(got, ref)
    assert np.unique(got, axis=0).shape[0] == len(got)  # distinct patches, distinct rows (not a constant net)


@pytest.mark.parametrize("family", FAMILIES)
def test_rows_depend_on_the_batch_only_in_the_last_bits(family, image, weights):
    """Rows of one patch per forward (batch_mem_mb tiny), of batches of 4 (9 patches: 4 + 4 + 1) and
    of one forward for all agree to float32 rounding, not bit for bit: torch does not promise
    batch-invariant CPU results, and oneDNN picks its convolution kernel and blocking by batch
    size (measured, torch 2.13 on 1 thread: batch 1 or 3 differs from 2 or 4 by up to 6e-7 on
    unit-norm rows, TFeat's up to batch 8). A given batch_mem_mb is reproducible run to run
    (configure's deterministic settings), and the provenance records the batch size."""
    base = {"weights": str(weights[family]), "device": "cpu"}
    one = rows(family, {**base, "batch_mem_mb": 1e-6}, image)
    assert KN.batch_of(family, check_descriptor_params(family, {**base, "batch_mem_mb": 1e-6}, "d")) == 1
    four = {**base, "batch_mem_mb": 4 * KN.NETS[family].bytes_per_patch / 2**20}
    assert KN.batch_of(family, check_descriptor_params(family, four, "d")) == 4
    several = rows(family, four, image)
    whole = rows(family, base, image)
    np.testing.assert_allclose(one, whole, rtol=0, atol=2e-6)
    np.testing.assert_allclose(several, whole, rtol=0, atol=2e-6)
    assert np.array_equal(several, rows(family, four, image))  # the same batches: the same bits


def test_normalisation_override_reaches_the_net(image, weights):
    """``normalisation: none`` feeds p = u8 / 255 (HyNet's reference input, its default); the
    workbench's per-patch standardisation is one override away."""
    got = rows("hynet", {"weights": str(weights["hynet"]), "l2_normalise": False}, image)
    patches = ps.sample_patches(grey(image), keypoints(), replace(ps.LIBTORCH, normalisation="none"))
    assert np.array_equal(got, direct("hynet", weights["hynet"], patches))
    std = rows("hynet", {"weights": str(weights["hynet"]), "normalisation": "per_patch", "l2_normalise": False}, image)
    assert np.array_equal(std, direct("hynet", weights["hynet"], ps.sample_patches(grey(image), keypoints(), ps.LIBTORCH)))
    assert not np.array_equal(got, std)
    # the other four default to the workbench's standardisation
    assert check_descriptor_params("hardnet", {"weights": "random"}, "d")["normalisation"] == "per_patch"


def test_workbench_dnn_convention(image, weights):
    got = rows("hardnet", {"weights": str(weights["hardnet"]), "patch_convention": "workbench_dnn", "l2_normalise": False},
               image)
    assert np.array_equal(got, direct("hardnet", weights["hardnet"], ps.sample_patches(grey(image), keypoints(), ps.DNN)))


def test_no_keypoints_gives_zero_rows_without_the_net(image):
    KN.loaded_net.cache_clear()
    empty = keypoints().take(np.zeros(0, dtype=np.int64))
    out = rows("hardnet", {"weights": "random"}, image, empty)
    assert out.shape == (0, 128) and out.dtype == np.float32
    assert KN.loaded_net.cache_info().misses == 0  # the net was never built


def test_compute_applies_the_runtime_settings(image):
    torch.use_deterministic_algorithms(False)
    rows("tfeat", {"weights": "random", "threads": 2}, image)
    assert torch.get_num_threads() == 2 and torch.are_deterministic_algorithms_enabled()


def test_weights_are_loaded_once_per_process(image, weights):
    KN.loaded_net.cache_clear()
    for _ in range(3):
        rows("sosnet", {"weights": str(weights["sosnet"])}, image)
    info = KN.loaded_net.cache_info()
    assert (info.misses, info.hits) == (1, 2)


def test_a_rewritten_weights_file_is_loaded_again(image, tmp_path):
    path = tmp_path / "w.pt"
    torch.save(kornia_net("tfeat", seed=1).state_dict(), path)
    os.utime(path, ns=(1, 1))
    first = rows("tfeat", {"weights": str(path)}, image)
    torch.save(kornia_net("tfeat", seed=2).state_dict(), path)
    os.utime(path, ns=(2, 2))
    assert not np.array_equal(first, rows("tfeat", {"weights": str(path)}, image))


# ----------------------------------------------------------------------------- random weights


@pytest.mark.parametrize("family", FAMILIES)
def test_random_weights_are_deterministic_given_the_seed(family, image):
    KN.loaded_net.cache_clear()
    a = rows(family, {"weights": "random"}, image)
    KN.loaded_net.cache_clear()
    b = rows(family, {"weights": "random", "weights_seed": 0}, image)
    c = rows(family, {"weights": "random", "weights_seed": 1}, image)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_random_weights_are_seeded_per_family(image):
    """HardNet and SOSNet have the same layers in the same order: one torch seed would give them the
    same weights and the same rows; the seed is derived from the family name (torchrt.random_seed)."""
    h = KN.loaded_net("hardnet", "random", 0, "cpu")[0].state_dict()
    s = KN.loaded_net("sosnet", "random", 0, "cpu")[0].state_dict()
    hw = [v for k, v in h.items() if k.endswith(".weight")]  # the seven convolutions, in order (no affine BatchNorms)
    sw = [v for k, v in s.items() if k.endswith(".weight")]
    assert len(hw) == len(sw) == 7 and all(x.shape == y.shape for x, y in zip(hw, sw))
    assert not any(torch.equal(x, y) for x, y in zip(hw, sw))
    a = rows("hardnet", {"weights": "random"}, image)
    b = rows("sosnet", {"weights": "random"}, image)
    assert np.abs(a - b).max() > 0.1
    net = KN.NETS["hardnet"]
    ref = getattr(KF, net.kornia_class)(pretrained=False)
    torchrt.random_init(ref, rng_key_seed("descbench-random-weights:hardnet:0"))  # the documented derivation
    assert all(torch.equal(v, h[k]) for k, v in ref.state_dict().items())


# ----------------------------------------------------------------------------- errors


@pytest.mark.bad_input
def test_missing_weights_file_names_it_and_the_published_weights(image, tmp_path):
    path = tmp_path / "hardnet.pth"
    # at config time (the workflow's DAG build), naming the config key
    with pytest.raises(ConfigError) as e:
        rows("hardnet", {"weights": str(path)}, image)
    msg = str(e.value)
    assert "descriptors.d.params.weights" in msg and str(path) in msg
    # kornia's published HardNet weights (what pretrained=True loads: liberty_aug)
    assert "checkpoint_liberty_with_aug.pth" in msg and "kornia.feature.hardnet.urls['liberty_aug']" in msg
    # and in the job, if the file went away after validation
    torch.save(KF.HardNet(pretrained=False).state_dict(), path)
    filled = check_descriptor_params("hardnet", {"weights": str(path)}, "descriptors.d.params")
    path.unlink()
    with pytest.raises(ConfigError) as e:
        compute_descriptors("hardnet", filled, image, keypoints(), {}, "test")
    msg = str(e.value)
    assert "descriptor family 'hardnet' params.weights" in msg and str(path) in msg
    assert "checkpoint_liberty_with_aug.pth" in msg and "kornia.feature.hardnet.urls['liberty_aug']" in msg


@pytest.mark.bad_input
def test_state_dict_of_another_net_names_the_file_and_the_first_key(image, weights):
    with pytest.raises(ConfigError, match=rf"params\.weights: {weights['hardnet']} does not fit SOSNet: key 'layers\.1\.weight' "
                                          "is missing"):
        rows("sosnet", {"weights": str(weights["hardnet"])}, image)


@pytest.mark.bad_input
def test_cuda_without_cuda_is_a_config_error(image, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"descriptor family 'tfeat' params\.device: 'cuda', but .*no CUDA device"):
        rows("tfeat", {"weights": "random", "device": "cuda"}, image)


@pytest.mark.bad_input
def test_a_batch_larger_than_64_gib_is_a_config_error():
    """batch_mem_mb sizes the job's memory request: 1e9 would ask a cluster for about a petabyte."""
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.batch_mem_mb: 1000000000 is more than the maximum 65536"):
        check_descriptor_params("hardnet", {"weights": "random", "batch_mem_mb": 1_000_000_000}, "descriptors.d.params")
    assert check_descriptor_params("hardnet", {"weights": "random", "batch_mem_mb": 65536}, "d")["batch_mem_mb"] == 65536


@pytest.mark.bad_input
@pytest.mark.parametrize("family", FAMILIES)
def test_wrong_input_size_is_a_config_error(family):
    with pytest.raises(ConfigError, match=rf"descriptors\.d\.params\.input_size: 64, but kornia\.feature\.\w+ takes 32 x 32"):
        check_descriptor_params(family, {"weights": "random", "input_size": 64}, "descriptors.d.params")


@pytest.mark.bad_input
@pytest.mark.parametrize("module", ["torch", "kornia"])
def test_torch_not_importable_names_the_pip_command(monkeypatch, image, module):
    monkeypatch.setitem(sys.modules, module, None)  # `import <module>` now raises ImportError
    with pytest.raises(ConfigError, match=rf"descriptor family 'hardnet' needs torch and kornia, but '{module}'.*{re.escape(PIP)}"):
        check_descriptor_params("hardnet", {"weights": "random"}, "descriptors.d.params")
    monkeypatch.undo()
    filled = check_descriptor_params("hardnet", {"weights": "random"}, "d")
    KN.loaded_net.cache_clear()  # a net an earlier test loaded would not import anything
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError, match=rf"'{module}' is not importable.*{re.escape(PIP)}"):
        compute_descriptors("hardnet", filled, image, keypoints(), {}, "t")


# ----------------------------------------------------------------------------- patches


@pytest.fixture(scope="module")
def hpatches():
    rng = np.random.default_rng(11)
    return np.stack([cv2.GaussianBlur(rng.integers(0, 256, (65, 65), dtype=np.uint8), (0, 0), s) for s in (1.0, 2.0, 3.0)])


@pytest.mark.parametrize("family", FAMILIES)
def test_patch_hook_is_resize_then_the_net(family, hpatches, weights):
    params = {"weights": str(weights[family])}
    got = D.describe_patches(hpatches, family, params)
    u8 = np.stack([cv2.resize(p, (32, 32), interpolation=cv2.INTER_LINEAR) for p in hpatches])
    conv = replace(ps.LIBTORCH, normalisation="none") if family == "hynet" else ps.LIBTORCH
    ref = l2_rows(direct(family, weights[family], ps.normalise_patches(u8, conv)))
    assert np.array_equal(got, ref)
    assert get_family(family).patch_support(check_descriptor_params(family, params, "d"), 65) == 65.0


@pytest.mark.bad_input
def test_patch_hook_refuses_what_the_resize_cannot_honour(hpatches, weights):
    params = {"weights": str(weights["tfeat"])}
    with pytest.raises(ConfigError, match=r"'descriptor\.support': 30\.0; descriptor family 'tfeat' describes a patch by "
                                          "resizing the whole 65 x 65 patch"):
        D.describe_patches(hpatches, "tfeat", params, support=30.0)
    with pytest.raises(ConfigError, match=r"'descriptor\.angle': 45\.0; .* cannot rotate it"):
        D.describe_patches(hpatches, "tfeat", params, angle=45.0)
    upright = D.describe_patches(hpatches, "tfeat", params)
    assert np.array_equal(D.describe_patches(hpatches, "tfeat", params, angle=-1.0), upright)  # unset: no rotation
    # without rotate_to_upright the image path ignores the angle too
    free = {**params, "rotate_to_upright": False}
    assert np.array_equal(D.describe_patches(hpatches, "tfeat", free, angle=45.0), upright)


# ----------------------------------------------------------------------------- provenance and config


def test_runtime_provenance(weights):
    params = check_descriptor_params("hardnet", {"weights": str(weights["hardnet"]), "threads": 2}, "d")
    prov = KN.RUNTIME_PROVENANCE["hardnet"](params)
    assert prov["weights"] == f"sha256:{file_sha256(weights['hardnet'])}" and prov["weights_file"] == str(weights["hardnet"])
    assert prov["network"] == "kornia.feature.HardNet" and prov["device"] == "cpu" and prov["num_threads"] == 2
    # batch_mem_mb null (the default) on the CPU: 32 MiB, 120 HardNet patches
    assert prov["batch_size"] == torchrt.batch_size(32, KN.NETS["hardnet"].bytes_per_patch) == 120
    assert prov["patch_convention"]["name"] == "workbench_libtorch"
    assert prov["patch_convention"]["std_eps"] == 1e-8 and prov["l2_normalise"] is True
    for key in ("torch", "kornia", "device_name", "cudnn_deterministic", "deterministic_algorithms"):
        assert key in prov
    rnd = KN.runtime_provenance("tfeat", check_descriptor_params("tfeat", {"weights": "random", "weights_seed": 4}, "d"))
    assert rnd["weights"] == "random(seed=4, key=tfeat)" and rnd["weights_file"] is None
    json.dumps(prov)  # it goes into Parquet metadata as JSON


def test_validated_params_record_the_whole_convention():
    filled = check_descriptor_params("hardnet", {"weights": "random"}, "d")
    assert {k: filled[k] for k in KN.CONVENTION_FIELDS} == dict(vars(ps.LIBTORCH))
    assert check_descriptor_params("hardnet", filled, "d") == filled  # validating again changes nothing


BASE = {"keypoint_sets": {"s": {"detector": "sift"}}}
SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


@pytest.mark.bad_input
def test_config_validation():
    cfg = validate_config({**BASE, "descriptors": {"d": {"family": "hardnet", "params": {"weights": "random"}}}}, SCHEMA)
    assert cfg["descriptors"]["d"]["params"]["weights"] == "random"
    with pytest.raises(ConfigError, match=r"unknown config key 'descriptors\.d\.params\.weight' \(did you mean 'weights'\?\)"):
        validate_config({**BASE, "descriptors": {"d": {"family": "hardnet", "params": {"weight": "random"}}}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.weights: missing"):
        validate_config({**BASE, "descriptors": {"d": {"family": "sosnet"}}}, SCHEMA)


@pytest.mark.parametrize("family", FAMILIES)
def test_frozen_engine_equals_the_eager_net_to_float32_rounding(family, image, weights):
    """engine: frozen (TorchScript, batch norms folded) gives the eager rows to within float32
    rounding on unit rows; the default stays eager (bit-exact with kornia)."""
    base = {"weights": str(weights[family]), "device": "cpu"}
    eager = rows(family, base, image)
    fast = rows(family, {**base, "engine": "frozen"}, image)
    np.testing.assert_allclose(fast, eager, rtol=0, atol=5e-6)
    assert check_descriptor_params(family, {"weights": "random"}, "d")["engine"] == "eager"
    assert KN.runtime_provenance(family, check_descriptor_params(family, {**base, "engine": "frozen"}, "d"))["engine"] == "frozen"
    net, _, _ = KN.net_for(family, check_descriptor_params(family, {**base, "engine": "frozen"}, "d"))
    assert isinstance(net, torch.jit.ScriptModule)


def test_a_net_torch_cannot_freeze_is_a_config_error_not_the_eager_net(monkeypatch):
    """torch's freezing failing (as SOSNet's and HyNet's did on CUDA) stops with the net, the
    device and the fix named; no eager net is handed back in its place."""
    def fails(*a, **k):
        raise RuntimeError("stack_out && stack_out->size() == 1 INTERNAL ASSERT FAILED at frozen_conv_folding.cpp\nmore")

    monkeypatch.setattr(torch.jit, "freeze", fails)
    net = KF.SOSNet(pretrained=False).eval()
    with pytest.raises(ConfigError, match=r"^d\.engine: frozen: torch could not freeze SOSNet on cpu \(stack_out .*"
                                          r"frozen_conv_folding\.cpp\); fix: engine: eager \(the default\) for this device$"):
        KN.frozen(torch, net, 32, torch.device("cpu"), "d")
