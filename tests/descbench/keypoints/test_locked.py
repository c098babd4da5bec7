"""Locked keypoints: export any set, import it bit-exactly (dataset file or per-image files; Parquet,
CSV or gzip-compressed CSV), the export's recorded octave mode honoured by default, and clear
errors on malformed files. (The C++ DescriptorWorkbench's own files: tests/interop/test_dw_interop.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import derive_scene, detect_scene, export_keypoints
from descbench.errors import DataError
from descbench.keypoints.locked import FIELDS, OCTAVE_COLUMN, OCTAVE_MODES, octave_mode
from descbench.paths import ResultPaths, scene_batches

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
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
    detect_scene(pristine, "sift", SIFT, kp)
    for fmt in ("parquet", "csv", "csv.gz"):
        export_keypoints(paths, "sift", Path(paths.keypoint_export("sift", fmt)))
    return paths, kp


def _fields(per_image):
    return {k: {f: getattr(kps, f) for f in FIELDS} for k, kps in per_image.items()}


@pytest.mark.parametrize("fmt", ["parquet", "csv", "csv.gz"])
def test_export_then_import_is_bit_exact(pristine, tmp_path, exported, fmt):
    paths, kp = exported
    out = tmp_path / f"locked_{fmt}.parquet"
    detect_scene(pristine, "mine", locked(paths.keypoint_export("sift", fmt)), out)
    want, got = _fields(load_keypoints(kp)[0]), _fields(load_keypoints(out)[0])
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
    detect_scene(pristine, "mine", locked(tmp_path / "kp" / "{scene}_{image}.csv"), out)
    per_image, _ = load_keypoints(out)
    for k in range(1, 7):
        df = pd.read_csv(tmp_path / "kp" / f"{pristine.name}_{k}.csv")
        kps = per_image[k]
        assert np.array_equal(kps.x, df["x"].to_numpy(np.float32)) and np.array_equal(kps.class_id, df["class_id"].to_numpy())
        assert np.all(kps.response == 0) and np.all(kps.octave == 0)  # omitted columns: defaults
        assert np.array_equal(kps.source_index, np.arange(len(df)))


def test_border_rule_applies_to_locked_sets(pristine, tmp_path, exported):
    paths, kp = exported
    out = tmp_path / "o.parquet"
    detect_scene(pristine, "mine", {**locked(paths.keypoint_export("sift", "parquet")), "border_px": 100}, out)
    per_image, _ = load_keypoints(out)
    full, _ = load_keypoints(kp)
    for k in per_image:
        assert 0 < len(per_image[k]) < len(full[k])
        assert per_image[k].x.min() >= 100 and per_image[k].y.min() >= 100


def _write(tmp_path, df, name="bad.csv"):
    f = tmp_path / name
    df.to_csv(f, index=False) if name.endswith(".csv") else df.to_parquet(f)
    return f


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda df: df.drop(columns=["size"]), r"lacks column\(s\) size"),
        (lambda df: df.drop(columns=["scene"]), r"lacks column\(s\) scene"),
        (lambda df: df.assign(score=1.0), r"unknown column\(s\) score"),
        (lambda df: df.assign(x=np.where(np.arange(len(df)) == 3, np.nan, df["x"])), r"'x' has (NaN or inf at row 3|1 empty values)"),
        (lambda df: df.assign(image=0), r"'image' must hold image numbers 1\.\.N"),
        (lambda df: df.assign(image=np.where(np.arange(len(df)) == 2, 7, df["image"])),
         r"row 2 is a keypoint of image 7 of scene 'v_coins', which has images 1\.\.6"),
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
        detect_scene(pristine, "mine", locked(f), tmp_path / "o.parquet")
    assert str(f) in str(err.value)
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.bad_input
def test_missing_per_image_file_names_it(pristine, tmp_path):
    with pytest.raises(DataError, match=r"kp/v_coins_1\.csv does not exist"):
        detect_scene(pristine, "mine", locked(tmp_path / "kp" / "{scene}_{image}.csv"), tmp_path / "o.parquet")


@pytest.mark.bad_input
def test_export_rejects_unknown_format(pristine, tmp_path, exported):
    paths, _ = exported
    with pytest.raises(DataError, match=r"k\.txt: use a file name ending in \.parquet, \.csv, \.csv\.gz"):
        export_keypoints(paths, "sift", tmp_path / "k.txt")


@pytest.mark.bad_input
def test_import_rejects_unknown_format_naming_the_endings(pristine, tmp_path, exported):
    paths, _ = exported
    f = tmp_path / "kp.csv.bz2"
    f.write_bytes(Path(paths.keypoint_export("sift", "csv")).read_bytes())
    with pytest.raises(DataError, match=r"kp\.csv\.bz2: unknown format '\.csv\.bz2'; use \.parquet, \.csv, \.csv\.gz"):
        detect_scene(pristine, "mine", locked(f), tmp_path / "o.parquet")


def test_csv_gz_export_is_the_csv_compressed_reproducibly(pristine, tmp_path, exported):
    """The .csv.gz is the .csv's bytes, gzip without a file name or time: the same keypoints give
    the same file (the temporary file's name, which gzip.open would store, is not in it)."""
    import gzip

    paths, _ = exported
    gz = Path(paths.keypoint_export("sift", "csv.gz")).read_bytes()
    assert gzip.decompress(gz) == Path(paths.keypoint_export("sift", "csv")).read_bytes()
    assert gz[3] == 0 and gz[4:8] == b"\0\0\0\0"  # FLG: no FNAME; MTIME 0
    export_keypoints(paths, "sift", tmp_path / "again.csv.gz")
    assert (tmp_path / "again.csv.gz").read_bytes() == gz


def test_export_records_the_octave_mode_of_its_root_detector(pristine, tmp_path, exported):
    """A SIFT set (and a set derived from it: the export follows its source) records 'sift', any
    other detector's set 'from_size', in every row of every format."""
    import gzip
    import io as _io

    paths, _ = exported
    for fmt in ("parquet", "csv", "csv.gz"):
        f = Path(paths.keypoint_export("sift", fmt))
        df = (pd.read_parquet(f) if fmt == "parquet" else
              pd.read_csv(_io.BytesIO(gzip.decompress(f.read_bytes())) if fmt == "csv.gz" else f))
        assert list(df.columns)[-1] == OCTAVE_COLUMN and set(df[OCTAVE_COLUMN]) == {"sift"}, fmt
    derived = {"source": "sift", "filters": [{"min_size": 3.0}]}
    derive_scene(paths, pristine.name, "big", derived, Path(paths.keypoints("big", pristine.name)), None)
    export_keypoints(paths, "big", tmp_path / "big.csv")
    assert set(pd.read_csv(tmp_path / "big.csv")[OCTAVE_COLUMN]) == {"sift"}
    from descbench.config import validate_config

    orb = validate_config({"keypoint_sets": {"orb": {"detector": "orb", "max_keypoints": 300}},
                           "descriptors": {"d": {"family": "sift"}}}, SCHEMA)["keypoint_sets"]["orb"]
    detect_scene(pristine, "orb", orb, Path(paths.keypoints("orb", pristine.name)))
    export_keypoints(paths, "orb", tmp_path / "orb.csv")
    assert set(pd.read_csv(tmp_path / "orb.csv")[OCTAVE_COLUMN]) == {"from_size"}


@pytest.mark.bad_input
def test_export_of_a_derived_set_whose_source_file_is_gone_says_so(pristine, tmp_path, exported):
    paths, kp = exported
    derive_scene(paths, pristine.name, "big", {"source": "sift", "filters": [{"min_size": 3.0}]},
                        Path(paths.keypoints("big", pristine.name)), None)
    derive_scene(paths, pristine.name, "bigger", {"source": "big", "filters": [{"min_size": 4.0}]},
                        Path(paths.keypoints("bigger", pristine.name)), None)
    Path(paths.keypoints("big", pristine.name)).unlink()
    with pytest.raises(DataError, match=r"cannot export keypoint set 'bigger': its source set 'big' \(bigger\) has no file"):
        export_keypoints(paths, "bigger", tmp_path / "x.csv")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "csv.gz"])
