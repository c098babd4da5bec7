"""config/seed_study.yaml runs with one command and gives the seed's table layout; every shipped
study config (config/*.yaml) writes into a results folder of its own."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from snakemake.utils import update_config

from descbench.config import validate_config
from descbench.datasets import experiment_name
from smkrun import snakemake_cmd

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    ("SIFT", "sift_all"), ("SIFT", "sift_scale"), ("SIFT", "sift_surf_intersection"),
    *((d, s) for d in ("DSPSIFT_V2", "RGBSIFT", "DSPRGBSIFT_V2") for s in ("sift_scale", "sift_surf_intersection")),
    ("SURF", "surf_sift_intersection"), ("SURF", "sift_surf_intersection"),
}


@pytest.mark.e2e
def test_seed_study_runs_with_one_command(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    res = subprocess.run(
        snakemake_cmd(tmp_path, "--cores", "2",
         "--configfile", "config/seed_study.yaml", "--replace-workflow-config", "--config", "scenes=[i_rocket,v_coins]"),
        capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    report = tmp_path / "results" / "seed_study" / "report"
    assert not (tmp_path / "results" / "demo").exists()  # the default config's folder is left alone
    table = pd.read_csv(report / "comparison.csv")
    assert set(zip(table.descriptor, table.keypoint_set)) == EXPECTED  # config.yaml's sets/descriptors not merged in
    for col in ("true_map_micro", "viewpoint_map", "illumination_map", "workbench_verification_map"):
        assert table[col].between(0, 1).all(), col
    # results.sqlite: the workbench-named columns hold the workbench's numbers under its convention,
    # descbench's own are *_descbench (descbench.report.database.DW_BOJANIC)
    with sqlite3.connect(tmp_path / "results" / "seed_study" / "results.sqlite") as con:
        db = pd.read_sql("SELECT * FROM results", con)
    for dw, wb in (("keypoint_verification_ap", "workbench_verification_map"), ("keypoint_retrieval_ap", "workbench_retrieval_map"),
                   ("retrieval_viewpoint_ap", "workbench_retrieval_viewpoint_map")):
        assert db[dw].tolist() == db[wb].tolist() == table[wb].tolist(), dw
    assert db.keypoint_verification_ap_descbench.tolist() == table.keypoint_verification_ap.tolist()
    stats = pd.read_csv(report / "keypoint_stats.csv").set_index("keypoint_set")
    assert list(stats.index) == ["sift_all", "sift_scale", "surf_all", "sift_surf_intersection", "surf_sift_intersection"]
    # the two sides of the intersection are row-aligned: same counts per image
    assert stats.loc["sift_surf_intersection", "keypoints_total"] == stats.loc["surf_sift_intersection", "keypoints_total"] > 0
    assert stats.loc["sift_scale", "keypoints_total"] == min(8000, stats.loc["sift_all", "keypoints_total"])
    assert stats.loc["sift_scale", "size_median"] >= stats.loc["sift_all", "size_median"]


SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def shipped_config(path: Path) -> dict:
    """The config a shipped study runs with, as the command in its header says: with
    `--replace-workflow-config` the file alone, else the file merged into config.yaml (Snakemake's
    merge). Weight files are not needed to find the results folder: `weights: random` stands in."""
    text = path.read_text()
    command = next(line for line in text.splitlines() if "snakemake --cores" in line and path.name in line)
    own = yaml.safe_load(text.replace("weights: models/", "weights: random  # models/"))
    if "--replace-workflow-config" in command:
        return own
    merged = yaml.safe_load((ROOT / "config.yaml").read_text())
    update_config(merged, own)
    return merged


def test_every_shipped_config_writes_into_its_own_results_folder():
    default = experiment_name(validate_config(yaml.safe_load((ROOT / "config.yaml").read_text()), SCHEMA))
    assert default == "demo"
    folders = {}
    for path in sorted((ROOT / "config").glob("*.yaml")):
        cfg = validate_config(shipped_config(path), SCHEMA)
        folders[path.name] = experiment_name(cfg)
        # its own name, the file's: never the default config's results/demo/, nor a dataset tag
        assert folders[path.name] == path.stem, (path.name, folders[path.name])
        assert f"results/{path.stem}/" in path.read_text(), f"{path.name}'s header names another results folder"
    assert {"seed_study.yaml", "patches.yaml", "fusion_study.yaml"} <= set(folders)
    assert len(set(folders.values())) == len(folders) and default not in folders.values()
