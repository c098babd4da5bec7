"""Files of the C++ DescriptorWorkbench, read as it writes them (tests/data/dw/, built by
tests/data/dw/make_fixtures.py from its writers): its keypoint export folder, its keypoint
database dumped to CSV (plain and gzip-compressed, image given as '1.ppm'), and its results CSV
in ``descbench compare`` beside descbench's rows."""

from __future__ import annotations

import csv
import gzip
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from descbench import io
from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import detect_scene
from descbench.errors import DataError
from descbench.keypoints.locked import DW_IMAGE_FILES, FIELDS, load_locked, locked_file, octave_mode
from descbench.report.experiments import (DW, DW_COLUMNS, DW_NOT_COMPUTED, DW_PREFIX, compare_experiments,
                                          read_workbench_results, to_markdown)

DATA = Path(__file__).resolve().parents[1] / "data" / "dw"
FOLDER = DATA / "export_csv"
HEADER = ["x", "y", "size", "angle", "response", "octave", "class_id"]
FLOATS = ("x", "y", "size", "angle", "response")


def locked(path, **params) -> dict:
    return {"detector": "locked", "border_px": 0, "max_keypoints": None, "params": {"path": str(path), **params}}


def strtof(text: str) -> np.float32:
    """C's strtof: the float32 nearest to the decimal (ties to even), with no rounding via float64."""
    v = Fraction(text)
    f = np.float32(float(v))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - v), int(np.float32(c).view(np.uint32)) & 1))


def bits(a) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def detect(scene: Path, spec: dict, out: Path):
    detect_scene(scene, "dw", spec, out)
    return load_keypoints(out)


# ----------------------------------------------------------------------------- the fixtures are the workbench's format


def test_export_folder_fixture_has_the_workbench_writers_bytes():
    """keypoint_manager export-csv (import_export.cpp): a header line, '\\n' line ends, float fields
    as std::ostream prints a float by default (%g, 6 significant digits), ints as ints; no file
    for an image without keypoints."""
    files = sorted(p.name for p in (FOLDER / "v_coins").iterdir())
    assert files == ["1ppm.csv", "2ppm.csv", "3ppm.csv", "4ppm.csv", "6ppm.csv"]
    for f in files:
        raw = (FOLDER / "v_coins" / f).read_bytes()
        assert b"\r" not in raw and raw.endswith(b"\n")
        lines = raw.decode().splitlines()
        assert lines[0] == ",".join(HEADER) and len(lines) == 31
        for line in lines[1:]:
            fields = line.split(",")
            assert [f"{float(strtof(t)):g}" for t in fields[:5]] == fields[:5]
            assert str(int(fields[5])) == fields[5] and fields[6] == "-1"
    assert "1ppm.csv" in DW_IMAGE_FILES[0].format(k=1)


# ----------------------------------------------------------------------------- keypoint files


def test_workbench_export_folder_is_read_as_it_is(pristine, tmp_path):
    per_image, meta = detect(pristine, locked(FOLDER), tmp_path / "o.parquet")
    assert meta["empty_images"] == [5] and len(per_image[5]) == 0  # no file: no keypoints
    for k in (1, 2, 3, 4, 6):
        rows = list(csv.reader((FOLDER / "v_coins" / f"{k}ppm.csv").open()))
        kps = per_image[k]
        assert len(kps) == len(rows) - 1 == 30
        for j, f in enumerate(FLOATS):  # parsed to float32 as the workbench's std::stof does, in file order
            np.testing.assert_array_equal(bits(getattr(kps, f)), bits([strtof(r[j]) for r in rows[1:]]), err_msg=f)
        np.testing.assert_array_equal(kps.octave, [int(r[5]) for r in rows[1:]])
        np.testing.assert_array_equal(kps.class_id, [int(r[6]) for r in rows[1:]])
        np.testing.assert_array_equal(kps.source_index, np.arange(30))


