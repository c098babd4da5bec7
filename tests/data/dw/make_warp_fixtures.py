"""Builds ``opencv46_warp.npz``: C++ OpenCV's ``cv::warpAffine(INTER_LINEAR, BORDER_REPLICATE)`` of
uint8 grey images for random matrices, so that ``descbench.descriptors.cv_warp`` (OpenCV 4.6-4.10's
fixed-point warp) is compared with the C++ library bit for bit without a build
(``tests/descbench/descriptors/test_cv_warp.py``).

    PYTHONPATH=workflow python tests/data/dw/make_warp_fixtures.py

``dw_warp.cpp`` (descbench's own harness) calls ``warpAffine`` once per matrix. Build (g++ 12.2,
Debian 12 ``libopencv-dev`` 4.6.0; the generator runs it)::

    g++ -std=c++17 -O2 $(pkg-config --cflags opencv4) tests/data/dw/dw_warp.cpp -o dw_warp \\
        $(pkg-config --libs opencv4)

Cases (``<case>`` below), each an image, a patch side n and forward matrices (rotation uniform
[0, 2 pi) for 3 in 4 of them, else 0; scale exp(uniform [log 0.3, log 5]); a centre anywhere within
12 px of the image, so many patches cross the border; moved to (n/2, n/2) plus uniform [-1, 1) px):

* ``noise``: 48 x 64 uniform noise (``default_rng(40)``), n = 16, 200 matrices;
* ``tiny``: 5 x 7 uniform noise (``default_rng(41)``), n = 8, 100 matrices (every patch mostly border);
* ``tie``: a 0 | 255 step at column 1 of a 4 x 8 image, n = 4, the matrix ``[[2048, 0, -29], [0, 1, 0]]``,
  whose 1/1024 px positions land on cvRound's halves (ties to even).

Arrays: ``<case>__image`` (uint8 H x W), ``<case>__m`` (K x 2 x 3 float64), ``<case>__u8`` (K x n x n
uint8), ``meta`` (one JSON string: OpenCV version, compiler).
"""

from __future__ import annotations

import json
import math
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "opencv46_warp.npz"


def random_matrices(rng: np.random.Generator, count: int, w: int, h: int, n: int) -> np.ndarray:
    """The module docstring's forward matrices."""
    out = np.empty((count, 2, 3))
    for i in range(count):
        a = rng.uniform(0, 2 * math.pi) if i % 4 else 0.0
        s = math.exp(rng.uniform(math.log(0.3), math.log(5)))
        c, sn = math.cos(a) * s, math.sin(a) * s
        x, y = rng.uniform(-12, w + 12), rng.uniform(-12, h + 12)
        tx, ty = n / 2 + rng.uniform(-1, 1), n / 2 + rng.uniform(-1, 1)
        out[i] = [[c, sn, tx - c * x - sn * y], [-sn, c, ty + sn * x - c * y]]
    return out


def cases() -> dict[str, tuple[np.ndarray, int, np.ndarray]]:
    noise = np.random.default_rng(40).integers(0, 256, (48, 64), dtype=np.uint8)
    tiny = np.random.default_rng(41).integers(0, 256, (5, 7), dtype=np.uint8)
    step = np.zeros((4, 8), np.uint8)
    step[:, 1:] = 255
    return {"noise": (noise, 16, random_matrices(np.random.default_rng(42), 200, 64, 48, 16)),
            "tiny": (tiny, 8, random_matrices(np.random.default_rng(43), 100, 7, 5, 8)),
            "tie": (step, 4, np.array([[[2048.0, 0, -29], [0, 1, 0]]]))}


def build(tmp: Path) -> Path:
    exe = tmp / "dw_warp"
    cflags = subprocess.run(["pkg-config", "--cflags", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(["g++", "-std=c++17", "-O2", *cflags, str(HERE / "dw_warp.cpp"), "-o", str(exe), *libs], check=True)
    return exe


def run(exe: Path, tmp: Path, image: np.ndarray, n: int, ms: np.ndarray) -> np.ndarray:
    src, dst = tmp / "in.bin", tmp / "out.bin"
    h, w = image.shape
    src.write_bytes(np.array([h, w, n, len(ms)], np.int32).tobytes() + np.ascontiguousarray(image).tobytes()
                    + np.ascontiguousarray(ms, np.float64).tobytes())
    subprocess.run([str(exe), str(src), str(dst)], check=True)
    return np.fromfile(dst, np.uint8).reshape(len(ms), n, n)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        exe = build(tmp)
        arrays = {}
        for name, (image, n, ms) in cases().items():
            arrays[f"{name}__image"], arrays[f"{name}__m"] = image, ms
            arrays[f"{name}__u8"] = run(exe, tmp, image, n, ms)
        version = subprocess.run(["pkg-config", "--modversion", "opencv4"], check=True, capture_output=True,
                                 text=True).stdout.strip()
        gxx = subprocess.run(["g++", "--version"], check=True, capture_output=True, text=True).stdout.splitlines()[0]
    meta = {"opencv": version, "compiler": gxx, "machine": platform.machine(), "harness": "dw_warp.cpp"}
    np.savez_compressed(OUT, meta=np.array([json.dumps(meta)]), **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): OpenCV {version}")


if __name__ == "__main__":
    main()
