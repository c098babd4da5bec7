"""Throughput of issue 25's feature pipelines, and its GPU check: the joint detect-and-describe
networks (images/s) and the matchers (pairs/s), through descbench's own code paths
(``descbench.keypoints.joint.runner(...).detect`` and ``descbench.matchers.run_matcher``), random
weights (seed 0), on a textured image and a warped copy of it.

    python benchmarks/bench_pipelines.py --device cpu --threads 1 --json cpu.json
    python benchmarks/bench_pipelines.py --device cuda --compare-cpu --json gpu.json   # the GPU check, < 8 min

Each figure is the median of ``--repeats`` timed calls after one warm-up call. With
``--compare-cpu`` (a CUDA machine) each network's keypoints and rows and each torch matcher's
matches on the GPU are compared with the CPU's for the same inputs: the documented tolerance of a
GPU run (its convolutions sum in another order; keypoints near a threshold may differ). Prints one
JSON line per measurement and writes them all to ``--json``. Needs torch, kornia and OpenCV
(``pip install --no-deps <wheels>`` first on a machine without them; nothing is downloaded here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

NETS = ("disk", "aliked", "xfeat", "superpoint")
# random weights: the published thresholds keep almost nothing (module docstrings); a budget instead
RANDOM_NET_PARAMS = {"disk": {"max_num_keypoints": 2048}, "aliked": {"max_num_keypoints": 2048, "detection_threshold": 0.0},
                     "xfeat": {"top_k": 2048, "detection_threshold": 0.0},
                     "superpoint": {"max_keypoints": 2048, "detection_threshold": 0.0}}
MATCHERS = {"mnn": {"matcher": "mnn"}, "nn_ratio": {"matcher": "nn", "params": {"ratio": 0.8}},
            "snn": {"matcher": "snn"}, "smnn": {"matcher": "smnn"}, "fginn": {"matcher": "fginn"},
            "adalam": {"matcher": "adalam"}, "lightglue": {"matcher": "lightglue", "params": {"features": "disk", "weights": "random"}}}
TORCH_MATCHERS = ("adalam", "lightglue")


def textured_images(folder: Path, w: int, h: int, seed: int = 0) -> tuple[Path, Path]:
    """A grey-textured colour image (smoothed noise at several scales) and a copy warped by a mild homography."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.float32)
    for sigma in (1.0, 3.0, 9.0):
        img += cv2.GaussianBlur(rng.standard_normal((h, w, 3)).astype(np.float32), (0, 0), sigma) * sigma
    img = ((img - img.min()) / (img.max() - img.min()) * 255).astype(np.uint8)
    H = np.array([[0.95, 0.05, 10.0], [-0.04, 0.97, 6.0], [2e-5, 1e-5, 1.0]])
    warped = cv2.warpPerspective(img, H, (w, h), borderMode=cv2.BORDER_REFLECT)
    a, b = folder / "a.png", folder / "b.png"
    cv2.imwrite(str(a), img)
    cv2.imwrite(str(b), warped)
    return a, b


def net_params(net: str, device: str, threads: int) -> dict:
    from descbench.keypoints.joint import definition_name
    from descbench.params import check_params, config_schema

    fragment = config_schema()["definitions"][definition_name(net)]
    given = {"weights": "random", "device": device, "threads": threads, **RANDOM_NET_PARAMS.get(net, {})}
    given = {k: v for k, v in given.items() if k in fragment["properties"]}
    return check_params(fragment, given, f"keypoint_sets.{net}.params", f"detector '{net}'")


def grey(path: Path):
    import cv2

    return cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)


def timed(fn, repeats: int) -> tuple[float, object]:
    fn()  # warm-up: first-call allocations, cuDNN autotuning
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def emit(out: dict, rec: dict) -> None:
    out["results"].append(rec)
    print(json.dumps(rec), flush=True)


def detect(net: str, device: str, threads: int, image: Path):
    from descbench.keypoints.joint import runner

    r = runner(net, net_params(net, device, threads))
    return lambda: r.detect(image, grey(image)), r


def side(kps, rows, image: Path):
    from descbench.matchers import MatchSide

    g = grey(image)
    return MatchSide(kps, rows, (g.shape[1], g.shape[0]))


