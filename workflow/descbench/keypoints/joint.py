"""Joint detect-and-describe networks: kornia's ``DISK``, ``ALIKED``, ``XFeat``, ``DeDoDe`` and
``KeyNetAffNetHardNet``, and descbench's own SuperPoint (:mod:`descbench.keypoints.superpoint`), as
keypoint sets (``detector: disk | aliked | xfeat | superpoint | dedode | keynet_affnet_hardnet``) and
descriptor families of the same names.

**One network run, two results.** A keypoint job of such a set runs the network once per image
(:meth:`JointRunner.detect`): its keypoints, then descbench's border rule and cap
(:func:`descbench.keypoints.filter_keypoints`), and the network's own descriptors of the kept
keypoints, written next to the scene's keypoint file as a *side file* (:func:`side_path`,
``<scene>.joint.npz``): per image, the kept keypoints' ``source_index`` (their row in the
network's output), ``x``, ``y`` and float32 rows, with the network's identity (:func:`identity`)
and weights label. A derived set (filters, an intersection) copies the rows of the keypoints it
keeps from its source's side file (:func:`subset_side_file`), so its rows stay the network's.
The descriptor family of the same name on such a set (:func:`reads_own_rows`: the set's root
detector is this network with the same identity) reads the rows from the side file instead of
running the network again (:func:`side_rows`, rows found by ``source_index`` and checked equal in
``x``, ``y``). With another identity (other weights, another ``model_name``, ``resize``, ...)
it runs its own network on the set's keypoints, as on any other set: a recompute, not an error
(the descriptor file's runtime record says which: ``rows: keypoint_job`` or ``network``). A side
file that should be there and is not, or rows that no longer match, is a DataError naming the
file and the fix (rerun the keypoint job).

**Identity** = the network's own parameters (:attr:`JointNet.net_keys` minus ``device`` and
``threads``) plus the weights (:func:`weights_key` of each of :attr:`JointNet.weight_keys`:
``sha256:`` of the file, or ``random(seed=N)``).
Detection parameters (thresholds, NMS, keypoint budget) are not part of it: they choose
keypoints, not descriptors. ``device`` and ``threads`` are how, not what: rows read from a side
file are the keypoint job's device's (recorded in the keypoint file's runtime); CPU and CUDA
agree to float32 rounding, not bit for bit.

**Input image** (:func:`network_input`): DISK and ALIKED take the RGB image (``cv2`` colour read,
BGR -> RGB) as float32 ``[1, 3, H, W]`` in ``[0, 1]`` (``/ 255``), as glue-factory feeds them;
XFeat and SuperPoint take the keypoint set's grey image (``grey`` of the set: OpenCV's decode by default) as
``[1, 1, H, W] / 255``, the image every grey detector of descbench sees (XFeatModel averages the
channels it is given: an RGB input would give it the plain channel mean instead).
``resize`` (default null: the image as stored) is glue-factory's ``ImagePreprocessor`` with
``side: long`` (``gluefactory/utils/image.py``): the long side becomes ``resize`` px and the other
``int(resize / aspect)``, by ``kornia.geometry.transform.resize(interpolation='bilinear',
antialias=True)``; its transform ``T = diag(W' / W, H' / H, 1)`` takes stored pixels to the
network's, so keypoints go back by ``x = x' W / W'`` (and ``y``) and other keypoints come in by
``T``.

**The networks** (kornia 0.9; defaults are glue-factory's ``gluefactory/models/extractors/``
``disk_kornia.py`` / ``aliked.py`` ``default_conf`` and kornia's ``XFeat`` constructor):

* ``disk``: ``DISK(desc_dim)`` ``.forward(image, n=max_num_keypoints, window_size=nms_window_size,
  score_threshold=detection_threshold, pad_if_not_divisible)``; defaults ``max_num_keypoints:
  null`` (every maximum), ``nms_window_size: 5``, ``detection_threshold: 0.0``,
  ``pad_if_not_divisible: true`` (zero-pad bottom/right to multiples of 16, maps cropped back),
  ``desc_dim: 128``. Keypoints are integer pixels in raster order; rows are the dense map at
  ``[:, y, x]``, L2-normalised. **On other keypoints**: the dense map (same padding and crop)
  read bilinearly at ``(x, y)`` with pixel centres at integers (the four neighbours clamped to
  the image, weights ``1 - fx, fx`` and ``1 - fy, fy``), then ``F.normalize``: at an integer
  position the weights are exactly 1 and 0, so the row is the map's own ``[:, y, x]``, bit for
  bit the network's row (tested).
* ``aliked``: ``ALIKED(model_name, max_num_keypoints, detection_threshold, nms_radius)`` ``.forward``;
  defaults ``model_name: aliked-n16``, ``max_num_keypoints: -1``, ``detection_threshold: 0.2``,
  ``nms_radius: 2``. **On other keypoints**: its SDDH head describes any keypoints:
  ``desc_head(feature_map, [2 p / (W - 1, H - 1) - 1])``, the normalised coordinates it gives its
  own keypoints. On its own keypoints this gave the network's rows bit for bit on the tested
  images (96 x 128, 101 x 133), but the pixel -> normalised round trip is not exact in general
  (a sampling position may move by float32 rounding); the side file keeps the network's own rows.
* ``xfeat``: ``XFeat(top_k, detection_threshold)`` ``.detectAndCompute``; defaults ``top_k:
  4096``, ``detection_threshold: 0.05`` (kornia's; with ``weights: random`` almost no heatmap value
  exceeds 0.05: use a lower threshold for random-weight runs). kornia resizes the image to
  multiples of 32 (bilinear); keypoints are integer pixels ``i`` of that image reported at
  ``i (W / W', H / H')``; rows are the normalised dense map read bicubically by
  ``InterpolateSparse2d``. **On other keypoints**: the same map and interpolator at ``p (W' / W,
  H' / H)``: bit for bit the network's rows on its own keypoints when ``H`` and ``W`` are multiples
  of 32 (tested), to float32 rounding otherwise (the ratio's round trip).
* ``superpoint``: not a kornia module (kornia 0.9 has none): descbench's ``SuperPointNet``
  (:func:`~descbench.keypoints.superpoint.superpoint_net`) through a :class:`Backend`; the
  network input as a 2-D grey image in [0, 1] (clipped to it after ``resize``) to
  :func:`~descbench.keypoints.superpoint.detect_and_describe` with the post-processing params
  ``nms``, ``nms_radius``, ``detection_threshold``, ``remove_borders``, ``max_keypoints`` (the
  network's own top-k, before descbench's border rule and the set's ``max_keypoints``) and
  ``sampling``, whose defaults are :data:`~descbench.keypoints.superpoint.DEFAULTS` (maxpool NMS of
  radius 4, threshold 0.005, borders 4, all keypoints, each layout's own sampling). The network is
  defined by ``layout`` (``auto``: recognised from the file's keys; for ``weights: random``,
  ``auto`` builds ``magicleap``) and ``sampling`` (its rows), with the common keys. Keypoints are
  integer pixels in decreasing score order; ``response`` is the softmax score. **On other
  keypoints**: :func:`~descbench.keypoints.superpoint.describe`, the same dense map and sampling:
  on its own keypoints the network's rows bit for bit (tested). Needs torch only (kornia for
  ``resize``). No padding: the 1/8 maps floor (the module's docstring).

* ``dedode``: ``DeDoDe(detector_model, descriptor_model, amp_dtype)`` ``.forward(image, n,
  pad_if_not_divisible)`` on the RGB image (it applies ImageNet normalisation itself); defaults
  kornia's: ``detector_model: L`` (its only kind; ``L-upright``, ``L-C4``, ``L-SO2``, ``L-C4-v2`` are
  weights files of it), ``n: 10000`` (null: every pixel), ``pad_if_not_divisible: true`` (pad to
  multiples of 14 with the ImageNet mean colour), ``amp_dtype: float16`` (CUDA autocast only: on
  the CPU every part runs in float32); ``descriptor_model: B`` (kornia's default ``G`` builds
  DINOv2 ViT-L/14, whose weights its constructor downloads: refused with a ConfigError, not
  supported). Two weights keys: ``weights`` (the detector's state dict, e.g.
  ``dedode_detector_L.pth``) and ``descriptor_weights`` (e.g. ``dedode_descriptor_B.pth``); null is
  ``random`` when ``weights`` is. kornia reports pixel ``i`` at ``i + 0.5``; descbench's keypoint is
  kornia's minus 0.5 (float32; within 2e-6 of the integer ``i``, its normalised grid's rounding);
  ``response`` is its score (the softmax score map after its coverage reweighting); rows are
  kornia's, 256 wide and **not normalised**. **On other keypoints**: kornia's ``describe(image,
  keypoints=2 (p + 0.5) / (W, H) - 1)`` (bilinear ``grid_sample``, ``align_corners=False``): on its
  own keypoints equal to its rows to float32 rounding (the round trip through pixels).
* ``keynet_affnet_hardnet``: kornia's ``KeyNetAffNetHardNet(num_features, upright, scale_laf,
  score_threshold)`` (defaults its constructor's: 8000, false, 1.0, 0.0), built as that constructor
  builds it but with ``pretrained=False`` (the constructor downloads): ``LocalFeature(KeyNetDetector(
  num_features, ori_module=PassLAF() if upright else LAFOrienter(angle_detector=OriNet),
  aff_module=LAFAffNetShapeEstimator(preserve_orientation=False), score_threshold),
  LAFDescriptor(HardNet, patch_size=32, grayscale_descriptor=True), scale_laf)``, on the set's grey
  image ``[1, 1, H, W] / 255`` (as the ``keynet`` detector); weights per sub-network: ``weights``
  (KeyNet), ``orinet_weights`` (null exactly when ``upright``), ``affnet_weights``,
  ``hardnet_weights``, each a file (the published checkpoints hold the state dict under
  ``state_dict``: :func:`descbench.torchrt.load_weights`) or ``random``; null is ``random`` when
  ``weights`` is, else a ConfigError. kornia's empty slots (``laf_is_filled`` false) are dropped.
  Keypoints are its LAFs (scaled by ``scale_laf``, as ``LocalFeature`` returns and describes them)
  by the ``keynet`` detector's rule (:func:`descbench.keypoints.keynet.keypoints_from_lafs`:
  centre, ``size`` = sum of the two column norms, OpenCV ``angle`` of the x axis), ``response`` its
  response; rows its HardNet descriptors (128, unit L2). With ``resize`` the whole frame goes back
  by ``T^-1``. **On other keypoints**: HardNet (kornia's ``LAFDescriptor``) on the isotropic LAF of
  each keypoint, ``laf_from_center_scale_ori(xy, size / 2, -angle)`` (angle -1 as 0; then ``T``),
  the inverse of that rule for an isotropic frame; AffNet's anisotropic shape is not a keypoint
  field, so on the network's own keypoints this is not its row (the side file keeps those).

Every keypoint (DISK, ALIKED, XFeat, DeDoDe): ``size = default_size_px`` (none of these networks gives a scale; 12 px as for
``precomputed`` keypoints), ``angle = -1`` (unset), ``response`` = the network's score (DISK: the
heatmap logit; ALIKED: the score map read bilinearly; XFeat: heatmap x reliability; SuperPoint:
the softmax score at the pixel), ``octave = 0``, ``class_id = -1``.

**Weights** are never downloaded: ``weights`` is a file or ``random``. ``random``: the module
built under ``torch.manual_seed(random_seed(weights_seed, <net>))`` (its constructor's own
initialisation, ALIKED's SDDH ``agg_weights`` included; SuperPoint: ``superpoint_net(layout)``), in
evaluation mode (BatchNorm with its initial running statistics); label ``random(seed=N, key=<net>)``.
A file: ``torch.load(..., weights_only=True)``, in the layouts the published checkpoints use
(:attr:`JointNet.layouts`; SuperPoint: MagicLeap's ``superpoint_v1.pth`` or rpautrat's
``superpoint_v6_from_tf.pth``, read by :func:`~descbench.keypoints.superpoint.load_superpoint`,
whose DataError for another model's file or a layout that does not fit becomes the ConfigError);
checked at config time (:func:`check_params`, the workflow's DAG build) against the module's keys
and shapes: another network's file, another ``model_name``'s or an unrecognised layout is a
ConfigError naming the key, the file, what differs and the fix.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from descbench.errors import ConfigError, DataError
from descbench.fileops import file_sha256
from descbench.jobfacts import Model
from descbench.keypoints import ImageKeypoints
from descbench.keypoints import superpoint as SP

SIDE_KIND = "joint.npz"
SIDE_VERSION = 1


@dataclass(frozen=True)
class Backend:
    """How a joint network that is not a kornia module is built, loaded and run (kornia's are
    :func:`load_module`'s and :class:`JointRunner`'s own code). ``construct(params)``: the module
    with its constructor's initialisation (called under the ``random`` seed); ``load(params, path,
    where)``: the module holding a weights file, ConfigError naming ``<where>.weights`` otherwise;
    ``detect(module, x, params)``: ``(xy, scores, rows)`` of the network input ``x`` (torch ``[1, C,
    H, W]``, :func:`network_input`, resized); ``describe(module, x, xy, params)``: rows at ``xy``
    (float32 torch ``[N, 2]``, the network's pixels); ``network``: its name in the runtime record."""

    construct: Callable
    load: Callable
    detect: Callable
    describe: Callable
    network: str


@dataclass(frozen=True)
class JointNet:
    """A joint network: its kornia class (or :class:`Backend`), its input, its parameters and its published weights."""

    name: str
    kornia_class: str
    image: str  # "rgb" or "grey"
    net_keys: tuple[str, ...]  # params that define the network and its descriptors
    detect_keys: tuple[str, ...]  # params that only choose keypoints
    published: str  # where the published weights come from (never downloaded)
    layouts: str  # the checkpoint layouts read, in words (errors)
    dim_key: str | None = None  # the param giving the descriptor dimension (else ``dim``)
    dim: int = 0
    # the memory/runtime model of a job that runs it on every image (keypoint job, and descriptor job
    # on other keypoints): peak RSS and time of one CPU forward (random weights, 1 thread, this
    # 2-core shared machine) at 0.12 MP (303 x 384) and 0.79 MP (768 x 1024), slopes rounded up:
    # DISK 2,062 MB and 8.5 s at 0.79 MP, ALIKED 1,625 MB and 3.3 s, XFeat 424 MB and 0.3 s;
    # KeyNetAffNetHardNet 19 s CPU at 0.26 MP (512 x 512, 2,840 keypoints: its per-keypoint networks);
    # DeDoDe L + B 8.5 s CPU at 0.26 MP (n 10000)
    model: Model = Model(base_mb=600)
    backend: Backend | None = None  # a network that is not a kornia module (descbench's SuperPoint)
    requires: tuple[str, ...] = ("torch", "kornia")  # modules it needs (kornia too whenever ``resize`` is set)
    # the params naming weights files (``random`` or a path); the first is ``weights``
    weight_keys: tuple[str, ...] = ("weights",)


COMMON_KEYS = ("weights", "weights_seed", "device", "threads", "resize")


# ----------------------------------------------------------------------------- superpoint (descbench's own network)


def _superpoint_layout(params: dict) -> str:
    """The layout ``weights: random`` builds: ``layout``, with ``auto`` meaning ``magicleap``."""
    return "magicleap" if params["layout"] == "auto" else params["layout"]


def _superpoint_construct(params: dict):
    return SP.superpoint_net(_superpoint_layout(params))


def _superpoint_load(params: dict, path: Path, where: str):
    """:func:`descbench.keypoints.superpoint.load_superpoint` (either layout, ``layout`` checked);
    its DataError (another model's file, a layout not recognised or not the one asked for) as a
    ConfigError naming ``<where>.weights`` (its message names the file and the fix)."""
    try:
        return SP.load_superpoint(path, params["layout"])[0]
    except DataError as exc:
        raise ConfigError(f"{where}.weights (with {where}.layout: {params['layout']}): {exc}") from exc


def _superpoint_post(params: dict) -> dict:
    """The post-processing params :func:`~descbench.keypoints.superpoint.detect_and_describe` reads
    (the keys of :data:`~descbench.keypoints.superpoint.DEFAULTS` the params hold; a descriptor's: ``sampling``)."""
    return {k: params[k] for k in SP.DEFAULTS if k in params}


def _superpoint_grey(x) -> np.ndarray:
    """The network input ``[1, 1, H, W]`` as the 2-D float32 grey image SuperPoint reads, clipped to
    [0, 1] (a no-op on the stored image ``/ 255``; after ``resize``, the antialias filter's float32
    rounding may step past 1)."""
    return np.clip(x[0, 0].cpu().numpy(), 0.0, 1.0)


def _superpoint_detect(module, x, params: dict):
    return SP.detect_and_describe(_superpoint_grey(x), module, _superpoint_post(params))


def _superpoint_describe(module, x, xy, params: dict):
    return SP.describe(_superpoint_grey(x), module, xy.cpu().numpy(), _superpoint_post(params))


# peak RSS and CPU time of one forward and post-processing (random weights, 1 thread, this 2-core
# shared machine): 325 MB and 0.24 s at 0.12 MP (303 x 384), 819 MB and 2.2 s at 0.79 MP (768 x 1024,
# 12k keypoints), both layouts; slopes rounded up
SUPERPOINT_MODEL = Model(base_mb=600, mb_per_mp=800, mb_per_kkp=4.0, base_s=5, s_per_mp=3.5, s_per_kkp=0.1)
SUPERPOINT = Backend(_superpoint_construct, _superpoint_load, _superpoint_detect, _superpoint_describe,
                     "descbench.keypoints.superpoint.SuperPointNet")

NETS = {n.name: n for n in (
    JointNet("disk", "DISK", "rgb", (*COMMON_KEYS, "desc_dim", "pad_if_not_divisible"),
             ("max_num_keypoints", "nms_window_size", "detection_threshold", "default_size_px"),
             "kornia.feature.disk.urls: 'depth' https://raw.githubusercontent.com/cvlab-epfl/disk/master/depth-save.pth, "
             "'epipolar' https://raw.githubusercontent.com/cvlab-epfl/disk/master/epipolar-save.pth (or kornia's Hugging Face mirror)",
             "DISK's published checkpoint (the state dict under 'extractor') or DISK's own state dict", dim_key="desc_dim",
             model=Model(base_mb=600, mb_per_mp=2500, mb_per_kkp=4.0, base_s=5, s_per_mp=15, s_per_kkp=0.1)),
    JointNet("aliked", "ALIKED", "rgb", (*COMMON_KEYS, "model_name"),
             ("max_num_keypoints", "detection_threshold", "nms_radius", "default_size_px"),
             "https://github.com/Shiaoming/ALIKED/raw/main/models/<model_name>.pth (or kornia's Hugging Face mirror "
             "https://huggingface.co/kornia/aliked/resolve/main/<model_name>.pth)",
             "ALIKED's published <model_name>.pth (its state dict; kornia's constant 'dkd.hw_grid' may be absent)",
             model=Model(base_mb=600, mb_per_mp=1800, mb_per_kkp=4.0, base_s=5, s_per_mp=8, s_per_kkp=0.1)),
    JointNet("xfeat", "XFeat", "grey", COMMON_KEYS, ("top_k", "detection_threshold", "default_size_px"),
             "kornia.feature.XFeat.weights_url: https://github.com/verlab/accelerated_features/raw/main/weights/xfeat.pt",
             "XFeat's published xfeat.pt (XFeatModel's state dict) or kornia XFeat's (keys under 'net.')", dim=64,
             model=Model(base_mb=600, mb_per_mp=300, mb_per_kkp=4.0, base_s=5, s_per_mp=1, s_per_kkp=0.1)),
    JointNet("superpoint", "SuperPoint", "grey", (*COMMON_KEYS, "layout", "sampling"),
             ("nms", "nms_radius", "detection_threshold", "remove_borders", "max_keypoints", "default_size_px"),
             f"{SP.PUBLISHED['magicleap']}; {SP.PUBLISHED['rpautrat']}",
             "a SuperPoint checkpoint in layout magicleap or rpautrat (descbench.keypoints.superpoint)", dim=SP.DESCRIPTOR_DIM,
             model=SUPERPOINT_MODEL, backend=SUPERPOINT, requires=("torch",)),
    JointNet("dedode", "DeDoDe", "rgb",
             (*COMMON_KEYS, "descriptor_weights", "detector_model", "descriptor_model", "amp_dtype", "pad_if_not_divisible"),
             ("n", "default_size_px"),
             "kornia.feature.dedode.urls: weights (detector) 'L-upright' dedode_detector_L.pth, 'L-C4' "
             "dedode_detector_C4.pth, 'L-SO2' dedode_detector_SO2.pth, 'L-C4-v2' dedode_detector_L_v2.pth; "
             "descriptor_weights 'B-upright' dedode_descriptor_B.pth, 'B-C4' B_C4_Perm_descriptor_setting_C.pth, 'B-SO2' "
             "B_SO2_Spread_descriptor_setting_C.pth (github.com/Parskatt/DeDoDe and georg-bn/rotation-steerers releases, "
             "or kornia's Hugging Face mirror https://huggingface.co/kornia/dedode)",
             "DeDoDe's published detector / descriptor state dicts (module.detector's and module.descriptor's)", dim=256,
             model=Model(base_mb=900, mb_per_mp=3000, mb_per_kkp=4.0, base_s=5, s_per_mp=40, s_per_kkp=0.1),
             weight_keys=("weights", "descriptor_weights")),
    JointNet("keynet_affnet_hardnet", "KeyNetAffNetHardNet", "grey",
             (*COMMON_KEYS, "orinet_weights", "affnet_weights", "hardnet_weights", "upright", "scale_laf"),
             ("num_features", "score_threshold"),
             "weights: KeyNet (kornia.feature.keynet.KeyNet_URL); orinet_weights: OriNet (kornia.feature.orientation.urls"
             "['orinet']); affnet_weights: AffNet (kornia.feature.affine_shape.urls['affnet']); hardnet_weights: HardNet "
             "(kornia.feature.hardnet.urls['liberty_aug'])",
             "each network's published checkpoint (its state dict under 'state_dict') or its own state dict", dim=128,
             model=Model(base_mb=600, mb_per_mp=600, mb_per_kkp=4.0, base_s=5, s_per_mp=20, s_per_kkp=6),
             weight_keys=("weights", "orinet_weights", "affnet_weights", "hardnet_weights")),
)}
ALIKED_DIMS = {"aliked-t16": 64, "aliked-n16": 128, "aliked-n16rot": 128, "aliked-n32": 128}


def definition_name(net: str) -> str:
    """The net's params definition in ``workflow/schemas/config.schema.yaml``."""
    return f"{net}_detector_params"


def descriptor_params_schema(net: str) -> dict:
    """The descriptor family's params: the :attr:`JointNet.net_keys` of the detector's definition
    in config.schema.yaml (one definition of each parameter and its default)."""
    from descbench.params import config_schema

    d = config_schema()["definitions"][definition_name(net)]
    return {"type": "object", "additionalProperties": False, "required": ["weights"],
            "properties": {k: d["properties"][k] for k in NETS[net].net_keys}}


def dim_of(net: str, params: dict) -> int:
    """Columns of the net's rows for (filled) params."""
    spec = NETS[net]
    if net == "aliked":
        return ALIKED_DIMS[params["model_name"]]
    return int(params[spec.dim_key]) if spec.dim_key else spec.dim


def where_of(net: str) -> str:
    return f"'{net}' params"


# ----------------------------------------------------------------------------- building and weights


def _construct(kf, net: str, params: dict):
    """The kornia module for the params (detection params as given; descbench passes them again at each
    call); a :class:`Backend`'s ``construct`` for a network that is not kornia's."""
    if NETS[net].backend is not None:
        return NETS[net].backend.construct(params)
    if net == "disk":
        return kf.DISK(desc_dim=int(params["desc_dim"]))
    if net == "aliked":
        return kf.ALIKED(model_name=params["model_name"], max_num_keypoints=int(params.get("max_num_keypoints", -1)),
                         detection_threshold=float(params.get("detection_threshold", 0.2)),
                         nms_radius=int(params.get("nms_radius", 2)))
    return kf.XFeat(top_k=int(params.get("top_k", 4096)), detection_threshold=float(params.get("detection_threshold", 0.05)))


def _target(net: str, module):
    """The submodule a checkpoint's state dict is loaded into (XFeat: its ``XFeatModel``)."""
    return module.net if net == "xfeat" else module


def _layout(net: str, state, expected: dict, path: Path, where: str):
    """A checkpoint's state dict in the module's key names (:attr:`JointNet.layouts`)."""
    from collections.abc import Mapping

    if not isinstance(state, Mapping):
        raise ConfigError(f"{where}.weights: {path} holds a {type(state).__name__}, not a state dict; fix: give "
                          f"{NETS[net].layouts} ({NETS[net].published})")
    if net == "disk" and "extractor" in state and isinstance(state["extractor"], Mapping):
        state = state["extractor"]  # cvlab-epfl/disk's checkpoint, as kornia's from_pretrained reads it
    elif "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    state = dict(state)
    if net == "xfeat" and state and all(k.startswith("net.") for k in state):
        state = {k[4:]: v for k, v in state.items()}  # kornia XFeat's own state dict
    if net == "aliked":
        # DKD's hw_grid is a constant of nms_radius (a detection param), not a learned weight
        state = {k: v for k, v in state.items() if not k.startswith("dkd.")}
        state.update({k: v for k, v in expected.items() if k.startswith("dkd.")})
    return state


def _aliked_fits(kf, state: dict) -> list[str]:
    """The ALIKED ``model_name`` values whose module has the keys and shapes of ``state``."""
    from descbench.torchrt import state_dict_problem

    out = []
    for name in ALIKED_DIMS:
        expected = {k: v for k, v in kf.ALIKED(model_name=name).state_dict().items() if not k.startswith("dkd.")}
        if state_dict_problem(expected, {k: v for k, v in state.items() if not k.startswith("dkd.")}) is None:
            out.append(name)
    return out


def load_module(net: str, params: dict, where: str):
    """``(module, label)``: the kornia module in evaluation mode on the CPU with its weights
    (module docstring: ``random`` or a file in a known layout); ConfigError for a file that is
    missing, unreadable, of another network or another ``model_name``."""
    from descbench import torchrt

    mods = _modules(net, params)
    torch, kornia = mods["torch"], mods.get("kornia")
    spec = NETS[net]
    if len(spec.weight_keys) > 1:
        return _load_parts(torch, kornia.feature, net, params, where)
    weights = params["weights"]
    if weights == torchrt.RANDOM_WEIGHTS:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torchrt.random_seed(params["weights_seed"], net))
            module = _construct(getattr(kornia, "feature", None), net, params)
        return module.eval(), torchrt.random_label(params["weights_seed"], net)
    torchrt.check_weights_file(f"{where}.weights", weights, spec.published)
    path = Path(weights)
    if spec.backend is not None:
        return spec.backend.load(params, path, where).eval(), f"sha256:{file_sha256(path)}"
    module = _construct(kornia.feature, net, params)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a file it cannot read
        raise ConfigError(f"{where}.weights: {path} {torchrt.unreadable_weights_reason(path, exc)}; fix: give "
                          f"{spec.layouts} ({spec.published})") from exc
    target = _target(net, module)
    expected = target.state_dict()
    state = _layout(net, state, expected, path, where)
    problem = torchrt.state_dict_problem(expected, state)
    if problem is not None:
        hint = ""
        if net == "aliked":
            fits = _aliked_fits(kornia.feature, state)
            hint = f"; it fits model_name {' or '.join(repr(f) for f in fits)}: set model_name to it" if fits else ""
        raise ConfigError(f"{where}.weights: {path} is not a {spec.kornia_class} checkpoint of these params "
                          f"({problem}){hint}; fix: give {spec.layouts} ({spec.published}), or weights: random")
    target.load_state_dict(state, strict=True)
    return module.eval(), f"sha256:{file_sha256(path)}"


