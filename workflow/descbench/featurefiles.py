"""Feature files of hloc, glue-factory and D2-Net: read and write them as arrays, exactly.

descbench's own convention (:class:`descbench.keypoints.ImageKeypoints`): ``x`` right, ``y`` down,
pixel centres at integers (OpenCV), so image ``W x H`` spans ``-0.5 <= x < W - 0.5`` and a keypoint
inside it has ``0 <= x < W`` and ``0 <= y < H`` once rounded to a pixel (the rule descbench applies
to keypoints read from files: :func:`check_inside`).

**hloc** (cvg/Hierarchical-Localization, read at commit c13273bd0ecc2917a35910fd843712a1c6243193:
``hloc/extract_features.py``, ``hloc/match_features.py``, ``hloc/utils/io.py``,
``hloc/utils/parsers.py``, ``hloc/triangulation.py``):

- ``features.h5``: one group per image, named by the image's path relative to the image folder
  (``i_rocket/1.ppm``; h5py makes the ``/`` a nested group). Datasets: ``keypoints`` [N, 2] (x, y),
  ``descriptors`` [D, N] (transposed: one column per keypoint), optional ``scores`` [N],
  ``image_size`` [2] = (W, H) of the original image, and whatever else the extractor returned
  (``scales``, ``oris``...). ``keypoints`` carries the attribute ``uncertainty`` (the detection
  noise in px at the original resolution; hloc's triangulation reads it). hloc stores float32 arrays
  as float16 by default (``as_half``).
- hloc's keypoints have pixel centres at integers, as descbench's: hloc rescales keypoints of a
  resized image with ``(k + 0.5) * scale - 0.5`` (the centre convention) and adds 0.5 only when it
  hands them to COLMAP (``triangulation.py``: "COLMAP origin"). So no shift: x, y are copied as they
  are (float16 -> float32 is exact).
- ``matches.h5``: one group per image pair, named ``names_to_pair(name0, name1)`` = name0 and
  name1 with every ``/`` replaced by ``-``, joined by ``/`` (a nested group again); hloc's older
  files joined them by ``_`` instead (``names_to_pair_old``; both are read). Datasets ``matches0``
  [N0] (index into image 1's keypoints, -1 = unmatched; hloc writes int16) and
  ``matching_scores0`` [N0] (float16).

**glue-factory** (cvg/glue-factory, read at commit 2d17e3b, :data:`descbench.estimators.GLUEFACTORY_COMMIT`:
``gluefactory/utils/export_predictions.py``, ``gluefactory/eval/hpatches.py``,
``gluefactory/datasets/hpatches.py``, ``gluefactory/utils/image.py``, its extractors):

- ``predictions.h5`` of an evaluation pipeline: one group per evaluated pair, named by the
  dataset's ``name``; for HPatches ``<sequence>/<i>.ppm`` where ``i`` is the pair's index in the
  dataset's item list (not an image number!). The items are 5 per sequence, pairs (1, 2) .. (1, 6)
  in that order, so the pair is (1, ``i % 5 + 2``) whatever sequences were left out
  (:func:`gluefactory_hpatches_pair`). Datasets (``HPatchesPipeline.export_keys``):
  ``keypoints0`` / ``keypoints1`` [N, 2], ``keypoint_scores0/1`` [N], ``matches0`` [N0] /
  ``matches1`` [N1] (-1 = unmatched), ``matching_scores0/1``; ``descriptors0/1`` [N, D] only when the
  pipeline exports them (not by default).
- glue-factory's keypoints use COLMAP's corner convention (the centre of the top-left pixel is
  (0.5, 0.5): its SuperPoint and DISK add 0.5 to pixel indices; ``Camera.from_colmap`` says so) and
  are scaled back to the original image by ``/ scale`` (exact in that convention). descbench's
  x = glue-factory's x - 0.5 (:data:`GLUEFACTORY_OFFSET_PX`), computed in float64 and rounded to
  float32 (exact for every coordinate of an image: a float32 in [0.5, 2**22] minus 0.5 is a float32).
- Writing (:func:`write_gluefactory_predictions`): the item order of glue-factory's ``HPatches``
  dataset (``gluefactory/datasets/hpatches.py``): its sequences are the data folder's entries by
  name (``sorted``), less :data:`GLUEFACTORY_HPATCHES_LARGE_SCENES` when ``ignore_large_images``
  (its default), 5 items per sequence (:func:`gluefactory_hpatches_blocks`). descbench numbers the
  sequences it writes the same way, so ``i`` is glue-factory's own index when they are the
  sequences glue-factory evaluated (the whole dataset, or one ``subset``), and otherwise the index
  glue-factory would give a data folder holding just them. ``matches0/1`` are descbench's mutual
  nearest neighbours of the descriptors (:func:`descbench.metrics.nn.mutual_nearest`: L2, or
  Hamming for packed bits; ties to the lower index), and ``matching_scores0/1`` are 1.0 for a
  matched keypoint and 0.0 otherwise: what glue-factory's ``NearestNeighborMatcher``
  (``gluefactory/models/matchers/nearest_neighbor_matcher.py``, ``mutual_check``, no thresholds)
  stores; its own matcher ranks by the dot product, the same order as L2 for unit-norm
  descriptors but not for others.

**D2-Net** (the format :mod:`descbench.precomputed` reads): ``np.savez`` into a file object
(no ``.npz`` suffix added) of ``keypoints`` [N, 2 or 3] (x, y[, size px]), ``descriptors`` [N, D],
optional ``scores`` [N] (:func:`write_d2net`).

h5py is the optional ``interop`` extra (``pip install descbench[interop]``), imported only by the
functions that read or write HDF5.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench.errors import ConfigError, DataError
from descbench.fileops import atomic_path, write_bytes_atomic

HLOC_COMMIT = "c13273bd0ecc2917a35910fd843712a1c6243193"
#: descbench x, y = glue-factory x, y - this (COLMAP's corner convention -> pixel centres at integers)
GLUEFACTORY_OFFSET_PX = 0.5
#: the ``uncertainty`` attribute descbench writes on hloc ``keypoints``: hloc's value for features
#: extracted at the image's own resolution by an extractor without a detection noise of its own
HLOC_UNCERTAINTY_PX = 1.0
#: glue-factory's HPatches dataset: pairs (1, 2) .. (1, 6) of each sequence, in that order
GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE = 5
#: the sequences glue-factory's HPatches dataset leaves out by default (``ignored_scenes``, used
#: when its ``ignore_large_images`` is true, the default)
GLUEFACTORY_HPATCHES_LARGE_SCENES = ("i_contruction", "i_crownnight", "i_dc", "i_pencils", "i_whitebuilding",
                                     "v_artisans", "v_astronautis", "v_talent")

_XY_FIX = "columns are x, y (x right, y down, in pixels of the original image)"


@dataclass(frozen=True)
class ImageFeatures:
    """One image's features in descbench's convention.

    keypoints: float32 [N, 2] x, y (pixel centres at integers); descriptors: [N, D] (float32, or
    uint8 as stored) or None; scores: float32 [N] or None; image_size: (W, H) the file records, or
    None; size: float32 [N] keypoint diameter in px, or None (hloc and glue-factory store none).
    """

    keypoints: np.ndarray
    descriptors: np.ndarray | None = None
    scores: np.ndarray | None = None
    image_size: tuple[int, int] | None = None
    size: np.ndarray | None = None


@dataclass(frozen=True)
class PairMatches:
    """Matches of one image pair: ``matches0`` int64 [N0], the index of keypoint i's match in the
    second image or -1; ``scores0`` float32 [N0] or None."""

    matches0: np.ndarray
    scores0: np.ndarray | None = None


def h5py_module():
    """h5py, or a ConfigError saying how to install it (the optional ``interop`` extra)."""
    try:
        import h5py
    except ImportError:
        raise ConfigError("reading or writing hloc / glue-factory feature files (HDF5) needs h5py, which descbench "
                          "installs only as its optional extra: pip install descbench[interop] "
                          "(from a checkout: pip install -e '.[interop]')") from None
    return h5py


def _open(path: Path, mode: str):
    h5py = h5py_module()
    try:
        return h5py.File(str(path), mode)
    except OSError as exc:
        if mode == "r":
            raise DataError(f"{path} cannot be read as an HDF5 file ({exc}); give the features.h5 / matches.h5 / "
                            "predictions.h5 file the tool wrote") from None
        raise


# ----------------------------------------------------------------------------- shared checks


def _numeric(ds, path: Path, group: str, key: str, ndim: int) -> np.ndarray:
    arr = np.asarray(ds[()])
    if arr.dtype.kind not in "iuf":
        raise DataError(f"{path}, group '{group}': dataset '{key}' has dtype {arr.dtype}; it must hold numbers")
    if arr.ndim != ndim:
        raise DataError(f"{path}, group '{group}': dataset '{key}' must have {ndim} dimension(s), got shape {arr.shape}")
    return arr


def _dataset(group, key: str, path: Path, name: str, fix: str):
    h5py = h5py_module()
    obj = group.get(key)
    if not isinstance(obj, h5py.Dataset):
        have = ", ".join(sorted(group.keys())) or "nothing"
        raise DataError(f"{path}, group '{name}': no dataset '{key}' (the group has: {have}); {fix}")
    return obj


def _keypoints_xy(arr: np.ndarray, path: Path, group: str, key: str) -> np.ndarray:
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DataError(f"{path}, group '{group}': '{key}' must be N x 2 ({_XY_FIX}), got shape {arr.shape}")
    if arr.dtype.kind not in "iuf":
        raise DataError(f"{path}, group '{group}': '{key}' has dtype {arr.dtype}; {_XY_FIX}")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{path}, group '{group}': '{key}' holds NaN or inf (row {int(np.flatnonzero(~np.all(np.isfinite(arr), 1))[0])})")
    return arr


def _scores(group, key: str, n: int, path: Path, name: str) -> np.ndarray | None:
    if key not in group:
        return None
    s = _numeric(group[key], path, name, key, 1)
    if s.shape != (n,):
        raise DataError(f"{path}, group '{name}': '{key}' must hold one number per keypoint ({n}), got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise DataError(f"{path}, group '{name}': '{key}' holds NaN or inf")
    return s.astype(np.float32)


def _descriptors(desc: np.ndarray) -> np.ndarray:
    """float16/float64 -> float32 (float16 exactly); uint8 (packed bits or byte values) kept."""
    return np.ascontiguousarray(desc if desc.dtype == np.uint8 else desc.astype(np.float32))


def check_inside(xy: np.ndarray, width: int, height: int, where: str) -> None:
    """DataError if a keypoint (descbench convention) lies outside the ``width x height`` image:
    ``0 <= x < W`` and ``0 <= y < H`` must hold. When every point would lie inside with x and y
    swapped, the message says the columns are swapped."""
    x, y = xy[:, 0].astype(np.float64), xy[:, 1].astype(np.float64)
    bad = np.flatnonzero(~((x >= 0) & (x < width) & (y >= 0) & (y < height)))
    if not bad.size:
        return
    i = int(bad[0])
    swapped = bool(np.all((y >= 0) & (y < width) & (x >= 0) & (x < height)))
    hint = (f"x and y look swapped (every point fits the image as (y, x)): {_XY_FIX}" if swapped else
            f"are they in pixels of this {width} x {height} image, not of a resized copy? {_XY_FIX}")
    raise DataError(f"{where}: {bad.size} keypoint(s) outside the {width} x {height} image (0 <= x < {width}, "
                    f"0 <= y < {height} in descbench's convention), first at row {i}: ({x[i]:.9g}, {y[i]:.9g}); {hint}")


# ----------------------------------------------------------------------------- hloc


def hloc_pair_name(name0: str, name1: str, separator: str = "/") -> str:
    """hloc's group name of pair (name0, name1): ``/`` in each name replaced by ``-``, the two joined
    by ``separator`` (``/``: hloc's ``names_to_pair``; ``_``: its older ``names_to_pair_old``)."""
    return name0.replace("/", "-") + separator + name1.replace("/", "-")


def _leaf_groups(f) -> dict[str, list[str]]:
    """group path -> its dataset names, for every group that holds a dataset."""
    h5py = h5py_module()
    found: dict[str, list[str]] = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            found.setdefault(obj.parent.name.strip("/"), []).append(name.rsplit("/", 1)[-1])

    f.visititems(visit)
    return found


def read_hloc_features(path: Path | str, require_descriptors: bool = True) -> dict[str, ImageFeatures]:
    """Every image of an hloc ``features.h5``: image name -> :class:`ImageFeatures` (keypoints as
    stored, float32; descriptors transposed back to [N, D]).

    DataError naming the file and group on: a group without ``keypoints`` (or ``descriptors`` when
    ``require_descriptors``), keypoints not N x 2 or not finite, descriptors whose second dimension
    is not N (hloc stores D x N), scores not [N], an ``image_size`` that is not two positive
    integers."""
    path = Path(path)
    fix = "hloc writes 'keypoints' N x 2 and 'descriptors' D x N in every image's group (hloc/extract_features.py)"
    out = {}
    with _open(path, "r") as f:
        groups = _leaf_groups(f)
        if not groups:
            raise DataError(f"{path} holds no dataset; it is not an hloc features.h5 (one group per image with "
                            "'keypoints' and 'descriptors')")
        for name in sorted(groups):
            grp = f[name] if name else f
            kp = _keypoints_xy(_numeric(_dataset(grp, "keypoints", path, name, fix), path, name, "keypoints", 2),
                               path, name, "keypoints")
            n = kp.shape[0]
            desc = None
            if require_descriptors or "descriptors" in grp:
                d = _numeric(_dataset(grp, "descriptors", path, name, fix), path, name, "descriptors", 2)
                if d.shape[1] != n:
                    raise DataError(
                        f"{path}, group '{name}': 'descriptors' has shape {d.shape} for {n} keypoints; hloc stores "
                        f"descriptors transposed, D x N (one column per keypoint), so its second dimension must be {n}")
                if d.dtype != np.uint8 and not np.all(np.isfinite(d)):
                    raise DataError(f"{path}, group '{name}': 'descriptors' hold NaN or inf")
                desc = _descriptors(d.T)
            size = None
            if "image_size" in grp:
                s = np.asarray(grp["image_size"][()]).ravel()
                if s.shape != (2,) or s.dtype.kind not in "iuf" or not np.all(s > 0) or not np.all(s == np.round(s)):
                    raise DataError(f"{path}, group '{name}': 'image_size' must be (width, height) in pixels, got {s!r}")
                size = (int(s[0]), int(s[1]))
            out[name] = ImageFeatures(kp.astype(np.float32), desc, _scores(grp, "scores", n, path, name), size)
    return out


def write_hloc_features(path: Path | str, features: Mapping[str, ImageFeatures]) -> None:
    """Write an hloc ``features.h5`` (atomically): per image name a group with ``keypoints`` float32
    [N, 2] (attribute ``uncertainty`` = :data:`HLOC_UNCERTAINTY_PX`), ``descriptors`` [D, N]
    (transposed, as hloc stores them; float32 or uint8 as given), ``scores`` float32 [N] when given
    and ``image_size`` int64 (W, H) when given. Full precision: hloc's ``as_half`` float16 is a
    storage choice its readers do not need."""
    path = Path(path)
    h5py_module()  # the install hint before any file is created
    with atomic_path(path) as tmp:
        with _open(tmp, "w") as f:
            for name, feat in features.items():
                grp = f.create_group(name)
                kp = np.ascontiguousarray(feat.keypoints, dtype=np.float32)
                grp.create_dataset("keypoints", data=kp)
                grp["keypoints"].attrs["uncertainty"] = HLOC_UNCERTAINTY_PX
                if feat.descriptors is not None:
                    grp.create_dataset("descriptors", data=np.ascontiguousarray(feat.descriptors.T))
                if feat.scores is not None:
                    grp.create_dataset("scores", data=np.asarray(feat.scores, dtype=np.float32))
                if feat.image_size is not None:
                    grp.create_dataset("image_size", data=np.asarray(feat.image_size, dtype=np.int64))


def read_hloc_matches(path: Path | str, image_names) -> dict[tuple[str, str], PairMatches]:
    """Every pair of an hloc ``matches.h5``: (name0, name1) -> :class:`PairMatches`.

    ``image_names``: the images the matches belong to (the features file's names); a pair group is
    mapped back to them through :func:`hloc_pair_name` (``/`` -> ``-``), in hloc's current layout
    (``<name0>/<name1>``, nested groups) or its older one (``<name0>_<name1>``). DataError naming
    the file and group on a pair that names no known image (or two ways), a missing ``matches0``,
    or values that are not integers >= -1."""
    path = Path(path)
    flat: dict[str, str] = {}
    for n in image_names:
        other = flat.setdefault(n.replace("/", "-"), n)
        if other != n:
            raise DataError(f"{path}: images '{other}' and '{n}' have the same hloc pair name part "
                            f"'{n.replace('/', '-')}' ('/' -> '-'), so their pairs cannot be told apart; rename one")
    out: dict[tuple[str, str], PairMatches] = {}
    with _open(path, "r") as f:
        groups = _leaf_groups(f)
        if not groups:
            raise DataError(f"{path} holds no dataset; it is not an hloc matches.h5 (one group per pair with 'matches0')")
        for group in sorted(groups):
            parts = group.split("/")
            if len(parts) == 2 and parts[0] in flat and parts[1] in flat:
                pair = (flat[parts[0]], flat[parts[1]])
            elif len(parts) == 1:
                splits = [(flat[a], flat[b]) for i in [m.start() for m in re.finditer("_", group)]
                          for a, b in [(group[:i], group[i + 1:])] if a in flat and b in flat]
                if len(splits) != 1:
                    raise DataError(
                        f"{path}, group '{group}': " + ("names no pair of the features' images" if not splits else
                                                        f"splits into {len(splits)} pairs of images ({splits})")
                        + " (hloc's pair name: <name0>/<name1> with '/' -> '-' in each name); give the features "
                          "file these matches were computed from")
                pair = splits[0]
            else:
                raise DataError(f"{path}, group '{group}' names no pair of the features' images (hloc's pair name: "
                                "<name0>/<name1> with '/' -> '-' in each name); give the features file these "
                                "matches were computed from")
            if pair in out:
                raise DataError(f"{path}: pair {pair} appears twice (group '{group}' and another layout of its name)")
            grp = f[group]
            m = _numeric(_dataset(grp, "matches0", path, group, "hloc writes 'matches0' per pair (hloc/match_features.py)"),
                         path, group, "matches0", 1)
            _check_match_values(m, path, group, "matches0")
            s = _scores(grp, "matching_scores0", m.shape[0], path, group)
            out[pair] = PairMatches(m.astype(np.int64), s)
    return out


def write_hloc_matches(path: Path | str, matches: Mapping[tuple[str, str], PairMatches]) -> None:
    """Write an hloc ``matches.h5`` (atomically): per pair a group :func:`hloc_pair_name` with
    ``matches0`` int32 [N0] (hloc writes int16, which cannot index past 32767 keypoints; its readers
    take any integer) and ``matching_scores0`` float32 when given."""
    h5py_module()  # the install hint before any file is created
    with atomic_path(Path(path)) as tmp:
        with _open(tmp, "w") as f:
            for (n0, n1), pm in matches.items():
                grp = f.create_group(hloc_pair_name(n0, n1))
                grp.create_dataset("matches0", data=np.asarray(pm.matches0, dtype=np.int32))
                if pm.scores0 is not None:
                    grp.create_dataset("matching_scores0", data=np.asarray(pm.scores0, dtype=np.float32))


def _check_match_values(m: np.ndarray, path: Path, group: str, key: str) -> None:
    if m.dtype.kind == "f" and not np.all(m == np.round(m)):
        raise DataError(f"{path}, group '{group}': '{key}' must hold integer keypoint indices (-1 = unmatched)")
    if m.size and m.min() < -1:
        raise DataError(f"{path}, group '{group}': '{key}' holds {int(m.min())}; indices are >= 0, -1 = unmatched")


def check_matches(pm: PairMatches, n0: int, n1: int, where: str) -> None:
    """DataError unless ``matches0`` has one entry per keypoint of the first image (``n0``) and each
    is -1 or an index into the second image's ``n1`` keypoints."""
    m = pm.matches0
    if m.shape != (n0,):
        raise DataError(f"{where}: 'matches0' has {m.shape[0]} entries for {n0} keypoints of the first image; "
                        "give the features file these matches were computed from")
    if m.size and m.max() >= n1:
        raise DataError(f"{where}: 'matches0' holds index {int(m.max())} but the second image has {n1} keypoints; "
                        "give the features file these matches were computed from")


# ----------------------------------------------------------------------------- glue-factory


_GF_NAME = re.compile(r"(?P<scene>[^/]+)/(?P<item>\d+)\.ppm")


def gluefactory_hpatches_pair(name: str) -> tuple[str, int, int, int] | None:
    """(scene, 1, k, block) of glue-factory's HPatches pair ``<sequence>/<i>.ppm``: ``i`` is the
    pair's index in the dataset's item list, 5 items per sequence (pairs (1, 2) .. (1, 6)), so
    k = i % 5 + 2 and ``block`` = i // 5 is the same for all pairs of one sequence. None if ``name``
    is not of that form."""
    m = _GF_NAME.fullmatch(name)
    if m is None:
        return None
    i = int(m["item"])
    per = GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE
    return m["scene"], 1, i % per + 2, i // per


def from_gluefactory_xy(xy: np.ndarray) -> np.ndarray:
    """glue-factory keypoints (corner convention) -> descbench's (pixel centres at integers), float32."""
    return (np.asarray(xy, dtype=np.float64) - GLUEFACTORY_OFFSET_PX).astype(np.float32)


@dataclass(frozen=True)
class PairPrediction:
    """One pair of a glue-factory ``predictions.h5``, keypoints in descbench's convention (index 0:
    the pair's first image). ``descriptors``: [N, D] per side or None; ``matches``: ``matches0`` /
    ``matches1`` as :class:`PairMatches`."""

    keypoints: tuple[np.ndarray, np.ndarray]
    scores: tuple[np.ndarray | None, np.ndarray | None]
    descriptors: tuple[np.ndarray | None, np.ndarray | None]
    matches: tuple[PairMatches | None, PairMatches | None]


def read_gluefactory_predictions(path: Path | str, require_descriptors: bool = False) -> dict[str, PairPrediction]:
    """Every pair group of a glue-factory ``predictions.h5``: group name -> :class:`PairPrediction`.

    A group is a group holding ``keypoints0``. DataError naming the file and group on missing
    ``keypoints0/1``, keypoints not N x 2, scores / descriptors / matches whose length is not the
    side's N, match indices out of range, and (``require_descriptors``) no ``descriptors0/1``."""
    path = Path(path)
    fix = "glue-factory's evaluation pipelines export 'keypoints0', 'keypoints1' per pair (gluefactory/eval)"
    out = {}
    with _open(path, "r") as f:
        groups = {g: ds for g, ds in _leaf_groups(f).items() if "keypoints0" in ds or "keypoints1" in ds}
        if not groups:
            raise DataError(f"{path} holds no group with 'keypoints0'; it is not a glue-factory predictions.h5 "
                            "(one group per pair: keypoints0/1, keypoint_scores0/1, matches0/1, matching_scores0/1)")
        for name in sorted(groups):
            grp = f[name]
            kps, scores, descs = [], [], []
            for side in "01":
                key = f"keypoints{side}"
                kp = _keypoints_xy(_numeric(_dataset(grp, key, path, name, fix), path, name, key, 2), path, name, key)
                kps.append(from_gluefactory_xy(kp))
                scores.append(_scores(grp, f"keypoint_scores{side}", kp.shape[0], path, name))
                dkey = f"descriptors{side}"
                if dkey not in grp:
                    if require_descriptors:
                        raise DataError(
                            f"{path}, group '{name}': no dataset '{dkey}' (the group has: {', '.join(sorted(grp.keys()))}); "
                            "glue-factory's evaluation pipelines do not export descriptors by default: add "
                            "'descriptors0' and 'descriptors1' to the pipeline's export_keys (or optional_export_keys) "
                            "and export the predictions again")
                    descs.append(None)
                    continue
                d = _numeric(grp[dkey], path, name, dkey, 2)
                if d.shape[0] != kp.shape[0]:
                    raise DataError(f"{path}, group '{name}': '{dkey}' has shape {d.shape} for {kp.shape[0]} keypoints; "
                                    "glue-factory stores descriptors N x D (one row per keypoint)")
                descs.append(_descriptors(d))
            matches = []
            for side, other in ((0, 1), (1, 0)):
                key = f"matches{side}"
                if key not in grp:
                    matches.append(None)
                    continue
                m = _numeric(grp[key], path, name, key, 1)
                _check_match_values(m, path, name, key)
                pm = PairMatches(m.astype(np.int64), _scores(grp, f"matching_scores{side}", m.shape[0], path, name))
                check_matches(pm, kps[side].shape[0], kps[other].shape[0], f"{path}, group '{name}' ({key})")
                matches.append(pm)
            out[name] = PairPrediction(tuple(kps), tuple(scores), tuple(descs), tuple(matches))
    return out


def to_gluefactory_xy(xy: np.ndarray) -> np.ndarray:
    """descbench keypoints (pixel centres at integers) -> glue-factory's (corner convention), float32:
    x + 0.5 in float64, rounded to float32. Exact when x + 0.5 is a float32: for every x that
    :func:`from_gluefactory_xy` returns (so a glue-factory file read and written again keeps its
    coordinates), and for every x >= 0.5 unless x + 0.5 reaches the next power of two (x in
    [2**k - 0.5, 2**k) with x's last bit set: a few coordinates in a thousand of a detector's);
    otherwise the nearest float32, off by at most half its spacing (<= 2**-13 px below 4096 px)."""
    return (np.asarray(xy, dtype=np.float64) + GLUEFACTORY_OFFSET_PX).astype(np.float32)


def gluefactory_hpatches_blocks(sequences, ignore_large_images: bool = True) -> dict[str, int]:
    """sequence -> its block j in glue-factory's HPatches item list (items 5j .. 5j + 4 = pairs
    (1, 2) .. (1, 6)): the sequences by name (Python's ``sorted``, as the dataset sorts its
    folder's entries), less :data:`GLUEFACTORY_HPATCHES_LARGE_SCENES` when
    ``ignore_large_images``, numbered from 0. A left-out sequence has no block."""
    kept = [s for s in sorted(set(sequences)) if not (ignore_large_images and s in GLUEFACTORY_HPATCHES_LARGE_SCENES)]
    return {s: j for j, s in enumerate(kept)}


def gluefactory_hpatches_name(sequence: str, block: int, k: int) -> str:
    """glue-factory's name of HPatches pair (1, ``k``) of the sequence at ``block``:
    ``<sequence>/<5 * block + k - 2>.ppm`` (the inverse of :func:`gluefactory_hpatches_pair`)."""
    if not 2 <= k <= GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE + 1:
        raise ValueError(f"glue-factory's HPatches pairs are (1, 2) .. (1, 6), not (1, {k})")
    return f"{sequence}/{GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE * block + k - 2}.ppm"


def mutual_nearest_matches(desc0: np.ndarray, desc1: np.ndarray) -> tuple[PairMatches, PairMatches]:
    """``matches0`` / ``matches1`` of two images from descbench's mutual nearest neighbours
    (:func:`descbench.metrics.nn.mutual_nearest`), with scores 1.0 where matched and 0.0 where not
    (glue-factory's ``NearestNeighborMatcher``'s ``matching_scores``)."""
    from descbench.metrics.nn import mutual_nearest

    ia, ib, _ = mutual_nearest(desc0, desc1)
    m0 = np.full(desc0.shape[0], -1, np.int64)
    m1 = np.full(desc1.shape[0], -1, np.int64)
    m0[ia], m1[ib] = ib, ia
    return (PairMatches(m0, (m0 >= 0).astype(np.float32)), PairMatches(m1, (m1 >= 0).astype(np.float32)))


def write_gluefactory_predictions(path: Path | str, sequences: Mapping[str, Mapping[int, ImageFeatures]],
                                  ignore_large_images: bool = True) -> list[str]:
    """Write glue-factory's HPatches ``predictions.h5`` (atomically) of ``sequences``: sequence ->
    {image number k: :class:`ImageFeatures` in descbench's convention}, images 1..6 each with
    descriptors. Returns the group names written, in item order.

    Per sequence at block j (:func:`gluefactory_hpatches_blocks`; a large sequence left out by
    ``ignore_large_images`` is not written) and per k = 2..6, the group
    :func:`gluefactory_hpatches_name` holds, as glue-factory's ``export_predictions`` writes its
    tensors: ``keypoints0`` (image 1) / ``keypoints1`` (image k) float32 [N, 2] in the corner
    convention (:func:`to_gluefactory_xy`), ``keypoint_scores0/1`` float32 [N] (when the features
    have scores), ``descriptors0/1`` [N, D] as given (float32, or uint8 packed bits), ``matches0``
    / ``matches1`` int64 and ``matching_scores0/1`` float32 of :func:`mutual_nearest_matches`.

    DataError naming the sequence when its images are not 1..6 (HPatches' layout) or one has no
    descriptors, and when no sequence is left to write."""
    path = Path(path)
    per = GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE
    want = list(range(1, per + 2))
    for seq, images in sequences.items():
        if sorted(images) != want:
            raise DataError(f"{path}: sequence {seq} has images {sorted(images)}; glue-factory's HPatches predictions "
                            f"are pairs (1, 2) .. (1, 6) of sequences of exactly 6 images 1..6 (HPatches layout): "
                            "export a run on HPatches scenes (or use --format hloc / d2net)")
        for k in want:
            if images[k].descriptors is None:
                raise DataError(f"{path}: sequence {seq}, image {k} has no descriptors; glue-factory's predictions "
                                "carry 'descriptors0/1': give the features with their descriptors")
    blocks = gluefactory_hpatches_blocks(sequences, ignore_large_images)
    if not blocks:
        raise DataError(f"{path}: no sequence to write: " + (
            f"{sorted(sequences)} are all glue-factory's large scenes, which its HPatches dataset leaves out by "
            "default; keep them (ignore_large_images=False, --keep-large-scenes)" if sequences else
            "give the features of at least one HPatches sequence"))
    h5py_module()  # the install hint before any file is created
    names = []
    with atomic_path(path) as tmp:
        with _open(tmp, "w") as f:
            for seq, j in sorted(blocks.items(), key=lambda sj: sj[1]):
                first = sequences[seq][1]
                for k in want[1:]:
                    other = sequences[seq][k]
                    name = gluefactory_hpatches_name(seq, j, k)
                    grp = f.create_group(name)
                    for side, feat in ((0, first), (1, other)):
                        grp.create_dataset(f"keypoints{side}", data=to_gluefactory_xy(feat.keypoints))
                        if feat.scores is not None:
                            grp.create_dataset(f"keypoint_scores{side}", data=np.asarray(feat.scores, np.float32))
                        grp.create_dataset(f"descriptors{side}", data=np.ascontiguousarray(feat.descriptors))
                    for side, pm in enumerate(mutual_nearest_matches(first.descriptors, other.descriptors)):
                        grp.create_dataset(f"matches{side}", data=pm.matches0)
                        grp.create_dataset(f"matching_scores{side}", data=pm.scores0)
                    names.append(name)
    return names


# ----------------------------------------------------------------------------- image names


class SceneImageNames:
    """A tool's image name -> descbench's (scene, image number k, image path) under ``scene_root``.

    A name is ``<scene>/<image>``: ``<image>`` is the image's file name (``1.ppm``), or the same
    without its extension or with another one (``1``, ``1.png``) when that names one image of the
    scene (:func:`descbench.datasets.layout.scene_files` lists them). Anything else is a DataError
    naming ``where`` (the file and group) and the expected form."""

    def __init__(self, scene_root: Path | str):
        self.scene_root = Path(scene_root)
        self._images: dict[str, tuple[Path, ...]] = {}

    def resolve(self, name: str, where: str) -> tuple[str, int, Path]:
        from descbench.datasets.layout import scene_files

        parts = name.strip("/").split("/")
        form = (f"image names must be <scene>/<image>, e.g. i_rocket/1.ppm, naming a scene folder under "
                f"{self.scene_root} and one of its images")
        if len(parts) != 2 or not all(parts):
            raise DataError(f"{where}: image name '{name}' is not <scene>/<image>; {form}")
        scene, image = parts
        if scene not in self._images:
            if not (self.scene_root / scene).is_dir():
                raise DataError(f"{where}: image name '{name}': no scene folder {self.scene_root / scene}; {form} "
                                "(is --scene-root the dataset folder the features were computed on?)")
            self._images[scene] = scene_files(self.scene_root / scene).images
        images = self._images[scene]
        hits = [k for k, p in enumerate(images, 1) if p.name == image]
        if not hits:
            hits = [k for k, p in enumerate(images, 1) if p.stem == Path(image).stem]
        if len(hits) != 1:
            listed = ", ".join(p.name for p in images)
            raise DataError(f"{where}: image name '{name}' is " + ("not an image of" if not hits else "ambiguous in")
                            + f" scene {scene} (its images: {listed}); {form}")
        return scene, hits[0], images[hits[0] - 1]


# ----------------------------------------------------------------------------- D2-Net npz


def d2net_path(root: Path | str, scene: str, image_name: str, method: str) -> Path:
    """``<root>/<scene>/<image file name>.<method>``: where :func:`descbench.precomputed.feature_path`
    looks for an image's features with ``params.root = root``."""
    return Path(root) / scene / f"{image_name}.{method}"


def write_d2net(path: Path | str, keypoints: np.ndarray, descriptors: np.ndarray, scores: np.ndarray | None = None) -> None:
    """One image's D2-Net features (atomically): ``np.savez`` into a file object, so ``path`` gets
    no ``.npz`` suffix. ``keypoints`` [N, 2] (x, y) or [N, 3] (x, y, size px), stored as given
    (float32 stays float32: :func:`descbench.precomputed.load_features` reads back the same
    values); ``descriptors`` [N, D]; ``scores`` [N] or None."""
    kp, desc = np.asarray(keypoints), np.asarray(descriptors)
    if kp.ndim != 2 or kp.shape[1] not in (2, 3) or desc.ndim != 2 or desc.shape[0] != kp.shape[0]:
        raise ValueError(f"write_d2net({path}): keypoints {kp.shape} must be N x 2 or 3 and descriptors {desc.shape} N x D")
    arrays = {"keypoints": kp, "descriptors": desc}
    if scores is not None:
        arrays["scores"] = np.asarray(scores)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes_atomic(path, buf.getvalue())
