"""descbench.datasets.posed: glue-factory's posed_images layout read back (poses, cameras, pairs),
the relative pose against 4x4 matrix algebra, and every bad line named by file and line."""

from __future__ import annotations

import doctest
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets import posed as PS
from descbench.errors import DataError


def view_line(name, R, t, model="PINHOLE", size=(640, 480), params=(500.0, 510.0, 320.5, 240.5)) -> str:
    return " ".join([name, *(repr(float(x)) for x in np.ravel(R)), *(repr(float(x)) for x in t), model,
                     str(size[0]), str(size[1]), *(repr(float(p)) for p in params)])


def make_scene(root: Path, lines: list[str], pairs: list[str], images=("a.jpg", "b.jpg", "c.jpg")) -> Path:
    (root / "images").mkdir(parents=True)
    for name in images:
        cv2.imwrite(str(root / "images" / name), np.zeros((4, 4), np.uint8))
    (root / "views.txt").write_text("\n".join(lines) + "\n")
    (root / "pairs.txt").write_text("\n".join(pairs) + "\n")
    return root


def poses(seed: int = 0):
    rng = np.random.default_rng(seed)
    return [(cv2.Rodrigues(rng.normal(size=3))[0], rng.normal(size=3)) for _ in range(3)]


def test_the_examples_run():
    failed, attempted = doctest.testmod(PS)
    assert attempted >= 2 and failed == 0


def test_a_scene_reads_back_with_its_cameras_and_pairs(tmp_path):
    (Ra, ta), (Rb, tb), (Rc, tc) = poses()
    scene = make_scene(tmp_path / "s", [
        view_line("a.jpg", Ra, ta),
        view_line("b.jpg", Rb, tb, "SIMPLE_RADIAL", (800, 600), (700.0, 400.0, 300.0, -0.01)),
        "",  # empty lines are skipped
        view_line("c.jpg", Rc, tc, "OPENCV", (320, 240), (300.0, 310.0, 160.0, 120.0, 0.1, -0.02, 0.001, 0.002)),
    ], ["a.jpg b.jpg", "c.jpg a.jpg"])
    s = PS.read_scene(scene)
    assert list(s.views) == ["a.jpg", "b.jpg", "c.jpg"] and s.pairs == [("a.jpg", "b.jpg"), ("c.jpg", "a.jpg")]
    a, b, c = s.views.values()
    assert np.array_equal(a.R, Ra) and np.array_equal(a.t, ta)  # repr round-trips float64 exactly
    assert a.K().tolist() == [[500.0, 0.0, 320.5], [0.0, 510.0, 240.5], [0.0, 0.0, 1.0]]
    assert b.K().tolist() == [[700.0, 0.0, 400.0], [0.0, 700.0, 300.0], [0.0, 0.0, 1.0]] and b.params[-1] == -0.01
    assert (c.width, c.height, c.model) == (320, 240, "OPENCV") and c.K()[1, 1] == 310.0


def test_the_relative_pose_is_camera_1_after_camera_0_inverse():
    """Reference: 4x4 world-to-camera matrices, T1 @ inv(T0)."""
    for seed in range(5):
        (R0, t0), (R1, t1), _ = poses(seed)
        v0 = PS.View("0", R0, t0, "PINHOLE", 1, 1, (1.0, 1.0, 0.0, 0.0))
        v1 = PS.View("1", R1, t1, "PINHOLE", 1, 1, (1.0, 1.0, 0.0, 0.0))
        T0, T1 = np.eye(4), np.eye(4)
        T0[:3, :3], T0[:3, 3], T1[:3, :3], T1[:3, 3] = R0, t0, R1, t1
        T = T1 @ np.linalg.inv(T0)
        R, t = PS.relative_pose(v0, v1)
        assert np.abs(R - T[:3, :3]).max() < 1e-12 and np.abs(t - T[:3, 3]).max() < 1e-12
        # a world point seen by both cameras: camera 0's coordinates map to camera 1's
        X = np.array([0.3, -1.0, 2.0])
        assert np.abs(R @ (R0 @ X + t0) + t - (R1 @ X + t1)).max() < 1e-12


def test_the_depth_path_is_glue_factorys(tmp_path):
    s = PS.PosedScene(tmp_path, {}, [])
    assert s.depth_path("sub/x.y.jpg", "h5") == tmp_path / "depths" / "sub/x.h5"
    assert s.image_path("sub/x.y.jpg") == tmp_path / "images" / "sub/x.y.jpg"


