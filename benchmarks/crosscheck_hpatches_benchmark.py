"""Cross-check: descbench's hpatches-benchmark numbers against hpatches-benchmark's own scripts.

A script, not a test (pytest collects ``tests/`` only). It takes a descbench results folder in
which the patch benchmarks ran (``snakemake --cores 2 --configfile config/patches.yaml`` writes
``results/patches``) and a checkout of hpatches-benchmark (github.com/hpatches/hpatches-benchmark,
checked at commit e0c993c), and in a temporary folder:

1. exports every descriptor descbench evaluated (``<results>/patches/descriptors/<name>/<seq>.parquet``)
   in hpatches-benchmark's layout, ``descr/<name>/<seq>/<ref|e1..t5>.csv`` (comma-separated, no
   header, one row per patch; ``descbench.patches.describe.write_hpatches_csv``; uint8 packed bits
   are written unpacked as 0/1 columns, whose L2 = sqrt(Hamming) ranks as Hamming), and checks
   that reading them back as the reference does (``pd.read_csv(header=None)`` -> float32) gives
   the descriptors bit for bit;
2. copies the reference's ``python/`` folder, puts descbench's task CSVs (the verification lists
   and retrieval queries / distractors descbench generated, decompressed) in ``tasks/`` and the
   splits descbench used in ``tasks/splits/splits.json``, which is where the reference looks
   (``tskdir = python/../tasks``);
3. runs ``hpatches_eval.py`` (verification, matching, retrieval) per descriptor and split, then
   ``hpatches_results.py`` per split, both unmodified, through a small launcher written into the
   temporary folder: it adds ``pandas.DataFrame.as_matrix`` (removed in pandas 1.0, still called
   by the reference) as ``self.values`` and records the values ``hpatches_results.py`` hands to
   ``tabulate`` at full precision before they are formatted;
4. recomputes those printed aggregates from the reference's dill result pickles
   (``results/<name>_<task>_<split>.p``) as ``utils/results.py`` does (they must equal the
   recorded ones exactly), and compares every printed number with descbench's: the headline
   table ``<results>/report/patches/hpatches_benchmark.csv`` (``verification_<protocol>_<negatives>_<jitter>``,
   ``matching_map[_<jitter>]``, ``retrieval_map[_<jitter>]`` at pool 20,000,
   ``retrieval_map_pool<k>``; the two verification averages against the mean of the reference's
   six printed cases) and, for the retrieval cells at the smaller pools, the per-descriptor
   ``<results>/patches/eval/<name>/hpatches_benchmark.parquet``. Also compared, as a diagnosis
   of where a difference would come from: the per-(sequence, jitter, image) matching AP and the
   per-(query, jitter, pool) retrieval AP (``eval/<name>/details/``) with the pickles' values.

Everything is compared as fractions (the reference's unit; descbench's tables are x100). The
reference prints the retrieval ``mean`` row from a float32 cast of the per-jitter cells, so it
carries float32 rounding (< 1e-7); descbench keeps float64.

    python benchmarks/crosscheck_hpatches_benchmark.py --reference /path/to/hpatches-benchmark \\
        --python /path/to/venv/bin/python [--results results/patches] [--tolerance 1e-6]

``--python``: an interpreter with the reference's requirements (``python/utils/requirements.txt``:
joblib pandas dill tqdm scipy tabulate, plus opencv-python-headless and numpy < 2: the
reference's retrieval stores a 1-element array in a float slot and uses ``numpy.trapz``, both
errors in NumPy 2); default: this one, e.g.
``python3 -m venv /tmp/hpb-venv && /tmp/hpb-venv/bin/pip install joblib "pandas<2.3" dill tqdm
"scipy<1.14" tabulate "opencv-python-headless<4.11" "numpy<2"``. Exit status 1 when a headline number differs by more than ``--tolerance``, 2 on a setup
error. The hpatches-benchmark code is not part of descbench and is not shipped with it: get it
yourself (``git clone https://github.com/hpatches/hpatches-benchmark``); its ``tasks/`` folder
is not needed. Figures of the check: benchmarks/README.md, "hpatches-benchmark cross-check".
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

JITTER_NAMES = {"e": "easy", "h": "hard", "t": "tough"}
PRINTED_JITTER = {"Easy": "e", "Hard": "h", "Tough": "t"}  # utils/results.py's row labels
TASKS = ("verification", "matching", "retrieval")

# Run by the reference's interpreter: <script> <record.json|-> <args...>
LAUNCHER = r'''
import json, os, runpy, sys
import numpy as np
import pandas as pd
if not hasattr(pd.DataFrame, "as_matrix"):  # removed in pandas 1.0; the reference still calls it
    pd.DataFrame.as_matrix = lambda self: self.values
script, record = os.path.abspath(sys.argv[1]), sys.argv[2]
sys.path.insert(0, os.path.dirname(script))
calls = []
if record != "-":
    import utils.results as R
    _tb, ctx = R.tb, {}
    def tb(rows, headers=(), **kw):
        calls.append(dict(ctx, headers=[str(h) for h in headers],
                          rows=[[x if isinstance(x, str) else float(x) for x in r] for r in rows]))
        return _tb(rows, headers=headers, **kw)
    R.tb = tb
    for task, fn in list(R.results_methods.items()):
        def wrapped(desc, splt, _fn=fn, _task=task):
            ctx.update(task=_task, descriptor=desc, split=splt["name"])
            return _fn(desc, splt)
        R.results_methods[task] = wrapped
sys.argv = [script] + sys.argv[3:]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    if record != "-":
        with open(record, "w") as f:
            json.dump(calls, f)
'''

# Run by the reference's interpreter in the folder holding results/: <out.json> <split> <python dir> <names...>.
# The aggregates of utils/results.py recomputed from the pickles, plus the per-item APs.
COLLECTOR = r'''
import json, os, sys
import dill
import numpy as np
out, split, names = sys.argv[1], sys.argv[2], sys.argv[4:]
sys.path.insert(0, sys.argv[3])  # the pickles refer to utils.tasks
ft = {"e": "Easy", "h": "Hard", "t": "Tough"}
def load(name, task):
    with open(os.path.join("results", "%s_%s_%s.p" % (name, task, split)), "rb") as f:
        return dill.load(f)
res = {}
for name in names:
    r = {}
    v = load(name, "verification")
    r["verification"] = {"%s/%s/%s" % (p, neg, t): float(v[t][neg][p][m])
                         for p, m in (("balanced", "auc"), ("imbalanced", "ap"))
                         for neg in ("inter", "intra") for t in "eht"}
    m = load(name, "matching")
    tot, k, per = {"e": 0, "h": 0, "t": 0}, 0, []
    for seq in m:
        for t in "eht":
            for i in range(1, 6):
                tot[t] += m[seq][t][i]["ap"]
                k += 1
                per.append([seq, t, i, float(m[seq][t][i]["ap"])])
    k = k / 3.0
    row = [tot["e"] / k, tot["h"] / k, tot["t"] / k]
    row.append(sum(row) / float(len(row)))
    r["matching"] = {"rows": [row], "per_item": per}
    q = load(name, "retrieval")
    n_q = float(len(q.keys()))
    pools = sorted(q[0]["e"])
    rows, per = [], []
    for t in "eht":
        rows.append([ft[t]] + [sum(q[i][t][p]["ap"] for i in q) / n_q for p in pools])
    for i in q:
        for t in "eht":
            for p in pools:
                per.append([int(i), t, int(p), float(q[i][t][p]["ap"])])
    arr = np.array(rows)[:, 1:].astype(np.float32)
    rows.append(["mean"] + [float(x) for x in np.mean(arr, axis=0)])
    r["retrieval"] = {"pools": [int(p) for p in pools], "rows": rows, "per_item": per}
    res[name] = r
with open(out, "w") as f:
    json.dump(res, f)
'''


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(label: str, cmd: list[str], cwd: Path, log: Path) -> str:
    t0 = time.time()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    log.write_text(p.stdout + "\n--- stderr ---\n" + p.stderr)
    if p.returncode != 0:
        fail(f"{' '.join(cmd[:4])} ... failed (exit {p.returncode}); output in {log}:\n{p.stderr[-3000:]}")
    print(f"  {label}: {time.time() - t0:.0f} s", flush=True)
    return p.stdout


def export_descriptors(desc_dir: Path, name: str, out_root: Path) -> int:
    """``<out_root>/<name>/<seq>/<type>.csv`` for every sequence of ``desc_dir``; checks the
    reference's reading of the files gives the descriptors exactly. Returns the sequence count."""
    from descbench.patches import PATCH_TYPES
    from descbench.patches.describe import read_sequence_descriptors, write_hpatches_csv

    files = sorted(desc_dir.glob("*.parquet"))
    if not files:
        fail(f"no descriptor files {desc_dir}/*.parquet; run the patch benchmarks first")
    for f in files:
        descs, _ = read_sequence_descriptors(f)
        if next(iter(descs.values())).dtype == np.uint8:  # Hamming on packed bits == L2^2 on 0/1 bits
            descs = {t: np.unpackbits(d, axis=1).astype(np.float32) for t, d in descs.items()}
        paths = write_hpatches_csv(out_root / name, f.stem, descs)
        for t, p in zip(PATCH_TYPES, paths):
            back = pd.read_csv(p, header=None).to_numpy().astype(np.float32)
            if not np.array_equal(back, descs[t]):
                fail(f"{p}: read back as hpatches-benchmark reads it, the descriptors differ from {f}")
    return len(files)


