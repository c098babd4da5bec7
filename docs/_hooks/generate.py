"""MkDocs hooks (mkdocs.yml ``hooks:``): the reference pages generated from the code at build time.

Nothing here is a copy of what it documents: every table is read, when the site is built, from the
source that the workflow itself reads.

- ``reference/config.md``: every key of ``workflow/schemas/config.schema.yaml`` (type, default,
  allowed values and bounds, the schema's description), the per-detector ``params`` from its
  ``definitions``;
- ``reference/families.md``: every descriptor family of ``descbench.descriptors``' registry, with
  its module, output kind, parameters and defaults (its ``PARAMS_SCHEMA``) and its patch support;
- ``reference/columns.md``: the Parquet schemas of ``descbench.io`` (columns and Arrow types);
- ``changelog.md``: the top-level ``CHANGELOG.md``, so that the site can link to it.

The package is imported from this checkout's ``workflow/`` (put first on ``sys.path``), not from
whatever descbench happens to be installed.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import yaml
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
CONFIG = ROOT / "config.yaml"
NAMED = ("keypoint_sets", "descriptors", "sweeps")  # sections whose entries are names the user chooses
CHANGELOG = ROOT / "CHANGELOG.md"


def _import(name: str):
    workflow = str(ROOT / "workflow")
    if sys.path[:1] != [workflow]:
        sys.path.insert(0, workflow)
    return importlib.import_module(name)


def _code(v) -> str:
    text = json.dumps(v) if not isinstance(v, str) else v
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# ----------------------------------------------------------------------------- config reference


def _resolve(node: dict, root: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        target = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type_of(node: dict, root: dict) -> str:
    node = _resolve(node, root)
    if "enum" in node:
        return "one of " + ", ".join(_code(v) for v in node["enum"])
    if "const" in node:
        return _code(node["const"])
    for alt in ("oneOf", "anyOf"):
        if alt in node:
            return " or ".join(_type_of(n, root) for n in node[alt])
    t = node.get("type")
    if isinstance(t, list):
        t = " or ".join(f"list of {_type_of(node['items'], root)}" if x == "array" and "items" in node else x for x in t)
    elif t == "array" and "items" in node:
        t = f"list of {_type_of(node['items'], root)}"
    if t is None and "pattern" in node:
        t = "string"
    if "pattern" in node and node.get("pattern") == root.get("definitions", {}).get("name", {}).get("pattern"):
        t = "name"
    return t or "any"


BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
          ("minItems", "items >="), ("maxItems", "items <="), ("minProperties", "entries >="),
          ("maxProperties", "entries <="), ("minLength", "length >="))


def _bounds(node: dict) -> str:
    out = [f"{sym} {node[k]}" for k, sym in BOUNDS if k in node]
    if node.get("uniqueItems"):
        out.append("no repeats")
    return ", ".join(out)


def config_comments(text: str) -> dict[str, str]:
    """key path -> the comment block right above that key in config.yaml (the file that documents
    every key for users); entries of the named sections (``keypoint_sets.sift``) as ``<name>``."""
    out, stack, block = {}, [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        m = re.match(r"^( *)([A-Za-z_][A-Za-z0-9_-]*):", line)
        if not m:
            if not stripped:
                block = []
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        keys = [k for _, k in stack]
        if len(keys) >= 2 and keys[0] in NAMED:
            keys[1] = "<name>"
        if block:
            out.setdefault(".".join(keys), " ".join(block))
        block = []
    return out


def _rows(node: dict, root: dict, path: str, required: set[str] = frozenset()) -> list[tuple]:
    """(path, type, default, bounds, description) for ``node``'s keys, depth first."""
    node = _resolve(node, root)
    rows = []
    for key, child in node.get("properties", {}).items():
        child = _resolve(child, root)
        p = f"{path}.{key}" if path else key
        default = _code(child["default"]) if "default" in child else ("required" if key in required else "")
        rows.append((p, _type_of(child, root), default, _bounds(child), child.get("description", "")))
        rows += _rows(child, root, p, set(child.get("required", [])))
        for alt in ("oneOf", "anyOf"):
            for branch in child.get(alt, []):
                rows += _rows(branch, root, p, set(_resolve(branch, root).get("required", [])))
        if isinstance(child.get("items"), dict):
            rows += _rows(child["items"], root, p + "[]")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        rows += _rows(extra, root, f"{path}.<name>" if path else "<name>", set(_resolve(extra, root).get("required", [])))
    for part in node.get("allOf", []):
        for branch in (part.get("then"), part.get("else")):
            if isinstance(branch, dict):
                rows += [r for r in _rows(branch, root, path) if r[0] not in {x[0] for x in rows}]
    return rows


def _table(rows: list[tuple], comments: dict[str, str]) -> str:
    out = ["| key | type | default | bounds | description |", "|---|---|---|---|---|"]
    seen = set()
    for p, t, d, b, desc in rows:
        if p in seen:
            continue
        seen.add(p)
        desc = desc or comments.get(p, "")
        out.append(f"| `{p}` | {_cell(t)} | {_cell(d)} | {_cell(b)} | {_cell(desc)} |")
    return "\n".join(out)


