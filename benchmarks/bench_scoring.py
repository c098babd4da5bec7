#!/usr/bin/env python
"""Benchmark of keypoint-retrieval scoring (``descbench.metrics.retrieval.score_pair``).

Run as a script, not a test::

    python benchmarks/bench_scoring.py [--n 4000] [--repeats 5] [--threads 2] \
        [--memory-n 20000] [--json PATH]

It builds one synthetic SIFT-like image pair (seeded, ``numpy.random.default_rng(0)``) and
measures, in the same process and with the same thread limits:

* the float32 product ``q @ c.T`` of the two N x 128 descriptor matrices (the product behind
  the pair's distance matrix), best and median of ``--repeats``;
* ``score_pair`` on the full pair with the default ``RetrievalParams`` (gt closest, tie policy
  expected), best and median, and the ratio score_pair / matmul (target <= 1.5);
* a breakdown of score_pair by calling its parts directly with the same inputs: ``project``,
  ``relevance`` (spatial ground truth), ``rank_statistics`` (split into the time inside its
  numba kernel and the rest: set-up and the BLAS screen) and ``kernels.query_scores``;
* the time spent inside each numba kernel during score_pair itself (the kernels of
  ``descbench.metrics.kernels`` are wrapped with timers while it runs; nothing depends on their
  signatures), each kernel re-timed in isolation with the same inputs, and the CPU that idle
  BLAS / OpenMP pool threads burn by spinning after a call (it is taken from the next kernel).

Then a child process (``--child-memory N``, same interpreter) scores one N x N pair
(``--memory-n``, default 20000) and reports its peak RSS, the baseline RSS after imports and
warm-up, and the wall time of that pair (target: peak < 1 GB).

Nothing here modifies the package; ``--json PATH`` writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

IMAGE_SIZE = (1000, 1000)  # (width, height) of both synthetic images
BORDER = 40  # keypoints of image 1 are drawn uniformly in [BORDER, size - BORDER)
INLIER_FRACTION = 0.8  # image-2 keypoints that are a jittered projection of an image-1 keypoint
JITTER_PX = 1.0  # sigma of the Gaussian position jitter of those keypoints
DIM = 128
N_PROTOTYPES = 64  # descriptor clusters
PROTO_SPREAD = 0.5  # within-cluster spread (raw histogram units)
APPEARANCE_NOISE = 0.6  # noise between corresponding descriptors (raw units, Poisson-like)
CHILD_TAG = "BENCH_CHILD_RESULT "
MATMUL_TARGET = 1.5
MEMORY_TARGET_MIB = 1024.0
IDLE_PAUSE_S = 0.3  # longer than OpenBLAS's idle spin (~90 ms here), so pools are asleep after it


# ----------------------------------------------------------------------------- synthetic data


def sift_quantise(raw: np.ndarray) -> np.ndarray:
    """OpenCV-SIFT-like post-processing: clip at 0.2 |h|, scale to L2 norm 512, round to 0..255.

    Returns float32 with integer values (OpenCV SIFT's default descriptor type is CV_32F).
    """
    raw = np.maximum(raw, 0.0)
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    raw = np.minimum(raw, 0.2 * np.where(norm > 0, norm, 1.0))
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    out = np.rint(raw * (512.0 / np.where(norm > 0, norm, 1.0)))
    return np.clip(out, 0, 255).astype(np.float32)


def homography() -> np.ndarray:
    """A mild homography: 4 deg rotation and 2 % zoom about the centre, a shift, a little perspective."""
    w, h = IMAGE_SIZE
    a = np.deg2rad(4.0)
    s = 1.02
    to_origin = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]], dtype=np.float64)
    rot = np.array([[s * np.cos(a), -s * np.sin(a), 0], [s * np.sin(a), s * np.cos(a), 0], [0, 0, 1]])
    back = np.array([[1, 0, w / 2 + 12.0], [0, 1, h / 2 - 8.0], [0, 0, 1]], dtype=np.float64)
    persp = np.array([[1, 0, 0], [0, 1, 0], [2e-5, -1e-5, 1]], dtype=np.float64)
    return back @ rot @ to_origin @ persp


def make_pair(n: int, seed: int = 0) -> dict:
    """N keypoints per image; ~80 % of image 2 = jittered projections of image 1, the rest random."""
    rng = np.random.default_rng(seed)
    w, h = IMAGE_SIZE
    H = homography()
    q_xy = np.column_stack([rng.uniform(BORDER, w - BORDER, n), rng.uniform(BORDER, h - BORDER, n)])

    hom = np.column_stack([q_xy, np.ones(n)]) @ H.T
    proj = hom[:, :2] / hom[:, 2:3]
    inlier = rng.random(n) < INLIER_FRACTION
    t_xy = proj + rng.normal(0.0, JITTER_PX, (n, 2))
    # Outliers, and inliers that would land outside image 2 (a detector cannot find them), are
    # replaced by random positions.
    outside = (t_xy[:, 0] < 0) | (t_xy[:, 0] >= w) | (t_xy[:, 1] < 0) | (t_xy[:, 1] >= h)
    inlier &= ~outside
    n_rand = int((~inlier).sum())
    t_xy[~inlier] = np.column_stack([rng.uniform(0, w, n_rand), rng.uniform(0, h, n_rand)])

    # Gradient-histogram-like raw descriptors: sparse, heavy-tailed, non-negative, and clustered
    # around a few prototype patterns (real SIFT descriptors are far from uniform in 128-D, so
    # near neighbours compete). Corresponding keypoints share the raw histogram plus
    # appearance noise; the levels give mAP ~ 0.5 and hit@1 ~ 0.4 at N = 4000 (less at larger N).
    proto = rng.gamma(0.5, 1.0, (N_PROTOTYPES, DIM))
    raw1 = proto[rng.integers(0, N_PROTOTYPES, n)] + PROTO_SPREAD * rng.gamma(0.5, 1.0, (n, DIM))
    raw2 = proto[rng.integers(0, N_PROTOTYPES, n)] + PROTO_SPREAD * rng.gamma(0.5, 1.0, (n, DIM))
    n_in = int(inlier.sum())
    raw2[inlier] = raw1[inlier] + APPEARANCE_NOISE * rng.normal(0.0, 1.0, (n_in, DIM)) * np.sqrt(raw1[inlier] + 0.05)
    q_desc = sift_quantise(raw1)
    t_desc = sift_quantise(raw2)

    # Detectors do not list corresponding keypoints in the same order.
    perm = rng.permutation(n)
    return {
        "q_xy": q_xy,
        "q_desc": np.ascontiguousarray(q_desc),
        "t_xy": np.ascontiguousarray(t_xy[perm]),
        "t_desc": np.ascontiguousarray(t_desc[perm]),
        "H": H,
        "size": IMAGE_SIZE,
        "n_inliers": int(inlier.sum()),
    }


# ----------------------------------------------------------------------------- machine / threads


def limit_threads(threads: int):
    """Limit numba and BLAS/OpenMP pools to ``threads``; returns (numba threads, limiter)."""
    import numba
    from threadpoolctl import threadpool_limits

    nb = min(threads, numba.config.NUMBA_NUM_THREADS)
    if nb != threads:
        print(f"warning: numba has only {numba.config.NUMBA_NUM_THREADS} threads; using {nb}", file=sys.stderr)
    numba.set_num_threads(nb)
    limiter = threadpool_limits(limits=threads)  # applied now; kept alive by the caller
    return nb, limiter


def machine_facts() -> dict:
    import numba
    from threadpoolctl import threadpool_info

    cpu_model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    pools = [
        {k: p.get(k) for k in ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer", "architecture")}
        for p in threadpool_info()
    ]
    return {
        "cpu_count": os.cpu_count(),
        "affinity_cpus": affinity,
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threading_layer": _numba_layer(),
        "threadpools": pools,
    }


def _numba_layer() -> str:
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        return "unset"


def warmup() -> float:
    """Load / compile every numba kernel score_pair uses (one small call); returns seconds."""
    from descbench.metrics.retrieval import RetrievalParams, score_pair

    t0 = time.perf_counter()
    d = make_pair(300, seed=1)
    score_pair(d["q_xy"], d["q_desc"], d["t_xy"], d["t_desc"], d["H"], d["size"], RetrievalParams(gt="closest"))
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- timing helpers


def timed(fn, repeats: int) -> dict:
    """Call ``fn`` once untimed, then ``repeats`` times; best and median wall time in ms."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"best_ms": min(times), "median_ms": statistics.median(times), "all_ms": times}


def timed_pair(fa, fb, repeats: int) -> tuple[dict, dict]:
    """Like :func:`timed` for two functions, alternating a, b, a, b, ... after one warm-up each."""
    fa()
    fb()
    ta, tb = [], []
    for _ in range(repeats):
        for fn, ts in ((fa, ta), (fb, tb)):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return ({"best_ms": min(ta), "median_ms": statistics.median(ta), "all_ms": ta},
            {"best_ms": min(tb), "median_ms": statistics.median(tb), "all_ms": tb})


class KernelTimer:
    """Times every numba kernel of ``descbench.metrics.kernels`` while active (a context manager).

    Each dispatcher is replaced, as a module attribute (which is how ``retrieval`` calls them),
    by a wrapper that records its wall time and keeps the arguments of its calls, so a kernel can
    be re-timed later with exactly the inputs score_pair gave it. Nothing depends on the kernels'
    signatures, so this keeps working when their internals change. The originals are restored
    on exit.
    """

    def __init__(self, keep_args: bool = False):
        self.keep_args = keep_args
        self.calls: list[tuple[str, float, tuple]] = []  # (name, ms, args or ())
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self):
        from numba.core.registry import CPUDispatcher

        from descbench.metrics import kernels, retrieval

        for mod in (kernels, retrieval):
            for name, obj in list(vars(mod).items()):
                if isinstance(obj, CPUDispatcher) and getattr(obj, "__module__", "") == kernels.__name__:
                    self._saved.append((mod, name, obj))
                    setattr(mod, name, self._wrap(name, obj))
        return self

    def _wrap(self, name, fn):
        def wrapper(*args):
            t0 = time.perf_counter()
            out = fn(*args)
            self.calls.append((name, (time.perf_counter() - t0) * 1e3, args if self.keep_args else ()))
            return out

        return wrapper

    def __exit__(self, *exc):
        for mod, name, obj in reversed(self._saved):
            setattr(mod, name, obj)
        self._saved.clear()
        return False

    def totals(self) -> dict:
        """Per kernel: total ms and number of calls."""
        out: dict[str, dict] = {}
        for name, ms, _ in self.calls:
            d = out.setdefault(name, {"ms": 0.0, "calls": 0})
            d["ms"] += ms
            d["calls"] += 1
        return out


