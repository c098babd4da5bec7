"""Sweeps: grid expansion into named variants, validated like hand-written ones, and their table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from descbench.config import validate_config
from descbench.errors import ConfigError
from descbench.sweeps import expand_sweeps, sweep_columns

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
BASE = {"keypoint_sets": {"sift": {"detector": "sift"}, "orb": {"detector": "orb"}},
        "descriptors": {"sift": {"family": "sift"}, "mine": {"family": "sift", "keypoint_sets": ["sift"]}}}


def test_grid_product_names_and_values():
    cfg, rec = expand_sweeps({**BASE, "sweeps": {"b": {"keypoint_set": "sift",
                                                      "grid": {"border_px": [20, 40], "params.sigma": [1.2, 1.6]}}}})
    assert rec == {"b": {"sift-b-0": {"border_px": 20, "params.sigma": 1.2}, "sift-b-1": {"border_px": 20, "params.sigma": 1.6},
                         "sift-b-2": {"border_px": 40, "params.sigma": 1.2}, "sift-b-3": {"border_px": 40, "params.sigma": 1.6}}}
    assert cfg["keypoint_sets"]["sift-b-3"] == {"detector": "sift", "border_px": 40, "params": {"sigma": 1.6}}
    assert cfg["keypoint_sets"]["sift"] == {"detector": "sift"}  # the base is kept as configured
    assert cfg["descriptors"]["mine"]["keypoint_sets"] == ["sift", "sift-b-0", "sift-b-1", "sift-b-2", "sift-b-3"]
    assert "sweeps" not in cfg


def test_validated_config_records_the_variants_and_fills_their_defaults():
    cfg = validate_config({**BASE, "sweeps": {"d": {"descriptor": "sift", "grid": {"params.convention": ["opencv", "workbench"]}}}}, SCHEMA)
    assert cfg["descriptors"]["sift-d-1"]["params"]["convention"] == "workbench"
    assert cfg["sweeps"]["d"]["variants"] == {"sift-d-0": {"params.convention": "opencv"}, "sift-d-1": {"params.convention": "workbench"}}
    assert sweep_columns(cfg["sweeps"], "orb", "sift-d-1") == {"sweep": "d", "sweep:params.convention": "workbench"}
    assert sweep_columns(cfg["sweeps"], "orb", "sift") == {}


@pytest.mark.bad_input
@pytest.mark.parametrize("sweeps, message", [
    ({"b": {"keypoint_set": "nope", "grid": {"border_px": [1]}}}, r"sweeps\.b\.keypoint_set: unknown keypoint set 'nope'"),
    ({"b": {"keypoint_set": "sift", "descriptor": "sift", "grid": {}}}, r"exactly one of keypoint_set / descriptor"),
    ({"b": {"keypoint_set": "sift", "grid": {"border_px": []}}}, r"sweeps\.b\.grid\.border_px: give a non-empty list"),
    ({"b": {"keypoint_set": "sift", "grid": {"params.sigmaa": [1.0]}}}, r"unknown config key 'sweeps\.b\.grid\.params\.sigmaa'"),
    ({"b": {"keypoint_set": "sift", "grid": {"border_px": [-1]}}}, r"'sweeps\.b\.grid\.border_px\[0\]'.*'sift-b-0' is variant 0"),
])
def test_bad_sweeps_name_the_key(sweeps, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({**BASE, "sweeps": sweeps}, SCHEMA)


@pytest.mark.e2e
def test_two_by_two_sweep_in_one_run_and_one_table(tmp_path):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["verification"]["enabled"] = False
    cfg["matching"]["enabled"] = False
    cfg["keypoint_sets"]["sift"]["max_keypoints"] = 300
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    cfg["sweeps"] = {"grid": {"keypoint_set": "sift", "grid": {"border_px": [20, 60], "params.contrast_threshold": [0.03, 0.06]}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "2"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    t = pd.read_csv(tmp_path / "results" / "demo" / "report" / "comparison.csv")
    assert t.keypoint_set.tolist() == ["sift", "sift-grid-0", "sift-grid-1", "sift-grid-2", "sift-grid-3"]
    assert t["sweep:border_px"].tolist()[1:] == [20, 20, 60, 60]
    assert t["sweep:params.contrast_threshold"].tolist()[1:] == [0.03, 0.06, 0.03, 0.06]
    assert pd.isna(t["sweep"][0]) and (t["sweep"][1:] == "grid").all()
    # a larger border leaves fewer queries; a higher contrast threshold fewer keypoints
    q = dict(zip(t.keypoint_set, t.total_queries_processed))
    assert q["sift-grid-2"] < q["sift-grid-0"] and q["sift-grid-1"] <= q["sift-grid-0"]
    print(t[["descriptor", "keypoint_set", "sweep", "sweep:border_px", "sweep:params.contrast_threshold", "true_map_micro",
             "true_map_micro_ci_low", "true_map_micro_ci_high", "total_queries_processed"]].to_markdown(index=False))


@pytest.mark.e2e
def test_scoring_sweep_reuses_the_descriptors_and_scores_side_by_side(tmp_path):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["matching"]["enabled"] = False
    cfg["keypoint_sets"]["sift"]["max_keypoints"] = 300
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    cfg["sweeps"] = {"tau": {"descriptor": "sift", "grid": {"scoring.tau_px": [1.0, 5.0]}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    smk = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path)]
    dry = subprocess.run(smk + ["-n"], capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-2000:]
    from smkrun import job_counts

    counts = job_counts(dry.stdout + dry.stderr)
    assert counts["descriptors"] == 1 and counts["score"] == 3 and counts["distractors"] == 3, counts  # features once (1 batch)
    res = subprocess.run(smk + ["--cores", "2"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    t = pd.read_csv(tmp_path / "results" / "demo" / "report" / "comparison.csv").set_index("descriptor")
    assert t["sweep:scoring.tau_px"].loc[["sift-tau-0", "sift-tau-1"]].tolist() == [1.0, 5.0]
    # a larger tolerance gives more queries a ground truth: fewer are excluded
    q = t.total_queries_excluded
    assert q["sift-tau-0"] > q["sift"] > q["sift-tau-1"]  # tau 1 < 3 (default) < 5
    assert not (tmp_path / "results/demo/descriptors/sift/sift-tau-0").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("descs, sweeps, message", [
    ({"t": {"family": "sift", "overrides": {"scoring": {"tauu": 2}}}}, {}, r"unknown config key 'descriptors\.t\.overrides\.scoring\.tauu'"),
    ({"t": {"family": "sift", "overrides": {"scoring": {"tau_px": -1}}}}, {}, r"descriptors\.t\.overrides\.scoring\.tau_px"),
    ({"t": {"family": "sift", "overrides": {"matching": {"enabled": False}}}}, {}, r"other than 'enabled'"),
    ({"t": {"family": "sift", "overrides": {"report": {}}}}, {}, r"unknown config key 'descriptors\.t\.overrides\.report'"),
    ({"t": {"family": "rootsift", "features_of": "sift"}}, {}, r"descriptors\.t\.features_of: 'sift' computes other descriptors"),
    ({}, {"b": {"keypoint_set": "sift", "grid": {"scoring.tau_px": [1.0]}}}, r"sweeps\.b\.grid\.scoring\.tau_px: scoring settings are swept per descriptor"),
    ({"t": {"family": "sift", "overrides": {"scoring": {"gt": "all_within_tau", "tie_policy": "half"}}}}, {}, r"only for|defined"),
])
def test_bad_overrides_name_the_key(descs, sweeps, message):
    cfg = {**BASE, "descriptors": {**BASE["descriptors"], **descs}, "sweeps": sweeps}
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg, SCHEMA)