R_OK, T_OK = np.eye(3), np.zeros(3)


@pytest.mark.bad_input
@pytest.mark.parametrize("line, message", [
    ("a.jpg 1 0 0", r"views\.txt:1: 4 fields; a view line is: name, R \(9\), t \(3\), model"),
    (view_line("a.jpg", R_OK, T_OK, "FISHEYE"), r"views\.txt:1: view 'a\.jpg': unknown camera model 'FISHEYE'; use one of SIMPLE_PINHOLE"),
    (view_line("a.jpg", R_OK, T_OK, "PINHOLE", params=(500.0, 500.0, 320.0)),
     r"camera model PINHOLE has 4 parameters \(fx, fy, cx, cy\), the line gives 3"),
    (view_line("a.jpg", R_OK, T_OK).replace(" 0.0 ", " x ", 1), r"view 'a\.jpg' pose: 'x' is not a number"),
    (view_line("a.jpg", R_OK, T_OK).replace(" 0.0 ", " nan ", 1), r"view 'a\.jpg' pose: 'nan' is not a finite number"),
    (view_line("a.jpg", 2 * R_OK, T_OK), r"view 'a\.jpg': R \(the first 9 numbers, row-major\) is not a rotation"),
    (view_line("a.jpg", np.diag([1.0, 1.0, -1.0]), T_OK), r"is not a rotation \(.*det -1\)"),
    (view_line("a.jpg", R_OK, T_OK, size=(640, 0)), r"view 'a\.jpg': image size 640 x 0"),
    (view_line("a.jpg", R_OK, T_OK, "SIMPLE_PINHOLE", params=(0.0, 320.0, 240.0)), r"a focal length <= 0 \(f=0\)"),
])
def test_a_bad_view_line_is_an_error_naming_file_and_line(tmp_path, line, message):
    scene = make_scene(tmp_path / "s", [line], ["a.jpg b.jpg"])
    with pytest.raises(DataError, match=message):
        PS.read_scene(scene)


@pytest.mark.bad_input
@pytest.mark.parametrize("pairs, message", [
    (["a.jpg b.jpg", "a.jpg"], r"pairs\.txt:2: 1 fields; a pair line is: name0 name1"),
    (["a.jpg z.jpg"], r"pairs\.txt:1: view 'z\.jpg' is not in .*views\.txt"),
    (["b.jpg b.jpg"], r"pairs\.txt:1: the pair names view 'b\.jpg' twice"),
    ([""], r"pairs\.txt: no pair"),
])
def test_a_bad_pair_line_is_an_error_naming_file_and_line(tmp_path, pairs, message):
    scene = make_scene(tmp_path / "s", [view_line("a.jpg", R_OK, T_OK), view_line("b.jpg", R_OK, T_OK)], pairs)
    with pytest.raises(DataError, match=message):
        PS.read_scene(scene)


@pytest.mark.bad_input
def test_missing_files_and_repeated_views_are_named(tmp_path):
    lines = [view_line("a.jpg", R_OK, T_OK), view_line("b.jpg", R_OK, T_OK)]
    with pytest.raises(DataError, match=r"posed scene folder .*nope does not exist"):
        PS.read_scene(tmp_path / "nope")
    scene = make_scene(tmp_path / "s", lines + [view_line("a.jpg", R_OK, T_OK)], ["a.jpg b.jpg"])
    with pytest.raises(DataError, match=r"views\.txt:3: view 'a\.jpg' is listed twice"):
        PS.read_scene(scene)
    scene = make_scene(tmp_path / "t", lines, ["a.jpg b.jpg"], images=("a.jpg",))
    with pytest.raises(DataError, match=r"images/b\.jpg \(the image of view 'b\.jpg', .*views\.txt\) is missing"):
        PS.read_scene(scene)
    scene = make_scene(tmp_path / "u", lines, ["a.jpg b.jpg"])
    with pytest.raises(DataError, match=r"depths/a\.h5 \(the depth map of view 'a\.jpg'\) is missing"):
        PS.read_scene(scene, depth_format="h5")
    (scene / "pairs.txt").unlink()
    with pytest.raises(DataError, match=r"pairs\.txt \(the scene's pairs\) is missing"):
        PS.read_scene(scene)


