"""descbench.jobs.patches: the ``patches`` command's steps reach descbench.patches.stages."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import descbench.patches.stages as ps
from descbench import cli
from descbench.jobs import patches as jobs_patches
from descbench.jobs.common import JobCommand
from jobcli import config


def test_generate_writes_a_scenes_patches(pristine, tmp_path, capsys):
    params = json.dumps({**config()["patches"]["generate"], "max_patches": 50})
    assert cli.main(["patches", "generate", "--scene-dir", str(pristine), "--out-dir", str(tmp_path / "p"), "--params", params]) == 0
    assert capsys.readouterr().out.startswith(f"{pristine.name}: ")
    assert any((tmp_path / "p").iterdir())


def test_describe_and_evaluate_pass_their_settings(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(ps, "describe", lambda *a: calls.append(("describe", a)))
    monkeypatch.setattr(ps, "import_csv", lambda *a: calls.append(("import_csv", a)))
    monkeypatch.setattr(ps, "evaluate", lambda *a: calls.append(("evaluate", a)))
    base = ["patches", "describe", "--patch-dir", str(tmp_path), "--out", str(tmp_path / "o.parquet"), "--name", "d", "--threads", "0"]
    assert cli.main(base + ["--spec", '{"family": "sift", "params": {}}']) == 0
    assert cli.main(base + ["--csv-root", str(tmp_path / "csv"), "--binary-packed"]) == 0
    assert cli.main(["patches", "evaluate", "--tasks", str(tmp_path), "--name", "d", "--config", '{"a": 1}', "--out-dir",
                     str(tmp_path), str(tmp_path / "s.parquet")]) == 0
    assert calls == [("describe", (tmp_path, tmp_path / "o.parquet", "d", {"family": "sift", "params": {}}, "hpatches_benchmark")),
                     ("import_csv", (tmp_path / "csv", tmp_path, tmp_path / "o.parquet", "d", True)),
                     ("evaluate", (tmp_path, [tmp_path / "s.parquet"], "d", {"a": 1}, tmp_path))]


def test_add_commands_gives_every_step_its_options():
    sub = argparse.ArgumentParser().add_subparsers()
    assert {cmd: JobCommand.of(job).run for cmd, job in jobs_patches.add_commands(sub).items()} == {"patches": jobs_patches.run}
    p = sub.choices["patches"]
    a = p.parse_args(["describe", "--patch-dir", "pd", "--out", "o.parquet", "--name", "n"])
    assert (a.step, a.patch_dir, a.centre_keypoint, a.threads, a.binary_packed, a.spec) == \
        ("describe", Path("pd"), "hpatches_benchmark", 1, False, None)
    a = p.parse_args(["evaluate", "--tasks", "t", "--name", "n", "--config", "{}", "--out-dir", "o", "a.parquet", "b.parquet"])
    assert a.files == [Path("a.parquet"), Path("b.parquet")]
    with pytest.raises(SystemExit):
        p.parse_args([])  # a step is required
