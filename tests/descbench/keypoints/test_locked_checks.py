"""Inputs that must not pass silently, and exact tests of the rules that decide which keypoints count.

- locked keypoints outside their image (its real size) are an error, not a border drop;
- exact duplicate locked keypoints (same x, y, size, angle in one image) are an error unless
  ``params.duplicates: keep``;
- the border rule and the response cap at their exact boundaries (each test breaks under a
  one-character change of the rule: ``<`` / ``<=``, ``>=`` / ``>``, ``W - b`` / ``W - b - 1``,
  stable / default sort);
- a NaN (or -inf) distance in an HBench matching ``.results`` file is an error naming the line.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
import yaml

from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import detect_scene
from descbench.config import validate_config
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints, border_mask, border_upper_inclusive, filter_keypoints, top_by_response
from descbench.keypoints.locked import DUPLICATES, duplicate_rows, load_locked
from descbench.patches import hbench as hb

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
W, H = 384, 303  # the demo scene's images (checked in test_demo_image_size)
F32 = np.float32


def locked(path, **params) -> dict:
    return {"detector": "locked", "border_px": 0, "max_keypoints": None, "params": {"path": str(path), **params}}


def write(tmp_path: Path, rows: list[dict], name: str = "kp.parquet") -> Path:
    """A dataset file with ``rows`` (scene/image default to v_coins/1) plus one inside keypoint in
    every image, so that only the rows given can be wrong."""
    base = [{"scene": "v_coins", "image": k, "x": 20.0 + k, "y": 30.0, "size": 5.0} for k in range(1, 7)]
    df = pd.DataFrame(base + [{"scene": "v_coins", "image": 1, **r} for r in rows])
    df = df.astype({"x": F32, "y": F32, "size": F32})
    f = tmp_path / name
    df.to_csv(f, index=False, float_format="%.9g") if name.endswith(".csv") else df.to_parquet(f)
    return f


def detect(scene_dir: Path, tmp_path: Path, spec: dict):
    out = tmp_path / "o.parquet"
    detect_scene(scene_dir, "mine", spec, out)
    return load_keypoints(out)


def kps(x, y=None, response=None) -> ImageKeypoints:
    x = np.asarray(x, dtype=F32)
    n = x.size
    y = np.full(n, 50, F32) if y is None else np.asarray(y, dtype=F32)
    r = np.zeros(n, F32) if response is None else np.asarray(response, dtype=F32)
    return ImageKeypoints(x, y, np.full(n, 4, F32), np.full(n, -1, F32), r, np.zeros(n, np.int32),
                          np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


def below(v, dtype=np.float64):
    """The largest ``dtype`` value below ``v``."""
    return np.nextafter(dtype(v), dtype(-np.inf))


def above(v, dtype=np.float64):
    """The smallest ``dtype`` value above ``v``."""
    return np.nextafter(dtype(v), dtype(np.inf))


def test_demo_image_size(pristine):
    from descbench.datasets.layout import image_size

    assert all(image_size(pristine / f"{k}.ppm") == (W, H) for k in range(1, 7))


# ============================================================================ 1. outside the image


@pytest.mark.bad_input
@pytest.mark.parametrize("ext", ["parquet", "csv"])
@pytest.mark.parametrize("x", [-50.0, 1e6])
def test_locked_keypoint_outside_the_image_is_an_error(pristine, tmp_path, x, ext):
    f = write(tmp_path, [{"x": 100.0, "y": 100.0, "size": 4.0}, {"x": x, "y": 100.0, "size": 5.0}], f"kp.{ext}")
    with pytest.raises(DataError) as err:
        detect(pristine, tmp_path, locked(f))
    msg = str(err.value)
    assert f"locked keypoint file {f}, scene v_coins, image 1: 1 keypoint(s) outside the image" in msg
    assert f"{W} x {H} px" in msg and f"row 7 (x={x:.9g}, y=100)" in msg  # file row 7: after 6 base rows + 1
    assert ("CSV line = row + 2" in msg) == (ext == "csv")
    assert "write the keypoints in this image's pixel coordinates" in msg and "or remove these rows" in msg
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.bad_input
def test_outside_error_lists_the_first_rows_and_the_count(pristine, tmp_path):
    rows = [{"x": 10.0, "y": -1.0 - i, "size": 3.0} for i in range(7)]
    f = write(tmp_path, rows)
    with pytest.raises(DataError, match=r"image 1: 7 keypoint\(s\) outside .*: row 6 \(x=10, y=-1\), row 7 .*"
                                        r"row 10 \(x=10, y=-5\) and 2 more"):
        detect(pristine, tmp_path, locked(f))


@pytest.mark.bad_input
def test_locked_image_edges_are_exact(pristine, tmp_path):
    # [0, W) x [0, H) in float32: 0 and the last float32 below W / H are in, W / H and -tiny are out
    inside = [{"x": 0.0, "y": 0.0, "size": 3.0}, {"x": float(below(W, F32)), "y": float(below(H, F32)), "size": 3.0}]
    per_image, _ = detect(pristine, tmp_path, locked(write(tmp_path, inside)))
    assert len(per_image[1]) == 3
    assert per_image[1].x[2] == below(W, F32) and per_image[1].y[2] == below(H, F32)
    for bad in ({"x": float(W), "y": 5.0}, {"x": 5.0, "y": float(H)}, {"x": float(below(0, F32)), "y": 5.0},
                {"x": 5.0, "y": float(below(0, F32))}):
        with pytest.raises(DataError, match="outside the image"):
            detect(pristine, tmp_path, locked(write(tmp_path, [{**bad, "size": 3.0}])))


@pytest.mark.bad_input
def test_outside_uses_the_real_size_of_each_image(scene, tmp_path):
    # image 3 made smaller: x = 350 is inside image 1 (384 wide) but outside image 3 (300 wide)
    img = cv2.imread(str(scene / "3.ppm"), cv2.IMREAD_UNCHANGED)
    cv2.imwrite(str(scene / "3.ppm"), img[:250, :300])
    f = write(tmp_path, [{"x": 350.0, "y": 100.0, "size": 4.0}])
    per_image, _ = detect(scene, tmp_path, locked(f))  # in image 1: fine
    assert 350.0 in per_image[1].x
    f = write(tmp_path, [{"image": 3, "x": 350.0, "y": 100.0, "size": 4.0}])
    with pytest.raises(DataError, match=r"scene v_coins, image 3: 1 keypoint\(s\) outside the image, which is 300 x 250 px"):
        detect(scene, tmp_path, locked(f))


@pytest.mark.bad_input
def test_per_image_file_outside_names_that_file(pristine, tmp_path):
    (tmp_path / "kp").mkdir()
    for k in range(1, 7):
        pd.DataFrame({"x": [5.0, W + 0.5 if k == 4 else 6.0], "y": [5.0, 5.0], "size": [2.0, 2.0]}).to_csv(
            tmp_path / "kp" / f"v_coins_{k}.csv", index=False)
    with pytest.raises(DataError, match=r"kp/v_coins_4\.csv, scene v_coins, image 4: 1 keypoint\(s\) outside .*row 1 \(x=384\.5"):
        detect(pristine, tmp_path, locked(tmp_path / "kp" / "{scene}_{image}.csv"))


@pytest.mark.bad_input
def test_inside_but_within_the_border_is_dropped_not_an_error(pristine, tmp_path):
    f = write(tmp_path, [{"x": 10.0, "y": 100.0, "size": 4.0}, {"x": 200.0, "y": 150.0, "size": 4.0}])
    per_image, meta = detect(pristine, tmp_path, {**locked(f), "border_px": 40})
    assert per_image[1].x.tolist() == [200.0] and meta["raw_counts"]["1"] == 3


# ============================================================================ 2. duplicates


@pytest.mark.bad_input
def test_duplicated_rows_are_an_error_naming_count_and_rows(pristine, tmp_path):
    df = pd.DataFrame([{"scene": "v_coins", "image": k, "x": 20.0 + i, "y": 30.0, "size": 5.0, "angle": 10.0}
                       for k in range(1, 7) for i in range(3)])
    f = tmp_path / "twice.csv"
    pd.concat([df, df]).to_csv(f, index=False)  # every row twice: rows 18.. repeat rows 0..
    with pytest.raises(DataError) as err:
        detect(pristine, tmp_path, locked(f))
    msg = str(err.value)
    assert f"locked keypoint file {f}, scene v_coins, image 1: 3 row(s) repeat an earlier keypoint" in msg
    assert "row 18 = row 0, row 19 = row 1, row 20 = row 2" in msg
    assert "drop_duplicates(subset=['scene', 'image', 'x', 'y', 'size', 'angle'])" in msg
    assert "keypoint_sets.<set>.params.duplicates: keep" in msg


@pytest.mark.bad_input
def test_duplicates_keep_accepts_them_and_is_recorded(pristine, tmp_path):
    f = write(tmp_path, [{"x": 21.0, "y": 30.0, "size": 5.0}])  # repeats image 1's base row
    per_image, meta = detect(pristine, tmp_path, locked(f, duplicates="keep"))
    assert per_image[1].x.tolist() == [21.0, 21.0]
    assert meta["params"]["params"]["duplicates"] == "keep"
    with pytest.raises(DataError, match=r"image 1: 1 row\(s\) repeat .*: row 6 = row 0"):
        detect(pristine, tmp_path, locked(f, duplicates="error"))
    with pytest.raises(DataError, match=r"row 6 = row 0"):
        detect(pristine, tmp_path, locked(f))  # error is the default


def test_duplicate_key_is_x_y_size_angle():
    base = kps([1, 1, 1, 1, 1, 1, 2])
    angle = np.array([10, 20, 10, 10, 10, 10, 10], F32)  # row 1: another orientation at one place (SIFT)
    size = np.array([4, 4, 4, 4, 5, 4, 4], F32)  # row 4: another scale
    y = np.array([50, 50, 50, 50, 50, 51, 50], F32)  # row 5: another y
    k = ImageKeypoints(base.x, y, size, angle, np.arange(7, dtype=F32), np.arange(7, dtype=np.int32),
                       np.arange(7, dtype=np.int32), base.source_index)
    rows, earlier = duplicate_rows(k)
    # rows 2 and 3 differ from row 0 only in response / octave / class_id: the same keypoint
    assert rows.tolist() == [2, 3] and earlier.tolist() == [0, 0]
    # -0.0 and 0.0 are one position
    z = kps(np.array([0.0, -0.0], F32))
    assert duplicate_rows(z)[0].tolist() == [1]
    assert duplicate_rows(kps([]))[0].size == 0 and duplicate_rows(kps([3.0]))[0].size == 0


def test_sift_orientations_at_one_position_are_not_duplicates(pristine, tmp_path):
    f = write(tmp_path, [{"x": 21.0, "y": 30.0, "size": 5.0, "angle": 90.0}])
    df = pd.read_parquet(f)
    df["angle"] = df["angle"].fillna(-1.0).astype(F32)  # the base rows have angle -1
    df.to_parquet(f)
    per_image, _ = detect(pristine, tmp_path, locked(f))
    assert per_image[1].angle.tolist() == [-1.0, 90.0]


@pytest.mark.bad_input
def test_duplicates_option_in_schema_and_config():
    schema = yaml.safe_load(SCHEMA.read_text())
    prop = schema["definitions"]["locked_params"]["properties"]["duplicates"]
    assert prop["enum"] == list(DUPLICATES) and prop["default"] == DUPLICATES[0] == "error" and prop["description"]
    cfg = {"keypoint_sets": {"k": {"detector": "locked", "params": {"path": "kp.parquet"}}},
           "descriptors": {"d": {"family": "sift"}}}
    assert validate_config(cfg, SCHEMA)["keypoint_sets"]["k"]["params"]["duplicates"] == "error"
    cfg["keypoint_sets"]["k"]["params"]["duplicates"] = "drop"
    with pytest.raises(ConfigError, match=r"keypoint_sets\.k\.params\.duplicates"):
        validate_config(cfg, SCHEMA)
    with pytest.raises(ConfigError, match=r"params\.duplicates is 'drop'; use one of error, keep"):
        load_locked("kp.parquet", "v_coins", 1, W, H, duplicates="drop")


# ============================================================================ 3. border rule and cap


@pytest.mark.parametrize("b", [0, 40, 2.5])
@pytest.mark.parametrize("dtype", [np.float64, F32])
def test_border_mask_x_and_y_boundaries(b, dtype):
    w, h = 200, 150
    tiny_b = below(b, dtype)
    for axis, size in (("x", w), ("y", h)):
        vals = np.array([b, tiny_b, size - b, below(size - b, dtype), 100], dtype=dtype)
        other = np.full(vals.size, 60, dtype=dtype)
        x, y = (vals, other) if axis == "x" else (other, vals)
        assert border_mask(x, y, w, h, b).tolist() == [True, False, False, True, True], (axis, b, dtype)


@pytest.mark.parametrize("b", [0, 40, 2.5])
def test_filter_keypoints_boundaries_and_order(b):
    w, h = 200, 150
    x = np.array([b, below(b, F32), w - b, below(w - b, F32), 100, 100, 100, 100], F32)
    y = np.array([60, 60, 60, 60, b, below(b, F32), h - b, below(h - b, F32)], F32)
    kept = filter_keypoints(kps(x, y), w, h, b, None)
    assert kept.source_index.tolist() == [0, 3, 4, 7]



@pytest.mark.parametrize("b", [0, 40, 2.5])
@pytest.mark.parametrize("dtype", [np.float64, F32])
def test_the_workbench_keynet_border_also_keeps_the_upper_edge(b, dtype):
    """border_upper: inclusive keeps x == W - b and y == H - b (the workbench's KeyNet script);
    everything else as the protocol's rule."""
    w, h = 200, 150
    for axis, size in (("x", w), ("y", h)):
        vals = np.array([b, below(b, dtype), size - b, above(size - b, dtype), 100], dtype=dtype)
        other = np.full(vals.size, 60, dtype=dtype)
        x, y = (vals, other) if axis == "x" else (other, vals)
        assert border_mask(x, y, w, h, b, upper_inclusive=True).tolist() == [True, False, True, False, True], (axis, b)
        assert border_mask(x, y, w, h, b).tolist() == [True, False, False, False, True], (axis, b)
    k = kps(np.array([b, w - b, 100], F32), np.array([60, 60, h - b], F32))
    assert filter_keypoints(k, w, h, b, None, upper_inclusive=True).source_index.tolist() == [0, 1, 2]
    assert filter_keypoints(k, w, h, b, None).source_index.tolist() == [0]
    assert border_upper_inclusive({"border_upper": "inclusive"}) and not border_upper_inclusive({})
    assert not border_upper_inclusive({"border_upper": "exclusive"})

def test_filter_is_border_first_then_cap():
    # the best response lies in the border: the cap keeps the best keypoints left after the border rule
    k = kps([1, 50, 60, 70], response=[9, 1, 3, 2])
    assert filter_keypoints(k, 100, 100, 10, 2).source_index.tolist() == [2, 3]


def test_top_by_response_ties_keep_the_lower_index():
    rng = np.random.default_rng(0)
    resp = rng.integers(0, 4, 2000).astype(F32)  # many ties, large enough for a non-stable sort to differ
    for m in (1, 7, 500, 1999):
        got = top_by_response(resp, m)
        want = np.sort(sorted(range(resp.size), key=lambda i: (-resp[i], i))[:m])
        np.testing.assert_array_equal(got, want)
    assert top_by_response(np.array([1, 2, 2, 2, 1], F32), 2).tolist() == [1, 2]


def test_top_by_response_cap_edge_values():
    resp = np.array([3, 1, 2], F32)
    assert top_by_response(resp, None).tolist() == [0, 1, 2]
    assert top_by_response(resp, 3).tolist() == [0, 1, 2]
    assert top_by_response(resp, 4).tolist() == [0, 1, 2]
    assert top_by_response(resp, 2).tolist() == [0, 2]
    assert top_by_response(resp, 0).tolist() == []
    assert top_by_response(np.zeros(0, F32), 0).tolist() == []
    assert len(filter_keypoints(kps([50, 60]), 100, 100, 0, 0)) == 0


# ============================================================================ 4. HBench .results


GOOD = "s.a,s.b\n0,1,2\n0.5,inf,0.7\n1,-1,0\n0.9,inf,1.5\n"


def test_results_inf_is_no_neighbour(tmp_path):
    p = tmp_path / "t.results"
    p.write_text(GOOD)
    m = hb.read_matching_results(p).pairs[("s.a", "s.b")]
    assert m.nn1_dist[1] == np.inf and hb.matching_pair_ap(m.nn1_idx, m.nn1_dist) == pytest.approx(2 / 3, abs=1e-15)


@pytest.mark.bad_input
@pytest.mark.parametrize("token", ["nan", "NaN", "-nan", "-inf"])
@pytest.mark.parametrize("line", [3, 5])
def test_results_nan_distance_is_an_error(tmp_path, token, line):
    lines = GOOD.splitlines()
    lines[line - 1] = lines[line - 1].replace("inf", f" {token}")
    p = tmp_path / "t.results"
    p.write_text("\n".join(lines) + "\n")
    what = "nn1 distances" if line == 3 else "nn2 distances"
    with pytest.raises(DataError, match=rf"t\.results, line {line}: pair s\.a,s\.b, {what}: entry 2 is '{token}', "
                                        r"which is not a distance; write .* or inf where there is no neighbour"):
        hb.read_matching_results(p)


@pytest.mark.bad_input
def test_results_unparsable_distance_is_an_error(tmp_path):
    p = tmp_path / "t.results"
    p.write_text(GOOD.replace("0.7", "0.7x"))
    with pytest.raises(DataError, match=r"t\.results, line 3: pair s\.a,s\.b, nn1 distances: entry 3 '0\.7x' is not a number"):
        hb.read_matching_results(p)


def test_border_rule_compares_in_exact_arithmetic_for_float32_coordinates():
    """b <= x holds in exact arithmetic: float32(0.7) = 0.699999988... is below a 0.7 border."""
    from descbench.keypoints import border_mask

    x = np.array([0.7, 0.75, 50.0], dtype=np.float32)
    y = np.full(3, 50.0, dtype=np.float32)
    assert float(x[0]) < 0.7
    np.testing.assert_array_equal(border_mask(x, y, 100, 100, 0.7), [False, True, True])
    # the upper side: W - b = 99.3; float32(99.3) = 99.3000030... is not below it
    x_hi = np.array([np.float32(99.3), np.float32(99.29)], dtype=np.float32)
    assert float(x_hi[0]) > 99.3
    np.testing.assert_array_equal(border_mask(x_hi, np.full(2, 50.0, np.float32), 100, 100, 0.7), [False, True])
