"""Builds ``workbench_patch_metrics.npz``: the C++ DescriptorWorkbench's own patch metrics
(``src/core/benchmark/PatchMetrics.cpp``) and patch fusion (``src/core/patches/
PatchFusionExtractor.cpp``), F-Sossi/DescriptorWorkbench commit b834e17, on small cases, read by
tests/descbench/patches/test_workbench.py.

    python tests/data/dw/make_patch_metrics.py --dwb <workbench checkout (its src/ is used)>

needs g++ and OpenCV 4 (pkg-config opencv4; Debian 12's libopencv-dev 4.6 and g++ 12.2 made the
committed file). ``dw_patch_metrics.cpp`` (this folder) calls ``computeMatching``, ``computeMAP``
and ``computeFPR95`` per metrics case, and ``PatchFusionExtractor::extractFromPatches`` with
components that return fixed descriptors per fusion case.

Metrics: per case ``ref_<i>``, ``target_<i>``, ``neg_<i>`` (float32) and ``out`` [cases, 6]
float64: num_patches, correct_matches, match_accuracy, average_precision, computeMAP, computeFPR95
(the float32 results, exactly), and ``names``. Cases: random (no ties), small integers (many
distance ties, N > 16 so the introsort partitions), all rows equal, large offsets, N = 0, 1, 16, 17.

Fusion: ``fusion_names``, ``fusion_methods``, per case ``fusion_<i>_comp_<c>`` (float32 [n, d_c]),
``fusion_<i>_weights`` (float32, empty = the default) and ``fusion_<i>_out`` (the C++ result).

Whole run (``HPatchesBenchmark::run``, ``PatchLoader``): a patches folder of four sequences
written as hpatches-release strips (65 x 65N PNGs), black but for the 8 pixels per patch that the
harness's descriptor samples (row 32, columns 0, 8, .., 56), values 0..3 (ties): ``i_one`` (N = 20,
all 15 target files), ``v_two`` (N = 18, e1..e3 and h1..h5, h4 with 17 patches: skipped),
``i_three`` (N = 25, no tough files), ``v_four`` (N = 17, all), plus ``x_skip`` (not i_/v_: not
listed). Stored: ``run_scenes``, per sequence and file ``run_<seq>_<file>`` (float32 [N, 8], the
sampled values) and ``run_out_<threads>`` for num_threads 1 and 4 (float64 [13]: the 11 float32
means of Results in its order, num_scenes, num_patches).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def cases() -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2026)
    f = np.float32
    out = []

    def add(name, ref, tgt, neg):
        out.append((name, np.ascontiguousarray(ref, f), np.ascontiguousarray(tgt, f), np.ascontiguousarray(neg, f)))

    for n, d in ((40, 8), (64, 16)):
        ref = rng.normal(size=(n, d))
        add(f"normal_{n}x{d}", ref, ref + 0.8 * rng.normal(size=(n, d)), rng.normal(size=(30, d)))
    for n, d, hi in ((50, 4, 3), (100, 2, 3), (60, 3, 2), (33, 1, 4)):
        ref = rng.integers(0, hi, size=(n, d))
        tgt = np.where(rng.random((n, d)) < 0.5, ref, rng.integers(0, hi, size=(n, d)))
        add(f"ints_{n}x{d}_{hi}", ref, tgt, rng.integers(0, hi, size=(25, d)))
    add("all_equal_40", np.ones((40, 3)), np.ones((40, 3)), np.ones((7, 3)))
    ref = rng.integers(0, 2, size=(48, 2))
    add("dup_targets_48", ref, np.repeat(ref[::2], 2, axis=0), ref[:5])
    base = f(1e4)
    ref = base + rng.integers(0, 3, size=(45, 4)) * f(1e-3)
    tgt = base + rng.integers(0, 3, size=(45, 4)) * f(1e-3) + rng.normal(size=(45, 4)).astype(f) * f(3e-4)
    add("offset_1e4_45", ref, tgt, base + rng.normal(size=(20, 4)).astype(f) * f(1e-3))
    for n in (16, 17, 1):
        ref = rng.integers(0, 2, size=(n, 2))
        add(f"ints_{n}", ref, rng.integers(0, 2, size=(n, 2)), rng.integers(0, 2, size=(9, 2)))
    add("empty", np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((3, 4)))
    add("no_negatives", np.eye(20, 4), np.eye(20, 4), np.zeros((0, 4)))
    return out


METHOD_IDS = {"average": 0, "weighted_avg": 1, "max": 2, "min": 3, "concatenate": 4, "channel_wise": 5}


def fusion_cases() -> list[tuple[str, str, list[np.ndarray], np.ndarray]]:
    rng = np.random.default_rng(24)
    f = np.float32

    def comps(n, *dims, scale=1.0):
        out = [(rng.normal(size=(n, d)) * scale).astype(f) for d in dims]
        out[0][0] = 0  # row 0 of every component zero: a zero fused row (norm <= DBL_EPSILON)
        for c in out[1:]:
            c[0] = 0
        return out

    unit = comps(6, 8, 8)
    unit[0][1] = unit[1][1] = np.eye(8, dtype=f)[3]  # a row already of norm 1 (no scaling)
    return [
        ("concat_3", "concatenate", comps(20, 5, 3, 8), np.zeros(0, f)),
        ("average_2", "average", comps(20, 8, 8), np.zeros(0, f)),
        ("average_3", "average", comps(20, 8, 8, 8, scale=100.0), np.zeros(0, f)),
        ("weighted_2", "weighted_avg", comps(20, 8, 8), np.array([0.3, 0.7], f)),
        ("weighted_3", "weighted_avg", comps(20, 6, 6, 6), np.array([0.2, 0.3, 0.5], f)),
        ("weighted_default_3", "weighted_avg", comps(20, 6, 6, 6), np.zeros(0, f)),
        ("max_2", "max", comps(20, 8, 8), np.zeros(0, f)),
        ("min_3", "min", comps(20, 8, 8, 8), np.zeros(0, f)),
        ("channel_wise_4_12", "channel_wise", comps(20, 4, 12), np.zeros(0, f)),
        ("channel_wise_12_4_4", "channel_wise", comps(20, 12, 4, 4), np.zeros(0, f)),
        ("average_unit_row", "average", unit, np.zeros(0, f)),
    ]


RUN_SCENES = {"i_one": (20, [f"{j}{k}" for j in "eht" for k in range(1, 6)]),
              "v_two": (18, ["e1", "e2", "e3", "h1", "h2", "h3", "h4", "h5"]),
              "i_three": (25, [f"{j}{k}" for j in "eh" for k in range(1, 6)]),
              "v_four": (17, [f"{j}{k}" for j in "eht" for k in range(1, 6)]),
              "x_skip": (5, ["e1"])}


def run_descriptors() -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    out = {}
    for seq, (n, files) in RUN_SCENES.items():
        ref = rng.integers(0, 4, (n, 8))
        d = {"ref": ref.astype(np.float32)}
        for f in files:
            keep = rng.random((n, 8)) < {"e": 0.8, "h": 0.6, "t": 0.4}[f[0]]
            t = np.where(keep, ref, rng.integers(0, 4, (n, 8)))
            if seq == "v_two" and f == "h4":
                t = t[:-1]
            d[f] = t.astype(np.float32)
        out[seq] = d
    return out


def write_strips(root: Path, descs: dict[str, dict[str, np.ndarray]]) -> None:
    import cv2

    for seq, files in descs.items():
        (root / seq).mkdir(parents=True)
        for name, d in files.items():
            img = np.zeros((65 * d.shape[0], 65), np.uint8)
            for i in range(d.shape[0]):
                img[65 * i + 32, 0:64:8] = d[i]
            assert cv2.imwrite(str(root / seq / f"{name}.png"), img)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dwb", required=True, type=Path, help="the workbench's checkout (src/ is used)")
    ap.add_argument("--out", type=Path, default=HERE / "workbench_patch_metrics.npz")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        exe = tmp / "dw_patch_metrics"
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "opencv4"], check=True,
                               capture_output=True, text=True).stdout.split()
        src = args.dwb / "src"
        subprocess.run(["g++", "-O2", "-std=c++17", f"-I{src / 'include'}", f"-I{src / 'core/benchmark'}",
                        f"-I{src / 'core/patches'}", f"-I{src / 'core'}", f"-I{src}", str(HERE / "dw_patch_metrics.cpp"),
                        str(src / "core/benchmark/PatchMetrics.cpp"), str(src / "core/patches/PatchFusionExtractor.cpp"),
                        str(src / "core/benchmark/HPatchesBenchmark.cpp"), str(src / "core/patches/PatchLoader.cpp"),
                        *flags, "-o", str(exe)], check=True)
        cs = cases()
        with open(tmp / "cases.bin", "wb") as fh:
            fh.write(np.int32(len(cs)).tobytes())
            for _, ref, tgt, neg in cs:
                fh.write(np.array([ref.shape[0], neg.shape[0], ref.shape[1]], np.int32).tobytes())
                fh.write(ref.tobytes() + tgt.tobytes() + neg.tobytes())
        subprocess.run([str(exe), "metrics", str(tmp / "cases.bin"), str(tmp / "out.bin")], check=True)
        raw = (tmp / "out.bin").read_bytes()
        fcs = fusion_cases()
        with open(tmp / "fusion.bin", "wb") as fh:
            fh.write(np.int32(len(fcs)).tobytes())
            for _, method, parts, weights in fcs:
                fh.write(np.array([METHOD_IDS[method], len(parts), parts[0].shape[0], weights.size], np.int32).tobytes())
                for c in parts:
                    fh.write(np.int32(c.shape[1]).tobytes() + c.tobytes())
                fh.write(weights.tobytes())
        subprocess.run([str(exe), "fusion", str(tmp / "fusion.bin"), str(tmp / "fusion_out.bin")], check=True)
        fraw = (tmp / "fusion_out.bin").read_bytes()
        rdescs = run_descriptors()
        write_strips(tmp / "patches", rdescs)
        runs = {}
        for threads in (1, 4):
            subprocess.run([str(exe), "run", str(tmp / "patches"), str(threads), str(tmp / "run.bin")], check=True)
            rb = (tmp / "run.bin").read_bytes()
            runs[threads] = np.concatenate([np.frombuffer(rb, "<f4", 11).astype(np.float64),
                                            np.frombuffer(rb, "<i4", 2, 44).astype(np.float64)])
    rec = np.frombuffer(raw, dtype=np.dtype([("i", "<i4", 2), ("f", "<f4", 4)]))
    assert rec.size == len(cs)
    table = np.concatenate([rec["i"].astype(np.float64), rec["f"].astype(np.float64)], axis=1)
    arrays = {"names": np.array([c[0] for c in cs]), "out": table}
    for i, (_, ref, tgt, neg) in enumerate(cs):
        arrays[f"ref_{i}"], arrays[f"target_{i}"], arrays[f"neg_{i}"] = ref, tgt, neg
    arrays["fusion_names"] = np.array([c[0] for c in fcs])
    arrays["fusion_methods"] = np.array([c[1] for c in fcs])
    pos = 0
    for i, (_, _, parts, weights) in enumerate(fcs):
        rows, cols = np.frombuffer(fraw, "<i4", 2, pos)
        pos += 8
        arrays[f"fusion_{i}_out"] = np.frombuffer(fraw, "<f4", rows * cols, pos).reshape(rows, cols)
        pos += 4 * rows * cols
        arrays[f"fusion_{i}_weights"] = weights
        for c, comp in enumerate(parts):
            arrays[f"fusion_{i}_comp_{c}"] = comp
    assert pos == len(fraw)
    arrays["run_scenes"] = np.array(list(rdescs))
    for seq, files in rdescs.items():
        for name, d in files.items():
            arrays[f"run_{seq}_{name}"] = d
    for threads, values in runs.items():
        arrays[f"run_out_{threads}"] = values
    np.savez_compressed(args.out, **arrays)
    print(f"{args.out}: {len(cs)} cases, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
