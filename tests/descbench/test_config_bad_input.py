"""Bad-input sweep, round 2 (config and descriptor cases): each user mistake is a ConfigError or
DataError naming the key path (or descriptor, part, image, file) and the fix, never a traceback
inside a job nor a silent result. The tester's case ids are in the test names' comments."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from descbench.config import validate_config
from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.patches import PATCH_TYPES

pytestmark = pytest.mark.bad_input  # every test here checks a bad input (or the valid input beside it)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))  # sweep_config_callables, my_descriptors
MOD = "sweep_config_callables"
SIFT_SET = {"detector": "sift", "params": {"n_features": 0, "n_octave_layers": 3, "contrast_threshold": 0.04,
                                           "edge_threshold": 10, "sigma": 1.6}}


def base() -> dict:
    return {"dataset": "folder", "folder": {"path": "data"},
            "keypoint_sets": {"sift": {"detector": "sift", "params": {"n_features": 500}}},
            "descriptors": {"sift": {"family": "sift"}}}


def error_of(cfg: dict) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    return str(err.value)


def with_(**sections) -> dict:
    return {**base(), **sections}


# ----------------------------------------------------------------------------- c02 c28 c19 c03: non-finite numbers


@pytest.mark.parametrize("cfg, key", [
    (with_(scoring={"tau_px": float("nan")}), "scoring.tau_px"),  # c02
    (with_(matching={"repeatability_px": float("inf")}), "matching.repeatability_px"),  # c28
    (with_(statistics={"ci_level": float("nan")}), "statistics.ci_level"),  # c19
    (with_(keypoint_sets={"sift": {"detector": "sift", "border_px": float("inf")}}), "keypoint_sets.sift.border_px"),  # c03
    (with_(keypoint_sets={"sift": {"detector": "sift", "border_px": float("nan")}}), "keypoint_sets.sift.border_px"),
    (with_(keypoint_sets={"g": {"detector": "gftt", "params": {"harris_k": float("nan")}}}), "keypoint_sets.g.params.harris_k"),
    (with_(keypoint_sets={"s": {"detector": "sift"}, "f": {"source": "s", "filters": [{"min_size": float("nan")}]}}),
     "keypoint_sets.f.filters.0.min_size"),
    (with_(descriptors={"o": {"family": "orb", "params": {"scale_factor": float("inf")}}}), "descriptors.o.params.scale_factor"),
    (with_(descriptors={"st": {"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "rootsift"}],
                                                              "weights": [1.0, float("inf")]}}}), "descriptors.st.params.weights.1"),
    (with_(descriptors={"s": {"family": "sift", "overrides": {"scoring": {"tau_px": float("nan")}}}}),
     "descriptors.s.overrides.scoring.tau_px"),
    (with_(matching={"mma_thresholds": [1, float("inf")]}), "matching.mma_thresholds.1"),
    (with_(sweeps={"b": {"keypoint_set": "sift", "grid": {"border_px": [20, float("inf")]}}}), r"sweeps.b.grid.border_px[1]"),
])
def test_non_finite_numbers_are_refused_naming_the_key(cfg, key):
    msg = error_of(cfg)
    assert f"'{key}'" in msg and "is not a finite number" in msg, msg


def test_nan_from_yaml_text_is_refused():
    cfg = yaml.safe_load("keypoint_sets: {sift: {detector: sift}}\nscoring: {tau_px: .nan}\n")
    assert "invalid config value at 'scoring.tau_px': nan is not a finite number" in error_of(cfg)


def test_python_kwargs_are_the_callables_own_values():
    """The one subtree left alone: a python descriptor's kwargs are passed to the callable as given."""
    cfg = with_(descriptors={"m": {"family": "python", "params": {"callable": f"{MOD}:any_kwargs", "kwargs": {"eps": float("inf")}}}})
    assert validate_config(cfg, SCHEMA)["descriptors"]["m"]["params"]["kwargs"] == {"eps": float("inf")}
    cfg["descriptors"]["m"]["params"]["kwargs"] = {"eps": 1.0}
    cfg["descriptors"]["m"]["params"]["bogus"] = float("nan")  # anything else under params is checked
    with pytest.raises(ConfigError):
        validate_config(cfg, SCHEMA)


