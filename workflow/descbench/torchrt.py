"""The torch runtime of the learned families: optional imports, device, determinism, weights, batching.

torch (and kornia, onnx, ...) are the optional ``learned`` extra: every function here imports
them when called (never at import time, so ``import descbench.descriptors`` works without them)
through :func:`require`, which names the pip command when they are missing.

A job that runs a network:

1. ``device = resolve_device(params["device"], where)``;
2. ``provenance = configure(device, params["threads"])`` (deterministic settings; the returned
   dict is what the job records);
3. builds the module (``pretrained=False``: nothing is ever downloaded) and
   ``label = load_weights(module, params["weights"], params["weights_seed"], where, published,
   seed_key)`` (``sha256:<hex>`` of the weights file, or ``random(seed=<n>)`` /
   ``random(seed=<n>, key=<seed_key>)``);
4. ``rows = run_batched(module.to(device), inputs, batch_size(batch_mem_mb(params["batch_mem_mb"],
   device.type), bytes_per_item), device)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import platform
from collections.abc import Mapping
from pathlib import Path

from descbench.errors import ConfigError
from descbench.fileops import file_sha256
from descbench.rng import key_seed

INSTALL = "pip install -e '.[learned]'"
RANDOM_WEIGHTS = "random"  # the ``weights`` value that asks for a seeded random initialisation
# cuBLAS is deterministic only with a fixed workspace (PyTorch's "Reproducibility" notes); the
# variable must be set before the first cuBLAS call, so configure() sets it when it is unset.
CUBLAS_WORKSPACE = ":4096:8"


def require(*modules: str, what: str):
    """The named optional modules, imported (``require("torch", "kornia", what="descriptor family
    'hardnet'")``): one module for one name, else a tuple in the order given.

    A module that does not import is a :class:`ConfigError` naming ``what``, every module it needs,
    the one that failed (with the import error) and ``pip install -e '.[learned]'``."""
    out = []
    for name in modules:
        try:
            out.append(importlib.import_module(name))
        except ImportError as exc:
            raise ConfigError(missing_message(modules, name, str(exc), what)) from exc
    return out[0] if len(out) == 1 else tuple(out)


def missing_message(modules: tuple[str, ...], name: str, why: str, what: str) -> str:
    """The error text of a missing optional module ``name`` (of ``modules``) needed by ``what``."""
    return f"{what} needs {' and '.join(modules)}, but '{name}' is not importable ({why}); install the learned extra: {INSTALL}"


def check_installed(*modules: str, what: str) -> None:
    """:func:`require`'s check without the import (config validation: ``import torch`` costs a
    second or more): each module must be findable (``importlib.util.find_spec``; a module set to
    None in ``sys.modules`` counts as missing, as ``import`` would fail), else the same ConfigError."""
    import importlib.util
    import sys

    for name in modules:
        if name in sys.modules:
            found = sys.modules[name] is not None
        else:
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):  # a parent package missing, or a module without a spec
                found = False
        if not found:
            raise ConfigError(missing_message(modules, name, "no such module", what))


def resolve_device(device: str, where: str):
    """``torch.device`` of the ``device`` param: ``auto`` -> ``cuda:0`` when
    ``torch.cuda.is_available()`` else ``cpu``; ``cpu``; ``cuda`` -> ``cuda:0``, a
    :class:`ConfigError` naming ``where.device`` when CUDA is not available (never a silent CPU run)."""
    torch = require("torch", what=where)
    if device == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(_no_cuda_message(torch, where))
        return torch.device("cuda", 0)
    raise ConfigError(f"{where}.device: {device!r} is not one of 'auto', 'cpu', 'cuda'")


def _no_cuda_message(torch, where: str) -> str:
    return (f"{where}.device: 'cuda', but torch {torch.__version__} sees no CUDA device on this machine "
            "(torch.cuda.is_available() is False); fix: use device 'cpu' or 'auto', or run on a GPU "
            "node with a CUDA build of torch")


def local_cuda_problem(where: str) -> str | None:
    """Why a job whose ``where.device`` is ``cuda`` cannot run on this machine, or None.

    For a run whose jobs run here (Snakemake's local executor), checked once at DAG build, so that
    the run stops before any job instead of failing in the job. None when torch sees a CUDA
    device, and when torch is not importable in this process: then the jobs run in an environment
    of their own (``--software-deployment-method conda``), and each job's
    :func:`resolve_device` refuses ``cuda`` without a device, as it always does.
    """
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return None if torch.cuda.is_available() else _no_cuda_message(torch, where)


def cpu_name() -> str:
    """The CPU's model name: ``platform.processor()``, else the first ``model name`` of
    ``/proc/cpuinfo`` (Linux, where ``platform.processor()`` is often empty), else ``platform.machine()``."""
    name = platform.processor()
    if name:
        return name
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


_JOB_THREADS: dict[str, int | None] = {"n": None}
_DEVICES_USED: set[tuple[str, str]] = set()  # (type, name) of every device configure() set up in this process


def devices_used() -> set[tuple[str, str]]:
    """``(device type, device name)`` of every device :func:`configure` set up in this process
    (``("cuda", "NVIDIA H100 80GB HBM3")``, ``("cpu", <CPU model>)``); empty when no torch work
    ran. The jobs' timing files say from it whether a job ran on a GPU (descbench.jobtiming)."""
    return set(_DEVICES_USED)


def set_job_threads(n: int | None) -> None:
    """The threads Snakemake gave this job (its ``--threads``, set by the job's command before any
    work): :func:`configure` never runs torch on more. A family's ``threads: 64`` under
    ``snakemake --cores 2`` then runs on 2, the job's share, not on 64 threads of a 2-core machine."""
    _JOB_THREADS["n"] = None if n is None else max(1, int(n))


def configure(device, threads: int) -> dict:
    """Deterministic settings for the process's torch work, and their provenance.

    ``torch.set_num_threads(min(threads, job threads))`` (intra-op threads on the CPU; it is
    process-wide; job threads: :func:`set_job_threads`, none set: ``threads``), cuDNN
    ``deterministic = True`` and ``benchmark = False``, ``torch.use_deterministic_algorithms(True)``
    (an op without a deterministic implementation then raises rather than varying), and
    ``CUBLAS_WORKSPACE_CONFIG`` = :data:`CUBLAS_WORKSPACE` when it is unset (needed by deterministic
    cuBLAS). Returns the provenance dict: ``torch``, ``kornia`` (version, or None when kornia is not
    installed), ``device`` (type, e.g. ``cpu``/``cuda``), ``device_name`` (``torch.cuda.get_device_name``
    or :func:`cpu_name`), ``num_threads`` (what torch runs on), ``threads_asked`` (the family's
    ``threads``), ``cudnn_deterministic``, ``cudnn_benchmark``,
    ``cudnn_version`` (None without cuDNN), ``deterministic_algorithms``, ``cuda`` (torch's CUDA
    version, None on a CPU build)."""
    torch = require("torch", what="the torch runtime")
    device = torch.device(device)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    granted = _JOB_THREADS["n"]
    torch.set_num_threads(int(threads) if granted is None else min(int(threads), granted))
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=False)
    try:
        import kornia

        kornia_version = kornia.__version__
    except ImportError:  # a net that needs only torch (the record says so: None)
        kornia_version = None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    _DEVICES_USED.add((device.type, name))
    return {
        "torch": torch.__version__,
        "kornia": kornia_version,
        "device": device.type,
        "device_name": name,
        "num_threads": torch.get_num_threads(),
        "threads_asked": int(threads),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cuda": torch.version.cuda,
    }


def random_seed(weights_seed: int, seed_key: str | None = None) -> int:
    """The ``torch.manual_seed`` of ``weights: random``: ``weights_seed`` itself without a key (KeyNet's
    modules), else :func:`descbench.rng.key_seed` of ``"descbench-random-weights:<seed_key>:<weights_seed>"``
    (the descriptor families pass their family name: two families with the same layers, HardNet and
    SOSNet, then get different weights from the same ``weights_seed``)."""
    if seed_key is None:
        return int(weights_seed)
    return key_seed(f"descbench-random-weights:{seed_key}:{int(weights_seed)}")


def random_label(weights_seed: int, seed_key: str | None = None) -> str:
    """The label of a random initialisation: ``random(seed=<n>)``, or ``random(seed=<n>, key=<seed_key>)``
    when the torch seed is derived from the key (:func:`random_seed`)."""
    return f"random(seed={int(weights_seed)})" if seed_key is None else f"random(seed={int(weights_seed)}, key={seed_key})"


def is_torchscript(path: Path) -> bool:
    """Whether ``path`` is a TorchScript archive (``torch.jit.save``, e.g. the workbench's traced
    ``models/*.pt``): a zip archive holding serialised TorchScript code (a ``code/`` folder) or
    ``constants.pkl``, which ``torch.save``'s archives do not."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return any("/code/" in n or n.endswith("/constants.pkl") or n == "constants.pkl" for n in names)


def torchscript_state(path: Path, where: str, published: str) -> dict:
    """The state dict of the TorchScript module in ``path``: ``torch.jit.load(path,
    map_location='cpu').state_dict()`` (its parameters and buffers, under the names of the module it
    was traced or scripted from). Only the tensors are used: its code is never run (the family's own
    architecture runs with them). A file ``torch.jit.load`` cannot read: :class:`ConfigError`."""
    torch = require("torch", what=where)
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch >= 2.9 deprecates torch.jit; its files remain
            module = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:  # torch raises RuntimeError and others for a damaged archive
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ConfigError(f"{where}.weights: {path} looks like a TorchScript archive but torch.jit.load cannot read it "
                          f"({type(exc).__name__}: {first}); fix: give the file torch.jit.save wrote, or a state dict "
                          f"(torch.save(module.state_dict(), path); {published})") from exc
    return dict(module.state_dict())


def random_init(module, seed: int) -> None:
    """Re-initialise ``module`` deterministically: under ``torch.manual_seed(seed)`` in a forked RNG
    (the caller's global torch RNG is left as it was), call ``reset_parameters()`` of every
    submodule that has one, in ``module.modules()`` order (PyTorch's own default initialisers:
    Kaiming-uniform convolutions and linear layers, BatchNorm running statistics 0 / 1, ...).

    A submodule with parameters of its own but no ``reset_parameters`` cannot be re-initialised this
    way: :class:`ConfigError` (its values would be the constructor's unseeded draws)."""
    torch = require("torch", what="weights 'random'")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        for name, sub in module.named_modules():
            if hasattr(sub, "reset_parameters"):
                sub.reset_parameters()
            elif any(True for _ in sub.parameters(recurse=False)):
                raise ConfigError(f"weights 'random': submodule '{name}' ({type(sub).__name__}) of {type(module).__name__} "
                                  "has parameters but no reset_parameters(), so it cannot be initialised from a seed; "
                                  "give a weights file")


def state_dict_problem(expected: Mapping, got: Mapping) -> str | None:
    """The first difference between the module's ``expected`` state dict and a loaded one, in words
    (a key the file lacks, in the module's key order; then a key the module lacks; then a shape), or None.

    A BatchNorm's ``num_batches_tracked`` may be missing, as in files saved by PyTorch before 0.4.1:
    torch's strict ``load_state_dict`` accepts that too (the counter is set to 0; it is not used
    in evaluation mode)."""
    for key, tensor in expected.items():
        if key not in got and key.endswith(".num_batches_tracked"):
            continue
        if key not in got:
            return f"key '{key}' is missing (the module expects {len(expected)} keys, the file has {len(got)})"
        value = got[key]
        if not hasattr(value, "shape"):
            return f"key '{key}' holds a {type(value).__name__}, not a tensor"
        if tuple(value.shape) != tuple(tensor.shape):
            return f"key '{key}' has shape {tuple(value.shape)}, the module expects {tuple(tensor.shape)}"
    for key in got:
        if key not in expected:
            return f"key '{key}' is not a key of the module"
    return None


def check_weights_file(where: str, value: str, published: str) -> None:
    """``value`` (a ``<where>`` setting) is ``'random'`` or an existing file; else a
    :class:`ConfigError` naming ``where``, the file as given and, for a relative path, the absolute
    path it was looked for at (relative paths are read from the folder Snakemake runs in, not from
    the config file's folder), and where the published weights come from (``published``)."""
    if value == RANDOM_WEIGHTS or Path(value).is_file():
        return
    path = Path(value)
    looked = "" if path.is_absolute() else (
        f" (looked for at {path.resolve()}: a relative path is read from the folder Snakemake runs in, "
        f"{Path.cwd()}, not from the config file's folder)")
    raise ConfigError(f"{where}: the weights file {value} does not exist{looked}; fix: download the published weights "
                      f"({published}; descbench never downloads them) and give its path, or use '{RANDOM_WEIGHTS}' "
                      "(seeded by weights_seed) for a randomly initialised network")


def unreadable_weights_reason(path: Path, exc: Exception) -> str:
    """Why ``torch.load(path, weights_only=True)`` raised ``exc``, in words, without torch's advice to
    load with ``weights_only=False`` (which runs code from the file; descbench never does):

    * neither a zip archive (``torch.save``) nor a pickle: ``is not a torch file (...)``;
    * a pickle that holds more than tensors: ``holds Python objects other than tensors ...``;
    * else torch's first line.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not head.startswith(b"PK\x03\x04") and not head.startswith(b"\x80"):
        return ("is not a torch file (neither torch.save's zip archive nor a pickle: a truncated download, or "
                "another format?)")
    text = str(exc)
    if "weights_only" in text or "Weights only" in text:
        return ("holds Python objects other than tensors, which descbench does not load (torch.load with "
                "weights_only=True only: loading other objects can run code from the file)")
    return f"cannot be read by torch.load ({type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''})"


def load_weights(module, weights: str, weights_seed: int, where: str, published: str,
                 seed_key: str | None = None) -> str:
    """Give ``module`` its weights and put it in evaluation mode; returns the label the results record.

    * ``weights == 'random'``: :func:`random_init` with ``random_seed(weights_seed, seed_key)``;
      returns :func:`random_label` (``random(seed=<n>)``, or ``random(seed=<n>, key=<seed_key>)``).
    * else ``weights`` is the path of a torch state dict, read with ``torch.load(path,
      map_location='cpu', weights_only=True)`` (tensors only, no code). A training checkpoint whose
      state dict sits under the key ``state_dict`` (the published HardNet checkpoints, as kornia
      itself loads them) is read from that key. A TorchScript archive (:func:`is_torchscript`: the
      workbench's traced ``models/*.pt``) gives its module's state dict (:func:`torchscript_state`).
      Its keys and shapes must be the module's exactly (then ``load_state_dict(strict=True)``);
      returns ``sha256:<hex of the file>``.

    A path that does not exist: :class:`ConfigError` naming ``where.weights``, the file and where the
    published weights come from (``published``: descbench never downloads them). A file torch cannot
    read, or whose keys / shapes differ: :class:`ConfigError` naming the file and the first bad key."""
    torch = require("torch", what=where)
    if weights == RANDOM_WEIGHTS:
        random_init(module, random_seed(weights_seed, seed_key))
        module.eval()
        return random_label(weights_seed, seed_key)
    check_weights_file(f"{where}.weights", weights, published)
    path = Path(weights)
    try:
        state = torchscript_state(path, where, published) if is_torchscript(path) else \
            torch.load(path, map_location="cpu", weights_only=True)
    except ConfigError:
        raise
    except Exception as exc:  # torch raises several types for a file it cannot read (pickle, zip, weights_only)
        raise ConfigError(f"{where}.weights: {path} {unreadable_weights_reason(path, exc)}; fix: give the published "
                          f"weights file ({published}) or save the module's state dict with "
                          "torch.save(module.state_dict(), path)") from exc
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise ConfigError(f"{where}.weights: {path} holds a {type(state).__name__}, not a state dict (a mapping of "
                          f"parameter names to tensors); fix: save torch.save(module.state_dict(), path)")
    problem = state_dict_problem(module.state_dict(), state)
    if problem is not None:
        raise ConfigError(f"{where}.weights: {path} does not fit {type(module).__name__}: {problem}; fix: give the "
                          f"weights of this network ({published})")
    module.load_state_dict(state, strict=True)
    module.eval()
    return f"sha256:{file_sha256(path)}"


# ``batch_mem_mb: null`` (the default) per device type: the fastest measured
# (docs/benchmarks/learned.md). On the CPU, 30-120 HardNet patches a batch (8-32 MiB) ran 1.3x
# (frozen) to 1.5x (eager) faster than 256 MiB's 963: a batch's activations stay in cache and
# below glibc's mmap threshold. On an H200, 256 MiB was the best or within 2 % of it, and 64 MiB
# 32 % slower for HyNet.
DEFAULT_BATCH_MEM_MB = {"cpu": 32, "cuda": 256}


def batch_mem_mb(value: float | None, device_type: str | None) -> float:
    """The ``batch_mem_mb`` used: ``value``, or when it is None (``null``) the default of
    :data:`DEFAULT_BATCH_MEM_MB` for ``device_type`` (``"cpu"`` / ``"cuda"``; anything else, a
    device not yet known, e.g. None or ``auto`` when a job's resources are sized: the largest, so
    a request never falls short)."""
    if value is not None:
        return float(value)
    return float(DEFAULT_BATCH_MEM_MB.get(device_type, max(DEFAULT_BATCH_MEM_MB.values())))


def batch_size(batch_mem_mb: float, bytes_per_item: int) -> int:
    """Items per forward pass: ``max(1, floor(batch_mem_mb * 2**20 / bytes_per_item))``."""
    return max(1, math.floor(batch_mem_mb * 2**20 / bytes_per_item))


def run_batched(net, inputs, batch: int, device):
    """``net`` on ``inputs`` (float32 numpy ``[N, ...]``) in consecutive batches of ``batch`` items
    under ``torch.inference_mode()``: each batch moved to ``device``, its output moved to the CPU
    as float32; returns the outputs concatenated along the first axis (``[N, D]`` for a
    descriptor net). ``N == 0`` returns a ``[0, 0]`` array without running the net."""
    import numpy as np

    torch = require("torch", what="the torch runtime")
    if batch < 1:
        raise ValueError(f"run_batched: batch must be >= 1, got {batch}")
    n = len(inputs)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    out = []
    with torch.inference_mode():
        for start in range(0, n, batch):
            x = torch.from_numpy(np.ascontiguousarray(inputs[start:start + batch], dtype=np.float32)).to(device)
            out.append(net(x).to("cpu", torch.float32).numpy())
    return np.concatenate(out, axis=0)
