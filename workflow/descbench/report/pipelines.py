"""The pipelines table (``report/pipelines.{parquet,csv,md}``): one row per (keypoint set,
descriptor, matcher) of the matcher stage, its columns :func:`descbench.tasks.pipelines.summarize_pipeline`'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from descbench import io
from descbench.config import learned_weights
from descbench.datasets import images_note
from descbench.paths import ResultPaths
from descbench.report.patches import markdown
from descbench.tasks.pipelines import KINDS, NAME, estimator_settings, read_pipeline, summarize_pipeline

FIGURE = "pipelines_corner_error"  # report/plots/<FIGURE>.{png,svg}; caption captions/<FIGURE>.rst
CUMULATIVE_MAX_PX = 10.0  # the figure's x range, as glue-factory's plot_cumulative([0, 10])

# The descriptor metrics of the comparison table (one row per keypoint set + descriptor) shown
# beside each pipeline of that keypoint set + descriptor (the matcher does not change them).
DESCRIPTOR_COLUMNS = ("true_map_micro", "keypoint_verification_ap")
# The Markdown table's columns (the Parquet and CSV files have every column).
MARKDOWN_LEAD = ("keypoint_set", "descriptor", "matcher", "true_map_micro", "mean_matches", "mean_prec_at_1", "mean_prec_at_3", "mma_at_3",
                 "matching_score")
MARKDOWN_PER_ESTIMATOR = ("auc_at_1", "auc_at_3", "auc_at_5", "ransac_th")
MARKDOWN_TAIL = ("weights",)


def build(paths: ResultPaths, combos: list, cfg: dict,
          comparison: pd.DataFrame | None = None) -> tuple[pd.DataFrame, dict[tuple[str, str, str], pd.DataFrame]]:
    """Every pipeline's row, in ``combos`` order (``[keypoint_set, descriptor, matcher]``), with
    :data:`DESCRIPTOR_COLUMNS` of ``comparison`` (the comparison table) where it has them; and
    each pipeline's estimates rows (``{(keypoint_set, descriptor, matcher): rows}``, every scene:
    its files are read once, here, for the row and the figure, :func:`draw_cumulative`)."""
    rows, estimates = [], {}
    settings = estimator_settings(cfg["pipelines"])  # once for every pipeline
    for ks, d, m in combos:
        files = {k: [Path(paths.match_task_file(NAME, ks, d, m, s, k)) for s in paths.scenes] for k in KINDS[:2]}
        pairs, estimates[(ks, d, m)] = read_pipeline(files["pairs.parquet"], files["estimates.parquet"])
        extra = {}
        if comparison is not None:
            hit = comparison[(comparison.keypoint_set == ks) & (comparison.descriptor == d)]
            extra = {c: hit[c].iloc[0] for c in DESCRIPTOR_COLUMNS if c in hit.columns and len(hit) == 1}
        rows.append({"keypoint_set": ks, "descriptor": d, "matcher": m, "matcher_type": cfg["matchers"][m]["matcher"],
                     "weights": learned_weights(cfg, ks, d, m), **extra,
                     **summarize_pipeline(pairs, estimates[(ks, d, m)], cfg, settings)})
    return pd.DataFrame(rows), estimates


def markdown_columns(table: pd.DataFrame, cfg: dict) -> list[str]:
    cols = [c for c in MARKDOWN_LEAD if c in table.columns]
    for e in cfg["pipelines"]["estimators"]:
        cols += [f"{e}_{c}" for c in MARKDOWN_PER_ESTIMATOR if f"{e}_{c}" in table.columns and not (e == "dlt" and c == "ransac_th")]
    # the networks' weights, when a row has any (RANDOM in capitals: not a published model)
    return cols + [c for c in MARKDOWN_TAIL if c in table.columns and table[c].astype(bool).any()]


def corner_errors(est: pd.DataFrame, estimator: str, ransac_th: float) -> np.ndarray:
    """One pipeline's corner errors (px; inf failed, NaN no data) of ``estimator`` at ``ransac_th``
    (NaN: the DLT), every pair of every scene: ``est`` its estimates rows (:func:`build`)."""
    rows = est[(est.estimator == estimator) & ((est.ransac_th == ransac_th) | (est.ransac_th.isna() & np.isnan(ransac_th)))]
    return rows.corner_error.to_numpy(np.float64)


def draw_cumulative(estimates: dict, table: pd.DataFrame, cfg: dict, plt):
    """glue-factory's cumulative plot of the corner errors (``plot_cumulative``): per estimator (one
    panel), per pipeline (one line), the fraction of pairs whose error is at most x px, at the
    estimator's best RANSAC threshold for that pipeline (the table's ``<estimator>_ransac_th``):
    :func:`descbench.metrics.matching.homography_accuracy` (failures never reach x; pairs without
    data left out). ``estimates``: each pipeline's estimates rows, :func:`build`'s."""
    from descbench.report.drawing import cumulative_panels

    panels = []
    for e in cfg["pipelines"]["estimators"]:
        lines = [(f"{r.descriptor} / {r.keypoint_set} + {r.matcher}",
                  corner_errors(estimates[(r.keypoint_set, r.descriptor, r.matcher)], e, float(getattr(r, f"{e}_ransac_th"))))
                 for r in table.itertuples(index=False)]
        panels.append((e if e == "dlt" else f"{e} (best ransac_th per pipeline)", lines))
    return cumulative_panels(plt, panels, CUMULATIVE_MAX_PX, 201, "corner error threshold (px, image-edge corners)",
                             "descriptor / keypoint set + matcher",
                             "Homography from each pipeline's matches: cumulative corner error (glue-factory's protocol)")


def write(paths: ResultPaths, combos: list, cfg: dict, out_dir: Path, provenance: dict,
          comparison: Path | None = None, plots_dir: Path | None = None) -> pd.DataFrame:
    """Write the pipelines table's three files into ``out_dir`` (and, with ``plots_dir``, its
    figure :data:`FIGURE`); returns the table. ``comparison``: the comparison table's Parquet
    file, whose descriptor metrics join each row."""
    table, estimates = build(paths, combos, cfg, None if comparison is None else pd.read_parquet(comparison))
    out_dir = Path(out_dir)
    # the protocol and resize only where set: a config without them writes what it wrote before they existed
    setting = {k: cfg[k] for k in ("protocol", "resize") if cfg.get(k)}
    io.write_table(pa.Table.from_pandas(table, preserve_index=False), out_dir / "pipelines.parquet",
                   io.provenance("pipelines_report", {"pipelines": cfg["pipelines"], "matchers": cfg["matchers"], **setting},
                                 **provenance))
    io.write_text(out_dir / "pipelines.csv", table.to_csv(index=False))
    note = images_note(cfg)
    io.write_text(out_dir / "pipelines.md", (f"{note}\n\n" if note else "") + markdown(table[markdown_columns(table, cfg)]))
    if plots_dir is not None:
        from descbench.report.drawing import draw_and_save

        draw_and_save(lambda plt: draw_cumulative(estimates, table, cfg, plt), plots_dir, FIGURE)
    return table