def test_finite_values_validate_unchanged():
    cfg = validate_config(with_(scoring={"tau_px": 2.5}, statistics={"ci_level": 0.9}), SCHEMA)
    assert cfg["scoring"]["tau_px"] == 2.5 and cfg["statistics"]["ci_level"] == 0.9


# ----------------------------------------------------------------------------- c21: lists that cannot be empty


@pytest.mark.parametrize("cfg, key", [
    (with_(matching={"classifier_matchers": []}), "matching.classifier_matchers"),  # c21
    (with_(descriptors={"sift": {"family": "sift", "keypoint_sets": []}}), "descriptors.sift.keypoint_sets"),
    (with_(patches={"descriptors": []}), "patches.descriptors"),
    (with_(matching={"mma_thresholds": []}), "matching.mma_thresholds"),
])
def test_empty_lists_that_mean_nothing_are_refused(cfg, key):
    msg = error_of(cfg)
    assert f"'{key}': [] has 0 item(s); list at least 1" in msg, msg


def test_classifier_matchers_error_lists_the_choices_and_keypoint_sets_null():
    assert "threshold, nn, ratio, mutual_nn" in error_of(with_(matching={"classifier_matchers": []}))
    assert "or null" in error_of(with_(descriptors={"sift": {"family": "sift", "keypoint_sets": []}}))


def test_sweep_with_an_empty_grid_is_refused():
    msg = error_of(with_(sweeps={"b": {"keypoint_set": "sift", "grid": {}}}))
    assert msg.startswith("sweeps.b.grid: give at least one parameter path")
    assert error_of(with_(sweeps={"b": {"keypoint_set": "sift"}})).startswith("sweeps.b.grid:")


# ----------------------------------------------------------------------------- c27: duplicate thresholds


@pytest.mark.parametrize("cfg, key, dup", [
    (with_(matching={"mma_thresholds": [3, 3, 3.0]}), "matching.mma_thresholds", "lists 3 twice (items 0 and 1)"),  # c27
    (with_(matching={"mma_thresholds": [1, 3, 3.0]}), "matching.mma_thresholds", "lists 3 twice (items 1 and 2) (3 and 3.0 are one value)"),
    (with_(matching={"homography_thresholds": [1, 1.0]}), "matching.homography_thresholds", "lists 1 twice"),
    (with_(matching={"homography_auc_thresholds": [3, 5, 5]}), "matching.homography_auc_thresholds", "lists 5 twice"),
    (with_(patches={"hbench": {"retrieval_sequences": [5, 5]}}), "patches.hbench.retrieval_sequences", "lists 5 twice"),
    (with_(descriptors={"s": {"family": "sift", "overrides": {"matching": {"mma_thresholds": [2, 2.0]}}}}),
     "descriptors.s.overrides.matching.mma_thresholds", "lists 2 twice"),
    (with_(descriptors={"s": {"family": "sift", "keypoint_sets": ["sift", "sift"]}}), "descriptors.s.keypoint_sets", "lists 'sift' twice"),
])
def test_duplicate_list_values_are_named(cfg, key, dup):
    msg = error_of(cfg)
    assert f"'{key}'" in msg and dup in msg and "give each value once" in msg, msg


def test_distinct_thresholds_are_kept_in_order():
    cfg = validate_config(with_(matching={"mma_thresholds": [5, 1, 3.5]}), SCHEMA)
    assert cfg["matching"]["mma_thresholds"] == [5, 1, 3.5]


# ----------------------------------------------------------------------------- c18: YAML 1.1 exponent notation


def test_exponent_without_dot_gets_the_yaml11_hint():
    cfg = yaml.safe_load("keypoint_sets: {sift: {detector: sift, params: {contrast_threshold: 4e-2}}}\n")
    assert cfg["keypoint_sets"]["sift"]["params"]["contrast_threshold"] == "4e-2"  # PyYAML: text (not converted)
    msg = error_of(cfg)
    assert "'keypoint_sets.sift.params.contrast_threshold': '4e-2' is not of type 'number'" in msg
    assert msg.endswith("; write 4.0e-2 or 0.04 (YAML 1.1 reads 4e-2 as text)"), msg