def test_workbench_database_dump_plain_gzip_and_parquet_agree(pristine, tmp_path):
    """`sqlite3 -header -csv ... locked_keypoints` (its column names scene_name/image_name, image
    '1.ppm', its bookkeeping columns) and the gzip-compressed scene,image,... form read the same
    keypoints: the float32 values it stored, exactly; the export folder's are those to 6 digits."""
    dump, _ = detect(pristine, locked(DATA / "locked_keypoints.csv"), tmp_path / "a.parquet")
    gz, _ = detect(pristine, locked(DATA / "keypoints_scene_image.csv.gz"), tmp_path / "b.parquet")
    df = pd.read_csv(DATA / "locked_keypoints.csv")
    assert df.image_name.iloc[0] == "1.ppm" and "keypoint_set_id" in df
    df.to_parquet(tmp_path / "kp.parquet")  # image names as strings in Parquet too
    pq_, _ = detect(pristine, locked(tmp_path / "kp.parquet"), tmp_path / "c.parquet")
    folder, _ = detect(pristine, locked(FOLDER), tmp_path / "d.parquet")
    crlf = tmp_path / "crlf.csv"  # the sqlite3 shell's csv mode ends lines with CRLF on some versions / platforms
    crlf.write_bytes((DATA / "locked_keypoints.csv").read_bytes().replace(b"\n", b"\r\n"))
    crlf_, _ = detect(pristine, locked(crlf), tmp_path / "e.parquet")
    for k in range(1, 7):
        for f in FIELDS:
            a = getattr(dump[k], f)
            for other in (gz, pq_, crlf_):
                np.testing.assert_array_equal(getattr(other[k], f), a, err_msg=f"{k} {f}")
            if f in FLOATS:
                np.testing.assert_allclose(getattr(folder[k], f), a, rtol=5e-6, err_msg=f)
            else:
                np.testing.assert_array_equal(getattr(folder[k], f), a)
    sel = (df.image_name == "2.ppm").to_numpy()
    np.testing.assert_array_equal(bits(dump[2].x), bits(df.x[sel].to_numpy(np.float64).astype(np.float32)))
    with gzip.open(DATA / "keypoints_scene_image.csv.gz", "rt") as fh:
        assert fh.readline().strip() == "scene,image,x,y,size,angle,response,octave"


def test_csv_floats_are_rounded_once_to_float32_like_strtof(tmp_path):
    """A decimal just above the midpoint of two float32 values: strtof (the workbench's std::stof)
    gives the upper one; parsing to float64 first lands on the midpoint, which rounds to the
    even, lower one."""
    lo = np.float32(301.25)
    hi = np.nextafter(lo, np.float32(np.inf))
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    text = f"{float(mid):.16f}".rstrip("0") + "0000000001"
    assert Fraction(text) > mid and np.float32(float(text)) == lo and strtof(text) == hi
    f = tmp_path / "kp.csv"
    f.write_text(f"scene,image,x,y,size\ns,1,{text},20,{text}\n")
    kps = load_locked(str(f), "s", 1, 400, 100)
    assert bits(kps.x) == bits(hi) and bits(kps.size) == bits(hi)


@pytest.mark.parametrize("images", [["1.ppm", "2.png", "3.JPG", "4", " 5.pgm", "6.tiff"], [1, 2, 3, 4, 5, 6]])
@pytest.mark.parametrize("ext", ["csv", "csv.gz", "parquet"])
def test_image_is_a_number_or_a_file_name(tmp_path, images, ext):
    df = pd.DataFrame({"scene": ["s"] * 6, "image": images, "x": np.arange(6) + 10.0, "y": 20.0, "size": 3.0})
    f = tmp_path / f"kp.{ext}"
    df.to_parquet(f) if ext == "parquet" else df.to_csv(f, index=False)
    for k in range(1, 7):
        assert load_locked(str(f), "s", k, 100, 100).x.tolist() == [9.0 + k]


