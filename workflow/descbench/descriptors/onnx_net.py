"""Family ``onnx``: any patch descriptor network exported to ONNX, run on keypoint patches.

This is the C++ DescriptorWorkbench's ``dnn_patch`` descriptor (``src/core/descriptor/extractors/
wrappers/DNNPatchWrapper.cpp``), read from its source and re-implemented:

1. **Patches**: the grey image (a colour image through ``cvtColor(BGR2GRAY)``, as the wrapper;
   a grey file is its own grey) is sampled around each keypoint with the workbench's DNN
   convention, :func:`descbench.descriptors.patch_sampling.dnn_convention`: an ``input_size`` x
   ``input_size`` uint8 ``warpAffine`` (INTER_LINEAR, BORDER_REPLICATE) of side
   ``S = max(1, support_multiplier * max(size, 1))`` image px, rotated upright by the keypoint
   angle when ``rotate_to_upright`` (angle < 0 = unset: no rotation), then ``/ 255`` and
   ``normalisation``: ``none`` (values in [0, 1]), ``per_patch`` ((p - mean) / max(sigma, 1e-6),
   population sigma of the patch) or ``mean_std`` ((p - mean) / std with ``params.mean`` and
   ``params.std``, both required then and refused otherwise). The defaults are the workbench's
   (``include/thesis_project/types.hpp``: 32 px, support multiplier 1.0, upright, no per-patch
   standardisation with mean 0 / std 1, i.e. ``none``). The warp is the workbench's OpenCV's
   (<= 4.10) fixed-point ``warpAffine`` (``warp: opencv_fixed_point``, the default); ``warp:
   opencv`` takes the installed cv2's floating-point one (up to 1-3 grey levels apart).
2. **Network**: patches go in as one float32 blob ``[B, 1, n, n]`` per batch of ``batch_size``
   keypoints (the workbench batches 512) to input ``input_name`` (null: the graph's first input),
   and output ``output_name`` (null: its first output) is read. Backend ``opencv``
   (``cv2.dnn.readNetFromONNX``, OpenCV's own backend on the CPU, as the wrapper) or
   ``onnxruntime`` (CPU provider; optional, ``pip install onnxruntime``). Both run on the job's
   threads (:func:`job_threads`): OpenCV's pool, and an onnxruntime session with that many
   intra-op threads and one inter-op thread.
3. **Rows**: an output ``[B, C]`` or ``[B, C, 1, 1]`` is used as is; ``[B, C, H, W]`` is averaged
   over H and W (each channel's float64 sum / (H W), then float32, as the wrapper); anything else
   (another rank, a first dimension other than B, C = 0), a NaN/inf value, or a C that differs
   between batches is a :class:`DataError` naming the model file and the shape. With
   ``l2_normalise`` (default true: the wrapper ``cv::normalize``s every row to unit L2; a row of
   norm <= DBL_EPSILON becomes zero, as there) each row is divided by its L2 norm. Rows are
   float32, one per keypoint, in input order; compared with L2.

Where descbench differs from the workbench, on purpose: a missing or unloadable model is a
:class:`ConfigError` naming ``<descriptor>.params.model`` and the path (the workbench logs a
warning and silently substitutes an untrained "lightweight CNN", ``PseudoDNNWrapper``:
descbench never substitutes anything); the row keeps the network's C (the workbench truncates
or zero-pads every row to 128 columns, its unset ``descriptor_size``); an unexpected output
layout is refused (the workbench flattens it).

**Config-time check** (:func:`check_onnx`, at config validation): the file exists and is an ONNX
model (read with the ``onnx`` package), ``input_name`` is one of the graph's inputs and
``output_name`` one of its outputs; what the graph declares fits what the family feeds
(:func:`check_declared_input`: one input, rank 4, one channel, the declared side equal to
``input_size``, a batch fixed to 1 only with ``batch_size: 1``, no other fixed batch); the
backend loads it, and a batch of ``min(2, batch_size)`` all-zero patches runs and gives a valid
layout (this catches what the graph leaves symbolic). Errors name the key to change.

**No keypoints**: the rows are ``[0, C]``, C from one forward pass of a single all-zero patch
(the graph's declared output shape may be symbolic, so it is not read).

A relative ``model`` path is relative to the directory the jobs run in (Snakemake's working
directory). The file's content is not a parameter: after replacing a model file in place, rerun
its descriptor jobs (``--forcerun descriptors``) or give it a new path.

**HPatches patches** (:func:`onnx_patch_rows`): hpatches-benchmark's learned baselines resize the
whole 65 x 65 patch to the network input (``cv2.resize``, INTER_LINEAR; e.g. HardNet's HPatches
extraction script) instead of re-sampling about a keypoint, and so does this family
(:func:`~descbench.descriptors.patch_sampling.resize_hpatches_patches`, then ``normalisation``,
the network and the rows as above). Its ``patch_support`` is the patch side (the whole patch);
a different ``support`` or a positive keypoint angle (which the resize cannot honour) is a
ConfigError. This is *not* the family's ``compute`` on the patch saved as an image: the
workbench's warp about the centre keypoint (32.5, 32.5) with side 65 samples patch pixel ``u`` at
``65 u / n``, the resize at ``65 (u + 0.5) / n - 0.5``, about half a pixel (0.52 px for n = 32)
further right and down; the rows differ accordingly.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.descriptors.patch_sampling import (DNN, NORMALISATIONS, WARPS, PatchConvention, dnn_convention,
                                                  normalise_patches, resize_hpatches_patches, warp_patches)
from descbench.errors import ConfigError, DataError
from descbench.jobfacts import named_files, network_cost
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

BACKENDS = ("opencv", "onnxruntime")
LEARNED_EXTRA = "pip install -e '.[learned]'"
ONNXRUNTIME_PIP = "pip install onnxruntime"

# Defaults: the workbench's DNN patch settings (patch_sampling.DNN, from types.hpp); batch 512 and
# L2-normalised rows as DNNPatchWrapper (its default_batch_size_, cv::normalize after forward).
PARAMS_SCHEMA = {"onnx": object_fragment(
    required=("model",),
    model={"type": "string", "minLength": 1, "description": "path to the .onnx file"},
    input_size={"type": "integer", "minimum": 1, "default": DNN.input_size},
    support_multiplier={"type": "number", "exclusiveMinimum": 0, "default": DNN.support_multiplier},
    rotate_to_upright={"type": "boolean", "default": DNN.rotate_to_upright},
    normalisation={"enum": list(NORMALISATIONS), "default": DNN.normalisation},
    # the uint8 warp: the workbench's OpenCV (<= 4.10) fixed point, or the installed cv2's (patch_sampling)
    warp={"enum": list(WARPS), "default": DNN.warp},
    mean={"type": ["number", "null"], "default": None, "description": "mean_std only"},
    std={"type": ["number", "null"], "exclusiveMinimum": 0, "default": None, "description": "mean_std only"},
    input_name={"type": ["string", "null"], "minLength": 1, "default": None},
    output_name={"type": ["string", "null"], "minLength": 1, "default": None},
    batch_size={"type": "integer", "minimum": 1, "default": 512},
    l2_normalise={"type": "boolean", "default": True},
    backend={"enum": list(BACKENDS), "default": "opencv"},
)}

# ----------------------------------------------------------------------------- the network


def job_threads() -> int:
    """The job's thread count: OpenCV's (``cv2.getNumThreads``), which a job's ``--threads`` sets
    (``descbench.jobs.common.limit_threads``) and the opencv backend's dnn runs on, so the onnxruntime
    backend follows the same count. At least 1 (``setNumThreads(0)`` means no pool)."""
    import cv2

    return max(1, cv2.getNumThreads())


def session_options(ort, threads: int):
    """onnxruntime ``SessionOptions`` with ``threads`` intra-op threads and one inter-op thread.
    Without them onnxruntime starts one thread per physical core and pins them itself, whatever
    the job's threads and CPU affinity; the graph runs sequentially (its default mode), so a second
    (inter-op) pool would only idle."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads)
    opts.inter_op_num_threads = 1
    return opts


