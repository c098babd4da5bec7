"""Patch-description throughput: ``descbench.patches.describe.describe_patches`` on random textures.

A script, not a test (pytest does not collect it; it never fails on a missed target). It builds
``--n`` seeded random-texture patches (65 x 65 tiles cut from one smoothed-noise image, sigmas
1.5, 3 and 6 mixed), describes them with each family of ``--families`` at its default support,
and prints patches/s and the extrapolation to hpatches-release (about 3.7 M patches: 116
sequences x 16 strips x ~2,000). A first call on 64 patches is timed separately (it builds
OpenCV objects and loads numba caches). ``--registry N`` also times the registry path the
results are tested against (each patch written as a PNG and described by the family's
``compute``) on N patches, for the speed-up.

One process describes on one core (OpenCV's compute on a 65 x 65 image is effectively serial; pass
``--cv-threads 1`` to make sure); the 2-core figure assumes two such jobs side by side (one per
sequence, as a workflow would run them), i.e. twice the one-core rate.

    python benchmarks/bench_patch_describe.py                        # 10,000 patches; sift, rootsift, orb
    python benchmarks/bench_patch_describe.py --n 2000 --families sift,surf,brisk,akaze --registry 200
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

HPATCHES_RELEASE_PATCHES = 3_700_000  # approximate: 116 sequences x 16 strips x ~2,000 patches


def texture_patches(n: int, seed: int = 0) -> np.ndarray:
    """``n`` 65 x 65 uint8 tiles of one seeded multi-scale smoothed-noise image (row-major tiles)."""
    import cv2

    side = int(np.ceil(np.sqrt(n)))
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 1, size=(65 * side, 65 * side)).astype(np.float32)
    tex = sum(cv2.GaussianBlur(noise, (0, 0), s) * s for s in (1.5, 3.0, 6.0))
    tex = (tex - tex.min()) / (tex.max() - tex.min()) * 255
    tiles = tex.astype(np.uint8).reshape(side, 65, side, 65).transpose(0, 2, 1, 3).reshape(-1, 65, 65)
    return np.ascontiguousarray(tiles[:n])


def registry_rate(patches: np.ndarray, family: str) -> float:
    """Patches/s of the reference path: the registry's compute on each patch saved as a PNG."""
    import cv2

    from descbench.descriptors import check_descriptor_params, get_family
    from descbench.patches.describe import centre_keypoint, default_support

    params = check_descriptor_params(family, {}, "bench")
    kps = centre_keypoint(default_support(family, params))
    fam = get_family(family)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "patch.png"
        t = time.perf_counter()
        for p in patches:
            cv2.imwrite(str(path), p)
            fam.compute(path, kps, params, {})
        return len(patches) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="patches per family (default 10000)")
    ap.add_argument("--families", default="sift,rootsift,orb", help="comma-separated families (default sift,rootsift,orb)")
    ap.add_argument("--cv-threads", type=int, default=None, help="cv2.setNumThreads (default: OpenCV's own)")
    ap.add_argument("--registry", type=int, default=0, help="also time the registry reference path on this many patches")
    ap.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    args = ap.parse_args()

    import cv2

    from descbench.patches.describe import describe_patches

    if args.cv_threads is not None:
        cv2.setNumThreads(args.cv_threads)
    patches = texture_patches(args.n)
    print(f"{args.n} random-texture patches; OpenCV {cv2.__version__}, {cv2.getNumThreads()} OpenCV threads")
    rows = []
    for family in args.families.split(","):
        t = time.perf_counter()
        describe_patches(patches[:64], family)
        first = time.perf_counter() - t
        t = time.perf_counter()
        out = describe_patches(patches, family)
        dt = time.perf_counter() - t
        rate = args.n / dt
        row = {"family": family, "n": args.n, "seconds": dt, "patches_per_s": rate, "us_per_patch": 1e6 / rate,
               "first_call_64_s": first, "dim": int(out.shape[1]), "dtype": str(out.dtype),
               "hpatches_release_minutes_1core": HPATCHES_RELEASE_PATCHES / rate / 60,
               "hpatches_release_minutes_2cores": HPATCHES_RELEASE_PATCHES / rate / 120}
        if args.registry:
            row["registry_patches_per_s"] = registry_rate(patches[:args.registry], family)
        rows.append(row)
        extra = f", registry path {row['registry_patches_per_s']:,.0f}/s" if args.registry else ""
        print(f"{family:10s} {rate:9,.0f} patches/s ({1e6 / rate:7.1f} us/patch; first 64: {first:.2f} s){extra}; "
              f"hpatches-release ~{row['hpatches_release_minutes_1core']:.1f} min on 1 core, "
              f"~{row['hpatches_release_minutes_2cores']:.1f} min on 2")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
