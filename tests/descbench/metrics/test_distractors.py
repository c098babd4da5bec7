"""descbench.metrics.distractors: the distractor draw of the module docstring, step by step,
against numpy's generator driven here by hand."""

from __future__ import annotations

import hashlib

import numpy as np

from descbench.metrics.distractors import DistractorDraw, distractor_scenes, draw_distractors, scene_rng

SCENES = ["v_b", "i_a", "v_c", "i_d", "v_e"]


def ref_rng(seed, scene):
    key = f"descbench-distractors:{seed}:{scene}".encode()
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def test_scenes_are_a_draw_without_replacement_from_the_sorted_others():
    others = sorted(s for s in SCENES if s != "v_c")
    want = [others[i] for i in ref_rng(7, "v_c").choice(len(others), size=3, replace=False)]
    got = distractor_scenes("v_c", SCENES, 3, 7)
    assert got == want and len(set(got)) == 3 and "v_c" not in got
    assert distractor_scenes("v_c", list(reversed(SCENES)), 3, 7) == got  # the scene list's order does not matter
    assert sorted(distractor_scenes("v_c", SCENES, 10, 7)) == others  # fewer others than asked: all of them
    assert distractor_scenes("v_c", ["v_c"], 3, 7) == []
    assert distractor_scenes("v_c", SCENES, 0, 7) == []
    one = [others[i] for i in ref_rng(7, "v_c").choice(len(others), size=1, replace=False)]
    assert distractor_scenes("v_c", SCENES, 1, 7) == one and len(one) == 1  # one scene asked: one drawn
    np.testing.assert_array_equal(scene_rng(7, "v_c").random(3), ref_rng(7, "v_c").random(3))


def test_draw_follows_steps_2_and_3():
    counts = {s: {k: 10 * k + len(s) for k in range(1, 7)} for s in SCENES}
    draws = draw_distractors("i_a", SCENES, 2, 5, 3, counts)
    rng = ref_rng(3, "i_a")
    others = sorted(s for s in SCENES if s != "i_a")
    want = []
    for other in [others[i] for i in rng.choice(len(others), size=2, replace=False)]:
        image = int(rng.integers(1, 7))
        rows = np.sort(rng.choice(counts[other][image], size=5, replace=False))
        want.append((other, image, rows.tolist()))
    assert [(d.scene, d.image, d.rows.tolist()) for d in draws] == want
    assert all(isinstance(d, DistractorDraw) and d.rows.dtype == np.int64 for d in draws)
    assert [d.scene for d in draws] == distractor_scenes("i_a", SCENES, 2, 3)  # step 2 is the DAG's list


def test_all_keypoints_and_small_images():
    counts = {s: {k: 3 for k in range(1, 7)} for s in SCENES}
    for d in draw_distractors("i_a", SCENES, 4, "all", 0, counts):
        assert d.rows.tolist() == [0, 1, 2]
    for d in draw_distractors("i_a", SCENES, 4, 10, 0, counts):  # per_scene above the count: every row, in order
        assert d.rows.tolist() == [0, 1, 2]
    empty = {s: {k: 0 for k in range(1, 7)} for s in SCENES}
    assert all(d.rows.size == 0 and d.rows.dtype == np.int64 for d in draw_distractors("i_a", SCENES, 4, 5, 0, empty))
