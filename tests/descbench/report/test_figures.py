"""descbench.report.figures: every figure has its caption file, read as it is (one source for the
plotting job and Snakemake's HTML report)."""

from __future__ import annotations

from pathlib import Path

import descbench.report.figures as F
from descbench.report.figures import CAPTIONS, FIGURES


def test_every_figure_has_its_caption():
    folder = Path(F.__file__).parent / "captions"
    # the other captions are the tables' and the patch benchmarks' figure
    assert set(FIGURES) <= {p.stem for p in folder.glob("*.rst")}
    assert not any(name.startswith("table_") or name == "patches_map" for name in FIGURES)
    assert list(CAPTIONS) == list(FIGURES) and len(set(FIGURES)) == len(FIGURES)
    for name in FIGURES:
        text = (folder / f"{name}.rst").read_text()
        assert CAPTIONS[name] == text.strip() and len(CAPTIONS[name]) > 40, name


def test_the_module_imports_no_plotting_library():
    import ast

    tree = ast.parse(Path(F.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"pathlib"}