@pytest.mark.parametrize("text, hint", [
    ("scoring: {tau_px: 3e0}", "write 3.0e+0 or 3 (YAML 1.1 reads 3e0 as text)"),
    ("keypoint_sets: {sift: {detector: sift, params: {n_features: 1e3}}}", "write 1000 (YAML 1.1 reads 1e3 as text)"),
    ("descriptors: {o: {family: orb, params: {scale_factor: 12e-1}}}", "write 12.0e-1 or 1.2 (YAML 1.1 reads 12e-1 as text)"),
    ("scoring: {tau_px: 1.5e1}", "write 1.5e+1 or 15 (YAML 1.1 reads 1.5e1 as text)"),
])
def test_yaml11_hint_everywhere(text, hint):
    msg = error_of(yaml.safe_load(text))
    assert hint in msg, msg


@pytest.mark.parametrize("text", ["scoring: {tau_px: '3'}", "scoring: {tau_px: three}", "scoring: {tau_px: 'nan'}"])
def test_no_yaml11_hint_for_other_strings(text):
    """A quoted number or a word is text in any YAML: no hint that would claim otherwise."""
    assert "YAML 1.1" not in error_of(yaml.safe_load(text))


# ----------------------------------------------------------------------------- c10 c22: sweep errors name the grid key


def test_bad_sweep_value_names_the_grid_key_and_index():  # c10
    msg = error_of(with_(sweeps={"b": {"keypoint_set": "sift", "grid": {"border_px": [20, -5]}}}))
    assert msg.startswith("invalid config value at 'sweeps.b.grid.border_px[1]': -5 is less than the minimum of 0"), msg
    assert "keypoint set 'sift-b-1' is variant 1 of sweeps.b (border_px: -5)" in msg


def test_unknown_swept_parameter_names_the_grid_key():  # c22
    msg = error_of(with_(sweeps={"b": {"keypoint_set": "sift", "grid": {"params.contrast_treshold": [0.03, 0.05]}}}))
    assert msg.startswith("unknown config key 'sweeps.b.grid.params.contrast_treshold' "
                          "(did you mean 'sweeps.b.grid.params.contrast_threshold'?)"), msg


def test_second_grid_key_of_a_product_gets_its_own_index():
    msg = error_of(with_(sweeps={"b": {"keypoint_set": "sift", "grid": {"border_px": [20, 40], "params.sigma": [1.6, 0]}}}))
    assert "'sweeps.b.grid.params.sigma[1]'" in msg and "variant 1 of sweeps.b (border_px: 20, params.sigma: 0)" in msg, msg


def test_descriptor_sweep_of_a_scoring_setting_names_the_grid_key():
    msg = error_of(with_(sweeps={"t": {"descriptor": "sift", "grid": {"scoring.tau_px": [2.0, -1]}}}))
    assert "'sweeps.t.grid.scoring.tau_px[1]'" in msg and "descriptor 'sift-t-1'" in msg, msg
    msg = error_of(with_(sweeps={"t": {"descriptor": "sift", "grid": {"matching.mma_thresholds": [[1, 2], [1, 1.0]]}}}))
    assert "'sweeps.t.grid.matching.mma_thresholds[1]'" in msg and "lists 1 twice" in msg, msg


def test_swept_callable_kwarg_names_the_grid_key():
    cfg = with_(descriptors={"m": {"family": "python", "params": {"callable": f"{MOD}:fixed"}}},
                sweeps={"s": {"descriptor": "m", "grid": {"params.kwargs.scael": [1.0, 2.0]}}})
    msg = error_of(cfg)
    assert msg.startswith("sweeps.s.grid.params.kwargs.scael[0]: the callable") and "did you mean 'scale'" in msg, msg


def test_a_valid_sweep_still_validates():
    cfg = validate_config(with_(sweeps={"b": {"keypoint_set": "sift", "grid": {"border_px": [20, 40]}}}), SCHEMA)
    assert cfg["keypoint_sets"]["sift-b-1"]["border_px"] == 40


# ----------------------------------------------------------------------------- the python family


@pytest.fixture(scope="module")
def image_kps(pristine):
    from descbench.keypoints.detectors import detect

    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), SIFT_SET["params"])
    return img, kps.take(np.arange(0, len(kps), 9))


WHERE = "descriptor 'mine', scene v_coins, image 1"