def calibrated_line(R, t, K0, K1, rot=None) -> str:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, t
    head = ["a.jpg", "b.jpg"] + ([str(rot[0]), str(rot[1])] if rot is not None else [])
    return " ".join(head + [repr(float(x)) for x in (*K0.ravel(), *K1.ravel(), *T.ravel())])


def test_calibrated_pairs_read_back_in_both_lengths(tmp_path):
    (R, t), _, _ = poses(3)
    K0 = np.array([[500.0, 0.0, 320.0], [0.0, 505.0, 240.0], [0.0, 0.0, 1.0]])
    K1 = np.array([[400.0, 0.0, 300.0], [0.0, 400.0, 200.0], [0.0, 0.0, 1.0]])
    path = tmp_path / "pairs.txt"
    path.write_text(calibrated_line(R, t, K0, K1) + "\n\n" + calibrated_line(R.T, -R.T @ t, K1, K0, rot=(0, 0)).replace("a.jpg b.jpg", "b.jpg a.jpg", 1) + "\n")
    a, b = PS.read_calibrated_pairs(path)
    assert (a.name0, a.name1) == ("a.jpg", "b.jpg") and np.array_equal(a.K0, K0) and np.array_equal(a.K1, K1)
    assert np.array_equal(a.R, R) and np.array_equal(a.t, t)
    assert np.array_equal(b.K0, K1) and np.abs(b.R @ a.R - np.eye(3)).max() < 1e-12  # the inverse motion
    assert (b.name0, b.name1) == ("b.jpg", "a.jpg")  # the pair the other way round is another pair
    path.write_text(calibrated_line(R, t, K0, K1) + "\n" + calibrated_line(R, t, K0, K1) + "\n")
    with pytest.raises(DataError, match=r"pairs\.txt:2: pair a\.jpg b\.jpg is listed twice \(lines 1 and 2\)"):
        PS.read_calibrated_pairs(path)


@pytest.mark.bad_input
@pytest.mark.parametrize("edit, message", [
    (lambda f: f[:30], r"pairs\.txt:1: 30 fields; a calibrated pair is name0 name1 K0 \(9\) K1 \(9\) T_0to1 \(16\)"),
    (lambda f: f[:2] + ["1", "0"] + f[2:], r"pairs\.txt:1: EXIF rotations 1 0; rotate the images"),
    (lambda f: f[:5] + ["nan"] + f[6:], r"pair a\.jpg b\.jpg: 'nan' is not a finite number"),
    (lambda f: f[:3] + ["0.5"] + f[4:], r"pair a\.jpg b\.jpg: K0: expected pinhole intrinsics"),
    (lambda f: f[:-2] + ["1.0", "2.0"], r"T_0to1 \(the last 16 numbers, row-major\) is not a rigid motion"),
    (lambda f: f[:20] + [str(2 * float(f[20]))] + f[21:], r"is not a rigid motion"),
])
def test_a_bad_calibrated_pair_is_an_error_naming_file_and_line(tmp_path, edit, message):
    K = np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]])
    fields = calibrated_line(np.eye(3), np.array([1.0, 0.0, 0.0]), K, K).split()
    path = tmp_path / "pairs.txt"
    path.write_text(" ".join(edit(fields)) + "\n")
    with pytest.raises(DataError, match=message):
        PS.read_calibrated_pairs(path)


# --- depth maps (glue-factory's load_depth) -------------------------------------------------------

def depth_view(width=5, height=3) -> PS.View:
    return PS.View("a.jpg", np.eye(3), np.zeros(3), "PINHOLE", width, height, (10.0, 10.0, 2.5, 1.5))


def test_a_png_depth_map_is_its_16_bit_value_over_256(tmp_path):
    """Reference: the values written, divided by 256 by hand (glue-factory's png convention)."""
    raw = np.array([[0, 256, 300, 65535, 1], [2, 3, 4, 5, 6], [512, 0, 0, 0, 7]], np.uint16)
    path = tmp_path / "a.png"
    assert cv2.imwrite(str(path), raw)
    depth = PS.read_depth(path, depth_view())
    assert depth.dtype == np.float64 and depth.shape == (3, 5)
    assert depth[0].tolist() == [0.0, 1.0, 300 / 256, 65535 / 256, 1 / 256] and depth[2, 0] == 2.0


