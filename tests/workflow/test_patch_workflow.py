"""End to end: the patch benchmarks (patches.enabled) through snakemake on a tiny demo (2 scenes)."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from smkrun import snakemake

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

SMALL = {
    "enabled": True,
    "generate": {"max_patches": 60},
    "descriptors": ["sift", "rootsift"],
    "hbench": {"retrieval_sequences": [2], "retrieval_seeds": 1, "retrieval_queries_per_sequence": 10},
    "hpatches_benchmark": {"splits": ["full", "view"], "verification_pairs": 2000, "retrieval_queries": 40,
                           "retrieval_distractors": 60},
}


def write_config(work: Path, patches: dict, **top) -> None:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["patches"] = {**cfg["patches"], **patches}
    cfg.update(top)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".parquet", ".results", ".png", ".benchmark",
                                                                              ".labels", ".gz")}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("patches")
    write_config(work, SMALL)
    out = snakemake(work, "--cores", "2", "patch_report")
    return work, out


def test_tables_for_both_benchmarks_and_every_descriptor(run):
    work, _ = run
    rep = work / "results/demo/report/patches"
    hb = pd.read_csv(rep / "hbench.csv")
    assert list(hb.descriptor) == ["sift", "rootsift"]
    cols = ["matching_all_easy_illum", "matching_all_easy_viewpoint", "matching_all_hard_illum",
            "matching_all_hard_viewpoint", "retrieval_patch_map_easy", "retrieval_image_map_hard"]
    assert hb[cols].notna().all().all() and ((hb[cols] >= 0) & (hb[cols] <= 1)).all().all()
    hp = pd.read_csv(rep / "hpatches_benchmark.csv")
    assert sorted(zip(hp.descriptor, hp.split)) == sorted([(d, s) for d in ("sift", "rootsift") for s in ("full", "view")])
    for c in ("verification_balanced_auc", "verification_imbalanced_ap", "matching_map", "retrieval_map"):
        assert ((hp[c] > 0) & (hp[c] <= 100)).all(), c
    assert hp[hp.split == "view"].matching_map_i.isna().all()  # no i_ sequence in the view split: n/a, not 0
    assert "| sift |" in (rep / "hbench.md").read_text()
    assert (rep / "patches_map.png").stat().st_size > 10_000


def test_hbench_results_files_evaluate_to_the_table(run):
    """The written .results files are read back and evaluated (the path other tools' files take):
    the per-task mAP equals the table's, and the matching mAP equals a brute force from the
    descriptors (nearest neighbour by full distance matrix, AP = mean over correct of k/rank)."""
    from descbench.patches import hbench
    from descbench.patches.stages import load_descriptors

    work, _ = run
    res = work / "results/demo"
    hb = pd.read_csv(res / "report/patches/hbench.csv").set_index("descriptor")
    tasks = res / "patches/tasks/hbench/matching"
    descs = load_descriptors(sorted((res / "patches/descriptors/sift").glob("*.parquet")))
    for bench in sorted(tasks.glob("*.benchmark")):
        pairs = hbench.read_matching_benchmark(bench)
        results = hbench.read_matching_results(res / "patches/eval/sift/hbench/matching" / f"{bench.stem}.results")
        ev = hbench.evaluate_matching({bench.stem: pairs}, {bench.stem: results})
        assert ev.per_task.mean_ap[0] == pytest.approx(hb.loc["sift", f"matching_{bench.stem}"], abs=1e-12)
        aps = []
        for a, b in pairs:
            (sa, ta), (sb, tb) = a.split("."), b.split(".")
            da, db = descs[sa][ta].astype(np.float64), descs[sb][tb].astype(np.float64)
            d = np.sqrt(((da[:, None, :] - db[None, :, :]) ** 2).sum(-1))
            nn = d.argmin(1)
            order = np.argsort(d[np.arange(len(d)), nn], kind="stable")
            correct = (nn == np.arange(len(d)))[order]
            ranks = np.flatnonzero(correct) + 1
            aps.append(np.sum(np.arange(1, ranks.size + 1) / ranks) / len(d))
        assert np.mean(aps) == pytest.approx(ev.per_task.mean_ap[0], abs=1e-9)


def test_rerun_is_bit_identical(run, tmp_path):
    work, _ = run
    res = work / "results/demo/patches"
    before = digests(res)
    assert any(k.endswith(".results") for k in before) and any(k.endswith(".gz") for k in before)
    other = tmp_path / "again"
    other.mkdir()
    write_config(other, SMALL)
    snakemake(other, "--cores", "2", "patch_report")
    assert digests(other / "results/demo/patches") == before


@pytest.mark.bad_input
def test_a_broken_strip_stops_the_run_with_its_name(tmp_path):
    """source: folder with a strip whose height is not a multiple of 65: the job's own message
    (file and fix) reaches the terminal."""
    import cv2

    from descbench.patches import PATCH_TYPES

    folder = tmp_path / "mypatches"
    for seq in ("i_a", "v_b"):
        (folder / seq).mkdir(parents=True)
        for t in PATCH_TYPES:
            cv2.imwrite(str(folder / seq / f"{t}.png"), np.full((65 * 3, 65), 128, np.uint8))
    cv2.imwrite(str(folder / "v_b" / "e3.png"), np.full((65 * 3 + 7, 65), 128, np.uint8))
    write_config(tmp_path, {"enabled": True, "source": "folder", "path": str(folder), "descriptors": ["sift"]})
    out = snakemake(tmp_path, "--cores", "1", "patch_report", ok=False)
    assert "v_b/e3.png" in out and "not a multiple of 65" in out


def test_hpatches_release_dag_downloads_once_then_describes_each_sequence(tmp_path):
    write_config(tmp_path, {"enabled": True, "source": "hpatches_release", "sequences": ["i_ajuntament", "v_boat"]})
    out = snakemake(tmp_path, "-n", "patch_report")
    counts = {m[0]: int(m[1]) for m in (line.split() for line in out.split("Job stats:")[-1].splitlines())
              if len(m) == 2 and m[1].isdigit()}
    assert counts["hpatches_patches_download"] == 1 and counts["patch_descriptors"] == 4
    assert counts["patch_tasks"] == 1 and counts["patch_evaluate"] == 2 and "patch_generate" not in counts
    write_config(tmp_path, {"enabled": True, "source": "hpatches_release", "sequences": ["v_nope"]})
    bad = snakemake(tmp_path, "-n", "patch_report", ok=False)
    assert "patches.sequences ['v_nope'] are not among the hpatches_release patch sequences" in bad


def test_other_tools_results_files_and_csv_descriptors(run, tmp_path):
    """(1) `python -m descbench patches hbench-eval` on a copy of the run's .results files gives
    the run's HBench numbers; a truncated line is an error naming the file and line. (2) The sift
    descriptors written as hpatches-benchmark CSV files and declared under patches.csv are
    evaluated to exactly sift's numbers (same run, a new descriptor name)."""
    import shutil

    from descbench.patches.describe import write_hpatches_csv
    from descbench.patches.stages import load_descriptors

    work, _ = run
    res = work / "results/demo/patches"
    mine = tmp_path / "mine"
    shutil.copytree(res / "eval/sift/hbench", mine)
    cmd = [sys.executable, "-m", "descbench", "patches", "hbench-eval", "--tasks", str(res / "tasks/hbench"),
           "--results", str(mine), "--counts", str(res / "tasks/counts.json"), "--out", str(tmp_path / "t.csv")]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    theirs = pd.read_csv(tmp_path / "t.csv")
    ours = pd.read_parquet(res / "eval/sift/hbench.parquet")
    assert np.allclose(theirs.value.to_numpy(), ours.value.to_numpy(), rtol=0, atol=0)
    f = sorted((mine / "matching").glob("*.results"))[0]
    lines = f.read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 1)[0]  # the first pair's nn1 indices lose one entry
    f.write_text("\n".join(lines) + "\n")
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode == 1 and f"{f}, line 2" in bad.stderr and "descbench: error" in bad.stderr

    csv_root = tmp_path / "csv"
    descs = load_descriptors(sorted((res / "descriptors/sift").glob("*.parquet")))
    for seq, d in descs.items():
        write_hpatches_csv(csv_root, seq, d)
    write_config(work, {**SMALL, "descriptors": ["sift", "rootsift", "sift_csv"],
                        "csv": {"sift_csv": {"path": str(csv_root)}}})
    snakemake(work, "--cores", "2", "patch_report")
    hb = pd.read_csv(work / "results/demo/report/patches/hbench.csv").set_index("descriptor")
    hp = pd.read_csv(work / "results/demo/report/patches/hpatches_benchmark.csv").set_index(["descriptor", "split"])
    assert hb.loc["sift_csv"].equals(hb.loc["sift"])
    assert hp.loc["sift_csv"].equals(hp.loc["sift"])
    write_config(work, SMALL)  # the module's other tests see the fixture's config


