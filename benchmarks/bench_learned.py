#!/usr/bin/env python
"""Performance of the learned descriptors: patches/s, peak memory, and the fusion study end to end.

Run as a script, not a test (pytest does not collect it; it never fails on a missed target)::

    python benchmarks/bench_learned.py throughput                 # ~8 min on 2 cores
    python benchmarks/bench_learned.py memory                     # ~1.5 min
    python benchmarks/bench_learned.py fusion                     # the demo, all 8 scenes
    python benchmarks/make_hpatches_standin.py --out /tmp/standin4 --scenes 4 --jobs 2
    python benchmarks/bench_learned.py fusion --standin /tmp/standin4 --scenes 4

Every figure is measured in a fresh child process (the same script and interpreter, ``--child
SPEC``), so each configuration starts with clean torch / OpenMP / OpenCV thread settings. This
parent process imports only the standard library and PyYAML, so the ``ru_maxrss`` that Linux
carries over ``exec`` from it is ~20 MiB, far below every child's peak.

**throughput** (one child per configuration): an 800 x 600 collage image (the stand-in's
generator, ``make_hpatches_standin.collage``, seed 0), ``--keypoints`` keypoints (default 4,096)
uniform in the image 40 px from the border, sizes log-uniform in 2.5..64 px, angles uniform in
[0, 360). The child pins itself to ``threads`` CPUs (``os.sched_setaffinity``), calls
``descbench.jobs.common.limit_threads(threads, ("opencv",))`` as a descriptor job does, fills the params
with ``check_descriptor_params`` (``weights: random``, ``device: cpu``, ``threads``, ``engine``),
runs one warm-up, then ``--repeats`` times, alternating:

* **path**: ``descbench.descriptors.compute_descriptors`` on the image: image read, grey
  conversion, patch sampling (``warpAffine`` per keypoint, per-patch normalisation), the net in
  batches of ``batch_mem_mb`` (default 256), L2 rows;
* **sampling**: ``grey_image`` + ``patch_sampling.sample_patches`` alone;
* **net**: ``torchrt.run_batched`` of the family's loaded net (eager module or frozen TorchScript)
  on the sampled patches, in the family's batch size (no sampling, no L2).

Family ``onnx``: kornia's ``HardNet(pretrained=False)`` with random weights (seed 0), exported
with ``torch.onnx.export`` (TorchScript exporter, opset 17, dynamic batch axis) into a temporary
folder; the path is the family with ``backend: opencv`` or ``onnxruntime`` (batch 512, the
workbench's DNN patch convention); **net** is the family's loaded model alone (``OnnxNet.run``)
on the normalised patches in batches of 512. OpenCV's dnn runs on ``cv2.setNumThreads(threads)``
(``limit_threads`` sets it), and the family's onnxruntime session on ``intra_op_num_threads`` =
that count with one inter-op thread (``onnx_net.session_options``; before that the family passed
no options and onnxruntime took one thread per physical core, so this script wrapped the session
to get the same settings and measured the unwrapped session as an extra row).

Reported: median and best patches/s over the repeats, the CPU time / wall of the timed calls
(cores used), patches/s per core (patches/s / threads), and each child's thread settings
(``torch.get_num_threads``, ``get_num_interop_threads``, ``OMP_NUM_THREADS`` /
``MKL_NUM_THREADS``, the CPU affinity). **FLOP arithmetic** (``--flops``, default on): every
``Conv2d`` / ``Linear`` multiply-accumulate of each net on one 32 x 32 patch, counted with forward
hooks (output elements x input channels per group x kernel area), and the single- and two-thread
float32 GEMM rate of this CPU (``torch.mm`` of 2048 x 2048 matrices, best of 7 after a warm-up):
``SGEMM GFLOP/s / (2 x MACs)`` is the most patches/s a core can give if every MAC ran at GEMM speed.

**memory** (one child per configuration, ``--memory-repeats`` runs each): hardnet rows for
``--memory-keypoints`` (default 20,000) keypoints of the same image, ``threads: 1``, eager, for
each ``batch_mem_mb`` of ``--batch-mem`` (16, 64, 256, 1024) through ``compute_descriptors`` (the
job's peak, ``full``); baselines that stop earlier: ``net`` (imports, net loaded, image read,
keypoints built) and ``warm`` (+ one patch sampled and through the net: torch's one-time set-up);
optionally ``patches`` (``net`` + every patch of the image sampled at once and kept, as
``describe_image`` did before commit 5314be4); and, per ``batch_mem_mb``, the **forward alone**
(``forward``): all patches sampled, a 1-patch forward, then the peak is reset (``echo 5 >
/proc/self/clear_refs``) and ``kornia_nets.forward`` runs on all patches: its peak over the RSS
just before it. Peak = the child's ``ru_maxrss`` from ``os.wait4`` (and its own ``VmHWM``, which
agrees; after the reset only ``VmHWM`` is the forward's). ``--mmap-threshold`` sets glibc's
``MALLOC_MMAP_THRESHOLD_`` in the children.

**fusion**: ``config/fusion_study.yaml`` with ``weights: random`` (KeyNet ``weights_seed: 1``, as
tests/workflow/test_fusion_study.py) copied into a fresh work folder and run by ``snakemake --cores 2
--configfile <work>/config/fusion_study.yaml --replace-workflow-config`` (as a child, measured by
``bench_workflow.run_snakemake``: wall, total CPU from ``os.wait4``, Snakemake's own CPU). Job CPU
by rule comes from the ``benchmark:`` TSV files under ``results/fusion_study/benchmarks/`` (psutil
samples) and from each job's own last log line (``getrusage``, exact). With ``--standin DIR
--scenes N`` the dataset is ``folder`` (the stand-in), the scale-matched sets keep
``--sm-per-scene`` (default 5,560: the workbench's 645K over 116 HPatches scenes) keypoints per
scene, and the run is extrapolated to 116 scenes (assumptions printed with the estimate).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FAMILIES = ("hardnet", "hardnet8", "sosnet", "hynet", "tfeat")
ONNX_BACKENDS = ("opencv", "onnxruntime")
IMAGE_W, IMAGE_H = 800, 600
HPATCHES_SCENES = 116
SCENES_PER_JOB = 8  # config.yaml's scenes_per_job (the default the estimate assumes)
SM_PER_SCENE = 5560  # the workbench's scale-matched sets: 645K keypoints over 116 HPatches scenes


# ---------------------------------------------------------------------------------------------
# Children


def run_child(spec: dict, timeout: float = 900, env: dict | None = None) -> tuple[dict, object]:
    """Run ``--child spec`` in a fresh interpreter (``env``: extra environment variables); (its JSON
    result, its rusage from wait4)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        t0 = time.monotonic()
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, etext = out.read(), err.read()
    if proc.returncode:
        raise RuntimeError(f"child {spec.get('kind')} failed (exit {proc.returncode}):\n{etext[-3000:]}\n{text[-2000:]}")
    line = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    if not line:
        raise RuntimeError(f"child {spec.get('kind')} printed no result:\n{etext[-3000:]}\n{text[-2000:]}")
    return json.loads(line[-1][len("RESULT "):]), ru


