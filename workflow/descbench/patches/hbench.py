"""HBench image matching and patch / image retrieval (seeds 002 and 003, protocols.md section 8).

HBench is the MATLAB toolbox of hpatches/hpatches-benchmark (``matlab/``). This module writes and
reads its text files, computes the ``.results`` files with exact nearest neighbours, and evaluates
``.results`` files produced by any tool (the read -> evaluate path is the primary one; the
in-memory path gives bit-identical numbers).

Signatures (seed 002/003): a patch-image (strip) is ``seq.type`` (``i_ajuntament.e1``), a patch
``seq.type.index`` with a 0-based index. Descriptors: ``Mapping[str, Mapping[str, ndarray]]``,
sequence -> patch type -> [N, D] float32 (L2, float64 accumulation) or uint8 packed bits
(Hamming); see :func:`descbench.metrics.nn.nearest_two`.

Files (all ``,``-separated, one record per line, ``\\n`` line ends, ASCII):

* matching ``.benchmark``: ``im_a,im_b`` per line;
* matching ``.labels`` (the ground truth HBench's file evaluator ``matching_eval.m`` reads beside
  the ``.benchmark``): per pair, in benchmark order, the line ``im_a,im_b``, then the patch
  indices of im_a, then the corresponding patch indices of im_b (HPatches: ``0,1,..,N-1`` twice);
* matching ``.results``: per pair the line ``im_a,im_b``, then nn1 indices, nn1 distances, nn2
  indices, nn2 distances of every patch of im_a in im_b (seed 002);
* retrieval ``.benchmark``: the pool of patch-images, then one query patch per line;
  ``.labels``: the pool, then per query its 6 corresponding patches; ``.results``: the pool, then
  per query the top 51 pool patches, query first (seed 003).

Number formatting (fixed, so equal inputs give byte-identical files): indices as decimal
integers, distances as Python ``repr`` of the float64 value (the shortest string that reads back
to the same double, e.g. ``12.3``, ``0.5014490338783476``, ``inf``), so write -> read -> evaluate
equals evaluating in memory bit for bit. Readers accept any float syntax Python's ``float``
accepts and whitespace around tokens (the seed's ``1, 0`` and ``12.3, 7.5``), except a ``nan`` or
``-inf`` distance (an error naming the file and line).

HBench's own MATLAB evaluators, run on these files under GNU Octave, differ from the numbers here
in two documented ways (descbench reports the definitions of seeds 002 / 003, not these):

* ``retrieval_eval.m`` (and ``retrieval_eval_chance.m``) preallocate ``zeros(1, Q)`` for Q
  queries and then write query i at position i + 1: the vector has Q + 1 entries, the first a
  0 that is no query (501 entries for 500 queries; no query is dropped). Its mean, the mAP its
  example scripts print, is therefore ``Q / (Q + 1)`` times the true mean over the queries
  (500/501 = 0.998 for a 500-query file); :func:`evaluate_retrieval` returns the true mean.
* ``matching_eval.m`` (the file evaluator that reads the ``.labels``) calls ``vl_pr`` without
  ``NumPositives``, so its AP divides by the number of correct matches of the pair, not by N,
  the patches of im_a: its AP is ``N / n_correct`` times the AP here (seed 002 and HBench's
  later ``+bench/+matching/eval.m`` pass ``NumPositives = N``, as :func:`matching_pair_ap`).
  The per-pair ``n_patches`` and ``n_correct`` of :func:`evaluate_matching` convert one into the
  other.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from descbench.errors import DataError
from descbench.metrics.ap import ap_vlfeat
from descbench.fileops import atomic_path
from descbench.metrics.nn import l2_band_tolerance, nearest_two
from descbench.patches import JITTER_NAMES
from descbench.patches import hbench_kernels as hk

__all__ = [
    "Pair", "PairMatches", "MatchingResults", "MatchingEvaluation",
    "RetrievalBenchmark", "RetrievalLabels", "RetrievalResults", "RetrievalEvaluation",
    "MATCHING_CATEGORIES", "RETRIEVAL_TOP",
    "strip_types", "patch_counts", "sequence_category",
    "matching_task_name", "matching_pairs", "matching_tasks",
    "write_matching_benchmark", "read_matching_benchmark", "write_matching_benchmarks",
    "MatchingLabels", "matching_labels", "write_matching_labels", "read_matching_labels",
    "check_identity_labels", "write_matching_labels_files",
    "compute_matching_results", "write_matching_results", "read_matching_results",
    "matching_pair_ap", "matching_pair_ratio_ap", "evaluate_matching",
    "retrieval_task_name", "make_retrieval_task", "write_retrieval_task",
    "write_retrieval_benchmark", "read_retrieval_benchmark",
    "write_retrieval_labels", "read_retrieval_labels",
    "compute_retrieval_results", "write_retrieval_results", "read_retrieval_results",
    "retrieval_list_ap", "evaluate_retrieval", "retrieval_chance",
]

Pair = tuple[str, str]

RETRIEVAL_TOP = 51  # seed 003 / HBench retrieval_eval.m: the query plus the 50 next patches
# Matching task categories: HBench's test_*_illum / test_*_viewpoint files hold the i_* / v_*
# sequences (benchmarks/matching/*.benchmark in hpatches-benchmark).
MATCHING_CATEGORIES = {"illum": "i_", "viewpoint": "v_"}

_STRIP_RE = re.compile(r"[^.,\s]+\.[^.,\s]+")
_PATCH_RE = re.compile(r"([^.,\s]+\.[^.,\s]+)\.(\d+)")
_IN_MEMORY = "<in memory>"


# =============================================================================== signatures


def strip_types(jitter: str) -> tuple[str, ...]:
    """The 6 patch types of a retrieval pool / labels line: ``ref, <j>1 .. <j>5``."""
    if jitter not in JITTER_NAMES:
        raise ValueError(f"jitter must be one of {tuple(JITTER_NAMES)}, got {jitter!r}")
    return ("ref",) + tuple(f"{jitter}{k}" for k in range(1, 6))


def _strip_of(patch: str) -> str:
    return patch.rsplit(".", 1)[0]


def _canonical_patch(token: str) -> str | None:
    """``seq.type.index`` with the index written without leading zeros, or None if malformed."""
    m = _PATCH_RE.fullmatch(token)
    if m is None:
        return None
    return f"{m.group(1)}.{int(m.group(2))}"


def _split_strip(sig: str) -> tuple[str, str]:
    seq, typ = sig.rsplit(".", 1)
    return seq, typ


def patch_counts(descriptors: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, int]:
    """Number of patches per patch-image signature ``seq.type`` (rows of each descriptor array)."""
    return {f"{seq}.{typ}": int(np.shape(arr)[0]) for seq, types in descriptors.items() for typ, arr in types.items()}


def _strip_descriptors(descriptors, sig: str) -> np.ndarray:
    """The validated descriptor array of strip ``sig`` (DataError naming the strip otherwise)."""
    seq, typ = _split_strip(sig)
    try:
        arr = descriptors[seq][typ]
    except KeyError:
        raise DataError(
            f"no descriptors for patch-image {sig} (sequence {seq!r}, patch type {typ!r}); "
            "compute descriptors for every patch-image the benchmark file names") from None
    arr = np.asarray(arr)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise DataError(f"descriptors of {sig} must be a 2-D array [N, D] with D > 0, got shape {arr.shape}")
    if arr.dtype not in (np.float32, np.uint8):
        raise DataError(f"descriptors of {sig} have dtype {arr.dtype}; expected float32 (L2) or uint8 packed "
                        "bits (Hamming): convert them when writing the descriptors")
    if arr.shape[0] == 0:
        raise DataError(f"patch-image {sig} has no patches (descriptor array of shape {arr.shape})")
    if arr.dtype == np.float32 and not np.isfinite(arr).all():
        row = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise DataError(f"descriptors of {sig} contain NaN or inf (first bad patch {sig}.{row}); recompute them")
    return np.ascontiguousarray(arr)


def _same_kind(arrays: Sequence[np.ndarray], sigs: Sequence[str]) -> None:
    first = arrays[0]
    for arr, sig in zip(arrays[1:], sigs[1:]):
        if arr.dtype != first.dtype or arr.shape[1] != first.shape[1]:
            raise DataError(f"descriptor mismatch: {sigs[0]} has {first.dtype} x {first.shape[1]}, {sig} has "
                            f"{arr.dtype} x {arr.shape[1]}; every patch-image must use one descriptor")


# =============================================================================== text files


def _read_lines(path, what: str) -> list[str]:
    """Lines of a text file without their line ends (DataError if missing or unreadable)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{what} file {p} does not exist; check the path or generate the file first")
    try:
        return p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {what} file {p} ({exc}); it must be a UTF-8 text file") from exc