def copy_tasks(src: Path, dst: Path, splits: list[str]) -> None:
    """descbench's task CSVs of ``splits`` (gzip or plain) -> ``dst`` (plain, the reference's names),
    the splits -> ``dst/splits/splits.json``; retrieval files descbench did not write (HPatches
    splits on hpatches-release) come from the copies descbench ships."""
    from importlib import resources

    dst.mkdir(parents=True)
    (dst / "splits").mkdir()
    all_splits = json.loads((src / "splits.json").read_text())
    missing = [s for s in splits if s not in all_splits]
    if missing:
        fail(f"{src / 'splits.json'} has no split {missing}")
    (dst / "splits" / "splits.json").write_text(json.dumps({s: all_splits[s] for s in splits}, indent=1))
    shipped = resources.files("descbench").joinpath("data/hpatches/tasks")
    for s in splits:
        names = [f"verif_{x}_split-{s}.csv" for x in ("pos", "neg_intra", "neg_inter")]
        names += [f"retr_{x}_split-{s}.csv" for x in ("queries", "distractors")]
        for n in names:
            if (src / n).is_file():
                data = (src / n).read_bytes()
            elif (src / (n + ".gz")).is_file():
                data = gzip.decompress((src / (n + ".gz")).read_bytes())
            elif n.startswith("retr_") and shipped.joinpath(n + ".gz").is_file():
                data = gzip.decompress(shipped.joinpath(n + ".gz").read_bytes())
            else:
                fail(f"task file {src / n}(.gz) not found")
            (dst / n).write_bytes(data)