@pytest.mark.bad_input
@pytest.mark.parametrize("bad", ["img1.ppm", "1.5", "0.png", "1ppm", "07.ppm"])
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_a_bad_image_name_names_the_file_row_and_value(tmp_path, bad, ext):
    df = pd.DataFrame({"scene": ["s"] * 3, "image": ["1.ppm", bad, "3.ppm"], "x": 10.0, "y": 20.0, "size": 3.0})
    f = tmp_path / f"kp.{ext}"
    df.to_parquet(f) if ext == "parquet" else df.to_csv(f, index=False)
    with pytest.raises(DataError, match=rf"{f}: column 'image' must hold image numbers 1\.\.N or image names such as "
                                        rf"1\.ppm \(row 1: '{bad}'\)"):
        load_locked(str(f), "s", 1, 100, 100)


@pytest.mark.bad_input
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_an_image_beyond_the_scene_names_the_file_and_row(tmp_path, ext):
    df = pd.DataFrame({"scene": ["s"] * 3, "image": ["1.ppm", "7.ppm", "3.ppm"], "x": 10.0, "y": 20.0, "size": 3.0})
    f = tmp_path / f"kp.{ext}"
    df.to_parquet(f) if ext == "parquet" else df.to_csv(f, index=False)
    with pytest.raises(DataError, match=rf"{f}: row 1 is a keypoint of image 7 of scene 's', which has images 1\.\.6"):
        load_locked(str(f), "s", 1, 100, 100, n_images=6)
    assert load_locked(str(f), "s", 7, 100, 100, n_images=8).x.tolist() == [10.0]  # a scene of 8 images


@pytest.mark.bad_input
def test_workbench_bookkeeping_columns_one_keypoint_set_per_file(tmp_path):
    df = pd.read_csv(DATA / "locked_keypoints.csv")
    df.loc[df.index[-5:], "keypoint_set_id"] = 7
    f = tmp_path / "two_sets.csv"
    df.to_csv(f, index=False)
    with pytest.raises(DataError, match=rf"{f} holds the keypoints of 2 workbench keypoint sets \(keypoint_set_id 1, 7\)"):
        load_locked(str(f), "v_coins", 1, 600, 600)
    both = pd.read_csv(DATA / "locked_keypoints.csv").assign(scene="v_coins")
    both.to_csv(tmp_path / "both.csv", index=False)
    with pytest.raises(DataError, match=r"has both columns scene_name and scene"):
        load_locked(str(tmp_path / "both.csv"), "v_coins", 1, 600, 600)
    other = pd.read_csv(DATA / "locked_keypoints.csv").assign(comment="x")
    other.to_csv(tmp_path / "other.csv", index=False)
    with pytest.raises(DataError, match=r"unknown column\(s\) comment"):  # only the workbench's own columns are ignored
        load_locked(str(tmp_path / "other.csv"), "v_coins", 1, 600, 600)


@pytest.mark.bad_input
def test_workbench_folder_errors_and_snakemake_inputs(pristine, tmp_path):
    folder = tmp_path / "dw"
    shutil.copytree(FOLDER, folder)
    assert locked_file(str(folder), "v_coins", 1) == folder / "v_coins" / "1ppm.csv"
    assert locked_file(str(folder), "v_coins", 5) == folder / "v_coins"  # no file: the scene folder is the input
    assert locked_file(str(folder), "i_none", 1) == folder
    with pytest.raises(DataError, match=rf"locked keypoint folder {folder} has no folder for scene 'i_none'"):
        load_locked(str(folder), "i_none", 1, 600, 600)
    shutil.copy(folder / "v_coins" / "2ppm.csv", folder / "v_coins" / "2.csv")  # what its import-csv reads
    with pytest.raises(DataError, match=r"scene v_coins, image 2: two files for one image, .*2ppm\.csv and .*2\.csv"):
        load_locked(str(folder), "v_coins", 2, 600, 600)
    (folder / "v_coins" / "2ppm.csv").unlink()
    per_image, _ = detect(pristine, locked(folder), tmp_path / "o.parquet")
    assert len(per_image[2]) == 30