def required_modules(net: str, params: dict) -> tuple[str, ...]:
    """The modules the network of these params needs: :attr:`JointNet.requires`, and kornia for ``resize``."""
    need = NETS[net].requires
    return need if "kornia" in need or not params.get("resize") else (*need, "kornia")


def _modules(net: str, params: dict) -> dict:
    """:func:`required_modules`, imported (ConfigError naming the network when one is missing)."""
    from descbench import torchrt

    need = required_modules(net, params)
    mods = torchrt.require(*need, what=f"'{net}'")
    return dict(zip(need, mods if len(need) > 1 else (mods,)))
def _part_weights(net: str, params: dict, where: str) -> dict:
    """A network's weights per :attr:`JointNet.weight_keys` (DeDoDe: detector and descriptor;
    KeyNetAffNetHardNet: KeyNet, OriNet, AffNet, HardNet): a file or ``random``; null is ``random``
    when ``weights`` is (else a ConfigError: a network without weights); KeyNetAffNetHardNet's
    ``orinet_weights`` is null exactly when ``upright`` (kornia's ``PassLAF``: no OriNet); DeDoDe's
    ``descriptor_model: G`` is refused (module docstring)."""
    if net == "dedode" and params["descriptor_model"] == "G":
        raise ConfigError(f"{where}.descriptor_model: 'G' builds DINOv2 ViT-L/14, whose weights kornia's DeDoDe "
                          "constructor downloads (kornia.feature.dedode.encoder.VGG_DINOv2: urls['dinov2_vitl14']); "
                          "descbench never downloads and does not support G; fix: descriptor_model: B")
    out = {}
    for key in NETS[net].weight_keys:
        value = params.get(key)
        if key == "orinet_weights" and params["upright"]:
            if value is not None:
                raise ConfigError(f"{where}.orinet_weights: {value!r}, but upright: true runs no OriNet (kornia's PassLAF); "
                                  "fix: remove orinet_weights, or set upright: false")
            continue
        if value is None:
            if params["weights"] != "random":
                raise ConfigError(f"{where}.{key}: not given, but weights is a file; fix: give {key} (the published "
                                  f"checkpoint: {NETS[net].published}) or 'random'")
            value = "random"
        out[key] = value
    return out


