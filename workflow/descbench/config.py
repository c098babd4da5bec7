"""Configuration: validation against ``workflow/schemas/config.schema.yaml`` and defaults.

Unknown keys are the most common configuration mistake (a typo silently ignored means a run
with the wrong parameters), so they are reported first, with the key's full path, the allowed
keys and the closest match, before the JSON-schema type checks run.
"""

from __future__ import annotations

import copy
import decimal
import difflib
import math
import re
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import yaml

from descbench.errors import ConfigError
from descbench.params import resolve_ref, schema_node
from descbench.tasks import COMMON_SECTION, scoring_sections
from descbench.keypoints.sets import intersection_keep, root_detector_spec, set_sources  # noqa: F401 - re-exported: callers import root_detector_spec from here

# Per-detector parameter schemas live in the schema file's `definitions`; the registry names them.
def _detector_param_defs() -> dict[str, str]:
    from descbench.keypoints.detectors import DETECTORS, FILE_SOURCES

    return {n: d.schema_definition for n, d in {**DETECTORS, **FILE_SOURCES}.items()}


DETECTOR_PARAM_DEFS = _detector_param_defs()


def load_schema(schema_path: Path | str) -> dict:
    """The config schema, with the allowed values that a registry owns filled in (:func:`registry_enums`)."""
    with open(schema_path) as fh:
        schema = yaml.safe_load(fh)
    for key, names in registry_enums().items():
        schema_node(key, schema)["enum"] = names
    return schema


def registry_enums() -> dict[str, list[str]]:
    """Config keys whose allowed values are a registry's names, in registry order (the schema file
    declares the key and its default, not the list): ``verification.ap_convention`` ->
    :data:`descbench.metrics.ap.AP_CONVENTIONS`."""
    from descbench.metrics.ap import AP_CONVENTIONS

    return {"verification.ap_convention": list(AP_CONVENTIONS)}


def _check_unknown_and_fill(schema: dict, node: dict, value: Any, path: str) -> Any:
    """Walk ``value`` along ``node``: raise on unknown keys, fill ``default``s, return the result."""
    node = resolve_ref(schema, node)
    if isinstance(value, list) and "array" in _types(node) and isinstance(node.get("items"), dict):
        return [_check_unknown_and_fill(schema, node["items"], v, f"{path}{i}.") for i, v in enumerate(value)]
    if not isinstance(value, dict) or "object" not in _types(node):
        return value
    props = node.get("properties", {})
    extra = node.get("additionalProperties", True)
    out = dict(value)
    for key in value:
        if key in props:
            continue
        if extra is False:
            allowed = sorted(props)
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            msg = f"unknown config key '{path}{key}'"
            if hint:
                msg += f" (did you mean '{path}{hint[0]}'?)"
            raise ConfigError(f"{msg}; allowed keys under '{path.rstrip('.') or '<top level>'}': {', '.join(allowed)}")
        if isinstance(extra, dict):
            out[key] = _check_unknown_and_fill(schema, extra, value[key], f"{path}{key}.")
    for key, sub in props.items():
        sub = resolve_ref(schema, sub)
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = _check_unknown_and_fill(schema, sub, out[key], f"{path}{key}.")
    return out


def _types(node: dict) -> list[str]:
    t = node.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def validate_config(config: dict | None, schema_path: Path | str) -> dict:
    """Return the validated config with defaults filled; raise :class:`ConfigError` otherwise.

    Checks, in order: unknown keys (anywhere, including per-detector ``params``), finite numbers
    (:func:`_check_finite`), JSON-schema types and ranges (a duplicate in a list of thresholds is
    named), then cross-key consistency (see :func:`_check_consistency`). An error about a sweep's
    generated variant names the sweep's grid key and value (:func:`descbench.sweeps.explain_variant_paths`);
    a number YAML 1.1 read as text (``4e-2``) gets the spelling that it reads as a number.
    """
    from descbench.sweeps import explain_variant_paths

    try:
        return _validate(config, schema_path)
    except ConfigError as exc:
        sweeps = (config or {}).get("sweeps") if isinstance(config, dict) else None
        message = explain_variant_paths(_yaml11_hint(str(exc)), sweeps or {})
        if message == str(exc):
            raise
        raise ConfigError(message) from exc.__cause__


def validate_config_for_supplied_descriptor(config: dict | None, schema_path: Path | str, name: str) -> dict:
    """:func:`validate_config` for a run whose one descriptor, ``name``, is supplied by the caller
    instead of a family of the config (:mod:`descbench.api`: a Python callable or a torch module).

    The config's own ``descriptors`` and ``sweeps`` are left out; ``name`` is checked by the
    schema's name rule and seen by the cross-key checks as the schema's default descriptor (a
    float descriptor on any keypoint set, usable by every task). Returned with ``descriptors``
    empty: the caller adds ``name``'s entry (its family and params) itself."""
    raw = {k: v for k, v in (config or {}).items() if k not in ("descriptors", "sweeps")}
    default = load_schema(schema_path)["properties"]["descriptors"]["default"]
    raw["descriptors"] = {name: dict(next(iter(default.values())))}
    cfg = validate_config(raw, schema_path)
    cfg["descriptors"] = {}
    return cfg


