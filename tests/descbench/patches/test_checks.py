"""descbench.patches.checks: the rules of the ``patches`` section that the schema cannot state,
called on the repository's validated config.yaml."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from descbench.config import validate_config
from descbench.errors import ConfigError
from descbench.patches.checks import CENTRE_KEYPOINTS, check_source
from descbench.patches.describe import HPATCHES_BENCHMARK

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def cfg() -> dict:
    return validate_config(yaml.safe_load((ROOT / "config.yaml").read_text()), SCHEMA)


def test_the_shipped_config_passes_and_the_centre_keypoints(cfg):
    check_source(cfg)
    assert CENTRE_KEYPOINTS == {"hpatches_benchmark": HPATCHES_BENCHMARK, "upright": {"angle": 0.0, "sift_octave": "size"}}


@pytest.mark.bad_input
def test_a_folder_source_needs_its_path(cfg):
    bad = copy.deepcopy(cfg)
    bad["patches"]["source"] = "folder"
    bad["patches"]["path"] = None
    with pytest.raises(ConfigError, match=r"^patches.source 'folder' needs patches.path"):
        check_source(bad)
    bad["patches"]["path"] = "/data/patches"
    check_source(bad)


@pytest.mark.bad_input
def test_a_listed_descriptor_must_be_defined(cfg):
    bad = copy.deepcopy(cfg)
    bad["patches"]["descriptors"] = ["sift", "nosuch"]
    with pytest.raises(ConfigError, match=r"^patches.descriptors lists 'nosuch', which is neither in descriptors: nor in patches.csv:"):
        check_source(bad)
    bad["patches"]["csv"] = {"nosuch": {"path": "x"}}
    check_source(bad)  # a CSV descriptor is defined by its files


@pytest.mark.bad_input
def test_a_family_that_cannot_describe_patches_is_named(cfg):
    bad = copy.deepcopy(cfg)
    bad["descriptors"]["pre"] = {"family": "precomputed", "params": {}}
    bad["patches"]["descriptors"] = ["pre"]
    with pytest.raises(ConfigError, match=r"^patches.descriptors: 'pre' \(family precomputed\) cannot describe patches: it "):
        check_source(bad)


@pytest.mark.bad_input
def test_the_workbench_patch_benchmark_refuses_packed_bits_before_any_job(cfg):
    """patches.workbench.enabled compares float32 rows (descbench.patches.workbench): a descriptor
    known to give packed bits (a binary family, a CSV with binary_packed) is refused, naming it."""
    bad = copy.deepcopy(cfg)
    bad["descriptors"]["orb"] = {"family": "orb", "params": {}}
    bad["patches"]["descriptors"] = ["sift", "orb"]
    check_source(bad)  # the workbench's benchmark is off: orb is fine for the others
    bad["patches"]["workbench"]["enabled"] = True
    with pytest.raises(ConfigError, match=r"^patches.workbench.enabled: .*patches.descriptors \['orb'\] give packed bits.*"
                                          r"remove them from patches.descriptors or set patches.workbench.enabled: false"):
        check_source(bad)
    bad["patches"]["descriptors"] = ["sift", "mine"]
    bad["patches"]["csv"] = {"mine": {"path": "x", "binary_packed": True}}
    with pytest.raises(ConfigError, match=r"\['mine'\] give packed bits"):
        check_source(bad)
    bad["patches"]["csv"]["mine"]["binary_packed"] = False
    check_source(bad)


def test_the_schema_offers_the_module_s_precisions_and_groupings():
    from descbench.patches.workbench import GROUPINGS, PRECISIONS

    props = yaml.safe_load(SCHEMA.read_text())["properties"]["patches"]["properties"]["workbench"]["properties"]
    assert tuple(props["precision"]["enum"]) == PRECISIONS and tuple(props["grouping"]["enum"]) == GROUPINGS
    assert props["enabled"]["default"] is False  # existing runs do not change


def composite_cfg(cfg, component_family="sift"):
    out = copy.deepcopy(cfg)
    out["descriptors"]["other"] = {"family": component_family, "params": {}}
    out["descriptors"]["fused"] = {"family": "composite", "keypoint_sets": ["sift"],
                                   "params": {"aggregation": "concatenate", "arithmetic": "workbench",
                                              "components": [{"descriptor": "sift"}, {"descriptor": "other"}]}}
    out["patches"]["descriptors"] = ["fused"]
    return out


def test_a_composite_describes_patches_through_its_components(cfg):
    from descbench.patches.checks import patch_components

    ok = composite_cfg(cfg)
    check_source(ok)
    assert list(patch_components(ok, "fused")) == ["sift", "other"]
    assert patch_components(ok, "fused")["other"] == {"family": "sift", "params": {}}


@pytest.mark.bad_input
def test_a_composite_with_a_component_that_cannot_describe_patches_names_it(cfg):
    with pytest.raises(ConfigError, match=r"^patches.descriptors: 'fused' \(component 'other' of 'fused', family rgbsift\) "
                                          r"cannot describe patches"):
        check_source(composite_cfg(cfg, "rgbsift"))
