"""Config validation: unknown keys, types, cross-key rules, defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from descbench.config import combinations, validate_config
from descbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def base() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_shipped_config_is_valid_and_defaults_fill():
    cfg = validate_config(base(), SCHEMA)
    assert cfg["dataset"] == "demo"
    assert cfg["keypoint_sets"]["sift"]["border_px"] == 40
    assert combinations(cfg) == [("sift", "sift"), ("sift", "rootsift")]
    minimal = validate_config({"keypoint_sets": {"k": {"detector": "sift"}}, "descriptors": {"d": {"family": "sift"}}}, SCHEMA)
    assert minimal["scoring"] == {"tau_px": 3.0, "gt": "closest_oriented", "tie_policy": "expected", "chunk_mb": 64, "threads": 1}
    assert minimal["execution"] == {"scenes_per_job": 8, "numba_cache_dir": None}
    assert minimal["keypoint_sets"]["k"]["params"]["sigma"] == 1.6


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda c: c.update(datset="demo"), "unknown config key 'datset' (did you mean 'dataset'?)"),
        (lambda c: c["scoring"].update(tau=3), "unknown config key 'scoring.tau' (did you mean 'scoring.tau_px'?)"),
        (lambda c: c["keypoint_sets"]["sift"].update(border=40), "unknown config key 'keypoint_sets.sift.border'"),
        (lambda c: c["keypoint_sets"]["sift"]["params"].update(contrast=0.1), "keypoint_sets.sift.params.contrast"),
        (lambda c: c["descriptors"]["sift"].update(params={"scale": 2}), "descriptors.sift.params.scale"),
    ],
)
def test_unknown_keys_are_named_with_the_allowed_ones(mutate, needle):
    cfg = base()
    mutate(cfg)
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, SCHEMA)
    assert needle in str(exc.value)
    assert "allowed keys" in str(exc.value) or "takes:" in str(exc.value)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda c: c.update(dataset="oxford"), "dataset"),
        (lambda c: c["scoring"].update(tau_px=-1), "scoring.tau_px"),
        (lambda c: c["scoring"].update(gt="all_within_tau", tie_policy="half"), "only for scoring.gt 'closest'"),
        (lambda c: c["keypoint_sets"]["sift"]["params"].update(sigma="big"), "keypoint_sets.sift.params.sigma"),
        (lambda c: c["descriptors"]["sift"].update(family="surfx"), "descriptors.sift.family"),
        (lambda c: c["descriptors"]["sift"].update(keypoint_sets=["nope"]), "unknown keypoint set 'nope'"),
        (lambda c: c["descriptors"].update(mine={"family": "precomputed"}), "must list its keypoint set"),
        (lambda c: c["descriptors"].update(mine={"family": "precomputed", "keypoint_sets": ["sift"]}), "detector: precomputed"),
        (lambda c: c.update(dataset="folder"), "folder.path"),
        (lambda c: c["keypoint_sets"].update({"bad name": {"detector": "sift"}}), "bad name"),
    ],
)
def test_invalid_values_are_errors(mutate, needle):
    cfg = base()
    mutate(cfg)
    with pytest.raises(ConfigError, match=None) as exc:
        validate_config(cfg, SCHEMA)
    assert needle in str(exc.value)


@pytest.mark.bad_input
def test_precomputed_keypoint_set_requires_method():
    cfg = base()
    cfg["keypoint_sets"]["net"] = {"detector": "precomputed", "params": {}}
    with pytest.raises(ConfigError, match="method"):
        validate_config(cfg, SCHEMA)
    cfg["keypoint_sets"]["net"]["params"] = {"method": "d2-net"}
    cfg["descriptors"]["net"] = {"family": "precomputed", "keypoint_sets": ["net"]}
    out = validate_config(cfg, SCHEMA)
    assert ("net", "net") in combinations(out) and ("net", "sift") in combinations(out)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda c: c["verification"].update(candidates="near"), "verification.candidates"),
        (lambda c: c["verification"].update(distractors_per_scene="some"), "verification.distractors_per_scene"),
        (lambda c: c["verification"].update(hard_negative="ignore"), "did you mean 'verification.hard_negatives'"),
        (lambda c: c["verification"].update(candidates="all", ap_convention="vlfeat"), "needs the materialised pooled list"),
        (lambda c: c["scoring"].update(tie_policy="half"), "set verification.enabled: false"),
        (lambda c: c["matching"].update(classifier_matchers=["nn", "knn"]), "matching.classifier_matchers"),
        (lambda c: c["matching"].update(mma_thresholds=[]), "matching.mma_thresholds"),
    ],
)
def test_verification_and_matching_options_are_checked(mutate, needle):
    cfg = base()
    mutate(cfg)
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        validate_config(cfg, SCHEMA)


def test_verification_defaults_follow_the_protocol():
    cfg = validate_config({"keypoint_sets": {"k": {"detector": "sift"}}, "descriptors": {"d": {"family": "sift"}}}, SCHEMA)
    v = cfg["verification"]
    assert (v["distractor_scenes"], v["distractors_per_scene"], v["candidates"], v["hard_negatives"], v["ap_convention"]) == (
        10, 20, "nearest", "negative", "step")
    assert cfg["matching"]["mma_thresholds"] == list(range(1, 11)) and cfg["matching"]["classifier_epsilon_px"] == 2.0
    ok = base()
    ok["verification"]["distractors_per_scene"] = "all"
    assert validate_config(ok, SCHEMA)["verification"]["distractors_per_scene"] == "all"


def test_a_config_with_any_section_missing_gets_the_defaults():
    """`snakemake -s .../Snakefile -d DIR` with a short config.yaml: every section has defaults
    (keypoint_sets: SIFT; descriptors: sift), never a bare KeyError."""
    shipped = validate_config(yaml.safe_load((ROOT / "config.yaml").read_text()), SCHEMA)
    for minimal in ({}, None, {"dataset": "demo"}):
        cfg = validate_config(minimal, SCHEMA)
        assert set(cfg) == set(shipped)
        assert cfg["keypoint_sets"]["sift"] == shipped["keypoint_sets"]["sift"]
        assert cfg["descriptors"] == {"sift": shipped["descriptors"]["sift"]}
        assert cfg["scoring"] == shipped["scoring"] and cfg["verification"] == shipped["verification"]


@pytest.mark.e2e
def test_snakefile_elsewhere_with_a_one_line_config(tmp_path):
    import subprocess
    import sys

    (tmp_path / "config.yaml").write_text("dataset: demo\n")
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "keypoints" in res.stdout + res.stderr


def test_a_pipelines_weights_name_its_matchers_network():
    """learned_weights with a matcher: its network's label joins the descriptor's and the sets'
    (a pipeline row of LightGlue on random weights says RANDOM); a matcher without a network adds nothing."""
    from descbench.config import learned_weights

    cfg = validate_config({"dataset": "folder", "folder": {"path": "data"}, "descriptors": {"sift": {"family": "sift"}},
                           "matchers": {"lg": {"matcher": "lightglue", "descriptors": ["sift"],
                                               "params": {"features": "sift", "weights": "random", "weights_seed": 3}},
                                        "mnn": {"matcher": "mnn"}}}, SCHEMA)
    assert learned_weights(cfg, "sift", "sift") == ""
    assert learned_weights(cfg, "sift", "sift", "mnn") == ""
    assert learned_weights(cfg, "sift", "sift", "lg") == "matcher lg: RANDOM(seed=3)"


def test_shared_base_is_the_sift_descriptor_at_rootsifts_params_on_the_same_set():
    from descbench.config import shared_base

    cfg = validate_config(base(), SCHEMA)  # sift + rootsift on sift
    assert shared_base(cfg, "sift", "rootsift") == "sift" and shared_base(cfg, "sift", "sift") is None
    raw = base()
    raw["descriptors"]["sift"]["params"] = {"convention": "vsift"}  # other rows: rootsift computes its own
    assert shared_base(validate_config(raw, SCHEMA), "sift", "rootsift") is None
    raw = base()
    raw["keypoint_sets"]["orb"] = {"detector": "orb"}
    raw["descriptors"]["sift"]["keypoint_sets"] = ["orb"]  # sift not on 'sift': nothing to share there
    cfg = validate_config(raw, SCHEMA)
    assert shared_base(cfg, "sift", "rootsift") is None and shared_base(cfg, "orb", "rootsift") == "sift"


def test_shared_parts_name_the_descriptors_that_give_a_stacks_parts_on_the_same_set():
    from descbench.config import shared_parts

    raw = base()  # sift + rootsift on sift
    raw["descriptors"]["stack"] = {"family": "stack", "params": {"parts": [
        {"family": "rootsift"}, {"family": "sift", "params": {"convention": "vsift"}}, {"family": "sift"}]}}
    cfg = validate_config(raw, SCHEMA)
    assert shared_parts(cfg, "sift", "stack") == ["rootsift", None, "sift"]  # a part's params filled as the descriptor's
    assert shared_parts(cfg, "sift", "sift") is None  # not a stack
    raw["descriptors"]["stack"]["params"]["parts"] = [{"family": "sift", "params": {"convention": "vsift"}},
                                                      {"family": "rootsift", "params": {}}]
    raw["descriptors"]["vsift"] = {"family": "sift", "params": {"convention": "vsift"}, "keypoint_sets": ["sift"]}
    raw["descriptors"]["rootsift"]["keypoint_sets"] = ["orb"]
    raw["keypoint_sets"]["orb"] = {"detector": "orb"}
    cfg = validate_config(raw, SCHEMA)
    assert shared_parts(cfg, "sift", "stack") == ["vsift", None]  # rootsift is not evaluated on 'sift'
    assert shared_parts(cfg, "orb", "stack") == [None, "rootsift"]
    del raw["descriptors"]["vsift"]
    raw["descriptors"]["rootsift"]["keypoint_sets"] = ["sift"]
    raw["descriptors"]["rootsift"]["family"] = "sift"  # now identical to 'sift': still another name
    cfg = validate_config(raw, SCHEMA)
    assert shared_parts(cfg, "sift", "stack") is None  # no part matches: nothing to read


def test_shared_parts_name_the_descriptor_that_gives_a_dsps_rows_at_scale_1():
    """A dsp's base at scale 1 (descriptors.pooling.dsp_shareable) is read from a descriptor of the
    config with exactly its family and params on the same set; not where its rows there are others."""
    from descbench.config import shared_parts

    raw = base()  # sift + rootsift on sift
    raw["descriptors"]["dsp"] = {"family": "dsp", "params": {"base": {"family": "sift"}}}
    raw["descriptors"]["dsp_rs"] = {"family": "dsp", "params": {"base": {"family": "rootsift"}, "scales": [0.5, 1]}}
    raw["descriptors"]["dsp_far"] = {"family": "dsp", "params": {"base": {"family": "sift"}, "scales": [1.5, 2]}}
    raw["descriptors"]["dsp_wb"] = {"family": "dsp", "params": {"base": {"family": "sift", "params": {"convention": "workbench"}}}}
    raw["descriptors"]["wb"] = {"family": "sift", "params": {"convention": "workbench"}}
    cfg = validate_config(raw, SCHEMA)
    assert shared_parts(cfg, "sift", "dsp") == ["sift"]
    assert shared_parts(cfg, "sift", "dsp_rs") == ["rootsift"]
    assert shared_parts(cfg, "sift", "dsp_far") is None  # no scale 1
    assert shared_parts(cfg, "sift", "dsp_wb") is None  # pools the rows before the convention's L2 step


def test_a_joint_networks_part_is_computed_by_the_stack_not_read():
    """A joint network's descriptor on its own keypoints holds its keypoint job's rows, not what
    computing the part gives: a stack computes such a part itself (no number moves)."""
    from descbench.config import shared_parts

    raw = base()
    raw["keypoint_sets"] = {"sp": {"detector": "superpoint", "params": {"weights": "random"}}}
    raw["descriptors"] = {"sp": {"family": "superpoint", "params": {"weights": "random"}},
                          "sift": {"family": "sift"},
                          "stack": {"family": "stack", "params": {"parts": [{"family": "superpoint", "params": {"weights": "random"}},
                                                                            {"family": "sift"}]}}}
    cfg = validate_config(raw, SCHEMA)
    assert cfg["descriptors"]["stack"]["params"]["parts"][0]["params"] == cfg["descriptors"]["sp"]["params"]
    assert shared_parts(cfg, "sp", "stack") == [None, "sift"]


def test_a_sweep_variant_without_files_of_its_own_is_never_a_shared_base():
    """A variant that differs from its base only in how it is scored reads its base's files
    (features_of): rootsift and a stack read the base's files, never the variant's (it has none)."""
    from descbench.config import shared_base, shared_parts

    raw = base()
    raw["descriptors"] = {"rootsift": {"family": "rootsift"},
                          "stack": {"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "rootsift"}]}},
                          "sift": {"family": "sift"}}
    raw["sweeps"] = {"tau": {"descriptor": "sift", "grid": {"scoring.tau_px": [1.0, 5.0]}}}
    cfg = validate_config(raw, SCHEMA)
    variants = [n for n, d in cfg["descriptors"].items() if d.get("features_of") == "sift"]
    assert len(variants) == 2
    cfg["descriptors"] = {**{v: cfg["descriptors"][v] for v in variants}, **cfg["descriptors"]}  # variants first
    assert shared_base(cfg, "sift", "rootsift") == "sift"
    assert shared_parts(cfg, "sift", "stack") == ["sift", "rootsift"]


def test_a_supplied_descriptor_replaces_the_configs_own():
    """The Python API's validation: the config's descriptors and sweeps are not checked (a broken
    one is no error), the supplied name is (the schema's name rule), and the result has no
    descriptor for the caller to fill."""
    from descbench.config import validate_config_for_supplied_descriptor

    raw = {"keypoint_sets": {"k": {"detector": "sift"}},
           "descriptors": {"broken": {"family": "no_such_family"}},
           "sweeps": {"s": {"base": "broken", "grid": {"params.x": [1, 2]}}}}
    cfg = validate_config_for_supplied_descriptor(raw, SCHEMA, "mine")
    assert cfg["descriptors"] == {}
    assert not cfg.get("sweeps")
    assert cfg["keypoint_sets"]["k"]["detector"] == "sift"
    with pytest.raises(ConfigError, match="descriptors"):
        validate_config_for_supplied_descriptor(raw, SCHEMA, "bad name/with slash")


def test_the_inspector_page_shows_the_configs_choice_or_its_first_set_and_two_descriptors():
    from descbench.config import inspector_page

    raw = {"keypoint_sets": {"k": {"detector": "sift"}, "o": {"detector": "orb"}},
           "descriptors": {"d": {"family": "sift"}, "e": {"family": "rootsift"}, "f": {"family": "sift", "params": {"convention": "workbench"}}}}
    assert inspector_page(validate_config(raw, SCHEMA)) == ("k", ["d", "e"], "mma_at_3")
    chosen = validate_config({**raw, "inspector": {"keypoint_set": "o", "descriptors": ["f"], "metric": "corner_error"}}, SCHEMA)
    assert inspector_page(chosen) == ("o", ["f"], "corner_error")
    # the default metric: the MMA at the threshold nearest scoring.tau_px (the smaller of two as near)
    near = {**raw, "scoring": {"tau_px": 2.5}, "matching": {"mma_thresholds": [5, 1.5, 3, 2]}}
    assert inspector_page(validate_config(near, SCHEMA)).metric == "mma_at_2"
    assert inspector_page(validate_config({**near, "matching": {"mma_thresholds": [5, 1.5]}}, SCHEMA)).metric == "mma_at_1.5"
    assert inspector_page(validate_config({**raw, "inspector": {"enabled": False}}, SCHEMA)) is None
    assert inspector_page(validate_config({**raw, "matching": {"enabled": False}}, SCHEMA)) is None  # null: with matching only


@pytest.mark.bad_input
@pytest.mark.parametrize("inspector, matching, message", [
    ({"enabled": True}, False, "inspector.enabled is true, but .* matching.enabled is false"),
    ({"keypoint_set": "x"}, True, "inspector.keypoint_set 'x' is not a keypoint set the config evaluates; use one of k"),
    ({"descriptors": ["d", "x"]}, True, "inspector.descriptors: 'x' is not a descriptor evaluated on keypoint set 'k'; use one or two of d, e"),
    ({"metric": "mma_at_11"}, True, "inspector.metric 'mma_at_11' is not a column .*; use one of n_keypoints_1, "),
    ({"descriptors": ["d", "e", "d"]}, True, "inspector.descriptors"),
    ({"max_pairs": 0}, True, "inspector.max_pairs"),
])
def test_a_bad_inspector_choice_is_an_error_naming_the_key(inspector, matching, message):
    raw = {"keypoint_sets": {"k": {"detector": "sift"}}, "descriptors": {"d": {"family": "sift"}, "e": {"family": "rootsift"}},
           "matching": {"enabled": matching}, "inspector": inspector}
    with pytest.raises(ConfigError, match=message):
        validate_config(raw, SCHEMA)
