"""Builds ``workbench_descriptors.npz``: reference descriptors computed by the C++ DescriptorWorkbench
(F-Sossi/DescriptorWorkbench, commit b834e17) itself, so that descbench's ports of its descriptors
can be compared against recorded numbers without building the workbench.

    PYTHONPATH=workflow python tests/data/dw/make_descriptor_fixtures.py --workbench /path/to/dw-src

``--workbench``: the workbench's source files at commit b834e17, e.g. extracted from a clone with
``git -C DescriptorWorkbench archive b834e17 keypoints src | tar -x -C /path/to/dw-src``. Nothing of
it is copied into descbench: ``dw_descriptors.cpp`` (descbench's own harness) is compiled together
with the workbench's unmodified files and calls its classes. Needs g++ and OpenCV's C++ headers and
libraries (the recorded file: Debian 12, ``apt-get install -y libopencv-dev``, OpenCV 4.6.0
``4.6.0+dfsg-12``, g++ 12.2). The build, run from the repository root, with ``WB`` the folder above
(each source file compiled on its own, then linked)::

    g++ -std=c++17 -O2 -ffp-contract=off -I$WB -I$WB/src -I$WB/src/include \\
        $(pkg-config --cflags opencv4) -c <file.cpp> -o <file.o>
        for tests/data/dw/dw_descriptors.cpp and the workbench's
        keypoints/{VanillaSIFT,DSPSIFT,RGBSIFT,HoWH,HoNC}.cpp,
        src/core/descriptor/extractors/wrappers/{VSIFTWrapper,RGBSIFTWrapper,
          RGBSIFTChannelAverageWrapper,HoNCWrapper,DSPRGBSIFTWrapperV2,DSPHoWHWrapperV2,
          DSPHoNCWrapperV2,DSPSIFTWrapper,ORBWrapper}.cpp (DSPSIFTWrapperV2 is header-only),
        src/core/pooling/NoPooling.cpp
    g++ <all .o> -o dw_descriptors $(pkg-config --libs opencv4)

The workbench's own CMake build uses ``-O2 -march=native``; ``-march=native`` lets g++ fuse
multiply-adds (FMA), which changes float results in the last bits on CPUs that have FMA. The
recorded file is built without it (plain x86-64, no FMA in the workbench's own code) and with
``-ffp-contract=off``; OpenCV's own routines (GaussianBlur, resize, cvtColor, hal::fastAtan2,
hal::exp, hal::magnitude, cv::normalize, addWeighted) run whatever SIMD code the installed library
dispatches to on the CPU at hand (recorded: AVX2 kernels, CPU in ``meta``). The numbers are
deterministic for one build on one CPU, but not bit-portable: ``--variants`` rebuilds with the
workbench's ``-O2 -march=native`` and reruns with ``OPENCV_CPU_DISABLE=AVX2``, and records in
``meta["variation"]`` how far each array moves. Measured when recording: every element of the
``__pipeline__`` arrays (unit rows) within 1.1e-6, every raw element within 1.1e-6 of its row's L2
norm except HoWH (rows of L2 307.2, elements within 0.009: its hue is ill-conditioned on this
nearly grey image); with AVX disabled as well, pipeline elements moved by up to 1.2e-4. Compare
with a tolerance, not bit for bit.

Input: the demo scene v_coins (``generate_scene("v_coins", out, seed=0)``), images 1.ppm and 2.ppm.
Keypoints: ``cv2.SIFT_create().detect`` on the grey image (``cv2.COLOR_BGR2GRAY``), per image the 40
with the largest response whose x, y lie in [40, W-40) x [40, H-40) (stable sort: ties keep
detection order), in that order; handed to the harness as exact float32 values (hex floats).

Contents of the npz (``allow_pickle=False`` loads it):

- ``keypoints__<img>`` (img "1" or "2"): N x 7 float64: x, y, size, angle, response, octave,
  class_id (float32 values; octave is OpenCV's packed int).
- ``<TYPE>__<img>``: float32, N x dim, what the workbench's wrapper ``extract()`` returns with
  default ``DescriptorParams`` on the image the experiment runner hands it, one row per keypoint in
  keypoint order (for HoWH: the HoWH class's ``compute``).
- ``<TYPE>__pipeline__<img>``: float32, the same keypoints through the runner's default
  post-processing (``NoPooling``: rows L2-normalised once more; no rooting), i.e. what the runner
  stores and matches. Absent for HoWH (no DescriptorType).
- ``<TYPE>__dspindex__<img>`` (DSP V2 types): int32, one row per (keypoint, scale), keypoint-major:
  keypoint, scale index, octave, layer, wanted pyramid index, used index, number of pyramid
  images, status (0 ok, 1 clamped to the pyramid's last image, 2 invalid: row of -1, skipped).
- ``meta``: a one-element string array holding a JSON document: workbench commit, OpenCV
  version, harness build commands, keypoint selection, per-type class, input image, parameters
  and post-processing.

What the arrays show: image 1 of v_coins is grey
(B = G = R), so HoWH__1 is all zeros (saturation 0) and DSPHOWH_V2__1 equals DSPHOWH_V2_COLOR__1; the
DSP V2 types clamp the pyramid index for the top-octave keypoints at scales 1.5 and 2.0
(``__dspindex__`` status 1: 4 slots in image 1, 10 in image 2); no row is dropped, no value is
non-finite, no keypoint is reordered.

TYPE: vSIFT, RGBSIFT, RGBSIFT_CHANNEL_AVG, HoNC, HoWH, DSPSIFT_V2, DSPRGBSIFT_V2, DSPHOWH_V2,
DSPHONC_V2, and DSPHOWH_V2_COLOR (DSPHOWH_V2 given the colour image, as with ``use_color: true``;
by default the runner gives DSPHOWH_V2 the grey image).
DSPSIFT (``DSPSIFTWrapper``, default scales) and DSPSIFT_S085_130 / DSPSIFT_S150 (its scales
``[0.85, 1.0, 1.3]`` and ``[1.5]``) on the SIFT keypoints (raw: the average of rows of norm 512).

ORB (``ORBWrapper``, uint8 rows): ``keypoints_orb__<img>`` (same columns; ``cv2.ORB_create().detect``,
the 40 largest responses inside the border, so their octave fields are ORB levels), ``ORB__<img>``
and ``ORB__pipeline__<img>`` on them, ``ORB__order__<img>`` (int32: the keypoint row each returned
row describes: ``ORBWrapper`` returns ORB's order, grouped by octave), and
``ORB_ON_SIFT_KEYPOINTS__<img>`` / ``__pipeline__``: ``ORBWrapper`` on the SIFT keypoints, whose
packed octave fields ORB reads as levels: 0 rows (OpenCV raises ``Insufficient memory``, the wrapper
catches it; the message is in ``meta["orb_harness_manifest"]``). Every ``ORB__pipeline__`` byte is 0:
the runner's ``cv::normalize(NORM_L2)`` runs on the uint8 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "workbench_descriptors.npz"
SCENE = "v_coins"
IMAGES = ("1", "2")
PER_IMAGE = 40
BORDER = 40
WORKBENCH_COMMIT = "b834e17"

WB_SOURCES = (
    "keypoints/VanillaSIFT.cpp",
    "keypoints/DSPSIFT.cpp",
    "keypoints/RGBSIFT.cpp",
    "keypoints/HoWH.cpp",
    "keypoints/HoNC.cpp",
    "src/core/descriptor/extractors/wrappers/VSIFTWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/RGBSIFTWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/RGBSIFTChannelAverageWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/HoNCWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/DSPRGBSIFTWrapperV2.cpp",
    "src/core/descriptor/extractors/wrappers/DSPHoWHWrapperV2.cpp",
    "src/core/descriptor/extractors/wrappers/DSPHoNCWrapperV2.cpp",
    "src/core/descriptor/extractors/wrappers/DSPSIFTWrapper.cpp",
    "src/core/descriptor/extractors/wrappers/ORBWrapper.cpp",
    "src/core/pooling/NoPooling.cpp",
)
CXXFLAGS = ("-std=c++17", "-O2", "-ffp-contract=off")

DEFAULT_PARAMS = {
    "pooling": "NONE", "pooling_aggregation": "AVERAGE", "scales": [1.0, 1.5, 2.0], "scale_weights": [],
    "scale_weighting": "UNIFORM", "normalize_before_pooling": False, "normalize_after_pooling": True,
    "rooting_stage": "R_NONE", "norm_type": "NORM_L2",
    "source": "src/include/thesis_project/types.hpp:348-360 (DescriptorParams)",
}
SIFT_CLASS = "VanillaSIFT defaults: nOctaveLayers 3, sigma 1.6, contrastThreshold 0.04, edgeThreshold 10"
PIPELINE = ("NoPooling::computeDescriptors (src/core/pooling/NoPooling.cpp:16-36): extract(), then, with the "
            "defaults, only cv::normalize(row, row, 1, 0, NORM_L2) per row (pooling_utils.hpp:10-16); no rooting")
DSP = ("DSPVanillaSIFTWrapper::computeDSP (keypoints/DSPVanillaSIFTWrapper.h:155-331): one pyramid from the "
       "keypoints' packed octaves (first octave min(0, min octave), doubled base image if < 0, n octaves = "
       "max - first + 1, +1 only if a scale < 1 and more than one scale); per scale s in {1.0, 1.5, 2.0}: "
       "size = kp.size*s, octave/layer from log2(size/(2*1.6)) (the packed octave/layer are not used), pyramid "
       "index clamped to the last image, index < 0 gives a row of -1; AVERAGE over scales per element skipping "
       "-1 values; then L2 normalisation of each row")
TYPES = {
    "vSIFT": {"class": "wrappers::VSIFTWrapper -> VanillaSIFT::compute", "input": "gray", "dim": 128,
              "wrapper_postprocessing": "none (VanillaSIFT rows: clipped at 0.2*L2, scaled to L2 = 512)"},
    "RGBSIFT": {"class": "wrappers::RGBSIFTWrapper -> cv::RGBSIFT::compute", "input": "color", "dim": 384,
                "wrapper_postprocessing": "L2 normalisation per row (RGBSIFTWrapper.cpp:37-43)"},
    "RGBSIFT_CHANNEL_AVG": {"class": "wrappers::RGBSIFTChannelAverageWrapper -> cv::RGBSIFT::compute", "input": "color",
                            "dim": 128,
                            "wrapper_postprocessing": "mean of the three 128-blocks: addWeighted(b0, 1/3, b1, 1/3, 0) "
                                                      "+= b2/3 (RGBSIFTChannelAverageWrapper.cpp:100-103); no "
                                                      "normalisation"},
    "HoNC": {"class": "wrappers::HoNCWrapper -> HoNC::compute", "input": "color", "dim": 128,
             "wrapper_postprocessing": "L2 normalisation per row (HoNCWrapper.cpp:36-42)"},
    "HoWH": {"class": "HoWH::compute (no wrapper, no DescriptorType)", "input": "color", "dim": 128,
             "wrapper_postprocessing": "none (HoWH rows: clipped at 0.2*L2, scaled to L2 = 0.6*512)",
             "pipeline": None},
    "DSPSIFT_V2": {"class": "DSPSIFTWrapperV2 -> DSPVanillaSIFTWrapper<VanillaSIFT>::computeDSP", "input": "gray",
                   "dim": 128, "wrapper_postprocessing": DSP},
    "DSPRGBSIFT_V2": {"class": "wrappers::DSPRGBSIFTWrapperV2 -> DSPVanillaSIFTWrapper<cv::RGBSIFT>::computeDSP",
                      "input": "color", "dim": 384, "wrapper_postprocessing": DSP},
    "DSPHOWH_V2": {"class": "wrappers::DSPHoWHWrapperV2 -> DSPVanillaSIFTWrapper<HoWH>::computeDSP", "input": "gray",
                   "dim": 128,
                   "wrapper_postprocessing": DSP + "; the grey image is made BGR (3 equal channels) and no HSV "
                                                  "conversion happens"},
    "DSPHOWH_V2_COLOR": {"class": "wrappers::DSPHoWHWrapperV2 given the colour image (use_color: true)",
                         "input": "color", "dim": 128,
                         "wrapper_postprocessing": DSP + "; BGR pyramid, no HSV conversion: channel 0 (B) is read "
                                                        "as hue, channel 1 (G) as saturation"},
    "DSPHONC_V2": {"class": "wrappers::DSPHoNCWrapperV2 -> DSPVanillaSIFTWrapper<HoNC>::computeDSP", "input": "color",
                   "dim": 128, "wrapper_postprocessing": DSP},
}
DSPSIFT = ("DSPSIFTWrapper (src/core/descriptor/extractors/wrappers/DSPSIFTWrapper.cpp:12-37) -> "
           "DSPSIFT::compute (keypoints/DSPSIFT.cpp): numScales = len(scales), linePoint1/2 = min/max(scales); "
           "scale factors linePoint1 + i (linePoint2 - linePoint1) / (numScales - 1) (one scale: linePoint2 at the "
           "keypoint's own packed octave/layer); no normalisation in the wrapper")
TYPES.update({
    "DSPSIFT": {"class": DSPSIFT, "input": "gray", "dim": 128, "wrapper_postprocessing": "none (average of the "
                "VanillaSIFT rows of norm 512 over the scales)", "scales": [1.0, 1.5, 2.0]},
    "DSPSIFT_S085_130": {"class": DSPSIFT + "; non-default scales", "input": "gray", "dim": 128,
                         "wrapper_postprocessing": "none", "scales": [0.85, 1.0, 1.3]},
    "DSPSIFT_S150": {"class": DSPSIFT + "; non-default scales (one scale)", "input": "gray", "dim": 128,
                     "wrapper_postprocessing": "none", "scales": [1.5]},
    "ORB": {"class": "wrappers::ORBWrapper (ORBWrapper.cpp:7-40) -> cv::ORB::create()->compute", "input": "gray",
            "dim": 32, "dtype": "u8", "keypoints": "orb",
            "wrapper_postprocessing": "none (the rows ORB returns, in ORB's order: grouped by octave field)"},
})
# ORB is run on the ORB keypoints (its octave fields are ORB levels) and, to record what it does
# with SIFT's packed octave fields, once on the SIFT keypoints (stored as ORB_ON_SIFT_KEYPOINTS)
ORB_ON_SIFT = "ORB_ON_SIFT_KEYPOINTS"
STATUS = {"ok": 0, "clamped": 1, "invalid": 2}


def compile_commands(wb: Path, build: Path, flags: tuple[str, ...] = CXXFLAGS) -> list[list[str]]:
    cflags = subprocess.run(["pkg-config", "--cflags", "opencv4"], check=True, capture_output=True,
                            text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "opencv4"], check=True, capture_output=True, text=True).stdout.split()
    incs = [f"-I{wb}", f"-I{wb / 'src'}", f"-I{wb / 'src' / 'include'}"]
    cmds, objs = [], []
    for src in [HERE / "dw_descriptors.cpp", *(wb / s for s in WB_SOURCES)]:
        obj = build / (src.relative_to(wb if src.is_relative_to(wb) else HERE).as_posix().replace("/", "__") + ".o")
        cmds.append(["g++", *flags, *incs, *cflags, "-c", str(src), "-o", str(obj)])
        objs.append(str(obj))
    cmds.append(["g++", *objs, "-o", str(build / "dw_descriptors"), *libs])
    return cmds


def sift_keypoints(image: Path, detector=None) -> np.ndarray:
    bgr = cv2.imread(str(image), cv2.IMREAD_COLOR)
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    h, w = gray.shape
    kps = [p for p in (detector or cv2.SIFT_create()).detect(gray, None)
           if BORDER <= p.pt[0] < w - BORDER and BORDER <= p.pt[1] < h - BORDER]
    kps.sort(key=lambda p: -p.response)
    rows = [(p.pt[0], p.pt[1], p.size, p.angle, p.response, p.octave, p.class_id) for p in kps[:PER_IMAGE]]
    arr = np.array(rows, dtype=np.float64)
    arr[:, :5] = arr[:, :5].astype(np.float32)  # OpenCV keypoints are float32: keep them exact
    return arr


def write_keypoints(kps: np.ndarray, path: Path) -> None:
    path.write_text("".join(" ".join(float(v).hex() for v in row) + "\n" for row in kps))


def read_dspindex(path: Path) -> np.ndarray:
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        *nums, status = line.split()
        rows.append([int(v) for v in nums] + [STATUS[status]])
    return np.array(rows, dtype=np.int32)


def opencv_version() -> str:
    version = subprocess.run(["pkg-config", "--modversion", "opencv4"], check=True, capture_output=True,
                             text=True).stdout.strip()
    deb = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libopencv-dev"], capture_output=True, text=True)
    return version + (f" (Debian libopencv-dev {deb.stdout.strip()})" if deb.returncode == 0 else "")


def cpu() -> str:
    """The CPU model and the SIMD flags that decide which of OpenCV's dispatched kernels run."""
    model, flags = "unknown", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = [f for f in line.split(":", 1)[1].split() if f in ("sse4_2", "avx", "avx2", "fma", "avx512f")]
    except OSError:
        pass
    return f"{model} ({' '.join(flags)})"