def config_reference() -> str:
    schema = yaml.safe_load(SCHEMA.read_text())
    comments = config_comments(CONFIG.read_text())
    parts = [
        "# Configuration reference",
        "",
        "Generated when the site is built from `workflow/schemas/config.schema.yaml`, the schema the "
        "workflow validates every config against (unknown keys are errors). `config.yaml` shows every "
        "section with comments; a key left out takes the default below. `<name>` stands for a name you "
        "choose (a keypoint set, a descriptor, a sweep); `[]` for each item of a list. A description is the "
        "schema's own, else the comment above the key in `config.yaml`.",
        "",
        f"> {_cell(schema.get('description', ''))}",
        "",
        "## Top-level keys and sections",
        "",
    ]
    top = schema["properties"]
    simple = {k: v for k, v in top.items() if "properties" not in _resolve(v, schema) and
              not isinstance(_resolve(v, schema).get("additionalProperties"), dict)}
    parts += [_table(_rows({"properties": simple}, schema, ""), comments), ""]
    for key, node in top.items():
        if key in simple:
            continue
        parts += [f"### `{key}`", "", _table(_rows({"properties": {key: node}}, schema, ""), comments), ""]
    parts += ["## Detector and keypoint-file parameters (`keypoint_sets.<name>.params`)", "",
              "The `params` of a keypoint set, per `detector` (schema `definitions`).", ""]
    for name, node in schema.get("definitions", {}).items():
        if not isinstance(node, dict) or "properties" not in node:
            continue
        parts += [f"### `{name}`", "", _table(_rows(node, schema, "params", set(node.get("required", []))), {}), ""]
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- descriptor families


def _first_sentence(doc: str | None) -> str:
    text = " ".join((doc or "").split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def families_reference() -> str:
    descriptors = _import("descbench.descriptors")
    registered_in = {}  # family name -> the module whose FAMILIES registers it
    for module_name in descriptors.FAMILY_MODULES:
        module = importlib.import_module(f"descbench.descriptors.{module_name}")
        for fam in module.FAMILIES:
            registered_in[fam.name] = module
    rows = []
    for name in descriptors.family_names():
        fam = descriptors.get_family(name)
        module = registered_in[name]
        props = fam.params_schema.get("properties", {})
        required = set(fam.params_schema.get("required", []))
        params = ", ".join(
            f"`{k}`" + (f" ({_code(v['default'])})" if "default" in v else " (required)" if k in required else "")
            for k, v in props.items()) or "-"
        output = {True: "packed bits (Hamming)", False: "float (L2)", None: "decided by the data"}[fam.binary]
        problem = fam.patch_problem()
        patches = "yes" if problem is None else ("no: " + problem if fam.not_on_patches else "no")
        what = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", _first_sentence(module.__doc__))
        rows.append(f"| `{name}` | `{module.__name__}` | {output} | {_cell(params)} | {_cell(patches)} | {_cell(what)} |")
    return "\n".join([
        "# Descriptor families",
        "",
        "Generated when the site is built from the family registry (`descbench.descriptors.FAMILY_MODULES`, "
        "each module's `FAMILIES` and `PARAMS_SCHEMA`). Parameters are listed with their defaults; the "
        "schema fragment of each family also holds their types and allowed values, checked when the "
        "workflow is built. *patches*: whether the family describes patches (`patch_support` and "
        "`patch_rows` hooks), see [Patch benchmarks](../guide/patches.md). The last column is the first "
        "sentence of the family module's docstring.",
        "",
        "| family | module | output | parameters (default) | patches | what |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "How to add one: [Adding a descriptor family](../contributing/family.md).",
        "",
    ])


# ----------------------------------------------------------------------------- output columns


def columns_reference() -> str:
    io = _import("descbench.io")
    pa = _import("pyarrow")
    tasks = _import("descbench.tasks")
    config = _import("descbench.config")
    cfg = config.validate_config({}, SCHEMA)  # the defaults
    cfg["verification"]["convention"] = "workbench"  # every column of the verification scene file
    schemas = {f"`io.{k}`": v for k, v in vars(io).items() if isinstance(v, pa.Schema)}
    for t in tasks.SCORING_TASKS.values():
        for kind, sch in t.schemas(cfg).items():
            schemas[f"`{t.name}/<scene>.{kind}` (`descbench.tasks.{type(t).__module__.rsplit('.', 1)[1]}`)"] = sch
    matchers = _import("descbench.matchers")
    pipelines = _import("descbench.tasks.pipelines")
    schemas["`matches/<kpset>/<descriptor>/<matcher>/<batch>/<scene>.parquet` (`descbench.matchers.MATCHES_SCHEMA`)"] = \
        matchers.MATCHES_SCHEMA
    schemas["`pipelines/<scene>.pairs.parquet` (`descbench.tasks.pipelines`)"] = pipelines.pairs_schema(
        cfg["matching"]["mma_thresholds"], cfg["pipelines"]["precision_thresholds"])
    schemas["`pipelines/<scene>.estimates.parquet` (`descbench.tasks.pipelines`)"] = pipelines.ESTIMATES
    parts = [
        "# Output columns",
        "",
        "Generated when the site is built from the Parquet schemas of the features (`descbench.io`) and "
        "of each scoring task's files (its module in `descbench.tasks`; the per-scene files of "
        "[Outputs](../guide/outputs.md); row writers refuse a missing or unknown column). "
        "Schemas that depend on settings are shown for the default config, with "
        "`verification.convention: workbench`: the verification scene file has one "
        "`verification_ap_<convention>` column per AP convention (`descbench.metrics.ap.AP_CONVENTIONS`) "
        "and the `workbench_*` columns only under that convention, the matching pairs file one column "
        "per MMA threshold (`matching.mma_thresholds`).",
        "",
    ]
    for title, sch in schemas.items():
        parts += [f"## {title}", "", "| column | Arrow type |", "|---|---|"]
        parts += [f"| `{f.name}` | `{f.type}` |" for f in sch]
        parts.append("")
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- the hook

GENERATED = {
    "reference/config.md": config_reference,
    "reference/families.md": families_reference,
    "reference/columns.md": columns_reference,
    "changelog.md": lambda: CHANGELOG.read_text(),
}


def on_files(files, config):
    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    return files
