"""Deployment (issue 18): the conda environments of `--software-deployment-method conda` as Snakemake
deploys them, and the pinned, hashed lock of the whole dependency set.

No conda channel is reachable from the machines that run these tests: nothing here creates a real
environment. What is checked is what Snakemake's conda deployment sees (Snakemake's own code, with a
stand-in `conda` that records how it is called): the file it copies to `.snakemake/conda/<hash>_.yaml`
and hands to `conda env create`, the paths in it, and its packages against pyproject.toml and the lock.
Whether conda-forge serves every pinned version and whether the jobs' numbers equal those of the
pip-installed packages can only be seen where conda-forge is reachable (README, 'Installing exactly the
tested versions').
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from descbench import io

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / "envs"
ENV_FILE = ENVS / "descbench.yaml"
LEARNED_ENV_FILE = ENVS / "learned.yaml"
LOCK = ENVS / "lock-py311-linux-x86_64.txt"
TEST_CONSTRAINTS = ENVS / "test-constraints.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# pyproject.toml's runtime dependency -> its conda-forge package in envs/descbench.yaml. A new
# dependency must be added here (and to the env), or to NOT_IN_JOBS with the reason.
CONDA_NAME = {
    "numpy": "numpy",
    # conda-forge's OpenCV is built with the contrib modules; its headless builds (build string
    # headless_*) have no Qt. py-opencv is the cv2 module (libopencv the C++ libraries it pins).
    "opencv-contrib-python-headless": "py-opencv",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "numba": "numba",
    "scikit-image": "scikit-image",
    "jsonschema": "jsonschema",
    "pyyaml": "pyyaml",
    "threadpoolctl": "threadpoolctl",
    # matplotlib without the GUI toolkits (the report writes files)
    "matplotlib": "matplotlib-base",
}
# pyproject.toml's runtime dependencies that the jobs do not use (test_the_jobs_import_only_what_the_env_has)
NOT_IN_JOBS = {
    "snakemake": "the Snakemake process (the Snakefile, descbench.smktuning, descbench.runguard), not a job",
    "pygments": "snakemake --report (HTML), in the Snakemake process",
    "tqdm": "the progress bar of the Python API's in-process evaluations (descbench.evaluate), never a job",
}
# the `learned` extra -> its conda-forge package in envs/learned.yaml
LEARNED_CONDA_NAME = {"torch": "pytorch", "kornia": "kornia", "onnx": "onnx", "onnxruntime": "onnxruntime"}
# conda build strings that choose a variant, as the env files write them
CONDA_BUILD = {"py-opencv": "headless*", "pytorch": "cpu_*"}
# top-level module -> distribution, for every third-party import of the package's modules
IMPORT_DIST = {
    "numpy": "numpy", "cv2": "opencv-contrib-python-headless", "pandas": "pandas", "pyarrow": "pyarrow",
    "numba": "numba", "skimage": "scikit-image", "jsonschema": "jsonschema", "yaml": "pyyaml",
    "threadpoolctl": "threadpoolctl", "matplotlib": "matplotlib",
    "torch": "torch", "kornia": "kornia", "onnx": "onnx", "onnxruntime": "onnxruntime",
}
# optional packages that no env installs: a package module may import one only inside a function and
# a ``try`` that catches ImportError (its absence is then an error naming the fix, raised only when the
# option is chosen), never at module level (test_the_jobs_import_only_what_the_env_has)
OPTIONAL_IMPORTS = {
    # the `estimators` extra of pyproject.toml (pip installs it; README's test command does, so CI runs it)
    "poselib": "the `poselib` homography estimator of descbench/estimators/homography.py (pip install poselib)",
    # the `interop` extra: hloc / glue-factory HDF5 feature files (descbench/featurefiles.py)
    "h5py": "hloc / glue-factory feature files of descbench/featurefiles.py and HDF5 depth maps of posed scenes (descbench/datasets/posed.py) (pip install descbench[interop])",
}
# package modules that only the Snakemake process imports (workflow/rules/common.smk): they may use
# snakemake and what it installs (psutil); no job imports them
SNAKEMAKE_SIDE = {"smktuning", "runguard"}
# package modules that only a user's own Python process imports (the Python API): they may use what
# pyproject.toml installs for it (tqdm); no job imports them (only descbench.api imports evaluate)
API_SIDE = {"evaluate": {"api"}}

CONDA_PIN = re.compile(r"(?P<name>[a-z0-9][a-z0-9_.-]*)=(?P<version>\d[0-9A-Za-z.]*)(=(?P<build>[A-Za-z0-9_.*]+))?")


def conda_pins(path: Path) -> dict[str, tuple[str, str | None]]:
    """package -> (version, build or None) of a conda env file whose every dependency is a conda
    package pinned as name=version[=build] (no pip section, no path)."""
    env = yaml.safe_load(path.read_text())
    assert env["channels"] == ["conda-forge", "nodefaults"], path.name
    pins = {}
    for dep in env["dependencies"]:
        assert isinstance(dep, str), (
            f"{path.name}: {dep!r}: no pip section (descbench is reached through PYTHONPATH set by the rules, "
            "its dependencies are conda-forge packages)")
        m = CONDA_PIN.fullmatch(dep)
        assert m, f"{path.name}: {dep!r} is not a pinned conda package (name=version or name=version=build)"
        assert m["name"] not in pins, f"{path.name}: {m['name']} twice"
        pins[m["name"]] = (m["version"], m["build"])
    return pins


def local_references(env: dict, env_file: Path) -> list[tuple[str, Path]]:
    """The entries of a conda env file that name a file or folder, each with the path that `conda env
    create --file <env_file>` resolves it to (relative to the folder of the file it reads: for a
    Snakemake run, the copy in .snakemake/conda/): a pip section's -e/-r/-c/local paths, a local
    channel, a conda dependency given as a path."""
    def path_of(ref: str) -> str | None:
        ref = ref.strip()
        for opt in ("-e", "--editable", "-r", "--requirement", "-c", "--constraint"):
            if ref.startswith(opt + " ") or ref.startswith(opt + "="):
                return ref[len(opt) + 1:].strip()
        if ref.startswith("file:"):
            return ref[len("file:"):]
        if ref.startswith((".", "/", "~")):
            return ref
        return None

    refs = []
    for entry in [*env.get("channels", []), *env.get("dependencies", [])]:
        items = entry.get("pip", []) if isinstance(entry, dict) else [entry]
        for item in items:
            p = path_of(str(item))
            if p is not None:
                refs.append((str(item), (env_file.parent / Path(p).expanduser()).resolve()))
    return refs


def lock_pins(path: Path) -> dict[str, tuple[str, list[str]]]:
    """canonical name -> (pinned version, sha256 hashes) of a pip-compile lock; every requirement
    must be `name==version` with at least one --hash and nothing else."""
    out = {}
    for line in path.read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("-"), f"{path.name}: {line!r}: the lock names no index or option (portable)"
        parts = line.split()
        req = Requirement(parts[0])
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==" and not req.marker and not req.url, (path.name, parts[0])
        hashes = [p.removeprefix("--hash=sha256:") for p in parts[1:]]
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), f"{path.name}: {parts[0]} without a sha256 --hash"
        assert len(hashes) == len(parts) - 1, (path.name, parts)
        name = canonicalize_name(req.name)
        assert name not in out, f"{path.name}: {name} twice"
        out[name] = (specs[0].version, hashes)
    return out


def constraint_pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line
            out[canonicalize_name(req.name)] = spec.version
    return out


def pyproject_requirements(extras: bool = True) -> list[tuple[str, Requirement]]:
    """(where, requirement) for pyproject's dependencies and, with ``extras``, every extra's."""
    out = [("dependencies", Requirement(r)) for r in PYPROJECT["dependencies"]]
    if extras:
        for extra, reqs in PYPROJECT["optional-dependencies"].items():
            out += [(f"extra {extra}", Requirement(r)) for r in reqs]
    return out


def conda_version(dist: str, version: str) -> str:
    """The conda-forge version of the PyPI release ``version`` of ``dist``."""
    v = Version(version)
    if dist == "opencv-contrib-python-headless":  # PyPI's 4th number numbers the wheel builds of OpenCV x.y.z
        return ".".join(map(str, v.release[:3]))
    return v.public  # torch 2.13.0+cpu: the CPU build is conda's build string (cpu_*), not its version


# ----------------------------------------------------------------------------- the lock


def test_the_lock_pins_every_package_exactly_with_hashes():
    pins = lock_pins(LOCK)
    assert len(pins) > 50  # the whole closure (snakemake, its plugins, torch...), not the direct dependencies
    assert pins["torch"][0] == "2.13.0+cpu"  # the CPU build the tests ran with, not PyPI's CUDA build
    assert len(pins["torch"][1]) == 1  # the one wheel of that build (CPython 3.11, Linux x86_64)


def test_the_lock_satisfies_pyproject():
    """Every requirement of pyproject.toml, its extras' included, has a pin in the lock that
    satisfies it; and the lock's command names every extra."""
    pins = lock_pins(LOCK)
    env = default_environment()
    for where, req in pyproject_requirements():
        if req.marker and not req.marker.evaluate({**env, "extra": where.removeprefix("extra ")}):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{LOCK.name} has no {name} ({where} of pyproject.toml): regenerate the lock (its header's command)"
        assert req.specifier.contains(pins[name][0], prereleases=True), (
            f"{LOCK.name}: {name}=={pins[name][0]} does not satisfy pyproject.toml's {req} ({where}): regenerate the lock")
    header = LOCK.read_text().split("\n\n")[0]
    for extra in PYPROJECT["optional-dependencies"]:
        assert f"--extra {extra}" in header, f"{LOCK.name} was compiled without the extra {extra!r}"


def test_the_lock_is_closed_and_is_what_the_tests_run_on():
    """Every locked package is installed here at its locked version (README's test command installs
    with envs/test-constraints.txt, the lock's pins), and each one's own requirements are locked and
    satisfied: the lock is the whole dependency set the tests ran with."""
    pins = lock_pins(LOCK)
    env = default_environment()
    for name, (version, _) in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} (locked {version}) is not installed: install with README's test command")
        # torch: where pip finds no CPU build, PyPI's build of the same release
        assert Version(installed).public == Version(version).public, (
            f"{name} {installed} is installed, the lock has {version}: install with README's test command")
        for r in metadata.requires(name) or []:
            req = Requirement(r)
            if req.marker and not req.marker.evaluate({**env, "extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            assert dep in pins, f"{name} requires {req}, which {LOCK.name} lacks"
            assert req.specifier.contains(pins[dep][0], prereleases=True), (name, str(req), pins[dep][0])


def test_test_constraints_are_the_locks_pins():
    """README's test command (-c envs/test-constraints.txt) installs the lock's versions; torch is
    written without its local label, which the CPU build satisfies."""
    pins = {n: v for n, (v, _) in lock_pins(LOCK).items()}
    pins["torch"] = Version(pins["torch"]).public
    assert constraint_pins(TEST_CONSTRAINTS) == pins


def test_the_local_torch_wheel_is_the_locked_one():
    """The CPU wheel pip finds through its find-links (this project's machines) is the file the
    lock's hash names: `pip install --require-hashes` accepts it."""
    dirs = [Path(d) for d in os.environ.get("PIP_FIND_LINKS", "").split() if d and not d.startswith(("http:", "https:"))]
    wheels = [w for d in dirs if d.is_dir() for w in d.glob("torch-2.13.0+cpu-cp311-cp311-*.whl")]
    if not wheels:
        pytest.skip("no local torch 2.13.0+cpu wheel on this machine (PIP_FIND_LINKS)")
    digests = {hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels}
    assert digests <= set(lock_pins(LOCK)["torch"][1])


def test_provenance_records_the_locks_digest(tmp_path):
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    assert io.lock_sha256() == digest
    assert io.provenance("score", {"tau_px": 3.0}, scene="v_x")["lock_sha256"] == digest
    assert io.lock_sha256(tmp_path / "wheel") is None  # installed from a wheel: no checkout, no lock
    (tmp_path / "checkout" / "envs").mkdir(parents=True)
    (tmp_path / "checkout" / "envs" / LOCK.name).write_text("numpy==2.4.6 --hash=sha256:00\n")
    assert io.lock_sha256(tmp_path / "checkout") == hashlib.sha256(b"numpy==2.4.6 --hash=sha256:00\n").hexdigest()


def test_readme_documents_the_lock_install():
    readme = (ROOT / "README.md").read_text()
    assert f"pip install --require-hashes -r envs/{LOCK.name} && pip install --no-deps -e ." in readme


# ----------------------------------------------------------------------------- the conda environments


def test_the_env_holds_pyprojects_runtime_dependencies_at_the_locked_versions():
    """envs/descbench.yaml: python and one conda-forge package per runtime dependency of
    pyproject.toml that the jobs use, each pinned to the lock's version (which satisfies pyproject)."""
    env = conda_pins(ENV_FILE)
    locked = {n: v for n, (v, _) in lock_pins(LOCK).items()}
    expected = {}
    for _, req in pyproject_requirements(extras=False):
        name = canonicalize_name(req.name)
        assert name in CONDA_NAME or name in NOT_IN_JOBS, (
            f"pyproject.toml's new dependency {name}: add its conda-forge package to {ENV_FILE.name} "
            "(and CONDA_NAME here), or say in NOT_IN_JOBS why the jobs do not need it")
        if name in CONDA_NAME:
            expected[CONDA_NAME[name]] = (conda_version(name, locked[name]), CONDA_BUILD.get(CONDA_NAME[name]))
            assert req.specifier.contains(locked[name], prereleases=True), (name, str(req))
    py = Version(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert env.pop("python") == (str(py), None)  # the Python the lock is for (lock-py311-...)
    assert LOCK.name.startswith(f"lock-py{py.major}{py.minor}-")
    assert env == expected


def test_the_learned_env_is_the_runtime_env_plus_the_learned_extra():
    env, base = conda_pins(LEARNED_ENV_FILE), conda_pins(ENV_FILE)
    assert {k: env[k] for k in base if k in env} == base and set(base) <= set(env)
    locked = {n: v for n, (v, _) in lock_pins(LOCK).items()}
    extra = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["optional-dependencies"]["learned"]}
    assert extra == set(LEARNED_CONDA_NAME)
    assert {k: v for k, v in env.items() if k not in base} == {
        LEARNED_CONDA_NAME[d]: (conda_version(d, locked[d]), CONDA_BUILD.get(LEARNED_CONDA_NAME[d])) for d in extra}


def _third_party_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return {m for m in out if m not in sys.stdlib_module_names and m != "descbench"}


def _imported_lazily_with_fallback(path: Path, module: str) -> bool:
    """Every import of ``module`` in ``path`` lies inside a function and inside the body of a ``try``
    that has an ``except ImportError`` (or a bare / ``Exception`` handler)."""
    def catches_import_error(node: ast.Try) -> bool:
        names = set()
        for h in node.handlers:
            types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
            names |= {getattr(t, "id", None) for t in types}
        return bool(names & {None, "ImportError", "ModuleNotFoundError", "Exception"})

    found = []

    def visit(node, in_function, in_try):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == module for n in names):
                found.append(in_function and in_try)
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for child in children:
                if not isinstance(child, ast.AST):
                    continue
                fn = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                tr = in_try or (isinstance(node, ast.Try) and field == "body" and catches_import_error(node))
                visit(child, fn, tr)

    visit(ast.parse(path.read_text()), False, False)
    return bool(found) and all(found)


def test_the_optional_import_check_tells_the_forms_apart(tmp_path):
    f = tmp_path / "m.py"
    for text, ok in [("def f():\n    try:\n        import poselib\n    except ImportError:\n        pass\n", True),
                     ("import poselib\n", False),
                     ("try:\n    import poselib\nexcept ImportError:\n    pass\n", False),
                     ("def f():\n    import poselib\n", False),
                     ("def f():\n    try:\n        import poselib\n    except KeyError:\n        pass\n", False),
                     ("def f():\n    try:\n        pass\n    except ImportError:\n        import poselib\n", False)]:
        f.write_text(text)
        assert _imported_lazily_with_fallback(f, "poselib") is ok, text


def test_the_jobs_import_only_what_the_env_has():
    """Every third-party module that a job can import (any module of the package but those only the
    Snakemake process loads) comes from a runtime dependency in the env or the learned extra; the
    Snakemake-side modules are imported by no package module (so no job needs snakemake)."""
    pkg = ROOT / "workflow" / "descbench"
    extras = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["optional-dependencies"]["learned"]}
    for path in sorted(pkg.rglob("*.py")):
        mods = _third_party_imports(path)
        if path.parent == pkg and (path.stem in SNAKEMAKE_SIDE or path.stem in API_SIDE):
            continue
        for m in mods & set(OPTIONAL_IMPORTS):
            assert _imported_lazily_with_fallback(path, m), (
                f"{path.relative_to(ROOT)} imports the optional {m} outside a function's try/except ImportError")
        mods -= set(OPTIONAL_IMPORTS)
        unknown = mods - set(IMPORT_DIST)
        assert not unknown, f"{path.relative_to(ROOT)} imports {sorted(unknown)}: add to pyproject.toml, the env and IMPORT_DIST"
        for m in mods:
            assert IMPORT_DIST[m] in CONDA_NAME or IMPORT_DIST[m] in extras, (path.name, m)
        text = path.read_text()
        for side in SNAKEMAKE_SIDE:
            assert not re.search(rf"^\s*(from descbench(\.{side})? import {side}\b|from descbench\.{side} import|import descbench\.{side})",
                                 text, re.M), f"{path.relative_to(ROOT)} imports descbench.{side}, which jobs cannot"
        for side, importers in API_SIDE.items():
            if path.parent == pkg and path.stem in importers:
                continue
            assert not re.search(rf"^\s*(from descbench(\.{side})? import {side}\b|from descbench\.{side} import|import descbench\.{side})",
                                 text, re.M), f"{path.relative_to(ROOT)} imports descbench.{side}, which only the Python API may"