def _summary(values: list[float]) -> dict:
    return {"best_ms": min(values), "median_ms": statistics.median(values), "all_ms": values}


def instrumented(fn, repeats: int) -> tuple[dict, dict]:
    """Run ``fn`` (once untimed, then ``repeats`` times) under a KernelTimer.

    Returns (total time summary, per-kernel summaries of the time spent inside each kernel per
    run, plus ``outside kernels`` = total - all kernels: numpy and BLAS work, Python glue).
    """
    fn()
    totals: list[float] = []
    per: dict[str, list[float]] = {}  # insertion order = order of first call
    calls: dict[str, int] = {}
    for _ in range(repeats):
        with KernelTimer() as kt:
            t0 = time.perf_counter()
            fn()
            totals.append((time.perf_counter() - t0) * 1e3)
        kt_tot = kt.totals()
        for name in [k for k in per if k != "outside kernels"] + [k for k in kt_tot if k not in per]:
            per.setdefault(name, []).append(kt_tot.get(name, {"ms": 0.0})["ms"])
            calls[name] = kt_tot.get(name, {"calls": 0})["calls"]
        per.setdefault("outside kernels", []).append(totals[-1] - sum(v["ms"] for v in kt_tot.values()))
    parts = {}
    for name, v in per.items():
        parts[name] = _summary(v)
        if name in calls:
            parts[name]["calls_per_run"] = calls[name]
    return _summary(totals), parts


