"""The ``keynet`` detector: kornia's KeyNet (``kornia.feature.KeyNetDetector``) as OpenCV keypoints.

This is the C++ DescriptorWorkbench's KeyNet keypoints (``scripts/generate_keynet_keypoints.py``,
called per image by ``src/core/keypoints/generators/KeynetDetector.cpp``): kornia's
``KeyNetDetector(num_features=2000)`` with the published KeyNet weights, on the grey image as a
float32 tensor ``gray / 255`` of shape ``[1, 1, H, W]``. The params (``keynet_detector_params`` of
``workflow/schemas/config.schema.yaml``) are the workbench's ``num_features`` and kornia's
``keynet_default_config["Detector_conf"]`` keys (``nms_size``, ``pyramid_levels``, ``up_levels``,
``scale_factor_levels``, ``s_mult``), ``score_threshold`` (kornia's), and optional orientation
(``gradient``: kornia's ``LAFOrienter`` with its dominant-gradient histogram; ``orinet``:
``LAFOrienter`` with OriNet) and affine shape (``affnet``: ``LAFAffNetShapeEstimator``), applied
as kornia applies them (affine shape first, then orientation).

LAF -> OpenCV keypoint (:func:`keypoints_from_lafs`), for a LAF ``[[a11, a12, cx], [a21, a22, cy]]``
(kornia: the columns of ``A`` are the images of the patch's x and y axes, in pixels):

* ``x, y = cx, cy`` (kornia reports a level pixel ``u`` at ``u * W / W_l``, as Key.Net does);
* ``size = |(a11, a21)| + |(a12, a22)|``: the sum of the two column norms, i.e. twice their mean
  (for kornia's isotropic frames, ``2 * s_mult * level scale``);
* ``angle = atan2(a21, a11) * 180 / pi``: the direction of the patch's x axis in the image
  (x right, y down), which is OpenCV's angle; a negative value gets ``+ 360`` so that angles are
  in ``[0, 360)`` as OpenCV's, and -1 keeps its OpenCV meaning ("unset") for other detectors;
* ``response``: kornia's response; ``octave = 0``, ``class_id = -1``.

The sums, the arctangent and the degrees are computed in float64 from the float32 LAF entries and
rounded once to float32. This is the workbench's rule. kornia's own ``get_laf_orientation`` reads
``atan2(a12, a11)`` instead: for kornia's frames (``A = s R(ori)`` with ``R = [[cos, sin],
[-sin, cos]]``, a positive ``ori`` turning the x axis counter-clockwise on screen) it returns
``ori`` where the rule above returns ``-ori`` (mod 360), the OpenCV angle of the same frame (the
one ``cv2.KeyPoint`` consumers rotate patches by). The workbench's rule is used, since descbench
reproduces its experiments. Without an orientation module every frame is upright, ``atan2(0, s)
= 0``: the angle is 0 ("upright", as the workbench stores it), not -1.

kornia pads its output to ``num_features`` slots with all-zero LAFs of zero response (slots no
detection filled, ``kornia.feature.laf_is_filled``); they are not detections and are dropped. The
workbench kept them as size-0 keypoints at (0, 0), which its 40 px border filter then removed.
The rows keep kornia's order (decreasing response). The border rule and the response cap are
descbench's, applied afterwards (:func:`descbench.keypoints.filter_keypoints`); the workbench's
KeyNet sets are ``border_px: 40, max_keypoints: 2000``.

Weights are never downloaded: ``weights`` (and ``orinet_weights`` / ``affnet_weights``) is a
state-dict file or ``random`` (:func:`descbench.torchrt.load_weights`, seeded by ``weights_seed``),
and the device and threads are set by :mod:`descbench.torchrt`. The same image and params on the
same machine, device and thread count give bit-identical keypoints.
"""

from __future__ import annotations

import functools
import json


import numpy as np

from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints
from descbench.torchrt import check_weights_file