def test_an_h5_depth_map_is_its_depth_dataset(tmp_path):
    h5py = pytest.importorskip("h5py")
    want = np.arange(15, dtype=np.float32).reshape(3, 5) / 7
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["depth"] = want
    depth = PS.read_depth(tmp_path / "a.h5", depth_view())
    assert depth.dtype == np.float64 and np.array_equal(depth, want.astype(np.float64))
    with h5py.File(tmp_path / "b.h5", "w") as f:
        f["depths"] = want
    with pytest.raises(DataError, match=r"b\.h5: no dataset /depth"):
        PS.read_depth(tmp_path / "b.h5", depth_view())
    (tmp_path / "c.h5").write_bytes(b"not hdf5")
    with pytest.raises(DataError, match=r"c\.h5 is not a readable HDF5"):
        PS.read_depth(tmp_path / "c.h5", depth_view())


def test_without_h5py_an_h5_depth_map_names_the_interop_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_h5py(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("no h5py")
        return real_import(name, *args, **kwargs)

    (tmp_path / "a.h5").write_bytes(b"")
    monkeypatch.setattr(builtins, "__import__", no_h5py)
    with pytest.raises(DataError, match=r'a\.h5: .*pip install "descbench\[interop\]"'):
        PS.read_depth(tmp_path / "a.h5", depth_view())


@pytest.mark.parametrize("write, message", [
    (lambda p: cv2.imwrite(str(p / "a.png"), np.zeros((3, 5), np.uint8)), r"a\.png: a uint8 PNG; a PNG depth map is 16-bit"),
    (lambda p: cv2.imwrite(str(p / "a.png"), np.zeros((4, 5), np.uint16)),
     r"a\.png: the depth map is 5 x 4, view 'a\.jpg' is 5 x 3 \(width x height\)"),
    (lambda p: (p / "a.png").write_bytes(b"junk"), r"a\.png is not a readable PNG"),
    (lambda p: (p / "a.exr").write_bytes(b"junk"), r"a\.exr: unknown depth map format '\.exr'; use one of \.h5, \.png"),
])
def test_a_bad_depth_map_is_an_error_naming_the_file(tmp_path, write, message):
    write(tmp_path)
    path = next(tmp_path.iterdir())
    with pytest.raises(DataError, match=message):
        PS.read_depth(path, depth_view())


def test_negative_or_non_finite_depths_and_missing_files_are_errors(tmp_path):
    h5py = pytest.importorskip("h5py")
    for k, bad in enumerate((-1.0, np.nan, np.inf)):
        values = np.ones((3, 5))
        values[1, 2] = bad
        with h5py.File(tmp_path / f"{k}.h5", "w") as f:
            f["depth"] = values
        with pytest.raises(DataError, match=rf"{k}\.h5: the depth map holds a negative or non-finite value"):
            PS.read_depth(tmp_path / f"{k}.h5", depth_view())
    with pytest.raises(DataError, match=r"missing\.png \(the depth map of view 'a\.jpg'\) is missing"):
        PS.read_depth(tmp_path / "missing.png", depth_view())


def test_the_depth_png_is_read_depths_inverse_and_refuses_what_it_cannot_hold(tmp_path):
    depth = np.array([[0.0, np.inf, 255.99, 1.0 + 1 / 1024, 2.5]])
    values = PS.depth_png(depth)
    assert values.dtype == np.uint16 and values.tolist() == [[0, 0, 65533, 256, 640]]
    path = tmp_path / "d.png"
    assert cv2.imwrite(str(path), values)
    view = PS.View("v", np.eye(3), np.zeros(3), "PINHOLE", 5, 1, (1.0, 1.0, 0.0, 0.0))
    assert PS.read_depth(path, view).tolist() == [[0.0, 0.0, 65533 / 256, 1.0, 2.5]]
    with pytest.raises(ValueError, match="256.00 does not fit a 16-bit PNG at 1/256"):
        PS.depth_png(np.array([[1.0, 65535.5 / 256]]))
    assert PS.depth_png(np.array([[65535.49 / 256]])).tolist() == [[65535]]
    with pytest.raises(ValueError, match="negative or NaN"):
        PS.depth_png(np.array([[1.0, -2.0]]))
    with pytest.raises(ValueError, match="negative or NaN"):
        PS.depth_png(np.array([[np.nan]]))