def _write_lines(path, lines: Sequence[str]) -> Path:
    p = Path(path)
    with atomic_path(p) as tmp, open(tmp, "w", encoding="ascii", newline="\n") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")
    return p


def _fields(line: str) -> list[str]:
    return [tok.strip() for tok in line.split(",")]


def _content_lines(lines: Sequence[str]) -> list[tuple[int, str]]:
    """(1-based line number, stripped text) of the non-blank lines."""
    return [(i + 1, s.strip()) for i, s in enumerate(lines) if s.strip()]


def _parse_strip_list(text: str, path, lineno: int) -> tuple[str, ...]:
    strips = _fields(text)
    for s in strips:
        if not _STRIP_RE.fullmatch(s):
            raise DataError(f"{path}, line {lineno}: {s!r} is not a patch-image signature 'sequence.type'; "
                            "the line must list patch-images separated by commas")
    if len(set(strips)) != len(strips):
        dup = next(s for s in strips if strips.count(s) > 1)
        raise DataError(f"{path}, line {lineno}: patch-image {dup} is listed twice; list each patch-image once")
    return tuple(strips)


def _parse_patch(token: str, path, lineno: int) -> str:
    sig = _canonical_patch(token)
    if sig is None:
        raise DataError(f"{path}, line {lineno}: {token!r} is not a patch signature 'sequence.type.index' "
                        "(index a non-negative integer)")
    return sig


# =============================================================================== matching: tasks


def sequence_category(sequence: str, categories: Mapping[str, str] | None = None) -> str:
    """``illum`` or ``viewpoint`` for a sequence: from ``categories`` if given, else from the HPatches
    name prefix ``i_`` / ``v_`` (ValueError naming the sequence when neither applies)."""
    if categories is not None and sequence in categories:
        cat = categories[sequence]
        if cat not in MATCHING_CATEGORIES:
            raise ValueError(f"categories[{sequence!r}] must be one of {tuple(MATCHING_CATEGORIES)}, got {cat!r}")
        return cat
    for cat, prefix in MATCHING_CATEGORIES.items():
        if sequence.startswith(prefix):
            return cat
    raise ValueError(f"sequence {sequence!r} is neither i_* (illumination) nor v_* (viewpoint); "
                     "pass categories={sequence: 'illum' | 'viewpoint'}")


def matching_task_name(split: str, jitter: str, category: str) -> str:
    """``<split>_<easy|hard>_<illum|viewpoint>`` (seed 002: ``test_easy_illum`` ...)."""
    return f"{split}_{JITTER_NAMES[jitter]}_{category}"


def matching_pairs(sequences: Sequence[str], jitter: str, category: str,
                   categories: Mapping[str, str] | None = None) -> list[Pair]:
    """Pairs ``(seq.ref, seq.<jitter>k)``, k = 1..5, for the sequences of one category.

    Convention (hpatches-benchmark ``benchmarks/matching/{train,test}_*.benchmark``): the
    sequences in sorted (code point) order, five pairs per sequence in k order.
    """
    strip_types(jitter)  # validates jitter
    if category not in MATCHING_CATEGORIES:
        raise ValueError(f"category must be one of {tuple(MATCHING_CATEGORIES)}, got {category!r}")
    chosen = sorted(s for s in set(sequences) if sequence_category(s, categories) == category)
    return [(f"{s}.ref", f"{s}.{jitter}{k}") for s in chosen for k in range(1, 6)]


def matching_tasks(sequences: Sequence[str], split: str = "test",
                   categories: Mapping[str, str] | None = None) -> dict[str, list[Pair]]:
    """The four matching tasks of seed 002 for a train/test sequence list, in the seed's order:
    ``<split>_easy_illum``, ``<split>_easy_viewpoint``, ``<split>_hard_illum``,
    ``<split>_hard_viewpoint`` -> their pairs (:func:`matching_pairs`)."""
    return {matching_task_name(split, j, c): matching_pairs(sequences, j, c, categories)
            for j in ("e", "h") for c in MATCHING_CATEGORIES}


def write_matching_benchmark(path, pairs: Sequence[Pair]) -> Path:
    """Write a matching ``.benchmark`` file: one ``im_a,im_b`` line per pair."""
    return _write_lines(path, [f"{a},{b}" for a, b in pairs])


def write_matching_benchmarks(directory, sequences: Sequence[str], split: str = "test",
                              categories: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Write the four ``<task>.benchmark`` files of :func:`matching_tasks` into ``directory``."""
    return {name: write_matching_benchmark(Path(directory) / f"{name}.benchmark", pairs)
            for name, pairs in matching_tasks(sequences, split, categories).items()}


def read_matching_benchmark(path) -> list[Pair]:
    """Pairs of a matching ``.benchmark`` file. Blank lines and ``#`` comments (the seed's
    illustration ``im_a,im_b  # First image pair``) are ignored, whitespace around names too."""
    pairs: list[Pair] = []
    seen: dict[Pair, int] = {}
    for lineno, raw in enumerate(_read_lines(path, "matching benchmark"), start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        toks = _fields(text)
        if len(toks) != 2 or not all(_STRIP_RE.fullmatch(t) for t in toks):
            raise DataError(f"{path}, line {lineno}: expected 'im_a,im_b' (two patch-image signatures "
                            f"'sequence.type'), found {text!r}")
        pair = (toks[0], toks[1])
        if pair in seen:
            raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]} repeats line {seen[pair]}; "
                            "list each pair once")
        seen[pair] = lineno
        pairs.append(pair)
    return pairs