def _validate(config: dict | None, schema_path: Path | str) -> dict:
    from descbench.sweeps import expand_sweeps

    from descbench.protocols import apply_protocol

    schema = load_schema(schema_path)
    config, _ = apply_protocol(dict(config or {}), schema)  # its preset keys, before the schema fills defaults
    sweeps = dict((config or {}).get("sweeps") or {})
    config, variants = expand_sweeps(dict(config or {}))  # variants are validated like any set/descriptor
    _check_set_kinds(config or {})
    cfg = _check_unknown_and_fill(schema, schema, dict(config or {}), "")
    for spec in cfg.get("keypoint_sets", {}).values():
        if "detector" not in spec:  # derived set: the detection keys belong to its sources
            for key in DETECTION_KEYS:
                spec.pop(key, None)
    for name, spec in cfg.get("keypoint_sets", {}).items():
        pdef = {"$ref": f"#/definitions/{DETECTOR_PARAM_DEFS[spec['detector']]}"} if spec.get("detector") in DETECTOR_PARAM_DEFS else {}
        if pdef:
            spec["params"] = _check_unknown_and_fill(schema, pdef, spec.get("params", {}), f"keypoint_sets.{name}.params.")
    from descbench.descriptors import check_descriptor_params

    for name, spec in cfg.get("descriptors", {}).items():
        if "family" in spec:
            spec["params"] = check_descriptor_params(spec["family"], spec.get("params", {}), f"descriptors.{name}.params")
    from descbench.matchers import check_matcher_params

    for name, spec in cfg.get("matchers", {}).items():
        if "matcher" in spec:
            spec["params"] = check_matcher_params(spec["matcher"], spec.get("params", {}), f"matchers.{name}.params")
    _check_finite(cfg, "")
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "<top level>"
        raise ConfigError(f"invalid config value at '{where}': {_schema_message(e)}")
    for name, spec in cfg.get("keypoint_sets", {}).items():
        if "detector" not in spec:
            continue
        pdef = schema["definitions"][DETECTOR_PARAM_DEFS[spec["detector"]]]
        for e in jsonschema.Draft202012Validator(pdef).iter_errors(spec["params"]):
            where = ".".join(str(p) for p in e.absolute_path)
            raise ConfigError(f"invalid config value at 'keypoint_sets.{name}.params.{where}': {_schema_message(e)}")
    _check_overrides(schema, cfg)
    _check_consistency(cfg)
    _check_pipelines(cfg)
    inspector_page(cfg)  # its keys' cross-checks
    if cfg["patches"]["enabled"]:
        from descbench.patches.checks import check_source

        check_source(cfg)
    for name in cfg.get("descriptors", {}):
        _check_consistency(effective_config(cfg, name))  # the cross-key rules hold for every variant
    # the expansion, next to the results (descbench.sweeps: the table's sweep columns)
    cfg["sweeps"] = {name: {**spec, "variants": variants[name]} for name, spec in sweeps.items()}
    return cfg


def _check_finite(value: Any, path: str) -> None:
    """Every number in the config is finite: NaN passes every JSON-schema bound (each comparison
    with it is false) and inf passes the open ones, and both only fail later inside a job (or
    silently give n/a everywhere). No config key accepts them (limits are written as null or as
    a word, e.g. ``distractors_per_scene: all``). Only the params a family declares opaque
    (``opaque_params``: the python family's ``kwargs``) are left alone: those values are user
    code's own, passed to it as given."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"invalid config value at '{path.rstrip('.') or '<top level>'}': {value} is not a finite number; "
                          "give a finite number (YAML's .nan, .inf and values beyond the float range are refused)")
    if isinstance(value, dict):
        opaque = _opaque_params(value) if isinstance(value.get("params"), dict) else ()
        for k, v in value.items():
            if opaque and k == "params":
                v = {pk: pv for pk, pv in v.items() if pk not in opaque}
            _check_finite(v, f"{path}{k}.")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, f"{path}{i}.")


def _opaque_params(spec: dict) -> tuple[str, ...]:
    """The params keys of a descriptor spec's family that are handed to user code as given."""
    from descbench.descriptors import family_names, get_family

    family = spec.get("family")
    return get_family(family).opaque_params if isinstance(family, str) and family in family_names() else ()


