"""What every figure of a run shares: the run it is drawn from, the colours and line styles, the
legend, the "nothing to show" note and the files' writing.

Colours are per descriptor (:func:`descriptor_colours`: matplotlib's ``tab10`` in config order,
``tab20`` beyond 10 descriptors so that 20 stay distinct), line styles per keypoint set, the same
in every figure. The figures themselves live with what they show: each scoring task's in its module
(``ScoringTask.figures``, :mod:`descbench.tasks`), the keypoint sets' in :mod:`descbench.report.plots`.

Words on the figures are plain: each title says what is measured and, for the ROC and
precision-recall figures, which matcher or which list; axis labels say what a value is a fraction
of; no internal symbol (R, MMA, true mAP) is shown without words. The definitions stay in the
captions. A figure with nothing to draw says why (task disabled, setting that keeps no list). A
curve of millions of points is drawn at :data:`MAX_CURVE_POINTS` evenly spaced ranks
(:func:`curve_points`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from descbench.fileops import atomic_path
from descbench.paths import ResultPaths
from descbench.tasks.base import load_rows

LINESTYLES = ("-", "--", ":", "-.")


def descriptor_colours(names: list[str]) -> dict[str, tuple]:
    """One colour per descriptor, in config order: ``tab10``, or ``tab20`` for 11-20 descriptors
    (beyond 20 the colours repeat; the labels still tell them apart)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {d: cmap(i % cmap.N) for i, d in enumerate(names)}


