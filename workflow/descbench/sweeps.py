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
descriptor's ``keypoint_sets``. Paths starting with ``scoring.``, ``verification.``,
``matching.`` or another scoring task's section (descriptor sweeps only; the sections of
:func:`descbench.tasks.scoring_sections`) sweep how the descriptor is evaluated: they go into the
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
import re

from descbench.errors import ConfigError
from descbench.tasks import scoring_sections


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
    return [(vname, {p: v for p, (_, v) in values.items()}) for vname, values in _indexed_variants(name, sweep)]


def _indexed_variants(name: str, sweep: dict) -> list[tuple[str, dict]]:
    """``[(variant name, {path: (index in the path's list, value)})]`` of one sweep, in grid order."""
    grid = sweep.get("grid")
    if grid is not None and not isinstance(grid, dict):
        raise ConfigError(f"sweeps.{name}.grid: give a mapping of parameter paths to lists of values, "
                          f"e.g. {{border_px: [20, 40]}}; got {type(grid).__name__}")
    if not grid:  # the product of no lists is one variant equal to the base: nothing swept
        raise ConfigError(f"sweeps.{name}.grid: give at least one parameter path with its list of values, "
                          "e.g. grid: {border_px: [20, 40]}")
    paths = list(grid)
    for p in paths:
        if not isinstance(grid[p], list) or not grid[p]:
            raise ConfigError(f"sweeps.{name}.grid.{p}: give a non-empty list of values")
    base = sweep.get("keypoint_set") or sweep.get("descriptor")
    combos = itertools.product(*(list(enumerate(grid[p])) for p in paths))
    return [(f"{base}-{name}-{i}", dict(zip(paths, combo))) for i, combo in enumerate(combos)]


def variant_origins(sweeps: dict) -> dict[str, tuple[str, str, int, dict]]:
    """``{variant name: (sweep name, kind, variant number, {path: (index, value)})}`` of the raw
    ``sweeps`` section (kind: ``keypoint_set`` or ``descriptor``); a malformed sweep is left out
    (its own error names it)."""
    out = {}
    for name, sweep in (sweeps or {}).items() if isinstance(sweeps, dict) else ():
        if not isinstance(sweep, dict):
            continue
        kinds = [k for k in ("keypoint_set", "descriptor") if k in sweep]
        if len(kinds) != 1:
            continue
        try:
            variants = _indexed_variants(name, sweep)
        except ConfigError:
            continue
        for n, (vname, values) in enumerate(variants):
            out[vname] = (name, kinds[0], n, values)
    return out


def explain_variant_paths(message: str, sweeps: dict) -> str:
    """``message`` (a config error) with the key paths of generated variants
    (``keypoint_sets.sift-b-1.border_px``, not in the user's file) translated back to the sweep's
    grid key and the value's index in its list (``sweeps.b.grid.border_px[1]``), and each variant
    named once (which sweep made it, with which values). Unchanged when it names no variant."""
    notes = []
    for vname, (name, kind, n, values) in variant_origins(sweeps).items():
        section = "keypoint_sets" if kind == "keypoint_set" else "descriptors"
        pattern = re.compile(rf"(did you mean ')?{re.escape(section)}\.{re.escape(vname)}(?![A-Za-z0-9_-])((?:\.[A-Za-z0-9_-]+)*)")
        unknown = message.startswith("unknown config key")

        def repl(m, name=name, kind=kind, values=values, unknown=unknown):
            hint, rest = m.group(1) or "", m.group(2).removeprefix(".")
            for path, (i, _) in values.items():
                full = f"overrides.{path}" if kind == "descriptor" and path.split(".")[0] in scoring_sections() else path
                if rest == full or rest.startswith(full + "."):
                    index = "" if unknown else f"[{i}]"  # an unknown key is wrong for every value
                    return f"{hint}sweeps.{name}.grid.{path}{index}{rest[len(full):]}"
            if hint and rest:  # the suggested key, as a grid path
                grid_path = rest.removeprefix("overrides.") if kind == "descriptor" else rest
                return f"{hint}sweeps.{name}.grid.{grid_path}"
            return m.group(0)

        new = pattern.sub(repl, message)
        if new != message or pattern.search(message):
            what = ", ".join(f"{p}: {v!r}" for p, (_, v) in values.items())
            notes.append(f"{kind.replace('_', ' ')} '{vname}' is variant {n} of sweeps.{name} ({what})")
            message = new
    return f"{message} [{'; '.join(notes)}]" if notes else message


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
            # grid paths in these sections sweep how a descriptor is evaluated (descriptors.<d>.overrides)
            scoring = scoring_sections()
            scoring_only = kind == "descriptor" and all(p.split(".")[0] in scoring for p in values)
            for path, value in values.items():
                section = path.split(".")[0]
                if section in scoring:  # a scoring setting of this descriptor's evaluation
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
