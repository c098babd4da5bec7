"""Scene folders: images, homographies, the pairs to evaluate, and image reading.

A scene folder holds images ``1..n`` (``1.ppm``, ``2.png``, ...; any ``n >= 2``, numbered without
gaps: a missing number is an error naming it) and the homographies ``H_1_k`` (3x3
whitespace-separated text mapping image-1 pixels to image k: ``p_k ~ H [x, y, 1]^T``). The
Oxford affine layout (``img1.ppm``, ``H1to2p``) has the same semantics and is accepted wherever a
scene folder is read. HPatches sequences are the case ``n = 6`` (:mod:`descbench.datasets.hpatches`).

The pairs a scene is evaluated on (:class:`PairSpec`; each scoring task scores image ``a``'s
keypoints against image ``b``'s, see :mod:`descbench.datasets.geometry`):

- without a ``pairs.txt``, the config's ``pairs`` option (:data:`PAIR_MODES`, default
  ``reference``): ``reference`` = ``(1, k)`` for ``k = 2..n`` with ``H_1_k`` (HPatches'
  protocol); ``all`` = every unordered pair ``a < b``, the homography ``H_1_b H_1_a^-1``
  composed from the scene's ``H_1_k`` files. Unordered because every pair then appears once,
  with the lower-numbered image as the query side, and the (1, k) pairs are exactly the
  ``reference`` pairs (the same rows); the reversed pair (b, a) adds no new image pair.
  Both modes need every ``H_1_2 .. H_1_n``.
- a ``pairs.txt`` in the scene folder lists the scene's pairs explicitly and takes precedence
  over the option (it is the scene's own choice). One pair per line, ``a b`` or ``a b FILE``;
  ``#`` starts a comment, blank lines are skipped::

      # query image, target image [, homography file image a -> image b]
      2 5             # composed: H_1_5 H_1_2^-1 (needs H_1_2 and H_1_5)
      1 3             # (1, k): the H_1_3 file itself
      3 4 H_3_4       # its own file in the scene folder: p_4 ~ H [x_3, y_3, 1]^T

  Pairs are ordered (``2 5`` queries image 2 against image 5; ``5 2`` is another pair) and kept
  in file order. Errors name the file and line: a malformed line, an image outside ``1..n``, a
  self pair, a duplicate pair, a missing homography file. With a ``pairs.txt``, ``H_1_k`` files
  are needed only by the pairs composed from them (and by ``mode: projected`` keypoint sets).

A folder holding a ``views.txt`` is a **posed scene** instead (glue-factory's ``posed_images``
layout, :mod:`descbench.datasets.posed`): its images are the views its ``pairs.txt`` names, numbered
``1..n`` in ``views.txt`` order (views no pair names are not read), and each pair's geometry is the
calibrated relative pose of its two views (:class:`~descbench.datasets.geometry.RelativePose`);
:func:`posed_scene_files`. So is a folder holding a ``pairs_calibrated.txt`` (one line per pair:
the two images' paths relative to the folder, their intrinsics and the relative pose;
:func:`descbench.datasets.posed.read_calibrated_pairs`), its images numbered in order of first
appearance. A folder whose pairs name more than :data:`MAX_IMAGES` views (one
MegaDepth-1500 folder holds all 1,500 pairs) is evaluated in parts of consecutive pairs, scenes
``<folder>@000``, ``<folder>@001``, ... (:func:`posed_scene_parts`), which also spreads it over
several jobs.

Everything here is pure: it only stats, reads and validates files, and every failure is a
:class:`~descbench.errors.DataError` that names the file and the fix.
"""

from __future__ import annotations

import functools

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench.datasets.geometry import Homography, Pair, RelativePose, compose_homography
from descbench.errors import ConfigError, DataError
from descbench.fileops import write_text_atomic

IMAGE_EXTENSIONS = (".ppm", ".png", ".jpg", ".jpeg", ".pgm", ".bmp", ".tif", ".tiff")
#: The optional explicit pair list of a scene folder.
PAIRS_FILE = "pairs.txt"
#: The config's ``pairs`` option: which pairs a scene without a ``pairs.txt`` is evaluated on.
PAIR_MODES = ("reference", "all")


@dataclass(frozen=True)
class PairSpec:
    """A pair of a scene as listed (no file read): query image ``a``, target image ``b`` and where
    its homography comes from: ``file`` (a ``pairs.txt`` pair's own file, image a -> image b) or,
    when None, the scene's ``H_1_a`` / ``H_1_b`` (``H_1_b`` itself when ``a == 1``, composed
    otherwise). ``where``: ``pairs.txt:<line>`` for a listed pair, for messages."""

    a: int
    b: int
    file: Path | None = None
    where: str = ""


@dataclass(frozen=True)
class SceneFiles:
    """Paths of one scene: ``images[k-1]`` is image k, ``homographies[k]`` is ``H_1_k`` (every
    target without a ``pairs.txt``; those present with one), ``pairs_file`` the ``pairs.txt`` or
    None, ``listed`` its pairs in file order (empty without one)."""

    scene: str
    images: tuple[Path, ...]
    homographies: dict[int, Path]
    pairs_file: Path | None = None
    listed: tuple[PairSpec, ...] = ()
    #: a posed scene's views (:class:`descbench.datasets.posed.View`), ``views[k-1]`` of image k; None for a
    #: sequence or a calibrated pairs file
    views: tuple | None = None
    #: a posed scene's ``views.txt`` (None for a calibrated pairs file, which is ``pairs_file``)
    views_file: Path | None = None
    #: a posed scene's depth map of each image (``depths/<stem>.h5`` or ``.png``), None where it has none
    depths: tuple | None = None
    #: a posed scene's image names (as its layout names them), ``image_names[k-1]`` of image k
    image_names: tuple | None = None
    #: a posed scene's relative pose of each listed pair (:class:`~descbench.datasets.geometry.RelativePose`)
    pair_poses: tuple | None = None

    @property
    def posed(self) -> bool:
        """Whether this is a posed scene (pairs with relative poses) rather than a sequence."""
        return self.pair_poses is not None

    @property
    def n_images(self) -> int:
        return len(self.images)

    @property
    def image_numbers(self) -> range:
        return range(1, len(self.images) + 1)

    def all_paths(self) -> list[Path]:
        """Every input file of the scene: images, ``H_1_k`` files, ``pairs.txt`` and its pairs' files."""
        own = [p.file for p in self.listed if p.file is not None]
        return [*self.images, *(self.homographies[k] for k in sorted(self.homographies)),
                *([self.views_file] if self.views_file is not None else []),
                *(d for d in (self.depths or ()) if d is not None),
                *([self.pairs_file] if self.pairs_file is not None else []), *dict.fromkeys(own)]

    def pairs(self, mode: str = "reference") -> tuple[PairSpec, ...]:
        """The scene's pairs: its ``pairs.txt`` when it has one, else ``mode`` (:data:`PAIR_MODES`)."""
        if self.pairs_file is not None:
            return self.listed
        return tuple(PairSpec(a, b) for a, b in list_pairs(self.n_images, mode))

    def homography_file(self, k: int, what: str) -> Path:
        """``H_1_k``; DataError naming ``what`` (who needs it) when the scene has none."""
        if k not in self.homographies:
            raise DataError(f"scene folder {self.images[0].parent} has no H_1_{k} (homography image 1 -> image {k}), "
                            f"which {what} needs; add it, or evaluate the scene without it")
        return self.homographies[k]


