"""Builds ``workbench_libtorch.npz``: LIBTORCH_HARDNET / LIBTORCH_SOSNET rows computed by the C++
DescriptorWorkbench's own ``LibTorchWrapper`` (F-Sossi/DescriptorWorkbench, commit b834e17), so that
descbench's ``hardnet`` / ``sosnet`` with ``patch_convention: workbench_libtorch`` can be compared
against recorded numbers without building the workbench or LibTorch.

    PYTHONPATH=workflow python tests/data/dw/make_libtorch_fixtures.py --workbench /path/to/dw-src

``--workbench``: the workbench's source files at b834e17 (as for make_descriptor_fixtures.py).
``dw_libtorch.cpp`` (descbench's own harness) is compiled together with the workbench's unmodified
``LibTorchWrapper.cpp``, ``LibTorchFactory.cpp`` and ``NoPooling.cpp`` against LibTorch, taken from
the installed torch wheel (``torch.utils.cmake_prefix_path``: headers under ``torch/include`` and
``torch/include/torch/csrc/api/include``, libraries under ``torch/lib``; LibTorch 2.x headers need
C++20; ``-D_GLIBCXX_USE_CXX11_ABI`` = ``torch._C._GLIBCXX_USE_CXX11_ABI``) and OpenCV (Debian 12's
libopencv-dev 4.6.0). With ``WB`` the folder above and ``T`` the torch package folder::

    g++ -std=c++20 -O2 -ffp-contract=off -D_GLIBCXX_USE_CXX11_ABI=1 -I$WB -I$WB/src -I$WB/src/include \\
        -isystem $T/include -isystem $T/include/torch/csrc/api/include $(pkg-config --cflags opencv4) \\
        -c <file.cpp> -o <file.o>
        for tests/data/dw/dw_libtorch.cpp and the workbench's
        src/core/descriptor/extractors/wrappers/{LibTorchWrapper,LibTorchFactory}.cpp, src/core/pooling/NoPooling.cpp
    g++ <all .o> -o dw_libtorch -L$T/lib -Wl,-rpath,$T/lib -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 \\
        -Wl,--as-needed $(pkg-config --libs opencv4)

(recorded: torch 2.13.0+cpu wheel, g++ 12.2; the compile of the LibTorch files takes ~1 min each).

**Models.** The workbench loads TorchScript files that ``analysis/scripts/download_pytorch_models.py``
makes: ``kornia.feature.HardNet(pretrained=True)`` / ``SOSNet(pretrained=True)`` in eval mode,
``torch.jit.trace`` on a ``torch.randn(1, 1, 32, 32)`` example, ``.save`` to ``models/hardnet.pt`` /
``models/sosnet.pt``; ``LibTorchFactory.cpp`` opens ``../models/<name>.pt`` relative to the working
directory. The published weights are not in the repository, so this script does the same with the
nets as descbench builds them with ``weights: random`` (``descbench.torchrt.random_init``, seed
:data:`WEIGHTS_SEED`): the state dicts (``torch.save(net.state_dict())``, ~5 MB each, not kept) are
what the test loads as ``weights: <file>``, rebuilt from the seed; ``meta["weights"]`` records a
checksum of every tensor so a change of the seeded initialisation is caught. A third TorchScript
model, ``patch.pt`` (flatten: ``[N, 1, 32, 32] -> [N, 1024]``), run through a LibTorchWrapper with the
factory's HardNet arguments and output size 1024, records the patch the wrapper feeds the network
(standardised, then L2-normalised by ``tensorToMat``) for the rows listed in ``patch_rows__<set>__<img>``.

**Keypoints.** Images 1 and 2 of the demo scene v_coins (seed 0), as workbench_descriptors.npz;
two sets per image:

* ``sift``: the 40 SIFT keypoints of workbench_descriptors.npz (``keypoints__<img>``);
* ``warp``: :data:`N_PLAIN` seeded random keypoints with fractional float32 positions, sizes (4 to
  64 px) and angles (a third -1 = unset, a third 0, a third in [0, 360)), plus up to
  :data:`N_FLIP` keypoints drawn from :data:`N_CANDIDATES` further random ones whose uint8 patch
  (:func:`opencv46_warp_affine`, the workbench's OpenCV warp) differs between the two orders of
  computing the affine matrix (recorded: 3 rows in image 1, 4 in image 2): the LibTorch wrapper's (rotation about (0, 0), translation ``n/2 - M00 x - M01 y``) and the DNN
  wrapper's (``getRotationMatrix2D`` about the keypoint plus ``n/2 - x``). The two are equal
  algebraically; their ~1e-13 px difference moves ``warpAffine``'s 1/32 px rounding on a few
  keypoints. ``flip__warp__<img>`` marks those rows (1) in the set.

Contents (``allow_pickle=False``): ``keypoints__<set>__<img>`` (N x 7 float64: x, y, size, angle,
response, octave, class_id; float32 values), ``<TYPE>__<set>__<img>`` (float32 N x 128: the
wrapper's ``extract()``, L2-normalised rows) and ``<TYPE>__pipeline__<set>__<img>`` (the runner's
NoPooling, L2 once more), TYPE LIBTORCH_HARDNET, LIBTORCH_SOSNET; ``flip__warp__<img>`` (int8);
``patch_rows__<set>__<img>`` (int32 row indices: the flip rows and the first 4 others) and
``PATCH__<set>__<img>`` (float32, one 1024-row per listed row: the workbench's patch, row-major
32 x 32, divided by its L2 norm); ``meta`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "workbench_libtorch.npz"
DESCRIPTORS = HERE / "workbench_descriptors.npz"
SCENE = "v_coins"
IMAGES = ("1", "2")
WORKBENCH_COMMIT = "b834e17"
# per family: HardNet and SOSNet have the same layer shapes, so one seed would give both the same
# convolution weights (their rows then agree to 4e-7 and the test could not tell them apart)
WEIGHTS_SEED = {"hardnet": 0, "sosnet": 1}
N_PLAIN = 40
N_FLIP = 12
N_CANDIDATES = 40000
PATCH_EXTRA = 4
TYPES = {"LIBTORCH_HARDNET": "hardnet", "LIBTORCH_SOSNET": "sosnet"}
WB_SOURCES = ("src/core/descriptor/extractors/wrappers/LibTorchWrapper.cpp",
              "src/core/descriptor/extractors/wrappers/LibTorchFactory.cpp",
              "src/core/pooling/NoPooling.cpp")


def torch_dir() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent


def compile_commands(wb: Path, build: Path) -> list[list[str]]:
    import torch

    t = torch_dir()
    cflags = subprocess.run(["pkg-config", "--cflags", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    flags = ["-std=c++20", "-O2", "-ffp-contract=off", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             f"-I{wb}", f"-I{wb / 'src'}", f"-I{wb / 'src' / 'include'}", "-isystem", str(t / "include"),
             "-isystem", str(t / "include" / "torch" / "csrc" / "api" / "include"), *cflags]
    cmds, objs = [], []
    for src in [HERE / "dw_libtorch.cpp", *(wb / s for s in WB_SOURCES)]:
        obj = build / (src.stem + ".o")
        cmds.append(["g++", *flags, "-c", str(src), "-o", str(obj)])
        objs.append(str(obj))
    cmds.append(["g++", *objs, "-o", str(build / "dw_libtorch"), f"-L{t / 'lib'}", f"-Wl,-rpath,{t / 'lib'}",
                 "-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10", "-Wl,--as-needed", *libs])
    return cmds


def seeded_net(family: str):
    """kornia's net as descbench builds it with ``weights: random`` (eval mode)."""
    import kornia

    from descbench import torchrt
    from descbench.descriptors.kornia_nets import NETS

    net = getattr(kornia.feature, NETS[family].kornia_class)(pretrained=False)
    torchrt.random_init(net, WEIGHTS_SEED[family])
    return net.eval()