@dataclass(frozen=True)
class MatchingLabels:
    """The content of one matching ``.labels`` file: pair -> (patch indices of im_a, the
    corresponding patch indices of im_b), int64, in file order; ``lines``: pair -> the line
    number of its pair line."""

    path: str
    pairs: dict[Pair, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    lines: dict[Pair, int] = field(default_factory=dict)


def matching_labels(benchmark_pairs: Sequence[Pair], n_patches: Mapping[str, int]) -> MatchingLabels:
    """The ground truth of a matching task: patch i of im_a corresponds to patch i of im_b, for
    i = 0 .. N-1 (HPatches' construction: row i of every strip of a sequence is the same physical
    patch; it is what :func:`matching_pair_ap` counts as correct). ``n_patches``: strip signature
    -> patch count (:func:`patch_counts`); im_a and im_b must have the same count N (HBench's
    ``matching_eval.m`` requires one label per patch of im_a and nearest-neighbour indices up to
    N), else a DataError names the pair and the counts."""
    out: dict[Pair, tuple[np.ndarray, np.ndarray]] = {}
    for a, b in benchmark_pairs:
        missing = [s for s in (a, b) if s not in n_patches]
        if missing:
            raise DataError(f"no patch count for patch-image {missing[0]} (pair {a},{b}); pass n_patches with "
                            "every patch-image of the benchmark (patch_counts(descriptors) or the run's counts.json)")
        na, nb = int(n_patches[a]), int(n_patches[b])
        if na != nb:
            raise DataError(f"pair {a},{b}: {a} has {na} patches and {b} has {nb}; the matching labels pair patch i "
                            "with patch i, so both patch-images need the same number of patches")
        idx = np.arange(na, dtype=np.int64)
        out[(a, b)] = (idx, idx.copy())
    return MatchingLabels(_IN_MEMORY, out, {pair: 1 + 3 * i for i, pair in enumerate(out)})


def write_matching_labels(path, labels: MatchingLabels) -> Path:
    """Write a matching ``.labels`` file in HBench's layout (3 lines per pair, pairs in the order
    of the ``.benchmark``: ``im_a,im_b``, the indices in im_a, the corresponding indices in im_b;
    0-based decimal integers separated by commas, ``\\n`` line ends, a final line end), the file
    HBench's ``matching_eval.m`` reads."""
    lines: list[str] = []
    for (a, b), (ia, ib) in labels.pairs.items():
        lines += [f"{a},{b}", _format_indices(ia), _format_indices(ib)]
    return _write_lines(path, lines)


def read_matching_labels(path, benchmark_pairs: Sequence[Pair] | None = None) -> MatchingLabels:
    """Read a matching ``.labels`` file (HBench's layout, see :func:`write_matching_labels`).

    Blank lines are ignored; each pair line must be followed by two lines of the same number of
    integers >= 0. With ``benchmark_pairs``, the pairs must be those of the benchmark in its order
    (``matching_eval.m`` matches them line by line). Errors are DataErrors naming the file, the
    line and the fix."""
    lines = _content_lines(_read_lines(path, "matching labels"))
    out: dict[Pair, tuple[np.ndarray, np.ndarray]] = {}
    where: dict[Pair, int] = {}
    for pos in range(0, len(lines), 3):
        lineno, text = lines[pos]
        pair = _pair_header(text, path, lineno, where, "2 lines of patch indices (im_a's, then im_b's)")
        body = lines[pos + 1: pos + 3]
        if len(body) < 2 or any(_is_pair_line(t) for _, t in body):
            raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]} needs 2 lines of patch indices (im_a's, "
                            "then the corresponding ones of im_b); the file is truncated or a line is missing")
        arrays = []
        for (ln, t), what in zip(body, (f"indices of {pair[0]}", f"indices of {pair[1]}")):
            vals = _parse_numbers(t, path, ln, pair, what)
            bad = np.flatnonzero(~np.isfinite(vals) | (vals != np.floor(vals)) | (vals < 0))
            if bad.size:
                raise DataError(f"{path}, line {ln}: pair {pair[0]},{pair[1]}, {what}: entry {int(bad[0]) + 1} is "
                                f"{t.split(',')[int(bad[0])].strip()!r}; labels are 0-based patch indices (integers >= 0)")
            arrays.append(vals.astype(np.int64))
        if arrays[0].size != arrays[1].size:
            raise DataError(f"{path}, line {body[1][0]}: pair {pair[0]},{pair[1]}: {arrays[1].size} indices of "
                            f"{pair[1]} for {arrays[0].size} of {pair[0]}; the two lines pair entries one to one")
        out[pair] = (arrays[0], arrays[1])
        where[pair] = lineno
    if benchmark_pairs is not None:
        got = list(out)
        for i, pair in enumerate(benchmark_pairs):
            if i >= len(got) or got[i] != pair:
                found = f"pair {got[i][0]},{got[i][1]} (line {where[got[i]]})" if i < len(got) else "the end of the file"
                raise DataError(f"{path}: benchmark pair {i + 1} is {pair[0]},{pair[1]} but the labels have {found}; "
                                "write the labels of every benchmark pair in the benchmark's order")
        if len(got) > len(benchmark_pairs):
            extra = got[len(benchmark_pairs)]
            raise DataError(f"{path}, line {where[extra]}: pair {extra[0]},{extra[1]} is not in the benchmark; "
                            "write labels only for the benchmark's pairs")
    return MatchingLabels(str(path), out, where)


def check_identity_labels(labels: MatchingLabels, n_patches: Mapping[str, int] | None = None) -> None:
    """DataError unless every pair's labels are the identity ``0..N-1 -> 0..N-1`` (N = the count of
    im_a when ``n_patches`` knows it): the ground truth descbench's matching evaluation assumes
    (correct iff nn1(i) = i, :func:`matching_pair_ap`). HPatches' and HBench's labels files are
    such; a file pairing patches otherwise is refused rather than evaluated against a different
    ground truth."""
    for (a, b), (ia, ib) in labels.pairs.items():
        n = ia.size if n_patches is None or a not in n_patches else int(n_patches[a])
        ident = np.arange(n, dtype=np.int64)
        if ia.size != n or not (np.array_equal(ia, ident) and np.array_equal(ib, ident)):
            if ia.size != n:
                what = f"{ia.size} labels for the {n} patches of {a}"
            else:
                k = int(np.flatnonzero((ia != ident) | (ib != ident))[0])
                what = f"entry {k + 1} pairs {a}.{ia[k]} with {b}.{ib[k]}"
            raise DataError(f"{labels.path}, line {labels.lines.get((a, b), 0)}: pair {a},{b}: {what}; descbench "
                            "evaluates matching with patch i of im_a corresponding to patch i of im_b (0..N-1 on both "
                            "lines): use labels of that form, or remove the .labels file")


def write_matching_labels_files(directory, benchmark_pairs: Mapping[str, Sequence[Pair]],
                                n_patches: Mapping[str, int]) -> dict[str, Path]:
    """``<task>.labels`` (:func:`matching_labels`) for every task -> its pairs, into ``directory``
    (beside the tasks' ``.benchmark`` files)."""
    return {name: write_matching_labels(Path(directory) / f"{name}.labels", matching_labels(pairs, n_patches))
            for name, pairs in benchmark_pairs.items()}


# =============================================================================== matching: results


@dataclass(frozen=True)
class PairMatches:
    """First and second nearest neighbours in im_b of every patch of im_a (seed 002).

    ``nn1_idx``/``nn2_idx`` int64 (0-based patch indices of im_b; -1 = none), ``nn1_dist``/
    ``nn2_dist`` float64 (inf = none). ``line``: line number of the pair line in ``path``.
    """

    nn1_idx: np.ndarray
    nn1_dist: np.ndarray
    nn2_idx: np.ndarray
    nn2_dist: np.ndarray
    line: int = 0


@dataclass(frozen=True)
class MatchingResults:
    """The content of one matching ``.results`` file: pair -> :class:`PairMatches`, in file order."""

    path: str
    pairs: dict[Pair, PairMatches] = field(default_factory=dict)


def compute_matching_results(benchmark_pairs: Sequence[Pair], descriptors, chunk_mb: float = 64.0) -> MatchingResults:
    """For each pair, the exact first and second nearest neighbours in im_b of every patch of
    im_a with their distances (:func:`descbench.metrics.nn.nearest_two`: L2 with float64
    accumulation or Hamming; ties to the lowest index of im_b; -1 / inf when im_b has a single
    patch). HBench's ``matching_compute.m`` uses a VLFeat kd-tree; here the search is exact."""
    out: dict[Pair, PairMatches] = {}
    for i, (a, b) in enumerate(benchmark_pairs):
        da, db = _strip_descriptors(descriptors, a), _strip_descriptors(descriptors, b)
        _same_kind([da, db], [a, b])
        i1, d1, i2, d2 = nearest_two(da, db, chunk_mb=chunk_mb)
        out[(a, b)] = PairMatches(i1.astype(np.int64), d1.astype(np.float64), i2.astype(np.int64),
                                  d2.astype(np.float64), line=1 + 5 * i)
    return MatchingResults(_IN_MEMORY, out)