def run(params, image_kps, family="python"):
    img, kps = image_kps
    return compute_descriptors(family, check_descriptor_params(family, params, "descriptors.mine.params"), img, kps, SIFT_SET, WHERE)


def test_raising_callable_is_a_data_error_naming_descriptor_callable_image(image_kps):  # y01
    with pytest.raises(DataError) as err:
        run({"callable": f"{MOD}:raises"}, image_kps)
    msg = str(err.value)
    assert msg.startswith(f"{WHERE}: descriptor callable '{MOD}:raises' raised ValueError on {image_kps[0]}"), msg
    assert "sweep_config_callables.py:" in msg and "in raises()" in msg and msg.count("model weights not loaded") == 1, msg
    assert isinstance(err.value.__cause__.__cause__, ValueError)  # chained: prefixed DataError <- DataError <- ValueError


@pytest.mark.parametrize("kwargs, message", [
    ({"radius": 3}, r"descriptors\.mine\.params\.kwargs\.radius: the callable 'sweep_config_callables:fixed' takes no keyword "
                    r"'radius'; its signature is \(image, keypoints, scale=1\.0\)"),  # y10
    ({"scael": 2}, r"kwargs\.scael: .*\(did you mean 'scale'\?\)"),
    ({"image": 2}, r"kwargs\.image: .*takes no keyword 'image'"),
])
def test_kwargs_the_callable_does_not_take_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(with_(descriptors={"mine": {"family": "python", "params": {"callable": f"{MOD}:fixed", "kwargs": kwargs}}}),
                        SCHEMA)


def test_missing_required_callable_parameter_is_a_config_error():
    with pytest.raises(ConfigError, match=r"descriptors\.mine\.params\.kwargs: the callable '.*:needs_model' cannot be called .*'model'"):
        validate_config(with_(descriptors={"mine": {"family": "python", "params": {"callable": f"{MOD}:needs_model"}}}), SCHEMA)


def test_signature_check_accepts_valid_kwargs_and_var_keywords():
    for fn, kwargs in (("fixed", {"scale": 2.0}), ("any_kwargs", {"whatever": 1}), ("needs_model", {"model": "m"})):
        validate_config(with_(descriptors={"mine": {"family": "python", "params": {"callable": f"{MOD}:{fn}", "kwargs": kwargs}}}), SCHEMA)


def test_stack_part_kwargs_are_checked_at_the_part():
    parts = [{"family": "sift"}, {"family": "python", "params": {"callable": f"{MOD}:fixed", "kwargs": {"radius": 1}}}]
    with pytest.raises(ConfigError, match=r"descriptors\.st\.params\.parts\.1\.params\.kwargs\.radius: "):
        validate_config(with_(descriptors={"st": {"family": "stack", "params": {"parts": parts}}}), SCHEMA)


def test_zero_dimensional_output_is_a_data_error(image_kps):  # y04
    with pytest.raises(DataError, match=rf"^{WHERE}: descriptor callable '{MOD}:zero_dim' returned shape \(\d+, 0\) for .*1\.ppm.*D >= 1"):
        run({"callable": f"{MOD}:zero_dim"}, image_kps)


def test_compute_descriptors_refuses_any_family_without_columns(image_kps, monkeypatch):
    """The registry's own guard (for every family, not only python)."""
    from descbench.descriptors import DescriptorFamily, _registry

    fam = DescriptorFamily("zerodim", lambda path, kps, params, kpset: np.zeros((len(kps), 0), np.float32))
    monkeypatch.setitem(_registry(), "zerodim", fam)
    img, kps = image_kps
    with pytest.raises(DataError, match=rf"^{WHERE}: descriptor family 'zerodim' returned \d+ x 0 descriptors .*D >= 1"):
        compute_descriptors("zerodim", {}, img, kps, SIFT_SET, WHERE)
    assert compute_descriptors("zerodim", {}, img, kps.take(np.arange(0)), SIFT_SET, WHERE).shape == (0, 0)  # no keypoint


def test_uint8_output_needs_descriptor_kind(image_kps):  # y02
    with pytest.raises(DataError) as err:
        run({"callable": f"{MOD}:raw_uint8"}, image_kps)
    msg = str(err.value)
    assert msg.startswith(f"{WHERE}: descriptor callable '{MOD}:raw_uint8' returned uint8 for {image_kps[0]}"), msg
    assert "params.descriptor_kind of the python descriptor (or stack part): binary (packed bits, Hamming distance) or float" in msg


