"""descbench.jobs.checkconfig: ``check-config`` validates config files against the workflow's schema."""

from __future__ import annotations

from descbench import cli
from jobcli import ROOT


def test_the_default_config_is_valid_and_a_wrong_key_is_one_line(tmp_path, capsys):
    assert cli.main(["check-config", str(ROOT / "config.yaml")]) == 0
    assert capsys.readouterr().out == f"descbench: {ROOT / 'config.yaml'}: valid YAML and a valid descbench config\n"
    extra = tmp_path / "extra.yaml"
    extra.write_text("scoring:\n  no_such_key: 1\n")
    assert cli.main(["check-config", str(ROOT / "config.yaml"), str(extra)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("descbench: error: ") and "no_such_key" in err and err.count("\n") == 1