def _format_indices(idx: np.ndarray) -> str:
    return ",".join(map(str, np.asarray(idx, dtype=np.int64).tolist()))


def _format_distances(dist: np.ndarray) -> str:
    """``repr`` of each float64: the shortest decimal string that reads back to the same double."""
    return ",".join(map(repr, np.asarray(dist, dtype=np.float64).tolist()))


def write_matching_results(path, results: MatchingResults) -> Path:
    """Write a matching ``.results`` file in the seed 002 layout (5 lines per pair; see the module
    docstring for the number format)."""
    lines: list[str] = []
    for (a, b), m in results.pairs.items():
        lines += [f"{a},{b}", _format_indices(m.nn1_idx), _format_distances(m.nn1_dist),
                  _format_indices(m.nn2_idx), _format_distances(m.nn2_dist)]
    return _write_lines(path, lines)


_NUMERIC_LINES = ("nn1 indices", "nn1 distances", "nn2 indices", "nn2 distances")


def _is_pair_line(text: str) -> bool:
    if text.count(",") != 1:  # cheap first test: numeric lines of more than 2 patches
        return False
    toks = _fields(text)
    return len(toks) == 2 and all(_STRIP_RE.fullmatch(t) and not _is_number(t) for t in toks)


def _pair_header(text: str, path, lineno: int, seen: Mapping[Pair, int], follows: str) -> Pair:
    """The pair of the pair line ``text`` (line ``lineno``) that starts a block of a ``.labels`` or
    ``.results`` file. DataError when the line is no pair line (``follows``: the lines each pair
    line needs after it) or its pair is in ``seen`` (pair -> its line): written twice."""
    if not _is_pair_line(text):
        raise DataError(f"{path}, line {lineno}: expected a pair line 'im_a,im_b', found {text[:60]!r}; "
                        f"each pair needs its pair line followed by {follows}")
    toks = _fields(text)
    pair = (toks[0], toks[1])
    if pair in seen:
        raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]} repeats line {seen[pair]}; write each pair once")
    return pair


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _parse_numbers(text: str, path, lineno: int, pair: Pair, what: str) -> np.ndarray:
    toks = text.split(",")
    try:
        return np.array(toks, dtype=np.float64)
    except ValueError:
        pass
    for k, tok in enumerate(toks):
        if not _is_number(tok):
            raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]}, {what}: entry {k + 1} "
                            f"{tok.strip()!r} is not a number; write plain decimal numbers separated by commas")
    raise AssertionError("unreachable")  # pragma: no cover


def _as_indices(values: np.ndarray, path, lineno: int, pair: Pair, what: str, n_b: int | None) -> np.ndarray:
    bad = np.flatnonzero(~np.isfinite(values) | (values != np.floor(values)) | (values < -1))
    if bad.size == 0 and n_b is not None:
        bad = np.flatnonzero(values >= n_b)
    if bad.size:
        k = int(bad[0])
        limit = f" up to {n_b - 1} ({pair[1]} has {n_b} patches)" if n_b is not None else ""
        raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]}, {what}: entry {k + 1} is {float(values[k]):g}; "
                        f"indices must be 0-based patch indices of {pair[1]}: integers from -1 (none){limit}")
    return values.astype(np.int64)


def _check_distances(values: np.ndarray, text: str, path, lineno: int, pair: Pair, what: str) -> None:
    """DataError on a NaN (``nan``, ``-nan``, ``NaN``) or ``-inf`` distance: neither is a distance
    nor the format's 'no neighbour' (``inf``), and evaluating would silently drop the patch."""
    bad = np.flatnonzero(np.isnan(values) | (values == -np.inf))
    if bad.size:
        k = int(bad[0])
        raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]}, {what}: entry {k + 1} is "
                        f"{text.split(',')[k].strip()!r}, which is not a distance; write the distance of the "
                        "neighbour (a number), or inf where there is no neighbour (index -1)")


def read_matching_results(path, n_patches: Mapping[str, int] | None = None,
                          benchmark_pairs: Sequence[Pair] | None = None) -> MatchingResults:
    """Read a matching ``.results`` file written by any tool (seed 002 layout).

    Per pair: the line ``im_a,im_b`` then exactly 4 numeric lines (nn1 indices, nn1 distances,
    nn2 indices, nn2 distances), comma-separated, whitespace around tokens allowed, blank lines
    ignored, pairs in any order. All 4 lines must have the same number of entries: the number of patches of im_a
    when ``n_patches`` (strip signature -> count) knows it, else the count of the first line.
    Indices must be integers >= -1 (-1 = no neighbour) and below the patch count of im_b when
    known. Distances are numbers or ``inf`` (no neighbour); ``nan`` and ``-inf`` are errors (they
    are no distance, and evaluation would silently treat them as 'no neighbour'). With ``benchmark_pairs``, a pair not in the benchmark and a missing pair are errors.
    Every error is a DataError naming the file, the line, the pair and the fix.
    """
    lines = _content_lines(_read_lines(path, "matching results"))
    known = None if benchmark_pairs is None else set(benchmark_pairs)
    out: dict[Pair, PairMatches] = {}
    where: dict[Pair, int] = {}
    pos = 0
    while pos < len(lines):
        lineno, text = lines[pos]
        pair = _pair_header(text, path, lineno, where, "exactly 4 numeric lines")
        where[pair] = lineno
        if known is not None and pair not in known:
            raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]} is not in the benchmark; "
                            "compute the results from the matching .benchmark file of this task")
        body = lines[pos + 1: pos + 5]
        n_body = next((k for k, (_, t) in enumerate(body) if _is_pair_line(t)), len(body))
        if n_body < 4:
            raise DataError(f"{path}, line {lineno}: pair {pair[0]},{pair[1]} has {n_body} of the 4 numeric lines "
                            f"({', '.join(_NUMERIC_LINES)}); the file is truncated or a line is missing")
        n_a = None if n_patches is None else n_patches.get(pair[0])
        n_b = None if n_patches is None else n_patches.get(pair[1])
        arrays = []
        for (ln, t), what in zip(body, _NUMERIC_LINES):
            vals = _parse_numbers(t, path, ln, pair, what)
            expected = n_a if n_a is not None else (arrays[0].size if arrays else vals.size)
            if vals.size != expected:
                src = f"the number of patches of {pair[0]}" if n_a is not None else "as many as the nn1 indices line"
                raise DataError(f"{path}, line {ln}: pair {pair[0]},{pair[1]}, {what}: found {vals.size} entries, "
                                f"expected {expected} ({src}); write one entry per patch of {pair[0]}")
            if what.endswith("indices"):
                vals = _as_indices(vals, path, ln, pair, what, n_b)
            else:
                _check_distances(vals, t, path, ln, pair, what)
            arrays.append(vals)
        out[pair] = PairMatches(arrays[0], arrays[1], arrays[2], arrays[3], line=lineno)
        pos += 5
    if benchmark_pairs is not None:
        _check_all_pairs(benchmark_pairs, out, path)
    return MatchingResults(str(path), out)


def _check_all_pairs(benchmark_pairs: Sequence[Pair], pairs: Mapping[Pair, PairMatches], path, task: str = "") -> None:
    for i, pair in enumerate(benchmark_pairs):
        if pair not in pairs:
            where = f" of task {task}" if task else ""
            raise DataError(f"{path}: no results for pair {pair[0]},{pair[1]} (benchmark pair {i + 1}{where}); "
                            "every pair of the benchmark file needs its 5 lines")


# =============================================================================== matching: evaluation


