"""descbench.torchrt: optional imports, device, deterministic settings, weights, batching."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from torch import nn

from descbench import torchrt
from descbench.errors import ConfigError
from descbench.fileops import file_sha256

PIP = "pip install -e '.[learned]'"


class Tiny(nn.Module):
    """A small net with every kind of state load_weights handles: conv + BN (running stats) + linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)
        self.fc = nn.Linear(2 * 2 * 2, 3)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).flatten(1))


def state(net) -> dict:
    return {k: v.clone() for k, v in net.state_dict().items()}


def same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------- optional imports


def test_require_returns_the_modules():
    import kornia

    assert torchrt.require("torch", what="x") is torch
    assert torchrt.require("torch", "kornia", what="x") == (torch, kornia)


@pytest.mark.bad_input
@pytest.mark.parametrize("check", [torchrt.require, torchrt.check_installed])
def test_missing_module_names_it_and_the_pip_command(monkeypatch, check):
    monkeypatch.setitem(sys.modules, "kornia", None)  # `import kornia` now raises ImportError
    with pytest.raises(ConfigError) as e:
        check("torch", "kornia", what="descriptor family 'hardnet'")
    msg = str(e.value)
    assert "descriptor family 'hardnet' needs torch and kornia" in msg and "'kornia' is not importable" in msg
    assert PIP in msg


@pytest.mark.bad_input
def test_check_installed_finds_an_uninstalled_module():
    with pytest.raises(ConfigError, match="'no_such_module_xyz' is not importable"):
        torchrt.check_installed("no_such_module_xyz", what="w")
    torchrt.check_installed("torch", "kornia", what="w")  # installed: no error


# ----------------------------------------------------------------------------- device


def test_resolve_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert torchrt.resolve_device("auto", "w") == torch.device("cpu")
    assert torchrt.resolve_device("cpu", "w") == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.device: 'cuda', but .* no CUDA device"):
        torchrt.resolve_device("cuda", "descriptors.d.params")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert torchrt.resolve_device("auto", "w") == torch.device("cuda", 0)
    assert torchrt.resolve_device("cuda", "w") == torch.device("cuda", 0)
    assert torchrt.resolve_device("cpu", "w") == torch.device("cpu")


def test_local_cuda_problem_names_the_key_only_without_a_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    problem = torchrt.local_cuda_problem("descriptors.hn.params")
    assert problem.startswith("descriptors.hn.params.device: 'cuda', but torch") and "fix: use device 'cpu'" in problem
    with pytest.raises(ConfigError) as err:  # the job's own refusal says the same
        torchrt.resolve_device("cuda", "descriptors.hn.params")
    assert str(err.value) == problem
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert torchrt.local_cuda_problem("descriptors.hn.params") is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torchrt.importlib.util, "find_spec", lambda name: None)  # torch only in the jobs' env
    assert torchrt.local_cuda_problem("descriptors.hn.params") is None


def test_configure_sets_and_records_the_deterministic_settings():
    import kornia

    before = torch.get_num_threads()
    try:
        prov = torchrt.configure(torch.device("cpu"), 2)
        assert torch.get_num_threads() == 2 and prov["num_threads"] == 2
        assert torch.are_deterministic_algorithms_enabled() and prov["deterministic_algorithms"] is True
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert prov["cudnn_deterministic"] is True and prov["cudnn_benchmark"] is False
        assert prov["torch"] == torch.__version__ and prov["kornia"] == kornia.__version__
        assert prov["device"] == "cpu" and isinstance(prov["device_name"], str) and prov["device_name"]
        assert {"cudnn_version", "cuda"} <= set(prov)
    finally:
        torch.set_num_threads(before)