def test_patch_describe_jobs_run_on_their_threads(tmp_path):
    """A patch-describing job is given its threads (a learned family's params.threads, else 1) and
    passes them to the command (OpenCV's, BLAS's and onnxruntime's pools follow --threads)."""
    write_config(tmp_path, {**SMALL, "descriptors": ["sift", "hardnet"]},
                 descriptors={"sift": {"family": "sift"},
                              "hardnet": {"family": "hardnet", "params": {"weights": "random", "device": "cpu", "threads": 3}}})
    out = snakemake(tmp_path, "-n", "-p", "--cores", "4", "patch_report")
    describe = [line for line in out.splitlines() if " patches describe " in line]
    assert describe and all(re.search(r"--name (sift|hardnet) .*--threads (\d+) ", line) for line in describe), describe
    threads = {re.search(r"--name (\S+)", line).group(1): re.search(r"--threads (\d+) ", line).group(1) for line in describe}
    assert threads == {"sift": "1", "hardnet": "3"}


def test_learned_families_through_the_patch_benchmarks(tmp_path):
    """hardnet (random weights) and dsp over it on generated patches: each 65 x 65 patch resized
    to the net's 32 x 32 input; the tables have their rows and say RANDOM on them."""
    write_config(tmp_path, {**SMALL, "descriptors": ["sift", "hardnet", "dsp_hardnet"]},
                 descriptors={"sift": {"family": "sift"},
                              "hardnet": {"family": "hardnet", "params": {"weights": "random", "device": "cpu"}},
                              "dsp_hardnet": {"family": "dsp", "params": {"base": {"family": "hardnet", "params": {"weights": "random"}},
                                                                           "scales": [1.0]}}})
    snakemake(tmp_path, "--cores", "2", "patch_report")
    rep = tmp_path / "results/demo/report/patches"
    hb = pd.read_csv(rep / "hbench.csv")
    assert list(hb.descriptor) == ["sift", "hardnet", "dsp_hardnet"]
    assert hb["matching_all_easy_viewpoint"].between(0, 1).all()
    hp = pd.read_csv(rep / "hpatches_benchmark.csv")
    assert set(hp.descriptor) == {"sift", "hardnet", "dsp_hardnet"}
    # dsp over one scale with the base's L2 rows is the base: equal scores
    a, b = hb.set_index("descriptor").loc["hardnet"], hb.set_index("descriptor").loc["dsp_hardnet"]
    assert a["matching_all_easy_viewpoint"] == pytest.approx(b["matching_all_easy_viewpoint"], abs=1e-6)
    for name in ("hbench.md", "hpatches_benchmark.md"):
        md = (rep / name).read_text()
        assert md.count("RANDOM(seed=0)") >= 2, name  # on the hardnet and dsp_hardnet rows


