"""SuperPoint (DeTone, Malisiewicz, Rabinovich, CVPRW 2018), written by descbench, with loaders for
both published checkpoint layouts and the published post-processing as parameters.

kornia 0.9 has no SuperPoint, so the network is built here from the paper's architecture and the
published checkpoints' layouts. Nothing is downloaded: a checkpoint is a local file (or a state
dict already in memory).

**The network** (:func:`superpoint_net`, class ``SuperPointNet``): a VGG-style shared encoder of
eight 3 x 3 convolutions (1 -> 64, 64 -> 64, pool, 64 -> 64, 64 -> 64, pool, 64 -> 128, 128 -> 128,
pool, 128 -> 128, 128 -> 128; each followed by a ReLU; 2 x 2 max pools of stride 2, so one output
cell covers 8 x 8 pixels), then two heads on the 1/8 map: the detector head (3 x 3 conv 128 -> 256,
ReLU, 1 x 1 conv 256 -> 65: 64 pixel positions of the cell and a "no interest point" dustbin) and
the descriptor head (3 x 3 conv 128 -> 256, ReLU, 1 x 1 conv 256 -> 256). Every convolution has a
bias and zero padding ``(k - 1) / 2``. Two layouts of the same architecture are published:

* ``magicleap``: MagicLeap's ``superpoint_v1.pth`` (magicleap/SuperPointPretrainedNetwork
  ``demo_superpoint.py:SuperPointNet``; the same file cvg/LightGlue ``lightglue/superpoint.py:SuperPoint``
  and glue-factory ``gluefactory_nonfree/superpoint.py:SuperPoint`` load): no batch norm, keys
  ``conv1a, conv1b, ..., conv4b, convPa, convPb, convDa, convDb`` (``.weight``, ``.bias``), 24 tensors.
  Its licence is MagicLeap's academic / non-commercial research licence.
* ``rpautrat``: Rémi Pautrat's MIT-licensed ``superpoint_v6_from_tf.pth`` (rpautrat/SuperPoint
  ``superpoint_pytorch.py:SuperPoint`` and ``VGGBlock``; glue-factory
  ``gluefactory/models/extractors/superpoint_open.py``): every convolution is a block
  ``conv -> ReLU -> BatchNorm2d(eps=0.001)`` (ReLU *before* the batch norm; the heads' last 1 x 1
  convolutions have no ReLU but do have a batch norm). Keys ``backbone.<i>.<j>.{conv,bn}.*`` for
  the encoder's stages ``i = 0..3`` and convolutions ``j = 0, 1`` (``backbone.<i>.2`` is the
  parameterless max pool of stages 0-2), ``detector.<j>.*`` and ``descriptor.<j>.*`` for the heads;
  a batch norm has ``weight, bias, running_mean, running_var`` and ``num_batches_tracked``
  (optional, as for torch's strict loading), 84 tensors (12 blocks of 7).

:func:`load_superpoint` recognises the layout from its first key (``conv1a.weight`` or
``backbone.0.0.conv.weight``) and then requires every key and shape of that layout.

**Dense outputs** (:func:`dense_outputs`): the network runs on the whole grey image ``[1, 1, H, W]``
(float in [0, 1], as all references feed it; no resize, no padding). The max pools floor, so the
1/8 maps have ``Hc, Wc = floor(H / 8), floor(W / 8)`` cells and the score map covers the top-left
``8 Hc x 8 Wc`` pixels: the image is in effect cropped to a multiple of 8 at the bottom and right
*after* the first convolutions (which still see those rows), exactly as in every reference; no
reference pads. Scores: softmax over the 65 channels, dustbin dropped, channel ``k = 8 r + c`` of
cell ``(i, j)`` is pixel ``(8 i + r, 8 j + c)`` (row, column): LightGlue, rpautrat and glue-factory
use ``torch.softmax``; MagicLeap's demo uses ``exp(x) / (sum exp + 1e-5)`` in NumPy without
subtracting the maximum (the softmax times ``sum / (sum + 1e-5)``; it moves only scores that sit on
the threshold; descbench uses ``torch.softmax``). The dense descriptor map is L2-normalised along channels
(``torch.nn.functional.normalize``, as LightGlue and rpautrat; the demo divides by the norm
without their 1e-12 floor: the same unless a norm is below 1e-12).

**Keypoints** (:func:`detect_and_describe`), parameters :data:`DEFAULTS`:

* ``nms``: ``maxpool`` (default; LightGlue ``simple_nms``, rpautrat ``batched_nms``, glue-factory):
  a pixel is kept when its score equals the maximum of its ``(2 r + 1)^2`` window (so equal maxima
  in one window are all kept), then twice: every pixel within the window of a kept pixel is
  suppressed (score taken as 0), and a pixel that is not suppressed and equals the maximum of its
  window in the suppressed map is kept too; the map is scored over the whole image, before the
  threshold and the border removal (a pixel below the threshold can suppress). ``greedy``
  (MagicLeap's ``demo_superpoint.py:SuperPointFrontend.nms_fast``): the pixels with score >=
  threshold, by decreasing score, each kept unless a kept pixel lies within Chebyshev distance
  ``r``, only those candidates suppressing. Ties: descbench orders equal scores by row-major index
  (y, then x) (the demo's ``np.argsort`` quicksort leaves their order unspecified).
* ``nms_radius`` ``r``: 4 (MagicLeap demo's ``--nms_dist``, LightGlue, rpautrat and glue-factory's
  defaults; glue-factory's HPatches configs ``superpoint+NN.yaml`` / ``superpoint-open+NN.yaml``
  use 3). 0: no suppression.
* ``detection_threshold``: 0.005 (rpautrat's ``superpoint_pytorch.py`` and glue-factory's default
  for both checkpoints); others published: MagicLeap's demo ``--conf_thresh`` 0.015 (at 120 x 160),
  LightGlue 0.0005, glue-factory's HPatches configs 0.0 (with ``max_num_keypoints`` 1024), rpautrat's
  TensorFlow HPatches config 0.001 (``nms`` 8, ``top_k`` 1000). With ``nms: maxpool`` a pixel is kept
  when its score is ``> threshold`` (LightGlue, rpautrat); with ``greedy`` when ``>= threshold`` (the demo).
* ``remove_borders`` ``b``: 4 (all references): pixels with ``x < b``, ``y < b``, ``x >= 8 Wc - b``
  or ``y >= 8 Hc - b`` are dropped after the NMS (they still suppress). LightGlue and rpautrat cut at
  the score map's edge as here; the demo at the image's ``W``, ``H`` (the same when they are
  multiples of 8).
* ``max_keypoints``: -1 = all; else the first ``max_keypoints`` of the output order.
* Output order: decreasing score, ties by row-major index (y, then x). (The references give
  ``torch.where``'s row-major order without a cap and ``torch.topk``'s, whose tie order is
  unspecified, with one; the demo sorts by decreasing score.)

**Coordinates**: descbench's convention, pixel centres at integers, x right, y down. Every
reference detects at integer score-map indices ``(column, row)``, which are descbench's ``(x, y)``
as they are: MagicLeap's demo and LightGlue return them so; glue-factory's ``superpoint_open``
returns ``index + 0.5`` (glue-factory's pixel corners at integers), i.e. descbench's ``xy + 0.5``.

**Descriptor sampling** (``sampling``; :func:`sample_descriptors`): bilinear
``torch.nn.functional.grid_sample`` of the normalised 1/8 descriptor map at each keypoint (zero
padding outside it), then each row L2-normalised (``normalize``). The references map a keypoint
``x`` to a normalised grid coordinate differently; in cells of the 1/8 map (cell ``j``'s centre at
index ``j``):

* ``magicleap``: the demo's ``g = x / (W / 2) - 1`` (``W`` the image width) with grid_sample's
  behaviour of the torch the demo was written for (PyTorch < 1.3, i.e. ``align_corners=True``): cell
  ``u = x (Wc - 1) / W``. (Run with PyTorch >= 1.3, the demo's call gets ``align_corners=False``,
  ``u = x / 8 - 0.5``: glue-factory's ``sample_descriptors_fix_sampling``.)
* ``superglue``: LightGlue's and SuperGlue's ``sample_descriptors`` (glue-factory's
  ``legacy_sampling``, which it calls broken): ``g = (x - 3.5) / (8 Wc - 4.5) * 2 - 1``,
  ``align_corners=True``: ``u = (x - 3.5) (Wc - 1) / (8 Wc - 4.5)``. The features LightGlue's
  ``superpoint`` matcher weights were trained on were sampled so (glue-factory's default
  ``legacy_sampling: True``).
* ``rpautrat``: rpautrat's ``sample_descriptors`` (glue-factory's ``superpoint_open``):
  ``g = (x + 0.5) / (8 Wc) * 2 - 1``, ``align_corners=False``: ``u = (x + 0.5) / 8 - 0.5``, the
  exact geometry (cell ``j`` covers pixels ``8 j .. 8 j + 7``, centre ``8 j + 3.5``).
* ``auto`` (default): ``magicleap`` for the ``magicleap`` layout, ``rpautrat`` for ``rpautrat``
  (each checkpoint's own publication).

The same for y with ``H``, ``Hc``. :func:`describe` samples the same way at any keypoints (another
detector's), so on SuperPoint's own keypoints it gives the rows of :func:`detect_and_describe`.

**Checked once against the references' own code** (run on the same random weights, 120 x 161 and
120 x 160 images; not in the tests, since that code is not descbench's to ship):
rpautrat's ``superpoint_pytorch.py`` (defaults) and LightGlue's ``superpoint.py`` (``sampling:
superglue``, thresholds 0.0005 and 0.005): the same keypoints, scores and descriptors, bit for bit;
MagicLeap's ``demo_superpoint.py`` (``nms: greedy``, ``sampling: magicleap``, grid_sample given
``align_corners=True`` as PyTorch < 1.3 did): the same keypoints, scores within 1.2e-8 (its softmax)
and descriptors within 2.3e-8, in an order that differs where its scores' rounding reorders ties.

torch is imported when a function is called (never at import time), as for the other learned modules
(:mod:`descbench.torchrt`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from descbench.errors import ConfigError, DataError

CELL = 8  # pixels per cell of the 1/8 maps (three 2 x 2 max pools)
DESCRIPTOR_DIM = 256
LAYOUTS = ("magicleap", "rpautrat")
NMS_MODES = ("maxpool", "greedy")
SAMPLINGS = ("magicleap", "superglue", "rpautrat")
# (c_in, c_out) of the encoder's eight convolutions, in order; a 2 x 2 max pool follows the 2nd, 4th, 6th
ENCODER = ((1, 64), (64, 64), (64, 64), (64, 64), (64, 128), (128, 128), (128, 128), (128, 128))
HEAD_HIDDEN = 256
DETECTOR_OUT = CELL * CELL + 1  # 64 positions + dustbin
BN_EPS = 0.001  # rpautrat's VGGBlock BatchNorm2d(eps=0.001) (TensorFlow's default)
# The key that identifies each layout (its first parameter).
LAYOUT_KEY = {"magicleap": "conv1a.weight", "rpautrat": "backbone.0.0.conv.weight"}
PUBLISHED = {
    "magicleap": "MagicLeap's superpoint_v1.pth, https://github.com/magicleap/SuperPointPretrainedNetwork/raw/master/"
                 "superpoint_v1.pth (also LightGlue's release v0.1_arxiv; academic / non-commercial licence)",
    "rpautrat": "rpautrat's MIT-licensed superpoint_v6_from_tf.pth, "
                "https://github.com/rpautrat/SuperPoint/raw/master/weights/superpoint_v6_from_tf.pth",
}
DEFAULTS = {
    "nms": "maxpool",
    "nms_radius": 4,
    "detection_threshold": 0.005,
    "remove_borders": 4,
    "max_keypoints": -1,
    "sampling": "auto",
}
WHERE = "superpoint params"


# ---------------------------------------------------------------- the network

_MAGICLEAP_NAMES = ("conv1a", "conv1b", "conv2a", "conv2b", "conv3a", "conv3b", "conv4a", "conv4b")


@functools.cache
def _net_class():
    """The ``nn.Module`` class ``SuperPointNet`` (torch is imported on first use)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        """rpautrat's VGG block: ``conv -> ReLU (optional) -> BatchNorm2d(eps=0.001)``; attribute names
        ``conv`` and ``bn`` are the checkpoint's (``superpoint_pytorch.py:VGGBlock``)."""

        def __init__(self, c_in: int, c_out: int, kernel: int, relu: bool = True):
            super().__init__()
            self.conv = nn.Conv2d(c_in, c_out, kernel, stride=1, padding=(kernel - 1) // 2)
            self.bn = nn.BatchNorm2d(c_out, eps=BN_EPS)
            self.relu = relu

        def forward(self, x):
            x = self.conv(x)
            if self.relu:
                x = F.relu(x)
            return self.bn(x)

    class SuperPointNet(nn.Module):
        """SuperPoint in ``layout`` ``magicleap`` (plain convolutions) or ``rpautrat`` (convolution,
        ReLU, batch norm blocks); module docstring. ``forward(image [B, 1, H, W])`` returns the raw
        heads ``(logits [B, 65, H/8, W/8], descriptors [B, 256, H/8, W/8])`` (floor division; not
        normalised: :func:`dense_outputs` does that)."""

        def __init__(self, layout: str = "magicleap"):
            super().__init__()
            if layout not in LAYOUTS:
                raise ConfigError(f"superpoint layout {layout!r} is not one of {LAYOUTS}")
            self.layout = layout
            if layout == "magicleap":
                for name, (c_in, c_out) in zip(_MAGICLEAP_NAMES, ENCODER):
                    setattr(self, name, nn.Conv2d(c_in, c_out, 3, stride=1, padding=1))
                c4 = ENCODER[-1][1]
                self.convPa = nn.Conv2d(c4, HEAD_HIDDEN, 3, stride=1, padding=1)
                self.convPb = nn.Conv2d(HEAD_HIDDEN, DETECTOR_OUT, 1, stride=1, padding=0)
                self.convDa = nn.Conv2d(c4, HEAD_HIDDEN, 3, stride=1, padding=1)
                self.convDb = nn.Conv2d(HEAD_HIDDEN, DESCRIPTOR_DIM, 1, stride=1, padding=0)
            else:
                stages = []
                for s in range(4):
                    (a_in, a_out), (b_in, b_out) = ENCODER[2 * s], ENCODER[2 * s + 1]
                    layers = [Block(a_in, a_out, 3), Block(b_in, b_out, 3)]
                    if s < 3:
                        layers.append(nn.MaxPool2d(2, 2))
                    stages.append(nn.Sequential(*layers))
                self.backbone = nn.Sequential(*stages)
                c4 = ENCODER[-1][1]
                self.detector = nn.Sequential(Block(c4, HEAD_HIDDEN, 3), Block(HEAD_HIDDEN, DETECTOR_OUT, 1, relu=False))
                self.descriptor = nn.Sequential(Block(c4, HEAD_HIDDEN, 3), Block(HEAD_HIDDEN, DESCRIPTOR_DIM, 1, relu=False))

        def forward(self, x):
            if self.layout == "rpautrat":
                features = self.backbone(x)
                return self.detector(features), self.descriptor(features)
            for i, name in enumerate(_MAGICLEAP_NAMES):
                x = F.relu(getattr(self, name)(x))
                if i in (1, 3, 5):
                    x = F.max_pool2d(x, 2, 2)
            logits = self.convPb(F.relu(self.convPa(x)))
            return logits, self.convDb(F.relu(self.convDa(x)))

    return SuperPointNet


def superpoint_net(layout: str = "magicleap"):
    """A new ``SuperPointNet`` of ``layout`` (PyTorch's default initialisation, train mode as any
    ``nn.Module``; :func:`load_superpoint` loads a checkpoint into one and sets eval mode)."""
    return _net_class()(layout)


# ---------------------------------------------------------------- loading a checkpoint

def _source_name(source) -> str:
    return "the state dict given" if isinstance(source, Mapping) else f"the weights file {source}"


def _read_state(source) -> Mapping:
    """The state dict of ``source`` (a mapping, or a path read with ``torch.load(weights_only=True)``;
    a checkpoint holding it under ``state_dict`` is unwrapped)."""
    if isinstance(source, Mapping):
        state = source
    else:
        from descbench import torchrt

        torch = torchrt.require("torch", what="superpoint")
        path = Path(source)
        if not path.is_file():
            raise DataError(f"superpoint: the weights file {source} does not exist; fix: give the path of "
                            f"{PUBLISHED['magicleap']} or {PUBLISHED['rpautrat']} (descbench never downloads them)")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises several types for a file it cannot read
            raise DataError(f"superpoint: {path} {torchrt.unreadable_weights_reason(path, exc)}; fix: give "
                            f"{PUBLISHED['magicleap']} or {PUBLISHED['rpautrat']}") from exc
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise DataError(f"superpoint: {_source_name(source)} holds a {type(state).__name__}, not a state dict; "
                        "fix: give a SuperPoint checkpoint (a mapping of parameter names to tensors)")
    return state


def detect_layout(state: Mapping, source="the state dict given") -> str:
    """The layout of a SuperPoint state dict: ``magicleap`` when it has ``conv1a.weight``, ``rpautrat``
    when it has ``backbone.0.0.conv.weight``; else a :class:`DataError` naming ``source``, both keys
    expected, the first keys it has, and the fix."""
    found = [layout for layout, key in LAYOUT_KEY.items() if key in state]
    if len(found) == 1:
        return found[0]
    keys = list(state)
    shown = ", ".join(repr(k) for k in keys[:5]) + (", ..." if len(keys) > 5 else "")
    why = "both" if found else "neither"
    raise DataError(f"superpoint: {_source_name(source)} is not a SuperPoint checkpoint of a known layout: it has {why} "
                    f"of the keys '{LAYOUT_KEY['magicleap']}' (layout magicleap) and '{LAYOUT_KEY['rpautrat']}' "
                    f"(layout rpautrat); its {len(keys)} keys begin {shown or '(none)'}; fix: give "
                    f"{PUBLISHED['magicleap']} or {PUBLISHED['rpautrat']}, not another model's weights")


def load_superpoint(path_or_state_dict, layout: str = "auto"):
    """``(model, layout)``: a ``SuperPointNet`` holding the checkpoint, in eval mode, on the CPU.

    ``path_or_state_dict``: a file (``torch.load(..., weights_only=True)``: tensors only) or a state
    dict; a checkpoint whose state dict sits under ``state_dict`` is unwrapped. ``layout``: ``auto``
    (:func:`detect_layout`), ``magicleap`` or ``rpautrat``. The state dict must hold exactly that
    layout's keys and shapes (a BatchNorm's ``num_batches_tracked`` may be missing).

    Errors (:class:`DataError`, naming the file, the keys expected and the fix): a file that does not
    exist or torch cannot read; a state dict of another model (:func:`detect_layout`); a layout given
    that the keys do not fit; a missing, extra or misshapen key. A ``layout`` not in ``auto``,
    ``magicleap``, ``rpautrat``: :class:`ConfigError`."""
    if layout != "auto" and layout not in LAYOUTS:
        raise ConfigError(f"superpoint: layout {layout!r} is not one of ('auto', 'magicleap', 'rpautrat'); fix: "
                          "use 'auto' (recognised from the keys) or name the checkpoint's layout")
    from descbench import torchrt

    state = _read_state(path_or_state_dict)
    found = detect_layout(state, path_or_state_dict)
    if layout != "auto" and found != layout:
        raise DataError(f"superpoint: {_source_name(path_or_state_dict)} is in layout {found} (it has the key "
                        f"'{LAYOUT_KEY[found]}'), not the layout {layout} asked for (key '{LAYOUT_KEY[layout]}'); "
                        f"fix: use layout 'auto' or '{found}', or give {PUBLISHED[layout]}")
    model = superpoint_net(found)
    problem = torchrt.state_dict_problem(model.state_dict(), state)
    if problem is not None:
        raise DataError(f"superpoint: {_source_name(path_or_state_dict)} does not fit the {found} layout: {problem}; "
                        f"fix: give the unmodified {PUBLISHED[found]}")
    model.load_state_dict(state, strict=True)  # torch's BatchNorm fills a missing num_batches_tracked
    return model.eval(), found


# ---------------------------------------------------------------- parameters

def filled_params(params: Mapping | None = None) -> dict:
    """:data:`DEFAULTS` updated with ``params``, checked: an unknown key, a value of the wrong type or
    out of range is a :class:`ConfigError` naming ``superpoint params.<key>`` and the allowed values."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{WHERE}: unknown key(s) {unknown}; allowed: {sorted(DEFAULTS)}")
    p = {**DEFAULTS, **params}
    if p["nms"] not in NMS_MODES:
        raise ConfigError(f"{WHERE}.nms: {p['nms']!r} is not one of {NMS_MODES}")
    if p["sampling"] != "auto" and p["sampling"] not in SAMPLINGS:
        raise ConfigError(f"{WHERE}.sampling: {p['sampling']!r} is not one of {('auto', *SAMPLINGS)}")
    for key, low in (("nms_radius", 0), ("remove_borders", 0), ("max_keypoints", -1)):
        v = p[key]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low or (key == "max_keypoints" and v == 0):
            rule = "-1 (all) or a positive integer" if key == "max_keypoints" else f"an integer >= {low}"
            raise ConfigError(f"{WHERE}.{key}: {v!r} is not {rule}")
    t = p["detection_threshold"]
    if isinstance(t, bool) or not isinstance(t, (int, float, np.floating, np.integer)) or not np.isfinite(t) or not 0 <= t < 1:
        raise ConfigError(f"{WHERE}.detection_threshold: {t!r} is not a number in [0, 1)")
    return p


def resolved_sampling(sampling: str, layout: str) -> str:
    """``sampling`` with ``auto`` replaced by the layout's own (``magicleap`` -> ``magicleap``,
    ``rpautrat`` -> ``rpautrat``)."""
    return layout if sampling == "auto" else sampling


# ---------------------------------------------------------------- dense outputs

def _image_tensor(gray: np.ndarray, model):
    """``gray`` (2-D float in [0, 1], at least 8 x 8) as a float32 ``[1, 1, H, W]`` tensor on the
    model's device; else a DataError saying what it got and the fix."""
    import torch

    g = np.asarray(gray)
    if g.ndim != 2 or not np.issubdtype(g.dtype, np.floating):
        raise DataError(f"superpoint: expected a 2-D float grey image in [0, 1], got {g.dtype} {g.shape}; fix: "
                        "convert with gray.astype(np.float32) / 255")
    if g.shape[0] < CELL or g.shape[1] < CELL:
        raise DataError(f"superpoint: the image is {g.shape[0]} x {g.shape[1]} pixels, smaller than one 8 x 8 cell")
    if g.size and (not np.isfinite(g).all() or g.min() < 0 or g.max() > 1):
        raise DataError(f"superpoint: the grey image must be finite and in [0, 1] (got [{g.min()}, {g.max()}]); "
                        "fix: divide a uint8 image by 255")
    device = next(model.parameters()).device
    return torch.from_numpy(np.ascontiguousarray(g, dtype=np.float32))[None, None].to(device)


