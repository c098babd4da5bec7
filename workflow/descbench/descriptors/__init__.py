"""Descriptor registry: one small module per family.

A family is a :class:`DescriptorFamily`: its parameters (a JSON-schema fragment with their
types, allowed values and defaults: the family module's ``PARAMS_SCHEMA``, the one place each
parameter is declared), whether its output is packed binary (compared with Hamming) or float
(compared with L2), and a function
``compute(image_path, keypoints, params, keypoint_set_spec) -> ndarray [N, D]`` that returns
one row per input keypoint, in input order (it must never drop or add keypoints).

The same family describes HPatches-style patches (:mod:`descbench.patches.describe`, each patch
as an image of its own with one keypoint at its centre) through two hooks of its own:
``patch_support(params, side)`` (the default keypoint size on a ``side`` x ``side`` patch) and
``patch_rows(job, params)`` (the [N, D] rows of a :class:`PatchJob`: every patch at the job's
keypoint, exactly what ``compute`` gives on that patch saved as an image). A family that cannot
describe patches by design says why in ``not_on_patches``; one that declares neither is refused
on patches with a :class:`ConfigError` naming it and these hooks (never a silent default).
:func:`image_patch_rows` is a ready ``patch_rows`` for any family: its own ``compute`` on each
patch written to a temporary image (exact by construction, slower than an in-memory hook).

The workflow sizes, places and feeds a family's jobs from facts the family declares
(:mod:`descbench.jobfacts`), never from its name: ``runtime`` (``numpy``, ``torch`` or
``onnxruntime``: the job's conda env, threads and GPU), ``cost`` (the fitted memory/runtime model of
its jobs and the factors that scale it), ``width`` (the columns its rows are compared in),
``children`` / ``repeats`` (the nested specs its job runs, e.g. a stack's parts, a pooled base at
each scale), ``components`` (the config's descriptors whose files it combines), ``files`` (the
weight / model files its params name: rule inputs) and ``weights_labels`` (the tables' ``weights``
column). A family that declares none is a NumPy/OpenCV family costed like SIFT's compute, 128
columns wide, reading no files.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from descbench.errors import ConfigError, DataError
from descbench.jobfacts import Cost, RuntimeFacts
from descbench.keypoints import ImageKeypoints
from descbench.params import check_params, fragment_defaults, object_fragment


@dataclass(frozen=True)
class DescriptorFamily(RuntimeFacts):
    name: str
    compute: Callable[[Path, ImageKeypoints, dict, dict], np.ndarray]
    # its ``params``: a closed JSON-schema object fragment (descbench.params.object_fragment) with
    # every key the family reads, its type / allowed values and its default
    params_schema: dict = field(default_factory=object_fragment)
    binary: bool | None = False  # None: decided by the data (precomputed, stack, python)
    # Optional check of the schema-valid, filled params at config time, (params, where) -> params,
    # for rules the schema cannot state (a stack's parts, a callable that must import); raises
    # ConfigError naming ``where``.
    check: Callable[[dict, str], dict] | None = None
    # Optional check of a descriptor against the rest of the validated config, ``(name, spec,
    # descriptors, keypoint_sets)``, for rules that span keys (the sets it reads, the descriptors
    # it combines); raises ConfigError naming ``descriptors.<name>``.
    check_in_config: Callable[[str, dict, dict, dict], None] | None = None
    # params keys whose values are handed to user code as given (a callable's keyword arguments):
    # the config's own checks (finite numbers) leave them alone
    opaque_params: tuple[str, ...] = ()
    # Patches (module docstring). ``patch_support(params, side)``: the default keypoint size (px)
    # on a side x side patch for filled params (a composite family: one size per part, in order).
    patch_support: Callable[[dict, int], float | list[float]] | None = None
    # ``patch_rows(job, params)``: [N, D] rows of every patch of ``job`` (a :class:`PatchJob`).
    patch_rows: Callable[[PatchJob, dict], np.ndarray] | None = None
    # Why the family cannot describe patches by design (e.g. it needs colour); None: it can.
    not_on_patches: str | None = None
    # True: it describes a patch as a whole (resized to a network input), so the centre keypoint's
    # size and angle cannot vary (a pooled family cannot describe it at scaled supports).
    whole_patch: bool = False
    # ``patch_params_problem(params)``: why these (filled) params cannot describe patches, phrased to
    # follow "it" (e.g. a pooled family over a whole-patch base); None: they can.
    patch_params_problem: Callable[[dict], str | None] | None = None
    # A family whose rows are a function of another family's rows on the same keypoints (rootsift =
    # root(sift)): ``(base family, base_params(params) -> the base's filled params, transform(rows,
    # params) -> rows)``, with ``transform(base rows) == compute(...)`` bit for bit. A descriptor job
    # reads the rows of a descriptor of the config with that family and params on the same keypoint
    # set instead of computing them (descbench.config.shared_base); without one it runs ``compute``.
    derives: tuple[str, Callable[[dict], dict], Callable[[np.ndarray, dict], np.ndarray]] | None = None
    # A family whose rows combine the rows of its ``children`` (a stack's parts): ``combines(image_path,
    # keypoints, params, kpset, given)`` is ``compute`` with ``given[i]`` (rows, or None: computed) as
    # the rows of part i, bit for bit what computing that part gives. A descriptor job takes a part's
    # rows from the files of a descriptor of the config with exactly that part's family and params on
    # the same keypoint set (descbench.config.shared_parts) instead of computing them again.
    combines: Callable[[Path, ImageKeypoints, dict, dict, list[np.ndarray | None]], np.ndarray] | None = None
    # ``shareable(params)``: per child (``children``), the spec whose plain rows ``combines`` can take
    # as given, or None where it cannot (a pooled base whose rows at scale 1 are not the base's own);
    # None: every child as it is (a stack's parts).
    shareable: Callable[[dict], list[dict | None]] | None = None
    # ``runtime_provenance(params)``: how a job ran the family (learned families: torch/kornia or
    # OpenCV/onnxruntime versions, device, threads, weights or model sha256, batch), recorded in its
    # descriptor files' metadata; None: nothing beyond the params.
    runtime_provenance: Callable[[dict], dict] | None = None
    # Domain-size pooling on the family's own scale-space pyramid (``dsp`` with ``image:
    # base_pyramid``, the workbench's computeDSP): ``pyramid_rows(image_path, keypoints, params,
    # kpset, scales, colour) -> (rows, valid)``, for each scale a its [N, D] rows at size ``a *
    # size`` before pooling and the [N] bool mask of keypoints it could describe there, on the
    # image's grey (``colour`` false) or BGR version; None: the family has no such pyramid (dsp
    # refuses ``base_pyramid`` over it).
    pyramid_rows: Callable[[Path, ImageKeypoints, dict, dict, list[float], bool],
                           tuple[list[np.ndarray], list[np.ndarray]]] | None = None
    # ``pool_params(params)``: for filled params, the params under which ``compute`` and ``patch_rows``
    # give the rows that the workbench's DomainSizePooling pools for this setting (its extractor's
    # rows, without the row normalisation its runner's NoPooling adds to a plain run): ``dsp`` (images
    # ``original`` / ``workbench_pyramid``) computes its base with them; None: the params as given.
    pool_params: Callable[[dict], dict] | None = None

    # ``own_rows(params, kpset, keypoint_file)``: for a joint detect-and-describe network
    # (descbench.keypoints.joint) on a set whose keypoints that same network gave, ``(read, runtime)``:
    # ``read(image, keypoints) -> [N, D]`` its rows from the keypoint job's side file (no second
    # network run) and the runtime record of the run that made them; None: ``compute`` runs.
    own_rows: Callable[[dict, dict, Path], tuple[Callable[[int, ImageKeypoints], np.ndarray], dict] | None] | None = None

    # What the workflow reads about its jobs (descbench.jobfacts; a value or a function of the params):
    # where it runs (numpy, torch, onnxruntime: the job's conda env, threads and GPU; RuntimeFacts)
    runtime: str | Callable[[dict], str] = "numpy"
    # ``files(params)``: the weight / model files its params name (rule inputs: a replaced file reruns its jobs)
    files: Callable[[dict], list[str]] | None = None
    # ``weights_labels(params)``: how the tables' ``weights`` column names each network it loads
    weights_labels: Callable[[dict], list[str]] | None = None
    # ``torch_params(params)``: the descbench.torchrt params (device, threads) its torch networks run
    # with; None: ``[params]`` when its runtime is torch
    torch_params: Callable[[dict], list[dict]] | None = None
    # the inputs of descbench.jobresources' memory/runtime model of its jobs
    cost: Cost | Callable[[dict], Cost] = Cost()
    # ``children(params)``: the descriptor specs ({family, params}) nested in its params that its job
    # runs (a stack's parts, a pooled base); their facts count for its job
    children: Callable[[dict], list[dict]] | None = None
    # ``repeats(params)``: how many times its job runs each child on every keypoint (a pooled family: once per scale)
    repeats: Callable[[dict], int] | None = None
    # ``components(params)``: the config's descriptors (names) whose files it combines
    components: Callable[[dict], list[str]] | None = None
    # Dimensions its rows are compared in, for the score job's time (at least 128 is assumed for every
    # 128-D float and every binary family): a number, or ``width(params, part_widths)`` with the
    # widths of its children, then of its components, in order.
    width: int | Callable[[dict, list[int]], int] = 128

    def cost_of(self, params: dict) -> Cost:
        return self.cost(params) if callable(self.cost) else self.cost

    def children_of(self, params: dict) -> list[dict]:
        return list(self.children(params)) if self.children else []

    def repeats_of(self, params: dict) -> int:
        return self.repeats(params) if self.repeats else 1

    def components_of(self, params: dict) -> list[str]:
        return list(self.components(params)) if self.components else []

    def width_of(self, params: dict, part_widths: list[int]) -> int:
        return self.width(params, part_widths) if callable(self.width) else self.width

    @property
    def defaults(self) -> dict:
        """The filled defaults of its params (from :attr:`params_schema`)."""
        return fragment_defaults(self.params_schema)

    def patch_problem(self) -> str | None:
        """Why this family cannot describe patches, phrased to follow "it" (``None``: it can): its
        ``not_on_patches`` reason, or the hooks it lacks and how to add them."""
        if self.not_on_patches:
            return self.not_on_patches
        missing = [h for h in ("patch_support", "patch_rows") if getattr(self, h) is None]
        if not missing:
            return None
        return (f"declares no {' and no '.join(missing)} hook; add them to its DescriptorFamily in its module under "
                "descbench/descriptors/: patch_support=<fn(params, side) -> its default keypoint size on a side x side "
                f"patch> and patch_rows=<fn(job, params) -> [N, D] rows> (descbench.descriptors.image_patch_rows('{self.name}') "
                "runs its compute on each patch saved as an image), or not_on_patches=<why it cannot describe patches>")


@dataclass(frozen=True)
class PatchJob:
    """Patches to describe, built by :func:`descbench.patches.describe.describe_patches` for a
    family's ``patch_rows`` hook: every patch is an image of its own with the one ``keypoint``
    (at the patch centre); the rows must equal the family's ``compute`` on each patch saved as an
    image, with keypoint set spec ``kpset``."""

    patches: np.ndarray  # uint8 [N, S, S], C-contiguous
    keypoint: ImageKeypoints | None  # the centre keypoint (None: a composite family, parts at their own sizes)
    kpset: dict
    where: str  # names the patches in errors
    config_key: str  # the params' config key (errors about a parameter)
    # the batching loop: ``per_patch(row)`` is the [N, D] array of ``row(i)`` ([D] or [1, D]) for every patch i
    per_patch: Callable[[Callable[[int], np.ndarray]], np.ndarray]
    # a part of a composite family: ``describe(i, family, params)`` -> that family's rows of these patches
    describe: Callable[[int, str, dict], np.ndarray] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width) of every patch."""
        return int(self.patches.shape[1]), int(self.patches.shape[2])

    def name(self, i: int) -> str:
        """Patch ``i`` in errors."""
        return f"{self.where} patch {i}"


