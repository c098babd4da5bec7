"""Joint detect-and-describe networks as descriptor families: ``disk``, ``aliked``, ``xfeat``,
``superpoint``, ``dedode``, ``keynet_affnet_hardnet``.

Each is the descriptor half of the network of the same name in
:mod:`descbench.keypoints.joint` (whose docstring defines the input image, the padding, the
defaults, the weights and the interpolation conventions). Its params are the network's own
(``weights``, ``weights_seed``, ``device``, ``threads``, ``resize``; DISK's ``desc_dim`` and
``pad_if_not_divisible``; ALIKED's ``model_name``; SuperPoint's ``layout`` and ``sampling``; DeDoDe's
``descriptor_weights``, models, ``amp_dtype`` and ``pad_if_not_divisible``; KeyNetAffNetHardNet's
sub-network weights, ``upright`` and ``scale_laf``), defined once, in the detector's definition in
``workflow/schemas/config.schema.yaml``.

* **On the network's own keypoint set** (the set's root detector is the same network with the
  same identity: same params and weights; :func:`descbench.keypoints.joint.reads_own_rows`), the
  rows are read from the keypoint job's side file (``own_rows``): the network ran once for both.
  Its descriptor file's runtime record says ``rows: keypoint_job`` with that run's record.
* **On any other keypoints** (SIFT's, an intersection kept from another set, the same network
  with other weights), ``compute`` runs the network on the image and describes the given
  keypoints: DISK, XFeat and SuperPoint sample their dense descriptor map, ALIKED runs its SDDH
  head, DeDoDe its ``describe`` at the keypoints, KeyNetAffNetHardNet runs HardNet on each
  keypoint's isotropic LAF (from its ``size`` and ``angle``)
  (:meth:`descbench.keypoints.joint.JointRunner.describe`); ``rows: network``.

Rows are float32 ``[N, D]``, unit L2 (DISK ``desc_dim``, ALIKED 64 for t16 and 128 otherwise,
XFeat 64, SuperPoint 256, KeyNetAffNetHardNet 128), except DeDoDe's: 256, as kornia returns them
(not normalised). These networks describe keypoints on a whole image: they do not describe HPatches'
65 x 65 patches.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily
from descbench.jobfacts import Cost, named_files, weights_label
from descbench.keypoints import ImageKeypoints
from descbench.keypoints import joint as J

PARAMS_SCHEMA = {net: J.descriptor_params_schema(net) for net in J.NETS}


def compute(net: str):
    """The family's ``compute``: the network on the image, rows at the given keypoints."""

    def run(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
        gray = None
        if J.NETS[net].image == "grey":  # the grey image the set's detector saw (its ``grey`` option)
            from descbench.datasets.layout import read_grey

            gray = read_grey(image_path, kpset.get("grey", "imread"))
        if len(kps) == 0:
            return np.zeros((0, J.dim_of(net, params)), dtype=np.float32)
        return J.runner(net, params, detection=False).describe(Path(image_path), gray, kps)

    return run


def own_rows(net: str):
    """The family's ``own_rows`` hook (:mod:`descbench.descriptors`): the side file's rows when the set is this network's."""

    def hook(params: dict, kpset: dict, keypoint_file: Path):
        if not J.reads_own_rows(net, params, kpset):
            return None
        meta, rows_of = J.side_rows(keypoint_file, net, params)
        runtime = {"rows": "keypoint_job", "side_file": J.side_path(keypoint_file).name, **(meta.get("runtime") or {})}
        return rows_of, runtime

    return hook


def runtime_provenance(net: str, params: dict) -> dict:
    """How ``compute`` ran: the network's runtime record (torch, device, weights label, identity), ``rows: network``."""
    return {"rows": "network", **J.runner(net, params, detection=False).provenance()}


def check(net: str):
    def run(params: dict, where: str) -> dict:
        return J.check_params(net, params, where)

    return run


FAMILIES = tuple(
    DescriptorFamily(
        net, compute(net), PARAMS_SCHEMA[net], check=check(net), own_rows=own_rows(net),
        runtime_provenance=functools.partial(runtime_provenance, net), runtime="torch",
        files=lambda p, net=net: named_files(p, J.NETS[net].weight_keys), weights_labels=lambda p: [weights_label(p)],
        # a full-image forward per image: the network's model (descbench.keypoints.joint.JointNet.model;
        # an upper bound for a run that reads the keypoint job's rows)
        cost=Cost(J.NETS[net].model),
        width=lambda p, parts, net=net: J.dim_of(net, p),
        not_on_patches="a joint detect-and-describe network describes keypoints of a whole image (its receptive "
                       "field and padding rules are an image's), not a 65 x 65 patch")
    for net in J.NETS
)
