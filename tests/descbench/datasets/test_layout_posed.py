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
    with pytest.raises(DataError, match=r"pairs.txt:2: pair a.png b.png is listed twice \(lines 1 and 2\)"):
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


def _calibrated_copy(folder, out):
    """The posed scene ``folder`` rewritten as one pairs_calibrated.txt (images under images/, named
    relative to the folder; K in views.txt's convention; T_0to1 from the two views' poses)."""
    import shutil

    from descbench.datasets.posed import read_scene, relative_pose

    scene = read_scene(folder)
    shutil.copytree(folder / "images", out / "images")
    lines = []
    for a, b in scene.pairs:
        va, vb = scene.views[a], scene.views[b]
        R, t = relative_pose(va, vb)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, t
        lines.append(" ".join([f"images/{a}", f"images/{b}", *map(repr, va.K().ravel().tolist()),
                               *map(repr, vb.K().ravel().tolist()), *map(repr, T.ravel().tolist())]))
    (out / "pairs_calibrated.txt").write_text("\n".join(lines) + "\n")
    return out


def test_a_calibrated_pairs_file_gives_the_same_pairs_as_the_views_layout(tmp_path):
    folder = write_scene(tmp_path / "views", 2, seed=1)
    cal = _calibrated_copy(folder, tmp_path / "cal" / "posed_02")
    f_views, f_cal = scene_files(folder), scene_files(cal)
    assert f_cal.posed and f_cal.views is None and f_cal.views_file is None and f_cal.pairs_file == cal / "pairs_calibrated.txt"
    assert f_cal.image_names == tuple(f"images/{n}" for n in f_views.image_names)  # first appearance = views.txt order here
    assert [(p.a, p.b) for p in f_cal.listed] == [(p.a, p.b) for p in f_views.listed]
    assert f_cal.depths == (None,) * 5 and f_cal.all_paths()[-1] == cal / "pairs_calibrated.txt"
    for pv, pc in zip(load_pairs(f_views), load_pairs(f_cal)):
        gv, gc = pv.relative_pose(), pc.relative_pose()
        for x, y in ((gv.K_a, gc.K_a), (gv.K_b, gc.K_b), (gv.R, gc.R), (gv.t, gc.t)):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12)
        assert gc.pixel_offset == 0.5


def test_a_calibrated_file_numbers_images_in_order_of_first_appearance(tmp_path):
    d = tmp_path / "c"
    (d / "x").mkdir(parents=True)
    for n in ("b.png", "a.png", "c.png"):
        (d / "x" / n).write_bytes(b"")
    K = "500 0 320 0 500 240 0 0 1"
    T = "1 0 0 1 0 1 0 0 0 0 1 0 0 0 0 1"
    (d / "pairs_calibrated.txt").write_text(f"x/b.png x/a.png {K} {K} {T}\nx/c.png x/b.png {K} {K} {T}\n")
    f = scene_files(d)
    assert f.image_names == ("x/b.png", "x/a.png", "x/c.png") and [(p.a, p.b) for p in f.listed] == [(1, 2), (3, 1)]


@pytest.mark.bad_input
def test_a_folder_with_both_layouts_or_an_image_outside_it_is_an_error(tmp_path):
    d = _scene(tmp_path, ["a.png", "b.png"], [("a.png", "b.png")])
    K, T = "500 0 320 0 500 240 0 0 1", "1 0 0 1 0 1 0 0 0 0 1 0 0 0 0 1"
    (d / "pairs_calibrated.txt").write_text(f"images/a.png images/b.png {K} {K} {T}\n")
    with pytest.raises(DataError, match="holds both views.txt and pairs_calibrated.txt"):
        scene_files(d)
    (d / "views.txt").unlink()
    (d / "pairs_calibrated.txt").write_text(f"../a.png images/b.png {K} {K} {T}\n")
    with pytest.raises(DataError, match=r"image '../a.png' is not a path inside the scene folder"):
        scene_files(d)


def test_windows_line_ends_and_trailing_spaces_are_accepted(tmp_path):
    d = _scene(tmp_path, ["a.png", "b.png", "c.png"], [("a.png", "b.png"), ("b.png", "c.png")])
    for name in ("views.txt", "pairs.txt"):
        text = (d / name).read_text()
        (d / name).write_bytes(text.replace("\n", "  \r\n").encode())
    f = scene_files(d)
    assert f.image_names == ("a.png", "b.png", "c.png") and [(p.a, p.b) for p in f.listed] == [(1, 2), (2, 3)]