@pytest.mark.parametrize("octave", [None, "auto", "sift"])
def test_sift_descriptors_on_locked_sift_keypoints_with_their_octave_equal_the_originals(pristine, tmp_path, exported,
                                                                                       fmt, octave):
    """Export then import reproduces the numbers with no setting: the export records 'sift' and the
    default octave: auto follows it (before issue 18 this needed params.octave: sift)."""
    from descbench.descriptors.sift import sift_descriptors

    paths, kp = exported
    out = tmp_path / "o.parquet"
    spec = locked(paths.keypoint_export("sift", fmt))
    if octave is not None:
        spec["params"]["octave"] = octave
    detect_scene(pristine, "mine", spec, out)
    a, b = load_keypoints(kp)[0], load_keypoints(out)[0]
    for k in (1, 2, 6):
        img = pristine / f"{k}.ppm"
        np.testing.assert_array_equal(sift_descriptors(img, b[k], {}, spec), sift_descriptors(img, a[k], {}, SIFT))
    from_size = sift_descriptors(img, b[6], {}, {**spec, "params": {**spec["params"], "octave": "from_size"}})
    assert not np.array_equal(from_size, sift_descriptors(img, a[6], {}, SIFT))  # an explicit value wins over the record


def test_octave_mode_follows_the_record_unless_set(tmp_path, exported):
    paths, _ = exported
    f = paths.keypoint_export("sift", "parquet")
    assert OCTAVE_MODES[0] == "auto"
    assert octave_mode({"path": f}) == octave_mode({"path": f, "octave": "auto"}) == "sift"
    assert octave_mode({"path": f, "octave": "from_size"}) == "from_size"
    plain = tmp_path / "plain.csv"  # another tool's file: no record
    pd.read_parquet(f).drop(columns=[OCTAVE_COLUMN]).to_csv(plain, index=False)
    assert octave_mode({"path": str(plain)}) == "from_size" and octave_mode({"path": str(plain), "octave": "sift"}) == "sift"
    assert octave_mode({"octave": "sift"}) == "sift" and octave_mode({}) == "from_size"  # no file (patch benchmarks)


