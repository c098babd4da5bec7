"""descbench.datasets.resize: glue-factory's image resizing (kornia's resize) and its homography
adjustment, checked against kornia itself, glue-factory's own arithmetic written out with torch,
hand-worked sizes, and the geometry of a warped scene."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import kornia

from descbench.datasets.layout import read_homography, scene_files, write_homography
from descbench.datasets.resize import (RESIZED_FLAG, check_resize, resize_float, resize_homography, resize_image,
                                       resize_scene, resized_size, scale_matrix)
from descbench.errors import ConfigError, DataError
from tests.conftest import raises_naming


def textured(h: int, w: int, seed: int = 0, channels: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (h, w, channels) if channels > 1 else (h, w)
    img = cv2.GaussianBlur(rng.integers(0, 256, shape).astype(np.uint8), (0, 0), 1.5)
    img[::7] = rng.integers(0, 256, img[::7].shape)  # sharp rows: aliasing if the blur were missing
    return img


@pytest.mark.parametrize("h, w, size, side, expected", [
    (1000, 1500, 480, "short", (480, 720)),
    (1414, 1885, 480, "short", (480, 639)),   # 1885 * 480 / 1414 = 639.88, truncated as glue-factory's int()
    (900, 600, 480, "short", (720, 480)),     # portrait: the width is the short side
    (1000, 1500, 480, "long", (320, 480)),
    (600, 900, 480, "long", (320, 480)),
    (512, 512, 480, "short", (480, 480)),
    (300, 451, 480, "short", (480, 721)),     # enlarged: 451 * 1.6 = 721.6
])
def test_sizes_are_glue_factorys_hand_worked(h, w, size, side, expected):
    assert resized_size(h, w, size, side) == expected


@pytest.mark.parametrize("h, w, channels", [(1000, 1500, 3), (768, 1024, 3), (900, 600, 3), (300, 451, 3), (512, 512, 1),
                                            (1414, 1885, 3), (2000, 3000, 3)])  # the last: a 7-tap blur
def test_pixels_equal_kornias_resize(h, w, channels):
    """glue-factory's call: kornia.geometry.transform.resize(img / 255, size, side='short',
    antialias=True, align_corners=None, interpolation='bilinear') on the float image."""
    img = textured(h, w, seed=h + w, channels=channels)
    nh, nw = resized_size(h, w, 480, "short")
    chw = img.transpose(2, 0, 1) if channels > 1 else img[None]
    t = torch.tensor(chw / 255.0, dtype=torch.float)[None]
    ref = kornia.geometry.transform.resize(t, (nh, nw), side="short", antialias=True, align_corners=None,
                                           interpolation="bilinear")[0].numpy()
    ref = ref.transpose(1, 2, 0) if channels > 1 else ref[0]
    ours = resize_float(img, nh, nw)
    assert ours.shape == ref.shape and ours.dtype == np.float32
    assert np.abs(ours - ref).max() <= 5e-7  # float32 rounding only (kornia: torch's fused multiply-adds)
    q = resize_image(img, nh, nw)
    assert q.dtype == np.uint8 and q.shape == ref.shape
    assert np.abs(q / 255.0 - ref).max() <= 0.5 / 255 + 1e-6  # the 8-bit file: half a level at most


def test_the_blur_is_what_makes_the_difference():
    """Without kornia's anti-aliasing blur the result is far from kornia's (the test above can fail)."""
    img = textured(1000, 1500)
    plain = cv2.resize(img.astype(np.float32) / 255, (720, 480), interpolation=cv2.INTER_LINEAR)
    assert np.abs(plain - resize_float(img, 480, 720)).max() > 0.05


def glue_factory_H(H: np.ndarray, hw0: tuple[int, int], new0: tuple[int, int], hw1: tuple[int, int], new1: tuple[int, int]):
    """glue-factory's arithmetic, written out: ImagePreprocessor's ``scale`` (a torch.Tensor) and
    ``T = np.diag([scale[0], scale[1], 1])``, then HPatches' ``T1 @ H @ inv(T0)`` as float32."""
    def T(hw, new):
        scale = torch.Tensor([new[1] / hw[1], new[0] / hw[0]])
        return np.diag([scale[0], scale[1], 1])

    return (T(hw1, new1) @ H @ np.linalg.inv(T(hw0, new0))).astype(np.float32)


def test_homography_equals_glue_factorys_adjustment():
    rng = np.random.default_rng(3)
    for _ in range(20):
        H = np.eye(3) + rng.normal(0, [[0.1, 0.1, 30], [0.1, 0.1, 30], [1e-4, 1e-4, 0]])
        hw0, hw1 = (int(rng.integers(300, 1500)), int(rng.integers(300, 1500))), (int(rng.integers(300, 1500)), int(rng.integers(300, 1500)))
        new0, new1 = resized_size(*hw0, 480, "short"), resized_size(*hw1, 480, "short")
        ours = resize_homography(H, scale_matrix(hw0, new0), scale_matrix(hw1, new1))
        ref = glue_factory_H(H, hw0, new0, hw1, new1)
        assert ours.dtype == np.float64 and np.array_equal(ours, ref.astype(np.float64))
    # hand-worked: halving both images turns a 10 px shift into 5 px
    S = scale_matrix((1000, 1000), (500, 500))
    assert np.array_equal(resize_homography(np.array([[1.0, 0, 10], [0, 1, 0], [0, 0, 1]]), S, S),
                          [[1, 0, 5], [0, 1, 0], [0, 0, 1]])


