"""descbench.patches.generate: HPatches-style patches from sequence datasets.

Synthetic scenes are built here (skimage's camera image; images 2..6 = cv2.warpPerspective of
image 1 by known homographies) and the generated patches are checked against independent
references: a per-pixel ``cv2.remap`` through the *full* homography, hand-worked frame maps,
a rasterised overlap and pure-translation jitters.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import write_homography
from descbench.errors import ConfigError, DataError
from descbench.keypoints.projected import map_frames
from descbench.patches import JITTERS, PATCH_SIZE, PATCH_TYPES
from descbench.patches.generate import (
    DEFAULT_JITTER,
    ZERO_JITTER,
    JitterAmplitude,
    PatchGenParams,
    Pyramid,
    apply_jitter,
    circle_iou,
    draw_unit_jitter,
    extract_patches,
    frame_scale_angle,
    frames_inside,
    generate_patch_dataset,
    generate_sequence_patches,
    jitter_affine,
    map_frames_through_homography,
    reference_frames,
    scale_jitter,
    sequence_patches,
    suppress_overlapping,
)
from descbench.patches.layout import read_sequence, sequence_patch_count, validate_patch_dataset

SIZE = 320
SMALL = dict(max_patches=60)


def base_image() -> np.ndarray:
    import skimage.data

    return cv2.resize(skimage.data.camera(), (SIZE, SIZE), interpolation=cv2.INTER_AREA)


def rot(deg: float) -> np.ndarray:
    a = np.deg2rad(deg)
    return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])


def similarity(scale: float, deg: float, centre: tuple[float, float]) -> np.ndarray:
    """Rotation by ``deg`` and scaling by ``scale`` about ``centre``."""
    H = np.eye(3)
    H[:2, :2] = scale * rot(deg)
    H[:2, 2] = np.asarray(centre) - H[:2, :2] @ np.asarray(centre)
    return H


def mild_homographies() -> dict[int, np.ndarray]:
    """H_1_k of growing severity: rotation 4(k-1) deg, scale 1 + 0.04(k-1), a little perspective."""
    out = {}
    for k in range(2, 7):
        P = np.eye(3)
        P[2, :2] = [1e-4 * (k - 1), -0.6e-4 * (k - 1)]
        out[k] = similarity(1 + 0.04 * (k - 1), 4.0 * (k - 1), ((SIZE - 1) / 2, (SIZE - 1) / 2)) @ P
    return out


def make_scene(root: Path, name: str, homs: dict[int, np.ndarray] | None = None) -> Path:
    """A scene in the HPatches layout; ``homs=None``: identity homographies and identical images."""
    d = root / name
    d.mkdir(parents=True)
    img1 = base_image()
    cv2.imwrite(str(d / "1.ppm"), cv2.cvtColor(img1, cv2.COLOR_GRAY2BGR))
    for k in range(2, 7):
        H = np.eye(3) if homs is None else homs[k]
        # Lanczos keeps the warped images sharp, so ref and target patches differ little
        img = img1 if homs is None else cv2.warpPerspective(img1, H, (SIZE, SIZE), flags=cv2.INTER_LANCZOS4)
        cv2.imwrite(str(d / f"{k}.ppm"), cv2.cvtColor(img, cv2.COLOR_GRAY2BGR))
        write_homography(d / f"H_1_{k}", H)
    return d


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two synthetic scenes: ``i_same`` (6 identical images, H = I) and ``v_warp`` (mild homographies)."""
    root = tmp_path_factory.mktemp("seqs")
    make_scene(root, "i_same")
    make_scene(root, "v_warp", mild_homographies())
    return root


def mean_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean())


