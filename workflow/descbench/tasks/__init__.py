"""The scoring tasks: one module each, on one small base class (:class:`~descbench.tasks.base.ScoringTask`).

The scoring job (``descbench score``, :mod:`descbench.jobs.score`) runs every enabled task on
every scene of a batch; each task writes its own per-scene files under its own folder, and the
report turns them into comparison-table columns, intervals, paired comparisons and figures. A
task's module holds everything about it: its config section, its per-scene computation, its
Parquet schemas, its summary columns, headline, intervals and figures.

Everything else reads :data:`SCORING_TASKS`: the ``score`` rule's outputs and its one settings file
(``scoring`` and every enabled task's section: :func:`descbench.config.score_job_sections`), the
report's inputs, the sections a descriptor may override and a sweep may vary, the changed settings
announced at start, the report's columns, intervals and comparisons, and the figures.

A new task is its module (a :class:`~descbench.tasks.base.ScoringTask` subclass and an instance
``TASK``), one line in :data:`TASK_MODULES`, its config section in
``workflow/schemas/config.schema.yaml`` and its test (``tests/descbench/test_tasks.py`` walks a toy
task through every stage).
"""

from __future__ import annotations

from descbench.tasks import matching, retrieval, verification
from descbench.tasks.base import ScoringTask, TaskSummary

__all__ = ["COMMON_SECTION", "SCORING_TASKS", "TASK_MODULES", "ScoringTask", "TaskSummary", "score_tasks_on",
           "score_job_tasks", "scoring_sections", "scoring_task"]

# The settings every scoring task reads (tau_px, gt, tie_policy, chunk_mb, threads): always passed
# to the scoring job, never switched off.
COMMON_SECTION = "scoring"

# The task modules, in the order the scoring job runs them (and the report's column order).
TASK_MODULES = (retrieval, verification, matching)

# name -> task. The name is the task's results folder.
SCORING_TASKS: dict[str, ScoringTask] = {m.TASK.name: m.TASK for m in TASK_MODULES}


def scoring_task(name: str) -> ScoringTask:
    """The task whose folder is ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return SCORING_TASKS[name]
    except KeyError:
        raise ValueError(f"unknown scoring task {name!r}; expected one of {tuple(SCORING_TASKS)}") from None


def score_tasks_on(cfg: dict) -> list[str]:
    """The folders of the tasks ``cfg`` (the validated config) enables, in order."""
    return [t.name for t in SCORING_TASKS.values() if t.enabled(cfg)]


def score_job_tasks(sections: dict) -> list[ScoringTask]:
    """The tasks a scoring job runs, in order: those without a section, and those whose section
    is in its ``sections`` (descbench.config.score_job_sections)."""
    return [t for t in SCORING_TASKS.values() if t.section is None or t.section in sections]


def scoring_sections() -> tuple[str, ...]:
    """The config sections of the scoring job: ``scoring``, then each task's own section, in
    registry order. A descriptor may override them (``descriptors.<d>.overrides``; descbench.config)
    and a descriptor sweep may vary them (descbench.sweeps); the scoring job gets them as one JSON
    (descbench.config.score_job_sections)."""
    return tuple(dict.fromkeys([COMMON_SECTION, *(t.section for t in SCORING_TASKS.values() if t.section)]))
