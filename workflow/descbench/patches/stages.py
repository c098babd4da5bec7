"""The patch benchmarks' job steps (called by ``python -m descbench patches <step>`` from
``workflow/rules/patches.smk``): generate a sequence's patches, describe a sequence, build the
task files, evaluate one descriptor, write the report tables. Each step is a thin composition of
the pure modules of :mod:`descbench.patches`; outputs are written atomically.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from descbench import io
from descbench.errors import ConfigError, DataError
from descbench.patches import PATCH_TYPES
from descbench.patches.checks import CENTRE_KEYPOINTS
from descbench.report.patches import WORKBENCH_TIMING



def generate(scene_dir: Path, out_dir: Path, params: dict) -> int:
    """Patches of one sequence-dataset scene into ``out_dir`` (the sequence's folder); ``params``:
    the validated ``patches.generate`` section (defaults filled)."""
    from descbench.patches.generate import PatchGenParams, generate_sequence_patches

    return generate_sequence_patches(scene_dir, out_dir, PatchGenParams.from_config(params))


def describe(patch_dir: Path, out: Path, name: str, spec: dict, centre_keypoint: str) -> None:
    """One descriptor of the 16 strips of one patch sequence -> one Parquet file (``out``). A
    ``composite`` spec carries its ``components`` (name -> ``{family, params}``,
    :func:`descbench.patches.checks.patch_components`): each is described, then the rows are fused
    (:func:`describe_composite`)."""
    from descbench.patches.describe import describe_patches, patch_settings, write_sequence_descriptors
    from descbench.patches.layout import read_strip, strip_path

    geometry = CENTRE_KEYPOINTS[centre_keypoint]
    if spec["family"] == "composite":
        descs, meta = describe_composite(patch_dir, name, spec, centre_keypoint)
        write_sequence_descriptors(out, descs, meta)
        return
    params = spec.get("params", {})
    key = f"descriptors.{name}.params"
    descs = {}
    for t in PATCH_TYPES:
        path = strip_path(patch_dir, t)
        descs[t] = describe_patches(read_strip(path), spec["family"], params, where=str(path), config_key=key, **geometry)
    meta = {"descriptor": name, "sequence": Path(patch_dir).name, "centre_keypoint": centre_keypoint,
            **patch_settings(spec["family"], params, config_key=key, **geometry)}
    write_sequence_descriptors(out, descs, meta)


def describe_composite(patch_dir: Path, name: str, spec: dict, centre_keypoint: str) -> tuple[dict, dict]:
    """A composite on the patches of one sequence: every component described at the centre keypoint
    (as its own descriptor would be), then per strip the component rows fused by
    :func:`descbench.descriptors.composite.aggregate` (``patches=True``: with ``arithmetic:
    workbench`` the workbench's ``PatchFusionExtractor``, :func:`descbench.descriptors.fusion.fuse`
    for ``final_norm: l2``). Returns (type -> rows, provenance)."""
    from descbench.descriptors.composite import aggregate
    from descbench.patches.describe import describe_patches, patch_settings
    from descbench.patches.layout import read_strip, strip_path

    geometry = CENTRE_KEYPOINTS[centre_keypoint]
    params = spec["params"]
    names = [c["descriptor"] for c in params["components"]]
    comps = spec.get("components") or {}
    missing = [n for n in names if n not in comps]
    if missing:
        raise ConfigError(f"the patch spec of composite '{name}' lacks its components {missing} (family and params); "
                          "the workflow writes them (patch_describe_spec); pass them under 'components'")
    strips = {t: read_strip(strip_path(patch_dir, t)) for t in PATCH_TYPES}
    blocks = {t: [] for t in PATCH_TYPES}
    settings = {}
    for n in names:
        c = comps[n]
        key = f"descriptors.{n}.params"
        for t in PATCH_TYPES:
            blocks[t].append(describe_patches(strips[t], c["family"], c.get("params", {}), where=str(strip_path(patch_dir, t)),
                                              config_key=key, **geometry))
        settings[n] = patch_settings(c["family"], c.get("params", {}), config_key=key, **geometry)
    descs = {t: aggregate(blocks[t], params, [f"{i} ({n})" for i, n in enumerate(names)],
                          f"composite '{name}', {strip_path(patch_dir, t)}", patches=True) for t in PATCH_TYPES}
    meta = {"descriptor": name, "sequence": Path(patch_dir).name, "centre_keypoint": centre_keypoint,
            "family": "composite", "params": params, "components": settings}
    return descs, meta


def import_csv(csv_root: Path, patch_dir: Path, out: Path, name: str, binary_packed: bool) -> None:
    """Precomputed descriptors in hpatches-benchmark's layout (``<root>/<seq>/<type>.csv``) of one
    sequence -> the same Parquet file as :func:`describe` (row counts checked against the strips)."""
    from descbench.patches.describe import read_hpatches_csv, write_sequence_descriptors
    from descbench.patches.layout import sequence_patch_count

    seq = Path(patch_dir).name
    descs = read_hpatches_csv(csv_root, seq, sequence_patch_count(patch_dir), binary_packed=binary_packed)
    write_sequence_descriptors(out, descs, {"descriptor": name, "sequence": seq, "source": "hpatches_csv",
                                            "csv_root": str(csv_root), "binary_packed": binary_packed})


def load_descriptors(files: list[Path]) -> dict[str, dict[str, np.ndarray]]:
    """sequence -> type -> [N, D] from the per-sequence Parquet files (one descriptor); all files
    must hold one dtype and dimension."""
    from descbench.patches.describe import read_sequence_descriptors

    out, kinds = {}, set()
    for f in files:
        descs, meta = read_sequence_descriptors(f)
        seq = meta["params"]["sequence"]
        out[seq] = descs
        kinds.add((descs["ref"].dtype.str, descs["ref"].shape[1]))
    if len(kinds) > 1:
        raise DataError(f"the patch descriptor files {files[0].parent} hold different kinds {sorted(kinds)} "
                        "(dtype, dimension); rebuild them with one descriptor definition")
    return out


def write_json(path: Path, obj) -> None:
    io.write_text(path, json.dumps(obj, sort_keys=True, indent=1, default=str) + "\n")


def patch_root_and_sequences(cfg: dict, experiment_dir: Path | str, scenes: list[str]) -> tuple[Path, list[str]]:
    """Where a run's patch sequences are, and which (``patches.sequences``, default all of the
    source's), for the validated config ``cfg``: ``generated`` from the run's ``scenes`` (one folder
    per scene under ``<experiment_dir>/patches/dataset``), ``hpatches_release`` (its 116 sequences
    under ``<data_dir>/hpatches``), or the sequence folders of ``patches.path``. A sequence that is
    not the source's, or a folder without sequences, is a :class:`ConfigError` naming the key."""
    from descbench.patches.layout import list_patch_sequences

    pcfg = cfg["patches"]
    src, chosen = pcfg["source"], pcfg["sequences"]
    if src == "generated":
        root, available = Path(experiment_dir) / "patches" / "dataset", list(scenes)
    elif src == "hpatches_release":
        from descbench.datasets import hpatches_scenes
        from descbench.patches.download import PATCHES_ROOT

        root, available = Path(cfg["data_dir"]) / "hpatches" / PATCHES_ROOT, hpatches_scenes("full")
    else:
        root = Path(pcfg["path"])
        available = list_patch_sequences(root) if root.is_dir() else []
        if not available:
            raise ConfigError(f"patches.path {root} holds no patch sequence folder "
                              "(hpatches-release layout: <seq>/ref.png, e1.png .. t5.png)")
    missing = [s for s in (chosen or []) if s not in available]
    if missing:
        raise ConfigError(f"patches.sequences {missing} are not among the {src} patch "
                          f"sequences ({', '.join(available[:8])}{' ...' if len(available) > 8 else ''})")
    return root, list(chosen or available)


# ----------------------------------------------------------------------------- task files


def hbench_sequences(sequences: list[str], split: str) -> list[str]:
    """The sequences of HBench's task files: all of them, or HPatches split a's train / test list
    (HBench's train_* / test_* files) among those present."""
    if split == "all":
        return list(sequences)
    from descbench.patches.hpbench import load_splits

    chosen = [s for s in load_splits()["a"][split] if s in set(sequences)]
    if not chosen:
        raise ConfigError(f"patches.hbench.split '{split}' selects HPatches split a's {split} sequences, and none of them is "
                          f"among this dataset's {len(sequences)} patch sequences; use split: all")
    return chosen


def build_hbench_tasks(out_dir: Path, sequences: list[str], counts: dict[str, int], hcfg: dict) -> None:
    """HBench's task files: the four matching ``.benchmark`` files (seed 002) with their ``.labels``
    (the ground truth HBench's file evaluator ``matching_eval.m`` reads), and the retrieval
    ``.benchmark`` / ``.labels`` files (seed 003) for every pool size and seed, easy and hard."""
    from descbench.patches import hbench

    seqs = hbench_sequences(sequences, hcfg["split"])
    hbench.write_matching_benchmarks(out_dir / "matching", seqs, split=hcfg["split"])
    hbench.write_matching_labels_files(out_dir / "matching", hbench.matching_tasks(seqs, split=hcfg["split"]),
                                       {f"{s}.{t}": int(counts[s]) for s in seqs for t in PATCH_TYPES})
    for n in hcfg["retrieval_sequences"]:
        if n > len(seqs):
            raise ConfigError(f"patches.hbench.retrieval_sequences asks for pools of {n} sequences, but the "
                              f"{hcfg['split']} sequences are {len(seqs)}; lower it")
        for seed in range(hcfg["retrieval_seeds"]):
            for jitter in ("e", "h"):
                hbench.write_retrieval_task(out_dir / "retrieval", hcfg["split"], seqs, counts, n, seed, jitter,
                                            queries_per_sequence=hcfg["retrieval_queries_per_sequence"])


def build_tasks(patch_root: Path, sequences: list[str], pcfg: dict, out_dir: Path) -> None:
    """Every enabled benchmark's task files into ``out_dir`` (``hbench/``, ``hpatches_benchmark/``)
    and ``counts.json`` (patches per sequence)."""
    from descbench.patches.layout import sequence_patch_count

    out_dir = Path(out_dir)
    counts = {s: sequence_patch_count(Path(patch_root) / s) for s in sequences}
    if pcfg["hbench"]["enabled"]:
        build_hbench_tasks(out_dir / "hbench", sequences, counts, pcfg["hbench"])
    if pcfg["hpatches_benchmark"]["enabled"]:
        build_hpbench_tasks(out_dir / "hpatches_benchmark", Path(patch_root), sequences, counts, pcfg["hpatches_benchmark"],
                            pcfg["source"])
    write_json(out_dir / "counts.json", counts)


# ----------------------------------------------------------------------------- evaluation


def evaluate_hbench(tasks_dir: Path, descs: dict, out_dir: Path) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """HBench for one descriptor: its ``.results`` files written in the seeds' formats into
    ``out_dir``, then evaluated from the files by :func:`evaluate_hbench_files` (the path other
    tools' files take, so the two cannot diverge)."""
    from descbench.patches import hbench

    for f in sorted((tasks_dir / "matching").glob("*.benchmark")):
        hbench.write_matching_results(out_dir / "matching" / f"{f.stem}.results",
                                      hbench.compute_matching_results(hbench.read_matching_benchmark(f), descs))
    for f in sorted((tasks_dir / "retrieval").glob("*.benchmark")):
        hbench.write_retrieval_results(out_dir / "retrieval" / f"{f.stem}.results",
                                       hbench.compute_retrieval_results(hbench.read_retrieval_benchmark(f), descs))
    counts = {s: d["ref"].shape[0] for s, d in descs.items()}
    return evaluate_hbench_files(tasks_dir, out_dir, counts, details=True)


def hpbench_split(name: str, sequences: list[str]) -> dict:
    """A split of hpatches-benchmark: HPatches' own list when all its test sequences are here
    (names from splits.json, file order), else the dataset's full / illum / view (make_splits)."""
    from descbench.patches import hpbench

    shipped = hpbench.load_splits()
    present = set(sequences)
    if name in shipped and set(shipped[name]["test"]) <= present:
        return {"name": name, "test": list(shipped[name]["test"])}
    own = hpbench.make_splits(sequences)
    if name not in own:
        raise ConfigError(f"patches.hpatches_benchmark.splits: split '{name}' is not available for these "
                          f"{len(sequences)} patch sequences (splits a/b/c need their 40 HPatches test sequences; "
                          f"available: {', '.join(sorted(own))})")
    return own[name]


def shipped_retrieval_applies(source: str, name: str, split: dict) -> bool:
    """Whether hpatches-benchmark's official retrieval files index this data: hpatches-release
    patches and an HPatches split with all its sequences (their indices are hpatches-release's)."""
    from descbench.patches import hpbench

    shipped = hpbench.load_splits()
    return source == "hpatches_release" and name in shipped and list(split["test"]) == list(shipped[name]["test"])


def build_hpbench_tasks(out_dir: Path, patch_root: Path, sequences: list[str], counts: dict[str, int], hcfg: dict,
                        source: str) -> None:
    """hpatches-benchmark's task CSVs (gzip) per split: verification lists drawn as its gen_verif
    (RandomState(42)), retrieval as its gen_retrieval unless the official files apply
    (:func:`shipped_retrieval_applies`); ``splits.json`` records each split's sequences."""
    from descbench.patches import hpbench
    from descbench.patches.layout import read_strip, strip_path

    splits = {name: hpbench_split(name, sequences) for name in hcfg["splits"]}
    write_json(out_dir / "splits.json", splits)
    stds = None
    for name, sp in splits.items():
        if "verification" in hcfg["tasks"]:
            pairs = hpbench.gen_verification(counts, sp, n_pos=hcfg["verification_pairs"])
            hpbench.write_verification_tasks(pairs, out_dir, name, compress=True)
        if "retrieval" in hcfg["tasks"] and not shipped_retrieval_applies(source, name, sp):
            if stds is None:  # the contrast of every ref patch (gen_retrieval keeps std > 10)
                stds = {s: hpbench.ref_patch_std(read_strip(strip_path(patch_root / s, "ref")).reshape(-1, 65))
                        for s in sequences}
            q, d = hpbench.gen_retrieval(counts, sp, stds, n_queries=hcfg["retrieval_queries"],
                                         n_distractors=hcfg["retrieval_distractors"])
            hpbench.write_retrieval_tasks(q, d, out_dir, name, compress=True)


def evaluate_hpbench(tasks_dir: Path, descs: dict, hcfg: dict, source: str) -> tuple[pd.DataFrame, dict]:
    """hpatches-benchmark's three tasks on every configured split: the tidy table (percent, its
    ``results.py`` aggregation) and the per-case details (fractions)."""
    from descbench.patches import hpbench

    splits = json.loads((tasks_dir / "splits.json").read_text())
    tables, details = [], {}
    for name in hcfg["splits"]:
        sp = splits[name]
        ver = hpbench.read_verification_tasks(tasks_dir, name) if "verification" in hcfg["tasks"] else None
        retr = None
        if "retrieval" in hcfg["tasks"]:
            retr = hpbench.read_retrieval_tasks(name, None if shipped_retrieval_applies(source, name, sp) else tasks_dir)
        res = hpbench.evaluate_hpbench(descs, sp, ver, retr, tasks=hcfg["tasks"])
        for task, r in res.items():
            tables.append(r.table)
            details[f"hpbench_{task}_{name}"] = r.details
    return pd.concat(tables, ignore_index=True), details


def workbench_metadata(pcfg: dict) -> str:
    """The ``metadata`` cell of the workbench's row: its ``key=value;`` pairs in key order (as its
    ``patch_benchmark`` writes them, cli/patch_benchmark.cpp:478-489), with descbench's settings:
    the three difficulties (all evaluated), ``grouping``, ``precision``, ``scenes`` (when
    ``patches.sequences`` names them) and ``source``."""
    w = pcfg["workbench"]
    pairs = {"difficulty_easy": "true", "difficulty_hard": "true", "difficulty_tough": "true",
             "grouping": w["grouping"], "precision": w["precision"], "source": pcfg["source"]}
    if pcfg.get("sequences"):
        pairs["scenes"] = ",".join(pcfg["sequences"])
    return "".join(f"{k}={pairs[k]};" for k in sorted(pairs))


def evaluate_workbench(descs: dict[str, dict[str, np.ndarray]], name: str, pcfg: dict) -> tuple[pd.DataFrame, dict]:
    """The workbench's patch benchmark (:mod:`descbench.patches.workbench`) of one descriptor:
    its ``patch_benchmark_results`` row (:func:`~descbench.patches.workbench.aggregate`, at
    ``patches.workbench.precision`` and ``grouping``; ``processing_time_ms`` NaN, the measured
    time is the caller's), and the details: ``workbench_sequences`` (one
    :func:`~descbench.patches.workbench.score_sequence` row per sequence: each split's mAP,
    accuracy, patches, correct matches and files) and ``workbench_files`` (one row per scored
    target file: its mAP and accuracy). Sequences in ``patches.sequences``' order, else sorted
    by name (the workbench sorts the folder's paths). A descriptor that is not float32 (packed
    bits) is refused, naming it and the fix."""
    from descbench.patches import workbench as wb

    w = pcfg["workbench"]
    kinds = {d["ref"].dtype for d in descs.values()}
    if kinds != {np.dtype(np.float32)}:
        raise DataError(f"patch descriptor '{name}' holds {', '.join(sorted(map(str, kinds)))} rows; the workbench's patch "
                        "benchmark (patches.workbench.enabled) compares float32 descriptors with L2 only; remove "
                        f"'{name}' from patches.descriptors or set patches.workbench.enabled: false")
    order = list(descs) if pcfg.get("sequences") else sorted(descs)
    rows, files = [], []
    for seq in order:
        rows.append(wb.score_sequence(seq, descs[seq], name, [w["precision"]], file_rows=files))
    per_sequence = pd.concat(rows, ignore_index=True)
    table = wb.aggregate(per_sequence, grouping=w["grouping"], descriptor_name=name)
    table["metadata"] = workbench_metadata(pcfg)
    table["grouping"] = w["grouping"]
    return table, {"workbench_sequences": per_sequence, "workbench_files": pd.DataFrame(files)}


def evaluate(tasks_dir: Path, files: list[Path], name: str, pcfg: dict, out_dir: Path) -> None:
    """Every enabled patch benchmark for one descriptor into ``out_dir``: ``summary.parquet`` (tidy
    rows of both benchmarks), one Parquet file per detail table, HBench's ``.results`` files, and
    with ``patches.workbench.enabled`` ``workbench.parquet`` (:func:`evaluate_workbench`) with
    its wall time in ``workbench_timing.json`` (milliseconds and when it finished, UTC)."""
    tasks_dir, out_dir = Path(tasks_dir), Path(out_dir)
    descs = load_descriptors([Path(f) for f in files])
    meta = io.provenance("patch_evaluation", {"descriptor": name, "patches": pcfg},
                         descriptor_files=[str(f) for f in files])
    summary = []
    details: dict[str, pd.DataFrame] = {}
    if pcfg["hbench"]["enabled"]:
        rows, det = evaluate_hbench(tasks_dir / "hbench", descs, out_dir / "hbench")
        summary.append(rows.assign(split=pcfg["hbench"]["split"]))
        details.update(det)
    if pcfg["hpatches_benchmark"]["enabled"]:
        table, det = evaluate_hpbench(tasks_dir / "hpatches_benchmark", descs, pcfg["hpatches_benchmark"],
                                      pcfg["source"])
        io.write_table(pa.Table.from_pandas(table, preserve_index=False), out_dir / "hpatches_benchmark.parquet", meta)
        details.update(det)
    if pcfg["workbench"]["enabled"]:
        start = time.perf_counter()
        table, det = evaluate_workbench(descs, name, pcfg)
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        io.write_table(pa.Table.from_pandas(table, preserve_index=False), out_dir / "workbench.parquet", meta)
        details.update(det)
        write_json(out_dir / WORKBENCH_TIMING, {  # the wall time, outside the Parquet
            "processing_time_ms": elapsed_ms,
            "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")})
    if summary:
        io.write_table(pa.Table.from_pandas(pd.concat(summary, ignore_index=True), preserve_index=False),
                       out_dir / "hbench.parquet", meta)
    for key, df in details.items():
        if len(df):
            io.write_table(pa.Table.from_pandas(df, preserve_index=False), out_dir / "details" / f"{key}.parquet", meta)


