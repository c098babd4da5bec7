"""The GPU check of the learned families, for a machine with a CUDA GPU (a few minutes).

For each kornia family (random weights, seed 0), through descbench's own path
(``descbench.descriptors.compute_descriptors``: patch sampling on the CPU, the network on the
device, rows back as float32):

* patches per second on ``cuda`` at each ``batch_mem_mb`` and engine, and on the CPU with the
  machine's cores, both the median of ``--repeats`` timed calls after one warm-up call;
* the rows on ``cuda`` against the rows on ``cpu`` for the same keypoints: the largest absolute
  difference of any component and the largest angle between two rows (the documented tolerance
  of a GPU run: its convolutions sum in another order);
* KeyNet detection (``descbench.keypoints.keynet``, ``num_features`` 8000 as the fusion study) in
  images per second on ``cuda`` and on the CPU's cores, and the keypoints of the two compared: how
  many, how many of the CPU's are found on the GPU at the same position (0.01 px), and the largest
  response difference among those.

    python benchmarks/gpu_check.py --json gpu.json [--keypoints 20000] [--families hardnet,sosnet]

Prints one line per measurement and writes them all to ``--json``.
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

FAMILIES = ("hardnet", "sosnet", "hynet", "hardnet8", "tfeat")


def textured_image(path: Path, w: int = 1024, h: int = 768, seed: int = 0) -> None:
    """A grey image with structure at several scales (smoothed noise), written as PNG."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(seed)
    img = np.zeros((h, w), np.float32)
    for sigma in (1.0, 3.0, 9.0):
        img += cv2.GaussianBlur(rng.standard_normal((h, w)).astype(np.float32), (0, 0), sigma) * sigma
    img = (img - img.min()) / (img.max() - img.min()) * 255
    cv2.imwrite(str(path), img.astype(np.uint8))


def keypoints(n: int, seed: int = 1):
    """``n`` keypoints on the check's 1024 x 768 image (bench_learned's distribution)."""
    from bench_learned import make_keypoints

    return make_keypoints(n, w=1024, h=768, seed=seed)


def rows_params(family: str, device: str, threads: int, engine: str, batch_mem_mb: int) -> dict:
    from descbench.descriptors import check_descriptor_params

    return check_descriptor_params(family, {"weights": "random", "device": device, "threads": threads, "engine": engine,
                                            "batch_mem_mb": batch_mem_mb}, f"descriptors.{family}.params")


def rows(family: str, image: Path, kps, device: str, threads: int, engine: str, batch_mem_mb: int):
    from descbench.descriptors import compute_descriptors

    params = rows_params(family, device, threads, engine, batch_mem_mb)
    return lambda: compute_descriptors(family, params, image, kps, {}, f"descriptors.{family}.params")