def _same_number(a: Any, b: Any) -> bool:
    """JSON-schema equality of two list items: 3 and 3.0 are one number; true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _schema_message(e: jsonschema.ValidationError) -> str:
    """A JSON-schema error in words, naming a list's duplicate (``uniqueItems``)."""
    if e.validator == "uniqueItems" and isinstance(e.instance, list):
        items = e.instance
        for j, b in enumerate(items):
            i = next((i for i in range(j) if _same_number(items[i], b)), None)
            if i is not None:
                a = items[i]
                same = f" ({a!r} and {b!r} are one value)" if repr(a) != repr(b) else ""
                return (f"{items!r} lists {a!r} twice (items {i} and {j}){same}; give each value once "
                        "(a duplicate would be computed and reported twice under one name)")
    if e.validator == "minItems" and isinstance(e.instance, list) and isinstance(e.schema, dict):
        items = e.schema.get("items") if isinstance(e.schema.get("items"), dict) else {}
        of = f" of {', '.join(map(str, items['enum']))}" if "enum" in items else ""
        null = " (or null for the default)" if "null" in _types(e.schema) else ""
        return f"{e.instance!r} has {len(e.instance)} item(s); list at least {e.validator_value}{of}{null}"
    return e.message


_NOT_OF_TYPE = re.compile(r"'([^']*)' is not of type ([^;:]*)")


def _yaml11_hint(message: str) -> str:
    """``message`` with a hint when it says that a string is not a number, and the string is a
    number YAML 1.1 (PyYAML, hence Snakemake) reads as text: exponent notation without a '.' in
    the mantissa or without a sign in the exponent (``4e-2``, ``1.5e3``). Nothing is converted."""
    m = _NOT_OF_TYPE.search(message)
    if not m:
        return message
    text = m.group(1)
    try:
        value = float(text)
    except ValueError:
        return message
    if not math.isfinite(value) or "e" not in text.lower() or not isinstance(yaml.safe_load(text), str):
        return message
    mantissa, _, exponent = text.lower().replace("_", "").partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[:1] not in "+-":
        exponent = "+" + exponent
    wants_integer = "integer" in m.group(2) and "number" not in m.group(2)
    if wants_integer:
        if value != int(value):
            return message
        spelling = str(int(value))
    else:
        spelling = f"{mantissa}e{exponent} or {format(decimal.Decimal(text), 'f')}"
    return f"{message}; write {spelling} (YAML 1.1 reads {text} as text)"


def effective_config(cfg: dict, descriptor: str) -> dict:
    """The config a descriptor is evaluated with: its ``overrides`` merged into the scoring
    job's sections (``scoring`` and each scoring task's: descbench.tasks.scoring_sections; the one
    place they are merged; rules and report use it)."""
    over = cfg["descriptors"][descriptor].get("overrides") or {}
    if not over:
        return cfg
    out = dict(cfg)
    for section, values in over.items():
        out[section] = {**cfg[section], **values}
    return out


def score_job_sections(cfg: dict, descriptor: str) -> dict:
    """``{section: settings}`` that a descriptor's scoring job runs with (its effective config):
    ``scoring`` without ``threads`` (a job setting) and the section of every enabled scoring task
    without ``enabled``, in registry order (descbench.tasks.scoring_sections; the workflow passes
    it as one JSON to ``descbench score``, so editing one descriptor reruns only its jobs)."""
    ecfg = effective_config(cfg, descriptor)
    out = {COMMON_SECTION: {k: v for k, v in ecfg[COMMON_SECTION].items() if k != "threads"}}
    for section in scoring_sections()[1:]:
        if ecfg[section]["enabled"]:
            out[section] = {k: v for k, v in ecfg[section].items() if k != "enabled"}
    return out


def _check_overrides(schema: dict, cfg: dict) -> None:
    descs = cfg.get("descriptors", {})
    overridable = scoring_sections()  # scoring and each scoring task's section
    for name, spec in descs.items():
        where = f"descriptors.{name}"
        for section, values in (spec.get("overrides") or {}).items():
            if section not in overridable:
                raise ConfigError(f"unknown config key '{where}.overrides.{section}'; allowed: {', '.join(overridable)}")
            if not isinstance(values, dict) or "enabled" in values or "threads" in values:
                raise ConfigError(f"{where}.overrides.{section}: a mapping of {section} settings other than 'enabled' "
                                  "and 'threads' (whether a task runs, and a job's threads, are the same for every descriptor)")
            node = schema["properties"][section]
            merged = _check_unknown_and_fill(schema, node, {**cfg[section], **values}, f"{where}.overrides.{section}.")
            for e in jsonschema.Draft202012Validator(node).iter_errors(merged):
                path = ".".join(str(x) for x in e.absolute_path)
                raise ConfigError(f"invalid config value at '{where}.overrides.{section}.{path}': {_schema_message(e)}")
        base = spec.get("features_of")
        if base is not None:
            if base not in descs or descs[base].get("features_of"):
                raise ConfigError(f"{where}.features_of: '{base}' must name a descriptor that computes its own features")
            if (spec["family"], spec["params"]) != (descs[base]["family"], descs[base]["params"]):
                raise ConfigError(f"{where}.features_of: '{base}' computes other descriptors (family or params differ); "
                                  "a descriptor reusing its files must have the same family and params")