def score_map(logits):
    """Full-resolution scores ``[B, 8 Hc, 8 Wc]`` of the detector logits ``[B, 65, Hc, Wc]``:
    softmax over the 65 channels, dustbin (the last) dropped, channel ``8 r + c`` of cell ``(i, j)``
    placed at pixel ``(8 i + r, 8 j + c)``."""
    import torch

    prob = torch.softmax(logits, dim=1)[:, :-1]
    b, _, hc, wc = prob.shape
    # [B, r*8+c, i, j] -> [B, i, r, j, c] -> [B, 8 i + r, 8 j + c]
    return prob.reshape(b, CELL, CELL, hc, wc).permute(0, 3, 1, 4, 2).reshape(b, hc * CELL, wc * CELL)


def dense_outputs(model, gray: np.ndarray):
    """``(scores [8 Hc, 8 Wc], descriptors [256, Hc, Wc])`` (torch, on the model's device) of one grey
    image: :func:`score_map` of the detector head, the descriptor head L2-normalised along channels."""
    import torch

    image = _image_tensor(gray, model)
    with torch.inference_mode():
        logits, desc = model(image)
        return score_map(logits)[0], torch.nn.functional.normalize(desc, p=2, dim=1)[0]


# ---------------------------------------------------------------- keypoints

