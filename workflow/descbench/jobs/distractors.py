"""The distractor job (``distractors``): every scene's drawn distractor keypoints of one (keypoint
set, descriptor) in one file, the bank every scoring job reads; and the same draw straight from
the other scenes' files, for single-scene scoring.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.errors import DataError
from descbench.jobs.common import JobCommand, json_arg, read_features, result_paths
from descbench.paths import ResultPaths


# The draw parameters (descbench.metrics.distractors); the other verification options do not
# change which keypoints are drawn.
DRAW_KEYS = ("seed", "distractor_scenes", "distractors_per_scene")


def image_counts(descriptors: Path, keypoints: Path) -> dict[int, int]:
    """Keypoints per image 1..n of a scene, from its descriptor file's ``image`` column only; ``n``
    from its keypoint file's footer (an image without keypoints has no row to count)."""
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(descriptors) as fh:
            image = io.column_array(fh.read(columns=["image"]).column("image"))
    except (OSError, pa.ArrowInvalid, KeyError) as exc:
        raise DataError(f"cannot read {descriptors} ({exc}); {io.rebuild_hint(descriptors)}") from exc
    n = len(io.read_meta(keypoints)["image_sizes"])
    return {k: int(c) for k, c in zip(range(1, n + 1), np.bincount(image.astype(np.int64), minlength=n + 1)[1:])}


def draw_all(targets: list[str], all_scenes: list[str], verification: dict, counts_of) -> dict[str, list]:
    """The distractor draw of each target scene among ``all_scenes``
    (:func:`descbench.metrics.distractors.draw_distractors`); ``counts_of(scene)`` gives that
    scene's keypoints per image."""
    from descbench.metrics.distractors import distractor_scenes, draw_distractors

    seed, n_sc, per_sc = (verification[k] for k in DRAW_KEYS)
    return {
        s: draw_distractors(s, all_scenes, n_sc, per_sc, seed, {o: counts_of(o) for o in distractor_scenes(s, all_scenes, n_sc, seed)})
        for s in targets
    }


def _take_rows(draws: dict[str, list], descriptor: str, load) -> dict[str, list]:
    """Attach the drawn rows' descriptors: each distractor scene's file is loaded once (``load``)."""
    from descbench.metrics.bojanic import Distractors

    users: dict[str, list] = {}
    for target, ds in draws.items():
        for i, d in enumerate(ds):
            users.setdefault(d.scene, []).append((target, i))
    out = {t: [None] * len(ds) for t, ds in draws.items()}
    for other in sorted(users):
        by_image, dmeta, where = load(other)
        if dmeta["descriptor"] != descriptor:
            raise DataError(f"{where} holds descriptor '{dmeta['descriptor']}', expected '{descriptor}'")
        for target, i in users[other]:
            d = draws[target][i]
            out[target][i] = Distractors(d.scene, d.image, d.rows, np.ascontiguousarray(by_image[d.image][d.rows]))
    return out


def distractors_from_files(scene: str, all_scenes: list[str], verification: dict,
                           files: dict[str, tuple[Path, Path]], descriptor: str) -> list:
    """One scene's distractors read directly from the other scenes' (keypoints, descriptors) files."""
    from descbench.metrics.distractors import distractor_scenes

    needed = distractor_scenes(scene, all_scenes, verification["distractor_scenes"], verification["seed"])
    missing = [o for o in needed if o not in files]
    if missing:
        raise DataError(f"scene {scene}: distractor scenes {', '.join(missing)} were drawn but their features were not given")

    def load(o):
        f = read_features(Path(files[o][0]), Path(files[o][1]))
        return f.by_image, f.dmeta, files[o][1]

    draws = draw_all([scene], all_scenes, verification, lambda o: image_counts(Path(files[o][1]), Path(files[o][0])))
    return _take_rows(draws, descriptor, load)[scene]


