"""``lightglue``: kornia's LightGlue (``kornia.feature.LightGlue``, kornia 0.9), a transformer that
matches two images' keypoints from their descriptors and positions, run on one pair at a time.

**The network** is built for ``features`` with kornia's configuration of those features
(``LightGlue.features[features]``: its descriptor width ``input_dim``, layers, and whether it reads
scales and orientations or LAFs) and kornia's ``default_conf`` for the rest, as
``LightGlue(None, **conf)`` with ``weights = None``: kornia then downloads nothing, and descbench
gives it its weights:

- ``weights: random``: each layer's default initialisation under a seed derived from
  ``weights_seed`` (:func:`descbench.torchrt.load_weights`, key ``lightglue``; label
  ``random(seed=<n>, key=lightglue)``). For tests and timings: the matches mean nothing.
- a file: a torch state dict (``torch.load(weights_only=True)``), e.g. the published
  ``<features>_lightglue.pth`` (see :func:`published_source`; descbench never downloads it), with
  kornia's own renaming of the state dict's keys (a ``matcher.`` prefix dropped; the old
  ``self_attn.<i>`` / ``cross_attn.<i>`` names moved under ``transformers.<i>``: kornia 0.9's
  ``LightGlue.__init__``) and the derived ``confidence_thresholds`` buffer the module's own when the
  file lacks it. Every other key and every shape must be the network's: weights of another model,
  or LightGlue weights of other features (e.g. ``superpoint``'s, 256-D, given ``features: disk``,
  128-D), are a :class:`~descbench.errors.ConfigError` naming ``matchers.<name>.params.weights``,
  the file, the first difference, the features the file fits and the fix, at DAG build.

``depth_confidence`` (early stopping; -1 off), ``width_confidence`` (point pruning; -1 off) and
``filter_threshold`` (the smallest matching score kept): null (default) takes kornia's value for
these features (the features' configuration where it sets one, e.g. -1 and -1 for
``doghardnet``, else ``LightGlue.default_conf``: 0.95, 0.99, 0.1), and the value used is recorded
in the params. A value given is used as given (kornia's constructor would let the features'
configuration override it).

**Inputs** (as :class:`kornia.feature.LightGlueMatcher` builds them from LAFs, written here for
descbench's OpenCV keypoints: ``x, y`` px, ``size`` the diameter, ``angle`` degrees, -1 undefined,
taken as 0): ``keypoints`` = ``(x, y)`` in pixels and ``image_size`` = ``(W, H)``; LightGlue's
forward normalises them to ``(k - size / 2) / (max(W, H) / 2)``. The features that read more:

- ``sift`` (``add_scale_ori``): ``scales`` = ``size / 2`` and ``oris`` = ``angle`` in radians,
  wrapped into ``(-pi, pi]``. LightGlueMatcher gives the sift weights a sixth of the LAF scale and
  the LAF orientation negated: the detection sigma of a 6-sigma DoG frame (OpenCV's SIFT
  ``size`` is twice its sigma: ``sift.cpp``, ``kpt.size = sigma * ... * 2``) and OpenCV's angle
  (kornia's orientation is OpenCV's angle negated).
- ``doghardnet``, ``dog_affnet_hardnet`` (``add_scale_ori``, ``scale_coef`` 1/6): ``scales`` =
  ``6 * size`` (the 12-sigma LAF scale LightGlueMatcher expects for these weights, "six times
  OpenCV's KeyPoint.size"; the network multiplies it by 1/6) and ``oris`` = ``-angle`` in radians
  wrapped into ``[0, 2 pi)`` (the LAF orientation, as LightGlueMatcher passes it for these).
- ``keynet_affnet_hardnet`` (``add_laf``): ``lafs`` =
  :func:`descbench.matchers.kornia_matching.lafs_of` (scale ``size / 2``, the inverse of
  descbench's KeyNet LAF -> keypoint rule).
- the others (``superpoint``, ``disk``, ``aliked``, ``dedodeb``, ...): keypoints only.

**Output**: LightGlue's ``matches0`` (the match of each keypoint of image a, -1 none) and
``matching_scores0``: each matched keypoint of a, its keypoint of b and its matching score
(``score_kind = "confidence"``, larger is better; only scores above ``filter_threshold`` match;
LightGlue's matches are mutual). Fewer than two keypoints on either side: no matches (as
LightGlueMatcher). Descriptors must be float with ``input_dim`` columns (a DataError otherwise,
before the network runs); the config requires ``matchers.<name>.descriptors`` for a lightglue
matcher and refuses a packed-binary descriptor or one whose declared width differs from the
features' ``input_dim`` (:func:`check_in_config`).

Runs on ``device`` (``auto``: CUDA where the job's node has one) with ``threads`` CPU threads and
torch's deterministic settings (:func:`descbench.torchrt.configure`); the network is built and
loaded once per process and parameter set. On the CPU the matches are the kornia module's bit for
bit (tested).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from descbench import torchrt
from descbench.errors import ConfigError, DataError
from descbench.fileops import file_sha256
from descbench.jobfacts import named_files, weights_label
from descbench.matchers import Matcher, Matches, MatchSide
from descbench.matchers.kornia_matching import TORCH_PARAMS, float_descriptors, lafs_of
from descbench.params import object_fragment

#: ``kornia.feature.LightGlue.features``' names, kornia 0.9 (a test compares them with kornia's).
FEATURES = ("superpoint", "dedodeb", "dedodeg", "disk", "aliked", "raco-aliked", "xfeat", "sift",
            "dog_affnet_hardnet", "doghardnet", "keynet_affnet_hardnet")
#: The conf keys that null takes from kornia (the features' configuration, else default_conf).
KORNIA_DEFAULTED = ("depth_confidence", "width_confidence", "filter_threshold")
SEED_KEY = "lightglue"

PARAMS_SCHEMA = {"lightglue": object_fragment(
    ("features", "weights"),
    features={"enum": list(FEATURES), "description": "the features LightGlue's configuration and weights are for"},
    weights={"type": "string", "minLength": 1,
             "description": "a torch state dict of LightGlue for these features, or 'random' (seeded by weights_seed)"},
    weights_seed={"type": "integer", "minimum": 0, "default": 0},
    depth_confidence={"type": ["number", "null"], "default": None},
    width_confidence={"type": ["number", "null"], "default": None},
    filter_threshold={"type": ["number", "null"], "minimum": 0, "maximum": 1, "default": None},
    **TORCH_PARAMS,
)}


def lightglue_class():
    return torchrt.require("kornia", what="matcher 'lightglue'").feature.LightGlue


def network_conf(params: dict) -> dict:
    """The keyword arguments of ``LightGlue(None, **conf)``: the features' configuration, no weights
    to fetch, and the params' confidences (filled)."""
    lg = lightglue_class()
    return {**lg.features[params["features"]], "weights": None, **{k: params[k] for k in KORNIA_DEFAULTED}}


