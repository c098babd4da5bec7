#!/usr/bin/env python
"""End-to-end benchmark of the Snakemake workflow: wall, CPU, Snakemake's own share, jobs.

Run as a script, not a test (pytest does not collect it; it never fails on a missed target)::

    python benchmarks/make_hpatches_standin.py --out data/standin --jobs 2
    python benchmarks/bench_workflow.py --standin data/standin --cores 2            # full run
    python benchmarks/bench_workflow.py --dry-run-dag --scenes 116 --descriptors 20
    python benchmarks/bench_workflow.py --reference-shape --standin data/standin --cores 2

Every mode writes a ``config.yaml`` into a fresh work directory (``--workdir``, default a new
temporary one) and runs ``python -m snakemake -s <repo>/Snakefile --directory <workdir>`` as a
child process, with the output sent to ``<workdir>/snakemake.log`` (not through a pipe to this
process). The config is the repository's ``config.yaml`` with ``dataset: folder``,
``folder.path: <stand-in>``, ``folder.name: standin``, ``results_dir: <workdir>/results``, only
the descriptors asked for, and any ``--config key.sub=value`` overrides (values parsed as YAML).
``PYTHONPATH`` is passed on, so the package the jobs import is the one it points at.

Figures (all modes measure one snakemake process tree):

* **wall**: monotonic clock from just before the child is started to just after it exits.
* **total CPU**: user + system of the whole tree, from ``os.wait4`` on the snakemake process.
  On Linux that rusage covers the process and every descendant it (or a descendant) waited
  for, i.e. every job's shell and python; a process that is orphaned and never reaped by the
  tree would be missed (the workflow leaves none).
* **Snakemake's own CPU**: user + system of the snakemake main process alone, all its threads,
  children excluded. Read from ``/proc/<pid>/stat`` (fields utime, stime) after the process has
  exited but before it is reaped (``os.waitid(..., WEXITED | WNOWAIT)`` keeps the zombie), so
  it is the final value, not a sample. The same read gives ``cutime + cstime`` (reaped
  children); ``own + children`` is checked against ``wait4``'s total and printed. It includes
  the DAG build, scheduling, file stat-ing, the ``benchmark:`` directive's psutil sampling
  thread, and logging. **Snakemake's CPU before its first job** is its own CPU when a poller
  (every ``--poll`` s) first finds a job announcement (``rule X:`` / ``localrule X:``) in the
  log: start-up + config + DAG build (in a dry run: the DAG build, before the job listing). A
  first child process would not do: Snakemake runs ``scontrol show config`` at start-up.
* **cores used** = total CPU / wall. **Snakemake's share** = own CPU / total CPU.
* **jobs**: per-rule counts of the ``Job stats`` table Snakemake prints, and the ``N of M
  steps`` line; 0 jobs run means nothing was to be done (a stale work directory).
* **job CPU / wall from ``benchmark:`` files**: every ``*.tsv`` under
  ``<results>/<dataset tag>/benchmarks/``, grouped by its first folder (the rule's benchmark
  folder), summing the ``s`` (wall) and ``cpu_time`` columns. Rules without a ``benchmark:``
  directive (numba warm-up, report, the dataset stage) are not in it; ``total CPU - own CPU -
  benchmark CPU`` is printed as "other CPU (jobs without benchmark files, shells)".
  Snakemake's benchmark ``cpu_time`` is psutil-sampled, so a job shorter than the sampling
  interval can be under-counted.
* **fixed cost per job**: for each benchmark file whose job also wrote a
  ``<scene>.timing.json`` (``processing_time_ms`` is measured inside the job from the start of
  its computation to the end of its writes), job wall ``s`` minus that time: process start,
  imports, numba cache loading, argument parsing, Snakemake's job wrapper. Benchmark folders
  are matched to output folders by the same ``<kpset>/<descriptor>/<scene>`` tail and a folder
  name that starts with the other's first 5 letters (``score`` -> ``scores``). The floor of
  that cost, ``python -m descbench --help`` (interpreter + CLI start-up), is timed separately
  (``--startup-runs``).
* **others' load**: CPU used on the machine by processes outside the tree during the run,
  from ``/proc/stat`` busy time minus the tree's CPU; on a shared machine it says how much the
  figures are disturbed.

Modes: the default runs the whole workflow once. ``--dry-run-dag`` times ``snakemake -n`` for
``--scenes`` S scenes x ``--descriptors`` D descriptors named d01..dD (families alternating
sift / rootsift: the schema allows no dummy parameter on them); without ``--standin`` it
writes an empty-file skeleton of S HPatches-named scene folders (the DAG build reads no image).
``--reference-shape`` takes 9 scenes of the stand-in with ``max_keypoints: 1300``, first runs
the workflow up to the keypoints (``--until <keypoint rule>`` plus any rule named ``*warmup*``,
so the one-time numba compile is not counted), then times one descriptor's descriptors +
all scoring + report through the workflow.

``--count-rounds`` (default mode) also counts Snakemake's scheduling rounds: the run gets
``benchmarks/smkrounds`` on its ``PYTHONPATH`` (measurement only, see its docstring), which
writes ``rounds.json`` into the work directory; the summary gives the rounds, the seconds of job
selection in them and the most re-evaluation timers alive at once.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
REFERENCE_SCENES = 9
REFERENCE_MAX_KEYPOINTS = 1300


# ---------------------------------------------------------------------------------------------
# Config


def set_dotted(cfg: dict, key: str, value) -> None:
    """``cfg["a"]["b"] = value`` for ``key = "a.b"``, creating intermediate dicts."""
    *path, last = key.split(".")
    d = cfg
    for p in path:
        d = d.setdefault(p, {})
    d[last] = value


def parse_overrides(items: list[str]) -> list[tuple[str, object]]:
    """``["a.b=1", "c=[x, y]"]`` -> ``[("a.b", 1), ("c", ["x", "y"])]`` (values are YAML)."""
    out = []
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--config expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out.append((k.strip(), yaml.safe_load(v)))
    return out


def descriptor_specs(n: int, family: str | None = None) -> dict[str, dict]:
    """``n`` descriptors: the one named ``family`` if n == 1, else d01..dNN alternating sift/rootsift."""
    if n == 1 and family:
        return {family: {"family": family}}
    fams = ("sift", "rootsift")
    return {f"d{i + 1:02d}": {"family": fams[i % 2]} for i in range(n)}


def build_config(standin: Path, results: Path, descriptors: dict, scenes: list[str] | None,
                 overrides: list[tuple[str, object]]) -> dict:
    """The repository's config.yaml pointed at the stand-in folder and a fresh results dir."""
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["dataset"] = "folder"
    cfg["folder"] = {"path": str(standin.resolve()), "name": "standin"}
    cfg["results_dir"] = str(results)
    cfg["scenes"] = scenes
    cfg["descriptors"] = descriptors
    for k, v in overrides:
        set_dotted(cfg, k, v)
    return cfg


