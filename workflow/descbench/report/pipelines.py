"""The pipelines table (``report/pipelines.{parquet,csv,md}``): one row per (keypoint set,
descriptor, matcher) of the matcher stage, its columns :func:`descbench.tasks.pipelines.summarize_pipeline`'s."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from descbench import io
from descbench.paths import ResultPaths
from descbench.report.patches import markdown
from descbench.tasks.pipelines import KINDS, NAME, summarize_pipeline

# The descriptor metrics of the comparison table (one row per keypoint set + descriptor) shown
# beside each pipeline of that keypoint set + descriptor (the matcher does not change them).
DESCRIPTOR_COLUMNS = ("true_map_micro", "keypoint_verification_ap", "weights")
# The Markdown table's columns (the Parquet and CSV files have every column).
MARKDOWN_LEAD = ("keypoint_set", "descriptor", "matcher", "true_map_micro", "mean_matches", "mean_prec_at_1", "mean_prec_at_3", "mma_at_3",
                 "matching_score")
MARKDOWN_PER_ESTIMATOR = ("auc_at_1", "auc_at_3", "auc_at_5", "ransac_th")


def build(paths: ResultPaths, combos: list, cfg: dict, comparison: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pipeline's row, in ``combos`` order (``[keypoint_set, descriptor, matcher]``), with
    :data:`DESCRIPTOR_COLUMNS` of ``comparison`` (the comparison table) where it has them."""
    rows = []
    for ks, d, m in combos:
        files = {k: [Path(paths.match_task_file(NAME, ks, d, m, s, k)) for s in paths.scenes] for k in KINDS[:2]}
        extra = {}
        if comparison is not None:
            hit = comparison[(comparison.keypoint_set == ks) & (comparison.descriptor == d)]
            extra = {c: hit[c].iloc[0] for c in DESCRIPTOR_COLUMNS if c in hit.columns and len(hit) == 1}
        rows.append({"keypoint_set": ks, "descriptor": d, "matcher": m, "matcher_type": cfg["matchers"][m]["matcher"],
                     **extra, **summarize_pipeline(files["pairs.parquet"], files["estimates.parquet"], cfg)})
    return pd.DataFrame(rows)


def markdown_columns(table: pd.DataFrame, cfg: dict) -> list[str]:
    cols = [c for c in MARKDOWN_LEAD if c in table.columns]
    for e in cfg["pipelines"]["estimators"]:
        cols += [f"{e}_{c}" for c in MARKDOWN_PER_ESTIMATOR if f"{e}_{c}" in table.columns and not (e == "dlt" and c == "ransac_th")]
    return cols


def write(paths: ResultPaths, combos: list, cfg: dict, out_dir: Path, provenance: dict,
          comparison: Path | None = None) -> pd.DataFrame:
    """Write the pipelines table's three files into ``out_dir``; returns the table. ``comparison``:
    the comparison table's Parquet file, whose descriptor metrics join each row."""
    table = build(paths, combos, cfg, None if comparison is None else pd.read_parquet(comparison))
    out_dir = Path(out_dir)
    io.write_table(pa.Table.from_pandas(table, preserve_index=False), out_dir / "pipelines.parquet",
                   io.provenance("pipelines_report", {"pipelines": cfg["pipelines"], "matchers": cfg["matchers"]}, **provenance))
    io.write_text(out_dir / "pipelines.csv", table.to_csv(index=False))
    io.write_text(out_dir / "pipelines.md", markdown(table[markdown_columns(table, cfg)]))
    return table