def timed(fn, repeats: int) -> tuple[float, object]:
    out = fn()  # warm-up: loads the net, compiles, allocates
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keypoints", type=int, default=20000)
    ap.add_argument("--compare-keypoints", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--batch-mem-mb", default="64,256,1024")
    ap.add_argument("--keynet-sizes", default="1024x768,1500x1200",
                    help="KeyNet images (W x H, comma-separated; empty: skip KeyNet)")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()

    import numpy as np
    import torch

    out = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "cpu_cores": os.cpu_count(), "keypoints": a.keypoints, "results": []}
    print(json.dumps({k: v for k, v in out.items() if k != "results"}), flush=True)
    if not out["cuda"]:
        print("no CUDA device: nothing to check", file=sys.stderr)
        return 1
    image = Path("/tmp/gpu_check.png")
    textured_image(image)
    kps, few = keypoints(a.keypoints), keypoints(a.compare_keypoints, seed=2)
    cores = os.cpu_count() or 1
    for family in a.families.split(","):
        for engine in ("eager", "frozen"):
            for mb in map(int, a.batch_mem_mb.split(",")):
                rec = {"family": family, "engine": engine, "device": "cuda", "batch_mem_mb": mb}
                try:
                    s, _ = timed(rows(family, image, kps, "cuda", 1, engine, mb), a.repeats)
                    rec["patches_per_s"] = a.keypoints / s
                except Exception as exc:  # noqa: BLE001 - a failure is a finding of the check: recorded, the rest goes on
                    rec["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                out["results"].append(rec)
                print(json.dumps(rec), flush=True)
        # the patch sampling alone (CPU, one thread), to tell it from the network
        from descbench.descriptors import kornia_nets as KN
        from descbench.descriptors import patch_sampling as ps

        conv = KN.convention(rows_params(family, "cuda", 1, "eager", 256))
        t0 = time.perf_counter()
        ps.sample_patches(KN.grey_image(image), kps, conv)
        rec = {"family": family, "sampling_only_patches_per_s": a.keypoints / (time.perf_counter() - t0)}
        out["results"].append(rec)
        print(json.dumps(rec), flush=True)
        s, _ = timed(rows(family, image, kps, "cpu", cores, "eager", 256), 1)
        rec = {"family": family, "engine": "eager", "device": "cpu", "threads": cores, "batch_mem_mb": 256,
               "patches_per_s": a.keypoints / s}
        out["results"].append(rec)
        print(json.dumps(rec), flush=True)
        on_gpu = rows(family, image, few, "cuda", 1, "eager", 256)()
        on_cpu = rows(family, image, few, "cpu", cores, "eager", 256)()
        cos = np.sum(on_gpu.astype(np.float64) * on_cpu, 1) / (np.linalg.norm(on_gpu, axis=1) * np.linalg.norm(on_cpu, axis=1))
        rec = {"family": family, "compare_keypoints": a.compare_keypoints,
               "max_abs_diff": float(np.max(np.abs(on_gpu - on_cpu))),
               "max_angle_deg": float(np.degrees(np.arccos(np.clip(cos.min(), -1, 1)))),
               "rows_equal": bool(np.array_equal(on_gpu, on_cpu))}
        out["results"].append(rec)
        print(json.dumps(rec), flush=True)
    for size in filter(None, a.keynet_sizes.split(",")):
        w, h = map(int, size.split("x"))
        kimage = Path(f"/tmp/gpu_check_{w}x{h}.png")
        textured_image(kimage, w, h)
        for rec in keynet_check(kimage, cores, a.repeats):
            rec["image"] = size
            out["results"].append(rec)
            print(json.dumps(rec), flush=True)
    a.json.write_text(json.dumps(out, indent=1))
    return 0


def keynet_params(device: str, threads: int) -> dict:
    """The fusion study's KeyNet (random weights, seed 1, 8000 features), validated by the config schema."""
    from descbench.config import validate_config

    cfg = {"keypoint_sets": {"k": {"detector": "keynet", "params": {"device": device, "threads": threads, "weights": "random",
                                                                      "weights_seed": 1, "num_features": 8000}}},
           "descriptors": {"d": {"family": "sift"}}}
    return validate_config(cfg, Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml")["keypoint_sets"]["k"]["params"]


def keynet_check(image: Path, cores: int, repeats: int) -> list[dict]:
    """KeyNet images/s on cuda and on ``cores`` CPU threads, and the two keypoint lists compared."""
    import cv2
    import numpy as np
    from descbench.keypoints.keynet import KeyNetKeypointDetector

    gray = cv2.imread(str(image), cv2.IMREAD_GRAYSCALE)
    recs, found = [], {}
    for device, threads in (("cuda", 1), ("cpu", cores)):
        det = KeyNetKeypointDetector(keynet_params(device, threads))
        s, kps = timed(lambda: det.detect_keypoints(gray), repeats)
        found[device] = kps
        recs.append({"keynet": device, "threads": threads, "images_per_s": 1 / s, "keypoints": len(kps.x)})
    g, c = found["cuda"], found["cpu"]
    d = np.hypot(c.x[:, None] - g.x[None], c.y[:, None] - g.y[None]) if len(g.x) and len(c.x) else np.zeros((0, 0))
    same = d.min(1) < 0.01 if d.size else np.zeros(0, bool)
    nearest = d.argmin(1) if d.size else np.zeros(0, int)
    recs.append({"keynet": "cuda_vs_cpu", "keypoints_cuda": len(g.x), "keypoints_cpu": len(c.x),
                 "cpu_found_on_cuda": int(same.sum()),
                 "max_response_diff": float(np.max(np.abs(c.response[same] - g.response[nearest[same]]))) if same.any() else None,
                 "equal": bool(len(g.x) == len(c.x) and np.array_equal(g.x, c.x) and np.array_equal(g.y, c.y))})
    return recs


if __name__ == "__main__":
    sys.exit(main())