def maxpool_nms(scores, radius: int):
    """The max-pool NMS of LightGlue (``lightglue/superpoint.py:simple_nms``) and rpautrat
    (``superpoint_pytorch.py:batched_nms``) on ``scores`` ``[H, W]`` (module docstring): the kept
    pixels keep their score, the others become 0. ``radius`` 0 keeps every pixel."""
    import torch
    import torch.nn.functional as F

    if radius == 0:
        return scores.clone()

    def window_max(x):
        return F.max_pool2d(x[None, None], kernel_size=2 * radius + 1, stride=1, padding=radius)[0, 0]

    zero = torch.zeros_like(scores)
    keep = scores == window_max(scores)
    for _ in range(2):
        suppressed = window_max(keep.to(scores.dtype)) > 0
        rest = torch.where(suppressed, zero, scores)
        keep = keep | ((rest == window_max(rest)) & ~suppressed)
    return torch.where(keep, scores, zero)


def greedy_nms(scores: np.ndarray, radius: int, threshold: float) -> np.ndarray:
    """MagicLeap's greedy NMS (``demo_superpoint.py:SuperPointFrontend.nms_fast``) on ``scores``
    ``[H, W]``: the candidates (score >= ``threshold``) by decreasing score, ties by row-major index;
    each is kept unless a kept pixel lies within Chebyshev distance ``radius``. Returns the kept
    pixels' flat (row-major) indices, in that order."""
    h, w = scores.shape
    flat = scores.ravel()
    cand = np.flatnonzero(flat >= threshold)
    order = cand[np.argsort(-flat[cand], kind="stable")]
    free = np.ones((h + 2 * radius, w + 2 * radius), dtype=bool)  # padded: windows never clip
    kept = []
    for idx in order.tolist():
        y, x = divmod(idx, w)
        if free[y + radius, x + radius]:
            kept.append(idx)
            free[y:y + 2 * radius + 1, x:x + 2 * radius + 1] = False
    return np.asarray(kept, dtype=np.int64)