def matching_pair_ap(nn1_idx: np.ndarray, nn1_dist: np.ndarray) -> float:
    """AP of one pair from its nearest-neighbour list (HBench ``+bench/+matching/eval.m``).

    Patch i of im_a is correct iff ``nn1_idx[i] == i`` (label +1, else -1); its score is
    ``-nn1_dist[i]``; ``vl_pr(labels, scores, 'NumPositives', N)`` with N = number of patches of
    im_a, i.e. :func:`descbench.metrics.ap.ap_vlfeat` on the distances with ``num_positives=N``:
    ``AP = (1/N) sum_k k / r_k`` over the correct patches ranked by increasing distance (stable:
    ties keep patch order, as MATLAB's sort). A non-finite distance (inf / NaN: HBench maps NaN to
    inf, i.e. score -inf, which vl_pr never retrieves) takes its patch out of the ranking while N
    stays. N = 0 gives 0 (HBench replaces a NaN AP by 0). HBench's file evaluator
    ``matching_eval.m`` (it reads the ``.benchmark``, the ``.labels`` of
    :func:`write_matching_labels` and these ``.results``) calls vl_pr WITHOUT NumPositives
    (measured under GNU Octave): its AP divides by the correct matches, ``n_correct``, instead of
    N, i.e. equals this AP x N / n_correct (0 when n_correct = 0); seed 002 / protocols.md
    section 8 and HBench's ``+bench/+matching/eval.m`` use N, as here.
    """
    idx = np.asarray(nn1_idx, dtype=np.int64)
    dist = np.asarray(nn1_dist, dtype=np.float64)
    n = idx.size
    if n == 0:
        return 0.0
    correct = idx == np.arange(n)
    keep = np.isfinite(dist)
    return float(ap_vlfeat(dist[keep], np.where(correct[keep], 1, -1), num_positives=n))


