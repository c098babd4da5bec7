"""Your own descriptor in Python: a callable named by a dotted path.

``params.callable`` is ``"package.module:function"`` (or ``"package.module.function"``); the
module must be importable by the jobs (installed, on ``PYTHONPATH``, or a ``.py`` file in the
directory Snakemake runs in). It is called once per image as

    function(image, keypoints, **kwargs) -> array [N, D]

with ``image`` the image as uint8 (grey ``H x W``, or BGR ``H x W x 3`` with ``color: true``),
``keypoints`` a :class:`descbench.keypoints.ImageKeypoints` (x, y, size, angle, response,
octave, class_id, source_index; OpenCV conventions) and ``kwargs = params.kwargs``. It must
return one row per keypoint, in the given order: float rows (any float dtype, stored as
float32, compared by L2) or uint8 packed bits (compared by Hamming). Anything else (a wrong row
count, a 1-D or 3-D array, NaN) is an error naming the callable and the image.

A change to the callable's code is not seen by Snakemake: rerun its jobs with
``--forcerun descriptors`` (or give it a new name); ``kwargs`` changes rerun them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.descriptors.sift import sift_patch_support
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

# callable: "package.module:function"; kwargs: passed to it; color: BGR image instead of grey
PARAMS_SCHEMA = {"python": object_fragment(
    required=("callable",),
    callable={"type": "string", "minLength": 1, "description": "'package.module:function'"},
    kwargs={"type": "object", "default": {}},
    color={"type": "boolean", "default": False},
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
    """The rule the schema cannot state: the callable imports."""
    resolve(params["callable"], f"{where}.callable")
    return params


def python_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    fn = resolve(params["callable"])
    image = read_image(image_path, color=bool(params["color"]))
    name = params["callable"]
    out = fn(image, kps, **params["kwargs"])
    if not isinstance(out, np.ndarray):
        raise DataError(f"descriptor callable '{name}' returned {type(out).__name__} for {image_path}; return a numpy array [N, D]")
    if out.ndim != 2 or out.shape[0] != len(kps):
        raise DataError(f"descriptor callable '{name}' returned shape {out.shape} for the {len(kps)} keypoints of {image_path}; "
                        f"return one row per keypoint, in order: shape ({len(kps)}, D)")
    if out.dtype == np.uint8:
        return np.ascontiguousarray(out)
    if out.dtype.kind != "f":
        raise DataError(f"descriptor callable '{name}' returned dtype {out.dtype} for {image_path}; return floats, or uint8 packed bits")
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(out, dtype=np.float32)


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

    def row(i):
        image = cv2.cvtColor(job.patches[i], cv2.COLOR_GRAY2BGR) if color else job.patches[i]
        out = fn(image, job.keypoint, **kwargs)
        what = f"descriptor callable '{name}' returned"
        if not isinstance(out, np.ndarray):
            raise DataError(f"{what} {type(out).__name__} for {job.name(i)}; return a numpy array [1, D]")
        if out.ndim != 2 or out.shape[0] != 1:
            raise DataError(f"{what} shape {out.shape} for the 1 keypoint of {job.name(i)}; "
                            "return one row per keypoint, in order: shape (1, D)")
        if out.dtype != np.uint8 and out.dtype.kind != "f":
            raise DataError(f"{what} dtype {out.dtype} for {job.name(i)}; return floats, or uint8 packed bits")
        k = (out.dtype == np.uint8, out.shape[1])
        if not first:
            first.append(k)
        elif first[0] != k:
            kinds = [f"{'uint8' if b else 'float'} [1, {d}]" for b, d in (k, first[0])]
            raise DataError(f"{what} {kinds[0]} for {job.name(i)} but {kinds[1]} for patch 0; "
                            "return one dtype and width for every patch")
        if out.dtype == np.uint8:
            return out
        with np.errstate(over="ignore"):
            return out.astype(np.float32)

    return job.per_patch(row)


FAMILIES = (
    DescriptorFamily("python", python_descriptors, PARAMS_SCHEMA["python"], binary=None, check=check_python,
                     patch_support=sift_patch_support, patch_rows=python_patch_rows),
)
