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


def test_every_scoring_tasks_figure_is_listed_in_task_order():
    from descbench.tasks import SCORING_TASKS

    assert FIGURES == (*(n for t in SCORING_TASKS.values() for n in t.figures), "keypoint_stats")


def test_importing_it_loads_no_plotting_or_table_library():
    """The workflow imports the names at parse time: matplotlib and pandas are the plotting job's."""
    import subprocess
    import sys

    code = "import sys, descbench.report.figures; print(sorted(m for m in ('matplotlib', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
