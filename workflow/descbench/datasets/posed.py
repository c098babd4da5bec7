"""Posed image pairs: calibrated views with known poses, in cvg/glue-factory's ``posed_images``
layout (``datasets/posed_images.py`` at commit ``2d17e3b``; MegaDepth-1500 and ScanNet-1500 as
glue-factory ships them)::

    <root>/<scene>/
        images/<name>       the images (a name may hold sub-folders)
        depths/<stem>.h5    optional depth maps, one per view: HDF5 dataset ``/depth`` (0 = unknown),
                            or <stem>.png: 16-bit, depth = value / 256 (glue-factory's ``load_depth``)
        views.txt           one line per view: name, R (9 numbers, row-major), t (3), camera model,
                            width, height, the model's parameters (COLMAP's order)
        pairs.txt           one line per pair: name0 name1 (glue-factory's ``view_groups``)

Fields are separated by whitespace (glue-factory splits on single spaces; descbench also accepts
repeated spaces, tabs, trailing spaces and Windows line ends). ``(R, t)`` is a view's
world-to-camera pose, ``x_cam = R x_world + t``; a pair's relative pose (:func:`relative_pose`)
is ``T_0to1 = T_1 T_0^-1``: ``R = R1 R0^T``, ``t = t1 - R t0``.

Cameras are COLMAP's (:data:`CAMERA_MODELS`), in COLMAP's pixel convention: the centre of the
top-left pixel is (0.5, 0.5), where descbench's keypoints put it at (0, 0), so a view's
intrinsics (:meth:`View.K`) are used with ``offset=0.5``
(:func:`descbench.metrics.pose.normalized_points`). Like glue-factory's ``Camera.image2cam``,
the relative-pose evaluation uses the focal lengths and the principal point only: a model's
distortion parameters are read, checked and kept, but not undone.

The other layout of published pose test sets is one text file of calibrated pairs
(:func:`read_calibrated_pairs`), one pair per line: ``name0 name1 K0 (9) K1 (9) T_0to1 (16)``
(36 fields, the ``pairs_calibrated.txt`` files of MegaDepth-1500 loaders) or SuperGlue's
``name0 name1 rot0 rot1 K0 K1 T_0to1`` (38 fields, its ScanNet and YFCC test pairs), matrices
row-major, ``T_0to1`` camera 0 to camera 1. The file does not say in which pixel convention its
``K`` are, so the dataset that uses it must.

Depth maps are read by :func:`read_depth` (either format, its size checked against the view's).

Every file is checked when the scene is read (:func:`read_scene`): a line with the wrong number
of fields or a value that is not a finite number, an unknown camera model, a rotation that is not
one (``|R R^T - I| > 1e-5`` or ``det R < 0``), a non-positive focal length or image size, a view
named twice, a pair listed twice, a pair naming an unknown view or a view twice, a missing image or depth file: a
:class:`~descbench.errors.DataError` naming the file and line and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench.errors import DataError

#: COLMAP's camera models that glue-factory's ``Camera.from_colmap`` reads, and their parameters.
CAMERA_MODELS = {
    "SIMPLE_PINHOLE": ("f", "cx", "cy"),
    "PINHOLE": ("fx", "fy", "cx", "cy"),
    "SIMPLE_RADIAL": ("f", "cx", "cy", "k"),
    "RADIAL": ("f", "cx", "cy", "k1", "k2"),
    "OPENCV": ("fx", "fy", "cx", "cy", "k1", "k2", "p1", "p2"),
}
#: The largest ``|R R^T - I|`` (max abs entry) a view's rotation may have (text files round).
ROTATION_TOLERANCE = 1e-5
#: The folders and files of a posed scene (glue-factory's MegaDepth-1500 configuration).
IMAGE_DIR, DEPTH_DIR, VIEWS_FILE, PAIRS_FILE = "images", "depths", "views.txt", "pairs.txt"
DEPTH_FORMATS = ("h5", "png")


@dataclass(frozen=True)
class View:
    """One calibrated view: world-to-camera rotation ``R`` [3, 3] and translation ``t`` [3], and
    its COLMAP camera (``model``, image ``width`` x ``height``, ``params`` in the model's order)."""

    name: str
    R: np.ndarray
    t: np.ndarray
    model: str
    width: int
    height: int
    params: tuple[float, ...]

    def K(self) -> np.ndarray:
        """The pinhole intrinsics [3, 3] of the camera (COLMAP's pixel convention; distortion, if
        the model has any, not included)."""
        p = dict(zip(CAMERA_MODELS[self.model], self.params))
        fx, fy = (p["f"], p["f"]) if "f" in p else (p["fx"], p["fy"])
        return np.array([[fx, 0.0, p["cx"]], [0.0, fy, p["cy"]], [0.0, 0.0, 1.0]])


def relative_pose(view0: View, view1: View) -> tuple[np.ndarray, np.ndarray]:
    """``(R, t)`` of ``T_0to1 = T_1 T_0^-1``: camera 0's coordinates to camera 1's.

    >>> I = np.eye(3)
    >>> a = View("a", I, np.zeros(3), "PINHOLE", 640, 480, (500.0, 500.0, 320.0, 240.0))
    >>> b = View("b", I, np.array([1.0, 0.0, 0.0]), "PINHOLE", 640, 480, (500.0, 500.0, 320.0, 240.0))
    >>> relative_pose(a, b)[1].tolist()
    [1.0, 0.0, 0.0]
    """
    R = view1.R @ view0.R.T
    return R, view1.t - R @ view0.t


def is_rotation(R: np.ndarray) -> bool:
    """Whether the 3x3 ``R`` is a rotation within :data:`ROTATION_TOLERANCE`: ``|R R^T - I|``
    (largest entry) at most the tolerance and ``det R > 0`` (a reflection is not a rotation)."""
    return bool(np.abs(R @ R.T - np.eye(3)).max() <= ROTATION_TOLERANCE and np.linalg.det(R) > 0)


def _fail(path: Path, line: int, problem: str, fix: str) -> DataError:
    return DataError(f"{path}:{line}: {problem}; {fix}")


def _numbers(fields: list[str], path: Path, line: int, what: str) -> list[float]:
    out = []
    for f in fields:
        try:
            v = float(f)
        except ValueError:
            raise _fail(path, line, f"{what}: {f!r} is not a number", "write every value as a number") from None
        if not math.isfinite(v):
            raise _fail(path, line, f"{what}: {f!r} is not a finite number", "write finite values")
        out.append(v)
    return out


def parse_view(text: str, path: Path, line: int) -> View:
    """One line of ``views.txt`` (module docstring); DataError naming ``path:line`` otherwise."""
    fields = text.split()  # any whitespace: trailing spaces and tabs are accepted (glue-factory splits on " ")
    if len(fields) < 16:
        raise _fail(path, line, f"{len(fields)} fields; a view line is: name, R (9), t (3), model, width, height, "
                    "the camera's parameters", "write the view's fields separated by single spaces")
    name, model = fields[0], fields[13]
    if model not in CAMERA_MODELS:
        raise _fail(path, line, f"view {name!r}: unknown camera model {model!r}",
                    f"use one of {', '.join(CAMERA_MODELS)} (COLMAP's names)")
    want = CAMERA_MODELS[model]
    if len(fields) != 16 + len(want):
        raise _fail(path, line, f"view {name!r}: camera model {model} has {len(want)} parameters ({', '.join(want)}), "
                    f"the line gives {len(fields) - 16}", "write the model's parameters in COLMAP's order")
    pose = _numbers(fields[1:13], path, line, f"view {name!r} pose")
    R, t = np.array(pose[:9]).reshape(3, 3), np.array(pose[9:12])
    if not is_rotation(R):
        raise _fail(path, line, f"view {name!r}: R (the first 9 numbers, row-major) is not a rotation "
                    f"(|R R^T - I| = {np.abs(R @ R.T - np.eye(3)).max():.2g}, det {np.linalg.det(R):.4g})",
                    "write the world-to-camera rotation matrix row by row")
    size = _numbers(fields[14:16], path, line, f"view {name!r} image size")
    if any(v <= 0 or v != int(v) for v in size):
        raise _fail(path, line, f"view {name!r}: image size {fields[14]} x {fields[15]}", "write width and height in pixels")
    params = tuple(_numbers(fields[16:], path, line, f"view {name!r} camera parameters"))
    p = dict(zip(want, params))
    focal = [k for k in ("f", "fx", "fy") if k in p]
    if any(p[k] <= 0 for k in focal):
        raise _fail(path, line, f"view {name!r}: a focal length <= 0 ({', '.join(f'{k}={p[k]:g}' for k in focal)})",
                    "write the focal length in pixels")
    return View(name, R, t, model, int(size[0]), int(size[1]), params)


def read_views(path: Path) -> dict[str, View]:
    """``views.txt`` as ``{name: View}`` in file order (empty lines skipped)."""
    path = Path(path)
    views: dict[str, View] = {}
    for i, text in enumerate(_lines(path, "the scene's views"), 1):
        if not text.strip():
            continue
        view = parse_view(text, path, i)
        if view.name in views:
            raise _fail(path, i, f"view {view.name!r} is listed twice", "keep one line per view")
        views[view.name] = view
    if not views:
        raise DataError(f"{path}: no view; write one line per view (name, R, t, model, width, height, params)")
    return views


def read_pairs(path: Path, views: dict[str, View]) -> list[tuple[str, str]]:
    """``pairs.txt`` as ``[(name0, name1), ...]`` in file order; each name a view of ``views``."""
    path = Path(path)
    pairs, first = [], {}
    for i, text in enumerate(_lines(path, "the scene's pairs"), 1):
        if not text.strip():
            continue
        fields = text.split()  # trailing spaces accepted; Windows line ends are split off by splitlines
        if len(fields) != 2:
            raise _fail(path, i, f"{len(fields)} fields; a pair line is: name0 name1", "write two view names per line")
        for name in fields:
            if name not in views:
                raise _fail(path, i, f"view {name!r} is not in {path.parent / VIEWS_FILE}", "pair views that views.txt lists")
        if fields[0] == fields[1]:
            raise _fail(path, i, f"the pair names view {fields[0]!r} twice", "pair two different views")
        _check_new_pair(path, i, (fields[0], fields[1]), first)
        pairs.append((fields[0], fields[1]))
    if not pairs:
        raise DataError(f"{path}: no pair; write one line per pair (name0 name1)")
    return pairs


def _check_new_pair(path: Path, line: int, pair: tuple[str, str], first: dict) -> None:
    """A pair listed a second time is a DataError naming both lines (``first``: pair -> its line)."""
    if pair in first:
        raise _fail(path, line, f"pair {pair[0]} {pair[1]} is listed twice (lines {first[pair]} and {line})",
                    "each pair is evaluated once (a repeat would count it twice in every mean): remove one of the lines")
    first[pair] = line


def _lines(path: Path, what: str) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"{path} ({what}) is missing; a posed scene holds {VIEWS_FILE}, {PAIRS_FILE} and {IMAGE_DIR}/") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} ({what}) is not UTF-8 text ({exc.reason}); write it as text") from None


