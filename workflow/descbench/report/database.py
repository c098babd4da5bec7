"""The results database (SQLite): the seed's ``results`` table, plus experiments and keypoint sets.

Tables (rebuilt from the report files every time, so the database is a pure function of them):

- ``experiments``: one row per run configuration: ``experiment_id``, ``name``, ``dataset``,
  ``config_json`` (the validated config), ``versions_json`` (Python packages), ``git_commit``
  (of the workflow's checkout, ``+dirty`` with uncommitted changes, ``unknown`` outside git),
  ``inputs_sha256`` (one digest over the sha256 of every evaluated image and homography; per
  file in the keypoint files' provenance), ``n_scenes``.
- ``results``: one row per (descriptor, keypoint set) with the seed's columns
  (shared/seeds/000: ``true_map_micro``, ``true_map_macro``, ``viewpoint_map``,
  ``illumination_map``, ``keypoint_verification_ap``, ``keypoint_retrieval_ap``,
  ``precision_at_1``, ``precision_at_5``, ``mean_average_precision`` (the legacy mean precision,
  = ``mean_precision``), ``processing_time_ms``, ``metadata`` (the seed's ``key=value;`` string))
  first, then ``experiment_id``, ``descriptor``, ``keypoint_set`` and every other column of
  ``comparison.csv`` (intervals included).
- ``keypoint_sets``: ``keypoint_stats.csv`` (counts, sizes, coverage, repeatability, spec).
- ``significance``: ``significance.csv`` (paired comparisons).

NaN (a metric without data) is stored as SQL NULL. Query it from ``sqlite3``, pandas
(``pd.read_sql``) or DuckDB (``sqlite_scan``).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd

from descbench.fileops import atomic_path

SEED_COLUMNS = ["true_map_micro", "true_map_macro", "viewpoint_map", "illumination_map", "keypoint_verification_ap",
                "keypoint_retrieval_ap", "precision_at_1", "precision_at_5", "mean_average_precision",
                "processing_time_ms", "metadata"]


def git_commit(directory: Path) -> str:
    """The checkout's commit (``+dirty`` if tracked files differ), or ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def results_rows(comparison: pd.DataFrame, experiment_id: int) -> pd.DataFrame:
    """The ``results`` table: the seed's columns first, then identification, then everything else."""
    t = comparison.copy()
    t["true_map_macro"] = t["true_map_macro_by_scene"]
    t["mean_average_precision"] = t["mean_precision"] if "mean_precision" in t.columns else float("nan")
    for c in SEED_COLUMNS:
        if c not in t.columns:
            t[c] = float("nan")
    t.insert(0, "experiment_id", experiment_id)
    ident = ["experiment_id", "descriptor", "keypoint_set"]
    rest = [c for c in t.columns if c not in SEED_COLUMNS and c not in ident and c != "true_map_macro_by_scene"]
    return t[SEED_COLUMNS + ident + ["true_map_macro_by_scene"] + rest]


def build_database(out: Path, report_dir: Path, experiment: dict) -> None:
    """Write ``out`` (SQLite) from the report files in ``report_dir``; ``experiment``: name,
    dataset, config, versions, git_commit, n_scenes (inputs_sha256 is read from keypoint_stats)."""
    report_dir = Path(report_dir)
    comparison = pd.read_csv(report_dir / "comparison.csv")
    stats = pd.read_csv(report_dir / "keypoint_stats.csv")
    sig = pd.read_csv(report_dir / "significance.csv")
    exp = pd.DataFrame([{
        "experiment_id": 1, "name": experiment["name"], "dataset": experiment["dataset"],
        "config_json": json.dumps(experiment["config"], sort_keys=True), "versions_json": json.dumps(experiment["versions"], sort_keys=True),
        "git_commit": experiment["git_commit"],
        "inputs_sha256": str(stats["inputs_sha256"].iloc[0]) if len(stats) and "inputs_sha256" in stats else None,
        "n_scenes": int(experiment["n_scenes"]),
    }])
    stats.insert(0, "experiment_id", 1)
    sig.insert(0, "experiment_id", 1)
    with atomic_path(out) as tmp:  # a partial database never has the final name
        with sqlite3.connect(tmp) as con:
            exp.to_sql("experiments", con, index=False)
            results_rows(comparison, 1).to_sql("results", con, index=False)
            stats.to_sql("keypoint_sets", con, index=False)
            sig.to_sql("significance", con, index=False)
            con.execute("CREATE INDEX results_by_name ON results (descriptor, keypoint_set)")
        con.close()
