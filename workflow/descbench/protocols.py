"""Protocol presets: one config key for the settings a peer's benchmark fixes.

``protocol: gluefactory_hpatches`` is cvg/glue-factory's HPatches homography benchmark
(``gluefactory/eval/hpatches.py`` with its ``datasets/hpatches.py`` and ``utils/image.py``):

* ``hpatches.subset: d2net108``: the 108 sequences, without the 8 large ones that glue-factory
  (``ignore_large_images``) and D2-Net leave out;
* ``resize: {size: 480, side: short}``: every image resized so that its short side is 480 px, the
  homographies adjusted (:mod:`descbench.datasets.resize`), as glue-factory's ``preprocessing``;
* ``pipelines.estimators: {dlt: {}, poselib: {ransac_th: 1.0}}``: glue-factory's default robust
  estimator (``eval.estimator: poselib``, ``eval.ransac_th: 1.0``; poselib is the ``estimators``
  extra) next to the score-weighted DLT it always reports;
* ``pipelines.auc_thresholds: [1, 3, 5]`` and ``pipelines.precision_thresholds: [1, 3]``: its
  AUCs of the corner error and its match precisions, in pixels.

Its metrics are descbench's pipelines task (:mod:`descbench.tasks.pipelines`), whose definitions
are glue-factory's; the keypoints, descriptors and matchers are the config's own. ``dataset:
hpatches`` is the config's to set: on the demo or a folder the preset resizes and estimates the
same way (the subset is HPatches'), which is how the tests run it.

``protocol: gluefactory_megadepth1500`` and ``gluefactory_scannet1500`` are its relative-pose
benchmarks (``gluefactory/eval/megadepth1500.py``, ``scannet1500.py``; :mod:`descbench.tasks.pose`),
their ``default_conf``:

* ``dataset: posed`` with ``posed.path: data/megadepth1500`` (or ``data/scannet1500``), the
  folders ``descbench posed-download`` fills (:mod:`descbench.datasets.posed_sets`);
* ``pose.estimators``: MegaDepth-1500's ``poselib`` at ``ransac_th`` 1.0 px, ScanNet-1500's
  ``opencv`` at 1.0 px (glue-factory's ``eval.estimator``, ``eval.ransac_th``);
* ``pose.auc_thresholds: [5, 10, 20]`` degrees and ``pose.epipolar_thresholds: [1e-4, 5e-4,
  1e-3]``; ``pose.depth``: true for MegaDepth-1500 (its depth maps: ``eval_matches_depth``), false
  for ScanNet-1500 (glue-factory's copy has none);
* MegaDepth-1500 only: ``resize: {size: 1600, side: long}``, what glue-factory's published model
  configs set for it (``data.preprocessing.resize: 1600``, e.g.
  ``configs/superpoint+lightglue-official.yaml``; the benchmark's ``default_conf`` itself sets only
  ``side: long``): images, cameras and depth maps resized together
  (:func:`descbench.datasets.resize.resize_posed_scene`). ScanNet-1500's 640 x 480 images are
  evaluated as stored, as there.

**Precedence** (glue-factory's: the user's conf is merged over the benchmark's ``default_conf``):
the preset sets each of its keys unless the config gives that key a value other than the
schema's default, in which case the config's value is used and the key is reported as a deviation
(:func:`apply_protocol`; the workflow names them when it starts). A value equal to the default
cannot be told from an unset key (``config.yaml`` spells out most defaults), so it does not
override the preset: to evaluate all 116 sequences under this protocol, name them in ``scenes``.
"""

from __future__ import annotations

import copy
from typing import Any

from descbench.errors import ConfigError

#: name -> {dotted config key: value}. One entry per peer benchmark.
PROTOCOLS: dict[str, dict[str, Any]] = {
    "gluefactory_hpatches": {
        "hpatches.subset": "d2net108",
        "resize": {"size": 480, "side": "short"},
        "pipelines.estimators": {"dlt": {}, "poselib": {"ransac_th": 1.0}},
        "pipelines.auc_thresholds": [1, 3, 5],
        "pipelines.precision_thresholds": [1, 3],
    },
    "gluefactory_megadepth1500": {
        "dataset": "posed",
        "posed.path": "data/megadepth1500",
        "resize": {"size": 1600, "side": "long"},
        "pose.estimators": {"poselib": {"ransac_th": 1.0}},
        "pose.auc_thresholds": [5, 10, 20],
        "pose.epipolar_thresholds": [0.0001, 0.0005, 0.001],
        "pose.depth": True,
    },
    "gluefactory_scannet1500": {
        "dataset": "posed",
        "posed.path": "data/scannet1500",
        "pose.estimators": {"opencv": {"ransac_th": 1.0}},
        "pose.auc_thresholds": [5, 10, 20],
        "pose.epipolar_thresholds": [0.0001, 0.0005, 0.001],
        "pose.depth": False,
    },
}

_UNSET = object()


def _get(node: Any, keys: list[str]) -> Any:
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return _UNSET
        node = node[k]
    return node


def _schema_default(schema: dict, keys: list[str]) -> Any:
    """The schema's default at ``keys`` (properties followed from the top), or ``_UNSET``."""
    node = schema
    for k in keys:
        node = node.get("properties", {}).get(k)
        if node is None:
            return _UNSET
    return node.get("default", _UNSET)


def apply_protocol(config: dict, schema: dict) -> tuple[dict, list[str]]:
    """The config with its ``protocol``'s settings applied, and the preset keys it overrides.

    A copy of ``config`` (untouched when it has no ``protocol``): each preset key is set unless the
    config holds a value for it that differs from the schema's default (module docstring). An
    unknown protocol is a ConfigError listing the known ones.

    >>> schema = {"properties": {"hpatches": {"properties": {"subset": {"default": "full"}}}}}
    >>> cfg, dev = apply_protocol({"protocol": "gluefactory_hpatches", "hpatches": {"subset": "full"}}, schema)
    >>> cfg.get("hpatches")["subset"], cfg["resize"], dev
    ('d2net108', {'size': 480, 'side': 'short'}, [])
    """
    name = config.get("protocol")
    if name is None:
        return config, []
    if name not in PROTOCOLS:
        raise ConfigError(f"protocol {name!r} is not a known protocol; use one of {', '.join(sorted(PROTOCOLS))} "
                          "or remove the key")
    out = copy.deepcopy(config)
    deviations = []
    for dotted, value in PROTOCOLS[name].items():
        keys = dotted.split(".")
        given = _get(out, keys)
        if given is not _UNSET and given is not None and given != _schema_default(schema, keys):
            deviations.append(dotted)
            continue
        node = out
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        node[keys[-1]] = copy.deepcopy(value)
    return out, deviations


def describe(name: str, deviations: list[str]) -> str:
    """One line for the terminal: the protocol and the preset keys the config overrides."""
    text = f"protocol {name}: " + ", ".join(f"{k}={v!r}" for k, v in PROTOCOLS[name].items())
    if deviations:
        text += f"; the config overrides {', '.join(deviations)} (its own values are used)"
    return text
