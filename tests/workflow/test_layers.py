"""The package's layers, held by a test (an import linter over the source, function-level imports
included, as import-linter's layers contract would be, without the extra dependency).

Dependencies point one way:

    0  errors, paths, columns, io, fileops, rng, params, torchrt, jobfacts, jobtiming, (package __init__) - bottom: names, files, schemas
    1  datasets, keypoints, descriptors, metrics, matchers, estimators, precomputed, featurefiles - pure computations
    2  patches, report, config, sweeps, tasks                     - benchmarks, scoring tasks and reports over them
    3  jobs, patches.stages, cli, __main__, smktuning, api, evaluate - the jobs, the command line, the Python API

A module imports only modules of its own layer or below; no module imports a private name
(``_x``) of another package; and no two modules import each other (directly or in a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "workflow" / "descbench"

# Longest prefix wins.
LAYERS = {
    "descbench": 0,
    "descbench.errors": 0,
    "descbench.paths": 0,
    "descbench.columns": 0,
    "descbench.io": 0,
    "descbench.rng": 0,
    "descbench.fileops": 0,
    "descbench.specfiles": 0,
    "descbench.jobrecord": 0,
    "descbench.runguard": 0,
    "descbench.params": 0,
    "descbench.torchrt": 0,
    "descbench.jobfacts": 0,
    "descbench.jobtiming": 0,
    "descbench.datasets": 1,
    "descbench.keypoints": 1,
    "descbench.descriptors": 1,
    "descbench.metrics": 1,
    "descbench.matchers": 1,
    "descbench.estimators": 1,
    "descbench.precomputed": 1,
    "descbench.featurefiles": 1,
    "descbench.patches": 2,
    "descbench.report": 2,
    "descbench.tasks": 2,
    "descbench.config": 2,
    "descbench.protocols": 2,
    "descbench.sweeps": 2,
    "descbench.jobresources": 2,
    "descbench.jobs": 3,
    "descbench.patches.stages": 3,
    "descbench.cli": 3,
    "descbench.__main__": 3,
    "descbench.smktuning": 3,
    "descbench.api": 3,
    "descbench.evaluate": 3,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def top_package(module: str) -> str:
    """descbench.metrics.ap -> descbench.metrics; descbench.io -> descbench.io."""
    return ".".join(module.split(".")[:2])


def imports_of(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every descbench import in the file."""
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(source: str, me: str, is_pkg: bool) -> list[tuple[str, list[str], int]]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "descbench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = me.split(".") if is_pkg else me.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "descbench":
                continue
            names = [a.name for a in node.names]
            # `from descbench.pkg import module` imports a module, not a name
            for n in names:
                sub = f"{mod}.{n}"
                if (PKG.parent / Path(*sub.split("."))).with_suffix(".py").exists() or (PKG.parent / Path(*sub.split("."))).is_dir():
                    out.append((sub, [], node.lineno))
                else:
                    out.append((mod, [n], node.lineno))
    return out


SOURCES = sorted(PKG.rglob("*.py"))
GRAPH = {module_name(p): imports_of(p) for p in SOURCES}


def test_the_layer_table_covers_every_module():
    for mod in GRAPH:
        layer(mod)  # raises on a module outside every prefix


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down_the_layers(module):
    bad = [f"line {line}: {module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
           for target, _, line in GRAPH[module] if layer(target) > layer(module)]
    assert not bad, "upward imports:\n" + "\n".join(bad)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_private_names_across_packages(module):
    bad = [f"line {line}: {module} imports {name} from {target}"
           for target, names, line in GRAPH[module] for name in names
           if name.startswith("_") and top_package(target) != top_package(module)]
    bad += [f"line {line}: {module} imports private module {target}"
            for target, _, line in GRAPH[module]
            if any(p.startswith("_") and not p.startswith("__") for p in target.split(".")) and top_package(target) != top_package(module)]
    assert not bad, "private names used across packages (make them public or move them):\n" + "\n".join(bad)


def test_no_import_cycles():
    edges = {m: sorted({t for t, _, _ in GRAPH[m] if t in GRAPH and t != m}) for m in GRAPH}
    # a package importing its own submodules (re-exports in __init__) is not a cycle of concern
    # only when the submodule does not import the package back; every cycle is reported.
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for t in edges[n]:
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t])
            elif not state.get(t):
                visit(t, path + [t])
        state[n] = 2

    for m in sorted(edges):
        if not state.get(m):
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_linter_sees_upward_private_and_relative_imports():
    """The checker itself, on a made-up layer-1 module: a function-level upward import, a private
    name of another package and a relative import are all seen."""
    src = "def f():\n    from descbench.jobs.score import run\nfrom ..keypoints.detectors import _cv_attr\nfrom . import ap\n"
    found = imports_in(src, "descbench.metrics.probe", False)
    assert ("descbench.jobs.score", ["run"], 2) in found
    assert ("descbench.keypoints.detectors", ["_cv_attr"], 3) in found
    assert ("descbench.metrics.ap", [], 4) in found
    assert layer("descbench.metrics.probe") == 1 and layer("descbench.jobs.score") == 3
    assert top_package("descbench.keypoints.detectors") != top_package("descbench.metrics.probe")


# The scoring tasks are registered by module (descbench.tasks.TASK_MODULES), like the descriptor
# families: no "module:function" strings, so every function a task's callers use is reached through
# an import this checker sees.


def test_every_scoring_task_is_a_module_the_registry_imports():
    from descbench.tasks import SCORING_TASKS, TASK_MODULES
    from descbench.tasks.base import ScoringTask

    imported = {target for target, _, _ in GRAPH["descbench.tasks"]}
    for m in TASK_MODULES:
        assert m.__name__ in imported, f"descbench.tasks does not import {m.__name__}"
        assert isinstance(m.TASK, ScoringTask) and type(m.TASK).__module__ == m.__name__, m.__name__
    assert list(SCORING_TASKS.values()) == [m.TASK for m in TASK_MODULES]
    # no task attribute is a string naming a function elsewhere
    for t in SCORING_TASKS.values():
        assert all(callable(f) for f in t.figures.values()), t.name
        assert not any(isinstance(getattr(t, a, None), str) and ":" in getattr(t, a) for a in dir(t) if not a.startswith("_"))
