"""Plots of a run (matplotlib, PNG + SVG), one function per figure, each from the result files.

Colours are per descriptor (:func:`descriptor_colours`: matplotlib's ``tab10`` in config order,
``tab20`` beyond 10 descriptors so that 20 stay distinct), line styles per keypoint
set, the same in every figure. Each figure's caption (:data:`CAPTIONS`) states the metric's
definition and parameters; the HTML report shows it under the figure.

Words on the figures are plain (issue 18): each title says what is measured and, for the ROC and
precision-recall figures, which matcher or which list; axis labels say what a value is a fraction
of; no internal symbol (R, MMA, true mAP) is shown without words. The definitions stay in the
captions. A figure with nothing to draw says why (task disabled, setting that keeps no list).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from descbench import io
from descbench.fileops import atomic_path
from descbench.paths import ResultPaths, score_tasks_on
from descbench.report.figures import CAPTIONS, FIGURES  # noqa: F401  (CAPTIONS: the HTML report's)

LINESTYLES = ("-", "--", ":", "-.")


def descriptor_colours(names: list[str]) -> dict[str, tuple]:
    """One colour per descriptor, in config order: ``tab10``, or ``tab20`` for 11-20 descriptors
    (beyond 20 the colours repeat; the labels still tell them apart)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {d: cmap(i % cmap.N) for i, d in enumerate(names)}


