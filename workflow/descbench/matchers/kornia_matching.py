"""Geometry-aware matchers of kornia: ``fginn`` (``kornia.feature.match_fginn``) and ``adalam``
(``kornia.feature.match_adalam``), kornia 0.9, run as kornia runs them (torch; the ``learned``
extra's env), on kornia's own distances: ``torch.cdist`` of the float32 descriptors (packed binary
descriptors are refused: both compare by L2).

**Keypoints as kornia LAFs** (:func:`lafs_of`): keypoint ``i`` becomes
``laf_from_center_scale_ori(xy, size / 2, -angle)``: centre ``(x, y)``, scale ``size / 2`` (the
radius of OpenCV's diameter ``size``) and orientation ``-angle`` degrees (kornia's orientation is
OpenCV's angle negated: its rotation matrix ``[[cos, sin], [-sin, cos]]`` turns the other way on
screen); an undefined angle (-1) is 0. This is the inverse of the rule by which descbench turns
kornia's LAFs into OpenCV keypoints (:func:`descbench.keypoints.keynet.keypoints_from_lafs`:
``size`` = the sum of the two column norms, ``angle = atan2(a21, a11)``), so a keypoint goes to a
LAF and back unchanged (to float32 rounding).

- ``fginn``: the ratio test against the nearest *geometrically distinct* candidate: of the
  ``min(10, N_b)`` nearest candidates, the first excluded, those whose centre lies less than
  ``spatial_th`` pixels from the nearest one's do not count as the second neighbour (kornia's
  Convention block of ``match_fginn``); a match passes when ``d1 / d2 <= ratio``; with ``mutual``
  it must also be a mutual nearest neighbour. Score: that ratio (``score_kind = "distance"``,
  smaller is better; 0 when every candidate lies within ``spatial_th``: kornia accepts the match).
  Only the centres of image b's LAFs are read. Image b needs two keypoints.
- ``adalam``: nearest neighbours on squared L2 distances, filtered by AdaLAM's local affine
  verification (seeds, neighbourhoods consistent in orientation and scale, parallel local RANSACs;
  kornia's ``get_adalam_default_config()`` gives the params' defaults, each param one key of that
  config; ``hw`` = each image's ``(height, width)``). Score: kornia's returned value, the *inverse*
  of the confidence of the local RANSAC that accepted the match (float32, at most
  ``1 / min_confidence``; ``score_kind = "distance"``, smaller is better). When no seed survives
  (very few keypoints) kornia returns the ratio-test matches (``d1^2 / d2^2 <= 0.95``) scored by that
  ratio instead. Each image needs two keypoints. Orientations and scales enter only through how
  they change between the images, so the LAF convention's constant factors do not matter.
  **Deterministic**: kornia 0.9's RANSAC draws no random numbers (its hypotheses are the first
  ``ransac_iters`` couples of each neighbourhood, ``adalam/ransac.py``'s ``draw_first_k_couples``),
  so the matches do not depend on torch's RNG and there is no seed to set (tested: the same
  matches under different global seeds, and bit for bit on repeated CPU runs).

Both run on ``device`` (``auto``: CUDA where the job's node has one, else the CPU) with ``threads``
CPU threads and torch's deterministic settings (:func:`descbench.torchrt.configure`, recorded in
the matches file's provenance under ``runtime``).
"""

from __future__ import annotations

import numpy as np

from descbench import torchrt
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.matchers import Matcher, Matches, MatchSide
from descbench.params import object_fragment

#: The torch runtime's params of every kornia matcher (descbench.torchrt: device, CPU threads).
TORCH_PARAMS = {
    "device": {"enum": ["auto", "cpu", "cuda"], "default": "auto"},
    "threads": {"type": "integer", "minimum": 1, "default": 1},
}

# kornia.feature.adalam.get_adalam_default_config(), kornia 0.9 (a test reads them from kornia);
# the keys are the config's own.
ADALAM_CONFIG = {
    "area_ratio": {"type": "number", "exclusiveMinimum": 0, "default": 100},
    "search_expansion": {"type": "number", "exclusiveMinimum": 0, "default": 4},
    "ransac_iters": {"type": "integer", "minimum": 1, "default": 128},
    "min_inliers": {"type": "integer", "minimum": 0, "default": 6},
    "min_confidence": {"type": "number", "exclusiveMinimum": 0, "default": 200},
    # null: orientations not used
    "orientation_difference_threshold": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": 30},
    # null: scales not used
    "scale_rate_threshold": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": 1.5},
    "detected_scale_rate_threshold": {"type": "number", "exclusiveMinimum": 0, "default": 5},
    "refit": {"type": "boolean", "default": True},
    "force_seed_mnn": {"type": "boolean", "default": True},
}

PARAMS_SCHEMA = {
    # kornia.feature.match_fginn's th, spatial_th, mutual (a test reads the defaults from its signature)
    "fginn": object_fragment(ratio={"type": "number", "exclusiveMinimum": 0, "default": 0.8},
                             spatial_th={"type": "number", "minimum": 0, "default": 10.0},
                             mutual={"type": "boolean", "default": False}, **TORCH_PARAMS),
    "adalam": object_fragment(**ADALAM_CONFIG, **TORCH_PARAMS),
}


