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
from descbench.descriptors import DescriptorFamily
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints


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
    resolve(params["callable"], f"{where}.callable")
    if not isinstance(params["kwargs"], dict):
        raise ConfigError(f"{where}.kwargs: a mapping of keyword arguments, got {params['kwargs']!r}")
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


FAMILIES = (
    DescriptorFamily("python", python_descriptors, defaults={"callable": None, "kwargs": {}, "color": False}, binary=None,
                     check=check_python),
)
