"""SURF benchmark: descbench's numba SURF (detect + describe) against OpenCV SIFT (detect + compute)
on one 800 x 600 grey image.

A script, not a test (pytest does not collect it; it never fails on a missed target). The
image is image 1 of a demo scene (a scikit-image photograph, ``--scene``) resized to 800 x 600
with ``cv2.INTER_CUBIC``, or ``--synthetic`` a seeded random texture (smoothed noise). The first
SURF call is timed separately: it includes numba's compilation, or loading its on-disk cache
(``cache=True``) when an earlier run left one. Then SURF and SIFT are timed alternately,
``--repeats`` times, and the medians (and bests) are printed with their ratio. Target: SURF
within 3x of SIFT's time.

OpenCV runs with its default thread count unless ``--cv-threads`` is given; the numba kernels
are single-threaded, so ``--cv-threads 1`` is the like-for-like comparison.

    python benchmarks/bench_surf.py                    # v_camera, 7 repeats
    python benchmarks/bench_surf.py --synthetic --repeats 11 --cv-threads 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

TARGET = 3.0


def bench_image(scene: str, synthetic: bool) -> np.ndarray:
    import cv2

    if synthetic:
        rng = np.random.default_rng(0)
        noise = rng.normal(0, 1, size=(600, 800)).astype(np.float32)
        tex = sum(cv2.GaussianBlur(noise, (0, 0), s) * s for s in (1.5, 3.0, 6.0))
        tex = (tex - tex.min()) / (tex.max() - tex.min()) * 255
        return tex.astype(np.uint8)
    from descbench.datasets.demo import source_image

    img = cv2.cvtColor(source_image(scene), cv2.COLOR_BGR2GRAY)
    return cv2.resize(img, (800, 600), interpolation=cv2.INTER_CUBIC)


def surf_once(gray: np.ndarray, extended: bool):
    from descbench.descriptors.surf_kernels import surf_describe
    from descbench.keypoints.surf import detect_surf

    k = detect_surf(gray)
    d = surf_describe(gray, k.x, k.y, k.size, extended=extended)
    return len(k), d


def sift_once(gray: np.ndarray, sift):
    kps, d = sift.detectAndCompute(gray, None)
    return len(kps), d


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(argv=None) -> dict:
    import cv2

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default="v_camera")
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--extended", action="store_true", help="128-D SURF")
    ap.add_argument("--cv-threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    if args.cv_threads is not None:
        cv2.setNumThreads(args.cv_threads)
    gray = bench_image(args.scene, args.synthetic)
    sift = cv2.SIFT_create()

    t_first, (n_surf, _) = timed(surf_once, gray, args.extended)
    sift_once(gray, sift)  # warm-up (OpenCV allocations)
    surf_t, sift_t = [], []
    for _ in range(args.repeats):
        t, (n_surf, _) = timed(surf_once, gray, args.extended)
        surf_t.append(t)
        t, (n_sift, _) = timed(sift_once, gray, sift)
        sift_t.append(t)
    res = {
        "image": "synthetic" if args.synthetic else f"{args.scene} resized", "shape": list(gray.shape),
        "opencv": cv2.__version__, "cv_threads": cv2.getNumThreads(),
        "surf_first_call_ms": 1e3 * t_first,
        "surf_median_ms": 1e3 * statistics.median(surf_t), "surf_best_ms": 1e3 * min(surf_t),
        "sift_median_ms": 1e3 * statistics.median(sift_t), "sift_best_ms": 1e3 * min(sift_t),
        "surf_keypoints": n_surf, "sift_keypoints": n_sift, "extended": args.extended,
    }
    res["ratio_median"] = res["surf_median_ms"] / res["sift_median_ms"]
    print(f"image {res['image']} {gray.shape[1]}x{gray.shape[0]}, OpenCV {cv2.__version__} ({res['cv_threads']} threads)")
    print(f"SURF first call (numba compile or cache load): {res['surf_first_call_ms']:.0f} ms")
    print(f"SURF detect+describe: median {res['surf_median_ms']:.1f} ms, best {res['surf_best_ms']:.1f} ms, "
          f"{n_surf} keypoints ({128 if args.extended else 64}-D)")
    print(f"SIFT detect+compute:  median {res['sift_median_ms']:.1f} ms, best {res['sift_best_ms']:.1f} ms, {n_sift} keypoints")
    print(f"ratio SURF/SIFT (median): {res['ratio_median']:.2f} (target <= {TARGET}: "
          f"{'met' if res['ratio_median'] <= TARGET else 'MISSED'})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
    return res


if __name__ == "__main__":
    main()