def test_the_workbench_patch_benchmark_gives_its_table_and_database_rows(tmp_path):
    """patches.workbench.enabled (the other two benchmarks off, small patches): the report's
    workbench_patch_benchmark table and the results database's patch_benchmark_results rows, equal
    to descbench.patches.workbench on the run's descriptors; the database job depends on the table
    (the dry run lists it before results_db). A composite patch descriptor (arithmetic: workbench)
    is the workbench's patch fusion of its components' patch rows."""
    import sqlite3

    from descbench.patches import workbench as wb
    from descbench.patches.stages import load_descriptors

    fused = {"family": "composite", "keypoint_sets": ["sift"],
             "params": {"aggregation": "weighted_avg", "arithmetic": "workbench",
                        "components": [{"descriptor": "sift", "weight": 0.5}, {"descriptor": "rootsift", "weight": 0.5}]}}
    write_config(tmp_path, {"enabled": True, "generate": {"max_patches": 30}, "descriptors": ["sift", "rootsift", "fused"],
                            "hbench": {"enabled": False}, "hpatches_benchmark": {"enabled": False},
                            "workbench": {"enabled": True}},
                 descriptors={"sift": {"family": "sift"}, "rootsift": {"family": "rootsift"}, "fused": fused},
                 keypoint_sets={"sift": {"detector": "sift", "max_keypoints": 200}})
    dry = snakemake(tmp_path, "-n", "--forceall", str(Path("results/demo/results.sqlite")))
    assert "patch_report" in dry and "patch_evaluate" in dry
    snakemake(tmp_path, "--cores", "2", "results/demo/results.sqlite")
    res = tmp_path / "results/demo"
    table = pd.read_csv(res / "report/patches/workbench_patch_benchmark.csv")
    assert table.descriptor_name.tolist() == ["sift", "rootsift", "fused"] and set(table.descriptor_dimension) == {128}
    con = sqlite3.connect(res / "results.sqlite")
    rows = pd.read_sql("SELECT * FROM patch_benchmark_results", con)
    con.close()
    assert rows.id.tolist() == [1, 2, 3] and (rows.num_scenes == 2).all()
    descs = {d: load_descriptors(sorted((res / "patches/descriptors" / d).glob("*.parquet"))) for d in ("sift", "rootsift", "fused")}
    for i, name in enumerate(("sift", "rootsift", "fused")):
        want = wb.aggregate(pd.concat([wb.score_sequence(s, descs[name][s], name, ["float32"]) for s in sorted(descs[name])]))
        for c in wb.TABLE_COLUMNS:
            if c.startswith(("map_", "accuracy_", "num_")):
                assert rows[c][i] == want[c][0] == table[c][i], (name, c)
        assert 0 < rows.map_overall[i] <= 1 and rows.processing_time_ms[i] > 0
    for seq, by_type in descs["fused"].items():
        for t, got in by_type.items():
            np.testing.assert_array_equal(got, wb.fuse([descs["sift"][seq][t], descs["rootsift"][seq][t]], "weighted_avg", [0.5, 0.5]))


