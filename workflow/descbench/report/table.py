"""The comparison table across descriptors and keypoint sets (CSV, Markdown, Parquet).

Laid out like the seed's tables: descriptor, keypoint set, mAP, viewpoint, illumination, P@1, P@5,
queries, R=0 excluded, then every other aggregate; every column is named after its metric (see
:mod:`descbench.metrics.aggregate`). ``processing_time_ms`` (sum of the scoring jobs' wall time)
is in the CSV and Markdown only: wall time is not reproducible and Parquet files are bit-identical.
Sweep variants carry their settings (``sweep``, ``sweep:<path>``, :func:`descbench.sweeps.sweep_columns`)
right after the identification, in every format; with ``verification.convention: workbench`` the
Markdown also shows the C++ workbench's own ``workbench_verification_map`` / ``workbench_retrieval_map``
after the task headlines. Either adds a legend line under the Markdown table
(:func:`descbench.report.summary.column_notes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from descbench import io
from descbench.metrics.bootstrap import (
    CORRECTION_NAMES, BootstrapParams, adjust_p_values, bootstrap_ci, paired_comparison, two_stage_ci,
)
from descbench.metrics.aggregate import metadata_string
from descbench.config import effective_config, learned_weights
from descbench.paths import ResultPaths
from descbench.tasks import SCORING_TASKS, TaskSummary, scoring_task
from descbench.tasks import retrieval
from descbench.report.summary import WORKBENCH_COLUMNS, column_notes, degenerate_notes, sweep_cell, sweep_column_names
from descbench.sweeps import sweep_columns

LEAD_COLUMNS = [
    "descriptor", "keypoint_set", "true_map_micro", "viewpoint_map", "illumination_map",
    "precision_at_1", "precision_at_5", "total_queries_processed", "total_queries_excluded",
]


def markdown_columns(table_columns=()) -> list[str]:
    """The columns Markdown shows when they exist (tasks can be disabled): the lead columns (with
    the sweep columns of ``table_columns`` after the identification), each scoring task's
    ``headline`` (descbench.tasks.SCORING_TASKS, in order), the C++ workbench's own numbers
    (``verification.convention: workbench``), then empty images and the wall time."""
    # "weights": only where a learned network is involved (descbench.config.learned_weights), then on every row
    return (LEAD_COLUMNS[:2] + ["weights"] + sweep_column_names(table_columns) + LEAD_COLUMNS[2:]
            + [c for t in SCORING_TASKS.values() for c in t.headline] + WORKBENCH_COLUMNS
            + ["empty_images", "processing_time_ms"])


@dataclass(frozen=True)
class Entry:
    """The per-scene result files of one (keypoint set, descriptor): ``files[task][kind]`` = the
    task's ``<scene>.<kind>`` of every scene, in ``scenes`` order, for each enabled scoring task
    (descbench.tasks.SCORING_TASKS, in order). Listed, not read: each task's ``summarize``
    reads what it needs."""

    keypoint_set: str
    descriptor: str
    files: dict[str, dict[str, list[Path]]]
    scenes: list[str] = field(default_factory=list)  # the scene of each per-scene file, in order

    def all_files(self) -> list[str]:
        return [str(p) for kinds in self.files.values() for paths in kinds.values() for p in paths]


def entry_files(paths: ResultPaths, keypoint_set: str, descriptor: str, scenes: list[str], cfg: dict) -> Entry:
    """The files of one combination (the rules write exactly these): every kind of every task
    that ``cfg`` enables."""
    files = {t.name: {k: [t.file(paths, keypoint_set, descriptor, s, k) for s in scenes] for k in t.kinds}
             for t in SCORING_TASKS.values() if t.enabled(cfg)}
    return Entry(keypoint_set, descriptor, files, list(scenes))


def build(entries: list[Entry], cfg: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comparison table, per-scene table) for all entries, in entry order: per entry, each
    enabled task's ``summarize`` in registry order gives its columns and per-scene values (merged
    on the scene into the first task's per-scene table)."""
    rows, scene_rows = [], []
    for e in entries:
        ecfg = effective_config(cfg, e.descriptor) if e.descriptor in cfg.get("descriptors", {}) else cfg  # its overrides
        summary, scenes, empty, timings = {}, None, set(), []
        for task, files in e.files.items():
            s = TaskSummary(*scoring_task(task).summarize(files, ecfg))
            summary.update(s.values)
            if s.scenes is not None:
                scenes = s.scenes if scenes is None else scenes.merge(s.scenes, on="scene", how="left", validate="one_to_one")
            empty.update(s.empty_images)
            timings += files.get("timing.json", [])
        time_ms = sum(json.loads(Path(t).read_text())["processing_time_ms"] for t in timings)
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
    # what every learned network of a row was loaded with; a random one is said on its row, loudly
    labels = [learned_weights(cfg, e.keypoint_set, e.descriptor) if e.descriptor in cfg.get("descriptors", {}) else ""
              for e in entries]
    if any(labels):
        table.insert(2, "weights", [label or "none" for label in labels])
    return table, pd.concat(scene_rows, ignore_index=True)


