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


# ----------------------------------------------------------------------------- evaluate_patches

from descbench.evaluate import evaluate_patches  # noqa: E402

FEW = {"scenes": [SCENE], "patches": {"generate": {"max_patches": 20}}}


def mean8(patches):
    import cv2

    small = np.stack([cv2.resize(p, (8, 8), interpolation=cv2.INTER_AREA) for p in patches]).astype(np.float32)
    return (small - small.mean(axis=(1, 2), keepdims=True)).reshape(len(patches), 64)


def run_patches(describe, tmp_path, **kw):
    kw.setdefault("tasks", ["matching"])
    kw.setdefault("config", FEW)
    return evaluate_patches(describe, data_dir=tmp_path / "data", progress=False, **kw)


def test_patch_out_dir_holds_the_workflows_files_and_the_table_is_its_report(tmp_path):
    out = tmp_path / "out"
    table = run_patches(mean8, tmp_path, name="mean8", out_dir=out)
    assert table.loc[0, "descriptor"] == "mean8" and table.loc[0, "split"] == "full"
    assert (out / "patches" / "descriptors" / "mean8" / f"{SCENE}.parquet").is_file()
    written = pd.read_csv(out / "report" / "patches" / "hpatches_benchmark.csv")
    pd.testing.assert_frame_equal(pd.read_csv(__import__("io").StringIO(table.to_csv(index=False))), written, check_exact=True)
    hb = run_patches(mean8, tmp_path, benchmark="hbench", config={**FEW, "patches": {**FEW["patches"], "hbench": {
        "retrieval_sequences": [1], "retrieval_seeds": 1, "retrieval_queries_per_sequence": 5}}})
    assert hb.loc[0, "descriptor"] == "custom" and 0 <= hb.loc[0, "matching_map"] <= 1


def test_a_torch_module_is_evaluated_in_eval_mode_and_left_in_its_mode(tmp_path):
    torch = pytest.importorskip("torch")
    kornia = pytest.importorskip("kornia")
    torch.manual_seed(0)
    net = kornia.feature.HardNet(pretrained=False)
    net.train()
    a = run_patches(net, tmp_path)
    assert net.training  # its mode is restored
    net.eval()
    b = run_patches(net, tmp_path)
    assert not net.training
    pd.testing.assert_frame_equal(a, b)  # train mode or not, it was evaluated in eval mode


@pytest.mark.bad_input
@pytest.mark.parametrize("bad, message", [
    (lambda p: mean8(p)[:-1], r"returned shape \(19, 64\) for the 20 patches of descriptor 'custom', sequence i_coffee, strip ref"),
    (lambda p: mean8(p).astype(np.int64), r"returned dtype int64 for descriptor 'custom', sequence i_coffee, strip ref"),
    (lambda p: np.full((len(p), 4), np.nan, np.float32), r"i_coffee\.parquet: strip 'ref' row 0 holds NaN/inf"),
    (lambda p: 1 / 0, r"raised ZeroDivisionError on descriptor 'custom', sequence i_coffee, strip ref \(.*ref\.png\), "
                      r"at .*test_evaluate\.py:\d+ in <lambda>\(\): division by zero; fix the descriptor"),
])
def test_bad_patch_rows_are_an_error_naming_the_strip(tmp_path, bad, message):
    with pytest.raises(DataError, match=message):
        run_patches(bad, tmp_path)


@pytest.mark.bad_input
def test_a_width_that_changes_between_strips_is_an_error(tmp_path):
    calls = []

    def describe(p):
        calls.append(1)
        return mean8(p) if len(calls) == 1 else mean8(p)[:, :32]
    with pytest.raises(DataError, match=r"i_coffee\.parquet: strip 'e1' has float32 descriptors of dimension 32, strip 'ref' "
                                         r"float32 of dimension 64"):
        run_patches(describe, tmp_path)


@pytest.mark.bad_input
@pytest.mark.parametrize("kw, message", [
    ({"benchmark": "hpatches"}, r"benchmark='hpatches': use one of hpatches_benchmark, hbench"),
    ({"split": "d"}, r"patches.hpatches_benchmark.splits.*'d'"),
    ({"tasks": ["matchin"]}, r"patches.hpatches_benchmark.tasks.*'matchin'"),
    ({"source": "hpatches_release"}, r"hpatches"),
])
def test_bad_patch_settings_are_an_error_naming_the_key(tmp_path, kw, message):
    with pytest.raises((ConfigError, DataError), match=message):
        run_patches(mean8, tmp_path, **kw)


@pytest.mark.bad_input
def test_a_torch_module_needs_a_network_family_to_be_fed_like(tmp_path):
    torch = pytest.importorskip("torch")
    with pytest.raises(ConfigError, match=r"like='sift': a torch module is fed as one of the patch networks' families \(hardnet, "):
        run_patches(torch.nn.Flatten(), tmp_path, like="sift")
