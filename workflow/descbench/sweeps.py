"""Parameter sweeps: a grid over a keypoint set's or a descriptor's parameters, expanded into named
variants that are evaluated side by side in one run and one table.

    sweeps:
      border:                                  # the sweep's name
        keypoint_set: sift                     # or  descriptor: <name>
        grid:                                  # dotted paths into that spec -> values
          border_px: [20, 40]
          params.contrast_threshold: [0.03, 0.04]

gives the keypoint sets ``sift-border-0`` .. ``sift-border-3``: copies of ``sift`` with every
combination (the grid's product, first key slowest, values in the order given), each a new name,
so no variant ever replaces another's results (nor the base's, which stays as configured).
Descriptors that evaluate the base set evaluate every variant; a swept descriptor keeps the base
descriptor's ``keypoint_sets``. Paths starting with ``scoring.``, ``verification.`` or
``matching.`` (descriptor sweeps only) sweep how the descriptor is evaluated: they go into the
variant's ``overrides`` (:func:`descbench.config.effective_config`), and a variant that differs
from its base only there reuses the base's descriptor files (``features_of``), so only the
scoring jobs run again. The comparison table carries, per row, the sweep's name and one
column per swept path (``sweep:border_px``, ``sweep:params.contrast_threshold``), and the
expansion is recorded in the validated config under ``sweeps.<name>.variants``.

Expansion happens on the raw config, before validation: every variant is validated like a
hand-written set or descriptor (an unknown path is an unknown config key, named as such).
"""

from __future__ import annotations

import copy
import itertools

from descbench.errors import ConfigError

# Grid paths starting with these sweep how a descriptor is evaluated (descriptors.<d>.overrides).
SCORING_SECTIONS = ("scoring", "verification", "matching")


def _set_path(spec: dict, path: str, value, where: str) -> None:
    keys = path.split(".")
    node = spec
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{where}: '{path}' does not name a parameter (the part '{k}' is not a mapping)")
    node[keys[-1]] = copy.deepcopy(value)


def variants_of(name: str, sweep: dict) -> list[tuple[str, dict]]:
    """``[(variant name, {path: value})]`` of one sweep, in grid order."""
    grid = sweep.get("grid") or {}
    paths = list(grid)
    for p in paths:
        if not isinstance(grid[p], list) or not grid[p]:
            raise ConfigError(f"sweeps.{name}.grid.{p}: give a non-empty list of values")
    base = sweep.get("keypoint_set") or sweep.get("descriptor")
    return [(f"{base}-{name}-{i}", dict(zip(paths, combo))) for i, combo in enumerate(itertools.product(*(grid[p] for p in paths)))]


def expand_sweeps(config: dict) -> tuple[dict, dict]:
    """(config with every variant added, {sweep: {variant: {path: value}}})."""
    sweeps = config.get("sweeps") or {}
    if not sweeps:
        return config, {}
    cfg = copy.deepcopy(config)
    kpsets = cfg.get("keypoint_sets") or {}  # absent sections keep their defaults (then no base is found)
    descs = cfg.get("descriptors") or {}
    recorded = {}
    for name, sweep in sweeps.items():
        where = f"sweeps.{name}"
        if not isinstance(sweep, dict):
            raise ConfigError(f"{where}: give keypoint_set or descriptor, and grid")
        kinds = [k for k in ("keypoint_set", "descriptor") if k in sweep]
        if len(kinds) != 1:
            raise ConfigError(f"{where}: give exactly one of keypoint_set / descriptor (the spec whose parameters are swept)")
        kind = kinds[0]
        pool = kpsets if kind == "keypoint_set" else descs
        base = sweep[kind]
        if base not in pool:
            raise ConfigError(f"{where}.{kind}: unknown {kind.replace('_', ' ')} '{base}'; defined: {', '.join(sorted(pool))}")
        recorded[name] = {}
        for vname, values in variants_of(name, sweep):
            if vname in pool:
                raise ConfigError(f"{where}: variant name '{vname}' is already used; rename the sweep or that {kind.replace('_', ' ')}")
            spec = copy.deepcopy(pool[base])
            scoring_only = kind == "descriptor" and all(p.split(".")[0] in SCORING_SECTIONS for p in values)
            for path, value in values.items():
                section = path.split(".")[0]
                if section in SCORING_SECTIONS:  # a scoring setting of this descriptor's evaluation
                    if kind != "descriptor":
                        raise ConfigError(f"{where}.grid.{path}: scoring settings are swept per descriptor "
                                          "(sweeps.<name>.descriptor), not per keypoint set")
                    _set_path(spec.setdefault("overrides", {}), path, value, f"{where}.grid")
                else:
                    _set_path(spec, path, value, f"{where}.grid")
            if scoring_only:  # same descriptors: the variant reuses the base's files
                spec["features_of"] = base
            pool[vname] = spec
            recorded[name][vname] = values
            if kind == "keypoint_set":  # descriptors that list the base set evaluate its variants too
                for d in descs.values():
                    ks = d.get("keypoint_sets") if isinstance(d, dict) else None
                    if ks and base in ks:
                        ks.append(vname)
    cfg.pop("sweeps")
    return cfg, recorded


def sweep_columns(sweeps: dict, keypoint_set: str, descriptor: str) -> dict:
    """The table columns of one row: ``sweep`` and ``sweep:<path>`` for the variant it evaluates
    (``sweeps``: the validated config's ``sweeps``, with their ``variants``)."""
    for name, sweep in sweeps.items():
        for vname, values in sweep.get("variants", {}).items():
            if vname in (keypoint_set, descriptor):
                return {"sweep": name, **{f"sweep:{p}": v for p, v in values.items()}}
    return {}
