"""Job structure: scene batches, per-scene files inside batch folders, and the batch jobs.

The batch a scene is scored in must not change any result: the batch jobs (one process per
batch, features read once, distractor scenes cached) are compared byte for byte with the
single-scene entry points, and with another batch size.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from descbench.errors import DataError
from descbench.jobs import common, descriptors, distractors, keypoints, score
from descbench.datasets.demo import generate_scene
from descbench.paths import ResultPaths, scene_batches

SCENES = ["i_rocket", "v_coins", "v_camera"]
KP_SPEC = {"detector": "sift", "border_px": 40, "max_keypoints": 300, "params": {}}
DESC_SPEC = {"family": "rootsift", "params": {}}
SCORING = {"tau_px": 3.0, "gt": "closest", "tie_policy": "expected", "chunk_mb": 64}
VERIFICATION = {"seed": 0, "distractor_scenes": 10, "distractors_per_scene": 20, "candidates": "nearest",
                "hard_negatives": "negative", "ap_convention": "step", "quantized_bins": 25, "convention": "descbench"}
MATCHING = {"mma_thresholds": [1, 3, 5], "repeatability_px": 3.0, "ransac_px": 3.0, "ransac_seed": 0,
            "homography_thresholds": [1, 3, 5], "homography_auc_thresholds": [3, 5, 10],
            "classifier_epsilon_px": 2.0, "classifier_matchers": ["threshold", "nn", "ratio", "mutual_nn"]}


def test_scene_batches_partition_the_scene_list_in_order():
    scenes = [f"s{i:02d}" for i in range(11)]
    for n in (1, 2, 4, 11, 50):
        b = scene_batches(scenes, n)
        assert list(b) == [f"batch{i:03d}" for i in range(len(b))]
        assert [s for ss in b.values() for s in ss] == scenes
        assert all(1 <= len(ss) <= n for ss in b.values())
        assert len(b) == -(-len(scenes) // n)
        sizes = [len(ss) for ss in b.values()]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    # hand-worked: 9 scenes at 8 per job -> 5 + 4; 11 at 4 -> 4 + 4 + 3; 116 at 8 -> 11 x 8 + 4 x 7
    assert [len(ss) for ss in scene_batches(scenes[:9], 8).values()] == [5, 4]
    assert [len(ss) for ss in scene_batches(scenes, 4).values()] == [4, 4, 3]
    assert sorted(len(ss) for ss in scene_batches([str(i) for i in range(116)], 8).values()) == [7] * 4 + [8] * 11
    assert scene_batches([], 4) == {}
    with pytest.raises(ValueError, match="scenes_per_job"):
        scene_batches(scenes, 0)
    with pytest.raises(ValueError, match="duplicates"):
        scene_batches(["a", "a"], 2)


def test_result_paths_put_each_scene_file_in_its_batch_folder(tmp_path):
    p = ResultPaths(tmp_path, scene_batches(["a", "b", "c"], 2))
    assert p.batch_of("c") == "batch001"
    assert p.keypoints("k", "c") == str(tmp_path / "keypoints/k/batch001/c.parquet")
    assert p.descriptors("k", "d", "a") == str(tmp_path / "descriptors/k/d/batch000/a.parquet")
    assert p.task_file("scores", "k", "d", "b", "pairs.parquet") == str(tmp_path / "scores/k/d/batch000/b.pairs.parquet")
    assert p.task_file("verification", "k", "d", "c", "list.parquet") == str(tmp_path / "verification/k/d/batch001/c.list.parquet")
    assert p.task_file("matching", "k", "d", "c", "roc.parquet") == str(tmp_path / "matching/k/d/batch001/c.roc.parquet")
    assert p.matches("k", "d", "m", "c") == str(tmp_path / "matches/k/d/m/batch001/c.parquet")
    assert p.match_task_file("homography", "k", "d", "m", "a", "pairs.parquet") == str(tmp_path / "homography/k/d/m/batch000/a.pairs.parquet")
    with pytest.raises(KeyError, match="not in the evaluated scene list"):
        p.batch_of("zz")
    # each keypoint / descriptor / scoring job's timing file, inside its own batch folder (a scoring job's: per task folder)
    assert p.job_timing("keypoints", "k", None, "batch001") == str(tmp_path / "keypoints/k/batch001/job_timing.json")
    assert p.job_timing("descriptors", "k", "d", "batch000") == str(tmp_path / "descriptors/k/d/batch000/job_timing.json")
    assert p.job_timing("scoring", "k", "d", "batch000", "matching") == str(tmp_path / "matching/k/d/batch000/job_timing.json")
    with pytest.raises(ValueError, match="without its scoring task"):
        p.job_timing("scoring", "k", "d", "batch000")
    # a matcher-stage job's: in its matcher's folder of matches/ or pipelines/
    assert p.job_timing("matches", "k", "d", "batch001", matcher="m") == str(tmp_path / "matches/k/d/m/batch001/job_timing.json")
    assert p.job_timing("pipelines", "k", "d", "batch000", matcher="m") == str(tmp_path / "pipelines/k/d/m/batch000/job_timing.json")
    with pytest.raises(ValueError, match="'pipelines' without its matcher"):
        p.job_timing("pipelines", "k", "d", "batch000")


@pytest.fixture(scope="module")
def scene_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scenes")
    for s in SCENES:
        generate_scene(s, root, seed=0)
    return root


def _run_batches(root: Path, scene_root: Path, per_job: int) -> ResultPaths:
    paths = ResultPaths(root, scene_batches(SCENES, per_job))
    for b in paths.batches:
        keypoints.detect_batch(paths, scene_root, b, "kp", KP_SPEC)
        descriptors.describe_batch(paths, scene_root, b, "kp", "desc", DESC_SPEC, KP_SPEC)
    distractors.build_distractor_bank(paths, "kp", "desc", VERIFICATION, Path(paths.distractor_bank("kp", "desc")))
    for b in paths.batches:
        score.score_batch(paths, scene_root, b, "kp", "desc", {"scoring": SCORING, "verification": VERIFICATION, "matching": MATCHING})
    return paths


def _digests(paths: ResultPaths) -> dict[str, str]:
    out = {}
    for s in SCENES:
        files = [paths.keypoints("kp", s), paths.descriptors("kp", "desc", s)]
        files += [paths.task_file("scores", "kp", "desc", s, k) for k in ("queries.parquet", "pairs.parquet")]
        files += [paths.task_file("verification", "kp", "desc", s, k) for k in ("list.parquet", "queries.parquet", "scene.parquet")]
        files += [paths.task_file("matching", "kp", "desc", s, k) for k in ("pairs.parquet", "classifier.parquet", "roc.parquet")]
        for f in files:
            rel = Path(f).relative_to(paths.root)
            out[f"{rel.parts[0]}/{rel.name}"] = hashlib.sha256(Path(f).read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def batched(tmp_path_factory, scene_root) -> ResultPaths:
    return _run_batches(tmp_path_factory.mktemp("batched2"), scene_root, 2)


def test_batch_size_changes_no_result(tmp_path, scene_root, batched):
    one_job = _run_batches(tmp_path / "batched3", scene_root, 3)
    assert _digests(one_job) == _digests(batched)
    # each task wrote its wall time next to its files, per scene
    assert Path(batched.task_file("matching", "kp", "desc", "v_camera", "timing.json")).exists()


def test_score_tasks_write_exactly_their_registered_files(batched):
    """Each scoring task's batch folder holds, per scene, exactly the files its module declares
    (``ScoringTask.kinds``, descbench.tasks.SCORING_TASKS), which the rules and the report rely on."""
    from descbench.tasks import SCORING_TASKS, score_tasks_on, scoring_task

    for task in SCORING_TASKS.values():
        for b, scenes in batched.batches.items():
            folder = Path(batched.task_dir(task.name, "kp", "desc", b))
            assert sorted(p.name for p in folder.iterdir()) == sorted(f"{s}.{k}" for s in scenes for k in task.kinds)
    with pytest.raises(ValueError, match=r"task 'scores' writes no 'roc\.parquet' file"):
        scoring_task("scores").file(batched, "kp", "desc", SCENES[0], "roc.parquet")
    with pytest.raises(ValueError, match=r"unknown scoring task 'score'; expected one of \('scores', 'verification', 'matching'\)"):
        scoring_task("score")
    assert score_tasks_on({"verification": {"enabled": False}, "matching": {"enabled": True}}) == ["scores", "matching"]


def test_batch_stages_equal_the_single_scene_entry_points(tmp_path, scene_root, batched):
    """score_batch (features shared by the tasks, distractors from the bank) == one call per task and scene."""
    for s in SCENES:
        kp, desc = Path(batched.keypoints("kp", s)), Path(batched.descriptors("kp", "desc", s))
        out = tmp_path / s
        out.mkdir()
        score.score_scene(scene_root / s, kp, desc, SCORING, out / "q.parquet", out / "p.parquet", out / "t.json")
        others = {o: (batched.keypoints("kp", o), batched.descriptors("kp", "desc", o)) for o in SCENES if o != s}
        score.score_verification_scene(scene_root / s, kp, desc, others, SCENES, SCORING, VERIFICATION,
                                        out / "vl.parquet", out / "vq.parquet", out / "vs.parquet", out / "vt.json")
        score.score_matching_scene(scene_root / s, kp, desc, SCORING, MATCHING,
                                    out / "mp.parquet", out / "mc.parquet", out / "mr.parquet", out / "mt.json")
        pairs = {
            "q.parquet": batched.task_file("scores", "kp", "desc", s, "queries.parquet"),
            "p.parquet": batched.task_file("scores", "kp", "desc", s, "pairs.parquet"),
            "vl.parquet": batched.task_file("verification", "kp", "desc", s, "list.parquet"),
            "vq.parquet": batched.task_file("verification", "kp", "desc", s, "queries.parquet"),
            "vs.parquet": batched.task_file("verification", "kp", "desc", s, "scene.parquet"),
            "mp.parquet": batched.task_file("matching", "kp", "desc", s, "pairs.parquet"),
            "mc.parquet": batched.task_file("matching", "kp", "desc", s, "classifier.parquet"),
            "mr.parquet": batched.task_file("matching", "kp", "desc", s, "roc.parquet"),
        }
        for mine, theirs in pairs.items():
            assert (out / mine).read_bytes() == Path(theirs).read_bytes(), (s, mine)


@pytest.mark.bad_input
def test_distractor_bank_reads_each_scene_once_and_guards_its_configuration(tmp_path, batched, monkeypatch):
    calls = []
    real = common.read_features
    monkeypatch.setattr(distractors, "read_features", lambda kp, desc: calls.append(Path(kp).name) or real(kp, desc))
    out = tmp_path / "bank.parquet"
    distractors.build_distractor_bank(batched, "kp", "desc", VERIFICATION, out)
    assert sorted(calls) == sorted(f"{s}.parquet" for s in SCENES)  # every scene is some scene's distractor
    bank = distractors.read_distractor_bank(out, SCENES, VERIFICATION, "desc")
    assert [d.scene for d in bank["v_coins"]] == sorted({"i_rocket", "v_camera"}, key=[d.scene for d in bank["v_coins"]].index)
    for target, ds in bank.items():
        assert {d.scene for d in ds} == set(SCENES) - {target}
        for d in ds:  # the drawn rows of the distractor scene's own descriptor file
            f = real(Path(batched.keypoints("kp", d.scene)), Path(batched.descriptors("kp", "desc", d.scene)))
            assert d.rows.shape[0] == min(20, len(f.per_image[d.image]))
            assert (d.desc == f.by_image[d.image][d.rows]).all()
    with pytest.raises(DataError, match="drawn for another configuration"):
        distractors.read_distractor_bank(out, SCENES, {**VERIFICATION, "seed": 1}, "desc")
    with pytest.raises(DataError, match="drawn for another configuration"):
        distractors.read_distractor_bank(out, SCENES[:2], VERIFICATION, "desc")
    with pytest.raises(DataError, match="drawn for another configuration"):
        distractors.read_distractor_bank(out, SCENES, VERIFICATION, "other")


@pytest.mark.bad_input
def test_cli_rejects_a_batch_that_is_not_in_the_batch_list(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "descbench", "keypoints", "--results-root", str(tmp_path), "--scene-root", str(tmp_path),
         "--batches", '{"batch000": ["a"]}', "--batch", "batch007", "--name", "kp", "--spec", "{}"],
        capture_output=True, text=True,
    )
    assert res.returncode == 1
    assert "--batch 'batch007' is not among --batches (batch000)" in res.stderr
