"""Memory (``mem_mb``) and runtime (``runtime``, minutes) of each job, for Snakemake's resources.

A cluster (SLURM) kills a job that uses more memory than it asked for, and one that runs past its
time; a job that asks for far more waits longer in the queue and blocks a node. The keypoint,
descriptor, score and patch-descriptor jobs therefore ask for what their inputs need:
``mem_mb`` and ``runtime`` from the image sizes and keypoint counts of the job's scenes, through
models fitted to measurements of the real job commands (``benchmarks/bench_resources.py``; the
tables and the fits: ``benchmarks/README.md``, section "Job memory and runtime models
(bench_resources.py)"). The rules call :func:`keypoint_job`, :func:`descriptor_job`,
:func:`score_job` and :func:`patch_job`.

**Cheap.** Snakemake evaluates resources when it builds the DAG (and again when a job's inputs
are ready), once per job, so nothing here decodes an image: an image's size is read from its
file header (PNM, PNG, JPEG, BMP, TIFF; :func:`image_size`), a few hundred bytes, and remembered
per file (path, size, modification time).

**Images not there yet** (HPatches before its download, the demo before its generation): a
documented default size per dataset, :data:`DEFAULT_IMAGE_SIZE` (the demo's bound: its longer side
is at most ``descbench.datasets.demo.MAX_SIDE`` = 640 px; HPatches: 2400 x 1800, an assumed bound
above its largest images, which are the 8 sequences larger than 1600 x 1200 that the D2-Net
convention drops). Snakemake evaluates a job's resources again when the job is about to run (its
inputs then exist), so a keypoint job of a run that downloads HPatches is sized from the real
images. A file whose header is not understood is taken as :data:`UNREADABLE_PIXELS_PER_BYTE` pixels
per byte of the file (at least the default size): the job itself then reports the file.

**Keypoint counts** are not known before detection. When the keypoint file of a scene exists
(a descriptor or score job about to run, or a rerun) and was written for the set's current spec
(its recorded params), its counts per image are used. Otherwise they are modelled per image as
``min(cap, density * area inside the border)``: ``density`` (keypoints per megapixel) and the
detector's own limit from its params declared by the detector
(:class:`descbench.keypoints.detectors.Detector` ``density`` and ``cap``), ``cap`` also the set's
``max_keypoints``; a derived set is its source's count after its ``per_image_top_n_by_size``
filters (the other filters are taken as keeping every keypoint), an intersection the smaller of
its sources'.

**The models** (per scene of the job's batch; from the README's fit: the constants below, and
the fitted :class:`descbench.jobfacts.Model` and :class:`descbench.jobfacts.Cost` that each detector
and descriptor family declares, so that a family added in its own module is sized by its own facts):

* memory of a scene: ``base + mb_per_mp * (largest image, MP) + mb_per_kkp * (the scene's
  keypoints / 1000)``; the job's ``mem_mb`` is the largest over its scenes (scenes run one after
  the other) times :data:`MEM_SAFETY`, rounded up to 100 MB;
* runtime: ``base_s + sum over scenes (s_per_mp * scene MP + s_per_kkp * scene keypoints / 1000)``
  (score: ``s_per_mpair * sum_k N_1 N_k / 1e6``, scaled by the descriptor's width / 128), times
  :data:`RUNTIME_FACTOR`, in minutes rounded up, at least :data:`MIN_RUNTIME_MIN`.
"""

from __future__ import annotations

import functools
import json
import math
import os
import struct
from pathlib import Path

from descbench.datasets import experiment_name
from descbench.datasets.demo import MAX_SIDE as DEMO_MAX_SIDE
from descbench.datasets.hpatches import N_IMAGES  # the shape assumed for a scene not there yet, and the benchmark's
from descbench.datasets.layout import scene_files
from descbench.descriptors import get_family
from descbench.errors import DescbenchError
from descbench.io import META_KEY
from descbench.jobfacts import DEFAULT_DENSITY, Cost, Model
from descbench.keypoints.detectors import DETECTORS

# ----------------------------------------------------------------------------- constants
# Measured and fitted in benchmarks/README.md, "Job memory and runtime models (bench_resources.py)"
# (peak RSS of the real job commands, os.wait4; wall time on a shared, loaded 2-core machine):
# change them there first (rerun benchmarks/bench_resources.py) and keep both in step.

