#!/usr/bin/env python
"""Mutation testing of the core modules with mutmut 3 (benchmarks/README.md, "Mutation testing").

Run as a script, from anywhere, with a Python that has mutmut and descbench's dependencies::

    pip install mutmut==3.8.1
    python benchmarks/mutation_testing.py [--workdir DIR] [--max-children N] [--json PATH]

What it does, all outside the repository (nothing in the working tree is written):

1. Builds a staging copy in ``--workdir`` (default ``$TMPDIR/descbench-mutation``, wiped first):
   the repository's working tree (tests, config, schemas, ...) with ``workflow/`` copied to
   ``src/`` and the package ``workflow/descbench`` moved to ``src/descbench``. mutmut names a mutant after its module path with
   only a leading ``src.`` removed, and its trampolines compare that name with the function's
   ``__module__``; from ``workflow/`` the mutants would be called ``workflow.descbench...`` and
   never switched on (every one would "survive"). The staging ``pyproject.toml`` is the
   repository's plus a ``[tool.mutmut]`` section (see :func:`stage`).
2. Runs ``mutmut run --max-children N`` there: only the modules of ``--modules`` (:data:`CORE`,
   the six core modules, by default; :data:`PROTOCOLS`; :data:`SCORING`; :data:`PATCHES`; or all) are mutated, and
   every mutant is checked by the fast tests (``-m "not e2e and not slurm"``) of :data:`TESTS`
   that reach the mutated function (mutmut records which tests reach which function in one
   instrumented run first). ``PYTHONPATH`` points at the mutated package, so test subprocesses
   (``python -m descbench ...``) run the mutant too.
3. Prints per module: mutants, killed, timeouts, survived, no tests (no selected test reaches the
   function), other; the score ``(killed + timeout) / (mutants - equivalent)``; and every
   survivor with its mutated line, marked with the reason from ``mutation_equivalents.tsv``
   (beside this script) when it is listed there as equivalent. Equivalents are matched by the
   function and the mutated source line, not by mutmut's number (which shifts when a function
   changes), so a stale entry simply stops matching.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS = Path(__file__).resolve().with_name("mutation_equivalents.tsv")

# the core: module paths relative to the package
CORE = [
    "keypoints/__init__.py",
    "keypoints/filters.py",
    "metrics/ap.py",
    "metrics/retrieval.py",
    "metrics/matching.py",
    "io.py",
]
# the newer protocols' metric modules (pure Python; the numba modules pairpass and kernels are
# not mutated: a mutant of a jitted function would need its own compilation per mutant)
PROTOCOLS = [
    "metrics/scenepass.py",
    "metrics/homography.py",
    "metrics/pose.py",
    "metrics/depth.py",
    "metrics/nn.py",
    "metrics/aggregate.py",
    "metrics/distractors.py",
]
# the scene-level scoring modules: the workbench's true mAP and verification (bojanic), the ROC
# classifier and the bootstrap intervals
SCORING = [
    "metrics/bojanic.py",
    "metrics/classifier.py",
    "metrics/bootstrap.py",
]
# the patch benchmarks' metrics: HBench's matching / retrieval / verification and
# hpatches-benchmark's tasks (their numba kernels, hbench_kernels and hpbench_kernels, are not mutated)
PATCHES = [
    "patches/hbench.py",
    "patches/hpbench.py",
]
MODULE_SETS = {"core": CORE, "protocols": PROTOCOLS, "scoring": SCORING, "patches": PATCHES,
               "all": CORE + PROTOCOLS + SCORING + PATCHES}

# fast test files that exercise the core directly (the tests once written as tests/test_core_*.py are
# in the mirrored files of their modules: metrics/test_ap, test_retrieval, test_matching,
# keypoints/test_filters, test_io);
# mutmut runs, per mutant, only those of their tests that reach the mutated function
TESTS = [
    "tests/descbench/metrics/test_ap.py",
    "tests/descbench/metrics/test_bojanic.py",
    "tests/descbench/keypoints/test_filters.py",
    "tests/descbench/keypoints/test_sets.py",
    "tests/descbench/metrics/test_matching.py",
    "tests/descbench/metrics/test_pairpass.py",
    "tests/descbench/metrics/test_scenepass.py",
    "tests/descbench/metrics/test_retrieval.py",
    "tests/descbench/metrics/test_kernels.py",
    "tests/interop/test_workbench_convention.py",
    "tests/descbench/datasets/test_layout_bad_input.py",
    "tests/descbench/keypoints/test_locked_checks.py",
    "tests/descbench/jobs/test_score_metrics.py",
    "tests/descbench/test_io.py",
    "tests/descbench/metrics/test_homography.py",
    "tests/descbench/metrics/test_pose.py",
    "tests/descbench/metrics/test_depth.py",
    "tests/descbench/metrics/test_nn.py",
    "tests/descbench/metrics/test_aggregate.py",
    "tests/descbench/metrics/test_distractors.py",
    "tests/descbench/tasks/test_pose.py",
    "tests/descbench/tasks/test_pipelines.py",
    "tests/descbench/estimators/test_relative_pose.py",
    "tests/descbench/matchers/test_nearest.py",
    "tests/descbench/patches/test_hbench_kernels.py",  # the one that calls nn.l2_band_tolerance
    "tests/descbench/metrics/test_classifier.py",
    "tests/descbench/metrics/test_bootstrap.py",
    "tests/descbench/patches/test_hbench.py",
    "tests/descbench/patches/test_hpbench.py",
    "tests/descbench/patches/test_hpbench_kernels.py",
]
TEST_GLOBS: list[str] = []  # file-name patterns under tests/ (none since the tests mirror the package)
PYTEST_ARGS = ["-m", "not e2e and not slurm", "-p", "no:cacheprovider"]

# mutmut.stats.status_by_exit_code (mutmut 3.8); anything else is "suspicious"
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          -11: "segfault", -9: "segfault", None: "not checked"}

_IGNORE = shutil.ignore_patterns(".git", "mutants", "__pycache__", "*.egg-info", ".snakemake", "results",
                                 ".pytest_cache", ".benchmarks", "*.pyc")


def test_selection(repo: Path) -> list[str]:
    tests = [t for t in TESTS if (repo / t).exists()]
    for pattern in TEST_GLOBS:
        tests += sorted(f"tests/{p.name}" for p in (repo / "tests").glob(pattern))
    return tests


def toml_list(items) -> str:
    return "[" + ", ".join(json.dumps(str(i)) for i in items) + "]"


def stage(repo: Path, work: Path, tests: list[str], modules: list[str] = CORE) -> None:
    """The staging copy (module docstring, step 1)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for p in repo.iterdir():
        if p.name in {".git", "mutants", "results", ".snakemake", ".benchmarks", ".pytest_cache"}:
            continue
        if p.is_dir():
            shutil.copytree(p, work / p.name, ignore=_IGNORE, symlinks=True)
        else:
            shutil.copy2(p, work / p.name)
    # src/ is a copy of workflow/ (the package finds ../schemas beside itself); workflow/ keeps
    # everything but the package (tests read workflow/schemas, the Snakefile workflow/rules)
    shutil.copytree(work / "workflow", work / "src", symlinks=True)
    shutil.rmtree(work / "workflow" / "descbench")
    # mutmut fills mutants/src later; it must exist when the interpreter starts, or the
    # PYTHONPATH entry is cached as missing and the unmutated installed package is imported
    (work / "mutants" / "src").mkdir(parents=True)
    also_copy = sorted(p.name for p in work.iterdir() if p.name not in {"src", "tests", "pyproject.toml", "mutants"})
    section = "\n".join([
        "",
        "[tool.mutmut]  # written by benchmarks/mutation_testing.py",
        'source_paths = ["src"]',
        f"only_mutate = {toml_list('src/descbench/' + m for m in modules)}",
        f"also_copy = {toml_list(also_copy)}",
        f"pytest_add_cli_args = {toml_list(PYTEST_ARGS)}",
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}",
        "",
    ])
    with open(work / "pyproject.toml", "a") as fh:
        fh.write(section)