def test_workbench_sift_sets_use_their_octave_with_octave_sift(pristine, tmp_path):
    """Its files record no octave mode: auto reads them as from_size; octave: sift gives OpenCV's
    SIFT on exactly those keypoints with their packed octave."""
    import cv2

    from descbench.descriptors.sift import sift_descriptors
    from descbench.keypoints.sift import keypoints_to_cv

    assert octave_mode({"path": str(FOLDER)}) == "from_size"
    assert octave_mode({"path": str(DATA / "locked_keypoints.csv")}) == "from_size"
    spec = locked(FOLDER, octave="sift")
    per_image, _ = detect(pristine, spec, tmp_path / "o.parquet")
    gray = cv2.imread(str(pristine / "3.ppm"), cv2.IMREAD_GRAYSCALE)
    _, want = cv2.SIFT_create().compute(gray, keypoints_to_cv(per_image[3]))
    np.testing.assert_array_equal(sift_descriptors(pristine / "3.ppm", per_image[3], {}, spec), want)
    auto = sift_descriptors(pristine / "3.ppm", per_image[3], {}, locked(FOLDER))
    assert not np.array_equal(auto, want)


@pytest.mark.bad_input
def test_unknown_ending_was_the_old_gz_error(tmp_path):
    f = tmp_path / "kp.csv.gz"
    shutil.copy(DATA / "keypoints_scene_image.csv.gz", f)
    assert len(load_locked(str(f), "v_coins", 1, 600, 600)) == 30  # was: unknown format '.gz'
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(f.read_bytes()[:300])
    with pytest.raises(DataError, match=rf"{cut} cannot be read \(Truncated compressed stream\)"):
        load_locked(str(cut), "v_coins", 1, 600, 600)
    g = tmp_path / "kp.gz"
    shutil.copy(f, g)
    with pytest.raises(DataError, match=r"kp\.gz: unknown format '\.gz'; use \.parquet, \.csv, \.csv\.gz"):
        load_locked(str(g), "v_coins", 1, 600, 600)


# ----------------------------------------------------------------------------- results in descbench compare


def fake_experiment(root: Path, name: str, gt: str = "closest_oriented", rows: list[dict] | None = None) -> Path:
    cfg = {"scoring": {"gt": gt, "tie_policy": "expected", "tau_px": 3.0},
           "verification": {"enabled": True, "candidates": "nearest", "ap_convention": "step", "convention": "descbench"},
           "descriptors": {"sift": {"family": "sift"},
                           "sift-half": {"family": "sift", "overrides": {"scoring": {"tie_policy": "half"}}}}}
    rows = rows or [{"descriptor": "sift", "keypoint_set": "sift", "true_map_micro": 0.61, "true_map_macro_by_scene": 0.62,
                     "viewpoint_map": 0.55, "illumination_map": 0.7, "keypoint_verification_ap": 0.9,
                     "total_queries_processed": 1000}]
    meta = io.provenance("report", {"experiment": name, "dataset": "hpatches", "config": cfg})
    io.write_table(pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False),
                   root / name / "report" / "comparison.parquet", meta)
    return root / name