#: Memory asked for = the model's estimate times this (the fits' scatter, other OpenCV/torch builds).
MEM_SAFETY = 1.25
#: Runtime asked for = the model's estimate times this (slower nodes, shared file systems).
RUNTIME_FACTOR = 2.0
#: No job asks for less (minutes): start-up, imports and file systems vary more than the work.
MIN_RUNTIME_MIN = 5
#: No job asks for less memory (MB; the smallest job measured peaks at 158 MB).
MIN_MEM_MB = 500

#: (width, height) assumed for an image that does not exist yet, per dataset.
DEFAULT_IMAGE_SIZE = {"demo": (DEMO_MAX_SIDE, DEMO_MAX_SIDE), "hpatches": (2400, 1800)}
#: Any other dataset (a folder scene whose images cannot be located): 27 MP.
UNKNOWN_IMAGE_SIZE = (6000, 4500)
#: An image whose header is not understood: pixels per byte of its file (a photograph's JPEG
#: takes about 0.1-0.5 bytes per pixel, a PNG or PPM more).
UNREADABLE_PIXELS_PER_BYTE = 10

# The models of each detector's keypoint job, each descriptor family's descriptor and patch jobs, and
# the density and cap of each detector's keypoints are declared by the detector
# (descbench.keypoints.detectors.DETECTORS) and the family (its module under descbench/descriptors/;
# descbench.jobfacts: the fitted models several of them share).

#: Sets that read keypoints from files (a detector name outside the detector registry: locked,
#: precomputed; measured: locked 158 -> 328 MB from 0.26 to 27 MP, the image read for its size) or
#: from other sets (derived sets).
FILE_KEYPOINT_MODEL = Model(base_mb=160, mb_per_mp=7, mb_per_kkp=2.0, base_s=2, s_per_mp=0.03, s_per_kkp=0.02)

# Score jobs: memory per 1000 keypoints of the scene's largest image (measured 298 / 541 / 971 MB at
# 1,000 / 4,000 / 16,000 keypoints per image), time per million descriptor comparisons (sum over the
# scene's 5 pairs of N_1 * N_k, 128 dimensions; measured 0.024 s), plus the two chunk_mb blocks.
SCORE_MODEL = Model(base_mb=250, mb_per_kkp=45.0, base_s=3)
SCORE_S_PER_MPAIR = 0.03

# Patch-descriptor jobs: one patch sequence, 16 strips of 65 x 65 patches (the models: the family's
# Cost.patch_model).
#: Bytes per patch held by a patch job (the strip's 65 x 65 pixels, its rows, working copies).
PATCH_BYTES = 10000
#: Patches per strip assumed for a sequence that is not generated by this run (hpatches-release,
#: a folder): an assumed bound above hpatches-release's sequences.
PATCHES_PER_STRIP = 5000
N_STRIPS = 16


# ----------------------------------------------------------------------------- image headers


