"""Builds ``workbench_dsp_pooling.npz``: the C++ DescriptorWorkbench's (F-Sossi/DescriptorWorkbench,
commit b834e17) domain-size pooling over its ``SIFT`` descriptor, computed by the workbench itself,
so that descbench's ``dsp`` over ``sift`` can be compared without building the workbench.

    PYTHONPATH=workflow python tests/data/dw/make_dsp_pooling_fixtures.py --workbench /path/to/dw-src

``--workbench``: the workbench's source files at b834e17 (as for ``make_descriptor_fixtures.py``,
whose notes on the build, OpenCV 4.6.0 and float portability apply here too). ``dw_dsp_pooling.cpp``
(descbench's own harness) is compiled with the workbench's unmodified
``src/core/descriptor/extractors/wrappers/SIFTWrapper.cpp``, ``src/core/pooling/DomainSizePooling.cpp``
and ``src/core/pooling/NoPooling.cpp``::

    g++ -std=c++17 -O2 -ffp-contract=off -I$WB -I$WB/src -I$WB/src/include \\
        $(pkg-config --cflags opencv4) -c <file.cpp> -o <file.o>      (each of the four files)
    g++ <all .o> -o dw_dsp_pooling $(pkg-config --libs opencv4)

Input: the scene and keypoints of ``workbench_descriptors.npz`` (v_coins images 1 and 2, 40 SIFT
keypoints each, read from that file). Contents (``allow_pickle=False``), float32, one row per
keypoint in keypoint order, ``<img>`` 1 or 2, ``<scales>`` ``default`` ([1.0, 1.5, 2.0], the
workbench's ``DescriptorParams::scales``) or ``085`` ([0.85, 1.0, 1.3], its fusion experiments'):

- ``keypoints__<img>``: as in ``workbench_descriptors.npz``.
- ``SIFT__raw__<img>``: ``SIFTWrapper::extract`` on the ``cvtColor(BGR2GRAY)`` grey image (OpenCV's
  SIFT rows, integers 0..255, L2 norm about 512).
- ``SIFT__pipeline__<img>``: the same through ``NoPooling`` (the runner's ``SIFT``: unit rows).
- ``DSP_SIFT__<scales>__<img>``: ``DomainSizePooling::computeDescriptors`` with ``SIFTWrapper`` (the
  runner's ``SIFT`` with ``pooling: domain_size_pooling``, default params otherwise): its 4-octave
  Gaussian pyramid of the grey image, SIFT's raw rows at each scale's level, averaged, L2.
- ``DSP_SIFT_ORIGINAL__<scales>__<img>``: the workbench's documented definition
  (``docs/pooling_semantics.md``; its pre-YAML overloads until b9b6b46): keypoints copied with
  ``size * a`` (octave field kept), ``SIFTWrapper`` on the unchanged grey image, raw rows averaged,
  L2 (the loop in the harness, see ``dw_dsp_pooling.cpp``).
- ``meta``: one-element string array, a JSON document (commit, OpenCV, build, sources).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "workbench_dsp_pooling.npz"
DESCRIPTORS = HERE / "workbench_descriptors.npz"
SCENE = "v_coins"
IMAGES = ("1", "2")
WB_SOURCES = (
    "src/core/descriptor/extractors/wrappers/SIFTWrapper.cpp",
    "src/core/pooling/DomainSizePooling.cpp",
    "src/core/pooling/NoPooling.cpp",
)
CXXFLAGS = ("-std=c++17", "-O2", "-ffp-contract=off")
SCALES = {"default": [1.0, 1.5, 2.0], "085": [0.85, 1.0, 1.3]}


def compile_commands(wb: Path, build: Path) -> list[list[str]]:
    cflags = subprocess.run(["pkg-config", "--cflags", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    incs = [f"-I{wb}", f"-I{wb / 'src'}", f"-I{wb / 'src' / 'include'}"]
    cmds, objs = [], []
    for src in [HERE / "dw_dsp_pooling.cpp", *(wb / s for s in WB_SOURCES)]:
        obj = build / (src.stem + ".o")
        cmds.append(["g++", *CXXFLAGS, *incs, *cflags, "-c", str(src), "-o", str(obj)])
        objs.append(str(obj))
    cmds.append(["g++", *objs, "-o", str(build / "dw_dsp_pooling"), *libs])
    return cmds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workbench", type=Path, required=True, help="the workbench's source files at b834e17")
    a = ap.parse_args()
    from descbench.datasets.demo import generate_scene
    from make_descriptor_fixtures import cpu, opencv_version, write_keypoints

    wb = a.workbench.resolve()
    ref = np.load(DESCRIPTORS, allow_pickle=False)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        build = tmp / "build"
        build.mkdir()
        cmds = compile_commands(wb, build)
        for cmd in cmds:
            subprocess.run(cmd, check=True)
        generate_scene(SCENE, tmp, seed=0)
        arrays: dict[str, np.ndarray] = {}
        for img in IMAGES:
            kps = ref[f"keypoints__{img}"]
            arrays[f"keypoints__{img}"] = kps
            write_keypoints(kps, tmp / f"kp{img}.txt")
            out = tmp / f"out{img}"
            out.mkdir()
            subprocess.run([str(build / "dw_dsp_pooling"), str(tmp / SCENE / f"{img}.ppm"), str(tmp / f"kp{img}.txt"), str(out)],
                           check=True)
            for line in (out / "manifest.txt").read_text().splitlines():
                name, rows, cols = line.split()
                data = np.fromfile(out / f"{name}.f32", dtype="<f4").reshape(int(rows), int(cols))
                if data.shape != (len(kps), 128) or not np.isfinite(data).all():
                    raise SystemExit(f"{name} image {img}: shape {data.shape} or non-finite values")
                arrays[f"{name}__{img}"] = data
        meta = {
            "workbench": "F-Sossi/DescriptorWorkbench", "workbench_commit": "b834e17",
            "opencv_version": opencv_version(), "cpu": cpu(), "scales": SCALES,
            "input": f"the scene and keypoints of {DESCRIPTORS.name} (generate_scene('{SCENE}', out, seed=0))",
            "harness_build": [" ".join(c).replace(str(build), "$BUILD").replace(str(wb), "$WB").replace(str(HERE), "tests/data/dw")
                              for c in cmds],
        }
        np.savez_compressed(OUT, **arrays, meta=np.array([json.dumps(meta, indent=1, sort_keys=True)]))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
