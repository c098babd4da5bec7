"""descbench.datasets.hpatches: the shipped scene lists and the layout check of a sequence folder
(download and extraction: test_download.py)."""

from __future__ import annotations

import shutil

import pytest

from descbench.datasets.hpatches import N_IMAGES, TARGET_IMAGES, hpatches_names, hpatches_scenes, validate_layout
from descbench.errors import ConfigError, DataError


def test_scene_lists():
    full = hpatches_scenes()
    assert len(full) == 116 and len(set(full)) == 116 and full == hpatches_scenes("full")
    assert sum(s.startswith("i_") for s in full) == 57 and sum(s.startswith("v_") for s in full) == 59
    d2 = hpatches_scenes("d2net108")
    excluded = hpatches_names()["d2net_excluded"]
    assert len(d2) == 108 and set(full) - set(d2) == set(excluded) and d2 == [s for s in full if s not in excluded]
    with pytest.raises(ConfigError, match=r"^unknown hpatches.subset 'd2net'; use full or d2net108$"):
        hpatches_scenes("d2net")
    assert (N_IMAGES, TARGET_IMAGES) == (6, (2, 3, 4, 5, 6))


@pytest.mark.bad_input
def test_validate_layout_names_every_broken_scene(pristine, tmp_path):
    for name in ("v_ok", "v_short", "v_badh"):
        shutil.copytree(pristine, tmp_path / name)
    validate_layout(tmp_path, ["v_ok"])
    (tmp_path / "v_short" / "6.ppm").unlink()
    (tmp_path / "v_short" / "H_1_6").unlink()
    (tmp_path / "v_badh" / "H_1_3").write_text("1 0 0\n0 1 0\n")
    with pytest.raises(DataError) as err:
        validate_layout(tmp_path, ["v_ok", "v_short", "v_badh"])
    msg = str(err.value)
    assert msg.startswith(f"2 of 3 HPatches scenes under {tmp_path} are invalid:\n")
    assert "v_short holds 5 images, not 6" in msg and "H_1_3" in msg and "v_ok" not in msg
