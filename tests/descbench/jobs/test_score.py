"""descbench.jobs.score: the ``score`` command writes every enabled task's files of every scene
of its batch, and refuses sections it does not know with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from descbench import cli
from descbench.config import score_job_sections
from descbench.tasks import score_tasks_on, scoring_task
from jobcli import SCENES, scored


def test_every_enabled_task_writes_its_files(tmp_path, capsys):
    run = scored(tmp_path)
    tasks = score_tasks_on(run.cfg)
    assert {"scores", "verification", "matching"} <= set(tasks)
    for task in tasks:
        for s in SCENES:
            for f in scoring_task(task).files(run.paths, "kp", "desc", s):
                assert Path(f).exists(), f
                if f.suffix == ".parquet":
                    assert pq.ParquetFile(f).metadata.num_rows > 0, f
    capsys.readouterr()
    sections = {**score_job_sections(run.cfg, "desc"), "nope": {}}
    args = [str(a) for a in run.batch_args()]
    assert cli.main(["score", *args, "--keypoint-set", "kp", "--descriptor", "desc", "--sections", json.dumps(sections)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("descbench: error: the scoring job's sections are ") and err.count("\n") == 1 and "unknown: nope" in err


def test_the_fused_pass_equals_each_task_on_its_own(tmp_path):
    """scene_pass computes the built-in tasks in one screen pass; each task's files written from it
    are byte-identical to the task computing alone (score_scene / score_matching_scene), and a
    task left out of the pass (section absent) is None in it."""
    import filecmp

    from descbench.datasets.layout import load_pairs, scene_files
    from descbench.jobs.common import read_features
    from descbench.jobs.score import scene_pass, score_matching_scene, score_scene
    from descbench.tasks.base import SceneJob
    from descbench.tasks.matching import TASK as MATCHING
    from descbench.tasks.retrieval import TASK as RETRIEVAL

    run = scored(tmp_path)
    sections = score_job_sections(run.cfg, "desc")
    s = SCENES[1]
    kp, desc = Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s))
    scene_dir = run.scene_root / s
    f = read_features(kp, desc)
    pairs = load_pairs(scene_files(scene_dir), "reference")
    sp = scene_pass(scene_dir, f, sections["scoring"], None, None, sections["matching"], pairs)
    assert sp.verification is None and set(sp.retrieval) == set(sp.matching) == {(1, k) for k in range(2, 7)}
    job = SceneJob(scene_dir, f, sections, sp, None, pairs)
    fused, alone = tmp_path / "fused", tmp_path / "alone"
    for task in (RETRIEVAL, MATCHING):
        task.write(job, [fused / f"{task.name}.{k}" for k in task.kinds])
    score_scene(scene_dir, kp, desc, sections["scoring"], *[alone / f"scores.{k}" for k in RETRIEVAL.kinds])
    score_matching_scene(scene_dir, kp, desc, sections["scoring"], sections["matching"],
                         *[alone / f"matching.{k}" for k in MATCHING.kinds])
    for task in (RETRIEVAL, MATCHING):
        for k in task.kinds[:-1]:  # the Parquet files; timing.json is wall time
            assert filecmp.cmp(fused / f"{task.name}.{k}", alone / f"{task.name}.{k}", shallow=False), (task.name, k)
