"""Precomputed features in the D2-Net npz convention (descbench.precomputed) and their stages.

D2-Net writes ``<image>.<method>`` with ``np.savez`` into a file object (no ``.npz`` suffix
added): arrays ``keypoints`` (N x 2+: x, y[, scale]), ``descriptors`` (N x D) and ``scores`` (N).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

from descbench import io
from descbench.jobs.common import load_keypoints
from descbench.jobs.descriptors import describe_scene
from descbench.jobs.keypoints import detect_scene
from descbench.jobs.score import score_scene
from descbench.datasets import hpatches, layout
from descbench.errors import DataError
from descbench.fileops import file_sha256
from descbench.metrics.retrieval import RetrievalParams, score_pair
from descbench.precomputed import feature_path, load_features
from conftest import raises_naming

SCENE = "v_coins"  # the scene of the shared `pristine` / `scene` fixtures (conftest.DEMO_SCENE)
METHOD = "mynet"
BORDER = 40
CAP = 300
SCORING = {"tau_px": 3.0, "gt": "closest", "tie_policy": "expected", "chunk_mb": 64}
KPSET = {
    "detector": "precomputed", "border_px": BORDER, "max_keypoints": CAP,
    "params": {"method": METHOD, "root": None, "default_size_px": 12.0},
}
PRE_DESC = {"family": "precomputed", "params": {}}


def save_npz(path: Path, **arrays) -> Path:
    """Write like D2-Net: np.savez into an open file object, so the name is kept as is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


# ----------------------------------------------------------------------------- load_features


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """An image path (the file itself is never read by load_features)."""
    d = tmp_path / "scene_a"
    d.mkdir()
    p = d / "1.ppm"
    p.write_bytes(b"")
    return p


def _features(n: int = 10, d: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    kp = np.column_stack([rng.uniform(0, 300, n), rng.uniform(0, 200, n), rng.uniform(2, 30, n)]).astype(np.float32)
    desc = rng.normal(size=(n, d)).astype(np.float32)
    scores = rng.uniform(0, 1, n).astype(np.float32)
    return kp, desc, scores


def test_load_float_features(image: Path):
    kp, desc, scores = _features()
    f = save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp, descriptors=desc, scores=scores)
    feats = load_features(image, METHOD)
    assert feats.path == f and not feats.binary
    assert feats.descriptors.dtype == np.float32 and feats.descriptors.shape == (10, 64)
    np.testing.assert_array_equal(feats.descriptors, desc)
    k = feats.keypoints
    np.testing.assert_array_equal(k.x, kp[:, 0])
    np.testing.assert_array_equal(k.y, kp[:, 1])
    np.testing.assert_array_equal(k.size, kp[:, 2])
    np.testing.assert_array_equal(k.response, scores)
    np.testing.assert_array_equal(k.source_index, np.arange(10))
    assert (k.angle == -1).all() and (k.octave == 0).all()


def test_load_float64_descriptors_cast(image: Path):
    kp, desc, _ = _features()
    save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp.astype(np.float64), descriptors=desc.astype(np.float64))
    feats = load_features(image, METHOD)
    assert feats.descriptors.dtype == np.float32
    np.testing.assert_array_equal(feats.descriptors, desc)
    assert (feats.keypoints.response == 0).all()  # no scores: zero responses


def test_load_binary_features(image: Path):
    kp, desc, _ = _features()
    bits = np.packbits(desc > 0, axis=1)  # 64 bits -> 8 bytes
    save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp, descriptors=bits)
    feats = load_features(image, METHOD, descriptor_kind="binary")
    assert feats.binary and feats.descriptors.dtype == np.uint8 and feats.descriptors.shape == (10, 8)
    np.testing.assert_array_equal(feats.descriptors, bits)
    # the same uint8 array as 8-bit values (L2), and without a kind: an error naming file and key
    as_float = load_features(image, METHOD, descriptor_kind="float")
    assert not as_float.binary and as_float.descriptors.dtype == np.float32
    np.testing.assert_array_equal(as_float.descriptors, bits.astype(np.float32))
    with pytest.raises(DataError, match=r"\.ppm\.mynet: 'descriptors' are uint8.*params\.descriptor_kind: binary"):
        load_features(image, METHOD)


@pytest.mark.bad_input
def test_binary_kind_on_float_descriptors_is_an_error(image: Path):
    kp, desc, _ = _features()
    save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp, descriptors=desc)
    with pytest.raises(DataError, match=r"descriptor_kind is binary but 'descriptors' are float"):
        load_features(image, METHOD, descriptor_kind="binary")