def kornia_value(features: str, key: str):
    """kornia's value of ``key`` for ``features``: the features' configuration, else ``default_conf``."""
    lg = lightglue_class()
    return lg.features[features].get(key, lg.default_conf[key])


def input_dim(features: str) -> int:
    return int(kornia_value(features, "input_dim"))


def published_source(features: str) -> str:
    """Where kornia's ``LightGlue(features)`` would download its weights from (descbench never does)."""
    lg = lightglue_class()
    name = features.replace("-", "_")
    return (f"kornia.feature.LightGlue('{features}') downloads them: https://huggingface.co/kornia/lightglue "
            f"({name}_lightglue.pth) or {lg.url.format(lg.version, name)}")


def kornia_state(state: dict, n_layers: int) -> dict:
    """A state dict with kornia's renaming (``LightGlue.__init__``, kornia 0.9): a ``matcher.``
    prefix dropped, ``self_attn.<i>`` -> ``transformers.<i>.self_attn`` and ``cross_attn.<i>`` ->
    ``transformers.<i>.cross_attn`` for every layer ``i``, in that order."""
    prefix = "matcher."
    state = {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state.items()}
    for i in range(n_layers):
        state = {k.replace(f"self_attn.{i}", f"transformers.{i}.self_attn"): v for k, v in state.items()}
        state = {k.replace(f"cross_attn.{i}", f"transformers.{i}.cross_attn"): v for k, v in state.items()}
    return state