def test_the_python_api_patch_example_equals_the_workflow(tmp_path, monkeypatch):
    """docs/guide/python.md's evaluate_patches example (kornia's HardNet, random weights, in this
    process) gives the workflow's own hpatches-benchmark row for the `hardnet` family loaded with
    the module's weights: every column, exactly."""
    pytest.importorskip("kornia")
    import torch

    from docsexamples import docs_example

    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(docs_example("guide/python.md", "## Patches: a torch module on the HPatches patch benchmarks"), scope)
    got = scope["patch_table"]
    weights = tmp_path / "hardnet.pt"
    torch.save(scope["net"].state_dict(), weights)
    small = scope["small"]
    write_config(tmp_path, {**small["patches"], "enabled": True, "descriptors": ["hardnet"], "hbench": {"enabled": False},
                            "hpatches_benchmark": {**small["patches"]["hpatches_benchmark"], "splits": ["full"]}},
                 descriptors={"hardnet": {"family": "hardnet", "params": {"weights": str(weights), "device": "cpu"}}})
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert cfg["scenes"] == small["scenes"]
    snakemake(tmp_path, "--cores", "2", "patch_report")
    want = pd.read_csv(tmp_path / "results/demo/report/patches/hpatches_benchmark.csv").drop(columns=["weights"])
    got = pd.read_csv(io.StringIO(got.to_csv(index=False)))  # the same CSV round trip as the workflow's table
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