def image_patch_rows(family: str) -> Callable[[PatchJob, dict], np.ndarray]:
    """A ``patch_rows`` hook for ``family`` that runs its registered ``compute`` on each patch
    written as a binary PGM to a private temporary directory (exact by construction; one file
    write and read per patch, so slower than an in-memory hook)."""

    def patch_rows(job: PatchJob, params: dict) -> np.ndarray:
        import tempfile

        h, w = job.shape
        header = f"P5 {w} {h} 255\n".encode()
        with tempfile.TemporaryDirectory(prefix="descbench-patch-") as tmp:
            path = Path(tmp) / "patch.pgm"

            def row(i):
                path.write_bytes(header + job.patches[i].tobytes())
                return compute_descriptors(family, params, path, job.keypoint, job.kpset, job.name(i))

            return job.per_patch(row)

    return patch_rows


# The family modules (``descbench.descriptors.<module>``). Each defines ``PARAMS_SCHEMA`` (family
# name -> its params fragment) and ``FAMILIES``, a tuple of :class:`DescriptorFamily` (with its
# patch hooks, or its reason not to describe patches, and its job facts); adding a family touches
# its module and this tuple, nothing else (tests/descbench/test_jobfacts.py walks a toy learned family
# through it).
FAMILY_MODULES = ("sift", "rootsift", "precomputed", "stack", "python", "surf", "opencv_binary", "opencv_float", "rgbsift", "dspsift",
                 "colourhist", "onnx_net", "kornia_nets", "joint_nets", "pooling", "composite")


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