def child_main(spec: dict) -> None:
    kind = spec["kind"]
    threads = spec.get("threads")
    if threads:  # before any library starts its thread pools
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    out = {"image": child_image, "throughput": child_throughput, "flops": child_flops, "sgemm": child_sgemm,
           "memory": child_memory, "export": child_export}[kind](spec)
    print("RESULT " + json.dumps(out), flush=True)


def child_image(spec: dict) -> dict:
    """Write the 800 x 600 collage (the stand-in's generator) as ``spec["path"]``."""
    import numpy as np

    sys.path.insert(0, str(HERE))
    import make_hpatches_standin as M
    from descbench.datasets import demo

    img = M.collage(IMAGE_W, IMAGE_H, 0.35, np.random.default_rng(0))
    demo._write_image(Path(spec["path"]), img)
    return {"shape": list(img.shape)}


def make_keypoints(n: int, w: int = IMAGE_W, h: int = IMAGE_H, seed: int = 1):
    """``n`` keypoints uniform in the image 40 px from the border, sizes log-uniform 2.5..64 px."""
    import numpy as np

    from descbench.keypoints import ImageKeypoints

    rng = np.random.default_rng(seed)
    f32 = np.float32
    return ImageKeypoints(
        x=rng.uniform(40, w - 40, n).astype(f32), y=rng.uniform(40, h - 40, n).astype(f32),
        size=np.exp(rng.uniform(np.log(2.5), np.log(64.0), n)).astype(f32), angle=rng.uniform(0, 360, n).astype(f32),
        response=rng.uniform(0, 1, n).astype(f32), octave=np.zeros(n, np.int32), class_id=np.full(n, -1, np.int32),
        source_index=np.arange(n, dtype=np.int32))


def thread_facts() -> dict:
    import torch

    return {"torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
            "affinity": sorted(os.sched_getaffinity(0))}


def timed(fn, reps: list):
    """Call ``fn()``; append (wall s, process CPU s) to ``reps``; return its value."""
    t0, c0 = time.perf_counter(), time.process_time()
    v = fn()
    reps.append((time.perf_counter() - t0, time.process_time() - c0))
    return v


def child_export(spec: dict) -> dict:
    """kornia HardNet(pretrained=False), random weights seed 0, exported to ONNX at spec["path"]."""
    import warnings

    import kornia.feature as KF
    import torch

    from descbench import torchrt

    net = KF.HardNet(pretrained=False)
    torchrt.random_init(net, 0)
    net.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(2, 1, 32, 32),), spec["path"], dynamo=False, opset_version=17,
                          input_names=["patch"], output_names=["desc"], dynamic_axes={"patch": {0: "B"}, "desc": {0: "B"}})
    return {"bytes": Path(spec["path"]).stat().st_size}