def list_pairs(n_images: int, mode: str = "reference") -> list[tuple[int, int]]:
    """The pairs ``(a, b)`` of a scene of ``n_images`` images under the ``pairs`` option ``mode``:
    ``reference`` = (1, k), k = 2..n; ``all`` = every a < b, a-major (its first pairs are the
    reference pairs)."""
    if mode == "reference":
        return [(1, k) for k in range(2, n_images + 1)]
    if mode == "all":
        return [(a, b) for a in range(1, n_images + 1) for b in range(a + 1, n_images + 1)]
    raise ConfigError(f"pairs: {mode!r} is not a pair mode; use one of {', '.join(PAIR_MODES)}")


def pairs_mode(cfg: dict) -> str:
    """The config's ``pairs`` option (``reference`` when absent: the key has no schema default so
    that a config without it records exactly what it did before the option existed)."""
    mode = cfg.get("pairs") or "reference"
    if mode not in PAIR_MODES:
        raise ConfigError(f"pairs: {mode!r} is not a pair mode; use one of {', '.join(PAIR_MODES)}")
    return mode


def _find_image(scene_dir: Path, stem: str, names: list[str] | None = None) -> Path | None:
    """Image ``stem`` of a scene folder: ``<stem><ext>`` for the first of :data:`IMAGE_EXTENSIONS`
    that exists, the extension matched case-insensitively (``1.PPM``, ``img3.Jpg``; OpenCV decodes by
    content, not by name). ``names``: the folder's listing (read here if not given). Two candidates
    for one image (``1.ppm`` and ``1.PPM``, or ``1.ppm`` and ``1.png``) are rejected by
    :func:`_sequence_images`, so the choice here is never a silent one."""
    if names is None:
        names = sorted(p.name for p in scene_dir.iterdir())
    for ext in IMAGE_EXTENSIONS:
        for name in names:
            if name.startswith(stem) and name[len(stem):].lower() == ext:
                return scene_dir / name
    return None


# What looks like an image or a homography of a sequence (either layout), by file name alone:
# an integer stem (``7``, ``img7``) with an image extension, or ``H_1_<n>`` / ``H1to<n>p``.
# Anything else (precomputed features ``1.ppm.<method>``, README, hidden files) is not matched.
_EXT_PATTERN = "|".join(e[1:] for e in IMAGE_EXTENSIONS)
_SEQUENCE_IMAGE = re.compile(rf"(img)?([0-9]+)\.({_EXT_PATTERN})", re.IGNORECASE)
_SEQUENCE_HOMOGRAPHY = re.compile(r"(?:H_1_([0-9]+)|H1to([0-9]+)p)", re.IGNORECASE)


def _homography_name(k: int, oxford: bool) -> str:
    return f"H1to{k}p" if oxford else f"H_1_{k}"


def _sequence_images(scene_dir: Path, names: list[str], oxford: bool) -> tuple[dict[int, str], list[str]]:
    """``({k: file name}, other sequence-like names)``: the images of the folder's layout, one
    file per number (two candidates for one image are an error), and the names that look like
    images or homographies of a sequence but are not one of the layout's (the caller decides)."""
    prefix = "img" if oxford else ""
    candidates: dict[int, list[str]] = {}
    extra = []
    for name in names:  # hidden names (".x") never match
        image = _SEQUENCE_IMAGE.fullmatch(name)
        if image is not None:
            stem = name[: name.rindex(".")]
            k = int(image.group(2))
            if stem == f"{prefix}{k}" and k >= 1:
                candidates.setdefault(k, []).append(name)
            else:
                extra.append(name)
    for k, found in sorted(candidates.items()):
        if len(found) > 1:
            raise DataError(
                f"scene folder {scene_dir} holds {len(found)} candidate files for image {k}: "
                f"{', '.join(found)}; descbench does not guess which one is the image. Keep exactly one "
                f"of them ({prefix}{k} with one extension) and move the other(s) out of the scene folder"
            )
    return {k: found[0] for k, found in sorted(candidates.items())}, extra


def _layout_text(oxford: bool) -> str:
    return ("img1..imgN and H1to2p..H1toNp (Oxford layout)" if oxford
            else "1..N (e.g. 1.ppm) and H_1_2..H_1_N (HPatches layout)")


