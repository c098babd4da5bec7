"""The rules' interpreter (issue 18): every job runs descbench with the interpreter that runs
Snakemake (``DESCBENCH`` in workflow/rules/common.smk, descbench.smktuning.job_command), so that
``venv/bin/snakemake`` works without activating the venv; under ``--software-deployment-method
conda`` a job uses its env's ``python`` with this checkout's ``workflow/`` on PYTHONPATH."""

from __future__ import annotations

import json
import os
import re
import shlex
import site
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from descbench import smktuning

ROOT = Path(__file__).resolve().parents[2]
RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
DIRECTIVE = re.compile(r"^\s*(\w+):\s*(#.*)?$|^\s*(rule|checkpoint) \w+:")


def _shell_blocks(text: str) -> dict[str, str]:
    """rule name -> its `shell:` text (the string literals under the directive)."""
    out, rule, block = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^\s*rule (\w+):", line)
        if m:
            rule, block = m.group(1), None
            continue
        if re.match(r"^\s*shell:\s*$", line):
            block = out.setdefault(rule, "")
            continue
        if block is not None:
            if DIRECTIVE.match(line) or not line.strip() or not line.strip().startswith(('"', "'", "f\"", "r\"")):
                block = None
                continue
            out[rule] += line.strip()
    return out


def test_no_rule_calls_a_bare_python():
    """No `python -m descbench` (nor python3, nor a plain `descbench` script) in any rule file:
    every shell starts descbench through {params.descbench}, the rule param set to DESCBENCH (a param,
    as `snakemake --lint` asks for values a shell uses)."""
    for smk in RULES:
        text = smk.read_text()
        assert not re.search(r"\bpython3?(\.\d+)?\s+-m\s+descbench", text), smk.name
        for rule, shell in _shell_blocks(text).items():
            assert "{params.descbench} " in shell, (smk.name, rule, shell)
            assert "descbench=DESCBENCH," in text
            assert not re.search(r"(^|[;&|]\s*)descbench\b", shell), (smk.name, rule, shell)


def test_every_rule_with_a_shell_is_seen_by_the_parser_above():
    """The check above covers every rule of the rule files (each has a shell)."""
    for smk in RULES:
        text = smk.read_text()
        rules = re.findall(r"^\s*rule (\w+):", text, re.M)
        assert sorted(_shell_blocks(text)) == sorted(rules), smk.name


def test_local_runs_use_the_interpreter_that_runs_snakemake():
    cmd = smktuning.job_command(frozenset(), "/opt/my env/bin/python", ROOT / "workflow")
    assert cmd == "'/opt/my env/bin/python' -m descbench"
    assert shlex.split(cmd) == ["/opt/my env/bin/python", "-m", "descbench"]


