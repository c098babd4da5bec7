"""One parameter truth: every parameter is declared once, as JSON schema, with its default.

* The config sections (scoring, verification, matching, patches, keypoint sets and their
  detectors' ``definitions``) are declared in ``workflow/schemas/config.schema.yaml``
  (:data:`SCHEMA_PATH`).
* Each descriptor family declares its ``params`` as a JSON-schema fragment owned by its module
  (``PARAMS_SCHEMA`` of the family modules, checked by
  :func:`descbench.descriptors.check_descriptor_params` with :func:`check_params`).

The typed params objects of the metrics and the patch generator (``RetrievalParams``,
``BojanicParams``, ``MatchingParams``, ``PatchGenParams``) carry no default of their own: each
field is :func:`config_field` (the config key it is read from; its default is the schema's) and
the object is built from the validated config by :meth:`ConfigParams.from_config`, which takes
every field from its key and refuses a section that lacks one. ``tests/descbench/test_params.py``
checks that no second default exists.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from descbench.errors import ConfigError

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
CONFIG_KEY = "config_key"  # dataclass field metadata: the dotted config key of the field
CONVERT = "config_convert"  # dataclass field metadata: applied to the config value (None: as is)


@functools.cache
def config_schema() -> dict:
    """``workflow/schemas/config.schema.yaml``, loaded once per process (do not modify it)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(SCHEMA_PATH) as fh:
        return yaml.load(fh, Loader=loader)


def resolve_ref(root: dict, node: dict) -> dict:
    """``node``, or the definition its ``$ref`` (``#/definitions/<name>``) points to in ``root``."""
    ref = node.get("$ref")
    if ref:
        assert ref.startswith("#/definitions/"), ref
        return root["definitions"][ref.split("/")[-1]]
    return node


def schema_node(key: str, root: dict | None = None) -> dict:
    """The schema node of the dotted config key ``key`` (e.g. ``scoring.gt``)."""
    root = config_schema() if root is None else root
    node = root
    for part in key.split("."):
        props = resolve_ref(root, node).get("properties", {})
        if part not in props:
            raise KeyError(f"config key '{key}' is not in {SCHEMA_PATH}")
        node = resolve_ref(root, props[part])
    return node


def fill_defaults(node: dict, value: Any, root: dict | None = None) -> Any:
    """``value`` with the defaults of ``node``'s properties filled in, recursively (objects only)."""
    root = node if root is None else root
    node = resolve_ref(root, node)
    if not isinstance(value, Mapping) or "properties" not in node:
        return value
    out = dict(value)
    for key, sub in node["properties"].items():
        sub = resolve_ref(root, sub)
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = fill_defaults(sub, out[key], root)
    return out


def schema_default(key: str) -> Any:
    """The default of config key ``key``, as the validated config has it (nested defaults filled)."""
    node = schema_node(key)
    if "default" not in node:
        raise KeyError(f"config key '{key}' has no default in {SCHEMA_PATH}")
    return fill_defaults(node, copy.deepcopy(node["default"]), config_schema())


def fragment_defaults(fragment: dict) -> dict:
    """The filled defaults of an object fragment (e.g. a descriptor family's ``PARAMS_SCHEMA``)."""
    return fill_defaults(fragment, {})


# ----------------------------------------------------------------------------- typed params


def config_field(key: str, convert: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field read from config key ``key``; its default is the schema's (converted)."""
    default = schema_default(key)
    if convert is not None:
        default = convert(default)
    return dataclasses.field(default=default, metadata={CONFIG_KEY: key, CONVERT: convert})


def config_keys(cls) -> dict[str, tuple[str, Callable | None]]:
    """``field -> (config key, convert)`` of a :class:`ConfigParams` dataclass."""
    out = {}
    for f in dataclasses.fields(cls):
        if CONFIG_KEY not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} is not a config_field: every params field is read from one config key")
        out[f.name] = (f.metadata[CONFIG_KEY], f.metadata[CONVERT])
    return out


def build(cls, keys: Mapping[str, tuple[str, Callable | None]], sections: Mapping[str, Mapping]):
    """``cls(**fields)`` with each field taken from its key (``keys``: field -> (dotted config key,
    convert)) in ``sections`` (section path -> the validated section, e.g. ``{"scoring": {...}}``).

    A missing section or key is an error: the params are built from the validated config, whose
    defaults are filled from the schema; nothing is defaulted here."""
    values = {}
    for name, (key, convert) in keys.items():
        section, _, leaf = key.rpartition(".")
        if section not in sections:
            raise ConfigError(f"{cls.__name__}.{name} is read from config key '{key}', but no '{section}' section "
                              f"was given (pass the validated config's {section} section)")
        if leaf not in sections[section]:
            raise ConfigError(f"{cls.__name__}.{name}: the {section} section given has no key '{leaf}' ('{key}'); build "
                              "the params from the config validated by descbench.config.validate_config (defaults filled)")
        v = sections[section][leaf]
        values[name] = convert(v) if convert is not None else v
    return cls(**values)