def printed_values(calls: list[dict]) -> dict:
    """{(descriptor, split, task, key): value} from the recorded tabulate calls."""
    out, seen = {}, {}
    for c in calls:
        d, s, task, rows = c["descriptor"], c["split"], c["task"], c["rows"]
        n = seen[(d, s, task)] = seen.get((d, s, task), -1) + 1  # tables of this call so far
        if task == "verification":  # two tables per call, balanced then imbalanced; rows [jitter, inter, intra]
            protocol = ("balanced", "imbalanced")[n]
            for r in rows:
                j = PRINTED_JITTER[r[0]]
                out[(d, s, task, f"{protocol}/inter/{j}")] = r[1]
                out[(d, s, task, f"{protocol}/intra/{j}")] = r[2]
        elif task == "matching":  # one row: Easy, Hard, Tough, mean
            for key, v in zip(("e", "h", "t", "mean"), rows[0]):
                out[(d, s, task, key)] = v
        else:  # rows Easy, Hard, Tough, mean; columns the pool sizes
            pools = [int(h) for h in c["headers"][1:]]
            for r in rows:
                j = PRINTED_JITTER.get(r[0], "mean")
                for p, v in zip(pools, r[1:]):
                    out[(d, s, task, f"{j}/{p}")] = v
    return out