def test_local_references_resolve_against_snakemakes_copy(tmp_path):
    """The check of the deployment test below: the old env's `pip: -e ..` read from the copy in
    .snakemake/conda/ names .snakemake/, not the checkout."""
    copy = tmp_path / ".snakemake" / "conda" / "0123abcd_.yaml"
    old = {"channels": ["conda-forge"], "dependencies": ["python=3.11", "pip", {"pip": ["-e ..", "numpy==2"]}]}
    assert local_references(old, copy) == [("-e ..", tmp_path / ".snakemake")]
    assert local_references({"dependencies": ["./local-pkg", "numpy=2"]}, copy) == [("./local-pkg", copy.parent / "local-pkg")]


STAND_IN_CONDA = r'''#!PYTHON
"""A stand-in for conda (no channel is reachable here): answers what Snakemake asks, records every
call in LOG and makes the env's folder; installs nothing."""
import json, os, sys

args = sys.argv[1:]
with open("LOG", "a") as f:
    f.write(json.dumps(args) + "\n")
if args[:2] == ["info", "--json"]:
    print(json.dumps({"conda_prefix": "BASE", "platform": "linux-64", "conda_version": "24.7.1"}))
elif args == ["--version"]:
    print("conda 24.7.1")
elif args[:2] == ["config", "--get"]:
    print(json.dumps({"get": {"channel_priority": "strict"}, "success": True}))
elif args[:2] == ["env", "create"]:
    os.makedirs(args[args.index("--prefix") + 1])
elif args[:1] == ["clean"]:
    pass
else:
    sys.exit("stand-in conda: unexpected call: " + " ".join(args))
'''


