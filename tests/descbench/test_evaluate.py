"""descbench.evaluate: a descriptor callable scored in this process by the workflow's own jobs.

Its equality with the workflow's Parquet on the whole demo is tests/workflow/test_golden_demo.py
(test_the_python_api_example_equals_the_demo_run); here: what it writes and returns on one scene,
and the bad input it refuses, naming the scene, the image and the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from descbench import io
from descbench.errors import ConfigError, DataError
from descbench.evaluate import evaluate_sequences
from descbench.tasks import SCORING_TASKS

SCENE = "i_coffee"


def sift(image, kps):
    import cv2

    cv_kps = [cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), int(o))
              for x, y, s, a, r, o in zip(kps.x, kps.y, kps.size, kps.angle, kps.response, kps.octave)]
    return cv2.SIFT_create().compute(image, cv_kps)[1]


def run(describe, tmp_path, **kw):
    kw.setdefault("tasks", ["scores"])
    kw.setdefault("config", {"scenes": [SCENE]})
    return evaluate_sequences(describe, data_dir=tmp_path / "data", progress=False, **kw)


def test_out_dir_holds_the_workflows_files_and_the_table_is_its_report(tmp_path):
    out = tmp_path / "out"
    table = run(sift, tmp_path, name="mine", out_dir=out)
    assert table.loc[0, "descriptor"] == "mine" and table.loc[0, "keypoint_set"] == "sift"
    assert (out / "keypoints" / "sift").is_dir() and (out / "descriptors" / "sift" / "mine").is_dir()
    files = sorted((out / "descriptors" / "sift" / "mine").rglob(f"{SCENE}.parquet"))
    assert len(files) == 1
    dtable, meta = io.read_table(files[0])
    assert meta["params"]["family"] == "python" and meta["params"]["params"]["callable"].endswith(":sift")
    # the table returned is the report's comparison.parquet (its columns but the wall time)
    written = pd.read_parquet(out / "report" / "comparison.parquet")
    pd.testing.assert_frame_equal(table.drop(columns=["processing_time_ms"]), written, check_exact=True)
    # only the tasks asked for ran
    assert not (out / SCORING_TASKS["verification"].name).exists()
    assert "keypoint_verification_ap" not in table


def test_a_tensor_is_taken_as_its_values(tmp_path):
    torch = pytest.importorskip("torch")
    a = run(sift, tmp_path)
    b = run(lambda image, kps: torch.from_numpy(sift(image, kps)), tmp_path)
    pd.testing.assert_frame_equal(a.drop(columns=["processing_time_ms"]), b.drop(columns=["processing_time_ms"]))


def test_rows_that_change_the_numbers_change_the_table(tmp_path):
    a = run(sift, tmp_path)
    rng = np.random.default_rng(0)
    b = run(lambda image, kps: sift(image, kps) + rng.normal(0, 20, (len(kps), 128)).astype(np.float32), tmp_path)
    assert b.loc[0, "true_map_micro"] < a.loc[0, "true_map_micro"]


def width_changes():
    calls = []

    def describe(image, kps):
        calls.append(1)
        d = sift(image, kps)
        return d if len(calls) == 1 else d[:, :64]
    return describe


def raises(image, kps):
    raise ValueError("model not on the right device")


@pytest.mark.bad_input
@pytest.mark.parametrize("bad, message", [
    (lambda image, kps: sift(image, kps)[:-1], r"returned shape \(\d+, 128\) for the \d+ keypoints of descriptor 'custom', "
                                               r"scene i_coffee, image 1 \(.*1\.ppm\); return one row per keypoint"),
    (lambda image, kps: np.full((len(kps), 4), np.nan, np.float32), r"descriptor 'custom', scene i_coffee, image 1: descriptor "
                                                                   r"callable '.*' produced NaN/inf for \d+ keypoints of .*1\.ppm"),
    (lambda image, kps: sift(image, kps).astype(np.int32), r"returned dtype int32 for .*image 1.*; return floats, or uint8"),
    (lambda image, kps: sift(image, kps).astype(np.uint8), r"returned uint8 .*image 1.*say which with descriptor_kind"),
    (lambda image, kps: sift(image, kps)[:, 0], r"returned shape \(\d+,\) for the \d+ keypoints of .*image 1"),
    (width_changes(), r"^descriptor 'custom', scene i_coffee, image 2 \(.*2\.ppm\): float32 x 64 descriptors, but image 1 has "
                      r"float32 x 128"),
    (raises, r"descriptor callable '.*:raises' raised ValueError on descriptor 'custom', scene i_coffee, image 1 .*"
             r"test_evaluate\.py:\d+ in raises\(\): model not on the right device"),
])
def test_bad_rows_are_an_error_naming_the_image(tmp_path, bad, message):
    with pytest.raises(DataError, match=message):
        run(bad, tmp_path)


@pytest.mark.bad_input
@pytest.mark.parametrize("kw, message", [
    ({"tasks": ["scores", "verfication"]}, r"tasks: unknown scoring task\(s\) 'verfication'; the tasks are scores, verification, matching"),
    ({"keypoints": "orb"}, r"keypoints='orb': not a keypoint set of the config \(none\) nor a built-in set \(sift\)"),
    ({"keypoints": "small", "config": {"scenes": [SCENE], "keypoint_sets": {"small": {"source": "sift", "filters": []}}}},
     r"keypoints 'small': evaluate_sequences detects its keypoints itself, so the set needs a 'detector'"),
    ({"name": "my descriptor"}, r"descriptors.*'my descriptor' does not match"),
    ({"descriptor_kind": "bits"}, r"descriptor_kind='bits': use 'binary'"),
    ({"dataset": "hpatches", "config": {"scenes": ["i_ajuntament"]}}, r"the scenes of dataset 'hpatches' are not at .*hpatches.*; prepare them once with the workflow"),
])
def test_bad_settings_are_an_error_naming_the_key(tmp_path, kw, message):
    with pytest.raises(ConfigError if "hpatches" not in str(kw) else DataError, match=message):
        run(sift, tmp_path, **kw)


@pytest.mark.bad_input
def test_a_describe_that_is_not_callable_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"describe: expected a callable describe\(image, keypoints\) -> \[N, D\], got ndarray"):
        run(np.zeros(3), tmp_path)
