"""Image pairs with geometry (descbench.datasets.geometry, descbench.datasets.layout): pair
listing, homography composition, pairs.txt parsing and its errors, and how the scoring tables
name a pair (descbench.io.with_query_image)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from descbench import io
from descbench.datasets.geometry import Homography, Pair, RelativePose, compose_homography
from descbench.datasets.layout import (list_pairs, load_pairs, pair_homography, pairs_mode, read_homography, scene_files,
                                       write_homography)
from descbench.errors import ConfigError, DataError

# --------------------------------------------------------------------------- listing


def test_reference_pairs_are_one_k():
    assert list_pairs(6) == [(1, 2), (1, 3), (1, 4), (1, 5), (1, 6)]
    assert list_pairs(8, "reference") == [(1, k) for k in range(2, 9)]
    assert list_pairs(2) == [(1, 2)]


def test_all_pairs_are_every_unordered_pair_once_reference_first():
    got = list_pairs(5, "all")
    assert got == [(1, 2), (1, 3), (1, 4), (1, 5), (2, 3), (2, 4), (2, 5), (3, 4), (3, 5), (4, 5)]
    assert len(list_pairs(8, "all")) == 8 * 7 // 2
    assert got[:4] == list_pairs(5, "reference")  # the (1, k) rows of `all` are reference's


@pytest.mark.bad_input
def test_unknown_pair_mode_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"pairs: 'some' is not a pair mode; use one of reference, all"):
        list_pairs(6, "some")
    with pytest.raises(ConfigError, match=r"pairs: 'every'"):
        pairs_mode({"pairs": "every"})
    assert pairs_mode({}) == "reference" and pairs_mode({"pairs": "all"}) == "all"


# --------------------------------------------------------------------------- composition


def _apply(H: np.ndarray, xy) -> np.ndarray:
    p = H @ np.array([xy[0], xy[1], 1.0])
    return p[:2] / p[2]


def test_composition_by_hand():
    # H_1_a: image 1 shifted by (10, 20); H_1_b: image 1 scaled by 2. A pixel p of image a is
    # p - (10, 20) in image 1, hence 2 (p - (10, 20)) in image b.
    H_1a = np.array([[1.0, 0, 10], [0, 1, 20], [0, 0, 1]])
    H_1b = np.diag([2.0, 2.0, 1.0])
    H_ab = compose_homography(H_1a, H_1b)
    np.testing.assert_array_equal(H_ab, [[2, 0, -20], [0, 2, -40], [0, 0, 1]])
    np.testing.assert_allclose(_apply(H_ab, (15, 25)), (10, 10))


def test_composition_against_point_mapping():
    rng = np.random.default_rng(3)
    for _ in range(20):
        H_1a = np.eye(3) + rng.normal(0, [[0.1, 0.1, 20], [0.1, 0.1, 20], [1e-4, 1e-4, 0]])
        H_1b = np.eye(3) + rng.normal(0, [[0.1, 0.1, 20], [0.1, 0.1, 20], [1e-4, 1e-4, 0]])
        H_ab = compose_homography(H_1a, H_1b)
        assert H_ab[2, 2] == 1.0
        for xy in rng.uniform(0, 600, (5, 2)):
            # image a -> image 1: the image-1 point that H_1_a sends to xy (solved, not inverted)
            p1 = np.linalg.solve(H_1a, np.array([xy[0], xy[1], 1.0]))
            want = _apply(H_1b, p1[:2] / p1[2])
            np.testing.assert_allclose(_apply(H_ab, xy), want, rtol=1e-9, atol=1e-7)


@pytest.mark.bad_input
def test_composition_to_infinity_names_its_sources():
    H_1a = np.eye(3)
    H_1b = np.array([[1.0, 0, 0], [0, 1, 0], [1, 0, 0]])  # sends (0, 0) to infinity
    with pytest.raises(DataError, match=r"composed from H_1_3 and H_1_5 of x maps pixel \(0, 0\) to infinity.*pairs\.txt"):
        compose_homography(H_1a, H_1b, "H_1_3 and H_1_5 of x")


@pytest.mark.bad_input
def test_a_pair_refuses_a_geometry_its_task_cannot_read():
    p = Pair(1, 2, RelativePose(np.eye(3), np.eye(3), np.eye(3), np.zeros(3)))
    with pytest.raises(DataError, match=r"pair \(1, 2\) has a relative_pose geometry, but matching needs a homography"):
        p.homography("matching")
    assert Pair(1, 2, Homography(np.eye(3))).homography("x") is not None


# --------------------------------------------------------------------------- scene folders and pairs.txt


def test_reference_pairs_read_the_files_bit_for_bit(scene: Path):
    files = scene_files(scene)
    pairs = load_pairs(files)
    assert [(p.a, p.b) for p in pairs] == [(1, k) for k in range(2, 7)]
    for p in pairs:
        assert np.array_equal(p.geometry.H, read_homography(scene / f"H_1_{p.b}"))


def test_all_pairs_compose_the_scene_homographies(scene: Path):
    pairs = {(p.a, p.b): p.geometry.H for p in load_pairs(scene_files(scene), "all")}
    assert len(pairs) == 15
    want = read_homography(scene / "H_1_5") @ np.linalg.inv(read_homography(scene / "H_1_3"))
    np.testing.assert_allclose(pairs[(3, 5)], want / want[2, 2], rtol=1e-12)


def test_longer_scene_lists_its_pairs(scene: Path):
    shutil.copy(scene / "6.ppm", scene / "7.ppm")
    shutil.copy(scene / "6.ppm", scene / "8.ppm")
    shutil.copy(scene / "H_1_6", scene / "H_1_7")
    shutil.copy(scene / "H_1_6", scene / "H_1_8")
    files = scene_files(scene)
    assert [(p.a, p.b) for p in files.pairs()] == [(1, k) for k in range(2, 9)]
    assert len(files.pairs("all")) == 28


def _pairs_txt(scene: Path, text: str) -> Path:
    path = scene / "pairs.txt"
    path.write_text(text)
    return path


def test_pairs_file_lists_the_pairs_in_file_order_and_wins_over_the_option(scene: Path):
    write_homography(scene / "H_3_4", np.array([[1.0, 0, 5], [0, 1, -3], [0, 0, 1]]))
    _pairs_txt(scene, "# query target [file]\n2 5\n\n3 4 H_3_4   # its own file\n5 2\n1 6\n")
    files = scene_files(scene)
    for mode in ("reference", "all"):
        assert [(p.a, p.b) for p in files.pairs(mode)] == [(2, 5), (3, 4), (5, 2), (1, 6)]
    H = {(p.a, p.b): p.geometry.H for p in load_pairs(files, "all")}
    np.testing.assert_array_equal(H[(3, 4)], [[1, 0, 5], [0, 1, -3], [0, 0, 1]])
    np.testing.assert_array_equal(H[(1, 6)], read_homography(scene / "H_1_6"))
    product = H[(5, 2)] @ H[(2, 5)]
    np.testing.assert_allclose(product / product[2, 2], np.eye(3), atol=1e-9)  # reversed pairs invert (up to scale)
    assert files.pairs_file.name == "pairs.txt" and (scene / "H_3_4") in files.all_paths()
    assert (scene / "pairs.txt") in files.all_paths()


def test_pairs_file_needs_only_the_homographies_it_composes(scene: Path):
    write_homography(scene / "H_3_4", np.eye(3))
    for k in (2, 5, 6):
        (scene / f"H_1_{k}").unlink()
    _pairs_txt(scene, "3 4 H_3_4\n1 3\n")
    files = scene_files(scene)
    assert sorted(files.homographies) == [3, 4]
    assert [(p.a, p.b) for p in load_pairs(files)] == [(3, 4), (1, 3)]


@pytest.mark.parametrize("text, line, message", [
    ("2 5\n2\n", 2, r"malformed line '2'; one pair per line"),
    ("2 5 H_2_5 extra\n", 1, r"malformed line '2 5 H_2_5 extra'"),
    ("two 5\n", 1, r"malformed line 'two 5'"),
    ("2 9\n", 1, r"pair \(2, 9\) names image 9, but the scene has images 1\.\.6"),
    ("0 3\n", 1, r"pair \(0, 3\) names image 0"),
    ("3 3\n", 1, r"pair \(3, 3\) pairs image 3 with itself"),
    ("2 5\n# again\n2 5 # again\n", 3, r"pair \(2, 5\) is listed again \(first on line 1\)"),
    ("2 5 H_2_5\n", 1, r"pair \(2, 5\) names its homography file .*H_2_5, which does not exist"),
    ("2 5 ../H_2_5\n", 1, r"homography file '\.\./H_2_5' is not a file name in the scene folder"),
])
@pytest.mark.bad_input
def test_pairs_file_errors_name_the_file_and_line(scene: Path, text: str, line: int, message: str):
    path = _pairs_txt(scene, text)
    (scene.parent / "H_2_5").write_text("1 0 0 0 1 0 0 0 1\n")  # outside the scene folder
    with pytest.raises(DataError, match=rf"{path}, line {line}: {message}"):
        scene_files(scene)


@pytest.mark.bad_input
def test_pairs_file_composing_a_missing_homography_names_it(scene: Path):
    (scene / "H_1_5").unlink()
    path = _pairs_txt(scene, "2 3\n2 5\n")
    with pytest.raises(DataError, match=rf"{path}, line 2: pair \(2, 5\) has no homography file, so it is composed from "
                                        r"H_1_2 and H_1_5, but H_1_5 does not exist.*'2 5 FILE'"):
        scene_files(scene)


@pytest.mark.bad_input
def test_pairs_file_without_pairs_is_refused(scene: Path):
    path = _pairs_txt(scene, "# nothing yet\n\n")
    with pytest.raises(DataError, match=rf"{path} lists no pair"):
        scene_files(scene)


@pytest.mark.bad_input
def test_without_pairs_file_every_homography_is_needed(scene: Path):
    (scene / "H_1_4").unlink()
    with pytest.raises(DataError, match=r"missing H_1_4\. A scene of 6 images needs"):
        scene_files(scene)


@pytest.mark.bad_input
def test_a_missing_reference_homography_names_who_needs_it(scene: Path):
    (scene / "H_1_4").unlink()
    _pairs_txt(scene, "2 3\n")  # needs H_1_2 and H_1_3 only
    files = scene_files(scene)
    with pytest.raises(DataError, match=r"has no H_1_4 \(homography image 1 -> image 4\), which keypoint set 'p' "
                                        r"\(mode: projected\) needs"):
        files.homography_file(4, "keypoint set 'p' (mode: projected)")
    assert np.array_equal(pair_homography(files, files.listed[0]),
                          compose_homography(read_homography(scene / "H_1_2"), read_homography(scene / "H_1_3")))


# --------------------------------------------------------------------------- how rows name a pair


def test_query_image_column_sits_before_the_pair():
    from descbench.tasks import matching, retrieval, verification

    assert io.with_query_image(retrieval.PAIRS).names[:3] == ["scene", "query_image", "pair"]
    assert io.with_query_image(verification.VERIFICATION_LIST).names[:2] == ["query_image", "query"]
    assert io.with_query_image(verification.KEYPOINT_RETRIEVAL).names[:3] == ["scene", "query_image", "query"]
    assert io.with_query_image(matching.ROC_POINTS).field("query_image").type == pa.int8()


def test_report_reads_reference_scenes_as_query_image_one():
    from descbench.tasks.base import concat_rows

    ref = pa.table({"scene": ["a", "a"], "pair": pa.array([2, 3], pa.int8()), "v": [1.0, 2.0]})
    other = pa.table({"scene": ["b"], "query_image": pa.array([2], pa.int8()), "pair": pa.array([5], pa.int8()), "v": [3.0]})
    df = concat_rows([ref, other])
    assert list(df.columns) == ["scene", "query_image", "pair", "v"]
    assert df.query_image.tolist() == [1, 1, 2] and df.pair.tolist() == [2, 3, 5]
    assert "query_image" not in concat_rows([ref]).columns  # a run of (1, k) scenes: unchanged


def test_per_scene_query_keypoints_sum_over_query_images():
    import pandas as pd

    from descbench.metrics.aggregate import features_per_image, scene_table

    pairs = pd.DataFrame({"scene": ["s"] * 3, "query_image": [2, 2, 3], "pair": [5, 4, 4], "n_query_keypoints": [10, 10, 7],
                          "n_target_keypoints": [6, 4, 4], "n_queries": [10, 10, 7], "n_outside": [0, 0, 0],
                          "n_relevant_queries": [5, 5, 5], "n_relevant_items": [5, 5, 5], "sum_ap": [1.0, 1.0, 1.0],
                          **{f"sum_hit_at_{k}": [0.0] * 3 for k in io.HIT_KS}})
    assert scene_table(pairs).n_query_keypoints.tolist() == [17]  # images 2 and 3, each once
    m = pd.DataFrame({"scene": ["s"] * 3, "query_image": [2, 2, 3], "pair": [5, 4, 4],
                      "n_keypoints_1": [10, 10, 7], "n_keypoints_2": [6, 4, 4]})
    assert features_per_image(m) == (10 + 7 + 6 + 4) / 4  # images 2, 3, 5, 4: each once


def test_distractor_image_is_drawn_among_the_other_scenes_images():
    from descbench.metrics.distractors import draw_distractors

    counts = {"a": {k: 10 for k in range(1, 7)}, "b": {k: 10 for k in range(1, 9)}, "c": {1: 5, 2: 5}}
    images = {d.scene: set() for d in draw_distractors("a", ["a", "b", "c"], 2, 3, 0, counts)}
    for seed in range(200):
        for d in draw_distractors("a", ["a", "b", "c"], 2, 3, seed, counts):
            images[d.scene].add(d.image)
    assert images["b"] == set(range(1, 9)) and images["c"] == {1, 2}


# --------------------------------------------------------------------------- the keypoint job checks the files


@pytest.mark.bad_input
def test_a_pair_file_that_maps_outside_its_target_is_refused(scene: Path, tmp_path: Path):
    from descbench.jobs.keypoints import detect_scene

    write_homography(scene / "H_3_4", np.array([[1.0, 0, 1e5], [0, 1, 0], [0, 0, 1]]))  # 100,000 px to the right
    _pairs_txt(scene, "2 5\n3 4 H_3_4\n")
    spec = {"detector": "sift", "params": {}, "border_px": 40, "max_keypoints": 200}
    with pytest.raises(DataError, match=r"H_3_4"):
        detect_scene(scene, "kp", spec, tmp_path / "kp.parquet")
    assert not (tmp_path / "kp.parquet").exists()


@pytest.mark.bad_input
def test_projected_keypoints_need_every_reference_homography(scene: Path, tmp_path: Path):
    from descbench.jobs.keypoints import detect_scene

    (scene / "H_1_6").unlink()
    _pairs_txt(scene, "2 5\n")
    spec = {"detector": "sift", "mode": "projected", "params": {}, "border_px": 40, "max_keypoints": 200}
    with pytest.raises(DataError, match=r"has no H_1_6 .*keypoint set 'kp' \(mode: projected"):
        detect_scene(scene, "kp", spec, tmp_path / "kp.parquet")
