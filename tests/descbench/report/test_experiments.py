"""Experiments: results under their own name, never mixed; one table across experiments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import yaml

from descbench import io
from descbench.config import validate_config
from descbench.errors import ConfigError
from descbench.report.experiments import compare_experiments, to_markdown

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.mark.bad_input
def test_experiment_name_is_checked():
    assert validate_config({"experiment": "border-20"}, SCHEMA)["experiment"] == "border-20"
    with pytest.raises(ConfigError, match=r"'experiment'"):
        validate_config({"experiment": "a/b"}, SCHEMA)


def _experiment(root: Path, name: str, scoring: dict | None) -> Path:
    params = {"experiment": name, "dataset": "demo"}
    if scoring is not None:
        params["config"] = {"scoring": scoring, "verification": {"enabled": False}, "descriptors": {"sift": {"family": "sift"}}}
    rows = pd.DataFrame([{"descriptor": "sift", "keypoint_set": "sift", "true_map_micro": 0.5}])
    io.write_table(pa.Table.from_pandas(rows, preserve_index=False), root / name / "report" / "comparison.parquet",
                   io.provenance("report", params))
    return root / name


def test_each_row_says_which_convention_its_numbers_follow(tmp_path):
    """Two experiments with different ground truths: each row's convention names its own settings
    (the last column; a short label in the Markdown, the texts below the table)."""
    a = _experiment(tmp_path, "a", {"gt": "closest_oriented", "tie_policy": "expected", "tau_px": 3})
    b = _experiment(tmp_path, "b", {"gt": "closest", "tie_policy": "half", "tau_px": 5})
    old = _experiment(tmp_path, "old", None)  # a table whose provenance has no config
    t = compare_experiments([a, b, old])
    assert t.columns[-1] == "convention" and t.source.tolist() == ["descbench"] * 3
    assert t.convention.tolist() == ["descbench: scoring.gt closest_oriented, tie_policy expected, tau_px 3",
                                     "descbench: scoring.gt closest, tie_policy half, tau_px 5",
                                     "descbench: settings not recorded in this comparison.parquet"]
    md = to_markdown(t)
    assert [line.rsplit("|", 2)[-2].strip() for line in md.splitlines()[2:5]] == ["[1]", "[2]", "[3]"]
    assert "- [2] descbench: scoring.gt closest, tie_policy half, tau_px 5" in md
    assert "DescriptorWorkbench columns" not in md  # only with workbench rows


@pytest.mark.e2e
def test_two_experiments_side_by_side_and_compared(tmp_path):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg.update(scenes=["i_rocket", "v_coins"])
    cfg["verification"]["enabled"] = False
    cfg["matching"]["enabled"] = False
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    smk = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "2"]
    (tmp_path / "border60.yaml").write_text("experiment: border60\nkeypoint_sets: {sift: {border_px: 60}}\n")
    for extra in ([], ["--configfile", str(tmp_path / "border60.yaml")]):  # merged into config.yaml
        res = subprocess.run(smk + extra, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    a, b = tmp_path / "results" / "demo", tmp_path / "results" / "border60"
    assert (a / "report" / "comparison.parquet").exists() and (b / "report" / "comparison.parquet").exists()
    res = subprocess.run([sys.executable, "-m", "descbench", "compare", str(a), str(b), "--out", str(tmp_path / "x.csv")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    t = pd.read_csv(tmp_path / "x.csv")
    assert t.experiment.tolist() == ["demo", "border60"] and (t.dataset == "demo").all()
    assert t.convention.str.startswith("descbench: scoring.gt closest_oriented, tie_policy expected, tau_px 3").all()
    assert t.total_queries_processed[1] < t.total_queries_processed[0]  # the wider border leaves fewer queries
    assert t.true_map_micro.tolist() == [pd.read_csv(d / "report" / "comparison.csv").true_map_micro[0] for d in (a, b)]
