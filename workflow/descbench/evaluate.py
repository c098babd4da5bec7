"""Evaluation inside Python: a descriptor given as a callable, scored by the workflow's own jobs.

:func:`evaluate_sequences` runs, in the calling process, exactly what ``snakemake`` runs for one
(keypoint set, descriptor): the keypoint job's detection and border rule, the user's callable on
every image, the distractor draw, the scoring job's tasks and the report's comparison table, with
the same functions (:mod:`descbench.jobs`, :mod:`descbench.report.table`) writing the same files
into a results tree (a temporary folder unless ``out_dir`` is given). The table it returns is
therefore the one the workflow writes in ``report/comparison.parquet`` for a descriptor computing
the same rows under the same settings (a test holds this on the demo).
"""

from __future__ import annotations

import copy
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from descbench.errors import ConfigError, DataError

if TYPE_CHECKING:
    import pandas as pd

# A built-in keypoint set a name alone selects: the detector's own defaults, the protocol's border.
DETECTOR_SETS = ("sift",)


def _load_config(config: dict | str | Path | None, dataset: str | Path, data_dir: str | Path | None) -> dict:
    """``config`` (a dict, a YAML file or None) as a new dict, with ``dataset`` and ``data_dir`` set."""
    import yaml

    if config is None:
        raw: dict = {}
    elif isinstance(config, dict):
        raw = copy.deepcopy(config)
    else:
        path = Path(config)
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"config {path}: cannot read it ({exc.strerror}); pass a config file, a dict or None") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path}: expected a mapping of settings (as config.yaml), got {type(raw).__name__}")
    if str(dataset) in ("demo", "hpatches"):
        raw["dataset"] = str(dataset)
    else:  # a folder of the user's own scenes (descbench.datasets.layout)
        raw["dataset"] = "folder"
        raw["folder"] = {**(raw.get("folder") or {}), "path": str(dataset)}
    if data_dir is not None:
        raw["data_dir"] = str(data_dir)
    return raw


def _raw_config(dataset: str | Path, keypoints: str | dict, config: dict | str | Path | None,
                tasks: Sequence[str] | None, data_dir: str | Path | None, name: str) -> tuple[dict, str]:
    """The config to validate (the workflow's format, one keypoint set, no descriptor) and the
    keypoint set's name."""
    raw = _load_config(config, dataset, data_dir)
    sets = raw.get("keypoint_sets") or {}
    if isinstance(keypoints, dict):
        kpname, spec = "keypoints", keypoints
    elif keypoints in sets:
        kpname, spec = keypoints, sets[keypoints]
    elif keypoints in DETECTOR_SETS:
        kpname, spec = keypoints, {"detector": keypoints}
    else:
        raise ConfigError(f"keypoints={keypoints!r}: not a keypoint set of the config ({', '.join(sets) or 'none'}) nor a "
                          f"built-in set ({', '.join(DETECTOR_SETS)}); pass one of those names or a keypoint-set dict "
                          "(as config.yaml's keypoint_sets.<name>)")
    if not isinstance(spec, dict) or "detector" not in spec:
        raise ConfigError(f"keypoints {kpname!r}: evaluate_sequences detects its keypoints itself, so the set needs a "
                          "'detector' (a set derived from other sets, or read from files, runs through snakemake)")
    raw["keypoint_sets"] = {kpname: spec}
    if tasks is not None:
        from descbench.tasks import SCORING_TASKS

        unknown = [t for t in tasks if t not in SCORING_TASKS]
        if unknown:
            raise ConfigError(f"tasks: unknown scoring task(s) {', '.join(map(repr, unknown))}; the tasks are "
                              f"{', '.join(SCORING_TASKS)} (the first always runs)")
        for t in SCORING_TASKS.values():
            if t.section is not None:
                raw[t.section] = {**(raw.get(t.section) or {}), "enabled": t.name in tasks}
    return raw, kpname


