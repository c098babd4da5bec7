"""The two README commands stay true: CI runs README's test command; envs/ installs the package."""

from __future__ import annotations

import re

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_readme_test_command():
    ci_cmd = [l for l in (ROOT / ".ci/run").read_text().splitlines() if l.startswith("pip install")][0]
    readme = (ROOT / "README.md").read_text()
    assert ci_cmd in readme
    assert "pip install -e . && snakemake --cores 2" in readme


def test_conda_env_installs_this_package():
    env = yaml.safe_load((ROOT / "envs/descbench.yaml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict)][0]["pip"]
    assert "-e .." in pip


def test_every_rule_has_log_and_conda():
    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        text = smk.read_text()
        rules = len(re.findall(r"^\s*rule \w+:", text, re.M))  # at any nesting (rules inside `if`s)
        assert text.count("log:") == rules and text.count("conda:") == rules, smk.name