def read_order(path: Path) -> np.ndarray | str:
    """The ORB order report: the input row of each returned row, or the exception text."""
    text = path.read_text()
    if text.startswith("# exception "):
        return text[len("# exception "):].strip()
    return np.array([int(v) for v in text.split()], dtype=np.int32)


def run_harness(exe: Path, inputs: dict[str, tuple[Path, Path]], work: Path,
                env: dict[str, str] | None = None, types=None, alias: str | None = None,
                expect_rows: bool = True) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """Run the harness on every image for ``types`` (default: those on the SIFT keypoints); return
    its arrays (npz keys, the type named ``alias`` if given) and its manifest lines. ORB's order
    report becomes ``<TYPE>__order__<img>``, or, where ORB raised, ``meta["orb_exceptions"]``."""
    types = types or [t for t, m in TYPES.items() if m.get("keypoints", "sift") == "sift"]
    arrays: dict[str, np.ndarray] = {}
    manifests: dict[str, list[str]] = {}
    for img, (image, kp_file) in inputs.items():
        n = sum(1 for _ in kp_file.open())
        out = work / f"out{img}"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        proc = subprocess.run([str(exe), str(image), str(kp_file), str(out), *types], check=True,
                              env={**os.environ, **(env or {})}, capture_output=True, text=True)
        manifests[img] = (out / "manifest.txt").read_text().splitlines()
        if proc.stderr.strip():
            manifests[img].append("stderr: " + " | ".join(proc.stderr.strip().splitlines()))
        for line in manifests[img]:
            if line.startswith("stderr: "):
                continue
            name, kind, rows, cols, _nonfinite, _input = line.split()
            u8 = TYPES[name].get("dtype") == "u8"
            data = np.fromfile(out / f"{name}.{kind}.{'u8' if u8 else 'f32'}",
                               dtype=np.uint8 if u8 else "<f4").reshape(int(rows), int(cols))
            if expect_rows and data.shape != (n, TYPES[name]["dim"]):
                raise SystemExit(f"{name} {kind} image {img}: shape {data.shape}, expected ({n}, {TYPES[name]['dim']})")
            key = alias or name
            arrays[f"{key}__{img}" if kind == "raw" else f"{key}__pipeline__{img}"] = data
        for name in types:
            order = out / f"{name}.order.txt"
            if order.exists():
                got = read_order(order)
                if isinstance(got, str):
                    manifests[img].append(f"{alias or name} exception: {got}")
                else:
                    arrays[f"{alias or name}__order__{img}"] = got
        for name in types:
            idx = out / f"{name}.dspindex.txt"
            if idx.exists():
                arrays[f"{name}__dspindex__{img}"] = read_dspindex(idx)
    return arrays, manifests


