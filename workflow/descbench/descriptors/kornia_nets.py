"""Patch descriptor networks: kornia's ``hardnet``, ``hardnet8``, ``sosnet``, ``hynet``, ``tfeat``, and ``l2net``.

Each kornia family is one ``kornia.feature`` module (:data:`NETS`), built with ``pretrained=False``
(so nothing is ever downloaded); ``l2net`` is the workbench's ``LIBTORCH_L2NET`` network, defined
in :mod:`descbench.descriptors.l2net` (``architecture: workbench_simple``; it needs torch, not
kornia). Each is given its weights by :func:`descbench.torchrt.load_weights`: ``weights`` is a
state dict file (e.g. the published weights, :func:`published_source`), a TorchScript archive
(e.g. the workbench's traced ``models/hardnet.pt`` or ``simple_l2net.pt``: its state dict is used,
its code never runs) or ``random``: each layer's default initialisation under
``torch.manual_seed(random_seed(weights_seed, family))``, a seed derived from the family name and
``weights_seed`` (:func:`descbench.torchrt.random_seed`), so ``hardnet`` and ``sosnet`` (the same
layers in the same order) get different weights from one ``weights_seed``; the label is
``random(seed=<weights_seed>, key=<family>)``. For tests and ablations.

**Pipeline of one image** (:func:`describe_image`):

1. the grey uint8 image, ``cv2.cvtColor(read_image(path, color=True), COLOR_BGR2GRAY)``: the
   workbench's wrappers convert the BGR image they are given with ``cvtColor``
   (``LibTorchWrapper.cpp`` ``extract``), which differs from OpenCV's grey decode
   (``IMREAD_GRAYSCALE``) in a few pixels of a colour file;
2. one ``input_size`` x ``input_size`` patch per keypoint and its intensity normalisation,
   :func:`descbench.descriptors.patch_sampling.sample_patches` with the family's
   :func:`convention` (below);
3. the network on ``[N, 1, n, n]`` float32 patches in batches of
   ``torchrt.batch_size(batch_mem_mb, bytes_per_patch)`` (:attr:`NetSpec.bytes_per_patch`),
   ``torchrt.run_batched``, on ``device`` with ``threads`` intra-op threads
   (:func:`descbench.torchrt.configure`: deterministic settings);
4. ``l2_normalise: true`` (default): every row divided by its float64 L2 norm, a zero row stays
   zero (``sift_kernel.l2_rows``, ``cv::normalize(NORM_L2)`` as the LibTorch wrapper's
   ``tensorToMat`` does to every output row).

Output: float32 ``[N, 128]`` (every net here has D = 128: HardNet8 projects its 512 features to
128 with the PCA stored in its weights, identity on the first 128 with ``pretrained=False``;
HyNet's ``dim_desc`` is kornia's default 128), one row per keypoint in input order; no
keypoints: ``[0, 128]`` without reading the image or running the net.

**Patch convention** (``patch_convention`` and the overridable fields of
:class:`~descbench.descriptors.patch_sampling.PatchConvention`; ``null`` = the convention's value,
and the validated params record the values used):

* ``workbench_libtorch`` (default): the C++ DescriptorWorkbench's ``LibTorchWrapper`` as
  ``LibTorchFactory.cpp`` builds it for ``libtorch_hardnet`` / ``libtorch_sosnet`` (and, with
  the wrapper's defaults, ``libtorch_l2net``), the
  descriptors of its flagship fusion experiments (e.g.
  ``config/experiments/fusion_sift_hardnet_keynet_scale6px.yaml``): 32 x 32 patches whose side is
  the keypoint size (clamped at 1e-3 px; the factory's support multiplier 2.0 is never read by
  ``makePatch``), rotated upright for angle >= 0, ``p = u8 / 255`` standardised per patch,
  ``(p - mu) / (sigma + 1e-8)`` with the population sigma (``cv::meanStdDev``); every output row
  L2-normalised (``l2_normalise: true``). Its TorchScript models are kornia's HardNet / SOSNet with
  their published weights (``analysis/scripts/download_pytorch_models.py`` traces
  ``HardNet(pretrained=True)``), so ``hardnet`` with kornia's published ``liberty_aug`` weights is
  the workbench's ``libtorch_hardnet``; for HardNet8, HyNet and TFeat the workbench has no
  LibTorch model and this convention is descbench's choice (see HyNet below).
* ``workbench_dnn``: the workbench's ``DNNPatchWrapper`` defaults (``patch_sampling.DNN``: side =
  keypoint size clamped at 1 px, upright, ``p = u8 / 255`` not normalised).

Each convention follows its wrapper's own order of float operations in the affine matrix and the
standardisation (``wrapper``: ``libtorch`` / ``dnn``, :mod:`~descbench.descriptors.patch_sampling`),
and warps with the workbench's OpenCV (<= 4.10) fixed-point ``warpAffine`` (``warp:
opencv_fixed_point``; ``warp: opencv`` takes the installed cv2's floating-point one, which moves
unit rows by up to ~0.03).

``input_size`` must be the net's (32 for all six: ``patch_size`` of each kornia class, and l2net's): another
value is a :class:`~descbench.errors.ConfigError`.

**Intensity normalisation, composed** (descbench's convention first, then the net's own forward
as kornia 0.9 defines it; ``x`` is the patch the net receives):

* ``hardnet`` (``kornia.feature.HardNet``): ``(x - mean) / (std + 1e-6)`` per patch, ``std``
  Bessel-corrected (``torch.std_mean``), then the CNN, then ``F.normalize`` (unit L2). After
  ``workbench_libtorch``'s standardisation this second one is near the identity (it rescales by
  ``sqrt((n^2 - 1) / n^2)`` and the eps); the result is invariant to ``a x + b`` (a > 0) of the
  patch, up to the eps.
* ``hardnet8`` (``HardNet8``): the same with eps 1e-7, CNN to 512, unit L2, minus the PCA
  ``mean``, times ``components`` (512 x 128), unit L2.
* ``sosnet`` (``SOSNet``): ``InstanceNorm2d``, ``(x - mean) / sqrt(var + 1e-5)`` with the
  population variance, CNN, then ``LocalResponseNorm(256, alpha=256, beta=0.5, k=0)`` of the
  output + 1e-10, i.e. unit L2 over the 128 channels.
* ``hynet`` (``HyNet``): its first layer is a ``FilterResponseNorm2d`` on the patch as given,
  ``x / sqrt(mean(x^2) + 1e-6)`` times a weight plus a bias, with no mean subtracted: kornia's
  documentation says the reference implementation feeds non-negative intensities, so
  ``workbench_libtorch``'s zero-mean patches are a different input than HyNet's published weights
  were trained on; set ``normalisation: none`` (``p = u8 / 255``) to feed it as the reference does.
  Output: ``LocalResponseNorm`` = unit L2 of (output + 1e-10).
* ``tfeat`` (``TFeat``): ``InstanceNorm2d`` (as SOSNet), two tanh convolutions and a tanh
  linear layer: entries in [-1, 1], rows *not* unit length (``l2_normalise`` makes them so; set
  it false for the reference's raw rows).
* ``l2net`` (``workbench_simple``, :mod:`descbench.descriptors.l2net`): no normalisation of its
  own: the convention's patch goes straight into the first convolution (so, unlike the others,
  its rows change with ``a x + b`` of the patch); output ``F.normalize`` (unit L2).

**Patches** (HPatches' 65 x 65, :mod:`descbench.patches.describe`): ``patch_rows`` resizes each
whole patch to the net input (``patch_sampling.resize_hpatches_patches``: ``cv2.resize``,
``INTER_LINEAR``, hpatches-benchmark's learned baselines, e.g. HardNet's HPatches extraction
script), then the convention's normalisation, the net and the L2 step as on an image. It reads
neither the centre keypoint's size nor its angle (``patch_support`` is the patch side: the net
sees the whole patch), so unlike the hand-crafted families its rows are *not* those of
``compute`` on the patch saved as an image (that would warp a keypoint-centred patch; the pixel
grids differ by the half-pixel between the keypoint ``32.5`` and ``cv2.resize``'s centre).

**Runtime**: :func:`runtime_provenance` (device, versions, threads, weights label, batch size,
the effective patch convention) is what a job records. The net is built and loaded once per
process and parameter set (:func:`net_for`, an ``lru_cache``). Rows are reproducible for a given
``batch_mem_mb`` and device (torch's deterministic mode; ``batch_mem_mb: null``, the default, is
32 MiB on the CPU and 256 MiB on CUDA, the fastest measured); different batch sizes agree to float32 rounding,
not bit for bit (on the CPU oneDNN picks its convolution kernel by batch size; measured within
6e-7 on unit rows, tested within 2e-6).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from descbench import torchrt
from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob, lazy_module
from descbench.descriptors import l2net as L2
from descbench.descriptors import patch_sampling as ps
from descbench.errors import ConfigError
from descbench.jobfacts import named_files, network_cost, weights_label
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

K = lazy_module("descbench.descriptors.sift_kernel")  # l2_rows (numba module, loaded on first use)

KIB = 1024


@dataclass(frozen=True)
class NetSpec:
    """A kornia descriptor network as a family."""

    family: str
    kornia_class: str | None  # kornia.feature.<class>; None: descbench's own network (l2net)
    kornia_module: str | None  # kornia.feature.<module>, whose ``urls`` dict names the published weights
    published_key: str | None  # the key of ``urls`` that ``pretrained=True`` loads
    input_size: int  # the class's ``patch_size``
    dim: int  # output columns
    # Memory of one patch in a forward pass, the batch bound of torchrt.batch_size: the growth of
    # the process's peak resident memory (ru_maxrss) over one 2048-patch CPU forward after a
    # 1-patch warm-up, divided by 2048 (torch 2.13, kornia 0.9, 1 thread, float32), rounded up to
    # 16 KiB. A rough CPU figure: it bounds the activations, not cuDNN's workspace on a GPU.
    bytes_per_patch: int
    # Its descriptor job's time per keypoint relative to HardNet's (descbench.jobfacts.network_cost),
    # taken as proportional to bytes_per_patch and rounded; TFeat, smaller, is left at HardNet's.
    time_factor: float


NETS = {s.family: s for s in (
    NetSpec("hardnet", "HardNet", "hardnet", "liberty_aug", 32, 128, 272 * KIB, 1.0),     # measured 260 KiB
    NetSpec("hardnet8", "HardNet8", "hardnet", "hardnet8v2", 32, 128, 368 * KIB, 1.35),   # measured 366 KiB
    NetSpec("sosnet", "SOSNet", "sosnet", "lib", 32, 128, 400 * KIB, 1.5),                # measured 384 KiB
    NetSpec("hynet", "HyNet", "hynet", "liberty", 32, 128, 528 * KIB, 2.0),               # measured 516 KiB
    NetSpec("tfeat", "TFeat", "tfeat", "liberty", 32, 128, 176 * KIB, 1.0),               # measured 173 KiB
    NetSpec("l2net", None, None, None, 32, 128, 272 * KIB, 1.0),          # measured 263 KiB
)}


def is_kornia(spec: NetSpec) -> bool:
    """Whether the family is a kornia module (else descbench's own network, :mod:`descbench.descriptors.l2net`)."""
    return spec.kornia_class is not None


def needs(spec: NetSpec) -> tuple[str, ...]:
    """The optional modules the family imports."""
    return ("torch", "kornia") if is_kornia(spec) else ("torch",)

# The named patch conventions (module docstring); the fields a config may override are
# PatchConvention's.
CONVENTIONS = {"workbench_libtorch": ps.LIBTORCH, "workbench_dnn": ps.DNN}
ENGINES = ("eager", "frozen")
CONVENTION_FIELDS = tuple(ps.PatchConvention.__dataclass_fields__)

_PARAMS = object_fragment(
    ("weights",),
    weights={"type": "string", "minLength": 1,
             "description": "a torch state dict file of the network, or 'random' (seeded by weights_seed)"},
    weights_seed={"type": "integer", "minimum": 0, "default": 0},
    device={"enum": ["auto", "cpu", "cuda"], "default": "auto"},
    # at most 64 GiB a forward batch: the job's memory request follows it (a cluster is asked for it)
    # null: the device's measured best (descbench.torchrt.DEFAULT_BATCH_MEM_MB: 32 on the CPU, 256 on CUDA)
    batch_mem_mb={"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 65536, "default": None,
                  "description": "memory of one forward batch of patches, MiB (null: 32 on the CPU, 256 on CUDA)"},
    threads={"type": "integer", "minimum": 1, "default": 1},
    patch_convention={"enum": list(CONVENTIONS), "default": "workbench_libtorch"},
    # null: the patch convention's value (recorded as the value used by check_params)
    input_size={"type": ["integer", "null"], "minimum": 1, "default": None},
    support_multiplier={"type": ["number", "null"], "exclusiveMinimum": 0, "default": None},
    min_size_px={"type": ["number", "null"], "exclusiveMinimum": 0, "default": None},
    min_side_px={"type": ["number", "null"], "minimum": 0, "default": None},
    rotate_to_upright={"type": ["boolean", "null"], "default": None},
    normalisation={"enum": [*ps.NORMALISATIONS, None], "default": None},
    mean={"type": ["number", "null"], "default": None},
    std={"type": ["number", "null"], "exclusiveMinimum": 0, "default": None},
    std_eps={"type": ["number", "null"], "exclusiveMinimum": 0, "default": None},
    eps_mode={"enum": [*ps.EPS_MODES, None], "default": None},
    # whose order of float operations the affine matrix and the standardisation follow (patch_sampling)
    wrapper={"enum": [*ps.WRAPPERS, None], "default": None},
    # the uint8 warp: the workbench's OpenCV (<= 4.10) fixed point, or the installed cv2's (patch_sampling)
    warp={"enum": [*ps.WARPS, None], "default": None},
    l2_normalise={"type": "boolean", "default": True},
    # eager: kornia's module as is (rows bit-exact with it); frozen: TorchScript, frozen and optimised
    # for inference (batch norms folded into the convolutions): faster, equal to float32 rounding
    engine={"enum": list(ENGINES), "default": "eager"},
)
PARAMS_SCHEMA = {name: _PARAMS for name in NETS}
# l2net: which network (the workbench's LIBTORCH_L2NET is workbench_simple, descbench.descriptors.l2net)
PARAMS_SCHEMA["l2net"] = {**_PARAMS, "properties": {
    **_PARAMS["properties"],
    "weights": {**_PARAMS["properties"]["weights"],
                "description": "the workbench's TorchScript simple_l2net.pt, a torch state dict of the architecture, "
                               "or 'random' (seeded by weights_seed)"},
    "architecture": {"enum": list(L2.ARCHITECTURES), "default": "workbench_simple"}}}
# HyNet's first layer is a Filter Response Normalisation (divides by the RMS, subtracts no mean):
# its reference feeds it intensities in [0, 1], so its default is no standardisation of descbench's
PARAMS_SCHEMA["hynet"] = {**_PARAMS, "properties": {**_PARAMS["properties"],
                                                    "normalisation": {**_PARAMS["properties"]["normalisation"], "default": "none"}}}


def convention(params: dict) -> ps.PatchConvention:
    """The patch convention of filled ``params``: the named ``patch_convention`` with every
    non-null field of :data:`CONVENTION_FIELDS` in ``params`` put in its place."""
    base = CONVENTIONS[params["patch_convention"]]
    return replace(base, **{f: params[f] for f in CONVENTION_FIELDS if params.get(f) is not None})


def check_params(family: str):
    """The family's config-time check, ``(params, where) -> params``: torch and kornia installed
    (found, not imported), ``input_size`` the net's, and every null convention field replaced by
    the value used, so the recorded params name the whole convention."""

    spec = NETS[family]

    def check(params: dict, where: str) -> dict:
        torchrt.check_installed(*needs(spec), what=f"descriptor family '{family}'")
        # at config time, before Snakemake reports the file as a bare missing rule input
        torchrt.check_weights_file(f"{where}.weights", params["weights"], published_source(spec))
        conv = convention(params)
        if conv.input_size != spec.input_size:
            raise ConfigError(f"{where}.input_size: {conv.input_size}, but {network_name(spec)} takes "
                              f"{spec.input_size} x {spec.input_size} patches (its patch_size); fix: use "
                              f"{spec.input_size} or leave it out (null: the convention's)")
        return {**params, **asdict(conv)}

    return check


def network_name(spec: NetSpec) -> str:
    """The network, as errors and the runtime record name it: ``kornia.feature.<class>``, or
    ``descbench.descriptors.l2net`` for ``l2net``."""
    return f"kornia.feature.{spec.kornia_class}" if is_kornia(spec) else "descbench.descriptors.l2net"


def published_source(spec: NetSpec) -> str:
    """Where the published weights come from: the URLs of ``kornia.feature.<module>.urls[<key>]``
    (what ``pretrained=True`` downloads; descbench never does); for ``l2net`` the workbench's
    ``models/simple_l2net.pt`` (:data:`descbench.descriptors.l2net.PUBLISHED`)."""
    import importlib

    if not is_kornia(spec):
        return L2.PUBLISHED

    urls = importlib.import_module(f"kornia.feature.{spec.kornia_module}").urls[spec.published_key]
    urls = [urls] if isinstance(urls, str) else list(urls)
    return (f"kornia.feature.{spec.kornia_class}'s pretrained weights, kornia.feature.{spec.kornia_module}.urls"
            f"['{spec.published_key}']: {' or '.join(urls)}")


def where_of(family: str) -> str:
    """The params named in run-time errors (a job sees the params, not their config key)."""
    return f"descriptor family '{family}' params"


def net_for(family: str, params: dict):
    """:func:`loaded_net` for filled ``params`` (keyed on the weights file's modification time and
    size too, so a file rewritten while a process runs is loaded again)."""
    weights = params["weights"]
    try:
        st = Path(weights).stat() if weights != torchrt.RANDOM_WEIGHTS else None
    except OSError:  # missing: load_weights names it
        st = None
    stamp = None if st is None else (st.st_mtime_ns, st.st_size)
    return loaded_net(family, weights, params["weights_seed"], params["device"], stamp, params["engine"],
                      None if is_kornia(NETS[family]) else params["architecture"])


@functools.lru_cache(maxsize=8)
def loaded_net(family: str, weights: str, weights_seed: int, device: str, stamp: tuple | None = None, engine: str = "eager",
               architecture: str | None = None):
    """``(net, weights label, torch.device)``: ``kornia.feature.<class>(pretrained=False)`` (``l2net``:
    :func:`descbench.descriptors.l2net.build` of ``architecture``) given its weights
    (:func:`descbench.torchrt.load_weights`, random ones seeded by the family name and
    ``weights_seed``), in eval mode, on the device; built once per process for these arguments (a
    job describing many images loads the weights once); ``stamp`` (the file's mtime and size) only
    keys the cache."""
    spec = NETS[family]
    where = where_of(family)
    torch = torchrt.require("torch", what=f"descriptor family '{family}'")
    dev = torchrt.resolve_device(device, where)
    if is_kornia(spec):
        kornia = torchrt.require("kornia", what=f"descriptor family '{family}'")
        net = getattr(kornia.feature, spec.kornia_class)(pretrained=False)
    else:
        net = L2.build(architecture)
    label = torchrt.load_weights(net, weights, weights_seed, where, published_source(spec), seed_key=family)
    net = net.to(dev)
    return (frozen(torch, net, spec.input_size, dev, where) if engine == "frozen" else net), label, dev


def frozen(torch, net, n: int, dev, where: str = "params"):
    """``engine: frozen``: the net traced with TorchScript, frozen (parameters as constants) and
    ``torch.jit.optimize_for_inference`` (each batch norm folded into its convolution, oneDNN on
    the CPU). 1.6x the eager net's patches/s on one thread of this machine's CPU; its rows equal the
    eager net's to float32 rounding (folding changes the order of the arithmetic: max 5e-7 measured
    on unit rows), not bit for bit, so ``eager`` stays the default. The example input only fixes
    the graph (shape checks pass for every batch size of n x n patches).

    torch's own passes can fail on a net: on an H200 with torch 2.11 + CUDA 13, SOSNet's and
    HyNet's frozen graphs stopped at an internal assertion of torch's conv folding (HardNet's did
    not). That is a ``ConfigError`` naming the net, the device and the fix (``engine: eager``),
    never a silent switch to the eager net."""
    import warnings

    example = torch.linspace(0.0, 1.0, 2 * n * n, device=dev).reshape(2, 1, n, n)
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kornia's shape checks become constants of the trace, as intended
        try:
            return torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(net, example)))
        except RuntimeError as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise ConfigError(f"{where}.engine: frozen: torch could not freeze {type(net).__name__} on {dev} "
                              f"({first}); fix: engine: eager (the default) for this device") from exc