def build_distractor_bank(paths: ResultPaths, kpset: str, descriptor: str, verification: dict, out: Path,
                          features: str | None = None) -> None:
    """The distractor keypoints of every scene of one (keypoint set, descriptor), in one file.

    One row per drawn keypoint: ``target_scene`` (whose distractor it is), ``distractor_scene``,
    ``image``, ``row`` (keypoint index in that image) and its ``descriptor``; targets in scene
    order, then draw order. Every scoring job reads this one file instead of other scenes'
    descriptor files (each is read once here, and the DAG gets one input instead of ~20).
    """
    all_scenes = [s for ss in paths.batches.values() for s in ss]
    files_of = features or descriptor  # a scoring variant reads its base descriptor's files
    draw_params = {k: verification[k] for k in DRAW_KEYS}

    def load(o):  # `features`: the descriptor whose files a scoring variant reuses (descriptors.<d>.features_of)
        f = read_features(Path(paths.keypoints(kpset, o)), Path(paths.descriptors(kpset, files_of, o)))
        return f.by_image, f.dmeta, paths.descriptors(kpset, files_of, o)

    draws = draw_all(all_scenes, all_scenes, draw_params,
                     lambda o: image_counts(Path(paths.descriptors(kpset, files_of, o)), Path(paths.keypoints(kpset, o))))
    taken = _take_rows(draws, files_of, load)
    cols: dict[str, list] = {"target_scene": [], "distractor_scene": [], "image": [], "row": []}
    blocks = []
    for target in all_scenes:
        for d in taken[target]:
            n = d.rows.shape[0]
            cols["target_scene"] += [target] * n
            cols["distractor_scene"] += [d.scene] * n
            cols["image"].append(np.full(n, d.image, np.int8))
            cols["row"].append(d.rows.astype(np.int32))
            blocks.append(d.desc)
    if blocks:
        desc = np.concatenate(blocks)
    else:  # no distractor at all (a single scene): keep the dtype/width of this descriptor
        first = read_features(Path(paths.keypoints(kpset, all_scenes[0])), Path(paths.descriptors(kpset, files_of, all_scenes[0])))
        desc = first.by_image[1][:0]
    table = io.descriptors_table(np.concatenate(cols["image"]) if cols["image"] else np.zeros(0, np.int8), desc)
    table = table.append_column("target_scene", pa.array(cols["target_scene"], pa.string()))
    table = table.append_column("distractor_scene", pa.array(cols["distractor_scene"], pa.string()))
    table = table.append_column("row", pa.array(np.concatenate(cols["row"]) if cols["row"] else np.zeros(0, np.int32), pa.int32()))
    table = table.select(["target_scene", "distractor_scene", "image", "row", "descriptor"])
    meta = io.provenance("distractors", {"keypoint_set": kpset, "descriptor": descriptor, **draw_params}, scenes=all_scenes)
    io.write_table(table, out, meta)


def read_distractor_bank(path: Path, all_scenes: list[str], verification: dict, descriptor: str) -> dict[str, list]:
    """{target scene: its Distractors in draw order} from a bank; fails if it was built for
    another scene list, draw or descriptor."""
    from descbench.metrics.bojanic import Distractors

    table, meta = io.read_table(path)
    want = {k: verification[k] for k in DRAW_KEYS}
    got = {k: meta["params"].get(k) for k in DRAW_KEYS}
    if got != want or meta.get("scenes") != list(all_scenes) or meta["params"].get("descriptor") != descriptor:
        raise DataError(
            f"{path} was drawn for another configuration (draw {got}, {len(meta.get('scenes', []))} scenes, "
            f"descriptor {meta['params'].get('descriptor')!r}; this job: draw {want}, {len(all_scenes)} scenes, "
            f"descriptor {descriptor!r}); rerun its `distractors` job through the workflow"
        )
    desc = io.descriptors_array(table)
    target, other, image, row = (io.column_array(table.column(c)) for c in ("target_scene", "distractor_scene", "image", "row"))
    out: dict[str, list] = {s: [] for s in all_scenes}
    n = len(target)
    i = 0
    while i < n:  # runs of one (target, distractor scene): one Distractors each, in file order
        j = i + 1
        while j < n and target[j] == target[i] and other[j] == other[i]:
            j += 1
        out[target[i]].append(Distractors(other[i], int(image[i]), row[i:j].astype(np.int64), np.ascontiguousarray(desc[i:j])))
        i = j
    return out



# ----------------------------------------------------------------------------- command


def add_commands(sub) -> dict:
    """The ``distractors`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("distractors", help="draw every scene's distractor keypoints of one descriptor into one file")
    p.add_argument("--features-of", default=None, help="read this descriptor's files (a scoring variant's base)")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--verification", required=True, help="the draw: JSON {seed, distractor_scenes, distractors_per_scene}")
    p.add_argument("--out", type=Path, required=True)
    return {"distractors": JobCommand(run, pandas=False)}


def run(a: argparse.Namespace) -> None:
    build_distractor_bank(result_paths(a), a.keypoint_set, a.descriptor, json_arg(a.verification), a.out, a.features_of)