def test_keypoints_without_scale_use_default_size(image: Path):
    kp, desc, _ = _features()
    save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp[:, :2], descriptors=desc)
    feats = load_features(image, METHOD, default_size_px=7.5)
    np.testing.assert_array_equal(feats.keypoints.size, np.full(10, 7.5, dtype=np.float32))
    assert (load_features(image, METHOD).keypoints.size == 12.0).all()


def test_extra_keypoint_columns_ignored(image: Path):
    kp, desc, _ = _features()
    kp5 = np.column_stack([kp, np.ones((10, 2), np.float32)])
    save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp5, descriptors=desc)
    np.testing.assert_array_equal(load_features(image, METHOD).keypoints.size, kp[:, 2])


def test_root_layout(image: Path, tmp_path: Path):
    kp, desc, _ = _features()
    root = tmp_path / "features"
    f = save_npz(root / image.parent.name / f"{image.name}.{METHOD}", keypoints=kp, descriptors=desc)
    assert feature_path(image, METHOD, root) == f
    assert load_features(image, METHOD, root).path == f
    assert load_features(image, METHOD, str(root)).path == f
    # Without root, the file next to the image is expected (and is missing).
    raises_naming(lambda: load_features(image, METHOD), str(image.parent / f"{image.name}.{METHOD}"))


def test_npz_suffix_accepted(image: Path):
    kp, desc, _ = _features()
    np.savez(image.parent / f"{image.name}.{METHOD}", keypoints=kp, descriptors=desc)  # adds .npz
    assert load_features(image, METHOD).path.name == f"{image.name}.{METHOD}.npz"


def test_empty_features_load(image: Path):
    save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=np.zeros((0, 2), np.float32), descriptors=np.zeros((0, 32), np.float32))
    feats = load_features(image, METHOD)
    assert len(feats.keypoints) == 0 and feats.descriptors.shape == (0, 32)


@pytest.mark.bad_input
def test_missing_file(image: Path, tmp_path: Path):
    expected = image.parent / f"{image.name}.{METHOD}"
    msg = raises_naming(lambda: load_features(image, METHOD), str(expected), str(image))
    assert "expected" in msg
    root = tmp_path / "elsewhere"
    raises_naming(lambda: load_features(image, METHOD, root), str(root / image.parent.name / f"{image.name}.{METHOD}"))


def _bad_cases() -> dict:
    kp, desc, scores = _features()
    nan_desc = desc.copy()
    nan_desc[4, 10] = np.nan
    nan_kp = kp.copy()
    nan_kp[6, 1] = np.nan
    nan_scale = kp.copy()
    nan_scale[2, 2] = np.inf
    nan_scores = scores.copy()
    nan_scores[3] = np.nan
    return {
        "no_descriptors": (dict(keypoints=kp, scores=scores), "'descriptors'"),
        "no_keypoints": (dict(descriptors=desc), "'keypoints'"),
        "keypoints_1d": (dict(keypoints=kp[:, 0], descriptors=desc), "(10,)"),
        "keypoints_n1": (dict(keypoints=kp[:, :1], descriptors=desc), "(10, 1)"),
        "keypoints_strings": (dict(keypoints=kp.astype(str), descriptors=desc), "keypoints"),
        "descriptors_1d": (dict(keypoints=kp, descriptors=desc[:, 0]), "(10,)"),
        "descriptors_3d": (dict(keypoints=kp, descriptors=desc.reshape(10, 8, 8)), "(10, 8, 8)"),
        "descriptors_zero_dim": (dict(keypoints=kp, descriptors=desc[:, :0]), "(10, 0)"),
        "count_mismatch": (dict(keypoints=kp, descriptors=desc[:9]), "9 descriptors"),
        "nan_descriptors": (dict(keypoints=kp, descriptors=nan_desc), "row 4"),
        "float64_overflow": (dict(keypoints=kp, descriptors=np.where(nan_desc == nan_desc, desc.astype(np.float64), 1e300)), "row 4"),
        "nan_keypoints": (dict(keypoints=nan_kp, descriptors=desc), "row 6"),
        "inf_scale": (dict(keypoints=nan_scale, descriptors=desc), "row 2"),
        "int32_descriptors": (dict(keypoints=kp, descriptors=(desc * 100).astype(np.int32)), "int32"),
        "bool_descriptors": (dict(keypoints=kp, descriptors=desc > 0), "bool"),
        "scores_wrong_length": (dict(keypoints=kp, descriptors=desc, scores=scores[:7]), "(7,)"),
        "scores_2d": (dict(keypoints=kp, descriptors=desc, scores=scores[:, None]), "(10, 1)"),
        "scores_nan": (dict(keypoints=kp, descriptors=desc, scores=nan_scores), "row 3"),
    }