def test_snakemake_deploys_the_env_file_as_it_is(tmp_path):
    """`snakemake --software-deployment-method conda --conda-create-envs-only` (Snakemake's own
    deployment code) with a stand-in conda: the file Snakemake hands to `conda env create` is its
    copy in .snakemake/conda/, byte for byte envs/descbench.yaml, and names no file or folder (so
    nothing resolves against the copy's folder, and nothing outside the file Snakemake hashes goes
    into the env); its packages parse as pinned conda packages."""
    base = tmp_path / "conda"
    (base / "bin").mkdir(parents=True)
    log = tmp_path / "conda-calls.jsonl"
    conda = base / "bin" / "conda"
    conda.write_text(STAND_IN_CONDA.replace("PYTHON", sys.executable).replace("LOG", str(log)).replace("BASE", str(base)))
    conda.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**os.environ, "PATH": f"{base / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--cores", "1",
           "--software-deployment-method", "conda", "--conda-create-envs-only"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    creates = [c for c in calls if c[:2] == ["env", "create"]]
    assert creates, calls
    env_files = {p.read_bytes(): p for p in ENVS.glob("*.yaml")}
    deployed = set()
    for call in creates:
        copy, prefix = Path(call[call.index("--file") + 1]), Path(call[call.index("--prefix") + 1])
        assert copy.parent == work / ".snakemake" / "conda" and re.fullmatch(r"[0-9a-f]{32}_?", prefix.name), call
        assert copy == prefix.with_name(prefix.name + ".yaml"), call
        assert copy.read_bytes() in env_files, f"{copy} is no copy of an env file under envs/"
        deployed.add(env_files[copy.read_bytes()])
        refs = local_references(yaml.safe_load(copy.read_text()), copy)
        assert refs == [], f"{copy}: {refs}: a path in an env file resolves against Snakemake's copy, not the checkout"
        conda_pins(copy)
    assert ENV_FILE in deployed