def test_deployment_methods_choose_the_command():
    """CONDA (Snakemake's DeploymentMethod enum, or its name): the env's python + PYTHONPATH;
    APPTAINER only where the rules run in a container (descbench's rules declare none);
    ENV_MODULES: the host's interpreter."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    env_form = f"PYTHONPATH={ROOT / 'workflow'}${{PYTHONPATH:+:$PYTHONPATH}} python -m descbench"
    assert smktuning.job_command({DeploymentMethod.CONDA}, sys.executable, ROOT / "workflow") == env_form
    assert smktuning.job_command({DeploymentMethod.CONDA, DeploymentMethod.APPTAINER}, sys.executable, ROOT / "workflow") == env_form
    assert smktuning.job_command({DeploymentMethod.APPTAINER}, sys.executable, ROOT / "workflow").startswith(shlex.quote(sys.executable))
    assert smktuning.job_command({DeploymentMethod.APPTAINER}, sys.executable, ROOT / "workflow", in_container=True) == env_form
    assert smktuning.job_command({DeploymentMethod.ENV_MODULES}, sys.executable, ROOT / "workflow").startswith(shlex.quote(sys.executable))


def _python_without_descbench(tmp_path: Path) -> Path:
    """A `python` that has descbench's dependencies but not descbench (what a conda env built from
    envs/descbench.yaml is to the rules): a bare venv whose .pth names the system site-packages
    as a plain path (its .pth files, the editable install's among them, are not processed)."""
    venv = tmp_path / "envpy"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    sp = next((venv / "lib").glob("python3*/site-packages"))
    (sp / "system_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    wrapper = tmp_path / "envbin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(str(venv / 'bin' / 'python'))} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def test_the_conda_form_reaches_this_checkouts_package(tmp_path):
    """The env form run by bash with an env `python` lacking descbench imports descbench from
    <repo>/workflow and keeps a PYTHONPATH the job already had; without the prefix it cannot."""
    envpy = _python_without_descbench(tmp_path)
    env = {"PATH": f"{envpy.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    bare = subprocess.run(["bash", "-c", "python -c 'import numpy, descbench'"], env=env, capture_output=True, text=True)
    assert bare.returncode != 0 and "No module named 'descbench'" in bare.stderr
    cmd = smktuning.job_command({"CONDA"}, sys.executable, ROOT / "workflow").replace(" -m descbench", "")
    probe = "import descbench, sys; print(descbench.__file__); print(*sys.path[1:3])"  # sys.path[0]: '' (-c)
    out = subprocess.run(["bash", "-c", f"{cmd} -c {shlex.quote(probe)}"], env={**env, "PYTHONPATH": "/elsewhere"},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] == str(ROOT / "workflow" / "descbench" / "__init__.py")
    assert lines[1:] == [str(ROOT / "workflow"), "/elsewhere"]  # the job's own PYTHONPATH kept, after it


def _shadow_bin(tmp_path: Path) -> Path:
    """A folder whose `python` and `python3` fail loudly: first on PATH, any rule that calls a bare
    `python` fails."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for name in ("python", "python3"):
        p = shadow / name
        p.write_text("#!/bin/sh\necho 'shadow python: a rule called a bare python' >&2\nexit 1\n")
        p.chmod(0o755)
    return shadow


def _demo_workdir(tmp_path: Path, scenes=("i_rocket", "v_coins")) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = list(scenes)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return work


def _venv_on_this_environment(venv: Path) -> Path:
    """A new venv (its python returned) that also sees the site-packages of the Python running
    the tests, so that nothing is downloaded: the dependencies, pip and setuptools come from there.
    Not `--system-site-packages`: from a venv that would give the base interpreter's packages, not
    the venv's (the tests may run in a venv, as README's commands allow)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    purelib = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # a .pth line starting with `import` is run at start-up: addsitedir also reads those folders' .pth files
    (Path(purelib) / "_tests_outer_environment.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in site.getsitepackages()) + "\n")
    return vpy


@pytest.mark.e2e
def test_a_venv_snakemake_runs_the_demo_without_activating_the_venv(tmp_path):
    """`python -m venv`, `pip install -e .` into it, then `<venv>/bin/python -m snakemake --cores 2`
    (what `venv/bin/snakemake` runs) with a PATH whose `python` cannot run descbench: every job
    uses the venv's interpreter and the demo (2 scenes) finishes."""
    venv = tmp_path / "venv"
    vpy = _venv_on_this_environment(venv)
    res = subprocess.run([str(vpy), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-e", str(ROOT)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    shadow = _shadow_bin(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{shadow}:/usr/bin:/bin"
    check = subprocess.run(["bash", "-c", "python -c 'import descbench'"], env=env, capture_output=True, text=True)
    assert check.returncode != 0, "the PATH of this test must not have a python that imports descbench"
    work = _demo_workdir(tmp_path)
    cmd = [str(vpy), "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--cores", "2", "-p"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    assert "shadow python" not in out
    shells = [l for l in out.splitlines() if " -m descbench " in l]
    assert shells and all(f"{shlex.quote(str(vpy))} -m descbench " in l for l in shells), shells[:3]
    assert (work / "results" / "demo" / "report" / "comparison.csv").exists()
    # the run's Snakemake and what descbench.smktuning applied are in the report's provenance
    prov = json.loads((work / "results" / "demo" / "report" / "provenance.json").read_text())["params"]["snakemake"]
    assert prov["applied"] == {"stop_jobs_on_interrupt": True}


_STUB_CONDA = r"""#!/bin/bash
# A stand-in for conda (no conda channel is reachable here): answers what Snakemake 9 asks and
# "creates" an env whose python is ENV_PYTHON (descbench's dependencies, not descbench).
case "$1 $2" in
  "info --json") echo '{"conda_prefix": "BASE", "platform": "linux-64", "conda_version": "24.7.1"}' ;;
  "--version "*) echo "conda 24.7.1" ;;
  "clean "*) ;;
  "config --get") echo '{"get": {"channel_priority": "strict"}, "rc_path": null, "success": true, "warnings": []}' ;;
  *create*|"env create")
    prev=""; for a in "$@"; do
      if [ "$prev" = "--prefix" ]; then prefix="${a//\"/}"; fi
      case "$a" in --prefix=*) prefix="${a#--prefix=}";; esac
      prev="$a"; done
    mkdir -p "$prefix/bin" && ln -sf "ENV_PYTHON" "$prefix/bin/python" && echo "stub env at $prefix" ;;
  *) echo "stub conda: unexpected: $*" >&2; exit 2 ;;
esac
"""


@pytest.mark.e2e
def test_conda_deployment_runs_jobs_with_the_envs_python_and_the_checkouts_package(tmp_path):
    """`--software-deployment-method conda` with a stand-in conda (no channel is reachable from
    here; what a real conda would install is envs/descbench.yaml's business): Snakemake creates the
    env, activates it around every job, and the jobs' `python` (dependencies, no descbench) runs
    descbench from this checkout through PYTHONPATH. The demo's keypoint statistics finish."""
    envpy = _python_without_descbench(tmp_path)
    base = tmp_path / "condabase"
    (base / "bin").mkdir(parents=True)
    conda = base / "bin" / "conda"
    conda.write_text(_STUB_CONDA.replace("BASE", str(base)).replace("ENV_PYTHON", str(envpy)))
    conda.chmod(0o755)
    # `source <base>/bin/activate <env>`, as Snakemake wraps each job
    (base / "bin" / "activate").write_text('export PATH="$1/bin:$PATH"\n')
    shadow = _shadow_bin(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{base / 'bin'}:{shadow}:/usr/bin:/bin"
    work = _demo_workdir(tmp_path)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--cores", "2", "-p",
           "--software-deployment-method", "conda", "--conda-prefix", str(tmp_path / "envs"), "keypoint_stats"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    assert "shadow python" not in out
    created = [p for p in (tmp_path / "envs").iterdir() if p.is_dir()]
    assert len(created) == 1 and (created[0] / "bin" / "python").is_symlink()
    jobs = [l for l in out.splitlines() if " -m descbench " in l]
    prefix = f"PYTHONPATH={ROOT / 'workflow'}${{PYTHONPATH:+:$PYTHONPATH}} python -m descbench "
    assert jobs and all(prefix in l for l in jobs), jobs[:3]
    assert (work / "results" / "demo" / "report" / "keypoint_stats.csv").exists()
