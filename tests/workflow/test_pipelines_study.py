"""config/pipelines_study.yaml (issue 25's feature pipelines: sift + mnn / ratio, superpoint + mnn /
lightglue, disk + lightglue, aliked + lightglue) runs in one command; with `weights: random` every
learned row says so; without the weight files the DAG build names the first one missing and where
it is published."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from smkrun import snakemake_cmd

ROOT = Path(__file__).resolve().parents[2]
ROWS = [("sift", "sift", "mnn"), ("superpoint", "superpoint", "mnn"), ("sift", "sift", "ratio"),
        ("superpoint", "superpoint", "lightglue_superpoint"), ("disk", "disk", "lightglue_disk"),
        ("aliked", "aliked", "lightglue_aliked")]


def smk(workdir: Path, *args: str, timeout=1500):
    return subprocess.run(snakemake_cmd(workdir,
                           "--configfile", str(workdir / "config" / "pipelines_study.yaml"), "--replace-workflow-config", *args),
                          capture_output=True, text=True, timeout=timeout)


def random_weights(workdir: Path) -> None:
    """The study with every network randomly initialised; ALIKED's published threshold (0.2) keeps
    almost no keypoint of a random network, so it is lowered here."""
    shutil.copytree(ROOT / "config", workdir / "config")
    p = workdir / "config" / "pipelines_study.yaml"
    cfg = yaml.safe_load(p.read_text())
    n = 0
    for section in ("keypoint_sets", "descriptors", "matchers"):
        for spec in cfg[section].values():
            if "weights" in (spec.get("params") or {}):
                spec["params"]["weights"] = "random"
                n += 1
    assert n == 9
    cfg["keypoint_sets"]["aliked"]["params"]["detection_threshold"] = 0.0
    cfg["scenes"] = ["i_rocket", "v_coins"]
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))


def test_without_the_weight_files_the_dag_build_names_one_and_where_it_is_published(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    res = smk(tmp_path, "-n", timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Traceback" not in out
    assert re.search(r"weights: the weights file models/\S+ does not exist", out), out[-2000:]


@pytest.mark.e2e
def test_pipelines_study_runs_with_one_command_and_says_random(tmp_path):
    random_weights(tmp_path)
    res = smk(tmp_path, "--cores", "2")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    report = tmp_path / "results" / "pipelines_study" / "report"
    t = pd.read_parquet(report / "pipelines.parquet")
    assert sorted(zip(t.keypoint_set, t.descriptor, t.matcher)) == sorted(ROWS)
    for r in t.itertuples(index=False):
        learned = r.descriptor != "sift"
        assert ("RANDOM(seed=0)" in r.weights) == learned, r
        if r.matcher.startswith("lightglue"):
            assert f"matcher {r.matcher}: RANDOM(seed=0)" in r.weights
        for e in ("dlt", "usac_magsac"):
            for k in (1, 3, 5):
                v = getattr(r, f"{e}_auc_at_{k}")
                assert pd.isna(v) or 0 <= v <= 1
    sift = t[(t.descriptor == "sift") & (t.matcher == "mnn")].iloc[0]
    assert sift.usac_magsac_auc_at_5 > 0.5 and sift.usac_magsac_ransac_th in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
    md = (report / "pipelines.md").read_text()
    assert md.count("| ") > 6 and "usac_magsac_auc_at_1" in md and "RANDOM" in md
    assert (report / "plots" / "pipelines_corner_error.png").exists()
    comp = pd.read_csv(report / "comparison.csv")
    assert set(zip(comp.descriptor, comp.keypoint_set)) == {(d, k) for k, d, _ in ROWS}