WHERE = "detector 'keynet' params"
# Where the published weights come from (kornia's own URLs; descbench never downloads them). The
# files are training checkpoints whose state dict sits under "state_dict", which
# descbench.torchrt.load_weights reads.
PUBLISHED = {
    "weights": "KeyNet: kornia.feature.keynet.KeyNet_URL, https://huggingface.co/kornia/keynet/resolve/main/keynet_pytorch.pth "
               "or https://github.com/axelBarroso/Key.Net-Pytorch/raw/main/model/weights/keynet_pytorch.pth",
    "orinet_weights": "OriNet: kornia.feature.orientation.urls['orinet'], https://huggingface.co/kornia/orinet/resolve/main/OriNet.pth "
                      "or https://github.com/ducha-aiki/affnet/raw/master/pretrained/OriNet.pth",
    "affnet_weights": "AffNet: kornia.feature.affine_shape.urls['affnet'], https://huggingface.co/kornia/affnet/resolve/main/AffNet.pth "
                      "or https://github.com/ducha-aiki/affnet/raw/master/pretrained/AffNet.pth",
}


def keypoints_from_lafs(lafs: np.ndarray, responses: np.ndarray) -> ImageKeypoints:
    """OpenCV keypoints of kornia LAFs (float32 ``[N, 2, 3]``) and responses (``[N]``), by the rule
    of the module docstring: ``x, y = a13, a23``; ``size = sqrt(a11^2 + a21^2) + sqrt(a12^2 + a22^2)``;
    ``angle = atan2(a21, a11) * 180 / pi``, ``+ 360`` when negative (a value that rounds to 360 in
    float32 is 0, and -0 is 0); ``octave = 0``, ``class_id = -1``; float64 arithmetic on the float32
    entries, one rounding to float32. ``source_index`` = row order."""
    a = np.asarray(lafs, dtype=np.float32).astype(np.float64)
    n = a.shape[0]
    size = np.sqrt(a[:, 0, 0] ** 2 + a[:, 1, 0] ** 2) + np.sqrt(a[:, 0, 1] ** 2 + a[:, 1, 1] ** 2)
    degrees = np.arctan2(a[:, 1, 0], a[:, 0, 0]) * 180.0 / np.pi
    angle = np.where(degrees < 0, degrees + 360.0, degrees).astype(np.float32) + np.float32(0.0)  # + 0: -0 -> 0
    angle[angle == np.float32(360.0)] = 0.0  # -1e-9 + 360 rounds to 360 in float32; OpenCV's range is [0, 360)
    return ImageKeypoints(
        x=a[:, 0, 2].astype(np.float32),
        y=a[:, 1, 2].astype(np.float32),
        size=size.astype(np.float32),
        angle=angle,
        response=np.asarray(responses, dtype=np.float32).reshape(n),
        octave=np.zeros(n, dtype=np.int32),
        class_id=np.full(n, -1, dtype=np.int32),
        source_index=np.arange(n, dtype=np.int32),
    )


def _load_net(torchrt, module, params: dict, key: str) -> str:
    """``module`` given the weights of ``params[key]`` (:func:`descbench.torchrt.load_weights`, seed
    ``weights_seed``); returns its provenance label. A missing file names ``key``."""
    value = params[key]
    torchrt.check_weights_file(f"{WHERE}.{key}", value, PUBLISHED[key])
    where = WHERE if key == "weights" else f"{WHERE}.{key} ({type(module).__name__})"
    return torchrt.load_weights(module, value, params["weights_seed"], where, PUBLISHED[key])


