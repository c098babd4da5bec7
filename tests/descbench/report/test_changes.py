"""Changing a setting in place is said on the terminal, with the old and new values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from descbench.report.changes import changed_settings

ROOT = Path(__file__).resolve().parents[3]


def test_changed_settings_by_hand():
    old = {"keypoint_sets": {"sift": {"border_px": 40, "params": {"sigma": 1.6}}, "gone": {"border_px": 1}},
           "descriptors": {"d": {"family": "sift"}}, "scoring": {"tau_px": 3.0}}
    new = {"keypoint_sets": {"sift": {"border_px": 60, "params": {"sigma": 1.6}}, "added": {"border_px": 2}},
           "descriptors": {"d": {"family": "rootsift"}}, "scoring": {"tau_px": 3.0}}
    assert changed_settings(old, new) == ["keypoint_sets.sift.border_px: 40 -> 60", "descriptors.d.family: 'sift' -> 'rootsift'"]
    assert changed_settings(new, new) == []


@pytest.mark.e2e
def test_in_place_change_is_announced(tmp_path):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    cfg["verification"]["enabled"] = False
    cfg["matching"]["enabled"] = False
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    smk = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "2"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert subprocess.run(smk, capture_output=True, text=True, timeout=900).returncode == 0
    cfg["keypoint_sets"]["sift"]["border_px"] = 50
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = subprocess.run(smk + ["-n"], capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert "keypoint_sets.sift.border_px: 40 -> 50" in out and "--config experiment=<name>" in out