def spec_families(spec: dict) -> list[tuple[DescriptorFamily, dict]]:
    """(family, params) of a descriptor spec ``{family, params}`` and of every spec nested in it
    (its family's ``children``), depth first: what its job runs. ``params`` missing or null: ``{}``."""
    fam = get_family(spec["family"])
    params = spec.get("params") or {}
    out = [(fam, params)]
    for child in fam.children_of(params):
        out += spec_families(child)
    return out


def check_descriptor_params(family: str, params: dict | None, where: str) -> dict:
    """A family's params checked against its ``params_schema`` and filled with its defaults.

    An unknown key, a wrong type, a value outside the allowed ones or the range (the OpenCV
    constraints the fragment states) is a :class:`ConfigError` naming ``where.<key>``, the value,
    the allowed values and the default; then the family's own ``check`` (cross-key rules)."""
    reg = _registry()
    if family not in reg:
        key = where.removesuffix(".params") + ".family"
        raise ConfigError(f"invalid config value at '{key}': unknown descriptor family '{family}'; known: {', '.join(sorted(reg))}")
    fam = reg[family]
    params = check_params(fam.params_schema, params, where, f"descriptor family '{family}'")
    return fam.check(params, where) if fam.check else params


def compute_descriptors(family: str, params: dict, image_path: Path, kps: ImageKeypoints, kpset: dict, where: str,
                        given: list[np.ndarray | None] | None = None) -> np.ndarray:
    """Run a family on one image and validate its output (:func:`check_rows`). A
    :class:`DataError` raised by the family (e.g. the python family's callable) is re-raised
    prefixed with ``where`` (descriptor, scene, image). ``given``: for a family that
    :attr:`DescriptorFamily.combines` its parts, the rows of the parts already at hand (None:
    that part is computed)."""
    fam = get_family(family)
    if given is not None and fam.combines is None:
        raise ValueError(f"descriptor family '{family}' combines no parts; it cannot be given part rows")
    try:
        if given is not None:
            desc = fam.combines(Path(image_path), kps, params, kpset, given)
        else:
            desc = fam.compute(Path(image_path), kps, params, kpset)
    except DataError as exc:
        if str(exc).startswith(where):
            raise
        raise DataError(f"{where}: {exc}") from exc
    return check_rows(desc, len(kps), f"descriptor family '{family}'", image_path, where)


