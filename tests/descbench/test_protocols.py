"""descbench.protocols: a preset fills its keys where the config leaves them unset or at the
schema's default; other values win and are reported; the validated config carries the result."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from descbench.config import load_schema, validate_config
from descbench.errors import ConfigError
from descbench.protocols import PROTOCOLS, apply_protocol, describe
from tests.conftest import raises_naming

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def shipped() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_gluefactory_hpatches_on_the_shipped_config():
    """config.yaml spells out hpatches.subset: full (the default): the preset's d2net108 wins."""
    cfg = validate_config({**shipped(), "protocol": "gluefactory_hpatches"}, SCHEMA)
    assert cfg["hpatches"]["subset"] == "d2net108"
    assert cfg["resize"] == {"size": 480, "side": "short"}
    assert cfg["pipelines"]["estimators"]["dlt"] == {}
    assert cfg["pipelines"]["estimators"]["poselib"]["ransac_th"] == 1.0 and set(cfg["pipelines"]["estimators"]) == {"dlt", "poselib"}
    assert cfg["pipelines"]["auc_thresholds"] == [1, 3, 5] and cfg["pipelines"]["precision_thresholds"] == [1, 3]
    plain = validate_config(shipped(), SCHEMA)
    assert plain["hpatches"]["subset"] == "full" and "resize" not in plain and "protocol" not in plain
    assert set(plain["pipelines"]["estimators"]) == {"dlt", "ransac"}


def test_a_value_other_than_the_default_wins_and_is_reported():
    raw = {**shipped(), "protocol": "gluefactory_hpatches", "resize": {"size": 640, "side": "long"},
           "pipelines": {"estimators": {"usac_magsac": {"ransac_th": [1.0, 2.0]}}}}
    out, deviations = apply_protocol(raw, load_schema(SCHEMA))
    assert deviations == ["resize", "pipelines.estimators"]
    assert out["resize"] == {"size": 640, "side": "long"} and out["hpatches"]["subset"] == "d2net108"
    assert out["pipelines"]["estimators"] == {"usac_magsac": {"ransac_th": [1.0, 2.0]}}
    assert out["pipelines"]["auc_thresholds"] == [1, 3, 5]
    assert raw["hpatches"]["subset"] == "full" and "auc_thresholds" not in raw["pipelines"]  # the input is not changed
    assert "overrides resize, pipelines.estimators" in describe("gluefactory_hpatches", deviations)
    assert describe("gluefactory_hpatches", []).startswith("protocol gluefactory_hpatches: hpatches.subset='d2net108'")


def test_no_protocol_leaves_the_config_alone():
    raw = shipped()
    assert apply_protocol(raw, load_schema(SCHEMA)) == (raw, [])
    assert apply_protocol({**raw, "protocol": None}, load_schema(SCHEMA))[0]["hpatches"]["subset"] == "full"


def test_every_preset_key_is_a_config_key_with_a_valid_value():
    """Each preset validates on its own (a key the schema does not know would be an error there;
    a posed preset needs a matcher, which the shipped config does not have)."""
    for name in PROTOCOLS:
        validate_config({**shipped(), "protocol": name, "matchers": {"mnn": {"matcher": "mnn"}}}, SCHEMA)


@pytest.mark.parametrize("name, estimator, depth, resize", [
    ("gluefactory_megadepth1500", "poselib", True, {"size": 1600, "side": "long"}),
    ("gluefactory_scannet1500", "opencv", False, None)])
def test_the_pose_presets_are_glue_factorys_benchmark_defaults(name, estimator, depth, resize):
    """glue-factory's eval/megadepth1500.py and scannet1500.py default_conf: poselib / opencv at
    ransac_th 1.0, AUC at 5/10/20 degrees, depth metrics where the set has depth maps; its model
    configs' resize 1600 (long side) for MegaDepth-1500, ScanNet-1500 as stored."""
    cfg = validate_config({**shipped(), "protocol": name, "matchers": {"mnn": {"matcher": "mnn"}}}, SCHEMA)
    set_name = name.split("_", 1)[1]
    assert cfg["dataset"] == "posed" and cfg["posed"]["path"] == f"data/{set_name}"
    assert cfg["pose"]["estimators"] == {estimator: {"ransac_th": 1.0}} and cfg["pose"]["depth"] is depth
    assert cfg["pose"]["auc_thresholds"] == [5, 10, 20] and cfg["pose"]["epipolar_thresholds"] == [0.0001, 0.0005, 0.001]
    assert cfg.get("resize") == resize
    # the posed demo keeps its dataset under the preset (a non-default value wins, reported)
    out, deviations = apply_protocol({"protocol": name, "dataset": "posed_demo"}, load_schema(SCHEMA))
    assert out["dataset"] == "posed_demo" and deviations == ["dataset"]


@pytest.mark.bad_input
def test_unknown_protocol_names_the_known_ones():
    raises_naming(lambda: validate_config({**shipped(), "protocol": "gluefactory"}, SCHEMA), "'gluefactory'",
                  "gluefactory_hpatches", exc=ConfigError)


@pytest.mark.bad_input
def test_resize_refuses_keypoints_read_from_files():
    cfg = {**shipped(), "resize": {"size": 480, "side": "short"}}
    cfg["keypoint_sets"] = {**cfg["keypoint_sets"], "net": {"detector": "precomputed", "params": {"method": "d2-net"}}}
    raises_naming(lambda: validate_config(cfg, SCHEMA), "keypoint_sets.net", "original images", "remove resize",
                  exc=ConfigError)
    raises_naming(lambda: validate_config({**shipped(), "resize": {"size": 480}}, SCHEMA), "resize", exc=ConfigError)


def test_docstring_examples_run():
    import doctest

    from descbench import protocols as M

    failed, attempted = doctest.testmod(M)
    assert failed == 0 and attempted >= 3