def _build_parts(torch, kf, net: str, params: dict):
    """``(module, {weights key: sub-network})``, built as kornia builds it, without its downloads:

    * DeDoDe: ``DeDoDe(detector_model, descriptor_model, amp_dtype)`` (its constructor downloads
      nothing for ``B``); ``weights`` -> ``.detector``, ``descriptor_weights`` -> ``.descriptor``.
    * KeyNetAffNetHardNet as kornia's constructor builds it (``LocalFeature(KeyNetDetector(
      num_features, ori_module=PassLAF() if upright else LAFOrienter(angle_detector=OriNet),
      aff_module=LAFAffNetShapeEstimator(preserve_orientation=False), score_threshold),
      LAFDescriptor(HardNet, patch_size=32, grayscale_descriptor=True), scale_laf)``, the
      sub-networks constructed in kornia's order) with ``pretrained=False``."""
    if net == "dedode":
        module = kf.DeDoDe(detector_model=params["detector_model"], descriptor_model=params["descriptor_model"],
                           amp_dtype=getattr(torch, params["amp_dtype"]))
        return module, {"weights": module.detector, "descriptor_weights": module.descriptor}
    ori = kf.PassLAF() if params["upright"] else kf.LAFOrienter(angle_detector=kf.OriNet(False))
    aff = kf.LAFAffNetShapeEstimator(False, preserve_orientation=False)
    det = kf.KeyNetDetector(False, num_features=int(params.get("num_features", 8000)), ori_module=ori,
                            aff_module=aff, score_threshold=float(params.get("score_threshold", 0.0)))
    module = kf.LocalFeature(det, kf.LAFDescriptor(kf.HardNet(False), patch_size=32, grayscale_descriptor=True),
                             float(params["scale_laf"]))
    parts = {"weights": det.model, "affnet_weights": aff, "hardnet_weights": module.descriptor.descriptor}
    if not params["upright"]:
        parts["orinet_weights"] = ori.angle_detector
    return module, parts