def test_descriptor_kind_says_what_uint8_is(image_kps):
    from sweep_config_callables import raw_uint8

    img, kps = image_kps
    raw = raw_uint8(read_image(img), kps)
    as_float = run({"callable": f"{MOD}:raw_uint8", "descriptor_kind": "float"}, image_kps)
    assert as_float.dtype == np.float32 and np.array_equal(as_float, raw.astype(np.float32))
    bits = run({"callable": f"{MOD}:raw_uint8", "descriptor_kind": "binary"}, image_kps)
    assert bits.dtype == np.uint8 and np.array_equal(bits, raw)
    with pytest.raises(DataError, match=r"returned float32 .* but params\.descriptor_kind of the python descriptor \(or stack part\) is binary"):
        run({"callable": f"{MOD}:fixed", "descriptor_kind": "binary"}, image_kps)
    floats = run({"callable": f"{MOD}:fixed", "descriptor_kind": "float"}, image_kps)
    assert np.array_equal(floats, run({"callable": f"{MOD}:fixed"}, image_kps))  # floats: the kind changes nothing
    with pytest.raises(ConfigError, match=r"descriptors\.mine\.params\.descriptor_kind: 'bits' is not one of"):
        check_descriptor_params("python", {"callable": f"{MOD}:fixed", "descriptor_kind": "bits"}, "descriptors.mine.params")


def test_patches_follow_the_same_rules():
    from descbench.patches import describe as D

    patches = np.full((2, 65, 65), 128, np.uint8)
    with pytest.raises(DataError, match=r"returned uint8 for s patch 0.*say which with descriptor\.params\.descriptor_kind"):
        D.describe_patches(patches, "python", {"callable": f"{MOD}:raw_uint8"}, where="s")
    got = D.describe_patches(patches, "python", {"callable": f"{MOD}:raw_uint8", "descriptor_kind": "float"}, where="s")
    assert got.dtype == np.float32 and (got == 128).all()
    with pytest.raises(DataError, match=rf"callable '{MOD}:raises' raised ValueError on s patch 0"):
        D.describe_patches(patches, "python", {"callable": f"{MOD}:raises"}, where="s")
    with pytest.raises(DataError, match=r"returned shape \(1, 0\) for s patch 0"):
        D.describe_patches(patches, "python", {"callable": f"{MOD}:zero_dim"}, where="s")


# ----------------------------------------------------------------------------- s02: stacks of two kinds


def test_stack_of_float_and_declared_binary_python_is_a_config_error():
    parts = [{"family": "sift"}, {"family": "python", "params": {"callable": f"{MOD}:raw_uint8", "descriptor_kind": "binary"}}]
    msg = error_of(with_(descriptors={"st": {"family": "stack", "params": {"parts": parts}}}))
    assert msg.startswith("descriptors.st.params.parts: float and binary descriptors cannot be stacked"), msg
    assert "parts.0 (sift) floats, parts.1 (python) packed bits" in msg


def test_stack_part_returning_undeclared_uint8_names_descriptor_part_image(image_kps):  # s02
    parts = [{"family": "sift"}, {"family": "python", "params": {"callable": f"{MOD}:raw_uint8"}}]
    with pytest.raises(DataError) as err:
        run({"parts": parts}, image_kps, family="stack")
    msg = str(err.value)
    assert msg.startswith(f"{WHERE}: stack part 1 (python): descriptor callable '{MOD}:raw_uint8' returned uint8"), msg
    assert "descriptor_kind" in msg


def test_combine_blocks_names_the_parts_and_the_image():
    from descbench.descriptors.stack import combine_blocks

    params = {"parts": [{"family": "sift", "params": {}}, {"family": "python", "params": {}}], "weights": None,
              "block_norm": "l2", "final_norm": "l2"}
    with pytest.raises(DataError, match=r"both packed bits and floats on img\.ppm: parts\.0 \(sift\) floats \(float32\), "
                                        r"parts\.1 \(python\) packed bits \(uint8\)"):
        combine_blocks([np.ones((2, 3), np.float32), np.ones((2, 1), np.uint8)], params, "img.ppm")


