"""Config rules of the ``patches`` section that the schema cannot state, run when the config is
validated (:func:`descbench.config.validate_config`), below the patch jobs (:mod:`descbench.patches.stages`)
so that validation never imports the job layer."""

from __future__ import annotations

from descbench.errors import ConfigError
from descbench.patches.describe import HPATCHES_BENCHMARK

# How the centre keypoint of a patch is set (patches.centre_keypoint):
#   hpatches_benchmark: angle -1 and octave 0, exactly hpatches-benchmark's extract_opencv_sift.py
#                       (for SIFT: a 1 degree rotation and the full-resolution level; the numbers
#                       are comparable with papers' opencv-sift on HPatches)
#   upright:            angle 0, the SIFT level derived from the size (descbench's registry rule)
CENTRE_KEYPOINTS = {"hpatches_benchmark": HPATCHES_BENCHMARK, "upright": {"angle": 0.0, "sift_octave": "size"}}


def check_source(cfg: dict) -> None:
    """Config rules of the ``patches`` section that the schema cannot state (called at validation,
    on the schema-valid config): keys that span sections, finite generation parameters, and the
    description geometry of every patch descriptor."""
    p = cfg["patches"]
    if p["source"] == "folder" and not p.get("path"):
        raise ConfigError("patches.source 'folder' needs patches.path: the directory holding your patch sequence folders "
                          "(hpatches-release layout: <seq>/ref.png, e1.png .. t5.png)")
    from descbench.descriptors import get_family
    from descbench.patches.describe import _check_geometry, default_support, patch_problem
    from descbench.patches.generate import check_finite

    check_finite(p["generate"], "patches.generate")
    check_workbench(cfg)
    geometry = CENTRE_KEYPOINTS[p["centre_keypoint"]]
    for name in p["descriptors"]:
        if name not in cfg["descriptors"] and name not in p["csv"]:
            raise ConfigError(f"patches.descriptors lists '{name}', which is neither in descriptors: nor in patches.csv:; "
                              f"define it there (available: {', '.join(sorted(cfg['descriptors']))})")
        if name in cfg["descriptors"]:
            spec = cfg["descriptors"][name]
            # a composite: each component described on the patches, then fused (patch_components)
            described = patch_components(cfg, name) if spec.get("family") == "composite" else {name: spec}
            for dname, dspec in described.items():
                fam = dspec.get("family")
                # the centre keypoint a job will use: the support its family's params give, with
                # patches.centre_keypoint's angle and octave (a stack: each part's own support)
                parts = dspec["params"]["parts"] if fam == "stack" else [dspec]
                via = "" if dname == name else f"component '{dname}' of '{name}', "
                for i, part in enumerate(parts):
                    problem = patch_problem(part["family"])
                    if not problem and get_family(part["family"]).patch_params_problem:
                        problem = get_family(part["family"]).patch_params_problem(part["params"])
                    if problem:
                        what = via + f"family {fam}" + (f", part {i}: family {part['family']}" if fam == "stack" else "")
                        raise ConfigError(f"patches.descriptors: '{name}' ({what}) cannot describe patches: it {problem}")
                    key = f"descriptors.{dname}.params" + (f".parts.{i}.params" if fam == "stack" else "")
                    _check_geometry(default_support(part["family"], part["params"]), geometry["angle"], geometry["sift_octave"],
                                    key, support_from=f"{key}.scale_factor")


def gives_packed_bits(cfg: dict, name: str) -> bool:
    """Whether patch descriptor ``name`` is known, before it runs, to give packed bits (uint8): a
    ``patches.csv`` entry with ``binary_packed``, a binary family, or a stack of binary parts."""
    from descbench.descriptors.stack import part_kind

    p = cfg["patches"]
    if name in p["csv"]:
        return bool(p["csv"][name]["binary_packed"])
    spec = cfg["descriptors"][name]
    parts = spec["params"]["parts"] if spec.get("family") == "stack" else [spec]
    return any(part_kind(part) is True for part in parts)


def check_workbench(cfg: dict) -> None:
    """``patches.workbench.enabled``: the workbench's patch benchmark computes on float32 matrices
    (CV_32F; :mod:`descbench.patches.workbench`), so a descriptor known to give packed bits is
    refused here, naming it and the fix (one decided by the data, e.g. python, is checked by the
    evaluation job)."""
    p = cfg["patches"]
    if not p["workbench"]["enabled"]:
        return
    binary = [n for n in p["descriptors"] if (n in cfg["descriptors"] or n in p["csv"]) and gives_packed_bits(cfg, n)]
    if binary:
        raise ConfigError(f"patches.workbench.enabled: the workbench's patch benchmark compares float32 descriptors "
                          f"(L2), and patches.descriptors {binary} give packed bits (uint8); remove them from "
                          "patches.descriptors or set patches.workbench.enabled: false")


def patch_components(cfg: dict, name: str) -> dict[str, dict]:
    """A composite patch descriptor's components, in order: descriptor name -> its ``{family,
    params}`` (each described on the patches at the centre keypoint, then fused by
    :func:`descbench.descriptors.composite.aggregate` with ``patches=True``; a component's
    ``keypoint_set`` does not apply to patches: every patch has its one centre keypoint)."""
    spec = cfg["descriptors"][name]
    out = {}
    for c in spec["params"]["components"]:
        d = cfg["descriptors"][c["descriptor"]]
        out[c["descriptor"]] = {"family": d["family"], "params": d.get("params", {})}
    return out