def image_size(path: Path | str) -> tuple[int, int] | None:
    """(width, height) of an image from its file header, without decoding it; ``None`` when the
    header is not one this reads (binary and ASCII PNM/PAM, PNG, JPEG, BMP, TIFF/BigTIFF, told by
    their first bytes as OpenCV does, not by the file name) or the file cannot be read."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return None
    return _header_size(str(p), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=65536)
def _header_size(path: str, size: int, mtime_ns: int) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(32)
            if head[:2] in (b"P1", b"P2", b"P3", b"P4", b"P5", b"P6", b"P7"):
                out = _pnm_size(head + fh.read(4096))
            elif head[:8] == b"\x89PNG\r\n\x1a\n":
                out = _png_size(head)
            elif head[:2] == b"\xff\xd8":
                out = _jpeg_size(fh)
            elif head[:2] == b"BM":
                out = _bmp_size(head)
            elif head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
                out = _tiff_size(fh, head)
            else:
                out = None
    except (OSError, struct.error, ValueError, IndexError):
        return None
    if out is None or out[0] <= 0 or out[1] <= 0:
        return None
    return int(out[0]), int(out[1])


def _pnm_size(data: bytes) -> tuple[int, int] | None:
    if data[:2] == b"P7":  # PAM: WIDTH / HEIGHT lines up to ENDHDR
        fields = {}
        for line in data.split(b"\n")[1:]:
            parts = line.split()
            if parts and parts[0] == b"ENDHDR":
                break
            if len(parts) >= 2:
                fields[parts[0]] = parts[1]
        return int(fields[b"WIDTH"]), int(fields[b"HEIGHT"])
    tokens, i = [], 2
    while len(tokens) < 2 and i < len(data):
        c = data[i : i + 1]
        if c == b"#":  # a comment runs to the end of the line
            j = data.find(b"\n", i)
            i = len(data) if j < 0 else j + 1
        elif c.isspace():
            i += 1
        else:
            j = i
            while j < len(data) and data[j : j + 1].isdigit():
                j += 1
            if j == i:
                return None
            tokens.append(int(data[i:j]))
            i = j
    return (tokens[0], tokens[1]) if len(tokens) == 2 else None


def _png_size(head: bytes) -> tuple[int, int] | None:
    if head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


# SOF markers: baseline, extended, progressive, lossless (Huffman or arithmetic); not DHT (C4),
# JPG (C8) or DAC (CC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(fh) -> tuple[int, int] | None:
    fh.seek(2)
    while True:
        b = fh.read(1)
        while b and b != b"\xff":  # garbage between segments
            b = fh.read(1)
        while b == b"\xff":  # fill bytes
            b = fh.read(1)
        if not b:
            return None
        marker = b[0]
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # no length
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        length = struct.unpack(">H", fh.read(2))[0]
        if marker in _SOF:
            _precision, h, w = struct.unpack(">BHH", fh.read(5))
            return w, h
        fh.seek(length - 2, os.SEEK_CUR)


def _bmp_size(head: bytes) -> tuple[int, int] | None:
    dib = struct.unpack("<I", head[14:18])[0]
    if dib == 12:  # BITMAPCOREHEADER
        return struct.unpack("<HH", head[18:22])
    w, h = struct.unpack("<ii", head[18:26])
    return w, abs(h)  # a negative height is a top-down bitmap


def _tiff_size(fh, head: bytes) -> tuple[int, int] | None:
    e = "<" if head[:2] == b"II" else ">"
    big = struct.unpack(e + "H", head[2:4])[0] == 43
    if big:
        ifd = struct.unpack(e + "Q", head[8:16])[0]
        fh.seek(ifd)
        n = struct.unpack(e + "Q", fh.read(8))[0]
        entry, value_at = 20, 12
    else:
        ifd = struct.unpack(e + "I", head[4:8])[0]
        fh.seek(ifd)
        n = struct.unpack(e + "H", fh.read(2))[0]
        entry, value_at = 12, 8
    data = fh.read(entry * min(n, 4096))
    found = {}
    for i in range(min(n, len(data) // entry)):
        rec = data[i * entry : (i + 1) * entry]
        tag, typ = struct.unpack(e + "HH", rec[:4])
        if tag in (256, 257):
            if typ == 3:  # SHORT
                found[tag] = struct.unpack(e + "H", rec[value_at : value_at + 2])[0]
            elif typ == 4:  # LONG
                found[tag] = struct.unpack(e + "I", rec[value_at : value_at + 4])[0]
            elif typ == 16:  # LONG8 (BigTIFF)
                found[tag] = struct.unpack(e + "Q", rec[value_at : value_at + 8])[0]
    if 256 in found and 257 in found:
        return found[256], found[257]
    return None


# ----------------------------------------------------------------------------- scenes


def default_image_size(cfg: dict) -> tuple[int, int]:
    """The (width, height) assumed for an image of ``cfg``'s dataset that does not exist yet."""
    return DEFAULT_IMAGE_SIZE.get(cfg.get("dataset"), UNKNOWN_IMAGE_SIZE)


def scene_image_sizes(scene_dir: Path | str, default: tuple[int, int]) -> list[tuple[int, int]]:
    """(width, height) of the scene's images from their headers; ``default`` for every image of a
    scene folder that does not exist or is not complete yet (an HPatches-shaped scene of 6); an unreadable header: its file's
    bytes times :data:`UNREADABLE_PIXELS_PER_BYTE` pixels (square), at least ``default``."""
    try:
        st = Path(scene_dir).stat()
    except OSError:
        return [default] * N_IMAGES
    images = _scene_images(str(scene_dir), st.st_mtime_ns)
    if images is None:
        return [default] * N_IMAGES
    out = []
    for p in map(Path, images):
        size = image_size(p)
        if size is None:
            try:
                px = p.stat().st_size * UNREADABLE_PIXELS_PER_BYTE
            except OSError:
                px = 0
            side = math.isqrt(max(px, default[0] * default[1]))
            size = (side, side)
        out.append(size)
    return out