@pytest.mark.bad_input
@pytest.mark.parametrize("case", sorted(_bad_cases()))
def test_invalid_features(image: Path, case: str):
    arrays, fragment = _bad_cases()[case]
    f = save_npz(image.parent / f"{image.name}.{METHOD}", **arrays)
    msg = raises_naming(lambda: load_features(image, METHOD), str(f), fragment)
    assert "regenerate" in msg or "use " in msg or "must" in msg


@pytest.mark.bad_input
@pytest.mark.parametrize("content", ["random", "empty", "npy", "truncated_zip"])
def test_corrupt_file(image: Path, content: str):
    f = image.parent / f"{image.name}.{METHOD}"
    if content == "random":
        f.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif content == "empty":
        f.write_bytes(b"")
    elif content == "npy":  # a single array (np.save), not an archive of named arrays
        with open(f, "wb") as fh:
            np.save(fh, np.zeros((3, 2)))
    else:
        kp, desc, _ = _features()
        save_npz(f, keypoints=kp, descriptors=desc)
        f.write_bytes(f.read_bytes()[:300])
    msg = raises_naming(lambda: load_features(image, METHOD), str(f))
    assert "regenerate" in msg


@pytest.mark.bad_input
def test_pickled_object_array_refused(image: Path):
    kp, desc, _ = _features()
    obj = np.empty(10, dtype=object)
    obj[:] = [list(r) for r in desc]
    f = save_npz(image.parent / f"{image.name}.{METHOD}", keypoints=kp, descriptors=obj)
    raises_naming(lambda: load_features(image, METHOD), str(f))


# ----------------------------------------------------------------------------- end to end


def write_sift_npz(scene: Path, binary: bool = False, method: str = METHOD) -> dict[int, dict]:
    """OpenCV SIFT features of the 6 images saved as D2-Net npz (scores = response)."""
    sift = cv2.SIFT_create()
    out = {}
    for k in range(1, 7):
        img = scene / f"{k}.ppm"
        kps, desc = sift.detectAndCompute(layout.read_image(img), None)
        kp = np.array([[p.pt[0], p.pt[1], p.size] for p in kps], dtype=np.float32)
        scores = np.array([p.response for p in kps], dtype=np.float32)
        desc = desc.astype(np.float32)
        if binary:
            desc = np.packbits(desc > np.median(desc, axis=1, keepdims=True), axis=1)
        save_npz(scene / f"{img.name}.{method}", keypoints=kp, descriptors=desc, scores=scores)
        out[k] = {"keypoints": kp, "descriptors": desc, "scores": scores}
    return out


def expected_selection(kp: np.ndarray, scores: np.ndarray, w: int, h: int) -> np.ndarray:
    """Border filter (on float32 coordinates), then the CAP highest scores; ascending indices."""
    x, y = kp[:, 0].astype(np.float32), kp[:, 1].astype(np.float32)
    inside = np.flatnonzero((x >= BORDER) & (x < w - BORDER) & (y >= BORDER) & (y < h - BORDER))
    order = np.argsort(-scores[inside].astype(np.float64), kind="stable")[:CAP]
    return np.sort(inside[order])


def run_stages(scene: Path, tmp_path: Path, kpset: dict = KPSET, dspec: dict = PRE_DESC, tag: str = "pre"):
    out = tmp_path / "out" / tag
    kp, desc = out / "kp.parquet", out / "desc.parquet"
    detect_scene(scene, "mynet_set", kpset, kp)
    describe_scene(scene, kp, tag, dspec, kpset, desc)
    q, p, t = out / "queries.parquet", out / "pairs.parquet", out / "timing.json"
    score_scene(scene, kp, desc, SCORING, q, p, t)
    return kp, desc, q, p


def direct_scores(scene: Path, npz: dict[int, dict], sel: dict[int, np.ndarray]) -> dict[int, tuple[int, float]]:
    """(n_relevant_queries, sum_ap) per pair from score_pair on the npz rows, bypassing the stages."""
    params = RetrievalParams.from_config(SCORING)
    q = npz[1]
    out = {}
    for k in hpatches.TARGET_IMAGES:
        t = npz[k]
        w, h = layout.image_size(scene / f"{k}.ppm")
        res = score_pair(
            q["keypoints"][sel[1], :2].astype(np.float64), q["descriptors"][sel[1]],
            t["keypoints"][sel[k], :2].astype(np.float64), t["descriptors"][sel[k]],
            layout.read_homography(scene / f"H_1_{k}"), (w, h), params,
        )
        r = res.n_relevant > 0
        out[k] = (int(r.sum()), float(res.ap[r].sum()))
    return out