DETECTION_KEYS = ("mode", "border_px", "max_keypoints", "params")


def _check_set_kinds(raw: dict) -> None:
    """Each keypoint set is exactly one kind: ``detector`` (with its detection keys), ``source``
    (a set plus filters) or ``intersection`` (of two sets); checked on the raw config, before the
    schema's defaults are filled in, so that a detection key given to a derived set is an error."""
    sets = raw.get("keypoint_sets") or {}
    if not isinstance(sets, dict):
        return
    for name, spec in sets.items():
        if not isinstance(spec, dict):
            continue
        kinds = [k for k in ("detector", "source", "intersection") if k in spec]
        if len(kinds) != 1:
            raise ConfigError(
                f"keypoint_sets.{name} needs exactly one of 'detector' (detect keypoints), 'source' "
                f"(filter another set) or 'intersection' (of two sets); it has {', '.join(kinds) or 'none'}"
            )
        if kinds[0] != "detector":
            wrong = [k for k in DETECTION_KEYS if k in spec]
            if wrong:
                raise ConfigError(
                    f"keypoint_sets.{name}.{wrong[0]}: a set defined by '{kinds[0]}' takes its keypoints from "
                    f"other sets, already detected and border-filtered; put {wrong[0]} on the detector set"
                )


def _check_sets(kpsets: dict) -> None:
    """Sources exist, no cycles, intersections of two different sets, global filter placement."""
    for name, spec in kpsets.items():
        for src in set_sources(spec):
            if src not in kpsets:
                raise ConfigError(
                    f"keypoint_sets.{name} reads unknown keypoint set '{src}'; defined keypoint sets: {', '.join(sorted(kpsets))}"
                )
        if "intersection" in spec:
            a, b = spec["intersection"]["sources"]
            if a == b:
                raise ConfigError(f"keypoint_sets.{name}.intersection.sources: '{a}' intersected with itself; name two different sets")
            keep = intersection_keep(spec)
            if keep not in (a, b):
                raise ConfigError(f"keypoint_sets.{name}.intersection.keep: '{keep}' is not one of its sources ({a}, {b})")
            if spec.get("filters"):
                raise ConfigError(
                    f"keypoint_sets.{name}.filters: an intersection set stays row-aligned with its other side "
                    "only unfiltered; filter its sources instead"
                )
        filters = spec.get("filters") or []
        for i, f in enumerate(filters):
            if "global_top_n_by_size" in f:
                if "source" not in spec:
                    raise ConfigError(
                        f"keypoint_sets.{name}.filters[{i}]: global_top_n_by_size needs every scene's keypoints "
                        f"first; define a set with source: {name} and put the filter there"
                    )
                if i != len(filters) - 1:
                    raise ConfigError(
                        f"keypoint_sets.{name}.filters[{i}]: global_top_n_by_size must be the last filter of a set "
                        "(chain another set with source: ... for filters after it)"
                    )
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise ConfigError(f"keypoint sets form a cycle: {' -> '.join(path[path.index(n):] + [n])}")
        state[n] = 1
        for src in set_sources(kpsets[n]):
            visit(src, path + [n])
        state[n] = 2

    for n in kpsets:
        visit(n, [])


