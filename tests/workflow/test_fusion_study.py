"""config/fusion_study.yaml (the workbench's fusion_sift_hardnet_keynet_scale6px) runs in one
command; with `weights: random` every row says so; without the weight files it is a config
error naming them and the published URLs. Plus the learned jobs' resources and rule inputs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from descbench import io
from descbench.config import job_resources, needs_learned_extra, model_files
from descbench.descriptors.composite import aggregate
from smkrun import snakemake_cmd

ROOT = Path(__file__).resolve().parents[2]
SIFT_ROWS = {("sift", s) for s in ("sift_8000", "sift_scale_matched", "keynet_sift_b", "sm_intersection_a")}
HARDNET_ROWS = {("hardnet", s) for s in ("keynet_8000", "keynet_scale_matched", "keynet_sift_a", "keynet_sift_b", "sm_intersection_a")}
FUSION_ROWS = {("fusion_avg", "keynet_sift_b"), ("fusion_concat", "keynet_sift_b"),
               ("fusion_sm_avg", "sm_intersection_a"), ("fusion_sm_concat", "sm_intersection_a")}


def smk(workdir: Path, *args: str, timeout=1500):
    return subprocess.run(snakemake_cmd(workdir,
                           "--configfile", str(workdir / "config" / "fusion_study.yaml"), "--replace-workflow-config", *args),
                          capture_output=True, text=True, timeout=timeout)


def random_weights(workdir: Path) -> None:
    """The study with randomly initialised networks (KeyNet seed 1: seed 0's random last layer
    outputs zero everywhere on the demo, so it detects nothing)."""
    shutil.copytree(ROOT / "config", workdir / "config")
    p = workdir / "config" / "fusion_study.yaml"
    text = p.read_text()
    text = text.replace("weights: models/keynet_pytorch.pth", "weights: random\n      weights_seed: 1")
    text = text.replace("weights: models/checkpoint_liberty_with_aug.pth", "weights: random")
    assert text.count("\n      weights: random") == 2
    p.write_text(text)


def test_without_the_weight_files_the_dag_build_names_them_and_where_they_come_from(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    res = smk(tmp_path, "-n", timeout=300)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "descriptors.hardnet.params.weights: the weights file models/checkpoint_liberty_with_aug.pth does not exist" in out
    assert "https://huggingface.co/kornia/hardnet/resolve/main/checkpoint_liberty_with_aug.pth" in out
    assert "Traceback" not in out
    # with that file there, the KeyNet weights are the next thing named
    (tmp_path / "models").mkdir()
    import torch
    import kornia.feature as KF

    torch.save(KF.HardNet(pretrained=False).state_dict(), tmp_path / "models" / "checkpoint_liberty_with_aug.pth")
    res = smk(tmp_path, "-n", timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "keypoint_sets.keynet_8000.params.weights: the weights file models/keynet_pytorch.pth does not exist" in out
    assert "https://huggingface.co/kornia/keynet/resolve/main/keynet_pytorch.pth" in out


@pytest.mark.e2e
def test_fusion_study_runs_with_one_command_and_says_random_on_every_learned_row(tmp_path):
    random_weights(tmp_path)
    res = smk(tmp_path, "--cores", "2", "--config", "scenes=[i_rocket,v_coins]")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    out = res.stdout + res.stderr
    report = tmp_path / "results" / "fusion_study" / "report"
    table = pd.read_csv(report / "comparison.csv")
    rows = set(zip(table.descriptor, table.keypoint_set))
    assert rows == SIFT_ROWS | HARDNET_ROWS | FUSION_ROWS  # full, scale-matched, intersection, fusion
    # every row that a network touched says RANDOM: the descriptor's weights and the KeyNet keypoints'
    for _, r in table.iterrows():
        learned_desc = r.descriptor != "sift"
        learned_kps = r.keypoint_set != "sift_8000" and r.keypoint_set != "sift_scale_matched"
        assert ("hardnet: RANDOM(seed=0)" in r.weights) == learned_desc, r
        assert ("keypoints keynet_8000: RANDOM(seed=1)" in r.weights) == learned_kps, r
        if not (learned_desc or learned_kps):
            assert r.weights == "none"
    md = (report / "comparison.md").read_text()
    assert md.count("RANDOM(seed=") >= len(HARDNET_ROWS | FUSION_ROWS) and "| weights |" in md
    assert re.search(r"RANDOM WEIGHTS: 11 of 13 row\(s\) use randomly initialised networks", out), out[-3000:]
    for col in ("true_map_micro", "viewpoint_map", "illumination_map"):
        assert table[col].dropna().between(0, 1).all(), col
    stats = pd.read_csv(report / "keypoint_stats.csv").set_index("keypoint_set")
    for a, b in (("keynet_sift_a", "keynet_sift_b"), ("sm_intersection_a", "sm_intersection_b")):
        assert stats.loc[a, "keypoints_total"] == stats.loc[b, "keypoints_total"] > 0
    assert stats.loc["keynet_8000", "root_detector"] == "keynet"
    # a fused file is the aggregation of its components' files, row by row
    res_root = tmp_path / "results" / "fusion_study"

    def rows_of(kpset, desc, scene="v_coins"):
        f = next((res_root / "descriptors" / kpset / desc).glob(f"*/{scene}.parquet"))
        t, meta = io.read_table(f)
        return io.descriptors_array(t), meta

    fused, _ = rows_of("keynet_sift_b", "fusion_concat")
    sift, _ = rows_of("keynet_sift_b", "sift")
    hard, hmeta = rows_of("keynet_sift_a", "hardnet")
    params = {"aggregation": "concatenate", "output_dimension": 128, "final_norm": "l2",
              "components": [{"norm": "none", "weight": None}, {"norm": "none", "weight": None}]}
    np.testing.assert_array_equal(fused, aggregate([sift, hard], params, ["s", "h"], "t"))
    assert fused.shape[1] == 256 and fused.shape[0] > 0
    # how the network ran is recorded next to its rows
    assert hmeta["runtime"]["weights"] == "random(seed=0, key=hardnet)" and hmeta["runtime"]["network"] == "kornia.feature.HardNet"
    assert hmeta["runtime"]["device"] == "cpu" and hmeta["runtime"]["torch"]
    _, kmeta = io.read_table(next((res_root / "keypoints" / "keynet_8000").glob("*/v_coins.parquet")))
    assert kmeta["runtime"]["weights"] == "random(seed=1)"


def test_learned_jobs_ask_for_their_threads_and_a_gpu_only_for_cuda():
    assert job_resources({}) == {"threads": 1, "gpu": 0}
    assert job_resources({"weights": "random", "device": "auto", "threads": 3}) == {"threads": 3, "gpu": 0}
    assert job_resources({"weights": "random", "device": "cuda", "threads": 1}) == {"threads": 1, "gpu": 1}
    nested = {"base": {"family": "hardnet", "params": {"device": "cuda", "threads": 2}}, "scales": [1, 2]}
    assert job_resources(nested) == {"threads": 2, "gpu": 1}
    # a params key named threads elsewhere (not a torch family's) is not a job's threads
    assert job_resources({"threads": 8}) == {"threads": 1, "gpu": 0}


def test_jobs_that_import_the_learned_extra_are_told_apart():
    # picks the job's conda env (envs/learned.yaml); checked through Snakemake in tests/workflow/test_deployment.py
    assert not needs_learned_extra({}) and not needs_learned_extra({"threads": 8})
    assert needs_learned_extra({"weights": "random", "device": "auto", "threads": 1})
    assert needs_learned_extra({"base": {"family": "hardnet", "params": {"device": "cpu", "threads": 2}}, "scales": [1, 2]})
    assert needs_learned_extra({"model": "m.onnx", "backend": "onnxruntime"})
    assert not needs_learned_extra({"model": "m.onnx", "backend": "opencv"})  # OpenCV's dnn: the base env


def test_model_and_weight_files_are_rule_inputs():
    assert model_files({"model": "m.onnx", "backend": "opencv"}) == ["m.onnx"]
    assert model_files({"weights": "random", "orinet_weights": "o.pth", "affnet_weights": None}) == ["o.pth"]
    assert model_files({"base": {"family": "hardnet", "params": {"weights": "h.pth"}}}) == ["h.pth"]
    assert model_files({"callable": "x:y"}) == []