def matching_pair_ratio_ap(nn1_idx: np.ndarray, nn1_dist: np.ndarray, nn2_dist: np.ndarray) -> float:
    """AP of one pair ranked by the second-to-first nearest-neighbour distance ratio (HBench
    ``+bench/+matching/eval.m``, ``ap_2nnr``): labels as :func:`matching_pair_ap`, score
    ``d2 / d1`` (larger = more confident), ``NumPositives`` = N.

    Conventions for degenerate ratios: IEEE division (d1 = 0 < d2 and a missing second neighbour,
    d2 = inf, give +inf: ranked first); d1 = d2 = 0 gives 1 (MATLAB's 0/0 is NaN; two equally
    close neighbours are indistinguishable, ratio 1); any other NaN ranks first (where MATLAB's
    descending sort puts NaN); a non-finite d1 takes the patch out of the ranking. Ranking by
    decreasing score, stable (ties keep patch order).
    """
    idx = np.asarray(nn1_idx, dtype=np.int64)
    d1 = np.asarray(nn1_dist, dtype=np.float64)
    d2 = np.asarray(nn2_dist, dtype=np.float64)
    n = idx.size
    if n == 0:
        return 0.0
    correct = idx == np.arange(n)
    keep = np.isfinite(d1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = d2 / d1  # IEEE: d2 / 0 = +inf for d2 > 0, inf / d1 = inf
    score[(d1 == 0) & (d2 == 0)] = 1.0
    score[np.isnan(score)] = np.inf  # NaN (a NaN in a foreign file): first, as MATLAB's sort 'descend'
    order = np.argsort(-score[keep], kind="stable")
    labels = np.where(correct[keep][order], 1, -1)
    return float(ap_vlfeat(np.arange(order.size, dtype=np.float64), labels, num_positives=n))


@dataclass(frozen=True)
class MatchingEvaluation:
    """``per_pair``: task, pair, im_a, im_b, n_patches, n_correct, ap, ap_2nn_ratio (benchmark
    order); ``per_task``: task, n_pairs, mean_ap (the task's mAP), mean_ap_2nn_ratio (means over
    the task's pairs)."""

    per_pair: pd.DataFrame
    per_task: pd.DataFrame


def evaluate_matching(benchmark_pairs: Mapping[str, Sequence[Pair]], results: Mapping[str, MatchingResults],
                      n_patches: Mapping[str, int] | None = None) -> MatchingEvaluation:
    """AP per pair (:func:`matching_pair_ap`, :func:`matching_pair_ratio_ap`) and mAP per task.

    ``benchmark_pairs``: task name -> its pairs (:func:`read_matching_benchmark`); ``results``:
    task name -> :class:`MatchingResults` (read from a file or computed). ``n_patches`` (strip
    -> count), when given, checks that every pair lists one entry per patch of im_a and indices
    below the count of im_b (DataError naming the file and the line otherwise). The AP uses N =
    the number of entries (= patches of im_a), as HBench's ``numel(isValid)``.
    """
    rows = []
    for task, pairs in benchmark_pairs.items():
        if task not in results:
            raise DataError(f"no results for matching task {task}; compute or read its .results file")
        res = results[task]
        _check_all_pairs(pairs, res.pairs, res.path, task)
        for a, b in pairs:
            m = res.pairs[(a, b)]
            _check_matches(m, a, b, res.path, n_patches)
            n = int(m.nn1_idx.size)
            rows.append({"task": task, "pair": f"{a},{b}", "im_a": a, "im_b": b, "n_patches": n,
                         "n_correct": int(np.sum(m.nn1_idx == np.arange(n))),
                         "ap": matching_pair_ap(m.nn1_idx, m.nn1_dist),
                         "ap_2nn_ratio": matching_pair_ratio_ap(m.nn1_idx, m.nn1_dist, m.nn2_dist)})
    cols = ["task", "pair", "im_a", "im_b", "n_patches", "n_correct", "ap", "ap_2nn_ratio"]
    per_pair = pd.DataFrame(rows, columns=cols)
    per_task = pd.DataFrame(
        [{"task": t, "n_pairs": int((per_pair.task == t).sum()),
          "mean_ap": _mean(per_pair.ap[per_pair.task == t]),
          "mean_ap_2nn_ratio": _mean(per_pair.ap_2nn_ratio[per_pair.task == t])}
         for t in benchmark_pairs], columns=["task", "n_pairs", "mean_ap", "mean_ap_2nn_ratio"])
    return MatchingEvaluation(per_pair, per_task)


def _mean(values) -> float:
    """Mean in float64 of the values: ``math.fsum`` (correctly rounded sum, order independent) / n."""
    v = list(values)
    return math.fsum(v) / len(v) if v else float("nan")


def _check_matches(m: PairMatches, a: str, b: str, path, n_patches) -> None:
    arrays = (m.nn1_idx, m.nn1_dist, m.nn2_idx, m.nn2_dist)
    n = m.nn1_idx.size
    for k, (arr, what) in enumerate(zip(arrays, _NUMERIC_LINES)):
        expected = n if n_patches is None or a not in n_patches else n_patches[a]
        if arr.size != expected:
            raise DataError(f"{path}, line {m.line + 1 + k}: pair {a},{b}, {what}: found {arr.size} entries, "
                            f"expected {expected} (the number of patches of {a})")
    if n_patches is not None and b in n_patches:
        for k in (0, 2):
            bad = np.flatnonzero(arrays[k] >= n_patches[b])
            if bad.size:
                raise DataError(f"{path}, line {m.line + 1 + k}: pair {a},{b}, {_NUMERIC_LINES[k]}: entry "
                                f"{int(bad[0]) + 1} is {int(arrays[k][bad[0]])}, but {b} has {n_patches[b]} patches")


# =============================================================================== retrieval: tasks


class _QueryLines:
    """Line numbers of the per-query lines in the file (``lines``; none in memory: line i + 2,
    after the pool line), for error messages."""

    def line_of(self, i: int) -> int:
        return self.lines[i] if self.lines else i + 2


@dataclass(frozen=True)
class RetrievalBenchmark(_QueryLines):
    """A retrieval ``.benchmark``: the pool of patch-images and the query patches.
    ``lines``: line number of each query in ``path``."""

    pool: tuple[str, ...]
    queries: tuple[str, ...]
    path: str = _IN_MEMORY
    lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class RetrievalLabels(_QueryLines):
    """A retrieval ``.labels``: the pool and, per query, its corresponding patches (query first)."""

    pool: tuple[str, ...]
    clusters: tuple[tuple[str, ...], ...]
    path: str = _IN_MEMORY
    lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class RetrievalResults(_QueryLines):
    """A retrieval ``.results``: the pool and, per query, the returned patches (best first)."""

    pool: tuple[str, ...]
    ranked: tuple[tuple[str, ...], ...]
    path: str = _IN_MEMORY
    lines: tuple[int, ...] = ()


def retrieval_task_name(split: str, jitter: str, n_sequences: int, seed: int) -> str:
    """``<train|test>_<easy|hard>_<n>s_<seed>`` with a two-digit seed (seed 003: ``train_easy_40s_00``)."""
    return f"{split}_{JITTER_NAMES[jitter]}_{n_sequences}s_{seed:02d}"


def _uniform_below(bitgen: np.random.PCG64, n: int) -> int:
    """A uniform integer in [0, n) from PCG64's raw 64-bit outputs by rejection: draw x until
    ``x < floor(2^64 / n) * n``, return ``x mod n``."""
    limit = (2**64 // n) * n
    while True:
        x = int(bitgen.random_raw())
        if x < limit:
            return x % n


def _draw_without_replacement(bitgen: np.random.PCG64, n: int, k: int) -> list[int]:
    """k distinct integers of [0, n) in draw order: partial Fisher-Yates (for i = 0..k-1 swap
    a[i] with a[i + U(n - i)], U from :func:`_uniform_below`), a = [0, 1, .., n-1]."""
    a = np.arange(n, dtype=np.int64)
    for i in range(k):
        j = i + _uniform_below(bitgen, n - i)
        a[i], a[j] = a[j], a[i]
    return a[:k].tolist()


def make_retrieval_task(sequences: Sequence[str], sequence_sizes: Mapping[str, int], n_sequences: int, seed: int,
                        jitter: str = "e", queries_per_sequence: int = 100,
                        n_queries: int | None = None) -> tuple[RetrievalBenchmark, RetrievalLabels]:
    """A retrieval benchmark and its labels, reproducible from ``seed`` (seed 003).

    Draw (our documented procedure; HBench's generator is not published): the random stream is
    ``numpy.random.PCG64(seed)``'s raw 64-bit outputs (a stream NumPy keeps stable), uniform
    integers by rejection (:func:`_uniform_below`), draws without replacement by partial
    Fisher-Yates (:func:`_draw_without_replacement`).

    1. ``n_sequences`` distinct sequences of the sorted ``sequences`` list, in draw order
       (HBench's ``train_easy_40s_00`` pool is not alphabetical either);
    2. pool = for each drawn sequence its 6 patch-images ``seq.ref, seq.<j>1 .. seq.<j>5``;
    3. queries: ``n_queries`` (default ``queries_per_sequence * n_sequences``; HBench's files hold
       100 per sequence: 500 for 5s, 4000 for 40s) distinct ``ref`` patches drawn uniformly from
       all ref patches of the drawn sequences, numbered sequence by sequence in pool order
       (so larger sequences get more queries, as in HBench's files), in draw order;
    4. labels per query: ``seq.ref.i, seq.<j>1.i .. seq.<j>5.i``; first line = the pool line.

    ``sequence_sizes``: sequence -> number of patches (each of its strips has that many).
    """
    types = strip_types(jitter)
    names = sorted(set(sequences))
    if not 0 < n_sequences <= len(names):
        raise ValueError(f"n_sequences must be in 1..{len(names)} (the sequences given), got {n_sequences}")
    for s in names:
        if int(sequence_sizes.get(s, 0)) <= 0:
            raise ValueError(f"sequence_sizes has no positive patch count for sequence {s!r}")
    bitgen = np.random.PCG64(seed)
    drawn = [names[i] for i in _draw_without_replacement(bitgen, len(names), n_sequences)]
    sizes = np.array([int(sequence_sizes[s]) for s in drawn], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    total = int(offsets[-1])
    nq = queries_per_sequence * n_sequences if n_queries is None else int(n_queries)
    if not 0 < nq <= total:
        raise ValueError(f"cannot draw {nq} distinct queries from {total} ref patches of the {n_sequences} sequences")
    flat = np.array(_draw_without_replacement(bitgen, total, nq), dtype=np.int64)
    which = np.searchsorted(offsets, flat, side="right") - 1
    pool = tuple(f"{s}.{t}" for s in drawn for t in types)
    queries, clusters = [], []
    for w, f in zip(which.tolist(), flat.tolist()):
        seq, i = drawn[w], f - int(offsets[w])
        queries.append(f"{seq}.ref.{i}")
        clusters.append(tuple(f"{seq}.{t}.{i}" for t in types))
    return RetrievalBenchmark(pool, tuple(queries)), RetrievalLabels(pool, tuple(clusters))


def write_retrieval_task(directory, split: str, sequences: Sequence[str], sequence_sizes: Mapping[str, int],
                         n_sequences: int, seed: int, jitter: str = "e", queries_per_sequence: int = 100,
                         n_queries: int | None = None) -> tuple[Path, Path]:
    """Write ``<name>.benchmark`` and ``<name>.labels`` (name :func:`retrieval_task_name`) of
    :func:`make_retrieval_task` into ``directory``; returns both paths."""
    bench, labels = make_retrieval_task(sequences, sequence_sizes, n_sequences, seed, jitter,
                                        queries_per_sequence, n_queries)
    name = retrieval_task_name(split, jitter, n_sequences, seed)
    d = Path(directory)
    return (write_retrieval_benchmark(d / f"{name}.benchmark", bench),
            write_retrieval_labels(d / f"{name}.labels", labels))


def write_retrieval_benchmark(path, benchmark: RetrievalBenchmark) -> Path:
    """The pool line, then one query patch per line."""
    return _write_lines(path, [",".join(benchmark.pool), *benchmark.queries])


def write_retrieval_labels(path, labels: RetrievalLabels) -> Path:
    """The pool line, then per query its corresponding patches, comma-separated."""
    return _write_lines(path, [",".join(labels.pool), *(",".join(c) for c in labels.clusters)])


def _read_pool_file(path, what: str) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    lines = _content_lines(_read_lines(path, what))
    if not lines:
        raise DataError(f"{what} file {path} is empty; its first line must list the pool of patch-images")
    lineno, first = lines[0]
    return _parse_strip_list(first, path, lineno), lines[1:]


def read_retrieval_benchmark(path) -> RetrievalBenchmark:
    """Read a retrieval ``.benchmark``: every query must be a patch of a pool patch-image."""
    pool, rest = _read_pool_file(path, "retrieval benchmark")
    in_pool = set(pool)
    queries, lines = [], []
    for lineno, text in rest:
        q = _parse_patch(text, path, lineno)
        if _strip_of(q) not in in_pool:
            raise DataError(f"{path}, line {lineno}: query {q} is not a patch of the pool (line 1); "
                            "every query must come from a listed patch-image")
        queries.append(q)
        lines.append(lineno)
    return RetrievalBenchmark(pool, tuple(queries), str(path), tuple(lines))


def read_retrieval_labels(path) -> RetrievalLabels:
    """Read a retrieval ``.labels``: the pool line, then one line of patch signatures per query."""
    pool, rest = _read_pool_file(path, "retrieval labels")
    clusters = tuple(tuple(_parse_patch(t, path, ln) for t in _fields(text)) for ln, text in rest)
    return RetrievalLabels(pool, clusters, str(path), tuple(ln for ln, _ in rest))


def write_retrieval_results(path, results: RetrievalResults) -> Path:
    """The pool line, then per query its returned patches, comma-separated (seed 003)."""
    return _write_lines(path, [",".join(results.pool), *(",".join(r) for r in results.ranked)])


def read_retrieval_results(path) -> RetrievalResults:
    """Read a retrieval ``.results`` written by any tool (whitespace around names allowed; patch
    indices are read as integers, so ``v_a.e1.007`` is ``v_a.e1.7``). The checks against the
    benchmark (query first, patches of the pool, list length) are made by
    :func:`evaluate_retrieval`, with this file's line numbers."""
    pool, rest = _read_pool_file(path, "retrieval results")
    ranked = tuple(tuple(_parse_patch(t, path, ln) for t in _fields(text)) for ln, text in rest)
    return RetrievalResults(pool, ranked, str(path), tuple(ln for ln, _ in rest))


# =============================================================================== retrieval: compute


def _pool_shapes(benchmark: RetrievalBenchmark, descriptors) -> tuple[np.ndarray, np.dtype, int]:
    """Patch counts of the pool strips, and the dtype and width of the first (validated) strip."""
    if not benchmark.pool:
        raise DataError(f"{benchmark.path}: the pool of patch-images is empty; line 1 must list them")
    first = _strip_descriptors(descriptors, benchmark.pool[0])
    sizes = np.empty(len(benchmark.pool), dtype=np.int64)
    for k, sig in enumerate(benchmark.pool):
        seq, typ = _split_strip(sig)
        try:
            sizes[k] = np.shape(descriptors[seq][typ])[0]
        except (KeyError, IndexError):
            _strip_descriptors(descriptors, sig)  # raises the DataError naming the strip
            raise
    return sizes, first.dtype, first.shape[1]


def _pool_descriptors(benchmark: RetrievalBenchmark, descriptors):
    """(kind, pool array, strip offsets, query pool indices) with the pool concatenated in pool
    order: uint8 as packed uint64 words, float32 as the augmented [c, -|c|^2/2] matrix. Two
    passes (counts, then validate and copy one strip at a time), so the only pool-sized
    allocation is the result."""
    sizes, dtype, dim = _pool_shapes(benchmark, descriptors)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    where = {s: k for k, s in enumerate(benchmark.pool)}
    self_idx = np.empty(len(benchmark.queries), dtype=np.int64)
    for i, q in enumerate(benchmark.queries):
        strip, idx = q.rsplit(".", 1)
        k = where.get(strip)
        if k is None or int(idx) >= sizes[k]:
            have = "is not in the pool" if k is None else f"has {sizes[k]} patches"
            raise DataError(f"{benchmark.path}, line {benchmark.line_of(i)}: query {q}: patch-image {strip} {have}; "
                            "the query must be a patch of the pool")
        self_idx[i] = offsets[k] + int(idx)
    n = int(offsets[-1])
    width = -(-dim // 8) * 8 if dtype == np.uint8 else dim + 1  # uint8: padded to whole uint64 words
    pool = np.zeros((n, width), dtype=dtype)
    for k, sig in enumerate(benchmark.pool):
        a = _strip_descriptors(descriptors, sig)
        _same_kind([np.empty((0, dim), dtype), a], [benchmark.pool[0], sig])
        if a.shape[0] != sizes[k]:
            raise DataError(f"descriptors of {sig} changed size while being read ({sizes[k]} then {a.shape[0]} rows)")
        pool[offsets[k]: offsets[k + 1], :dim] = a
    if dtype == np.uint8:
        return "hamming", pool.view(np.uint64), offsets, self_idx
    caug = pool
    cnorm2 = hk.row_sqnorms64(caug[:, :dim])
    caug[:, dim] = -0.5 * cnorm2
    return "l2", (caug, cnorm2), offsets, self_idx


def _topk_l2(caug, cnorm2, self_idx, m, chunk_mb):
    dim = caug.shape[1] - 1
    cdesc = caug[:, :dim]
    qdesc = np.ascontiguousarray(cdesc[self_idx])
    tol = l2_band_tolerance(qdesc, cnorm2)
    nq, n = self_idx.size, caug.shape[0]
    out_idx = np.full((nq, m), -1, dtype=np.int64)
    out_key = np.full((nq, m), np.inf)
    qaug = np.empty((nq, dim + 1), dtype=np.float32)
    qaug[:, :dim] = qdesc
    qaug[:, dim] = 1.0
    block = max(1, int(chunk_mb * 2**20 // (4 * max(1, n))))
    for r0 in range(0, nq, block):
        screen = qaug[r0: r0 + block] @ caug.T  # one float32 BLAS product per block of queries
        hk.topk_l2_block(screen, r0, self_idx, cdesc, tol, m, out_idx, out_key)
    return out_idx


def compute_retrieval_results(benchmark: RetrievalBenchmark, descriptors, top: int = RETRIEVAL_TOP,
                              chunk_mb: float = 64.0) -> RetrievalResults:
    """For each query, the ``top`` pool patches by increasing distance (seed 003 ``.results``).

    Order: the query itself first (HBench ``retrieval_eval.m`` requires it; its distance is 0, and
    among patches at distance 0 the query wins), then the other pool patches by (distance, pool
    position), pool position = patch-images in pool order, patches in index order: ties go to the
    earlier patch. Distances: L2 with float64 accumulation (float32) or Hamming (uint8 packed
    bits), exact (float32 BLAS screen + float64 band recheck, :mod:`.hbench_kernels`). Fewer than
    ``top`` entries only when the pool is smaller. Memory: the pool once (float32, with its norm
    column) plus one screen block of at most ``chunk_mb`` MiB (never queries x pool at once).
    HBench's ``retrieval_compute.m`` uses a VLFeat kd-tree; here the search is exact.
    """
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    kind, pool, offsets, self_idx = _pool_descriptors(benchmark, descriptors)
    m = min(top, int(offsets[-1])) - 1
    if kind == "hamming":
        out_idx = np.full((self_idx.size, m), -1, dtype=np.int64)
        out_key = np.full((self_idx.size, m), np.inf)
        hk.topk_hamming(np.arange(self_idx.size, dtype=np.int64), self_idx, pool, 64 * pool.shape[1], m,
                        out_idx, out_key)
    else:
        out_idx = _topk_l2(pool[0], pool[1], self_idx, m, chunk_mb)
    ranked = _signatures(benchmark.pool, offsets, np.concatenate([self_idx[:, None], out_idx], axis=1))
    return RetrievalResults(benchmark.pool, ranked)


def _signatures(pool: Sequence[str], offsets: np.ndarray, idx: np.ndarray) -> tuple[tuple[str, ...], ...]:
    strip = np.searchsorted(offsets, idx, side="right") - 1
    local = idx - offsets[strip]
    return tuple(tuple(f"{pool[s]}.{i}" for s, i in zip(srow, lrow))
                 for srow, lrow in zip(strip.tolist(), local.tolist()))


# =============================================================================== retrieval: evaluation


def retrieval_list_ap(is_correct: Sequence[bool]) -> float:
    """AP of one returned list after its first entry (HBench ``retrieval_eval.m``).

    HBench: ``vl_pr(isValid(2:end)*2 - 1, -(2:numel(isValid)))`` with ``NaN -> 0``: the query
    (entry 1) is left out; entries 2..end are ranked in list order; no NumPositives, so the
    denominator is the number of correct entries FOUND in the list:
    ``AP = (1/P) sum_k k / r_k`` over the P correct entries at ranks r_k = 1..len-1, and 0 when
    P = 0 (:func:`descbench.metrics.ap.ap_vlfeat` with the rank as distance).
    """
    flags = np.asarray(is_correct, dtype=bool)[1:]
    if not flags.any():
        return 0.0
    return float(ap_vlfeat(np.arange(flags.size, dtype=np.float64), np.where(flags, 1, -1)))


@dataclass(frozen=True)
class RetrievalEvaluation:
    """``per_query``: query, line (of the results file), patch_ap, image_ap, n_patch_correct,
    n_image_correct (correct entries after the query); ``patch_map`` / ``image_map``: the means."""

    per_query: pd.DataFrame
    patch_map: float
    image_map: float


def _check_pool(pool, expected, path, what: str) -> None:
    if tuple(pool) != tuple(expected):
        diff = next((k for k, (a, b) in enumerate(zip(pool, expected)) if a != b), min(len(pool), len(expected)))
        raise DataError(f"{path}, line 1: the pool of patch-images differs from the benchmark's (first difference "
                        f"at entry {diff + 1}); the {what} must be made for this benchmark file")


def _check_labels(benchmark: RetrievalBenchmark, labels: RetrievalLabels) -> None:
    _check_pool(labels.pool, benchmark.pool, labels.path, "labels")
    nq, nl = len(benchmark.queries), len(labels.clusters)
    if nl != nq:
        k = min(nq, nl)
        raise DataError(f"{labels.path}: {nl} label lines for {nq} queries of {benchmark.path} (first unmatched: "
                        f"query {k + 1}); the labels must have one line per query")
    for i, (q, c) in enumerate(zip(benchmark.queries, labels.clusters)):
        if q not in c:
            raise DataError(f"{labels.path}, line {labels.line_of(i)}: the query {q} is not among its labels; "
                            "each labels line must list the query's corresponding patches, the query included")


def _check_results(benchmark: RetrievalBenchmark, results: RetrievalResults, n_patches, top: int) -> None:
    _check_pool(results.pool, benchmark.pool, results.path, "results")
    nq, nr = len(benchmark.queries), len(results.ranked)
    if nr < nq:
        raise DataError(f"{results.path}: {nr} result lines for {nq} queries; query {benchmark.queries[nr]} "
                        f"({benchmark.path}, line {benchmark.line_of(nr)}) has no results line")
    if nr > nq:
        raise DataError(f"{results.path}, line {results.line_of(nq)}: a results line beyond the {nq} queries of "
                        f"{benchmark.path}; write exactly one line per query")
    in_pool = set(benchmark.pool)
    if n_patches is not None:
        missing = [s for s in benchmark.pool if s not in n_patches]
        if missing:
            raise ValueError(f"n_patches has no count for pool patch-image {missing[0]}")
        pool_size = sum(int(n_patches[s]) for s in benchmark.pool)
        min_len = min(top, pool_size)
    else:
        min_len = top
    for i, (q, row) in enumerate(zip(benchmark.queries, results.ranked)):
        line = results.line_of(i)
        if not min_len <= len(row) <= top:
            need = f"{top}" if min_len == top else f"{min_len} to {top}"
            raise DataError(f"{results.path}, line {line}: {len(row)} patches for query {q}, expected {need} "
                            f"(the top {top}, query first)")
        if row[0] != q:
            raise DataError(f"{results.path}, line {line}: the first patch is {row[0]}, not the query {q}; "
                            "HBench requires the query itself as the first returned patch")
        for sig in row:
            strip, idx = sig.rsplit(".", 1)
            if strip not in in_pool:
                raise DataError(f"{results.path}, line {line}: unknown patch signature {sig} (patch-image {strip} "
                                "is not in the pool); return only patches of the pool")
            if n_patches is not None and int(idx) >= int(n_patches[strip]):
                raise DataError(f"{results.path}, line {line}: unknown patch signature {sig} ({strip} has "
                                f"{n_patches[strip]} patches)")
        if len(set(row)) != len(row):
            dup = next(s for s in row if row.count(s) > 1)
            raise DataError(f"{results.path}, line {line}: patch {dup} is returned twice; a ranking lists each "
                            "patch once")


def evaluate_retrieval(benchmark: RetrievalBenchmark, labels: RetrievalLabels, results: RetrievalResults,
                       n_patches: Mapping[str, int] | None = None, top: int = RETRIEVAL_TOP) -> RetrievalEvaluation:
    """Patch and image retrieval AP per query and their means (HBench ``retrieval_eval.m``).

    Per query, with the returned list ``r_1 = query, r_2 .. r_L``:

    * patch retrieval: r_k correct iff it is in the query's labels line;
    * image retrieval: r_k correct iff its patch-image is one of the patch-images of the labels
      line (HBench ``remove_patchnum``; with generated labels = the query's sequence's 6 strips);
    * AP = :func:`retrieval_list_ap` (query left out, denominator = correct entries found, 0 if
      none); mAP = mean over queries.

    HBench's ``retrieval_eval.m`` computes the same per-query APs but returns them in a vector of
    Q + 1 entries, a leading 0 then the Q queries (it preallocates Q entries and writes query i at
    i + 1; measured under GNU Octave: 501 entries for 500 queries); the mean of that vector, which
    its example scripts print, is ``Q / (Q + 1)`` x ``patch_map`` / ``image_map`` here (0.998 x
    for 500 queries, 0.99975 x for 4,000).

    Checks (DataError naming the file and line): pools equal; one labels line per query
    containing the query; one results line per query, starting with the query, with
    ``min(top, pool size)`` to ``top`` entries (``top`` exactly when ``n_patches`` is not given,
    HBench's ``numel == 51``), every entry a patch of the pool (index below the strip's count when
    ``n_patches`` is given), no entry twice.
    """
    _check_labels(benchmark, labels)
    _check_results(benchmark, results, n_patches, top)
    rows = []
    for i, (q, cluster, row) in enumerate(zip(benchmark.queries, labels.clusters, results.ranked)):
        patch_set = set(cluster)
        strip_set = {_strip_of(s) for s in cluster}
        patch_ok = [s in patch_set for s in row]
        image_ok = [_strip_of(s) in strip_set for s in row]
        rows.append({"query": q, "line": results.line_of(i),
                     "patch_ap": retrieval_list_ap(patch_ok), "image_ap": retrieval_list_ap(image_ok),
                     "n_patch_correct": int(sum(patch_ok[1:])), "n_image_correct": int(sum(image_ok[1:]))})
    cols = ["query", "line", "patch_ap", "image_ap", "n_patch_correct", "n_image_correct"]
    per_query = pd.DataFrame(rows, columns=cols)
    return RetrievalEvaluation(per_query, _mean(per_query.patch_ap), _mean(per_query.image_ap))


def retrieval_chance(labels: RetrievalLabels, n_patches: Mapping[str, int]) -> pd.DataFrame:
    """Chance AP per query (HBench ``retrieval_eval_chance.m``): with P the pool's patch count,
    patch retrieval ``(len(labels line) - 1) / (P - 1)`` and image retrieval
    ``(patches of the labels line's patch-images - 1) / (P - 1)``: the fraction of the other
    pool patches that are correct. Each patch-image is counted once (HBench sums per labels
    entry; equal for labels with one patch per patch-image, as generated here). HBench's own
    script preallocates a vector of length Q (the number of queries) and writes query i at
    position i + 1, so its vector has Q + 1 entries: a leading 0 that is no query, then every
    query (none is dropped; under GNU Octave 501 entries for 500 queries, its mean Q / (Q + 1)
    of the true one). This returns one row per query."""
    missing = [s for s in labels.pool if s not in n_patches]
    if missing:
        raise ValueError(f"n_patches has no count for pool patch-image {missing[0]}")
    total = sum(int(n_patches[s]) for s in labels.pool)
    rows = []
    for cluster in labels.clusters:
        strips = dict.fromkeys(_strip_of(s) for s in cluster)
        for s in strips:
            if s not in n_patches:
                raise ValueError(f"n_patches has no count for patch-image {s}")
        in_images = sum(int(n_patches[s]) for s in strips)
        denom = total - 1
        rows.append({"query": cluster[0],
                     "patch_chance_ap": (len(cluster) - 1) / denom if denom > 0 else float("nan"),
                     "image_chance_ap": (in_images - 1) / denom if denom > 0 else float("nan")})
    return pd.DataFrame(rows, columns=["query", "patch_chance_ap", "image_chance_ap"])