class ConfigParams:
    """Mixin of a frozen dataclass whose every field is a :func:`config_field`."""

    @classmethod
    def from_config(cls, *section: Mapping, **sections: Mapping):
        """The params from validated config sections, by keyword (``scoring=..., matching=...``)
        or, for params read from one section, that section positionally."""
        keys = config_keys(cls)
        if section:
            paths = {k.rpartition(".")[0] for k, _ in keys.values()}
            if len(section) != 1 or len(paths) != 1:
                raise TypeError(f"{cls.__name__}.from_config reads sections {sorted(paths)}: pass them by keyword")
            sections = {paths.pop(): section[0], **sections}
        return build(cls, keys, sections)


# ----------------------------------------------------------------------------- fragments


def _fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    return str(v)


_TYPE_WORDS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "a string",
               "array": "a list", "object": "a mapping", "null": "null"}


def describe_rule(node: dict) -> str:
    """What a value of ``node`` must be, in words (enums, types, bounds)."""
    if "enum" in node:
        return "one of " + ", ".join(_fmt(v) for v in node["enum"])
    if "const" in node:
        return _fmt(node["const"])
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(describe_rule(n) for n in node.get("oneOf", node.get("anyOf")))
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    words = " or ".join(_TYPE_WORDS.get(t, t) for t in types) or "a value"
    bounds = [f"{op} {_fmt(node[k])}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
                                                     ("exclusiveMaximum", "<")) if k in node]
    if "minItems" in node:
        bounds.append(f"with at least {node['minItems']} item(s)")
    if "items" in node and isinstance(node["items"], dict):
        bounds.append(f"of {describe_rule(node['items'])}")
    if "description" in node:
        bounds.append(f"({node['description']})")
    return " ".join([words, *bounds])


def _problem(e) -> str:
    v, kw, arg = e.instance, e.validator, e.validator_value
    if kw == "enum":
        return f"{_fmt(v)} is not one of {', '.join(_fmt(x) for x in arg)}"
    if kw == "type":
        return f"{_fmt(v)} is not of type {' or '.join([arg] if isinstance(arg, str) else arg)}"
    words = {"minimum": "is less than the minimum", "exclusiveMinimum": "must be greater than",
             "maximum": "is more than the maximum", "exclusiveMaximum": "must be less than"}
    if kw in words:
        return f"{_fmt(v)} {words[kw]} {_fmt(arg)}"
    if kw == "minItems":
        return f"{_fmt(v)} has fewer than {arg} item(s)"
    return f"{_fmt(v)}: {e.message}"


def _check_unknown(node: dict, value: Any, where: str, subject: str, top: bool = True) -> None:
    """Unknown keys of ``value`` (and of its nested mappings) under the closed objects of ``node``."""
    if not isinstance(value, Mapping) or "properties" not in node:
        return
    props = node["properties"]
    for key in value:
        if key not in props:
            if node.get("additionalProperties", True) is False:
                hint = difflib.get_close_matches(str(key), list(props), n=1)
                owner = f"{subject} takes" if top else f"allowed keys under '{where}'"
                raise ConfigError(
                    f"unknown config key '{where}.{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else "")
                    + f"; {owner}: {', '.join(props) or 'no parameters'}"
                )
            continue
        _check_unknown(props[key], value[key], f"{where}.{key}", subject, top=False)


def first_error(fragment: dict, value: Any) -> tuple[list[str], str, dict] | None:
    """The first JSON-schema error of ``value`` under ``fragment``: (key path, problem, the node
    whose rule it breaks), or None. A missing required key is reported at its own path."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(fragment).iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    e = errors[0]
    path = [str(p) for p in e.absolute_path]
    if e.validator == "required":
        missing = next(k for k in e.validator_value if k not in e.instance)
        return path + [missing], "missing (it has no default)", e.schema.get("properties", {}).get(missing, {})
    return path, _problem(e), e.schema if isinstance(e.schema, dict) else {}


def check_params(fragment: dict, params: Mapping | None, where: str, subject: str) -> dict:
    """``params`` checked against the object fragment ``fragment`` and filled with its defaults.

    Unknown keys (with the closest known one), then JSON-schema types, enums and ranges, each a
    :class:`ConfigError` naming the full key (``where.<key>``), the bad value, the allowed values
    and the default. ``subject`` names the owner in messages (e.g. ``descriptor family 'orb'``).
    """
    if params is not None and not isinstance(params, Mapping):
        raise ConfigError(f"invalid config value at '{where}': {_fmt(params)}; fix: give a mapping of the parameters "
                          f"of {subject} (or leave it out for the defaults)")
    params = dict(params or {})
    _check_unknown(fragment, params, where, subject)
    props = fragment.get("properties", {})
    # the fragment's key order (the order the params are recorded in)
    filled = fill_defaults(fragment, params)
    filled = {k: filled[k] for k in props if k in filled} | {k: v for k, v in filled.items() if k not in props}
    err = first_error(fragment, filled)
    if err is not None:
        path, problem, node = err
        top = props.get(path[0], {}) if path else {}
        default = f"default {_fmt(top['default'])}" if "default" in top else "no default"
        raise ConfigError(f"{'.'.join([where, *path])}: {problem}; fix: use {describe_rule(node)} "
                          f"({subject} parameter '{path[0] if path else ''}', {default})")
    return filled


def object_fragment(required: tuple[str, ...] = (), **properties: dict) -> dict:
    """A closed object fragment (unknown keys are errors) with ``properties`` in this order."""
    out: dict = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = list(required)
    return out