def _load_parts(torch, kf, net: str, params: dict, where: str):
    """A network of several weights keys (:func:`_build_parts`) built under
    ``torch.manual_seed(random_seed(weights_seed, net))``; each sub-network given a file then loads
    it (:func:`descbench.torchrt.load_weights`: the state dict, or the one under ``state_dict``).
    The label: the one label of all, else ``key=label; ...``."""
    from descbench import torchrt

    weights = _part_weights(net, params, where)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(torchrt.random_seed(params["weights_seed"], net))
        module, parts = _build_parts(torch, kf, net, params)
    labels = {}
    for key, value in weights.items():
        if value == torchrt.RANDOM_WEIGHTS:
            labels[key] = torchrt.random_label(params["weights_seed"], net)
        else:
            torchrt.check_weights_file(f"{where}.{key}", value, NETS[net].published)
            labels[key] = torchrt.load_weights(parts[key], value, params["weights_seed"],
                                               f"{where}.{key} ({type(parts[key]).__name__})", NETS[net].published)
    label = labels["weights"] if set(labels.values()) == {labels["weights"]} else \
        "; ".join(f"{k}={v}" for k, v in labels.items())
    return module.eval(), label


def check_params(net: str, params: dict, where: str) -> dict:
    """Config time (DAG build): torch and kornia importable, the weights ``random`` or a file that
    loads into the network of these params (:func:`load_module`, on the CPU), ``resize`` sensible."""
    from descbench import torchrt

    torchrt.check_installed(*required_modules(net, params), what=f"{where} ('{net}')")
    if len(NETS[net].weight_keys) > 1:
        if any(v != torchrt.RANDOM_WEIGHTS for v in _part_weights(net, params, where).values()):
            load_module(net, params, where)
        return params
    torchrt.check_weights_file(f"{where}.weights", params["weights"], NETS[net].published)
    if params["weights"] != torchrt.RANDOM_WEIGHTS:
        load_module(net, params, where)
    return params