def collected_values(coll: dict, split: str) -> dict:
    out = {}
    for d, r in coll.items():
        for k, v in r["verification"].items():
            out[(d, split, "verification", k)] = v
        for key, v in zip(("e", "h", "t", "mean"), r["matching"]["rows"][0]):
            out[(d, split, "matching", key)] = v
        for row in r["retrieval"]["rows"]:
            j = PRINTED_JITTER.get(row[0], "mean")
            for p, v in zip(r["retrieval"]["pools"], row[1:]):
                out[(d, split, "retrieval", f"{j}/{p}")] = v
    return out


def descbench_values(report: pd.DataFrame, eval_root: Path, names: list[str], splits: list[str]) -> dict:
    """{(descriptor, split, task, key): (descbench column, fraction)} for every printed number."""
    out = {}
    for d in names:
        ev = pd.read_parquet(eval_root / d / "hpatches_benchmark.parquet")
        for s in splits:
            sel = report[(report["descriptor"] == d) & (report["split"] == s)]
            if len(sel) != 1:
                fail(f"the report table has {len(sel)} rows for descriptor {d}, split {s}")
            row = sel.iloc[0]
            col = lambda c: (c, float(row[c]) / 100.0)  # noqa: E731
            for p in ("balanced", "imbalanced"):
                for neg in ("inter", "intra"):
                    for j in "eht":
                        out[(d, s, "verification", f"{p}/{neg}/{j}")] = col(f"verification_{p}_{neg}_{JITTER_NAMES[j]}")
            out[(d, s, "verification", "balanced/mean of 6")] = col("verification_balanced_auc")
            out[(d, s, "verification", "imbalanced/mean of 6")] = col("verification_imbalanced_ap")
            for j in "eht":
                out[(d, s, "matching", j)] = col(f"matching_map_{JITTER_NAMES[j]}")
            out[(d, s, "matching", "mean")] = col("matching_map")
            det = ev[(ev["task"] == "retrieval") & (ev["split"] == s) & (ev["level"] == "detail")
                     & (ev["metric"] == "map")]
            pools = sorted(int(p) for p in det["pool_size"].unique())
            for r in det.itertuples():
                j = r.jitter if r.jitter in JITTER_NAMES else "mean"
                out[(d, s, "retrieval", f"{j}/{int(r.pool_size)}")] = ("eval parquet", float(r.value) / 100.0)
            for k in pools:
                out[(d, s, "retrieval", f"mean/{k}")] = col(f"retrieval_map_pool{k}")
            for j in "eht":
                out[(d, s, "retrieval", f"{j}/{pools[-1]}")] = col(f"retrieval_map_{JITTER_NAMES[j]}")
            out[(d, s, "retrieval", f"mean/{pools[-1]} (headline)")] = col("retrieval_map")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True, type=Path, help="hpatches-benchmark checkout (holds python/)")
    ap.add_argument("--results", default=Path("results/patches"), type=Path, help="descbench results folder")
    ap.add_argument("--python", default=sys.executable, help="interpreter with the reference's requirements")
    ap.add_argument("--descriptors", nargs="*", help="default: every descriptor of the report table")
    ap.add_argument("--splits", nargs="*", help="default: every split of the report table")
    ap.add_argument("--tolerance", type=float, default=1e-6, help="max |diff| (fractions) of a headline number")
    ap.add_argument("--workdir", type=Path, help="keep the temporary files here (must not exist)")
    ap.add_argument("--json", type=Path, help="write every compared number here")
    ap.add_argument("--print-reference", action="store_true", help="also show what hpatches_results.py printed")
    args = ap.parse_args(argv)

    pydir = args.reference / "python"
    if not (pydir / "hpatches_eval.py").is_file() or not (pydir / "hpatches_results.py").is_file():
        fail(f"{pydir} holds no hpatches_eval.py / hpatches_results.py: pass a hpatches-benchmark checkout")
    res = args.results
    report_csv = res / "report" / "patches" / "hpatches_benchmark.csv"
    tasks_src = res / "patches" / "tasks" / "hpatches_benchmark"
    if not report_csv.is_file() or not (tasks_src / "splits.json").is_file():
        fail(f"{report_csv} or {tasks_src / 'splits.json'} missing: run the patch benchmarks "
             "(snakemake --cores 2 --configfile config/patches.yaml)")
    report = pd.read_csv(report_csv)
    names = args.descriptors or list(dict.fromkeys(report["descriptor"]))
    splits = args.splits or list(dict.fromkeys(report["split"]))

    p = subprocess.run([args.python, "-c", "import numpy, pandas, scipy, dill, tabulate, tqdm, joblib, cv2; "
                        "print(numpy.__version__, pandas.__version__, scipy.__version__)"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{args.python} lacks the reference's requirements:\n{p.stderr[-1500:]}")
    versions = p.stdout.split()
    if int(versions[0].split(".")[0]) >= 2:
        fail(f"{args.python} has NumPy {versions[0]}; the reference needs NumPy < 2 (see --help)")
    print(f"reference interpreter: numpy {versions[0]}, pandas {versions[1]}, scipy {versions[2]}")

    if args.workdir:
        work = args.workdir
        work.mkdir(parents=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="hpb-crosscheck-"))
    done = False
    try:
        shutil.copytree(pydir, work / "python", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        copy_tasks(tasks_src, work / "tasks", splits)
        for d in names:
            n = export_descriptors(res / "patches" / "descriptors" / d, d, work / "descr")
            print(f"exported {d}: {n} sequences x 16 strips -> {work / 'descr' / d}", flush=True)
        (work / "launch.py").write_text(LAUNCHER)
        (work / "collect.py").write_text(COLLECTOR)
        run_dir = work / "run"  # hpatches_results.py reads ./results
        run_dir.mkdir()
        launch = [args.python, str(work / "launch.py")]
        ev_py, res_py = str(work / "python" / "hpatches_eval.py"), str(work / "python" / "hpatches_results.py")
        printed, collected, stdout = {}, {}, []
        for s in splits:
            for d in names:
                run(f"hpatches_eval.py {d} {s}", launch + [ev_py, "-", f"--descr-name={d}",
                              *[f"--task={t}" for t in TASKS], f"--split={s}", f"--descr-dir={work / 'descr'}",
                              "--results-dir=results"], run_dir, work / f"eval_{d}_{s}.log")
            rec = work / f"printed_{s}.json"
            stdout.append(run(f"hpatches_results.py {s}", launch + [res_py, str(rec),
                                        *[f"--descr-name={d}" for d in names], *[f"--task={t}" for t in TASKS],
                                        f"--split={s}"], run_dir, work / f"results_{s}.log"))
            printed.update(printed_values(json.loads(rec.read_text())))
            coll_json = work / f"collected_{s}.json"
            run(f"pickles {s}", [args.python, str(work / "collect.py"), str(coll_json), s, str(work / "python"), *names],
                run_dir, work / f"collect_{s}.log")
            coll = json.loads(coll_json.read_text())
            collected.update(collected_values(coll, s))
            for d in names:
                collected[("detail", d, s)] = coll[d]
        (work / "hpatches_results_stdout.txt").write_text("\n".join(stdout))
        if args.print_reference:
            print("\nhpatches_results.py printed:\n" + "\n".join(stdout))

        # the pickles' aggregates (utils/results.py's arithmetic) == what the script printed, exactly
        bad = [k for k in printed if collected.get(k) != printed[k]]
        if bad or len(printed) != sum(1 for k in collected if k[0] != "detail"):
            fail(f"recomputed from the pickles != printed for {bad[:5]} (of {len(printed)})")

        mine = descbench_values(report, res / "patches" / "eval", names, splits)
        for d in names:  # the two verification averages descbench adds: the mean of the 6 printed cases
            for s in splits:
                for p in ("balanced", "imbalanced"):
                    six = [printed[(d, s, "verification", f"{p}/{neg}/{j}")]
                           for neg in ("inter", "intra") for j in "eht"]
                    printed[(d, s, "verification", f"{p}/mean of 6")] = float(np.mean(six))
        rows = []
        for key, (col, v) in mine.items():
            ref_key = key[:3] + (key[3].replace(" (headline)", ""),)
            if ref_key not in printed:
                fail(f"the reference printed no value for {key}")
            rows.append(dict(descriptor=key[0], split=key[1], task=key[2], number=key[3], descbench_column=col,
                             descbench=v, reference=printed[ref_key], abs_diff=abs(v - printed[ref_key])))
        table = pd.DataFrame(rows)
        unmatched = set(printed) - {r[:3] + (r[3].replace(" (headline)", ""),) for r in mine}
        if unmatched:
            fail(f"printed by the reference, not in descbench's tables: {sorted(unmatched)[:5]}")

        details = []
        for d in names:
            for s in splits:
                c = collected[("detail", d, s)]
                dm = pd.read_parquet(res / "patches" / "eval" / d / "details" / f"hpbench_matching_{s}.parquet")
                rm = pd.DataFrame(c["matching"]["per_item"], columns=["sequence", "jitter", "k", "ap_ref"])
                m = dm.merge(rm, on=["sequence", "jitter", "k"], how="outer", indicator=True)
                dr = pd.read_parquet(res / "patches" / "eval" / d / "details" / f"hpbench_retrieval_{s}.parquet")
                rr = pd.DataFrame(c["retrieval"]["per_item"], columns=["query", "jitter", "pool_size", "ap_ref"])
                r = dr.merge(rr, on=["query", "jitter", "pool_size"], how="outer", indicator=True)
                for task, x in (("matching AP per (sequence, jitter, k)", m),
                                ("retrieval AP per (query, jitter, pool)", r)):
                    if (x["_merge"] != "both").any():
                        fail(f"{d} {s} {task}: the items differ between descbench and the reference")
                    diff = (x["ap"] - x["ap_ref"]).abs()
                    details.append(dict(descriptor=d, split=s, task=task, n=len(x), max_abs_diff=float(diff.max()),
                                        n_differ=int((diff > args.tolerance).sum())))
        done = True
    finally:
        if not args.workdir and done:
            shutil.rmtree(work, ignore_errors=True)
        elif not args.workdir:
            print(f"kept {work} (logs)", file=sys.stderr)

    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.10f}".format):
        print("\nevery number hpatches_results.py prints (fractions), descbench vs reference:")
        print(table.drop(columns="descbench_column").to_string(index=False))
        summary = table.groupby(["descriptor", "split", "task"], sort=False).agg(
            numbers=("abs_diff", "size"), max_abs_diff=("abs_diff", "max")).reset_index()
        print("\nmax |diff| per descriptor, split and task:")
        print(summary.to_string(index=False, float_format="{:.3e}".format))
        print("\nper-item APs (descbench details vs the reference's pickles):")
        print(pd.DataFrame(details).to_string(index=False, float_format="{:.3e}".format))
        per_task = table.groupby("task", sort=False)["abs_diff"].max()
        print("\nmax |diff| per task: " + ", ".join(f"{t} {v:.3e}" for t, v in per_task.items()))
    if args.json:
        args.json.write_text(json.dumps({"numbers": rows, "details": details, "tolerance": args.tolerance}, indent=1))
    worst = float(table["abs_diff"].max())
    if worst > args.tolerance:
        print(f"FAIL: {int((table['abs_diff'] > args.tolerance).sum())} numbers differ by more than {args.tolerance:g} "
              f"(max {worst:.3e})")
        return 1
    print(f"OK: all {len(table)} numbers agree within {args.tolerance:g} (max |diff| {worst:.3e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