# ----------------------------------------------------------------------------- pt05b: the pandas index column


def write_strips(root: Path, rows: dict[str, list[str]]) -> None:
    (root / "s").mkdir(parents=True, exist_ok=True)
    for t in PATCH_TYPES:
        (root / "s" / f"{t}.csv").write_text("".join(r + "\n" for r in rows.get(t, rows["*"])))


def pandas_rows(n: int, d: int, seed: int = 0) -> list[str]:
    """What ``pd.DataFrame(desc).to_csv(path, header=False)`` writes: the index, then the floats."""
    rng = np.random.default_rng(seed)
    return [f"{i}," + ",".join(repr(float(v)) for v in rng.random(d)) for i in range(n)]


def test_pandas_index_column_is_refused_naming_the_files(tmp_path):  # pt05b
    from descbench.patches.describe import read_hpatches_csv

    write_strips(tmp_path, {"*": pandas_rows(40, 8)})
    with pytest.raises(DataError) as err:
        read_hpatches_csv(tmp_path, "s", 40)
    msg = str(err.value)
    assert f"{tmp_path / 's' / 'ref.csv'} .. t5.csv (all 16 strips of sequence s) start with the column 0, 1, ..., 39" in msg, msg
    assert "index=False" in msg


def test_small_pandas_index_in_front_of_floats_is_refused(tmp_path):
    from descbench.patches.describe import read_hpatches_csv

    write_strips(tmp_path, {"*": pandas_rows(3, 4)})
    with pytest.raises(DataError, match=r"start with the column 0, 1, \.\.\., 2: the row index pandas writes"):
        read_hpatches_csv(tmp_path, "s", 3)


def test_index_like_integer_column_rule(tmp_path):
    """Integer descriptors: refused from 8 rows on in all 16 strips; a shorter ramp, or a column
    that is 0..N-1 in only some strips, is a descriptor value (same numbers as before)."""
    from descbench.patches.describe import read_hpatches_csv

    ramp = lambda n: [",".join(str(i + j) for j in range(3)) for i in range(n)]  # noqa: E731
    write_strips(tmp_path / "a", {"*": ramp(7)})
    got = read_hpatches_csv(tmp_path / "a", "s", 7)
    assert got["ref"][:, 0].tolist() == list(range(7))
    write_strips(tmp_path / "b", {"*": ramp(8)})
    with pytest.raises(DataError, match=r"0, 1, \.\.\., 7: the row index"):
        read_hpatches_csv(tmp_path / "b", "s", 8)
    write_strips(tmp_path / "c", {"*": ramp(8), "e1": [",".join(str(9 - i + j) for j in range(3)) for i in range(8)]})
    assert read_hpatches_csv(tmp_path / "c", "s", 8, binary_packed=True)["e1"].dtype == np.uint8
    rows = pandas_rows(5, 4)
    write_strips(tmp_path / "d", {"*": [r.split(",", 1)[1] for r in rows], "h2": rows})  # one file with the index
    with pytest.raises(DataError, match=r"h2\.csv has 5 values per row, .*ref\.csv has 4 \(.*h2\.csv starts with the column "
                                        r"0, 1, \.\.\., 4: the row index pandas"):
        read_hpatches_csv(tmp_path / "d", "s", 5)


def test_binary_packed_index_beyond_255_is_named(tmp_path):
    from descbench.patches.describe import read_hpatches_csv

    rng = np.random.default_rng(1)
    write_strips(tmp_path, {"*": [f"{i}," + ",".join(str(v) for v in rng.integers(0, 256, 4)) for i in range(300)]})
    with pytest.raises(DataError, match=r"ref\.csv starts with the column 0, 1, \.\.\., 299: the row index pandas"):
        read_hpatches_csv(tmp_path, "s", 300, binary_packed=True)


# ----------------------------------------------------------------------------- matchers (issue 25)