@dataclass(frozen=True)
class PosedScene:
    """A posed scene as read by :func:`read_scene`: its folder, views and pairs."""

    root: Path
    views: dict[str, View]
    pairs: list[tuple[str, str]]

    def image_path(self, name: str) -> Path:
        return self.root / IMAGE_DIR / name

    def depth_path(self, name: str, depth_format: str) -> Path:
        """glue-factory's ``get_depth_path``: the name's part before its first dot, then the format."""
        return self.root / DEPTH_DIR / f"{name.split('.')[0]}.{depth_format}"


def read_scene(root: Path, depth_format: str | None = None) -> PosedScene:
    """The posed scene in folder ``root``: its views and pairs checked, and every view's image
    (and depth map, with ``depth_format`` ``h5`` or ``png``) present."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"posed scene folder {root} does not exist; point the dataset at a folder of scenes in "
                        "glue-factory's posed_images layout")
    views = read_views(root / VIEWS_FILE)
    pairs = read_pairs(root / PAIRS_FILE, views)
    scene = PosedScene(root, views, pairs)
    if depth_format is not None and depth_format not in DEPTH_FORMATS:
        raise DataError(f"depth format {depth_format!r}; use one of {', '.join(DEPTH_FORMATS)}")
    for name in views:
        if not scene.image_path(name).is_file():
            raise DataError(f"{scene.image_path(name)} (the image of view {name!r}, {root / VIEWS_FILE}) is missing; "
                            "put the image there or remove the view")
        if depth_format is not None and not scene.depth_path(name, depth_format).is_file():
            raise DataError(f"{scene.depth_path(name, depth_format)} (the depth map of view {name!r}) is missing; add it, "
                            "or evaluate without depth")
    return scene


@dataclass(frozen=True)
class CalibratedPair:
    """One line of a calibrated pairs file: the two image names, their intrinsics ``K0``, ``K1``
    [3, 3] and the relative pose ``R`` [3, 3], ``t`` [3] (camera 0 to camera 1)."""

    name0: str
    name1: str
    K0: np.ndarray
    K1: np.ndarray
    R: np.ndarray
    t: np.ndarray


def read_calibrated_pairs(path: Path) -> list[CalibratedPair]:
    """A calibrated pairs file (module docstring) in file order; empty lines skipped. A line of
    another length, a value that is not a finite number, an EXIF rotation other than 0 (SuperGlue's
    ``rot0``, ``rot1``: descbench does not rotate images), intrinsics that are not pinhole, a
    ``T_0to1`` whose last row is not ``0 0 0 1`` or whose rotation is not one: DataError naming
    the file and line."""
    from descbench.metrics.pose import pinhole_intrinsics

    path = Path(path)
    pairs, first = [], {}
    for i, text in enumerate(_lines(path, "calibrated pairs"), 1):
        if not text.strip():
            continue
        fields = text.split()
        if len(fields) not in (36, 38):
            raise _fail(path, i, f"{len(fields)} fields; a calibrated pair is name0 name1 K0 (9) K1 (9) T_0to1 (16): 36 "
                        "fields, or 38 with SuperGlue's rot0 rot1 after the names", "write one pair per line")
        name0, name1 = fields[:2]
        if len(fields) == 38:
            rot = _numbers(fields[2:4], path, i, "rot0 rot1")
            if rot != [0.0, 0.0]:
                raise _fail(path, i, f"EXIF rotations {fields[2]} {fields[3]}", "rotate the images and their K beforehand "
                            "(descbench reads images as stored), then write 0 0")
            fields = fields[:2] + fields[4:]
        values = _numbers(fields[2:], path, i, f"pair {name0} {name1}")
        K0, K1 = np.array(values[:9]).reshape(3, 3), np.array(values[9:18]).reshape(3, 3)
        T = np.array(values[18:]).reshape(4, 4)
        for K, which in ((K0, "K0"), (K1, "K1")):
            try:
                pinhole_intrinsics(K, which)
            except ValueError as exc:
                raise _fail(path, i, f"pair {name0} {name1}: {exc}", "write the intrinsics row-major") from None
        R = T[:3, :3]
        if not np.array_equal(T[3], [0.0, 0.0, 0.0, 1.0]) or not is_rotation(R):
            raise _fail(path, i, f"pair {name0} {name1}: T_0to1 (the last 16 numbers, row-major) is not a rigid motion "
                        "[[R, t], [0, 0, 0, 1]]", "write the 4x4 pose from camera 0 to camera 1 row by row")
        _check_new_pair(path, i, (name0, name1), first)
        pairs.append(CalibratedPair(name0, name1, K0, K1, R.copy(), T[:3, 3].copy()))
    if not pairs:
        raise DataError(f"{path}: no pair; write one calibrated pair per line")
    return pairs


#: glue-factory's ``load_depth`` of a PNG depth map: metres = the 16-bit value / 256.
PNG_DEPTH_SCALE = 256.0


def depth_png(depth: np.ndarray) -> np.ndarray:
    """A depth map [h, w] (inf or 0 where no surface) as glue-factory's 16-bit PNG values, the
    inverse of :func:`read_depth`'s: ``round(depth * 256)`` as uint16, 0 where no surface.
    ValueError if a depth is negative or NaN, or does not fit (``depth * 256 >= 65535.5``).

    >>> depth_png(np.array([[1.0, 2.5 + 1 / 1024, np.inf]])).tolist()
    [[256, 640, 0]]
    """
    depth = np.asarray(depth, dtype=np.float64)
    seen = np.isfinite(depth) & (depth > 0)
    if (depth < 0).any() or np.isnan(depth).any():
        raise ValueError("a depth map holds a negative or NaN depth; a depth is > 0, or 0 / inf where no surface is seen")
    value = np.where(seen, np.rint(depth * PNG_DEPTH_SCALE), 0.0)
    if value.max(initial=0.0) >= 2**16:
        raise ValueError(f"a depth of {depth[seen].max():.2f} does not fit a 16-bit PNG at 1/{PNG_DEPTH_SCALE:g} "
                         f"(at most {(2**16 - 1) / PNG_DEPTH_SCALE:.2f}); write such depth maps as .h5")
    return value.astype(np.uint16)


def read_depth(path: Path, view: View) -> np.ndarray:
    """The depth map of ``view`` in ``path`` as float64 [height, width], camera z in the scene's
    units, 0 where unknown: glue-factory's ``load_depth`` (``datasets/posed_images.py``, commit
    ``2d17e3b``) for its two formats, chosen by the suffix: ``.h5`` (dataset ``/depth``, read
    with h5py, the optional ``interop`` extra) or ``.png`` (16-bit, depth = value / 256; an 8-bit
    PNG is refused: it cannot hold glue-factory's depths). A map whose size is not the view's, or
    that holds a negative or non-finite value: a :class:`~descbench.errors.DataError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} (the depth map of view {view.name!r}) is missing; add it, or evaluate without depth")
    if path.suffix == ".h5":
        try:
            import h5py
        except ImportError:
            raise DataError(f"{path}: reading HDF5 depth maps needs h5py, which descbench installs with its interop "
                            'extra: pip install "descbench[interop]" (or write the depth maps as 16-bit PNG)') from None
        try:
            with h5py.File(str(path), "r") as f:
                if "depth" not in f or not isinstance(f["depth"], h5py.Dataset):
                    raise DataError(f"{path}: no dataset /depth; glue-factory's HDF5 depth maps hold the depth in "
                                    "the dataset /depth")
                depth = np.asarray(f["depth"][()], dtype=np.float64)
        except OSError as exc:
            raise DataError(f"{path} is not a readable HDF5 file ({exc}); write the depth map with h5py") from None
    elif path.suffix == ".png":
        import cv2

        raw = cv2.imread(str(path), cv2.IMREAD_ANYDEPTH)
        if raw is None:
            raise DataError(f"{path} is not a readable PNG image; write the depth map as a 16-bit PNG")
        if raw.dtype != np.uint16:
            raise DataError(f"{path}: a {raw.dtype} PNG; a PNG depth map is 16-bit (depth x 256 as uint16, "
                            "glue-factory's convention), write it as such")
        depth = raw.astype(np.float64) / PNG_DEPTH_SCALE
    else:
        raise DataError(f"{path}: unknown depth map format {path.suffix!r}; use one of "
                        f"{', '.join('.' + f for f in DEPTH_FORMATS)}")
    if depth.shape != (view.height, view.width):
        got = f"{depth.shape[1]} x {depth.shape[0]}" if depth.ndim == 2 else f"an array of shape {depth.shape}"
        raise DataError(f"{path}: the depth map is {got}, view {view.name!r} is {view.width} x {view.height} "
                        "(width x height); write one depth per pixel of the view's image")
    if not np.isfinite(depth).all() or (depth < 0).any():
        raise DataError(f"{path}: the depth map holds a negative or non-finite value; write depths >= 0, "
                        "0 where unknown")
    return depth
