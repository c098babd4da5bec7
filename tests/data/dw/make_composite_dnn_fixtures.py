"""Builds ``workbench_composite_dnn.npz``: COMPOSITE and DNN_PATCH rows computed by the C++
DescriptorWorkbench's own ``CompositeDescriptorExtractor`` and ``DNNPatchWrapper``
(F-Sossi/DescriptorWorkbench, commit b834e17), so that descbench's ``composite`` and ``onnx``
families can be compared against recorded numbers without building the workbench.

    PYTHONPATH=workflow python tests/data/dw/make_composite_dnn_fixtures.py --workbench /path/to/dw-src

``--workbench``: the workbench's source files at b834e17 (as for make_descriptor_fixtures.py).
``dw_composite_dnn.cpp`` (descbench's own harness; its header says what it defines itself: the
factory's ``create`` for the four component types, and DatabaseManager's two look-ups as throwing
stubs) is compiled with the workbench's unmodified files against Debian 12's OpenCV 4.6.0
(libopencv-dev, with the dnn module), ``WB`` the folder above::

    g++ -std=c++17 -O2 -ffp-contract=off -I$WB -I$WB/src -I$WB/src/include $(pkg-config --cflags opencv4) \\
        -c <file.cpp> -o <file.o>
        for tests/data/dw/dw_composite_dnn.cpp and the workbench's
        src/core/descriptor/extractors/CompositeDescriptorExtractor.cpp,
        keypoints/{VanillaSIFT,DSPSIFT,RGBSIFT,HoWH,HoNC}.cpp,
        src/core/descriptor/extractors/wrappers/{RGBSIFTWrapper,HoNCWrapper,DSPRGBSIFTWrapperV2,DNNPatchWrapper}.cpp,
        src/core/pooling/NoPooling.cpp
    g++ <all .o> -o dw_composite_dnn $(pkg-config --libs opencv4)

**Model** (DNN_PATCH): ``tiny_patch_cnn.onnx`` (41 kB, committed; written by :func:`write_model` when
absent): four convolutions (1 -> 8 -> 16 -> 32 channels, 3 x 3, stride 2, ReLU, ReLU, tanh; then
1 x 1 to 128) with ``torch.manual_seed(0)`` weights, exported by ``torch.onnx.export`` (TorchScript
exporter, opset 11, dynamic batch): input ``patch`` [B, 1, 32, 32], output ``desc`` [B, 128, 4, 4],
which the wrapper averages over the 4 x 4 positions (its ``[B, C, H, W]`` branch).

**Keypoints**: images 1 and 2 of v_coins (seed 0); ``sift``: the 40 SIFT keypoints of
workbench_descriptors.npz; ``warp`` (DNN_PATCH only): the random keypoints of workbench_libtorch.npz.

Contents (``allow_pickle=False``): ``<NAME>__<img>`` (float32, the extractor's ``extract()``) and
``<NAME>__pipeline__<img>`` (the runner's NoPooling: L2 per row) for NAME COMPOSITE_AVERAGE,
COMPOSITE_WEIGHTED_AVG (weights 0.3, 0.7), COMPOSITE_MAX, COMPOSITE_MIN, COMPOSITE_CONCATENATE
(components HoNC, DSPSIFT_V2), COMPOSITE_CHANNEL_WISE_128 / _384 (components DSPSIFT_V2, RGBSIFT),
at the sift keypoints of image 2; ``DNN_PATCH__<set>__<img>`` and ``DNN_PATCH__pipeline__<set>__<img>``;
``meta`` (JSON). The composites' components' own rows are workbench_descriptors.npz's
``HoNC__<img>``, ``DSPSIFT_V2__<img>``, ``RGBSIFT__<img>`` (the same wrappers on the same image and
keypoints: DSPSIFT_V2 converts the BGR image the composite hands it with BGR2GRAY).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "workbench_composite_dnn.npz"
MODEL = HERE / "tiny_patch_cnn.onnx"
DESCRIPTORS = HERE / "workbench_descriptors.npz"
LIBTORCH = HERE / "workbench_libtorch.npz"
SCENE = "v_coins"
IMAGES = ("1", "2")
COMPOSITE_IMAGES = ("2",)  # image 1 is grey (B = G = R): its colour components say less; the file stays small
WORKBENCH_COMMIT = "b834e17"
WB_SOURCES = (
    "src/core/descriptor/extractors/CompositeDescriptorExtractor.cpp",
    "keypoints/VanillaSIFT.cpp", "keypoints/DSPSIFT.cpp", "keypoints/RGBSIFT.cpp", "keypoints/HoWH.cpp",
    "keypoints/HoNC.cpp",
    "src/core/descriptor/extractors/wrappers/RGBSIFTWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/HoNCWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/DSPRGBSIFTWrapperV2.cpp",
    "src/core/descriptor/extractors/wrappers/DNNPatchWrapper.cpp",
    "src/core/pooling/NoPooling.cpp",
)
CXXFLAGS = ("-std=c++17", "-O2", "-ffp-contract=off")
# harness output -> (components, aggregation, weights, output mode)
COMPOSITES = {
    "COMPOSITE_AVERAGE": (["HoNC", "DSPSIFT_V2"], "average", None, None),
    "COMPOSITE_WEIGHTED_AVG": (["HoNC", "DSPSIFT_V2"], "weighted_avg", [0.3, 0.7], None),
    "COMPOSITE_MAX": (["HoNC", "DSPSIFT_V2"], "max", None, None),
    "COMPOSITE_MIN": (["HoNC", "DSPSIFT_V2"], "min", None, None),
    "COMPOSITE_CONCATENATE": (["HoNC", "DSPSIFT_V2"], "concatenate", None, None),
    "COMPOSITE_CHANNEL_WISE_128": (["DSPSIFT_V2", "RGBSIFT"], "channel_wise", None, 128),
    "COMPOSITE_CHANNEL_WISE_384": (["DSPSIFT_V2", "RGBSIFT"], "channel_wise", None, 384),
}


def compile_commands(wb: Path, build: Path) -> list[list[str]]:
    cflags = subprocess.run(["pkg-config", "--cflags", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    incs = [f"-I{wb}", f"-I{wb / 'src'}", f"-I{wb / 'src' / 'include'}"]
    cmds, objs = [], []
    for src in [HERE / "dw_composite_dnn.cpp", *(wb / s for s in WB_SOURCES)]:
        obj = build / (src.stem + ".o")
        cmds.append(["g++", *CXXFLAGS, *incs, *cflags, "-c", str(src), "-o", str(obj)])
        objs.append(str(obj))
    cmds.append(["g++", *objs, "-o", str(build / "dw_composite_dnn"), *libs])
    return cmds


def write_model(path: Path) -> None:
    """The tiny random CNN (module docstring) as ONNX."""
    import torch

    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(),
                        nn.Conv2d(16, 32, 3, 2, 1), nn.Tanh(), nn.Conv2d(32, 128, 1)).eval()
    torch.onnx.export(net, torch.zeros(1, 1, 32, 32), str(path), input_names=["patch"], output_names=["desc"],
                      dynamic_axes={"patch": {0: "batch"}, "desc": {0: "batch"}}, opset_version=11, dynamo=False)


def write_keypoints(kps: np.ndarray, path: Path) -> None:
    path.write_text("".join(" ".join(float(v).hex() for v in row) + "\n" for row in kps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workbench", type=Path, required=True, help="the workbench's source files at b834e17")
    ap.add_argument("--build-dir", type=Path, help="keep the build here (default: a temporary folder)")
    a = ap.parse_args()
    from descbench.datasets.demo import generate_scene

    wb = a.workbench.resolve()
    if not MODEL.exists():
        write_model(MODEL)
    base, lt = np.load(DESCRIPTORS, allow_pickle=False), np.load(LIBTORCH, allow_pickle=False)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        build = (a.build_dir or tmp / "build").resolve()
        build.mkdir(parents=True, exist_ok=True)
        cmds = compile_commands(wb, build)
        for cmd in cmds:
            subprocess.run(cmd, check=True)
        generate_scene(SCENE, tmp, seed=0)
        arrays: dict[str, np.ndarray] = {}
        for img in IMAGES:
            image = tmp / SCENE / f"{img}.ppm"
            for kset, kps in (("sift", base[f"keypoints__{img}"]), ("warp", lt[f"keypoints__warp__{img}"])):
                kp_file = tmp / f"kp_{kset}_{img}.txt"
                write_keypoints(kps, kp_file)
                out = tmp / f"out_{kset}_{img}"
                out.mkdir()
                subprocess.run([str(build / "dw_composite_dnn"), str(image), str(kp_file), str(out), str(MODEL)], check=True)
                for line in (out / "manifest.txt").read_text().splitlines():
                    name, kind, rows, cols = line.split()
                    if name.startswith("COMPOSITE") and (kset != "sift" or img not in COMPOSITE_IMAGES):
                        continue
                    data = np.fromfile(out / f"{name}.{kind}.f32", dtype="<f4").reshape(int(rows), int(cols))
                    assert data.shape[0] == len(kps) and np.isfinite(data).all(), (name, kind, data.shape)
                    tag = "" if name.startswith("COMPOSITE") else f"__{kset}"
                    arrays[f"{name}{'__pipeline' if kind == 'pipeline' else ''}{tag}__{img}"] = data

        def placeholders(text: str) -> str:
            return text.replace(str(build), "$BUILD").replace(str(wb), "$WB").replace(str(HERE), "tests/data/dw")

        meta = {
            "workbench": "F-Sossi/DescriptorWorkbench",
            "workbench_commit": WORKBENCH_COMMIT,
            "opencv_version": subprocess.run(["pkg-config", "--modversion", "opencv4"], capture_output=True,
                                             text=True).stdout.strip(),
            "harness_build": [placeholders(" ".join(c)) for c in cmds],
            "composites": {k: {"components": c, "aggregation": g, "weights": w, "output_dimension": o,
                               "image": "BGR (use_color: a colour component)"}
                           for k, (c, g, w, o) in COMPOSITES.items()},
            "dnn_patch": {"model": "tests/data/dw/tiny_patch_cnn.onnx", "image": "grey (cvtColor BGR2GRAY)",
                          "args": "DescriptorParams defaults: dnn_input_size 32, dnn_support_multiplier 1.0, "
                                  "dnn_rotate_upright true, dnn_mean 0, dnn_std 1, dnn_per_patch_standardize false; "
                                  "descriptor_size 128; backend DNN_BACKEND_OPENCV, target CPU; batches of 512"},
            "pipeline": "NoPooling with default DescriptorParams: cv::normalize(NORM_L2) per row",
        }
        arrays["meta"] = np.array([json.dumps(meta, indent=1, sort_keys=True)])
        np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