def child_throughput(spec: dict) -> dict:
    import numpy as np

    from descbench.jobs.common import limit_threads

    threads, family, n, reps_n = spec["threads"], spec["family"], spec["keypoints"], spec["repeats"]
    limit_threads(threads, ("opencv",))  # the pools a descriptor job sizes
    from descbench import torchrt
    from descbench.descriptors import check_descriptor_params, compute_descriptors
    from descbench.descriptors import kornia_nets as KN
    from descbench.descriptors import onnx_net as O
    from descbench.descriptors import patch_sampling as ps

    image = Path(spec["image"])
    kps = make_keypoints(n)
    where = f"descriptors.{family}.params"
    if family == "onnx":
        raw = {"model": spec["model"], "backend": spec["backend"]}
    else:
        raw = {"weights": "random", "device": "cpu", "threads": threads, "engine": spec["engine"]}
        if spec.get("batch_mem_mb"):
            raw["batch_mem_mb"] = spec["batch_mem_mb"]
    params = check_descriptor_params(family, raw, where)

    if family == "onnx":
        import cv2

        conv = O.convention(params)
        net = O.load_net(params, where + ".model")
        from descbench.datasets.layout import read_image

        grey = cv2.cvtColor(read_image(image, color=True), cv2.COLOR_BGR2GRAY)  # as the family
        batch = params["batch_size"]
        run_net = net.run  # the family's loaded model (OnnxNet): OpenCV dnn or its onnxruntime session

        def sample():
            return ps.normalise_patches(ps.warp_patches(grey, kps, conv), conv)

        def net_alone(p):
            return [run_net(np.ascontiguousarray(p[s:s + batch, None])) for s in range(0, len(p), batch)]
        facts = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "affinity": sorted(os.sched_getaffinity(0)),
                 "cv2_threads": cv2.getNumThreads()}
        if spec["backend"] == "onnxruntime":
            facts["ort_intra_op_threads"] = net.net.get_session_options().intra_op_num_threads
    else:
        net, _, dev = KN.net_for(family, params)
        conv = KN.convention(params)
        batch = KN.batch_of(family, params)

        def sample():
            return ps.sample_patches(KN.grey_image(image), kps, conv)

        def net_alone(p):
            return torchrt.run_batched(net, p[:, None], batch, dev)
        torchrt.configure(dev, threads)
        facts = thread_facts()

    def path():
        return compute_descriptors(family, params, image, kps, {}, where)

    t_warm = time.perf_counter()
    rows = path()  # loads (and freezes) the net and runs every batch shape the timed calls use
    t_warm = time.perf_counter() - t_warm
    if family != "onnx":
        facts = thread_facts()  # after the family's own torchrt.configure
    r_path, r_sample, r_net = [], [], []
    for _ in range(reps_n):
        timed(path, r_path)
        patches = timed(sample, r_sample)
        timed(lambda: net_alone(patches), r_net)
    engine = spec.get("engine") or spec.get("backend")
    return {"family": family, "engine": engine, "threads": threads, "keypoints": n,
            "batch": batch, "dim": int(rows.shape[1]), "warmup_s": t_warm, "path": r_path, "sampling": r_sample, "net": r_net,
            "facts": facts, "load_avg": os.getloadavg()}


def child_flops(spec: dict) -> dict:
    """Conv2d / Linear MACs per 32 x 32 patch of each family's net (forward hooks)."""
    import kornia.feature as KF
    import torch

    from descbench.descriptors import kornia_nets as KN

    torch.set_num_threads(1)
    out = {}
    for fam in spec["families"]:
        s = KN.NETS[fam]
        net = getattr(KF, s.kornia_class)(pretrained=False).eval()
        macs = {"conv": 0, "linear": 0}

        def hook(mod, inp, outp):
            if isinstance(mod, torch.nn.Conv2d):
                k = mod.kernel_size[0] * mod.kernel_size[1] * (mod.in_channels // mod.groups)
                macs["conv"] += outp.numel() * k
            elif isinstance(mod, torch.nn.Linear):
                macs["linear"] += outp.numel() * mod.in_features

        hs = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
        with torch.inference_mode():
            net(torch.rand(1, 1, s.input_size, s.input_size))
        for h in hs:
            h.remove()
        out[fam] = {**macs, "params": sum(p.numel() for p in net.parameters())}
    return out


def child_sgemm(spec: dict) -> dict:
    """float32 torch.mm of n x n matrices with ``threads`` threads: GFLOP/s of each of ``repeats`` runs."""
    import torch

    torch.set_num_threads(spec["threads"])
    n = spec["n"]
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(n, n, generator=g), torch.rand(n, n, generator=g)
    c = torch.empty(n, n)
    for _ in range(2):
        torch.mm(a, b, out=c)
    rates = []
    for _ in range(spec["repeats"]):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        rates.append(2 * n**3 / (time.perf_counter() - t0) / 1e9)
    return {"threads": spec["threads"], "gflops": rates, "facts": thread_facts()}


def proc_status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def child_memory(spec: dict) -> dict:
    """hardnet rows for n keypoints with ``batch_mem_mb`` (stage ``full``), or a baseline stage."""
    stages = {}

    def mark(name):
        stages[name] = proc_status_kib("VmRSS") / 1024

    mark("start")
    import numpy as np

    from descbench.jobs.common import limit_threads

    limit_threads(1, ("opencv",))  # the pools a descriptor job sizes
    import kornia  # noqa: F401
    import torch  # noqa: F401

    from descbench.descriptors import check_descriptor_params, compute_descriptors
    from descbench.descriptors import kornia_nets as KN
    from descbench.descriptors import patch_sampling as ps

    mark("imports")
    raw = {"weights": "random", "device": "cpu", "threads": 1, "engine": "eager", "batch_mem_mb": spec.get("batch_mem_mb") or 256}
    where = "descriptors.hardnet.params"
    params = check_descriptor_params("hardnet", raw, where)
    net, _, dev = KN.net_for("hardnet", params)
    image = Path(spec["image"])
    kps = make_keypoints(spec["keypoints"])
    grey = KN.grey_image(image)
    mark("net_image_keypoints")
    keep = []
    stage = spec["stage"]
    if stage == "patches":  # every patch of the image sampled at once (what describe_image did before 5314be4)
        keep.append(ps.sample_patches(grey, kps, KN.convention(params)))
        mark("patches")
    if stage == "warm":  # torch / oneDNN one-time set-up: one patch through the net
        KN.forward("hardnet", ps.sample_patches(grey, kps.take(np.arange(1)), KN.convention(params)), params)
        mark("warm")
    rows = None
    forward_peak = None
    if stage == "forward":  # the forward alone: its peak over the RSS just before it
        import gc

        patches = ps.sample_patches(grey, kps, KN.convention(params))
        KN.forward("hardnet", patches[:1], params)  # torch / oneDNN one-time set-up, not the batch's
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS (ru_maxrss keeps its old peak)
        mark("before_forward")
    t = time.perf_counter()
    if stage == "full":
        rows = compute_descriptors("hardnet", params, image, kps, {}, where)
        mark("after_forward")
    elif stage == "forward":
        rows = KN.forward("hardnet", patches, params)
        mark("after_forward")
        forward_peak = proc_status_kib("VmHWM") / 1024 - stages["before_forward"]
    t = time.perf_counter() - t
    return {"stage": stage, "forward_peak_increase_mib": forward_peak, "batch_mem_mb": spec.get("batch_mem_mb"), "batch": KN.batch_of("hardnet", params),
            "rss_mib": stages, "vmhwm_mib": proc_status_kib("VmHWM") / 1024, "forward_s": t,
            "rows": None if rows is None else list(rows.shape), "patch_array_mib": spec["keypoints"] * 32 * 32 * 4 / 2**20}


# ---------------------------------------------------------------------------------------------
# Parent: throughput


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def machine() -> dict:
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
    except OSError:
        head = None
    return {"cpu": model, "cpus": os.cpu_count(), "python": platform.python_version(), "git_head": head,
            "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M")}


