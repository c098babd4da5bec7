#!/usr/bin/env python
"""Write a synthetic, full-HPatches-sized stand-in for the HPatches sequences.

Run as a script (nothing is downloaded; the photographs come with scikit-image)::

    python benchmarks/make_hpatches_standin.py --out data/standin            # 116 scenes
    python benchmarks/make_hpatches_standin.py --out /tmp/s6 --scenes 6 --jobs 2
    python benchmarks/make_hpatches_standin.py --out /tmp/s6 --scenes 6 --report-keypoints

Layout: ``<out>/<scene>/1.ppm .. 6.ppm`` and ``H_1_2 .. H_1_6``, the HPatches sequence layout,
so the workflow reads it with ``dataset: folder``. Scene names are the 116 real HPatches names
(``descbench/data/hpatches_scenes.json``); ``--scenes N`` takes the first N of a balanced list
that alternates i_ and v_ names.

How a scene is made (the sequence generator is the demo's, ``descbench.datasets.demo``):

* **Image 1** is a collage on a canvas of the scene's size: a grid of cells, each a random crop
  of one of the photographs bundled with scikit-image, upscaled by a random zoom in
  [``ZOOM_MIN``, ``ZOOM_MAX``] (cubic), randomly mirrored. Why a collage and not one upscaled
  photograph: the bundled photographs are 300-1000 px and their SIFT keypoint density spans
  20-22,000 per megapixel, so one photograph stretched to HPatches size gives either a few
  hundred or 20,000+ keypoints. Cells of 350-650 px mix textures as a real scene does and keep
  the count per image in a realistic band (see ``--report-keypoints``); cells are about
  HPatches-object sized, and the grid grows with the canvas, so a larger image has more
  keypoints, as in HPatches.
* **Images 2..6** are drawn exactly as in the demo: ``v_*`` a random homography of growing
  severity (``demo._random_homography``, warp + noise), ``i_*`` a photometric change of growing
  strength with identity homography (``demo._photometric``).

Image sizes (HPatches images vary; most are 700-1000 px wide and 500-800 high, a few are much
larger). The distribution used, per scene, drawn from the scene's RNG:

* the 8 sequences that the D2-Net convention drops for being larger than 1600 x 1200
  (``LARGE_SCENES``: i_contruction i_crownnight i_dc i_pencils i_whitebuilding v_artisans
  v_astronautis v_talent) get a width uniform in [1620, 1900] px and a 4:3 aspect
  (height 1215-1425), so each is larger than 1600 x 1200 in both sides;
* every other scene gets a width uniform in [700, 1000] px and an aspect (width / height) drawn
  from 4:3 (60 %), 3:2 (25 %) and 5:4 (15 %); one scene in ten is portrait (sides swapped);
  the height is clipped to [500, 800] px when landscape.

All six images of a scene have image 1's size (as in the demo; real HPatches v_ sequences
sometimes differ by a few pixels, which does not change the cost).

Determinism: every random draw of a scene comes from ``demo.scene_rng("standin:<scene>", seed)``
(SHA-256 of seed and name, never Python's ``hash``), scenes do not share RNG state, and OpenCV
runs single-threaded in each worker, so the same ``--seed`` gives the same bytes whatever
``--jobs`` is. Files are written atomically by the writers the demo uses.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))  # the package next to this script, not an installed one

from descbench.datasets import demo  # noqa: E402
from descbench.datasets.hpatches import TARGET_IMAGES  # noqa: E402  (an HPatches stand-in: its 6-image shape)
from descbench.datasets.layout import write_homography  # noqa: E402

#: The 8 HPatches sequences larger than 1600 x 1200 (the D2-Net subset drops them).
LARGE_SCENES = frozenset({
    "i_contruction", "i_crownnight", "i_dc", "i_pencils", "i_whitebuilding",
    "v_artisans", "v_astronautis", "v_talent",
})

#: Photographs bundled with scikit-image (no download), in two groups by SIFT keypoint density
#: (measured with OpenCV SIFT at zoom 1.5: "dense" 6,000-26,000 per megapixel, "sparse"
#: 450-5,000). A collage cell is drawn from the dense group with the scene's probability
#: ``dense_fraction``, which sets the scene's keypoint density (see ``collage``). Nearly
#: textureless photographs (clock, retina, cell, colorwheel: < 100 per megapixel) are left out.
DENSE_PHOTOS = ("coins", "grass", "gravel", "immunohistochemistry", "page", "stereo_motorcycle")
SPARSE_PHOTOS = ("astronaut", "brick", "camera", "chelsea", "coffee", "hubble_deep_field",
                 "moon", "rocket", "text", "logo")

ZOOM_MIN, ZOOM_MAX = 1.0, 2.0
#: A collage cell is about this many pixels on a side (drawn per scene). Small enough that a
#: typical image has 6-15 cells, so its keypoint count averages over several photographs.
CELL_MIN, CELL_MAX = 200, 350
#: Range of a scene's ``dense_fraction`` (uniform), for typical and for large scenes. The large
#: scenes have 3-4x the pixels, so a lower density keeps them near the top of the keypoint range
#: the issue's stand-in had (~14k) instead of far above it; the floor of 0.1 for typical scenes
#: keeps them above ~1k keypoints.
DENSE_RANGE, DENSE_RANGE_LARGE = (0.1, 0.6), (0.0, 0.12)


def hpatches_names() -> list[str]:
    """The 116 real HPatches sequence names (57 i_, 59 v_), in the package's order."""
    data = json.loads((ROOT / "workflow" / "descbench" / "data" / "hpatches_scenes.json").read_text())
    return list(data["full"])