def _check_consistency(cfg: dict) -> None:
    """Rules that span several keys."""
    scoring = cfg["scoring"]
    if scoring["tie_policy"] == "half" and scoring["gt"] == "all_within_tau":
        raise ConfigError(
            "scoring.tie_policy 'half' (the seed C++ workbench's rank L+1+ceil(t/2)) is defined only "
            "for scoring.gt 'closest' and its order-independent variants closest_group / closest_oriented "
            "(one relevant item or group per pair); use expected, optimistic or pessimistic"
        )
    ver = cfg["verification"]
    if ver["enabled"] and scoring["tie_policy"] == "half" and ver["convention"] != "workbench":
        # Under the workbench convention 'half' is the point (its rank for the true mAP); then
        # descbench's own per-query keypoint retrieval puts the positives of a tie group after
        # ceil(#others / 2) of its other items (kernels._group_ap_sum), which is one positive's rule.
        raise ConfigError(
            "scoring.tie_policy 'half' is defined for one relevant item, but keypoint retrieval "
            "(verification.enabled) has up to 5 per query; use expected, optimistic or pessimistic, "
            "set verification.enabled: false, or verification.convention: workbench (which reproduces "
            "the C++ workbench and extends 'half' to tie groups with several positives)"
        )
    from descbench.metrics.ap import AP_CONVENTIONS

    if ver["enabled"] and ver["candidates"] == "all" and AP_CONVENTIONS[ver["ap_convention"]].tie_groups is None:
        by_groups = " or ".join(c.name for c in AP_CONVENTIONS.values() if c.tie_groups is not None)
        raise ConfigError(
            f"verification.ap_convention '{ver['ap_convention']}' needs the materialised pooled list, "
            "which verification.candidates 'all' never builds (it is every query-candidate pair); "
            f"use {by_groups}, or candidates: nearest"
        )
    if cfg["dataset"] == "folder" and not cfg["folder"].get("path"):
        raise ConfigError("dataset 'folder' needs folder.path: the directory holding your scene folders")
    if cfg["dataset"] == "posed" and not cfg["posed"].get("path"):
        raise ConfigError("dataset 'posed' needs posed.path: the directory holding your posed scene folders "
                          "(glue-factory's posed_images layout: <scene>/views.txt, pairs.txt, images/)")
    from descbench.datasets import dataset_geometry

    if dataset_geometry(cfg) == "relative_pose":
        if not cfg["matchers"]:
            raise ConfigError(f"dataset '{cfg['dataset']}' is evaluated by relative pose from matches (the pose task), but "
                              "the config has no matchers; add one (e.g. matchers: {mnn: {matcher: mnn}}, "
                              "config/pose_study.yaml)")
        from descbench.tasks.pose import estimator_settings

        estimator_settings(cfg["pose"])
    kpsets = cfg["keypoint_sets"]
    _check_sets(kpsets)
    from descbench.descriptors import get_family
    from descbench.keypoints.detectors import DETECTORS, FILE_SOURCES

    for name, spec in kpsets.items():
        det = DETECTORS.get(spec.get("detector"))
        if det is not None and det.check is not None:
            det.check(spec["params"], f"keypoint_sets.{name}.params")
        source = FILE_SOURCES.get(spec.get("detector"))
        if source is not None and cfg.get("resize"):
            raise ConfigError(
                f"keypoint_sets.{name} reads its keypoints from files ({spec['detector']}), which hold positions on the "
                f"original images, but resize {cfg['resize']} (or the protocol's) evaluates resized copies; remove resize "
                "(and protocol), or detect the keypoints on the resized images with a detector"
            )
        if source is not None and source.check_set is not None:
            source.check_set(name, spec)
    for name, spec in cfg["descriptors"].items():
        for ks in spec.get("keypoint_sets") or []:
            if ks not in kpsets:
                raise ConfigError(
                    f"descriptors.{name}.keypoint_sets names unknown keypoint set '{ks}'; "
                    f"defined keypoint sets: {', '.join(sorted(kpsets))}"
                )
        fam = get_family(spec["family"])
        if fam.check_in_config is not None:
            fam.check_in_config(name, spec, cfg["descriptors"], kpsets)
    from descbench.jobresources import descriptor_width
    from descbench.matchers import get_matcher

    for name, spec in cfg["matchers"].items():
        for d in spec.get("descriptors") or []:
            if d not in cfg["descriptors"]:
                raise ConfigError(f"matchers.{name}.descriptors names unknown descriptor '{d}'; defined descriptors: "
                                  f"{', '.join(sorted(cfg['descriptors']))}")
        matcher = get_matcher(spec["matcher"])
        if matcher.check_in_config is not None:
            matcher.check_in_config(name, spec, cfg["descriptors"], lambda d: descriptor_width(cfg, d))


def _check_pipelines(cfg: dict) -> None:
    """``pipelines.estimators``: each estimator's settings checked
    (:func:`descbench.estimators.homography.check_estimator`; the task fills them the same way,
    :func:`descbench.tasks.pipelines.estimator_settings`); ``dlt_weights: scores`` needs every
    matcher's scores to be confidences."""
    from descbench.estimators.homography import check_estimator
    from descbench.matchers import get_matcher

    sec = cfg["pipelines"]
    for name, settings in sec["estimators"].items():
        check_estimator(name, settings, f"pipelines.estimators.{name}")
    if sec["dlt_weights"] == "scores" and "dlt" in sec["estimators"]:
        for name, spec in cfg["matchers"].items():
            kind = get_matcher(spec["matcher"]).score_kind
            if kind != "confidence":
                raise ConfigError(f"pipelines.dlt_weights 'scores' weights the DLT by the matches' confidences, but matcher "
                                  f"'{name}' ({spec['matcher']}) scores its matches by {kind}; use dlt_weights: auto "
                                  "(confidences where a matcher has them) or uniform")


def match_combinations(cfg: dict) -> list[tuple[str, str, str]]:
    """All (keypoint_set, descriptor, matcher) the matcher stage runs, in config order: each
    matcher on every combination (:func:`combinations`) whose descriptor it applies to
    (``matchers.<m>.descriptors``, null: every one)."""
    return [(ks, d, m) for m, spec in cfg["matchers"].items() for ks, d in combinations(cfg)
            if spec.get("descriptors") is None or d in spec["descriptors"]]