def load_equivalents() -> list[tuple[str, str, str]]:
    """``(function, mutated line, reason)`` from ``mutation_equivalents.tsv`` (tab-separated)."""
    out = []
    if EQUIVALENTS.exists():
        for line in EQUIVALENTS.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            func, mutated, reason = line.split("\t")
            out.append((func.strip(), mutated.strip(), reason.strip()))
    return out


_DIFF_HELPER = """
import json, sys
from pathlib import Path
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for name, path in json.load(sys.stdin):
    out[name] = get_diff_for_mutant(name, path=Path(path))
json.dump(out, sys.stdout)
"""


def mutant_diffs(work: Path, names: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """``name -> (original lines, mutated lines)`` of mutants given as ``(name, source path)``,
    from mutmut's own diff (what ``mutmut show NAME`` prints), in one process."""
    if not names:
        return {}
    res = subprocess.run([sys.executable, "-c", _DIFF_HELPER], cwd=work, input=json.dumps(names),
                         capture_output=True, text=True, check=True)
    out = {}
    for name, diff in json.loads(res.stdout).items():
        minus, plus = [], []
        for line in diff.splitlines():
            if line.startswith("-") and not line.startswith("---"):
                minus.append(line[1:].strip())
            elif line.startswith("+") and not line.startswith("+++"):
                plus.append(line[1:].strip())
        out[name] = (" / ".join(minus), " / ".join(plus))
    return out


def _mutant_order(key: str):
    func, _, number = key.rpartition("__mutmut_")
    return func, int(number)


def collect(work: Path, modules: list[str] = CORE) -> dict:
    equivalents = load_equivalents()
    codes_by_module = {}
    for m in modules:
        meta = work / "mutants" / "src" / "descbench" / (m + ".meta")
        codes_by_module[m] = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    undetected = [(k, f"src/descbench/{m}") for m, codes in codes_by_module.items() for k, c in codes.items()
                  if STATUS.get(c, "suspicious") not in ("killed", "timeout")]
    diffs = mutant_diffs(work, undetected)
    modules = {}
    for m, codes in codes_by_module.items():
        counts = Counter(STATUS.get(c, "suspicious") for c in codes.values())
        survivors = []
        for key in sorted(codes, key=_mutant_order):
            status = STATUS.get(codes[key], f"suspicious (exit {codes[key]})")
            if status in ("killed", "timeout"):
                continue
            func = key.rpartition("__mutmut_")[0]
            orig, mutated = diffs[key]
            reason = next((r for f, mu, r in equivalents if f == func and mu == mutated), None)
            survivors.append({"mutant": key, "status": status, "original": orig, "mutated": mutated, "equivalent": reason})
        n_equiv = sum(1 for s in survivors if s["equivalent"])
        detected = counts["killed"] + counts["timeout"]
        modules[m] = {
            "mutants": len(codes), "killed": counts["killed"], "timeout": counts["timeout"],
            "survived": counts["survived"], "no_tests": counts["no tests"],
            "other": len(codes) - detected - counts["survived"] - counts["no tests"],
            "equivalent": n_equiv,
            "score_raw": detected / len(codes) if codes else float("nan"),
            "score": detected / (len(codes) - n_equiv) if len(codes) > n_equiv else float("nan"),
            "survivors": survivors,
        }
    keys = ("mutants", "killed", "timeout", "survived", "no_tests", "other", "equivalent")
    tot = {k: sum(v[k] for v in modules.values()) for k in keys}
    detected = tot["killed"] + tot["timeout"]
    tot["score_raw"] = detected / tot["mutants"] if tot["mutants"] else float("nan")
    tot["score"] = detected / (tot["mutants"] - tot["equivalent"]) if tot["mutants"] > tot["equivalent"] else float("nan")
    return {"modules": modules, "total": tot}


def report(res: dict) -> str:
    lines = ["| module | mutants | killed | timeout | survived | no tests | other | equivalent | score (raw) | score (equivalents excluded) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = list(res["modules"].items()) + [("**total**", res["total"])]
    for name, r in rows:
        lines.append(f"| {name} | {r['mutants']} | {r['killed']} | {r['timeout']} | {r['survived']} | {r['no_tests']} | "
                     f"{r['other']} | {r['equivalent']} | {100 * r['score_raw']:.1f} % | {100 * r['score']:.1f} % |")
    lines.append("")
    for r in res["modules"].values():
        for s in r["survivors"]:
            tag = f"equivalent: {s['equivalent']}" if s["equivalent"] else "NOT LISTED AS EQUIVALENT"
            lines.append(f"- {s['mutant']} [{s['status']}] `{s['original']}` -> `{s['mutated']}`: {tag}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "descbench-mutation")
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the per-module figures and the survivors as JSON")
    ap.add_argument("--modules", choices=sorted(MODULE_SETS), default="core",
                    help="core: the six core modules (default); protocols: the newer metric modules; scoring: bojanic, classifier, bootstrap; patches: hbench, hpbench; all: every set")
    ap.add_argument("--report-only", action="store_true", help="summarise an existing --workdir, run nothing")
    a = ap.parse_args(argv)
    work = a.workdir.resolve()
    if work == REPO or REPO in work.parents:
        ap.error("--workdir must lie outside the repository")
    wall = None
    if not a.report_only:
        import mutmut

        tests = test_selection(REPO)
        stage(REPO, work, tests, MODULE_SETS[a.modules])
        print(f"mutmut {mutmut.__version__}; staging copy {work}; {len(tests)} test files: {' '.join(tests)}", flush=True)
        # NUMBA_THREADING_LAYER=workqueue: mutmut forks one child per mutant from the process that
        # ran the tests once; numba's default layer here (GNU OpenMP) kills a forked child of a
        # process that already ran a parallel kernel with SIGTERM ("fork() called from a process
        # already using GNU OpenMP"), which mutmut would count as "suspicious"
        # and one thread in every pool (torch, OpenBLAS, OpenMP): a child forked while a pool's
        # threads hold a lock (torch's after a kornia test) waits on it for ever, a "timeout"
        # that is no kill
        env = dict(os.environ, PYTHONPATH=str(work / "mutants" / "src"), NUMBA_THREADING_LAYER="workqueue",
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
        t0 = time.perf_counter()
        with open(work / "mutmut-run.log", "w") as log:
            rc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(a.max_children)],
                                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        wall = time.perf_counter() - t0
        print(f"mutmut run: exit {rc}, wall {wall:.0f} s (log {work / 'mutmut-run.log'})", flush=True)
        if rc != 0:
            return rc
    res = collect(work, MODULE_SETS[a.modules])
    res["wall_s"] = wall
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
