"""The inspector (``descbench inspect``, descbench.report.inspect): its matches and their
correctness against a brute-force check, the diff table's order, the drawing's colours, the
command's bad input, and (e2e) the page of a tiny run, also as headless Chromium renders it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from chromium import render
from descbench.metrics.matching import MatchingParams
from descbench.report import inspect as page

ROOT = Path(__file__).resolve().parents[3]


# ----------------------------------------------------------------------------- a hand-built pair

# Image a's keypoints, a homography a -> b (a mild perspective), and image b's keypoints: each
# keypoint's exact image, except keypoint 3 moved 2.9 px (correct at 3 px), keypoint 4 moved
# 3.1 px (not), and image b's descriptors of keypoints 1 and 2 swapped (two matches ~60 px off).
XY_A = np.array([[20.0, 30.0], [80.0, 40.0], [40.0, 90.0], [120.0, 60.0], [60.0, 130.0], [150.0, 140.0]])
H_AB = np.array([[0.95, 0.05, 7.0], [-0.04, 1.02, -3.0], [1e-4, -2e-4, 1.0]])


def _brute_project(H, x, y):
    u, v, w = H @ np.array([x, y, 1.0])
    return u / w, v / w


def _pair():
    xy_b = np.array([_brute_project(H_AB, x, y) for x, y in XY_A])
    xy_b[3] += [2.9, 0.0]
    xy_b[4] += [0.0, -3.1]
    desc_a = np.eye(6, 8, dtype=np.float32)
    desc_b = desc_a[[0, 2, 1, 3, 4, 5]] + np.float32(0.01)  # row j describes image b's keypoint j
    return xy_b, desc_a, desc_b


def _brute_force(xy_a, desc_a, xy_b, desc_b, H, tau):
    """Mutual nearest neighbours by double loop, correctness by the explicit projection."""
    d = [[float(np.sum((desc_a[i].astype(float) - desc_b[j].astype(float)) ** 2)) for j in range(len(desc_b))] for i in range(len(desc_a))]
    out = []
    for i in range(len(desc_a)):
        j = min(range(len(desc_b)), key=lambda j: (d[i][j], j))
        if min(range(len(desc_a)), key=lambda k: (d[k][j], k)) == i:
            u, v = _brute_project(H, *xy_a[i])
            out.append((i, j, ((u - xy_b[j][0]) ** 2 + (v - xy_b[j][1]) ** 2) ** 0.5 <= tau))
    return out


def test_correct_matches_equal_a_brute_force_check():
    xy_b, desc_a, desc_b = _pair()
    m = page.pair_matches(XY_A, desc_a, xy_b, desc_b, H_AB, tau_px=3.0)
    got = list(zip(m.ia.tolist(), m.ib.tolist(), m.correct.tolist()))
    assert got == _brute_force(XY_A, desc_a, xy_b, desc_b, H_AB, 3.0)
    assert got == [(0, 0, True), (1, 2, False), (2, 1, False), (3, 3, True), (4, 4, False), (5, 5, True)]
    assert m.error[3] == pytest.approx(2.9) and m.error[4] == pytest.approx(3.1)
    # tau follows the run's scoring.tau_px: at 3.2 px keypoint 4's match is correct too
    assert page.pair_matches(XY_A, desc_a, xy_b, desc_b, H_AB, tau_px=3.2).correct.tolist() == [True, False, False, True, True, True]


def test_a_pair_view_warns_when_the_stored_row_is_not_reproduced():
    from descbench.metrics.matching import corner_error, estimate_homography

    xy_b, desc_a, desc_b = _pair()

    def view(row):
        return page.inspect_pair("s", 1, 2, "d", XY_A, desc_a, xy_b, desc_b, H_AB, (200, 200), (200, 200), row, MatchingParams())

    H_est, _ = estimate_homography(XY_A, xy_b[[0, 2, 1, 3, 4, 5]], 3.0, 0)  # the matches, by hand
    stored = {"n_matches": 6, "n_correct": 3, "corner_error": corner_error(H_est, H_AB, (200, 200))}
    v = view(stored)
    assert v.warnings == [] and np.array_equal(v.H_est, H_est)
    assert view({**stored, "n_correct": 4}).warnings == ["recomputed n_correct = 3 but the pairs file has 4"]
    assert [w.split(" =")[0] for w in view({**stored, "n_matches": 5, "corner_error": 0.5}).warnings] == \
        ["recomputed n_matches", "recomputed corner_error"]


def test_the_drawing_colours_correct_matches_green_and_wrong_ones_red():
    xy_b, desc_a, desc_b = _pair()
    v = page.inspect_pair("s", 1, 2, "d", XY_A, desc_a, xy_b, desc_b, H_AB, (200, 200), (200, 200), {}, MatchingParams())
    blank = np.full((200, 200), 255, np.uint8)
    img = page.draw_pair(blank, blank, v)
    assert img.shape == (200, 200 + page.PANEL_GAP + 200, 3)
    dx = 200 + page.PANEL_GAP

    def colour_near_middle(i, j):  # which colour the line (i, j) has a third of the way along (antialiased)
        p = (2 * XY_A[i] + (xy_b[j] + [dx, 0])) / 3
        pixel = img[int(round(p[1])), int(round(p[0]))].astype(float)
        return min(("correct", page.CORRECT_BGR), ("wrong", page.WRONG_BGR), key=lambda c: np.abs(pixel - c[1]).sum())[0]

    assert [colour_near_middle(i, j) for i, j in [(0, 0), (1, 2), (2, 1), (3, 3), (4, 4), (5, 5)]] == \
        ["correct", "wrong", "wrong", "correct", "wrong", "correct"]
    wide = page.draw_pair(np.zeros((100, 1600), np.uint8), np.zeros((50, 900), np.uint8), v)
    assert wide.shape == (40, page.MAX_PANEL_WIDTH * 2 + page.PANEL_GAP, 3)  # each image at most 640 px wide


def test_the_diff_table_is_sorted_by_the_absolute_difference():
    first = pd.DataFrame({"scene": ["v_b", "v_b", "i_a", "i_a", "i_a"], "pair": [2, 3, 2, 3, 4],
                          "mma_at_3": [0.5, 0.9, 0.2, 0.7, float("nan")]})
    second = pd.DataFrame({"scene": ["i_a", "i_a", "i_a", "v_b", "v_b", "v_c"], "pair": [2, 3, 4, 2, 3, 2],
                           "mma_at_3": [0.3, 0.4, 0.5, 0.6, 0.6, 1.0]})
    t = page.diff_table(first, second, "mma_at_3")
    # |diff|: v_b 3: 0.3, i_a 3: 0.3 (tie: scene order), i_a 2: 0.1, v_b 2: 0.1 (tie), i_a 4: NaN last;
    # v_c is in one table only: left out
    assert list(zip(t.scene, t.b)) == [("i_a", 3), ("v_b", 3), ("i_a", 2), ("v_b", 2), ("i_a", 4)]
    assert t.difference.round(6).tolist()[:4] == [-0.3, -0.3, 0.1, 0.1] and np.isnan(t.difference.iloc[4])
    assert (t.a == 1).all()


def test_scenes_with_and_without_their_own_pairs_mix_in_one_table():
    """A scene with a pairs.txt (query_image column) beside one with the reference pairs (none): the
    concatenated table's missing query images are image 1."""
    listed = pd.DataFrame({"scene": ["v_a", "v_a"], "query_image": [2, 3], "pair": [5, 4], "mma_at_3": [0.5, 0.2]})
    reference = pd.DataFrame({"scene": ["v_b"], "pair": [2], "mma_at_3": [0.1]})
    both = pd.concat([listed, reference], ignore_index=True)
    assert page.pair_keys(both)[["a", "b"]].values.tolist() == [[2, 5], [3, 4], [1, 2]]
    assert [k[:3] for k in page.worst_pairs(both, "mma_at_3", 2).values.tolist()] == [["v_b", 1, 2], ["v_a", 3, 4]]


