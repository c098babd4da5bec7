"""Golden values: README's demo tables are what `snakemake --cores 2` on the bundled demo prints.

README.md shows the comparison, significance and keypoint-statistics tables of the default
config on the offline demo dataset. This test runs exactly that (the repository's config.yaml, all
8 demo scenes) in a fresh directory and compares every number README shows, as README rounds it,
with the run's CSV files. A change that moves any demo number fails here until README says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from docsexamples import docs_example

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

# Columns README shows that are not deterministic (wall time).
VARYING = {"processing_time_ms"}


def markdown_tables(text: str) -> list[list[dict[str, str]]]:
    """Every pipe table of a Markdown text, as a list of {header: cell} rows."""
    tables, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if len(block) >= 3:
            cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in block]
            header = cells[0]
            tables.append([dict(zip(header, row)) for row in cells[2:]])
        block = []
    return tables


def readme_table(first_columns: list[str]) -> list[dict[str, str]]:
    """The README table whose header starts with ``first_columns`` (exactly one such table)."""
    found = [t for t in markdown_tables((ROOT / "README.md").read_text()) if t and list(t[0])[: len(first_columns)] == first_columns]
    assert len(found) >= 1, f"README.md has no table starting with {first_columns}"
    return found[0]


def same_as_shown(shown: str, value) -> bool:
    """``value`` printed the way README prints ``shown`` (same decimals; integers exactly)."""
    m = re.fullmatch(r"-?\d+(?:\.(\d+))?", shown)
    assert m, f"unexpected README cell {shown!r}"
    decimals = len(m.group(1) or "")
    return f"{float(value):.{decimals}f}" == shown


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("golden")
    shutil.copy(ROOT / "config.yaml", work / "config.yaml")
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--cores", "2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return work / "results" / "demo" / "report"


def test_readme_comparison_table_is_the_demo_run(demo_run: Path):
    shown = readme_table(["descriptor", "keypoint_set", "true_map_micro (95 % CI)"])
    got = pd.read_csv(demo_run / "comparison.csv").set_index(["descriptor", "keypoint_set"])
    assert len(shown) == len(got)
    checked = 0
    for row in shown:
        actual = got.loc[(row["descriptor"], row["keypoint_set"])]
        for col, cell in row.items():
            if col in ("descriptor", "keypoint_set") or col in VARYING:
                continue
            m = re.fullmatch(r"(\S+) \(95 % CI\)", col)
            if m:  # "value [low, high]"
                name = m.group(1)
                v, lo, hi = re.fullmatch(r"(\S+) \[(\S+), (\S+)\]", cell).groups()
                pairs = [(v, actual[name]), (lo, actual[f"{name}_ci_low"]), (hi, actual[f"{name}_ci_high"])]
            else:
                pairs = [(cell, actual[col])]
            for s, val in pairs:
                assert same_as_shown(s, val), f"README shows {col}={s} for {row['descriptor']}, the demo gives {val}"
                checked += 1
    assert checked >= 30


def test_readme_significance_table_is_the_demo_run(demo_run: Path):
    shown = readme_table(["keypoint_set", "metric", "descriptor_a"])
    got = pd.read_csv(demo_run / "significance.csv")
    for row in shown:
        actual = got[(got.metric == row["metric"]) & (got.descriptor_a == row["descriptor_a"]) & (got.descriptor_b == row["descriptor_b"])]
        assert len(actual) == 1, row
        for col, cell in row.items():
            if col in ("keypoint_set", "metric", "descriptor_a", "descriptor_b"):
                continue
            assert same_as_shown(cell, actual.iloc[0][col]), f"README significance {row['metric']} {col}={cell}, demo {actual.iloc[0][col]}"


def test_readme_keypoint_stats_table_is_the_demo_run(demo_run: Path):
    shown = readme_table(["keypoint_set", "kind", "root_detector"])
    got = pd.read_csv(demo_run / "keypoint_stats.csv").set_index("keypoint_set")
    for row in shown:
        actual = got.loc[row["keypoint_set"]]
        for col, cell in row.items():
            if col == "keypoint_set":
                continue
            if col in ("kind", "root_detector", "mode"):
                assert cell == actual[col]
            else:
                assert same_as_shown(cell, actual[col]), f"README keypoint_stats {col}={cell}, demo {actual[col]}"


def test_the_python_api_example_equals_the_demo_run(demo_run: Path, monkeypatch):
    """docs/guide/python.md's example (evaluate_sequences with a SIFT callable on the demo, in this
    process) gives the workflow's own `sift` row of comparison.parquet: every column, every value,
    exactly (the keypoint, scoring and report code is the same; only the rows' maker differs)."""
    monkeypatch.chdir(demo_run.parents[2])  # the run's folder: its data/demo, as a user's notebook there
    scope: dict = {}
    exec(docs_example("guide/python.md", "## The example: SIFT as a callable, on the demo"), scope)
    got = scope["table"].drop(columns=["processing_time_ms"])
    want = pd.read_parquet(demo_run / "comparison.parquet")
    want = want[want.descriptor == "sift"].reset_index(drop=True)
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
