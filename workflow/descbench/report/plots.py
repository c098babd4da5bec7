"""The run's figures (matplotlib, PNG + SVG), each from the result files: every scoring task's
(``ScoringTask.figures``, drawn in the task's module, :mod:`descbench.tasks`) and the keypoint
sets' (:func:`draw_keypoint_stats`). What they share -- colours per descriptor, line styles per
keypoint set, the legend, the words -- is :mod:`descbench.report.drawing`. Each figure's caption
(:data:`descbench.report.figures.CAPTIONS`) states the metric's definition and parameters; the
HTML report shows it under the figure.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from descbench.config import effective_config
from descbench.paths import ResultPaths
from descbench.report.drawing import Run, line_styles, save
from descbench.report.figures import FIGURES
from descbench.tasks import SCORING_TASKS


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


# Every figure by name: the scoring tasks' (registry order), then the keypoint sets'.
DRAW = {**{name: draw for t in SCORING_TASKS.values() for name, draw in t.figures.items()},
        "keypoint_stats": draw_keypoint_stats}


def make_figures(paths: ResultPaths, combos: list[tuple[str, str]], cfg: dict, report_dir: Path, out_dir: Path) -> list[Path]:
    """Write every figure of :data:`FIGURES` (PNG + SVG) into ``out_dir``; returns the PNG paths."""
    from descbench.report.drawing import pyplot

    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(Path(report_dir) / "comparison.csv")
    effective = {d: effective_config(cfg, d) for _, d in combos}  # a descriptor's overrides, for the figures' words
    run = Run(paths, combos, cfg, Path(report_dir), table, line_styles(table), effective)
    for name in FIGURES:
        fig = DRAW[name](run, plt)
        save(fig, out_dir, name)
        plt.close(fig)
    return [out_dir / f"{n}.png" for n in FIGURES]
