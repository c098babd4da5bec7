"""descbench.datasets.resize on posed scenes: depth maps resized as glue-factory's preprocessor
resizes them (kornia's resize with nearest sampling, checked against kornia itself), cameras
scaled as ``Camera.scale`` (checked by projecting points onto both grids), and the resized copy of
a posed folder read back: its views, images, depth maps and pair geometry."""

from __future__ import annotations

import json

import cv2
import h5py
import kornia
import numpy as np
import pytest
import torch

from descbench.datasets.layout import scene_files
from descbench.datasets.posed import View, read_depth, read_views
from descbench.datasets.posed_demo import write_scene
from descbench.datasets.resize import (RESIZED_FLAG, format_view, resize_camera, resize_depth, resize_scene,
                                       resized_size, scale_matrix)
from descbench.errors import DataError


def depth_map(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A float32 depth map with smooth depths, sharp steps and holes of unknown depth (0)."""
    rng = np.random.default_rng(seed)
    d = cv2.GaussianBlur(rng.uniform(2.0, 40.0, (h, w)).astype(np.float32), (0, 0), 3.0)
    d[:, w // 3] += 10.0  # a depth edge
    d[rng.uniform(size=(h, w)) < 0.05] = 0.0  # unknown
    return d


@pytest.mark.parametrize("h, w, nh, nw", [(480, 640, 240, 320), (1066, 1600, 400, 600), (300, 451, 480, 721), (97, 131, 97, 131),
                                          (768, 1024, 1200, 1600)])
def test_depth_equals_kornias_nearest_resize(h, w, nh, nw):
    """glue-factory's call: the preprocessor's kornia resize with ``interpolation='nearest'`` and
    its ``antialias=True`` on the float depth map."""
    d = depth_map(h, w, seed=h)
    ref = kornia.geometry.transform.resize(torch.tensor(d)[None, None], (nh, nw), antialias=True,
                                           interpolation="nearest")[0, 0].numpy()
    ours = resize_depth(d, nh, nw)
    assert ours.shape == ref.shape == (nh, nw) and ours.dtype == np.float32
    if (nh, nw) >= (h, w):
        assert np.array_equal(ours, ref)  # no blur: the same samples
    else:
        assert np.abs(ours - ref).max() <= 4e-6 * d.max()  # float32 rounding of the blur only
        # the blur is glue-factory's: without it, the samples would differ by whole depth steps
        plain = torch.nn.functional.interpolate(torch.tensor(d)[None, None], (nh, nw), mode="nearest")[0, 0].numpy()
        assert np.abs(plain - ref).max() > 1.0


def test_a_resized_camera_sees_each_point_where_the_resized_image_shows_it():
    """A point's pixel in the source image, mapped to the resized grid (``u' = u * w' / w`` in
    COLMAP's corner convention, what ``align_corners=False`` resizing does), is where the resized
    camera projects it; SIMPLE_RADIAL's one focal becomes two and its radial term is kept."""
    R = cv2.Rodrigues(np.array([0.1, -0.2, 0.05]))[0]
    for model, params in (("SIMPLE_PINHOLE", (900.0, 800.5, 600.5)), ("PINHOLE", (900.0, 910.0, 800.5, 600.5)),
                          ("SIMPLE_RADIAL", (900.0, 800.5, 600.5, 0.01)), ("RADIAL", (900.0, 800.5, 600.5, 0.01, -0.002)),
                          ("OPENCV", (900.0, 910.0, 800.5, 600.5, 0.01, -0.002, 1e-4, 2e-4))):
        view = View("x.jpg", R, np.array([0.1, 0.2, 0.3]), model, 1601, 1201, params)
        new_hw = resized_size(1201, 1601, 1024, "long")
        assert new_hw == (768, 1024)
        S = scale_matrix((1201, 1601), new_hw)
        r = resize_camera(view, S, new_hw)
        assert (r.width, r.height) == (1024, 768) and r.name == view.name
        assert np.array_equal(r.R, view.R) and np.array_equal(r.t, view.t)
        X = np.random.default_rng(1).uniform(-1, 1, (20, 3)) + [0, 0, 5]
        x = X @ view.K().T
        u = x[:, :2] / x[:, 2:]
        x2 = X @ r.K().T
        np.testing.assert_allclose(x2[:, :2] / x2[:, 2:], u * [S[0, 0], S[1, 1]], rtol=1e-12)
        assert S[0, 0] != S[1, 1]  # 1024 / 1601 and 768 / 1201: the two axes scale apart
        distortion = {"SIMPLE_RADIAL": (0.01, 0.0, 0.0, 0.0), "RADIAL": (0.01, -0.002, 0.0, 0.0),
                      "OPENCV": (0.01, -0.002, 1e-4, 2e-4)}.get(model)
        assert (r.model, r.params[4:]) == (("OPENCV", distortion) if distortion else ("PINHOLE", ()))


def test_a_views_line_reads_back_bit_for_bit(tmp_path):
    R = cv2.Rodrigues(np.array([0.3, -0.1, 0.2]))[0]
    view = View("sub/a.jpg", R, np.array([0.1, 1 / 3, -2.0]), "PINHOLE", 640, 480, (500.0 / 3, 501.1, 320.7, 240.0))
    (tmp_path / "views.txt").write_text(format_view(view) + "\n")
    back = read_views(tmp_path / "views.txt")["sub/a.jpg"]
    assert np.array_equal(back.R, view.R) and np.array_equal(back.t, view.t) and back.params == view.params


def test_a_resized_posed_scene_keeps_its_geometry(tmp_path):
    src = write_scene(tmp_path / "src", 1, seed=3)
    rec = resize_scene(src, tmp_path / "out", 320, "long")
    out = tmp_path / "out"
    assert json.loads((out / RESIZED_FLAG).read_text()) == json.loads(json.dumps(rec))
    a, b = scene_files(src), scene_files(out)
    assert b.image_names == a.image_names and [p.relative_to(out) for p in b.images] == [p.relative_to(src) for p in a.images]
    for view_a, view_b, img_b, depth_a, depth_b in zip(a.views, b.views, b.images, a.depths, b.depths):
        img = cv2.imread(str(img_b))
        assert (img.shape[1], img.shape[0]) == (view_b.width, view_b.height) == (320, 240)
        assert open(img_b, "rb").read(8) == b"\x89PNG\r\n\x1a\n"  # lossless, under the view's own name
        S = scale_matrix((view_a.height, view_a.width), (240, 320))
        np.testing.assert_array_equal(view_b.K(), S @ view_a.K())
        d = read_depth(depth_b, view_b)
        ref = resize_depth(read_depth(depth_a, view_a), 240, 320)
        assert np.abs(d - ref).max() <= 0.5 / 256 + 1e-12  # the PNG's 1/256 levels
    for pa, pb in zip(a.pair_poses, b.pair_poses):
        assert np.array_equal(pa.R, pb.R) and np.array_equal(pa.t, pb.t) and pb.pixel_offset == 0.5
    assert (out / "pairs.txt").read_text() == (src / "pairs.txt").read_text()


def test_hdf5_depth_maps_stay_float(tmp_path):
    src = write_scene(tmp_path / "src", 0, seed=1)
    files = scene_files(src)
    for view, png in zip(files.views, files.depths):
        depth = read_depth(png, view).astype(np.float32) + np.float32(1 / 1024)  # not on the PNG's 1/256 grid
        with h5py.File(png.with_suffix(".h5"), "w") as f:
            f.create_dataset("depth", data=depth)
        png.unlink()
    resize_scene(src, tmp_path / "out", 320, "long")
    out = scene_files(tmp_path / "out")
    for view_a, view_b, depth_a, depth_b in zip(files.views, out.views, scene_files(src).depths, out.depths):
        assert depth_b.suffix == ".h5"
        ref = resize_depth(read_depth(depth_a, view_a).astype(np.float32), 240, 320)
        assert np.array_equal(read_depth(depth_b, view_b), ref.astype(np.float64))


@pytest.mark.bad_input
def test_what_cannot_be_resized_is_an_error_naming_it(tmp_path):
    src = write_scene(tmp_path / "src", 0, seed=1)
    views = (src / "views.txt").read_text().splitlines()
    (src / "views.txt").write_text("\n".join([views[0].replace(" 640 480 ", " 641 480 ")] + views[1:]) + "\n")
    with pytest.raises(DataError, match=r"0.png is 640 x 480, but .*views.txt gives view '0.png' a 641 x 480 camera"):
        resize_scene(src, tmp_path / "out", 320, "long")
    assert not (tmp_path / "out" / RESIZED_FLAG).exists()
    cal = tmp_path / "cal" / "scene"
    cal.mkdir(parents=True)
    K = "500 0 320 0 500 240 0 0 1"
    (cal / "pairs_calibrated.txt").write_text(f"a.png b.png {K} {K} 1 0 0 0.1 0 1 0 0 0 0 1 0 0 0 0 1\n")
    for n in ("a.png", "b.png"):
        cv2.imwrite(str(cal / n), np.zeros((480, 640), np.uint8))
    with pytest.raises(DataError, match=r"pairs_calibrated.txt: resizing a calibrated pairs file's scene is not supported"):
        resize_scene(cal, tmp_path / "out2", 320, "long")