def test_matchers_filled_and_combined():
    from descbench.config import match_combinations

    cfg = {**base(), "descriptors": {"sift": {"family": "sift"}, "root": {"family": "rootsift"}},
           "matchers": {"mnn": {"matcher": "mnn"}, "r08": {"matcher": "nn", "params": {"ratio": 0.8}, "descriptors": ["root"]}}}
    v = validate_config(cfg, SCHEMA)
    assert v["matchers"]["r08"]["params"] == {"ratio": 0.8, "chunk_mb": 64} and v["matchers"]["mnn"]["descriptors"] is None
    assert match_combinations(v) == [("sift", "sift", "mnn"), ("sift", "root", "mnn"), ("sift", "root", "r08")]
    assert validate_config(base(), SCHEMA)["matchers"] == {} and match_combinations(validate_config(base(), SCHEMA)) == []


@pytest.mark.parametrize("matchers, fragments", [
    ({"x": {"matcher": "lowe"}}, ("matchers.x.matcher", "unknown matcher 'lowe'", "snn")),
    ({"x": {"matcher": "snn", "params": {"ratio": 0}}}, ("matchers.x.params.ratio",)),
    ({"x": {"matcher": "snn", "params": {"th": 0.8}}}, ("matchers.x.params.th",)),
    ({"x": {"params": {}}}, ("matchers.x", "matcher")),
    ({"x": {"matcher": "mnn", "descriptors": ["sfit"]}}, ("matchers.x.descriptors", "unknown descriptor 'sfit'", "sift")),
    ({"x y": {"matcher": "mnn"}}, ("matchers",)),
])
def test_bad_matchers_name_the_key(matchers, fragments):
    msg = error_of({**base(), "matchers": matchers})
    for f in fragments:
        assert f in msg, msg


@pytest.mark.parametrize("pipelines, fragments", [
    ({"estimators": {"ransca": {}}}, ("pipelines.estimators.ransca", "unknown homography estimator", "usac_magsac")),
    ({"estimators": {"ransac": {"ransac_th": 0}}}, ("pipelines.estimators.ransac.ransac_th", "> 0")),
    ({"estimators": {"ransac": {"ransac_th": []}}}, ("pipelines.estimators.ransac.ransac_th", "empty")),
    ({"estimators": {"dlt": {"ransac_th": 1}}}, ("pipelines.estimators.dlt.ransac_th",)),
    ({"estimators": {}}, ("pipelines.estimators",)),
    ({"dlt_weights": "scores"}, ("pipelines.dlt_weights", "matcher 'm'", "distance", "uniform")),
])
def test_bad_pipelines_name_the_key(pipelines, fragments):
    msg = error_of({**base(), "matchers": {"m": {"matcher": "mnn"}}, "pipelines": pipelines})
    for f in fragments:
        assert f in msg, msg


def test_poselib_missing_is_a_config_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_poselib(name, *a, **k):
        if name == "poselib":
            raise ImportError("no poselib")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_poselib)
    msg = error_of({**base(), "pipelines": {"estimators": {"poselib": {}}}})
    assert "pipelines.estimators.poselib" in msg and "pip install poselib" in msg


def _posed(**kw) -> dict:
    return {"dataset": "posed_demo", "keypoint_sets": {"sift": {"detector": "sift"}},
            "descriptors": {"sift": {"family": "sift"}}, "matchers": {"mnn": {"matcher": "mnn"}}, **kw}


def test_a_posed_dataset_without_matchers_says_to_add_one():
    msg = error_of({k: v for k, v in _posed().items() if k != "matchers"})
    assert "dataset 'posed_demo' is evaluated by relative pose from matches" in msg and "add one" in msg


def test_a_posed_dataset_needs_its_path_and_may_be_resized():
    assert "dataset 'posed' needs posed.path" in error_of(_posed(dataset="posed"))
    assert validate_config(_posed(resize={"size": 480, "side": "short"}), SCHEMA)["resize"] == {"size": 480, "side": "short"}


def test_a_posed_datasets_pose_estimators_are_checked_at_config_time():
    assert "pose.estimators.opencv.ransac_th: -1" in error_of(_posed(pose={"estimators": {"opencv": {"ransac_th": -1}}}))
    assert "unknown relative pose estimator 'ransac'" in error_of(_posed(pose={"estimators": {"ransac": {}}}))
    cfg = validate_config(_posed(), SCHEMA)
    assert cfg["pose"] == {"estimators": {"opencv": {"ransac_th": [0.5]}}, "auc_thresholds": [5, 10, 20], "depth": None,
                           "epipolar_thresholds": [0.0001, 0.0005, 0.001]}
