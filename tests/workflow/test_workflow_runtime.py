"""The workflow's runtime around the rules (issue 18): the Snakemake versions it accepts, what
descbench.smktuning applied (in the report's provenance), the jobs' cluster resources, the
patch-only target, the line about Snakemake merging config.yaml into a --configfile, and the
override forms Snakemake accepts on its command line.

The tests marked e2e run `snakemake -n` (dry runs, seconds each) on the demo config.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from conftest import job_settings
from smkrun import job_counts, snakemake

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))


def rule_names() -> list[str]:
    names = []
    for smk in RULE_FILES:
        names += re.findall(r"^\s*rule (\w+):", smk.read_text(), re.M)
    return names


def write_config(work: Path, **changes) -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg.update(changes)
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return cfg


# ----------------------------------------------------------------------------- Snakemake versions


def test_min_version_and_pyproject_range_agree():
    """min_version (first statement of the Snakefile, before any descbench import: an older
    Snakemake gets Snakemake's version message) = pyproject's lower bound; pyproject's upper bound
    is the next major; the installed Snakemake is in the range."""
    from packaging.requirements import Requirement
    from packaging.version import Version
    import snakemake

    text = (ROOT / "Snakefile").read_text()
    code = [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert code[0] == "from snakemake.utils import min_version"
    m = re.fullmatch(r'min_version\("([0-9.]+)"\)', code[1])
    assert m, code[:2]
    minimum = m.group(1)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    req = Requirement(next(d for d in deps if d.startswith("snakemake")))
    assert {(s.operator, s.version) for s in req.specifier} == {(">=", minimum), ("<", "10")}
    assert Version(snakemake.__version__) in req.specifier


def test_min_version_stops_an_older_snakemake(monkeypatch):
    """The Snakefile's min_version line, run under an older Snakemake version, stops with
    Snakemake's message naming both versions."""
    import snakemake.common
    from snakemake.exceptions import WorkflowError

    line = next(l for l in (ROOT / "Snakefile").read_text().splitlines() if l.startswith("min_version("))
    monkeypatch.setattr(snakemake.common, "__version__", "9.20.0")
    from snakemake.utils import min_version

    with pytest.raises(WorkflowError, match=r"Expecting Snakemake version 9\.27\.1 or higher.*9\.20\.0"):
        exec(line, {"min_version": min_version})


@pytest.mark.e2e
def test_the_report_records_what_smktuning_installed_and_the_former_switch_is_named(tmp_path):
    """The report job's --provenance (written to report/provenance.json params.snakemake) holds
    the Snakemake version and the SIGINT handler; the former DESCBENCH_SMK_TUNING gets one line."""
    from snakemake import __version__ as installed

    write_config(tmp_path)

    def record(out: str) -> dict:
        return job_settings(out, "--provenance", tmp_path, " -m descbench")[0]["snakemake"]

    out = snakemake(tmp_path, "-n", "-p")
    assert record(out) == {"version": installed, "applied": {"stop_jobs_on_interrupt": True}}
    assert "DESCBENCH_SMK_TUNING" not in out
    out = snakemake(tmp_path, "-n", "-p", env={"DESCBENCH_SMK_TUNING": "1"})
    assert record(out) == {"version": installed, "applied": {"stop_jobs_on_interrupt": True}}
    named = [l for l in out.splitlines() if "DESCBENCH_SMK_TUNING" in l]
    assert len(named) == 1 and named[0].startswith("descbench: DESCBENCH_SMK_TUNING='1' is no longer read"), named


# ----------------------------------------------------------------------------- patch-only runs


@pytest.mark.e2e
def test_patch_report_target_builds_the_patch_benchmarks_only(tmp_path):
    """`snakemake patch_report --configfile config/patches.yaml`: demo scenes and patch jobs, none of
    the sequence benchmark's keypoint, descriptor, scoring or report jobs."""
    write_config(tmp_path)
    out = snakemake(tmp_path, "-n", "patch_report", "--configfile", str(ROOT / "config" / "patches.yaml"))
    counts = job_counts(out)
    assert counts.get("patch_report") == 1 and counts.get("patch_evaluate", 0) >= 1, counts
    assert set(counts) <= {"demo_scene", "patch_generate", "patch_descriptors", "patch_tasks", "patch_evaluate", "patch_report"}, counts
    full = job_counts(snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config" / "patches.yaml")))
    assert {"keypoints", "descriptors", "score", "report"} <= set(full)  # what the target leaves out


@pytest.mark.e2e
def test_patch_report_without_patch_benchmarks_says_how_to_turn_them_on(tmp_path):
    write_config(tmp_path)
    out = snakemake(tmp_path, "-n", "patch_report", ok=False)
    assert "descbench: the target patch_report runs the patch benchmarks, which this config leaves off" in out
    assert "patches.enabled: true" in out


# ----------------------------------------------------------------------------- config merging


@pytest.mark.e2e
def test_a_configfile_merged_into_config_yaml_is_said_in_one_line(tmp_path):
    write_config(tmp_path)
    mine = tmp_path / "mine.yaml"
    mine.write_text("scenes: [i_rocket, v_coins]\nkeypoint_sets:\n  sift:\n    detector: sift\n"
                    "descriptors:\n  rootsift:\n    family: rootsift\n")
    out = snakemake(tmp_path, "-n", "--configfile", str(mine))
    lines = [l for l in out.splitlines() if l.startswith("descbench: Snakemake merges")]
    assert lines == [f"descbench: Snakemake merges --configfile {mine} into config.yaml, so this run also has "
                     "config.yaml's descriptors sift; to run the file's entries alone add --replace-workflow-config"]
    assert job_counts(out)["descriptors"] == 2  # sift and rootsift: config.yaml's sift joined
    alone = snakemake(tmp_path, "-n", "--configfile", str(mine), "--replace-workflow-config")
    assert "descbench: Snakemake merges" not in alone and job_counts(alone)["descriptors"] == 1
    # --config alone is meant to change config.yaml: nothing to say
    assert "descbench: Snakemake merges" not in snakemake(tmp_path, "-n", "--config", "descriptors={rootsift: {family: rootsift}}")


# ----------------------------------------------------------------------------- --config forms


@pytest.mark.bad_input
@pytest.mark.e2e
def test_the_dotted_config_form_is_refused_by_snakemake_before_the_snakefile(tmp_path):
    """Snakemake refuses `--config scoring.tau_px=5` while reading its own command line (no
    descbench code has run: nothing in the Snakefile can catch it); the supported forms are
    written where a user looks: the Snakefile's header and README."""
    write_config(tmp_path)
    out = snakemake(tmp_path, "-n", "--config", "scoring.tau_px=5", ok=False)
    assert "Config entry must start with a valid identifier" in out
    assert "descbench" not in out.replace(str(ROOT), "")
    header = (ROOT / "Snakefile").read_text().split("\nfrom ", 1)[0]
    readme = (ROOT / "README.md").read_text()
    for text in (header, readme):
        assert "--config 'scoring={tau_px: 5}'" in text and "scoring.tau_px=5" in text


# ----------------------------------------------------------------------------- cluster resources

ESTIMATED = {"keypoints": "keypoint_job", "descriptors": "descriptor_job", "score": "score_job",
             "patch_descriptors": "patch_job"}


def rule_blocks() -> dict[str, str]:
    out = {}
    for smk in RULE_FILES:
        parts = re.split(r"(?m)^(?=[ \t]*rule \w+:)", smk.read_text())
        for part in parts:
            m = re.match(r"[ \t]*rule (\w+):", part)
            if m:
                out[m.group(1)] = part
    return out


def resources_block(block: str) -> str:
    m = re.search(r"\n([ \t]*)resources:\n((?:\1    .*\n)+)", block)
    assert m, block[:200]
    return m.group(2)


def test_every_rule_asks_for_memory_and_runtime():
    """mem_mb and runtime on every rule (a cluster job's --mem and -t); the keypoint, descriptor,
    score and patch-descriptor rules from descbench.jobresources, times the attempt."""
    blocks = rule_blocks()
    assert set(ESTIMATED) <= set(blocks)
    for name, block in blocks.items():
        res = resources_block(block)
        assert re.search(r"^\s*mem_mb=", res, re.M) and re.search(r"^\s*runtime=", res, re.M), name
        if name in ESTIMATED:
            fn = ESTIMATED[name]
            assert f'mem_mb=lambda wc, attempt: {fn}(wc)["mem_mb"] * attempt,' in res, name
            assert f'runtime=lambda wc, attempt: {fn}(wc)["runtime"] * attempt,' in res, name
    # the GPU and thread logic of the learned families stays
    assert 'gpu=lambda wc: keypoint_resources(wc)["gpu"]' in resources_block(blocks["keypoints"])
    assert 'gpu=lambda wc: descriptor_resources(wc)["gpu"]' in resources_block(blocks["descriptors"])
    assert 'threads: lambda wc: descriptor_resources(wc)["threads"]' in blocks["descriptors"]


@pytest.mark.parametrize("profile", ["slurm", "cluster-generic"])
def test_the_cluster_profiles_list_every_rule_and_leave_its_resources_to_it(profile):
    text = (ROOT / "profiles" / profile / "config.yaml").read_text()
    comments = "\n".join(l for l in text.splitlines() if l.lstrip().startswith("#"))
    for name in rule_names():
        assert re.search(rf"\b{name}\b", comments), (profile, name)
    cfg = yaml.safe_load(text)
    # a set-resources entry would replace the rules' estimates (Snakemake's precedence)
    overridden = {r for r, v in (cfg.get("set-resources") or {}).items() if {"mem_mb", "runtime"} & set(v)}
    assert not overridden & set(ESTIMATED), overridden


def dry_run_resources(out: str) -> dict[str, list[dict]]:
    """rule -> the resources of each of its jobs, from a dry run's job listing."""
    res: dict[str, list[dict]] = {}
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", out, re.M):
        r = re.search(r"^\s*resources: (.*)$", m.group(2), re.M)
        if r:
            vals = dict(kv.split("=", 1) for kv in r.group(1).split(", ") if "=" in kv)
            res.setdefault(m.group(1), []).append(vals)
    return res


@pytest.mark.e2e
def test_large_images_get_the_memory_their_jobs_need(tmp_path, monkeypatch):
    """A folder dataset of 27 MP images (headers only: nothing decodes them at DAG time): the
    keypoint job asks for at least the 6.2 GB a 27 MP keypoint job was measured to use (it asked
    for 1500 MB before), and every estimated job asks for exactly descbench.jobresources' value."""
    from descbench import jobresources
    from descbench.config import validate_config

    scene = tmp_path / "imgs" / "big_scene"
    scene.mkdir(parents=True)
    for k in range(1, 7):
        (scene / f"{k}.ppm").write_bytes(b"P6\n6000 4500\n255\n")
    for k in range(2, 7):
        (scene / f"H_1_{k}").write_text("1 0 0\n0 1 0\n0 0 1\n")
    cfg = write_config(tmp_path, dataset="folder", folder={"path": "imgs", "name": "big"}, scenes=None)
    out = snakemake(tmp_path, "-n")
    got = dry_run_resources(out)
    monkeypatch.chdir(tmp_path)
    vcfg = validate_config(cfg, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    dirs = [scene]
    want = {"keypoints": jobresources.keypoint_job(vcfg, "sift", dirs),
            "descriptors": jobresources.descriptor_job(vcfg, "sift", "sift", dirs),
            "score": jobresources.score_job(vcfg, "sift", "sift", dirs)}
    for rule, expected in want.items():
        assert got[rule], rule
        for job in got[rule]:
            assert int(job["mem_mb"]) == expected["mem_mb"] and int(job["runtime"]) == expected["runtime"], (rule, job, expected)
    assert int(got["keypoints"][0]["mem_mb"]) >= 6200
    # the small rules keep their fixed values
    assert [int(j["mem_mb"]) for j in got["report"]] == [2000] and [int(j["runtime"]) for j in got["report"]] == [15]


@pytest.mark.e2e
def test_a_job_is_sized_from_the_files_there_when_it_starts(tmp_path, monkeypatch):
    """A job is sized from the files written before it starts (the jobresources docstring:
    Snakemake asks for a job's resources again when it is ready), not from the defaults assumed
    at DAG build. A folder dataset resized during the run (at DAG build the resized
    scene is not there: 6000 x 4500 assumed; 640 px after) and SIFT at contrast_threshold 0.2 (a few keypoints
    where the model assumes ~2,000): the keypoint job asks for the resized images' estimate, the
    score job for the written keypoint counts'."""
    from descbench import jobresources
    from descbench.config import validate_config
    from descbench.datasets import experiment_name, scene_root
    from descbench.datasets.demo import generate_scene

    generate_scene("i_rocket", tmp_path / "imgs", seed=0)
    cfg = write_config(tmp_path, dataset="folder", folder={"path": "imgs", "name": "small"}, scenes=None,
                       resize={"size": 640, "side": "long"})
    cfg["descriptors"] = {"sift": cfg["descriptors"]["sift"]}
    cfg["keypoint_sets"]["sift"]["params"]["contrast_threshold"] = 0.2
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    vcfg = validate_config(cfg, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    batch = Path(vcfg["results_dir"]) / experiment_name(vcfg) / "scores" / "sift" / "sift" / "batch000"
    got = dry_run_resources(snakemake(tmp_path, "--cores", "1", str(batch)))
    scene = [scene_root(vcfg) / "i_rocket"]
    fresh = {"keypoints": jobresources.keypoint_job(vcfg, "sift", scene),
             "score": jobresources.score_job(vcfg, "sift", "sift", scene)}
    at_dag_build = [tmp_path / "not_there"], {**vcfg, "results_dir": str(tmp_path / "no_results")}
    stale = {"keypoints": jobresources.keypoint_job(at_dag_build[1], "sift", at_dag_build[0]),
             "score": jobresources.score_job(at_dag_build[1], "sift", "sift", at_dag_build[0])}
    # the keypoint counts, not only the image sizes, change the score job's estimate
    assert fresh["score"] != jobresources.score_job(at_dag_build[1], "sift", "sift", scene)
    for rule in fresh:
        assert fresh[rule] != stale[rule], (rule, fresh[rule])  # the case is one where the files change the estimate
        assert [{k: int(j[k]) for k in fresh[rule]} for j in got[rule]] == [fresh[rule]], (rule, got[rule])


FLAKY = '''import os
import numpy as np


def desc(image, keypoints):
    if not os.path.exists("first_attempt.done"):
        open("first_attempt.done", "w").close()
        raise RuntimeError("first attempt fails")
    return np.ones((len(keypoints), 8), np.float32)
'''


@pytest.mark.e2e
def test_a_retried_job_asks_for_twice_as_much(tmp_path):
    """A job that failed (as SLURM's memory or time kill would) is retried (`retries: 1` in the
    cluster profiles) with attempt x its estimate."""
    (tmp_path / "flaky.py").write_text(FLAKY)
    write_config(tmp_path, scenes=["v_coins"], descriptors={"flaky": {"family": "python", "params": {"callable": "flaky:desc"}}})
    out = snakemake(tmp_path, "--cores", "1", "--retries", "1", "results/demo/descriptors/sift/flaky/batch000")
    jobs = dry_run_resources(out)["descriptors"]
    assert len(jobs) == 2 and "first attempt fails" in out
    first, second = jobs
    assert int(second["mem_mb"]) == 2 * int(first["mem_mb"]) and int(second["runtime"]) == 2 * int(first["runtime"])


# ----------------------------------------------------------------------------- device: cuda at DAG build


@pytest.mark.e2e
@pytest.mark.bad_input
def test_device_cuda_without_a_gpu_stops_a_local_run_at_dag_build(tmp_path):
    """A learned descriptor with device: cuda, torch seeing no GPU (CUDA_VISIBLE_DEVICES empty, so
    the test means the same on a GPU machine): a local run stops while the DAG is built, before
    any job, naming the key and the fix; a dry run (whatever executor the real run names) warns."""
    cfg = write_config(tmp_path, results_dir=str(tmp_path / "res"))
    cfg["descriptors"] = {**cfg["descriptors"], "hn": {"family": "hardnet", "params": {"weights": "random", "device": "cuda"}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {"CUDA_VISIBLE_DEVICES": ""}
    out = snakemake(tmp_path, "--cores", "1", ok=False, env=env)
    assert "descriptors.hn.params.device: 'cuda', but torch" in out and "sees no CUDA device" in out, out[-3000:]
    assert "fix: use device 'cpu' or 'auto'" in out and "--executor slurm" in out
    assert "Traceback" not in out and "InputFunctionException" not in out
    assert not list((tmp_path / "res").rglob("*.parquet")) and not (tmp_path / "res" / "logs").exists()
    dry = snakemake(tmp_path, "-n", env=env)
    assert "descriptors.hn.params.device: 'cuda'" in dry and "a run with Snakemake's local executor stops here" in dry
    assert job_counts(dry).get("descriptors", 0) >= 1