class InspectorPage(NamedTuple):
    """What the report's inspector page shows (:func:`inspector_page`)."""

    keypoint_set: str
    descriptors: list[str]  # one or two
    metric: str  # a column of the matching task's pairs files


def inspector_page(cfg: dict) -> InspectorPage | None:
    """What the report's inspector page shows (config ``inspector``), or None when there is no page
    (``enabled`` false, or null without the matching task). Defaults: the first keypoint set, its
    first two descriptors, and the MMA at the matching threshold nearest ``scoring.tau_px`` (the
    page colours a match correct at ``tau_px``; the smaller of two equally near), ``mma_at_3`` by
    default. ConfigError when ``enabled`` is true without the matching task, a set or descriptor is
    not evaluated, or ``metric`` is not a column of the matching task's pairs files."""
    from descbench.columns import threshold_key
    from descbench.tasks.matching import pairs_schema

    spec = cfg.get("inspector") or {}
    matching = cfg["matching"]["enabled"]
    if spec.get("enabled") is False or (spec.get("enabled") is None and not matching):
        return None
    if not matching:
        raise ConfigError("inspector.enabled is true, but the page shows the matching task's pairs and matching.enabled is "
                          "false; enable matching or set inspector.enabled: false (or null: a page whenever matching runs)")
    combos = combinations(cfg)
    kpsets = list(dict.fromkeys(k for k, _ in combos))
    kpset = spec.get("keypoint_set") or kpsets[0]
    if kpset not in kpsets:
        raise ConfigError(f"inspector.keypoint_set {kpset!r} is not a keypoint set the config evaluates; use one of {', '.join(kpsets)}")
    known = [d for k, d in combos if k == kpset]
    descriptors = list(spec.get("descriptors") or known[:2])
    for d in descriptors:
        if d not in known:
            raise ConfigError(f"inspector.descriptors: {d!r} is not a descriptor evaluated on keypoint set {kpset!r}; use "
                              f"one or two of {', '.join(known)}")
    thresholds = cfg["matching"]["mma_thresholds"]
    columns = [c for c in pairs_schema(thresholds).names if c not in ("scene", "pair")]
    tau = cfg["scoring"]["tau_px"]
    metric = spec.get("metric") or f"mma_at_{threshold_key(min(thresholds, key=lambda t: (abs(t - tau), t)))}"
    if metric not in columns:
        raise ConfigError(f"inspector.metric {metric!r} is not a column of the matching task's pairs files; "
                          f"use one of {', '.join(columns)}")
    return InspectorPage(kpset, descriptors, metric)


def combinations(cfg: dict) -> list[tuple[str, str]]:
    """All (keypoint_set, descriptor) pairs the config evaluates, in config order."""
    out = []
    for desc, spec in cfg["descriptors"].items():
        for ks in spec.get("keypoint_sets") or list(cfg["keypoint_sets"]):
            out.append((ks, desc))
    return out


def shared_base(cfg: dict, kpset: str, descriptor: str) -> str | None:
    """The descriptor whose rows ``descriptor`` transforms on ``kpset`` instead of computing them:
    the first one in config order of the family's ``derives`` base family with exactly the base
    params, evaluated on ``kpset`` (:attr:`descbench.descriptors.DescriptorFamily.derives`); None
    when the family derives from nothing or the config has no such descriptor."""
    from descbench.descriptors import get_family

    spec = cfg["descriptors"][descriptor]
    derives = get_family(spec["family"]).derives if "family" in spec else None
    if derives is None:
        return None
    family, base_params, _ = derives
    return _evaluated_as(cfg, kpset, family, base_params(spec["params"]), descriptor)


def shared_parts(cfg: dict, kpset: str, descriptor: str) -> list[str | None] | None:
    """Per part of a family that combines its parts' rows (a stack's parts, a pooled base at scale 1:
    :attr:`descbench.descriptors.DescriptorFamily.combines` and ``shareable``), the descriptor of the config whose
    files give that part's rows on ``kpset``: the first one in config order with exactly the
    part's family and params, evaluated on ``kpset``; None for a part computed by the job (no
    such descriptor, or a family whose rows come from elsewhere: a joint network's keypoint job,
    a composite's components). None when no part is shared or the family combines no parts."""
    from descbench.descriptors import get_family

    spec = cfg["descriptors"][descriptor]
    fam = get_family(spec["family"]) if "family" in spec else None
    if fam is None or fam.combines is None:
        return None
    out = []
    for part in fam.shareable(spec["params"]) if fam.shareable else fam.children_of(spec["params"]):
        if part is None:
            out.append(None)
            continue
        pfam = get_family(part["family"])
        computed_alike = pfam.own_rows is None and pfam.components is None
        out.append(_evaluated_as(cfg, kpset, part["family"], part["params"], descriptor) if computed_alike else None)
    return out if any(out) else None


