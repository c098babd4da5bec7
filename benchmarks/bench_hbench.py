"""HBench benchmark timings: all four image matching tasks and one 40-sequence retrieval task on
synthetic HPatches-scale patch descriptors (descbench.patches.hbench).

A script, not a test (pytest does not collect it; it only reports). Data: 116 sequences (57 i_*,
59 v_*), 1,500..2,500 patches each (mean ~2,000), 128-D float32 unit vectors; the patches of a
sequence's strips are noisy copies of one base vector per patch (easy noise < hard noise), so the
APs are neither 0 nor 1. Descriptors are generated lazily per sequence from
``numpy.random.default_rng((seed, sequence number, strip number))`` and cached for one sequence,
so the input never needs all 116 x 11 strips in memory.

Each part runs in a fresh child process, so its peak RSS (``ru_maxrss``) is its own:

Reported per part: seconds per step (``compute_s`` without ``input_generation_s``, the time
spent making the synthetic descriptors), ``wall_s`` (all steps, generation included) and
``peak_rss_mb`` (the child's peak resident memory, imports and input included).

* ``matching``: ``compute_matching_results`` for the 4 ``test_*`` tasks of all 116 sequences
  (1,160 pairs of ~2,000 x ~2,000 patches), ``write_matching_results``,
  ``read_matching_results`` and ``evaluate_matching`` on the files read back;
* ``retrieval``: ``make_retrieval_task`` (40 sequences, seed 0, easy, 4,000 queries),
  ``compute_retrieval_results`` (pool ~480,000 patches), write, read, ``evaluate_retrieval``.

    python benchmarks/bench_hbench.py                      # both parts, 2 threads
    python benchmarks/bench_hbench.py --part retrieval --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

N_ILLUM, N_VIEW, DIM = 57, 59, 128
TYPES = ("ref", "e1", "e2", "e3", "e4", "e5", "h1", "h2", "h3", "h4", "h5")
NOISE = {"r": 0.0, "e": 1.5, "h": 1.9}  # per-dimension noise sd; base values |N(0, 1)|


def sequence_names() -> list[str]:
    return [f"i_seq{k:03d}" for k in range(N_ILLUM)] + [f"v_seq{k:03d}" for k in range(N_VIEW)]


def sequence_size(number: int, seed: int) -> int:
    return int(np.random.default_rng((seed, number, 999)).integers(1500, 2501))


def make_strips(number: int, seed: int) -> dict[str, np.ndarray]:
    n = sequence_size(number, seed)
    base = np.abs(np.random.default_rng((seed, number, 0)).normal(size=(n, DIM)))
    out = {}
    for t_num, t in enumerate(TYPES, start=1):
        x = base + NOISE[t[0]] * np.random.default_rng((seed, number, t_num)).normal(size=(n, DIM))
        x = np.maximum(x, 0.0)
        out[t] = (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    return out


class LazyDescriptors(Mapping):
    """sequence -> type -> array, generated on access, the last sequence cached."""

    def __init__(self, seed: int = 0):
        self.names = sequence_names()
        self.number = {s: k for k, s in enumerate(self.names)}
        self.seed = seed
        self._cache: tuple[str, dict] | None = None

    gen_s = 0.0  # time spent generating the synthetic input (reported, subtracted from compute)

    def __getitem__(self, seq):
        if self._cache is None or self._cache[0] != seq:
            t0 = time.perf_counter()
            self._cache = (seq, make_strips(self.number[seq], self.seed))
            self.gen_s += time.perf_counter() - t0
        return self._cache[1]

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def counts(self) -> dict[str, int]:
        return {f"{s}.{t}": sequence_size(k, self.seed) for k, s in enumerate(self.names) for t in TYPES}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def part_matching(work: Path) -> dict:
    from descbench.patches import hbench as hb

    desc = LazyDescriptors()
    counts = desc.counts()
    tasks = hb.matching_tasks(desc.names, split="test")
    fig = {"pairs": sum(len(p) for p in tasks.values()), "compute_s": 0.0, "write_s": 0.0, "read_s": 0.0}
    read = {}
    for name, pairs in tasks.items():
        res, t = timed(hb.compute_matching_results, pairs, desc)
        fig["compute_s"] += t
        path, t = timed(hb.write_matching_results, work / f"{name}.results", res)
        fig["write_s"] += t
        read[name], t = timed(hb.read_matching_results, path, counts, pairs)
        fig["read_s"] += t
    fig["input_generation_s"] = desc.gen_s
    fig["compute_s"] -= desc.gen_s
    ev, fig["evaluate_s"] = timed(hb.evaluate_matching, tasks, read, counts)
    fig["mean_ap"] = {r.task: round(r.mean_ap, 4) for r in ev.per_task.itertuples()}
    fig["results_mb"] = round(sum(p.stat().st_size for p in work.glob("*.results")) / 2**20, 1)
    return fig


def part_retrieval(work: Path) -> dict:
    from descbench.patches import hbench as hb

    desc = LazyDescriptors()
    counts = desc.counts()
    sizes = {s: counts[f"{s}.ref"] for s in desc.names}
    (bench, labels), t_make = timed(hb.make_retrieval_task, desc.names, sizes, 40, 0, "e")
    fig = {"make_s": t_make, "queries": len(bench.queries),
           "pool_patches": sum(counts[s] for s in bench.pool)}
    res, fig["compute_s"] = timed(hb.compute_retrieval_results, bench, desc)
    fig["input_generation_s"] = desc.gen_s
    fig["compute_s"] -= desc.gen_s
    path, fig["write_s"] = timed(hb.write_retrieval_results, work / "test_easy_40s_00.results", res)
    read, fig["read_s"] = timed(hb.read_retrieval_results, path)
    ev, fig["evaluate_s"] = timed(hb.evaluate_retrieval, bench, labels, read, counts)
    fig["patch_map"], fig["image_map"] = round(ev.patch_map, 4), round(ev.image_map, 4)
    return fig


def child(part: str, threads: int) -> dict:
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(threads)
    with threadpool_limits(threads), tempfile.TemporaryDirectory() as tmp:
        # compile (or load from cache) the kernels outside the timings: a tiny warm-up run
        from descbench.patches import hbench as hb

        tiny = {"i_w": {t: np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0, 1]] for t in TYPES}}
        b, _ = hb.make_retrieval_task(["i_w"], {"i_w": 6}, 1, 0, queries_per_sequence=2)
        hb.compute_retrieval_results(b, tiny)
        hb.compute_matching_results([("i_w.ref", "i_w.e1")], tiny)
        t0 = time.perf_counter()
        fig = part_matching(Path(tmp)) if part == "matching" else part_retrieval(Path(tmp))
        fig["wall_s"] = time.perf_counter() - t0
    fig["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in fig.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("all", "matching", "retrieval"), default="all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the figures as JSON")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.part, args.threads)))
        return
    parts = ("matching", "retrieval") if args.part == "all" else (args.part,)
    out = {"threads": args.threads, "load_1min": os.getloadavg()[0]}
    for part in parts:
        proc = subprocess.run([sys.executable, __file__, "--child", "--part", part, "--threads", str(args.threads)],
                              check=True, capture_output=True, text=True)
        out[part] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(part, json.dumps(out[part]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
