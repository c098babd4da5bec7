"""The network of family ``l2net``: what the C++ DescriptorWorkbench runs as ``LIBTORCH_L2NET``.

**What ``LIBTORCH_L2NET`` is** (read in the workbench's source at ``b834e17``): not L2-Net
(Tian et al., CVPR 2017). ``createLibTorchL2Net`` (``src/core/descriptor/extractors/wrappers/
LibTorchFactory.cpp:17-19``; patches: ``createPatchL2Net``, ``src/core/patches/PatchCNNExtractor.cpp:
205-213``) loads ``../models/simple_l2net.pt``, which ``analysis/scripts/download_pytorch_models.py``
``create_simple_l2net()`` (lines 113-191) makes: a small "L2-Net inspired" CNN, **randomly
initialised and never trained**, traced with ``torch.jit.trace`` on a 1 x 1 x 32 x 32 input. Its
convolution weights are drawn with ``kaiming_normal_`` and its linear weight with
``xavier_normal_`` after ``torch.manual_seed(42)``, but the convolution and linear *biases* (and
BatchNorm's affine parameters, 1 / 0, and running statistics, 0 / 1) are the constructor's,
drawn *before* the seed from whatever state torch's global RNG was in: the file cannot be
regenerated from the script. A user must bring the workbench's ``simple_l2net.pt`` (or any
weights of this architecture).

**Architecture** ``workbench_simple`` (:func:`simple_l2net`; its state-dict keys are the traced
module's, so the workbench's file loads into it):

* ``features`` (an ``nn.Sequential``): four blocks ``Conv2d(c_in, c_out, 3, padding=1)``,
  ``BatchNorm2d(c_out)``, ``ReLU``, with channels 1 -> 32 -> 64 -> 128 -> 128, each of the first
  three followed by ``MaxPool2d(2, 2)`` (32 -> 16 -> 8 -> 4 px); indices 0-14, so the keys are
  ``features.{0,4,8,12}.{weight,bias}`` and ``features.{1,5,9,13}.{weight,bias,running_mean,
  running_var,num_batches_tracked}``;
* ``avgpool``: ``AdaptiveAvgPool2d((1, 1))`` (the 4 x 4 maps averaged), flattened to 128;
* ``fc``: ``Linear(128, 128)``;
* the output ``F.normalize(x, p=2, dim=1)`` (unit L2, eps 1e-12), evaluated in eval mode
  (BatchNorm with its running statistics).

**Input**: the workbench builds it with ``LibTorchWrapper``'s defaults
(``LibTorchWrapper.hpp:21-29``): 32 x 32, rotated upright, per-patch standardisation, 128-D
output, support multiplier 5.0 (never read by ``makePatch``, as HardNet's 2.0 is not), so its
patches are exactly ``libtorch_hardnet``'s: the family's default ``patch_convention`` is
``workbench_libtorch`` (:mod:`descbench.descriptors.kornia_nets`, which runs the family).

**Weights** (``weights``): the workbench's TorchScript ``simple_l2net.pt`` (its state dict is
taken, :func:`descbench.torchrt.torchscript_state`; its traced code is never run), a torch state
dict of this architecture, or ``random`` (PyTorch's default initialisers under a seed derived
from the family name and ``weights_seed``, :func:`descbench.torchrt.random_seed`; *not* the
workbench's kaiming/xavier draws, which cannot be reproduced anyway, see above).

Real L2-Net (Tian et al. 2017) is not offered: its authors' weights are MatConvNet files
(github.com/yuruntian/L2-Net), not a torch state dict, and no part of the workbench runs it.
HardNet's architecture is L2-Net's, so ``hardnet`` given L2-Net's weights converted to kornia's key
names would be close to it, but descbench neither converts nor checks such weights, and its
input normalisation (L2-Net's own) was not verified here.
"""

from __future__ import annotations

import functools

ARCHITECTURES = ("workbench_simple",)

# Where the weights come from, for error messages (descbench never downloads or regenerates them).
PUBLISHED = ("the C++ DescriptorWorkbench's models/simple_l2net.pt (made by its analysis/scripts/"
             "download_pytorch_models.py create_simple_l2net(): a randomly initialised, untrained network whose "
             "biases were drawn before its seed, so the file cannot be regenerated: copy it from the workbench's "
             "models/ folder)")

# (c_in, c_out, followed by a 2 x 2 max pool) of the four convolution blocks
BLOCKS = ((1, 32, True), (32, 64, True), (64, 128, True), (128, 128, False))
DIM = 128


@functools.cache
def _simple_l2net_class():
    """The ``nn.Module`` class of ``workbench_simple`` (torch is imported on first use)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class SimpleL2Net(nn.Module):
        """The workbench's ``simple_l2net.pt`` architecture (module docstring)."""

        def __init__(self):
            super().__init__()
            layers = []
            for c_in, c_out, pool in BLOCKS:
                layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]
                if pool:
                    layers.append(nn.MaxPool2d(2, 2))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(BLOCKS[-1][1], DIM)

        def forward(self, x):
            x = self.avgpool(self.features(x))
            return F.normalize(self.fc(x.flatten(1)), p=2.0, dim=1)

    return SimpleL2Net


def simple_l2net():
    """A new ``workbench_simple`` module (PyTorch's default initialisation; train mode, as any
    ``nn.Module``: :func:`descbench.torchrt.load_weights` gives it its weights and eval mode)."""
    return _simple_l2net_class()()


def build(architecture: str):
    """The module of ``architecture`` (one of :data:`ARCHITECTURES`)."""
    if architecture == "workbench_simple":
        return simple_l2net()
    raise ValueError(f"l2net architecture {architecture!r} is not one of {ARCHITECTURES}")  # the schema's enum
