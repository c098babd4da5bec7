"""descbench.report.patches with the workbench's patch benchmark: its table (one row per
descriptor, the workbench's patch_benchmark_results columns) from evaluation folders the job
wrote, against descbench.patches.workbench called directly on the same descriptors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from descbench.errors import DataError
from descbench.patches import stages as ps
from descbench.patches import workbench as wb
from descbench.report import patches as RP
from tests.descbench.patches.test_stages_workbench import SEQS, pcfg, sequence_descriptors, write_descriptors


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    root = tmp_path_factory.mktemp("wbreport")
    dirs = {}
    for name, d in (("toy8", 8), ("toy4", 4)):
        files = write_descriptors(root / "desc", name, d=d)
        ps.evaluate(root / "tasks", files, name, pcfg(), root / "eval" / name)
        dirs[name] = root / "eval" / name
    return root, dirs


def test_one_row_per_descriptor_with_the_workbench_s_columns(evals, tmp_path):
    root, dirs = evals
    RP.write(list(dirs.values()), list(dirs), tmp_path)
    t = pd.read_csv(tmp_path / "workbench_patch_benchmark.csv", keep_default_na=False)
    assert list(t.columns) == list(wb.TABLE_COLUMNS) + ["created_at", "precision", "grouping"]
    assert t.descriptor_name.tolist() == ["toy8", "toy4"] and t.descriptor_dimension.tolist() == [8, 4]
    for name, d in (("toy8", 8), ("toy4", 4)):
        descs = {s: sequence_descriptors(s, d=d) for s in SEQS}
        want = wb.aggregate(pd.concat([wb.score_sequence(s, descs[s], name, ["float32"]) for s in sorted(SEQS)]))
        got = t[t.descriptor_name == name].iloc[0]
        for c in wb.TABLE_COLUMNS:
            if c.startswith(("map_", "accuracy_")):  # float32 values written by to_csv read back exactly
                assert got[c] == want[c].iloc[0], (name, c)
        timing = json.loads((dirs[name] / RP.WORKBENCH_TIMING).read_text())
        assert got.processing_time_ms == pytest.approx(timing["processing_time_ms"], rel=1e-12) and got.processing_time_ms > 0
        assert got.created_at == timing["created_at"]
    md = (tmp_path / "workbench_patch_benchmark.md").read_text()
    assert md.startswith("| descriptor_name | descriptor_dimension | map_overall |") and "| toy4 | 4 |" in md
    assert "patch_benchmark_results" in (tmp_path / "workbench_patch_benchmark.html").read_text()


def test_without_the_benchmark_no_table_and_the_plot_keeps_its_panels(evals, tmp_path):
    """The existing reports do not change: no workbench files, and the figure has a third panel
    (the workbench's mAP) only when the workbench ran."""
    import matplotlib.image as mpimg

    from tests.descbench.report.test_patches import hbench_rows, tidy

    root, dirs = evals
    bare = tmp_path / "bare"
    bare.mkdir()
    RP.write([bare], ["toy8"], tmp_path / "out")
    assert not (tmp_path / "out" / "workbench_patch_benchmark.csv").exists()
    hb, hp = RP.hbench_table({"toy8": hbench_rows(0.5)}), RP.hpbench_table({"toy8": tidy("a")})
    wbt = RP.write([dirs["toy8"]], ["toy8"], tmp_path / "with") and pd.read_csv(tmp_path / "with" / "workbench_patch_benchmark.csv")
    RP.draw(hb, hp, ["toy8"], tmp_path / "two")
    RP.draw(hb, hp, ["toy8"], tmp_path / "three", wbt)
    two = mpimg.imread(tmp_path / "two" / "patches_map.png").shape[1]
    three = mpimg.imread(tmp_path / "three" / "patches_map.png").shape[1]
    assert three > two * 1.3


@pytest.mark.bad_input
def test_a_descriptor_evaluated_without_it_is_named(evals, tmp_path):
    root, dirs = evals
    bare = tmp_path / "toy2"
    bare.mkdir()
    with pytest.raises(DataError, match=r"ran for \['toy8'\] but not for \['toy2'\].*--forcerun patch_evaluate"):
        RP.write([dirs["toy8"], bare], ["toy8", "toy2"], tmp_path / "out")


@pytest.mark.bad_input
def test_a_missing_timing_file_is_named(evals, tmp_path):
    import shutil

    root, dirs = evals
    copy = tmp_path / "toy8"
    shutil.copytree(dirs["toy8"], copy)
    (copy / RP.WORKBENCH_TIMING).unlink()
    with pytest.raises(DataError, match=r"descriptor 'toy8' has no timing file; re-evaluate it"):
        RP.write([copy], ["toy8"], tmp_path / "out")