def test_the_worst_pairs_are_undefined_first_then_the_lowest_or_for_an_error_the_highest():
    t = pd.DataFrame({"scene": ["v_b", "i_a", "i_a", "i_a", "v_b"], "pair": [2, 2, 3, 4, 3],
                      "mma_at_3": [0.5, float("nan"), 0.5, 0.1, 0.9],
                      "corner_error": [2.0, float("inf"), 7.0, float("nan"), 0.5]})
    mma = page.worst_pairs(t, "mma_at_3", 4)
    # NaN first; then 0.1; then the 0.5 tie in scene order (i_a before v_b); 0.9 left out (n = 4)
    assert list(zip(mma.scene, mma.b)) == [("i_a", 2), ("i_a", 4), ("i_a", 3), ("v_b", 2)]
    err = page.worst_pairs(t, "corner_error", 5)
    assert list(zip(err.scene, err.b)) == [("i_a", 4), ("i_a", 2), ("i_a", 3), ("v_b", 2), ("v_b", 3)]  # NaN, inf, 7, 2, 0.5
    assert (err.a == 1).all()


def test_the_pairs_drawn_are_every_pair_the_worst_or_the_most_different():
    first = pd.DataFrame({"scene": ["i_a", "i_a", "v_b"], "pair": [2, 3, 2], "mma_at_3": [0.9, 0.2, 0.5]})
    second = pd.DataFrame({"scene": ["i_a", "i_a", "v_b"], "pair": [2, 3, 2], "mma_at_3": [0.1, 0.3, 0.5]})
    assert page.select_pairs({"d": first}, "mma_at_3", None) == (None, "every pair")
    keys, why = page.select_pairs({"d": first}, "mma_at_3", 2)
    assert keys == [("i_a", 1, 3), ("v_b", 1, 2)] and why.startswith("the 2 of 3 pairs where d has the worst mma_at_3")
    keys, why = page.select_pairs({"d": first, "e": second}, "mma_at_3", 1)
    assert keys == [("i_a", 1, 2)] and why == "the 1 of 3 pairs where e and d differ most in mma_at_3"
    with pytest.raises(ValueError, match="max_pairs=0"):
        page.select_pairs({"d": first}, "mma_at_3", 0)