def balanced_names(names: list[str]) -> list[str]:
    """i_ and v_ names alternated (i, v, i, v, ...), the longer list's rest at the end.

    The first N of this list is a balanced subset for small runs.
    """
    i_names = [s for s in names if s.startswith("i_")]
    v_names = [s for s in names if s.startswith("v_")]
    out = []
    for a, b in zip(i_names, v_names):
        out += [a, b]
    n = min(len(i_names), len(v_names))
    return out + i_names[n:] + v_names[n:]


def scene_size(scene: str, rng: np.random.Generator) -> tuple[int, int]:
    """(width, height) of a scene's images, drawn as described in the module docstring."""
    if scene in LARGE_SCENES:
        w = int(rng.integers(1620, 1901))
        return w, round(w * 3 / 4)
    w = int(rng.integers(700, 1001))
    aspect = float(rng.choice([4 / 3, 3 / 2, 5 / 4], p=[0.6, 0.25, 0.15]))
    h = int(np.clip(round(w / aspect), 500, 800))
    if rng.random() < 0.1:
        w, h = h, w
    return w, h


@lru_cache(maxsize=None)
def photo(name: str) -> np.ndarray:
    """A scikit-image photograph as BGR uint8 (grey replicated, alpha dropped), like the demo."""
    import cv2
    import skimage.data

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo_motorcycle: (left, right, disparity)
        img = img[0]
    img = np.asarray(img)
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    return cv2.cvtColor(np.ascontiguousarray(img[..., :3]), cv2.COLOR_RGB2BGR)


