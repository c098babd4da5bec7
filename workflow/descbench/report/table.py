"""The comparison table across descriptors and keypoint sets (CSV, Markdown, Parquet).

Laid out like the seed's tables: descriptor, keypoint set, mAP, viewpoint, illumination, P@1, P@5,
queries, R=0 excluded, then every other aggregate; every column is named after its metric (see
:mod:`descbench.metrics.aggregate`). ``processing_time_ms`` (sum of the scoring jobs' wall time)
is in the CSV and Markdown only: wall time is not reproducible and Parquet files are bit-identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from descbench import io
from descbench.metrics.aggregate import metadata_string, scene_table, summarize

LEAD_COLUMNS = [
    "descriptor", "keypoint_set", "true_map_micro", "viewpoint_map", "illumination_map",
    "precision_at_1", "precision_at_5", "total_queries_processed", "total_queries_excluded",
]


@dataclass(frozen=True)
class Entry:
    keypoint_set: str
    descriptor: str
    pairs: list[Path]
    timings: list[Path]


def load_pairs(paths: list[Path]) -> tuple[pd.DataFrame, list[dict]]:
    frames, metas = [], []
    for p in paths:
        table, meta = io.read_table(p, io.PAIRS)
        frames.append(table.to_pandas())
        metas.append(meta)
    return pd.concat(frames, ignore_index=True), metas


def build(entries: list[Entry], scoring: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comparison table, per-scene table) for all entries, in entry order."""
    rows, scene_rows = [], []
    for e in entries:
        pairs, metas = load_pairs(e.pairs)
        summary = summarize(pairs)
        scenes = scene_table(pairs)
        time_ms = sum(json.loads(Path(t).read_text())["processing_time_ms"] for t in e.timings)
        empty = sorted({f"{m['scene']}/{k}" for m in metas for k in m.get("empty_images", [])})
        rows.append({
            "descriptor": e.descriptor, "keypoint_set": e.keypoint_set, **summary,
            "empty_images": len(empty), "processing_time_ms": time_ms,
            "metadata": metadata_string(summary, scenes),
        })
        scenes.insert(0, "keypoint_set", e.keypoint_set)
        scenes.insert(0, "descriptor", e.descriptor)
        scene_rows.append(scenes)
    table = pd.DataFrame(rows)
    table = table[LEAD_COLUMNS + [c for c in table.columns if c not in LEAD_COLUMNS]]
    return table, pd.concat(scene_rows, ignore_index=True)


def to_markdown(table: pd.DataFrame) -> str:
    cols = LEAD_COLUMNS + ["true_map_macro_by_scene", "precision_at_10", "processing_time_ms"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in table[cols].iterrows():
        cells = [f"{v:.4f}" if isinstance(v, float) and c != "processing_time_ms" else (f"{v:.0f}" if isinstance(v, float) else str(v)) for c, v in r.items()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(entries: list[Entry], scoring: dict, out_dir: Path, provenance_params: dict) -> pd.DataFrame:
    table, scenes = build(entries, scoring)
    out_dir = Path(out_dir)
    meta = io.provenance("report", provenance_params)
    io.write_table(pa.Table.from_pandas(table.drop(columns=["processing_time_ms"]), preserve_index=False), out_dir / "comparison.parquet", meta)
    io.write_table(pa.Table.from_pandas(scenes, preserve_index=False), out_dir / "per_scene.parquet", meta)
    io.write_text(out_dir / "comparison.csv", table.to_csv(index=False))
    io.write_text(out_dir / "per_scene.csv", scenes.to_csv(index=False))
    io.write_text(out_dir / "comparison.md", to_markdown(table))
    return table