def fitting_features(state: dict) -> list[str]:
    """The features whose configuration fits a state dict's input shapes: ``posenc.Wr.weight``'s
    columns (2 + 2 scale/orientation + 4 LAF inputs) and the descriptor width (``input_proj``'s
    input columns, else the model width)."""
    lg = lightglue_class()
    wr, proj = state.get("posenc.Wr.weight"), state.get("input_proj.weight")
    out = []
    for f, conf in lg.features.items():
        c = {**lg.default_conf, **conf}
        n_in = 2 + 2 * bool(c["add_scale_ori"]) + 4 * bool(c["add_laf"])
        in_dim = proj.shape[1] if proj is not None else None
        if wr is not None and wr.shape[1] == n_in and (in_dim == c["input_dim"] if in_dim is not None else c["input_dim"] == c["descriptor_dim"]):
            out.append(f)
    return out


def read_weights(net, params: dict, where: str) -> str:
    """Give ``net`` the weights of ``params`` (module docstring) in eval mode; returns the label."""
    torch = torchrt.require("torch", what=where)
    if params["weights"] == torchrt.RANDOM_WEIGHTS:
        return torchrt.load_weights(net, params["weights"], params["weights_seed"], where, published_source(params["features"]),
                                    seed_key=SEED_KEY)
    key, path = f"{where}.weights", Path(params["weights"])
    torchrt.check_weights_file(key, params["weights"], published_source(params["features"]))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a file it cannot read
        raise ConfigError(f"{key}: {path} {torchrt.unreadable_weights_reason(path, exc)}; fix: give LightGlue's weights for "
                          f"'{params['features']}' ({published_source(params['features'])})") from exc
    if not isinstance(state, dict) or not all(hasattr(v, "shape") for v in state.values()):
        raise ConfigError(f"{key}: {path} holds a {type(state).__name__} that is not a state dict of tensors; fix: give "
                          f"LightGlue's weights for '{params['features']}' ({published_source(params['features'])})")
    state = kornia_state(state, net.conf.n_layers)
    own = net.state_dict()
    if "confidence_thresholds" not in state:  # derived from the configuration (kornia loads with strict=False)
        state["confidence_thresholds"] = own["confidence_thresholds"]
    problem = torchrt.state_dict_problem(own, state)
    if problem is not None:
        fits = fitting_features(state)
        hint = (f"its input shapes fit LightGlue for features {', '.join(repr(f) for f in fits)}" if fits
                else "it fits LightGlue for none of kornia's features (the weights of another model?)")
        raise ConfigError(f"{key}: {path} is not LightGlue's weights for features '{params['features']}' "
                          f"(descriptors of {input_dim(params['features'])} columns): {problem}; {hint}; fix: set "
                          f"{where}.features to the features the weights were trained for, or give the weights for "
                          f"'{params['features']}' ({published_source(params['features'])})")
    net.load_state_dict(state, strict=True)
    net.eval()
    return f"sha256:{file_sha256(path)}"


def check(params: dict, where: str) -> dict:
    """Config-time check: torch and kornia installed, the null confidences filled with kornia's
    values for the features, and the weights file (if any) read and checked against the network."""
    torchrt.check_installed("torch", "kornia", what=f"the matcher at {where.removesuffix('.params')}")
    params = {**params, **{k: kornia_value(params["features"], k) if params[k] is None else params[k] for k in KORNIA_DEFAULTED}}
    if params["weights"] != torchrt.RANDOM_WEIGHTS:  # read on the CPU: the config may be checked on a node without the job's GPU
        loaded_net(*net_key({**params, "device": "cpu"}), where)
    return params