def test_torch_never_runs_on_more_threads_than_snakemake_gave_the_job(monkeypatch):
    """A family's threads: 64 under snakemake --cores 2: the job's --threads is 2 (limit_threads)."""
    import threadpoolctl

    from descbench.jobs.common import limit_threads

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda n: None)  # BLAS limits would outlive the test

    before = torch.get_num_threads()
    try:
        limit_threads(2, ("opencv",))  # as a descriptor job does
        prov = torchrt.configure(torch.device("cpu"), 64)
        assert torch.get_num_threads() == 2 and prov["num_threads"] == 2 and prov["threads_asked"] == 64
        prov = torchrt.configure(torch.device("cpu"), 1)  # fewer than granted: as asked
        assert prov["num_threads"] == 1 and prov["threads_asked"] == 1
        torchrt.set_job_threads(None)  # no job (a notebook): as asked
        assert torchrt.configure(torch.device("cpu"), 3)["num_threads"] == 3
    finally:
        torchrt.set_job_threads(None)
        torch.set_num_threads(before)

# ----------------------------------------------------------------------------- weights


def test_random_weights_are_seeded_and_leave_the_global_rng_alone():
    torch.manual_seed(123)
    a, b, c = Tiny(), Tiny(), Tiny()
    with torch.no_grad():  # running stats that a reset must restore
        a.bn.running_mean.fill_(5.0)
    rng_state = torch.get_rng_state()
    assert torchrt.load_weights(a, "random", 0, "w", "src") == "random(seed=0)"
    assert torchrt.load_weights(b, "random", 0, "w", "src") == "random(seed=0)"
    assert torchrt.load_weights(c, "random", 1, "w", "src") == "random(seed=1)"
    assert torch.equal(torch.get_rng_state(), rng_state)  # the caller's global RNG is untouched
    assert same_state(state(a), state(b))  # deterministic given the seed (a and b were built with different draws)
    assert not torch.equal(a.conv.weight, c.conv.weight)  # and differs between seeds
    assert torch.equal(a.bn.running_mean, torch.zeros(2))
    assert not a.training  # eval mode


@pytest.mark.bad_input
def test_random_weights_refuse_a_module_it_cannot_reset():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(3))

    net = nn.Sequential(nn.Linear(2, 2), Odd())
    with pytest.raises(ConfigError, match=r"submodule '1' \(Odd\).*no reset_parameters"):
        torchrt.load_weights(net, "random", 0, "w", "src")


def test_weights_file_is_loaded_and_labelled_by_its_sha(tmp_path):
    torch.manual_seed(0)
    src = Tiny()
    path = tmp_path / "tiny.pt"
    torch.save(src.state_dict(), path)
    net = Tiny()
    label = torchrt.load_weights(net, str(path), 0, "w", "src")
    assert label == f"sha256:{file_sha256(path)}"
    assert same_state(state(net), state(src)) and not net.training


def test_a_training_checkpoint_is_read_from_its_state_dict_key(tmp_path):
    """The published HardNet checkpoints hold {'state_dict': ..., ...}; kornia reads that key."""
    torch.manual_seed(0)
    src = Tiny()
    path = tmp_path / "ckpt.pth"
    torch.save({"epoch": 9, "state_dict": src.state_dict()}, path)
    net = Tiny()
    torchrt.load_weights(net, str(path), 0, "w", "src")
    assert same_state(state(net), state(src))


@pytest.mark.bad_input
def test_missing_weights_file_names_the_key_the_file_and_the_published_source(tmp_path):
    path = tmp_path / "nope.pth"
    with pytest.raises(ConfigError) as e:
        torchrt.load_weights(Tiny(), str(path), 0, "descriptors.d.params", "https://example.org/tiny.pth")
    msg = str(e.value)
    assert "descriptors.d.params.weights" in msg and str(path) in msg and "https://example.org/tiny.pth" in msg