def ci_metrics() -> dict[str, tuple[str, str | None]]:
    """Metrics given an interval and compared pairwise: name -> (per-scene numerator, denominator)
    columns of the per-scene table, each scoring task's ``intervals`` in registry order
    (descbench.metrics.bootstrap: the dataset value is sum(num) / sum(den) over scenes, so micro
    averages weigh scenes by their queries)."""
    return {m: (num, den) for t in SCORING_TASKS.values() for m, num, den in t.intervals}


def scene_num_den(scenes: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-scene (numerator, denominator) of ``metric`` (None if the metric was not computed); a
    macro metric's scene without a value (NaN) has denominator 0, so it counts nowhere."""
    num_col, den_col = ci_metrics()[metric]
    if num_col not in scenes.columns:
        return None
    num = scenes[num_col].to_numpy(np.float64)
    if den_col is not None:
        if den_col not in scenes.columns:
            return None
        return num, scenes[den_col].to_numpy(np.float64)
    ok = np.isfinite(num)
    return np.where(ok, num, 0.0), ok.astype(np.float64)


def add_intervals(table: pd.DataFrame, scene_tables: list[pd.DataFrame], params: BootstrapParams,
                  query_values: list[list[np.ndarray]] | None = None) -> pd.DataFrame:
    """``<metric>_ci_low`` / ``_ci_high`` columns (percentile bootstrap over scenes); with
    ``query_values`` (per entry, per scene in the order of its scene table: the query APs) also
    ``true_map_micro_ci2_low`` / ``_ci2_high``, the two-stage interval (scenes, then queries)."""
    for metric in ci_metrics():
        lows, highs = [], []
        for scenes in scene_tables:
            nd = scene_num_den(scenes, metric)
            lo, hi = bootstrap_ci(*nd, params) if nd is not None else (np.nan, np.nan)
            lows.append(lo)
            highs.append(hi)
        if metric in table.columns:  # appended: the lead columns keep the seed's layout
            table[f"{metric}_ci_low"] = lows
            table[f"{metric}_ci_high"] = highs
    if query_values is not None:
        two = [two_stage_ci(v, params) for v in query_values]
        table["true_map_micro_ci2_low"] = [lo for lo, _ in two]
        table["true_map_micro_ci2_high"] = [hi for _, hi in two]
    return table


# The family of the multiple-comparison correction: every row of one significance table, i.e.
# every (keypoint set, descriptor pair, metric) of the experiment that has a p-value. The table is
# read as a whole -- a reader scans all its rows for small p-values and may act on any of them --
# so the error guarantee (Holm: P(any false rejection) <= alpha; BH: expected share of false ones
# <= q) must cover every row scanned. Families per metric or per keypoint set would each keep
# their own alpha, and the table as a whole would not (5 metrics: up to 1 - 0.95^5 = 23 % for
# independent families), and they would invite choosing the family after seeing the results.
SIGNIFICANCE_FAMILY = "all rows of this table (keypoint sets x descriptor pairs x metrics) with a p-value"


def significance_table(table: pd.DataFrame, scene_tables: list[pd.DataFrame], params: BootstrapParams,
                       correction: str = "holm") -> pd.DataFrame:
    """Every pair of descriptors on the same keypoint set (config order, A before B), per metric
    of :func:`ci_metrics`: A - B with its paired-bootstrap interval and permutation p-value (``p_value``,
    raw), and ``p_adjusted``: the p-values corrected by ``correction`` (``holm``, ``bh``, ``none``;
    :func:`descbench.metrics.bootstrap.adjust_p_values`) over the family SIGNIFICANCE_FAMILY.
    ``correction`` and ``family_size`` (m: the rows with a p-value) are recorded in every row; a
    row without a p-value (NaN: no data) is not in the family and its ``p_adjusted`` is NaN."""
    rows = []
    for i in range(len(table)):
        for j in range(i + 1, len(table)):
            if table.keypoint_set.iloc[i] != table.keypoint_set.iloc[j]:
                continue
            si, sj = scene_tables[i], scene_tables[j]
            if si.scene.tolist() != sj.scene.tolist():
                raise ValueError(f"keypoint set {table.keypoint_set.iloc[i]}: descriptors scored on different scenes")
            for metric in ci_metrics():
                a, b = scene_num_den(si, metric), scene_num_den(sj, metric)
                if a is None or b is None:
                    continue
                rows.append({"keypoint_set": table.keypoint_set.iloc[i], "metric": metric,
                             "descriptor_a": table.descriptor.iloc[i], "descriptor_b": table.descriptor.iloc[j],
                             **paired_comparison(*a, *b, params)})
    cols = ["keypoint_set", "metric", "descriptor_a", "descriptor_b", "value_a", "value_b", "difference", "ci_low",
            "ci_high", "p_value", "p_adjusted", "n_scenes", "resamples", "level", "seed", "correction", "family_size"]
    sig = pd.DataFrame(rows, columns=[c for c in cols if c not in ("p_adjusted", "correction", "family_size")])
    sig["p_value"] = sig["p_value"].astype(np.float64)
    sig["p_adjusted"] = adjust_p_values(sig["p_value"].to_numpy(), correction)  # the whole table: one family
    sig["correction"] = correction
    sig["family_size"] = int(np.isfinite(sig["p_value"].to_numpy()).sum())
    return sig[cols]


def _cell(c: str, v) -> str:
    if isinstance(v, float):
        return f"{v:.0f}" if c == "processing_time_ms" else ("n/a" if np.isnan(v) else f"{v:.4f}")
    return str(v)


def to_markdown(table: pd.DataFrame) -> str:
    """The comparison table's Markdown (:func:`markdown_columns`), then one legend line per group
    of columns that are not descbench's own metrics (sweep settings, the workbench's numbers)."""
    cols = [c for c in markdown_columns(table.columns) if c in table.columns]
    sweeps = set(sweep_column_names(cols))
    shown = ["true_map_micro (95 % CI)" if c == "true_map_micro" and "true_map_micro_ci_low" in table.columns else c for c in cols]
    lines = ["| " + " | ".join(shown) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in table.iterrows():
        cells = []
        for c in cols:
            cell = sweep_cell(r[c]).replace("|", "\\|") if c in sweeps else _cell(c, r[c])
            if c == "true_map_micro" and "true_map_micro_ci_low" in table.columns:
                cell += f" [{_cell(c, r['true_map_micro_ci_low'])}, {_cell(c, r['true_map_micro_ci_high'])}]"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    legend = column_notes(cols)
    return "\n".join(lines) + "\n" + ("\n" + "".join(f"{n}\n" for n in legend) if legend else "")


def html_page(title: str, table: pd.DataFrame) -> str:
    """A table as a self-contained HTML page (numbers to 4 decimals, NaN as n/a)."""
    body = table.to_html(index=False, na_rep="n/a", float_format=lambda v: f"{v:.4f}", border=0, classes="descbench")
    style = ("<style>body{font-family:sans-serif;font-size:12px} table{border-collapse:collapse} "
             "td,th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right} th{position:sticky;top:0;background:#f4f4f4}</style>")
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>{style}</head><body><h3>{title}</h3>{body}</body></html>\n"


def significance_header(sig: pd.DataFrame) -> str:
    """One line: how ``p_adjusted`` was computed (method and family) -- the .md's first line."""
    if not len(sig):
        return "No paired tests: no keypoint set has two descriptors."
    method, m = str(sig["correction"].iloc[0]), int(sig["family_size"].iloc[0])
    if method == "none":
        return f"p_value: raw paired permutation test; p_adjusted = p_value: not corrected for the {m} test(s) of this table."
    return (f"p_value: raw paired permutation test; p_adjusted: {CORRECTION_NAMES[method]} over {m} test(s) = "
            f"{SIGNIFICANCE_FAMILY}.")


def significance_markdown(sig: pd.DataFrame) -> str:
    cols = ["keypoint_set", "metric", "descriptor_a", "descriptor_b", "difference", "ci_low", "ci_high", "p_value",
            "p_adjusted", "n_scenes"]
    lines = [significance_header(sig), "", "| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in sig[cols].iterrows():
        lines.append("| " + " | ".join(_cell(c, v) for c, v in r.items()) + " |")
    return "\n".join(lines) + "\n"


def comparison(entries: list[Entry], cfg: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(comparison table, per-scene table, paired comparisons)`` of the run's report: the
    tables of :func:`build` with the sweep columns, the bootstrap intervals and the paired tests
    between rows (``cfg["statistics"]``). :func:`write` writes them; the Python API returns them."""
    table, scenes = build(entries, cfg)
    sweep_cols = [sweep_columns(cfg.get("sweeps") or {}, k, d) for k, d in zip(table.keypoint_set, table.descriptor)]
    extra = pd.DataFrame(sweep_cols, index=table.index)  # sweep columns right after the lead columns
    if len(extra.columns):
        table = pd.concat([table[LEAD_COLUMNS], extra, table.drop(columns=LEAD_COLUMNS)], axis=1)
    st = cfg["statistics"]
    params = BootstrapParams.from_config(st)
    per_entry = [scenes[(scenes.descriptor == d) & (scenes.keypoint_set == k)].reset_index(drop=True)
                 for d, k in zip(table.descriptor, table.keypoint_set)]
    query_values = None
    if st.get("resample_queries"):
        by_entry = {(e.keypoint_set, e.descriptor): dict(zip(e.scenes, retrieval.query_aps(e.files[retrieval.TASK.name]["queries.parquet"])))
                    for e in entries}
        query_values = [[by_entry[(k, d)][s] for s in sc.scene] for d, k, sc in zip(table.descriptor, table.keypoint_set, per_entry)]
    table = add_intervals(table, per_entry, params, query_values)
    sig = significance_table(table, per_entry, params, st.get("correction", "holm"))
    return table, scenes, sig


def write(entries: list[Entry], cfg: dict, out_dir: Path, provenance_params: dict) -> pd.DataFrame:
    """Write the report's tables (:func:`comparison`) into ``out_dir``; returns the comparison table."""
    table, scenes, sig = comparison(entries, cfg)
    out_dir = Path(out_dir)
    meta = io.provenance("report", provenance_params)
    # the run's settings as plain JSON: read at the next run's start (descbench.report.changes)
    io.write_text(out_dir / "provenance.json", json.dumps(meta, sort_keys=True, indent=1, default=str) + "\n")
    io.write_table(pa.Table.from_pandas(sig, preserve_index=False), out_dir / "significance.parquet", meta)
    io.write_text(out_dir / "significance.csv", sig.to_csv(index=False))
    io.write_text(out_dir / "significance.md", significance_markdown(sig))
    io.write_table(pa.Table.from_pandas(table.drop(columns=["processing_time_ms"]), preserve_index=False), out_dir / "comparison.parquet", meta)
    io.write_table(pa.Table.from_pandas(scenes, preserve_index=False), out_dir / "per_scene.parquet", meta)
    io.write_text(out_dir / "comparison.csv", table.to_csv(index=False))
    # the HTML report (snakemake --report) shows these pages inline
    io.write_text(out_dir / "comparison.html", html_page("Comparison", table.drop(columns=["metadata"], errors="ignore")))
    io.write_text(out_dir / "significance.html", html_page("Paired comparisons", sig))
    io.write_text(out_dir / "per_scene.html", html_page("Per-scene values", scenes))
    io.write_text(out_dir / "per_scene.csv", scenes.to_csv(index=False))
    notes = degenerate_notes(table, cfg["verification"]["distractor_scenes"] if cfg["verification"]["enabled"] else None)
    io.write_text(out_dir / "comparison.md", to_markdown(table) + ("\nNot plain results:\n\n" + "".join(f"- {n}\n" for n in notes)
                                                                   if notes else ""))
    return table
