"""Datasets: where a dataset's scenes live and which scenes it has.

The scene list is known at DAG-build time without reading any image: the demo and HPatches lists
are constants; a user folder is listed by directory names (plus a stat of the expected files).
"""

from __future__ import annotations

from pathlib import Path

from descbench.errors import ConfigError

# HPatches' facts live in its dataset module; re-exported here, where every dataset's scenes are listed
from descbench.datasets.hpatches import HPATCHES_ROOT, hpatches_names, hpatches_scenes  # noqa: F401


#: The dataset kinds (config ``dataset``) and the geometry of their pairs: image sequences related
#: by homographies (:mod:`descbench.datasets.layout`), or posed views related by calibrated relative
#: poses (:mod:`descbench.datasets.posed`; evaluated by the pose task, :mod:`descbench.tasks.pose`).
DATASET_GEOMETRY = {"demo": "homography", "hpatches": "homography", "folder": "homography",
                    "posed_demo": "relative_pose", "posed": "relative_pose"}


def dataset_geometry(cfg: dict) -> str:
    """``homography`` or ``relative_pose``: the geometry of the config's dataset's pairs (:data:`DATASET_GEOMETRY`)."""
    return DATASET_GEOMETRY[cfg["dataset"]]


def _user_folder(cfg: dict) -> dict | None:
    """The config section of a dataset in the user's own folder (``folder``, ``posed``), else None."""
    return cfg[cfg["dataset"]] if cfg["dataset"] in ("folder", "posed") else None


def dataset_tag(cfg: dict) -> str:
    """The results sub-folder of a dataset: ``demo``, ``hpatches``, ``posed_demo``, ``folder-<name>``
    or ``posed-<name>``."""
    own = _user_folder(cfg)
    if own is not None:
        return f"{cfg['dataset']}-" + (own.get("name") or Path(own["path"]).resolve().name)
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

    >>> images_note({"dataset": "hpatches", "protocol": "gluefactory_hpatches", "resize": {"size": 480, "side": "short"}})
    'Protocol gluefactory_hpatches; images resized: short side 480 px, homographies adjusted.'
    >>> images_note({"dataset": "posed", "resize": {"size": 1600, "side": "long"}})
    'images resized: long side 1600 px, cameras and depth maps adjusted.'
    """
    parts = []
    if cfg.get("protocol"):
        parts.append(f"Protocol {cfg['protocol']}")
    if cfg.get("resize"):
        adjusted = "cameras and depth maps" if dataset_geometry(cfg) == "relative_pose" else "homographies"
        parts.append(f"images resized: {cfg['resize']['side']} side {cfg['resize']['size']} px, {adjusted} adjusted")
    return ("; ".join(parts) + ".") if parts else ""


def source_root(cfg: dict) -> Path:
    """The directory holding the dataset's own scene folders."""
    if cfg["dataset"] == "demo":
        return Path(cfg["data_dir"]) / "demo" / f"seed{cfg['demo']['seed']}"
    if cfg["dataset"] == "hpatches":
        return Path(cfg["data_dir"]) / "hpatches" / HPATCHES_ROOT
    if cfg["dataset"] == "posed_demo":
        return Path(cfg["data_dir"]) / "posed_demo" / f"seed{cfg['posed_demo']['seed']}"
    return Path(_user_folder(cfg)["path"])


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
    if cfg["dataset"] == "posed_demo":
        from descbench.datasets.posed_demo import N_SCENES, scene_name

        return [scene_name(i) for i in range(N_SCENES)]
    root, key = source_root(cfg), f"{cfg['dataset']}.path"
    layout = ("HPatches layout" if cfg["dataset"] == "folder" else
              "glue-factory's posed_images layout, views.txt, pairs.txt and images/, or a pairs_calibrated.txt")
    if not root.is_dir():
        from descbench.datasets.posed_sets import PUBLISHED

        hint = (f" (for {root.name}, run `descbench posed-download {root.name} --data-dir {root.parent}` first, where there "
                "is internet access)" if cfg["dataset"] == "posed" and root.name in PUBLISHED else "")
        raise ConfigError(f"{key} {root} is not a directory; point it at the folder that holds your scene folders{hint}")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise ConfigError(f"{key} {root} holds no scene folder (expected sub-folders in {layout})")
    if cfg["dataset"] == "posed":
        from descbench.datasets.layout import is_posed_folder, posed_scene_parts

        flat = [n for n in names if not is_posed_folder(root / n)]
        if flat:
            raise ConfigError(f"{key} {root}: the folder(s) {', '.join(flat[:5])} hold no views.txt or pairs_calibrated.txt, "
                              f"so they are not posed scenes ({layout}); move them out of {root}, or point {key} at the folder "
                              "of scenes")

        return [part for n in names for part in posed_scene_parts(root / n)]  # a large folder: its parts
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
