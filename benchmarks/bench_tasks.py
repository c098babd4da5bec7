#!/usr/bin/env python
"""Benchmark of keypoint verification + keypoint retrieval with distractors
(``descbench.metrics.bojanic.score_scene_tasks``) and of the true mAP (``retrieval.score_pair``).

Run as a script, not a test::

    python benchmarks/bench_tasks.py            # full measurements (~12 min on 2 cores)
    python benchmarks/bench_tasks.py --quick    # smoke test, < 1 min
    python benchmarks/bench_tasks.py --parts 1,3 --json out.json

Every configuration runs in a fresh child process (same interpreter, ``--child SPEC``) that
limits numba and BLAS to ``--threads`` (default 2; ``descbench.jobs.common.limit_threads``), warms the
numba kernels up on a small scene (not timed), builds its synthetic scenes in memory, times the
scoring and reports the peak RSS (``VmHWM``) of the whole child and of the scoring alone (the
high-water mark is reset through ``/proc/self/clear_refs`` once the data exist). Children get
``OPENBLAS_THREAD_TIMEOUT=4`` like ``python -m descbench`` (``--openblas-thread-timeout``).
Before each child the parent waits (``--quiet-wait``, default 120 s) until the machine is idle,
and reruns a configuration (``--retries``, default 1) if other processes used more than
``--max-other`` cores during its timed part; every figure is printed with uptime's load average
just before the child and the cores other processes used during the measurement (/proc/stat
minus the child's own CPU time; the load average also counts this benchmark's own threads).

1. **Reference shape** (the C++ reference needs ~5 min and 18.5 GB per descriptor for it):
   9 scenes (4 i_, 5 v_) x 6 images, keypoints per image uniform in 1,100..1,500 (seeded).
   Per descriptor: the true mAP (``score_pair`` for the 5 pairs (1,k) of every scene) and
   keypoint verification + retrieval (``score_scene_tasks`` per scene with the distractors of
   ``draw_distractors(scene, scenes, 10, 20, seed=0)``: with 9 scenes only the 8 others exist,
   so 8 distractor scenes x 20 keypoints are used). Target <= 5 s, peak RSS < 1 GB.
2. **Full HPatches scale**: 116 scenes (57 i_, 59 v_), keypoints per image uniform in
   2,000..8,000 (``--full-counts``) and, unless ``--skip-worst``, every image at 8,000.
   ``score_scene_tasks`` for every scene with 10 distractor scenes x 20 keypoints. Scenes are
   generated on demand from their seeds: a first pass generates the drawn distractor images and
   keeps only the drawn rows; the second pass regenerates each scene, scores it and drops it.
   Target < 2 min on 2 cores, peak RSS < 2 GB.
3. **Scaling study**: one v_ scene with every image at N keypoints, N in 1k, 2k, 4k, 8k (10 x 20
   distractors), and distractor counts 0, 200, 2,000, 20,000 (0, 10, 100, 1000 segments of 20
   keypoints) at N = 1,300 and 4,000. Breakdown: the time inside ``segment_statistics`` split
   into ``prepare_l2_screen``, the numba kernel ``segment_stats_l2`` and the rest (the blocked
   float32 screen ``qaug[rows] @ caug.T`` and block copies); the same blocked product timed
   alone; and the rest of ``score_scene_tasks`` (ground truth, query scores, verification list
   and its APs). The wrappers that time these parts are module attributes replaced while the
   child runs (nothing depends on their signatures; missing ones are skipped).

Synthetic data (seeded, ``numpy.random.default_rng([seed, scene, stream])``): SIFT-like 128-D
float32 descriptors drawn around 64 shared prototypes, clipped at 0.2 |h|, L2-normalised to 512
and rounded to integers 0..255 like OpenCV (so exact distance ties occur); image-k keypoints are
re-detections of image-1 keypoints (projected by a random homography, near-identity for i_,
rotation/zoom/perspective growing with k for v_, with pixel jitter) whose descriptors are the
image-1 histogram plus appearance noise, and fresh random keypoints. About 60-70 % of the
queries of a pair have a ground-truth keypoint within 3 px at ~1,300 keypoints per image.

Nothing here modifies the package; ``--json PATH`` writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

DIM = 128
N_PROTOTYPES = 64
PROTO_SPREAD = 0.5
BORDER = 16
CHILD_TAG = "BENCH_TASKS_RESULT "
DISTRACTOR_SCENES = 10
DISTRACTORS_PER_SCENE = 20
SCENE_NAMES_WIDTH = 3
TARGETS = {
    1: {"time_s": 5.0, "peak_mib": 1024.0},
    2: {"time_s": 120.0, "peak_mib": 2048.0},
}

# Geometry / appearance of the synthetic scenes, per kind and target image k = 2..6.
REPEATABILITY = {"i": lambda k: 0.76 - 0.03 * (k - 2), "v": lambda k: 0.80 - 0.06 * (k - 2)}
JITTER_PX = {"i": lambda k: 0.9, "v": lambda k: 0.9 + 0.25 * (k - 2)}
APPEARANCE_NOISE = {"i": lambda k: 0.6 + 0.08 * (k - 2), "v": lambda k: 0.6 + 0.10 * (k - 2)}


# ----------------------------------------------------------------------------- synthetic data


def sift_quantise(raw: np.ndarray) -> np.ndarray:
    """OpenCV-SIFT-like post-processing: clip at 0.2 |h|, scale to L2 norm 512, round to 0..255."""
    raw = np.maximum(raw, 0.0)
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    raw = np.minimum(raw, 0.2 * np.where(norm > 0, norm, 1.0))
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    out = np.rint(raw * (512.0 / np.where(norm > 0, norm, 1.0)))
    return np.clip(out, 0, 255).astype(np.float32)


def _half_chi2(rng: np.random.Generator, shape) -> np.ndarray:
    """Gamma(shape 1/2, scale 1) samples as Z^2 / 2 (same law as rng.gamma(0.5), ~4x faster)."""
    z = rng.standard_normal(shape)
    z *= z
    z *= 0.5
    return z


def prototypes(seed: int) -> np.ndarray:
    """Raw-histogram prototypes shared by every scene (distractors compete with real matches)."""
    return _half_chi2(np.random.default_rng([seed, 999_999]), (N_PROTOTYPES, DIM))


def scene_names(n_i: int, n_v: int) -> list[str]:
    return [f"i_{j:03d}" for j in range(n_i)] + [f"v_{j:03d}" for j in range(n_v)]


def scene_spec(name: str, index: int, seed: int, counts) -> dict:
    """Image size and per-image keypoint counts of a scene (cheap; no descriptors).

    ``counts``: an int (every image), or (lo, hi) for counts uniform in lo..hi inclusive.
    """
    rng = np.random.default_rng([seed, index, 0])
    w = int(rng.integers(700, 1101))
    h = int(rng.integers(500, 851))
    if isinstance(counts, int):
        n = {k: counts for k in range(1, 7)}
    else:
        lo, hi = counts
        n = {k: int(v) for k, v in zip(range(1, 7), rng.integers(lo, hi + 1, 6))}
    return {"name": name, "index": index, "kind": name[0], "seed": seed, "size": (w, h), "counts": n}


def homography(kind: str, k: int, size, rng: np.random.Generator) -> np.ndarray:
    """H_1_k: near-identity for i_ scenes; v_ scenes rotate, zoom and tilt more as k grows."""
    w, h = size
    if kind == "i":
        ang = np.deg2rad(rng.normal(0.0, 0.3))
        scale = 1.0 + rng.normal(0.0, 0.005)
        shift = rng.normal(0.0, 2.0, 2)
        persp = rng.normal(0.0, 2e-6, 2)
    else:
        s = (k - 1) / 5.0
        ang = np.deg2rad(rng.uniform(-25.0, 25.0) * s)
        scale = float(np.exp(rng.uniform(-0.35, 0.35) * s))
        shift = rng.normal(0.0, 20.0 * s, 2)
        persp = rng.normal(0.0, 2.5e-4 * s, 2) / max(w, h) * 1000.0
    to_origin = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]], dtype=np.float64)
    rot = np.array([[scale * np.cos(ang), -scale * np.sin(ang), 0], [scale * np.sin(ang), scale * np.cos(ang), 0], [0, 0, 1]])
    back = np.array([[1, 0, w / 2 + shift[0]], [0, 1, h / 2 + shift[1]], [0, 0, 1]], dtype=np.float64)
    tilt = np.array([[1, 0, 0], [0, 1, 0], [persp[0], persp[1], 1]], dtype=np.float64)
    return back @ rot @ tilt @ to_origin


def _project(H, xy):
    p = np.column_stack([xy, np.ones(len(xy))]) @ H.T
    return p[:, :2] / p[:, 2:3], p[:, 2] > 0


def make_scene(spec: dict, proto: np.ndarray, images=(1, 2, 3, 4, 5, 6)) -> dict:
    """Keypoints (float64 [n, 2]), descriptors (float32 [n, 128]) and H_1_k of one scene.

    Deterministic in ``spec``; the geometry is always computed (cheap), descriptors only for
    ``images`` (image k > 1 needs image 1's raw histograms, which are always drawn).
    """
    seed, idx, kind = spec["seed"], spec["index"], spec["kind"]
    w, h = spec["size"]
    counts = spec["counts"]
    geo = np.random.default_rng([seed, idx, 1])
    n1 = counts[1]
    xy1 = np.column_stack([geo.uniform(BORDER, w - BORDER, n1), geo.uniform(BORDER, h - BORDER, n1)])
    drng = np.random.default_rng([seed, idx, 2])
    raw1 = proto[drng.integers(0, N_PROTOTYPES, n1)] + PROTO_SPREAD * _half_chi2(drng, (n1, DIM))
    out = {"xy": {1: xy1}, "desc": {}, "H": {}, "size": (w, h), "spec": spec}
    if 1 in images:
        out["desc"][1] = sift_quantise(raw1)
    for k in range(2, 7):
        nk = counts[k]
        H = homography(kind, k, (w, h), geo)
        proj, front = _project(H, xy1)
        pos = proj + geo.normal(0.0, JITTER_PX[kind](k), proj.shape)
        ok = front & (pos[:, 0] >= 0) & (pos[:, 0] < w) & (pos[:, 1] >= 0) & (pos[:, 1] < h)
        det = ok & (geo.random(n1) < REPEATABILITY[kind](k))
        src = np.flatnonzero(det)
        if src.shape[0] > nk:
            src = np.sort(geo.choice(src, nk, replace=False))
        m = src.shape[0]
        fresh = np.column_stack([geo.uniform(0, w, nk - m), geo.uniform(0, h, nk - m)])
        perm = geo.permutation(nk)
        out["xy"][k] = np.ascontiguousarray(np.concatenate([pos[src], fresh])[perm])
        out["H"][k] = H
        if k in images:
            krng = np.random.default_rng([seed, idx, 2 + k])
            raw = np.empty((nk, DIM))
            base = raw1[src]
            raw[:m] = base + APPEARANCE_NOISE[kind](k) * krng.standard_normal((m, DIM)) * np.sqrt(base + 0.05)
            raw[m:] = proto[krng.integers(0, N_PROTOTYPES, nk - m)] + PROTO_SPREAD * _half_chi2(krng, (nk - m, DIM))
            out["desc"][k] = np.ascontiguousarray(sift_quantise(raw)[perm])
    return out


# ----------------------------------------------------------------------------- machine / threads


def limit_threads(threads: int) -> int:
    """``descbench.jobs.common.limit_threads`` (numba, BLAS, OpenCV); a local equivalent if it cannot be imported."""
    import numba

    try:
        from descbench.jobs.common import limit_threads as pkg_limit

        pkg_limit(threads, ("numba", "opencv"))
    except Exception as exc:  # noqa: BLE001 - the package's job module is optional here
        print(f"note: descbench.jobs.common.limit_threads unavailable ({exc!r}); using numba + threadpoolctl", file=sys.stderr)
        from threadpoolctl import threadpool_limits

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        threadpool_limits(threads)
    return numba.get_num_threads()


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
    mem_gib = None
    try:
        with open("/proc/meminfo") as fh:
            mem_gib = int(fh.readline().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    try:
        layer = numba.threading_layer()
    except ValueError:
        layer = "unset"
    pools = [{k: p.get(k) for k in ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer", "architecture")}
             for p in threadpool_info()]
    return {"cpu_count": os.cpu_count(), "affinity_cpus": len(os.sched_getaffinity(0)), "cpu_model": cpu_model,
            "mem_gib": mem_gib, "platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__, "numba_threading_layer": layer, "threadpools": pools}


def source_fingerprint() -> dict:
    """git HEAD (read-only) and short SHA-256 of the measured sources (others edit them concurrently)."""
    from descbench.metrics import bojanic, distractors, kernels, retrieval

    out = {}
    for mod in (bojanic, retrieval, kernels, distractors):
        with open(mod.__file__, "rb") as fh:
            out[os.path.basename(mod.__file__)] = hashlib.sha256(fh.read()).hexdigest()[:8]
    try:
        head = subprocess.run(["git", "-C", os.path.dirname(retrieval.__file__), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        out["git_head"] = head.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["git_head"] = None
    return out


def _mem() -> dict:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out["rss_mib" if line.startswith("VmRSS") else "hwm_mib"] = int(line.split()[1]) / 1024.0
    return out


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class LoadMeter:
    """CPU used by other processes (cores) over a window, from /proc/stat and this process's rusage."""

    def __init__(self):
        self.load_start = os.getloadavg()
        self.t0, self.busy0, self.own0 = self._snap()

    @staticmethod
    def _snap():
        busy = None
        try:
            with open("/proc/stat") as fh:
                f = [int(x) for x in fh.readline().split()[1:]]
            busy = (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
        r = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter(), busy, r.ru_utime + r.ru_stime

    def done(self) -> dict:
        t1, busy1, own1 = self._snap()
        wall = t1 - self.t0
        out = {"loadavg_start": self.load_start, "loadavg_end": os.getloadavg(), "wall_s": wall,
               "own_cores": (own1 - self.own0) / wall if wall > 0 else None}
        if self.busy0 is not None and busy1 is not None and wall > 0:
            out["other_cores"] = max(0.0, (busy1 - self.busy0) - (own1 - self.own0)) / wall
        return out


class PartTimer:
    """Wall time inside selected package functions while active (they are module attributes).

    Wraps ``bojanic.{_positive_csr, segment_statistics, prepare_l2_screen, verification_ap}`` and
    ``kernels.{segment_stats_l2, query_scores, within_row_counts}``; any that does not exist is
    skipped, and nested parts are simply timed too (segment_statistics contains the kernel).
    """

    NAMES = (("bojanic", "_positive_csr"), ("bojanic", "segment_statistics"), ("bojanic", "prepare_l2_screen"),
             ("kernels", "segment_stats_l2"), ("kernels", "query_scores"), ("kernels", "within_row_counts"),
             ("bojanic", "verification_ap"))

    def __init__(self):
        self.ms: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._saved = []

    def __enter__(self):
        from descbench.metrics import bojanic, kernels

        mods = {"bojanic": bojanic, "kernels": kernels}
        for modname, name in self.NAMES:
            mod = mods[modname]
            fn = getattr(mod, name, None)
            if fn is None:
                continue
            self._saved.append((mod, name, fn))
            setattr(mod, name, self._wrap(name, fn))
        return self

    def _wrap(self, name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3
                self.calls[name] = self.calls.get(name, 0) + 1

        return wrapper

    def __exit__(self, *exc):
        for mod, name, fn in reversed(self._saved):
            setattr(mod, name, fn)
        self._saved.clear()
        return False


def breakdown(total_ms: float, pt: PartTimer) -> dict:
    """Split a score_scene_tasks total into disjoint parts from PartTimer figures (ms)."""
    g = pt.ms.get
    seg = g("segment_statistics", 0.0)
    kern = g("segment_stats_l2", 0.0)
    prep = g("prepare_l2_screen", 0.0)
    out = {
        "segment_statistics": seg,
        "kernel_segment_stats_l2": kern,
        "prepare_l2_screen": prep,
        "screen_blocks_and_glue": seg - kern - prep,  # the BLAS products qaug[rows] @ caug.T + copies
        "positive_csr": g("_positive_csr", 0.0),
        "query_scores+within_row_counts": g("query_scores", 0.0) + g("within_row_counts", 0.0),
        "verification_ap": g("verification_ap", 0.0),
    }
    out["other"] = total_ms - seg - out["positive_csr"] - out["query_scores+within_row_counts"] - out["verification_ap"]
    return out


# ----------------------------------------------------------------------------- children


def warmup() -> float:
    """Load / compile the numba kernels with the benchmark's types (small scene, not timed)."""
    from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
    from descbench.metrics.retrieval import RetrievalParams, score_pair

    t0 = time.perf_counter()
    proto = prototypes(12345)
    sc = make_scene(scene_spec("v_900", 900, 12345, 300), proto)
    other = make_scene(scene_spec("i_901", 901, 12345, 300), proto)
    targets = [Target(sc["xy"][k], sc["desc"][k], sc["H"][k], sc["size"]) for k in range(2, 7)]
    dis = [Distractors("i_901", 2, np.arange(20, dtype=np.int64), other["desc"][2][:20])]
    for _ in range(2):
        score_scene_tasks(sc["xy"][1], sc["desc"][1], targets, dis, BojanicParams(gt="closest"))
        score_pair(sc["xy"][1], sc["desc"][1], sc["xy"][2], sc["desc"][2], sc["H"][2], sc["size"], RetrievalParams(gt="closest"))
    return time.perf_counter() - t0


def _targets(sc):
    from descbench.metrics.bojanic import Target

    return [Target(sc["xy"][k], sc["desc"][k], sc["H"][k], sc["size"]) for k in range(2, 7)]


def _scene_quality(res) -> dict:
    st = res.stats
    n_pos = res.r_positives
    return {"n_queries": st["n_queries"], "queries_with_positive": int((n_pos > 0).sum()),
            "sum_positives": int(n_pos.sum()),
            "sum_ap_negative": float(np.nansum(res.r_ap_negative)),
            "verification_ap_step": st.get("verification_ap_step", float("nan")),
            "n_distractors": st["n_distractors"], "n_distractor_scenes": st["n_distractor_scenes"]}


def child_reference(spec: dict) -> dict:
    """Part 1: true mAP + verification/retrieval of 9 scenes held in memory."""
    from descbench.metrics.bojanic import BojanicParams, Distractors, score_scene_tasks
    from descbench.metrics.distractors import draw_distractors
    from descbench.metrics.retrieval import RetrievalParams, score_pair

    seed = spec["seed"]
    names = scene_names(spec["n_i"], spec["n_v"])
    specs = [scene_spec(n, i, seed, tuple(spec["counts"])) for i, n in enumerate(names)]
    proto = prototypes(seed)
    t0 = time.perf_counter()
    scenes = {s["name"]: make_scene(s, proto) for s in specs}
    gen_s = time.perf_counter() - t0
    counts = {s["name"]: s["counts"] for s in specs}
    dis = {}
    for n in names:
        draws = draw_distractors(n, names, DISTRACTOR_SCENES, DISTRACTORS_PER_SCENE, spec["dseed"], counts)
        dis[n] = [Distractors(d.scene, d.image, d.rows, scenes[d.scene]["desc"][d.image][d.rows]) for d in draws]
    targets = {n: _targets(scenes[n]) for n in names}
    after_data = _mem()
    hwm_reset = _reset_hwm()
    rp, bp = RetrievalParams(gt="closest"), BojanicParams(gt="closest")
    runs = []
    quality = None
    meter = LoadMeter()
    for _ in range(spec["repeats"]):
        t_map = t_vr = 0.0
        sum_ap = n_rel = 0
        q = []
        pt = PartTimer()
        for n in names:
            sc = scenes[n]
            t1 = time.perf_counter()
            for k in range(2, 7):
                r = score_pair(sc["xy"][1], sc["desc"][1], sc["xy"][k], sc["desc"][k], sc["H"][k], sc["size"], rp)
                m = r.n_relevant > 0
                sum_ap += float(r.ap[m].sum())
                n_rel += int(m.sum())
            t2 = time.perf_counter()
            with pt:
                res = score_scene_tasks(sc["xy"][1], sc["desc"][1], targets[n], dis[n], bp, where=n)
            t3 = time.perf_counter()
            t_map += t2 - t1
            t_vr += t3 - t2
            q.append(_scene_quality(res))
        runs.append({"true_map_s": t_map, "vr_s": t_vr, "total_s": t_map + t_vr, "parts_ms": breakdown(t_vr * 1e3, pt)})
        quality = {"true_map": sum_ap / max(1, n_rel), "relevant_pairs_fraction": n_rel / (5 * sum(len(s["xy"][1]) for s in scenes.values())),
                   "retrieval_map_negative": sum(x["sum_ap_negative"] for x in q) / max(1, sum(x["queries_with_positive"] for x in q)),
                   "verification_ap_step_mean": float(np.mean([x["verification_ap_step"] for x in q])),
                   "n_distractor_scenes": sorted({x["n_distractor_scenes"] for x in q}),
                   "n_distractors": sorted({x["n_distractors"] for x in q})}
    load = meter.done()
    kp = [c for s in specs for c in s["counts"].values()]
    return {"part": 1, "spec": spec, "generate_s": gen_s, "runs": runs, "quality": quality, "load": load,
            "keypoints": {"min": min(kp), "max": max(kp), "mean": float(np.mean(kp))},
            "mem_after_data": after_data, "mem_end": _mem(), "hwm_reset": hwm_reset}


def child_full(spec: dict) -> dict:
    """Part 2: score_scene_tasks for every scene, scenes generated on demand (two passes)."""
    from descbench.metrics.bojanic import BojanicParams, Distractors, score_scene_tasks
    from descbench.metrics.distractors import draw_distractors

    seed = spec["seed"]
    names = scene_names(spec["n_i"], spec["n_v"])
    cnt = spec["counts"]
    cnt = cnt if isinstance(cnt, int) else tuple(cnt)
    specs = {n: scene_spec(n, i, seed, cnt) for i, n in enumerate(names)}
    counts = {n: s["counts"] for n, s in specs.items()}
    proto = prototypes(seed)
    draws = {n: draw_distractors(n, names, DISTRACTOR_SCENES, DISTRACTORS_PER_SCENE, spec["dseed"], counts) for n in names}
    # pass 1: generate each drawn distractor image once, keep only the drawn rows
    need: dict[str, set] = {}
    for n in names:
        for d in draws[n]:
            need.setdefault(d.scene, set()).add(d.image)
    t0 = time.perf_counter()
    cache = {}
    for other, imgs in need.items():
        sc = make_scene(specs[other], proto, images=tuple(sorted(imgs)))
        for n in names:
            for d in draws[n]:
                if d.scene == other:
                    cache[(n, other)] = np.ascontiguousarray(sc["desc"][d.image][d.rows])
        del sc
    pass1_s = time.perf_counter() - t0
    after_pass1 = _mem()
    hwm_reset = _reset_hwm()
    bp = BojanicParams(gt="closest")
    gen_s = score_s = 0.0
    per_scene = []
    q = []
    pt = PartTimer()
    meter = LoadMeter()
    for n in names:
        t1 = time.perf_counter()
        sc = make_scene(specs[n], proto)
        dis = [Distractors(d.scene, d.image, d.rows, cache[(n, d.scene)]) for d in draws[n]]
        tg = _targets(sc)
        t2 = time.perf_counter()
        with pt:
            res = score_scene_tasks(sc["xy"][1], sc["desc"][1], tg, dis, bp, where=n)
        t3 = time.perf_counter()
        gen_s += t2 - t1
        score_s += t3 - t2
        per_scene.append({"scene": n, "n1": counts[n][1], "n_targets": sum(counts[n][k] for k in range(2, 7)),
                          "n_distractors": int(sum(d.rows.shape[0] for d in dis)), "s": t3 - t2})
        q.append(_scene_quality(res))
        del sc, tg, dis, res
    load = meter.done()
    kp = [c for s in specs.values() for c in s["counts"].values()]
    slowest = max(per_scene, key=lambda x: x["s"])
    sum_qc = sum(x["n1"] * (x["n_targets"] + x["n_distractors"]) for x in per_scene)
    return {"part": 2, "sum_query_candidate_pairs": sum_qc, "gemm_gflop": 2.0 * sum_qc * (DIM + 1) / 1e9, "spec": spec, "pass1_s": pass1_s, "generate_s": gen_s, "score_s": score_s,
            "parts_ms": breakdown(score_s * 1e3, pt), "load": load, "per_scene": per_scene, "slowest": slowest,
            "keypoints": {"min": min(kp), "max": max(kp), "mean": float(np.mean(kp)), "total": int(sum(kp))},
            "quality": {"retrieval_map_negative": sum(x["sum_ap_negative"] for x in q) / max(1, sum(x["queries_with_positive"] for x in q)),
                        "verification_ap_step_mean": float(np.mean([x["verification_ap_step"] for x in q])),
                        "queries_with_positive_fraction": sum(x["queries_with_positive"] for x in q) / max(1, sum(x["n_queries"] for x in q)),
                        "n_distractors": sorted({x["n_distractors"] for x in q})},
            "mem_after_pass1": after_pass1, "mem_end": _mem(), "hwm_reset": hwm_reset}


def child_scaling(spec: dict) -> dict:
    """Part 3: one v_ scene with every image at N keypoints and S distractor segments of 20."""
    from descbench.metrics.bojanic import BojanicParams, Distractors, score_scene_tasks
    from descbench.metrics.retrieval import prepare_l2_screen, query_blocks

    seed, n, n_seg = spec["seed"], spec["n"], spec["segments"]
    proto = prototypes(seed)
    sc = make_scene(scene_spec("v_000", 0, seed, n), proto)
    tg = _targets(sc)
    # distractor pool: other scenes at 1,300 keypoints per image; the pool's rows, shuffled,
    # are cut into segments of 20 (as many segments as 1000 distractor scenes would give)
    need = n_seg * DISTRACTORS_PER_SCENE
    pool, j = [], 1
    while sum(p.shape[0] for p in pool) < need:
        o = make_scene(scene_spec(f"i_{j:03d}", j, seed, 1300), proto)
        pool.extend(o["desc"][k] for k in range(1, 7))
        j += 1
    dis = []
    if need:
        allrows = np.concatenate(pool)
        pick = np.random.default_rng([seed, 777]).permutation(allrows.shape[0])[:need]
        for s in range(n_seg):
            rows = np.sort(pick[s * DISTRACTORS_PER_SCENE:(s + 1) * DISTRACTORS_PER_SCENE])
            dis.append(Distractors(f"d{s}", 1, rows.astype(np.int64), np.ascontiguousarray(allrows[rows])))
        del allrows
    del pool
    after_data = _mem()
    hwm_reset = _reset_hwm()
    bp = BojanicParams(gt="closest")
    meter = LoadMeter()
    runs = []
    for _ in range(spec["repeats"]):
        pt = PartTimer()
        t0 = time.perf_counter()
        with pt:
            res = score_scene_tasks(sc["xy"][1], sc["desc"][1], tg, dis, bp)
        total = (time.perf_counter() - t0) * 1e3
        runs.append({"total_ms": total, "parts_ms": breakdown(total, pt)})
        del res
    peak_scoring = _mem()
    # the float32 screen alone, same blocks as segment_statistics (all queries, chunk_mb blocks)
    blocks = [t.desc for t in tg] + [d.desc for d in dis]
    cands = np.concatenate(blocks)
    q_desc = sc["desc"][1]
    _, cd, qaug, caug, _ = prepare_l2_screen(q_desc, cands)
    nq = q_desc.shape[0]
    all_rows = np.ones(nq + 1, dtype=np.int64)
    all_rows[0] = 0
    blist = list(query_blocks(np.cumsum(all_rows), cd.shape[0], bp.chunk_mb))
    gemm = []
    for _ in range(spec["repeats"]):
        t0 = time.perf_counter()
        for rows in blist:
            _ = qaug[rows] @ caug.T
        gemm.append((time.perf_counter() - t0) * 1e3)
    load = meter.done()
    res = score_scene_tasks(sc["xy"][1], sc["desc"][1], tg, dis, bp)
    totals = [r["total_ms"] for r in runs]
    best = runs[int(np.argmin(totals))]
    c = int(cands.shape[0])
    return {"part": 3, "spec": spec, "n_queries": nq, "n_candidates": c, "n_target_keypoints": c - need, "n_distractors": need,
            "n_blocks": len(blist), "gflop": 2.0 * nq * c * (DIM + 1) / 1e9,
            "total_best_ms": min(totals), "total_median_ms": statistics.median(totals), "best_parts_ms": best["parts_ms"],
            "gemm_best_ms": min(gemm), "gemm_median_ms": statistics.median(gemm),
            "relevant_entries": int(res.r_positives.sum()), "queries_with_positive": int((res.r_positives > 0).sum()),
            "load": load, "mem_after_data": after_data, "mem_peak_scoring": peak_scoring, "hwm_reset": hwm_reset}


def child_main(spec: dict, threads: int) -> None:
    source_at_start = source_fingerprint()  # other people edit the package while benchmarks run
    nb = limit_threads(threads)
    after_imports = _mem()
    warm = warmup()
    after_warmup = _mem()
    fn = {1: child_reference, 2: child_full, 3: child_scaling}[spec["part"]]
    out = fn(spec)
    out.update({"threads": threads, "numba_threads": nb, "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
                "source": source_at_start, "source_at_end": source_fingerprint(), "warmup_s": warm, "mem_after_imports": after_imports,
                "mem_after_warmup": after_warmup, "mem_final": _mem(),
                "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0})
    print(CHILD_TAG + json.dumps(out), flush=True)


def machine_busy(window_s: float = 2.0) -> float | None:
    """Cores the whole machine used over ``window_s`` (this process sleeps meanwhile)."""
    snap = LoadMeter._snap
    t0, b0, _ = snap()
    time.sleep(window_s)
    t1, b1, _ = snap()
    return None if b0 is None or b1 is None else (b1 - b0) / (t1 - t0)


def wait_quiet(max_wait_s: float, threshold: float = 0.25) -> dict:
    """Wait (at most ``max_wait_s``) until other processes use less than ``threshold`` cores."""
    t0 = time.perf_counter()
    busy = machine_busy(1.0)
    while busy is not None and busy > threshold and time.perf_counter() - t0 < max_wait_s:
        busy = machine_busy(2.0)
    return {"waited_s": time.perf_counter() - t0, "busy_before_cores": busy}


def child_env(openblas_thread_timeout: str) -> dict:
    """The children's environment: like ``python -m descbench`` (``descbench/__main__.py``), set
    OPENBLAS_THREAD_TIMEOUT (default 4) unless the environment already has it; "none" leaves it unset."""
    env = os.environ.copy()
    if "OPENBLAS_THREAD_TIMEOUT" not in env and openblas_thread_timeout.lower() != "none":
        env["OPENBLAS_THREAD_TIMEOUT"] = openblas_thread_timeout
    return env


CHILD_ENV: dict | None = None
PARENT_SOURCE: dict | None = None


def _run_child_once(spec: dict, threads: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec), "--threads", str(threads)]
    uptime_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=CHILD_ENV)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"child {spec} failed ({proc.returncode}):\n{proc.stderr}")
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            out = json.loads(line[len(CHILD_TAG):])
            out["child_wall_s"] = wall
            out["loadavg_before_child"] = uptime_before
            files = lambda src: {k: v for k, v in (src or {}).items() if k != "git_head"}  # noqa: E731
            if PARENT_SOURCE and (files(out.get("source")) != files(PARENT_SOURCE)
                                  or files(out.get("source_at_end")) != files(PARENT_SOURCE)):
                print(f"  WARNING: the measured sources changed during the benchmark: parent {PARENT_SOURCE}, "
                      f"child {out.get('source')} -> {out.get('source_at_end')}", file=sys.stderr, flush=True)
            return out
    raise RuntimeError(f"child printed no result:\n{proc.stdout}\n{proc.stderr}")


def run_child(spec: dict, threads: int, quiet_wait_s: float = 0.0, retries: int = 0, max_other: float = 0.2) -> dict:
    """Run one configuration in a fresh child, after waiting for a quiet machine; rerun it (up to
    ``retries`` times) while other processes used more than ``max_other`` cores during its timed
    part, and keep the attempt with the least outside load."""
    best = None
    attempts = []
    for _ in range(1 + max(0, retries)):
        quiet = wait_quiet(quiet_wait_s) if quiet_wait_s > 0 else {"waited_s": 0.0, "busy_before_cores": None}
        out = _run_child_once(spec, threads)
        out["quiet"] = quiet
        other = out["load"].get("other_cores")
        attempts.append(other)
        if best is None or (other is not None and other < (best["load"].get("other_cores") or 1e9)):
            best = out
        if other is None or other <= max_other:
            break
        print(f"  (config {spec}: other processes used {other:.2f} cores; rerunning)", file=sys.stderr, flush=True)
    best["attempts_other_cores"] = attempts
    return best


# ----------------------------------------------------------------------------- report


def _load_str(o: dict) -> str:
    """uptime's 1-min load average just before the child started, and the cores other processes
    used during the child's timed part (the load average also counts this benchmark's threads)."""
    la = o["loadavg_before_child"]
    oc = o["load"].get("other_cores")
    return f"load {la[0]:.2f}" + (f", others {oc:.2f} cores" if oc is not None else "")


def print_part1(o: dict) -> None:
    tgt = TARGETS[1]
    runs = o["runs"]
    tot = [r["total_s"] for r in runs]
    best = runs[int(np.argmin(tot))]
    peak_all = max(o["mem_after_data"]["hwm_mib"], o["mem_final"]["hwm_mib"])
    q = o["quality"]
    print(f"\n[1] reference shape: {o['spec']['n_i']} i_ + {o['spec']['n_v']} v_ scenes x 6 images, keypoints/image "
          f"{o['keypoints']['min']}..{o['keypoints']['max']} (mean {o['keypoints']['mean']:.0f}), "
          f"distractor scenes used {q['n_distractor_scenes']} x 20 ({_load_str(o)})")
    print(f"    queries with a ground-truth keypoint (per pair): {q['relevant_pairs_fraction']:.1%}; true mAP {q['true_map']:.3f}; "
          f"retrieval mAP {q['retrieval_map_negative']:.3f}; verification AP {q['verification_ap_step_mean']:.3f}")
    row = "    {:<42s} {:>9s} {:>9s}"
    print(row.format("", "best", "median"))
    for key, label in (("true_map_s", "true mAP (45 score_pair)"), ("vr_s", "verification + retrieval (9 scenes)"),
                       ("total_s", "total")):
        v = [r[key] for r in runs]
        print(row.format(label, f"{min(v):.2f} s", f"{statistics.median(v):.2f} s"))
    p = best["parts_ms"]
    print(f"    verif+retr breakdown (best run, ms): screen {p['screen_blocks_and_glue']:.0f}, kernel {p['kernel_segment_stats_l2']:.0f}, "
          f"prepare {p['prepare_l2_screen']:.0f}, positives {p['positive_csr']:.0f}, query scores {p['query_scores+within_row_counts']:.0f}, "
          f"verification AP {p['verification_ap']:.0f}, other {p['other']:.0f}")
    verdict = "met" if min(tot) <= tgt["time_s"] and peak_all < tgt["peak_mib"] else "MISSED"
    print(f"    peak RSS {peak_all:.0f} MiB (after warm-up {o['mem_after_warmup']['rss_mib']:.0f} MiB, with data "
          f"{o['mem_after_data']['rss_mib']:.0f} MiB); target <= {tgt['time_s']:.0f} s and < {tgt['peak_mib']:.0f} MiB -> {verdict}")


def print_part2(outs: list[dict]) -> None:
    tgt = TARGETS[2]
    print("\n[2] full scale: verification + retrieval of every scene (10 distractor scenes x 20 keypoints)")
    row = "    {:<22s} {:>8s} {:>9s} {:>9s} {:>8s} {:>8s} {:>10s} {:>9s}  {}"
    print(row.format("keypoints/image", "scenes", "score s", "kernel s", "screen s", "rest s", "peak MiB", "verdict", "load"))
    for o in outs:
        c = o["spec"]["counts"]
        label = f"all {c}" if isinstance(c, int) else f"uniform {c[0]}..{c[1]}"
        p = o["parts_ms"]
        rest = o["score_s"] - p["kernel_segment_stats_l2"] / 1e3 - p["screen_blocks_and_glue"] / 1e3
        peak = max(o["mem_after_pass1"]["hwm_mib"], o["mem_final"]["hwm_mib"])
        verdict = "met" if o["score_s"] < tgt["time_s"] and peak < tgt["peak_mib"] else "MISSED"
        print(row.format(label, str(o["spec"]["n_i"] + o["spec"]["n_v"]), f"{o['score_s']:.1f}", f"{p['kernel_segment_stats_l2'] / 1e3:.1f}",
                         f"{p['screen_blocks_and_glue'] / 1e3:.1f}", f"{rest:.1f}", f"{peak:.0f}", verdict, _load_str(o)))
        sl = o["slowest"]
        q = o["quality"]
        print(f"      {o['sum_query_candidate_pairs'] / 1e9:.2f} G (query, candidate) pairs: {o['score_s'] * 1e9 / o['sum_query_candidate_pairs']:.1f} ns each "
              f"(kernel {p['kernel_segment_stats_l2'] * 1e6 / o['sum_query_candidate_pairs']:.1f}, screen {p['screen_blocks_and_glue'] * 1e6 / o['sum_query_candidate_pairs']:.1f}); "
              f"screen GEMM {o['gemm_gflop']:.0f} GFLOP at {o['gemm_gflop'] / max(1e-9, p['screen_blocks_and_glue'] / 1e3):.0f} GFLOP/s; child wall {o['child_wall_s']:.0f} s")
        print(f"      keypoints mean {o['keypoints']['mean']:.0f}; generation {o['pass1_s']:.1f} s (pass 1) + {o['generate_s']:.1f} s (pass 2, not in "
              f"'score'); slowest scene {sl['scene']} {sl['s']:.2f} s (N1 {sl['n1']}, targets {sl['n_targets']}); queries with positive "
              f"{q['queries_with_positive_fraction']:.1%}, retrieval mAP {q['retrieval_map_negative']:.3f}, verif AP {q['verification_ap_step_mean']:.3f}")


def print_part3(outs: list[dict]) -> None:
    print("\n[3] scaling, one v_ scene (best of repeats, ms; screen = blocked BLAS qaug @ caug.T inside the call; "
          "GEMM alone = the same blocks timed alone)")
    row = "    {:>6s} {:>7s} {:>7s} {:>7s} {:>8s} {:>8s} {:>8s} {:>8s} {:>8s} {:>8s} {:>7s} {:>7s}  {}"
    print(row.format("N", "dis", "segs", "cands", "total", "median", "GEMMal.", "screen", "kernel", "rest", "GFLOP/s", "peakMiB", "load"))
    for o in outs:
        p = o["best_parts_ms"]
        rest = o["total_best_ms"] - p["kernel_segment_stats_l2"] - p["screen_blocks_and_glue"]
        print(row.format(str(o["spec"]["n"]), str(o["n_distractors"]), str(o["spec"]["segments"]), str(o["n_candidates"]),
                         f"{o['total_best_ms']:.0f}", f"{o['total_median_ms']:.0f}", f"{o['gemm_best_ms']:.0f}",
                         f"{p['screen_blocks_and_glue']:.0f}", f"{p['kernel_segment_stats_l2']:.0f}", f"{rest:.0f}",
                         f"{o['gflop'] / (o['gemm_best_ms'] / 1e3):.0f}", f"{o['mem_peak_scoring']['hwm_mib']:.0f}", _load_str(o)))
    print("    rest = total - kernel - screen: ground truth (positives), query scores, verification labels + list + its APs")
    for o in outs:
        p = o["best_parts_ms"]
        kern_ns = p["kernel_segment_stats_l2"] * 1e6 * o["numba_threads"] / max(1, o["n_queries"] * o["n_candidates"])
        print(f"    N {o['spec']['n']:>5d} dis {o['n_distractors']:>5d}: kernel {kern_ns:.2f} ns per (query, candidate) per thread, "
              f"{o['relevant_entries'] / max(1, o['n_queries']):.2f} relevant entries per query; positives {p['positive_csr']:.0f} ms, "
              f"query scores {p['query_scores+within_row_counts']:.0f} ms, verification AP {p['verification_ap']:.0f} ms, "
              f"other {p['other']:.0f} ms, prepare {p['prepare_l2_screen']:.0f} ms")


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke test (< 1 min): smaller parts 2 and 3")
    ap.add_argument("--parts", default="1,2,3", help="comma-separated parts to run (default 1,2,3)")
    ap.add_argument("--threads", type=int, default=2, help="numba and BLAS threads (default 2)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repetitions for parts 1 and 3 (default 5, quick 2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic scenes (default 0)")
    ap.add_argument("--full-counts", default="2000,8000", help="part 2 keypoints per image, uniform lo,hi (default 2000,8000)")
    ap.add_argument("--skip-worst", action="store_true", help="part 2: skip the every-image-at-8,000 worst case")
    ap.add_argument("--quiet-wait", type=float, default=None, metavar="S",
                    help="before each child, wait up to S s for the machine to be idle (default 120, quick 0)")
    ap.add_argument("--retries", type=int, default=None,
                    help="rerun a configuration up to this many times if other processes used more than "
                         "--max-other cores during it (default 1, quick 0)")
    ap.add_argument("--max-other", type=float, default=0.2, help="outside load (cores) that triggers a rerun (default 0.2)")
    ap.add_argument("--openblas-thread-timeout", default="4", metavar="T",
                    help="OPENBLAS_THREAD_TIMEOUT for the children, as python -m descbench sets it (default 4; 'none' "
                         "= OpenBLAS default; a value already in the environment wins)")
    ap.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    ap.add_argument("--child", metavar="SPEC", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        child_main(json.loads(args.child), args.threads)
        return 0

    parts = {int(p) for p in args.parts.split(",") if p.strip()}
    global CHILD_ENV, PARENT_SOURCE
    CHILD_ENV = child_env(args.openblas_thread_timeout)
    quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0.0 if args.quick else 120.0)
    rc = {"quiet_wait_s": quiet_wait, "retries": args.retries if args.retries is not None else (0 if args.quick else 1),
          "max_other": args.max_other}
    reps = args.repeats or (2 if args.quick else 5)
    base = {"seed": args.seed, "dseed": 0}
    out = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
           "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "threads": args.threads}
    from descbench.metrics import bojanic  # noqa: F401 - fails early if the package is missing

    limit_threads(args.threads)
    out["machine"] = machine_facts()
    out["source"] = source_fingerprint()
    PARENT_SOURCE = out["source"]
    m = out["machine"]
    print("descbench keypoint verification + retrieval benchmark")
    print(f"  date    : {out['date']}; command: {out['command']}")
    print(f"  machine : {m['cpu_count']} cores (affinity {m['affinity_cpus']}), {m['cpu_model']}, {m['mem_gib']:.0f} GiB; {m['platform']}")
    print(f"  versions: python {m['python']}, numpy {m['numpy']}, numba {m['numba']}")
    for p in m["threadpools"]:
        print(f"  pool    : {p['user_api']}/{p['internal_api']} {p['version']} ({p['architecture']}, {p['threading_layer']})")
    print(f"  code    : {out['source']}")
    out["openblas_thread_timeout"] = CHILD_ENV.get("OPENBLAS_THREAD_TIMEOUT")
    print(f"  threads : {args.threads} (numba + BLAS); children's OPENBLAS_THREAD_TIMEOUT={out['openblas_thread_timeout']}; "
          f"loadavg at start {os.getloadavg()}")
    t_start = time.perf_counter()

    if 1 in parts:
        o = run_child({**base, "part": 1, "n_i": 4, "n_v": 5, "counts": [1100, 1500], "repeats": reps}, args.threads, **rc)
        out["part1"] = o
        print_part1(o)
    if 2 in parts:
        lo, hi = (int(x) for x in args.full_counts.split(","))
        if args.quick:
            cfgs = [{"n_i": 6, "n_v": 6, "counts": [1000, 2000]}]
        else:
            cfgs = [{"n_i": 57, "n_v": 59, "counts": [lo, hi]}]
            if not args.skip_worst:
                cfgs.append({"n_i": 57, "n_v": 59, "counts": hi})
        out["part2"] = []
        for c in cfgs:
            out["part2"].append(run_child({**base, "part": 2, **c}, args.threads, **rc))
        print_part2(out["part2"])
    if 3 in parts:
        if args.quick:
            pts = [(1000, 10), (2000, 10), (1300, 0), (1300, 100)]
        else:
            pts = [(1000, 10), (2000, 10), (4000, 10), (8000, 10),
                   (1300, 0), (1300, 10), (1300, 100), (1300, 1000),
                   (4000, 0), (4000, 100), (4000, 1000)]
        out["part3"] = []
        for n, segs in pts:
            r = max(1, reps if n <= 4000 else min(reps, 3))
            out["part3"].append(run_child({**base, "part": 3, "n": n, "segments": segs, "repeats": r}, args.threads, **rc))
        print_part3(out["part3"])
    out["wall_s"] = time.perf_counter() - t_start
    print(f"\nbenchmark wall time {out['wall_s']:.0f} s; loadavg at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
