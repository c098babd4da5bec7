"""The small base class every scoring task is built on, and what the scoring job hands a task.

A scoring task turns one scene's keypoints and descriptors (and its pairs with geometry) into a
few per-scene files, and later, in the report, those files of every scene into comparison-table
columns. One module per task (:mod:`descbench.tasks.retrieval`, :mod:`~descbench.tasks.verification`,
:mod:`~descbench.tasks.matching`) holds all of it; the registry is the tuple of those modules in
:mod:`descbench.tasks`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.layout import load_pairs


class TaskSummary(NamedTuple):
    """What a task's :meth:`ScoringTask.summarize` gives the report for one (keypoint set, descriptor)."""

    values: dict  # comparison-table columns, in order (also in the row's metadata string)
    scenes: Any = None  # per-scene columns: a DataFrame with one row per scene and a 'scene' column
    empty_images: tuple[str, ...] = ()  # '<scene>/<image>' of images without keypoints


class ScoringTask:
    """One task of the scoring job: one scene in, a few per-scene files out, aggregated in the report.

    A task is an instance of a subclass that sets these class attributes:

    - ``name``: its folder (``<results>/<name>/<kpset>/<descriptor>/<batch>/``);
    - ``section``: the config section whose ``enabled`` switches it and which holds its settings
      (None: always run, settings in ``scoring`` only). A descriptor may override the section
      (``descriptors.<d>.overrides``) and a sweep may vary it
      (:func:`descbench.tasks.scoring_sections`); the section itself is declared in
      ``workflow/schemas/config.schema.yaml``;
    - ``kinds``: the files it writes per scene (``<scene>.<kind>``), in the order :meth:`write`
      takes them, ``timing.json`` (wall time, outside the bit-identical Parquet files) last;
    - ``headline``: its columns shown in ``comparison.md`` (when present), after the lead columns;
    - ``intervals``: ``(metric, per-scene numerator column, denominator column or None)`` of its
      metrics given a bootstrap interval and compared pairwise (:mod:`descbench.report.table`);
    - ``figures``: ``{name: draw(run, plt) -> Figure}``, its figures in the run's report
      (:mod:`descbench.report.plots`; the caption is ``report/captions/<name>.rst``);

    and implements :meth:`schemas`, :meth:`write` and :meth:`summarize`.
    """

    name: str = ""
    section: str | None = None
    kinds: tuple[str, ...] = ()
    headline: tuple[str, ...] = ()
    intervals: tuple[tuple[str, str, str | None], ...] = ()
    figures: dict[str, Callable] = {}

    def enabled(self, cfg: dict) -> bool:
        """Whether the validated config ``cfg`` runs this task (its section's ``enabled``)."""
        return self.section is None or bool(cfg[self.section]["enabled"])

    def schemas(self, cfg: dict) -> dict[str, pa.Schema]:
        """``{kind: pyarrow.Schema}`` of its Parquet files under ``cfg`` (a descriptor's effective
        config); the files match them exactly (tested)."""
        raise NotImplementedError

    def write(self, job: SceneJob, outs: list[Path]) -> None:
        """Write one scene's files ``outs`` (:attr:`kinds` order) from ``job``."""
        raise NotImplementedError

    def summarize(self, files: dict[str, list[Path]], cfg: dict) -> TaskSummary:
        """The report's columns from ``files`` = ``{kind: [every scene's file, scene order]}`` and
        the descriptor's effective config."""
        raise NotImplementedError

    def file(self, paths, kpset: str, descriptor: str, scene: str, kind: str) -> Path:
        """A scene's file ``kind`` (one of :attr:`kinds`) under ``paths`` (a
        :class:`descbench.paths.ResultPaths`)."""
        if kind not in self.kinds:
            raise ValueError(f"task {self.name!r} writes no {kind!r} file; its files: {', '.join(self.kinds)}")
        return Path(paths.task_file(self.name, kpset, descriptor, scene, kind))

    def files(self, paths, kpset: str, descriptor: str, scene: str) -> list[Path]:
        """Every file of one scene, in :attr:`kinds` order."""
        return [self.file(paths, kpset, descriptor, scene, k) for k in self.kinds]

    def __repr__(self) -> str:
        return f"<scoring task {self.name!r}>"


def write_timing(path: Path, scene: str, t0: float, **extra) -> None:
    """Wall time since ``t0`` (and a task's ``extra`` timings): not reproducible, so it lives outside
    the bit-identical Parquet files."""
    io.write_text(path, json.dumps({"scene": scene, "processing_time_ms": 1000 * (time.perf_counter() - t0), **extra}) + "\n")


