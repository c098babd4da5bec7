"""Datasets: where a dataset's scenes live and which scenes it has.

The scene list is known at DAG-build time without reading any image: the demo and HPatches lists
are constants; a user folder is listed by directory names (plus a stat of the expected files).
"""

from __future__ import annotations

from pathlib import Path

from descbench.errors import ConfigError

# HPatches' facts live in its dataset module; re-exported here, where every dataset's scenes are listed
from descbench.datasets.hpatches import HPATCHES_ROOT, hpatches_names, hpatches_scenes  # noqa: F401


def dataset_tag(cfg: dict) -> str:
    """The results sub-folder of a dataset: ``demo``, ``hpatches`` or ``folder-<name>``."""
    if cfg["dataset"] == "folder":
        return "folder-" + (cfg["folder"].get("name") or Path(cfg["folder"]["path"]).resolve().name)
    return cfg["dataset"]


def resize_tag(cfg: dict) -> str:
    """``<side><size>`` of the config's ``resize`` (e.g. ``short480``), or ``""`` without one."""
    r = cfg.get("resize")
    return f"{r['side']}{r['size']}" if r else ""


def experiment_name(cfg: dict) -> str:
    """The experiment a run's results belong to: ``experiment`` if set, else the dataset tag, with
    ``-<side><size>`` when the images are resized (``hpatches-short480``). Results live in
    ``<results_dir>/<experiment>/``, so two experiments never share files."""
    return cfg.get("experiment") or "-".join(filter(None, (dataset_tag(cfg), resize_tag(cfg))))


def images_note(cfg: dict) -> str:
    """One sentence on how the images were prepared (the config's ``protocol`` and ``resize``), for
    a table's header; ``""`` when neither is set.

    >>> images_note({"protocol": "gluefactory_hpatches", "resize": {"size": 480, "side": "short"}})
    'Protocol gluefactory_hpatches; images resized: short side 480 px, homographies adjusted.'
    """
    parts = []
    if cfg.get("protocol"):
        parts.append(f"Protocol {cfg['protocol']}")
    if cfg.get("resize"):
        parts.append(f"images resized: {cfg['resize']['side']} side {cfg['resize']['size']} px, homographies adjusted")
    return ("; ".join(parts) + ".") if parts else ""


def source_root(cfg: dict) -> Path:
    """The directory holding the dataset's own scene folders."""
    if cfg["dataset"] == "demo":
        return Path(cfg["data_dir"]) / "demo" / f"seed{cfg['demo']['seed']}"
    if cfg["dataset"] == "hpatches":
        return Path(cfg["data_dir"]) / "hpatches" / HPATCHES_ROOT
    return Path(cfg["folder"]["path"])


def scene_root(cfg: dict) -> Path:
    """The directory holding the scene folders every stage reads: :func:`source_root`, or with
    ``resize`` the resized copies, ``<data_dir>/resized/<dataset tag>[-seed<n>]/<side><size>``
    (:mod:`descbench.datasets.resize`)."""
    if not cfg.get("resize"):
        return source_root(cfg)
    tag = dataset_tag(cfg) + (f"-seed{cfg['demo']['seed']}" if cfg["dataset"] == "demo" else "")
    return Path(cfg["data_dir"]) / "resized" / tag / resize_tag(cfg)


def available_scenes(cfg: dict) -> list[str]:
    if cfg["dataset"] == "demo":
        from descbench.datasets.demo import DEMO_SCENES

        return list(DEMO_SCENES)
    if cfg["dataset"] == "hpatches":
        return hpatches_scenes(cfg["hpatches"]["subset"])
    root = source_root(cfg)
    if not root.is_dir():
        raise ConfigError(f"folder.path {root} is not a directory; point it at the folder that holds your scene folders")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise ConfigError(f"folder.path {root} holds no scene folder (expected sub-folders in HPatches layout)")
    return names


def list_scenes(cfg: dict) -> list[str]:
    """The scenes to evaluate: the dataset's, restricted to ``scenes`` when given (order kept).

    :class:`ConfigError` if ``scenes`` names a scene twice or one the dataset does not have, or
    is an empty list: ``[]`` (e.g. what a filtering script leaves) is not "all scenes", which is
    ``scenes: null`` or no ``scenes`` key.
    """
    wanted = cfg.get("scenes")
    if isinstance(wanted, (list, tuple, str)) and len(wanted) == 0:
        raise ConfigError(
            "scenes is an empty list, which would evaluate no scene; to evaluate all of the dataset's scenes omit "
            "the key (or write scenes: null), otherwise list the scenes to evaluate"
        )
    avail = available_scenes(cfg)
    if wanted is None:
        return avail
    positions: dict[str, list[int]] = {}
    for i, s in enumerate(wanted):
        positions.setdefault(s, []).append(i)
    repeated = {s: pos for s, pos in positions.items() if len(pos) > 1}
    if repeated:
        listed = "; ".join(f"{s!r} at {' and '.join(f'scenes[{i}]' for i in pos)}" for s, pos in repeated.items())
        raise ConfigError(
            f"scenes lists a scene more than once: {listed}. Each scene is evaluated once (a repeat "
            "would count it twice in every mean); remove the repeated entries from scenes"
        )
    unknown = [s for s in wanted if s not in avail]
    if unknown:
        raise ConfigError(
            f"scenes lists {', '.join(unknown)}, not in dataset '{cfg['dataset']}'; "
            f"available: {', '.join(avail[:12])}{' ...' if len(avail) > 12 else ''}"
        )
    return list(wanted)