def test_workbench_export_script_csv_rows_beside_descbench(tmp_path):
    folder = fake_experiment(tmp_path, "mine")
    t = compare_experiments([folder, DATA / "results.csv"])
    src = pd.read_csv(DATA / "results.csv")
    assert t.source.tolist() == ["descbench", DW, DW, DW]
    dw = t[t.source == DW].reset_index(drop=True)
    assert dw.experiment.tolist() == src.experiment_name.tolist() == ["dsp_sweep", "rgbsift_baseline", "sift_baseline"]
    assert dw.descriptor.tolist() == src.descriptor_type.tolist() and dw.dataset.tolist() == ["../data/"] * 3
    for theirs, ours in (("true_map_macro", "true_map_macro_by_scene"), ("true_map_micro", "true_map_micro"),
                         ("true_map_micro_with_zeros", "true_map_micro_including_zeros"),
                         ("true_map_macro_with_zeros", "true_map_macro_by_scene_including_zeros"),
                         ("precision_at_1", "precision_at_1"), ("recall_at_5", "recall_at_5")):
        assert dw[ours].tolist() == src[theirs].tolist(), theirs
        assert theirs == ours or theirs not in t.columns  # never a workbench name with another meaning
    assert dw["dw:mean_average_precision"].tolist() == src.mean_average_precision.tolist()
    assert dw["dw:image_retrieval_map"].isna().all()  # its -1: not computed
    assert dw["dw:experiment_id"].tolist() == [3, 2, 1] and dw["dw:processing_time_s"].tolist() == src.processing_time_s.tolist()
    assert t.true_map_micro[0] == 0.61 and np.isnan(t.true_map_micro_including_zeros[0])
    assert dw.keypoint_set.isna().all() and dw.keypoint_verification_ap.isna().all()
    assert "scoring.gt closest_oriented, tie_policy expected" in t.convention[0]
    assert all("scoring.gt closest" in c and "tie_policy half" in c and str(DATA / "results.csv") in c for c in dw.convention)
    assert t.columns[-1] == "convention" and list(t.columns[:5]) == ["experiment", "dataset", "source", "descriptor", "keypoint_set"]


def test_workbench_results_table_dump_with_verification(tmp_path):
    t = read_workbench_results(DATA / "results_table.csv")
    src = pd.read_csv(DATA / "results_table.csv")
    assert t.experiment.tolist() == ["sift_baseline", "rgbsift_baseline", "dsp_sweep"]  # from its metadata string
    assert t.workbench_verification_map.tolist()[:2] == src.keypoint_verification_ap.tolist()[:2]
    assert t.workbench_retrieval_illumination_map.tolist()[:2] == src.retrieval_illumination_ap.tolist()[:2]
    assert t.retrieval_num_true_positives.tolist()[:2] == [58329, 58330]
    # its third run had verification/retrieval off: -1 APs and 0 counts are "not computed"
    for c in ("workbench_verification_map", "workbench_retrieval_map", "retrieval_num_true_positives",
              "retrieval_num_hard_negatives", "retrieval_num_distractors"):
        assert np.isnan(t[c].iloc[2]), c
    assert "keypoint_verification_ap" not in t.columns  # descbench's own verification AP is another quantity
    for theirs, (ours, _) in DW_COLUMNS.items():
        assert ours in t.columns and (theirs == ours or DW_PREFIX + theirs not in t.columns)
    assert {"dw:id", "dw:metadata", "dw:legacy_mean_precision", "dw:total_pipeline_cpu_ms"} <= set(t.columns)


