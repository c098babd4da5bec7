"""Your own descriptor in Python: a callable named by a dotted path.

``params.callable`` is ``"package.module:function"`` (or ``"package.module.function"``); the
module must be importable by the jobs (installed, on ``PYTHONPATH``, or a ``.py`` file in the
directory Snakemake runs in). It is called once per image as

    function(image, keypoints, **kwargs) -> array [N, D]

with ``image`` the image as uint8 (grey ``H x W``, or BGR ``H x W x 3`` with ``color: true``),
``keypoints`` a :class:`descbench.keypoints.ImageKeypoints` (x, y, size, angle, response,
octave, class_id, source_index; OpenCV conventions) and ``kwargs = params.kwargs``. It must
return one row per keypoint, in the given order, with at least one column: float rows (any
float dtype, stored as float32, compared by L2) or uint8. uint8 rows are packed bits (Hamming)
or 8-bit values (L2), which the array cannot tell, so they need ``params.descriptor_kind``
(``binary`` or ``float``, as for precomputed descriptors; never guessed). Anything else (a wrong
row count, a 1-D or 3-D array, no column, NaN, an exception raised by the callable) is an error
naming the callable and the image. The kwargs are checked against the callable's signature
when the config is validated (an unknown keyword is an error naming ``params.kwargs.<key>``).

A change to the callable's code is not seen by Snakemake: rerun its jobs with
``--forcerun descriptors`` (or give it a new name); ``kwargs`` changes rerun them.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
import traceback
from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.descriptors.sift import sift_patch_support
from descbench.errors import ConfigError, DataError, DescbenchError
from descbench.jobfacts import (Cost, conventional_files, conventional_runtime, conventional_torch_params,
                                conventional_weights_labels)
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

# callable: "package.module:function"; kwargs: passed to it; color: BGR image instead of grey;
# descriptor_kind: what uint8 output is (binary: packed bits, Hamming; float: 8-bit values, L2),
# required when the callable returns uint8 (as keypoint_sets.<set>.params.descriptor_kind of a
# precomputed set)
PARAMS_SCHEMA = {"python": object_fragment(
    required=("callable",),
    callable={"type": "string", "minLength": 1, "description": "'package.module:function'"},
    kwargs={"type": "object", "default": {}},
    color={"type": "boolean", "default": False},
    descriptor_kind={"enum": ["binary", "float", None], "default": None,
                     "description": "uint8 output: binary = packed bits (Hamming), float = values (L2); required for uint8"},
)}


def resolve(path: str, where: str = "descriptors.<name>.params.callable"):
    """The callable named by ``path`` (``module:attr`` or ``module.attr``); ConfigError if absent."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{where}: give a dotted path 'package.module:function'")
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ConfigError(f"{where}: '{path}' is not 'package.module:function'")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # a .py file next to the config, as `python -m` would see it
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module '{module}' ({exc}); install it, put it on PYTHONPATH, "
                          "or place <module>.py in the directory snakemake runs in") from exc
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ConfigError(f"{where}: module '{module}' has no callable '{attr}'")
    return fn


def check_python(params: dict, where: str) -> dict:
    """The rules the schema cannot state: the callable imports, and it can be called as
    ``fn(image, keypoints, **kwargs)`` with the configured kwargs (its signature)."""
    fn = resolve(params["callable"], f"{where}.callable")
    check_signature(fn, params["callable"], params["kwargs"], where)
    return params


def check_signature(fn, name: str, kwargs: dict, where: str) -> None:
    """ConfigError naming ``where.kwargs.<key>`` when ``fn(image, keypoints, **kwargs)`` cannot
    bind: a keyword the callable does not take, or a parameter without default that no kwarg
    gives. A callable whose signature Python cannot inspect (some builtins) is not checked."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    ps = sig.parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in ps):
        takes = [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)][2:]
        for key in kwargs:
            if key not in takes:
                hint = difflib.get_close_matches(str(key), takes, n=1)
                raise ConfigError(
                    f"{where}.kwargs.{key}: the callable '{name}' takes no keyword '{key}'"
                    + (f" (did you mean '{hint[0]}'?)" if hint else "")
                    + f"; its signature is {sig}, called as fn(image, keypoints, **kwargs): remove '{key}' from kwargs "
                    "or add the parameter to the function")
    try:
        sig.bind(None, None, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"{where}.kwargs: the callable '{name}' cannot be called as fn(image, keypoints, **kwargs) "
                          f"with kwargs {kwargs} ({exc}); its signature is {sig}: give every parameter after the first two "
                          "a default or a kwarg") from None


def _user_frame(exc: BaseException) -> str:
    """Where in the user's code ``exc`` was raised (the innermost frame outside this module)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() != Path(__file__).resolve()]
    return f", at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}()" if frames else ""


def call_descriptor(fn, name: str, args: tuple, kwargs: dict, what: str,
                    fix: str = "fix the callable (or params.kwargs)"):
    """``fn(*args, **kwargs)``; an exception it raises becomes a DataError naming the callable,
    ``what`` (the image or patch strip), the exception's type and message and where in the
    user's code it was raised (the original exception is chained), ending with ``fix``. A
    :class:`~descbench.errors.DescbenchError` (already naming its case) passes unchanged."""
    try:
        return fn(*args, **kwargs)
    except DescbenchError:
        raise
    except Exception as exc:  # the user's code: any exception, named with its type
        raise DataError(f"descriptor callable '{name}' raised {type(exc).__name__} on {what}{_user_frame(exc)}: {exc}; "
                        f"{fix}") from exc