def _ensure_scenes(cfg: dict, scenes: list[str]) -> Path:
    """The folder holding the scenes every job reads; the demo's scenes are generated when absent
    (as the workflow's ``demo_scene`` rule does), any other dataset must be there already."""
    from descbench.datasets import scene_root, source_root
    from descbench.datasets.layout import scene_files

    root = scene_root(cfg)
    if cfg["dataset"] == "demo" and not cfg.get("resize"):
        from descbench.datasets.demo import generate_scene
        from descbench.datasets.hpatches import N_IMAGES

        for scene in scenes:
            if not all(p.exists() for p in scene_files(root / scene, check_exists=False, n_images=N_IMAGES).all_paths()):
                generate_scene(scene, source_root(cfg), seed=cfg["demo"]["seed"])
    elif not root.is_dir():
        raise DataError(f"the scenes of dataset {cfg['dataset']!r} are not at {root}; prepare them once with the workflow "
                        f"(e.g. `snakemake --cores 2 --config dataset={cfg['dataset']}`), or set data_dir to where they are")
    return root


def _as_array(out: Any) -> Any:
    """A torch tensor's values as a numpy array (any device); anything else unchanged (checked later)."""
    if hasattr(out, "detach") and hasattr(out, "cpu") and hasattr(out, "numpy"):
        return out.detach().cpu().numpy()
    return out


def _progress(total: int, desc: str, enabled: bool, unit: str = "image"):
    """A tqdm bar on stderr over ``total`` steps (``enabled``), else a no-op with the same methods."""
    if not enabled:
        return nullcontext(_NoBar())
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