def scene_files(scene_dir: Path | str, check_exists: bool = True, n_images: int | None = None) -> SceneFiles:
    """Locate the images, homographies and pair list of a scene folder (HPatches or Oxford layout).

    Only file names are inspected (no image or homography is read; ``pairs.txt`` is read and
    checked), so this is safe at DAG-build time. :class:`DataError` if the folder has fewer than
    2 images, a gap in the numbering (``1, 2, 4``), two candidate files for one image (``1.ppm``
    and ``1.png``), a missing ``H_1_k`` (without a ``pairs.txt``), a homography of an image the
    folder does not have (``H_1_9`` for 8 images), files of the other layout, or a bad
    ``pairs.txt`` (:func:`read_pairs_file`). Other files (precomputed features
    ``1.ppm.<method>``, a README, hidden files) are not looked at. Image extensions match in any
    letter case (``1.PPM``).
    With ``check_exists=False`` the HPatches names (``k.ppm``, ``H_1_k``) of ``n_images`` images
    (required then: the dataset knows its shape, e.g. :data:`descbench.datasets.hpatches.N_IMAGES`)
    are returned unchecked, which is what a rule that *creates* the scene needs.
    """
    scene_dir = Path(scene_dir)
    scene = scene_dir.name
    if check_exists and is_posed_folder(scene_dir):
        return posed_scene_files(scene_dir)
    base, sep, part = scene_dir.name.rpartition(PART_SEPARATOR)
    if check_exists and sep and part.isdigit() and not scene_dir.exists() and is_posed_folder(scene_dir.parent / base):
        return posed_scene_files(scene_dir.parent / base, int(part))  # a part of a large posed scene
    if not check_exists:
        if n_images is None:
            raise ValueError("scene_files(check_exists=False) needs n_images: the names of a scene not there yet")
        return SceneFiles(
            scene,
            tuple(scene_dir / f"{k}.ppm" for k in range(1, n_images + 1)),
            {k: scene_dir / f"H_1_{k}" for k in range(2, n_images + 1)},
        )
    if not scene_dir.is_dir():
        raise DataError(
            f"scene folder {scene_dir} does not exist; place the sequence there "
            f"(HPatches layout: 1.ppm..N.ppm and H_1_2..H_1_N) or remove '{scene}' from the scene list"
        )
    names = sorted(p.name for p in scene_dir.iterdir())
    oxford = _find_image(scene_dir, "img1", names) is not None and _find_image(scene_dir, "1", names) is None
    found, extra = _sequence_images(scene_dir, names, oxford)
    n = max(found, default=0)
    stem = "img" if oxford else ""
    pairs_path = scene_dir / PAIRS_FILE
    has_pairs = pairs_path.is_file()
    homs = {k: scene_dir / _homography_name(k, oxford) for k in range(2, n + 1)}
    for name in names:
        m = _SEQUENCE_HOMOGRAPHY.fullmatch(name)
        if m is None:
            continue
        k = int(m.group(1) or m.group(2))
        if name != _homography_name(k, oxford) or k not in homs:
            extra.append(name)
    missing_images = [k for k in range(1, n + 1) if k not in found]
    if n < 2:
        listed = ", ".join(found.values()) or "none"
        raise DataError(
            f"scene folder {scene_dir} is incomplete: a scene needs at least 2 images numbered from 1 "
            f"({stem}1.ppm, {stem}2.ppm, ... or another of {'/'.join(IMAGE_EXTENSIONS[1:])}, in any letter case); "
            f"found {listed}. Restore the files (re-extract the dataset archive) or remove the scene"
            + (f" (the folder also holds {', '.join(extra)}, which are not part of a scene)" if extra else "")
        )
    if missing_images:
        raise DataError(
            f"scene folder {scene_dir} has images up to {found[n]} but no image "
            f"{', '.join(str(k) for k in missing_images)} ({', '.join(f'{stem}{k}.ppm' for k in missing_images)} or "
            f"another extension): images are numbered 1..N without gaps: restore the missing image(s), or renumber "
            "the images (and their H_1_k files) so that the numbers follow on"
        )
    missing_homs = [homs[k].name for k in homs if homs[k].name not in names]
    if missing_homs and not has_pairs:
        raise DataError(
            f"scene folder {scene_dir} is incomplete: missing {', '.join(missing_homs)}. A scene of {n} images "
            f"needs the homographies {_homography_name(2, oxford)}..{_homography_name(n, oxford)} (image 1 -> "
            f"image k), or a {PAIRS_FILE} listing its pairs with their own homography files; restore the files "
            "(re-extract the dataset archive) or remove the scene"
            + (f" (the folder also holds {', '.join(extra)}, which are not part of a scene)" if extra else "")
        )
    if extra:
        raise DataError(
            f"scene folder {scene_dir} holds files that look like images or homographies of the sequence "
            f"but are not among its images 1..{n} and homographies ({_layout_text(oxford)}): {', '.join(extra)}. "
            "descbench does not ignore them silently: move the extra files out of the scene folder, or rename "
            f"them into the sequence (images numbered 1..N without gaps, {_homography_name(2, oxford)}.. for "
            "image 1 -> image k)"
        )
    homs = {k: p for k, p in homs.items() if p.name in names}
    images = tuple(scene_dir / found[k] for k in range(1, n + 1))
    if not has_pairs:
        return SceneFiles(scene, images, homs)
    return SceneFiles(scene, images, homs, pairs_path, read_pairs_file(pairs_path, n, homs))


#: The files that make a scene folder a posed scene (:mod:`descbench.datasets.posed`): glue-factory's
#: ``posed_images`` layout (``views.txt``, ``pairs.txt``, ``images/``) or one calibrated pairs file
#: (:func:`descbench.datasets.posed.read_calibrated_pairs`; ScanNet-1500 as glue-factory ships it),
#: whose image names are paths relative to the folder.
POSED_VIEWS_FILE = "views.txt"
CALIBRATED_PAIRS_FILE = "pairs_calibrated.txt"
#: The most images a scene may have: keypoint and descriptor files number them as int8.
MAX_IMAGES = 127
#: Between a posed scene folder's name and its part's number (``megadepth1500@003``).
PART_SEPARATOR = "@"


def is_posed_folder(scene_dir: Path) -> bool:
    """Whether ``scene_dir`` holds a posed scene's ``views.txt`` or ``pairs_calibrated.txt``."""
    return (scene_dir / POSED_VIEWS_FILE).is_file() or (scene_dir / CALIBRATED_PAIRS_FILE).is_file()


@dataclass(frozen=True)
class PosedSource:
    """A posed scene folder as read: every image name in order (``views.txt``'s order, or a
    calibrated file's order of first appearance), the pairs, each pair's relative pose, the views
    (``views.txt`` layout; None for a calibrated file), the folder images are named from, and the
    layout's files."""

    names: list[str]
    pairs: list[tuple[str, str]]
    poses: list[RelativePose]
    views: dict | None
    image_dir: Path
    views_file: Path | None
    pairs_file: Path


def read_posed_source(scene_dir: Path | str) -> PosedSource:
    """A posed scene folder read and checked (either layout, not both). Intrinsics are taken in
    COLMAP's pixel convention (``pixel_offset`` 0.5): a ``views.txt``'s cameras are COLMAP's, and
    glue-factory uses a calibrated file's ``K`` as its cameras' (the same convention). Read once per
    version of its files: a DAG build asks for a scene several times (its parts, its inputs, the
    depth decision), and a file's size and modification time key the copy it gets."""
    from descbench.datasets.posed import PAIRS_FILE as POSED_PAIRS_FILE

    scene_dir = Path(scene_dir)
    key = []
    for f in (scene_dir / POSED_VIEWS_FILE, scene_dir / POSED_PAIRS_FILE, scene_dir / CALIBRATED_PAIRS_FILE):
        try:
            st = f.stat()
            key.append((st.st_mtime_ns, st.st_size))
        except OSError:
            key.append(None)
    return _read_posed_source(scene_dir, tuple(key))


@functools.lru_cache(maxsize=256)
def _read_posed_source(scene_dir: Path, key: tuple) -> PosedSource:
    from descbench.datasets.posed import IMAGE_DIR, PAIRS_FILE as POSED_PAIRS_FILE, read_calibrated_pairs, read_pairs, \
        read_views, relative_pose

    views_file, calibrated = scene_dir / POSED_VIEWS_FILE, scene_dir / CALIBRATED_PAIRS_FILE
    if views_file.is_file() and calibrated.is_file():
        raise DataError(f"scene folder {scene_dir} holds both {POSED_VIEWS_FILE} and {CALIBRATED_PAIRS_FILE}; a posed scene "
                        "is one layout or the other: move one of them out")
    if views_file.is_file():
        views = read_views(views_file)
        pairs_file = scene_dir / POSED_PAIRS_FILE
        pairs = read_pairs(pairs_file, views)
        poses = [RelativePose(views[a].K(), views[b].K(), *relative_pose(views[a], views[b]), pixel_offset=0.5) for a, b in pairs]
        names, image_dir = list(views), scene_dir / IMAGE_DIR
    else:
        cal = read_calibrated_pairs(calibrated)
        pairs = [(c.name0, c.name1) for c in cal]
        poses = [RelativePose(c.K0, c.K1, c.R, c.t, pixel_offset=0.5) for c in cal]
        names, image_dir, views, views_file, pairs_file = list(dict.fromkeys(n for p in pairs for n in p)), scene_dir, None, None, calibrated
        inside = scene_dir.resolve()
        for n in names:
            if Path(n).is_absolute() or inside not in (scene_dir / n).resolve().parents:
                raise DataError(f"{calibrated}: image {n!r} is not a path inside the scene folder {scene_dir}; name the "
                                "images relative to it")
    return PosedSource(names, pairs, poses, views, image_dir, views_file, pairs_file)


