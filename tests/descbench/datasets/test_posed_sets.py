"""descbench.datasets.posed_sets: a published posed set's archive placed in its folder (no network)
is extracted, every scene validated and the flag written with the archive's sha256; an archive of
something else, or a set name descbench does not know, is refused."""

from __future__ import annotations

import json
import zipfile

import pytest

from descbench import cli
from descbench.datasets.posed_demo import write_scene
from descbench.datasets.posed_sets import FLAG, PUBLISHED, dataset_dir, obtain
from descbench.errors import ConfigError, DataError
from descbench.fileops import file_sha256


def _zip(folder, out, arcroot):
    with zipfile.ZipFile(out, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, f"{arcroot}/{p.relative_to(folder).as_posix()}")


def test_a_placed_archive_is_extracted_validated_and_recorded(tmp_path):
    scene = write_scene(tmp_path / "src", 0)
    base = dataset_dir("megadepth1500", tmp_path / "data")
    (tmp_path / "data").mkdir()
    archive = tmp_path / "data" / "megadepth1500.zip"
    _zip(scene, archive, "megadepth1500")  # the scene folder at the archive's top level, as glue-factory's
    assert cli.main(["posed-download", "megadepth1500", "--data-dir", str(tmp_path / "data")]) == 0
    assert (base / "megadepth1500" / "views.txt").is_file()
    record = json.loads((base / FLAG).read_text())
    assert record["archive_sha256"] == file_sha256(archive)
    assert record["scenes"] == {"megadepth1500": {"parts": 1, "pairs": 10, "images": 5}}
    assert obtain("megadepth1500", tmp_path / "data") == base  # again: validated, not re-extracted


@pytest.mark.bad_input
def test_an_archive_without_a_posed_scene_is_refused(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.txt").write_text("x")
    _zip(tmp_path / "junk", tmp_path / "scannet1500.zip", "scannet1500")
    with pytest.raises(DataError, match="holds no posed scene folder .* it is not the scannet1500 archive"):
        obtain("scannet1500", tmp_path)


@pytest.mark.bad_input
def test_an_unknown_set_is_refused():
    with pytest.raises(ConfigError, match="'megadepth' is not a published posed set .* megadepth1500, scannet1500"):
        dataset_dir("megadepth", "data")
    assert set(PUBLISHED) == {"megadepth1500", "scannet1500"}
