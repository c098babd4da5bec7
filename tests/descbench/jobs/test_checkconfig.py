"""descbench.jobs.checkconfig: ``check-config`` validates config files against the workflow's schema."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from descbench import cli
from descbench.errors import ConfigError
from descbench.jobs import checkconfig
from jobcli import ROOT


@pytest.mark.bad_input
def test_the_default_config_is_valid_and_a_wrong_key_is_one_line(tmp_path, capsys):
    assert cli.main(["check-config", str(ROOT / "config.yaml")]) == 0
    assert capsys.readouterr().out == f"descbench: {ROOT / 'config.yaml'}: valid YAML and a valid descbench config\n"
    extra = tmp_path / "extra.yaml"
    extra.write_text("scoring:\n  no_such_key: 1\n")
    assert cli.main(["check-config", str(ROOT / "config.yaml"), str(extra)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("descbench: error: ") and "no_such_key" in err and err.count("\n") == 1


@pytest.mark.bad_input
def test_check_config_merges_the_files_in_order_and_names_a_wrong_key(tmp_path, capsys):
    override = tmp_path / "override.yaml"
    override.write_text("scoring:\n  tau_px: 2.5\n")
    checkconfig.check_config([ROOT / "config.yaml", override])
    assert capsys.readouterr().out == f"descbench: {ROOT / 'config.yaml'}, {override}: valid YAML and a valid descbench config\n"
    override.write_text("scoring:\n  tau_pix: 2.5\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'scoring.tau_pix' \(did you mean 'scoring.tau_px'\?\)"):
        checkconfig.check_config([ROOT / "config.yaml", override])
    assert capsys.readouterr().out == ""


def test_add_commands_gives_check_config_its_files():
    sub = argparse.ArgumentParser().add_subparsers()
    assert checkconfig.add_commands(sub) == {"check-config": checkconfig.run}
    assert sub.choices["check-config"].parse_args(["a.yaml", "b.yaml"]).files == [Path("a.yaml"), Path("b.yaml")]


@pytest.mark.bad_input
def test_device_cuda_on_a_machine_without_a_gpu_is_a_note_naming_the_key(tmp_path, capsys, monkeypatch):
    """A config may be meant for a cluster's GPU nodes: check-config says what a local run would refuse,
    and still passes; a CPU or auto device says nothing."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mine = tmp_path / "gpu.yaml"
    mine.write_text("descriptors:\n  hn:\n    family: hardnet\n    params: {weights: random, device: cuda}\n"
                    "  hs:\n    family: sosnet\n    params: {weights: random, device: auto}\n"
                    "keypoint_sets:\n  kn:\n    detector: keynet\n    params: {weights: random, device: cuda}\n")
    checkconfig.check_config([ROOT / "config.yaml", mine])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("valid YAML and a valid descbench config")
    notes = [line for line in lines if line.startswith("descbench: note: ")]
    assert [n.split(": ")[2].split(".device")[0] for n in notes] == ["descriptors.hn.params", "keypoint_sets.kn.params"], notes
    assert all("stops at DAG build" in n for n in notes)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    checkconfig.check_config([ROOT / "config.yaml", mine])
    assert "note" not in capsys.readouterr().out