class OnnxNet:
    """A loaded ONNX model: ``run(x)`` maps a float32 blob ``[B, 1, n, n]`` to the raw output."""

    def __init__(self, path: Path, backend: str, input_name: str | None, output_name: str | None, key: str,
                 threads: int):
        self.path = path
        self.backend = backend
        self.input_name = input_name
        self.output_name = output_name
        if backend == "opencv":
            import cv2

            try:
                net = cv2.dnn.readNetFromONNX(str(path))
            except cv2.error as exc:
                raise ConfigError(f"{key}: OpenCV cannot load the ONNX model {path}: {_first_line(exc)}; export a model "
                                  "OpenCV's dnn module reads (or use backend: onnxruntime)") from exc
            if net.empty():
                raise ConfigError(f"{key}: OpenCV loaded an empty network from {path}; check the file")
            # the workbench's backend; its target (CPU) is OpenCV's default, and OpenCV 5's graph
            # engine warns on an explicit setPreferableTarget
            net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
            self.net = net
        else:
            ort = require_onnxruntime(key.removesuffix(".model") + ".backend")
            try:
                self.net = ort.InferenceSession(str(path), sess_options=session_options(ort, threads),
                                                providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own exception types, not importable by name
                raise ConfigError(f"{key}: onnxruntime cannot load the ONNX model {path}: {_first_line(exc)}") from exc
            self.input_name = input_name or self.net.get_inputs()[0].name
            self.output_name = output_name or self.net.get_outputs()[0].name

    def run(self, blob: np.ndarray) -> np.ndarray:
        """The raw output of one forward pass (backend errors become DataErrors naming the model)."""
        try:
            if self.backend == "opencv":
                if self.input_name:
                    self.net.setInput(blob, self.input_name)
                else:
                    self.net.setInput(blob)
                return np.asarray(self.net.forward(self.output_name) if self.output_name else self.net.forward())
            return np.asarray(self.net.run([self.output_name], {self.input_name: blob})[0])
        except Exception as exc:  # cv2.error or onnxruntime's errors
            raise DataError(f"ONNX model {self.path} ({self.backend}) failed on a batch of shape {list(blob.shape)}: "
                            f"{_first_line(exc)}") from exc


def _first_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def require_onnxruntime(key: str):
    """The ``onnxruntime`` module; ConfigError naming ``key`` and the pip command when missing."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise ConfigError(f"{key}: backend 'onnxruntime' needs the onnxruntime package: {ONNXRUNTIME_PIP} "
                          "(or use backend: opencv)") from exc
    return onnxruntime


# ``threads`` is part of the key: a session keeps the thread count it was created with.
@functools.lru_cache(maxsize=4)
def _cached_net(path: str, stamp: tuple[int, int], backend: str, input_name, output_name, key: str,
                threads: int) -> OnnxNet:
    return OnnxNet(Path(path), backend, input_name, output_name, key, threads)


def load_net(params: dict, key: str) -> OnnxNet:
    """The network of ``params`` on :func:`job_threads` threads (cached per process by path, file
    size, mtime and threads); ConfigError naming ``key`` (the ``model`` key) when the file is
    missing or does not load."""
    path = Path(params["model"])
    if not path.is_file():
        raise ConfigError(f"{key}: ONNX model file {path} does not exist (resolved: {path.resolve()}); give the path to "
                          "an exported .onnx file (descbench never substitutes another network)")
    st = path.stat()
    return _cached_net(str(path.resolve()), (st.st_size, st.st_mtime_ns), params["backend"], params["input_name"],
                       params["output_name"], key, job_threads())


# ----------------------------------------------------------------------------- rows


def output_rows(out: np.ndarray, batch: int, model: Path | str) -> np.ndarray:
    """float32 [B, C] of one batch's raw output: ``[B, C]`` and ``[B, C, 1, 1]`` as is, ``[B, C, H, W]``
    averaged (float64 sum over H, W of the float32 values / (H W), then float32); any other shape,
    a first dimension other than ``batch``, C = 0 or a NaN/inf value is a DataError naming ``model``."""
    shape = list(out.shape)
    fix = "the network must output [B, C], [B, C, 1, 1] or [B, C, H, W] for a batch of B patches"
    if out.ndim not in (2, 4) or shape[0] != batch or shape[1] == 0 or 0 in shape:
        raise DataError(f"ONNX model {model} gave output shape {shape} for a batch of {batch} patches; {fix}")
    if not np.issubdtype(out.dtype, np.floating) and not np.issubdtype(out.dtype, np.integer):
        raise DataError(f"ONNX model {model} gave {out.dtype} output of shape {shape}; {fix}, of numbers")
    x = out.astype(np.float32)
    if x.ndim == 4:
        h, w = shape[2], shape[3]
        x = (x.reshape(batch, shape[1], h * w).astype(np.float64).sum(axis=2) / float(h * w)).astype(np.float32)
    if not np.isfinite(x).all():
        r = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise DataError(f"ONNX model {model} gave NaN/inf (output shape {shape}, first in batch row {r}); check the "
                        "model and its input normalisation")
    return x


def l2_rows(d: np.ndarray) -> np.ndarray:
    """Each row times float32(1 / ||row||_2) (norm in float64), a row of norm <= DBL_EPSILON set
    to zero: OpenCV's ``cv::normalize(row, row, 1, 0, NORM_L2)`` as the workbench applies it."""
    n = np.sqrt(np.square(d.astype(np.float64)).sum(axis=1, keepdims=True))
    scale = np.where(n > np.finfo(np.float64).eps, 1.0 / np.where(n > 0, n, 1.0), 0.0).astype(np.float32)
    return (d * scale).astype(np.float32)


def convention(params: dict) -> PatchConvention:
    """The patch convention of filled ``params`` (the workbench's DNN convention)."""
    return dnn_convention(params["input_size"], params["support_multiplier"], params["rotate_to_upright"],
                          params["normalisation"], params["mean"], params["std"], params["warp"])


def describe_patches_u8(patches_u8: np.ndarray, net: OnnxNet, params: dict, conv: PatchConvention) -> np.ndarray:
    """float32 [N, C]: uint8 patches [N, n, n] normalised, run in batches of ``batch_size``, rows
    (:func:`output_rows`), optionally L2-normalised. N = 0: [0, C] (C from one all-zero patch)."""
    b = params["batch_size"]
    n = conv.input_size
    if len(patches_u8) == 0:
        c = output_rows(net.run(np.zeros((1, 1, n, n), np.float32)), 1, net.path).shape[1]
        return np.zeros((0, c), dtype=np.float32)
    blocks = []
    for start in range(0, len(patches_u8), b):
        chunk = patches_u8[start:start + b]
        blob = np.ascontiguousarray(normalise_patches(chunk, conv)[:, None, :, :])
        rows = output_rows(net.run(blob), len(chunk), net.path)
        if blocks and rows.shape[1] != blocks[0].shape[1]:
            raise DataError(f"ONNX model {net.path} gave {rows.shape[1]} columns for keypoints {start}..{start + len(chunk) - 1} "
                            f"and {blocks[0].shape[1]} for the first batch (output shapes differ between batches); a "
                            "descriptor has one dimension")
        blocks.append(rows)
    out = np.concatenate(blocks, axis=0)
    return l2_rows(out) if params["l2_normalise"] else out


def _checked_params(params: dict, key: str) -> tuple[OnnxNet, PatchConvention]:
    """(network, patch convention) of filled ``params``."""
    return load_net(params, key), convention(params)


def onnx_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    import cv2

    net, conv = _checked_params(params, "descriptor params.model")
    bgr = read_image(image_path, color=True)
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)  # the workbench's conversion (a grey file: itself)
    return describe_patches_u8(warp_patches(grey, kps, conv), net, params, conv)