def check_in_config(name: str, spec: dict, descriptors: dict, width) -> None:
    """``matchers.<name>.descriptors`` given (LightGlue's weights take one kind of descriptor), none
    of them packed binary, and each whose family declares a width other than the 128 it assumes by
    default (a function of its params, or another number; ``width(descriptor)`` gives it) of the
    features' ``input_dim`` columns.
    (A family's ``width`` is the score job's estimate, 128 unless declared: a 128-D one is checked
    in the job, before the network runs.)"""
    from descbench.descriptors import DescriptorFamily, get_family

    key = f"matchers.{name}.descriptors"
    feats = spec["params"]["features"]
    if not spec.get("descriptors"):
        raise ConfigError(f"{key}: a lightglue matcher needs the descriptors it matches listed (its weights are for "
                          f"'{feats}' descriptors of {input_dim(feats)} columns); fix: set {key} to e.g. [{next(iter(descriptors), 'sift')}]")
    default_width = DescriptorFamily.__dataclass_fields__["width"].default
    for d in spec["descriptors"]:
        fam = get_family(descriptors[d]["family"])
        if fam.binary is True:
            raise ConfigError(f"{key}: descriptor '{d}' (family {fam.name}) is packed binary, LightGlue takes float "
                              f"descriptors; fix: remove it from {key}")
        if callable(fam.width) or fam.width != default_width:
            w = width(d)
            if w != input_dim(feats):
                raise ConfigError(f"{key}: descriptor '{d}' has {w} columns, but LightGlue for features '{feats}' takes "
                                  f"{input_dim(feats)}; fix: set matchers.{name}.params.features to features of {w}-D "
                                  f"descriptors (and their weights), or remove '{d}' from {key}")


