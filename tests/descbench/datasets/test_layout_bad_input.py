"""Bad inputs: every one gives a DataError naming the file (and the fix), or is recorded explicitly.

A real demo scene (``v_coins``) is generated once per module, copied into each test's
``tmp_path`` and then broken in one specific way.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

from descbench import io
from descbench.jobs.descriptors import describe_scene
from descbench.jobs.keypoints import detect_scene
from descbench.jobs.score import score_scene
from descbench.datasets import layout
from descbench.errors import DataError
from conftest import raises_naming

pytestmark = pytest.mark.bad_input  # every test here checks a bad input (or the valid input beside it)

SCENE = "v_coins"  # the scene of the shared `pristine` / `scene` fixtures (conftest.DEMO_SCENE)
KP_SPEC = {"detector": "sift", "border_px": 40, "max_keypoints": None, "params": {}}
DESC_SPEC = {"family": "sift", "params": {}}
SCORING = {"tau_px": 3.0, "gt": "closest", "tie_policy": "expected", "chunk_mb": 64}
PRE_SPEC = {
    "detector": "precomputed", "border_px": 40, "max_keypoints": None,
    "params": {"method": "mynet", "root": None, "default_size_px": 12.0},
}
PRE_DESC = {"family": "precomputed", "params": {}}


def _detect(scene: Path, tmp_path: Path, spec: dict = KP_SPEC, name: str = "kp") -> Path:
    out = tmp_path / "out" / f"{name}.parquet"
    detect_scene(scene, name, spec, out)
    return out


def _describe(scene: Path, kp: Path, tmp_path: Path, spec: dict = DESC_SPEC, kpspec: dict = KP_SPEC, name: str = "desc") -> Path:
    out = tmp_path / "out" / f"{name}.parquet"
    describe_scene(scene, kp, name, spec, kpspec, out)
    return out


def _score(scene: Path, kp: Path, desc: Path, tmp_path: Path):
    outs = [tmp_path / "out" / f for f in ("queries.parquet", "pairs.parquet", "timing.json")]
    score_scene(scene, kp, desc, SCORING, *outs)
    return outs


def _write_sift_npz(scene: Path, method: str = "mynet", empty_image: int | None = None) -> None:
    """D2-Net npz files (SIFT keypoints x, y, size + descriptors + scores) next to the images."""
    sift = cv2.SIFT_create()
    for k in range(1, 7):
        img = scene / f"{k}.ppm"
        gray = layout.read_image(img)
        kps, desc = sift.detectAndCompute(gray, None)
        xy = np.array([[p.pt[0], p.pt[1], p.size] for p in kps], dtype=np.float32)
        scores = np.array([p.response for p in kps], dtype=np.float32)
        if k == empty_image:  # every keypoint inside the 40 px border band: none survives
            xy[:, 0] = np.linspace(0, 30, len(xy))
        with open(scene / f"{img.name}.{method}", "wb") as fh:
            np.savez(fh, keypoints=xy, descriptors=desc.astype(np.float32), scores=scores)


# ----------------------------------------------------------------------------- missing files


@pytest.mark.parametrize("missing", ["4.ppm", "H_1_3"])
def test_missing_file(scene: Path, tmp_path: Path, missing: str):
    (scene / missing).unlink()
    raises_naming(lambda: layout.scene_files(scene), missing, str(scene))
    msg = raises_naming(lambda: _detect(scene, tmp_path), missing, str(scene))
    assert "restore" in msg
    assert not (tmp_path / "out" / "kp.parquet").exists()


def test_missing_scene_folder(tmp_path: Path):
    raises_naming(lambda: layout.scene_files(tmp_path / "nope"), str(tmp_path / "nope"))


# ----------------------------------------------------------------------------- images


def _break_image(p: Path, how: str) -> None:
    data = p.read_bytes()
    if how == "random":
        p.write_bytes(np.random.default_rng(0).integers(0, 256, len(data), dtype=np.uint8).tobytes())
    elif how == "truncated":
        p.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        p.write_bytes(b"")
    elif how == "header_only":
        p.write_bytes(data[:20])
    elif how == "directory":
        p.unlink()
        p.mkdir()
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["random", "truncated", "empty", "header_only", "directory"])
def test_bad_image(scene: Path, tmp_path: Path, how: str):
    img = scene / "2.ppm"
    _break_image(img, how)
    msg = raises_naming(lambda: layout.read_image(img), str(img))
    assert "restore" in msg
    raises_naming(lambda: layout.image_size(img), str(img))
    raises_naming(lambda: _detect(scene, tmp_path), str(img))
    assert not (tmp_path / "out" / "kp.parquet").exists()


def test_bad_image_at_describe_time(scene: Path, tmp_path: Path):
    """An image corrupted after detection is caught by the descriptor stage too."""
    kp = _detect(scene, tmp_path)
    img = scene / "5.ppm"
    _break_image(img, "truncated")
    raises_naming(lambda: _describe(scene, kp, tmp_path), str(img))


# ----------------------------------------------------------------------------- homographies


BAD_HOMOGRAPHIES = {
    "8_numbers": "1 0 0\n0 1 0\n0 0\n",
    "10_numbers": "1 0 0\n0 1 0\n0 0 1\n5\n",
    "word": "1 0 0\n0 abc 0\n0 0 1\n",
    "nan": "1 0 0\n0 nan 0\n0 0 1\n",
    "inf": "1 0 0\n0 1 inf\n0 0 1\n",
    "all_zero": "0 0 0\n0 0 0\n0 0 0\n",
    "rank_2": "1 2 0\n2 4 0\n0 0 1\n",
    "empty": "",
    "comma_separated": "1,0,0\n0,1,0\n0,0,1\n",
}


@pytest.mark.parametrize("case", sorted(BAD_HOMOGRAPHIES))
def test_bad_homography(scene: Path, tmp_path: Path, case: str):
    h = scene / "H_1_3"
    h.write_text(BAD_HOMOGRAPHIES[case])
    raises_naming(lambda: layout.read_homography(h), str(h))
    raises_naming(lambda: _detect(scene, tmp_path), str(h))
    assert not (tmp_path / "out" / "kp.parquet").exists()


def test_binary_homography(scene: Path, tmp_path: Path):
    """Random bytes (not UTF-8) in a homography file: DataError, not UnicodeDecodeError."""
    h = scene / "H_1_4"
    h.write_bytes(bytes(range(128, 256)) * 4)
    raises_naming(lambda: layout.read_homography(h), str(h))
    raises_naming(lambda: _detect(scene, tmp_path), str(h))


def test_bad_homography_at_score_time(scene: Path, tmp_path: Path):
    kp = _detect(scene, tmp_path)
    desc = _describe(scene, kp, tmp_path)
    h = scene / "H_1_6"
    h.write_text("1 0 0 0 1 0 0 0\n")
    raises_naming(lambda: _score(scene, kp, desc, tmp_path), str(h))
    assert not (tmp_path / "out" / "pairs.parquet").exists()


def test_valid_homography_formats(tmp_path: Path):
    """Scientific notation, several spaces, tabs, a trailing newline or none: all accepted."""
    h = tmp_path / "H"
    h.write_text("2.0e+00\t0 0\n0   2 0\n0 0 2")
    np.testing.assert_array_equal(layout.read_homography(h), np.eye(3))


# ----------------------------------------------------------------------------- zero keypoints


def test_all_images_without_keypoints(scene: Path, tmp_path: Path, capsys):
    spec = {**KP_SPEC, "border_px": 10000}
    kp = _detect(scene, tmp_path, spec)
    meta = io.read_meta(kp)
    assert meta["empty_images"] == [1, 2, 3, 4, 5, 6]
    assert all(n > 0 for n in meta["raw_counts"].values())
    err = capsys.readouterr().err
    for k in range(1, 7):
        assert str(scene / f"{k}.ppm") in err
    assert "warning" in err
    assert pq.read_table(kp).num_rows == 0

    desc = _describe(scene, kp, tmp_path, kpspec=spec)
    assert pq.read_table(desc).num_rows == 0
    queries, pairs, timing = _score(scene, kp, desc, tmp_path)
    assert timing.exists()
    p = pq.read_table(pairs).to_pylist()
    assert [r["pair"] for r in p] == [2, 3, 4, 5, 6]  # every pair recorded, none skipped
    for r in p:
        assert r["n_query_keypoints"] == 0 and r["n_target_keypoints"] == 0
        assert r["n_relevant_queries"] == 0 and r["sum_ap"] == 0.0
    assert io.read_meta(pairs)["empty_images"] == [1, 2, 3, 4, 5, 6]
    assert pq.read_table(queries).num_rows == 0


def test_one_image_without_keypoints(scene: Path, tmp_path: Path, capsys):
    """Image 3 has no keypoint left: recorded, warned, and pair (1, 3) counted with 0 relevant."""
    _write_sift_npz(scene, empty_image=3)
    kp = _detect(scene, tmp_path, PRE_SPEC)
    meta = io.read_meta(kp)
    assert meta["empty_images"] == [3]
    assert meta["raw_counts"]["3"] > 0
    err = capsys.readouterr().err
    assert str(scene / "3.ppm") in err
    for k in (1, 2, 4, 5, 6):
        assert str(scene / f"{k}.ppm") not in err

    for dspec, name in ((DESC_SPEC, "sift"), (PRE_DESC, "pre")):
        desc = _describe(scene, kp, tmp_path, spec=dspec, kpspec=PRE_SPEC, name=name)
        queries, pairs, _ = _score(scene, kp, desc, tmp_path)
        rows = {r["pair"]: r for r in pq.read_table(pairs).to_pylist()}
        assert sorted(rows) == [2, 3, 4, 5, 6]
        nq = rows[3]["n_query_keypoints"]
        assert nq > 0
        assert rows[3]["n_target_keypoints"] == 0
        assert rows[3]["n_queries"] == nq
        assert rows[3]["n_relevant_queries"] == 0 and rows[3]["n_relevant_items"] == 0
        assert rows[3]["sum_ap"] == 0.0
        for k in (2, 4, 5, 6):
            assert rows[k]["n_target_keypoints"] > 0 and rows[k]["n_relevant_queries"] > 0
        q = pq.read_table(queries).to_pandas()
        q3 = q[q["pair"] == 3]
        assert len(q3) == nq  # every query of the empty pair is a recorded row
        assert (q3["n_relevant"] == 0).all() and (q3["gt_index"] == -1).all()
        assert np.isinf(q3["gt_px"]).all() and q3["ap"].isna().all()
        assert io.read_meta(pairs)["empty_images"] == [3]


# ----------------------------------------------------------------------------- NaN descriptors


def test_nan_in_computed_descriptor(scene: Path, tmp_path: Path, monkeypatch):
    import descbench.descriptors as registry

    sift_family = registry.get_family("sift")
    orig = sift_family.compute

    def nan_compute(image_path, kps, params, kpset):
        d = orig(image_path, kps, params, kpset)
        if Path(image_path).name == "2.ppm":
            d[7, 3] = np.nan
            d[11, 0] = np.inf
        return d

    monkeypatch.setitem(registry._registry(), "sift", dataclasses.replace(sift_family, compute=nan_compute))
    kp = _detect(scene, tmp_path)
    out = tmp_path / "out" / "desc.parquet"
    msg = raises_naming(lambda: _describe(scene, kp, tmp_path), str(scene / "2.ppm"), "row 7", "image 2")
    assert "2 keypoints" in msg
    assert not out.exists()


def test_nan_in_precomputed_descriptor(scene: Path, tmp_path: Path):
    """NaN written into an npz after detection: describe_scene names the npz file and the row."""
    _write_sift_npz(scene)
    kp = _detect(scene, tmp_path, PRE_SPEC)
    f = scene / "4.ppm.mynet"
    with np.load(f) as z:
        arrays = dict(z)
    arrays["descriptors"][5, 2] = np.nan
    with open(f, "wb") as fh:
        np.savez(fh, **arrays)
    raises_naming(lambda: _describe(scene, kp, tmp_path, spec=PRE_DESC, kpspec=PRE_SPEC), str(f), "row 5", "NaN")


# ----------------------------------------------------------------------------- stale inputs


def test_descriptors_from_other_keypoint_file(scene: Path, tmp_path: Path):
    kp_a = _detect(scene, tmp_path, KP_SPEC, name="kp_a")
    kp_b = _detect(scene, tmp_path, {**KP_SPEC, "border_px": 41}, name="kp_b")
    desc_a = _describe(scene, kp_a, tmp_path, name="desc_a")
    msg = raises_naming(lambda: _score(scene, kp_b, desc_a, tmp_path), str(desc_a), str(kp_b))
    assert "rerun" in msg
    assert not (tmp_path / "out" / "pairs.parquet").exists()
    # Rebuilding the keypoint file in place (different content) is caught the same way.
    detect_scene(scene, "kp_a", {**KP_SPEC, "border_px": 60}, kp_a)
    raises_naming(lambda: _score(scene, kp_a, desc_a, tmp_path), str(desc_a), str(kp_a))


def test_corrupt_parquet_input(scene: Path, tmp_path: Path):
    kp = _detect(scene, tmp_path)
    kp.write_bytes(kp.read_bytes()[:100])
    raises_naming(lambda: _describe(scene, kp, tmp_path), str(kp))


# ----------------------------------------------------------------------------- atomic writes


def test_interrupted_write_leaves_no_file(tmp_path: Path, monkeypatch):
    import pyarrow as pa

    table = pa.table({"a": [1, 2, 3]})
    final = tmp_path / "sub" / "t.parquet"
    seen = []

    def broken_write_table(tbl, where, *args, **kwargs):
        Path(where).write_bytes(b"PAR1 partial")  # the temp file exists, half written
        seen.append(Path(where))
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(pq, "write_table", broken_write_table)
    with pytest.raises(OSError, match="simulated"):
        io.write_table(table, final, {"stage": "test"})
    assert len(seen) == 1 and seen[0] != final and seen[0].parent == final.parent
    assert not final.exists()
    assert sorted(os.listdir(final.parent)) == []

    # A previous good file under the final name survives an interrupted rewrite untouched.
    monkeypatch.undo()
    io.write_table(table, final, {"stage": "test"})
    before = final.read_bytes()
    monkeypatch.setattr(pq, "write_table", broken_write_table)
    with pytest.raises(OSError):
        io.write_table(pa.table({"a": [9]}), final, {"stage": "test"})
    assert final.read_bytes() == before
    assert sorted(os.listdir(final.parent)) == ["t.parquet"]


def test_interrupted_write_keyboard_interrupt(tmp_path: Path, monkeypatch):
    import pyarrow as pa

    def broken_write_table(tbl, where, *args, **kwargs):
        Path(where).write_bytes(b"x")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", broken_write_table)
    final = tmp_path / "t.parquet"
    with pytest.raises(KeyboardInterrupt):
        io.write_table(pa.table({"a": [1]}), final, {"stage": "test"})
    assert os.listdir(tmp_path) == []