def weights_checksum(net) -> dict[str, list[float]]:
    """Per state-dict tensor: [sum, sum of squares] in float64 (catches a changed initialisation)."""
    return {k: [float(v.double().sum()), float((v.double() ** 2).sum())] for k, v in net.state_dict().items()}


def write_models(models: Path) -> dict:
    """models/hardnet.pt, models/sosnet.pt (traced as download_pytorch_models.py does), patch.pt."""
    import warnings

    import torch

    models.mkdir(parents=True, exist_ok=True)
    info = {}
    for family in TYPES.values():
        net = seeded_net(family)
        torch.save(net.state_dict(), models / f"{family}_state.pth")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.jit.trace(net, torch.randn(1, 1, 32, 32)).save(str(models / f"{family}.pt"))
        info[family] = weights_checksum(net)

    class Flatten(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1)

    torch.jit.trace(Flatten(), torch.randn(1, 1, 32, 32)).save(str(models / "patch.pt"))
    return info


def libtorch_affine(x: float, y: float, size: float, angle: float, n: int = 32) -> np.ndarray:
    """LibTorchWrapper::makePatch's matrix, in its order of operations (rotation about (0, 0), then
    translation ``n/2 - M00 x - M01 y``)."""
    s = max(np.float32(size), np.float32(1e-3))
    radius = np.float32(s / np.float32(2.0))
    scale = float(n) / (2.0 * float(radius))
    a = -float(np.float32(angle)) if angle >= 0 else 0.0
    m = cv2.getRotationMatrix2D((0.0, 0.0), a, scale)
    x, y = float(np.float32(x)), float(np.float32(y))
    m[0, 2] = n * 0.5 - m[0, 0] * x - m[0, 1] * y
    m[1, 2] = n * 0.5 - m[1, 0] * x - m[1, 1] * y
    return m