def identity(net: str, params: dict) -> dict:
    """What makes two runs' descriptors the same network's (module docstring): the network, its
    weights (:func:`weights_key`) and its own params."""
    keys = NETS[net].weight_keys
    return {"network": net, **{k: weights_key(params, k) for k in keys},
            **{k: params[k] for k in NETS[net].net_keys if k not in (*keys, "weights_seed", "device", "threads")}}


# ----------------------------------------------------------------------------- running


def network_input(net: str, image_path: Path, gray: np.ndarray | None):
    """float32 ``[1, C, H, W]`` numpy image in [0, 1] the network reads (module docstring)."""
    if NETS[net].image == "grey":
        if gray is None:
            raise ValueError(f"{net} needs the grey image")
        return (gray.astype(np.float32) / np.float32(255.0))[None, None]
    import cv2

    from descbench.datasets.layout import read_image

    rgb = cv2.cvtColor(read_image(image_path, color=True), cv2.COLOR_BGR2RGB)
    return (rgb.astype(np.float32) / np.float32(255.0)).transpose(2, 0, 1)[None].copy()


def resized_shape(h: int, w: int, resize: int | None) -> tuple[int, int]:
    """``(H', W')`` the network runs at: the stored size, or the long side ``resize`` and the other
    ``int(resize / aspect)`` (glue-factory's ``ImagePreprocessor.get_new_image_size``, ``side: long``)."""
    if not resize:
        return h, w
    aspect = w / h
    return (resize, max(1, int(resize * aspect))) if aspect < 1.0 else (max(1, int(resize / aspect)), resize)


