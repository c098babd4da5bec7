"""Downscale a folder of HPatches-layout scenes (1.ppm..6.ppm, H_1_2..H_1_6) by a factor.

Used to measure Snakemake's own cost with many short jobs (benchmarks/README.md): the same 116
scenes as the stand-in, with jobs short enough that scheduling, not the kernels, dominates.
Images are resized with OpenCV INTER_AREA; each homography becomes ``S H S^-1`` with
``S = diag(f, f, 1)``, so it maps the downscaled image 1 onto the downscaled image k.
Deterministic: the same input and factor give the same bytes.

    python benchmarks/downscale_scenes.py --src data/standin --out data/standin-small --factor 0.4
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np


def downscale_scene(src: Path, out: Path, factor: float) -> None:
    S = np.diag([factor, factor, 1.0])
    out.mkdir(parents=True, exist_ok=True)
    for i in range(1, 7):
        im = cv2.imread(str(src / f"{i}.ppm"), cv2.IMREAD_COLOR)
        if im is None:
            raise SystemExit(f"cannot read {src / f'{i}.ppm'}")
        size = (round(im.shape[1] * factor), round(im.shape[0] * factor))
        cv2.imwrite(str(out / f"{i}.ppm"), cv2.resize(im, size, interpolation=cv2.INTER_AREA))
    for i in range(2, 7):
        H = np.loadtxt(src / f"H_1_{i}")
        np.savetxt(out / f"H_1_{i}", S @ H @ np.linalg.inv(S))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, required=True, help="folder of scene folders")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--factor", type=float, default=0.4)
    a = ap.parse_args()
    scenes = sorted(p for p in a.src.iterdir() if p.is_dir())
    for sc in scenes:
        downscale_scene(sc, a.out / sc.name, a.factor)
    print(f"{len(scenes)} scenes written to {a.out} at factor {a.factor}")


if __name__ == "__main__":
    main()