@functools.lru_cache(maxsize=16384)
def _scene_images(scene_dir: str, mtime_ns: int) -> tuple[str, ...] | None:
    """The scene's image paths (``scene_files``), remembered per folder state (adding, removing or
    renaming a file changes the folder's modification time); ``None`` for a folder that is not a
    complete scene (a download in progress: the job itself says what is wrong)."""
    try:
        return tuple(str(p) for p in scene_files(scene_dir).images)
    except (DescbenchError, OSError):
        return None


# ----------------------------------------------------------------------------- keypoint counts


def _detector_cap(spec: dict) -> int | None:
    det = DETECTORS.get(spec["detector"])
    return det.cap_of(spec.get("params") or {}) if det else None


def modelled_keypoints(kpsets: dict, kpset: str, size: tuple[int, int], _seen: tuple = ()) -> int:
    """Keypoints of one image of ``size`` = (width, height) in set ``kpset``, before detection
    (module docstring: density x area inside the border, capped)."""
    if kpset in _seen:  # a cycle is a config error reported elsewhere; never loop here
        return 0
    spec = kpsets[kpset]
    if "detector" in spec:
        b = spec.get("border_px", 40)
        area_mp = max(0, size[0] - 2 * b) * max(0, size[1] - 2 * b) / 1e6
        det = DETECTORS.get(spec["detector"])
        n = math.ceil((det.density if det else DEFAULT_DENSITY) * area_mp)
        for cap in (spec.get("max_keypoints"), _detector_cap(spec)):
            if cap is not None:
                n = min(n, int(cap))
        return n
    seen = (*_seen, kpset)
    if "intersection" in spec:
        n = min(modelled_keypoints(kpsets, s, size, seen) for s in spec["intersection"]["sources"])
    else:
        n = modelled_keypoints(kpsets, spec["source"], size, seen)
    for f in spec.get("filters") or []:
        if "per_image_top_n_by_size" in f:
            n = min(n, int(f["per_image_top_n_by_size"]))
    return n


def observed_keypoints(cfg: dict, kpset: str, scene: str) -> list[int] | None:
    """Keypoints per image (1..6) of the scene's keypoint file of ``kpset`` when it exists and was
    written for the set's current spec (its recorded params); ``None`` otherwise."""
    root = Path(cfg.get("results_dir", "results")) / experiment_name(cfg) / "keypoints" / kpset
    if not root.is_dir():
        return None
    for path in sorted(root.glob(f"batch*/{scene}.parquet")):
        try:
            st = path.stat()
        except OSError:
            continue
        counts, params = _file_counts(str(path), st.st_size, st.st_mtime_ns)
        if counts is not None and params == json.dumps({"keypoint_set": kpset, **cfg["keypoint_sets"][kpset]}, sort_keys=True):
            return counts
    return None


@functools.lru_cache(maxsize=16384)
def _file_counts(path: str, size: int, mtime_ns: int) -> tuple[list[int] | None, str | None]:
    """(keypoints per image, recorded params as sorted JSON) of a keypoint file: its footer and
    its int8 ``image`` column only."""
    try:
        import numpy as np
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        meta = json.loads((f.schema_arrow.metadata or {}).get(META_KEY, b"{}"))
        image = f.read(columns=["image"]).column("image").to_numpy()
        n = len(meta.get("image_sizes") or {}) or N_IMAGES  # every image of the scene, an empty one too
        counts = np.bincount(image.astype(np.int64), minlength=n + 1)[1 : n + 1]
        return [int(c) for c in counts], json.dumps(meta.get("params"), sort_keys=True)
    except Exception:  # noqa: BLE001 - an unreadable file is "not known": the model is used
        return None, None


def scene_keypoints(cfg: dict, kpset: str, scene_dir: Path | str, sizes: list[tuple[int, int]]) -> list[int]:
    """Keypoints per image of one scene: the file's counts if current, else the model's."""
    observed = observed_keypoints(cfg, kpset, Path(scene_dir).name)
    if observed is not None:
        return observed
    return [modelled_keypoints(cfg["keypoint_sets"], kpset, s) for s in sizes]


# ----------------------------------------------------------------------------- the jobs


def _resources(mem_mb: float, seconds: float) -> dict:
    mem = max(MIN_MEM_MB, int(math.ceil(MEM_SAFETY * mem_mb / 100.0)) * 100)
    runtime = max(MIN_RUNTIME_MIN, int(math.ceil(RUNTIME_FACTOR * seconds / 60.0)))
    return {"mem_mb": mem, "runtime": runtime}


