"""What a descriptor family or a detector tells the workflow about the jobs that run it.

Each family (:class:`descbench.descriptors.DescriptorFamily`) and each detector
(:class:`descbench.keypoints.detectors.Detector`) declares these facts next to its code, and
:mod:`descbench.jobresources` (memory, runtime) and :mod:`descbench.config` (conda env, threads,
GPU, weight and model files, the ``weights`` column) read them through the registries, so that
adding a family touches its module and its registry tuple only:

* its **runtime** (:data:`RUNTIMES`): ``numpy`` (NumPy / OpenCV, the base env), ``torch`` (a torch
  network: the ``learned`` extra's env; its params carry :mod:`descbench.torchrt`'s ``device`` and
  ``threads``) or ``onnxruntime`` (the ``learned`` extra's env);
* its **cost**: the fitted memory/runtime :class:`Model` of its job and how it scales it
  (:class:`Cost`);
* the weight and model **files** its params name (rule inputs) and the **weights labels** of the
  networks it loads (the tables' ``weights`` column).

The fitted models are measurements of the real job commands (``benchmarks/bench_resources.py``;
tables and fits: ``benchmarks/README.md``, section "Job memory and runtime models
(bench_resources.py)"): change them there first and keep both in step. The ones many families
share are here; a family or detector measured on its own keeps its model in its module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from descbench.torchrt import RANDOM_WEIGHTS, batch_mem_mb

#: Where a family's or detector's computation runs; anything but ``numpy`` needs the ``learned``
#: extra (pyproject.toml), i.e. the job runs in ``envs/learned.yaml``.
RUNTIMES = ("numpy", "torch", "onnxruntime")
LEARNED_RUNTIMES = ("torch", "onnxruntime")


def check_runtime(runtime: str, who: str) -> str:
    """``runtime`` if it is one of :data:`RUNTIMES`; a ValueError naming ``who`` otherwise (a
    family declaring an unknown runtime is a programming error, found when its job is sized)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"{who} declares runtime {runtime!r}; a runtime is one of {', '.join(RUNTIMES)}")
    return runtime


@dataclass(frozen=True)
class Model:
    """One job kind's fitted model (descbench.jobresources' docstring): memory in MB, time in seconds."""

    base_mb: float
    mb_per_mp: float = 0.0  # per megapixel of the scene's largest image
    mb_per_kkp: float = 0.0  # per 1000 keypoints of the scene (6 images)
    base_s: float = 0.0  # once per job: start-up and imports
    s_per_mp: float = 0.0  # per megapixel of every image of the batch
    s_per_kkp: float = 0.0  # per 1000 keypoints of the batch


# Descriptor jobs on images. OpenCV SIFT's compute on keypoints that reach its first, 2x upsampled
# octave (as on any photograph): 217 -> 3,436 MB from 0.26 to 27 MP; every family without a
# measurement of its own uses it.
OPENCV_DESCRIPTOR = Model(base_mb=170, mb_per_mp=125, mb_per_kkp=1.2, base_s=2, s_per_mp=0.25, s_per_kkp=0.02)
# A network (torch or cv2.dnn): HardNet (random weights, CPU, one thread) 777-859 MB plus 3.5 MB per
# 1000 keypoints, 2.3 s per 1000 keypoints; the family's batch memory is added per job (Cost.extra_mb).
NETWORK_DESCRIPTOR = Model(base_mb=600, mb_per_mp=6, mb_per_kkp=4.0, base_s=15, s_per_mp=0.1, s_per_kkp=2.5)
# A family that reads descriptor files instead of images.
FILE_DESCRIPTOR = Model(base_mb=200, mb_per_kkp=2.0, base_s=2, s_per_kkp=0.05)

# Patch-descriptor jobs (one patch sequence: 16 strips of 65 x 65 patches; measured on the demo's 500
# patches per strip: sift 198 MB / 5.8 s, hardnet 678 MB / 26 s); s_per_kkp is per 1000 patches.
OPENCV_PATCHES = Model(base_mb=200, base_s=2, s_per_kkp=0.5)
NETWORK_PATCHES = Model(base_mb=600, base_s=15, s_per_kkp=1.5)

# Keypoint jobs (the job reads each image, detects, filters, writes). The keypoint term is not fitted
# (the upscaled scenes keep ~12,000 keypoints): 0.2 MB per 1000 keypoints of the scene, 5 x the ~40
# bytes per keypoint of the scene's arrays (OpenCV's keypoint objects of one image included).
# OpenCV SIFT's, fitted to whole jobs (0.26-27 MP: 194-6,189 MB): a detector without its own model.
OPENCV_DETECTOR = Model(base_mb=160, mb_per_mp=230, mb_per_kkp=0.2, base_s=2, s_per_mp=0.7)
#: Keypoints per megapixel (inside the border) assumed before detection for a detector that
#: declares no density of its own.
DEFAULT_DENSITY = 10000