def evaluate_sequences(describe: Callable[[np.ndarray, Any], Any], *, dataset: str | Path = "demo",
                       keypoints: str | dict = "sift", tasks: Sequence[str] | None = None,
                       config: dict | str | Path | None = None, name: str = "custom", color: bool = False,
                       descriptor_kind: str | None = None, data_dir: str | Path | None = None,
                       out_dir: str | Path | None = None, progress: bool = True) -> pd.DataFrame:
    """Score a descriptor given as a Python callable on image sequences, in this process.

    ``describe(image, keypoints) -> [N, D]`` is called once per image, as the ``python`` descriptor
    family calls its callable (:mod:`descbench.descriptors.python`): ``image`` is the image as
    uint8 (grey ``H x W``, or BGR ``H x W x 3`` with ``color=True``), ``keypoints`` a
    :class:`descbench.keypoints.ImageKeypoints` (x, y, size, angle, ... in OpenCV's conventions);
    it returns one row per keypoint, in order: floats (stored as float32, compared by L2) or uint8
    with ``descriptor_kind`` (``"binary"``: packed bits, Hamming; ``"float"``: 8-bit values, L2).
    A torch tensor is taken as its values (``.detach().cpu().numpy()``); run the model under
    ``torch.no_grad()`` on its device inside the callable. A wrong row count, a 1-D array, no
    column, NaN, a width or dtype that changes between images, or an exception raised by the
    callable is a :class:`~descbench.errors.DataError` naming the scene and image; nothing is
    returned then.

    Args:
        dataset: ``"demo"`` (generated into ``data_dir`` when absent), ``"hpatches"`` (downloaded
            by the workflow beforehand) or the path of a folder of your own scenes.
        keypoints: a keypoint set of ``config`` (with a ``detector``), a built-in set (``"sift"``:
            OpenCV SIFT, 40 px border) or a keypoint-set dict in ``config.yaml``'s format.
        tasks: the scoring tasks to run (:data:`descbench.tasks.SCORING_TASKS` folder names:
            ``scores`` keypoint retrieval, always run; ``verification``; ``matching``); ``None``:
            those the config enables.
        config: settings in ``config.yaml``'s format (a dict or a YAML file); its ``descriptors``
            and ``sweeps`` are ignored. ``None``: the schema's defaults (those of ``config.yaml``).
        name: the descriptor's name in the table and the result files.
        data_dir: where the datasets are (default: the config's ``data_dir``, ``data``).
        out_dir: keep the result files there, in the workflow's layout
            (``keypoints/``, ``descriptors/``, the tasks' folders and ``report/``); default: a
            temporary folder, removed afterwards.
        progress: a progress bar (tqdm, on stderr) while the callable runs.

    Returns:
        The comparison table (one row: ``descriptor``, ``keypoint_set``, every metric of the enabled
        tasks, their bootstrap intervals, ``metadata``, ``processing_time_ms``): the columns and
        values of the workflow's ``report/comparison.csv`` row for the same rows and settings.

    Examples:
        OpenCV's SIFT rows at the keypoints given, on two demo scenes (generated into a temporary
        folder), keypoint retrieval only:

        >>> import tempfile, cv2
        >>> def sift(image, kps):
        ...     cv_kps = [cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), int(o))
        ...               for x, y, s, a, r, o in zip(kps.x, kps.y, kps.size, kps.angle, kps.response, kps.octave)]
        ...     return cv2.SIFT_create().compute(image, cv_kps)[1]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     table = evaluate_sequences(sift, name="sift", tasks=["scores"], data_dir=tmp, progress=False,
        ...                                config={"scenes": ["i_coffee", "v_coins"]})
        >>> table.loc[0, ["descriptor", "keypoint_set"]].tolist()
        ['sift', 'sift']
        >>> bool(0.5 < table.loc[0, "true_map_micro"] <= 1.0), "keypoint_verification_ap" in table
        (True, False)

        A callable that returns one row too few is an error naming the image:

        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     evaluate_sequences(lambda image, kps: sift(image, kps)[1:], tasks=["scores"], data_dir=tmp,
        ...                        progress=False, config={"scenes": ["i_coffee"]})
        Traceback (most recent call last):
        ...
        descbench.errors.DataError: descriptor callable '...<lambda>' returned shape (..., 128) for the ... keypoints of descriptor 'custom', scene i_coffee, image 1 (.../1.ppm); return one row per keypoint, in order: shape (..., D)
    """
    from descbench import io
    from descbench.config import score_job_sections, validate_config_for_supplied_descriptor
    from descbench.datasets import list_scenes
    from descbench.datasets.layout import pairs_mode, read_image, scene_files
    from descbench.descriptors import check_rows
    from descbench.descriptors.python import call_descriptor, checked_output
    from descbench.jobs.common import read_keypoints
    from descbench.jobs.descriptors import image_rows, write_descriptors
    from descbench.jobs.distractors import build_distractor_bank
    from descbench.jobs.keypoints import detect_batch
    from descbench.jobs.score import score_batch
    from descbench.params import SCHEMA_PATH
    from descbench.paths import ResultPaths, scene_batches
    from descbench.report.table import comparison, entry_files, write

    if not callable(describe):
        raise ConfigError(f"describe: expected a callable describe(image, keypoints) -> [N, D], got {type(describe).__name__}")
    if descriptor_kind not in (None, "binary", "float"):
        raise ConfigError(f"descriptor_kind={descriptor_kind!r}: use 'binary' (packed bits), 'float' (8-bit values) or None")
    raw, kpset = _raw_config(dataset, keypoints, config, tasks, data_dir, name)
    cfg = validate_config_for_supplied_descriptor(raw, SCHEMA_PATH, name)
    label = f"{getattr(describe, '__module__', None) or '?'}:{getattr(describe, '__qualname__', type(describe).__name__)}"
    spec = {"family": "python", "params": {"callable": label, "kwargs": {}, "color": bool(color), "descriptor_kind": descriptor_kind},
            "overrides": {}, "features_of": None, "keypoint_sets": None}
    cfg["descriptors"] = {name: spec}
    scenes = list_scenes(cfg)
    scene_root = _ensure_scenes(cfg, scenes)
    batches = scene_batches(scenes, cfg["execution"]["scenes_per_job"])

    with (nullcontext(out_dir) if out_dir is not None else tempfile.TemporaryDirectory(prefix="descbench-")) as root:
        paths = ResultPaths(Path(root), batches)
        for batch in batches:
            detect_batch(paths, scene_root, batch, kpset, cfg["keypoint_sets"][kpset])
        files_of = {s: scene_files(scene_root / s) for s in scenes}
        n_images = sum(f.n_images for f in files_of.values())
        with _progress(n_images, f"describe ({name})", progress) as bar:
            for scene in scenes:
                kp_file = Path(paths.keypoints(kpset, scene))
                kp = read_keypoints(kp_file)
                files = files_of[scene]

                def rows(k, image_path, kps, where):
                    what = f"{where} ({image_path})"
                    out = call_descriptor(describe, label, (read_image(image_path, color=bool(color)), kps), {}, what, "fix the callable")
                    d = checked_output(_as_array(out), len(kps), label, what, descriptor_kind, "descriptor_kind")
                    bar.update(1)
                    return check_rows(d, len(kps), f"descriptor callable '{label}'", image_path, where)

                blocks, images = image_rows(files, kp.per_image, name, rows)
                write_descriptors(blocks, images, name, spec, scene, kp, Path(paths.descriptors(kpset, name, scene)))
        sections = score_job_sections(cfg, name)
        if "verification" in sections:
            build_distractor_bank(paths, kpset, name, sections["verification"], Path(paths.distractor_bank(kpset, name)))
        for batch in batches:
            score_batch(paths, scene_root, batch, kpset, name, sections, None, pairs_mode(cfg))
        entries = [entry_files(paths, kpset, name, scenes, cfg)]
        if out_dir is None:
            return comparison(entries, cfg)[0]
        return write(entries, cfg, Path(out_dir) / "report", {"dataset": cfg["dataset"], "config": cfg, "versions": io.versions()})