def _batch(model: Model, scenes: list[tuple[list[tuple[int, int]], list[int]]], kp_time_factor: float = 1.0,
           mp_time_factor: float = 1.0) -> tuple[float, float]:
    """(memory MB, seconds) of a batch: per scene (image sizes, keypoints per image)."""
    mem, secs = 0.0, model.base_s
    for sizes, counts in scenes:
        mps = [w * h / 1e6 for w, h in sizes]
        kkp = sum(counts) / 1000.0
        mem = max(mem, model.base_mb + model.mb_per_mp * max(mps) + model.mb_per_kkp * kkp)
        secs += mp_time_factor * model.s_per_mp * sum(mps) + kp_time_factor * model.s_per_kkp * kkp
    return mem, secs


def _scenes(cfg: dict, kpset: str, scene_dirs: list[Path], counts: bool = True):
    default = default_image_size(cfg)
    out = []
    for d in scene_dirs:
        sizes = scene_image_sizes(d, default)
        out.append((sizes, scene_keypoints(cfg, kpset, d, sizes) if counts else [0] * len(sizes)))
    return out


def keypoint_job(cfg: dict, kpset: str, scene_dirs: list[Path]) -> dict:
    """``{"mem_mb", "runtime"}`` of the keypoint job of set ``kpset`` on ``scene_dirs`` (one batch)."""
    spec = cfg["keypoint_sets"][kpset]
    scenes = [(sizes, [modelled_keypoints(cfg["keypoint_sets"], kpset, s) for s in sizes])
              for sizes in (scene_image_sizes(d, default_image_size(cfg)) for d in scene_dirs)]
    det = DETECTORS.get(spec.get("detector"))
    return _resources(*_batch(det.model if det else FILE_KEYPOINT_MODEL, scenes))


def _leaves(spec: dict | None) -> list[Cost]:
    """The costs of the families a descriptor job runs (descbench.jobfacts.Cost, declared by each
    family): a family with children (a stack's parts, a pooled base) runs each of them its
    ``repeats`` times (a pooled family: once per scale), one after the other; any other family its
    own cost. A spec without a family (the patch benchmarks' CSV descriptors) and a family without
    children to run cost what a family that declares nothing costs."""
    if not spec or "family" not in spec:
        return [Cost()]
    fam, params = get_family(spec["family"]), spec.get("params") or {}
    n = fam.repeats_of(params)
    leaves = [leaf for child in fam.children_of(params) for leaf in _leaves(child)] or [fam.cost_of(params)]
    return leaves if n == 1 else [leaf.scaled(n) for leaf in leaves]


def descriptor_job(cfg: dict, kpset: str, descriptor: str, scene_dirs: list[Path]) -> dict:
    """``{"mem_mb", "runtime"}`` of the descriptor job of ``descriptor`` on set ``kpset``: the
    largest memory of its families (they run one after the other), the sum of their times."""
    return _resources(*_descriptor_estimate(_leaves(cfg["descriptors"][descriptor]), _scenes(cfg, kpset, scene_dirs)))


def _descriptor_estimate(leaves: list[Cost], scenes) -> tuple[float, float]:
    mem, secs = 0.0, 0.0
    for c in leaves:
        m, t = _batch(c.model, scenes, kp_time_factor=c.per_keypoint, mp_time_factor=c.per_pixel)
        mem, secs = max(mem, m + c.extra_mb), secs + t
    return mem, secs


def descriptor_width(cfg: dict, descriptor: str, _seen: tuple = ()) -> int:
    """Dimensions a descriptor's rows are compared in (an estimate for the score time; at least
    128 is assumed for every 128-D float and every binary family), as its family declares it from
    its params and the widths of its children and of the config's descriptors it combines."""
    return _width_of(cfg["descriptors"][descriptor], cfg, (*_seen, descriptor))


def _width_of(spec: dict, cfg: dict, seen: tuple) -> int:
    fam, params = get_family(spec["family"]), spec.get("params") or {}
    parts = [_width_of(child, cfg, seen) for child in fam.children_of(params)]
    parts += [descriptor_width(cfg, c, seen) for c in fam.components_of(params)
              if c in cfg["descriptors"] and c not in seen]
    return fam.width_of(params, parts)


def _scene_pairs(cfg: dict, scene_dir: Path, n_images: int) -> list[tuple[int, int]]:
    """The pairs ``(a, b)`` a scene is scored on (its ``pairs.txt``, else the config's ``pairs``);
    a scene folder not there yet (demo, download): the option's pairs of ``n_images`` images."""
    from descbench.datasets.layout import list_pairs, pairs_mode

    try:
        return [(p.a, p.b) for p in scene_files(scene_dir).pairs(pairs_mode(cfg))]
    except (DescbenchError, OSError):
        return list_pairs(n_images, pairs_mode(cfg))