def checked_output(out, n: int, name: str, what: str, kind: str | None, kind_key: str,
                   unit: tuple[str, str] = ("keypoint", "keypoints")) -> np.ndarray:
    """The callable's output ``out`` for ``n`` keypoints (``unit``: singular and plural) of ``what`` as
    the stored descriptor: a C-contiguous [n, D] (D >= 1) uint8 array of packed bits (``kind``
    binary) or float32 array (floats, or uint8 values with ``kind`` float). DataError naming the
    callable and ``what`` otherwise; uint8 without a ``kind`` is never guessed (``kind_key`` names
    the parameter)."""
    rows = unit[0] if n == 1 else unit[1]
    if not isinstance(out, np.ndarray):
        raise DataError(f"descriptor callable '{name}' returned {type(out).__name__} for {what}; return a numpy array [{n}, D]")
    if out.ndim != 2 or out.shape[0] != n:
        raise DataError(f"descriptor callable '{name}' returned shape {out.shape} for the {n} {rows} of {what}; "
                        f"return one row per {unit[0]}, in order: shape ({n}, D)")
    if out.shape[1] == 0 and n:
        raise DataError(f"descriptor callable '{name}' returned shape {out.shape} for {what}: rows without a value; "
                        f"return at least one value per {unit[0]}: shape ({n}, D) with D >= 1")
    if out.dtype == np.uint8:
        if kind is None:
            raise DataError(f"descriptor callable '{name}' returned uint8 for {what}, which may be packed bits or 8-bit "
                            f"values; say which with {kind_key}: binary (packed bits, Hamming distance) or float "
                            "(values, L2 distance)")
        if kind == "binary":
            return np.ascontiguousarray(out)
        return np.ascontiguousarray(out, dtype=np.float32)
    if out.dtype.kind != "f":
        raise DataError(f"descriptor callable '{name}' returned dtype {out.dtype} for {what}; return floats, or uint8 "
                        f"(with {kind_key})")
    if kind == "binary":
        raise DataError(f"descriptor callable '{name}' returned {out.dtype} for {what}, but {kind_key} is binary; return "
                        "packed bits as uint8 (np.packbits) or set it to float")
    with np.errstate(over="ignore"):  # checked by the caller: a huge float64 overflows to inf
        return np.ascontiguousarray(out, dtype=np.float32)


def python_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    fn = resolve(params["callable"])
    image = read_image(image_path, color=bool(params["color"]))
    name = params["callable"]
    out = call_descriptor(fn, name, (image, kps), params["kwargs"], str(image_path))
    return checked_output(out, len(kps), name, str(image_path), params.get("descriptor_kind"),
                          "params.descriptor_kind of the python descriptor (or stack part)")


def python_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """The callable once per patch, ``fn(patch, centre_keypoint, **kwargs)``, with the checks of
    :func:`python_descriptors`; ``color: true`` passes the grey patch as 3 equal BGR channels
    (what reading a grey file in colour gives)."""
    import cv2

    fn = resolve(params["callable"], job.config_key + ".callable")
    name = params["callable"]
    kwargs = params["kwargs"]
    color = bool(params["color"])
    first: list[tuple[bool, int]] = []  # (binary, D) of patch 0's row

    kind = params.get("descriptor_kind")

    def row(i):
        image = cv2.cvtColor(job.patches[i], cv2.COLOR_GRAY2BGR) if color else job.patches[i]
        out = call_descriptor(fn, name, (image, job.keypoint), kwargs, job.name(i))
        what = f"descriptor callable '{name}' returned"
        if isinstance(out, np.ndarray) and out.ndim == 2 and out.shape[0] == 1 and (out.dtype == np.uint8 or out.dtype.kind == "f"):
            k = (out.dtype == np.uint8, out.shape[1])
            if not first:
                first.append(k)
            elif first[0] != k:
                kinds = [f"{'uint8' if b else 'float'} [1, {d}]" for b, d in (k, first[0])]
                raise DataError(f"{what} {kinds[0]} for {job.name(i)} but {kinds[1]} for patch 0; "
                                "return one dtype and width for every patch")
        return checked_output(out, 1, name, job.name(i), kind, f"{job.config_key}.descriptor_kind")

    return job.per_patch(row)


# User code: what it runs and loads is known only from its kwargs, read by the conventions of the
# learned families' params (descbench.jobfacts: device + threads: torch; backend: onnxruntime;
# model, weights, *_weights: files); its time is counted as twice SIFT's.
FAMILIES = (
    DescriptorFamily("python", python_descriptors, PARAMS_SCHEMA["python"], binary=None, check=check_python,
                     patch_support=sift_patch_support, patch_rows=python_patch_rows,
                     runtime=conventional_runtime, torch_params=conventional_torch_params, files=conventional_files,
                     weights_labels=conventional_weights_labels, cost=Cost(per_keypoint=2.0, per_pixel=2.0),
                     opaque_params=("kwargs",)),
)
