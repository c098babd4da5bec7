"""Comparison across experiments: their comparison tables side by side, read from Parquet.

Each experiment folder (``<results_dir>/<experiment>/``) holds ``report/comparison.parquet``;
its provenance (the Parquet metadata) names the experiment and carries its config, so every row
of the joint table says which experiment and which settings it comes from. Rows keep each
experiment's order; columns are the union (a metric one experiment did not compute is NaN).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from descbench import io
from descbench.errors import DataError

LEAD = ["experiment", "dataset", "descriptor", "keypoint_set", "true_map_micro", "true_map_micro_ci_low",
        "true_map_micro_ci_high", "viewpoint_map", "illumination_map", "keypoint_verification_ap", "mma_at_3"]


def compare_experiments(folders: list[Path]) -> pd.DataFrame:
    frames = []
    for folder in folders:
        f = Path(folder) / "report" / "comparison.parquet"
        if not f.exists():
            raise DataError(f"{f} does not exist: run the experiment first (snakemake --cores N --config experiment=...)")
        table, meta = io.read_table(f)
        params = meta.get("params", {})
        df = table.to_pandas()
        df.insert(0, "dataset", params.get("dataset"))
        df.insert(0, "experiment", params.get("experiment") or Path(folder).name)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    return out[[c for c in LEAD if c in out.columns] + [c for c in out.columns if c not in LEAD]]


def to_markdown(table: pd.DataFrame) -> str:
    cols = [c for c in LEAD if c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in table[cols].iterrows():
        lines.append("| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines) + "\n"