def test_end_to_end_float(scene: Path, tmp_path: Path):
    npz = write_sift_npz(scene)
    kp_path, desc_path, q_path, p_path = run_stages(scene, tmp_path)

    # Keypoints: border filter, then the CAP highest scores.
    per_image, kmeta = load_keypoints(kp_path)
    assert kmeta["empty_images"] == []
    sel = {}
    for k in range(1, 7):
        w, h = kmeta["image_sizes"][str(k)]
        assert (w, h) == layout.image_size(scene / f"{k}.ppm")
        n = npz[k]
        assert kmeta["raw_counts"][str(k)] == len(n["keypoints"])
        src = per_image[k].source_index.astype(np.int64)
        exp = expected_selection(n["keypoints"], n["scores"], w, h)
        np.testing.assert_array_equal(src, exp)
        assert len(src) == CAP  # each image has more than CAP keypoints inside the border
        x, y = n["keypoints"][:, 0], n["keypoints"][:, 1]
        inside = (x >= BORDER) & (x < w - BORDER) & (y >= BORDER) & (y < h - BORDER)
        dropped = np.setdiff1d(np.flatnonzero(inside), src)
        assert dropped.size > 0 and n["scores"][src].min() >= n["scores"][dropped].max()
        assert np.all(inside[src])
        np.testing.assert_array_equal(per_image[k].x, x[src])
        np.testing.assert_array_equal(per_image[k].y, y[src])
        np.testing.assert_array_equal(per_image[k].size, n["keypoints"][src, 2])
        np.testing.assert_array_equal(per_image[k].response, n["scores"][src])
        sel[k] = src

    # Descriptors: rows of the npz selected by source_index, in keypoint-file order.
    dtable, dmeta = io.read_table(desc_path)
    assert dmeta["distance"] == "l2" and dmeta["dtype"] == "float32" and dmeta["dimension"] == 128
    assert dmeta["keypoints_sha256"] == file_sha256(kp_path)
    desc = io.descriptors_array(dtable)
    dimage = dtable.column("image").to_numpy()
    for k in range(1, 7):
        np.testing.assert_array_equal(desc[dimage == k], npz[k]["descriptors"][sel[k]])

    # Scores: identical to score_pair on the selected npz arrays.
    rows = {r["pair"]: r for r in pq.read_table(p_path).to_pylist()}
    direct = direct_scores(scene, npz, sel)
    for k in hpatches.TARGET_IMAGES:
        r = rows[k]
        assert r["n_query_keypoints"] == CAP and r["n_target_keypoints"] == CAP
        assert r["n_relevant_queries"] == direct[k][0] > 0
        assert r["sum_ap"] / r["n_relevant_queries"] == pytest.approx(direct[k][1] / direct[k][0], abs=1e-6)
    mean_ap = sum(r["sum_ap"] for r in rows.values()) / sum(r["n_relevant_queries"] for r in rows.values())
    mean_direct = sum(v[1] for v in direct.values()) / sum(v[0] for v in direct.values())
    assert mean_ap == pytest.approx(mean_direct, abs=1e-6)
    assert 0.0 < mean_ap <= 1.0

    # The built-in sift descriptor also runs on the precomputed keypoints (it recomputes them).
    _, _, _, p_sift = run_stages(scene, tmp_path, dspec={"family": "sift", "params": {}}, tag="sift")
    srows = pq.read_table(p_sift).to_pylist()
    assert [r["n_target_keypoints"] for r in srows] == [CAP] * 5
    assert all(0.0 <= r["sum_ap"] <= r["n_relevant_queries"] for r in srows)


def test_end_to_end_binary(scene: Path, tmp_path: Path):
    npz = write_sift_npz(scene, binary=True)
    kpset = {**KPSET, "params": {**KPSET["params"], "descriptor_kind": "binary"}}
    kp_path, desc_path, q_path, p_path = run_stages(scene, tmp_path, kpset=kpset)
    dtable, dmeta = io.read_table(desc_path)
    assert dmeta["distance"] == "hamming" and dmeta["packed_bits"] is True
    assert dmeta["dtype"] == "uint8" and dmeta["dimension"] == 128
    per_image, _ = load_keypoints(kp_path)
    sel = {k: per_image[k].source_index.astype(np.int64) for k in range(1, 7)}
    desc = io.descriptors_array(dtable)
    dimage = dtable.column("image").to_numpy()
    for k in range(1, 7):
        np.testing.assert_array_equal(desc[dimage == k], npz[k]["descriptors"][sel[k]])
    assert io.read_meta(q_path)["distance"] == "hamming"
    ap = pq.read_table(q_path).column("ap").to_numpy(zero_copy_only=False)
    finite = ap[~np.isnan(ap)]
    assert finite.size > 0 and finite.min() >= 0.0 and finite.max() <= 1.0
    rows = {r["pair"]: r for r in pq.read_table(p_path).to_pylist()}
    direct = direct_scores(scene, npz, sel)
    for k in hpatches.TARGET_IMAGES:
        assert rows[k]["n_relevant_queries"] == direct[k][0] > 0
        assert rows[k]["sum_ap"] == pytest.approx(direct[k][1], abs=1e-9)


