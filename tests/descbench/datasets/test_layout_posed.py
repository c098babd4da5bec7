"""A posed scene folder read as a scene (descbench.datasets.layout.posed_scene_files): its images are
the views its pairs name, numbered in views.txt order; each pair's geometry is the views' relative
pose (checked against the rendered demo's cameras); bad input names the file."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.datasets.geometry import RelativePose
from descbench.datasets.layout import MAX_IMAGES, load_pairs, posed_scene_parts, scene_files
from descbench.datasets.posed_demo import make_scene, write_scene
from descbench.errors import DataError

I = "1 0 0 0 1 0 0 0 1"


def _scene(tmp_path, views, pairs, images=None):
    d = tmp_path / "s"
    (d / "images").mkdir(parents=True)
    (d / "views.txt").write_text("".join(f"{v} {I} 0 0 {k} PINHOLE 640 480 500 500 320 240\n" for k, v in enumerate(views)))
    (d / "pairs.txt").write_text("".join(f"{a} {b}\n" for a, b in pairs))
    for v in views if images is None else images:
        (d / "images" / v).write_bytes(b"")
    return d


def test_images_are_the_paired_views_in_views_txt_order(tmp_path):
    d = _scene(tmp_path, ["c.png", "a.png", "unused.png", "b.png"], [("b.png", "c.png"), ("a.png", "b.png")])
    f = scene_files(d)
    assert [p.name for p in f.images] == ["c.png", "a.png", "b.png"]  # views.txt order, unused left out
    assert [(p.a, p.b) for p in f.listed] == [(3, 1), (2, 3)]  # pairs.txt order
    assert f.all_paths()[-2:] == [d / "views.txt", d / "pairs.txt"] and f.homographies == {}


def test_a_pairs_geometry_is_the_relative_pose_of_the_rendered_cameras(tmp_path):
    folder = write_scene(tmp_path, 1, seed=3)
    _, cams = make_scene(1, seed=3)
    pairs = load_pairs(scene_files(folder))
    assert len(pairs) == 10 and all(isinstance(p.geometry, RelativePose) for p in pairs)
    for p in pairs:
        ca, cb = cams[p.a - 1], cams[p.b - 1]
        g = p.relative_pose()
        # a world point through camera a's frame, then (R, t), lands where camera b sees it
        X = np.array([0.3, -0.2, 1.5])
        np.testing.assert_allclose(g.R @ (ca.R @ X + ca.t) + g.t, cb.R @ X + cb.t, atol=1e-9)
        assert g.pixel_offset == 0.5 and g.K_a[0, 2] == ca.K[0, 2] + 0.5


def test_a_repeated_pair_is_an_error_naming_the_file(tmp_path):
    d = _scene(tmp_path, ["a.png", "b.png"], [("a.png", "b.png"), ("a.png", "b.png")])
    with pytest.raises(DataError, match=r"pairs.txt: pair a.png b.png is listed twice \(pairs 1 and 2\)"):
        scene_files(d)


def test_a_missing_image_is_an_error_naming_the_view(tmp_path):
    d = _scene(tmp_path, ["a.png", "b.png"], [("a.png", "b.png")], images=["a.png"])
    with pytest.raises(DataError, match=r"b.png \(the image of view 'b.png'.*views.txt\) is missing"):
        scene_files(d)


def test_a_folder_naming_more_views_than_a_scene_may_number_is_evaluated_in_parts(tmp_path):
    views = [f"{k}.png" for k in range(MAX_IMAGES + 40)]
    chain = list(zip(views[:-1], views[1:]))  # 166 pairs over 167 views
    d = _scene(tmp_path, views, chain)
    with pytest.raises(DataError, match=rf"more than the {MAX_IMAGES} views .* in 2 parts of consecutive pairs: s@000 .. s@001"):
        scene_files(d)
    assert posed_scene_parts(d) == ["s@000", "s@001"]
    first, second = scene_files(tmp_path / "s@000"), scene_files(tmp_path / "s@001")
    assert first.scene == "s@000" and first.n_images == MAX_IMAGES and len(first.listed) == MAX_IMAGES - 1
    got = [(first.images[p.a - 1].name, first.images[p.b - 1].name) for p in first.listed]
    got += [(second.images[p.a - 1].name, second.images[p.b - 1].name) for p in second.listed]
    assert got == chain  # every pair once, in file order
    with pytest.raises(DataError, match="not s@002"):
        scene_files(tmp_path / "s@002")
    d2 = _scene(tmp_path / "ok", views[:MAX_IMAGES], chain[: MAX_IMAGES - 1])
    assert scene_files(d2).n_images == MAX_IMAGES and posed_scene_parts(d2) == ["s"]


def test_a_homography_task_refuses_a_posed_pair(tmp_path):
    d = _scene(tmp_path, ["a.png", "b.png"], [("a.png", "b.png")])
    with pytest.raises(DataError, match="has a relative_pose geometry, but matching needs a homography"):
        load_pairs(scene_files(d))[0].homography("matching")