def opencv46_warp_affine(gray: np.ndarray, m: np.ndarray, n: int = 32) -> np.ndarray:
    """uint8 [n, n]: ``cv::warpAffine(gray, m, (n, n), INTER_LINEAR, BORDER_REPLICATE)`` as OpenCV
    4.6 to 4.10 compute it (the workbench's Dockerfile builds 4.10.0; Debian's 4.6 here), a numpy
    port of its fixed-point path (``imgwarp.cpp`` ``WarpAffineInvoker`` + ``remapBilinear``): ``m``
    inverted in double; per destination row, source coordinates in 1/1024 px
    (``cvRound((m01 y + m02) 1024) + cvRound(m00 x 1024) + 16``), shifted to 1/32 px
    (``>> 5``); the integer part and the 1/32 fraction ``(tx, ty)`` select the four pixels
    (clamped to the image: BORDER_REPLICATE) and the integer weights ``32 (32 - ty)(32 - tx)``,
    ``32 (32 - ty) tx``, ``32 ty (32 - tx)``, ``32 ty tx`` (sum 32768); value
    ``(sum w v + 2^14) >> 15``. OpenCV 4.11 and later (descbench's pip cv2 5.0) replaced this with a
    float kernel (opencv/opencv#25984) whose patches differ by up to a few grey levels.
    Checked bit for bit against Debian's C++ OpenCV 4.6 on the fixture's patches (the ``PATCH``
    rows; ``tests/interop/test_dw_libtorch.py``)."""
    a = np.asarray(m, np.float64).ravel().copy()
    det = a[0] * a[4] - a[1] * a[3]
    det = 1.0 / det if det != 0 else 0.0
    a00, a11 = a[4] * det, a[0] * det
    a[0], a[1], a[3], a[4] = a00, -a[1] * det, -a[3] * det, a11
    a[2], a[5] = -a[0] * a[2] - a[1] * a[5], -a[3] * a[2] - a[4] * a[5]
    scale, delta = 1024, 16
    xs = np.arange(n, dtype=np.float64)
    adx, bdx = np.rint(a[0] * xs * scale).astype(np.int64), np.rint(a[3] * xs * scale).astype(np.int64)
    h, w = gray.shape
    g = gray.astype(np.int64)
    out = np.empty((n, n), np.uint8)
    for y in range(n):
        gx = (int(np.rint((a[1] * y + a[2]) * scale)) + delta + adx) >> 5
        gy = (int(np.rint((a[4] * y + a[5]) * scale)) + delta + bdx) >> 5
        xi, yi, tx, ty = gx >> 5, gy >> 5, gx & 31, gy & 31
        x0, x1 = np.clip(xi, 0, w - 1), np.clip(xi + 1, 0, w - 1)
        y0, y1 = np.clip(yi, 0, h - 1), np.clip(yi + 1, 0, h - 1)
        v = (g[y0, x0] * (32 - ty) * (32 - tx) + g[y0, x1] * (32 - ty) * tx + g[y1, x0] * ty * (32 - tx)
             + g[y1, x1] * ty * tx) * 32
        out[y] = np.clip((v + (1 << 14)) >> 15, 0, 255)
    return out