def check_rows(desc, n: int, what: str, image_path: Path, where: str) -> np.ndarray:
    """``desc``, one image's descriptor rows made by ``what`` for its ``n`` keypoints, if it is a
    2-D array with one row per keypoint, at least one column and finite float values (uint8 rows
    are bits or 8-bit values, always finite); else a :class:`DataError` naming ``where``, the
    image and the fix. One check for every way rows are made (a family, an in-process callable)."""
    if not isinstance(desc, np.ndarray) or desc.ndim != 2 or desc.shape[0] != n:
        raise DataError(
            f"{where}: {what} returned shape {getattr(desc, 'shape', type(desc).__name__)} for "
            f"{n} keypoints of {image_path}; a family must return one row per keypoint"
        )
    if desc.shape[1] == 0 and desc.shape[0]:  # (an image without keypoints may come back 0 x 0)
        raise DataError(
            f"{where}: {what} returned {desc.shape[0]} x 0 descriptors for {image_path}: rows "
            "without a value; a descriptor has at least one dimension (D >= 1)"
        )
    if desc.dtype != np.uint8:
        bad = ~np.all(np.isfinite(desc), axis=1)
        if bad.any():
            raise DataError(
                f"{where}: {what} produced NaN/inf for {int(bad.sum())} keypoints of {image_path} "
                f"(first at keypoint row {int(np.flatnonzero(bad)[0])}); fix the descriptor or its input"
            )
    return desc