def net_key(params: dict) -> tuple:
    """The arguments of :func:`loaded_net` for filled params (the weights file's mtime and size key the cache)."""
    w = params["weights"]
    try:
        st = Path(w).stat() if w != torchrt.RANDOM_WEIGHTS else None
    except OSError:
        st = None
    return (params["features"], w, params["weights_seed"], tuple(params[k] for k in KORNIA_DEFAULTED), params["device"],
            None if st is None else (st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=4)
def loaded_net(features: str, weights: str, weights_seed: int, confidences: tuple, device: str, stamp, where: str):
    """``(net, weights label, torch.device)``: ``LightGlue(None, **conf)`` with its weights, in eval
    mode, on the device; once per process for these arguments."""
    params = {"features": features, "weights": weights, "weights_seed": weights_seed, **dict(zip(KORNIA_DEFAULTED, confidences))}
    dev = torchrt.resolve_device(device, where)
    net = lightglue_class()(None, **network_conf(params))
    label = read_weights(net, params, where)
    return net.to(dev), label, dev


WHERE = "matcher 'lightglue' params"


def scales_oris(kps, features: str) -> tuple[np.ndarray, np.ndarray] | None:
    """float32 ``(scales, oris)`` LightGlue reads for ``features`` (module docstring), or None."""
    size = np.asarray(kps.size, np.float32)
    angle = np.asarray(kps.angle, np.float32)
    rad = np.deg2rad(np.where(angle < 0, np.float32(0), angle)).astype(np.float32)
    if features == "sift":
        return (size / np.float32(2)).astype(np.float32), np.where(rad > np.float32(math.pi), rad - np.float32(2 * math.pi), rad).astype(np.float32)
    if features in ("doghardnet", "dog_affnet_hardnet"):
        neg = -rad
        return (size * np.float32(6)).astype(np.float32), np.where(neg < 0, neg + np.float32(2 * math.pi), neg).astype(np.float32)
    return None


def image_input(side: MatchSide, desc: np.ndarray, features: str, dev) -> dict:
    """LightGlue's dict of one image (module docstring), batch of one."""
    import torch

    kps = side.keypoints
    n = len(kps)
    out = {"keypoints": torch.from_numpy(np.stack([kps.x, kps.y], axis=1).astype(np.float32)).reshape(1, n, 2).to(dev),
           "descriptors": torch.from_numpy(desc).reshape(1, n, -1).to(dev),
           "image_size": torch.tensor([list(side.image_size)], dtype=torch.float32, device=dev)}
    so = scales_oris(kps, features)
    if so is not None:
        out["scales"], out["oris"] = (torch.from_numpy(v).reshape(1, n).to(dev) for v in so)
    if features == "keynet_affnet_hardnet":
        out["lafs"] = lafs_of(kps, dev)
    return out


def check_inside(side: MatchSide, name: str) -> None:
    """LightGlue's range of keypoints: ``|(k - size / 2) / (max(W, H) / 2)| <= 1`` (kornia raises
    otherwise); a keypoint outside it is a DataError naming the image size it was checked against."""
    w, h = side.image_size
    half = np.float32(max(w, h)) / np.float32(2)
    for v, s in ((side.keypoints.x, w), (side.keypoints.y, h)):
        u = (np.asarray(v, np.float32) - np.float32(s) / np.float32(2)) / half
        if u.size and (np.abs(u) > 1).any():
            k = int(np.flatnonzero(np.abs(u) > 1)[0])
            raise DataError(f"matcher 'lightglue': keypoint {k} of image {name} at ({side.keypoints.x[k]}, {side.keypoints.y[k]}) "
                            f"lies outside the image of size {w} x {h} by more than LightGlue accepts; fix: the keypoint file "
                            "does not belong to this image (rerun the keypoint stage)")


def match_lightglue(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """LightGlue on one pair (module docstring)."""
    feats = params["features"]
    da, db = float_descriptors(a, "lightglue"), float_descriptors(b, "lightglue")
    want = input_dim(feats)
    for d in (da, db):
        if d.shape[1] != want:
            raise DataError(f"matcher 'lightglue' for features '{feats}' takes descriptors of {want} columns, these have "
                            f"{d.shape[1]}; fix: set the matcher's params.features to features of {d.shape[1]}-D "
                            "descriptors (and their weights), or list only matching descriptors in its 'descriptors'")
    if len(a) < 2 or len(b) < 2:
        return Matches.empty()
    for name, side in (("a", a), ("b", b)):
        check_inside(side, name)
    torch = torchrt.require("torch", what=WHERE)
    net, _, dev = loaded_net(*net_key(params), WHERE)
    torchrt.configure(dev, params["threads"])
    with torch.inference_mode():
        pred = net({"image0": image_input(a, da, feats, dev), "image1": image_input(b, db, feats, dev)})
    m0 = pred["matches0"][0].cpu().numpy().astype(np.int64)
    s0 = pred["matching_scores0"][0].float().cpu().numpy().astype(np.float64)
    ia = np.flatnonzero(m0 > -1)
    return Matches(ia.astype(np.int64), m0[ia], s0[ia])


def runtime_record(params: dict) -> dict:
    """The torch runtime (:func:`descbench.torchrt.configure`) plus ``network`` and ``weights`` (label)."""
    _, label, dev = loaded_net(*net_key(params), WHERE)
    return {**torchrt.configure(dev, params["threads"]), "network": f"kornia.feature.LightGlue (features {params['features']})",
            "weights": label, "weights_file": None if params["weights"] == torchrt.RANDOM_WEIGHTS else params["weights"]}


MATCHERS = (
    Matcher("lightglue", match_lightglue, PARAMS_SCHEMA["lightglue"], score_kind="confidence", runtime="torch",
            files=lambda p: named_files(p, ("weights",)), weights_labels=lambda p: [weights_label(p)], check=check,
            check_in_config=check_in_config, provenance=runtime_record),
)