def test_the_failure_summary_averages_per_scene_group_and_image():
    # a pair (2, 3) of a run with pairs: all is not a reference pair: left out
    t = pd.DataFrame({"scene": ["i_a", "i_b", "v_a", "v_a", "x", "i_a"], "query_image": [1, 1, 1, 1, 1, 2], "pair": [2, 2, 2, 3, 2, 3],
                      "corner_error": [1.0, 3.0, float("inf"), 4.0, 9.0, 50.0]})
    s = page.failure_summary({"d": t}, "corner_error")
    assert s.to_dict("records") == [{"descriptor": "d", "group": "illumination", "b": 2, "mean": 2.0, "n": 2},
                                    {"descriptor": "d", "group": "other", "b": 2, "mean": 9.0, "n": 1},
                                    {"descriptor": "d", "group": "viewpoint", "b": 3, "mean": 4.0, "n": 1}]
    assert page.failure_svg(s, "corner_error", ["d"]).count("<svg") == 3


# ----------------------------------------------------------------------------- e2e: a tiny run


SCENES = ["i_astronaut", "v_coins"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """The workflow on two demo scenes with sift and rootsift: its results folder."""
    work = tmp_path_factory.mktemp("inspect_run")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg.update(scenes=SCENES)
    cfg["verification"]["enabled"] = False
    cfg["descriptors"] = {"sift": {"family": "sift"}, "rootsift": {"family": "rootsift"}}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(work), "--cores", "2"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return work / "results" / "demo"


def _inspect(results: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "descbench", "inspect", "--results", str(results), "--keypoint-set", "sift",
                           "--descriptor", "sift", "--out", str(out), *extra], capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_the_command_writes_a_self_contained_page(tiny_run, tmp_path):
    res = _inspect(tiny_run, tmp_path / "one.html")
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "one.html").read_text()
    n_pairs = 5 * len(SCENES)
    assert text.count("<img ") == n_pairs  # one drawing per pair
    assert text.count('<table class="metrics">') == n_pairs
    assert all(f'id="{page.pair_anchor(s, 1, k)}"' in text for s in SCENES for k in range(2, 7))
    assert 'id="scene-index"' in text and text.count('class="failure-plot"') == 2  # illumination and viewpoint
    assert 'class="warning"' not in text  # the recomputed matches reproduce the pairs files
    srcs = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert srcs and all(s.startswith(("data:image/jpeg;base64,", "#")) for s in srcs)  # nothing loaded from elsewhere
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    # deterministic: the same inputs give the same bytes
    assert _inspect(tiny_run, tmp_path / "again.html").returncode == 0
    assert (tmp_path / "again.html").read_bytes() == (tmp_path / "one.html").read_bytes()

    res = _inspect(tiny_run, tmp_path / "vs.html", "--vs", "rootsift", "--scenes", "v_coins")
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "vs.html").read_text()
    assert text.count("<img ") == 2 * 5 and 'id="diff-table"' in text
    diff = re.search(r'<table id="diff-table">(.*?)</table>', text, re.S).group(1)
    linked = re.findall(r'<a href="#pair-v_coins-1-(\d)">', diff)
    assert sorted(linked) == ["2", "3", "4", "5", "6"]
    sizes = [abs(float(x)) for x in re.findall(r"<td>([-0-9.e]+)</td></tr>", diff)]
    assert sizes == sorted(sizes, reverse=True)

    # at most 3 pairs drawn: the 3 where the two differ most; the table still lists all 10, the
    # drawn ones linked; the summary covers every pair
    res = _inspect(tiny_run, tmp_path / "three.html", "--vs", "rootsift", "--max-pairs", "3")
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "three.html").read_text()
    diff = re.search(r'<table id="diff-table">(.*?)</table>', text, re.S).group(1)
    assert diff.count("<tr>") == 1 + 5 * len(SCENES)
    top = re.findall(r'<td class="name">(?:<a href="#([^"]+)">)?([^<]+)', diff)[:4]
    assert [t[0] != "" for t in top] == [True, True, True, False]
    drawn = re.findall(r'<div class="pair" id="([^"]+)">', text)
    assert drawn == [t[0] for t in top[:3]] and text.count("<img ") == 2 * 3
    assert "Pairs drawn: the 3 of 10 pairs where rootsift and sift differ most in mma_at_3." in text
    assert _inspect(tiny_run, tmp_path / "x.html", "--max-pairs", "0").returncode == 1

    # a missing pairs file: the error names it and the fix
    broken = tmp_path / "broken"
    shutil.copytree(tiny_run, broken / "results" / "demo")
    (broken / "results" / "demo" / "matching" / "sift" / "rootsift" / "batch000" / "v_coins.pairs.parquet").unlink()
    res = _inspect(broken / "results" / "demo", tmp_path / "x.html", "--vs", "rootsift", "--data-dir", str(tiny_run.parents[1] / "data"))
    assert res.returncode == 1 and "v_coins.pairs.parquet" in res.stderr and "rerun the workflow" in res.stderr
    assert not (tmp_path / "x.html").exists()


@pytest.mark.e2e
def test_headless_chromium_renders_the_page(tiny_run, tmp_path):
    out = tmp_path / "page.html"
    assert _inspect(tiny_run, out, "--vs", "rootsift").returncode == 0
    pixels, dom = render(out, tmp_path)
    assert pixels.shape == (2000, 1280) and pixels.std() > 20  # drawn, not a blank page
    assert dom.count("<img ") == 2 * 5 * len(SCENES)
    assert 'id="diff-table"' in dom and 'id="scene-index"' in dom and dom.count('class="failure-plot"') == 2
    assert dom.count('<table class="metrics">') == 5 * len(SCENES)