def _style(table: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(descriptor, keypoint set) -> matplotlib line style (colour by descriptor, dash by set)."""
    descs = list(dict.fromkeys(table.descriptor))
    colours = descriptor_colours(descs)
    sets = list(dict.fromkeys(table.keypoint_set))
    return {(d, k): {"color": colours[d], "linestyle": LINESTYLES[sets.index(k) % len(LINESTYLES)],
                     "label": f"{d} / {k}" if len(sets) > 1 else d}
            for d, k in zip(table.descriptor, table.keypoint_set)}


def _save(fig, out_dir: Path, name: str) -> None:
    for ext in ("png", "svg"):
        # SVG: no date in the metadata, so the file depends on the data alone
        with atomic_path(out_dir / f"{name}.{ext}") as tmp:  # a killed job leaves no half-drawn figure
            fig.savefig(tmp, format=ext, dpi=120, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)


def _rows(paths: list[str]) -> pd.DataFrame:
    from descbench.report.table import load_rows

    return load_rows([Path(p) for p in paths], None)


def _legend(ax, styles: dict) -> None:
    """The legend outside the axes, right of them: it never hides a curve, and matplotlib's
    ``loc="best"`` search (42 s of the plots job at 116 scenes x 20 descriptors) is not needed.
    Its title says what a label names: "descriptor / keypoint set", or, with one keypoint set,
    "descriptor (keypoint set <name>)" (the labels are then the descriptors alone)."""
    if not ax.get_legend_handles_labels()[0]:
        return  # nothing drawn: no empty legend box (matplotlib would warn)
    sets = list(dict.fromkeys(k for _, k in styles))
    title = f"descriptor (keypoint set {sets[0]})" if len(sets) == 1 else "descriptor / keypoint set"
    ax.legend(fontsize=8, title=title, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _no_data(ax, why: str) -> None:
    """Say in the axes why a figure has no curve (instead of an empty frame)."""
    ax.text(0.5, 0.5, f"nothing to show:\n{why}", ha="center", va="center", fontsize=9, color="dimgrey",
            transform=ax.transAxes, wrap=True)


def _setting(run, section: str, key: str) -> list:
    """The values of one scoring setting over the run's descriptors, in order, each once
    (descriptors may override it: ``descriptors.<d>.overrides``, descbench.config.effective_config)."""
    from descbench.config import effective_config

    descs = dict.fromkeys(d for _, d in run.combos)
    return list(dict.fromkeys(effective_config(run.cfg, d)[section][key] for d in descs)) or [run.cfg[section][key]]


def _px(values: list) -> str:
    """'2 px', or '2 or 3 px (per descriptor)' when descriptors override the setting."""
    return f"{values[0]:g} px" if len(values) == 1 else " or ".join(f"{v:g}" for v in values) + " px (per descriptor)"


def mean_roc(roc: pd.DataFrame, fpr_grid: np.ndarray) -> np.ndarray | None:
    """Vertical average of the pairs' ROC curves: per (scene, pair), the TPR at FPR x is the best
    TPR among its operating points with FPR <= x (its points in ``point`` order); then the mean
    over pairs at every x of ``fpr_grid``. None without pairs."""
    curves = []
    for _, g in roc.groupby([c for c in ("scene", "query_image", "pair") if c in roc.columns], sort=True):
        g = g.sort_values("point")
        idx = np.searchsorted(g.fpr.to_numpy(), fpr_grid, side="right") - 1
        best = np.maximum.accumulate(g.tpr.to_numpy())
        curves.append(np.where(idx >= 0, best[np.clip(idx, 0, None)], 0.0))
    return np.mean(curves, axis=0) if curves else None


MMA_PANELS = (("mma_at_", "all scenes"), ("mma_i_at_", "illumination scenes (i_)"), ("mma_v_at_", "viewpoint scenes (v_)"))


def plot_mma(table, styles, mma_thresholds, ax_row):
    for ax, (prefix, title) in zip(ax_row, MMA_PANELS):
        for _, r in table.iterrows():
            cols = [f"{prefix}{_key(t)}" for t in mma_thresholds]
            if all(c in table.columns for c in cols):
                ax.plot(mma_thresholds, r[cols].to_numpy(float), marker="o", ms=3, **styles[(r.descriptor, r.keypoint_set)])
        ax.set(title=title, xlabel="reprojection error threshold (px)", ylim=(0, 1))
    ax_row[0].set_ylabel("fraction of matches within the threshold\n(mean over image pairs)")


def _key(t) -> str:
    from descbench.columns import threshold_key

    return threshold_key(t)


@dataclass(frozen=True)
class Run:
    """What every figure reads: the result files, the comparison table and the styles."""

    paths: ResultPaths
    combos: list[tuple[str, str]]
    cfg: dict
    report_dir: Path
    table: pd.DataFrame
    styles: dict

    def rows(self, task: str, kind: str):
        """(keypoint set, descriptor, every scene's rows of ``<task>/<...>/<scene>.<kind>``) per
        combination; nothing when the task is disabled."""
        if task not in score_tasks_on(self.cfg):
            return
        for ks, d in self.combos:
            yield ks, d, _rows([self.paths.task_file(task, ks, d, s, kind) for s in self.paths.scenes])


def draw_mma(run: Run, plt):
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    fig.suptitle("Matching accuracy: mutual nearest-neighbour matches of image 1 in images 2-6", y=1.0, va="bottom")
    if run.cfg["matching"]["enabled"]:
        plot_mma(run.table, run.styles, run.cfg["matching"]["mma_thresholds"], axes)
    else:
        _no_data(axes[1], "matching is disabled (matching.enabled: false)")
    _legend(axes[-1], run.styles)
    return fig


def draw_homography_accuracy(run: Run, plt):
    fig, ax = plt.subplots(figsize=(5.5, 4))
    grid = np.linspace(0, 10, 101)
    for ks, d, pairs in run.rows("matching", "pairs.parquet"):
        from descbench.metrics.aggregate import with_data
        from descbench.metrics.matching import homography_accuracy

        # the table's definition: pairs without keypoints (NaN, no data) left out, failures (inf) counted
        err = with_data(pairs).corner_error.to_numpy(float)
        ax.plot(grid, homography_accuracy(err, grid), **run.styles[(d, ks)])
    ax.set(title="Homography estimated by RANSAC from mutual nearest-neighbour matches",
           xlabel="corner error threshold (px)", ylabel="fraction of image pairs within the threshold", ylim=(0, 1.02))
    ax.title.set_fontsize(9)
    if not ax.lines:
        _no_data(ax, "matching is disabled (matching.enabled: false)")
    _legend(ax, run.styles)
    return fig


ROC_MATCHER = "threshold"  # the matcher the ROC figure shows (descbench.metrics.classifier.MATCHERS)


def draw_roc(run: Run, plt):
    """The threshold matcher's ROC (every keypoint pair of an image pair is accepted when its
    descriptor distance is within the threshold), vertically averaged over image pairs."""
    fig, ax = plt.subplots(figsize=(5, 5))
    fpr_grid = np.linspace(0, 1, 201)
    for ks, d, roc in run.rows("matching", "roc.parquet"):
        mean = mean_roc(roc[roc.matcher == ROC_MATCHER], fpr_grid)
        if mean is not None:
            ax.plot(fpr_grid, mean, **run.styles[(d, ks)])
    drawn = bool(ax.lines)
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=0.8, label="chance")
    eps = _px(_setting(run, "matching", "classifier_epsilon_px"))
    ax.set(title=f"ROC of the threshold matcher over all keypoint pairs\n(a pair is correct when image 1's keypoint "
                 f"projects within {eps} of image k's)",
           xlabel="false positive rate (fraction of wrong pairs accepted)",
           ylabel="true positive rate (fraction of correct pairs accepted)", xlim=(0, 1), ylim=(0, 1))
    ax.title.set_fontsize(9)
    if not drawn:
        _no_data(ax, "matching.classifier_matchers leaves out\nthe threshold matcher"
                 if run.cfg["matching"]["enabled"] else "matching is disabled (matching.enabled: false)")
    _legend(ax, run.styles)
    return fig


def draw_verification_pr(run: Run, plt):
    """Precision-recall of the keypoint verification list (``verification.candidates: nearest``:
    each query's nearest keypoint in images 2-6 and in each distractor image), every scene's list
    pooled into one, sorted by descriptor distance."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for ks, d, lst in run.rows("verification", "list.parquet"):
        order = np.argsort(lst.distance.to_numpy(), kind="stable")
        pos = (lst.label.to_numpy()[order] == 1).astype(float)
        if pos.sum():
            tp = np.cumsum(pos)
            ax.plot(tp / pos.sum(), tp / np.arange(1, len(pos) + 1), **run.styles[(d, ks)])
    ax.set(title="Precision-recall of keypoint verification, one list of all scenes:\neach query's nearest keypoint "
                 "in images 2-6 and in the distractor images",
           xlabel="recall (fraction of the correct keypoints accepted)",
           ylabel="precision (fraction of the accepted\nkeypoints that are correct)", xlim=(0, 1), ylim=(0, 1.02))
    ax.title.set_fontsize(9)
    if not ax.lines:
        if not run.cfg["verification"]["enabled"]:
            why = "keypoint verification is disabled (verification.enabled: false)"
        elif "nearest" not in _setting(run, "verification", "candidates"):
            why = "verification.candidates: all keeps no list\n(its AP is computed from counts; see the tables)"
        else:
            why = "no query has a correct keypoint in the lists"
        _no_data(ax, why)
    _legend(ax, run.styles)
    return fig


def draw_per_scene_map(run: Run, plt):
    """Each scene's keypoint-retrieval mean average precision: illumination (``i_``) and
    viewpoint (``v_``) scenes apart, and a third panel for scenes named otherwise (folder datasets)
    when there are any."""
    per_scene = pd.read_csv(run.report_dir / "per_scene.csv")
    order = per_scene.groupby("scene").true_map.mean().sort_values()
    groups = [(lambda s: s.startswith("i_"), "illumination scenes (i_)"), (lambda s: s.startswith("v_"), "viewpoint scenes (v_)")]
    if any(not s.startswith(("i_", "v_")) for s in order.index):
        groups.append((lambda s: not s.startswith(("i_", "v_")), "other scenes"))
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), max(3, 0.18 * len(order) / 2 + 1.5)))
    fig.suptitle("Keypoint retrieval per scene: mean average precision over the scene's queries", y=1.0, va="bottom")
    for ax, (member, title) in zip(axes, groups):
        names = [s for s in order.index if member(s)]
        for (d, ks), g in per_scene.groupby(["descriptor", "keypoint_set"], sort=False):
            g = g.set_index("scene").reindex(names)
            st = run.styles[(d, ks)]
            ax.plot(g.true_map, np.arange(len(names)), "o", color=st["color"], ms=4, label=st["label"],
                    fillstyle="full" if st["linestyle"] == "-" else "none")
        ax.set_yticks(np.arange(len(names)), names, fontsize=7)
        ax.set(title=title, xlabel="mean average precision", ylabel="scene", xlim=(0, 1))
    _legend(axes[-1], run.styles)
    return fig