def list_standin_scenes(standin: Path) -> list[str]:
    """Scene folders of the stand-in, in the generator's balanced i_/v_ order where known."""
    present = {p.name for p in standin.iterdir() if p.is_dir() and not p.name.startswith(".")}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from make_hpatches_standin import balanced_names, hpatches_names

        order = [s for s in balanced_names(hpatches_names()) if s in present]
    finally:
        sys.path.pop(0)
    return order + sorted(present - set(order))


def write_skeleton(root: Path, n: int) -> list[str]:
    """n empty-file scene folders (1..6.ppm, H_1_2..H_1_6) named like HPatches: enough for ``-n``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_hpatches_standin import balanced_names, hpatches_names

    sys.path.pop(0)
    scenes = balanced_names(hpatches_names())[:n]
    for s in scenes:
        d = root / s
        d.mkdir(parents=True, exist_ok=True)
        for k in range(1, 7):
            (d / f"{k}.ppm").touch()
        for k in range(2, 7):
            (d / f"H_1_{k}").write_text("1 0 0\n0 1 0\n0 0 1\n")
    return scenes


# ---------------------------------------------------------------------------------------------
# Running snakemake and measuring it


def proc_stat_times(pid: int) -> tuple[float, float]:
    """(own utime + stime, reaped children's cutime + cstime) of ``pid``, in seconds."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) "; comm may contain spaces
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])  # stat fields 14..17
    return (utime + stime) / CLK_TCK, (cutime + cstime) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds all processors spent not idle since boot (/proc/stat, first line)."""
    vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = vals[3] + vals[4]  # idle + iowait
    return (sum(vals[:8]) - idle) / CLK_TCK  # user..steal; guest is already in user


#: How Snakemake announces a job in its log ("rule keypoints:", "localrule all:"). A child
#: process is no sign of a job: Snakemake runs e.g. ``scontrol show config`` at start-up.
JOB_LINE = re.compile(r"^(local)?rule \S+:\s*$", re.M)


@dataclass
class RunResult:
    """What one snakemake invocation cost (see the module docstring for each figure)."""

    args: list[str]
    returncode: int
    wall_s: float
    total_cpu_s: float
    own_cpu_s: float
    children_cpu_stat_s: float
    own_cpu_before_first_job_s: float | None
    first_job_after_s: float | None
    others_cores: float
    log: str
    job_counts: dict[str, int] = field(default_factory=dict)
    steps_done: int | None = None

    @property
    def cores_used(self) -> float:
        return self.total_cpu_s / self.wall_s if self.wall_s else float("nan")

    @property
    def own_share(self) -> float:
        return self.own_cpu_s / self.total_cpu_s if self.total_cpu_s else float("nan")


def run_snakemake(workdir: Path, args: list[str], log_name: str, poll: float = 0.2, env: dict | None = None) -> RunResult:
    """Run ``snakemake -s Snakefile --directory workdir *args`` (in ``env``, default this
    process's environment); measure it as described above."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]
    log = workdir / log_name
    first: dict[str, float] = {}
    with open(log, "w") as out:
        busy0 = machine_busy_seconds()
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        stop = threading.Event()

        def watch() -> None:  # Snakemake's own CPU when it announces its first job in the log
            with open(log, errors="replace") as f:
                seen = ""
                while not stop.is_set():
                    seen = seen[-200:] + f.read()
                    if JOB_LINE.search(seen):
                        try:
                            first["own"] = proc_stat_times(proc.pid)[0]
                            first["t"] = time.monotonic() - t0
                        except (FileNotFoundError, ProcessLookupError):
                            pass
                        return
                    stop.wait(poll)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        # Wait for the exit without reaping: the zombie's /proc stat holds the final times.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        wall = time.monotonic() - t0
        stop.set()
        own, children_stat = proc_stat_times(proc.pid)
        _, status, ru = os.wait4(proc.pid, 0)
        busy1 = machine_busy_seconds()
        proc.returncode = os.waitstatus_to_exitcode(status)
        watcher.join()
    total = ru.ru_utime + ru.ru_stime
    text = log.read_text(errors="replace")
    counts, steps = parse_jobs(text)
    return RunResult(
        args=cmd, returncode=proc.returncode, wall_s=wall, total_cpu_s=total, own_cpu_s=own,
        children_cpu_stat_s=children_stat, own_cpu_before_first_job_s=first.get("own"),
        first_job_after_s=first.get("t"), others_cores=max(0.0, (busy1 - busy0 - total) / wall),
        log=str(log), job_counts=counts, steps_done=steps,
    )


def parse_jobs(text: str) -> tuple[dict[str, int], int | None]:
    """Rule -> job count from the first 'Job stats' table, and the last 'N of M steps' N."""
    counts: dict[str, int] = {}
    if "Job stats:" in text:
        block = text.split("Job stats:", 1)[1]
        for line in block.splitlines()[1:]:
            m = re.match(r"^(\S+)\s+(\d+)\s*$", line)
            if m:
                if m.group(1) == "total":
                    break
                counts[m.group(1)] = int(m.group(2))
    steps = re.findall(r"^(\d+) of (\d+) steps", text, re.M)
    return counts, (int(steps[-1][0]) if steps else None)


# ---------------------------------------------------------------------------------------------
# Benchmark TSVs and timing files


def read_benchmarks(bench_root: Path) -> dict[str, dict[str, float]]:
    """Every ``*.tsv`` under bench_root, summed per first folder: n, s, cpu_time, max of max_rss."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"jobs": 0, "s": 0.0, "cpu_time": 0.0, "max_rss_mb": 0.0})
    if not bench_root.is_dir():
        return {}
    for p in sorted(bench_root.rglob("*.tsv")):
        group = p.relative_to(bench_root).parts[0]
        for row in read_tsv(p):
            g = out[group]
            g["jobs"] += 1
            g["s"] += num(row.get("s"))
            g["cpu_time"] += num(row.get("cpu_time"))
            g["max_rss_mb"] = max(g["max_rss_mb"], num(row.get("max_rss")))
    return dict(out)


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def num(x) -> float:
    """A benchmark TSV cell as float; Snakemake writes 'NA' or '-' when it could not measure."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


#: The last line of a successful job's log (``python -m descbench`` writes it from ``getrusage``).
#: Not ``JOB_LINE``: that name is the watcher's job announcement above, which this must not replace.
JOB_LOG_LINE = re.compile(r"descbench: (\S+) done in ([0-9.]+) s wall, ([0-9.]+) s CPU, max RSS ([0-9]+) MiB")


def job_lines(logs: Path):
    """(log path, its last ``descbench: <cmd> done in ...`` match) for every job log below
    ``logs`` that has one (a job still running or failed has none)."""
    for p in sorted(logs.rglob("*.log")):
        m = None
        for m in JOB_LOG_LINE.finditer(p.read_text(errors="replace")):
            pass
        if m is not None:
            yield p, m


#: The categories of the job figures, by the rule's log folder (``logs/<folder>/...``): the stages
#: that run one job per batch (the distractor banks: one per keypoint set and descriptor);
#: bench_learned.py splits keypoints and descriptors further. Any other job (a one-off: the report
#: jobs, ``pipelines_report`` among them, the numba warm-up, the dataset) is its own category, its
#: log's name (``logs/<name>.log``).
JOB_CATEGORIES = {"keypoints": "keypoints", "descriptors": "descriptors", "score": "scoring",
                  "distractors": "scoring: distractor banks", "match": "matching", "pipelines": "pipeline scoring"}


def job_category(rel: Path) -> str:
    """A job log's path relative to ``logs/`` (or a ``benchmark:`` file's relative to
    ``benchmarks/``) -> its category: :data:`JOB_CATEGORIES` of its folder, else the folder's or
    the one-off log's name."""
    parts = rel.with_suffix("").parts
    folder = parts[0] if len(parts) > 1 else rel.stem
    return JOB_CATEGORIES.get(folder, folder)


def read_job_logs(res_root: Path) -> dict[str, dict[str, float]]:
    """Each job's own exact figures, from the last line of its log (written by
    ``python -m descbench`` from ``getrusage``): per category (:func:`job_category`): jobs, wall s,
    CPU s, max RSS MiB. Unlike Snakemake's sampled ``benchmark:`` files, nothing is missed."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "max_rss_mib": 0.0})
    logs = res_root / "logs"
    if not logs.is_dir():
        return {}
    for p, m in job_lines(logs):
        g = out[job_category(p.relative_to(logs))]
        g["jobs"] += 1
        g["wall_s"] += float(m.group(2))
        g["cpu_s"] += float(m.group(3))
        g["max_rss_mib"] = max(g["max_rss_mib"], float(m.group(4)))
    return dict(out)


def fixed_costs(res_root: Path) -> dict[str, list[float]]:
    """Scoring jobs: [job wall (its log) - the tasks' processing_time_ms of its batch] in s.

    A job ``logs/score/<set>/<descriptor>/<batch>.log`` wrote the ``*.timing.json`` files of
    ``{scores,verification,matching}/<set>/<descriptor>/<batch>/``; what its wall time has beyond
    their sum is start-up, imports, numba's first dispatch and cache loads, the distractor bank
    and the exit.
    """
    out: dict[str, list[float]] = defaultdict(list)
    logs = res_root / "logs" / "score"
    if not logs.is_dir():
        return {}
    for p, m in job_lines(logs):
        tail = p.relative_to(logs).with_suffix("")
        spent = sum(json.loads(t.read_text())["processing_time_ms"] / 1000
                    for task in ("scores", "verification", "matching") for t in (res_root / task / tail).glob("*.timing.json"))
        out["score"].append(float(m.group(2)) - spent)
    return dict(out)


#: Start-up floors timed by ``startup_floor``: the interpreter + CLI alone, and the same plus the
#: imports a scoring job needs before it computes anything (numpy, pyarrow, numba, the job modules).
STARTUP_COMMANDS = {
    "python -m descbench --help": ["-m", "descbench", "--help"],
    "python -c 'import descbench.cli as c; c.job_modules()'": ["-c", "import descbench.cli as c; c.job_modules()"],
}


def startup_floor(runs: int) -> dict[str, list[float]]:
    """Wall seconds of each ``STARTUP_COMMANDS`` entry, ``runs`` times each (alternating)."""
    out: dict[str, list[float]] = {k: [] for k in STARTUP_COMMANDS}
    for _ in range(runs):
        for name, args in STARTUP_COMMANDS.items():
            t0 = time.monotonic()
            subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, check=True)
            out[name].append(time.monotonic() - t0)
    return out


# ---------------------------------------------------------------------------------------------
# Reporting


def summary_lines(title: str, r: RunResult, bench: dict | None = None, fixed: dict | None = None,
                  jobs: dict | None = None) -> list[str]:
    """A readable block of figures for one run."""
    njobs = sum(r.job_counts.values())
    lines = [
        f"== {title}",
        f"command           : {' '.join(r.args[2:])}",
        f"exit status       : {r.returncode}   (log: {r.log})",
        f"wall              : {r.wall_s:9.2f} s",
        f"total CPU (tree)  : {r.total_cpu_s:9.2f} s   cores used {r.cores_used:.2f}",
        f"snakemake own CPU : {r.own_cpu_s:9.2f} s   = {100 * r.own_share:.1f} % of total CPU"
        f"   (own + reaped children from /proc {r.own_cpu_s + r.children_cpu_stat_s:.2f} s vs wait4 {r.total_cpu_s:.2f} s)",
    ]
    if r.own_cpu_before_first_job_s is not None:
        lines.append(f"  before 1st job  : {r.own_cpu_before_first_job_s:9.2f} s   (first job started {r.first_job_after_s:.2f} s after launch)")
    lines.append(f"jobs              : {njobs} in Job stats" + (f", {r.steps_done} steps done" if r.steps_done is not None else "")
                 + ("   " + ", ".join(f"{k} {v}" for k, v in r.job_counts.items()) if r.job_counts else ""))
    if njobs:
        lines.append(f"per job           : {r.wall_s / njobs:.3f} s wall, snakemake own CPU {r.own_cpu_s / njobs:.3f} s")
    lines.append(f"others' load      : {r.others_cores:.2f} cores used by processes outside this run")
    if bench:
        tot_s = sum(g["s"] for g in bench.values())
        tot_cpu = sum(g["cpu_time"] for g in bench.values())
        lines.append("benchmark: files (per rule folder): jobs, sum of wall s, sum of cpu_time s, max max_rss MB")
        for k, g in sorted(bench.items()):
            lines.append(f"  {k:22s} {g['jobs']:5d} {g['s']:10.2f} {g['cpu_time']:10.2f} {g['max_rss_mb']:9.1f}")
        lines.append(f"  {'all':22s} {sum(g['jobs'] for g in bench.values()):5d} {tot_s:10.2f} {tot_cpu:10.2f}")
        lines.append(f"other CPU (jobs without benchmark files, shells): {r.total_cpu_s - r.own_cpu_s - tot_cpu:.2f} s")
    if jobs:
        lines.append("job logs (exact, per category: job_category): jobs, sum of wall s, sum of CPU s, max RSS MiB")
        for k, g in sorted(jobs.items()):
            lines.append(f"  {k:22s} {g['jobs']:5d} {g['wall_s']:10.2f} {g['cpu_s']:10.2f} {g['max_rss_mib']:9.0f}")
        lines.append(f"  {'all':22s} {sum(g['jobs'] for g in jobs.values()):5d} {sum(g['wall_s'] for g in jobs.values()):10.2f} "
                     f"{sum(g['cpu_s'] for g in jobs.values()):10.2f}")
    if fixed:
        for k, v in sorted(fixed.items()):
            lines.append(f"fixed cost per job, {k:14s}: median {statistics.median(v):.2f} s, "
                         f"min {min(v):.2f}, max {max(v):.2f} (n={len(v)}; job wall - its tasks' processing_time)")
    return lines


def environment() -> dict:
    """Machine facts recorded with the figures."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        head = None
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "git_head": head,
            "pythonpath": os.environ.get("PYTHONPATH"), "load_before": os.getloadavg()}


# ---------------------------------------------------------------------------------------------
# Modes


def prepare_workdir(arg: Path | None) -> Path:
    """A fresh, empty work directory (a new temporary one if not given)."""
    if arg is None:
        return Path(tempfile.mkdtemp(prefix="descbench-bench-"))
    if arg.exists() and any(arg.iterdir()):
        raise SystemExit(f"--workdir {arg} is not empty; give a new folder (results must be fresh)")
    arg.mkdir(parents=True, exist_ok=True)
    return arg


def write_config(workdir: Path, cfg: dict) -> None:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def list_rules(workdir: Path) -> list[str]:
    """Rule names of the workflow under the work directory's config (``snakemake --list-rules``)."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
                          "--list-rules"], capture_output=True, text=True, check=True).stdout
    return [ln.strip() for ln in out.splitlines() if re.fullmatch(r"\s*\w+\s*", ln)]


def mode_run(a: argparse.Namespace, workdir: Path) -> dict:
    scenes = list_standin_scenes(a.standin)[: a.scenes] if a.scenes else None
    results = workdir / "results"
    cfg = build_config(a.standin, results, descriptor_specs(a.descriptors, a.descriptor), scenes, a.config)
    write_config(workdir, cfg)
    env = rounds_env(workdir / "rounds.json") if a.count_rounds else None
    r = run_snakemake(workdir, ["--cores", str(a.cores), *a.snakemake_args], "snakemake.log", a.poll, env)
    rounds = read_rounds(workdir / "rounds.json") if a.count_rounds else None
    if r.returncode:
        print(Path(r.log).read_text()[-3000:])
        print(f"snakemake failed (exit {r.returncode}); figures below are for a failed run")
    res_root = results / "folder-standin"
    bench = read_benchmarks(res_root / "benchmarks")
    fixed = fixed_costs(res_root)
    jobs = read_job_logs(res_root)
    startup = startup_floor(a.startup_runs) if a.startup_runs else {}
    lines = summary_lines(f"end-to-end run: {len(scenes) if scenes else 'all'} scenes of {a.standin}, "
                          f"{a.descriptors} descriptor(s), --cores {a.cores}", r, bench, fixed, jobs)
    if rounds:
        lines.append(f"scheduling rounds : {rounds['rounds']} ({rounds['selection_s']:.2f} s selecting jobs, "
                     f"{rounds['ready_sum'] / max(rounds['rounds'], 1):.1f} ready jobs per round), "
                     f"{rounds['wakeups']} wake-ups, at most {rounds['timers_alive_max']} timers alive")
    for name, v in startup.items():
        lines.append(f"start-up floor    : {name}: median {statistics.median(v):.2f} s "
                     f"(min {min(v):.2f}, max {max(v):.2f}, {len(v)} runs)")
    print("\n".join(lines))
    return {"mode": "run", "run": asdict(r) | {"cores_used": r.cores_used, "own_share": r.own_share},
            "benchmarks": bench, "job_logs": jobs, "fixed_cost_s": fixed, "startup_floor_s": startup, "rounds": rounds}


def rounds_env(out: Path) -> dict:
    """This process's environment with ``benchmarks/smkrounds`` first on ``PYTHONPATH`` and
    ``DESCBENCH_COUNT_ROUNDS=out`` (``--count-rounds``)."""
    here = str(Path(__file__).resolve().parent / "smkrounds")
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else ""), "DESCBENCH_COUNT_ROUNDS": str(out)}


def read_rounds(path: Path) -> dict | None:
    """The counts ``benchmarks/smkrounds`` wrote, or None (the run ended before its scheduler started)."""
    return json.loads(path.read_text()) if path.is_file() else None


def mode_dag(a: argparse.Namespace, workdir: Path) -> dict:
    if a.standin:
        root = a.standin
        scenes = list_standin_scenes(root)[: a.scenes or None]
    else:
        root = workdir / "skeleton"
        scenes = write_skeleton(root, a.scenes or 116)
    n_desc = a.descriptors or 20
    cfg = build_config(root, workdir / "results", descriptor_specs(n_desc, a.descriptor), scenes, a.config)
    write_config(workdir, cfg)
    runs = []
    for i in range(a.repeats):
        r = run_snakemake(workdir, ["-n", *a.snakemake_args], f"dryrun{i}.log", a.poll)
        if r.returncode:
            print(Path(r.log).read_text()[-3000:])
            raise SystemExit(f"snakemake -n failed (exit {r.returncode})")
        runs.append(r)
        print("\n".join(summary_lines(f"DAG build (snakemake -n), {len(scenes)} scenes x {n_desc} descriptors, run {i + 1}/{a.repeats}", r)))
    walls = [r.wall_s for r in runs]
    print(f"DAG build wall over {len(walls)} run(s): median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f})")
    return {"mode": "dry-run-dag", "scenes": len(scenes), "descriptors": n_desc,
            "runs": [asdict(r) for r in runs], "wall_median_s": statistics.median(walls)}


def mode_reference(a: argparse.Namespace, workdir: Path) -> dict:
    scenes = list_standin_scenes(a.standin)[:REFERENCE_SCENES]
    if len(scenes) < REFERENCE_SCENES:
        raise SystemExit(f"--reference-shape needs {REFERENCE_SCENES} scenes in {a.standin}, found {len(scenes)}")
    results = workdir / "results"
    overrides = [("keypoint_sets.sift.max_keypoints", REFERENCE_MAX_KEYPOINTS), *a.config]
    cfg = build_config(a.standin, results, descriptor_specs(1, a.descriptor), scenes, overrides)
    write_config(workdir, cfg)
    # Step 1 (not timed as the figure): keypoints and the one-time numba compile.
    rules = list_rules(workdir)
    until = [a.keypoint_rule] + [r for r in rules if "warmup" in r]
    pre = run_snakemake(workdir, ["--cores", str(a.cores), "--until", *until], "snakemake_keypoints.log", a.poll)
    if pre.returncode:
        raise SystemExit(f"step 1 (--until {' '.join(until)}) failed, see {pre.log}")
    print("\n".join(summary_lines(f"reference shape, step 1: {' + '.join(until)} (not the figure)", pre)))
    # Step 2: everything downstream of the keypoints for one descriptor, through the workflow.
    r = run_snakemake(workdir, ["--cores", str(a.cores), *a.snakemake_args], "snakemake_descriptor.log", a.poll)
    if r.returncode:
        print(Path(r.log).read_text()[-3000:])
        print(f"snakemake failed (exit {r.returncode}); figures below are for a failed run")
    res_root = results / "folder-standin"
    bench = read_benchmarks(res_root / "benchmarks")
    bench.pop(a.keypoint_rule, None)  # step 1's jobs
    fixed = fixed_costs(res_root)
    print("\n".join(summary_lines(
        f"reference shape, step 2: descriptor '{a.descriptor}' + all scoring + report given the keypoints "
        f"({REFERENCE_SCENES} scenes, max_keypoints {REFERENCE_MAX_KEYPOINTS}, --cores {a.cores})", r, bench, fixed)))
    kp = keypoint_counts(res_root)
    if kp:
        print(f"keypoints per image after the border rule and cap: min {min(kp)}, median {statistics.median(kp):.0f}, max {max(kp)} ({len(kp)} images)")
    return {"mode": "reference-shape", "scenes": scenes, "step1": asdict(pre), "run": asdict(r),
            "benchmarks": bench, "fixed_cost_s": fixed, "keypoints_per_image": kp}


def keypoint_counts(res_root: Path) -> list[int]:
    """Keypoints per image from the keypoint parquet files (column ``image``), if readable."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return []
    out = []
    for p in sorted((res_root / "keypoints").rglob("*.parquet")):
        col = pq.read_table(p, columns=["image"]).column("image").to_pylist()
        out += [col.count(k) for k in range(1, 7)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Each figure is defined in the module docstring and in benchmarks/README.md.")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--dry-run-dag", action="store_true", help="time the DAG build (snakemake -n) for --scenes x --descriptors")
    mode.add_argument("--reference-shape", action="store_true",
                      help=f"{REFERENCE_SCENES} scenes, max_keypoints {REFERENCE_MAX_KEYPOINTS}: time one descriptor given the keypoints")
    ap.add_argument("--standin", type=Path, help="folder of scene folders (make_hpatches_standin.py); required except for --dry-run-dag")
    ap.add_argument("--scenes", type=int, default=0, help="use the first N scenes (balanced i_/v_ order); 0: all (dry run: 116)")
    ap.add_argument("--descriptors", type=int, default=None,
                    help="number of descriptors: 1 = --descriptor alone; D > 1 = d01..dD alternating sift/rootsift "
                         "(default 1; dry run: 20)")
    ap.add_argument("--descriptor", default="sift", help="family of the single descriptor (default sift)")
    ap.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    ap.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                    help="config overrides, dotted keys, YAML values, e.g. matching.enabled=false")
    ap.add_argument("--snakemake-args", default="", metavar="'ARGS'",
                    help="extra snakemake arguments as one string, e.g. --snakemake-args='--quiet all'")
    ap.add_argument("--workdir", type=Path, help="fresh work directory (default: a new temporary one)")
    ap.add_argument("--keypoint-rule", default="keypoints", help="rule that detects keypoints (--reference-shape step 1)")
    ap.add_argument("--repeats", type=int, default=1, help="dry-run-dag: number of timed dry runs (default 1)")
    ap.add_argument("--startup-runs", type=int, default=5, help="runs of each start-up floor command (default 5; 0: skip)")
    ap.add_argument("--poll", type=float, default=0.2, help="seconds between polls for the first job (default 0.2)")
    ap.add_argument("--count-rounds", action="store_true",
                    help="also count Snakemake's scheduling rounds (benchmarks/smkrounds; measurement only)")
    ap.add_argument("--json", type=Path, help="write every figure as JSON")
    ap.add_argument("--clean", action="store_true", help="delete the work directory at the end")
    a = ap.parse_args(argv)
    a.config = parse_overrides(a.config)
    a.snakemake_args = shlex.split(a.snakemake_args)
    if a.descriptors is None and not a.dry_run_dag:
        a.descriptors = 1
    if not a.dry_run_dag and not a.standin:
        ap.error("--standin is required (generate one with benchmarks/make_hpatches_standin.py)")
    if a.standin and not a.standin.is_dir():
        ap.error(f"--standin {a.standin} is not a directory")

    workdir = prepare_workdir(a.workdir)
    print(f"work directory: {workdir}")
    env = environment()
    if a.dry_run_dag:
        out = mode_dag(a, workdir)
    elif a.reference_shape:
        out = mode_reference(a, workdir)
    else:
        out = mode_run(a, workdir)
    out["environment"] = env
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str) + "\n")
    if a.clean:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
