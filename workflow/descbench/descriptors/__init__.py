"""Descriptor registry: one small module per family.

A family is a :class:`DescriptorFamily`: its parameter names with defaults, whether its output
is packed binary (compared with Hamming) or float (compared with L2), and a function
``compute(image_path, keypoints, params, keypoint_set_spec) -> ndarray [N, D]`` that returns
one row per input keypoint, in input order (it must never drop or add keypoints).
"""

from __future__ import annotations

import difflib
import functools
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints


@dataclass(frozen=True)
class DescriptorFamily:
    name: str
    compute: Callable[[Path, ImageKeypoints, dict, dict], np.ndarray]
    defaults: dict = field(default_factory=dict)
    binary: bool | None = False  # None: decided by the data (precomputed, stack, python)
    # Optional check of the filled params at config time, (params, where) -> params; raises
    # ConfigError naming ``where`` (e.g. a stack's parts, a callable that cannot be imported).
    check: Callable[[dict, str], dict] | None = None


# The family modules (``descbench.descriptors.<module>``). Each defines ``FAMILIES``, a tuple of
# :class:`DescriptorFamily`; adding a family touches its module and this tuple, nothing else.
FAMILY_MODULES = ("sift", "rootsift", "precomputed", "stack", "python", "surf", "opencv_binary", "opencv_float", "rgbsift", "dspsift")


@functools.cache
def _registry() -> dict[str, DescriptorFamily]:
    reg: dict[str, DescriptorFamily] = {}
    for module in FAMILY_MODULES:
        for fam in importlib.import_module(f"descbench.descriptors.{module}").FAMILIES:
            if fam.name in reg:
                raise RuntimeError(f"descriptor family '{fam.name}' is defined twice (module {module})")
            reg[fam.name] = fam
    return reg


def lazy_module(name: str):
    """Module ``name``, executed on its first attribute access (``importlib.util.LazyLoader``).

    Family modules are imported by every job and by the workflow's config validation; their
    numba kernels are not needed there (an ``import numba`` costs ~0.3 s), so a family refers to
    its kernel module through this.
    """
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def family_names() -> list[str]:
    return sorted(_registry())


def get_family(name: str) -> DescriptorFamily:
    reg = _registry()
    if name not in reg:
        raise ConfigError(f"unknown descriptor family '{name}'; known: {', '.join(sorted(reg))}")
    return reg[name]


def check_descriptor_params(family: str, params: dict | None, where: str) -> dict:
    """Fill a family's parameter defaults; an unknown parameter is a :class:`ConfigError`."""
    reg = _registry()
    if family not in reg:
        key = where.removesuffix(".params") + ".family"
        raise ConfigError(f"invalid config value at '{key}': unknown descriptor family '{family}'; known: {', '.join(sorted(reg))}")
    fam = reg[family]
    params = dict(params or {})
    for key in params:
        if key not in fam.defaults:
            hint = difflib.get_close_matches(key, list(fam.defaults), n=1)
            allowed = ", ".join(sorted(fam.defaults)) or "none"
            raise ConfigError(
                f"unknown config key '{where}.{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else "")
                + f"; family '{family}' takes: {allowed}"
            )
    params = {**fam.defaults, **params}
    return fam.check(params, where) if fam.check else params


def compute_descriptors(family: str, params: dict, image_path: Path, kps: ImageKeypoints, kpset: dict, where: str) -> np.ndarray:
    """Run a family on one image and validate its output (row count, finiteness)."""
    fam = get_family(family)
    desc = fam.compute(Path(image_path), kps, params, kpset)
    if desc.ndim != 2 or desc.shape[0] != len(kps):
        raise DataError(
            f"{where}: descriptor family '{family}' returned shape {desc.shape} for {len(kps)} keypoints "
            f"of {image_path}; a family must return one row per keypoint"
        )
    if desc.dtype != np.uint8:
        bad = ~np.all(np.isfinite(desc), axis=1)
        if bad.any():
            raise DataError(
                f"{where}: descriptor '{family}' produced NaN/inf for {int(bad.sum())} keypoints of {image_path} "
                f"(first at keypoint row {int(np.flatnonzero(bad)[0])}); fix the descriptor or its input"
            )
    return desc