def _evaluated_as(cfg: dict, kpset: str, family: str, params: dict, skip: str) -> str | None:
    """The first descriptor of the config (other than ``skip``) with exactly ``family`` and
    ``params`` that is evaluated on ``kpset`` and has descriptor files of its own (a sweep variant
    that differs only in how it is scored reads its base's: ``features_of``)."""
    for name, other in cfg["descriptors"].items():
        if (name != skip and other.get("family") == family and other.get("params") == params
                and not other.get("features_of") and kpset in (other.get("keypoint_sets") or cfg["keypoint_sets"])):
            return name
    return None


# ----------------------------------------------------------------------------- before validation
# (the Snakefile and workflow/rules/common.smk call these on what Snakemake hands them)


def check_yaml_file(path: Path | str) -> dict:
    """Parse a YAML config file; a syntax error is a one-line ConfigError naming the file, the
    line and column, and the problem (Snakemake's own message names neither file nor line)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path} ({exc}); fix the file or its permissions") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark, context, cmark = (getattr(exc, k, None) for k in ("problem_mark", "context", "context_mark"))
        at = lambda m: f"line {m.line + 1}, column {m.column + 1}"  # noqa: E731
        where = f"{path}, {at(mark or cmark)}" if (mark or cmark) else str(path)
        problem = getattr(exc, "problem", None) or str(exc).replace("\n", " ")
        if context:
            problem += f" ({context}{f' started at {at(cmark)}' if cmark is not None and mark is not None else ''})"
        raise ConfigError(f"{where}: YAML syntax error: {problem}; fix the YAML there (indent with spaces, "
                          "close every bracket and quote, put a space after each ':')") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping of keys (e.g. `dataset: demo`), "
                          f"not a {type(data).__name__}; fix the file")
    return data or {}


def _command_line_scalar(text: str) -> Any:
    """A string value from inside a ``--config key={...}`` or ``key=[...]`` value, typed the way
    Snakemake types a top-level ``--config key=value`` (int, float, True/False), plus YAML's
    true/false and null (Snakemake parses nested values with YAML's BaseLoader: strings only)."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return {"True": True, "true": True, "False": False, "false": False, "null": None}.get(text, text)


def _typed(value: Any) -> Any:
    if isinstance(value, str):
        return _command_line_scalar(value)
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    return value


def type_command_line_values(config: dict, overrides: dict | None) -> dict:
    """Give the nested values of ``--config`` (``overrides``, as Snakemake parsed them) their types
    in ``config`` (the merged config), in place; returns ``config``.

    ``--config 'scoring={tau_px: 5}'`` reaches the workflow as ``{"scoring": {"tau_px": "5"}}``
    merged into the config file's ``scoring``; this makes it ``5``. Top-level values are typed by
    Snakemake already and are left as they are.
    """

    def retype(target: Any, over: Any) -> Any:
        if isinstance(over, dict) and isinstance(target, dict):  # merged key by key (snakemake.utils.update_config)
            for k, v in over.items():
                if k in target:
                    target[k] = retype(target[k], v)
            return target
        return _typed(over)  # a list or a scalar replaced what the config file had

    for key, value in (overrides or {}).items():
        if isinstance(value, (dict, list)) and key in config:
            config[key] = retype(config[key], value)
    return config


def check_folders(folders: dict[str, Path | str]) -> None:
    """Each config key's folder (``{key: path}``) must be a folder or not exist yet (then the first
    of its parents that exists must be a folder); a file there is a ConfigError naming the key,
    the path and the fix, raised when the workflow is parsed rather than as a traceback in a job."""
    for key, path in folders.items():
        path = Path(path)
        for p in (path, *path.parents):
            if p.exists() or p.is_symlink():
                if not p.is_dir():
                    what = "it is a file" if p == path else f"{p} is a file"
                    raise ConfigError(
                        f"config key '{key}': {path} must be a folder, but {what}; set '{key}' "
                        "to a folder (config.yaml or --config), or move that file away")
                break


# ----------------------------------------------------------------------------- job resources
# What a job runs is declared by its descriptor family (and the families nested in it) or its
# detector (descbench.jobfacts). The workflow's rules pass a job's params; with its ``family``
# (a descriptor's) or ``detector`` (a keypoint set's) named, its family's facts are read; params
# of no named family are read by the conventions that the learned families' params share
# (descbench.jobfacts.conventional_*).


def _runs(params: dict, family: str | None, detector: str | None, matcher: str | None = None) -> list[tuple[object | None, dict]]:
    """(family, detector or matcher, its params) of everything a job with ``params`` runs; ``None``
    for params of no named family."""
    if sum(x is not None for x in (family, detector, matcher)) > 1:
        raise ValueError("name the job's descriptor family, its detector or its matcher, not several")
    if matcher is not None:
        from descbench.matchers import get_matcher

        return [(get_matcher(matcher), params)]
    if family is not None:
        from descbench.descriptors import spec_families

        return list(spec_families({"family": family, "params": params}))
    if detector is not None:
        from descbench.keypoints.detectors import DETECTORS

        # a set read from files (detectors.FILE_SOURCES) runs nothing of its own
        return [(DETECTORS[detector], params)] if detector in DETECTORS else []
    return [(None, params)]


def _torch_params(runs) -> list[dict]:
    from descbench.jobfacts import conventional_torch_params

    return [tp for who, p in runs for tp in (who.torch_params_of(p) if who else conventional_torch_params(p))]


def job_resources(params: dict, *, family: str | None = None, detector: str | None = None,
                  matcher: str | None = None) -> dict:
    """Snakemake ``threads`` and ``gpu`` of a job whose spec holds ``params``: each torch network it
    runs (its family's, detector's or matcher's ``torch_params``: descbench.torchrt's ``device`` and
    ``threads``; a pooled or stacked base included) asks for ``threads`` CPU threads (the largest)
    and one GPU when a ``device`` is ``cuda`` (``auto`` asks for none: it uses a GPU where the job's
    node has one; set ``cuda`` to have a cluster give the job one: the SLURM executor plugin reads
    ``gpu``)."""
    from descbench.jobfacts import torch_gpu, torch_threads

    torch = _torch_params(_runs(params, family, detector, matcher))
    return {"threads": max([1, *(torch_threads(n) for n in torch)]), "gpu": int(any(torch_gpu(n) for n in torch))}


def needs_learned_extra(params: dict, *, family: str | None = None, detector: str | None = None,
                        matcher: str | None = None) -> bool:
    """Whether a job whose spec holds ``params`` imports the ``learned`` extra (pyproject.toml): a
    family, detector or matcher it runs (a nested one included) declares a torch or onnxruntime runtime.
    Picks the job's conda env (``envs/learned.yaml`` instead of ``envs/descbench.yaml``;
    workflow/rules/common.smk)."""
    from descbench.jobfacts import LEARNED_RUNTIMES, conventional_runtime

    return any((who.runtime_of(p) if who else conventional_runtime(p)) in LEARNED_RUNTIMES
               for who, p in _runs(params, family, detector, matcher))


def model_files(params: dict, *, family: str | None = None, detector: str | None = None,
                matcher: str | None = None) -> list[str]:
    """The model and weight files a job's params name (each family's or detector's ``files``, a
    nested one's included; ``random`` is no file), sorted, as rule inputs: a replaced file reruns
    the job (Snakemake sees files, not a path string's contents)."""
    from descbench.jobfacts import conventional_files

    return sorted({f for who, p in _runs(params, family, detector, matcher) for f in (who.files_of(p) if who else conventional_files(p))})


# ----------------------------------------------------------------------------- learned weights


def learned_weights(cfg: dict, kpset: str | None, descriptor: str, matcher: str | None = None) -> str:
    """What the learned networks behind one (keypoint set, descriptor) row were loaded with, for
    every table row: ``'<what>: RANDOM(seed=N)'`` (randomly initialised: not a published model, said
    in capitals) or ``'<what>: <file name>'`` for each network of the descriptor (its family's
    ``weights_labels``; a pooled or stacked base and, with a keypoint set, the descriptors a family
    combines included) and of the detectors its keypoints come from; ``''`` when no network is
    involved. ``kpset`` None: the descriptor's alone (patch benchmarks); ``matcher`` (a name of the
    config's ``matchers``): its network's too (a pipeline's row, ``'matcher <name>: ...'``)."""
    from descbench.descriptors import get_family, spec_families
    from descbench.keypoints.detectors import DETECTORS

    found: list[str] = []

    def add(what: str, labels: list[str]) -> None:
        for label in labels:
            if f"{what}: {label}" not in found:
                found.append(f"{what}: {label}")

    def walk_descriptor(name: str) -> None:
        for fam, params in spec_families(cfg["descriptors"][name]):
            add(name, fam.weights_labels_of(params))

    def walk_set(name: str) -> None:
        spec = cfg["keypoint_sets"][name]
        if spec.get("detector") in DETECTORS:
            add(f"keypoints {name}", DETECTORS[spec["detector"]].weights_labels_of(spec.get("params") or {}))
        for src in set_sources(spec):
            walk_set(src)

    spec = cfg["descriptors"].get(descriptor)
    if spec is None:  # not a descriptor of the config (the patch benchmarks' CSV descriptors): no network
        return ""
    walk_descriptor(descriptor)
    if kpset is not None:
        walk_set(kpset)
        # a component's set is paired with the scored one (same intersection sources), so the
        # scored set's detectors are already every component's: only its descriptor is new
        for c in get_family(spec["family"]).components_of(spec.get("params") or {}):
            walk_descriptor(c)
    if matcher is not None:
        from descbench.matchers import get_matcher

        m = cfg["matchers"][matcher]
        add(f"matcher {matcher}", get_matcher(m["matcher"]).weights_labels_of(m.get("params") or {}))
    return "; ".join(found)
