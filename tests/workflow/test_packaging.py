"""The two README commands stay true: CI runs README's test command; the rules' conda env holds the
dependencies and reaches the package through the checkout (tests/workflow/test_deployment.py checks the env
file as Snakemake deploys it, its packages and the lock)."""

from __future__ import annotations

import re

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_readme_test_command():
    ci_cmd = [l for l in (ROOT / ".ci/run").read_text().splitlines() if l.startswith("pip install")][0]
    readme = (ROOT / "README.md").read_text()
    assert ci_cmd in readme
    assert "pip install -e . && snakemake --cores 2" in readme


def test_conda_envs_do_not_install_the_package():
    """No pip section (its `-e ..` would resolve against Snakemake's copy of the file in
    .snakemake/conda/): the rules put this checkout's workflow/ on PYTHONPATH instead, and say so."""
    for name in ("descbench.yaml", "learned.yaml"):
        text = (ROOT / "envs" / name).read_text()
        env = yaml.safe_load(text)
        assert all(isinstance(d, str) for d in env["dependencies"]) and "pip" not in env["dependencies"], name
        assert "PYTHONPATH" in text, name


def test_every_rule_has_log_and_conda():
    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        text = smk.read_text()
        rules = len(re.findall(r"^\s*rule \w+:", text, re.M))  # at any nesting (rules inside `if`s)
        assert text.count("log:") == rules and text.count("conda:") == rules, smk.name