# ----------------------------------------------------------------------------- patches

PATCH_BENCHMARKS = ("hpatches_benchmark", "hbench")


def _torch_module(describe) -> bool:
    torch = sys.modules.get("torch")  # a torch module can only come from a process that imported torch
    return torch is not None and isinstance(describe, torch.nn.Module)


def _module_rows(net, like: str):
    """``rows(patches u8 [N, 65, 65]) -> float32 [N, D]`` of a torch module fed as descriptor family
    ``like`` feeds its own network (:func:`descbench.descriptors.kornia_nets.hpatches_input`,
    :func:`~descbench.descriptors.kornia_nets.net_rows`), on the module's device; and the filled
    family params that say how."""
    from descbench.descriptors import check_descriptor_params
    from descbench.descriptors import kornia_nets as kn

    if like not in kn.NETS:
        raise ConfigError(f"like={like!r}: a torch module is fed as one of the patch networks' families "
                          f"({', '.join(kn.NETS)}) feeds its own; pass one of those")
    import torch

    first = next(net.parameters(), None)
    dev = first.device if first is not None else torch.device("cpu")
    params = check_descriptor_params(like, {"weights": "random", "device": dev.type}, f"like ({like})")

    def rows(patches):
        return kn.net_rows(net, dev, like, kn.hpatches_input(patches, params), params)

    return rows, params


