"""One epoch's evaluation in a training loop: ``descbench.api.evaluate_patches`` on a patch set the size
of hpatches-benchmark's split ``a`` test set, with kornia's HardNet (random weights) on the CPU.

A script, not a test (pytest does not collect it; it only reports). It writes a synthetic patch
dataset in hpatches-release's layout (``--sequences`` sequences named as split ``a``'s test list,
16 strips of ``--patches`` 65 x 65 patches: smooth random textures, each jittered strip the
reference plus noise growing with the jitter), then times one call of ``evaluate_patches(net,
split="a")`` with every hpatches-benchmark task at the config's defaults (1e6 verification pairs
per list, 10,000 retrieval queries x 20,000 distractors), and separately the seconds spent inside
the network (a forward hook), so the report splits the epoch into describing and the rest.

    python benchmarks/bench_evaluate_patches.py --out /tmp/bench_ep            # 40 x 2,000 patches
    python benchmarks/bench_evaluate_patches.py --patches 200 --out /tmp/small  # a quick look

hpatches-release holds 3.7 M patches in 116 sequences (about 2,000 per strip on average), so split
``a``'s 40 test sequences are about 1.28 M patches: the default.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np


def write_dataset(root: Path, sequences: list[str], n: int, seed: int = 0) -> None:
    import cv2

    from descbench.patches import PATCH_TYPES
    from descbench.patches.layout import strip_path, write_strip

    rng = np.random.default_rng(seed)
    for seq in sequences:
        noise = rng.normal(0.0, 1.0, (n, 65, 65)).astype(np.float32)
        base = cv2.GaussianBlur(noise.reshape(n * 65, 65), (0, 0), 2.0).reshape(n, 65, 65)  # one pass: the strip
        base = (base - base.min(axis=(1, 2), keepdims=True)) / np.ptp(base, axis=(1, 2), keepdims=True)
        for t in PATCH_TYPES:
            sigma = 0.0 if t == "ref" else {"e": 0.05, "h": 0.1, "t": 0.2}[t[0]] * (1 + int(t[1]) / 5)
            strip = np.clip(255 * (base + rng.normal(0.0, sigma, base.shape)), 0, 255).astype(np.uint8)
            write_strip(strip_path(root / seq, t), strip)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequences", type=int, default=40)
    ap.add_argument("--patches", type=int, default=2000, help="patches per strip")
    ap.add_argument("--out", type=Path, required=True, help="folder for the synthetic dataset and the results")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    import kornia
    import torch

    from descbench import api
    from descbench.patches.hpbench import load_splits

    names = load_splits()["a"]["test"][: a.sequences]
    data = a.out / "patches"
    if not (data / names[-1] / "t5.png").exists():
        t = time.perf_counter()
        write_dataset(data, names, a.patches)
        print(f"dataset: {len(names)} sequences x 16 strips x {a.patches} patches in {time.perf_counter() - t:.1f} s")
    torch.manual_seed(0)
    net = kornia.feature.HardNet(pretrained=False)
    inside = [0.0]
    start = {}
    net.register_forward_pre_hook(lambda m, x: start.__setitem__("t", time.perf_counter()))
    net.register_forward_hook(lambda m, x, y: inside.__setitem__(0, inside[0] + time.perf_counter() - start["t"]))
    t0, c0 = time.perf_counter(), time.process_time()
    table = api.evaluate_patches(net, split="a", source=data, like="hardnet", name="hardnet", progress=False,
                                 out_dir=a.out / "results")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = len(names) * 16 * a.patches
    out = {"sequences": len(names), "patches_per_strip": a.patches, "patches": n, "wall_s": round(wall, 1),
           "cpu_s": round(cpu, 1), "network_s": round(inside[0], 1), "patches_per_s_network": round(n / inside[0]),
           "rest_s": round(wall - inside[0], 1), "peak_rss_mb": round(rss), "torch_threads": torch.get_num_threads(),
           "matching_map": float(table.loc[0, "matching_map"])}
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