def test_workbench_column_map_in_full():
    """Every workbench column's descbench name, in the order the Markdown correspondence and the
    not-a-results-CSV message list them; the with-zeros twins' and per-category columns'
    quantities; the columns whose -1 is 'not computed'."""
    assert [(theirs, ours) for theirs, (ours, _) in DW_COLUMNS.items()] == [
        ("true_map_micro", "true_map_micro"), ("true_map_macro", "true_map_macro_by_scene"),
        ("true_map_micro_with_zeros", "true_map_micro_including_zeros"),
        ("true_map_macro_with_zeros", "true_map_macro_by_scene_including_zeros"),
        ("viewpoint_map", "viewpoint_map"), ("illumination_map", "illumination_map"),
        ("viewpoint_map_with_zeros", "viewpoint_map_including_zeros"),
        ("illumination_map_with_zeros", "illumination_map_including_zeros"),
        ("precision_at_1", "precision_at_1"), ("precision_at_5", "precision_at_5"),
        ("recall_at_1", "recall_at_1"), ("recall_at_5", "recall_at_5"),
        ("keypoint_verification_ap", "workbench_verification_map"),
        ("verification_viewpoint_ap", "workbench_verification_viewpoint_map"),
        ("verification_illumination_ap", "workbench_verification_illumination_map"),
        ("keypoint_retrieval_ap", "workbench_retrieval_map"),
        ("retrieval_viewpoint_ap", "workbench_retrieval_viewpoint_map"),
        ("retrieval_illumination_ap", "workbench_retrieval_illumination_map"),
        ("retrieval_num_true_positives", "retrieval_num_true_positives"),
        ("retrieval_num_hard_negatives", "retrieval_num_hard_negatives"),
        ("retrieval_num_distractors", "retrieval_num_distractors")]
    assert DW_COLUMNS["true_map_macro"][1] == "mean over scenes of the scene's mean AP (R >= 1)"
    assert DW_COLUMNS["true_map_macro_with_zeros"][1] == "true_map_macro with R = 0 queries counted as AP 0"
    assert DW_COLUMNS["illumination_map"][1] == "true_map_macro over illumination scenes"
    assert DW_COLUMNS["illumination_map_with_zeros"][1] == "illumination_map with R = 0 queries counted as AP 0"
    assert DW_COLUMNS["keypoint_retrieval_ap"][1] == ("keypoint retrieval: mean over scenes of the pooled AP (labels 0 "
                                                      "and -1 not relevant)")
    assert DW_COLUMNS["verification_viewpoint_ap"][1] == "the same over viewpoint scenes"
    assert DW_COLUMNS["retrieval_illumination_ap"][1] == "the same over illumination scenes"
    assert DW_NOT_COMPUTED == ("keypoint_verification_ap", "verification_viewpoint_ap", "verification_illumination_ap",
                               "keypoint_retrieval_ap", "retrieval_viewpoint_ap", "retrieval_illumination_ap",
                               "image_retrieval_map")


def test_markdown_names_each_rows_convention_and_the_column_correspondence(tmp_path):
    folder = fake_experiment(tmp_path, "mine", rows=[
        {"descriptor": "sift", "keypoint_set": "sift", "true_map_micro": 0.61},
        {"descriptor": "sift-half", "keypoint_set": "sift", "true_map_micro": 0.6}])
    md = to_markdown(compare_experiments([folder, DATA / "results_table.csv"]))
    lines = md.splitlines()
    assert lines[0].split(" | ")[-1] == "convention |"
    assert "workbench_verification_map" in lines[0] and "true_map_macro_by_scene" in lines[0]
    assert lines[2].endswith("| [1] |") and lines[3].endswith("| [2] |") and lines[4].endswith("| [3] |")
    assert "- [1] descbench: scoring.gt closest_oriented, tie_policy expected, tau_px 3.0" in md
    assert "- [2] descbench: scoring.gt closest_oriented, tie_policy half" in md  # the descriptor's overrides
    assert "- [3] DescriptorWorkbench: ground truth" in md
    assert "- `keypoint_verification_ap` -> `workbench_verification_map`: keypoint verification" in md
    assert "- `true_map_macro` -> `true_map_macro_by_scene`" in md
    assert "`dw:mean_average_precision` (its display value: true_map_macro" in md
    assert "| dsp_sweep | ../data/ | DescriptorWorkbench | dspsift_v2 |  |" in md and "| n/a |" in md


@pytest.mark.bad_input
def test_not_a_workbench_csv_says_what_to_give(tmp_path):
    folder = fake_experiment(tmp_path, "mine")
    f = tmp_path / "comparison.csv"
    pd.read_parquet(folder / "report" / "comparison.parquet").to_csv(f, index=False)
    with pytest.raises(DataError, match=rf"{f} is not a DescriptorWorkbench results CSV: .*given as its folder"):
        compare_experiments([folder, f])
    with pytest.raises(DataError, match=r"does not exist: run the experiment first"):
        compare_experiments([tmp_path / "nothing"])


def test_compare_command_reads_workbench_csv(tmp_path):
    folder = fake_experiment(tmp_path, "mine")
    out = tmp_path / "t.md"
    res = subprocess.run([sys.executable, "-m", "descbench", "compare", str(folder), str(DATA / "results.csv"),
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "| mine | hpatches | descbench | sift | sift |" in out.read_text()
    assert "| sift_baseline | ../data/ | DescriptorWorkbench | sift |" in out.read_text()