def batch_of(family: str, params: dict) -> int:
    """Patches per forward pass: ``torchrt.batch_size(batch_mem_mb, bytes_per_patch)``, with a
    ``null`` ``batch_mem_mb`` taken as the resolved device's default (:func:`descbench.torchrt.batch_mem_mb`)."""
    dev = torchrt.resolve_device(params["device"], where_of(family))
    return torchrt.batch_size(torchrt.batch_mem_mb(params["batch_mem_mb"], dev.type), NETS[family].bytes_per_patch)


def forward(family: str, patches: np.ndarray, params: dict) -> np.ndarray:
    """float32 [N, D] rows of normalised float32 patches [N, n, n]: the net in batches of
    :func:`batch_of` on the configured device and threads, then the L2 step when ``l2_normalise``."""
    net, _, dev = net_for(family, params)
    torchrt.configure(dev, params["threads"])
    return net_rows(net, dev, family, patches, params)


def net_rows(net, dev, family: str, patches: np.ndarray, params: dict) -> np.ndarray:
    """float32 [N, D] rows of ``net`` (any module taking [B, 1, n, n]) on normalised patches
    [N, n, n], as the family runs its own net: batches of :func:`batch_of` on ``dev``, then the
    L2 step when ``l2_normalise`` (the thread settings are the caller's)."""
    rows = torchrt.run_batched(net, patches[:, None], batch_of(family, params), dev)
    return K.l2_rows(rows) if params["l2_normalise"] else rows.astype(np.float32, copy=False)


