"""Where every stage writes its files, in one place (used by the Snakemake rules, the jobs and the report).

Jobs work on *scene batches* (:func:`scene_batches`): consecutive scenes of the evaluated scene
list, ``scenes_per_job`` at a time. A job's output is one directory per stage and batch, holding
one file per scene and kind, so results stay per scene. Layout under ``<results_dir>/<dataset_tag>/``:

- ``keypoints/<kpset>/<batch>/<scene>.parquet``
- ``descriptors/<kpset>/<descriptor>/<batch>/<scene>.parquet``
- ``scores/<kpset>/<descriptor>/<batch>/<scene>.{queries,pairs}.parquet`` (keypoint retrieval per pair)
- ``verification/<kpset>/<descriptor>/<batch>/<scene>.{list,queries,scene}.parquet`` (keypoint
  verification and keypoint retrieval with distractors)
- ``matching/<kpset>/<descriptor>/<batch>/<scene>.{pairs,classifier,roc}.parquet`` (matching
  metrics and matching as a binary classifier)
- ``distractors/<kpset>/<descriptor>.parquet``: every scene's drawn distractor keypoints (one
  file, built once all of the descriptor's batches exist; the scoring jobs read it)
- ``report/``

plus ``<scene>.timing.json`` next to each task's files (the scoring tasks, their switches, files
and functions: :data:`SCORE_TASK_REGISTRY`; a registered task gets its own ``<task>/`` folder). ``<batch>`` is ``batch<NNN>`` (its index, zero-padded); which
scenes a batch holds is fixed by the scene list and ``scenes_per_job``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

# The settings every scoring task reads (tau_px, gt, tie_policy, chunk_mb, threads): always passed
# to the scoring job, never switched off.
COMMON_SECTION = "scoring"


@dataclass(frozen=True)
class ScoreTask:
    """One task of the scoring job: one scene in, a few per-scene files out, aggregated in the report.

    - ``name``: its folder (``<name>/<kpset>/<descriptor>/<batch>/``);
    - ``section``: the config section whose ``enabled`` switches it and which holds its settings
      (None: always run, settings in ``scoring`` only). A descriptor may override the section
      (``descriptors.<d>.overrides``) and a sweep may vary it (:func:`scoring_sections`);
    - ``kinds``: the files it writes per scene (``<scene>.<kind>``), in the order its writer takes
      them, ``timing.json`` (wall time, outside the bit-identical Parquet files) last;
    - ``writer``: ``writer(job, outs)`` writes one scene's files ``outs`` (``kinds`` order) from
      ``job``, a :class:`descbench.jobs.common.SceneJob` (the scene's features, this job's sections,
      the fused pass's results of the built-in tasks, a ``write_timing`` helper);
    - ``schemas``: ``schemas(cfg) -> {kind: pyarrow.Schema}`` of its Parquet files under ``cfg``
      (the descriptor's effective config); the files match them exactly (tested);
    - ``summarize``: ``summarize(files, cfg) -> TaskSummary`` from ``files`` = ``{kind: [the
      per-scene files, scene order]}`` and the descriptor's effective config: the report's columns;
    - ``headline``: its columns shown in ``comparison.md`` (when present), after the lead columns;
    - ``intervals``: ``(metric, per-scene numerator column, denominator column or None)`` of its
      metrics given a bootstrap interval and compared pairwise (descbench.report.table).

    ``writer``, ``schemas`` and ``summarize`` are ``"module:function"`` names, imported by their
    caller on first use (:func:`task_hook`), or the functions themselves: this registry sits at the
    bottom layer, the functions in the layers that call them (writer: layer <= 3, the jobs;
    schemas and summarize: layer <= 2, the report; tests/workflow/test_layers.py checks it).
    """

    name: str
    section: str | None
    kinds: tuple[str, ...]
    writer: str | Callable
    schemas: str | Callable
    summarize: str | Callable
    headline: tuple[str, ...] = ()
    intervals: tuple[tuple[str, str, str | None], ...] = ()

    def enabled(self, cfg: dict) -> bool:
        return self.section is None or bool(cfg[self.section]["enabled"])


class TaskSummary(NamedTuple):
    """What a task's ``summarize`` gives the report for one (keypoint set, descriptor)."""

    values: dict  # comparison-table columns, in order (also in the row's metadata string)
    scenes: Any = None  # per-scene columns: a DataFrame with one row per scene and a 'scene' column
    empty_images: tuple[str, ...] = ()  # '<scene>/<image>' of images without keypoints


# The scoring job's tasks, in the order it runs them (and the report's column order): where their
# files go, which files they are, and the functions that write, read and summarise them. The
# Snakemake rules (outputs, the job's sections, report inputs), the config (overridable and
# sweepable sections), the job (descbench.jobs.score.score_batch), the report and the plots read them
# from here. A new task: one entry here plus its own module (README "Adding a scoring task").
SCORE_TASK_REGISTRY: dict[str, ScoreTask] = {t.name: t for t in (
    ScoreTask("scores", None, ("queries.parquet", "pairs.parquet", "timing.json"),  # keypoint retrieval
              writer="descbench.jobs.score:write_retrieval", schemas="descbench.report.table:retrieval_schemas",
              summarize="descbench.report.table:summarize_retrieval",
              headline=("true_map_macro_by_scene", "precision_at_10"),
              intervals=(("true_map_micro", "sum_ap", "n_relevant_queries"), ("true_map_macro_by_scene", "true_map", None))),
    ScoreTask("verification", "verification", ("list.parquet", "queries.parquet", "scene.parquet", "timing.json"),
              writer="descbench.jobs.score:write_verification", schemas="descbench.report.table:verification_schemas",
              summarize="descbench.report.table:summarize_verification",
              headline=("keypoint_verification_ap", "keypoint_retrieval_ap"),
              intervals=(("keypoint_verification_ap", "keypoint_verification_ap", None),)),
    ScoreTask("matching", "matching", ("pairs.parquet", "classifier.parquet", "roc.parquet", "timing.json"),
              writer="descbench.jobs.score:write_matching", schemas="descbench.report.table:matching_schemas",
              summarize="descbench.report.table:summarize_matching",
              headline=("mean_precision", "mma_at_3", "homography_accuracy_at_3"),
              intervals=(("mma_at_3", "mma_at_3_sum", "n_mma_pairs"),
                         ("homography_accuracy_at_3", "homography_accurate_at_3", "n_matching_pairs"))),
)}


def task_hook(ref: str | Callable) -> Callable:
    """A registry function: ``ref`` itself, or the ``"module:function"`` it names, imported now."""
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def score_tasks_on(cfg: dict) -> list[str]:
    """The folders of the tasks ``cfg`` (the validated config) enables, in order."""
    return [t.name for t in SCORE_TASK_REGISTRY.values() if t.enabled(cfg)]


def scoring_sections() -> tuple[str, ...]:
    """The config sections of the scoring job: ``scoring``, then each task's own section, in
    registry order. A descriptor may override them (``descriptors.<d>.overrides``; descbench.config)
    and a descriptor sweep may vary them (descbench.sweeps); the scoring job gets them as one JSON
    (descbench.config.score_job_sections)."""
    return tuple(dict.fromkeys([COMMON_SECTION, *(t.section for t in SCORE_TASK_REGISTRY.values() if t.section)]))


def scene_batches(scenes: list[str], scenes_per_job: int) -> dict[str, list[str]]:
    """Split ``scenes`` (in order) into the fewest consecutive batches of at most
    ``scenes_per_job``, of balanced sizes.

    ``n = ceil(len(scenes) / scenes_per_job)`` batches; their sizes differ by at most one, the
    first ``len(scenes) % n`` batches taking the extra scene (9 scenes at 8 per job: 5 + 4, not
    8 + 1, so the two jobs of a stage finish together). Returns ``{batch name: scenes}`` with names
    ``batch000``, ``batch001``, ... in order. The batches depend only on the scene list and
    ``scenes_per_job``, never on the machine.
    """
    if scenes_per_job < 1:
        raise ValueError(f"scenes_per_job must be >= 1, got {scenes_per_job}")
    if len(set(scenes)) != len(scenes):
        raise ValueError("scene list has duplicates")
    n_batches = -(-len(scenes) // scenes_per_job)
    batches, start = {}, 0
    for i in range(n_batches):
        size = len(scenes) // n_batches + (i < len(scenes) % n_batches)
        batches[f"batch{i:03d}"] = list(scenes[start : start + size])
        start += size
    return batches


def scene_file(directory: Path | str, scene: str, kind: str) -> str:
    """The file of one scene inside a batch directory: ``<directory>/<scene>.<kind>``."""
    return str(Path(directory) / f"{scene}.{kind}")


@dataclass(frozen=True)
class ResultPaths:
    """Result paths of one dataset: ``root`` = ``<results_dir>/<dataset_tag>``, ``batches`` =
    :func:`scene_batches` of the evaluated scenes."""

    root: Path
    batches: dict[str, list[str]]
    _batch_of: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_batch_of", {s: b for b, ss in self.batches.items() for s in ss})

    def batch_of(self, scene: str) -> str:
        try:
            return self._batch_of[scene]
        except KeyError:
            raise KeyError(f"scene {scene!r} is not in the evaluated scene list") from None

    @property
    def scenes(self) -> list[str]:
        """Every evaluated scene, in scene-list order."""
        return [s for ss in self.batches.values() for s in ss]

    # Batch directories (the jobs' outputs).
    def keypoints_dir(self, kpset: str, batch: str) -> str:
        return str(Path(self.root) / "keypoints" / kpset / batch)

    def descriptors_dir(self, kpset: str, descriptor: str, batch: str) -> str:
        return str(Path(self.root) / "descriptors" / kpset / descriptor / batch)

    def task_dir(self, task: str, kpset: str, descriptor: str, batch: str) -> str:
        if task not in SCORE_TASK_REGISTRY:
            raise ValueError(f"unknown task directory {task!r}; expected one of {tuple(SCORE_TASK_REGISTRY)}")
        return str(Path(self.root) / task / kpset / descriptor / batch)

    # Per-scene files inside them.
    def keypoints(self, kpset: str, scene: str) -> str:
        return scene_file(self.keypoints_dir(kpset, self.batch_of(scene)), scene, "parquet")

    def descriptors(self, kpset: str, descriptor: str, scene: str) -> str:
        return scene_file(self.descriptors_dir(kpset, descriptor, self.batch_of(scene)), scene, "parquet")

    def task_file(self, task: str, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        """A scene's file ``kind`` of scoring task ``task`` (one of the task's ``kinds``)."""
        t = SCORE_TASK_REGISTRY.get(task)  # an unknown task: task_dir says so
        if t is not None and kind not in t.kinds:
            raise ValueError(f"task {task!r} writes no {kind!r} file; its files: {', '.join(t.kinds)}")
        return scene_file(self.task_dir(task, kpset, descriptor, self.batch_of(scene)), scene, kind)

    def task_files(self, task: str, kpset: str, descriptor: str, scene: str) -> list[Path]:
        """Every file of scoring task ``task`` for one scene, in its ``kinds`` order."""
        return [Path(self.task_file(task, kpset, descriptor, scene, k)) for k in SCORE_TASK_REGISTRY[task].kinds]

    def score(self, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        return self.task_file("scores", kpset, descriptor, scene, kind)

    def verification(self, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        return self.task_file("verification", kpset, descriptor, scene, kind)

    def matching(self, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        return self.task_file("matching", kpset, descriptor, scene, kind)

    def keypoint_cutoff(self, kpset: str) -> str:
        """The dataset-wide cutoff of a set's ``global_top_n_by_size`` filter (descbench.jobs.keypoints.keypoint_cutoff)."""
        return str(Path(self.root) / "keypoint_cutoffs" / f"{kpset}.json")

    def keypoint_export(self, kpset: str, fmt: str) -> str:
        """A set's keypoints of every scene in the locked-keypoint format (descbench.jobs.keypoints.export_keypoints)."""
        return str(Path(self.root) / "exports" / "keypoints" / f"{kpset}.{fmt}")

    def distractor_bank(self, kpset: str, descriptor: str) -> str:
        """Every scene's distractor keypoints of one (keypoint set, descriptor) (descbench.jobs.distractors.build_distractor_bank)."""
        return str(Path(self.root) / "distractors" / kpset / f"{descriptor}.parquet")

    def report(self, name: str) -> str:
        return str(Path(self.root) / "report" / name)
