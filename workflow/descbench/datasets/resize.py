"""Resized copies of a dataset's scenes, as glue-factory resizes HPatches before it evaluates.

glue-factory's HPatches benchmark (``gluefactory/eval/hpatches.py``) loads every image through its
``ImagePreprocessor`` (``gluefactory/utils/image.py``) with ``resize: 480, side: short`` and
adjusts the ground truth to the new pixel grid (``gluefactory/datasets/hpatches.py``). The config
option ``resize: {size, side}`` does the same for any dataset (demo, HPatches, a folder): a
``resize_scene`` job writes each scene's resized copy under ``<data_dir>/resized/`` and every later
stage reads that copy instead of the original.

**Size** (:func:`resized_size`, glue-factory's ``get_new_image_size``): for ``side: short`` the
shorter side becomes ``size`` and the other ``int(size * aspect)`` (truncated, not rounded);
``side: long`` likewise for the longer side. An image smaller than ``size`` is enlarged.

**Pixels** (:func:`resize_image`, kornia's ``resize(..., antialias=True)`` with bilinear
interpolation and ``align_corners=False``, which glue-factory calls): the image as float32
``value / 255``; when shrinking by a factor ``f > 1`` along an axis, first a Gaussian blur of
``sigma = max((f - 1) / 2, 0.001)`` along it, kernel ``int(max(4 sigma, 3))`` taps rounded up to
odd, borders reflected (``dcb|abcd|cba``); then bilinear sampling at ``(i + 0.5) f - 0.5``,
clamped to the image. Computed here in float32 (OpenCV's separable filter, then numpy), which
equals kornia's output to a few float32 units in the last place (tested). glue-factory hands the networks that float image; descbench's stages read
8-bit files, so the result is rounded to the nearest level (``round(255 v)``) and stored as an
8-bit ``k.ppm`` (lossless; a grey source stays grey in all three channels): at most half a level
from glue-factory's input at any pixel. This is the one place where the numbers of a resized run
can differ from glue-factory's.

**Geometry** (:func:`resize_homography`): with ``S = diag(w' / w, h' / h, 1)`` of each image,
the homography image a -> image b becomes ``S_b H S_a^-1``. As glue-factory does, the two scale
factors are float32 (``torch.Tensor``) and the result is rounded to float32 (``H_0to1`` is a
float32 tensor there), then written in descbench's text format with 17 digits, which reads back
bit for bit. The corners of image a and every
keypoint then live on the resized grid, so the corner error, the thresholds in pixels and the
AUCs are those of glue-factory's evaluation.

The copy keeps the scene's structure: images ``1..N`` (named ``k.ppm``), every ``H_1_k``, and a
``pairs.txt`` with its pairs' own homography files (each adjusted for its two images). The job
writes ``resized.json`` last (sizes, scales, the source folder): a copy without it is incomplete,
and the workflow redoes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from descbench.errors import ConfigError, DataError

#: glue-factory's ``side`` values that descbench supports (``vert``/``horz`` are not used by its benchmarks).
SIDES = ("short", "long")
#: Written last by :func:`resize_scene`: the marker of a complete copy.
RESIZED_FLAG = "resized.json"


def check_resize(resize: dict | None, where: str = "resize") -> None:
    """``resize`` is null or ``{size: int >= 1, side: short | long}``; ConfigError naming the key."""
    if resize is None:
        return
    size, side = resize.get("size"), resize.get("side")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ConfigError(f"{where}.size must be a positive whole number of pixels (glue-factory's HPatches: 480), got {size!r}")
    if side not in SIDES:
        raise ConfigError(f"{where}.side must be one of {', '.join(SIDES)} (the side that becomes size pixels), got {side!r}")


def resized_size(height: int, width: int, size: int, side: str) -> tuple[int, int]:
    """``(new_height, new_width)``: the ``side`` side becomes ``size``, the other keeps the aspect,
    truncated (glue-factory's ``get_new_image_size``).

    >>> resized_size(1000, 1500, 480, "short")
    (480, 720)
    >>> resized_size(900, 600, 480, "short")
    (720, 480)
    >>> resized_size(1000, 1500, 480, "long")
    (320, 480)
    """
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    aspect = width / height
    if (side == "short") ^ (aspect < 1.0):
        return size, int(size * aspect)
    return int(size / aspect), size


def _gaussian_taps(factor: float) -> np.ndarray | None:
    """kornia's anti-aliasing kernel for a shrink ``factor`` along one axis (None: no blur needed)."""
    sigma = max((factor - 1.0) / 2.0, 0.001)
    taps = int(max(2.0 * 2 * sigma, 3))
    taps += 1 - taps % 2
    x = np.arange(taps, dtype=np.float64) - taps // 2
    k = np.exp(-(x ** 2) / (2.0 * sigma ** 2))
    return (k / k.sum()).astype(np.float32)


def _bilinear_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """torch's ``align_corners=False`` bilinear taps along one axis: source indices ``i0, i1`` and
    weights ``1 - lambda, lambda`` (float32). The source coordinate ``s (i + 0.5) - 0.5`` with the
    float32 scale ``s = n_in / n_out`` is rounded to float32 once (torch's fused multiply-add: the
    float64 product is exact), clamped at 0; ``i0`` is its floor, at most ``n_in - 1``."""
    f32 = np.float32
    scale = f32(n_in) / f32(n_out)
    src = np.maximum((np.float64(scale) * (np.arange(n_out) + 0.5) - 0.5).astype(f32), f32(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam = np.clip(src - i0.astype(f32), f32(0), f32(1)).astype(f32)
    return i0, np.minimum(i0 + 1, n_in - 1), (f32(1) - lam).astype(f32), lam


def _antialias(x: np.ndarray, new_height: int, new_width: int) -> np.ndarray:
    """kornia's anti-aliasing before a shrink (float32 ``x``): the Gaussian blur of
    :func:`_gaussian_taps` along each axis when either shrinks, borders reflected; ``x`` as it is
    otherwise."""
    import cv2

    h, w = x.shape[:2]
    fy, fx = h / new_height, w / new_width
    if max(fy, fx) <= 1:
        return x
    ky = _gaussian_taps(fy) if h > 1 else np.ones(1, np.float32)
    kx = _gaussian_taps(fx) if w > 1 else np.ones(1, np.float32)
    return cv2.sepFilter2D(x, cv2.CV_32F, kx, ky, borderType=cv2.BORDER_REFLECT_101)


def resize_float(image: np.ndarray, new_height: int, new_width: int) -> np.ndarray:
    """The float32 image (values ``/ 255``) resized as kornia's ``resize(antialias=True)``, shape
    ``(new_height, new_width[, C])``, before rounding to 8 bits: OpenCV's separable filter for the
    blur, then torch's bilinear sampling in numpy (:func:`_bilinear_taps`; rows' weights outside,
    columns' inside, as torch sums them)."""
    h, w = image.shape[:2]
    x = _antialias((image.astype(np.float64) / 255.0).astype(np.float32), new_height, new_width)  # torch.tensor(image / 255.0)
    if (new_height, new_width) == (h, w):
        return x
    y0, y1, my, ly = _bilinear_taps(h, new_height)
    x0, x1, mx, lx = _bilinear_taps(w, new_width)
    rows = (slice(None), None) + (None,) * (x.ndim - 2)
    cols = (None, slice(None)) + (None,) * (x.ndim - 2)
    top, bottom = x[y0], x[y1]
    return (my[rows] * (mx[cols] * top[:, x0] + lx[cols] * top[:, x1])
            + ly[rows] * (mx[cols] * bottom[:, x0] + lx[cols] * bottom[:, x1])).astype(np.float32)


def resize_image(image: np.ndarray, new_height: int, new_width: int) -> np.ndarray:
    """:func:`resize_float` rounded to the nearest 8-bit level (uint8, the input's channels)."""
    x = resize_float(image, new_height, new_width)
    return np.clip(np.rint(x.astype(np.float64) * 255.0), 0, 255).astype(np.uint8)


def scale_matrix(old_hw: tuple[int, int], new_hw: tuple[int, int]) -> np.ndarray:
    """``diag(w' / w, h' / h, 1)``, the two factors rounded to float32 as glue-factory's."""
    sx, sy = np.float32(new_hw[1] / old_hw[1]), np.float32(new_hw[0] / old_hw[0])
    return np.diag([float(sx), float(sy), 1.0])


def resize_homography(H: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray) -> np.ndarray:
    """``S_b H S_a^-1`` rounded to float32 (glue-factory's ``H_0to1``), returned as float64.

    >>> S = np.diag([0.5, 0.5, 1.0])
    >>> resize_homography(np.array([[1.0, 0, 10], [0, 1, 20], [0, 0, 1]]), S, S)
    array([[ 1.,  0.,  5.],
           [ 0.,  1., 10.],
           [ 0.,  0.,  1.]])
    """
    return (scale_b @ np.asarray(H, np.float64) @ np.linalg.inv(scale_a)).astype(np.float32).astype(np.float64)


def resize_depth(depth: np.ndarray, new_height: int, new_width: int) -> np.ndarray:
    """A depth map [H, W] resized as glue-factory resizes it (``posed_images.py``: its
    ``ImagePreprocessor`` with ``interpolation="nearest"``, ``antialias`` still on): in float32,
    kornia's anti-aliasing blur when shrinking (:func:`_antialias`; unknown depths, 0, are blurred
    with the rest, as there), then torch's ``nearest`` sampling, source index
    ``min(floor(i * s), n - 1)`` with the float32 scale ``s = n / n'`` and the product in float32.
    Returns float32 [new_height, new_width].

    >>> resize_depth(np.array([[1.0, 2.0], [3.0, 4.0]]), 3, 4).tolist()  # enlarged: no blur, nearest rows/columns
    [[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0], [3.0, 3.0, 4.0, 4.0]]
    """
    h, w = depth.shape
    x = _antialias(np.asarray(depth, dtype=np.float32), new_height, new_width)

    def nearest(n_in: int, n_out: int) -> np.ndarray:
        if n_in == n_out:
            return np.arange(n_out)
        scale = np.float32(n_in) / np.float32(n_out)
        return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64), n_in - 1)

    return x[nearest(h, new_height)][:, nearest(w, new_width)]


#: A resized posed view's camera model, by its source's: the focal lengths may scale differently
#: along x and y (each side is truncated on its own), so one focal becomes two (``Camera.scale``
#: keeps ``fx``, ``fy`` apart); a radial term is kept as OPENCV's ``k1`` (``k2``), unchanged.
RESIZED_CAMERA_MODEL = {"SIMPLE_PINHOLE": "PINHOLE", "PINHOLE": "PINHOLE", "SIMPLE_RADIAL": "OPENCV",
                        "RADIAL": "OPENCV", "OPENCV": "OPENCV"}


def resize_camera(view, scale: np.ndarray, new_hw: tuple[int, int]):
    """The :class:`~descbench.datasets.posed.View` of ``view`` after its image was resized to
    ``new_hw``: glue-factory's ``Camera.scale`` (``f * s``, ``c * s`` in COLMAP's corner
    convention, which is what a resize with ``align_corners=False`` does to a point), ``scale``
    :func:`scale_matrix`'s (float32 factors), distortion unchanged, in
    :data:`RESIZED_CAMERA_MODEL`; the pose is the view's.

    >>> from descbench.datasets.posed import View
    >>> v = View("a", np.eye(3), np.zeros(3), "SIMPLE_PINHOLE", 640, 480, (500.0, 320.0, 240.0))
    >>> r = resize_camera(v, scale_matrix((480, 640), (240, 320)), (240, 320))
    >>> r.model, r.width, r.height, r.params
    ('PINHOLE', 320, 240, (250.0, 250.0, 160.0, 120.0))
    """
    from dataclasses import replace

    from descbench.datasets.posed import CAMERA_MODELS

    p = dict(zip(CAMERA_MODELS[view.model], view.params))
    fx, fy = (p["f"], p["f"]) if "f" in p else (p["fx"], p["fy"])
    sx, sy = float(scale[0, 0]), float(scale[1, 1])
    params = (fx * sx, fy * sy, p["cx"] * sx, p["cy"] * sy)
    model = RESIZED_CAMERA_MODEL[view.model]
    if model == "OPENCV":
        params += (p.get("k1", p.get("k", 0.0)), p.get("k2", 0.0), p.get("p1", 0.0), p.get("p2", 0.0))
    return replace(view, model=model, width=int(new_hw[1]), height=int(new_hw[0]), params=params)


def format_view(view) -> str:
    """One ``views.txt`` line of ``view`` (:mod:`descbench.datasets.posed`), every number written
    with ``repr`` (17 significant digits), which reads back bit for bit."""
    numbers = [*np.asarray(view.R, np.float64).ravel(), *np.asarray(view.t, np.float64).ravel()]
    return " ".join([view.name, *map(repr, map(float, numbers)), view.model, str(view.width), str(view.height),
                     *map(repr, map(float, view.params))])


def resize_posed_scene(source_dir: Path | str, out_dir: Path | str, size: int, side: str) -> dict:
    """Write the resized copy of the posed scene folder ``source_dir`` (``views.txt`` layout) into
    ``out_dir``, as glue-factory's ``posed_images`` loads a view with ``preprocessing.resize``:
    each image of a view the pairs name resized (:func:`resize_image`), its camera scaled
    (:func:`resize_camera`), its depth map, where it has one, resized (:func:`resize_depth`) and
    written in its source's format (``.h5``: float32; ``.png``: rounded to glue-factory's 1/256,
    the one place where depths differ from glue-factory's float ones). ``pairs.txt`` is copied;
    ``views.txt`` lists the resized cameras. The copy's images are PNG data (lossless) under the
    views' own file names (``images/<name>``, e.g. ``x.jpg``): descbench reads images by content, so
    view names, and the tables' image columns, stay the source's. A scene of the calibrated pairs
    layout is a DataError (glue-factory resizes neither ScanNet-1500 nor a pairs file's ``K``).
    Returns what ``resized.json`` holds; each file is written atomically and ``resized.json`` last."""
    import cv2

    from descbench.datasets import posed
    from descbench.datasets.layout import posed_depth_file, read_image, read_posed_source
    from descbench.fileops import atomic_path, write_bytes_atomic, write_text_atomic

    source_dir, out_dir = Path(source_dir), Path(out_dir)
    src = read_posed_source(source_dir)
    if src.views is None:
        raise DataError(f"{src.pairs_file}: resizing a calibrated pairs file's scene is not supported (its K would have to "
                        "be rewritten per pair; glue-factory's ScanNet-1500 is not resized); remove resize for this dataset")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESIZED_FLAG).unlink(missing_ok=True)  # a copy being rewritten is incomplete until the end
    used = {v for pair in src.pairs for v in pair}
    views, record = {}, {}
    for name, view in src.views.items():
        if name not in used:
            views[name] = view  # not evaluated: listed as it is (no image needs to exist)
            continue
        img = read_image(src.image_dir / name, color=True)
        if (img.shape[1], img.shape[0]) != (view.width, view.height):
            raise DataError(f"{src.image_dir / name} is {img.shape[1]} x {img.shape[0]}, but {src.views_file} gives view "
                            f"{name!r} a {view.width} x {view.height} camera; fix the camera or the image")
        new_hw = resized_size(img.shape[0], img.shape[1], size, side)
        ok, buf = cv2.imencode(".png", resize_image(img, *new_hw))
        if not ok:
            raise OSError(f"OpenCV could not encode the resized image of view {name!r} of {source_dir}")
        write_bytes_atomic(out_dir / posed.IMAGE_DIR / name, buf.tobytes())
        scale = scale_matrix(img.shape[:2], new_hw)
        views[name] = resize_camera(view, scale, new_hw)
        record[name] = {"source": [img.shape[1], img.shape[0]], "resized": [new_hw[1], new_hw[0]],
                        "scale_xy": [scale[0, 0], scale[1, 1]]}
        depth_file = posed_depth_file(source_dir, name)
        if depth_file is not None:
            depth = resize_depth(posed.read_depth(depth_file, view), *new_hw)
            target = out_dir / posed.DEPTH_DIR / depth_file.name
            if depth_file.suffix == ".h5":
                try:
                    import h5py
                except ImportError:  # (read_depth needed it already: reached only if it went meanwhile)
                    raise DataError(f"{depth_file}: writing the resized HDF5 depth map needs h5py, which descbench "
                                    'installs with its interop extra: pip install "descbench[interop]"') from None

                with atomic_path(target) as tmp, h5py.File(str(tmp), "w") as f:
                    f.create_dataset("depth", data=depth, track_times=False)  # no time stamp: same input, same file
            else:
                ok, buf = cv2.imencode(".png", posed.depth_png(depth))
                if not ok:
                    raise OSError(f"OpenCV could not encode the resized depth map {depth_file}")
                write_bytes_atomic(target, buf.tobytes())
            record[name]["depth"] = depth_file.name
    write_text_atomic(out_dir / posed.VIEWS_FILE, "".join(format_view(v) + "\n" for v in views.values()))
    write_text_atomic(out_dir / posed.PAIRS_FILE, src.pairs_file.read_text())
    out = {"source": str(source_dir), "size": size, "side": side, "layout": "posed", "views": record}
    write_text_atomic(out_dir / RESIZED_FLAG, json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def resize_scene(source_dir: Path | str, out_dir: Path | str, size: int, side: str) -> dict:
    """Write the resized copy of the scene folder ``source_dir`` into ``out_dir`` (module
    docstring; a posed scene folder: :func:`resize_posed_scene`); returns what ``resized.json``
    holds. Each file is written atomically and ``resized.json`` last."""
    import cv2

    from descbench.datasets.layout import is_posed_folder, read_homography, read_image, scene_files, write_homography
    from descbench.fileops import write_bytes_atomic, write_text_atomic

    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if is_posed_folder(source_dir):
        return resize_posed_scene(source_dir, out_dir, size, side)
    files = scene_files(source_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESIZED_FLAG).unlink(missing_ok=True)  # a copy being rewritten is incomplete until the end
    scales, sizes = {}, {}
    for k, path in zip(files.image_numbers, files.images):
        img = read_image(path, color=True)
        new_hw = resized_size(img.shape[0], img.shape[1], size, side)
        ok, buf = cv2.imencode(".ppm", resize_image(img, *new_hw))
        if not ok:
            raise OSError(f"OpenCV could not encode the resized image {k} of {source_dir}")
        write_bytes_atomic(out_dir / f"{k}.ppm", buf.tobytes())
        scales[k] = scale_matrix(img.shape[:2], new_hw)
        sizes[k] = {"source": [img.shape[1], img.shape[0]], "resized": [new_hw[1], new_hw[0]]}
    for k, path in files.homographies.items():
        write_homography(out_dir / f"H_1_{k}", resize_homography(read_homography(path), scales[1], scales[k]), exact=True)
    if files.pairs_file is not None:
        for p in files.listed:
            if p.file is not None:
                write_homography(out_dir / p.file.name, resize_homography(read_homography(p.file), scales[p.a], scales[p.b]),
                                 exact=True)
        write_text_atomic(out_dir / files.pairs_file.name, files.pairs_file.read_text())
    record = {"source": str(source_dir), "size": size, "side": side,
              "images": {str(k): {**sizes[k], "scale_xy": [scales[k][0, 0], scales[k][1, 1]]} for k in sizes}}
    write_text_atomic(out_dir / RESIZED_FLAG, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record