def select_keypoints(scores: np.ndarray, params: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """``(xy float32 [N, 2], score float32 [N])`` of a full-resolution score map ``[H, W]`` (float32
    NumPy) under the filled ``params`` (module docstring): NMS, border removal, threshold, output order
    (decreasing score, ties by row-major index), ``max_keypoints``."""
    import torch

    h, w = scores.shape
    r, b, t = params["nms_radius"], params["remove_borders"], params["detection_threshold"]
    if params["nms"] == "maxpool":
        kept = maxpool_nms(torch.from_numpy(np.ascontiguousarray(scores, dtype=np.float32)), r).numpy()
        idx = np.flatnonzero(kept.ravel() > t)
    else:
        idx = greedy_nms(scores, r, t)
    y, x = np.divmod(idx, w)
    if b:
        inside = (x >= b) & (y >= b) & (x < w - b) & (y < h - b)
        idx, x, y = idx[inside], x[inside], y[inside]
    s = scores.ravel()[idx].astype(np.float32)
    order = np.lexsort((idx, -s.astype(np.float64)))  # decreasing score, then row-major index
    if params["max_keypoints"] > 0:
        order = order[:params["max_keypoints"]]
    xy = np.stack([x[order], y[order]], axis=1).astype(np.float32)
    return xy.reshape(-1, 2), s[order]


# ---------------------------------------------------------------- descriptors

def grid_coordinates(xy, sampling: str, image_hw: tuple[int, int], map_hw: tuple[int, int]):
    """``(grid [N, 2] float32 torch, align_corners)``: the normalised ``grid_sample`` coordinates of
    keypoints ``xy`` (float32 torch ``[N, 2]``, descbench pixels) under ``sampling`` (module
    docstring), for an image of ``image_hw`` pixels whose descriptor map is ``map_hw`` cells."""
    import torch

    (h, w), (hc, wc) = image_hw, map_hw
    if sampling == "magicleap":  # demo_superpoint.py:SuperPointFrontend.run: x / (W / 2) - 1, PyTorch < 1.3 grid_sample
        half = torch.tensor([w / 2.0, h / 2.0], dtype=torch.float32)
        return xy / half - 1.0, True
    if sampling == "superglue":  # lightglue/superpoint.py:sample_descriptors
        span = torch.tensor([wc * CELL - CELL / 2 - 0.5, hc * CELL - CELL / 2 - 0.5], dtype=torch.float32)
        return (xy - CELL / 2 + 0.5) / span * 2 - 1, True
    if sampling == "rpautrat":  # superpoint_pytorch.py:sample_descriptors
        size = torch.tensor([wc * CELL, hc * CELL], dtype=torch.float32)
        return (xy + 0.5) / size * 2 - 1, False
    raise ConfigError(f"{WHERE}.sampling: {sampling!r} is not one of {SAMPLINGS}")


def sample_descriptors(dense, xy: np.ndarray, sampling: str, image_hw: tuple[int, int]) -> np.ndarray:
    """float32 ``[N, 256]``: the normalised dense map ``dense`` ``[256, Hc, Wc]`` sampled bilinearly
    (``grid_sample``, zero padding) at ``xy`` (descbench pixels) with :func:`grid_coordinates`, each
    row L2-normalised (``normalize``, eps 1e-12)."""
    import torch
    import torch.nn.functional as F

    c, hc, wc = dense.shape
    if len(xy) == 0:
        return np.zeros((0, c), dtype=np.float32)
    pts = torch.from_numpy(np.ascontiguousarray(xy, dtype=np.float32))
    grid, align = grid_coordinates(pts, sampling, image_hw, (hc, wc))
    with torch.inference_mode():
        out = F.grid_sample(dense[None], grid.to(dense.device)[None, None], mode="bilinear",
                            padding_mode="zeros", align_corners=align)[0, :, 0]  # [C, N]
        out = F.normalize(out, p=2, dim=0)
    return np.ascontiguousarray(out.t().to("cpu", torch.float32).numpy())


def _layout_of(model) -> str:
    layout = getattr(model, "layout", None)
    if layout not in LAYOUTS:
        raise ConfigError(f"superpoint: {type(model).__name__} is not a SuperPointNet (no layout); fix: build it "
                          "with superpoint_net() or load_superpoint()")
    return layout


def detect_and_describe(gray: np.ndarray, model, params: Mapping | None = None):
    """``(xy float32 [N, 2], scores float32 [N], descriptors float32 [N, 256])`` of a grey image
    (``H x W`` float in [0, 1]) with SuperPoint ``model`` (a ``SuperPointNet``, eval mode) and the
    post-processing ``params`` (:data:`DEFAULTS`, module docstring). ``xy``: descbench pixels
    (centres at integers, x right, y down), in decreasing score order."""
    p = filled_params(params)
    sampling = resolved_sampling(p["sampling"], _layout_of(model))
    scores, dense = dense_outputs(model, gray)
    xy, s = select_keypoints(scores.to("cpu").numpy(), p)
    return xy, s, sample_descriptors(dense, xy, sampling, np.shape(gray))


def describe(gray: np.ndarray, model, xy, params: Mapping | None = None) -> np.ndarray:
    """float32 ``[N, 256]``: SuperPoint's descriptors of the grey image at arbitrary keypoints ``xy``
    (``[N, 2]``, descbench pixels, e.g. another detector's), sampled as :func:`detect_and_describe`
    samples (``params["sampling"]``; the other params are not used). A keypoint that is not finite or
    lies outside the image (``-0.5 <= x <= W - 0.5``, same for y) is a :class:`DataError` naming it."""
    p = filled_params(params)
    sampling = resolved_sampling(p["sampling"], _layout_of(model))
    pts = np.asarray(xy, dtype=np.float32).reshape(-1, 2) if np.size(xy) else np.zeros((0, 2), np.float32)
    h, w = np.shape(gray)[:2]
    bad = ~(np.isfinite(pts).all(axis=1) & (pts[:, 0] >= -0.5) & (pts[:, 0] <= w - 0.5)
            & (pts[:, 1] >= -0.5) & (pts[:, 1] <= h - 0.5))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"superpoint describe: keypoint {i} at ({pts[i, 0]}, {pts[i, 1]}) is not inside the "
                        f"{h} x {w} image (x in [-0.5, {w - 0.5}], y in [-0.5, {h - 0.5}]); fix: give keypoints "
                        "of this image")
    _, dense = dense_outputs(model, gray)
    return sample_descriptors(dense, pts, sampling, (h, w))
