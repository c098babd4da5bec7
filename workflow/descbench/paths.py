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
and functions: :mod:`descbench.tasks`; every task has its own ``<task>/`` folder), and
``job_timing.json`` (:data:`JOB_TIMING`) in each keypoint, descriptor, scoring, ``match`` and
``score_pipelines`` job's batch directory: the job's wall and CPU time, threads and device
(:mod:`descbench.jobtiming`; not in any Parquet file; a scoring job writes it into every task folder it fills). ``<batch>`` is ``batch<NNN>`` (its index, zero-padded); which
scenes a batch holds is fixed by the scene list and ``scenes_per_job``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# A job's timing file, inside its batch directory (descbench.jobtiming). No scene file has this name:
# those are ``<scene>.<kind>`` and no kind is ``json``.
JOB_TIMING = "job_timing.json"


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
        """A scoring task's batch directory; ``task`` is the task's name (descbench.tasks)."""
        return str(Path(self.root) / task / kpset / descriptor / batch)

    def matches_dir(self, kpset: str, descriptor: str, matcher: str, batch: str) -> str:
        """The matcher stage's batch directory of one (keypoint set, descriptor, matcher)."""
        return str(Path(self.root) / "matches" / kpset / descriptor / matcher / batch)

    def match_task_dir(self, task: str, kpset: str, descriptor: str, matcher: str, batch: str) -> str:
        """A match-based task's batch directory (the task reads the matcher stage's matches)."""
        return str(Path(self.root) / task / kpset / descriptor / matcher / batch)

    # Per-scene files inside them.
    def keypoints(self, kpset: str, scene: str) -> str:
        return scene_file(self.keypoints_dir(kpset, self.batch_of(scene)), scene, "parquet")

    def descriptors(self, kpset: str, descriptor: str, scene: str) -> str:
        return scene_file(self.descriptors_dir(kpset, descriptor, self.batch_of(scene)), scene, "parquet")

    def task_file(self, task: str, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        """A scene's file ``kind`` of scoring task ``task`` (which kinds a task writes, and the
        check: ``descbench.tasks.base.ScoringTask.file``)."""
        return scene_file(self.task_dir(task, kpset, descriptor, self.batch_of(scene)), scene, kind)

    def matches(self, kpset: str, descriptor: str, matcher: str, scene: str) -> str:
        return scene_file(self.matches_dir(kpset, descriptor, matcher, self.batch_of(scene)), scene, "parquet")

    def match_task_file(self, task: str, kpset: str, descriptor: str, matcher: str, scene: str, kind: str) -> str:
        return scene_file(self.match_task_dir(task, kpset, descriptor, matcher, self.batch_of(scene)), scene, kind)

    def keypoint_cutoff(self, kpset: str) -> str:
        """The dataset-wide cutoff of a set's ``global_top_n_by_size`` filter (descbench.jobs.keypoints.keypoint_cutoff)."""
        return str(Path(self.root) / "keypoint_cutoffs" / f"{kpset}.json")

    def keypoint_export(self, kpset: str, fmt: str) -> str:
        """A set's keypoints of every scene in the locked-keypoint format (descbench.jobs.keypoints.export_keypoints)."""
        return str(Path(self.root) / "exports" / "keypoints" / f"{kpset}.{fmt}")

    def distractor_bank(self, kpset: str, descriptor: str) -> str:
        """Every scene's distractor keypoints of one (keypoint set, descriptor) (descbench.jobs.distractors.build_distractor_bank)."""
        return str(Path(self.root) / "distractors" / kpset / f"{descriptor}.parquet")

    def job_timing(self, stage: str, kpset: str, descriptor: str | None, batch: str, task: str | None = None,
                   matcher: str | None = None) -> str:
        """A keypoint (``descriptor`` None), descriptor, scoring or matcher-stage job's timing file
        (``stage``: one of descbench.jobtiming.STAGES or MATCHER_STAGES): :data:`JOB_TIMING` in the
        job's batch directory; a scoring job's in the folder of its scoring task ``task`` (it writes
        one into each); a ``matches``, ``pipelines`` or ``pose`` job's in its folder of ``matcher``."""
        if stage == "keypoints":
            folder = self.keypoints_dir(kpset, batch)
        elif stage == "descriptors":
            folder = self.descriptors_dir(kpset, descriptor, batch)
        elif stage == "scoring" and task is not None:
            folder = self.task_dir(task, kpset, descriptor, batch)
        elif stage == "matches" and matcher is not None:
            folder = self.matches_dir(kpset, descriptor, matcher, batch)
        elif stage in ("pipelines", "pose") and matcher is not None:
            folder = self.match_task_dir(stage, kpset, descriptor, matcher, batch)
        else:
            raise ValueError(f"no timing file of stage {stage!r}" + (" without its scoring task" if stage == "scoring" else
                                                                     " without its matcher" if stage in ("matches", "pipelines", "pose") else ""))
        return str(Path(folder) / JOB_TIMING)

    def report(self, name: str) -> str:
        return str(Path(self.root) / "report" / name)