def split_posed_pairs(pairs: list[tuple[str, str]], max_views: int = MAX_IMAGES) -> list[range]:
    """The parts of a posed scene's pairs: consecutive runs of pairs (file order), each as long as
    its pairs name at most ``max_views`` views (greedy), as ranges of pair positions.

    >>> split_posed_pairs([("a", "b"), ("b", "c"), ("d", "e"), ("a", "e")], max_views=3)
    [range(0, 2), range(2, 4)]
    """
    parts, start, seen = [], 0, set()
    for i, pair in enumerate(pairs):
        if len(seen | set(pair)) > max_views:
            parts.append(range(start, i))
            start, seen = i, set()
        seen |= set(pair)
    parts.append(range(start, len(pairs)))
    return parts


def scene_folder(scene: str) -> str:
    """The folder a scene is read from: ``<folder>`` for a part ``<folder>@<k>`` of a posed folder
    (:func:`posed_scene_parts`), the scene's own name otherwise.

    >>> scene_folder("megadepth1500@003"), scene_folder("v_graffiti")
    ('megadepth1500', 'v_graffiti')
    """
    base, sep, part = scene.rpartition(PART_SEPARATOR)
    return base if sep and base and part.isdigit() else scene


def posed_scene_parts(scene_dir: Path | str) -> list[str]:
    """The scenes a posed scene folder is evaluated as: the folder's name when its pairs name at most
    :data:`MAX_IMAGES` views, else one part per run of pairs (:func:`split_posed_pairs`) named
    ``<folder>@<k>`` (``megadepth1500@000``, ...), which :func:`scene_files` reads back."""
    scene_dir = Path(scene_dir)
    parts = split_posed_pairs(read_posed_source(scene_dir).pairs)
    return [scene_dir.name] if len(parts) == 1 else [f"{scene_dir.name}{PART_SEPARATOR}{k:03d}" for k in range(len(parts))]


def posed_scene_files(scene_dir: Path | str, part: int | None = None) -> SceneFiles:
    """The :class:`SceneFiles` of a posed scene (module docstring), or of its part ``part``
    (:func:`posed_scene_parts`; scene name ``<folder>@<part>``): the layout's files read and checked
    (:func:`read_posed_source`), images = the views the (part's) pairs name, in the layout's order, each
    present, with each pair's relative pose and (``views.txt`` layout) each view's depth map where it
    has one. DataError naming the file for a missing image, a pair listed twice, a folder read whole
    whose pairs name more than :data:`MAX_IMAGES` views (it is evaluated in parts), or a part it
    does not have."""
    scene_dir = Path(scene_dir)
    src = read_posed_source(scene_dir)
    pairs, poses = src.pairs, src.poses
    parts = split_posed_pairs(pairs)
    name = scene_dir.name
    if part is None and len(parts) > 1:
        raise DataError(f"{src.pairs_file} names more than the {MAX_IMAGES} views a scene may have (descbench's keypoint files "
                        f"number a scene's images in int8), so the folder is evaluated in {len(parts)} parts of consecutive "
                        f"pairs: {name}{PART_SEPARATOR}000 .. {name}{PART_SEPARATOR}{len(parts) - 1:03d}; list those")
    if part is not None:
        if not 0 <= part < len(parts):
            raise DataError(f"{src.pairs_file}: the scene has parts {name}{PART_SEPARATOR}000 .. {name}{PART_SEPARATOR}"
                            f"{len(parts) - 1:03d}, not {name}{PART_SEPARATOR}{part:03d}")
        pairs, poses = [pairs[i] for i in parts[part]], [poses[i] for i in parts[part]]
        name = f"{name}{PART_SEPARATOR}{part:03d}"
    used = {view for pair in pairs for view in pair}
    names = [view for view in src.names if view in used]
    number = {view: k for k, view in enumerate(names, 1)}
    images = tuple(src.image_dir / view for view in names)
    for view, path in zip(names, images):
        if not path.is_file():
            raise DataError(f"{path} (the image of view {view!r}, {src.views_file or src.pairs_file}) is missing; put the "
                            "image there or remove the view's pairs")
    listed = tuple(PairSpec(number[a], number[b], None, f"{src.pairs_file.name}:{a} {b}") for a, b in pairs)
    return SceneFiles(name, images, {}, src.pairs_file, listed,
                      tuple(src.views[n] for n in names) if src.views is not None else None, src.views_file,
                      tuple(posed_depth_file(scene_dir, n) if src.views is not None else None for n in names),
                      tuple(names), tuple(poses))


def posed_depth_file(scene_dir: Path, view: str) -> Path | None:
    """The depth map of ``view`` in a posed scene folder (glue-factory's ``get_depth_path``: the part
    of the name before its first dot, in ``depths/``, as ``.h5`` or ``.png``), None without one;
    DataError when both formats are there (descbench does not choose)."""
    from descbench.datasets.posed import DEPTH_DIR, DEPTH_FORMATS

    found = [scene_dir / DEPTH_DIR / f"{view.split('.')[0]}.{fmt}" for fmt in DEPTH_FORMATS]
    found = [f for f in found if f.is_file()]
    if len(found) > 1:
        raise DataError(f"view {view!r} of {scene_dir} has two depth maps, {found[0].name} and {found[1].name}; keep one")
    return found[0] if found else None