RANK_BINS = np.array([1, 2, 3, 4, 5, 6, 11, 21, 51, np.inf])
RANK_LABELS = ["1", "2", "3", "4", "5", "6-10", "11-20", "21-50", ">50"]


def draw_rank_histogram(run: Run, plt):
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(1, len(run.combos))
    for i, (ks, d, q) in enumerate(run.rows("scores", "queries.parquet")):
        r = q["rank"].to_numpy(float)
        r = r[np.isfinite(r)]
        st = run.styles[(d, ks)]
        ax.bar(np.arange(len(RANK_LABELS)) + i * width, np.histogram(r, bins=RANK_BINS)[0] / max(1, len(r)), width=width,
               color=st["color"], label=st["label"], hatch=None if st["linestyle"] == "-" else "//")
    ax.set_xticks(np.arange(len(RANK_LABELS)) + 0.4 - width / 2, RANK_LABELS)
    ax.set(title="Keypoint retrieval: where the correct keypoint ranks",
           xlabel="rank of the correct keypoint among image k's keypoints\n(1 = the nearest descriptor)",
           ylabel="fraction of the queries that have\na correct keypoint in image k")
    if not ax.patches:
        _no_data(ax, "keypoint retrieval has no scenes")
    _legend(ax, run.styles)
    return fig