def prepare_image(tmp: Path) -> Path:
    path = tmp / "collage_800x600.ppm"
    run_child({"kind": "image", "path": str(path)})
    return path


def rate_line(label: str, n: int, reps: list, threads: int) -> dict:
    walls = [w for w, _ in reps]
    cpus = [c for _, c in reps]
    r = {"median": n / med(walls), "best": n / min(walls), "cores_used": sum(cpus) / sum(walls)}
    r["per_core_median"] = r["median"] / threads
    return r


def cmd_throughput(a, tmp: Path, report: dict) -> None:
    image = prepare_image(tmp)
    families = [f for f in a.families.split(",") if f]
    threads = [int(t) for t in a.threads.split(",")]
    engines = [e for e in a.engines.split(",") if e]
    backends = [b for b in a.onnx_backends.split(",") if b]
    configs = [{"family": f, "engine": e, "threads": t, "batch_mem_mb": a.batch_mem_mb}
               for f in families if f != "onnx" for e in engines for t in threads]
    if "onnx" in families and backends:
        model = tmp / "hardnet_random.onnx"
        run_child({"kind": "export", "path": str(model)})
        configs += [{"family": "onnx", "backend": b, "threads": t, "model": str(model)} for b in backends for t in threads]
    print(f"throughput: {a.keypoints} keypoints on {image.name} ({IMAGE_W} x {IMAGE_H}), {a.repeats} repeats after a warm-up, "
          f"each configuration in a fresh child pinned to `threads` CPUs")
    results = []
    for c in configs:
        t0 = time.monotonic()
        res, ru = run_child({"kind": "throughput", "image": str(image), "keypoints": a.keypoints, "repeats": a.repeats, **c})
        res["child_wall_s"] = time.monotonic() - t0
        res["child_cpu_s"] = ru.ru_utime + ru.ru_stime
        res["rates"] = {k: rate_line(k, a.keypoints, res[k], c["threads"]) for k in ("path", "net")}
        res["sampling_ms_median"] = 1000 * med([w for w, _ in res["sampling"]])
        results.append(res)
        p, nt = res["rates"]["path"], res["rates"]["net"]
        print(f"  {res['family']:9s} {res['engine']:12s} threads {c['threads']}: path {p['median']:7.0f}/s (best {p['best']:7.0f}, "
              f"cores {p['cores_used']:.2f}), net {nt['median']:7.0f}/s (best {nt['best']:7.0f}, cores {nt['cores_used']:.2f}), "
              f"sampling {res['sampling_ms_median']:.0f} ms, batch {res['batch']}   [{res['child_wall_s']:.0f} s]", flush=True)
    report["throughput"] = results
    print("\nthread settings seen by the children (after the family's torchrt.configure):")
    seen = set()
    for r in results:
        f = r["facts"]
        key = json.dumps(f, sort_keys=True)
        if key not in seen:
            seen.add(key)
            print(f"  {r['family']} threads {r['threads']}: " + ", ".join(f"{k}={v}" for k, v in f.items()))
    flops = None
    if a.flops:
        flops = flop_report(a, families, report)
    print_throughput_table(results, flops, a.keypoints)


