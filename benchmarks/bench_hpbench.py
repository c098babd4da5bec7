"""hpatches-benchmark tasks at HPatches-release scale: wall time and peak memory.

A script, not a test (pytest does not collect it; it only reports). It builds a synthetic patch
descriptor set shaped like hpatches-release - the 116 sequences of split ``full``, N patches per
sequence drawn uniformly in [--n-min, --n-max] (at least 1 + the largest index the shipped
retrieval files use), 16 strips each, --dim float32 descriptors: ``ref`` standard normal, the
jittered strips ``ref + sigma * noise`` with sigma growing with the jitter and k (so the tasks are
neither trivial nor random) - and times, on it:

* task generation: ``gen_verification`` with --pairs pairs per list (and, for scale, the original
  per-row call sequence on --slow-rows rows, extrapolated linearly);
* the three evaluations of split ``full``: verification (the generated pairs), matching (116
  sequences x 15 strips), retrieval (the shipped 10,000 queries x 20,000 distractors).

    python benchmarks/bench_hpbench.py                  # defaults: 116 seqs, N in [1000, 4000], 128-D, 1e6 pairs
    python benchmarks/bench_hpbench.py --n-max 1500 --pairs 100000 --threads 2 --json out.json

Peak memory is the peak resident set size of this process (``ru_maxrss``), which includes the
descriptors themselves; the report also gives their size and the resident size before the
timings, so the evaluations' own overhead is the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

import numpy as np


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_descriptors(names, n_per_seq, dim, seed=0):
    from descbench.patches import JITTERS, PATCH_TYPES

    rng = np.random.default_rng(seed)
    sigma = {f"{j}{k}": (0.8 + 0.35 * ji) * (0.7 + 0.15 * k) for ji, j in enumerate(JITTERS) for k in range(1, 6)}
    out = {}
    for s in names:
        n = n_per_seq[s]
        ref = rng.standard_normal((n, dim), dtype=np.float32)
        strips = {"ref": ref}
        for t in PATCH_TYPES[1:]:
            noise = rng.standard_normal((n, dim), dtype=np.float32)
            noise *= np.float32(sigma[t])
            noise += ref
            strips[t] = noise
        out[s] = strips
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-min", type=int, default=1000)
    ap.add_argument("--n-max", type=int, default=4000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=1_000_000, help="pairs per verification list")
    ap.add_argument("--slow-rows", type=int, default=20_000,
                    help="rows of the original call sequence to time (0: skip)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import numba
    import pandas as pd
    from threadpoolctl import threadpool_limits

    from descbench.patches import hpbench as H

    numba.set_num_threads(args.threads)
    figures: dict = {"args": vars(args)}
    with threadpool_limits(args.threads):
        names = H.split_sequences("full")
        q, d = H.read_retrieval_tasks("full")
        used = pd.concat([q, d]).groupby("s")["idx"].max()
        rng = np.random.default_rng(1)
        n_per_seq = {s: int(max(rng.integers(args.n_min, args.n_max + 1), used.get(s, -1) + 1)) for s in names}
        t0 = time.perf_counter()
        desc = make_descriptors(names, n_per_seq, args.dim)
        n_total = sum(n_per_seq.values())
        figures["patches_per_strip_total"] = n_total
        figures["descriptor_mb"] = n_total * 16 * args.dim * 4 / 2**20
        figures["make_descriptors_s"] = time.perf_counter() - t0

        # warm the numba caches (compiled on first use) on a tiny case so timings exclude compilation
        tiny = {s: {t: a[:20] for t, a in desc[s].items()} for s in names[:3]}
        tl = {s: 20 for s in names[:3]}
        tp = H.gen_verification(tl, {"name": "w", "test": names[:3]}, n_pos=50)
        H.evaluate_verification(tiny, tp)
        H.evaluate_matching(tiny, names[:1])
        H.evaluate_retrieval(tiny, q[q.s.isin(names[:3]) & (q.idx < 20)], d[d.s.isin(names[:3]) & (d.idx < 20)])
        figures["rss_before_mb"] = rss_mb()

        t0 = time.perf_counter()
        pairs = H.gen_verification(n_per_seq, "full", n_pos=args.pairs)
        figures["gen_verification_s"] = time.perf_counter() - t0
        if args.slow_rows:
            rs = np.random.RandomState(42)
            s = rs.choice(names, args.slow_rows)
            t0 = time.perf_counter()
            [rs.choice(np.arange(n_per_seq[k]), 2, replace=False) for k in s]
            [rs.choice(np.arange(5), 2, replace=False) for _ in s]
            s2 = rs.choice(names, args.slow_rows)
            [rs.randint(n_per_seq[k]) for k in s2]
            slow = (time.perf_counter() - t0) * args.pairs / args.slow_rows
            figures["gen_verification_original_extrapolated_s"] = slow

        results = {}
        for task, call in (
            ("verification", lambda: H.evaluate_verification(desc, pairs, "full")),
            ("matching", lambda: H.evaluate_matching(desc, names, "full")),
            ("retrieval", lambda: H.evaluate_retrieval(desc, q, d, "full")),
        ):
            t0 = time.perf_counter()
            results[task] = call()
            figures[f"{task}_s"] = time.perf_counter() - t0
            figures[f"peak_after_{task}_mb"] = peak_mb()
        figures["evaluation_total_s"] = sum(figures[f"{t}_s"] for t in results)
        figures["peak_rss_mb"] = peak_mb()
        figures["load_avg"] = os.getloadavg()

    table = pd.concat([r.table for r in results.values()])
    print(table[table.level != "detail"].to_string(index=False))
    for k, v in figures.items():
        print(f"{k:45s} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2, default=str)


if __name__ == "__main__":
    main()