def test_end_to_end_root_and_no_cap(scene: Path, tmp_path: Path):
    """Features under ``<root>/<scene>/``, no cap: every border-filtered keypoint is kept."""
    root = tmp_path / "feat"
    npz = write_sift_npz(scene)
    for k in range(1, 7):
        src = scene / f"{k}.ppm.{METHOD}"
        (root / SCENE).mkdir(parents=True, exist_ok=True)
        src.rename(root / SCENE / src.name)
    kpset = {**KPSET, "max_keypoints": None, "params": {**KPSET["params"], "root": str(root)}}
    kp_path, _, _, p_path = run_stages(scene, tmp_path, kpset=kpset)
    per_image, kmeta = load_keypoints(kp_path)
    for k in range(1, 7):
        w, h = kmeta["image_sizes"][str(k)]
        x, y = npz[k]["keypoints"][:, 0], npz[k]["keypoints"][:, 1]
        inside = np.flatnonzero((x >= BORDER) & (x < w - BORDER) & (y >= BORDER) & (y < h - BORDER))
        np.testing.assert_array_equal(per_image[k].source_index, inside)
    assert all(r["n_relevant_queries"] > 0 for r in pq.read_table(p_path).to_pylist())


@pytest.mark.bad_input
def test_stage_missing_npz_names_file(scene: Path, tmp_path: Path):
    write_sift_npz(scene)
    (scene / f"5.ppm.{METHOD}").unlink()
    with pytest.raises(DataError, match="5.ppm.mynet") as info:
        run_stages(scene, tmp_path)
    assert str(scene / f"5.ppm.{METHOD}") in str(info.value)
    assert not (tmp_path / "out" / "pre" / "kp.parquet").exists()


def _detect_then_rewrite_npz(scene: Path, tmp_path: Path, rewrite) -> tuple[Path, Path]:
    npz = write_sift_npz(scene)
    kp = tmp_path / "out" / "kp.parquet"
    detect_scene(scene, "mynet_set", KPSET, kp)
    f = scene / f"2.ppm.{METHOD}"
    n = npz[2]
    save_npz(f, **rewrite(n["keypoints"], n["descriptors"], n["scores"]))
    return kp, f


@pytest.mark.bad_input
def test_stage_npz_shrunk_after_detection(scene: Path, tmp_path: Path):
    kp, f = _detect_then_rewrite_npz(
        scene, tmp_path, lambda k, d, s: dict(keypoints=k[:50], descriptors=d[:50], scores=s[:50])
    )
    with pytest.raises(DataError) as info:
        describe_scene(scene, kp, "pre", PRE_DESC, KPSET, tmp_path / "out" / "desc.parquet")
    assert str(f) in str(info.value)


def test_stage_npz_reordered_after_detection(scene: Path, tmp_path: Path):
    kp, f = _detect_then_rewrite_npz(
        scene, tmp_path, lambda k, d, s: dict(keypoints=k[::-1], descriptors=d[::-1], scores=s[::-1])
    )
    out = tmp_path / "out" / "desc.parquet"
    try:
        describe_scene(scene, kp, "pre", PRE_DESC, KPSET, out)
    except DataError as exc:
        assert str(f) in str(exc)
        return
    raise AssertionError(f"{f} changed since detection but descriptors were written to {out} without error")


@pytest.mark.bad_input
def test_stage_mixed_descriptor_dimension_names_file(scene: Path, tmp_path: Path):
    npz = write_sift_npz(scene)
    f = scene / f"3.ppm.{METHOD}"
    save_npz(f, keypoints=npz[3]["keypoints"], descriptors=npz[3]["descriptors"][:, :64], scores=npz[3]["scores"])
    with pytest.raises(DataError) as info:
        run_stages(scene, tmp_path)
    assert str(f) in str(info.value) or str(scene / "3.ppm") in str(info.value)
