"""The tests mirror the package: every module ``descbench/<path>/<module>.py`` has a direct test
file ``tests/descbench/<path>/test_<module>.py`` that imports it (docs/contributing/tests.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "workflow" / "descbench"
TESTS = ROOT / "tests" / "descbench"

# Mirrored files that exist but do not import their module yet (strict: the check fails as soon as
# the import is there, so an entry goes then). None today.
PENDING: dict[str, str] = {}


def package_modules() -> list[str]:
    """Dotted names of the package's modules, without __init__, __main__ and data/."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if path.name in ("__init__.py", "__main__.py") or rel.parts[0] == "data":
            continue
        out.append("descbench." + ".".join(rel.with_suffix("").parts))
    return out


def mirrored_file(module: str) -> Path:
    *pkg, name = module.split(".")[1:]
    return TESTS.joinpath(*pkg, f"test_{name}.py")


def imports_module(path: Path, module: str) -> bool:
    """``import a.b``, ``from a.b import x`` or ``from a import b`` anywhere in the file."""
    parent, _, name = module.rpartition(".")
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import) and any(a.name == module for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == module or (node.module == parent and any(a.name == name for a in node.names)):
                return True
    return False


def test_the_walk_finds_the_package():
    modules = package_modules()
    assert "descbench.io" in modules and "descbench.metrics.retrieval" in modules
    assert not any(m.endswith(("__init__", "__main__")) for m in modules)
    assert len(modules) > 80


@pytest.mark.parametrize("module", [pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=PENDING[m])) if m in PENDING else m
                                    for m in package_modules()])
def test_every_module_has_a_direct_test_file(module):
    path = mirrored_file(module)
    assert path.is_file(), f"{module} has no test file {path.relative_to(ROOT)}"
    assert imports_module(path, module), f"{path.relative_to(ROOT)} does not import {module}"


def test_the_import_check_tells_the_forms_apart(tmp_path):
    f = tmp_path / "test_x.py"
    for text, found in [("import descbench.metrics.ap\n", True), ("from descbench.metrics.ap import ap_step\n", True),
                        ("from descbench.metrics import ap as apm\n", True), ("def f():\n    from descbench.metrics import ap\n", True),
                        ("from descbench.metrics import aggregate\n", False), ("import descbench.metrics\n", False),
                        ("from descbench.metrics.apx import y\n", False), ("# from descbench.metrics.ap import x\n", False)]:
        f.write_text(text)
        assert imports_module(f, "descbench.metrics.ap") is found, text


def test_every_test_folder_mirrors_a_package_folder():
    """A folder under tests/descbench/ without a package folder of the same path would hold tests
    that the check above never asks for."""
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        rel = folder.relative_to(TESTS)
        assert (PKG / rel / "__init__.py").is_file(), f"tests/descbench/{rel} mirrors no package folder"