def read_pairs_file(path: Path | str, n_images: int, homographies: dict[int, Path]) -> tuple[PairSpec, ...]:
    """The pairs of a ``pairs.txt`` (format: the module docstring), for a scene of ``n_images``
    images whose ``H_1_k`` files are ``homographies``. DataError naming the file and line for a
    malformed line, an image outside 1..n, a self pair, a duplicate, a missing homography file
    (a pair's own, or an ``H_1_k`` a composed pair needs), an own file outside the scene folder,
    and a file without any pair."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    fix = f"one pair per line: 'a b' (homography composed from H_1_a and H_1_b) or 'a b FILE' (its own homography file)"
    seen: dict[tuple[int, int], int] = {}
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{path}, line {lineno}"
        try:
            if len(fields) not in (2, 3):
                raise ValueError
            a, b = int(fields[0]), int(fields[1])
        except ValueError:
            raise DataError(f"{where}: malformed line {raw.strip()!r}; {fix}") from None
        bad = [k for k in (a, b) if not 1 <= k <= n_images]
        if bad:
            raise DataError(f"{where}: pair ({a}, {b}) names image {bad[0]}, but the scene has images 1..{n_images}; "
                            "fix the image number or add the image")
        if a == b:
            raise DataError(f"{where}: pair ({a}, {b}) pairs image {a} with itself; a pair is two different images, "
                            "remove the line")
        if (a, b) in seen:
            raise DataError(f"{where}: pair ({a}, {b}) is listed again (first on line {seen[(a, b)]}); each pair is "
                            "evaluated once (a repeat would count it twice in every mean), remove one of the lines")
        seen[(a, b)] = lineno
        own = None
        if len(fields) == 3:
            own = path.parent / fields[2]
            if Path(fields[2]).is_absolute() or own.resolve().parent != path.parent.resolve():
                raise DataError(f"{where}: homography file {fields[2]!r} is not a file name in the scene folder "
                                f"{path.parent}; put the file there and give its name")
            if not own.is_file():
                raise DataError(f"{where}: pair ({a}, {b}) names its homography file {own}, which does not exist; "
                                f"add it (3x3, image {a} -> image {b}) or fix the name")
        else:
            need = [k for k in (a, b) if k != 1 and k not in homographies]
            if need:
                raise DataError(f"{where}: pair ({a}, {b}) has no homography file, so it is composed from "
                                f"H_1_{a} and H_1_{b}, but {', '.join(f'H_1_{k}' for k in need)} does not exist in "
                                f"{path.parent}; add it, or give the pair its own file ('{a} {b} FILE', image {a} -> "
                                f"image {b})")
        out.append(PairSpec(a, b, own, f"{path.name}:{lineno}"))
    if not out:
        raise DataError(f"{path} lists no pair; {fix}, or delete the file to evaluate the scene's (1, k) pairs")
    return tuple(out)


def pair_homography(files: SceneFiles, spec: PairSpec) -> np.ndarray:
    """The homography image a -> image b of one pair, validated (:func:`read_homography`): the
    pair's own file; ``H_1_b`` itself when ``a == 1`` (bit for bit the file's matrix); else
    ``H_1_b H_1_a^-1`` (:func:`descbench.datasets.geometry.compose_homography`), ``H_1_1`` being
    the identity."""
    if spec.file is not None:
        return read_homography(spec.file)
    what = f"pair ({spec.a}, {spec.b})" + (f" ({spec.where})" if spec.where else "")
    if spec.a == 1:
        return read_homography(files.homography_file(spec.b, what))
    H_1a = read_homography(files.homography_file(spec.a, what))
    H_1b = np.eye(3) if spec.b == 1 else read_homography(files.homography_file(spec.b, what))
    names = f"H_1_{spec.a} and " + ("the identity (image 1)" if spec.b == 1 else f"H_1_{spec.b}")
    return compose_homography(H_1a, H_1b, f"{names} of {files.images[0].parent}")


def load_pairs(files: SceneFiles, mode: str = "reference") -> list[Pair]:
    """The scene's pairs (:meth:`SceneFiles.pairs`) with their geometry: homographies read, or a
    posed scene's relative poses (:func:`posed_scene_files`)."""
    if files.posed:
        return [Pair(p.a, p.b, g) for p, g in zip(files.listed, files.pair_poses)]
    return [Pair(p.a, p.b, Homography(pair_homography(files, p))) for p in files.pairs(mode)]