def draw_keypoint_stats(run: Run, plt):
    stats = pd.read_csv(run.report_dir / "keypoint_stats.csv")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    px = run.cfg["matching"]["repeatability_px"]
    axes[0].bar(stats.keypoint_set, stats.keypoints_per_image_mean, color="tab:grey")
    axes[0].set(title="Keypoints per image", ylabel="keypoints per image (mean over images)", xlabel="keypoint set")
    axes[1].bar(stats.keypoint_set, stats.repeatability, color="tab:grey")
    axes[1].set(title=f"Repeatability within {px:g} px",
                ylabel=f"fraction of keypoints found again\nwithin {px:g} px in the other image", xlabel="keypoint set",
                ylim=(0, 1))
    fig.subplots_adjust(wspace=0.35)  # room for the second panel's two-line label
    for ax in axes:
        ax.tick_params(axis="x", rotation=30, labelsize=8)
    return fig


DRAW = {"mma": draw_mma, "homography_accuracy": draw_homography_accuracy, "roc": draw_roc,
        "verification_pr": draw_verification_pr, "per_scene_map": draw_per_scene_map,
        "rank_histogram": draw_rank_histogram, "keypoint_stats": draw_keypoint_stats}


def make_figures(paths: ResultPaths, combos: list[tuple[str, str]], cfg: dict, report_dir: Path, out_dir: Path) -> list[Path]:
    """Write every figure of :data:`FIGURES` (PNG + SVG) into ``out_dir``; returns the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "descbench"  # deterministic SVG ids
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(Path(report_dir) / "comparison.csv")
    run = Run(paths, combos, cfg, Path(report_dir), table, _style(table))
    for name in FIGURES:
        fig = DRAW[name](run, plt)
        _save(fig, out_dir, name)
        plt.close(fig)
    return [out_dir / f"{n}.png" for n in FIGURES]