def flop_report(a, families: list[str], report: dict) -> dict:
    fams = [f for f in families if f != "onnx"] or ["hardnet"]
    macs, _ = run_child({"kind": "flops", "families": fams})
    sgemm = {}
    for t in sorted({1, *[int(x) for x in a.threads.split(",")]}):
        res, _ = run_child({"kind": "sgemm", "threads": t, "n": 2048, "repeats": 7})
        sgemm[t] = res
    report["flops"] = {"macs": macs, "sgemm": sgemm}
    print("\nFLOP arithmetic (Conv2d + Linear multiply-accumulates on one 32 x 32 patch, forward hooks):")
    g1 = max(sgemm[1]["gflops"])
    g1m = med(sgemm[1]["gflops"])
    for t, r in sorted(sgemm.items()):
        print(f"  float32 GEMM torch.mm 2048^3, {t} thread(s): best {max(r['gflops']):.1f} GFLOP/s, median {med(r['gflops']):.1f}"
              f" ({max(r['gflops']) / t:.1f} per core)")
    for fam, m in macs.items():
        tot = m["conv"] + m["linear"]
        print(f"  {fam:9s}: {tot / 1e6:6.1f} MMAC = {2 * tot / 1e6:6.1f} MFLOP per patch ({m['params'] / 1e6:.2f} M params); "
              f"at the 1-thread GEMM peak ({g1:.0f} GFLOP/s): at most {g1 * 1e9 / (2 * tot):6.0f} patches/s per core; "
              f"2,000 patches/s per core needs {2000 * 2 * tot / 1e9:.0f} GFLOP/s")
    print(f"  (1-thread GEMM median {g1m:.1f} GFLOP/s)")
    return report["flops"]


