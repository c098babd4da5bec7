"""The scoring tasks' base class (descbench.tasks.base): files named from the task's declaration,
the switch, the pair grouping, and reading per-scene rows of (1, k) and labelled scenes together."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from descbench import io
from descbench.paths import ResultPaths, scene_batches
from descbench.tasks import SCORING_TASKS, score_tasks_on, scoring_sections, scoring_task
from descbench.tasks.base import ScoringTask, concat_rows, labelled, load_rows, query_groups


class Counts(ScoringTask):
    name = "counts"
    section = "counts"
    kinds = ("a.parquet", "b.parquet", "timing.json")


@pytest.mark.bad_input
def test_a_task_names_its_files_in_declared_order_and_refuses_others(tmp_path):
    paths = ResultPaths(tmp_path, scene_batches(["s1", "s2", "s3"], 2))
    task = Counts()
    assert task.files(paths, "kp", "d", "s3") == [tmp_path / "counts/kp/d/batch001" / f"s3.{k}" for k in task.kinds]
    with pytest.raises(ValueError, match=r"task 'counts' writes no 'c\.parquet' file; its files: a\.parquet, b\.parquet, timing\.json"):
        task.file(paths, "kp", "d", "s1", "c.parquet")


def test_a_task_is_switched_by_its_section_and_must_implement_its_three_methods():
    task = Counts()
    assert task.enabled({"counts": {"enabled": True}}) and not task.enabled({"counts": {"enabled": False}})
    always = type("Always", (ScoringTask,), {"name": "always"})()
    assert always.enabled({})  # no section: always on
    for call in (lambda: task.schemas({}), lambda: task.write(None, []), lambda: task.summarize({}, {})):
        with pytest.raises(NotImplementedError):
            call()


def test_the_registry_its_order_and_its_sections():
    assert list(SCORING_TASKS) == ["scores", "verification", "matching"]
    assert scoring_sections() == ("scoring", "verification", "matching")
    assert score_tasks_on({"verification": {"enabled": False}, "matching": {"enabled": True}}) == ["scores", "matching"]
    assert scoring_task("matching") is SCORING_TASKS["matching"]
    with pytest.raises(ValueError, match=r"unknown scoring task 'match'; expected one of \('scores', 'verification', 'matching'\)"):
        scoring_task("match")


def pair(a, b):
    return SimpleNamespace(a=a, b=b)


def test_pairs_grouped_by_query_image_in_order_of_first_appearance():
    pairs = [pair(2, 3), pair(1, 2), pair(2, 4), pair(1, 5)]
    assert [(a, [(p.a, p.b) for p in g]) for a, g in query_groups(pairs)] == [(2, [(2, 3), (2, 4)]), (1, [(1, 2), (1, 5)])]
    assert not labelled([pair(1, k) for k in range(2, 7)])  # HPatches' (1, k): rows keep their schema
    assert labelled([pair(1, 2), pair(2, 3)])


def test_rows_of_reference_and_labelled_scenes_read_as_one_table(tmp_path):
    ref = pa.table({"scene": ["a", "a"], "pair": pa.array([2, 3], pa.int8()), "v": [1.0, 2.0]})
    other = pa.table({"scene": ["b"], "query_image": pa.array([2], pa.int8()), "pair": pa.array([5], pa.int8()), "v": [3.0]})
    files = []
    for i, t in enumerate((ref, other)):
        io.write_table(t, tmp_path / f"{i}.parquet", {"stage": "test"})
        files.append(tmp_path / f"{i}.parquet")
    df = load_rows(files, None)
    assert list(df.columns) == ["scene", "query_image", "pair", "v"]
    assert df.query_image.tolist() == [1, 1, 2] and df.v.tolist() == [1.0, 2.0, 3.0]
    assert np.array_equal(concat_rows([ref]).pair.to_numpy(), [2, 3]) and "query_image" not in concat_rows([ref]).columns


def test_rows_read_with_columns_and_a_filter_equal_the_whole_tables_sliced(tmp_path):
    """load_rows(columns, where) gives the rows of the whole read whose column equals the value,
    in the asked columns that exist (query_image added as for the whole read)."""
    ref = pa.table({"scene": ["a"] * 4, "pair": pa.array([2, 2, 3, 3], pa.int8()), "matcher": ["t", "nn", "t", "nn"],
                    "v": [1.0, 2.0, 3.0, 4.0]})
    other = pa.table({"scene": ["b"] * 2, "query_image": pa.array([2, 2], pa.int8()), "pair": pa.array([5, 5], pa.int8()),
                      "matcher": ["nn", "t"], "v": [5.0, 6.0]})
    files = []
    for i, t in enumerate((ref, other)):
        io.write_table(t, tmp_path / f"{i}.parquet", {"stage": "test"})
        files.append(tmp_path / f"{i}.parquet")
    whole = load_rows(files, None)
    want = whole[whole.matcher == "t"][["scene", "query_image", "pair", "v"]].reset_index(drop=True)
    got = load_rows(files, None, columns=["scene", "query_image", "pair", "v", "absent"], where=("matcher", "t"))
    assert got.equals(want) and got.v.tolist() == [1.0, 3.0, 6.0]