@dataclass(frozen=True)
class Cost:
    """What one family costs a descriptor or patch job: its fitted models and the factors that
    scale their time terms (a colour family: 3 channels; a pooled one: its scales), plus memory
    it holds on top (a network's batch)."""

    model: Model = OPENCV_DESCRIPTOR  # its descriptor job on images
    patch_model: Model = OPENCV_PATCHES  # its patch-descriptor job
    per_keypoint: float = 1.0  # time factor on the model's per-keypoint term
    per_pixel: float = 1.0  # time factor on the model's per-pixel term
    extra_mb: float = 0.0  # memory added to the job's estimate

    def scaled(self, n: float) -> "Cost":
        """This cost run ``n`` times on every keypoint and pixel (e.g. once per pooling scale)."""
        return Cost(self.model, self.patch_model, self.per_keypoint * n, self.per_pixel * n, self.extra_mb)


class RuntimeFacts:
    """The facts a descriptor family and a detector both declare, read the same way. The class
    that mixes this in has the fields ``name``, ``runtime`` (a name of :data:`RUNTIMES` or a
    function of the params), ``files``, ``weights_labels`` and ``torch_params`` (functions of the
    params, or None: none)."""

    def runtime_of(self, params: dict) -> str:
        runtime = self.runtime(params) if callable(self.runtime) else self.runtime
        return check_runtime(runtime, f"'{self.name}'")

    def torch_params_of(self, params: dict) -> list[dict]:
        """The torchrt params (``device``, ``threads``) of the torch networks it runs."""
        if self.torch_params is not None:
            return list(self.torch_params(params))
        return [params] if self.runtime_of(params) == "torch" else []

    def files_of(self, params: dict) -> list[str]:
        return list(self.files(params)) if self.files else []

    def weights_labels_of(self, params: dict) -> list[str]:
        return list(self.weights_labels(params)) if self.weights_labels else []


def torch_threads(torch_params: dict) -> int:
    """The CPU threads a torch runtime's params ask for (descbench.torchrt's ``threads``, default 1)."""
    return int(torch_params.get("threads", 1))


def torch_gpu(torch_params: dict) -> bool:
    """Whether a torch runtime's params ask for a GPU: ``device: cuda`` (``auto`` uses one where the
    job's node has one, and asks for none)."""
    return torch_params.get("device") == "cuda"


def network_cost(per_keypoint: float):
    """The ``cost`` of a family that runs a network on patches at each keypoint, ``per_keypoint``
    times HardNet's time (taken as proportional to the forward pass's memory per patch), holding
    its ``batch_mem_mb`` (if it has one) on top of the measured model."""

    def cost(params: dict) -> Cost:
        # the batch of the device asked for; ``auto`` (not known before the job runs): the larger default
        batch = batch_mem_mb(params["batch_mem_mb"], params.get("device")) if "batch_mem_mb" in params else 0.0
        return Cost(NETWORK_DESCRIPTOR, NETWORK_PATCHES, per_keypoint, 1.0, batch)

    return cost


# ----------------------------------------------------------------------------- weight files


def weights_label(params: dict) -> str:
    """How a table row names the network loaded with ``params["weights"]``: ``RANDOM(seed=N)`` for
    a seeded random initialisation (not a published model, said in capitals), else the file name."""
    w = params["weights"]
    return f"RANDOM(seed={params.get('weights_seed', 0)})" if w == RANDOM_WEIGHTS else Path(w).name


def named_files(params: dict, keys: tuple[str, ...]) -> list[str]:
    """The files that the params ``keys`` name (a key left out, null or ``random``: none)."""
    return [params[k] for k in keys if isinstance(params.get(k), str) and params[k] != RANDOM_WEIGHTS]


# ----------------------------------------------------------------------------- keyword conventions
# Params whose family is not known (user code's keyword arguments: the python family's kwargs) are
# read by the conventions the learned families' params follow: a mapping with ``device`` and
# ``threads`` is a torch runtime's, ``backend: onnxruntime`` runs onnxruntime, and ``model``,
# ``weights`` and ``*_weights`` name files.


def _mappings(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _mappings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _mappings(v)


def conventional_torch_params(node) -> list[dict]:
    """Every mapping in ``node`` (any depth) with a torch runtime's ``device`` and ``threads``."""
    return [m for m in _mappings(node) if "device" in m and "threads" in m]


def conventional_runtime(node) -> str:
    """``torch`` if ``node`` holds a torch runtime's params, ``onnxruntime`` if it asks for that
    backend, else ``numpy``."""
    if conventional_torch_params(node):
        return "torch"
    if any(m.get("backend") == "onnxruntime" for m in _mappings(node)):
        return "onnxruntime"
    return "numpy"


def conventional_files(node) -> list[str]:
    """The string values of ``model``, ``weights`` and ``*_weights`` keys in ``node`` (any depth;
    ``random`` excluded), depth first."""
    out: list[str] = []

    def walk(n):
        if isinstance(n, dict):
            for k, v in n.items():
                if isinstance(v, str) and (k == "model" or k == "weights" or k.endswith("_weights")) and v != RANDOM_WEIGHTS:
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    walk(node)
    return out


def conventional_weights_labels(node) -> list[str]:
    """:func:`weights_label` of every mapping in ``node`` (any depth) with a string ``weights``."""
    return [weights_label(m) for m in _mappings(node) if isinstance(m.get("weights"), str)]