@dataclass
class SceneJob:
    """One scene of a scoring job, as each task's :meth:`ScoringTask.write` gets it.

    ``features``: the scene's keypoints and descriptors per image
    (:class:`descbench.jobs.common.SceneFeatures`: ``scene``, ``per_image``, ``by_image``,
    ``kmeta``, ``dmeta``); ``sections``: this job's settings, ``{section: settings}`` for
    ``scoring`` and every enabled task's section (the descriptor's effective values); ``fused``:
    the built-in tasks' results of the one screen pass over the scene
    (:func:`descbench.jobs.score.scene_pass`); ``distractors``: the scene's drawn distractors
    (verification on) or None; ``pairs``: the scene's pairs
    (:class:`~descbench.datasets.geometry.Pair`, the dataset's list under the config's ``pairs``)."""

    scene_dir: Path
    features: Any
    sections: dict
    fused: object = None
    distractors: list | None = None
    pairs: list | None = None

    def t0_of(self, key: str) -> float:
        """Start of a fused task's timing: now minus its share of the fused pass."""
        return time.perf_counter() - self.fused.seconds[key]

    def write_timing(self, path: Path, t0: float) -> None:
        write_timing(path, self.features.scene, t0)


# ----------------------------------------------------------------------------- pairs and rows


def query_groups(pairs: list) -> list[tuple[int, list]]:
    """The pairs by query image ``a``: one group per image, in order of first appearance, each
    group's pairs in listing order. A group shares its query keypoints (one screen pass)."""
    out: dict[int, list] = {}
    for p in pairs:
        out.setdefault(p.a, []).append(p)
    return list(out.items())


def labelled(pairs: list) -> bool:
    """Whether a scene's rows carry ``query_image``: only when some pair's query image is not 1.
    A scene of (1, k) pairs (HPatches, the demo) keeps the schema and bytes it always had, where
    ``pair`` = k names the pair."""
    return any(p.a != 1 for p in pairs)


def scene_pairs(files, pairs: list | None) -> list:
    """``pairs`` or, when None (the single-scene entry points), the scene's pairs under the
    default ``pairs: reference`` (its ``pairs.txt`` when it has one)."""
    return load_pairs(files) if pairs is None else pairs


def concat_rows(tables: list[pa.Table]):
    """Per-scene tables as one DataFrame: concatenated in Arrow and converted once (one pandas
    conversion per scene file cost the report ~13 s at 116 scenes x 20 descriptors). When some
    scene's table names its pairs' query images (``io.QUERY_IMAGE``), a table without the column
    gets it as 1: its pairs are (1, k). Returns a pandas DataFrame."""
    tables = [t.replace_schema_metadata(None) for t in tables]
    if any(io.QUERY_IMAGE in t.column_names for t in tables):
        tables = [t if io.QUERY_IMAGE in t.column_names else
                  t.add_column(io.with_query_image(t.schema).get_field_index(io.QUERY_IMAGE), io.QUERY_IMAGE,
                               pa.array(np.ones(len(t), np.int8)))
                  for t in tables]
    return pa.concat_tables(tables).to_pandas()


def load_rows(paths: list[Path], schema: pa.Schema | None, columns: list[str] | None = None,
              where: tuple[str, object] | None = None):
    """Every file of ``paths`` (checked against ``schema`` unless None) as one DataFrame
    (:func:`concat_rows`); with ``where = (column, value)`` only the rows whose column equals the
    value, and with ``columns`` only those of them a file has, both taken in Arrow before the one
    pandas conversion (a figure of one matcher's ROC converted 7.9 M rows of four matchers, 600 MB
    of strings, at 116 scenes)."""
    import pyarrow.compute as pc

    tables = []
    for p in paths:
        t = io.read_table(p, schema, with_meta=False)[0]
        if where is not None:
            t = t.filter(pc.equal(t[where[0]], where[1]))
        if columns is not None:
            t = t.select([c for c in columns if c in t.column_names])
        tables.append(t)
    return concat_rows(tables)


def pair_target(f, p, what: str):
    """The :class:`descbench.metrics.bojanic.Target` of pair ``p``'s image b in the scene's
    features ``f``; ``what`` names the task in a geometry error."""
    from descbench.metrics.bojanic import Target

    kb = f.per_image[p.b]
    return Target(kb.xy, f.by_image[p.b], p.homography(what), tuple(f.kmeta["image_sizes"][str(p.b)]), kb.angle, kb.size)