def kernel_isolated(calls: list[tuple[str, float, tuple]], name: str, repeats: int) -> dict | None:
    """Re-time the recorded calls of kernel ``name`` (same arguments) in isolation: after an idle
    pause longer than the BLAS threads' spin (see :func:`idle_spin_ms`), one untimed call to
    wake numba's threads, then the timed call.

    Compared with the same kernel's time inside score_pair, where it starts right after the BLAS
    screen, the difference is the cost of sharing the cores with BLAS threads that are still
    spinning. The recorded output arrays are overwritten; they belong to a discarded result.
    """
    from descbench.metrics import kernels

    fn = getattr(kernels, name, None)
    recorded = [args for n, _, args in calls if n == name]
    if fn is None or not recorded:
        return None
    runs = []
    for _ in range(repeats):
        time.sleep(IDLE_PAUSE_S)
        total = 0.0
        for args in recorded:
            fn(*args)
            t0 = time.perf_counter()
            fn(*args)
            total += (time.perf_counter() - t0) * 1e3
        runs.append(total)
    return _summary(runs)


def idle_spin_ms(fn, window_s: float = IDLE_PAUSE_S) -> float:
    """CPU time (ms) this process burns while idle for ``window_s`` right after ``fn()``.

    Thread pools keep their workers spinning for a while after a parallel call; that CPU time
    is taken from whatever runs next (here: numba kernels after the BLAS screen).
    """
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    vals = []
    for _ in range(3):
        time.sleep(window_s)
        fn()
        c0 = cpu()
        time.sleep(window_s)
        vals.append((cpu() - c0) * 1e3)
    return statistics.median(vals)


