"""descbench.patches.stages: the patch job steps composed from the pure modules (describe and
load a sequence's descriptors; which sequences and splits the task files use)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from descbench.errors import ConfigError, DataError
from descbench.patches import PATCH_SIZE, PATCH_TYPES
from descbench.patches import stages as ps
from descbench.patches.checks import CENTRE_KEYPOINTS
from descbench.patches.describe import describe_patches
from descbench.patches.hpbench import load_splits
from descbench.patches.layout import read_strip, write_strip


def write_sequence(seq_dir: Path, n: int) -> None:
    for i, t in enumerate(PATCH_TYPES):
        write_strip(seq_dir / f"{t}.png", np.random.default_rng(i).integers(0, 256, (n, PATCH_SIZE, PATCH_SIZE), dtype=np.uint8))


def test_describe_writes_the_rows_describe_patches_gives_and_load_reads_them(tmp_path):
    seq = tmp_path / "v_test"
    write_sequence(seq, 3)
    spec = {"family": "sift", "params": {}}
    ps.describe(seq, tmp_path / "sift" / "v_test.parquet", "sift", spec, "hpatches_benchmark")
    loaded = ps.load_descriptors([tmp_path / "sift" / "v_test.parquet"])
    assert list(loaded) == ["v_test"] and list(loaded["v_test"]) == list(PATCH_TYPES)
    for t in ("ref", "h5"):
        want = describe_patches(read_strip(seq / f"{t}.png"), "sift", {}, where="x", config_key="k", **CENTRE_KEYPOINTS["hpatches_benchmark"])
        np.testing.assert_array_equal(loaded["v_test"][t], want)
        assert want.shape == (3, 128)


@pytest.mark.bad_input
def test_descriptor_files_of_two_kinds_are_refused(tmp_path):
    for name, family in (("a", "sift"), ("b", "surf")):
        seq = tmp_path / f"v_{name}"
        write_sequence(seq, 2)
        ps.describe(seq, tmp_path / "d" / f"v_{name}.parquet", "d", {"family": family, "params": {}}, "upright")
    with pytest.raises(DataError, match="hold different kinds"):
        ps.load_descriptors(sorted((tmp_path / "d").glob("*.parquet")))


def test_hbench_sequences_and_hpbench_splits():
    splits = load_splits()
    train = splits["a"]["train"]
    seqs = list(train[:3]) + ["v_mine"]
    assert ps.hbench_sequences(seqs, "all") == seqs
    assert ps.hbench_sequences(seqs, "train") == [s for s in splits["a"]["train"] if s in seqs]
    with pytest.raises(ConfigError, match=r"patches.hbench.split 'test' selects HPatches split a's test sequences, and none"):
        ps.hbench_sequences(["v_mine"], "test")
    own = ps.hpbench_split("view", ["v_b", "i_a", "v_a"])
    assert own["test"] == ["v_a", "v_b"]
    with pytest.raises(ConfigError, match=r"split 'a' is not available for these 3 patch sequences"):
        ps.hpbench_split("a", ["v_b", "i_a", "v_a"])
    full_a = ps.hpbench_split("a", list(splits["a"]["test"]) + ["v_extra"])
    assert full_a == {"name": "a", "test": list(splits["a"]["test"])}
    assert ps.shipped_retrieval_applies("hpatches_release", "a", full_a)
    assert not ps.shipped_retrieval_applies("generated", "a", full_a)
    assert not ps.shipped_retrieval_applies("hpatches_release", "view", own)