def collage_cell(w: int, h: int, dense_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """One w x h cell: a random crop of a random photograph, zoomed and maybe mirrored.

    The photograph is from ``DENSE_PHOTOS`` with probability ``dense_fraction``, else from
    ``SPARSE_PHOTOS``.
    """
    import cv2

    group = DENSE_PHOTOS if rng.random() < dense_fraction else SPARSE_PHOTOS
    src = photo(group[int(rng.integers(len(group)))])
    sh, sw = src.shape[:2]
    # at least the zoom that makes the photograph cover the cell
    zoom = max(float(rng.uniform(ZOOM_MIN, ZOOM_MAX)), w / sw, h / sh)
    zw, zh = max(w, math.ceil(sw * zoom)), max(h, math.ceil(sh * zoom))
    big = cv2.resize(src, (zw, zh), interpolation=cv2.INTER_CUBIC)
    x0 = int(rng.integers(0, zw - w + 1))
    y0 = int(rng.integers(0, zh - h + 1))
    cell = big[y0:y0 + h, x0:x0 + w]
    if rng.random() < 0.5:
        cell = cell[:, ::-1]
    return cell


def collage(w: int, h: int, dense_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Image 1 of a scene: a grid of collage cells covering a w x h canvas."""
    cell = float(rng.uniform(CELL_MIN, CELL_MAX))
    cols, rows = max(1, round(w / cell)), max(1, round(h / cell))
    xs = np.linspace(0, w, cols + 1).round().astype(int)
    ys = np.linspace(0, h, rows + 1).round().astype(int)
    img = np.empty((h, w, 3), np.uint8)
    for r in range(rows):
        for c in range(cols):
            img[ys[r]:ys[r + 1], xs[c]:xs[c + 1]] = collage_cell(xs[c + 1] - xs[c], ys[r + 1] - ys[r], dense_fraction, rng)
    return np.ascontiguousarray(img)


def generate_scene(scene: str, out: Path, seed: int) -> tuple[str, int, int]:
    """Write one stand-in scene under ``out/<scene>``; returns (scene, width, height).

    Images 2..6 and the homographies are made with the demo's own functions, in the order
    ``demo.generate_scene`` uses them.
    """
    import cv2

    cv2.setNumThreads(1)  # same bytes whatever the number of workers, and no oversubscription
    rng = demo.scene_rng(f"standin:{scene}", seed)
    w, h = scene_size(scene, rng)
    dense_fraction = float(rng.uniform(*(DENSE_RANGE_LARGE if scene in LARGE_SCENES else DENSE_RANGE)))
    img1 = collage(w, h, dense_fraction, rng)
    scene_dir = out / scene
    scene_dir.mkdir(parents=True, exist_ok=True)
    demo._write_image(scene_dir / "1.ppm", img1)
    for k in TARGET_IMAGES:
        if scene.startswith("v_"):
            H = demo._random_homography(w, h, k, rng)
            img = demo._add_noise(demo._warp(img1, H), rng)
        else:
            H = np.eye(3)
            img = demo._photometric(img1, k, rng)
        demo._write_image(scene_dir / f"{k}.ppm", img)
        write_homography(scene_dir / f"H_1_{k}", H)
    return scene, w, h


def sift_counts(scene_dir: Path) -> list[int]:
    """OpenCV SIFT keypoint counts (default parameters, no border rule) of a scene's 6 images."""
    import cv2

    sift = cv2.SIFT_create()
    return [len(sift.detect(cv2.imread(str(scene_dir / f"{k}.ppm"), cv2.IMREAD_GRAYSCALE), None)) for k in range(1, 7)]


def _job(args: tuple[str, str, int, bool]) -> dict:
    scene, out, seed, count = args
    t0 = time.perf_counter()
    name, w, h = generate_scene(scene, Path(out), seed)
    rec = {"scene": name, "width": w, "height": h, "seconds": time.perf_counter() - t0}
    if count:
        rec["sift_keypoints"] = sift_counts(Path(out) / scene)
    return rec


def summarise(records: list[dict]) -> str:
    """Size and (if counted) keypoint-count distribution, as printable lines."""
    px = np.array([r["width"] * r["height"] for r in records]) / 1e6
    lines = [
        f"{len(records)} scenes ({sum(r['scene'].startswith('i_') for r in records)} i_, "
        f"{sum(r['scene'].startswith('v_') for r in records)} v_)",
        f"megapixels per image: min {px.min():.2f}, median {np.median(px):.2f}, max {px.max():.2f}, "
        f"total over 6 images x scenes {6 * px.sum():.1f}",
    ]
    kp = [k for r in records for k in r.get("sift_keypoints", [])]
    if kp:
        q = np.percentile(kp, [0, 10, 50, 90, 100]).round().astype(int)
        lines.append(f"SIFT keypoints per image (OpenCV defaults, before the 40 px border rule): "
                     f"min {q[0]}, p10 {q[1]}, median {q[2]}, p90 {q[3]}, max {q[4]}, "
                     f"total {sum(kp)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (and benchmarks/README.md) for the size distribution.")
    ap.add_argument("--out", type=Path, required=True, help="folder to write <scene>/1.ppm..6.ppm, H_1_2..H_1_6 into")
    ap.add_argument("--scenes", type=int, default=116, help="first N scenes of the balanced i_/v_ list (default 116: all)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes; default 0)")
    ap.add_argument("--jobs", type=int, default=1, help="scenes generated in parallel (default 1)")
    ap.add_argument("--report-keypoints", action="store_true",
                    help="also run OpenCV SIFT on every image and print the keypoint-count distribution")
    ap.add_argument("--json", type=Path, help="write per-scene sizes (and keypoint counts) as JSON")
    args = ap.parse_args(argv)

    names = balanced_names(hpatches_names())
    if not 1 <= args.scenes <= len(names):
        ap.error(f"--scenes must be 1..{len(names)}")
    scenes = names[: args.scenes]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    jobs = [(s, str(args.out), args.seed, args.report_keypoints) for s in scenes]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            records = list(pool.map(_job, jobs))
    else:
        records = [_job(j) for j in jobs]
    print(f"wrote {len(records)} scenes to {args.out} in {time.perf_counter() - t0:.1f} s (seed {args.seed}, {args.jobs} job(s))")
    print(summarise(records))
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "scenes": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