@pytest.mark.bad_input
@pytest.mark.parametrize("values, message", [
    (["sift", "from_size"], r"column 'octave_mode' holds 'from_size', 'sift'; it must hold one of from_size, sift, the same in every row"),
    (["SIFT", "SIFT"], r"column 'octave_mode' holds 'SIFT'"),
    (["sift", None], r"column 'octave_mode' has \d+ empty values"),
])
def test_a_bad_octave_record_names_the_file(pristine, tmp_path, exported, values, message):
    paths, _ = exported
    df = pd.read_parquet(paths.keypoint_export("sift", "parquet"))
    df[OCTAVE_COLUMN] = [values[i % 2] for i in range(len(df))]
    f = _write(tmp_path, df, "bad.csv")
    with pytest.raises(DataError, match=message) as err:
        detect_scene(pristine, "mine", locked(f), tmp_path / "o.parquet")
    assert str(f) in str(err.value)


@pytest.mark.bad_input
def test_per_image_files_recording_different_modes_are_an_error(pristine, tmp_path):
    (tmp_path / "kp").mkdir()
    for k in range(1, 7):
        pd.DataFrame({"x": [60.0], "y": [70.0 + k], "size": [4.0], OCTAVE_COLUMN: ["sift" if k < 6 else "from_size"]}).to_csv(
            tmp_path / "kp" / f"{pristine.name}_{k}.csv", index=False)
    pattern = str(tmp_path / "kp" / "{scene}_{image}.csv")
    with pytest.raises(DataError, match=r"the files record different octave modes .*v_coins_6\.csv: octave_mode from_size"):
        octave_mode({"path": pattern})
    assert octave_mode({"path": pattern, "octave": "sift"}) == "sift"
    (tmp_path / "kp" / f"{pristine.name}_6.csv").write_text("x,y,size\n60,76,4\n")  # no record in one file: the others'
    assert octave_mode({"path": pattern}) == "sift"