def dnn_order_affine(x: float, y: float, size: float, angle: float, n: int = 32) -> np.ndarray:
    """The same patch with the DNN wrapper's order (rotation about the keypoint, plus n/2 - x)."""
    s = float(np.float32(max(np.float32(size), np.float32(1e-3))))
    a = -float(np.float32(angle)) if angle >= 0 else 0.0
    x, y = float(np.float32(x)), float(np.float32(y))
    m = cv2.getRotationMatrix2D((x, y), a, float(n) / s)
    m[0, 2] += n * 0.5 - x
    m[1, 2] += n * 0.5 - y
    return m


def random_keypoints(rng: np.random.Generator, count: int, w: int, h: int) -> np.ndarray:
    x = rng.uniform(8, w - 8, count)
    y = rng.uniform(8, h - 8, count)
    size = np.exp(rng.uniform(math.log(4), math.log(64), count))
    kind = rng.integers(0, 3, count)
    angle = np.where(kind == 0, -1.0, np.where(kind == 1, 0.0, rng.uniform(0, 360, count)))
    arr = np.stack([x, y, size, angle, np.zeros(count), np.zeros(count), np.full(count, -1.0)], axis=1)
    arr[:, :5] = arr[:, :5].astype(np.float32)
    return arr


def warp_keypoints(gray: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """N_PLAIN random keypoints, then up to N_FLIP whose patch differs between the two matrix orders."""
    rng = np.random.default_rng(seed)
    h, w = gray.shape
    plain = random_keypoints(rng, N_PLAIN, w, h)
    cand = random_keypoints(rng, N_CANDIDATES, w, h)
    flips = []
    for row in cand:
        p = [opencv46_warp_affine(gray, f(*row[:4])) for f in (libtorch_affine, dnn_order_affine)]
        if not np.array_equal(p[0], p[1]):
            flips.append(row)
            if len(flips) == N_FLIP:
                break
    kps = np.concatenate([plain, np.array(flips).reshape(-1, 7)])
    flag = np.concatenate([np.zeros(len(plain), np.int8), np.ones(len(flips), np.int8)])
    return kps, flag


def write_keypoints(kps: np.ndarray, path: Path) -> None:
    path.write_text("".join(" ".join(float(v).hex() for v in row) + "\n" for row in kps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workbench", type=Path, required=True, help="the workbench's source files at b834e17")
    ap.add_argument("--build-dir", type=Path, help="keep the build and models here (default: a temporary folder)")
    a = ap.parse_args()
    import torch

    from descbench.datasets.demo import generate_scene

    wb = a.workbench.resolve()
    base = np.load(DESCRIPTORS, allow_pickle=False)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        build = (a.build_dir or tmp / "build").resolve()
        build.mkdir(parents=True, exist_ok=True)
        exe = build / "dw_libtorch"
        cmds = compile_commands(wb, build)
        if not exe.exists():
            for cmd in cmds:
                subprocess.run(cmd, check=True)
        checksums = write_models(build / "models")
        run_dir = build / "run"  # the factory opens ../models/<name>.pt
        run_dir.mkdir(exist_ok=True)
        generate_scene(SCENE, tmp, seed=0)
        arrays: dict[str, np.ndarray] = {}
        for img in IMAGES:
            image = tmp / SCENE / f"{img}.ppm"
            gray = cv2.cvtColor(cv2.imread(str(image), cv2.IMREAD_COLOR), cv2.COLOR_BGR2GRAY)
            warp, flag = warp_keypoints(gray, seed=int(img))
            arrays[f"flip__warp__{img}"] = flag
            for kset, kps in (("sift", base[f"keypoints__{img}"]), ("warp", warp)):
                arrays[f"keypoints__{kset}__{img}"] = kps
                kp_file = tmp / f"kp_{kset}_{img}.txt"
                write_keypoints(kps, kp_file)
                out = tmp / f"out_{kset}_{img}"
                out.mkdir()
                subprocess.run([str(exe), str(image), str(kp_file), str(out), str(build / "models" / "patch.pt")],
                               check=True, cwd=run_dir, stdout=subprocess.DEVNULL)
                n = len(kps)
                for t in TYPES:
                    for kind, key in (("raw", f"{t}__{kset}__{img}"), ("pipeline", f"{t}__pipeline__{kset}__{img}")):
                        arrays[key] = np.fromfile(out / f"{t}.{kind}.f32", dtype="<f4").reshape(n, 128)
                patch = np.fromfile(out / "PATCH.raw.f32", dtype="<f4").reshape(n, 1024)
                flips = np.flatnonzero(flag) if kset == "warp" else np.zeros(0, np.int64)
                rows = np.unique(np.concatenate([flips, np.arange(min(PATCH_EXTRA, n))])).astype(np.int32)
                arrays[f"patch_rows__{kset}__{img}"] = rows
                arrays[f"PATCH__{kset}__{img}"] = patch[rows]

        def placeholders(text: str) -> str:
            return (text.replace(str(build), "$BUILD").replace(str(wb), "$WB").replace(str(HERE), "tests/data/dw")
                    .replace(str(torch_dir()), "$T"))

        import kornia

        meta = {
            "workbench": "F-Sossi/DescriptorWorkbench",
            "workbench_commit": WORKBENCH_COMMIT,
            "opencv_version": subprocess.run(["pkg-config", "--modversion", "opencv4"], capture_output=True,
                                             text=True).stdout.strip(),
            "libtorch": f"torch {torch.__version__} wheel (cxx11 abi {int(torch._C._GLIBCXX_USE_CXX11_ABI)})",
            "kornia": kornia.__version__,
            "harness_build": [placeholders(" ".join(c)) for c in cmds],
            "types": {t: f"LibTorchFactory.cpp createLibTorch{t.split('_')[1].title().replace('net', 'Net')}(): "
                         f"LibTorchWrapper('../models/{f}.pt', 32, 2.0f, true, 0, 1, true, 128, INTER_LINEAR); runner "
                         "input: the grey image (cvtColor BGR2GRAY); pipeline: NoPooling, L2 per row"
                      for t, f in TYPES.items()},
            "models": "kornia.feature.<class>(pretrained=False), descbench.torchrt.random_init(seed "
                      f"{WEIGHTS_SEED}), eval(), torch.jit.trace on torch.randn(1, 1, 32, 32)",
            "weights_seed": WEIGHTS_SEED,
            "weights": checksums,
            "keypoints": {"sift": "workbench_descriptors.npz keypoints__<img>",
                          "warp": f"{N_PLAIN} random keypoints (numpy default_rng(seed = image number)), then up to "
                                  f"{N_FLIP} of {N_CANDIDATES} further random ones whose opencv46_warp_affine patch "
                                  "differs between the LibTorch and the DNN order of the affine matrix"},
            "n_flip_rows": {img: int(arrays[f"flip__warp__{img}"].sum()) for img in IMAGES},
        }
        arrays["meta"] = np.array([json.dumps(meta, indent=1, sort_keys=True)])
        np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