class JointRunner:
    """One network built from filled params, on its device: :meth:`detect` and :meth:`describe`."""

    def __init__(self, net: str, params: dict):
        from descbench import torchrt

        self.net, self.params = net, params
        self.where = where_of(net)
        mods = _modules(net, params)
        self.torch, self.kornia = mods["torch"], mods.get("kornia")
        self.device = torchrt.resolve_device(params["device"], self.where)
        self.runtime = torchrt.configure(self.device, params["threads"])
        module, self.label = load_module(net, params, self.where)
        self.module = module.to(self.device)
        self.identity = identity(net, params)

    def provenance(self) -> dict:
        spec = NETS[self.net]
        network = spec.backend.network if spec.backend is not None else f"kornia.feature.{spec.kornia_class}"
        return {**self.runtime, "network": network, "weights": self.label,
                "weights_file": None if self.params["weights"] == "random" else str(self.params["weights"]),
                "identity": self.identity}

    def _image(self, image_path: Path, gray):
        torch = self.torch
        arr = network_input(self.net, image_path, gray)
        h, w = arr.shape[2:]
        x = torch.from_numpy(arr).to(self.device)
        hr, wr = resized_shape(h, w, self.params["resize"])
        if (hr, wr) != (h, w):  # glue-factory's ImagePreprocessor: kornia's resize, bilinear, antialias
            x = self.kornia.geometry.transform.resize(x, (hr, wr), interpolation="bilinear", antialias=True,
                                                      align_corners=None)
        return x, (h, w), (hr, wr)

    @staticmethod
    def _scale(hw, hwr) -> np.ndarray:
        """glue-factory's ``scales`` ``(W' / W, H' / H)``, its transform ``T = diag(scales, 1)``."""
        return np.array([hwr[1] / hw[1], hwr[0] / hw[0]])

    def _to_stored(self, xy: np.ndarray, hw, hwr) -> np.ndarray:
        """Network pixels -> the stored image's: ``T^-1`` (float64, rounded once to float32)."""
        return xy if hw == hwr else (xy.astype(np.float64) / self._scale(hw, hwr)).astype(np.float32)

    def _to_network(self, xy: np.ndarray, hw, hwr) -> np.ndarray:
        """The stored image's pixels -> the network's: ``T``."""
        return xy.astype(np.float32) if hw == hwr else (xy.astype(np.float64) * self._scale(hw, hwr)).astype(np.float32)

    def _lafs(self, kps: ImageKeypoints, hw, hwr):
        """``[1, N, 2, 3]`` LAFs of keypoints in the network's pixels: kornia's ``laf_from_center_scale_ori``
        with centre ``(x, y)``, scale ``size / 2`` and ``ori = -angle`` (``angle`` -1, unset, as 0): the
        inverse of :func:`descbench.keypoints.keynet.keypoints_from_lafs` for isotropic frames; then
        ``T`` on both rows."""
        torch = self.torch
        xy = torch.from_numpy(np.stack([kps.x, kps.y], axis=1).astype(np.float32))[None]
        scale = torch.from_numpy((kps.size.astype(np.float32) / np.float32(2.0)).reshape(1, -1, 1, 1))
        ori = torch.from_numpy(np.where(kps.angle == -1, 0.0, -kps.angle.astype(np.float32)).astype(np.float32).reshape(1, -1, 1))
        lafs = self.kornia.feature.laf_from_center_scale_ori(xy, scale, ori)
        if hw != hwr:
            lafs = lafs * torch.from_numpy(self._scale(hw, hwr).astype(np.float32)).view(1, 1, 2, 1)
        return lafs.to(self.device)

    def _pad_error(self, hw) -> DataError:
        return DataError(f"{self.where}.pad_if_not_divisible: false, but the network input is {hw[0]} x {hw[1]} px, not "
                         "multiples of 16 (DISK's U-Net needs them); fix: pad_if_not_divisible: true (glue-factory's "
                         "default) or a resize that gives multiples of 16")

    def detect(self, image_path: Path, gray: np.ndarray | None = None) -> tuple[ImageKeypoints, np.ndarray]:
        """The network's keypoints (its order; ``source_index`` = row) and their float32 rows."""
        torch, p = self.torch, self.params
        x, hw, hwr = self._image(image_path, gray)
        backend = NETS[self.net].backend
        with torch.inference_mode():
            if backend is not None:
                xy, score, rows = backend.detect(self.module, x, p)
            elif self.net == "disk":
                if not p["pad_if_not_divisible"] and (hwr[0] % 16 or hwr[1] % 16):
                    raise self._pad_error(hwr)
                f = self.module(x, n=p["max_num_keypoints"], window_size=p["nms_window_size"],
                                score_threshold=p["detection_threshold"], pad_if_not_divisible=p["pad_if_not_divisible"])[0]
                xy, score, rows = f.keypoints, f.detection_scores, f.descriptors
            elif self.net == "aliked":
                f = self.module(x)[0]
                xy, score, rows = f.keypoints, f.keypoint_scores, f.descriptors
            elif self.net == "dedode":  # kornia reports pixel i at i + 0.5: descbench's frame is i
                xy, score, rows = self.module(x, n=p["n"], pad_if_not_divisible=p["pad_if_not_divisible"])
                xy, score, rows = xy[0] - 0.5, score[0], rows[0]
            elif self.net == "keynet_affnet_hardnet":
                lafs, score, rows = self.module(x)
                filled = self.kornia.feature.laf_is_filled(lafs)[0]  # kornia's empty slots are no detections
                lafs, score, rows = lafs[0, filled].cpu().numpy(), score[0, filled], rows[0, filled]
                if hw != hwr:  # T^-1 on the whole frame (both rows of [A | c])
                    lafs = (lafs.astype(np.float64) / self._scale(hw, hwr)[None, :, None]).astype(np.float32)
                from descbench.keypoints.keynet import keypoints_from_lafs

                kps = keypoints_from_lafs(lafs, score.cpu().numpy())
                return kps, rows.cpu().numpy().astype(np.float32).reshape(len(kps), dim_of(self.net, p))
            else:
                f = self.module.detectAndCompute(x, top_k=p["top_k"], detection_threshold=p["detection_threshold"])[0]
                xy, score, rows = f["keypoints"], f["scores"], f["descriptors"]
        xy = self._to_stored(_numpy(xy).astype(np.float32), hw, hwr)
        n = xy.shape[0]
        kps = ImageKeypoints(
            x=np.ascontiguousarray(xy[:, 0]), y=np.ascontiguousarray(xy[:, 1]),
            size=np.full(n, p["default_size_px"], dtype=np.float32), angle=np.full(n, -1.0, dtype=np.float32),
            response=_numpy(score).astype(np.float32).reshape(n), octave=np.zeros(n, dtype=np.int32),
            class_id=np.full(n, -1, dtype=np.int32), source_index=np.arange(n, dtype=np.int32))
        return kps, _numpy(rows).astype(np.float32).reshape(n, dim_of(self.net, p))

    def describe(self, image_path: Path, gray: np.ndarray | None, kps: ImageKeypoints) -> np.ndarray:
        """float32 ``[N, D]`` rows of the network at given keypoints (module docstring, "on other keypoints")."""
        torch, p = self.torch, self.params
        F = torch.nn.functional
        n = len(kps)
        if n == 0:
            return np.zeros((0, dim_of(self.net, p)), dtype=np.float32)
        x, hw, hwr = self._image(image_path, gray)
        xy = torch.from_numpy(self._to_network(np.stack([kps.x, kps.y], axis=1), hw, hwr)).to(self.device)
        backend = NETS[self.net].backend
        with torch.inference_mode():
            if backend is not None:
                rows = backend.describe(self.module, x, xy, p)
            elif self.net == "disk":
                if not p["pad_if_not_divisible"] and (hwr[0] % 16 or hwr[1] % 16):
                    raise self._pad_error(hwr)
                h, w = hwr
                if p["pad_if_not_divisible"]:
                    x = F.pad(x, (0, (16 - w % 16) % 16, 0, (16 - h % 16) % 16), value=0.0)
                _, dense = self.module.heatmap_and_dense_descriptors(x)
                rows = F.normalize(bilinear_columns(torch, dense[0, :, :h, :w], xy).T, dim=-1)
            elif self.net == "aliked":
                feature_map, _ = self.module.extract_dense_map(x)
                h, w = hwr
                wh = torch.tensor([w - 1, h - 1], device=self.device, dtype=torch.float32)
                rows = self.module.desc_head(feature_map, [2.0 * xy / wh - 1.0])[0][0]
            elif self.net == "dedode":  # kornia's describe at its normalised form (2 (p + 0.5) / (W, H) - 1)
                wh = torch.tensor([hwr[1], hwr[0]], device=self.device, dtype=torch.float32)
                rows = self.module.describe(x, keypoints=(2.0 * (xy + 0.5) / wh - 1.0)[None],
                                            pad_if_not_divisible=p["pad_if_not_divisible"])[0]
            elif self.net == "keynet_affnet_hardnet":
                rows = self.module.descriptor(x, self._lafs(kps, hw, hwr))[0]
            else:
                m = self.module
                xr, rh, rw = m._preprocess_tensor(x)
                _, _, h1, w1 = xr.shape
                dense = F.normalize(m.net(xr)[0], dim=1)
                pos = xy / torch.tensor([rw, rh], device=self.device, dtype=torch.float32)
                rows = F.normalize(m.interpolator(dense, pos[None], H=h1, W=w1), dim=-1)[0]
        return _numpy(rows).astype(np.float32).reshape(n, dim_of(self.net, p))


