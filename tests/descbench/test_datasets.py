"""Scene lists are known at DAG-build time: HPatches constants, demo constants, folder listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from descbench.datasets import dataset_tag, hpatches_scenes, list_scenes, scene_root
from descbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def cfg(**kw):
    base = {"dataset": "demo", "data_dir": "data", "scenes": None, "demo": {"seed": 0},
            "hpatches": {"subset": "full"}, "folder": {"path": None, "name": None}}
    base.update(kw)
    return base


def test_hpatches_lists_116_and_the_108_subset():
    full = hpatches_scenes("full")
    assert len(full) == 116 and sum(s.startswith("i_") for s in full) == 57 and sum(s.startswith("v_") for s in full) == 59
    sub = hpatches_scenes("d2net108")
    assert len(sub) == 108 and sum(s.startswith("i_") for s in sub) == 52 and "v_talent" not in sub
    assert list_scenes(cfg(dataset="hpatches", hpatches={"subset": "d2net108"})) == sub


def test_shipped_scene_list_matches_the_public_splits():
    shared = ROOT.parent / "shared" / "data" / "hpatches" / "splits.json"
    if not shared.exists():
        pytest.skip("shared/ not beside the checkout")
    assert sorted(json.loads(shared.read_text())["full"]["test"]) == hpatches_scenes("full")


def test_demo_scenes_and_restriction():
    assert len(list_scenes(cfg())) == 8
    assert list_scenes(cfg(scenes=["v_coins", "i_rocket"])) == ["v_coins", "i_rocket"]
    with pytest.raises(ConfigError, match="v_nope"):
        list_scenes(cfg(scenes=["v_nope"]))
    assert scene_root(cfg()) == Path("data/demo/seed0") and dataset_tag(cfg()) == "demo"


@pytest.mark.bad_input
def test_folder_dataset(tmp_path):
    (tmp_path / "scenes" / "v_mine").mkdir(parents=True)
    (tmp_path / "scenes" / ".hidden").mkdir()
    c = cfg(dataset="folder", folder={"path": str(tmp_path / "scenes"), "name": None})
    assert list_scenes(c) == ["v_mine"] and dataset_tag(c) == "folder-scenes"
    with pytest.raises(ConfigError, match="not a directory"):
        list_scenes(cfg(dataset="folder", folder={"path": str(tmp_path / "nope"), "name": None}))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no scene folder"):
        list_scenes(cfg(dataset="folder", folder={"path": str(tmp_path / "empty"), "name": None}))


def test_resize_moves_the_scene_root_and_the_experiment():
    """With resize every stage reads the copies under data_dir/resized/, listed from the source;
    the results go to their own experiment; a named experiment stays as named."""
    import doctest

    import descbench.datasets as D

    cfg = {"dataset": "demo", "demo": {"seed": 3}, "data_dir": "d", "hpatches": {"subset": "full"}}
    assert D.scene_root(cfg) == D.source_root(cfg) == Path("d/demo/seed3") and D.experiment_name(cfg) == "demo"
    assert D.images_note(cfg) == ""
    r = {**cfg, "resize": {"size": 480, "side": "short"}}
    assert D.scene_root(r) == Path("d/resized/demo-seed3/short480") and D.source_root(r) == Path("d/demo/seed3")
    assert D.experiment_name(r) == "demo-short480" and D.experiment_name({**r, "experiment": "x"}) == "x"
    h = {**r, "dataset": "hpatches", "resize": {"size": 640, "side": "long"}}
    assert D.scene_root(h) == Path("d/resized/hpatches/long640") and D.experiment_name(h) == "hpatches-long640"
    assert D.list_scenes(h) == D.list_scenes({**h, "resize": None})
    assert D.images_note(r) == "images resized: short side 480 px, homographies adjusted."
    assert doctest.testmod(D).failed == 0


def test_posed_demo_scenes_root_and_tag():
    from descbench.datasets import dataset_geometry
    from descbench.datasets.posed_demo import N_SCENES

    c = cfg(dataset="posed_demo", posed_demo={"seed": 2})
    assert list_scenes(c) == [f"posed_{i:02d}" for i in range(N_SCENES)] and N_SCENES == 4
    assert scene_root(c) == Path("data/posed_demo/seed2") and dataset_tag(c) == "posed_demo"
    assert dataset_geometry(c) == "relative_pose" and dataset_geometry(cfg()) == "homography"


@pytest.mark.bad_input
def test_posed_dataset_lists_posed_scene_folders_only(tmp_path):
    root = tmp_path / "mega"
    (root / "s1").mkdir(parents=True)
    pose = "1 0 0 0 1 0 0 0 1 0 0 0 PINHOLE 640 480 500 500 320 240"
    (root / "s1" / "views.txt").write_text(f"a.png {pose}\nb.png {pose}\n")
    (root / "s1" / "pairs.txt").write_text("a.png b.png\n")
    c = cfg(dataset="posed", posed={"path": str(root), "name": None})
    assert list_scenes(c) == ["s1"] and dataset_tag(c) == "posed-mega"
    assert dataset_tag(cfg(dataset="posed", posed={"path": str(root), "name": "md1500"})) == "posed-md1500"
    (root / "flat").mkdir()
    with pytest.raises(ConfigError, match=r"posed.path .*mega: the folder\(s\) flat hold no views.txt"):
        list_scenes(c)
    with pytest.raises(ConfigError, match="posed.path .* is not a directory"):
        list_scenes(cfg(dataset="posed", posed={"path": str(tmp_path / "nope"), "name": None}))


@pytest.mark.bad_input
def test_a_published_posed_set_not_downloaded_says_how_to_get_it(tmp_path):
    with pytest.raises(ConfigError, match=r"run `descbench posed-download megadepth1500 --data-dir .*` first"):
        list_scenes(cfg(dataset="posed", posed={"path": str(tmp_path / "megadepth1500"), "name": None}))


def test_a_posed_folder_of_more_than_127_views_is_listed_as_its_parts(tmp_path):
    root = tmp_path / "sets"
    (root / "big").mkdir(parents=True)
    pose = "1 0 0 0 1 0 0 0 1 0 0 0 PINHOLE 640 480 500 500 320 240"
    views = [f"{k}.png" for k in range(130)]
    (root / "big" / "views.txt").write_text("".join(f"{v} {pose}\n" for v in views))
    (root / "big" / "pairs.txt").write_text("".join(f"{a} {b}\n" for a, b in zip(views[:-1], views[1:])))
    assert list_scenes(cfg(dataset="posed", posed={"path": str(root), "name": None})) == ["big@000", "big@001"]