@pytest.mark.bad_input
@pytest.mark.parametrize("edit, key", [
    (lambda sd: sd.pop("bn.running_var"), "key 'bn.running_var' is missing"),
    (lambda sd: sd.__setitem__("extra.weight", torch.zeros(1)), "key 'extra.weight' is not a key of the module"),
    (lambda sd: sd.__setitem__("fc.weight", torch.zeros(3, 9)), r"key 'fc.weight' has shape \(3, 9\), the module expects \(3, 8\)"),
    (lambda sd: sd.__setitem__("conv.bias", 3), "key 'conv.bias' holds a int, not a tensor"),
])
def test_mismatched_state_dict_names_the_file_and_the_first_bad_key(tmp_path, edit, key):
    sd = dict(Tiny().state_dict())
    edit(sd)
    path = tmp_path / "bad.pt"
    torch.save(sd, path)
    with pytest.raises(ConfigError, match=rf"w\.weights: {path} does not fit Tiny: {key}"):
        torchrt.load_weights(Tiny(), str(path), 0, "w", "src")


@pytest.mark.bad_input
@pytest.mark.parametrize("content, says", [
    (b"not a torch file", r"is not a torch file \(neither torch.save's zip archive nor a pickle"),
    (bytes(range(256)) * 8, r"is not a torch file"),  # random-looking bytes
    (None, r"holds a Tensor, not a state dict"),
])
def test_unreadable_weights_file_is_a_config_error(tmp_path, content, says):
    path = tmp_path / "w.pt"
    if content is None:
        torch.save(torch.zeros(3), path)  # a tensor, not a state dict
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"w\.weights: {path} {says}") as e:
        torchrt.load_weights(Tiny(), str(path), 0, "w", "src")
    assert "weights_only=False" not in str(e.value)


@pytest.mark.bad_input
def test_a_pickle_of_other_objects_is_refused_without_torchs_advice_to_unpickle_it(tmp_path):
    import argparse

    path = tmp_path / "w.pt"
    torch.save({"net": argparse.Namespace(layers=3)}, path)  # an object torch's weights-only unpickler refuses
    with pytest.raises(ConfigError, match=rf"w\.weights: {path} holds Python objects other than tensors") as e:
        torchrt.load_weights(Tiny(), str(path), 0, "w", "src")
    assert "weights_only=False" not in str(e.value).replace("weights_only=True only", "")


def test_a_file_without_num_batches_tracked_loads_as_torch_loads_it(tmp_path):
    """PyTorch < 0.4.1 saved BatchNorm without its counter; strict load_state_dict accepts that."""
    torch.manual_seed(0)
    src = Tiny()
    sd = {k: v for k, v in src.state_dict().items() if not k.endswith("num_batches_tracked")}
    path = tmp_path / "old.pt"
    torch.save(sd, path)
    net = Tiny()
    torchrt.load_weights(net, str(path), 0, "w", "src")
    assert all(torch.equal(net.state_dict()[k], v) for k, v in sd.items())
    assert int(net.bn.num_batches_tracked) == 0


@pytest.mark.bad_input
def test_a_relative_weights_path_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        torchrt.check_weights_file("descriptors.d.params.weights", "models/w.pth", "https://example.org/w.pth")
    msg = str(e.value)
    assert msg.startswith("descriptors.d.params.weights: the weights file models/w.pth does not exist (looked for at "
                          f"{tmp_path / 'models' / 'w.pth'}: a relative path is read from the folder Snakemake runs in, "
                          f"{tmp_path}, not from the config file's folder)")
    assert "https://example.org/w.pth" in msg
    torchrt.check_weights_file("w", "random", "src")  # no file to check
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.pth").write_bytes(b"x")
    torchrt.check_weights_file("w", "models/w.pth", "src")


# ----------------------------------------------------------------------------- batching


@pytest.mark.parametrize("mb, item, expected", [
    (256, 272 * 1024, 963),   # floor(256 * 1024 / 272)
    (1, 2**20, 1),
    (1, 2**20 + 1, 1),         # floor gives 0: at least one item
    (0.5, 1024, 512),
    (3, 1000, 3145),           # floor(3145.728)
])
def test_batch_size(mb, item, expected):
    assert torchrt.batch_size(mb, item) == expected