def score_job(cfg: dict, kpset: str, descriptor: str, scene_dirs: list[Path]) -> dict:
    """``{"mem_mb", "runtime"}`` of the score job of (``kpset``, ``descriptor``) on ``scene_dirs``:
    memory from the largest image's keypoints and the two ``scoring.chunk_mb`` blocks, time from
    the descriptor comparisons of the scene's pairs (:func:`_scene_pairs`; and, with ``verification.distractors_per_scene:
    all``, of each query against every distractor image's keypoints)."""
    width = max(1.0, descriptor_width(cfg, descriptor) / 128.0)
    chunk_mb = (cfg.get("scoring") or {}).get("chunk_mb", 64)
    ver = cfg.get("verification") or {}
    all_distractors = ver.get("enabled") and ver.get("distractors_per_scene") == "all"
    mem, secs = 0.0, SCORE_MODEL.base_s
    for d, (_sizes, counts) in zip(scene_dirs, _scenes(cfg, kpset, scene_dirs)):
        mem = max(mem, SCORE_MODEL.base_mb + 2 * chunk_mb + SCORE_MODEL.mb_per_kkp * width * max(counts) / 1000.0)
        pairs = sum(counts[a - 1] * counts[b - 1] for a, b in _scene_pairs(cfg, d, len(counts)))
        if all_distractors:  # one image of each distractor scene, about this scene's size
            pairs += counts[0] * int(ver.get("distractor_scenes") or 0) * max(counts)
        secs += SCORE_S_PER_MPAIR * width * pairs / 1e6
    return _resources(mem, secs)


def patch_job(cfg: dict, descriptor: str) -> dict:
    """``{"mem_mb", "runtime"}`` of one patch-descriptor job (one sequence's 16 strips) of
    ``descriptor``: ``patches.generate.max_patches`` patches per strip for generated patches,
    :data:`PATCHES_PER_STRIP` otherwise (hpatches-release, a folder, CSV files)."""
    patches = cfg.get("patches") or {}
    if patches.get("source", "generated") == "generated":
        n = int((patches.get("generate") or {}).get("max_patches") or PATCHES_PER_STRIP)
    else:
        n = PATCHES_PER_STRIP
    total = N_STRIPS * n
    mem, secs = 0.0, 0.0
    for c in _leaves(cfg["descriptors"].get(descriptor)):
        model = c.patch_model
        mem = max(mem, model.base_mb + total * PATCH_BYTES / 1e6 + c.extra_mb)
        secs += model.base_s + c.per_keypoint * model.s_per_kkp * total / 1000.0
    return _resources(mem, secs)


def estimate_for_measurement(row: dict) -> dict | None:
    """The model's ``{"mem_mb", "runtime"}`` for one measurement of benchmarks/bench_resources.py
    (a scene of 6 images of ``row["side"]`` px squared, its measured keypoints), so that the
    benchmark prints every measured job next to its estimate; ``None`` for rows it does not model."""
    side, job, what = row.get("side"), row.get("job"), row.get("what")
    if not isinstance(side, int) or "kp_scene" not in row:
        return None
    sizes = [(side, side)] * N_IMAGES
    per_image = [row["kp_scene"] // N_IMAGES] * N_IMAGES
    per_image[0] = row["kp_scene"] - sum(per_image[1:])
    scenes = [(sizes, per_image)]
    if job == "keypoints":  # ``what``: the detector, or a set read from files (locked)
        det = DETECTORS.get(what)
        return _resources(*_batch(det.model if det else FILE_KEYPOINT_MODEL, scenes))
    if job == "descriptors":  # ``what``: the family, with its default params (a network's batch: the larger default)
        return _resources(*_descriptor_estimate(_leaves({"family": what, "params": {"batch_mem_mb": None}}), scenes))
    if job == "score":
        n = [row["kp_max"]] * N_IMAGES  # the measured pairs, as N_1 * N_k with N_k = N_1
        mem = SCORE_MODEL.base_mb + 2 * 64 + SCORE_MODEL.mb_per_kkp * row["kp_max"] / 1000.0
        secs = SCORE_MODEL.base_s + SCORE_S_PER_MPAIR * row.get("pairs_gkp2", sum(n[0] * k for k in n[1:]) / 1e6)
        return _resources(mem, secs)
    return None
