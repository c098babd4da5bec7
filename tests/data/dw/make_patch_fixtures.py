"""Builds ``workbench_patches.npz``: the C++ DescriptorWorkbench's patch arithmetic (its
``LibTorchWrapper`` and ``DNNPatchWrapper``, commit b834e17) run with OpenCV's C++ library, so that
``descbench.descriptors.patch_sampling`` can be compared with it bit for bit without a build.

    PYTHONPATH=workflow python tests/data/dw/make_patch_fixtures.py

``dw_patches.cpp`` (descbench's own harness) writes the wrappers' arithmetic with the same OpenCV
calls (``getRotationMatrix2D``, the matrix edits, ``warpAffine``, ``convertTo``, ``meanStdDev``,
the matrix expressions of the standardisation); the workbench's wrappers themselves need LibTorch
and an ONNX model to be built. Build (g++ 12.2, Debian 12 ``libopencv-dev`` 4.6.0)::

    g++ -std=c++17 -O2 -ffp-contract=off $(pkg-config --cflags opencv4) tests/data/dw/dw_patches.cpp \\
        -o dw_patches $(pkg-config --libs opencv4)

``meta["variant_march_native"]`` records how many matrices / uint8 patches change when the harness
is built as the workbench's CMake builds (``-O2 -march=native``: g++ may fuse the translation's
multiply-subtracts into FMAs on a CPU that has them).

Input: a 96 x 128 grey texture (blurred uniform noise, ``default_rng(24)``) with a flat 24 x 24 block
(value 200) at x, y in [8, 32) (flat patches: sigma 0). Keypoints (float32 x, y, size, angle):
4,000 candidates (``default_rng(25)``: x, y uniform over the image, size uniform [1, 64), angle -1,
0 or uniform [0, 360)), of which the first 24 whose two wrappers' uint8 patches differ by
descbench's matrices ("orders differ"), the first 24 others, and 4 fixed ones: in the flat block
(sizes 2 and 0.5: a flat patch, the LibTorch size clamp) and 2 at the image corner.

Arrays (N keypoints, n = 32): ``image`` (uint8 H x W), ``keypoints`` (N x 4 float32), ``m_libtorch``
/ ``m_dnn`` (N x 2 x 3 float64), ``u8_libtorch`` / ``u8_dnn`` (N x n x n uint8), ``libtorch_per_patch``,
``libtorch_imagenet``, ``dnn_none``, ``dnn_per_patch``, ``dnn_mean_std`` (N x n x n float32; mean_std
with mean 0.5, std 0.25), ``meta`` (one JSON string).
"""

from __future__ import annotations

import json
import platform
import subprocess
import tempfile
from pathlib import Path

import cv2
import numpy as np

from descbench.descriptors import patch_sampling as ps
from descbench.keypoints import ImageKeypoints

HERE = Path(__file__).resolve().parent
N = 32