def test_run_batched_keeps_the_order_and_casts_to_float32():
    class RowSum(nn.Module):  # row i depends on input i only, in float64: exact whatever the batch
        def forward(self, x):
            return torch.stack([x.double().flatten(1).sum(1), x.double().flatten(1)[:, 0]], 1)

    x = np.random.default_rng(0).random((7, 1, 2, 2)).astype(np.float32)
    expected = RowSum()(torch.from_numpy(x)).float().numpy()
    for batch in (1, 3, 7, 100):
        got = torchrt.run_batched(RowSum(), x, batch, torch.device("cpu"))
        assert got.dtype == np.float32 and got.shape == (7, 2)
        assert np.array_equal(got, expected)


def test_run_batched_calls_the_net_once_per_batch_without_gradients():
    calls = []

    class Spy(nn.Module):
        def forward(self, x):
            calls.append((len(x), torch.is_grad_enabled(), x.device.type))
            return x.flatten(1)

    torchrt.run_batched(Spy(), np.zeros((7, 1, 1, 1), np.float32), 3, torch.device("cpu"))
    assert calls == [(3, False, "cpu"), (3, False, "cpu"), (1, False, "cpu")]


def test_run_batched_edge_cases():
    out = torchrt.run_batched(None, np.zeros((0, 1, 4, 4), np.float32), 5, torch.device("cpu"))  # net never called
    assert out.shape == (0, 0) and out.dtype == np.float32
    with pytest.raises(ValueError, match="batch must be >= 1"):
        torchrt.run_batched(nn.Flatten(), np.zeros((2, 1), np.float32), 0, torch.device("cpu"))


def test_a_seed_key_derives_the_torch_seed_and_names_itself_in_the_label():
    from descbench.rng import key_seed

    assert torchrt.random_seed(3) == 3
    assert torchrt.random_seed(3, "hardnet") == key_seed("descbench-random-weights:hardnet:3")
    assert torchrt.random_seed(3, "hardnet") != torchrt.random_seed(3, "sosnet")
    a, b, ref = Tiny(), Tiny(), Tiny()
    assert torchrt.load_weights(a, "random", 3, "w", "src", seed_key="x") == "random(seed=3, key=x)"
    torchrt.load_weights(b, "random", 3, "w", "src", seed_key="y")
    torchrt.random_init(ref, key_seed("descbench-random-weights:x:3"))
    assert same_state(state(a), state(ref)) and not torch.equal(a.conv.weight, b.conv.weight)


def test_a_torchscript_archive_gives_its_modules_state_dict(tmp_path):
    """The workbench's models/*.pt are traced TorchScript: their state dict is loaded, their code never run."""
    torch.manual_seed(0)
    src = Tiny().eval()
    path = tmp_path / "tiny_traced.pt"
    torch.jit.trace(src, torch.zeros(1, 1, 4, 4)).save(str(path))
    sd = tmp_path / "tiny_sd.pt"
    torch.save(src.state_dict(), sd)
    assert torchrt.is_torchscript(path) and not torchrt.is_torchscript(sd)
    net = Tiny()
    assert torchrt.load_weights(net, str(path), 0, "w", "src") == f"sha256:{file_sha256(path)}"
    assert same_state(state(net), state(src))


def test_batch_mem_mb_null_is_the_devices_default():
    """A set value is used as is; null is 32 MiB on the CPU and 256 on CUDA; with the device not
    known (resources sized before an ``auto`` job runs) the larger, so a request never falls short."""
    assert torchrt.batch_mem_mb(8, "cpu") == 8.0 and torchrt.batch_mem_mb(8, "cuda") == 8.0
    assert torchrt.batch_mem_mb(None, "cpu") == 32.0
    assert torchrt.batch_mem_mb(None, "cuda") == 256.0
    assert torchrt.batch_mem_mb(None, None) == 256.0