def write_scene(folder: Path, images: dict[int, np.ndarray], homs: dict[str, np.ndarray], names: str = "{k}.ppm",
                pairs: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k, img in images.items():
        cv2.imwrite(str(folder / names.format(k=k)), img)
    for name, H in homs.items():
        write_homography(folder / name, H)
    if pairs is not None:
        (folder / "pairs.txt").write_text(pairs)
    return folder


def test_a_resized_scene_keeps_its_geometry(tmp_path):
    """Image 2 is image 1 warped by H: on the resized copy, image 1 warped by the adjusted H is the
    resized image 2 (up to resampling), while the unadjusted H is off by many levels."""
    img1 = textured(600, 900, seed=1)
    H = np.array([[0.9, 0.05, 20.0], [-0.04, 0.95, 15.0], [5e-5, 2e-5, 1.0]])
    img2 = cv2.warpPerspective(img1, H, (800, 640))
    src = write_scene(tmp_path / "src" / "s", {1: img1, 2: img2}, {"H_1_2": H})
    rec = resize_scene(src, tmp_path / "out" / "s", 480, "short")
    out = tmp_path / "out" / "s"
    files = scene_files(out)
    assert [p.name for p in files.images] == ["1.ppm", "2.ppm"] and list(files.homographies) == [2]
    r1, r2 = cv2.imread(str(out / "1.ppm")), cv2.imread(str(out / "2.ppm"))
    assert r1.shape == (480, 720, 3) and r2.shape == (480, 600, 3)
    H2 = read_homography(out / "H_1_2")
    valid = cv2.warpPerspective(np.ones(r1.shape[:2], np.uint8), H2, (600, 480)) > 0
    valid = cv2.erode(valid.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0

    def error(Hx):
        warped = cv2.warpPerspective(r1, Hx, (600, 480)).astype(float)
        return np.abs(warped - r2)[valid].mean()

    assert error(H2) < 6 and error(H) > 3 * error(H2)
    assert json.loads((out / RESIZED_FLAG).read_text()) == rec
    assert rec["images"]["2"] == {"source": [800, 640], "resized": [600, 480], "scale_xy": [0.75, 0.75]}


def test_pairs_own_files_oxford_names_and_grey_images(tmp_path):
    """An Oxford-named scene (img1.png, H1to2p) with a pairs.txt and a pair's own homography file,
    grey images: the copy has HPatches names, the pairs.txt, each own file adjusted for its two
    images, and grey pixels in all three channels."""
    g1, g2, g3 = textured(400, 600, 1, 1), textured(400, 500, 2, 1), textured(300, 600, 3, 1)
    H12, H23 = np.array([[1, 0, 4.0], [0, 1, 2], [0, 0, 1]]), np.array([[1, 0, -6.0], [0, 1, 8], [0, 0, 1]])
    src = write_scene(tmp_path / "s", {1: g1, 2: g2, 3: g3}, {"H1to2p": H12, "H1to3p": np.eye(3), "own23": H23},
                      names="img{k}.png", pairs="1 2\n2 3 own23\n")
    resize_scene(src, tmp_path / "o", 240, "short")
    out = tmp_path / "o"
    files = scene_files(out)
    assert [p.name for p in files.images] == ["1.ppm", "2.ppm", "3.ppm"]
    assert (out / "pairs.txt").read_text() == "1 2\n2 3 own23\n"
    s1, s2, s3 = scale_matrix((400, 600), (240, 360)), scale_matrix((400, 500), (240, 300)), scale_matrix((300, 600), (240, 480))
    assert np.array_equal(read_homography(out / "own23"), resize_homography(H23, s2, s3))
    assert np.array_equal(read_homography(out / "H_1_2"), resize_homography(H12, s1, s2))
    c = cv2.imread(str(out / "1.ppm"))
    assert c.shape == (240, 360, 3) and np.array_equal(c[..., 0], c[..., 1]) and np.array_equal(c[..., 1], c[..., 2])
    assert np.array_equal(c[..., 0], resize_image(g1, 240, 360))


def test_an_interrupted_copy_does_not_look_complete(tmp_path):
    """Rewriting a copy removes its resized.json first: a job that fails on a bad image leaves a
    copy without the flag, which the workflow redoes."""
    src = write_scene(tmp_path / "s", {1: textured(100, 120), 2: textured(100, 120, 1)}, {"H_1_2": np.eye(3)})
    resize_scene(src, tmp_path / "o", 50, "short")
    assert (tmp_path / "o" / RESIZED_FLAG).is_file()
    (src / "2.ppm").write_bytes(b"P6\n120 100\n255\n" + b"\0" * 10)  # truncated
    with pytest.raises(DataError):
        resize_scene(src, tmp_path / "o", 50, "short")
    assert not (tmp_path / "o" / RESIZED_FLAG).exists()


@pytest.mark.bad_input
def test_bad_resize_settings_name_the_key():
    raises_naming(lambda: check_resize({"size": 0, "side": "short"}), "resize.size", "480", exc=ConfigError)
    raises_naming(lambda: check_resize({"size": 480, "side": "middle"}), "resize.side", "short, long", exc=ConfigError)
    check_resize(None)
    check_resize({"size": 480, "side": "long"})


def test_docstring_examples_run():
    import doctest

    from descbench.datasets import resize as M

    failed, attempted = doctest.testmod(M)
    assert failed == 0 and attempted >= 4
