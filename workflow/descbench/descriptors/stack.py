"""Stacking: the concatenation of two or more descriptors computed on the same keypoints.

``params.parts`` lists the parts, each ``{family, params}`` (any registered family except
``stack`` and ``precomputed``); each part is computed on the evaluated set's keypoints (so the
parts are row-aligned by construction) and, for float parts:

    block_i = w_i * normalise(part_i)          normalise: ``block_norm`` (none | l2 | l1)
    row     = normalise([block_1, ..., block_n])   ``final_norm`` (none | l2)

with ``w_i = weights[i]`` (default 1). ``l2`` divides a row by its L2 norm and ``l1`` by its L1
norm (an all-zero row stays zero). Binary parts (packed bits) are concatenated as bytes, which
makes the Hamming distance of the stack the sum of the parts' Hamming distances; block and final
normalisation and weights do not apply to bits (refused). Float and binary parts cannot be mixed
(no single distance would compare them).

A part that the config also evaluates as a descriptor of its own (exactly that family and those
params, on the same keypoint set) is not computed again: the stack's job reads that descriptor's
files (:func:`descbench.config.shared_parts`; the same rows bit for bit, their files' sha256 in
the stack's provenance), so stacking costs only the parts nothing else computes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily, PatchJob, check_descriptor_params, get_family
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.params import object_fragment

NORMS = ("none", "l2", "l1")

# parts: at least two {family, params} (checked by check_stack: each part is its family's params)
PARAMS_SCHEMA = {"stack": object_fragment(
    required=("parts",),
    parts={"type": "array"},
    block_norm={"enum": list(NORMS), "default": "l2"},
    final_norm={"enum": ["none", "l2"], "default": "l2"},
    weights={"type": ["array", "null"], "items": {"type": "number", "exclusiveMinimum": 0}, "default": None},
)}


def normalise_rows(d: np.ndarray, norm: str) -> np.ndarray:
    """Rows divided by their L2 (``l2``) or L1 (``l1``) norm, float64; ``none``: unchanged."""
    d = d.astype(np.float64)
    if norm == "none":
        return d
    n = np.linalg.norm(d, axis=1, keepdims=True) if norm == "l2" else np.abs(d).sum(axis=1, keepdims=True)
    return d / np.where(n > 0, n, 1.0)


def check_stack(params: dict, where: str) -> dict:
    """The rules the schema cannot state: each part is a family with that family's params; the
    weights match the parts; the parts are all float or all binary."""
    parts = params["parts"]
    if not isinstance(parts, list) or len(parts) < 2:
        raise ConfigError(f"{where}.parts: list at least two parts, each {{family, params}}")
    out = []
    for i, part in enumerate(parts):
        at = f"{where}.parts.{i}"
        if not isinstance(part, dict) or "family" not in part or set(part) - {"family", "params"}:
            raise ConfigError(f"{at}: a part is {{family: <name>, params: {{...}}}}, got {part!r}")
        if part["family"] in ("stack", "precomputed"):
            raise ConfigError(f"{at}.family: '{part['family']}' cannot be a part of a stack")
        out.append({"family": part["family"], "params": check_descriptor_params(part["family"], part.get("params"), f"{at}.params")})
    w = params["weights"]
    if w is not None and (not isinstance(w, list) or len(w) != len(parts) or not all(isinstance(x, (int, float)) and x > 0 for x in w)):
        raise ConfigError(f"{where}.weights: give one positive number per part ({len(parts)}), or null")
    kinds = [part_kind(p) for p in out]
    if len(set(kinds) - {None}) > 1:
        said = ", ".join(f"parts.{i} ({p['family']}) {'packed bits' if k else 'floats'}" for i, (p, k) in enumerate(zip(out, kinds))
                         if k is not None)
        raise ConfigError(f"{where}.parts: float and binary descriptors cannot be stacked (no one distance compares them): "
                          f"{said}; stack descriptors of one kind")
    if set(kinds) == {True} and (w is not None or params["block_norm"] != "none" or params["final_norm"] != "none"):
        raise ConfigError(f"{where}: binary parts are concatenated as bits; weights, block_norm and final_norm must be unset")
    return {**params, "parts": out}


def part_kind(part: dict) -> bool | None:
    """Whether a (filled) part gives packed bits: its family's, or for a family decided by the
    data (python) its ``descriptor_kind`` (None: not known before it runs)."""
    binary = get_family(part["family"]).binary
    if binary is None and part["params"].get("descriptor_kind") in ("binary", "float"):
        return part["params"]["descriptor_kind"] == "binary"
    return binary


def stack_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict,
                      given: list[np.ndarray | None] | None = None) -> np.ndarray:
    """The stack's rows on one image: each part computed, except a part whose rows are ``given``
    (``given[i]`` not None: the rows of a descriptor of the config with that part's family and
    params on the same keypoints, :func:`descbench.config.shared_parts`), then
    :func:`combine_blocks`."""
    from descbench.descriptors import compute_descriptors

    given = given or [None] * len(params["parts"])
    blocks = [g if g is not None else compute_descriptors(p["family"], p["params"], image_path, kps, kpset,
                                                         f"stack part {i} ({p['family']})")
              for i, (p, g) in enumerate(zip(params["parts"], given, strict=True))]
    return combine_blocks(blocks, params, str(image_path))


def combine_blocks(blocks: list[np.ndarray], params: dict, where: str = "") -> np.ndarray:
    """The parts' rows as one descriptor: binary parts concatenated as bits; float parts each
    normalised (``block_norm``), weighted, concatenated, then normalised (``final_norm``).
    ``where`` names the image or patches in errors."""
    binary = [b.dtype == np.uint8 for b in blocks]
    if all(binary):
        return np.ascontiguousarray(np.concatenate(blocks, axis=1))
    if any(binary):
        said = ", ".join(f"parts.{i} ({p['family']}) {'packed bits (uint8)' if b else f'floats ({blk.dtype})'}"
                         for i, (p, b, blk) in enumerate(zip(params["parts"], binary, blocks)))
        raise DataError(f"the stack's parts gave both packed bits and floats{f' on {where}' if where else ''}: {said}; "
                        "stack descriptors of one kind (a python part declares its kind with params.descriptor_kind)")
    weights = params["weights"] or [1.0] * len(blocks)
    row = np.concatenate([w * normalise_rows(b, params["block_norm"]) for w, b in zip(weights, blocks)], axis=1)
    return normalise_rows(row, params["final_norm"]).astype(np.float32)


def stack_patch_support(params: dict, side: int) -> list[float]:
    """Each part at its own family's default support (a composite: one size per part)."""
    out = []
    for i, p in enumerate(params["parts"]):
        fam = get_family(p["family"])
        problem = fam.patch_problem()
        if problem:
            raise ConfigError(f"stack part {i}: descriptor family '{fam.name}' cannot describe patches: it {problem}")
        out.append(fam.patch_support(p["params"], side))
    return out


def stack_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    """Each part described by its own family (``job.describe``: at its own default support unless
    one is given for all), combined exactly as :func:`stack_descriptors`."""
    blocks = [job.describe(i, p["family"], p["params"]) for i, p in enumerate(params["parts"])]
    return combine_blocks(blocks, params, job.where)


def stack_parts(params: dict) -> list[dict]:
    """Its parts' specs: its job runs each, one after the other."""
    return list(params.get("parts") or [])


def stack_width(params: dict, part_widths: list[int]) -> int:
    """The parts' blocks side by side."""
    return sum(part_widths) or 128


FAMILIES = (
    DescriptorFamily("stack", stack_descriptors, PARAMS_SCHEMA["stack"], binary=None, check=check_stack,
                     patch_support=stack_patch_support, patch_rows=stack_patch_rows,
                     children=stack_parts, width=stack_width, combines=stack_descriptors),
)