def lafs_of(kps: ImageKeypoints, device="cpu"):
    """float32 ``[1, N, 2, 3]`` kornia LAFs of ``kps`` (module docstring):
    ``kornia.feature.laf_from_center_scale_ori(xy, size / 2, -angle)``, an angle of -1 (undefined) as 0."""
    torch, kornia = torchrt.require("torch", "kornia", what="kornia LAFs")
    n = len(kps)
    xy = torch.from_numpy(np.stack([kps.x, kps.y], axis=1).astype(np.float32)).reshape(1, n, 2)
    scale = torch.from_numpy((np.asarray(kps.size, np.float32) / np.float32(2)).astype(np.float32)).reshape(1, n, 1, 1)
    angle = np.asarray(kps.angle, np.float32)
    ori = torch.from_numpy(np.where(angle < 0, np.float32(0), -angle).astype(np.float32)).reshape(1, n, 1)
    return kornia.feature.laf_from_center_scale_ori(xy, scale, ori).to(device)


def float_descriptors(side: MatchSide, matcher: str) -> np.ndarray:
    """The side's descriptors as float32; packed binary ones (uint8) are a DataError: kornia's
    matchers compare by L2."""
    d = side.descriptors
    if d.dtype == np.uint8:
        raise DataError(f"matcher '{matcher}' compares float descriptors by L2 (kornia), but these are packed binary "
                        "(uint8); fix: list only float descriptors in the matcher's 'descriptors', or use mnn / nn / snn / "
                        "smnn, which compare packed bits by Hamming")
    return np.ascontiguousarray(d, dtype=np.float32)


def check_float_descriptors(name: str, spec: dict, descriptors: dict, width=None) -> None:
    """Config-time check of a kornia matcher: every descriptor it applies to (``matchers.<name>.descriptors``,
    null: all) that is packed binary by its family is a ConfigError naming the key."""
    from descbench.descriptors import get_family

    for d in spec.get("descriptors") or list(descriptors):
        fam = get_family(descriptors[d]["family"])
        if fam.binary is True:
            raise ConfigError(f"matchers.{name}.descriptors: matcher '{spec['matcher']}' compares float descriptors by L2, "
                              f"but descriptor '{d}' (family {fam.name}) is packed binary; fix: list the float descriptors "
                              f"it should match in matchers.{name}.descriptors")


def torch_setup(params: dict, where: str):
    """``(torch, kornia, device, runtime record)`` for a matcher's params (descbench.torchrt)."""
    torch, kornia = torchrt.require("torch", "kornia", what=where)
    dev = torchrt.resolve_device(params["device"], where)
    return torch, kornia, dev, torchrt.configure(dev, params["threads"])


def to_matches(dists, idxs) -> Matches:
    """kornia's ``(dists [M, 1], idxs [M, 2])`` as :class:`Matches` (rows by index in image a, as
    kornia returns them)."""
    idxs = idxs.detach().cpu().numpy().astype(np.int64).reshape(-1, 2)
    return Matches(idxs[:, 0], idxs[:, 1], dists.detach().cpu().numpy().astype(np.float64).reshape(-1))


def _kornia_lafs_match(name: str, a: MatchSide, b: MatchSide, params: dict, min_a: int, min_b: int, call) -> Matches:
    """Run ``call(kornia.feature, desc_a, desc_b, lafs_a, lafs_b, device) -> (dists, idxs)`` on the
    params' device; no match when a side has fewer than ``min_a`` / ``min_b`` keypoints."""
    da, db = float_descriptors(a, name), float_descriptors(b, name)
    if len(a) < min_a or len(b) < min_b:
        return Matches.empty()
    torch, kornia, dev, _ = torch_setup(params, f"matcher '{name}' params")
    with torch.inference_mode():
        dists, idxs = call(kornia.feature, torch.from_numpy(da).to(dev), torch.from_numpy(db).to(dev),
                           lafs_of(a.keypoints, dev), lafs_of(b.keypoints, dev), dev)
    return to_matches(dists, idxs)


def match_fginn(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """``kornia.feature.match_fginn(desc_a, desc_b, lafs_a, lafs_b, ratio, spatial_th, mutual)``."""
    return _kornia_lafs_match("fginn", a, b, params, 1, 2, lambda KF, da, db, la, lb, dev: KF.match_fginn(
        da, db, la, lb, params["ratio"], params["spatial_th"], params["mutual"]))


def adalam_config(params: dict) -> dict:
    """kornia's AdaLAM config of filled params (the keys of :data:`ADALAM_CONFIG`)."""
    return {k: params[k] for k in ADALAM_CONFIG}


def match_adalam(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """``kornia.feature.match_adalam(desc_a, desc_b, lafs_a, lafs_b, config, hw_a, hw_b)``, ``hw`` = (height, width)."""
    return _kornia_lafs_match("adalam", a, b, params, 2, 2, lambda KF, da, db, la, lb, dev: KF.match_adalam(
        da, db, la, lb, {**adalam_config(params), "device": dev}, hw1=a.image_size[::-1], hw2=b.image_size[::-1]))


def runtime_record(params: dict) -> dict:
    """What the matches file records about how the matcher ran (:func:`descbench.torchrt.configure`)."""
    dev = torchrt.resolve_device(params["device"], "matcher params")
    return torchrt.configure(dev, params["threads"])


def check_installed(params: dict, where: str) -> dict:
    torchrt.check_installed("torch", "kornia", what=f"the matcher at {where.removesuffix('.params')}")
    return params


MATCHERS = (
    Matcher("fginn", match_fginn, PARAMS_SCHEMA["fginn"], score_kind="distance", runtime="torch", check=check_installed,
            check_in_config=check_float_descriptors, provenance=runtime_record),
    Matcher("adalam", match_adalam, PARAMS_SCHEMA["adalam"], score_kind="distance", runtime="torch", check=check_installed,
            check_in_config=check_float_descriptors, provenance=runtime_record),
)