def evaluate_hbench_files(tasks_dir: Path, results_dir: Path, counts: dict[str, int] | None = None,
                          details: bool = False):
    """HBench ``.results`` files written by any tool (``<results_dir>/matching/<task>.results``,
    ``<results_dir>/retrieval/<task>.results``) against the task files of ``tasks_dir`` (a
    run's ``patches/tasks/hbench`` or HBench's ``benchmarks/``): one row per task file and metric
    (matching: ``map`` and ``map_2nn_ratio``; retrieval: ``patch_map`` and ``image_map``).
    A matching task's ``.labels`` file, when present, must hold the identity correspondence
    (:func:`descbench.patches.hbench.check_identity_labels`: HPatches' and HBench's are).
    ``counts`` (sequence -> patches) enables the range checks. A task without a results file is
    an error naming the missing file. ``details``: also return the per-pair / per-query tables."""
    from descbench.patches import hbench

    tasks_dir, results_dir = Path(tasks_dir), Path(results_dir)
    n_patches = None if counts is None else {f"{s}.{t}": n for s, n in counts.items() for t in PATCH_TYPES}
    rows, per_pair, per_query = [], [], []
    for f in sorted((tasks_dir / "matching").glob("*.benchmark")):
        pairs = hbench.read_matching_benchmark(f)
        if f.with_suffix(".labels").is_file():  # HBench's ground truth: must be the identity descbench evaluates
            hbench.check_identity_labels(hbench.read_matching_labels(f.with_suffix(".labels"), pairs), n_patches)
        res = results_dir / "matching" / f"{f.stem}.results"
        if not res.is_file():
            raise DataError(f"no results file {res} for the matching task {f}; write it (seed 002 format) or remove the task")
        ev = hbench.evaluate_matching({f.stem: pairs}, {f.stem: hbench.read_matching_results(res, n_patches, pairs)}, n_patches)
        per_pair.append(ev.per_pair)
        for metric, col in (("map", "mean_ap"), ("map_2nn_ratio", "mean_ap_2nn_ratio")):
            rows.append({"benchmark": "hbench_matching", "task": f.stem, "metric": metric, "value": ev.per_task[col][0],
                         "n": int(ev.per_task.n_pairs[0])})
    for f in sorted((tasks_dir / "retrieval").glob("*.benchmark")):
        res = results_dir / "retrieval" / f"{f.stem}.results"
        if not res.is_file():
            raise DataError(f"no results file {res} for the retrieval task {f}; write it (seed 003 format) or remove the task")
        ev = hbench.evaluate_retrieval(hbench.read_retrieval_benchmark(f), hbench.read_retrieval_labels(f.with_suffix(".labels")),
                                       hbench.read_retrieval_results(res), n_patches)
        per_query.append(ev.per_query.assign(task=f.stem))
        for metric, value in (("patch_map", ev.patch_map), ("image_map", ev.image_map)):
            rows.append({"benchmark": "hbench_retrieval", "task": f.stem, "metric": metric, "value": value,
                         "n": len(ev.per_query)})
    if not rows:
        raise DataError(f"{tasks_dir} holds no matching/*.benchmark or retrieval/*.benchmark task file")
    table = pd.DataFrame(rows, columns=["benchmark", "task", "metric", "value", "n"])
    if not details:
        return table
    return table, {"hbench_matching_pairs": pd.concat(per_pair, ignore_index=True) if per_pair else pd.DataFrame(),
                   "hbench_retrieval_queries": pd.concat(per_query, ignore_index=True) if per_query else pd.DataFrame()}