def build(out: Path, flags: list[str]) -> list[str]:
    cflags = subprocess.run(["pkg-config", "--cflags", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    cmd = ["g++", "-std=c++17", *flags, *cflags, str(HERE / "dw_patches.cpp"), "-o", str(out), *libs]
    subprocess.run(cmd, check=True)
    return cmd


def run(exe: Path, png: Path, kps: np.ndarray) -> dict:
    txt = png.with_suffix(".txt")
    txt.write_text("".join(" ".join(float(v).hex() for v in row) + "\n" for row in kps))
    raw = subprocess.run([str(exe), str(png), str(txt), str(N)], check=True, capture_output=True).stdout
    per = 2 * (48 + N * N) + 5 * 4 * N * N
    assert len(raw) == per * len(kps), (len(raw), per, len(kps))
    out = {k: [] for k in ("m_libtorch", "u8_libtorch", "m_dnn", "u8_dnn", "libtorch_per_patch", "libtorch_imagenet",
                           "dnn_none", "dnn_per_patch", "dnn_mean_std")}
    pos = 0
    for _ in range(len(kps)):
        for w in ("libtorch", "dnn"):
            out[f"m_{w}"].append(np.frombuffer(raw, np.float64, 6, pos).reshape(2, 3)); pos += 48  # noqa: E702
            out[f"u8_{w}"].append(np.frombuffer(raw, np.uint8, N * N, pos).reshape(N, N)); pos += N * N  # noqa: E702
        for k in ("libtorch_per_patch", "libtorch_imagenet", "dnn_none", "dnn_per_patch", "dnn_mean_std"):
            out[k].append(np.frombuffer(raw, np.float32, N * N, pos).reshape(N, N)); pos += 4 * N * N  # noqa: E702
    return {k: np.stack(v) for k, v in out.items()}


def as_kps(a: np.ndarray) -> ImageKeypoints:
    n = len(a)
    return ImageKeypoints(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.zeros(n, np.float32), np.zeros(n, np.int32),
                          np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


def main() -> None:
    rng = np.random.default_rng(24)
    img = cv2.GaussianBlur(rng.integers(0, 256, (96, 128), dtype=np.uint8), (0, 0), 1.2)
    img[8:32, 8:32] = 200
    h, w = img.shape
    r = np.random.default_rng(25)
    m = 4000
    angle = np.where(r.random(m) < 0.2, -1.0, np.where(r.random(m) < 0.25, 0.0, r.uniform(0, 360, m)))
    cand = np.stack([r.uniform(0, w, m), r.uniform(0, h, m), r.uniform(1, 64, m), angle], 1).astype(np.float32)
    lt = ps.warp_patches(img, as_kps(cand), ps.with_input_size(ps.LIBTORCH, N))
    dnn = ps.warp_patches(img, as_kps(cand), ps.with_input_size(ps.DNN, N))
    differ = np.flatnonzero((lt != dnn).any(axis=(1, 2)))
    same = np.flatnonzero(~(lt != dnn).any(axis=(1, 2)))
    fixed = np.array([[20.0, 20.0, 2.0, 0.0], [20.5, 19.25, 0.5, 30.0], [0.0, 0.0, 8.0, -1.0],
                      [w - 1, h - 1, 40.0, 45.0]], np.float32)
    kps = np.concatenate([cand[differ[:24]], cand[same[:24]], fixed])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        png = tmp / "grey.png"
        assert cv2.imwrite(str(png), img)
        cmd = build(tmp / "dw_patches", ["-O2", "-ffp-contract=off"])
        rec = run(tmp / "dw_patches", png, kps)
        build(tmp / "dw_native", ["-O2", "-march=native"])
        nat = run(tmp / "dw_native", png, kps)
    variant = {w: {"matrices_changed": int((rec[f"m_{w}"] != nat[f"m_{w}"]).any(axis=(1, 2)).sum()),
                   "patches_changed": int((rec[f"u8_{w}"] != nat[f"u8_{w}"]).any(axis=(1, 2)).sum())}
               for w in ("libtorch", "dnn")}
    orders = int((rec["u8_libtorch"] != rec["u8_dnn"]).any(axis=(1, 2)).sum())
    meta = {"workbench": "F-Sossi/DescriptorWorkbench b834e17 (LibTorchWrapper.cpp makePatch/matToTensor, "
                         "DNNPatchWrapper.cpp makePatch_)",
            "opencv": subprocess.run(["pkg-config", "--modversion", "opencv4"], capture_output=True, text=True).stdout.strip(),
            "build": " ".join(cmd), "cpu": platform.processor() or platform.machine(),
            "keypoints": {"orders_differ": int(min(24, len(differ))), "others": int(min(24, len(same))), "fixed": 4,
                          "candidates_whose_orders_differ": int(len(differ)), "candidates": m},
            "harness_patches_whose_orders_differ": orders, "variant_march_native": variant}
    np.savez_compressed(HERE / "workbench_patches.npz", image=img, keypoints=kps, meta=np.array([json.dumps(meta)]), **rec)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
