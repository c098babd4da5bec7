"""The ``inspect`` command: one self-contained HTML page showing, per image pair of a finished run,
the matches of a descriptor (and of a second one with ``--vs``), which of them are correct and
the pair's metrics (:mod:`descbench.report.inspect`).

What the run was is read from the spec files the workflow wrote for its report jobs,
``<results>/specs/report/{config,scenes,combos}.json`` (the validated config, the evaluated scene
list and the (keypoint set, descriptor) combinations): the same settings the report jobs ran
with. Its files are then found as every report job finds them, :class:`descbench.paths.ResultPaths`
over ``scene_batches(scenes, execution.scenes_per_job)`` (:func:`descbench.jobs.common.run_paths`).
The images are read from the run's scene folders (:func:`descbench.datasets.scene_root` of the
config), with a relative ``data_dir`` taken relative to the folder the run was made in
(``<results>`` minus ``<results_dir>/<experiment>``) unless ``--data-dir`` says where.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from descbench.errors import DescbenchError

SPECS = ("config", "scenes", "combos")


def add_commands(sub) -> dict:
    """The ``inspect`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("inspect", help="an HTML page of a finished run's matches per image pair (correct/incorrect, metrics, "
                                       "where a descriptor fails; --vs: the pairs where two descriptors differ most)")
    p.add_argument("--results", type=Path, required=True, help="the run's results folder, e.g. results/demo")
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--vs", default=None, help="a second descriptor of the run, to compare with")
    p.add_argument("--scenes", nargs="+", default=None, help="only these scenes (default: every scene of the run)")
    p.add_argument("--data-dir", type=Path, default=None, help="the run's data_dir, if not where the run's config says")
    p.add_argument("--metric", default="mma_at_3", help="the pairs-file column the summary and the --vs table use (default mma_at_3)")
    p.add_argument("--max-pairs", type=int, default=None,
                   help="draw at most this many pairs: the worst by --metric, or with --vs those where the two differ most "
                        "(default: every pair; the summary and the difference table always cover every pair)")
    p.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    return {"inspect": run}


def run(a: argparse.Namespace) -> None:
    descriptors = [a.descriptor] + ([a.vs] if a.vs else [])
    if a.max_pairs is not None and a.max_pairs < 1:
        raise DescbenchError(f"--max-pairs {a.max_pairs}: draw at least one pair (leave it out to draw every pair)")
    page = inspect_run(a.results, a.keypoint_set, descriptors, a.scenes, a.data_dir, a.metric, a.max_pairs)
    from descbench.fileops import write_text_atomic

    write_text_atomic(a.out, page)
    print(f"descbench: wrote {a.out}")


def run_settings(results: Path) -> tuple[dict, list[str], list[tuple[str, str]]]:
    """``(config, scenes, combos)`` of a finished run from its ``specs/report`` files."""
    from descbench.specfiles import read_spec

    if not Path(results).is_dir():
        raise DescbenchError(f"results folder {results} does not exist; pass --results <results_dir>/<experiment> "
                             "of a finished run (e.g. results/demo)")
    out = []
    for name in SPECS:
        path = Path(results) / "specs" / "report" / f"{name}.json"
        try:
            out.append(read_spec(path))
        except OSError:
            raise DescbenchError(f"{path} is missing: {results} is not the results folder of a finished run; run the "
                                 "workflow to the end (snakemake --cores N) or pass the right --results") from None
        except ValueError as exc:
            raise DescbenchError(f"{path} is not valid JSON ({exc}); rerun the workflow, which writes it again") from None
    cfg, scenes, combos = out
    return cfg, list(scenes), [tuple(c) for c in combos]


def scene_folder_root(results: Path, cfg: dict, data_dir: Path | None) -> Path:
    """The folder holding the run's scene folders (module docstring)."""
    from descbench.datasets import scene_root

    cfg = dict(cfg)
    workdir = Path(results).resolve().parent
    if not Path(cfg.get("results_dir", "results")).is_absolute():
        workdir = Path(results).resolve().parents[len(Path(cfg["results_dir"]).parts)]
    if data_dir is not None:
        cfg["data_dir"] = str(data_dir)
    elif not Path(cfg["data_dir"]).is_absolute():
        cfg["data_dir"] = str(workdir / cfg["data_dir"])
    if cfg["dataset"] == "folder" and not Path(cfg["folder"]["path"]).is_absolute():
        cfg["folder"] = {**cfg["folder"], "path": str(workdir / cfg["folder"]["path"])}
    return scene_root(cfg)


def _need(path, what: str, fix: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DescbenchError(f"{path} ({what}) is missing; {fix}")
    return path


def inspect_run(results: Path, kpset: str, descriptors: list[str], scenes: list[str] | None, data_dir: Path | None,
                metric: str, max_pairs: int | None = None) -> str:
    """The page of ``descriptors`` (one or two) on ``kpset`` over ``scenes`` (None: all) of the run
    in ``results`` (:func:`descbench.report.inspect.render_page`); the pairs drawn: every pair, or
    at most ``max_pairs`` (:func:`descbench.report.inspect.select_pairs`). Every pairs file is read
    (the summary and the diff table cover every pair); features and images only for drawn pairs."""
    import pandas as pd

    from descbench import io
    from descbench.datasets.layout import PairSpec, pair_homography, read_image, scene_files
    from descbench.jobs.common import read_features
    from descbench.metrics.matching import MatchingParams
    from descbench.paths import ResultPaths, scene_batches
    from descbench.report import inspect as page

    cfg, run_scenes, combos = run_settings(results)
    kpsets = sorted({k for k, _ in combos})
    if kpset not in kpsets:
        raise DescbenchError(f"--keypoint-set {kpset!r} is not a keypoint set of the run in {results}; use one of {', '.join(kpsets)}")
    known = [d for k, d in combos if k == kpset]
    for d in descriptors:
        if d not in known:
            raise DescbenchError(f"descriptor {d!r} was not evaluated on keypoint set {kpset!r} in {results}; use one of {', '.join(known)}")
    if len(set(descriptors)) != len(descriptors):
        raise DescbenchError(f"--vs {descriptors[1]!r} is --descriptor itself; name another descriptor of the run ({', '.join(known)})")
    if not cfg.get("matching", {}).get("enabled", False):
        raise DescbenchError(f"the run in {results} did not run the matching task (matching.enabled is false); enable it in "
                             "config.yaml and rerun the workflow")
    wanted = list(run_scenes) if scenes is None else list(scenes)
    for s in wanted:
        if s not in run_scenes:
            raise DescbenchError(f"scene {s!r} is not among the run's scenes ({', '.join(run_scenes)}); pick --scenes from them")
    paths = ResultPaths(Path(results), scene_batches(run_scenes, cfg["execution"]["scenes_per_job"]))
    params = MatchingParams.from_config(scoring=cfg["scoring"], matching=cfg["matching"])
    root = scene_folder_root(results, cfg, data_dir)
    rerun = "rerun the workflow (snakemake --cores N) to make it"

    tables: dict[str, list] = {d: [] for d in descriptors}
    rows: dict[str, dict] = {}  # scene -> descriptor -> (a, b) -> the pair's row
    for scene in wanted:  # every file checked before any work: the first missing one is named
        if not (root / scene).is_dir():
            raise DescbenchError(f"scene folder {root / scene} does not exist; pass --data-dir <the run's data_dir>")
        _need(paths.keypoints(kpset, scene), "keypoints", rerun)
        rows[scene] = {}
        for d in descriptors:
            _need(paths.descriptors(kpset, d, scene), f"descriptors of {d}", rerun)
            pf = _need(paths.task_file("matching", kpset, d, scene, "pairs.parquet"), f"matching pairs of {d}", rerun)
            table = io.read_table(pf, with_meta=False)[0].to_pandas()
            if metric not in table.columns:
                numeric = [c for c in table.columns if c not in page.KEY_COLUMNS]
                raise DescbenchError(f"--metric {metric!r} is not a column of {pf}; use one of {', '.join(numeric)}")
            tables[d].append(table)
            rows[scene][d] = {(int(r.get("query_image", 1)), int(r["pair"])): r for r in table.to_dict("records")}
    tables_all = {d: pd.concat(t, ignore_index=True) for d, t in tables.items()}
    chosen, selection = page.select_pairs(tables_all, metric, max_pairs)
    if chosen is None:  # every pair present for every descriptor, scene by scene
        chosen = [(scene, a, b) for scene in wanted for a, b in sorted(set.intersection(*(set(r) for r in rows[scene].values())))]

    sections_of: dict[tuple, object] = {}
    for scene in dict.fromkeys(k[0] for k in chosen):
        files = scene_files(root / scene)
        kp = paths.keypoints(kpset, scene)
        feats = {d: read_features(kp, paths.descriptors(kpset, d, scene)) for d in descriptors}
        sizes = feats[descriptors[0]].kmeta["image_sizes"]
        images: dict[int, object] = {}
        for _, a, b in (k for k in chosen if k[0] == scene):
            H = pair_homography(files, next((p for p in files.listed if (p.a, p.b) == (a, b)), PairSpec(a, b)))
            for k in (a, b):
                if k not in images:
                    images[k] = read_image(files.images[k - 1], color=True)
            views = {}
            for d in descriptors:
                f = feats[d]
                views[d] = page.inspect_pair(scene, a, b, d, f.per_image[a].xy, f.by_image[a], f.per_image[b].xy, f.by_image[b], H,
                                             tuple(sizes[str(a)]), tuple(sizes[str(b)]), rows[scene][d][(a, b)], params)
            sections_of[(scene, a, b)] = page.pair_section(images[a], images[b], views)
    sections = [sections_of[k] for k in chosen]
    run_info = {"results": results, "keypoint_set": kpset, "tau_px": params.tau_px, "ransac_px": params.ransac_px,
                "selection": selection}
    return page.render_page(run_info, sections, tables_all, metric)