class KeyNetKeypointDetector:
    """kornia's ``KeyNetDetector`` built from the ``keynet_detector_params``, with the interface of
    an OpenCV detector (``detect(gray, mask) -> list[cv2.KeyPoint]``) for the detector registry.

    ``provenance``: the torch runtime (:func:`descbench.torchrt.configure`) and each network's
    weights label (``sha256:<hex>`` or ``random(seed=<n>)``)."""

    def __init__(self, params: dict):
        from descbench import torchrt

        torch, kornia = torchrt.require("torch", "kornia", what="detector 'keynet'")
        KF = kornia.feature
        self.device = torchrt.resolve_device(params["device"], WHERE)
        runtime = torchrt.configure(self.device, params["threads"])
        self.provenance = {"runtime": runtime}
        aff = ori = None
        if params["affine"] == "affnet":
            aff = KF.LAFAffNetShapeEstimator(pretrained=False)
            self.provenance["affnet_weights"] = _load_net(torchrt, aff, params, "affnet_weights")
        if params["orientation"] == "gradient":
            ori = KF.LAFOrienter()  # kornia's defaults: 32 px patch, 36-bin dominant gradient histogram
        elif params["orientation"] == "orinet":
            orinet = KF.OriNet(pretrained=False)
            self.provenance["orinet_weights"] = _load_net(torchrt, orinet, params, "orinet_weights")
            ori = KF.LAFOrienter(angle_detector=orinet)
        conf = {**KF.keynet.keynet_default_config,
                "Detector_conf": {key: params[key] for key in ("nms_size", "pyramid_levels", "up_levels", "scale_factor_levels", "s_mult")}}
        self.net = KF.KeyNetDetector(pretrained=False, num_features=params["num_features"], keynet_conf=conf,
                                     ori_module=ori, aff_module=aff, score_threshold=params["score_threshold"])
        self.provenance["weights"] = _load_net(torchrt, self.net.model, params, "weights")
        self._pyramid_levels = params["pyramid_levels"]
        self.net = self.net.to(self.device).eval()
        self._torch = torch
        self._laf_is_filled = KF.laf_is_filled

    def detect_keypoints(self, gray: np.ndarray) -> ImageKeypoints:
        """The detections on a uint8 grey image (``gray / 255`` as float32 ``[1, 1, H, W]``), padding
        slots dropped, converted by :func:`keypoints_from_lafs`, in kornia's order."""
        torch = self._torch
        if gray.ndim != 2 or gray.dtype != np.uint8:
            raise ValueError(f"keynet: expected a 2-D uint8 grey image, got {gray.dtype} {gray.shape}")
        image = (torch.from_numpy(np.ascontiguousarray(gray)).to(torch.float32) / 255.0)[None, None].to(self.device)
        with torch.inference_mode():
            try:
                lafs, responses = self.net(image)
            except RuntimeError as exc:
                if "Padding size should be less than" not in str(exc):
                    raise
                # kornia's pyramid shrank the image below its filters' padding at the coarsest level
                raise DataError(f"{WHERE}.pyramid_levels: {self._pyramid_levels} levels are too many for a "
                                f"{gray.shape[0]} x {gray.shape[1]} image (kornia's KeyNet pyramid gets too small for its "
                                "filters at the coarsest level); fix: use fewer pyramid_levels (kornia's default is 4) "
                                "or larger images") from None
        filled = self._laf_is_filled(lafs)[0]
        return keypoints_from_lafs(lafs[0, filled].cpu().numpy(), responses[0, filled].cpu().numpy())

    def detect(self, gray: np.ndarray, mask=None) -> list:
        """:meth:`detect_keypoints` as ``cv2.KeyPoint`` objects (their float32 fields hold the values
        exactly). ``mask`` must be None: descbench applies its border rule afterwards."""
        import cv2

        if mask is not None:
            raise ValueError("keynet: detection masks are not supported (descbench applies its border rule afterwards)")
        k = self.detect_keypoints(gray)
        return [cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), int(o), int(c))
                for x, y, s, a, r, o, c in zip(k.x, k.y, k.size, k.angle, k.response, k.octave, k.class_id)]


@functools.lru_cache(maxsize=4)
def _cached(params_json: str) -> KeyNetKeypointDetector:
    return KeyNetKeypointDetector(json.loads(params_json))


def cached_detector(params: dict) -> KeyNetKeypointDetector:
    """The detector of (filled) ``params``, built once per process: a job detects on many images
    and the networks' weights are loaded (and the runtime configured) once."""
    return _cached(json.dumps(params, sort_keys=True))


def check_weight_files(params: dict, where: str) -> None:
    """Config time: every weights file the (filled) params name exists; else a ConfigError naming
    the key, the file and where the published weights come from (before Snakemake would report it
    as a bare missing rule input)."""
    for key in PUBLISHED:
        value = params.get(key)
        if value:
            check_weights_file(f"{where}.{key}", value, PUBLISHED[key])