def ncc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Zero-mean normalised cross-correlation of corresponding patches ``[N, 65, 65]``."""
    a = a.reshape(len(a), -1).astype(np.float64)
    b = b.reshape(len(b), -1).astype(np.float64)
    a -= a.mean(1, keepdims=True)
    b -= b.mean(1, keepdims=True)
    return (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))


# --------------------------------------------------------------------------- (a) zero jitter


def test_zero_jitter_identity_gives_exactly_the_reference_patch(scenes: Path) -> None:
    r = sequence_patches(scenes / "i_same", PatchGenParams(jitter=ZERO_JITTER, **SMALL))
    assert len(r.strips["ref"]) == SMALL["max_patches"]
    for t in PATCH_TYPES[1:]:
        np.testing.assert_array_equal(r.strips[t], r.strips["ref"], err_msg=t)


def test_zero_jitter_target_is_the_reference_frame_resampled_through_h(scenes: Path) -> None:
    """Independent reference: sample image k at H(c + A q) for every patch pixel (full homography,
    cv2.remap) and compare with the generated patch (which uses H's local affine approximation)."""
    homs = mild_homographies()
    params = PatchGenParams(jitter=ZERO_JITTER, antialias=False, **SMALL)
    r = sequence_patches(scenes / "v_warp", params)
    det = r.detections
    A = reference_frames(det.sigma, det.angle, params.magnification)
    q = (np.arange(PATCH_SIZE) - 32) / 32.5
    Q = np.stack(np.meshgrid(q, q), axis=-1)  # [row v, column u, (q_x, q_y)]
    inner = slice(10, 55)  # away from the patch border, where the affine approximation is worst
    for k in range(2, 7):
        img_k = cv2.imread(str(scenes / "v_warp" / f"{k}.ppm"), cv2.IMREAD_GRAYSCALE)
        to_expected, to_ref = [], []
        for i in range(len(det)):
            X = det.xy[i] + Q @ A[i].T
            Xh = np.concatenate([X, np.ones(X.shape[:2] + (1,))], axis=-1) @ homs[k].T
            Y = (Xh[..., :2] / Xh[..., 2:]).astype(np.float32)
            expected = cv2.remap(img_k, Y[..., 0], Y[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
            got = r.strips[f"e{k - 1}"][i]
            to_expected.append(mean_abs(got[inner, inner], expected[inner, inner]))
            to_ref.append(mean_abs(got[inner, inner], r.strips["ref"][i][inner, inner]))
            for j in "ht":  # zero jitter: all three levels are the same frame
                np.testing.assert_array_equal(r.strips[f"{j}{k - 1}"][i], got)
        assert np.mean(to_expected) < 1.0, (k, np.mean(to_expected))
        assert np.max(to_expected) < 5.0, (k, np.max(to_expected))
        assert np.mean(to_ref) < 3.0, (k, np.mean(to_ref))
    # with the default anti-aliasing the patches still show the same content
    aa = sequence_patches(scenes / "v_warp", PatchGenParams(jitter=ZERO_JITTER, **SMALL))
    for k in range(2, 7):
        assert mean_abs(aa.strips[f"e{k - 1}"][:, inner, inner], aa.strips["ref"][:, inner, inner]) < 3.0


# --------------------------------------------------------------------------- (b) jitter levels


def test_jitter_levels_increase_the_difference_to_the_reference(scenes: Path) -> None:
    r = sequence_patches(scenes / "i_same", PatchGenParams(**SMALL))
    diff = {j: np.mean([mean_abs(r.strips[f"{j}{n}"], r.strips["ref"]) for n in range(1, 6)]) for j in JITTERS}
    assert 0 < diff["e"] < diff["h"] < diff["t"], diff
    # and per target image as well
    for n in range(1, 6):
        d = [mean_abs(r.strips[f"{j}{n}"], r.strips["ref"]) for j in JITTERS]
        assert d[0] < d[1] < d[2], (n, d)


def test_default_amplitudes_reach_the_documented_median_overlaps() -> None:
    """Rasterised IoU between the measurement region |q| <= 1 and its jittered image, built here
    from the parameters (R(phi) diag(s_x, s_y) q + t): medians 0.85 / 0.72 / 0.60."""
    g = np.linspace(-2.6, 2.6, 181)
    P = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    disk = (P**2).sum(1) <= 1
    rng = np.random.default_rng(123)
    for amp, target in zip(DEFAULT_JITTER, (0.85, 0.72, 0.60)):
        jit = scale_jitter(draw_unit_jitter(rng, 500)[:, 0, 0], amp)
        ious = []
        for phi, sx, sy, tx, ty in jit:
            L = rot(phi) @ np.diag([sx, sy])
            back = (P - [tx, ty]) @ np.linalg.inv(L).T  # points of the jittered region map into the disk
            inside = (back**2).sum(1) <= 1
            ious.append((disk & inside).sum() / (disk | inside).sum())
        assert abs(np.median(ious) - target) < 0.03, (amp, np.median(ious))
        assert np.all(np.abs(jit[:, 0]) <= amp.rotation_deg)
        assert np.all(np.abs(np.log(jit[:, 1:3])) <= amp.log_scale + 1e-12)
        assert np.all(np.abs(jit[:, 3:]) <= amp.translation)


def test_jitter_affine_matches_its_definition() -> None:
    jit = np.array([[90.0, 2.0, 1.0, 0.5, 0.0], [-30.0, 0.8, 1.25, -0.1, 0.2]])
    L, t = jitter_affine(jit)
    for i, (phi, sx, sy, tx, ty) in enumerate(jit):
        np.testing.assert_allclose(L[i], rot(phi) @ np.diag([sx, sy]), atol=1e-12)
        np.testing.assert_allclose(t[i], [tx, ty])
    c, A = np.array([[100.0, 50.0]]), np.array([10.0 * np.eye(2)])
    c2, A2 = apply_jitter(c, A, jit[:1])
    np.testing.assert_allclose(A2[0], 10.0 * np.array([[0.0, -1.0], [2.0, 0.0]]), atol=1e-12)  # R(90) diag(2, 1)
    np.testing.assert_allclose(c2[0], [105.0, 50.0])


def test_translation_jitter_shifts_the_patch_along_its_own_axes() -> None:
    """A shift of 4 patch pixels along the patch's x axis (t = (4 / 32.5, 0)), whatever the frame's
    orientation, gives the reference patch moved by 4 columns."""
    pyr = Pyramid(base_image())
    c = np.array([[160.0, 150.0]])
    for angle in (0.0, 37.0, 200.0):
        A = reference_frames(np.array([6.0]), np.array([angle]), 5.0)
        ref = extract_patches(pyr, c, A)[0].astype(int)
        c2, A2 = apply_jitter(c, A, np.array([[0.0, 1.0, 1.0, 4 / 32.5, 0.0]]))
        moved = extract_patches(pyr, c2, A2)[0].astype(int)
        assert np.abs(moved[:, :-4] - ref[:, 4:]).max() <= 1, angle


# --------------------------------------------------------------------------- (c) frame mapping


def test_frame_mapping_through_a_hand_worked_similarity() -> None:
    """H = scale 2 + rotation 90 deg + translation (100, 50): (x, y) -> (-2y + 100, 2x + 50)."""
    H = np.array([[0.0, -2.0, 100.0], [2.0, 0.0, 50.0], [0.0, 0.0, 1.0]])
    c = np.array([[10.0, 20.0], [0.0, 0.0]])
    A = reference_frames(np.array([3.0, 1.0]), np.array([30.0, 350.0]), 5.0)
    ck, Ak, front = map_frames_through_homography(H, c, A)
    np.testing.assert_allclose(ck, [[60.0, 70.0], [100.0, 50.0]])
    assert front.all()
    scale, angle = frame_scale_angle(A)
    scale_k, angle_k = frame_scale_angle(Ak)
    np.testing.assert_allclose(scale, [15.0, 5.0])
    np.testing.assert_allclose(scale_k, 2 * scale)
    np.testing.assert_allclose(angle_k, [120.0, 80.0])  # 30 + 90, (350 + 90) mod 360
    np.testing.assert_allclose(Ak[0], 30.0 * rot(120.0), atol=1e-12)
    # the same angle and scale as the keypoint projection of descbench.keypoints.projected
    ang_p, size_p = map_frames(H, c, np.array([30.0, 350.0]), np.array([6.0, 2.0]))
    np.testing.assert_allclose(ang_p, angle_k)
    np.testing.assert_allclose(size_p, [12.0, 4.0])


def test_support_check() -> None:
    A = np.array([32.5 * np.eye(2)])
    # corner sample points at 32 +- 32 = 0 .. 64: exactly inside a 65 x 65 image
    assert frames_inside(np.array([[32.0, 32.0]]), A, 65, 65).all()
    assert not frames_inside(np.array([[32.01, 32.0]]), A, 65, 65).any()
    assert not frames_inside(np.array([[32.0, 31.99]]), A, 65, 65).any()
    # a rotated frame needs more room: its corners stick out by a factor sqrt(2)
    A45 = reference_frames(np.array([6.5]), np.array([45.0]), 5.0)
    assert not frames_inside(np.array([[32.0, 32.0]]), A45, 65, 65).any()
    assert frames_inside(np.array([[46.0, 46.0]]), A45, 93, 93).all()


def test_all_generated_frames_lie_inside_every_image(scenes: Path) -> None:
    r = sequence_patches(scenes / "v_warp", PatchGenParams(**SMALL))
    homs = mild_homographies()
    A = reference_frames(r.detections.sigma, r.detections.angle, 5.0)
    assert frames_inside(r.detections.xy, A, SIZE, SIZE).all()
    for li in range(3):
        for ki, k in enumerate(range(2, 7)):
            c1, A1 = apply_jitter(r.detections.xy, A, r.jitter[:, li, ki])
            assert frames_inside(c1, A1, SIZE, SIZE).all()
            ck, Ak, front = map_frames_through_homography(homs[k], c1, A1)
            assert front.all() and frames_inside(ck, Ak, SIZE, SIZE).all()


# --------------------------------------------------------------------------- suppression


def test_circle_iou_against_closed_forms_and_a_raster() -> None:
    z = np.zeros(2)
    assert circle_iou(z, 1.0, z, 1.0) == pytest.approx(1.0)
    assert circle_iou(z, 1.0, np.array([2.5, 0.0]), 1.0) == 0.0
    assert circle_iou(z, 1.0, np.array([0.3, 0.0]), 2.0) == pytest.approx(0.25)  # contained: 1 / 4
    g = np.linspace(-3, 4, 1401)
    X, Y = np.meshgrid(g, g)
    for (dx, r2) in ((0.8, 1.0), (1.5, 1.7), (0.5, 0.6)):
        a = X**2 + Y**2 <= 1.0
        b = (X - dx) ** 2 + Y**2 <= r2**2
        assert circle_iou(z, 1.0, np.array([dx, 0.0]), r2) == pytest.approx((a & b).sum() / (a | b).sum(), abs=0.005)


def test_suppression_keeps_the_first_of_overlapping_circles() -> None:
    xy = np.array([[10.0, 10.0], [10.0, 10.0], [10.2, 10.0], [30.0, 10.0], [10.0, 10.5], [31.0, 10.0]])
    radius = np.array([2.0, 2.0, 2.0, 2.0, 8.0, 2.0])
    # 1 and 2 duplicate 0; 4 is much larger (IoU 1/16 with 0): kept; 5 overlaps 3 (IoU ~0.53)
    np.testing.assert_array_equal(suppress_overlapping(xy, radius, 0.5), [0, 3, 4])
    np.testing.assert_array_equal(suppress_overlapping(xy, radius, 1.0), [0, 1, 2, 3, 4, 5])  # IoU > 1 never


def test_kept_detections_do_not_overlap_and_are_ordered_by_response(scenes: Path) -> None:
    params = PatchGenParams(**SMALL)
    r = sequence_patches(scenes / "v_warp", params)
    d = r.detections
    iou = circle_iou(d.xy[:, None], d.sigma[:, None], d.xy[None], d.sigma[None])
    np.fill_diagonal(iou, 0.0)
    assert iou.max() <= params.overlap_threshold
    assert np.all(np.diff(d.response) <= 0)
    assert len(d) == params.max_patches < r.counts["with std >= min_std"]


# --------------------------------------------------------------------------- (d) determinism, (e) N


def test_files_are_deterministic_and_independent_of_other_sequences(scenes: Path, tmp_path: Path) -> None:
    params = PatchGenParams(**SMALL)
    assert generate_patch_dataset(scenes, tmp_path / "one", ["v_warp"], params) == {"v_warp": 60}
    generate_patch_dataset(scenes, tmp_path / "two", ["i_same", "v_warp"], params)
    files = sorted(p.name for p in (tmp_path / "one" / "v_warp").iterdir())
    assert files == sorted([f"{t}.png" for t in PATCH_TYPES] + ["patches.json"])
    for name in files:
        one, two = (tmp_path / run / "v_warp" / name for run in ("one", "two"))
        assert one.read_bytes() == two.read_bytes(), name

    other = PatchGenParams(seed=1, **SMALL)
    generate_sequence_patches(scenes / "v_warp", tmp_path / "seed1", other)
    j0 = json.loads((tmp_path / "one" / "v_warp" / "patches.json").read_text())
    j1 = json.loads((tmp_path / "seed1" / "patches.json").read_text())
    assert j0["patches"][0]["jitter"]["e1"] != j1["patches"][0]["jitter"]["e1"]
    assert j1["params"]["seed"] == 1
    assert any((tmp_path / "one" / "v_warp" / f"{t}.png").read_bytes() != (tmp_path / "seed1" / f"{t}.png").read_bytes()
               for t in PATCH_TYPES[1:])


def test_all_strips_have_the_same_n_and_provenance_matches(scenes: Path, tmp_path: Path) -> None:
    out = tmp_path / "v_warp"
    n = generate_sequence_patches(scenes / "v_warp", out, PatchGenParams(**SMALL))
    assert sequence_patch_count(out) == n == SMALL["max_patches"]
    strips = read_sequence(out)
    assert {len(s) for s in strips.values()} == {n}
    prov = json.loads((out / "patches.json").read_text())
    assert prov["n_patches"] == n == len(prov["patches"])
    assert prov["sequence"] == "v_warp"
    assert prov["params"]["magnification"] == 5.0
    assert prov["params"]["jitter"]["hard"]["translation"] == 0.26
    assert sorted(prov["sources"]) == sorted([f"{k}.ppm" for k in range(1, 7)] + [f"H_1_{k}" for k in range(2, 7)])
    assert sorted(prov["patches"][0]["jitter"]) == sorted(PATCH_TYPES[1:])
    assert str(tmp_path) not in (out / "patches.json").read_text()  # no absolute paths
    # provenance reproduces the ref patches
    p = prov["patches"]
    A = reference_frames(np.array([q["sigma"] for q in p]), np.array([q["angle"] for q in p]), 5.0)
    img1 = cv2.imread(str(scenes / "v_warp" / "1.ppm"), cv2.IMREAD_GRAYSCALE)
    again = extract_patches(Pyramid(img1), np.array([[q["x"], q["y"]] for q in p]), A)
    np.testing.assert_array_equal(again, strips["ref"])


# --------------------------------------------------------------------------- (f) demo, errors


def test_demo_dataset(tmp_path: Path) -> None:
    from descbench.datasets.demo import generate_demo

    generate_demo(tmp_path / "demo", scenes=["v_coins", "i_brick"])
    counts = generate_patch_dataset(tmp_path / "demo", tmp_path / "patches", ["v_coins", "i_brick"],
                                    PatchGenParams(max_patches=100))
    assert counts == {"v_coins": 100, "i_brick": 100}
    assert validate_patch_dataset(tmp_path / "patches", ["i_brick", "v_coins"]) == counts
    for scene in counts:
        s = read_sequence(tmp_path / "patches" / scene)
        # row i of e1 shows the same place as row i of ref: it correlates with its own ref patch
        # (normalised cross-correlation, insensitive to the i_ scenes' photometric changes) far
        # better than with another row's
        own = ncc(s["e1"], s["ref"]).mean()
        other = ncc(s["e1"], np.roll(s["ref"], 1, axis=0)).mean()
        assert own > 0.75 and own > other + 0.15, (scene, own, other)


@pytest.mark.bad_input
def test_no_surviving_patch_is_a_data_error(scenes: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"(?s)no patch survives in scene v_warp.*magnification"):
        generate_sequence_patches(scenes / "v_warp", tmp_path / "out", PatchGenParams(magnification=200.0))
    assert not (tmp_path / "out").exists()  # never an empty strip


@pytest.mark.bad_input
def test_incomplete_scene_is_a_data_error_before_anything_is_written(scenes: Path, tmp_path: Path) -> None:
    bad = tmp_path / "seqs"
    make_scene(bad, "v_ok")
    make_scene(bad, "v_bad")
    (bad / "v_bad" / "H_1_4").unlink()
    with pytest.raises(DataError, match=r"v_bad.*H_1_4"):
        generate_patch_dataset(bad, tmp_path / "out", ["v_ok", "v_bad"], PatchGenParams(**SMALL))
    assert not (tmp_path / "out").exists()


@pytest.mark.bad_input
def test_parameter_validation() -> None:
    with pytest.raises(ConfigError, match="'max_patches'"):
        PatchGenParams(max_patches=0)
    with pytest.raises(ConfigError, match="'magnification'"):
        PatchGenParams(magnification=-1.0)
    with pytest.raises(ConfigError, match="'jitter.hard.translation'"):
        PatchGenParams(jitter=(DEFAULT_JITTER[0], JitterAmplitude(15.0, 0.26, -0.1), DEFAULT_JITTER[2]))
    with pytest.raises(ConfigError, match=r"patches\.max_patchs"):
        PatchGenParams.from_mapping({"max_patchs": 10})
    with pytest.raises(ConfigError, match=r"patches\.jitter\.extreme"):
        PatchGenParams.from_mapping({"jitter": {"extreme": {"translation": 1.0}}})
    p = PatchGenParams.from_mapping({"max_patches": 10, "jitter": {"tough": {"translation": 0.5}}})
    assert p.max_patches == 10 and p.amplitude("t") == JitterAmplitude(22.5, 0.40, 0.5)
    assert p.amplitude("e") == DEFAULT_JITTER[0]
    assert PatchGenParams.from_mapping(p.to_dict()) == p  # the provenance form reads back