def matcher_params(name: str, device: str, threads: int) -> dict:
    from descbench.matchers import check_matcher_params, get_matcher

    spec = MATCHERS[name]
    params = dict(spec.get("params", {}))
    if get_matcher(spec["matcher"]).runtime_of(check_matcher_params(spec["matcher"], params, "x")) == "torch":
        params.update(device=device, threads=threads)
    return check_matcher_params(spec["matcher"], params, f"matchers.{name}.params")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of the torch networks (cpu runs)")
    ap.add_argument("--size", default="640x480", help="image width x height")
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--matchers", default=",".join(MATCHERS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare-cpu", action="store_true", help="GPU runs: compare keypoints, rows and matches with the CPU's")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args(argv)

    import numpy as np
    import torch

    from descbench.matchers import matcher_names, run_matcher

    w, h = map(int, a.size.split("x"))
    out = {"torch": torch.__version__, "cuda": torch.cuda.is_available(), "device": a.device,
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "cpu_cores": os.cpu_count(),
           "threads": a.threads, "size": [w, h], "results": []}
    print(json.dumps({k: v for k, v in out.items() if k != "results"}), flush=True)
    if a.device == "cuda" and not out["cuda"]:
        print("no CUDA device: nothing to check", file=sys.stderr)
        return 1
    folder = Path("/tmp/bench_pipelines")
    folder.mkdir(exist_ok=True)
    img_a, img_b = textured_images(folder, w, h)
    cpu_threads = os.cpu_count() or 1
    feats = {}
    from descbench.keypoints.joint import NETS as KNOWN

    for net in [n for n in a.nets.split(",") if n]:
        if net not in KNOWN:
            emit(out, {"net": net, "error": "not a joint network of this checkout"})
            continue
        try:
            fn, r = detect(net, a.device, a.threads, img_a)
            s, (kps, rows) = timed(fn, a.repeats)
            emit(out, {"net": net, "device": a.device, "threads": a.threads, "images_per_s": 1.0 / s, "keypoints": len(kps),
                       "dim": int(rows.shape[1])})
            kb, rb = r.detect(img_b, grey(img_b))
            feats[net] = (kps, rows, kb, rb)
            if a.compare_cpu and a.device == "cuda":
                cfn, cr = detect(net, "cpu", cpu_threads, img_a)
                ckps, crows = cfn()
                same = len(ckps) == len(kps) and np.array_equal(ckps.x, kps.x) and np.array_equal(ckps.y, kps.y)
                on_cpu_kps = r.describe(img_a, grey(img_a), ckps)  # the GPU's rows at the CPU's keypoints
                emit(out, {"net": net, "compare": "cuda_vs_cpu", "keypoints_cuda": len(kps), "keypoints_cpu": len(ckps),
                           "keypoints_equal": bool(same),
                           "rows_max_abs_diff": float(np.max(np.abs(on_cpu_kps - crows))) if len(ckps) else 0.0})
        except Exception as exc:  # noqa: BLE001 - a failure is a finding: recorded, the rest goes on
            emit(out, {"net": net, "device": a.device, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    base = feats.get("disk") or next(iter(feats.values()), None)
    for name in [m for m in a.matchers.split(",") if m]:
        if base is None or MATCHERS[name]["matcher"] not in matcher_names():
            emit(out, {"matcher": name, "error": "no features, or not a matcher of this checkout"})
            continue
        if a.device == "cuda" and name not in TORCH_MATCHERS:
            continue  # numpy matchers: nothing to do on a GPU
        kps, rows, kb, rb = base
        sa, sb = side(kps, rows, img_a), side(kb, rb, img_b)
        try:
            spec = MATCHERS[name]
            params = matcher_params(name, a.device, a.threads)
            s, m = timed(lambda: run_matcher(spec["matcher"], params, sa, sb, name), a.repeats)
            emit(out, {"matcher": name, "device": a.device, "pairs_per_s": 1.0 / s, "keypoints": [len(sa), len(sb)],
                       "matches": len(m)})
            if a.compare_cpu and a.device == "cuda":
                mc = run_matcher(spec["matcher"], matcher_params(name, "cpu", cpu_threads), sa, sb, name)
                pairs_gpu = set(zip(m.idx_a.tolist(), m.idx_b.tolist()))
                pairs_cpu = set(zip(mc.idx_a.tolist(), mc.idx_b.tolist()))
                emit(out, {"matcher": name, "compare": "cuda_vs_cpu", "matches_cuda": len(m), "matches_cpu": len(mc),
                           "jaccard": len(pairs_gpu & pairs_cpu) / max(len(pairs_gpu | pairs_cpu), 1)})
        except Exception as exc:  # noqa: BLE001
            emit(out, {"matcher": name, "device": a.device, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