def read_homography(path: Path | str) -> np.ndarray:
    """Read a 3x3 homography (whitespace-separated text) as float64, validated.

    Raises :class:`DataError` unless the file holds exactly 9 finite numbers forming an
    invertible matrix (condition number at most :data:`MAX_CONDITION`) with a non-zero
    ``H[2, 2]`` scale (after which it is normalised so that ``H[2, 2] == 1``; projection is
    invariant to that scale). A matrix over the condition limit is reported as singular when it
    stays so after row/column equilibration (rank < 3), otherwise as ill-conditioned with its
    numbers (e.g. a 1e9 px translation, which maps the image far outside any plausible range).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read homography {path}: {exc}") from exc
    try:
        values = np.array([float(t) for t in text.split()], dtype=np.float64)
    except ValueError as exc:
        raise DataError(
            f"homography {path} is malformed ({exc}); it must hold 9 numbers (3x3, whitespace separated)"
        ) from exc
    if values.size != 9:
        raise DataError(
            f"homography {path} holds {values.size} numbers, expected 9 (a 3x3 matrix, whitespace separated)"
        )
    H = values.reshape(3, 3)
    if not np.all(np.isfinite(H)):
        raise DataError(f"homography {path} contains non-finite values (nan/inf); fix or regenerate the file")
    # The condition number is scale-invariant: test it before normalising (an all-zero
    # matrix is reported as singular, not as a zero H[2,2]).
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(H) if np.any(H) else np.inf
    if not np.isfinite(cond) or cond > MAX_CONDITION:
        raise DataError(_ill_conditioned_message(path, H, cond))
    if H[2, 2] == 0.0:
        raise DataError(f"homography {path} has H[2,2] == 0; it cannot be normalised, fix the file")
    return H / H[2, 2]


#: A homography whose condition number exceeds this is rejected (:func:`read_homography`).
MAX_CONDITION = 1e12
#: Pixel coordinates beyond this are implausible for an image (used in error messages only).
PLAUSIBLE_PX = 1e6


def _equilibrated(H: np.ndarray) -> np.ndarray | None:
    """``H`` with its rows and columns scaled to unit max-abs (Ruiz); None if a row or column is 0.

    Invertibility does not depend on such scalings, but the plain condition number does: a
    translation of 1e9 px has condition number 1e18 although its determinant is 1. A matrix
    that stays ill-conditioned after equilibration is (numerically) singular.
    """
    A = np.abs(H)
    if not (np.all(A.max(axis=1) > 0) and np.all(A.max(axis=0) > 0)):
        return None  # a zero row or column: rank < 3
    A = H.astype(np.float64)
    for _ in range(50):
        r = np.sqrt(np.abs(A).max(axis=1))
        c = np.sqrt(np.abs(A).max(axis=0))
        A = A / r[:, None] / c[None, :]
        if np.all(np.abs(r - 1) < 1e-6) and np.all(np.abs(c - 1) < 1e-6):
            break
    return A


def _ill_conditioned_message(path: Path, H: np.ndarray, cond: float) -> str:
    """Why a homography with a huge condition number is rejected: singular, or badly scaled."""
    A = _equilibrated(H)
    with np.errstate(all="ignore"):
        eq_cond = np.inf if A is None else float(np.linalg.cond(A))
    if not np.isfinite(eq_cond) or eq_cond > MAX_CONDITION:
        sv = np.linalg.svd(H if A is None else A, compute_uv=False)
        rank = int(np.sum(sv > sv.max() / MAX_CONDITION))  # rank at the same tolerance as the limit
        return (
            f"homography {path} is singular (not invertible: numerical rank {rank} of 3, its rows are "
            "linearly dependent, so it would collapse image 1 onto a line or a point); fix or "
            "regenerate the file (it must map image 1 to image k, p_k ~ H [x, y, 1]^T)"
        )
    scaled = H[2, 2] != 0
    Hn = H / H[2, 2] if scaled else H
    det = f"determinant {np.linalg.det(Hn):.6g}" + (" after scaling H[2,2] to 1" if scaled else ", H[2,2] = 0")
    where, far = [], False
    for x, y in ((0.0, 0.0), (1000.0, 1000.0)):
        w = Hn[2, 0] * x + Hn[2, 1] * y + Hn[2, 2]
        if w == 0:
            where.append(f"({x:g}, {y:g}) to infinity")
            far = True
            continue
        u = (Hn[0, 0] * x + Hn[0, 1] * y + Hn[0, 2]) / w
        v = (Hn[1, 0] * x + Hn[1, 1] * y + Hn[1, 2]) / w
        where.append(f"({x:g}, {y:g}) to ({u:.6g}, {v:.6g})")
        far = far or max(abs(u), abs(v)) > PLAUSIBLE_PX
    sv = np.linalg.svd(H, compute_uv=False)
    effect = (
        f"far outside any plausible image (beyond {PLAUSIBLE_PX:g} px), so no keypoint of image 1 could land in image k"
        if far else f"with singular values from {sv.min():.3g} to {sv.max():.3g}, an implausible squeeze or stretch of image 1"
    )
    return (
        f"homography {path} is ill-conditioned, not singular: its condition number is {cond:.3g} "
        f"(the limit is {MAX_CONDITION:g}; {det}) because its entries span "
        f"{np.abs(H[H != 0]).min():.3g} to {np.abs(H).max():.3g}. It maps pixel {' and '.join(where)}, "
        f"{effect}. Check that the file is a pixel-to-pixel homography from image 1 to image k "
        "(p_k ~ H [x, y, 1]^T, in pixels, not inverted) and fix or regenerate it"
    )


#: Below this overlap (px^2, in image 1 and in image k) a homography is rejected by
#: :func:`check_homography_overlap`: less than one pixel of image 1 could land in image k.
MIN_OVERLAP_PX2 = 1.0


def _clip_halfplane(poly: list[tuple[float, float]], a: np.ndarray) -> list[tuple[float, float]]:
    """The part of a convex polygon where ``a . [x, y, 1] >= 0`` (Sutherland-Hodgman, one plane)."""
    out = []
    for i, p in enumerate(poly):
        q = poly[(i + 1) % len(poly)]
        dp, dq = a[0] * p[0] + a[1] * p[1] + a[2], a[0] * q[0] + a[1] * q[1] + a[2]
        if dp >= 0:
            out.append(p)
        if (dp >= 0) != (dq >= 0):
            t = dp / (dp - dq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def _area(poly) -> float:
    if len(poly) < 3:
        return 0.0
    x = np.array([p[0] for p in poly])
    y = np.array([p[1] for p in poly])
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def homography_overlap(H: np.ndarray, size1: tuple[int, int], size_k: tuple[int, int]) -> tuple[float, float]:
    """``(area in image 1, area in image k)`` in px^2 of the part of image 1 that ``H`` maps into
    image k, exactly: image 1's rectangle ``[0, W1] x [0, H1]`` clipped by the half-planes
    ``w > 0`` (in front of the camera; the metrics count ``w <= 0`` as outside, see
    :func:`descbench.metrics.retrieval.project`), ``0 <= u <= Wk w`` and ``0 <= v <= Hk w``
    (``[u, v, w] = H [x, y, 1]``: linear in x, y), then mapped through H (convex on ``w > 0``)."""
    (w1, h1), (wk, hk) = size1, size_k
    H = np.asarray(H, dtype=np.float64)
    poly = [(0.0, 0.0), (float(w1), 0.0), (float(w1), float(h1)), (0.0, float(h1))]
    for a in (H[2], H[0], wk * H[2] - H[0], H[1], hk * H[2] - H[1]):
        poly = _clip_halfplane(poly, a)
        if not poly:
            return 0.0, 0.0
    area1 = _area(poly)
    if area1 == 0.0:
        return 0.0, 0.0
    pts = np.column_stack([np.array(poly), np.ones(len(poly))]) @ H.T
    with np.errstate(divide="ignore", invalid="ignore"):
        mapped = pts[:, :2] / pts[:, 2:3]
    mapped = np.nan_to_num(mapped, nan=0.0, posinf=float(max(wk, hk)), neginf=0.0)
    mapped = np.clip(mapped, 0.0, [float(wk), float(hk)])  # inside by construction; guards rounding
    return area1, _area([tuple(m) for m in mapped])


def check_homography_overlap(path: Path | str, H: np.ndarray, size1: tuple[int, int], size_k: tuple[int, int],
                             k: int | str = "k") -> None:
    """DataError unless ``H`` (the file ``path``, image 1 -> image k) maps at least
    :data:`MIN_OVERLAP_PX2` of image 1 (``size1`` = (W, H)) into image k (``size_k``), measured in
    both images (:func:`homography_overlap`). A homography that maps image 1 (nearly) entirely
    outside image k leaves no query of the pair with a ground truth, so the scene would silently
    drop out of every mean; it is a wrong file (transposed, inverted, or another scene's). Valid
    sequences overlap by far more (HPatches: most of the image).
    The message names the file, both image sizes, where image 1's corners land, and whether the
    transposed or the inverse matrix would overlap (the likely mistake)."""
    path = Path(path)
    a1, ak = homography_overlap(H, size1, size_k)
    if a1 >= MIN_OVERLAP_PX2 and ak >= MIN_OVERLAP_PX2:
        return
    (w1, h1), (wk, hk) = size1, size_k
    corners = []
    for x, y in ((0, 0), (w1, 0), (w1, h1), (0, h1)):
        u, v, w = H @ np.array([x, y, 1.0])
        corners.append(f"({x}, {y}) -> " + (f"({u / w:.6g}, {v / w:.6g})" if w > 0 else "behind the camera (w <= 0)"))

    def share(M: np.ndarray) -> float:
        if not np.all(np.isfinite(M)) or M[2, 2] == 0:
            return 0.0
        b1, bk = homography_overlap(M / M[2, 2], size1, size_k)
        return b1 / (w1 * h1) if min(b1, bk) >= MIN_OVERLAP_PX2 else 0.0

    transposed, inverse = share(H.T), share(np.linalg.inv(H))
    if transposed > 0 and transposed >= inverse:
        hint = (f"its transpose would map {transposed:.0%} of image 1 into image {k}: the file was most likely saved "
                "transposed (a row/column-major mix-up, e.g. np.savetxt of H.T); write H itself (rows = rows of H)")
    elif inverse > 0:
        hint = (f"its inverse would map {inverse:.0%} of image 1 into image {k}: the file most likely holds the "
                f"homography from image {k} to image 1 (wrong direction); write its inverse")
    else:
        hint = (f"its transpose and its inverse would not overlap image {k} either: check that the file belongs to "
                f"this scene and is in pixel coordinates of images 1 and {k}")
    msg = (
        f"homography {path} maps image 1 ({w1} x {h1} px) outside image {k} ({wk} x {hk} px): the part of image 1 "
        f"that lands in image {k} is {a1:.3g} px^2 of image 1 and {ak:.3g} px^2 of image {k} (less than "
        f"{MIN_OVERLAP_PX2:g} px^2), so no keypoint of image 1 could be scored in image {k} and the scene would "
        f"drop out of every mean. Image 1's corners map {'; '.join(corners)}. The file must map image 1 to image {k} "
        "(p_k ~ H [x, y, 1]^T, pixels); " + hint
    )
    raise DataError(msg)


def write_homography(path: Path | str, H: np.ndarray, exact: bool = False) -> None:
    """Write a 3x3 homography in the HPatches text format (fixed formatting: byte-reproducible):
    11 significant digits, or with ``exact`` 17, which :func:`read_homography` reads back as the
    same float64 values bit for bit."""
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3):
        raise ValueError(f"homography must be 3x3, got {H.shape}")
    fmt = ".16e" if exact else ".10e"
    lines = ["  ".join(f"{v:{fmt}}" for v in row) for row in H]
    write_text_atomic(path, "\n".join(lines) + "\n")


GREY_METHODS = ("imread", "bgr2gray")


def read_grey(path: Path | str, method: str = "imread") -> np.ndarray:
    """The grey uint8 image of ``path`` (checked as :func:`read_image` checks it), made by ``method``:

    * ``imread`` (descbench's default): OpenCV's decoder converts to grey (``IMREAD_GRAYSCALE``);
    * ``bgr2gray``: read as BGR, then ``cv2.cvtColor(BGR2GRAY)``, as the C++ DescriptorWorkbench
      (``processing.cpp``). On colour files the two differ by a level or two at some pixels
      under OpenCV 5 (7,109 pixels of the 48 demo images); a grey file gives the same image.
    """
    if method == "imread":
        return read_image(path)
    if method == "bgr2gray":
        import cv2

        return cv2.cvtColor(read_image(path, color=True), cv2.COLOR_BGR2GRAY)
    raise ValueError(f"grey method must be one of {', '.join(GREY_METHODS)}, got {method!r}")


def read_image(path: Path | str, color: bool = False) -> np.ndarray:
    """Read an image with OpenCV as 8-bit (grayscale uint8 by default, BGR if ``color``).

    A missing, unreadable, truncated or empty file raises :class:`DataError` naming the file, and
    so do two things OpenCV would otherwise do silently:

    - **EXIF orientation**: a JPEG/PNG/WebP/TIFF file whose EXIF ``Orientation`` tag is 2..8 is an
      error. OpenCV's default read turns such an image to its displayed orientation, while the
      HPatches/Oxford homographies, and tools reading raw pixels (numpy, PIL without
      ``exif_transpose``), refer to the stored pixel grid; others (``cv2.imread`` with default
      flags, EXIF-aware viewers and annotation tools) to the displayed one. Which one a scene's
      homographies and keypoint files use cannot be told from the files, and the wrong guess
      silently ruins the scene (the H no longer matches the pixels), so descbench does not guess:
      the message says how to make the file unambiguous. (OpenCV's TIFF reader applies the tag even
      with ``IMREAD_IGNORE_ORIENTATION``, so reading the stored grid is not even possible there.)
      Files without the tag or with ``Orientation = 1`` are decoded on the stored grid
      (``cv2.IMREAD_IGNORE_ORIENTATION``), i.e. exactly as before.
    - **More than 8 bits**: OpenCV's 8-bit read keeps the top 8 bits of a 16-bit sample
      (``v >> 8``), which is only right when the data fill the 16-bit range; 10-, 12- and 14-bit
      sensor data are routinely stored unscaled in 16-bit PNG/TIFF (their bit depth can only be 8
      or 16), and then become a nearly black image. Such a file (16-bit or float samples) is an
      error naming the file, its depth and its largest value; convert it to 8 bits with the
      scaling your data need. A binary PNM (``.ppm``/``.pgm``, P5/P6) is the exception: its
      header declares its full scale (``maxval``), so a PNM with ``maxval != 255`` is converted by
      that declared scale, ``round(v * 255 / maxval)`` per sample (Netpbm's ``pamdepth``; OpenCV
      ignores ``maxval``: a 12-bit PPM with maxval 4095 would read as 0..15), then decoded by
      OpenCV as the equivalent 8-bit file. For a full-range 16-bit PPM (``v = 257 * x``) this
      gives exactly ``x``, as before; ``maxval = 255`` files are decoded unchanged.
    """
    import cv2

    path = Path(path)
    if not path.exists():
        raise DataError(f"image {path} does not exist; restore it (re-extract or regenerate the dataset)")
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:  # a directory, no read permission, an I/O error
        raise DataError(f"image {path} cannot be read ({exc}); restore it (re-extract or regenerate the dataset)") from exc
    if data.size == 0:
        raise DataError(f"image {path} is empty (0 bytes); restore it (re-extract or regenerate the dataset)")
    orientation = exif_orientation(data)
    if orientation is not None and orientation in EXIF_ORIENTATIONS:
        raise DataError(_orientation_message(path, orientation))
    pnm = _pnm_header(data)
    if pnm is not None:
        _check_pnm_complete(path, data, pnm)
        if pnm.maxval != 255:
            data = _pnm_to_8bit(path, data, pnm)
    flags = (cv2.IMREAD_COLOR if color else cv2.IMREAD_GRAYSCALE) | cv2.IMREAD_ANYDEPTH | cv2.IMREAD_IGNORE_ORIENTATION
    img = cv2.imdecode(data, flags)
    if img is None or img.size == 0:
        raise DataError(
            f"image {path} cannot be decoded (corrupt or truncated, {data.size} bytes); "
            "restore it (re-extract or regenerate the dataset)"
        )
    if img.dtype != np.uint8:
        raise DataError(_depth_message(path, img))
    return img


#: EXIF ``Orientation`` values that change the displayed image (1 = as stored), and what they mean.
EXIF_ORIENTATIONS = {
    2: "mirrored left-right", 3: "rotated 180 degrees", 4: "mirrored top-bottom",
    5: "mirrored along the main diagonal (transposed)", 6: "rotated 90 degrees clockwise",
    7: "mirrored along the anti-diagonal", 8: "rotated 90 degrees counter-clockwise",
}


def _orientation_message(path: Path, orientation: int) -> str:
    return (
        f"image {path} carries the EXIF tag Orientation = {orientation} (shown {EXIF_ORIENTATIONS[orientation]}): "
        "OpenCV and image viewers would turn it to its displayed orientation, while homographies in "
        "HPatches layout, and keypoints from tools reading the raw pixels, refer to the stored pixel grid; "
        "descbench cannot tell which of the two this scene's H_1_k files (and keypoint files) use, and the "
        "wrong one would silently break the scene. Make the file unambiguous: if they refer to the stored "
        "pixels, remove the tag (exiftool -Orientation=1 -n FILE, or save the pixels again without EXIF); if "
        "they refer to the displayed image, save the turned pixels without the tag (PIL: "
        "ImageOps.exif_transpose(Image.open(FILE)).save(...) without exif=)"
    )


def _depth_message(path: Path, img: np.ndarray) -> str:
    if img.dtype.kind == "f":
        depth = f"{img.dtype.itemsize * 8}-bit floating-point samples (largest {float(np.nanmax(img)):.6g})"
        hint = "scale them to 0..255 as your data need and save as uint8"
    else:
        bits = img.dtype.itemsize * 8
        top = int(img.max())
        used = max(top, 1).bit_length()
        depth = f"{bits}-bit samples (largest value {top} of {2 ** bits - 1}, i.e. {used}-bit data)"
        hint = (f"e.g. for {used}-bit data stored unscaled: (img >> {max(used - 8, 0)}).astype(np.uint8)"
                if used < bits else "e.g. for full-range data: (img >> 8).astype(np.uint8)")
    return (
        f"image {path} has {depth}; descbench evaluates 8-bit images and does not choose how to reduce "
        f"them (OpenCV's 8-bit read keeps the top 8 bits, which darkens data that do not fill the range). "
        f"Convert the image(s) to 8 bits with the scaling your data need and save them again ({hint}), "
        "or store them as binary PPM/PGM with maxval set to the data's full scale (descbench scales by maxval)"
    )


def exif_orientation(data: bytes | np.ndarray) -> int | None:
    """The EXIF ``Orientation`` tag (274) of a TIFF, JPEG (APP1 ``Exif``), PNG (``eXIf``) or WebP
    (``EXIF``) file's bytes, or None if the file has none (or is another format). Only the file's
    structure is walked (segments/chunks), nothing is decoded."""
    head = bytes(data[:12])
    if not (head[:4] in (b"II*\x00", b"MM\x00*") or head[:2] == b"\xff\xd8" or head[:8] == b"\x89PNG\r\n\x1a\n"
            or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")):
        return None  # PNM, BMP, ...: no EXIF (and no copy of the file's bytes)
    b = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    if b[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff_orientation(b, 0)
    if b[:2] == b"\xff\xd8":  # JPEG: markers up to the start of scan
        pos = 2
        while pos + 4 <= len(b) and b[pos] == 0xFF:
            marker = b[pos + 1]
            if marker == 0xFF:  # fill byte
                pos += 1
                continue
            if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # no length field
                pos += 2
                continue
            if marker in (0xDA, 0xD9):  # start of scan / end of image
                break
            length = int.from_bytes(b[pos + 2 : pos + 4], "big")
            if marker == 0xE1 and b[pos + 4 : pos + 10] == b"Exif\x00\x00":
                found = _tiff_orientation(b, pos + 10)
                if found is not None:
                    return found
            pos += 2 + length
        return None
    if b[:8] == b"\x89PNG\r\n\x1a\n":
        pos = 8
        while pos + 8 <= len(b):
            length = int.from_bytes(b[pos : pos + 4], "big")
            kind = b[pos + 4 : pos + 8]
            if kind == b"eXIf":
                start = pos + 8 + (6 if b[pos + 8 : pos + 14] == b"Exif\x00\x00" else 0)
                return _tiff_orientation(b, start)
            if kind == b"IEND":
                break
            pos += 12 + length
        return None
    if b[:4] == b"RIFF" and b[8:12] == b"WEBP":
        pos = 12
        while pos + 8 <= len(b):
            kind, length = b[pos : pos + 4], int.from_bytes(b[pos + 4 : pos + 8], "little")
            if kind == b"EXIF":
                start = pos + 8 + (6 if b[pos + 8 : pos + 14] == b"Exif\x00\x00" else 0)
                return _tiff_orientation(b, start)
            pos += 8 + length + (length & 1)
    return None


def _tiff_orientation(b: bytes, start: int) -> int | None:
    """Tag 274 of the first IFD of the TIFF structure at ``b[start:]`` (None if absent/unreadable)."""
    import struct

    order = {b"II*\x00": "<", b"MM\x00*": ">"}.get(b[start : start + 4])
    if order is None:
        return None
    try:
        ifd = start + struct.unpack_from(order + "I", b, start + 4)[0]
        for i in range(struct.unpack_from(order + "H", b, ifd)[0]):
            tag, kind, _count = struct.unpack_from(order + "HHI", b, ifd + 2 + 12 * i)
            if tag == 274:
                fmt = {3: "H", 4: "I"}.get(kind)  # SHORT (the standard) or LONG
                return None if fmt is None else int(struct.unpack_from(order + fmt, b, ifd + 2 + 12 * i + 8)[0])
    except struct.error:
        return None
    return None


@dataclass(frozen=True)
class _PnmHeader:
    magic: str  # P5 (grey) or P6 (colour)
    width: int
    height: int
    maxval: int
    offset: int  # first byte of the samples

    @property
    def channels(self) -> int:
        return 3 if self.magic == "P6" else 1

    @property
    def sample_bytes(self) -> int:
        return 2 if self.maxval > 255 else 1

    @property
    def data_bytes(self) -> int:
        return self.width * self.height * self.channels * self.sample_bytes


def _pnm_header(data: np.ndarray) -> _PnmHeader | None:
    """The header of a binary PNM (P5/P6) file, or None for anything else (ASCII PNM and other
    formats are left to OpenCV's decoder, which is their check)."""
    header = bytes(data[:1024])
    if header[:2] not in (b"P5", b"P6"):
        return None
    tokens, pos = [], 0
    # Header: magic, width, height, maxval, separated by whitespace, '#' comments allowed.
    while len(tokens) < 4 and pos < len(header):
        while pos < len(header) and chr(header[pos]).isspace():
            pos += 1
        if pos < len(header) and header[pos : pos + 1] == b"#":
            while pos < len(header) and header[pos : pos + 1] != b"\n":
                pos += 1
            continue
        start = pos
        while pos < len(header) and not chr(header[pos]).isspace():
            pos += 1
        tokens.append(header[start:pos].decode("ascii", "replace"))
    if len(tokens) < 4 or not all(t.isdigit() for t in tokens[1:]):
        return None  # a malformed header: OpenCV's decoder reports it
    return _PnmHeader(tokens[0], int(tokens[1]), int(tokens[2]), int(tokens[3]), pos + 1)


def _check_pnm_complete(path: Path, data: np.ndarray, pnm: _PnmHeader) -> None:
    """OpenCV may decode a truncated binary PPM/PGM without error: check the byte count."""
    need = pnm.offset + pnm.data_bytes
    if data.size < need:
        raise DataError(
            f"image {path} is truncated ({data.size} of {need} bytes); "
            "restore it (re-extract or regenerate the dataset)"
        )


def _pnm_to_8bit(path: Path, data: np.ndarray, pnm: _PnmHeader) -> np.ndarray:
    """The bytes of the equivalent maxval-255 PNM: each sample ``round(v * 255 / maxval)``."""
    if not 1 <= pnm.maxval <= 65535:
        raise DataError(f"image {path} declares maxval {pnm.maxval} in its PNM header; it must be 1..65535: "
                        "fix or regenerate the file")
    n = pnm.data_bytes // pnm.sample_bytes
    raw = data[pnm.offset : pnm.offset + pnm.data_bytes]
    v = (raw.view(">u2") if pnm.sample_bytes == 2 else raw).astype(np.int64)
    if n and int(v.max()) > pnm.maxval:
        raise DataError(f"image {path} holds sample value {int(v.max())} above its declared maxval {pnm.maxval}; "
                        "fix the header's maxval or regenerate the file")
    scaled = ((v * 255 + pnm.maxval // 2) // pnm.maxval).astype(np.uint8)
    head = f"{pnm.magic}\n{pnm.width} {pnm.height}\n255\n".encode("ascii")
    return np.concatenate([np.frombuffer(head, dtype=np.uint8), scaled])


def image_size(path: Path | str) -> tuple[int, int]:
    """(width, height) of an image, read fully (and validated) by :func:`read_image`."""
    img = read_image(path)
    return int(img.shape[1]), int(img.shape[0])