def _numpy(a) -> np.ndarray:
    """A torch tensor's values as numpy (a :class:`Backend` may return numpy already)."""
    return a.cpu().numpy() if hasattr(a, "cpu") else np.asarray(a)


def bilinear_columns(torch, dense, xy):
    """``[D, N]``: the ``[D, H, W]`` map read bilinearly at ``xy`` (``[N, 2]`` float32 pixels,
    centres at integers): neighbours ``floor`` and ``floor + 1`` clamped to the map, weights
    ``1 - f`` and ``f``; summed as ``(w00 a + w10 b) + (w01 c + w11 d)`` so that an integer
    position returns the map's value exactly (weights 1, 0, 0, 0)."""
    _, h, w = dense.shape
    x, y = xy[:, 0], xy[:, 1]
    x0f, y0f = torch.floor(x), torch.floor(y)
    fx, fy = x - x0f, y - y0f
    x0 = x0f.long().clamp(0, w - 1)
    y0 = y0f.long().clamp(0, h - 1)
    x1 = (x0f.long() + 1).clamp(0, w - 1)
    y1 = (y0f.long() + 1).clamp(0, h - 1)
    top = dense[:, y0, x0] * ((1 - fx) * (1 - fy)) + dense[:, y0, x1] * (fx * (1 - fy))
    bottom = dense[:, y1, x0] * ((1 - fx) * fy) + dense[:, y1, x1] * (fx * fy)
    return top + bottom