def hpatches_input(patches: np.ndarray, params: dict) -> np.ndarray:
    """The net's input for 65 x 65 uint8 patches [N, 65, 65] (HPatches' patches): each resized to
    the convention's input size (``resize_hpatches_patches``, hpatches-benchmark's convention) and
    normalised by it (:func:`convention` of the filled ``params``)."""
    conv = convention(params)
    return ps.normalise_patches(ps.resize_hpatches_patches(patches, conv.input_size), conv)


def grey_image(image_path: Path) -> np.ndarray:
    """uint8 grey image: ``cvtColor(BGR2GRAY)`` of the colour read, as the workbench's wrappers."""
    import cv2

    return cv2.cvtColor(read_image(image_path, color=True), cv2.COLOR_BGR2GRAY)


def net_compute(family: str):
    """The family's ``compute``: :func:`describe_image` of that net."""

    def compute(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
        return describe_image(family, Path(image_path), kps, params)

    return compute


def describe_image(family: str, image_path: Path, kps: ImageKeypoints, params: dict) -> np.ndarray:
    """float32 [N, D]: the patch of each keypoint (:func:`convention`) through the net (module docstring)."""
    if len(kps) == 0:
        return np.zeros((0, NETS[family].dim), dtype=np.float32)
    grey, conv, b = grey_image(image_path), convention(params), batch_of(family, params)
    # one forward batch of patches sampled at a time: the job's memory follows batch_mem_mb (the
    # whole image's patches at once, with the float64 per-patch statistics, took ~570 MB transient
    # at 20,000 keypoints); the batches are the forward's own, so the rows are the same
    return np.concatenate([forward(family, ps.sample_patches(grey, kps.take(np.arange(s, min(s + b, len(kps)))), conv), params)
                           for s in range(0, len(kps), b)])


def net_patch_rows(family: str):
    """The family's ``patch_rows``: every 65 x 65 patch resized to the net input
    (``resize_hpatches_patches``), normalised by the convention, then :func:`forward`. The resize
    cannot honour a centre keypoint other than the whole upright patch: a ``support`` other than
    the patch side, or an angle > 0 with ``rotate_to_upright``, is a ConfigError (never ignored)."""

    def patch_rows(job: PatchJob, params: dict) -> np.ndarray:
        conv = convention(params)
        base = job.config_key.removesuffix(".params")
        kp = job.keypoint
        if job.shape[0] != job.shape[1] or float(kp.size[0]) != patch_support(params, job.shape[0]):
            raise ConfigError(f"invalid config value at '{base}.support': {float(kp.size[0])}; descriptor family "
                              f"'{family}' describes a patch by resizing the whole {job.shape[0]} x {job.shape[1]} patch "
                              "to the network input (hpatches-benchmark's convention): leave support unset")
        if conv.rotate_to_upright and float(kp.angle[0]) > 0:
            raise ConfigError(f"invalid config value at '{base}.angle': {float(kp.angle[0])}; descriptor family "
                              f"'{family}' resizes the whole patch and cannot rotate it: use angle 0 or -1 (unset)")
        return forward(family, hpatches_input(job.patches, params), params)

    return patch_rows


def patch_support(params: dict, side: int) -> float:
    """The patch side: the net sees the whole patch (resized), whatever the keypoint size."""
    return float(side)


def runtime_provenance(family: str, params: dict) -> dict:
    """What a job records about how ``family`` ran with filled ``params``: the
    :func:`descbench.torchrt.configure` dict (torch / kornia versions, device type and name, threads,
    cuDNN and determinism flags) plus ``network`` (:func:`network_name`, with ``l2net``'s architecture in brackets), ``weights`` (the
    label: ``sha256:<hex>`` or ``random(seed=<n>, key=<family>)``), ``weights_file`` (the path, None for random),
    ``batch_size``, ``bytes_per_patch``, ``patch_convention`` (every field of the convention used)
    and ``l2_normalise``. Loads the net (cached, as the job's compute will)."""
    spec = NETS[family]
    _, label, dev = net_for(family, params)
    out = torchrt.configure(dev, params["threads"])
    arch = "" if is_kornia(spec) else f" ({params['architecture']})"
    out.update(network=network_name(spec) + arch, weights=label,
               weights_file=None if params["weights"] == torchrt.RANDOM_WEIGHTS else str(params["weights"]),
               batch_size=batch_of(family, params), bytes_per_patch=spec.bytes_per_patch,
               patch_convention={"name": params["patch_convention"], **asdict(convention(params))},
               l2_normalise=bool(params["l2_normalise"]), engine=params["engine"])
    return out


# family name -> runtime_provenance(params) of that family (for the job's Parquet metadata)
RUNTIME_PROVENANCE = {name: functools.partial(runtime_provenance, name) for name in NETS}

def weights_file(params: dict) -> list[str]:
    """The state-dict file its ``weights`` names (none for ``random``)."""
    return named_files(params, ("weights",))


def weights_labels(params: dict) -> list[str]:
    return [weights_label(params)]


FAMILIES = tuple(
    DescriptorFamily(name, net_compute(name), PARAMS_SCHEMA[name], check=check_params(name),
                     patch_support=patch_support, patch_rows=net_patch_rows(name), whole_patch=True,
                     runtime_provenance=RUNTIME_PROVENANCE[name],
                     runtime="torch", files=weights_file, weights_labels=weights_labels,
                     cost=network_cost(NETS[name].time_factor))
    for name in NETS
)
