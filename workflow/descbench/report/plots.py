"""Plots of a run (matplotlib, PNG + SVG), one function per figure, each from the result files.

Colours are per descriptor (:func:`descriptor_colours`: matplotlib's ``tab10`` in config order,
``tab20`` beyond 10 descriptors so that 20 stay distinct), line styles per keypoint
set, the same in every figure. Each figure's caption (:data:`CAPTIONS`) states the metric's
definition and parameters; the HTML report shows it under the figure.
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


def _legend(ax) -> None:
    """The legend outside the axes, right of them: it never hides a curve, and matplotlib's
    ``loc="best"`` search (42 s of the plots job at 116 scenes x 20 descriptors) is not needed."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def mean_roc(roc: pd.DataFrame, fpr_grid: np.ndarray) -> np.ndarray | None:
    """Vertical average of the pairs' ROC curves: per (scene, pair), the TPR at FPR x is the best
    TPR among its operating points with FPR <= x (its points in ``point`` order); then the mean
    over pairs at every x of ``fpr_grid``. None without pairs."""
    curves = []
    for _, g in roc.groupby(["scene", "pair"], sort=True):
        g = g.sort_values("point")
        idx = np.searchsorted(g.fpr.to_numpy(), fpr_grid, side="right") - 1
        best = np.maximum.accumulate(g.tpr.to_numpy())
        curves.append(np.where(idx >= 0, best[np.clip(idx, 0, None)], 0.0))
    return np.mean(curves, axis=0) if curves else None


def plot_mma(table, styles, mma_thresholds, ax_row):
    for ax, prefix, title in zip(ax_row, ("mma_at_", "mma_i_at_", "mma_v_at_"), ("all pairs", "illumination", "viewpoint")):
        for _, r in table.iterrows():
            cols = [f"{prefix}{_key(t)}" for t in mma_thresholds]
            if all(c in table.columns for c in cols):
                ax.plot(mma_thresholds, r[cols].to_numpy(float), marker="o", ms=3, **styles[(r.descriptor, r.keypoint_set)])
        ax.set(title=title, xlabel="threshold (px)", ylim=(0, 1))
    ax_row[0].set_ylabel("MMA")


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
    if run.cfg["matching"]["enabled"]:
        plot_mma(run.table, run.styles, run.cfg["matching"]["mma_thresholds"], axes)
    _legend(axes[-1])
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
    ax.set(xlabel="corner error threshold (px)", ylabel="fraction of pairs", ylim=(0, 1.02))
    _legend(ax)
    return fig


def draw_roc(run: Run, plt):
    fig, ax = plt.subplots(figsize=(5, 5))
    fpr_grid = np.linspace(0, 1, 201)
    for ks, d, roc in run.rows("matching", "roc.parquet"):
        mean = mean_roc(roc[roc.matcher == "threshold"], fpr_grid)
        if mean is not None:
            ax.plot(fpr_grid, mean, **run.styles[(d, ks)])
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", xlim=(0, 1), ylim=(0, 1))
    _legend(ax)
    return fig


def draw_verification_pr(run: Run, plt):
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for ks, d, lst in run.rows("verification", "list.parquet"):
        order = np.argsort(lst.distance.to_numpy(), kind="stable")
        pos = (lst.label.to_numpy()[order] == 1).astype(float)
        if pos.sum():
            tp = np.cumsum(pos)
            ax.plot(tp / pos.sum(), tp / np.arange(1, len(pos) + 1), **run.styles[(d, ks)])
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.02))
    _legend(ax)
    return fig


def draw_per_scene_map(run: Run, plt):
    per_scene = pd.read_csv(run.report_dir / "per_scene.csv")
    order = per_scene.groupby("scene").true_map.mean().sort_values()
    fig, axes = plt.subplots(1, 2, figsize=(12, max(3, 0.18 * len(order) / 2 + 1.5)))
    for ax, prefix, title in zip(axes, ("i_", "v_"), ("illumination scenes", "viewpoint scenes")):
        names = [s for s in order.index if s.startswith(prefix)]
        for (d, ks), g in per_scene.groupby(["descriptor", "keypoint_set"], sort=False):
            g = g.set_index("scene").reindex(names)
            st = run.styles[(d, ks)]
            ax.plot(g.true_map, np.arange(len(names)), "o", color=st["color"], ms=4, label=st["label"],
                    fillstyle="full" if st["linestyle"] == "-" else "none")
        ax.set_yticks(np.arange(len(names)), names, fontsize=7)
        ax.set(title=title, xlabel="true mAP", xlim=(0, 1))
    _legend(axes[1])
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
    ax.set(xlabel="rank of the ground truth", ylabel="fraction of queries (R = 1)")
    _legend(ax)
    return fig


def draw_keypoint_stats(run: Run, plt):
    stats = pd.read_csv(run.report_dir / "keypoint_stats.csv")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    axes[0].bar(stats.keypoint_set, stats.keypoints_per_image_mean, color="tab:grey")
    axes[0].set(ylabel="mean keypoints per image")
    axes[1].bar(stats.keypoint_set, stats.repeatability, color="tab:grey")
    axes[1].set(ylabel=f"repeatability at {run.cfg['matching']['repeatability_px']:g} px", ylim=(0, 1))
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