def evaluate_patches(describe: Callable[[np.ndarray], Any], *, split: str = "full",
                     tasks: Sequence[str] = ("verification", "matching", "retrieval"),
                     benchmark: str = "hpatches_benchmark", like: str = "hardnet", source: str | Path = "generated",
                     dataset: str | Path = "demo", config: dict | str | Path | None = None, name: str = "custom",
                     descriptor_kind: str | None = None, data_dir: str | Path | None = None,
                     out_dir: str | Path | None = None, progress: bool = True) -> pd.DataFrame:
    """Score a patch descriptor (a callable or a torch module) on the HPatches patch benchmarks, in this process.

    The workflow's patch benchmark steps (:mod:`descbench.patches.stages`: the patch dataset, the
    task files, the evaluation, the report's table) on the rows ``describe`` gives each strip of
    65 x 65 patches:

    - a **torch module** (``torch.nn.Module`` taking ``[B, 1, n, n]`` float32) is fed exactly as
      the descriptor family ``like`` (default ``"hardnet"``) feeds its own network: each patch
      resized to that family's input size and normalised by its convention, in that family's batch
      size on the module's device, under ``torch.inference_mode()`` and in ``eval()`` mode (its
      mode is restored afterwards), then that family's L2 step. The rows then equal the workflow's
      ``like`` family loaded with the module's weights (tested for kornia's HardNet);
    - any other **callable** ``describe(patches) -> [N, D]`` gets one strip's patches as uint8
      ``[N, 65, 65]`` and returns one row per patch: floats (L2) or uint8 with ``descriptor_kind``.

    Rows of the wrong count, NaN, a dtype or width that changes between strips, or an exception
    raised by the callable are a :class:`~descbench.errors.DataError` naming the sequence and strip.

    Args:
        split: the hpatches-benchmark split (``a``, ``b``, ``c``, ``illum``, ``view``, ``full``;
            ``a``-``c`` need HPatches' sequence names).
        tasks: hpatches-benchmark's tasks (``verification``, ``matching``, ``retrieval``).
        benchmark: ``"hpatches_benchmark"`` (one row per split, percent) or ``"hbench"`` (HBench's
            matching and retrieval mAP, its ``patches.hbench`` settings).
        like: the family whose input convention feeds a torch module.
        source: ``"generated"`` (patches cut from ``dataset``'s scenes, ``patches.generate``),
            ``"hpatches_release"`` (downloaded by the workflow beforehand) or a folder of patch
            sequences in hpatches-release's layout.
        dataset: the scenes patches are generated from (``"demo"``, ``"hpatches"``, a folder).
        config: settings in ``config.yaml``'s format (its ``patches`` section: task sizes, seeds).
        name: the descriptor's name in the table and the files.
        out_dir: keep the files (``patches/dataset``, ``patches/descriptors``, ``patches/tasks``,
            ``patches/eval`` and ``report/patches``); default: a temporary folder, removed.

    Returns:
        The patch report's table of the benchmark (``report/patches/hpatches_benchmark.csv`` or
        ``hbench.csv``: the rows of this descriptor).

    Examples:
        A toy descriptor (the patch's mean-subtracted pixels at 8 x 8) on two demo scenes'
        generated patches, hpatches-benchmark's matching task:

        >>> import tempfile, cv2
        >>> def tiny(patches):
        ...     small = np.stack([cv2.resize(p, (8, 8), interpolation=cv2.INTER_AREA) for p in patches]).astype(np.float32)
        ...     return (small - small.mean(axis=(1, 2), keepdims=True)).reshape(len(patches), 64)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     table = evaluate_patches(tiny, tasks=["matching"], data_dir=tmp, progress=False, name="tiny",
        ...                              config={"scenes": ["i_coffee", "v_coins"], "patches": {"generate": {"max_patches": 40}}})
        >>> table.loc[0, ["descriptor", "split"]].tolist()
        ['tiny', 'full']
        >>> bool(0 < table.loc[0, "matching_map"] <= 100), "verification_balanced_auc" in table
        (True, False)
    """
    from descbench import io
    from descbench.config import validate_config_for_supplied_descriptor
    from descbench.datasets import list_scenes
    from descbench.descriptors.python import call_descriptor, checked_output
    from descbench.params import SCHEMA_PATH
    from descbench.patches import PATCH_TYPES
    from descbench.patches import stages
    from descbench.patches.describe import write_sequence_descriptors
    from descbench.patches.layout import read_strip, strip_path, validate_patch_dataset
    from descbench.report import patches as report

    if not callable(describe):
        raise ConfigError(f"describe: expected a torch module or a callable describe(patches) -> [N, D], got {type(describe).__name__}")
    if benchmark not in PATCH_BENCHMARKS:
        raise ConfigError(f"benchmark={benchmark!r}: use one of {', '.join(PATCH_BENCHMARKS)}")
    raw = _load_config(config, dataset, data_dir)
    raw.setdefault("keypoint_sets", {"sift": {"detector": "sift"}})
    pcfg = dict(raw.get("patches") or {})
    if str(source) in ("generated", "hpatches_release"):
        pcfg["source"] = str(source)
    else:
        pcfg["source"], pcfg["path"] = "folder", str(source)
    pcfg.update(enabled=True, descriptors=[name], csv={})
    pcfg["hbench"] = {**(pcfg.get("hbench") or {}), "enabled": benchmark == "hbench"}
    pcfg["hpatches_benchmark"] = {**(pcfg.get("hpatches_benchmark") or {}), "enabled": benchmark == "hpatches_benchmark",
                                  "splits": [split], "tasks": list(tasks)}
    pcfg["workbench"] = {**(pcfg.get("workbench") or {}), "enabled": False}
    raw["patches"] = pcfg
    cfg = validate_config_for_supplied_descriptor(raw, SCHEMA_PATH, name)
    pc = cfg["patches"]
    module = describe if _torch_module(describe) else None
    if module is not None:
        rows_of, params = _module_rows(module, like)
        label = f"torch module {type(describe).__module__}.{type(describe).__qualname__}, fed like '{like}'"
        how = {"family": like, "params": params, "module": label}
    else:
        if descriptor_kind not in (None, "binary", "float"):
            raise ConfigError(f"descriptor_kind={descriptor_kind!r}: use 'binary' (packed bits), 'float' (8-bit values) or None")
        label = f"{getattr(describe, '__module__', None) or '?'}:{getattr(describe, '__qualname__', type(describe).__name__)}"
        rows_of, how = describe, {"callable": label, "descriptor_kind": descriptor_kind}

    scenes = list_scenes(cfg) if pc["source"] == "generated" else []
    scene_root = _ensure_scenes(cfg, scenes) if scenes else None
    with (nullcontext(out_dir) if out_dir is not None else tempfile.TemporaryDirectory(prefix="descbench-")) as root:
        root = Path(root)
        patch_root, seqs = stages.patch_root_and_sequences(cfg, root, scenes)
        if pc["source"] == "generated":
            for seq in seqs:
                stages.generate(scene_root / seq, patch_root / seq, pc["generate"])
        else:
            validate_patch_dataset(patch_root, seqs)
        files = []
        was_training = module.training if module is not None else None
        try:
            if module is not None:
                module.eval()
            with _progress(len(seqs) * len(PATCH_TYPES), f"describe patches ({name})", progress, unit="strip") as bar:
                for seq in seqs:
                    descs = {}
                    for t in PATCH_TYPES:
                        path = strip_path(patch_root / seq, t)
                        patches = read_strip(path)
                        what = f"descriptor '{name}', sequence {seq}, strip {t} ({path})"
                        out = call_descriptor(rows_of, label, (patches,), {}, what, "fix the descriptor")
                        descs[t] = checked_output(_as_array(out), len(patches), label, what, descriptor_kind, "descriptor_kind",
                                                 unit=("patch", "patches"))
                        bar.update(1)
                    out_file = root / "patches" / "descriptors" / name / f"{seq}.parquet"
                    write_sequence_descriptors(out_file, descs, {"descriptor": name, "sequence": seq,
                                                                 "centre_keypoint": pc["centre_keypoint"], **how})
                    files.append(out_file)
        finally:
            if module is not None:
                module.train(was_training)
        tasks_dir, eval_dir = root / "patches" / "tasks", root / "patches" / "eval" / name
        stages.build_tasks(patch_root, seqs, pc, tasks_dir)
        stages.evaluate(tasks_dir, files, name, pc, eval_dir)
        if out_dir is not None:
            hb, hp = report.write([eval_dir], [name], root / "report" / "patches")
        else:
            t, _ = io.read_table(eval_dir / f"{'hbench' if benchmark == 'hbench' else 'hpatches_benchmark'}.parquet")
            hb, hp = (report.hbench_table({name: t.to_pandas()}), None) if benchmark == "hbench" else \
                (None, report.hpbench_table({name: t.to_pandas()}))
    return hb if benchmark == "hbench" else hp
