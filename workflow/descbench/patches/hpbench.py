"""hpatches-benchmark's patch verification, image matching and patch retrieval tasks.

Reproduces the reference Python implementation of the HPatches benchmark (Balntas et al.,
CVPR 2017; repository ``hpatches/hpatches-benchmark``, ``python/utils/tasks.py``, ``metrics.py``,
``results.py``): the splits, the task generators (``gen_verif``, ``gen_retrieval``, regenerated
call for call with NumPy's legacy ``RandomState(42)``), the three evaluations and the published
aggregation. Every convention is stated next to the code that implements it; where descbench
deliberately differs the docstring says so and why.

Data model. Descriptors of a patch dataset: ``Mapping[str, Mapping[str, np.ndarray]]``, sequence
name -> patch type (:data:`descbench.patches.PATCH_TYPES`) -> array ``[N_seq, D]``, all strips of
a sequence with the same N, every array either float32 or uint8 packed bits (one descriptor).

Distances (descbench's definition everywhere): float32 -> L2 = ``sqrt(s)`` with ``s = sum_k (a_k -
b_k)^2`` accumulated in float64 in index order; every ranking here is on the float64 key s (the
ranking key of :func:`descbench.metrics.nn.nearest_two`; sqrt is monotone, and ranking on s avoids
sqrt rounding merging two distinct keys into a tie). uint8 packed bits -> Hamming distance.
hpatches-benchmark differs only in arithmetic: it ranks on ``scipy`` Euclidean distances (the
verification's ``spatial.distance.euclidean`` on float32 vectors, ``cdist`` in float64 for matching
and retrieval) and compares binary descriptors as unpacked 0/1 float vectors with L2 =
``sqrt(Hamming)``, which ranks exactly as Hamming. So the two agree except where float rounding
orders two nearly equal distances differently.

Tasks (all ``split['test']`` sequences; type index 0 -> ``ref``, k -> ``<jitter>k``, jitters
e, h, t):

* verification: pairs from the ``verif_{pos,neg_intra,neg_inter}_split-<name>.csv`` lists
  (columns ``s1,t1,idx1,s2,t2,idx2``), per jitter the balanced ROC AUC (all negatives vs all
  positives) and the imbalanced AP (all negatives, the first 20 % of the positives);
* matching: per sequence, jitter and k = 1..5 the nearest neighbour in strip ``<jitter>k`` of
  every ``ref`` patch, AP over the nearest-neighbour distances with numpos = N, success rate;
* retrieval: ``ref`` queries and distractors from ``retr_{queries,distractors}_split-<name>.csv``
  (columns ``s,idx``), 5 positives (the query's patch in ``<jitter>1..5``), AP at the pool sizes
  100 .. 20000.

Results: :class:`TaskResult` per task, with ``table`` (tidy, percent) and ``details`` (per case /
per sequence / per query, fractions, for bootstrap confidence intervals).

Headline numbers (changed in issue 18): the table's ``summary`` rows with metric ``map`` are the
numbers the reference's printing script ``python/hpatches_results.py`` (master) prints, x100:

* matching: the mean AP over ALL sequences of the split (per jitter, then the mean of the three
  jitters), :func:`summarise_matching`; before, the mean of the i_ and v_ group means
  (``results.py``'s class on the ``ench/matplotlib-fig`` branch), kept as metric
  ``map_mean_of_types``. They differ when the groups differ in size (57 i_ / 59 v_ on the full
  split) and in mean; groups of equal size give equal values;
* retrieval: the printed ``mean`` row (mean of the three jitters) at the largest pool size,
  :func:`summarise_retrieval`; before, the mean over the 7 pool sizes, kept as metric
  ``map_mean_over_pools`` (issue 18: 77.18 -> 73.55 for sift on a full split).

Verification is unchanged: ``hpatches_results.py`` prints the 12 cases (the ``case`` rows) and no
average; the summary rows ``avg_balanced`` / ``avg_imbalanced`` are their means (``results.py``).
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from descbench.errors import ConfigError, DataError
from descbench.metrics.ap import ap_trapezoid
from descbench.metrics.kernels import pair_keys_l2
from descbench.metrics.nn import nearest_two
from descbench.metrics.pairpass import SCREEN_LIMIT, block_rows, l2_setup, screen_block
from descbench.fileops import atomic_path
from descbench.metrics.retrieval import pack_bits_to_words
from descbench.patches import JITTERS, PATCH_TYPES
from descbench.patches import hpbench_kernels as K

__all__ = [
    "POOL_SIZES", "VERIFICATION_LISTS", "VERIFICATION_COLUMNS", "RETRIEVAL_COLUMNS", "TABLE_COLUMNS",
    "TaskResult", "load_splits", "split_sequences", "make_splits", "gen_verification", "gen_retrieval",
    "ref_patch_std", "verification_task_paths", "retrieval_task_paths", "write_verification_tasks",
    "read_verification_tasks", "write_retrieval_tasks", "read_retrieval_tasks", "type_name",
    "roc_auc_trapezoid", "retrieval_ap_from_ranks", "retrieval_counts", "verification_scores",
    "evaluate_verification", "match_strip", "evaluate_matching",
    "evaluate_retrieval", "evaluate_hpbench", "summarise_verification", "summarise_matching",
    "summarise_retrieval",
]

SEED = 42  # gen_verif / gen_retrieval: np.random.seed(42) at the start of each generator
POOL_SIZES = (100, 500, 1000, 5000, 10000, 15000, 20000)  # eval_retrieval's at_ranks
N_RETRIEVAL_POSITIVES = 5  # <jitter>1 .. <jitter>5
IMBALANCED_FRACTION = 0.2  # eval_verification: positives kept by the imbalanced protocol
STD_THRESHOLD = 10.0  # gen_retrieval keeps patches with np.std(patch) > 10 (strict)
N_TYPE_DRAW = 5  # gen_verif draws the two types from arange(5): ref, <j>1 .. <j>4; <j>5 never
VERIFICATION_LISTS = ("pos", "neg_intra", "neg_inter")
VERIFICATION_COLUMNS = ("s1", "t1", "idx1", "s2", "t2", "idx2")  # gen_verif's column order
RETRIEVAL_COLUMNS = ("s", "idx")
TABLE_COLUMNS = ("task", "split", "level", "jitter", "negatives", "protocol", "seq_type", "pool_size",
                 "metric", "value")
_SMALL = 1e-10  # the floor of hpatches' metrics.pr / metrics.roc
_DATA = "data/hpatches"


@dataclass
class TaskResult:
    """One evaluated task.

    ``table``: tidy rows with :data:`TABLE_COLUMNS`, values in percent (x100 of what
    ``hpatches_results.py`` prints); ``level`` is ``case`` (one printed cell, or a ``results.py``
    attribute such as ``('e', 'intra', 'balanced')``), ``summary`` (the headline, metric ``map`` /
    ``auc`` / ``ap``, and other named averages) or ``detail`` (finer rows, e.g. retrieval per pool
    size); each ``summarise_*`` docstring says which row is which.
    ``details``: the unaggregated values as fractions in [0, 1] - verification: one row per
    (jitter, negatives, protocol); matching: one row per (sequence, jitter, k); retrieval: one row
    per (query, jitter, pool size) - to resample for bootstrap confidence intervals and
    re-aggregate with the ``summarise_*`` function of the task.
    """

    task: str
    split: str
    table: pd.DataFrame
    details: pd.DataFrame


# =============================================================================== splits


@lru_cache(maxsize=1)
def _shipped_splits() -> str:
    return resources.files("descbench").joinpath(f"{_DATA}/splits.json").read_text()


def load_splits() -> dict[str, dict]:
    """hpatches-benchmark's ``splits.json``: ``{name: {'name', 'test', ['train']}}``.

    Splits a, b, c (76 train / 40 test sequences each), illum (57 ``i_*``), view (59 ``v_*``) and
    full (116); illum, view and full have no train list. The list order is the file's: the task
    generators draw from ``split['test']`` in this order, so it must not be sorted.
    """
    return json.loads(_shipped_splits())


def split_sequences(name: str, part: str = "test") -> list[str]:
    """The sequences of HPatches split ``name`` (``part`` 'test' or 'train'), in file order."""
    splits = load_splits()
    if name not in splits:
        raise ConfigError(f"unknown HPatches split {name!r}; choose one of {sorted(splits)} "
                          "(for other sequence names build splits with make_splits(sequences))")
    if part not in splits[name] or part == "name":
        parts = [p for p in splits[name] if p != "name"]
        raise ConfigError(f"HPatches split {name!r} has no {part!r} list; it has {parts}")
    return list(splits[name][part])


def make_splits(sequences: Iterable[str]) -> dict[str, dict]:
    """Splits for a user / generated patch dataset: ``full``, ``illum`` (``i_*``), ``view`` (``v_*``).

    Each is ``{'name', 'test'}`` with the names sorted, so generated tasks do not depend on the
    order in which the sequences were listed; ``illum`` / ``view`` are present only when the
    dataset has such sequences. The train/test splits a, b, c exist only for the 116 HPatches
    sequences (:func:`load_splits`): they are a fixed partition of those names, with no analogue
    for other datasets.
    """
    names = sorted(set(sequences))
    if not names:
        raise DataError("make_splits: no sequence names given; pass the sequences of the patch dataset")
    out = {"full": {"name": "full", "test": names}}
    for key, prefix in (("illum", "i_"), ("view", "v_")):
        sub = [s for s in names if s.startswith(prefix)]
        if sub:
            out[key] = {"name": key, "test": sub}
    return out


def _as_split(split) -> dict:
    """A split given by HPatches name or as a mapping with a 'test' list (and optional 'name')."""
    if isinstance(split, str):
        return {"name": split, "test": split_sequences(split)}
    if not isinstance(split, Mapping) or "test" not in split:
        raise ConfigError(f"split must be an HPatches split name or a mapping with a 'test' list "
                          f"(see make_splits), got {type(split).__name__}")
    test = list(split["test"])
    if not test:
        raise ConfigError(f"split {split.get('name', '?')!r} has an empty 'test' list")
    return {"name": str(split.get("name", "custom")), "test": test}


# =============================================================================== task generation


@contextlib.contextmanager
def _legacy_stream(rs: np.random.RandomState):
    """``(key, pos)`` of a legacy RandomState for the kernels; the advanced state is written back."""
    state = rs.get_state(legacy=True)
    if state[0] != "MT19937":
        raise ConfigError(f"expected a legacy MT19937 RandomState, got {state[0]}")
    key = np.array(state[1], dtype=np.uint32)
    pos = np.array([state[2]], dtype=np.int64)
    yield key, pos
    rs.set_state(("MT19937", key, int(pos[0]), state[3], state[4]))


def _lengths(seq_lengths: Mapping[str, int], split: dict, need: int) -> np.ndarray:
    """Patch counts of ``split['test']`` in order (int64); each must be >= ``need``."""
    missing = [s for s in split["test"] if s not in seq_lengths]
    if missing:
        raise DataError(f"patch counts missing for {len(missing)} test sequences of split "
                        f"{split['name']!r}: {missing[:5]}; pass N for every test sequence (seq -> N, "
                        "the number of patches of its ref strip)")
    n = np.array([int(seq_lengths[s]) for s in split["test"]], dtype=np.int64)
    bad = np.flatnonzero((n < need) | (n >= 2**31))
    if bad.size:
        s = split["test"][bad[0]]
        raise DataError(f"sequence {s!r} of split {split['name']!r} has {n[bad[0]]} patches; the task "
                        f"generator needs at least {need} (and fewer than 2^31) per sequence - drop "
                        "the sequence from the split")
    return n


def _count(value, name: str) -> int:
    v = float(value)
    if not v.is_integer() or v < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return int(v)


def _tag(df: pd.DataFrame, source: str) -> pd.DataFrame:
    df.attrs["source"] = source
    return df


def gen_verification(seq_lengths: Mapping[str, int], split, n_pos=1_000_000, n_neg=None,
                     seed: int = SEED) -> dict[str, pd.DataFrame]:
    """hpatches-benchmark's ``gen_verif``: the three pair lists, identical to the original's files.

    Returns ``{'pos', 'neg_intra', 'neg_inter'}`` -> DataFrame with columns ``s1,t1,idx1,s2,t2,idx2``
    (the original's CSV column order). ``seq_lengths``: patches per sequence (seq -> N) for every
    ``split['test']`` sequence, N >= 2. The random stream, call for call (``RandomState(seed)``
    instance; the original seeds the global generator with ``np.random.seed(42)``, same stream):

    1. ``s = choice(split['test'], n_pos)`` - the sequence of each positive;
    2. per row, ``choice(arange(N_s), 2, replace=False)`` -> two distinct patch indices (idx_a, idx_b);
    3. per row, ``choice(arange(5), 2, replace=False)`` -> two distinct type indices (t1, t2);
    4. ``s_inter = choice(split['test'], n_neg)``;
    5. per row, ``randint(N_{s_inter})`` -> idx2 of the inter negative.

    Facts of the original this follows: the types come from ``arange(5)``, i.e. ref and
    ``<jitter>1..4`` - ``<jitter>5`` is never used, and t1 != t2 always; positives use idx_a
    twice (same patch, two types); intra negatives pair idx_a with idx_b of the same sequence
    and the same two types; inter negatives pair the positive's first patch (s, t1, idx_a) with a
    random patch of a random sequence (type t2), possibly the same sequence and even, rarely, the
    same patch (then a "negative" pair is a true correspondence or the identical patch: the
    original keeps it, so does this). The three lists share t1/t2 row by row. The original builds
    the inter list from columns of lengths n_pos and n_neg, which only line up when they are
    equal, so ``n_neg`` must equal ``n_pos`` (default).

    Speed: steps 2, 3, 5 are one numba pass over the MT19937 stream
    (:mod:`descbench.patches.hpbench_kernels`: ``choice(arange(N), 2, replace=False)`` is
    ``permutation(N)[:2]``, a legacy Fisher-Yates shuffle drawing N - 1 masked bounded integers,
    traced for the two heads only) instead of 10^6 Python-level calls; the tests compare it with
    the original call sequence.
    """
    split = _as_split(split)
    n_pos = _count(n_pos, "n_pos")
    n_neg = n_pos if n_neg is None else _count(n_neg, "n_neg")
    if n_neg != n_pos:
        raise ConfigError(f"n_neg ({n_neg}) must equal n_pos ({n_pos}): gen_verif pairs the i-th inter "
                          "negative with the i-th positive's first patch; set n_neg=None")
    lengths = _lengths(seq_lengths, split, need=2)
    names = np.asarray(split["test"], dtype=object)
    rs = np.random.RandomState(seed)
    # choice(a, size) with replacement draws randint(0, len(a), size) and returns a[idx]: the
    # same stream whatever a holds, so draw the indices directly
    s = rs.choice(np.arange(len(names)), n_pos)
    with _legacy_stream(rs) as (key, pos):
        heads = K.mt_permutation_heads(key, pos, lengths[s])
        types = K.mt_permutation_heads(key, pos, np.full(n_pos, N_TYPE_DRAW, dtype=np.int64))
    s_inter = rs.choice(np.arange(len(names)), n_neg)
    with _legacy_stream(rs) as (key, pos):
        idx_inter = K.mt_bounded_draws(key, pos, lengths[s_inter])
    seq, seq_inter = names[s], names[s_inter]
    t1, t2 = types[:, 0], types[:, 1]
    a, b = heads[:, 0], heads[:, 1]
    src = f"generated verification pairs (gen_verif, split {split['name']!r}, n_pos={n_pos}, seed={seed})"

    def frame(lst, s2, idx2):
        df = pd.DataFrame({"s1": seq, "t1": t1, "idx1": a, "s2": s2, "t2": t2, "idx2": idx2})
        return _tag(df, f"{src}: {lst}")

    return {"pos": frame("pos", seq, a), "neg_intra": frame("neg_intra", seq, b),
            "neg_inter": frame("neg_inter", seq_inter, idx_inter)}


def ref_patch_std(ref_strip: np.ndarray) -> np.ndarray:
    """``np.std`` of every 65x65 patch of a ``ref`` strip image (uint8 [65 N, 65]) -> float64 [N].

    Computed patch by patch with ``np.std(patch)`` on the contiguous 65x65 block, the very call
    ``gen_retrieval`` makes (a vectorised std over a 3-D view may sum in another order), so the
    ``std > 10`` filter decides exactly as the original.
    """
    strip = np.asarray(ref_strip)
    if strip.ndim != 2 or strip.shape[1] != 65 or strip.shape[0] % 65:
        raise DataError(f"a ref strip must be a 2-D image of width 65 and height 65*N, got shape "
                        f"{strip.shape}; pass the grayscale ref.png of the sequence")
    strip = np.ascontiguousarray(strip)
    return np.array([np.std(strip[i:i + 65]) for i in range(0, strip.shape[0], 65)], dtype=np.float64)


def _std_of(ref_std, names: np.ndarray, codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """std of the ref patch of each drawn (sequence code, idx)."""
    out = np.empty(codes.size, dtype=np.float64)
    if callable(ref_std):
        for i in range(codes.size):
            out[i] = float(ref_std(str(names[codes[i]]), int(idx[i])))
        return out
    if not isinstance(ref_std, Mapping):
        raise ConfigError("ref_std must be a mapping seq -> per-patch std array (see ref_patch_std) "
                          f"or a callable (seq, idx) -> std, got {type(ref_std).__name__}")
    for c in np.unique(codes):
        seq = str(names[c])
        if seq not in ref_std:
            raise DataError(f"ref_std has no entry for sequence {seq!r}; give the std of every ref "
                            "patch of each test sequence (ref_patch_std(ref strip))")
        arr = np.asarray(ref_std[seq], dtype=np.float64)
        rows = codes == c
        if arr.ndim != 1 or idx[rows].max() >= arr.size:
            raise DataError(f"ref_std[{seq!r}] has shape {arr.shape} but patch {int(idx[rows].max())} is "
                            "drawn; it must hold one std per ref patch (length N)")
        out[rows] = arr[idx[rows]]
    return out


def gen_retrieval(seq_lengths: Mapping[str, int], split, ref_std, n_queries=10_000,
                  n_distractors=20_000, seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """hpatches-benchmark's ``gen_retrieval``: ``(queries, distractors)`` with columns ``s,idx``.

    ``ref_std``: the std of the ref patches, either seq -> float array [N] (:func:`ref_patch_std`)
    or a callable ``(seq, idx) -> float``. The random stream, call for call
    (``RandomState(seed)``):

    1. ``s_q = choice(split['test'], 4 * n_queries)``, then per row ``randint(N_s)``;
    2. ``s_d = choice(split['test'], 10 * n_distractors)``, then per row ``randint(N_s)``;

    then, without randomness: keep the rows whose ref patch has ``np.std > 10``; drop duplicate
    (s, idx) rows keeping the first; queries = the first ``n_queries`` rows; distractors = the
    remaining distractor rows that are not among those queries, the first ``n_distractors``.
    Orders are draw orders (nothing is sorted).

    Defaults: ``n_queries=10_000``, not the original function's ``N_queries=0.5*1e4``: the shipped
    files (``data/hpatches/tasks``) hold 10,000 queries and their stream matches 4 * 10^4
    sequence draws (split a's first two query indices, 3 and 2, are the first two bounded draws
    after ``choice(test, 40000)``, not after 20000; see the tests), so they were made with
    ``N_queries=1e4``.
    """
    split = _as_split(split)
    n_queries = _count(n_queries, "n_queries")
    n_distractors = _count(n_distractors, "n_distractors")
    lengths = _lengths(seq_lengths, split, need=1)
    names = np.asarray(split["test"], dtype=object)
    rs = np.random.RandomState(seed)
    q_codes = rs.choice(np.arange(len(names)), 4 * n_queries)
    with _legacy_stream(rs) as (key, pos):
        q_idx = K.mt_bounded_draws(key, pos, lengths[q_codes])
    d_codes = rs.choice(np.arange(len(names)), 10 * n_distractors)
    with _legacy_stream(rs) as (key, pos):
        d_idx = K.mt_bounded_draws(key, pos, lengths[d_codes])
    keep_q = _std_of(ref_std, names, q_codes, q_idx) > STD_THRESHOLD
    keep_d = _std_of(ref_std, names, d_codes, d_idx) > STD_THRESHOLD
    queries = pd.DataFrame({"s": names[q_codes[keep_q]], "idx": q_idx[keep_q]})
    queries = queries.drop_duplicates().head(n_queries).reset_index(drop=True)
    dis = pd.DataFrame({"s": names[d_codes[keep_d]], "idx": d_idx[keep_d]}).drop_duplicates()
    is_query = pd.MultiIndex.from_frame(dis).isin(pd.MultiIndex.from_frame(queries))
    dis = dis[~is_query].head(n_distractors).reset_index(drop=True)
    if len(queries) and not len(dis):  # every drawable patch became a query: a pool of queries only
        raise ConfigError(f"hpatches-benchmark retrieval, split {split['name']!r}: the {len(queries)} queries took every "
                          f"patch the distractor draw reached, so no distractor is left (the split's test sequences hold "
                          f"{int(lengths.sum())} patches); lower patches.hpatches_benchmark.retrieval_queries or give "
                          "the sequences more patches")
    src = f"generated retrieval task (gen_retrieval, split {split['name']!r}, seed={seed})"
    return _tag(queries, f"{src}: queries"), _tag(dis, f"{src}: distractors")


# =============================================================================== task files


def verification_task_paths(directory, split_name: str) -> dict[str, Path]:
    """``{list: <directory>/verif_<list>_split-<name>.csv}`` (the original's file names)."""
    return {lst: Path(directory) / f"verif_{lst}_split-{split_name}.csv" for lst in VERIFICATION_LISTS}


def retrieval_task_paths(directory, split_name: str) -> dict[str, Path]:
    """``{'queries', 'distractors'}`` -> ``<directory>/retr_<kind>_split-<name>.csv``."""
    return {k: Path(directory) / f"retr_{k}_split-{split_name}.csv" for k in ("queries", "distractors")}


def _write_csv(df: pd.DataFrame, columns: tuple, path: Path, compress: bool) -> Path:
    """CSV as the original writes it (``to_csv(index=False)``: header, these columns, no index);
    ``compress`` -> ``<path>.gz`` with a zero gzip timestamp (byte-identical reruns)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"cannot write {path}: the table lacks columns {missing}; expected {list(columns)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        path = path.with_name(path.name + ".gz")
    text = df.to_csv(columns=list(columns), index=False)
    with atomic_path(path) as tmp, open(tmp, "wb") as raw:
        if compress:  # the gzip header names the final file, as pandas' own gzip writer would
            import gzip

            with gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw, mtime=0) as gz:
                gz.write(text.encode())
        else:
            raw.write(text.encode())
    return path


def write_verification_tasks(pairs: Mapping[str, pd.DataFrame], directory, split_name: str,
                             compress: bool = False) -> dict[str, Path]:
    """Write the three lists of :func:`gen_verification` like the original (returns the paths)."""
    paths = verification_task_paths(directory, split_name)
    return {lst: _write_csv(pairs[lst], VERIFICATION_COLUMNS, paths[lst], compress) for lst in VERIFICATION_LISTS}


def write_retrieval_tasks(queries: pd.DataFrame, distractors: pd.DataFrame, directory, split_name: str,
                          compress: bool = False) -> dict[str, Path]:
    """Write the two files of :func:`gen_retrieval` like the original (returns the paths)."""
    paths = retrieval_task_paths(directory, split_name)
    return {"queries": _write_csv(queries, RETRIEVAL_COLUMNS, paths["queries"], compress),
            "distractors": _write_csv(distractors, RETRIEVAL_COLUMNS, paths["distractors"], compress)}


def _existing(path: Path) -> Path:
    """``path`` or ``path.gz``, whichever exists."""
    if path.is_file():
        return path
    gz = path.with_name(path.name + ".gz")
    if gz.is_file():
        return gz
    raise DataError(f"task file {path} (or {gz.name}) not found; generate it with gen_verification / "
                    "gen_retrieval and write_*_tasks, or point to the folder that holds it")


def _read_task_csv(path: Path, columns: tuple, integer: tuple) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype={c: str for c in columns if c not in integer})
    except (OSError, ValueError, EOFError, pd.errors.ParserError) as exc:
        raise DataError(f"cannot read task file {path}: {exc}; regenerate it") from exc
    if tuple(df.columns) != columns:
        raise DataError(f"task file {path} has columns {list(df.columns)}, expected {list(columns)} "
                        "(header line, in this order); regenerate it with write_*_tasks")
    if df.isna().to_numpy().any():
        row = int(np.flatnonzero(df.isna().to_numpy().any(axis=1))[0])
        raise DataError(f"task file {path}: empty value in row {row} (line {row + 2}); regenerate it")
    for c in integer:
        if df[c].dtype.kind not in "iu":
            raise DataError(f"task file {path}: column {c!r} must hold integers, got dtype {df[c].dtype}; "
                            "regenerate it")
    return _tag(df, str(path))


def read_verification_tasks(directory, split_name: str) -> dict[str, pd.DataFrame]:
    """The three verification lists of ``split_name`` from ``directory`` (``.csv`` or ``.csv.gz``).

    hpatches-benchmark ships no verification files (they are large); generate them with
    :func:`gen_verification` + :func:`write_verification_tasks`.
    """
    paths = verification_task_paths(directory, split_name)
    return {lst: _read_task_csv(_existing(p), VERIFICATION_COLUMNS, ("t1", "idx1", "t2", "idx2"))
            for lst, p in paths.items()}


def read_retrieval_tasks(split_name: str, directory=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(queries, distractors)`` of ``split_name``; ``directory=None``: the official files shipped
    with descbench (``data/hpatches/tasks/retr_*_split-<name>.csv.gz``, gzip of hpatches-benchmark's
    ``tasks/`` files, valid for the 116 HPatches sequences only)."""
    if directory is None:
        known = sorted(load_splits())
        if split_name not in known:
            raise ConfigError(f"no shipped retrieval task for split {split_name!r} (shipped: {known}); "
                              "generate one with gen_retrieval")
        base = resources.files("descbench").joinpath(f"{_DATA}/tasks")
        out = []
        for kind in ("queries", "distractors"):
            with resources.as_file(base.joinpath(f"retr_{kind}_split-{split_name}.csv.gz")) as p:
                out.append(_read_task_csv(Path(p), RETRIEVAL_COLUMNS, ("idx",)))
        return out[0], out[1]
    paths = retrieval_task_paths(directory, split_name)
    return (_read_task_csv(_existing(paths["queries"]), RETRIEVAL_COLUMNS, ("idx",)),
            _read_task_csv(_existing(paths["distractors"]), RETRIEVAL_COLUMNS, ("idx",)))


# =============================================================================== descriptors


def type_name(jitter: str, t: int) -> str:
    """hpatches-benchmark's ``id2t``: type index 0 -> ``ref``, k = 1..5 -> ``<jitter>k``."""
    return "ref" if t == 0 else f"{jitter}{t}"


class _Descs:
    """Validated access to the descriptors needed by one task."""

    def __init__(self, descriptors, needs: Mapping[str, Iterable[str]], source: str):
        if not isinstance(descriptors, Mapping):
            raise DataError(f"descriptors must be a mapping sequence -> patch type -> array, got "
                            f"{type(descriptors).__name__}")
        missing = sorted(s for s in needs if s not in descriptors)
        if missing:
            shown = ", ".join(missing[:8]) + (", ..." if len(missing) > 8 else "")
            raise DataError(f"task {source} references {len(missing)} sequences absent from the "
                            f"descriptors: {shown}; describe these sequences, or generate tasks for the "
                            "described sequences (gen_verification / gen_retrieval on make_splits(...))")
        self.d = descriptors
        self.needs = {s: set(t) for s, t in needs.items()}
        self._all16: dict = {}
        self.n: dict[str, int] = {}
        ref_kind = None  # (dtype, width, where)
        for seq in sorted(needs):
            strips = descriptors[seq]
            for t in sorted(set(needs[seq]), key=PATCH_TYPES.index):
                if not isinstance(strips, Mapping) or t not in strips:
                    raise DataError(f"descriptors of sequence {seq!r} have no patch type {t!r}, needed by "
                                    f"task {source}; describe all 16 strips ({', '.join(PATCH_TYPES)})")
                x = strips[t]
                if not isinstance(x, np.ndarray) or x.ndim != 2:
                    raise DataError(f"descriptors {seq}.{t} must be a 2-D array [N, D], got "
                                    f"{getattr(x, 'shape', type(x).__name__)}")
                if x.dtype not in (np.float32, np.uint8) or x.shape[1] == 0:
                    raise DataError(f"descriptors {seq}.{t} have dtype {x.dtype} and width {x.shape[1]}; "
                                    "expected float32 (L2) or uint8 packed bits (Hamming) with D >= 1")
                kind = (x.dtype, x.shape[1])
                if ref_kind is None:
                    ref_kind = (*kind, f"{seq}.{t}")
                elif kind != ref_kind[:2]:
                    raise DataError(f"descriptor mismatch: {seq}.{t} is {x.dtype} x {x.shape[1]} but "
                                    f"{ref_kind[2]} is {ref_kind[0]} x {ref_kind[1]}; all sequences must "
                                    "be described by one descriptor")
                n = self.n.setdefault(seq, x.shape[0])
                if x.shape[0] != n:
                    raise DataError(f"descriptors {seq}.{t} have {x.shape[0]} rows but other strips of "
                                    f"{seq!r} have {n}; every strip of a sequence has the same N patches")
                if x.dtype == np.float32:
                    bad = ~np.isfinite(x)
                    if bad.any():
                        row = int(np.flatnonzero(bad.any(axis=1))[0])
                        raise DataError(f"descriptors {seq}.{t} contain NaN or inf (first bad row {row}); "
                                        "fix the descriptor extraction (e.g. normalisation of blank patches)")
        self.dtype = ref_kind[0] if ref_kind else np.dtype(np.float32)
        self.dim = ref_kind[1] if ref_kind else 0
        self.hamming = self.dtype == np.uint8

    def strip(self, seq: str, t: str) -> np.ndarray:
        return self.d[seq][t]

    def all16(self, seq: str) -> tuple:
        """The 16 strips of ``seq`` in PATCH_TYPES order as C-contiguous writeable arrays (numba
        kernels take one array type; a read-only or strided strip is copied, once per evaluation);
        a strip that is absent or not needed is an empty [0, D] placeholder, never indexed."""
        if seq not in self._all16:
            out = []
            for t in PATCH_TYPES:
                x = self.d[seq].get(t) if t in self.needs.get(seq, ()) else None
                if x is None:
                    x = np.empty((0, self.dim), dtype=self.dtype)
                elif not (x.flags.c_contiguous and x.flags.writeable):
                    x = np.array(x, order="C")
                out.append(x)
            self._all16[seq] = tuple(out)
        return self._all16[seq]

    def check_idx(self, names: np.ndarray, seq_codes: np.ndarray, idx: np.ndarray, source: str, column: str) -> None:
        """DataError for the first row whose index is outside [0, N) of its sequence
        ``names[seq_codes[row]]``."""
        n = np.array([self.n[s] for s in names], dtype=np.int64)[seq_codes]
        bad = np.flatnonzero((idx < 0) | (idx >= n))
        if bad.size:
            r = int(bad[0])
            seq = names[seq_codes[r]]
            raise DataError(f"task {source}: row {r} (line {r + 2}) has {column}={int(idx[r])} but sequence "
                            f"{seq!r} has {int(n[r])} patches (valid 0..{int(n[r]) - 1}); the task "
                            "file was made for other patches - regenerate it for this patch dataset")

    def gather(self, names: np.ndarray, seq_codes: np.ndarray, types: tuple, type_codes, idx: np.ndarray) -> np.ndarray:
        """Rows ``descriptors[names[seq_codes[i]]][types[type_codes[i]]][idx[i]]`` -> [n, D], one
        fancy index per strip (``type_codes`` None: every row of type ``types[0]``)."""
        out = np.empty((idx.size, self.dim), dtype=self.dtype)
        if idx.size == 0:
            return out
        key = seq_codes * len(types) + (0 if type_codes is None else type_codes)
        order = np.argsort(key, kind="stable")
        cuts = np.flatnonzero(np.diff(key[order])) + 1
        for rows in np.split(order, cuts):
            sc, tc = divmod(int(key[rows[0]]), len(types))
            out[rows] = self.strip(names[sc], types[tc])[idx[rows]]
        return out

    def keys(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Row-wise ranking keys (squared L2 in float64 or Hamming) of two gathered blocks."""
        if self.hamming:
            return K.rowwise_keys_hamming(pack_bits_to_words(a), pack_bits_to_words(b))
        return K.rowwise_keys_l2(a, b)


def _first_with_missing(descriptors, sources: list[tuple[str, set]]) -> str:
    """The first task source that references a sequence absent from ``descriptors`` (else the first)."""
    if isinstance(descriptors, Mapping):
        for src, seqs in sources:
            if any(s not in descriptors for s in seqs):
                return src
    return sources[0][0]


def _source(df: pd.DataFrame, default: str) -> str:
    return str(df.attrs.get("source", default))


def _check_frame(df, columns: tuple, source: str) -> None:
    if not isinstance(df, pd.DataFrame) or any(c not in df.columns for c in columns):
        have = list(df.columns) if isinstance(df, pd.DataFrame) else type(df).__name__
        raise DataError(f"task {source} must be a table with columns {list(columns)}, got {have}; "
                        "read it with read_*_tasks or make it with gen_*")


def _ints(df: pd.DataFrame, col: str, source: str) -> np.ndarray:
    x = df[col].to_numpy()
    if x.dtype.kind not in "iu":
        raise DataError(f"task {source}: column {col!r} must hold integers, got dtype {x.dtype}")
    return x.astype(np.int64)


# =============================================================================== metrics


def roc_auc_trapezoid(distances, labels) -> float:
    """ROC AUC as hpatches-benchmark ``metrics.roc``: trapezoid over (FPR, TPR), stable order.

    Items are ranked by increasing distance with a stable mergesort (hpatches:
    ``argsort(-scores, kind='mergesort')`` on ``scores = -distances``), so tied items keep their
    input order. With TP(K), FP(K) the positives / negatives among the first K items
    (K = 0..n, K = 0 giving the leading point (0, 0)) and P, N the totals::

        TPR(K) = TP(K) / max(P, 1e-10),   FPR(K) = FP(K) / max(N, 1e-10)
        AUC = np.trapezoid(TPR, FPR)

    A negative moves FPR by 1/N at constant TPR, a positive moves TPR at constant FPR, so
    AUC = (1 / (P N)) * #{(positive, negative): the positive is ranked first}. Without ties this
    is the Mann-Whitney statistic of ``sklearn.metrics.roc_auc_score``; with ties the two differ:
    scikit-learn groups tied items into one threshold (one diagonal segment), i.e. counts a tied
    (positive, negative) pair as 1/2, whereas here the pair counts 1 or 0 by input order - 0 in
    the verification lists, which stack the negatives first (pessimistic). Returns NaN when
    there is no positive or no negative (hpatches returns 0.0 there).
    """
    d = np.asarray(distances, dtype=np.float64)
    lab = np.asarray(labels)
    if d.ndim != 1 or lab.shape != d.shape:
        raise ValueError(f"distances and labels must be 1-D of one length, got {d.shape} and {lab.shape}")
    if not np.isfinite(d).all():
        raise ValueError("distances must be finite")
    if not np.isin(lab, (0, 1)).all():
        raise ValueError("labels must only contain values in {0, 1}")
    pos = lab[np.argsort(d, kind="stable")] == 1
    n_pos = int(pos.sum())
    n_neg = pos.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    tp = np.concatenate([[0], np.cumsum(pos)])
    fp = np.concatenate([[0], np.cumsum(~pos)])
    return float(np.trapezoid(tp / max(n_pos, _SMALL), fp / max(n_neg, _SMALL)))


def retrieval_ap_from_ranks(ranks, num_positives: int) -> np.ndarray:
    """Trapezoid AP (:func:`descbench.metrics.ap.ap_trapezoid`) from the ranks of the positives.

    ``ranks[..., i]``: the 1-based rank of the i-th positive in the stably sorted list
    (ascending, last axis); the items after the last positive add no area. The trapezoid only
    gains area where recall grows, at a positive of rank K preceded by i positives::

        area_i = (recall(K) - recall(K-1)) * (precision(K-1) + precision(K)) / 2
        recall(K) = (i+1)/P,  precision(K) = (i+1)/K,  precision(K-1) = max(i, 1e-10) / max(K-1, 1e-10)

    (so precision 1 at K-1 = 0, and hpatches' 1e-10 / (K-1) when no positive precedes), summed
    over i. Equal to :func:`ap_trapezoid` on the materialised list up to the rounding of the sum
    (a few ulps), in O(P) instead of a sort of the list.
    """
    r = np.asarray(ranks, dtype=np.float64)
    i = np.arange(r.shape[-1], dtype=np.float64)
    p = float(num_positives)
    prec_at = (i + 1.0) / r
    prec_before = np.maximum(i, _SMALL) / np.maximum(r - 1.0, _SMALL)
    d_recall = (i + 1.0) / p - i / p
    return np.sum(d_recall * (prec_before + prec_at) / 2.0, axis=-1)


# =============================================================================== verification


def _verification_lists(pairs: Mapping[str, pd.DataFrame]) -> tuple[dict[str, tuple[str, dict]], np.ndarray]:
    """``({list: (source, columns)}, names)``: validated int64 columns t1/idx1/t2/idx2 and c1/c2,
    the codes of s1/s2 in the table ``names`` (one code per sequence name over the three lists)."""
    lists = {}
    lut: dict[str, int] = {}
    for lst in VERIFICATION_LISTS:
        if lst not in pairs:
            raise ConfigError(f"verification pairs lack the list {lst!r}; expected {list(VERIFICATION_LISTS)}")
        df = pairs[lst]
        src = _source(df, f"verification list {lst!r}") if isinstance(df, pd.DataFrame) else lst
        _check_frame(df, VERIFICATION_COLUMNS, src)
        if len(df) == 0:
            raise DataError(f"task {src} is empty; regenerate the verification lists")
        cols = {c: _ints(df, c, src) for c in ("t1", "idx1", "t2", "idx2")}
        for c in ("t1", "t2"):
            bad = np.flatnonzero((cols[c] < 0) | (cols[c] > 5))
            if bad.size:
                r = int(bad[0])
                raise DataError(f"task {src}: row {r} (line {r + 2}) has {c}={cols[c][r]}; type indices are "
                                "0 (ref) .. 5 (<jitter>5) - regenerate the file")
        for side in "12":
            codes, uniq = pd.factorize(df["s" + side])
            table = np.array([lut.setdefault(str(u), len(lut)) for u in uniq], dtype=np.int64)
            cols["c" + side] = table[codes]
        lists[lst] = (src, cols)
    return lists, np.array(list(lut), dtype=object)


def _verification_needs(lists, names: np.ndarray) -> dict[str, set]:
    """Every (sequence, strip) a list references, under every jitter."""
    needs: dict[str, set] = {}
    for _, c in lists.values():
        for side in "12":
            for u in np.unique(c["c" + side] * 6 + c["t" + side]):
                needs.setdefault(names[u // 6], set()).update(type_name(j, int(u % 6)) for j in JITTERS)
    return needs


def _sequence_pair_groups(c: dict, n_names: int) -> list[tuple[int, int, np.ndarray]]:
    """The rows of a list grouped by (sequence code 1, sequence code 2), ascending rows in each."""
    key = c["c1"] * n_names + c["c2"]
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    return [(int(c["c1"][g[0]]), int(c["c2"][g[0]]), g) for g in np.split(order, cuts)]


def _pair_keys(descs: "_Descs", names: np.ndarray, c: dict, groups) -> np.ndarray:
    """Ranking keys [3, n] of one list's pairs under the jitters e, h, t: one kernel call per
    sequence pair, on the strips themselves (no gathered copy of the descriptors). The calls are
    spread over ``numba.get_num_threads()`` Python threads (the kernels release the GIL; random
    reads of descriptor rows are memory-latency bound, so threads overlap them); every call writes
    its own rows of ``out``, so the result does not depend on the scheduling."""
    kernel = K.pair_keys_group_hamming if descs.hamming else K.pair_keys_group_l2
    out = np.empty((len(JITTERS), c["t1"].size), dtype=np.float64)
    for sa, sb, _ in groups:  # resolve the strips in this thread (the cache is a plain dict)
        descs.all16(names[sa]), descs.all16(names[sb])

    def run(part):
        for sa, sb, rows in part:
            kernel(descs.all16(names[sa]), descs.all16(names[sb]), c["t1"], c["idx1"], c["t2"], c["idx2"],
                   rows, out)

    n_threads = max(1, min(int(numba.get_num_threads()), len(groups)))
    if n_threads == 1:
        run(groups)
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(run, [groups[i::n_threads] for i in range(n_threads)]))
    return out


def verification_scores(neg_keys: np.ndarray, pos_keys: np.ndarray) -> tuple[float, float]:
    """``(balanced AUC, imbalanced AP)`` of one negative list against the positives.

    List ``[negatives; positives]`` (negatives FIRST: equidistant negatives rank before positives
    in the stable order), labels 0 / 1; AUC = :func:`roc_auc_trapezoid` of the whole list; AP =
    :func:`ap_trapezoid` of its first ``n_neg + int(n_pos * 0.2)`` items.
    """
    n_neg, n_pos = neg_keys.size, pos_keys.size
    dist = np.concatenate([neg_keys, pos_keys])
    labels = np.concatenate([np.zeros(n_neg, np.int8), np.ones(n_pos, np.int8)])
    n_imb = n_neg + int(n_pos * IMBALANCED_FRACTION)
    return roc_auc_trapezoid(dist, labels), ap_trapezoid(dist[:n_imb], labels[:n_imb])


def evaluate_verification(descriptors, pairs: Mapping[str, pd.DataFrame], split: str = "custom") -> TaskResult:
    """hpatches-benchmark ``eval_verification`` on the pair lists ``pos``, ``neg_intra``, ``neg_inter``.

    For each jitter j in e, h, t: the key of every pair, with type index t -> ``ref`` (0) or
    ``<j>t`` (:func:`type_name`), hence the same pairs give three evaluations. For negatives in
    (intra, inter), the list is ``[negatives; positives]`` with labels 0 / 1 (negatives stacked
    FIRST, so in the stable order a negative precedes an equidistant positive;
    :func:`verification_scores`):

    * balanced: :func:`roc_auc_trapezoid` over the whole list (all negatives vs all positives);
    * imbalanced: :func:`ap_trapezoid` over the first ``n_neg + int(0.2 * n_pos)`` items, i.e.
      all negatives and the first 20 % of the positives in file order (numpos = the positives
      kept). The original writes ``n_pos + int(n_pos * 0.2)`` and labels ``n_pos`` zeros, which
      is the same for its lists of equal length; here the negatives' own count is used.

    ``details``: one row per (jitter, negatives, protocol) with ``metric`` auc / ap and ``value``
    (a fraction) plus ``n_pos``/``n_neg``; ``table``: :func:`summarise_verification`. Keys are
    computed on the strips in place (one numba call per sequence pair, no gathered copy), so the
    extra memory is O(number of pairs).
    """
    lists, names = _verification_lists(pairs)
    sources = [(src, set(names[np.unique(np.concatenate([c["c1"], c["c2"]]))])) for src, c in lists.values()]
    descs = _Descs(descriptors, _verification_needs(lists, names), _first_with_missing(descriptors, sources))
    for src, c in lists.values():
        descs.check_idx(names, c["c1"], c["idx1"], src, "idx1")
        descs.check_idx(names, c["c2"], c["idx2"], src, "idx2")
    keys = {lst: _pair_keys(descs, names, c, _sequence_pair_groups(c, names.size)) for lst, (_, c) in lists.items()}
    cases = [(ji, j, neg) for ji, j in enumerate(JITTERS) for neg in ("intra", "inter")]
    with ThreadPoolExecutor(max(1, int(numba.get_num_threads()))) as pool:  # sorts release the GIL
        scores = list(pool.map(lambda cs: verification_scores(keys[f"neg_{cs[2]}"][cs[0]], keys["pos"][cs[0]]), cases))
    rows = []
    n_pos = keys["pos"].shape[1]
    for (_, j, neg), (auc, ap) in zip(cases, scores):
        n_neg = keys[f"neg_{neg}"].shape[1]
        rows.append((j, neg, "balanced", "auc", auc, n_pos, n_neg))
        rows.append((j, neg, "imbalanced", "ap", ap, int(n_pos * IMBALANCED_FRACTION), n_neg))
    details = pd.DataFrame(rows, columns=["jitter", "negatives", "protocol", "metric", "value", "n_pos", "n_neg"])
    return TaskResult("verification", split, summarise_verification(details, split), details)


def _table(rows: list[dict], task: str, split: str) -> pd.DataFrame:
    df = pd.DataFrame([{**{c: None for c in TABLE_COLUMNS}, "task": task, "split": split, **r} for r in rows],
                      columns=list(TABLE_COLUMNS))
    df["pool_size"] = df["pool_size"].astype("Int64")
    return df


def summarise_verification(details: pd.DataFrame, split: str = "custom") -> pd.DataFrame:
    """The 12 cases (jitter x negatives x protocol, balanced -> AUC, imbalanced -> AP) x 100: the
    numbers ``hpatches_results.py`` prints (as fractions, one table per protocol); then
    ``avg_balanced`` / ``avg_imbalanced`` = the mean of the 6 cases of each protocol (summary rows,
    jitter and negatives 'all'; ``results.py`` ``DescriptorVerificationResult``, the paper-style
    average: ``hpatches_results.py`` prints no average for verification)."""
    rows = []
    for r in details.itertuples():
        rows.append({"level": "case", "jitter": r.jitter, "negatives": r.negatives, "protocol": r.protocol,
                     "metric": r.metric, "value": 100.0 * r.value})
    for protocol, metric in (("balanced", "auc"), ("imbalanced", "ap")):
        vals = [100.0 * v for v in details.loc[details["protocol"] == protocol, "value"]]
        rows.append({"level": "summary", "jitter": "all", "negatives": "all", "protocol": protocol,
                     "metric": metric, "value": float(np.mean(vals))})
    return _table(rows, "verification", split)


# =============================================================================== matching


def _seq_type(seq: str) -> str:
    """``results.py``: ``seq.split('_')[0]`` -> 'i' (illumination) / 'v' (viewpoint); other names
    (user datasets) -> 'other'."""
    head = seq.split("_")[0]
    return head if head in ("i", "v") else "other"


def match_strip(ref: np.ndarray, target: np.ndarray, chunk_mb: float = 64.0) -> tuple[float, float]:
    """``(AP, success rate)`` of one ref strip against one target strip (same N rows, row i is the
    same physical patch): nn(i) = the exact nearest target of ref patch i (ties to the lowest
    index), correct iff nn(i) == i, AP = ``ap_trapezoid(key(i, nn(i)), correct, num_positives=N)``
    ranked on the squared-L2 / Hamming keys in ref order (stable)."""
    n = ref.shape[0]
    own = np.arange(n, dtype=np.int64)
    nn, dist, _, _ = nearest_two(ref, target, chunk_mb=chunk_mb)
    keys = dist if ref.dtype == np.uint8 else pair_keys_l2(ref, target, own, nn)
    correct = nn == own
    return ap_trapezoid(keys, correct.astype(np.int8), num_positives=n), float(np.count_nonzero(correct)) / n


def evaluate_matching(descriptors, sequences: Iterable[str], split: str = "custom",
                      chunk_mb: float = 64.0) -> TaskResult:
    """hpatches-benchmark ``eval_matching`` over ``sequences`` (``split['test']``).

    Per sequence, jitter j and k = 1..5: for every ref patch i the nearest neighbour nn(i) in
    strip ``<j>k`` (:func:`descbench.metrics.nn.nearest_two`: exact, ties to the lowest index, as
    the original's ``argmin`` over the distance matrix); correct iff nn(i) == i;
    ``ap = ap_trapezoid(s_nn, correct, num_positives=N)`` (hpatches ``pr(-d, correct, numpos=N)``:
    the ground truth has N correspondences, a ref patch whose nearest neighbour is wrong is a
    positive never retrieved) ranked on the nearest-neighbour keys s_nn in the stable order of
    the ref index; ``success_rate`` = #correct / N.

    ``details``: one row per (sequence, jitter, k): sequence, seq_type, jitter, k, n_patches, ap,
    success_rate (fractions); ``table``: :func:`summarise_matching`.
    """
    seqs = list(dict.fromkeys(sequences))
    if not seqs:
        raise ConfigError("evaluate_matching: no sequences given; pass split['test']")
    descs = _Descs(descriptors, {s: PATCH_TYPES for s in seqs}, f"matching over {len(seqs)} sequences")
    rows = []
    for seq in seqs:
        n = descs.n[seq]
        if n == 0:
            raise DataError(f"descriptors of sequence {seq!r} have no rows; a sequence needs >= 1 patch")
        ref = np.ascontiguousarray(descs.strip(seq, "ref"))
        for j in JITTERS:
            for k in range(1, 6):
                ap, sr = match_strip(ref, np.ascontiguousarray(descs.strip(seq, f"{j}{k}")), chunk_mb)
                rows.append((seq, _seq_type(seq), j, k, n, ap, sr))
    details = pd.DataFrame(rows, columns=["sequence", "seq_type", "jitter", "k", "n_patches", "ap", "success_rate"])
    return TaskResult("matching", split, summarise_matching(details, split), details)


def summarise_matching(per_sequence: pd.DataFrame, split: str = "custom") -> pd.DataFrame:
    """The matching table: the headline as ``hpatches_results.py`` prints it, then ``results.py``'s
    per-type aggregates under their own names (all x100, percent).

    Headline (``hpatches_results.py`` ``results_matching``, what its terminal table shows, there
    as fractions): per jitter the mean AP over every (sequence, k) of the split, each sequence
    weighing the same (``sum ap / (sequences x 5)``, summed in sequence then k order as the
    reference) -> case rows ``seq_type 'all'``; ``map`` = the mean of the three jitters ->
    summary row ``seq_type 'all'``, metric ``map`` (the report's ``matching_map``).

    Kept, named (``results.py`` ``DescriptorMatchingResult``, the ``ench/matplotlib-fig`` branch
    that draws the paper-style figure; not printed by ``hpatches_results.py``): per sequence and
    jitter the mean over k; cases (jitter, i / v) = the mean over the sequences of that type;
    ``avg_i`` / ``avg_v`` = their mean over the jitters (summary rows, metric ``map``, seq_type
    'i' / 'v'); and their mean, metric ``map_mean_of_types`` (summary, seq_type 'all'): the
    former headline, which weighs the i_ and v_ groups equally whatever their sizes. With n_i
    and n_v sequences, ``map - map_mean_of_types = (n_i - n_v) / (2 (n_i + n_v)) x (avg_i -
    avg_v)``: on HPatches only the full split moves (57 i_ / 59 v_: by ``-(avg_i - avg_v) / 116``,
    e.g. -0.17 points for a 20-point gap); splits a, b, c hold 20 + 20 and illum / view one type,
    so they and the demo (4 + 4) are unchanged. On the illum / view splits ``results.py`` gives
    NaN for its mean of the types; here it is the mean over the types present. Sequences named neither ``i_*`` nor ``v_*`` form the type
    'other' (HPatches has none; they count in the headline like any sequence).
    """
    rows = []
    printed = []
    for j in JITTERS:
        aps = per_sequence.loc[per_sequence["jitter"] == j, "ap"].tolist()
        if not aps:
            continue
        total = 0.0
        for v in aps:  # hpatches_results.py: mAP[t] += ap in (sequence, k) order, / (#sequences x 5)
            total += float(v)
        printed.append(total / len(aps))
        rows.append({"level": "case", "jitter": j, "seq_type": "all", "metric": "map", "value": 100.0 * printed[-1]})
    rows.append({"level": "summary", "jitter": "all", "seq_type": "all", "metric": "map",
                 "value": 100.0 * (sum(printed) / len(printed)) if printed else float("nan")})
    per_sj = per_sequence.groupby(["sequence", "seq_type", "jitter"], sort=False)["ap"].mean().reset_index()
    type_avgs = []
    for st in [t for t in ("i", "v", "other") if (per_sj["seq_type"] == t).any()]:
        vals = []
        for j in JITTERS:
            sel = per_sj[(per_sj["seq_type"] == st) & (per_sj["jitter"] == j)]["ap"]
            if sel.empty:
                continue
            v = 100.0 * float(np.mean(sel))
            vals.append(v)
            rows.append({"level": "case", "jitter": j, "seq_type": st, "metric": "map", "value": v})
        avg = float(np.mean(vals))
        type_avgs.append(avg)
        rows.append({"level": "summary", "jitter": "all", "seq_type": st, "metric": "map", "value": avg})
    rows.append({"level": "summary", "jitter": "all", "seq_type": "all", "metric": "map_mean_of_types",
                 "value": float(np.mean(type_avgs)) if type_avgs else float("nan")})
    return _table(rows, "matching", split)


# =============================================================================== retrieval


def _pool_cuts(pool_sizes) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.array(sorted(set(int(k) for k in pool_sizes)), dtype=np.int64)
    if sizes.size == 0 or sizes[0] < N_RETRIEVAL_POSITIVES:
        raise ConfigError(f"pool sizes must be integers >= {N_RETRIEVAL_POSITIVES} (the positives head the "
                          f"list), got {list(pool_sizes)}")
    return sizes, sizes - N_RETRIEVAL_POSITIVES


def retrieval_counts(q: np.ndarray, d: np.ndarray, qseq: np.ndarray, dseq: np.ndarray, pos_keys: np.ndarray,
                     cuts: np.ndarray, chunk_mb: float = 64.0) -> np.ndarray:
    """``out[q, c, p]`` = #{distractors among the first ``cuts[c]`` with ``dseq != qseq[q]`` (file
    order): key(q, d_j) < pos_keys[q, p]} (strict), exact.

    float32: one BLAS screen per block of query rows (at most ``chunk_mb`` MiB of screen,
    :func:`descbench.metrics.pairpass.screen_block`) and the band re-evaluation of
    :func:`descbench.patches.hpbench_kernels.retrieval_counts_l2`; inputs too large for a float32
    screen, and Hamming descriptors, compute every key exactly. The distractor keys do not depend
    on the jitter (distractors are ref patches), so all jitters' positives are counted in the
    same pass (``pos_keys`` holds them side by side).
    """
    nq, nd = q.shape[0], d.shape[0]
    out = np.zeros((nq, cuts.size, pos_keys.shape[1]), dtype=np.int64)
    if nq == 0:
        return out
    if q.dtype == np.uint8:
        K.retrieval_counts_hamming(pack_bits_to_words(q), pack_bits_to_words(d), dseq, qseq, pos_keys, cuts, out)
        return out
    if nd == 0:
        return out
    qn2 = np.einsum("ij,ij->i", q, q, dtype=np.float64)
    cn2 = np.einsum("ij,ij->i", d, d, dtype=np.float64)
    qmax, cmax = float(np.sqrt(qn2.max())), float(np.sqrt(cn2.max()))
    if qmax * cmax + cmax * cmax > SCREEN_LIMIT:
        K.retrieval_counts_direct_l2(q, d, dseq, qseq, pos_keys, cuts, out)
        return out
    qaug, caug, _, wr, exact = l2_setup(q, d, qn2, cn2)
    step = block_rows(nd, chunk_mb)
    for r0 in range(0, nq, step):
        r1 = min(nq, r0 + step)
        K.retrieval_counts_l2(screen_block(qaug, caug, r0, r1), r0, q, d, qn2, wr, exact, dseq, qseq,
                              pos_keys, cuts, out)
    return out


def evaluate_retrieval(descriptors, queries: pd.DataFrame, distractors: pd.DataFrame, split: str = "custom",
                       pool_sizes=POOL_SIZES, chunk_mb: float = 64.0) -> TaskResult:
    """hpatches-benchmark ``eval_retrieval``.

    Queries: the ``ref`` patches listed in ``queries``; distractors: the ``ref`` patches listed in
    ``distractors`` minus those of the query's own sequence (a mask by sequence name, file order
    kept). For each query and jitter j the list is ``[5 positives (the query's patch in
    <j>1..<j>5), then the masked distractors]`` (positives stacked FIRST, so in the stable order
    an equidistant positive precedes a distractor: ties favour positives), labels 1 / 0, and for
    every pool size k the AP of the first k entries (:func:`ap_trapezoid`, numpos = 5; a list
    shorter than k is taken whole).

    Computed without sorting: in the stable order of the first k entries, the i-th positive
    (positives ordered by (key, position)) has rank i + 1 + c_i with c_i the number of the first
    k - 5 masked distractors with a strictly smaller key (:func:`retrieval_counts`); the AP then
    follows from :func:`retrieval_ap_from_ranks` in O(5). The distractor keys are shared by the
    three jitters and computed once per query block.

    ``details``: one row per (query, jitter, pool_size): query (row of the queries file), sequence,
    idx, jitter, pool_size, ap (fraction); ``table``: :func:`summarise_retrieval`.
    """
    sizes, cuts = _pool_cuts(pool_sizes)
    src_q = _source(queries, "retrieval queries")
    src_d = _source(distractors, "retrieval distractors")
    _check_frame(queries, RETRIEVAL_COLUMNS, src_q)
    _check_frame(distractors, RETRIEVAL_COLUMNS, src_d)
    qs = queries["s"].astype(str).to_numpy(dtype=object)
    qi = _ints(queries, "idx", src_q)
    ds = distractors["s"].astype(str).to_numpy(dtype=object)
    di = _ints(distractors, "idx", src_d)
    positives = tuple(f"{j}{k}" for j in JITTERS for k in range(1, N_RETRIEVAL_POSITIVES + 1))
    needs: dict[str, set] = {s: {"ref"} for s in set(ds)}
    for s in set(qs):
        needs.setdefault(s, set()).update(("ref",) + positives)
    descs = _Descs(descriptors, needs, _first_with_missing(descriptors, [(src_q, set(qs)), (src_d, set(ds))]))
    codes, names = pd.factorize(np.concatenate([qs, ds]))
    names = np.asarray(names, dtype=object)
    qseq, dseq = codes[: qs.size].astype(np.int64), codes[qs.size:].astype(np.int64)
    descs.check_idx(names, qseq, qi, src_q, "idx")
    descs.check_idx(names, dseq, di, src_d, "idx")
    qdesc = descs.gather(names, qseq, ("ref",), None, qi)
    ddesc = descs.gather(names, dseq, ("ref",), None, di)
    n_q, n_j, n_p = qs.size, len(JITTERS), N_RETRIEVAL_POSITIVES
    pos_keys = np.empty((n_q, n_j * n_p), dtype=np.float64)
    for c, t in enumerate(positives):
        pos_keys[:, c] = descs.keys(qdesc, descs.gather(names, qseq, (t,), None, qi))
    counts = retrieval_counts(qdesc, ddesc, qseq, dseq, pos_keys, cuts, chunk_mb)  # [Q, K, J*5]
    pk = pos_keys.reshape(n_q, n_j, n_p)
    order = np.argsort(pk, axis=-1, kind="stable")  # positives by (key, position)
    cnt = counts.reshape(n_q, cuts.size, n_j, n_p)
    cnt = np.take_along_axis(cnt, order[:, None, :, :], axis=-1)
    ranks = np.arange(1, n_p + 1) + cnt
    ap = retrieval_ap_from_ranks(ranks, n_p)  # [Q, K, J]
    ap = ap.transpose(0, 2, 1)  # [Q, J, K]
    details = pd.DataFrame({
        "query": np.repeat(np.arange(n_q), n_j * sizes.size),
        "sequence": np.repeat(qs, n_j * sizes.size),
        "idx": np.repeat(qi, n_j * sizes.size),
        "jitter": np.tile(np.repeat(np.array(JITTERS, dtype=object), sizes.size), n_q),
        "pool_size": np.tile(sizes, n_q * n_j),
        "ap": ap.reshape(-1),
    })
    return TaskResult("retrieval", split, summarise_retrieval(details, split), details)


def summarise_retrieval(per_query: pd.DataFrame, split: str = "custom") -> pd.DataFrame:
    """The retrieval table: ``hpatches_results.py``'s printed table, its headline cell, and
    ``results.py``'s mean over the pool sizes under its own name (all x100, percent).

    ``hpatches_results.py`` ``results_retrieval`` prints one row per jitter and one column per
    pool size, each cell the mean AP over the queries (``sum ap / #queries``, query order), then
    a ``mean`` row: per pool size the mean of the three jitters (fractions there; it casts the
    table to float32 before that mean, so its printed means carry float32 rounding, < 1e-7
    relative, which is not reproduced). Rows here:

    * detail, (jitter, pool_size), metric ``map``: the printed cells; detail, (jitter 'all',
      pool_size), ``map``: the printed ``mean`` row;
    * case, (jitter, largest pool size), ``map``: the printed cell of each jitter in the last
      column; summary, (jitter 'all', largest pool size), ``map`` = the printed ``mean`` row's
      last column: the headline (the report's ``retrieval_map``). The largest pool (20,000 by
      default: the 5 positives and up to 19,995 of the task file's 20,000 distractors) is the
      fullest list; the smaller pools are its prefixes;
    * case, jitter, ``map_mean_over_pools`` (pool_size empty): the mean of the jitter's row over
      the pool sizes, and summary, jitter 'all', ``map_mean_over_pools``: their mean over the
      jitters (``results.py`` ``DescriptorRetrievalResult`` on the ``ench/matplotlib-fig``
      branch, never printed by ``hpatches_results.py``). This was the headline before issue 18;
      AP falls as the pool grows, so it lies above the printed largest-pool mean (issue 18: 77.18
      before vs 73.55 printed, sift on a full split).
    """
    rows = []
    table: dict[str, dict[int, float]] = {}
    for (j, k), grp in per_query.groupby(["jitter", "pool_size"], sort=True)["ap"]:
        total = 0.0
        for v in grp.tolist():  # hpatches_results.py: mAP[k][psize] += ap over the queries, / n_q
            total += float(v)
        table.setdefault(j, {})[int(k)] = total / len(grp)
    jitters = [j for j in JITTERS if j in table]
    if not jitters:
        return _table([{"level": "summary", "jitter": "all", "metric": "map", "value": float("nan")}],
                      "retrieval", split)
    pools = sorted(table[jitters[0]])
    if any(sorted(table[j]) != pools for j in jitters):
        raise DataError("retrieval details: the jitters were evaluated at different pool sizes "
                        f"{ {j: sorted(table[j]) for j in jitters} }; evaluate every jitter at the same pool sizes")
    for j in jitters:
        for k in pools:
            rows.append({"level": "detail", "jitter": j, "pool_size": k, "metric": "map", "value": 100.0 * table[j][k]})
    mean_row = {k: sum(table[j][k] for j in jitters) / len(jitters) for k in pools}
    for k in pools:
        rows.append({"level": "detail", "jitter": "all", "pool_size": k, "metric": "map", "value": 100.0 * mean_row[k]})
    last = pools[-1]
    for j in jitters:
        rows.append({"level": "case", "jitter": j, "pool_size": last, "metric": "map", "value": 100.0 * table[j][last]})
    rows.append({"level": "summary", "jitter": "all", "pool_size": last, "metric": "map", "value": 100.0 * mean_row[last]})
    per_j = []
    for j in jitters:
        per_j.append(float(np.mean([100.0 * table[j][k] for k in pools])))
        rows.append({"level": "case", "jitter": j, "metric": "map_mean_over_pools", "value": per_j[-1]})
    rows.append({"level": "summary", "jitter": "all", "metric": "map_mean_over_pools", "value": float(np.mean(per_j))})
    return _table(rows, "retrieval", split)


# =============================================================================== all tasks


def evaluate_hpbench(descriptors, split, verification_pairs: Mapping[str, pd.DataFrame] | None = None,
                     retrieval_task: tuple[pd.DataFrame, pd.DataFrame] | None = None,
                     tasks: Iterable[str] = ("verification", "matching", "retrieval"),
                     chunk_mb: float = 64.0) -> dict[str, TaskResult]:
    """The three tasks of one descriptor on one split (name or mapping, see :func:`make_splits`).

    ``verification_pairs``: the three lists (required for verification; none are shipped);
    ``retrieval_task``: ``(queries, distractors)``, default the shipped files of an HPatches split.
    Returns ``{task: TaskResult}``; ``pd.concat([r.table for r in out.values()])`` is the tidy table.
    """
    sp = _as_split(split)
    out: dict[str, TaskResult] = {}
    for task in tasks:
        if task == "verification":
            if verification_pairs is None:
                raise ConfigError("verification needs verification_pairs: generate them with "
                                  "gen_verification (hpatches-benchmark ships no verification files)")
            out[task] = evaluate_verification(descriptors, verification_pairs, sp["name"])
        elif task == "matching":
            out[task] = evaluate_matching(descriptors, sp["test"], sp["name"], chunk_mb)
        elif task == "retrieval":
            q, d = retrieval_task if retrieval_task is not None else read_retrieval_tasks(sp["name"])
            out[task] = evaluate_retrieval(descriptors, q, d, sp["name"], chunk_mb=chunk_mb)
        else:
            raise ConfigError(f"unknown hpbench task {task!r}; choose from verification, matching, retrieval")
    return out
