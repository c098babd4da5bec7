"""descbench.patches.download: hpatches-release from an archive placed by hand (no network),
extracted and validated; a failed earlier attempt's empty folders do not count as the dataset."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

from descbench.errors import DataError
from descbench.patches import PATCH_SIZE, PATCH_TYPES
from descbench.patches.download import PATCH_ARCHIVES, PATCHES_ROOT, obtain_patches
from descbench.patches.layout import read_strip, write_strip


def make_archive(tmp_path, seqs, n=2, broken=None):
    src = tmp_path / "src" / PATCHES_ROOT
    for s in seqs:
        for i, t in enumerate(PATCH_TYPES):
            rows = n + 1 if (s, t) == broken else n
            write_strip(src / s / f"{t}.png", np.full((rows, PATCH_SIZE, PATCH_SIZE), i, dtype=np.uint8))
    data = tmp_path / "data"
    (data / "hpatches").mkdir(parents=True)
    with tarfile.open(data / "hpatches" / PATCH_ARCHIVES[0], "w:gz") as tar:
        tar.add(src, arcname=PATCHES_ROOT)
    return data


def test_a_local_archive_is_extracted_validated_and_flagged(tmp_path, capsys):
    data = make_archive(tmp_path, ["v_a", "i_b"])
    (data / "hpatches" / PATCHES_ROOT / "v_a").mkdir(parents=True)  # empty folders of a failed attempt
    flag = tmp_path / "flag.txt"
    root = obtain_patches(["http://127.0.0.1:9/unused"], None, data, flag, sequences=["v_a", "i_b"])
    assert root == data / "hpatches" / PATCHES_ROOT
    assert read_strip(root / "i_b" / "e3.png").shape == (2, PATCH_SIZE, PATCH_SIZE)
    assert flag.read_text() == f"validated 2 patch sequences (4 patches per strip type) under {root}\n"
    assert "extracting" in capsys.readouterr().err
    assert obtain_patches([], None, data, None, sequences=["v_a"]) == root  # present: nothing downloaded or extracted


@pytest.mark.bad_input
def test_a_broken_sequence_is_a_data_error_and_no_flag(tmp_path):
    data = make_archive(tmp_path, ["v_a"], broken=("v_a", "t2"))
    flag = tmp_path / "flag.txt"
    with pytest.raises(DataError, match="v_a"):
        obtain_patches([], None, data, flag, sequences=["v_a"])
    assert not flag.exists()
