"""The C++ DescriptorWorkbench's HPatches patch benchmark, number for number.

Reproduces ``patch_benchmark`` of F-Sossi/DescriptorWorkbench (commit b834e17):
``cli/patch_benchmark.cpp``, ``src/core/benchmark/HPatchesBenchmark.{hpp,cpp}``,
``src/core/benchmark/PatchMetrics.{hpp,cpp}``, ``src/core/patches/PatchLoader.cpp``,
``src/core/patches/PatchFusionExtractor.cpp`` and its ``patch_benchmark_results`` table
(``src/core/database/DatabaseManager.cpp``). What follows is what that code computes, which is
not always what its comments say.

Sequences and splits. Every folder of the patches directory whose name is longer than two
characters and starts with ``i_`` or ``v_``, sorted by path (or the configured ``patches.scenes``,
in the given order). A sequence is *illumination* when its folder name starts with ``i_`` and
*viewpoint* otherwise. The queries are always the patches of ``ref.png``; the split ``easy`` has the
targets ``e1..e5``, ``hard`` ``h1..h5``, ``tough`` ``t1..t5`` (the files that exist, in the order
e1, e2, .., e5). A target file whose patch count differs from ``ref``'s is skipped silently. Row i
of a target file is the true match of row i of ``ref``; all other rows of that same file are the
only "negatives" of the matching and AP (there is no sampling, no seed, no other sequence).

Distances. Descriptors are float32 matrices (``CV_32F``: every patch extractor it offers, sift,
rgbsift, honc, dspsift, surf, hardnet, sosnet and l2net, gives float32; other dtypes are refused
here, since OpenCV would subtract uint8 rows with saturation). The distance is L2, not squared:
``d = float32(sqrt(sum_k float64(float32(a_k - b_k))^2))``, the sum in float64 in OpenCV's order
(:mod:`.workbench_kernels`). The float64 counterpart here (``precision="float64"``) takes the
differences in float64 and keeps the float64 root.

Per target file (``PatchMetrics::computeMatching``), N = rows of ``ref`` (= rows of the file):

* **nearest-neighbour match accuracy** (:func:`match_accuracy`): for each query i the first
  target j with the strictly smallest distance (ties: the lowest index wins); it is correct when
  j == i; accuracy = ``float32(correct) / float32(N)``;
* **AP** (:func:`average_precisions`): the N targets sorted by distance with ``std::sort``
  (unstable; pairs (distance, index) built in index order, compared on distance only); with
  exactly one relevant target at 0-based position r, AP = ``float32(1) / float32(r + 1)``: no
  interpolation, no cut-off. Ties at the true target's distance put it wherever GCC's introsort
  leaves it (replayed exactly; without ties r = the number of strictly smaller distances);
* **mAP** (:func:`mean_average_precision`): the APs summed in float32 in query order, divided by
  ``float32(N)``. This is the ``average_precision`` of the file.

Per sequence and split (``HPatchesBenchmark::evaluateScene``): the file APs and accuracies summed
in float64 in file order, divided by the number of files used and rounded to float32;
``num_patches`` = N times the number of files used. A split with no usable file scores nothing and
is left out of every mean below (the table then holds 0.0, the C++ default).

Over sequences (``HPatchesBenchmark::run``), :func:`aggregate`: each mean is a float64 sum of
float32 per-(sequence, split) values divided by their count, rounded to float32 (0.0 for an empty
group): ``map_overall`` / ``accuracy_overall`` over all (sequence, split) results (a mean over
results, not over patches), ``map_easy|hard|tough`` over the results of that split,
``map_illumination|viewpoint`` over all splits of those sequences, and
``map_{illumination,viewpoint}_{easy,hard}`` (tough has no such breakdown). With its default
``num_threads`` (4; YAML ``performance.num_threads``) the workbench first sums each sequence's
splits, then adds those per-sequence sums in the order the threads finish; with
``num_threads: 1`` it adds every result directly (a build without OpenMP runs the first path in
one thread, so in sequence order). Both groupings are offered (the thread completion order is
taken as the sequence order); they can differ only by float64 rounding before the float32 cast. ``num_scenes`` counts the listed sequences (a
sequence whose evaluation throws, say without ``ref.png``, is still counted), ``num_patches`` sums
the per-(sequence, split) counts. Only mAP and accuracy are stored; ``descriptor_dimension`` is
the extractor's declared size; ``metadata`` is ``key=value;`` pairs of the run's settings in key
order (descbench leaves it empty); ``processing_time_ms`` is wall time.

FPR95 (:func:`fpr95`, ``PatchMetrics::computeFPR95``) is defined but never called by the benchmark:
positives are the N distances ref[i]-target[i]; negatives every pair ref[i]-negative[j] (N x M, the
caller's matrix, no sampling). The positives are sorted ascending and the threshold is the one at
index ``int(0.95f * float32(N))`` (float32 product, truncated: the 95th-percentile sample, not
an interpolation and not a TPR search); FPR95 = ``float32(#negatives < threshold) /
float32(N * M)`` (strict). It returns 1.0 when any input is empty.

Empty inputs: matching, AP and accuracy give 0 when ``ref`` or ``target`` has no row (as the C++);
rows of ``ref`` and ``target`` must otherwise match.

float32 against float64: the float32 path is the workbench's arithmetic. The float64 path computes
the same definitions with float64 distances and float64 sums / divisions and no rounding to
float32. They differ (i) wherever float32 rounding of the distance merges two distances into a
tie or reorders them, so the nearest neighbour, the rank and the FPR95 count change; (ii) in every
division and sum (``1/3`` is 0.3333333432674408 in float32), and the float32 sum of N APs drifts
by up to about N ulps. The FPR95 index ``int(0.95f * N)`` equals ``int(0.95 * N)`` for every
N below 2,207,541 (there the float32 product 2097163.95 rounds to 2097164), so never on HPatches.

Fusion (:func:`fuse`, ``PatchFusionExtractor::fuseDescriptors``, then every fused row
L2-normalised as ``cv::normalize`` does): :mod:`descbench.descriptors.fusion` defines it, the one
definition the image composite's ``arithmetic: workbench`` uses too; it is re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from descbench.descriptors.fusion import FUSION_METHODS, fuse
from descbench.errors import ConfigError, DataError
from descbench.patches import JITTERS, JITTER_NAMES
from descbench.patches import workbench_kernels as K

__all__ = [
    "PRECISIONS",
    "GROUPINGS",
    "SPLITS",
    "TABLE_COLUMNS",
    "FUSION_METHODS",
    "l2_distances",
    "nearest_neighbours",
    "match_accuracy",
    "average_precisions",
    "mean_average_precision",
    "fpr95",
    "score_file",
    "score_sequence",
    "aggregate",
    "fuse",
    "is_illumination",
    "list_sequences",
]

PRECISIONS = ("float32", "float64")
# aggregate's summation orders over sequences (patches.workbench.grouping)
GROUPINGS = ("per_sequence", "sequential")
SPLITS = tuple(JITTER_NAMES[j] for j in JITTERS)  # easy, hard, tough
_SPLIT_PREFIX = {JITTER_NAMES[j]: j for j in JITTERS}

# The patch_benchmark_results columns written by the workbench (id, experiment_id and created_at
# are the database's own).
TABLE_COLUMNS = (
    "descriptor_name", "descriptor_dimension", "map_overall", "accuracy_overall",
    "map_easy", "map_hard", "map_tough", "map_illumination", "map_viewpoint",
    "map_illumination_easy", "map_illumination_hard", "map_viewpoint_easy", "map_viewpoint_hard",
    "num_scenes", "num_patches", "processing_time_ms", "metadata",
)



# ---- validation ---------------------------------------------------------------------------------

def _precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    return precision


def _matrix(x, name: str, allow_empty: bool = True) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2:
        raise DataError(f"{name}: expected a 2-D array [rows, dim] of descriptors, got shape {a.shape}")
    if a.dtype != np.float32:
        raise DataError(
            f"{name}: the workbench computes on float32 descriptor matrices (CV_32F), got dtype {a.dtype}; "
            "convert with .astype(np.float32) if that is what its extractor would hold")
    if a.shape[0] and a.shape[1] == 0:
        raise DataError(f"{name}: descriptors of width 0")
    if not allow_empty and a.shape[0] == 0:
        raise DataError(f"{name}: no rows")
    if not np.isfinite(a).all():
        bad = int(np.argwhere(~np.isfinite(a))[0, 0])
        raise DataError(f"{name}: row {bad} holds NaN or infinity")
    return np.ascontiguousarray(a)


def _pair(ref, target, names=("ref", "target")) -> tuple[np.ndarray, np.ndarray]:
    r = _matrix(ref, names[0])
    t = _matrix(target, names[1])
    if r.shape[0] and t.shape[0]:
        if r.shape[0] != t.shape[0]:
            raise DataError(f"{names[0]} has {r.shape[0]} rows but {names[1]} has {t.shape[0]}: "
                            f"row i of {names[1]} must be the true match of row i of {names[0]}")
        if r.shape[1] != t.shape[1]:
            raise DataError(f"{names[0]} has width {r.shape[1]} but {names[1]} has width {t.shape[1]}")
    return r, t


# ---- metrics ------------------------------------------------------------------------------------

def l2_distances(a, b, precision: str = "float32") -> np.ndarray:
    """L2 distances of every row of ``a`` [n, d] to every row of ``b`` [m, d] (float32 arrays).

    Returns [n, m]: float32 with the workbench's arithmetic (module docstring), or float64.

    >>> a = np.array([[0, 0], [3, 4]], np.float32)
    >>> l2_distances(a, a).tolist()
    [[0.0, 5.0], [5.0, 0.0]]
    """
    precision = _precision(precision)
    a = _matrix(a, "a")
    b = _matrix(b, "b")
    if a.shape[0] and b.shape[0] and a.shape[1] != b.shape[1]:
        raise DataError(f"a has width {a.shape[1]} but b has width {b.shape[1]}")
    if precision == "float32":
        return K.l2_matrix_f32(a, b)
    return K.l2_matrix_f64(a, b)


def nearest_neighbours(ref, target, precision: str = "float32") -> np.ndarray:
    """Index of each ``ref`` row's nearest ``target`` row: int64 [N], -1 where none.

    ``ref`` and ``target`` are float32 [N, D]. The first target with the strictly smallest
    distance wins (a scan with ``<`` from FLT_MAX in float32, from infinity in float64).

    >>> ref = np.array([[0, 0], [1, 0]], np.float32)
    >>> nearest_neighbours(ref, np.array([[1, 0], [1, 0]], np.float32)).tolist()  # a tie: the first
    [0, 0]
    """
    r, t = _pair(ref, target)
    if not r.shape[0] or not t.shape[0]:
        return np.full(r.shape[0], -1, dtype=np.int64)
    dist = l2_distances(r, t, precision)
    start = K.FLT_MAX if precision == "float32" else np.inf
    return K.first_nearest(dist, start)


def match_accuracy(ref, target, precision: str = "float32") -> float:
    """Nearest-neighbour match accuracy: the fraction of rows i whose nearest target is row i.

    ``ref``, ``target``: float32 [N, D]. float32: ``float32(correct) / float32(N)``; 0.0 when
    either is empty.

    >>> ref = np.array([[0, 0], [1, 0], [5, 5]], np.float32)
    >>> target = np.array([[0, 1], [0, 0.5], [5, 5]], np.float32)
    >>> match_accuracy(ref, target), match_accuracy(ref, target, "float64")
    (0.6666666865348816, 0.6666666666666666)
    """
    r, t = _pair(ref, target)
    if not r.shape[0] or not t.shape[0]:
        return 0.0
    correct = int((nearest_neighbours(r, t, precision) == np.arange(r.shape[0])).sum())
    return _ratio(correct, r.shape[0], precision)


def _ratio(num: int, den: int, precision: str) -> float:
    if precision == "float32":
        return float(np.float32(num) / np.float32(den))
    return num / den


def average_precisions(ref, target, precision: str = "float32") -> np.ndarray:
    """Per-query AP of the distance ranking, [N] (float32 or float64 values).

    ``ref``, ``target``: float32 [N, D]; the only relevant target of query i is row i, at 0-based
    position r after the workbench's sort, AP = 1 / (r + 1). Ties at the true target's distance are
    ordered as GCC's ``std::sort`` leaves them (float32) or, in float64, by the same replay on
    float64 distances.

    >>> ref = np.array([[0.0], [1.0], [2.0]], np.float32)
    >>> target = np.array([[0.6], [-0.5], [2.0]], np.float32)
    >>> average_precisions(ref, target).tolist()   # query 0 ranks its target 2nd, query 1 3rd
    [0.5, 0.3333333432674408, 1.0]
    """
    r, t = _pair(ref, target)
    dt = np.float32 if precision == "float32" else np.float64
    if not r.shape[0] or not t.shape[0]:
        return np.zeros(0, dtype=dt)
    ranks = K.correct_ranks(l2_distances(r, t, precision))
    return dt(1.0) / (ranks + 1).astype(dt)


def mean_average_precision(ref, target, precision: str = "float32") -> float:
    """mAP of one target file: the per-query APs (:func:`average_precisions`) summed in query order,
    divided by N (float32 sum and division for the workbench; 0.0 when empty).

    >>> ref = np.array([[0.0], [1.0], [2.0]], np.float32)
    >>> target = np.array([[0.6], [-0.5], [2.0]], np.float32)
    >>> mean_average_precision(ref, target), mean_average_precision(ref, target, "float64")
    (0.6111111044883728, 0.611111111111111)
    """
    aps = average_precisions(ref, target, precision)
    if not aps.size:
        return 0.0
    if precision == "float32":
        s = np.float32(0.0)
        for ap in aps:
            s = np.float32(s + ap)
        return float(s / np.float32(aps.size))
    return float(sum(float(x) for x in aps) / aps.size)


def fpr95(ref, target, negatives, precision: str = "float32") -> float:
    """False positive rate at the workbench's 95 % threshold.

    ``ref``, ``target``: float32 [N, D] (positives: row i with row i); ``negatives``: float32
    [M, D] (every ref row against every negative row). Threshold: the sorted positive distances at
    index ``int(0.95 * N)`` (float32 product); FPR95 = #(negative distance < threshold) / (N * M).
    1.0 when any input is empty.

    >>> ref = np.zeros((4, 1), np.float32)
    >>> target = np.array([[1], [2], [3], [4]], np.float32)
    >>> negatives = np.array([[3.5], [10]], np.float32)
    >>> fpr95(ref, target, negatives)   # threshold = sorted([1, 2, 3, 4])[int(3.8)] = 4
    0.5
    """
    precision = _precision(precision)
    r, t = _pair(ref, target)
    n = _matrix(negatives, "negatives")
    if not r.shape[0] or not t.shape[0] or not n.shape[0]:
        return 1.0
    if n.shape[1] != r.shape[1]:
        raise DataError(f"negatives have width {n.shape[1]} but ref has width {r.shape[1]}")
    if precision == "float32":
        pos = np.sort(K.l2_pairs_f32(r, t))
        idx = int(np.float32(0.95) * np.float32(pos.size))
    else:
        pos = np.sort(K.l2_pairs_f64(r, t))
        idx = int(0.95 * pos.size)
    neg = l2_distances(r, n, precision)
    false_positives = int((neg < pos[idx]).sum())
    return _ratio(false_positives, neg.size, precision)


def score_file(ref, target, precision: str = "float32") -> dict:
    """One target file against ``ref`` (``computeMatching``): ``num_patches`` (N),
    ``correct_matches``, ``match_accuracy``, ``average_precision`` (the file's mAP).

    >>> ref = np.array([[0.0], [1.0], [2.0]], np.float32)
    >>> score_file(ref, np.array([[0.6], [-0.5], [2.0]], np.float32))["correct_matches"]
    1
    """
    precision = _precision(precision)
    r, t = _pair(ref, target)
    if not r.shape[0] or not t.shape[0]:
        return {"num_patches": 0, "correct_matches": 0, "match_accuracy": 0.0, "average_precision": 0.0}
    correct = int((nearest_neighbours(r, t, precision) == np.arange(r.shape[0])).sum())
    return {"num_patches": int(r.shape[0]), "correct_matches": correct,
            "match_accuracy": _ratio(correct, r.shape[0], precision),
            "average_precision": mean_average_precision(r, t, precision)}


# ---- sequences, splits and the results table ----------------------------------------------------

def is_illumination(sequence: str) -> bool:
    """The workbench's scene type: the folder name (last path part) is longer than two characters
    and starts with ``i_``; every other sequence counts as viewpoint.

    >>> is_illumination("i_ajuntament"), is_illumination("/data/v_wall"), is_illumination("i_")
    (True, False, False)
    """
    name = str(sequence).replace("\\", "/").split("/")[-1]
    return len(name) > 2 and name[:2] == "i_"


def list_sequences(names) -> list[str]:
    """The sequences the workbench benchmarks when none are configured: the folder names longer
    than two characters that start with ``i_`` or ``v_``, sorted (it sorts the full paths of one
    folder's entries, the same order).

    >>> list_sequences(["v_b", "i_a", "x_c", "i_", "v_a"])
    ['i_a', 'v_a', 'v_b']
    """
    return sorted(n for n in map(str, names) if len(n) > 2 and n[:2] in ("i_", "v_"))


def _mean(total: float, count: int, precision: str) -> float:
    if not count:
        return 0.0
    value = total / count
    return float(np.float32(value)) if precision == "float32" else value


def _split_results(sequence: str, descriptors: Mapping[str, np.ndarray], precision: str,
                   file_rows: list | None = None) -> dict:
    if "ref" not in descriptors:
        raise DataError(f"sequence {sequence}: no 'ref' descriptors (the queries of every split)")
    ref = _matrix(descriptors["ref"], f"{sequence}.ref")
    out = {}
    for split in SPLITS:
        prefix = _SPLIT_PREFIX[split]
        ap_sum = acc_sum = 0.0
        count = patches = correct = 0
        for k in range(1, 6):
            key = f"{prefix}{k}"
            if key not in descriptors:
                continue
            target = _matrix(descriptors[key], f"{sequence}.{key}")
            if target.shape[0] != ref.shape[0]:
                continue  # the workbench skips a file whose patch count differs from ref's
            if ref.shape[0] and target.shape[1] != ref.shape[1]:
                raise DataError(f"sequence {sequence}: {key} has width {target.shape[1]} but ref has width {ref.shape[1]}")
            res = score_file(ref, target, precision)
            if file_rows is not None:
                file_rows.append({"precision": precision, "sequence": sequence, "split": split, "file": key, **res})
            patches += res["num_patches"]
            correct += res["correct_matches"]
            ap_sum += res["average_precision"]
            acc_sum += res["match_accuracy"]
            count += 1
        out[split] = {"num_patches": patches, "correct_matches": correct, "files": count,
                      "ap": _mean(ap_sum, count, precision), "accuracy": _mean(acc_sum, count, precision)}
    return out


def score_sequence(sequence: str, descriptors: Mapping[str, np.ndarray], descriptor_name: str = "",
                   precisions: Sequence[str] = PRECISIONS, file_rows: list | None = None) -> pd.DataFrame:
    """Score one sequence for all splits; one row per precision, the ``patch_benchmark_results``
    columns as the workbench would write them for a run over this sequence alone.

    ``descriptors``: patch type (``ref``, ``e1``..``t5``, those present) -> float32 [N, D]
    (row i = patch i of that file). Columns (:data:`TABLE_COLUMNS`, then descbench's):

    * ``descriptor_name``, ``descriptor_dimension`` (D; 0 without ref rows);
    * ``map_overall``, ``accuracy_overall``: mean over the scored splits of the split mAP / accuracy;
    * ``map_easy``, ``map_hard``, ``map_tough``: the split mAP (mean over its files' mAPs), 0.0 if
      the split was not scored;
    * ``map_illumination`` / ``map_viewpoint``: ``map_overall`` in the column of the sequence's
      type, 0.0 in the other; ``map_{illumination,viewpoint}_{easy,hard}`` likewise (no tough);
    * ``num_scenes`` (1), ``num_patches`` (N times the number of files scored);
    * ``processing_time_ms`` (NaN: wall time, not reproducible), ``metadata`` ("");
    * descbench's: ``precision``, ``sequence``, and per split ``accuracy_<split>``,
      ``num_patches_<split>``, ``correct_matches_<split>``, ``files_<split>`` (0 files = not
      scored), which :func:`aggregate` needs to combine sequences exactly.

    ``file_rows``: a list to which one dict per scored target file is appended (``precision``,
    ``sequence``, ``split``, ``file`` and :func:`score_file`'s values), the per-file results the
    split means are made of; skipped files (patch count differs from ``ref``'s) have none.

    >>> ref = np.array([[0.0], [1.0], [2.0]], np.float32)
    >>> h1 = np.array([[0.6], [-0.5], [2.0]], np.float32)
    >>> row = score_sequence("v_x", {"ref": ref, "e1": ref + 0.1, "h1": h1}, "toy")
    >>> row.loc[0, ["map_easy", "map_hard", "map_overall", "map_viewpoint", "map_illumination"]].tolist()
    [1.0, 0.6111111044883728, 0.8055555820465088, 0.8055555820465088, 0.0]
    >>> int(row.loc[0, "num_patches"]), row["precision"].tolist()
    (6, ['float32', 'float64'])
    """
    rows = []
    for precision in precisions:
        precision = _precision(precision)
        per = _split_results(sequence, descriptors, precision, file_rows)
        ref = np.asarray(descriptors["ref"])
        row = {"descriptor_name": descriptor_name,
               "descriptor_dimension": int(ref.shape[1]) if ref.shape[0] else 0}
        extra = {"precision": precision, "sequence": sequence}
        for split in SPLITS:
            p = per[split]
            extra[f"accuracy_{split}"] = p["accuracy"]
            extra[f"num_patches_{split}"] = p["num_patches"]
            extra[f"correct_matches_{split}"] = p["correct_matches"]
            extra[f"files_{split}"] = p["files"]
            row[f"map_{split}"] = p["ap"]
        rows.append((row, extra))
    frame = pd.DataFrame([{**r, **e} for r, e in rows])
    return aggregate(frame, grouping="per_sequence", descriptor_name=descriptor_name,
                     keep_sequence=True)


def aggregate(per_sequence: pd.DataFrame, grouping: str = "per_sequence", descriptor_name: str | None = None,
              keep_sequence: bool = False) -> pd.DataFrame:
    """Combine :func:`score_sequence` rows (several sequences) into the workbench's one-row result
    per precision, the :data:`TABLE_COLUMNS` plus ``precision``.

    The sequences are taken in the order of the frame (the workbench sorts their paths).
    ``grouping``: ``"per_sequence"`` (the workbench's default ``num_threads != 1``: each
    sequence's splits summed first, then added in sequence order) or ``"sequential"``
    (``num_threads: 1``: every (sequence, split) result added in turn). Both sum float64 and round
    the means to float32 in the float32 rows.

    >>> ref = np.array([[0.0], [1.0], [2.0]], np.float32)
    >>> a = score_sequence("i_a", {"ref": ref, "e1": ref}, "toy", ["float32"])
    >>> b = score_sequence("v_b", {"ref": ref, "e1": np.array([[0.6], [-0.5], [2.0]], np.float32)}, "toy", ["float32"])
    >>> row = aggregate(pd.concat([a, b]))
    >>> row.loc[0, ["map_overall", "map_illumination", "map_viewpoint"]].tolist(), int(row.loc[0, "num_scenes"])
    ([0.8055555820465088, 1.0, 0.6111111044883728], 2)
    """
    if grouping not in GROUPINGS:
        raise ConfigError(f"grouping {grouping!r} is not one of {', '.join(GROUPINGS)}")
    need = {"precision", "sequence", "descriptor_name", "descriptor_dimension"} | {
        f"{c}_{s}" for s in SPLITS for c in ("accuracy", "num_patches", "files")} | {f"map_{s}" for s in SPLITS}
    missing = sorted(need - set(per_sequence.columns))
    if missing:
        raise DataError(f"aggregate: the rows lack the columns {', '.join(missing)} (rows of score_sequence are needed)")
    out = []
    for precision, rows in per_sequence.groupby("precision", sort=False):
        precision = _precision(precision)
        groups = ("overall", "easy", "hard", "tough", "illumination", "viewpoint",
                  "illumination_easy", "illumination_hard", "viewpoint_easy", "viewpoint_hard")
        total = {g: [0.0, 0.0, 0] for g in groups}  # sum map, sum accuracy, count
        patches = 0
        for _, r in rows.iterrows():
            kind = "illumination" if is_illumination(r["sequence"]) else "viewpoint"
            local = {g: [0.0, 0.0, 0] for g in groups}
            target = local if grouping == "per_sequence" else total
            for split in SPLITS:
                if not r[f"files_{split}"] or not r[f"num_patches_{split}"]:
                    continue
                patches += int(r[f"num_patches_{split}"])
                names = ["overall", split, kind] + ([f"{kind}_{split}"] if split != "tough" else [])
                for g in names:
                    target[g][0] += float(r[f"map_{split}"])
                    target[g][1] += float(r[f"accuracy_{split}"])
                    target[g][2] += 1
            if grouping == "per_sequence":
                for g in groups:
                    for i in range(3):
                        total[g][i] += local[g][i]
        first = rows.iloc[0]
        row = {"descriptor_name": first["descriptor_name"] if descriptor_name is None else descriptor_name,
               "descriptor_dimension": int(first["descriptor_dimension"]),
               "map_overall": _mean(total["overall"][0], total["overall"][2], precision),
               "accuracy_overall": _mean(total["overall"][1], total["overall"][2], precision)}
        for g in groups[1:]:
            row[f"map_{g}"] = _mean(total[g][0], total[g][2], precision)
        row.update({"num_scenes": int(len(rows)), "num_patches": patches,
                    "processing_time_ms": float("nan"), "metadata": ""})
        row = {c: row[c] for c in TABLE_COLUMNS}
        row["precision"] = precision
        if keep_sequence:
            for c in rows.columns:
                if c not in row:
                    row[c] = first[c]
        out.append(row)
    return pd.DataFrame(out)