def variation(ref: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Per descriptor key: [largest absolute difference, number of elements that differ]."""
    return {k: [float(np.abs(other[k] - v).max()), int((other[k] != v).sum())]
            for k, v in sorted(ref.items()) if v.dtype == np.float32}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workbench", type=Path, required=True, help="the workbench's source files at b834e17")
    ap.add_argument("--build-dir", type=Path, help="keep the harness build here (default: a temporary folder)")
    ap.add_argument("--variants", action="store_true",
                    help="also measure, and record in meta, how far the numbers move with the workbench's own "
                         "-march=native build and with OpenCV's AVX2 kernels disabled (OPENCV_CPU_DISABLE=AVX2)")
    a = ap.parse_args()
    from descbench.datasets.demo import generate_scene

    wb = a.workbench.resolve()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        build = a.build_dir or tmp / "build"
        build.mkdir(parents=True, exist_ok=True)
        cmds = compile_commands(wb, build)
        for cmd in cmds:
            subprocess.run(cmd, check=True)

        generate_scene(SCENE, tmp, seed=0)
        keypoints: dict[str, np.ndarray] = {}
        inputs: dict[str, tuple[Path, Path]] = {}
        orb_inputs: dict[str, tuple[Path, Path]] = {}
        for img in IMAGES:
            image = tmp / SCENE / f"{img}.ppm"
            keypoints[f"keypoints__{img}"] = kps = sift_keypoints(image)
            write_keypoints(kps, tmp / f"kp{img}.txt")
            inputs[img] = (image, tmp / f"kp{img}.txt")
            keypoints[f"keypoints_orb__{img}"] = okps = sift_keypoints(image, cv2.ORB_create())
            write_keypoints(okps, tmp / f"kporb{img}.txt")
            orb_inputs[img] = (image, tmp / f"kporb{img}.txt")
        arrays, manifests = run_harness(build / "dw_descriptors", inputs, tmp / "ref")
        orb_arrays, orb_manifests = run_harness(build / "dw_descriptors", orb_inputs, tmp / "orb", types=["ORB"])
        on_sift, on_sift_manifests = run_harness(build / "dw_descriptors", inputs, tmp / "orbsift", types=["ORB"],
                                                 alias=ORB_ON_SIFT, expect_rows=False)
        arrays.update(orb_arrays)
        arrays.update(on_sift)

        variants = {}
        if a.variants:
            native = build / "native"
            native.mkdir(exist_ok=True)
            for cmd in compile_commands(wb, native, ("-std=c++17", "-O2", "-march=native")):
                subprocess.run(cmd, check=True)
            variants["workbench CMake flags: -O2 -march=native"] = variation(
                arrays, run_harness(native / "dw_descriptors", inputs, tmp / "native")[0])
            variants["OPENCV_CPU_DISABLE=AVX2 (SSE4 kernels)"] = variation(
                arrays, run_harness(build / "dw_descriptors", inputs, tmp / "noavx2", {"OPENCV_CPU_DISABLE": "AVX2"})[0])

        def placeholders(text: str) -> str:
            return text.replace(str(build), "$BUILD").replace(str(wb), "$WB").replace(str(HERE), "tests/data/dw")

        meta = {
            "workbench": "F-Sossi/DescriptorWorkbench",
            "workbench_commit": WORKBENCH_COMMIT,
            "opencv_version": opencv_version(),
            "cpu": cpu(),
            "opencv_cpu_disable": os.environ.get("OPENCV_CPU_DISABLE", ""),
            "keypoint_detector": f"python cv2 {cv2.__version__}: SIFT_create() defaults, detect on COLOR_BGR2GRAY, "
                                 f"{PER_IMAGE} largest responses inside a {BORDER} px border, stable sort",
            "scene": f"descbench.datasets.demo.generate_scene('{SCENE}', out, seed=0), images {', '.join(IMAGES)}",
            "image_reading": "cv::imread(path, IMREAD_COLOR); converted with COLOR_BGR2GRAY unless use_color "
                             "(src/cli/experiment_runner/processing.cpp:648-651, 687-690); the YAML loader sets "
                             "use_color only for RGBSIFT, RGBSIFT_CHANNEL_AVG, HoNC, DSPRGBSIFT_V2, DSPHONC_V2 "
                             "(src/core/config/YAMLConfigLoader.cpp:32-44, 295-308)",
            "harness_build": [placeholders(" ".join(c)) for c in cmds],
            "default_params": DEFAULT_PARAMS,
            "sift_class_params": SIFT_CLASS,
            "pipeline_postprocessing": PIPELINE,
            "types": TYPES,
            "dspindex_columns": ["keypoint", "scale_index", "octave", "layer", "wanted_index", "used_index",
                                 "n_pyramid_images", "status (0 ok, 1 clamped, 2 invalid)"],
            "harness_manifest": manifests,
            "orb_harness_manifest": {"orb_keypoints": orb_manifests, "sift_keypoints": on_sift_manifests},
            "orb_keypoint_detector": f"python cv2 {cv2.__version__}: ORB_create() defaults, detect on COLOR_BGR2GRAY, "
                                     f"{PER_IMAGE} largest responses inside a {BORDER} px border, stable sort (keys "
                                     "keypoints_orb__<img>; their octave fields are ORB pyramid levels)",
            "variation": variants or "not measured (run with --variants)",
        }
        arrays = {**keypoints, **arrays, "meta": np.array([json.dumps(meta, indent=1, sort_keys=True)])}
        np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