def print_throughput_table(results: list[dict], flops: dict | None, n: int) -> None:
    g1 = max(flops["sgemm"][1]["gflops"]) if flops else None
    print(f"\npatches/s, median of the repeats ({n} keypoints); per core = patches/s / threads; "
          "GEMM % = net's GFLOP/s per core / 1-thread SGEMM peak")
    print("| family | engine / backend | threads | path patches/s | per core | net alone patches/s | per core | "
          "cores used (path / net) | sampling ms | GEMM % |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        p, nt = r["rates"]["path"], r["rates"]["net"]
        eff = ""
        fam = "hardnet" if r["family"] == "onnx" else r["family"]
        if flops and fam in flops["macs"]:
            m = flops["macs"][fam]
            eff = f"{100 * nt['per_core_median'] * 2 * (m['conv'] + m['linear']) / 1e9 / g1:.0f}"
        print(f"| {r['family']} | {r['engine']} | {r['threads']} | {p['median']:.0f} | {p['per_core_median']:.0f} | "
              f"{nt['median']:.0f} | {nt['per_core_median']:.0f} | {p['cores_used']:.2f} / {nt['cores_used']:.2f} | "
              f"{r['sampling_ms_median']:.0f} | {eff} |")


# ---------------------------------------------------------------------------------------------
# Parent: memory


def cmd_memory(a, tmp: Path, report: dict) -> None:
    image = prepare_image(tmp)
    mems = [float(x) for x in a.batch_mem.split(",")]
    want = a.memory_stages.split(",")
    cases = [{"stage": s} for s in ("net", "warm", "patches") if s in want] + [
        {"stage": st, "batch_mem_mb": b} for st in ("full", "forward") if st in want for b in mems]
    env = {"MALLOC_MMAP_THRESHOLD_": str(a.mmap_threshold)} if a.mmap_threshold else None
    self_rss = proc_status_kib("VmHWM") / 1024
    print(f"memory: hardnet, {a.memory_keypoints} keypoints on {image.name}, threads 1, eager; peak = child's ru_maxrss "
          f"(os.wait4); this parent's own VmHWM {self_rss:.0f} MiB (what exec could carry over); children's "
          f"MALLOC_MMAP_THRESHOLD_: {a.mmap_threshold or 'unset (glibc default: dynamic)'}")
    out = []
    for c in cases:
        runs = []
        for _ in range(a.memory_repeats):
            res, ru = run_child({"kind": "memory", "image": str(image), "keypoints": a.memory_keypoints, **c}, env=env)
            res["ru_maxrss_mib"] = ru.ru_maxrss / 1024
            runs.append(res)
        peak = med([r["ru_maxrss_mib"] for r in runs])
        rec = {**c, "runs": runs, "peak_mib": peak, "vmhwm_mib": med([r["vmhwm_mib"] for r in runs]), "batch": runs[0]["batch"],
               "forward_s": med([r["forward_s"] for r in runs])}
        if c["stage"] == "forward":
            rec["forward_peak_increase_mib"] = med([r["forward_peak_increase_mib"] for r in runs])
        out.append(rec)
        fw = (f", forward alone +{rec['forward_peak_increase_mib']:.0f} MiB (runs: "
              + ", ".join(f"{r['forward_peak_increase_mib']:.0f}" for r in runs) + ")") if c["stage"] == "forward" else ""
        print(f"  {c['stage']:8s} batch_mem_mb {c.get('batch_mem_mb', '-')!s:>6}: peak {peak:7.1f} MiB (VmHWM {rec['vmhwm_mib']:.1f}){fw}, "
              f"batch {rec['batch']}, stages " + ", ".join(f"{k} {v:.0f}" for k, v in runs[0]["rss_mib"].items()), flush=True)
    report["memory"] = out
    base = {r["stage"]: r["peak_mib"] for r in out if r["stage"] in ("net", "patches", "warm")}
    patch_mib = a.memory_keypoints * 32 * 32 * 4 / 2**20
    print(f"\nfloat32 patch array: {patch_mib:.0f} MiB; rows [N, 128] float32: {a.memory_keypoints * 512 / 2**20:.0f} MiB")
    full = {r["batch_mem_mb"]: r for r in out if r["stage"] == "full"}
    fwd = {r["batch_mem_mb"]: r for r in out if r["stage"] == "forward"}
    print("| batch_mem_mb | patches per batch | job peak RSS MiB | - baseline `net` | - baseline `warm` | path s | "
          "forward alone: peak over the RSS before it, MiB (median) | forward s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in base:
        print(f"| (baseline `{name}`) | | {base[name]:.0f} | {base[name] - base.get('net', base[name]):.0f} | | | | |")
    for b in mems:
        r, f = full.get(b), fwd.get(b)
        cols = [f"{b:g}", str((r or f)["batch"])]
        cols += ([f"{r['peak_mib']:.0f}", f"{r['peak_mib'] - base['net']:.0f}" if "net" in base else "",
                  f"{r['peak_mib'] - base['warm']:.0f}" if "warm" in base else "", f"{r['forward_s']:.1f}"] if r else ["", "", "", ""])
        cols += [f"{f['forward_peak_increase_mib']:.0f}", f"{f['forward_s']:.1f}"] if f else ["", ""]
        print("| " + " | ".join(cols) + " |")


# ---------------------------------------------------------------------------------------------
# Parent: fusion study


def import_bench_workflow():
    sys.path.insert(0, str(HERE))
    import bench_workflow

    return bench_workflow


def fusion_config(workdir: Path, a) -> dict:
    """Copy config/ into the work folder, set random weights (as tests/workflow/test_fusion_study.py), and for a
    stand-in the folder dataset, its scenes and the scale-matched N; returns the config dict."""
    import yaml

    shutil.copytree(ROOT / "config", workdir / "config")
    p = workdir / "config" / "fusion_study.yaml"
    text = p.read_text()
    text = text.replace("weights: models/keynet_pytorch.pth", "weights: random\n      weights_seed: 1")
    text = text.replace("weights: models/checkpoint_liberty_with_aug.pth", "weights: random")
    if text.count("\n      weights: random") != 2:
        raise SystemExit("config/fusion_study.yaml changed: could not set weights: random on both networks")
    cfg = yaml.safe_load(text)
    if a.standin:
        bw = import_bench_workflow()
        scenes = bw.list_standin_scenes(a.standin)[: a.scenes or None]
        cfg["dataset"] = "folder"
        cfg["folder"] = {"path": str(a.standin.resolve()), "name": "standin"}
        cfg["scenes"] = scenes
        n_sm = a.sm_per_scene * len(scenes)
        for s in ("sift_scale_matched", "keynet_scale_matched"):
            cfg["keypoint_sets"][s]["filters"] = [{"global_top_n_by_size": n_sm}]
    elif a.scenes:
        sys.path.insert(0, str(ROOT / "workflow"))
        from descbench.datasets.demo import DEMO_SCENES

        cfg["scenes"] = list(DEMO_SCENES[: a.scenes])
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return cfg


def category(rel: Path, bw) -> str:
    """A job log / benchmark file (relative to logs/ or benchmarks/) -> the estimate's category:
    ``bench_workflow.job_category``'s (scoring, matching, pipeline scoring, ...), keypoints and
    descriptors split by set and family; a one-off job's ``once: <its log's name>``."""
    cat = bw.job_category(rel)
    parts = rel.with_suffix("").parts
    if cat == "keypoints":
        return {"keynet_8000": "keypoints: keynet detection", "sift_8000": "keypoints: sift detection"}.get(
            parts[1], "keypoints: derived sets (filters, intersections)")
    if cat == "descriptors":
        d = parts[2]
        return "descriptors: hardnet" if d == "hardnet" else "descriptors: sift" if d == "sift" else "descriptors: fusion composites"
    return cat if cat in bw.JOB_CATEGORIES.values() else f"once: {cat}"


def per_category(res_root: Path, bw) -> dict[str, dict[str, float]]:
    """Exact job figures (each job's last log line) and the benchmark TSVs' cpu_time, per category."""
    out: dict[str, dict[str, float]] = {}

    def slot(cat):
        return out.setdefault(cat, {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "tsv_jobs": 0, "tsv_cpu_s": 0.0, "tsv_s": 0.0})

    logs = res_root / "logs"
    if logs.is_dir():
        for p, m in bw.job_lines(logs):
            g = slot(category(p.relative_to(logs), bw))
            g["jobs"] += 1
            g["wall_s"] += float(m.group(2))
            g["cpu_s"] += float(m.group(3))
    bench = res_root / "benchmarks"
    if bench.is_dir():
        for p in sorted(bench.rglob("*.tsv")):
            for row in bw.read_tsv(p):
                g = slot(category(p.relative_to(bench), bw))
                g["tsv_jobs"] += 1
                g["tsv_cpu_s"] += bw.num(row.get("cpu_time"))
                g["tsv_s"] += bw.num(row.get("s"))
    return out


def startup_cpu(runs: int) -> dict[str, float]:
    """Median CPU s (wait4) of the imports a job pays before it computes: without and with torch."""
    cmds = {"plain": "import descbench.cli as c; c.job_modules()", "torch": "import descbench.cli as c; c.job_modules(); import torch, kornia.feature"}
    out = {}
    for k, c in cmds.items():
        vals = []
        for _ in range(runs):
            proc = subprocess.Popen([sys.executable, "-c", c], stdout=subprocess.DEVNULL)
            _, _, ru = os.wait4(proc.pid, 0)
            vals.append(ru.ru_utime + ru.ru_stime)
        out[k] = med(vals)
    return out


def standin_pixels(standin: Path, scenes: list[str], seed: int = 0) -> tuple[float, float]:
    """(mean megapixels of ``scenes``, mean megapixels of all 116 HPatches-named stand-in scenes),
    the latter from the generator's size draw (no image is made)."""
    sys.path.insert(0, str(HERE))
    import make_hpatches_standin as M
    from descbench.datasets import demo

    def mp(s):
        w, h = M.scene_size(s, demo.scene_rng(f"standin:{s}", seed))
        return w * h / 1e6

    return statistics.mean(mp(s) for s in scenes), statistics.mean(mp(s) for s in M.hpatches_names())


def cmd_fusion(a, tmp: Path, report: dict) -> None:
    bw = import_bench_workflow()
    workdir = Path(tempfile.mkdtemp(prefix="fusion-", dir=a.workdir)) if a.workdir else tmp / "fusion"
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = fusion_config(workdir, a)
    scenes = cfg.get("scenes")
    what = f"stand-in {a.standin}, {len(scenes)} scenes" if a.standin else f"demo, {'all 8' if not scenes else len(scenes)} scenes"
    print(f"fusion study ({what}), weights: random, --cores {a.cores}; work folder {workdir}")
    args = ["--configfile", str(workdir / "config" / "fusion_study.yaml"), "--replace-workflow-config", "--cores", str(a.cores)]
    r = bw.run_snakemake(workdir, args, "snakemake.log")
    if r.returncode:
        print(Path(r.log).read_text()[-4000:])
        raise SystemExit(f"snakemake failed (exit {r.returncode})")
    res_root = workdir / "results" / "fusion_study"
    cats = per_category(res_root, bw)
    njobs = sum(g["jobs"] for g in cats.values())
    print(f"wall {r.wall_s:.1f} s, total CPU {r.total_cpu_s:.1f} s (os.wait4 of the snakemake tree), cores used "
          f"{r.cores_used:.2f}, Snakemake's own CPU {r.own_cpu_s:.1f} s, others' load {r.others_cores:.2f} cores, "
          f"{njobs} jobs with a log line")
    print("| category | jobs | job CPU s (job logs) | job wall s | CPU s (benchmark: TSVs) | TSV files |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in sorted(cats):
        g = cats[k]
        print(f"| {k} | {g['jobs']} | {g['cpu_s']:.1f} | {g['wall_s']:.1f} | {g['tsv_cpu_s']:.1f} | {g['tsv_jobs']} |")
    print(f"| all jobs | {njobs} | {sum(g['cpu_s'] for g in cats.values()):.1f} | {sum(g['wall_s'] for g in cats.values()):.1f} "
          f"| {sum(g['tsv_cpu_s'] for g in cats.values()):.1f} | {sum(g['tsv_jobs'] for g in cats.values())} |")
    stats = res_root / "report" / "keypoint_stats.csv"
    kp = {}
    if stats.is_file():
        import csv

        with open(stats, newline="") as f:
            for row in csv.DictReader(f):
                kp[row["keypoint_set"]] = row.get("keypoints_total")
        print("keypoints per set (total over all images): " + ", ".join(f"{k} {v}" for k, v in kp.items()))
    rec = {"scenes": scenes, "standin": str(a.standin) if a.standin else None, "workdir": str(workdir),
           "wall_s": r.wall_s, "total_cpu_s": r.total_cpu_s, "cores_used": r.cores_used, "own_cpu_s": r.own_cpu_s,
           "others_cores": r.others_cores, "job_counts": r.job_counts, "categories": cats, "keypoints_total": kp}
    if a.standin:
        rec["estimate"] = estimate_116(a, r, cats, scenes)
    report["fusion"] = rec
    if a.clean:
        shutil.rmtree(workdir, ignore_errors=True)


def estimate_116(a, r, cats: dict, scenes: list[str]) -> dict:
    """Per-scene job CPU by category and the 116-scene estimate on ``a.cores`` cores (see README)."""
    n = len(scenes)
    s0 = startup_cpu(3)
    batches_n = math.ceil(n / SCENES_PER_JOB)
    batches_116 = math.ceil(HPATCHES_SCENES / SCENES_PER_JOB)
    mp_n, mp_116 = standin_pixels(a.standin, scenes)
    print(f"\nper-job start-up CPU (python -c, median of 3): descbench imports {s0['plain']:.2f} s, with torch + kornia "
          f"{s0['torch']:.2f} s; {n} scenes = {batches_n} batch(es) per (set, descriptor); 116 scenes = {batches_116}")
    print(f"mean megapixels per image: these {n} scenes {mp_n:.3f}, all 116 stand-in scenes {mp_116:.3f} "
          f"(ratio {mp_116 / mp_n:.2f})")
    print("| category | jobs | CPU s | start-up s | per scene CPU s | est. 116 scenes CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    tot116 = serial116 = 0.0
    rows = {}
    for k in sorted(cats):
        g = cats[k]
        torchy = k in ("keypoints: keynet detection", "descriptors: hardnet")
        s = s0["torch"] if torchy else s0["plain"]
        if k.startswith("once:"):
            per_scene = g["cpu_s"] / n
            est = g["cpu_s"] * HPATCHES_SCENES / n  # assumed to grow with the scenes, run on one core
            serial116 += est
            fixed = 0.0
        else:
            fixed = min(g["jobs"] * s, g["cpu_s"])
            per_scene = (g["cpu_s"] - fixed) / n
            # one job per (set, descriptor) for the distractor banks, else one per scene batch
            jobs116 = g["jobs"] if k == "scoring: distractor banks" else g["jobs"] * batches_116 / batches_n
            est = per_scene * HPATCHES_SCENES + jobs116 * s
        tot116 += est
        rows[k] = {"per_scene_cpu_s": per_scene, "startup_s": fixed, "est_116_cpu_s": est}
        print(f"| {k} | {g['jobs']} | {g['cpu_s']:.1f} | {fixed:.1f} | {per_scene:.2f} | {est:.0f} |")
    own116 = r.own_cpu_s * HPATCHES_SCENES / n
    jobs_cpu_n = sum(g["cpu_s"] for g in cats.values())
    other_n = max(0.0, r.total_cpu_s - r.own_cpu_s - jobs_cpu_n)  # shells, jobs without a log line
    other116 = other_n * HPATCHES_SCENES / n
    total116 = tot116 + own116 + other116
    wall116 = (total116 - serial116) / a.cores + serial116
    lin = r.wall_s * HPATCHES_SCENES / n
    print(f"| Snakemake's own CPU (scaled with the jobs) | | {r.own_cpu_s:.1f} | | | {own116:.0f} |")
    print(f"| other (shells, jobs without a log line) | | {other_n:.1f} | | | {other116:.0f} |")
    print(f"| **total** | | {r.total_cpu_s:.1f} | | | **{total116:.0f}** |")
    print(f"estimate for 116 scenes on {a.cores} cores: CPU {total116:.0f} s = {total116 / 3600:.2f} core-h; wall "
          f"(CPU - once-rules) / {a.cores} + once-rules = {wall116:.0f} s = {wall116 / 60:.0f} min "
          f"(x {mp_116 / mp_n:.2f} by pixels: {wall116 * mp_116 / mp_n / 60:.0f} min); the measured wall scaled "
          f"linearly: {lin / 60:.0f} min")
    return {"scenes": n, "startup_cpu_s": s0, "batches_n": batches_n, "batches_116": batches_116, "rows": rows,
            "own_cpu_116_s": own116, "other_cpu_116_s": other116, "total_cpu_116_s": total116, "serial_cpu_116_s": serial116,
            "wall_116_s": wall116, "wall_linear_116_s": lin, "mp_mean_n": mp_n, "mp_mean_116": mp_116}


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        child_main(json.loads(argv[1]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="What each figure is: the module docstring and benchmarks/README.md.")
    ap.add_argument("what", choices=("throughput", "memory", "fusion", "all"))
    ap.add_argument("--keypoints", type=int, default=4096, help="throughput: keypoints on the image (default 4096)")
    ap.add_argument("--repeats", type=int, default=3, help="throughput: timed repeats after the warm-up (default 3)")
    ap.add_argument("--threads", default="1,2", help="throughput: thread counts (default 1,2)")
    ap.add_argument("--families", default=",".join((*FAMILIES, "onnx")), help="throughput: families (default all + onnx)")
    ap.add_argument("--engines", default="eager,frozen", help="throughput: engines of the kornia families")
    ap.add_argument("--onnx-backends", default=",".join(ONNX_BACKENDS), help="throughput: onnx backends")
    ap.add_argument("--batch-mem-mb", type=float, default=None,
                    help="throughput: batch_mem_mb of the kornia families (default: the schema's, 256)")
    ap.add_argument("--no-flops", dest="flops", action="store_false", help="throughput: skip the MAC count and SGEMM")
    ap.add_argument("--memory-keypoints", type=int, default=20000, help="memory: keypoints (default 20000)")
    ap.add_argument("--batch-mem", default="16,64,256,1024", help="memory: batch_mem_mb values")
    ap.add_argument("--memory-repeats", type=int, default=1, help="memory: runs per configuration (median; default 1)")
    ap.add_argument("--memory-stages", default="net,warm,full,forward",
                    help="memory: which children: baselines net, warm (and patches: every patch sampled at once); "
                         "full = the job's path; forward = the net alone")
    ap.add_argument("--mmap-threshold", type=int, default=0, metavar="BYTES",
                    help="memory: MALLOC_MMAP_THRESHOLD_ for the children (0: unset, glibc's dynamic threshold)")
    ap.add_argument("--standin", type=Path, help="fusion: a stand-in folder (make_hpatches_standin.py) instead of the demo")
    ap.add_argument("--scenes", type=int, default=0, help="fusion: first N scenes (stand-in: balanced i_/v_ order; 0: all)")
    ap.add_argument("--sm-per-scene", type=int, default=SM_PER_SCENE,
                    help=f"fusion --standin: scale-matched keypoints per scene (default {SM_PER_SCENE})")
    ap.add_argument("--cores", type=int, default=2, help="fusion: snakemake --cores (default 2)")
    ap.add_argument("--workdir", type=Path, help="fusion: parent folder of the fresh work folder (default: a temporary one)")
    ap.add_argument("--clean", action="store_true", help="fusion: delete the work folder at the end")
    ap.add_argument("--json", type=Path, help="write every figure as JSON")
    a = ap.parse_args(argv)
    if a.standin and not a.standin.is_dir():
        ap.error(f"--standin {a.standin} is not a directory")
    report = {"machine": machine(), "argv": argv}
    print("machine: " + ", ".join(f"{k} {v}" for k, v in report["machine"].items()))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-learned-") as td:
        tmp = Path(td)
        if a.what in ("throughput", "all"):
            cmd_throughput(a, tmp, report)
        if a.what in ("memory", "all"):
            print()
            cmd_memory(a, tmp, report)
        if a.what in ("fusion", "all"):
            print()
            if a.workdir is None and not a.clean:  # keep the work folder for inspection
                a.workdir = Path(tempfile.gettempdir())
            cmd_fusion(a, tmp, report)
    print(f"\ntotal {time.monotonic() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