# ----------------------------------------------------------------------------- config time


def _require_onnx(key: str):
    try:
        import onnx
    except ImportError as exc:
        raise ConfigError(f"{key}: descriptor family 'onnx' needs the onnx package to check the model: {LEARNED_EXTRA}") from exc
    return onnx


def _graph_inputs(model) -> list:
    """The graph's inputs without initialisers (older exports list the weights as graph inputs)."""
    weights = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in weights]


def graph_names(model) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of the ONNX ``model``'s graph (:func:`read_model`), inputs without initialisers."""
    return [i.name for i in _graph_inputs(model)], [o.name for o in model.graph.output]


def read_model(path: Path, key: str):
    """The ONNX model in ``path`` (no external data); ConfigError naming ``key`` when it is not one."""
    onnx = _require_onnx(key)
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and onnx's own errors
        raise ConfigError(f"{key}: {path} is not a readable ONNX model ({_first_line(exc)}); give an exported .onnx file") from exc


def declared_input(model, input_name: str | None) -> tuple[str, list[int | None] | None]:
    """The input of ``model`` the patches go to (``input_name``, null: the first) and its declared
    dims (an int per fixed axis, None per symbolic one; None when the graph gives no shape)."""
    inputs = _graph_inputs(model)
    chosen = next((i for i in inputs if i.name == input_name), inputs[0] if inputs and input_name is None else None)
    if chosen is None:
        return input_name or "", None
    tensor = chosen.type.tensor_type
    dims = ([d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
            if tensor.HasField("shape") else None)
    return chosen.name, dims


def check_declared_input(params: dict, where: str, path: Path, model) -> None:
    """What the graph declares against what the family feeds (``[batch_size, 1, input_size,
    input_size]``), before anything runs: one input, rank 4, 1 channel (a 3-channel network would
    run on OpenCV's backend with two channels of zeros), ``input_size`` where the graph fixes its
    side, and ``batch_size: 1`` where it fixes its batch to 1. ConfigError naming the key to change."""
    key = f"{where}.model"
    inputs = graph_names(model)[0]
    name, dims = declared_input(model, params["input_name"])
    if len(inputs) > 1:
        raise ConfigError(f"{key}: the graph of {path} has {len(inputs)} inputs ({', '.join(inputs)}); descriptor family "
                          "'onnx' feeds it one tensor of patches [B, 1, n, n]: export the network with its patch input "
                          "only")
    if dims is None:
        return  # no declared shape: the trial forward pass decides
    shape = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
    if len(dims) != 4:
        raise ConfigError(f"{key}: the graph's input '{name}' of {path} has rank {len(dims)} ({shape}); descriptor family "
                          "'onnx' feeds patches as [B, 1, n, n]")
    if dims[1] is not None and dims[1] != 1:
        raise ConfigError(f"{key}: the graph's input '{name}' of {path} takes {dims[1]}-channel patches ({shape}); "
                          "descriptor family 'onnx' feeds grey patches, 1 channel, as the workbench's DNNPatchWrapper: "
                          "export a network with a 1-channel input")
    n = params["input_size"]
    fixed = [d for d in dims[2:] if d is not None]
    if fixed and any(d != n for d in fixed):
        side = " x ".join("?" if d is None else str(d) for d in dims[2:])
        raise ConfigError(f"{where}.input_size: {n}, but the graph's input '{name}' of {path} declares {side} patches "
                          f"({shape}); fix: set input_size: {fixed[0]}")
    if dims[0] is not None and dims[0] != 1:
        raise ConfigError(f"{key}: the graph's input '{name}' of {path} has a fixed batch of {dims[0]} ({shape}); "
                          "re-export it with a dynamic batch axis (descriptor family 'onnx' runs the last, partial "
                          "batch too)")
    if dims[0] == 1 and params["batch_size"] != 1:
        raise ConfigError(f"{where}.batch_size: {params['batch_size']}, but the graph's input '{name}' of {path} has a "
                          f"fixed batch of 1 ({shape}); fix: set batch_size: 1, or re-export it with a dynamic batch axis")


def check_onnx(params: dict, where: str) -> dict:
    """Config-time check of filled params (module docstring): model file, names, backend, one
    forward pass of two all-zero patches; ConfigError naming ``where.<key>``."""
    key = f"{where}.model"
    path = Path(params["model"])
    if params["normalisation"] == "mean_std":
        for k in ("mean", "std"):
            if params[k] is None:
                raise ConfigError(f"{where}.{k}: normalisation 'mean_std' needs mean and std (the patch p in [0, 1] "
                                  "becomes (p - mean) / std); give both")
    else:
        for k in ("mean", "std"):
            if params[k] is not None:
                raise ConfigError(f"{where}.{k}: {params[k]} is not used with normalisation '{params['normalisation']}'; "
                                  "remove it, or set normalisation: mean_std")
    if not path.is_file():
        raise ConfigError(f"{key}: ONNX model file {path} does not exist (resolved: {path.resolve()}); give the path to "
                          "an exported .onnx file (descbench never substitutes another network)")
    model = read_model(path, key)  # read once for the names and the declared input
    inputs, outputs = graph_names(model)
    for k, have in (("input_name", inputs), ("output_name", outputs)):
        if params[k] is not None and params[k] not in have:
            raise ConfigError(f"{where}.{k}: '{params[k]}' is not a graph {k.split('_')[0]} of {path}; its "
                              f"{k.split('_')[0]}s: {', '.join(have) or 'none'} (or null for the first)")
    check_declared_input(params, where, path, model)
    net = load_net(params, key)
    n = params["input_size"]
    b = min(2, params["batch_size"])  # the job's batches; two where they can be, to try the batch axis
    try:
        output_rows(net.run(np.zeros((b, 1, n, n), np.float32)), b, path)
    except DataError as exc:
        advice = "check input_size and that the model's batch axis is dynamic (or set batch_size: 1)" if b == 2 else \
            "check input_size"
        raise ConfigError(f"{key}: a batch of {'two' if b == 2 else 'one'} all-zero {n} x {n} patch{'es' if b == 2 else ''} "
                          f"([{b}, 1, {n}, {n}]) does not give valid descriptors: {exc}; {advice}") from exc
    return params


# ----------------------------------------------------------------------------- patches


def onnx_patch_support(params: dict, side: int) -> float:
    """The whole patch: the patch is resized to the network input, not re-sampled (module docstring)."""
    return float(side)


def onnx_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """hpatches-benchmark's learned-baseline convention: every patch resized to ``input_size``
    (:func:`~descbench.descriptors.patch_sampling.resize_hpatches_patches`), then the family's
    normalisation, network and rows. ConfigError for a support other than the patch side or a
    positive angle (the resize cannot honour them)."""
    base = job.config_key.removesuffix(".params")
    side = job.shape[0]
    kp = job.keypoint
    if job.shape[0] != job.shape[1] or float(kp.size[0]) != float(onnx_patch_support(params, side)):
        raise ConfigError(f"invalid config value at '{base}.support': {float(kp.size[0])}; descriptor family 'onnx' "
                          f"describes an HPatches patch by resizing the whole {job.shape[0]} x {job.shape[1]} patch to "
                          "the network input (hpatches-benchmark's convention): leave support unset")
    if params["rotate_to_upright"] and float(kp.angle[0]) > 0:
        raise ConfigError(f"invalid config value at '{base}.angle': {float(kp.angle[0])}; descriptor family 'onnx' "
                          "resizes the whole patch and cannot rotate it: use angle 0 or -1 (unset)")
    net, conv = _checked_params(params, job.config_key + ".model")
    return describe_patches_u8(resize_hpatches_patches(job.patches, conv.input_size), net, params, conv)


def onnx_runtime_provenance(params: dict) -> dict:
    """The model file's sha256, the backend and its version, the batch size, and ``num_threads``
    (:func:`job_threads`, what either backend runs on; the key the torch families record theirs under)."""
    import cv2

    from descbench.fileops import file_sha256

    out = {"model_sha256": file_sha256(Path(params["model"])), "backend": params["backend"], "batch_size": params["batch_size"],
           "opencv": cv2.__version__, "num_threads": job_threads()}
    if params["backend"] == "onnxruntime":
        out["onnxruntime"] = require_onnxruntime("params.backend").__version__
    return out


def onnx_runtime(params: dict) -> str:
    """The opencv backend is OpenCV's own dnn (the base env); onnxruntime needs the learned extra."""
    return "onnxruntime" if params.get("backend") == "onnxruntime" else "numpy"


def model_file(params: dict) -> list[str]:
    return named_files(params, ("model",))


FAMILIES = (
    DescriptorFamily("onnx", onnx_descriptors, PARAMS_SCHEMA["onnx"], check=check_onnx,
                     patch_support=onnx_patch_support, patch_rows=onnx_patch_rows, whole_patch=True, runtime_provenance=onnx_runtime_provenance,
                     # a network at each keypoint with no measurement of its own: twice HardNet's time
                     runtime=onnx_runtime, files=model_file, cost=network_cost(2.0)),
)
