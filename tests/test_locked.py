"""Locked keypoints: export any set, import it bit-exactly (dataset file or per-image files), and
clear errors on malformed files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from descbench import stages
from descbench.errors import DataError
from descbench.keypoints.locked import FIELDS
from descbench.paths import ResultPaths, scene_batches

SIFT = {"detector": "sift", "border_px": 40, "max_keypoints": None,
        "params": {"n_features": 0, "n_octave_layers": 3, "contrast_threshold": 0.04, "edge_threshold": 10, "sigma": 1.6}}


def locked(path) -> dict:
    # border 0 and no cap: exactly the file's keypoints (they already passed the source's border rule)
    return {"detector": "locked", "border_px": 0, "max_keypoints": None, "params": {"path": str(path)}}


@pytest.fixture
def exported(pristine: Path, tmp_path: Path):
    """The demo scene's SIFT set, as a results tree, plus its exports in both formats."""
    paths = ResultPaths(tmp_path / "res", scene_batches([pristine.name], 1))
    kp = Path(paths.keypoints("sift", pristine.name))
    stages.detect_scene(pristine, "sift", SIFT, kp)
    for fmt in ("parquet", "csv"):
        stages.export_keypoints(paths, "sift", Path(paths.keypoint_export("sift", fmt)))
    return paths, kp


def _fields(per_image):
    return {k: {f: getattr(kps, f) for f in FIELDS} for k, kps in per_image.items()}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_then_import_is_bit_exact(pristine, tmp_path, exported, fmt):
    paths, kp = exported
    out = tmp_path / f"locked_{fmt}.parquet"
    stages.detect_scene(pristine, "mine", locked(paths.keypoint_export("sift", fmt)), out)
    want, got = _fields(stages.load_keypoints(kp)[0]), _fields(stages.load_keypoints(out)[0])
    assert sum(len(w["x"]) for w in want.values()) > 100
    for k in want:
        for f in FIELDS:
            assert got[k][f].dtype == want[k][f].dtype
            assert np.array_equal(got[k][f].view(np.uint32) if got[k][f].dtype == np.float32 else got[k][f],
                                  want[k][f].view(np.uint32) if want[k][f].dtype == np.float32 else want[k][f]), (k, f)
    # SIFT's own keypoints carry the fields another tool would: octave packed, class_id -1
    assert np.any(want[1]["octave"] != 0) and np.all(want[1]["class_id"] == -1)


def test_per_image_files_keep_file_order_and_class_id(pristine, tmp_path):
    rng = np.random.default_rng(3)
    for k in range(1, 7):
        n = 5 + k
        df = pd.DataFrame({"x": rng.uniform(0, 300, n), "y": rng.uniform(0, 250, n), "size": rng.uniform(2, 30, n),
                           "angle": rng.uniform(0, 360, n), "class_id": np.arange(n) * 7})
        (tmp_path / "kp").mkdir(exist_ok=True)
        df.to_csv(tmp_path / "kp" / f"{pristine.name}_{k}.csv", index=False)
    out = tmp_path / "o.parquet"
    stages.detect_scene(pristine, "mine", locked(tmp_path / "kp" / "{scene}_{image}.csv"), out)
    per_image, _ = stages.load_keypoints(out)
    for k in range(1, 7):
        df = pd.read_csv(tmp_path / "kp" / f"{pristine.name}_{k}.csv")
        kps = per_image[k]
        assert np.array_equal(kps.x, df["x"].to_numpy(np.float32)) and np.array_equal(kps.class_id, df["class_id"].to_numpy())
        assert np.all(kps.response == 0) and np.all(kps.octave == 0)  # omitted columns: defaults
        assert np.array_equal(kps.source_index, np.arange(len(df)))


def test_border_rule_applies_to_locked_sets(pristine, tmp_path, exported):
    paths, kp = exported
    out = tmp_path / "o.parquet"
    stages.detect_scene(pristine, "mine", {**locked(paths.keypoint_export("sift", "parquet")), "border_px": 100}, out)
    per_image, _ = stages.load_keypoints(out)
    full, _ = stages.load_keypoints(kp)
    for k in per_image:
        assert 0 < len(per_image[k]) < len(full[k])
        assert per_image[k].x.min() >= 100 and per_image[k].y.min() >= 100


def _write(tmp_path, df, name="bad.csv"):
    f = tmp_path / name
    df.to_csv(f, index=False) if name.endswith(".csv") else df.to_parquet(f)
    return f


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda df: df.drop(columns=["size"]), r"lacks column\(s\) size"),
        (lambda df: df.drop(columns=["scene"]), r"lacks column\(s\) scene"),
        (lambda df: df.assign(score=1.0), r"unknown column\(s\) score"),
        (lambda df: df.assign(x=np.where(np.arange(len(df)) == 3, np.nan, df["x"])), r"'x' has (NaN or inf at row 3|1 empty values)"),
        (lambda df: df.assign(image=7), r"'image' must hold integers 1\.\.6"),
        (lambda df: df.assign(size=0.0), r"'size' must be > 0"),
        (lambda df: df.assign(octave=0.5), r"'octave' must hold integers"),
        (lambda df: df.assign(scene="other"), r"no keypoints for scene 'v_coins'"),
    ],
)
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_malformed_locked_file_names_the_file(pristine, tmp_path, exported, mutate, message, ext):
    paths, _ = exported
    df = mutate(pd.read_parquet(paths.keypoint_export("sift", "parquet")))
    f = _write(tmp_path, df, f"bad.{ext}")
    with pytest.raises(DataError, match=message) as err:
        stages.detect_scene(pristine, "mine", locked(f), tmp_path / "o.parquet")
    assert str(f) in str(err.value)
    assert not (tmp_path / "o.parquet").exists()


def test_missing_per_image_file_names_it(pristine, tmp_path):
    with pytest.raises(DataError, match=r"kp/v_coins_1\.csv does not exist"):
        stages.detect_scene(pristine, "mine", locked(tmp_path / "kp" / "{scene}_{image}.csv"), tmp_path / "o.parquet")


def test_export_rejects_unknown_format(pristine, tmp_path, exported):
    paths, _ = exported
    with pytest.raises(DataError, match=r"\.parquet or \.csv"):
        stages.export_keypoints(paths, "sift", tmp_path / "k.txt")


def test_sift_descriptors_on_locked_sift_keypoints_with_their_octave_equal_the_originals(pristine, tmp_path, exported):
    from descbench.descriptors.sift import sift_descriptors

    paths, kp = exported
    out = tmp_path / "o.parquet"
    spec = locked(paths.keypoint_export("sift", "parquet"))
    spec["params"]["octave"] = "sift"
    stages.detect_scene(pristine, "mine", spec, out)
    a, b = stages.load_keypoints(kp)[0][2], stages.load_keypoints(out)[0][2]
    img = pristine / "2.ppm"
    np.testing.assert_array_equal(sift_descriptors(img, b, {}, spec), sift_descriptors(img, a, {}, SIFT))
    from_size = sift_descriptors(img, b, {}, {**spec, "params": {"path": "x", "octave": "from_size"}})
    assert not np.array_equal(from_size, sift_descriptors(img, a, {}, SIFT))
