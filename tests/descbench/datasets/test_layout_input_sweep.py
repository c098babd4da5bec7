"""Inputs the input sweep (tester ids h10, p08, p10, p11, p15, i04, i07, i10, c14, l03/l06) found
accepted silently or reported cryptically: each is now a DataError/ConfigError naming the file and
the fix, or (header-only locked CSV) an explicitly recorded empty image. Valid inputs (the demo
scene: 8-bit PPM, HPatches layout) read exactly as before.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import detect_scene
from descbench.datasets import hpatches, layout, list_scenes
from descbench.errors import ConfigError, DataError
from descbench.keypoints.locked import load_locked
from descbench.precomputed import feature_path, load_features
from conftest import raises_naming

pytestmark = pytest.mark.bad_input  # every test here checks a bad input (or the valid input beside it)

METHOD = "mynet"
SIFT = {"detector": "sift", "border_px": 40, "max_keypoints": None, "params": {}}
PRE = {"detector": "precomputed", "border_px": 40, "max_keypoints": None,
       "params": {"method": METHOD, "root": None, "default_size_px": 12.0}}


def _detect(scene: Path, tmp_path: Path, spec: dict, name: str = "kp") -> Path:
    out = tmp_path / "out" / f"{name}.parquet"
    detect_scene(scene, name, spec, out)
    return out


def _write_npz(scene: Path, mutate=None, scores: bool = True) -> None:
    """SIFT features of the 6 images as D2-Net npz next to the images; ``mutate(k, kp)`` edits one."""
    sift = cv2.SIFT_create(300)
    for k in range(1, 7):
        img = scene / f"{k}.ppm"
        kps, desc = sift.detectAndCompute(layout.read_image(img), None)
        kp = np.array([[p.pt[0], p.pt[1], p.size] for p in kps], dtype=np.float32)
        if mutate is not None:
            kp = mutate(k, kp)
        arrays = dict(keypoints=kp, descriptors=desc.astype(np.float32))
        if scores:
            arrays["scores"] = np.array([p.response for p in kps], dtype=np.float32)
        with open(scene / f"{img.name}.{METHOD}", "wb") as fh:
            np.savez(fh, **arrays)


# ----------------------------------------------------------------------------- h10: transposed H


def test_valid_demo_homographies_pass_the_overlap_check(pristine: Path):
    files = layout.scene_files(pristine)
    s1 = layout.image_size(files.images[0])
    for k in hpatches.TARGET_IMAGES:
        H = layout.read_homography(files.homographies[k])
        sk = layout.image_size(files.images[k - 1])
        layout.check_homography_overlap(files.homographies[k], H, s1, sk, k)
        a1, ak = layout.homography_overlap(H, s1, sk)
        assert a1 > 0.5 * s1[0] * s1[1] and ak > 0.5 * sk[0] * sk[1]
    assert layout.homography_overlap(np.eye(3), (640, 480), (640, 480)) == (640 * 480, 640 * 480)


def test_overlap_is_exact_for_a_translation():
    # image 1 shifted by 600 px to the right: 40 x 480 of it stays in image k
    H = np.array([[1.0, 0, 600], [0, 1, 0], [0, 0, 1]])
    a1, ak = layout.homography_overlap(H, (640, 480), (640, 480))
    assert a1 == pytest.approx(40 * 480) and ak == pytest.approx(40 * 480)


def test_homography_mapping_image1_outside_image_k_is_an_error(tmp_path: Path):
    H = np.array([[1.0, 0, 700], [0, 1, 0], [0, 0, 1]])  # entirely to the right of image k
    raises_naming(lambda: layout.check_homography_overlap(tmp_path / "H_1_4", H, (640, 480), (600, 400), 4),
            str(tmp_path / "H_1_4"), "640 x 480", "600 x 400", "outside image 4", "(640, 0) -> (1340, 0)")


def test_transposed_homography_file_is_an_error_naming_it(scene: Path, tmp_path: Path):
    h = scene / "H_1_3"
    layout.write_homography(h, layout.read_homography(h).T)  # np.savetxt(p, H.T): a row/column mix-up
    w, hh = layout.image_size(scene / "1.ppm")
    msg = raises_naming(lambda: _detect(scene, tmp_path, SIFT), str(h), f"{w} x {hh} px", "transposed", "image 1 to image 3")
    assert "behind the camera" in msg
    assert not (tmp_path / "out" / "kp.parquet").exists()


# ----------------------------------------------------------------------------- p10 / p11 / p15 / p08: precomputed


def test_precomputed_keypoints_outside_the_image_are_an_error(scene: Path, tmp_path: Path):
    _write_npz(scene, lambda k, kp: kp * np.array([2, 2, 1], np.float32) if k == 3 else kp)  # a 2x frame
    f = scene / f"3.ppm.{METHOD}"
    msg = raises_naming(lambda: _detect(scene, tmp_path, PRE), str(f), "outside the image", "0-based rows of its 'keypoints'")
    w, h = layout.image_size(scene / "3.ppm")
    assert f"{w} x {h} px" in msg


def test_precomputed_keypoint_on_the_right_edge_is_outside(scene: Path, tmp_path: Path):
    w, _ = layout.image_size(scene / "1.ppm")
    f = scene / f"1.ppm.{METHOD}"
    with open(f, "wb") as fh:
        np.savez(fh, keypoints=np.array([[50, 50, 3], [w, 60, 3]], np.float32), descriptors=np.ones((2, 4), np.float32))
    raises_naming(lambda: load_features(scene / "1.ppm", METHOD, image_size=(w, 100)), str(f), "row 1 (x=")
    assert len(load_features(scene / "1.ppm", METHOD).keypoints) == 2  # no image size given: no check


@pytest.mark.parametrize("bad", [0.0, -2.0, 1e-50])
def test_precomputed_size_not_positive_is_an_error(tmp_path: Path, bad: float):
    img = tmp_path / "s" / "1.ppm"
    img.parent.mkdir()
    kp = np.tile(np.array([[50, 50, 4]], np.float64), (8, 1))
    kp[5, 2] = bad
    f = img.parent / f"1.ppm.{METHOD}"
    with open(f, "wb") as fh:
        np.savez(fh, keypoints=kp, descriptors=np.ones((8, 4), np.float32))
    raises_naming(lambda: load_features(img, METHOD), str(f), "row 5", "size")


def test_locked_size_zero_is_an_error(tmp_path: Path):
    f = tmp_path / "kp.csv"
    pd.DataFrame({"scene": ["a", "a"], "image": [1, 1], "x": [10.0, 20.0], "y": [10.0, 20.0],
                  "size": [3.0, 0.0]}).to_csv(f, index=False)
    raises_naming(lambda: load_locked(str(f), "a", 1, 100, 100), str(f), "'size' must be > 0 (row 1)")


def test_npz_and_plain_feature_files_side_by_side_are_an_error(tmp_path: Path):
    img = tmp_path / "s" / "3.ppm"
    img.parent.mkdir()
    plain, npz = img.parent / f"3.ppm.{METHOD}", img.parent / f"3.ppm.{METHOD}.npz"
    for p, v in ((plain, 1.0), (npz, 2.0)):
        with open(p, "wb") as fh:
            np.savez(fh, keypoints=np.full((3, 2), 50, np.float32), descriptors=np.full((3, 4), v, np.float32))
    raises_naming(lambda: feature_path(img, METHOD, None), str(plain), str(npz), "Keep exactly one")
    npz.unlink()
    assert feature_path(img, METHOD, None) == plain


def test_cap_without_scores_is_an_error_naming_set_and_file(scene: Path, tmp_path: Path):
    _write_npz(scene, scores=False)
    msg = raises_naming(lambda: _detect(scene, tmp_path, {**PRE, "max_keypoints": 100}, name="mynet_set"),
                  "keypoint_sets.mynet_set", str(scene / f"1.ppm.{METHOD}"), "'scores'", "drop max_keypoints")
    assert "max_keypoints: 100" in msg
    _detect(scene, tmp_path, PRE)  # no cap: every keypoint kept, fine without scores


# ----------------------------------------------------------------------------- i10: EXIF orientation


def _exif_image(path: Path, orientation: int, **save) -> np.ndarray:
    from PIL import Image

    pixels = (np.arange(40 * 60 * 3) % 251).astype(np.uint8).reshape(40, 60, 3)
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(path, exif=exif.tobytes(), **save)
    return pixels


@pytest.mark.parametrize("ext", [".jpg", ".png", ".webp"])
def test_exif_orientation_is_an_error_naming_the_file(tmp_path: Path, ext: str):
    p = tmp_path / f"1{ext}"
    _exif_image(p, 6)
    assert layout.exif_orientation(np.fromfile(p, np.uint8)) == 6
    raises_naming(lambda: layout.read_image(p), str(p), "Orientation = 6", "rotated 90 degrees clockwise", "exiftool")
    raises_naming(lambda: layout.read_image(p, color=True), str(p))


def test_exif_orientation_in_a_tiff_is_an_error(tmp_path: Path):
    from PIL import Image

    p = tmp_path / "1.tif"
    Image.fromarray(np.zeros((40, 60), np.uint8)).save(p, tiffinfo={274: 3})
    raises_naming(lambda: layout.read_image(p), str(p), "Orientation = 3")


def test_exif_orientation_1_reads_the_stored_grid(tmp_path: Path):
    p = tmp_path / "1.png"
    pixels = _exif_image(p, 1)
    assert layout.exif_orientation(np.fromfile(p, np.uint8)) == 1
    assert np.array_equal(layout.read_image(p, color=True), pixels[:, :, ::-1])


def test_demo_images_read_exactly_as_opencv_reads_them(pristine: Path):
    for k in range(1, 7):
        p = pristine / f"{k}.ppm"
        assert layout.exif_orientation(np.fromfile(p, np.uint8)) is None
        assert np.array_equal(layout.read_image(p), cv2.imread(str(p), cv2.IMREAD_GRAYSCALE))
        assert np.array_equal(layout.read_image(p, color=True), cv2.imread(str(p), cv2.IMREAD_COLOR))


# ----------------------------------------------------------------------------- i04: bit depth


def test_16bit_png_is_an_error_naming_file_and_depth(pristine: Path, tmp_path: Path):
    p = tmp_path / "1.png"
    cv2.imwrite(str(p), cv2.imread(str(pristine / "1.ppm"), cv2.IMREAD_GRAYSCALE).astype(np.uint16) * 16)  # 12-bit data
    raises_naming(lambda: layout.read_image(p), str(p), "16-bit", "12-bit data", ">> 4")
    raises_naming(lambda: layout.read_image(p, color=True), str(p), "16-bit")


def test_pnm_is_scaled_by_its_maxval(pristine: Path, tmp_path: Path):
    bgr = cv2.imread(str(pristine / "2.ppm"), cv2.IMREAD_COLOR)
    full = tmp_path / "full.ppm"  # full-range 16-bit PPM: exactly the 8-bit image (as before)
    cv2.imwrite(str(full), bgr.astype(np.uint16) * 257)
    assert np.array_equal(layout.read_image(full, color=True), bgr)
    assert np.array_equal(layout.read_image(full), layout.read_image(pristine / "2.ppm"))
    gray = layout.read_image(pristine / "2.ppm")
    twelve = tmp_path / "twelve.pgm"  # 12-bit data with maxval 4095 (OpenCV alone: 0..15)
    v = np.round(gray.astype(np.float64) * 4095 / 255).astype(">u2")
    twelve.write_bytes(f"P5\n{gray.shape[1]} {gray.shape[0]}\n4095\n".encode() + v.tobytes())
    assert np.array_equal(layout.read_image(twelve), gray)
    bad = tmp_path / "bad.pgm"
    bad.write_bytes(b"P5\n2 1\n15\n" + bytes([3, 200]))
    raises_naming(lambda: layout.read_image(bad), str(bad), "above its declared maxval 15")


# ----------------------------------------------------------------------------- i07: upper-case extensions


def test_upper_case_extensions_are_found(scene: Path, tmp_path: Path):
    for k in range(1, 7):
        (scene / f"{k}.ppm").rename(scene / f"{k}.PPM")
    files = layout.scene_files(scene)
    assert [p.name for p in files.images] == [f"{k}.PPM" for k in range(1, 7)]
    _detect(scene, tmp_path, SIFT)


def test_same_image_in_two_letter_cases_is_an_error(scene: Path):
    shutil.copy(scene / "2.ppm", scene / "2.PPM")
    raises_naming(lambda: layout.scene_files(scene), "2.PPM", "2.ppm", "candidate files for image 2")


# ----------------------------------------------------------------------------- c14: scenes: []


def test_empty_scene_list_is_a_config_error():
    cfg = {"dataset": "demo", "data_dir": "data", "scenes": [], "demo": {"seed": 0}}
    raises_naming(lambda: list_scenes(cfg), "scenes", "omit the key", exc=ConfigError)
    assert len(list_scenes({**cfg, "scenes": None})) == 8


# ----------------------------------------------------------------------------- l03 / l06: header-only locked CSV


def test_header_only_per_image_csv_is_an_empty_image(pristine: Path, tmp_path: Path):
    rng = np.random.default_rng(0)
    (tmp_path / "kp").mkdir()
    for k in range(1, 7):
        df = pd.DataFrame({"x": rng.uniform(50, 250, 9), "y": rng.uniform(50, 250, 9), "size": rng.uniform(2, 9, 9)})
        (df.iloc[:0] if k == 3 else df).to_csv(tmp_path / "kp" / f"{pristine.name}_{k}.csv", index=False)
    pattern = str(tmp_path / "kp" / "{scene}_{image}.csv")
    assert len(load_locked(pattern, pristine.name, 3, 100, 100)) == 0
    spec = {"detector": "locked", "border_px": 0, "max_keypoints": None, "params": {"path": pattern}}
    out = _detect(pristine, tmp_path, spec)
    per_image, meta = load_keypoints(out)
    assert meta["empty_images"] == [3] and len(per_image[3]) == 0 and len(per_image[2]) == 9


def test_header_only_dataset_csv_says_it_has_no_rows(tmp_path: Path):
    f = tmp_path / "kp.csv"
    f.write_text("scene,image,x,y,size\n")
    raises_naming(lambda: load_locked(str(f), "v_coins", 1, 100, 100), str(f), "no rows at all", "'v_coins'")
