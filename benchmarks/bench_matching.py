"""Matching benchmark: all matching metrics + the binary classifier (4 matchers) of one image pair
against the float32 product that gives its distance matrix.

A script, not a test (pytest does not collect it; it never fails on a missed target). For each N
(keypoints per image) it builds the synthetic SIFT-like pair of ``bench_scoring.py`` and times,
alternately, (a) ``q_desc @ t_desc.T`` (float32, N x N) and (b)
``descbench.metrics.matching.evaluate_pair(...)`` with every matcher, best and median of
``--repeats`` runs, and prints the ratio (b)/(a). With ``--old-commit`` (default e21257f, the code
before the fused pass) it also times the old path ``match_pair(...)`` + ``classify_pair(...)`` of
that commit, in a child process whose ``descbench`` is that commit's tree (``git archive``), and
checks that both give identical results. ``--rootsift`` adds a RootSIFT variant (non-integer
descriptors: the exact-screen certificate does not apply, the general rounding bounds do).

    python benchmarks/bench_matching.py                      # N = 1300, 4000, 8000; --threads 1
    python benchmarks/bench_matching.py --n 4000 --repeats 7 --rootsift --json out.json
    python benchmarks/bench_matching.py --old-commit none    # skip the old path
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_scoring import limit_threads, make_pair, timed_pair  # noqa: E402

CHILD_TAG = "BENCH_MATCHING_CHILD "
TARGET = 3.0


def pair_data(n: int, rootsift: bool) -> dict:
    d = make_pair(n)
    if rootsift:  # Arandjelovic & Zisserman 2012: sqrt of the L1-normalised SIFT vector
        for k in ("q_desc", "t_desc"):
            x = d[k].astype(np.float64)
            d[k] = np.sqrt(x / np.maximum(x.sum(axis=1, keepdims=True), 1e-12)).astype(np.float32)
    return d


def call_args(d: dict) -> tuple:
    return d["q_xy"], d["q_desc"], d["t_xy"], d["t_desc"], d["H"], d["size"], d["size"]


def new_path(d: dict):
    from descbench.metrics.matching import evaluate_pair

    return evaluate_pair(*call_args(d))


def old_path(d: dict):
    """match_pair + classify_pair: the two entry points stages.py called before evaluate_pair."""
    from descbench.metrics.classifier import classify_pair
    from descbench.metrics.matching import match_pair

    a = call_args(d)
    return match_pair(*a), classify_pair(*a[:5])


def comparable(out) -> dict:
    """Results as plain data (matching dict, classifier summary rows and ROC points)."""
    stats, res = out
    return {"stats": stats, "summary": res.summary_rows(), "roc": {k: np.asarray(v) for k, v in res.roc_rows().items()}}


def same(a: dict, b: dict) -> bool:
    def eq(x, y):
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, list):
            return len(x) == len(y) and all(eq(u, v) for u, v in zip(x, y))
        if isinstance(x, np.ndarray):
            if x.dtype == object:
                return x.shape == y.shape and bool((x == y).all())
            return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))
        if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
            return True
        return x == y

    return eq(a, b)


def measure(sizes, repeats, rootsift, fn, dump: Path | None = None) -> list[dict]:
    out = []
    for n in sizes:
        d = pair_data(n, rootsift)
        q, c = d["q_desc"], d["t_desc"]
        fn(pair_data(300, rootsift))  # numba load / compile
        ta, tb = timed_pair(lambda: q @ c.T, lambda: fn(d), repeats)
        row = {"n": n, "rootsift": rootsift, "matmul": ta, "pair": tb,
               "ratio_best": tb["best_ms"] / ta["best_ms"], "ratio_median": tb["median_ms"] / ta["median_ms"]}
        if dump is not None:
            with open(dump.with_suffix(f".{n}.{int(rootsift)}.pkl"), "wb") as fh:
                pickle.dump(comparable(fn(d)), fh)
        out.append(row)
    return out


def run_old(commit: str, sizes, repeats, threads, rootsift, tmp: Path) -> list[dict]:
    """Time the old path in a child process whose descbench is ``commit``'s tree."""
    root = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], cwd=HERE, text=True).strip())
    tar = tmp / "old.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "archive", commit, "workflow/descbench"], cwd=root, stdout=fh, check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(tmp / "old", filter="data")
    env = dict(os.environ, PYTHONPATH=str(tmp / "old" / "workflow"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(tmp / "dump"), "--threads", str(threads),
           "--repeats", str(repeats), "--old-commit", "none", "--n", *map(str, sizes)] + (["--rootsift"] if rootsift else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"old-path child failed:\n{proc.stderr}")
    line = [x for x in proc.stdout.splitlines() if x.startswith(CHILD_TAG)][-1]
    return json.loads(line[len(CHILD_TAG):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1300, 4000, 8000], help="keypoints per image")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="numba and BLAS threads")
    ap.add_argument("--old-commit", default="e21257f", help="commit of the old path, or 'none'")
    ap.add_argument("--rootsift", action="store_true", help="also time RootSIFT descriptors (general float path)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    _, limiter = limit_threads(args.threads)
    import descbench

    variants = [False, True] if args.rootsift else [False]
    if args.child is not None:  # old path, in the old tree
        rows = [r for v in variants for r in measure(args.n, args.repeats, v, old_path, dump=args.child)]
        print(CHILD_TAG + json.dumps(rows))
        return 0

    print(f"descbench from {Path(descbench.__file__).parent}; threads {args.threads}; repeats {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        new = [r for v in variants for r in measure(args.n, args.repeats, v, new_path, dump=tmp / "new")]
        old = run_old(args.old_commit, args.n, args.repeats, args.threads, args.rootsift, tmp) if args.old_commit != "none" else []
        for r in new:
            match = [o for o in old if o["n"] == r["n"] and o["rootsift"] == r["rootsift"]]
            if match:
                r["old"] = match[0]
                with open(tmp / f"new.{r['n']}.{int(r['rootsift'])}.pkl", "rb") as fh:
                    a = pickle.load(fh)
                with open(tmp / f"dump.{r['n']}.{int(r['rootsift'])}.pkl", "rb") as fh:
                    b = pickle.load(fh)
                r["identical_to_old"] = same(a, b)
    hdr = f"{'N':>6} {'desc':>8} | {'matmul ms':>17} | {'evaluate_pair ms':>17} | {'ratio':>11} |"
    if old:
        hdr += f" {'old ms (old matmul)':>26} | {'old ratio':>11} | identical"
    print(hdr)
    print("       (best / median)")
    for r in new:
        s = (f"{r['n']:>6} {'rootsift' if r['rootsift'] else 'sift':>8} | {r['matmul']['best_ms']:>7.1f} / {r['matmul']['median_ms']:>7.1f} | "
             f"{r['pair']['best_ms']:>7.1f} / {r['pair']['median_ms']:>7.1f} | {r['ratio_best']:>4.2f} / {r['ratio_median']:>4.2f} |")
        if "old" in r:
            o = r["old"]
            s += (f" {o['pair']['best_ms']:>7.1f} / {o['pair']['median_ms']:>7.1f} ({o['matmul']['median_ms']:>6.1f}) |"
                  f" {o['ratio_best']:>4.2f} / {o['ratio_median']:>4.2f} | {r['identical_to_old']}")
        print(s)
    print(f"target: evaluate_pair <= ~{TARGET:g} x matmul (ratio columns: best / median)")
    try:
        print(f"load average during the run: {os.getloadavg()}")
    except OSError:
        pass
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "repeats": args.repeats, "rows": new}, indent=1))
    del limiter
    return 0


if __name__ == "__main__":
    sys.exit(main())