@functools.lru_cache(maxsize=4)
def _runner(net: str, params_json: str) -> JointRunner:
    return JointRunner(net, json.loads(params_json))


def runner(net: str, params: dict, detection: bool = True) -> JointRunner:
    """The runner of (filled) params, built once per process (weights loaded once): the network's
    keys, and with ``detection`` the detection keys (a detector's params; a descriptor's have none)."""
    spec = NETS[net]
    keys = [*spec.net_keys, *(spec.detect_keys if detection else ())]
    return _runner(net, json.dumps({k: params[k] for k in keys}, sort_keys=True))


# ----------------------------------------------------------------------------- side files


def side_path(keypoint_file: Path | str) -> Path:
    """The side file next to a scene's keypoint file: ``<scene>.joint.npz``."""
    p = Path(keypoint_file)
    return p.with_name(p.name.removesuffix(".parquet") + "." + SIDE_KIND)


def write_side_file(path: Path | str, per_image: dict[int, tuple[ImageKeypoints, np.ndarray]], meta: dict) -> None:
    """Per image ``k``: ``source_index_k``, ``x_k``, ``y_k`` of the kept keypoints and their rows
    ``rows_k``; ``meta`` (JSON: version, identity) in ``meta``. Written atomically."""
    import io as _io

    from descbench.fileops import write_bytes_atomic

    arrays = {"meta": np.array(json.dumps({"version": SIDE_VERSION, **meta}, sort_keys=True))}
    for k, (kps, rows) in per_image.items():
        arrays.update({f"source_index_{k}": kps.source_index.astype(np.int32), f"x_{k}": kps.x, f"y_{k}": kps.y,
                       f"rows_{k}": np.ascontiguousarray(rows, dtype=np.float32)})
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes_atomic(Path(path), buf.getvalue())


def read_side_file(path: Path | str) -> tuple[dict, dict]:
    """``(meta, arrays)`` of a side file (DataError naming it when missing or unreadable)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{path}: the joint network's side file is missing or unreadable ({exc}); fix: rerun the "
                        "keypoint job of its set (snakemake --forcerun keypoints)") from exc
    return meta, arrays


def subset_side_file(source_keypoints: Path | str, out_keypoints: Path | str, per_image: dict[int, ImageKeypoints]) -> None:
    """A derived set's side file: the source set's rows of the keypoints it keeps (by
    ``source_index``). No side file at the source: nothing is written."""
    src = side_path(source_keypoints)
    if not src.exists():
        return
    meta, arrays = read_side_file(src)
    out = {}
    for k, kps in per_image.items():
        rows = lookup_rows(arrays, k, kps, src)
        out[k] = (kps, rows)
    write_side_file(side_path(out_keypoints), out, {key: v for key, v in meta.items() if key != "version"})


def lookup_rows(arrays: dict, k: int, kps: ImageKeypoints, path: Path) -> np.ndarray:
    """Image ``k``'s rows of ``kps`` from a side file's arrays, found by ``source_index`` and checked
    equal in ``x`` and ``y``; DataError naming the file otherwise."""
    try:
        si, xs, ys, rows = (arrays[f"{f}_{k}"] for f in ("source_index", "x", "y", "rows"))
    except KeyError:
        raise DataError(f"{path}: no rows for image {k}; fix: rerun the keypoint job of its set "
                        "(snakemake --forcerun keypoints)") from None
    order = np.argsort(si, kind="stable")
    pos = np.searchsorted(si[order], kps.source_index)
    pos = np.minimum(pos, max(len(si) - 1, 0))
    found = order[pos] if len(si) else np.zeros(0, dtype=np.int64)
    if len(kps) and (len(si) == 0 or not np.array_equal(si[found], kps.source_index)
                     or not np.array_equal(xs[found], kps.x) or not np.array_equal(ys[found], kps.y)):
        raise DataError(f"{path}: image {k}'s rows do not match the keypoint file (other keypoints or positions: the "
                        "files were written by different runs); fix: rerun the keypoint jobs of the set and its "
                        "sources (snakemake --forcerun keypoints)")
    return rows[found] if len(kps) else np.zeros((0, rows.shape[1] if rows.ndim == 2 else 0), dtype=np.float32)


def reads_own_rows(net: str, params: dict, kpset: dict) -> bool:
    """Whether descriptor family ``net`` with (filled) ``params`` reads the side file of a set whose
    root detector spec is ``kpset``: the same network with the same identity (weights compared by
    their label: the file's sha256, or the random seed)."""
    if kpset.get("detector") != net or kpset.get("mode", "independent") == "projected":
        return False  # (projected: images 2..n hold image 1's keypoints mapped, not the network's)
    from descbench.params import fragment_defaults

    d = fragment_defaults(descriptor_params_schema(net))
    kp = {**d, **{k: v for k, v in (kpset.get("params") or {}).items() if k in NETS[net].net_keys}}
    return identity(net, kp) == identity(net, params)


def weights_key(params: dict, key: str = "weights") -> str | None:
    """The weights of ``key`` as the identity compares them without loading: ``random(seed=N)`` or the
    file's ``sha256:`` (read once per process and file version); a null key (KeyNetAffNetHardNet's
    sub-networks) is ``weights``'s when that is ``random``, else None."""
    w = params.get(key)
    if w is None:
        return weights_key(params) if key != "weights" and params["weights"] == "random" else None
    if w == "random":
        return f"random(seed={params['weights_seed']})"
    st = Path(w).stat()
    return _sha256(str(w), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    return f"sha256:{file_sha256(path)}"


def side_rows(keypoint_file: Path | str, net: str, params: dict) -> tuple[dict, Callable[[int, ImageKeypoints], np.ndarray]]:
    """``(meta, rows_of)`` of the side file next to ``keypoint_file``, read once: ``rows_of(k, kps)`` gives
    image ``k``'s rows of ``kps`` (:func:`lookup_rows`). Its recorded network identity must be the
    descriptor's (else DataError: the files are stale)."""
    path = side_path(keypoint_file)
    meta, arrays = read_side_file(path)
    want, got = identity(net, params), meta.get("identity")
    if got != want:
        raise DataError(f"{path}: written by network {meta.get('identity')}, but descriptor family '{net}' with these "
                        f"params is {want}; fix: rerun the keypoint job of its set (snakemake --forcerun keypoints)")
    return meta, lambda k, kps: lookup_rows(arrays, k, kps, path)