STAND_IN_ACTIVATE = r'''# A stand-in for conda's activate script (sourced by Snakemake: `source BASE/bin/activate '<env>'; <job>`):
# records the env and the job's command (this shell's command line), then lets the job run on the
# test's interpreter (the stand-in envs install nothing).
printf '%s\t%s\n' "$1" "$(tr '\0' ' ' < /proc/$$/cmdline)" >> ACTIVATIONS
export PATH="PYBIN:$PATH"
'''


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads the job's command line from /proc")
def test_each_job_runs_in_its_env(tmp_path):
    """Per-job conda envs (workflow/rules/common.smk descriptor_env / keypoint_env / matcher_env):
    under `--software-deployment-method conda`, a learned family's job (hardnet), a learned
    detector's (keynet) and a torch matcher's (fginn) run in envs/learned.yaml's env, every other
    job (sift's, mnn's) in envs/descbench.yaml's; seen by
    Snakemake's own activation of each job (a stand-in conda and activate script), on one scene."""
    base = tmp_path / "conda"
    (base / "bin").mkdir(parents=True)
    log, activations = tmp_path / "conda-calls.jsonl", tmp_path / "activations.tsv"
    conda = base / "bin" / "conda"
    conda.write_text(STAND_IN_CONDA.replace("PYTHON", sys.executable).replace("LOG", str(log)).replace("BASE", str(base)))
    conda.chmod(0o755)
    (base / "bin" / "activate").write_text(
        STAND_IN_ACTIVATE.replace("ACTIVATIONS", str(activations)).replace("PYBIN", str(Path(sys.executable).parent)))
    work = tmp_path / "work"
    work.mkdir()
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    cfg["keypoint_sets"] = {"sift": {"detector": "sift", "max_keypoints": 300},
                            "kn": {"detector": "keynet", "max_keypoints": 300,
                                   "params": {"weights": "random", "weights_seed": 1, "num_features": 300}}}
    cfg["descriptors"] = {"sift": {"family": "sift", "keypoint_sets": ["sift"]},
                          "hardnet": {"family": "hardnet", "keypoint_sets": ["kn"], "params": {"weights": "random"}}}
    cfg["matchers"] = {"mn": {"matcher": "mnn", "descriptors": ["sift"]}, "fg": {"matcher": "fginn", "descriptors": ["sift", "hardnet"]}}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**os.environ, "PATH": f"{base / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--cores", "2",
           "--software-deployment-method", "conda", "--until", "match"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    env_files = {p.read_bytes(): p.name for p in ENVS.glob("*.yaml")}
    used = {}
    for line in activations.read_text().splitlines():
        prefix, job = line.split("\t", 1)
        command = re.search(r"-m descbench (?:--error-fd \d+ )?(\S+)", job).group(1)
        name = re.search(r"--(?:name|matcher) (\S+)", job)
        kind = f"{command}:{name.group(1)}" if command in ("keypoints", "descriptors", "match") else command
        used.setdefault(kind, set()).add(env_files[Path(prefix + ".yaml").read_bytes()])
    assert used["keypoints:kn"] == {"learned.yaml"} and used["descriptors:hardnet"] == {"learned.yaml"}, used
    assert used["keypoints:sift"] == {"descbench.yaml"} and used["descriptors:sift"] == {"descbench.yaml"}, used
    assert used["match:fg"] == {"learned.yaml"} and used["match:mn"] == {"descbench.yaml"}, used
    others = {k: v for k, v in used.items() if not k.startswith(("keypoints:", "descriptors:", "match:"))}
    assert others and all(v == {"descbench.yaml"} for v in others.values()), used
