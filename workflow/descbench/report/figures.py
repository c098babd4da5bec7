"""The run's figures by name, and their captions (what each shows, the metric's definition and
parameters). Names only: the workflow imports it at parse time (matplotlib and pandas are
imported by the plotting job alone, :mod:`descbench.report.plots`)."""

from pathlib import Path

from descbench.tasks import SCORING_TASKS

# Every scoring task's figures (ScoringTask.figures, registry order), then the keypoint sets'.
FIGURES = (*(name for t in SCORING_TASKS.values() for name in t.figures), "keypoint_stats")
# The captions live in captions/<name>.rst (one source: Snakemake's HTML report reads the same
# files as the figures' captions).
_CAPTION_DIR = Path(__file__).parent / "captions"
CAPTIONS = {name: (_CAPTION_DIR / f"{name}.rst").read_text().strip() for name in FIGURES}
