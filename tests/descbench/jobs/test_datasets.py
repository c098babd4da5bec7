"""descbench.jobs.datasets: the ``demo-scene``, ``posed-demo-scene``, ``posed-download``, ``hpatches`` and
``resize-scene`` commands."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from descbench import cli
from descbench.datasets.demo import generate_scene
from descbench.jobs import datasets as jobs_datasets
from descbench.jobs.common import JobCommand


def test_demo_scene_writes_the_scene_generate_scene_writes(tmp_path):
    assert cli.main(["demo-scene", "--scene", "v_coins", "--out-dir", str(tmp_path / "cli"), "--seed", "3"]) == 0
    generate_scene("v_coins", tmp_path / "direct", 3)
    got = sorted(p.relative_to(tmp_path / "cli") for p in (tmp_path / "cli").rglob("*") if p.is_file())
    want = sorted(p.relative_to(tmp_path / "direct") for p in (tmp_path / "direct").rglob("*") if p.is_file())
    assert got == want and len(got) > 6
    assert all((tmp_path / "cli" / p).read_bytes() == (tmp_path / "direct" / p).read_bytes() for p in got)


def test_hpatches_passes_its_options_to_obtain(tmp_path, monkeypatch):
    import descbench.datasets.hpatches as hp

    calls = []
    monkeypatch.setattr(hp, "obtain", lambda *a: calls.append(a))
    assert cli.main(["hpatches", "--urls", "u1", "u2", "--sha256", "ab", "--data-dir", str(tmp_path), "--flag", str(tmp_path / "f")]) == 0
    assert calls == [(["u1", "u2"], "ab", tmp_path, tmp_path / "f")]


def test_add_commands_and_the_run_functions(tmp_path):
    sub = argparse.ArgumentParser().add_subparsers()
    funcs = {cmd: JobCommand.of(job).run for cmd, job in jobs_datasets.add_commands(sub).items()}
    assert funcs == {"demo-scene": jobs_datasets.run_demo_scene, "posed-demo-scene": jobs_datasets.run_posed_demo_scene,
                     "posed-download": jobs_datasets.run_posed_download, "hpatches": jobs_datasets.run_hpatches,
                     "resize-scene": jobs_datasets.run_resize_scene}
    a = sub.choices["demo-scene"].parse_args(["--scene", "i_rocket", "--out-dir", str(tmp_path)])
    assert (a.scene, a.out_dir, a.seed) == ("i_rocket", tmp_path, 0)
    jobs_datasets.run_demo_scene(a)
    assert sorted(p.name for p in (tmp_path / "i_rocket").iterdir() if p.name.startswith("H_")) == [f"H_1_{k}" for k in range(2, 7)]
    a = sub.choices["hpatches"].parse_args(["--urls", "u", "--data-dir", "d", "--flag", "f"])
    assert (a.urls, a.sha256, a.data_dir, a.flag) == (["u"], None, Path("d"), Path("f"))


def test_resize_scene_writes_what_resize_scene_writes(tmp_path, capsys):
    from descbench.datasets.resize import resize_scene

    generate_scene("v_coins", tmp_path / "src", 0)
    assert cli.main(["resize-scene", "--source", str(tmp_path / "src" / "v_coins"), "--out", str(tmp_path / "cli"),
                     "--size", "200", "--side", "long"]) == 0
    assert "1: 384x303 -> 200x157" in capsys.readouterr().out
    resize_scene(tmp_path / "src" / "v_coins", tmp_path / "direct", 200, "long")
    names = sorted(p.name for p in (tmp_path / "direct").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "cli").iterdir()) and "resized.json" in names
    assert all((tmp_path / "cli" / n).read_bytes() == (tmp_path / "direct" / n).read_bytes() for n in names)
    assert cli.main(["resize-scene", "--source", str(tmp_path / "src" / "v_coins"), "--out", str(tmp_path / "bad"),
                     "--size", "0", "--side", "long"]) != 0
    assert "resize.size must be a positive" in capsys.readouterr().err


def test_posed_demo_scene_writes_one_scene_and_refuses_another_name(tmp_path):
    from descbench.errors import ConfigError

    assert cli.main(["posed-demo-scene", "--scene", "posed_03", "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "posed_03" / "pairs.txt").is_file() and len(list((tmp_path / "posed_03" / "depths").iterdir())) == 5
    with pytest.raises(ConfigError, match="'posed_9' is not a scene of the posed demo; its scenes: posed_00"):
        jobs_datasets.run_posed_demo_scene(argparse.Namespace(scene="posed_9", out_dir=tmp_path, seed=0))