def line_styles(table: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(descriptor, keypoint set) -> matplotlib line style (colour by descriptor, dash by set)."""
    descs = list(dict.fromkeys(table.descriptor))
    colours = descriptor_colours(descs)
    sets = list(dict.fromkeys(table.keypoint_set))
    return {(d, k): {"color": colours[d], "linestyle": LINESTYLES[sets.index(k) % len(LINESTYLES)],
                     "label": f"{d} / {k}" if len(sets) > 1 else d}
            for d, k in zip(table.descriptor, table.keypoint_set)}


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display), with SVG ids that depend on the figure
    alone (``svg.hashsalt``), so that the same data gives the same SVG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "descbench"
    return plt


def save(fig, out_dir: Path, name: str) -> None:
    """``<out_dir>/<name>.png`` and ``.svg``."""
    for ext in ("png", "svg"):
        # SVG: no date in the metadata, so the file depends on the data alone
        with atomic_path(out_dir / f"{name}.{ext}") as tmp:  # a killed job leaves no half-drawn figure
            fig.savefig(tmp, format=ext, dpi=120, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)


def draw_and_save(draw, out_dir: Path, name: str) -> None:
    """Draw one figure with ``draw(plt)`` (it returns the figure), save it as :func:`save` does and
    close it."""
    plt = pyplot()
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    fig = draw(plt)
    save(fig, Path(out_dir), name)
    plt.close(fig)


# a curve of more points than this is drawn at at most this many of them (:func:`curve_points`)
MAX_CURVE_POINTS = 4000


def curve_points(y: np.ndarray, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """int64 indices, ascending, of the points a figure draws of a curve whose x grows with the
    index and whose y values are ``y``: all of them when there are at most ``max_points``; else
    the first and the last point and, in each of ``max_points // 2`` equal runs of consecutive
    points, the one with the smallest and the one with the largest y (min-max decimation). Every
    run's vertical extent is kept, so the line covers the same pixels: a figure is 5-6 inches
    at 120 dpi, several runs to a pixel column. (Drawing the 6.5 M points of the precision-recall
    curve of 116 scenes took a third of the plots job.) Only the drawing is thinned; every number
    in the tables uses every point."""
    y = np.asarray(y)
    n = y.shape[0]
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    runs = max(1, max_points // 2)
    k = -(-n // runs)  # points per run (the last run padded with the last value)
    padded = np.concatenate([y, np.full(runs * k - n, y[-1], dtype=y.dtype)]).reshape(runs, k)
    base = np.arange(runs, dtype=np.int64) * k
    picks = np.concatenate([[0, n - 1], base + padded.argmin(axis=1), base + padded.argmax(axis=1)])
    return np.unique(np.minimum(picks, n - 1))


def legend(ax, styles: dict) -> None:
    """The legend outside the axes, right of them: it never hides a curve, and matplotlib's
    ``loc="best"`` search (42 s of the plots job at 116 scenes x 20 descriptors) is not needed.
    Its title says what a label names: "descriptor / keypoint set", or, with one keypoint set,
    "descriptor (keypoint set <name>)" (the labels are then the descriptors alone)."""
    if not ax.get_legend_handles_labels()[0]:
        return  # nothing drawn: no empty legend box (matplotlib would warn)
    sets = list(dict.fromkeys(k for _, k in styles))
    title = f"descriptor (keypoint set {sets[0]})" if len(sets) == 1 else "descriptor / keypoint set"
    ax.legend(fontsize=8, title=title, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def no_data(ax, why: str) -> None:
    """Say in the axes why a figure has no curve (instead of an empty frame)."""
    ax.text(0.5, 0.5, f"nothing to show:\n{why}", ha="center", va="center", fontsize=9, color="dimgrey",
            transform=ax.transAxes, wrap=True)


def setting(run, section: str, key: str) -> list:
    """The values of one scoring setting over the run's descriptors, in order, each once
    (descriptors may override it: ``descriptors.<d>.overrides``; ``run.effective`` holds each
    descriptor's effective config, descbench.config.effective_config)."""
    descs = dict.fromkeys(d for _, d in run.combos)
    return list(dict.fromkeys(run.effective[d][section][key] for d in descs)) or [run.cfg[section][key]]


def px(values: list) -> str:
    """'2 px', or '2 or 3 px (per descriptor)' when descriptors override the setting."""
    return f"{values[0]:g} px" if len(values) == 1 else " or ".join(f"{v:g}" for v in values) + " px (per descriptor)"


@dataclass(frozen=True)
class Run:
    """What every figure reads: the result files, the comparison table, the styles and each
    descriptor's effective config (``effective``)."""

    paths: ResultPaths
    combos: list[tuple[str, str]]
    cfg: dict
    report_dir: Path
    table: pd.DataFrame
    styles: dict
    effective: dict

    def rows(self, task, kind: str, columns: list[str] | None = None, where: tuple[str, object] | None = None):
        """(keypoint set, descriptor, every scene's rows of ``task``'s ``<scene>.<kind>``) per
        combination; nothing when the scoring task ``task`` is disabled. ``columns``, ``where``:
        :func:`descbench.tasks.base.load_rows`'s."""
        if not task.enabled(self.cfg):
            return
        for ks, d in self.combos:
            yield ks, d, load_rows([task.file(self.paths, ks, d, s, kind) for s in self.paths.scenes], None, columns, where)


def cumulative_panels(plt, panels: list[tuple[str, list[tuple[str, np.ndarray]]]], max_x: float, n_points: int,
                      xlabel: str, legend_title: str, title: str):
    """glue-factory's cumulative error figure (``plot_cumulative``): one panel per ``(panel title,
    [(line label, errors)])``, each line the fraction of its errors at most x
    (:func:`descbench.metrics.matching.homography_accuracy`: inf never counts; the caller leaves out
    NaN, pairs without data) on ``n_points`` values of x in ``[0, max_x]``; one colour per line
    position, the legend right of the last panel."""
    from descbench.metrics.matching import homography_accuracy

    n_lines = max((len(lines) for _, lines in panels), default=0)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1.5, 3.8), sharey=True, squeeze=False)
    grid = np.linspace(0.0, max_x, n_points)
    cmap = plt.get_cmap("tab10" if n_lines <= 10 else "tab20")
    for ax, (panel_title, lines) in zip(axes[0], panels):
        for i, (label, errors) in enumerate(lines):
            ax.plot(grid, homography_accuracy(errors, grid), color=cmap(i % cmap.N), label=label)
        ax.set(title=panel_title, xlabel=xlabel, ylim=(0, 1.02), xlim=(0, max_x))
        ax.title.set_fontsize(9)
    axes[0][0].set_ylabel("fraction of image pairs within the threshold")
    if n_lines:
        axes[0][-1].legend(fontsize=7, title=legend_title, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                           borderaxespad=0.0)
    fig.suptitle(title, y=1.0, va="bottom", fontsize=10)
    return fig