# ----------------------------------------------------------------------------- memory child


def _rss_now_mib() -> dict:
    """Current RSS and high-water mark from /proc (Linux), plus ru_maxrss, all in MiB."""
    out = {"ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key = "vmrss_mib" if line.startswith("VmRSS") else "vmhwm_mib"
                    out[key] = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return out


def child_memory(n: int, threads: int) -> None:
    """Score one N x N pair and print peak RSS figures as one JSON line on stdout."""
    from descbench.metrics.retrieval import RetrievalParams, pair_statistics, score_pair

    nb, _limiter = limit_threads(threads)
    after_imports = _rss_now_mib()
    warmup()
    after_warmup = _rss_now_mib()
    d = make_pair(n, seed=0)
    after_data = _rss_now_mib()
    t0 = time.perf_counter()
    res = score_pair(d["q_xy"], d["q_desc"], d["t_xy"], d["t_desc"], d["H"], d["size"], RetrievalParams(gt="closest"))
    wall = time.perf_counter() - t0
    peak = _rss_now_mib()
    stats = pair_statistics(res, n)
    del res
    # For context only, after the peak was recorded: the float32 product of all N x N in the
    # blocks of rows rank_statistics uses (chunk_mb), each block's output discarded.
    q, c = d["q_desc"], d["t_desc"]
    block = max(1, int(RetrievalParams(gt="closest").chunk_mb * 2**20 // (4 * n)))
    t1 = time.perf_counter()
    for s in range(0, n, block):
        _ = q[s : s + block] @ c.T
    blocked = time.perf_counter() - t1
    out = {
        "n": n,
        "threads": threads,
        "numba_threads": nb,
        "after_imports": after_imports,
        "after_warmup": after_warmup,
        "after_data": after_data,
        "peak": peak,
        "score_pair_s": wall,
        "matmul_blocked_s": blocked,
        "n_relevant_queries": stats["n_relevant_queries"],
        "mAP": stats["sum_ap"] / max(1, stats["n_relevant_queries"]),
    }
    print(CHILD_TAG + json.dumps(out), flush=True)


def run_memory_child(n: int, threads: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child-memory", str(n), "--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed ({proc.returncode}):\n{proc.stderr}")
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            return json.loads(line[len(CHILD_TAG):])
    raise RuntimeError(f"memory child printed no result:\n{proc.stdout}\n{proc.stderr}")


# ----------------------------------------------------------------------------- main benchmark


def source_fingerprint() -> dict:
    """Which package code was measured: git HEAD (read-only query) and hashes of the scoring sources."""
    import hashlib

    from descbench.metrics import kernels, retrieval

    out = {"package_dir": os.path.dirname(os.path.dirname(retrieval.__file__))}
    for mod in (retrieval, kernels):
        with open(mod.__file__, "rb") as fh:
            out[os.path.basename(mod.__file__) + "_sha256"] = hashlib.sha256(fh.read()).hexdigest()[:16]
    try:
        head = subprocess.run(["git", "-C", out["package_dir"], "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        out["git_head"] = head.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["git_head"] = None
    return out


def bench(n: int, repeats: int, threads: int) -> dict:
    from descbench.metrics import kernels
    from descbench.metrics.retrieval import RetrievalParams, pair_statistics, project, rank_statistics, relevance, score_pair

    params = RetrievalParams(gt="closest")
    d = make_pair(n, seed=0)
    q_xy, q_desc, t_xy, t_desc, H, size = d["q_xy"], d["q_desc"], d["t_xy"], d["t_desc"], d["H"], d["size"]
    run_pair = lambda: score_pair(q_xy, q_desc, t_xy, t_desc, H, size, params)

    # (a) the float32 product behind the pair's distance matrix and (b) the whole pair, timed
    # alternately so that a change of background load affects both alike.
    matmul, score = timed_pair(lambda: q_desc @ t_desc.T, run_pair, repeats)
    stats = pair_statistics(run_pair(), n)

    # Where score_pair's own time goes: time inside each numba kernel during score_pair calls.
    _, inside = instrumented(run_pair, repeats)
    # One more call that keeps the kernels' arguments, to call them again with the same inputs.
    with KernelTimer(keep_args=True) as kt:
        run_pair()
    recorded = kt.calls

    # Breakdown by direct calls of score_pair's parts with the inputs score_pair gives them.
    t_xy64 = np.asarray(t_xy, dtype=np.float64).reshape(-1, 2)
    proj, inside_img = project(H, q_xy, *size)
    _, _, indptr, indices = relevance(proj, inside_img, t_xy64, params.tau_px, params.gt)
    direct = {
        "project": timed(lambda: project(H, q_xy, *size), repeats),
        "relevance": timed(lambda: relevance(proj, inside_img, t_xy64, params.tau_px, params.gt), repeats),
    }
    rank_total, rank_parts = instrumented(lambda: rank_statistics(q_desc, t_desc, indptr, indices, params.chunk_mb), repeats)
    direct["rank_statistics"] = rank_total
    qs_args = [args for name, _, args in recorded if name == "query_scores"]
    sn_args = [args for name, _, args in recorded if name == "spatial_nearest"]
    if qs_args:
        direct["query_scores"] = timed(lambda: kernels.query_scores(*qs_args[-1]), repeats)

    screened_rows = int((np.diff(indptr) > 0).sum())
    rows_all = np.flatnonzero(np.diff(indptr) > 0)
    extra = {
        # the product restricted to the screened queries (those with a relevant item), one call
        "screen_rows_matmul": timed(lambda: q_desc[rows_all] @ t_desc.T, repeats),
        "rank_counts_l2_isolated": kernel_isolated(recorded, "rank_counts_l2", repeats),
        "spatial_nearest_isolated": kernel_isolated(recorded, "spatial_nearest", repeats),
        # CPU burnt by spinning pool threads during 0.3 s of idleness after one call
        "idle_spin_after_blas_ms": idle_spin_ms(lambda: q_desc @ t_desc.T),
        "idle_spin_after_numba_ms": (idle_spin_ms(lambda: kernels.spatial_nearest(*sn_args[-1])) if sn_args else None),
    }
    del recorded, kt, qs_args, sn_args
    rc = rank_parts.get("rank_counts_l2")
    ns = {
        # cost per (query, candidate) pair and per thread of the two O(Q N) kernels
        "rank_counts_l2": rc["best_ms"] * 1e6 * threads / max(1, screened_rows * n) if rc else None,
        "relevance": direct["relevance"]["best_ms"] * 1e6 * threads / max(1, n * n),
    }
    return {
        "n": n,
        "repeats": repeats,
        "params": {"tau_px": params.tau_px, "gt": params.gt, "tie_policy": params.tie_policy, "chunk_mb": params.chunk_mb},
        "pair": {
            "n_inlier_keypoints": d["n_inliers"],
            "n_relevant_queries": stats["n_relevant_queries"],
            "n_outside": stats["n_outside"],
            "mAP": stats["sum_ap"] / max(1, stats["n_relevant_queries"]),
            "hit_at_1": stats["sum_hit_at_1"] / max(1, stats["n_relevant_queries"]),
        },
        "matmul": matmul,
        "score_pair": score,
        "ratio_best": score["best_ms"] / matmul["best_ms"],
        "ratio_median": score["median_ms"] / matmul["median_ms"],
        "breakdown": direct,
        "score_pair_kernels": inside,
        "rank_statistics_parts": rank_parts,
        "screened_rows": screened_rows,
        "extra": extra,
        "ns_per_pair_thread": ns,
    }


def print_report(out: dict) -> None:
    m = out["machine"]
    b = out["timing"]
    src = out.get("source", {})
    print("descbench scoring benchmark")
    print(f"  machine : {m['cpu_count']} cores (affinity {m['affinity_cpus']}), {m['cpu_model']}; {m['platform']}")
    print(f"  versions: python {m['python']}, numpy {m['numpy']}, numba {m['numba']} (threading layer {m['numba_threading_layer']})")
    for p in m["threadpools"]:
        print(f"  pool    : {p['user_api']}/{p['internal_api']} {p['version']} ({p['prefix']}, {p['architecture']}), {p['num_threads']} threads")
    print(f"  code    : {src.get('package_dir')} (git HEAD {src.get('git_head')}; retrieval.py {src.get('retrieval.py_sha256')}, "
          f"kernels.py {src.get('kernels.py_sha256')})")
    print(f"  threads : {out['threads']} (numba {out['numba_threads']}); numba warm-up {out['warmup_s']:.2f} s")
    bg = out.get("background_load_timing")
    if bg:
        warn = "  <- other processes shared the cores: figures are pessimistic" if bg["other_cores"] > 0.2 else ""
        print(f"  load    : during the timings this process used {bg['own_cores']:.2f} cores, other processes "
              f"{bg['other_cores']:.2f} cores{warn}")

    pr = b["pair"]
    print(f"\npair N = {b['n']} x {b['n']} (128-D SIFT-like float32), repeats = {b['repeats']}, params = {b['params']}")
    print(f"  relevant queries {pr['n_relevant_queries']}, outside {pr['n_outside']}, mAP {pr['mAP']:.3f}, hit@1 {pr['hit_at_1']:.3f}")
    row = "  {:<44s} {:>9.1f} {:>9.1f}"
    print("  {:<44s} {:>9s} {:>9s}".format("", "best ms", "median ms"))
    print(row.format("(a) float32 q @ c.T", b["matmul"]["best_ms"], b["matmul"]["median_ms"]))
    print(row.format("(b) score_pair", b["score_pair"]["best_ms"], b["score_pair"]["median_ms"]))
    verdict = "OK" if b["ratio_best"] <= MATMUL_TARGET else "ABOVE TARGET"
    print(f"  ratio score_pair / matmul: {b['ratio_best']:.2f} (best), {b['ratio_median']:.2f} (median); "
          f"target <= {MATMUL_TARGET} -> {verdict}")

    print("  breakdown, parts called directly with score_pair's inputs:")
    ns = b["ns_per_pair_thread"]
    for k, v in b["breakdown"].items():
        note = f"   {ns['relevance']:.2f} ns per point pair per thread" if k == "relevance" else ""
        print(row.format("  " + k, v["best_ms"], v["median_ms"]) + note)
    print(f"  rank_statistics split ({b['screened_rows']} screened queries):")
    for k, v in b["rank_statistics_parts"].items():
        label = "    " + (k + (f" x{v['calls_per_run']}" if v.get("calls_per_run", 1) > 1 else "") if k != "outside kernels"
                         else "outside kernels (set-up + BLAS screen)")
        note = f"   {ns['rank_counts_l2']:.2f} ns per (query, candidate) per thread" if k == "rank_counts_l2" and ns["rank_counts_l2"] else ""
        print(row.format(label, v["best_ms"], v["median_ms"]) + note)
    ex = b["extra"]
    if ex.get("rank_counts_l2_isolated"):
        v = ex["rank_counts_l2_isolated"]
        print(row.format("    [ref] rank_counts_l2 in isolation", v["best_ms"], v["median_ms"]) + "   (same inputs, no BLAS threads spinning)")
    v = ex["screen_rows_matmul"]
    print(row.format("    [ref] q[screened] @ c.T alone", v["best_ms"], v["median_ms"]))
    print("  time inside each kernel during score_pair:")
    for k, v in b["score_pair_kernels"].items():
        label = "    " + (k + (f" x{v['calls_per_run']}" if v.get("calls_per_run", 1) > 1 else "") if k != "outside kernels"
                         else "outside kernels (numpy, BLAS, glue)")
        iso = ex.get(f"{k}_isolated")
        note = f"   (in isolation: {iso['best_ms']:.1f} / {iso['median_ms']:.1f})" if iso else ""
        print(row.format(label, v["best_ms"], v["median_ms"]) + note)
    spin_numba = ex.get("idle_spin_after_numba_ms")
    print(f"  idle-thread spin: after one BLAS product this process burns {ex['idle_spin_after_blas_ms']:.0f} ms of CPU in the "
          f"next {IDLE_PAUSE_S * 1e3:.0f} ms idle" + (f"; after a numba kernel {spin_numba:.0f} ms" if spin_numba is not None else ""))

    mem = out.get("memory")
    if mem:
        pk = mem["peak"]
        base = mem["after_warmup"]
        peak_mib = pk.get("vmhwm_mib", pk["ru_maxrss_mib"])
        verdict = "OK" if peak_mib < MEMORY_TARGET_MIB else "ABOVE TARGET"
        print(f"\nmemory child: one pair N = {mem['n']} x {mem['n']}, threads {mem['threads']}")
        print(f"  RSS after imports {mem['after_imports'].get('vmrss_mib', float('nan')):.0f} MiB; "
              f"after warm-up {base.get('vmrss_mib', float('nan')):.0f} MiB (ru_maxrss {base['ru_maxrss_mib']:.0f}); "
              f"after data {mem['after_data'].get('vmrss_mib', float('nan')):.0f} MiB")
        base_mib = base.get("vmrss_mib", base["ru_maxrss_mib"])
        data_mib = mem["after_data"].get("vmrss_mib", mem["after_data"]["ru_maxrss_mib"])
        print(f"  peak RSS: ru_maxrss {pk['ru_maxrss_mib']:.0f} MiB, VmHWM {pk.get('vmhwm_mib', float('nan')):.0f} MiB "
              f"(+{peak_mib - base_mib:.0f} MiB over the warm baseline: +{data_mib - base_mib:.0f} building the pair, "
              f"+{peak_mib - data_mib:.0f} scoring it); target < {MEMORY_TARGET_MIB:.0f} MiB -> {verdict}")
        print(f"  score_pair wall time {mem['score_pair_s']:.2f} s (float32 product of all N x N in chunk_mb blocks: "
              f"{mem['matmul_blocked_s']:.2f} s); relevant queries {mem['n_relevant_queries']}, mAP {mem['mAP']:.3f}")


def _cpu_snapshot():
    """(wall s, busy CPU s of the whole machine from /proc/stat or None, own CPU s incl. children)."""
    busy = None
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        busy = (sum(f[:8]) - f[3] - f[4]) / tick  # all but idle and iowait (guest is inside user)
    except (OSError, ValueError, IndexError):
        pass
    own = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        own += r.ru_utime + r.ru_stime
    return time.perf_counter(), busy, own


def background_load(before, after) -> dict | None:
    """CPU used by other processes between two snapshots, in cores (0 = machine was ours)."""
    (w0, b0, o0), (w1, b1, o1) = before, after
    if b0 is None or b1 is None or w1 <= w0:
        return None
    return {"wall_s": w1 - w0, "machine_busy_cores": (b1 - b0) / (w1 - w0),
            "own_cores": (o1 - o0) / (w1 - w0), "other_cores": max(0.0, (b1 - b0) - (o1 - o0)) / (w1 - w0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4000, help="keypoints per image for the timing pair (default 4000)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repetitions (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="numba and BLAS threads (default 2)")
    ap.add_argument("--memory-n", type=int, default=20000, help="keypoints per image for the memory child; 0 skips it (default 20000)")
    ap.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    ap.add_argument("--child-memory", type=int, metavar="N", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child_memory is not None:
        child_memory(args.child_memory, args.threads)
        return 0

    nb, limiter = limit_threads(args.threads)
    warm = warmup()
    out = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "threads": args.threads,
        "numba_threads": nb,
        "warmup_s": warm,
        "machine": machine_facts(),
        "source": source_fingerprint(),
        "targets": {"ratio_max": MATMUL_TARGET, "peak_rss_max_mib": MEMORY_TARGET_MIB},
    }
    snap = _cpu_snapshot()
    out["timing"] = bench(args.n, args.repeats, args.threads)
    out["background_load_timing"] = background_load(snap, _cpu_snapshot())
    if args.memory_n > 0:
        out["memory"] = run_memory_child(args.memory_n, args.threads)
    del limiter
    print_report(out)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
