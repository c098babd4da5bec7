"""End to end: a folder dataset whose scenes are not HPatches' shape. ``v_long`` has 8 images
(reference + 7 targets); ``v_listed`` has a ``pairs.txt`` of non-reference pairs (composed,
reversed, and one with its own homography file). Every scoring task and the keypoint statistics
must cover exactly those pairs, with the homographies the dataset defines."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from descbench.datasets.demo import generate_scene
from descbench.datasets.layout import read_homography, write_homography
from descbench.paths import ResultPaths, scene_batches
from smkrun import snakemake

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

LONG = [(1, k) for k in range(2, 9)]
LISTED = [(2, 5), (3, 4), (5, 2), (4, 6)]
PAIRS_TXT = "# query image, target image [, homography file]\n2 5\n3 4 H_3_4\n5 2   # reversed\n4 6\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("pairs")
    gen = work / "gen"
    generate_scene("v_coins", gen, seed=0, n_images=8)
    generate_scene("v_chelsea", gen, seed=0)
    data = work / "scenes"
    data.mkdir()
    shutil.move(gen / "v_coins", data / "v_long")
    listed = data / "v_listed"
    shutil.move(gen / "v_chelsea", listed)
    # (3, 4) by its own file: the true H_1_4 H_1_3^-1, written as a file of its own
    H34 = read_homography(listed / "H_1_4") @ np.linalg.inv(read_homography(listed / "H_1_3"))
    write_homography(listed / "H_3_4", H34 / H34[2, 2])
    (listed / "pairs.txt").write_text(PAIRS_TXT)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["dataset"] = "folder"
    cfg["folder"] = {"path": str(data), "name": "pairs"}
    cfg["execution"]["scenes_per_job"] = 1
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    snakemake(work, "--cores", "2")
    return work, cfg, data


def _res(work: Path) -> ResultPaths:
    return ResultPaths(work / "results" / "folder-pairs", scene_batches(["v_listed", "v_long"], 1))


def _pairs_of(table: pd.DataFrame) -> list[tuple[int, int]]:
    qi = table["query_image"] if "query_image" in table.columns else pd.Series(1, index=table.index)
    return list(dict.fromkeys(zip(qi.astype(int), table["pair"].astype(int))))


def test_every_task_covers_exactly_the_scene_pairs(run):
    work, cfg, _ = run
    paths = _res(work)
    for scene, want, labelled in (("v_long", LONG, False), ("v_listed", LISTED, True)):
        for task, kind in (("scores", "pairs.parquet"), ("scores", "queries.parquet"), ("matching", "pairs.parquet"),
                           ("matching", "classifier.parquet"), ("matching", "roc.parquet")):
            t = pq.read_table(paths.task_file(task, "sift", "sift", scene, kind)).to_pandas()
            assert ("query_image" in t.columns) == labelled, (scene, task, kind)
            assert _pairs_of(t) == want, (scene, task, kind)
            if kind == "pairs.parquet" or kind == "classifier.parquet":
                assert len(t) == len(want) * (1 if kind == "pairs.parquet" else len(cfg["matching"]["classifier_matchers"]))


def _keypoints_per_image(paths, scene: str):
    """image number -> the scene's keypoint count in that image."""
    return pq.read_table(paths.keypoints("sift", scene)).to_pandas().groupby("image").size()


def test_queries_are_the_query_images_keypoints(run):
    work, _, _ = run
    paths = _res(work)
    n = _keypoints_per_image(paths, "v_listed")
    q = pq.read_table(paths.task_file("scores", "sift", "sift", "v_listed", "queries.parquet")).to_pandas()
    for (a, b), rows in q.groupby(["query_image", "pair"], sort=False):
        assert len(rows) == n[a] and rows["query"].tolist() == list(range(n[a]))
    pairs = pq.read_table(paths.task_file("scores", "sift", "sift", "v_listed", "pairs.parquet")).to_pandas()
    assert pairs.n_query_keypoints.tolist() == [n[a] for a, _ in LISTED]
    assert pairs.n_target_keypoints.tolist() == [n[b] for _, b in LISTED]


def test_verification_pools_the_query_images(run):
    work, _, _ = run
    paths = _res(work)
    n = _keypoints_per_image(paths, "v_listed")
    lst = pq.read_table(paths.task_file("verification", "sift", "sift", "v_listed", "list.parquet")).to_pandas()
    own = lst[lst.target_scene == "v_listed"]
    got = {a: sorted(set(g.target_image)) for a, g in own.groupby("query_image")}
    assert got == {2: [5], 3: [4], 4: [6], 5: [2]}
    assert set(lst[lst.target_scene != "v_listed"].target_scene) == {"v_long"}  # the distractors
    q = pq.read_table(paths.task_file("verification", "sift", "sift", "v_listed", "queries.parquet")).to_pandas()
    assert q.groupby("query_image").size().to_dict() == {a: n[a] for a in (2, 3, 4, 5)}
    row = pq.read_table(paths.task_file("verification", "sift", "sift", "v_listed", "scene.parquet")).to_pandas()
    assert len(row) == 1 and row.n_queries[0] == sum(n[a] for a in (2, 3, 4, 5))
    assert row.verification_num_positives[0] + row.verification_num_negatives[0] == len(lst)
    long = pq.read_table(paths.task_file("verification", "sift", "sift", "v_long", "list.parquet")).to_pandas()
    assert "query_image" not in long.columns and set(long[long.target_scene == "v_long"].target_image) <= set(range(2, 9))


