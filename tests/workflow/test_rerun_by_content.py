"""End to end: a weights file replaced by one with an *older* date (``mv`` of an earlier download)
reruns every job that uses it, on images and on patches, with the new network's numbers; so does a
folder dataset's image (one digest per batch); a file touched with the same bytes reruns nothing
(descbench.specfiles, workflow/rules/common.smk)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from descbench.datasets.demo import generate_scene
from smkrun import job_counts, snakemake

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def save_tfeat(path: Path, seed: int) -> None:
    torch = pytest.importorskip("torch")
    KF = pytest.importorskip("kornia.feature")
    torch.manual_seed(seed)
    torch.save(KF.TFeat(pretrained=False).state_dict(), path)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_weights_file_replaced_by_an_older_one_reruns_every_job_that_uses_it(tmp_path):
    pytest.importorskip("kornia.feature")
    weights = tmp_path / "tfeat.pth"
    save_tfeat(weights, seed=1)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    cfg["data_dir"] = str(tmp_path / "data")
    cfg["descriptors"] = {"tfeat": {"family": "tfeat", "params": {"weights": str(weights), "device": "cpu"}}}
    cfg["verification"]["enabled"] = False
    cfg["patches"] = {**cfg["patches"], "enabled": True, "generate": {"max_patches": 30}, "descriptors": ["tfeat"],
                      "hbench": {"retrieval_sequences": [1], "retrieval_seeds": 1, "retrieval_queries_per_sequence": 5},
                      "hpatches_benchmark": {"splits": ["full"], "verification_pairs": 200, "retrieval_queries": 10,
                                             "retrieval_distractors": 20}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    snakemake(tmp_path, "--cores", "2")
    image_rows = tmp_path / "results/demo/descriptors/sift/tfeat/batch000/v_coins.parquet"
    patch_rows = tmp_path / "results/demo/patches/descriptors/tfeat/v_coins.parquet"
    before = {p: sha(p) for p in (image_rows, patch_rows)}
    assert sha(weights)[:16] in str(pq.read_schema(image_rows).metadata)

    # touched, same bytes: nothing to do
    os.utime(weights, None)
    assert "Nothing to be done" in snakemake(tmp_path, "-n")

    # an earlier download, older than every result, moved over the file
    older = tmp_path / "download" / "tfeat.pth"
    older.parent.mkdir()
    save_tfeat(older, seed=2)
    os.utime(older, (1_000_000_000, 1_000_000_000))
    os.replace(older, weights)
    out = snakemake(tmp_path, "--cores", "2")
    assert "rule descriptors:" in out and "rule patch_descriptors:" in out, out[-3000:]
    assert all(sha(p) != h for p, h in before.items())
    assert sha(weights)[:16] in str(pq.read_schema(image_rows).metadata)
    assert "Nothing to be done" in snakemake(tmp_path, "-n")


def test_a_folder_image_replaced_by_an_older_one_reruns_its_batch_only(tmp_path):
    data = tmp_path / "scenes"
    for scene in ("v_coins", "i_rocket"):
        generate_scene(scene, data, seed=0)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["dataset"] = "folder"
    cfg["folder"] = {"path": str(data), "name": "mine"}
    cfg["execution"]["scenes_per_job"] = 1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    snakemake(tmp_path, "--cores", "2")
    digests = sorted(p.name for p in (tmp_path / "results/folder-mine/specs/files").glob("*.sha256"))
    assert len(digests) == 2 and all(n.startswith("11-files.") for n in digests), digests  # one per batch

    image = data / "v_coins" / "3.ppm"
    os.utime(image, None)  # touched, same bytes: nothing to do
    assert "Nothing to be done" in snakemake(tmp_path, "-n")

    # other bytes with a date older than every result
    other = tmp_path / "3.ppm"
    other.write_bytes((data / "v_coins" / "4.ppm").read_bytes())
    os.utime(other, (1_000_000_000, 1_000_000_000))
    os.replace(other, image)
    dry = snakemake(tmp_path, "-n")
    assert job_counts(dry)["keypoints"] == 1, dry[-3000:]
    block = dry.split("rule keypoints:")[1].split("rule ")[0]
    assert "keypoints/sift/batch001" in block and "batch000" not in block, block
