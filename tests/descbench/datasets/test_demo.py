"""Tests of the bundled offline demo dataset (descbench.datasets.demo)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets import hpatches, layout
from descbench.datasets.demo import DEMO_SCENES, generate_demo, generate_scene
from descbench.errors import ConfigError

I_SCENE = "i_coffee"
V_SCENES = [s for s in DEMO_SCENES if s.startswith("v_")]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All demo scenes, generated once for the module (seed 0)."""
    out = tmp_path_factory.mktemp("demo")
    generate_demo(out)
    return out


def _file_bytes(scene_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in layout.scene_files(scene_dir).all_paths()}


def test_scene_list():
    assert len(DEMO_SCENES) == 8
    assert len(set(DEMO_SCENES)) == 8
    assert sum(s.startswith("i_") for s in DEMO_SCENES) == 4
    assert sum(s.startswith("v_") for s in DEMO_SCENES) == 4


@pytest.mark.parametrize("scene", [I_SCENE, "v_chelsea"])
def test_generate_scene_layout(tmp_path: Path, scene: str):
    generate_scene(scene, tmp_path, seed=0)
    scene_dir = tmp_path / scene
    files = layout.scene_files(scene_dir)
    assert len(files.all_paths()) == 11
    assert [p.name for p in files.images] == [f"{k}.ppm" for k in range(1, hpatches.N_IMAGES + 1)]
    assert sorted(files.homographies) == list(hpatches.TARGET_IMAGES)
    # No temporary files are left behind by the atomic writes.
    assert sorted(p.name for p in scene_dir.iterdir()) == sorted(p.name for p in files.all_paths())
    shapes = set()
    for p in files.images:
        img = layout.read_image(p, color=True)
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        assert max(img.shape[:2]) <= 640
        shapes.add(img.shape)
    assert len(shapes) == 1
    for k in hpatches.TARGET_IMAGES:
        H = layout.read_homography(files.homographies[k])
        if scene.startswith("i_"):
            np.testing.assert_array_equal(H, np.eye(3))
        else:
            assert not np.allclose(H, np.eye(3))
            assert np.linalg.cond(H) < 1e6


def test_illumination_images_change_but_stay_similar(demo_dir: Path):
    files = layout.scene_files(demo_dir / I_SCENE)
    img1 = layout.read_image(files.images[0]).astype(np.float64)
    for p in files.images[1:]:
        img = layout.read_image(p).astype(np.float64)
        assert np.mean(np.abs(img - img1)) > 2.0  # a real photometric change ...
        assert np.corrcoef(img.ravel(), img1.ravel())[0, 1] > 0.8  # ... of the same content


def test_deterministic(tmp_path: Path):
    for scene in (I_SCENE, "v_camera"):
        generate_scene(scene, tmp_path / "a", seed=0)
        generate_scene(scene, tmp_path / "b", seed=0)
        generate_scene(scene, tmp_path / "c", seed=1)
        a = _file_bytes(tmp_path / "a" / scene)
        b = _file_bytes(tmp_path / "b" / scene)
        c = _file_bytes(tmp_path / "c" / scene)
        assert a == b
        # Image 1 is the photograph itself; every generated image and (for v_) every
        # homography depends on the seed.
        assert a["1.ppm"] == c["1.ppm"]
        for k in hpatches.TARGET_IMAGES:
            assert a[f"{k}.ppm"] != c[f"{k}.ppm"]
            if scene.startswith("v_"):
                assert a[f"H_1_{k}"] != c[f"H_1_{k}"]


def test_regenerate_overwrites_identically(tmp_path: Path):
    generate_scene("v_coins", tmp_path, seed=3)
    first = _file_bytes(tmp_path / "v_coins")
    (tmp_path / "v_coins" / "4.ppm").write_bytes(b"garbage")
    generate_scene("v_coins", tmp_path, seed=3)
    assert _file_bytes(tmp_path / "v_coins") == first


def test_homography_maps_image1_content_to_image_k(demo_dir: Path):
    """Pixel-level check of the convention p_k ~ H_1_k p_1 (and not its inverse)."""
    for scene in V_SCENES:
        files = layout.scene_files(demo_dir / scene)
        img1 = layout.read_image(files.images[0]).astype(np.float32)
        h, w = img1.shape
        ys, xs = np.mgrid[h // 4 : 3 * h // 4 : 4, w // 4 : 3 * w // 4 : 4]
        p1 = np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.float32)
        v1 = img1[p1[:, 1].astype(int), p1[:, 0].astype(int)]
        for k in hpatches.TARGET_IMAGES:
            imgk = layout.read_image(files.images[k - 1]).astype(np.float32)
            H = layout.read_homography(files.homographies[k])
            errs = {}
            for name, M in (("H", H), ("inv(H)", np.linalg.inv(H))):
                pk = cv2.perspectiveTransform(p1[None], M)[0]
                inside = (pk[:, 0] >= 0) & (pk[:, 0] <= w - 1) & (pk[:, 1] >= 0) & (pk[:, 1] <= h - 1)
                vk = cv2.remap(imgk, pk[None, :, 0], pk[None, :, 1], cv2.INTER_LINEAR)[0]
                errs[name] = float(np.mean(np.abs(vk[inside] - v1[inside])))
            assert errs["H"] < 6.0, (scene, k, errs)
            assert errs["inv(H)"] > 2.0 * errs["H"], (scene, k, errs)


@pytest.mark.parametrize("scene", V_SCENES)
def test_viewpoint_sift_matches_agree_with_homography(demo_dir: Path, scene: str):
    sift = cv2.SIFT_create()
    matcher = cv2.BFMatcher(cv2.NORM_L2, crossCheck=True)
    files = layout.scene_files(demo_dir / scene)
    kp1, d1 = sift.detectAndCompute(layout.read_image(files.images[0]), None)
    for k in hpatches.TARGET_IMAGES:
        kpk, dk = sift.detectAndCompute(layout.read_image(files.images[k - 1]), None)
        H = layout.read_homography(files.homographies[k])
        matches = matcher.match(d1, dk)
        p1 = np.float32([kp1[m.queryIdx].pt for m in matches])
        pk = np.float32([kpk[m.trainIdx].pt for m in matches])
        err = np.linalg.norm(cv2.perspectiveTransform(p1[None], H.astype(np.float64))[0] - pk, axis=1)
        assert np.median(err) < 1.5, (scene, k, float(np.median(err)))
        assert int(np.sum(err < 3.0)) >= 50, (scene, k, int(np.sum(err < 3.0)))


@pytest.mark.parametrize("scene", DEMO_SCENES)
def test_image1_has_enough_sift_keypoints(demo_dir: Path, scene: str):
    img = layout.read_image(layout.scene_files(demo_dir / scene).images[0])
    assert len(cv2.SIFT_create().detect(img, None)) >= 200


@pytest.mark.bad_input
def test_unknown_scene_raises_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="v_chelsea"):
        generate_scene("v_nonexistent", tmp_path)
    with pytest.raises(ConfigError, match="i_astronaut"):
        generate_demo(tmp_path, scenes=["i_astronaut", "bogus"])
    assert not (tmp_path / "i_astronaut").exists()  # validated before anything is written