def test_scores_use_the_dataset_homographies(run):
    from descbench.metrics.retrieval import RetrievalParams, pair_statistics, score_pair
    from descbench.jobs.common import read_features

    work, cfg, data = run
    paths = _res(work)
    f = read_features(Path(paths.keypoints("sift", "v_listed")), Path(paths.descriptors("sift", "sift", "v_listed")))
    got = pq.read_table(paths.task_file("scores", "sift", "sift", "v_listed", "pairs.parquet")).to_pandas()
    H1 = {k: read_homography(data / "v_listed" / f"H_1_{k}") for k in range(2, 7)}
    for i, (a, b) in enumerate(LISTED):
        # image a -> image 1 -> image b, by hand
        H = H1[b] @ np.linalg.inv(H1[a])
        res = score_pair(f.per_image[a].xy, f.by_image[a], f.per_image[b].xy, f.by_image[b], H / H[2, 2],
                         tuple(f.kmeta["image_sizes"][str(b)]), RetrievalParams.from_config(cfg["scoring"]),
                         (f.per_image[a].angle, f.per_image[a].size), (f.per_image[b].angle, f.per_image[b].size))
        want = pair_statistics(res, len(f.per_image[b]))
        assert want["n_relevant_queries"] > 0
        for key in ("n_outside", "n_relevant_queries", "n_relevant_items"):
            assert got[key][i] == want[key], (a, b, key)
        np.testing.assert_allclose(got.sum_ap[i], want["sum_ap"], rtol=1e-9)


def test_keypoint_statistics_cover_the_pairs(run):
    from descbench.datasets.geometry import Pair
    from descbench.datasets.layout import load_pairs, scene_files
    from descbench.report.keypoint_stats import set_statistics
    from descbench.jobs.common import load_keypoints

    work, cfg, data = run
    paths = _res(work)
    scenes = []
    for s in ("v_listed", "v_long"):
        per_image, meta = load_keypoints(Path(paths.keypoints("sift", s)))
        pairs: list[Pair] = load_pairs(scene_files(data / s))
        assert [(p.a, p.b) for p in pairs] == (LISTED if s == "v_listed" else LONG)
        scenes.append((s, per_image, meta["image_sizes"], [(p.a, p.b, p.geometry.H) for p in pairs]))
    want = set_statistics(scenes, cfg["matching"]["repeatability_px"])
    got = pd.read_parquet(work / "results" / "folder-pairs" / "report" / "keypoint_stats.parquet")
    assert got.n_images[0] == 14
    assert got.repeatability[0] == want["repeatability"] and got.repeatability_pair_mean[0] == want["repeatability_pair_mean"]


def test_report_has_both_scenes(run):
    work, _, _ = run
    per_scene = pd.read_csv(work / "results" / "folder-pairs" / "report" / "per_scene.csv")
    assert set(per_scene.scene) == {"v_long", "v_listed"}
    assert per_scene[per_scene.scene == "v_listed"].true_map.notna().all()


def test_all_pairs_option(run, tmp_path):
    work, cfg, data = run
    only = tmp_path / "scenes"
    only.mkdir()
    shutil.copytree(data / "v_long", only / "v_long")
    cfg = {**cfg, "pairs": "all", "folder": {"path": str(only), "name": "all"},
           "descriptors": {"sift": cfg["descriptors"]["sift"]}, "verification": {**cfg["verification"], "enabled": False}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    snakemake(tmp_path, "--cores", "2")
    paths = ResultPaths(tmp_path / "results" / "folder-all", scene_batches(["v_long"], 1))
    want = [(a, b) for a in range(1, 9) for b in range(a + 1, 9)]
    for task, kind in (("scores", "pairs.parquet"), ("matching", "pairs.parquet")):
        t = pq.read_table(paths.task_file(task, "sift", "sift", "v_long", kind)).to_pandas()
        assert _pairs_of(t) == want
    # the (1, k) rows of `all` are the reference run's, value for value
    ref = pq.read_table(_res(work).task_file("matching", "sift", "sift", "v_long", "pairs.parquet")).to_pandas()
    allp = pq.read_table(paths.task_file("matching", "sift", "sift", "v_long", "pairs.parquet")).to_pandas()
    pd.testing.assert_frame_equal(allp[allp.query_image == 1].drop(columns="query_image").reset_index(drop=True), ref)
