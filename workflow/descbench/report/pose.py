"""The pose table (``report/pose.{parquet,csv,md}``): one row per (keypoint set, descriptor,
matcher) of a posed dataset, its columns :func:`descbench.tasks.pose.summarize_pose`'s; and the
cumulative pose-error figure (``report/plots/pose_error.{png,svg}``). The Markdown file's header
names every estimator with its RANSAC thresholds and the libraries' versions, so that a table
copied elsewhere still says how its AUCs were measured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from descbench import io
from descbench.columns import threshold_key
from descbench.config import learned_weights
from descbench.paths import ResultPaths
from descbench.report.patches import markdown
from descbench.tasks.pose import KINDS, NAME, epipolar_key, estimator_settings, read_pose, summarize_pose

FIGURE = "pose_error"  # report/plots/<FIGURE>.{png,svg}; caption captions/<FIGURE>.rst
CUMULATIVE_MAX_DEG = 30.0  # the figure's x range, as glue-factory's plot_cumulative([0, 30])
MARKDOWN_TAIL = ("weights",)
# the depth metrics in the Markdown table, where the run has them (the Parquet and CSV files have all)
MARKDOWN_DEPTH = ("reproj_prec_at_3", "covisible_percent", "gt_match_recall_at_3", "gt_match_precision_at_3", "mma_at_3",
                  "true_map")


def build(paths: ResultPaths, combos: list, cfg: dict) -> tuple[pd.DataFrame, dict[tuple[str, str, str], pd.DataFrame]]:
    """Every combination's row, in ``combos`` order (``[keypoint_set, descriptor, matcher]``), and
    its estimates rows (``{(keypoint_set, descriptor, matcher): rows}``, every scene: read once,
    here, for the row and the figure)."""
    rows, estimates = [], {}
    section = cfg["pose"]
    settings = estimator_settings(section)
    for ks, d, m in combos:
        files = {k: [Path(paths.match_task_file(NAME, ks, d, m, s, k)) for s in paths.scenes] for k in KINDS[:2]}
        pairs, estimates[(ks, d, m)] = read_pose(files["pairs.parquet"], files["estimates.parquet"])
        rows.append({"keypoint_set": ks, "descriptor": d, "matcher": m, "matcher_type": cfg["matchers"][m]["matcher"],
                     "weights": learned_weights(cfg, ks, d, m), **summarize_pose(pairs, estimates[(ks, d, m)], section, settings)})
    return pd.DataFrame(rows), estimates


def markdown_columns(table: pd.DataFrame, cfg: dict) -> list[str]:
    sec = cfg["pose"]
    cols = ["keypoint_set", "descriptor", "matcher", "matches", *(epipolar_key(t) for t in sec["epipolar_thresholds"]),
            *MARKDOWN_DEPTH]
    for e in sec["estimators"]:
        cols += [f"{e}_auc_at_{threshold_key(t)}" for t in sec["auc_thresholds"]] + [f"{e}_mAA", f"{e}_ransac_th"]
    cols = [c for c in cols if c in table.columns]
    # the networks' weights, when a row has any (RANDOM in capitals: not a published model)
    return cols + [c for c in MARKDOWN_TAIL if c in table.columns and table[c].astype(bool).any()]


def header(cfg: dict, libraries: dict, extension: bool = False) -> str:
    """The Markdown table's header: how the AUCs were measured (estimators, thresholds, the versions
    of OpenCV and of the libraries the estimators ran on)."""
    settings = estimator_settings(cfg["pose"])
    est = "; ".join(f"{e}: ransac_th {', '.join(f'{t:g}' for t in s['ransac_th'])} px"
                    + (" (the best mean AUC reported)" if len(s["ransac_th"]) > 1 else "") for e, s in settings.items())
    # OpenCV (the features, the OpenCV estimators) and the optional libraries the estimators ran on
    libs = ", ".join(f"{k} {v}" for k, v in libraries.items() if v and (k == "opencv" or k in settings))
    aucs = "/".join(f"{t:g}" for t in cfg["pose"]["auc_thresholds"])
    from descbench.datasets import images_note

    note = images_note(cfg)
    text = ((f"{note} " if note else "") + f"Relative pose as glue-factory measures it: AUC of max(rotation, "
            f"translation-direction) error at {aucs} degrees. Estimators: {est}. Libraries: {libs}.")
    if extension:
        text += (" mma_at_<t> and true_map are descbench's extension, not glue-factory's: matches and keypoint retrieval "
                 f"scored against depth reprojections (within {cfg['scoring']['tau_px']:g} px for true_map).")
    return text


def draw_cumulative(estimates: dict, table: pd.DataFrame, cfg: dict, plt):
    """glue-factory's cumulative plot of the pose errors (``plot_cumulative``, 0-30 degrees): per
    estimator (one panel), per combination (one line), the fraction of pairs whose pose error is at
    most x degrees at that combination's best RANSAC threshold (failures never reach x; pairs
    without data left out)."""
    from descbench.report.drawing import cumulative_panels

    panels = []
    for e in cfg["pose"]["estimators"]:
        lines = []
        for r in table.itertuples(index=False):
            est = estimates[(r.keypoint_set, r.descriptor, r.matcher)]
            err = est[(est.estimator == e) & (est.ransac_th == float(getattr(r, f"{e}_ransac_th")))].pose_error.to_numpy(np.float64)
            lines.append((f"{r.descriptor} / {r.keypoint_set} + {r.matcher}", err[~np.isnan(err)]))
        panels.append((f"{e} (best ransac_th per row)", lines))
    return cumulative_panels(plt, panels, CUMULATIVE_MAX_DEG, 301, "pose error threshold (degrees)",
                             "descriptor / keypoint set + matcher",
                             "Relative pose from each combination's matches: cumulative pose error (glue-factory's protocol)")


def write(paths: ResultPaths, combos: list, cfg: dict, out_dir: Path, provenance: dict,
          plots_dir: Path | None = None) -> pd.DataFrame:
    """Write the pose table's three files into ``out_dir`` (and, with ``plots_dir``, its figure
    :data:`FIGURE`); returns the table."""
    from descbench.estimators import library_versions
    from descbench.estimators.relative_pose import LIBRARIES

    table, estimates = build(paths, combos, cfg)
    out_dir = Path(out_dir)
    libraries = library_versions(LIBRARIES)
    io.write_table(pa.Table.from_pandas(table, preserve_index=False), out_dir / "pose.parquet",
                   io.provenance("pose_report", {"pose": cfg["pose"], "estimators": estimator_settings(cfg["pose"]),
                                                 "matchers": cfg["matchers"], "dataset": cfg["dataset"]},
                                 libraries=libraries, **provenance))
    io.write_text(out_dir / "pose.csv", table.to_csv(index=False))
    io.write_text(out_dir / "pose.md", f"{header(cfg, libraries, 'true_map' in table.columns)}\n\n" + markdown(table[markdown_columns(table, cfg)]))
    if plots_dir is not None:
        from descbench.report.drawing import draw_and_save

        draw_and_save(lambda plt: draw_cumulative(estimates, table, cfg, plt), plots_dir, FIGURE)
    return table
