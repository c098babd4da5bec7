"""HBench image matching and patch / image retrieval (descbench.patches.hbench, seeds 002 / 003).

Every evaluation is compared with a plain brute force written here: full distance matrix
(float64, summed in index order as the definition), stable sorts, AP written out longhand.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from descbench.errors import DataError
from descbench.patches import PATCH_TYPES
from descbench.patches import hbench as hb

SEQS = ("i_alpha", "i_beta", "v_gamma", "v_delta", "v_eps")


# ----------------------------------------------------------------------------- synthetic data


def make_descriptors(kind: str, seed: int = 0, sizes=None) -> dict:
    """sequence -> type -> descriptors; corresponding rows are noisy copies of one base row.

    float: real-valued; int: integer-valued float32 in 0..3 (many exact ties and duplicate rows);
    binary: 16 packed bits (Hamming ties everywhere)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, seq in enumerate(SEQS):
        n = sizes[k] if sizes else int(rng.integers(9, 16))
        per = {}
        if kind == "float":
            base = rng.normal(size=(n, 8))
            for t in PATCH_TYPES:
                per[t] = (base + 0.6 * rng.normal(size=base.shape)).astype(np.float32)
        elif kind == "int":
            base = rng.integers(0, 4, size=(n, 3))
            for t in PATCH_TYPES:
                flip = rng.random(base.shape) < 0.2
                per[t] = np.where(flip, rng.integers(0, 4, size=base.shape), base).astype(np.float32)
        else:
            base = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
            for t in PATCH_TYPES:
                noise = (rng.random((n, 16)) < 0.1).astype(np.uint8)
                per[t] = base ^ np.packbits(noise, axis=1)
        out[seq] = per
    return out


def sqdist_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Full matrix of ranking keys: squared L2 summed in float64 in index order, or Hamming."""
    if a.dtype == np.uint8:
        return np.unpackbits(a[:, None, :] ^ b[None, :, :], axis=-1).sum(-1).astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    s = np.zeros((a.shape[0], b.shape[0]))
    for k in range(a.shape[1]):
        s += (a64[:, None, k] - b64[None, :, k]) ** 2
    return s


def dist_matrix(a, b):
    s = sqdist_matrix(a, b)
    return s if a.dtype == np.uint8 else np.sqrt(s)


def ap_longhand(scores_ascending, correct, n_positives) -> float:
    """Items ranked by increasing key, ties in item order; AP = (1/n_pos) sum over correct items
    of (#correct up to it) / (its rank); 0 without positives."""
    order = sorted(range(len(scores_ascending)), key=lambda i: (scores_ascending[i], i))
    hits, total = 0, 0.0
    for rank, i in enumerate(order, start=1):
        if correct[i]:
            hits += 1
            total += hits / rank
    return total / n_positives if n_positives else 0.0


def list_ap_longhand(flags) -> float:
    """HBench retrieval AP of a returned list: skip the query, denominator = positives found."""
    rest = list(flags)[1:]
    found = sum(rest)
    return ap_longhand(list(range(len(rest))), rest, found)


# ----------------------------------------------------------------------------- matching


@pytest.mark.parametrize("kind", ["float", "int", "binary"])
def test_matching_equals_brute_force(kind):
    desc = make_descriptors(kind, seed=1)
    if kind == "int":  # duplicate descriptors inside one target strip: the lowest index must win
        desc["i_alpha"]["e1"][3] = desc["i_alpha"]["e1"][1]
    tasks = hb.matching_tasks(SEQS)
    results = {t: hb.compute_matching_results(p, desc) for t, p in tasks.items()}
    ev = hb.evaluate_matching(tasks, results, hb.patch_counts(desc))
    assert list(ev.per_task.task) == ["test_easy_illum", "test_easy_viewpoint", "test_hard_illum", "test_hard_viewpoint"]
    assert len(ev.per_pair) == 2 * (2 + 3) * 5  # (easy, hard) x (2 i_ + 3 v_ sequences) x 5 pairs
    n_ties = 0
    for row in ev.per_pair.itertuples():
        sa, ta = row.im_a.split(".")
        sb, tb = row.im_b.split(".")
        d = dist_matrix(desc[sa][ta], desc[sb][tb])
        order = np.argsort(d, axis=1, kind="stable")
        m = results[row.task].pairs[(row.im_a, row.im_b)]
        np.testing.assert_array_equal(m.nn1_idx, order[:, 0])
        np.testing.assert_array_equal(m.nn2_idx, order[:, 1])
        np.testing.assert_array_equal(m.nn1_dist, d[np.arange(len(d)), order[:, 0]])
        n = d.shape[0]
        d1 = d[np.arange(n), order[:, 0]]
        d2 = d[np.arange(n), order[:, 1]]
        correct = order[:, 0] == np.arange(n)
        n_ties += len(d1) - len(set(d1.tolist()))
        assert row.ap == pytest.approx(ap_longhand(d1.tolist(), correct.tolist(), n), abs=1e-12)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((d1 == 0) & (d2 == 0), 1.0, d2 / d1)
        assert row.ap_2nn_ratio == pytest.approx(ap_longhand((-ratio).tolist(), correct.tolist(), n), abs=1e-12)
        assert row.n_correct == int(correct.sum())
    if kind != "float":
        assert n_ties > 0  # the tie-breaking is actually exercised
    for t in tasks:
        sel = ev.per_pair[ev.per_pair.task == t]
        assert ev.per_task.set_index("task").loc[t, "mean_ap"] == pytest.approx(sel.ap.mean(), abs=1e-15)


SEED_002_RESULTS = """s_boring.a,s_boring.b
1, 0
12.3, 7.5
0, 1
14.2, 27.4
"""


def test_seed_002_boring_example(tmp_path):
    (tmp_path / "t.benchmark").write_text("s_boring.a,s_boring.b  # First image pair\n")
    (tmp_path / "t.results").write_text(SEED_002_RESULTS)
    pairs = hb.read_matching_benchmark(tmp_path / "t.benchmark")
    assert pairs == [("s_boring.a", "s_boring.b")]
    counts = {"s_boring.a": 2, "s_boring.b": 2}
    res = hb.read_matching_results(tmp_path / "t.results", counts, pairs)
    m = res.pairs[pairs[0]]
    assert m.nn1_idx.tolist() == [1, 0] and m.nn1_dist.tolist() == [12.3, 7.5]
    assert m.nn2_idx.tolist() == [0, 1] and m.nn2_dist.tolist() == [14.2, 27.4]
    ev = hb.evaluate_matching({"t": pairs}, {"t": res}, counts)
    # By hand: a.0 -> b.1 and a.1 -> b.0 are both wrong (correct iff nn1(i) == i): no positive is
    # retrieved, numPositives = 2 patches, AP = 0 / 2 = 0 (and so for the ratio ranking).
    assert ev.per_pair.ap.tolist() == [0.0] and ev.per_pair.ap_2nn_ratio.tolist() == [0.0]
    assert ev.per_task.mean_ap.tolist() == [0.0]


def test_matching_hand_worked_ap_with_ties(tmp_path):
    # 3 patches: nn1 = 1, 1, 2 at distances 0.3, 0.3, 0.1. Ranking by distance: a.2 (0.1, correct,
    # rank 1), then the tie at 0.3 in patch order: a.0 (wrong, rank 2), a.1 (correct, rank 3).
    # AP = (1/1 + 2/3) / 3 = 5/9. Ratio scores d2/d1 = 0.9/0.3 = 3, 0.6/0.3 = 2, 0.2/0.1 = 2:
    # order a.0 (3, wrong), a.1 (2, correct, rank 2), a.2 (2, correct, rank 3): (1/2 + 2/3) / 3 = 7/18.
    text = "s.a,s.b\n1,1,2\n0.3,0.3,0.1\n0,0,0\n0.9,0.6,0.2\n"
    (tmp_path / "r.results").write_text(text)
    res = hb.read_matching_results(tmp_path / "r.results")
    ev = hb.evaluate_matching({"t": [("s.a", "s.b")]}, {"t": res})
    assert ev.per_pair.ap.iloc[0] == pytest.approx(5 / 9, abs=1e-15)
    assert ev.per_pair.ap_2nn_ratio.iloc[0] == pytest.approx(7 / 18, abs=1e-15)


def test_matching_round_trip_bit_identical(tmp_path):
    desc = make_descriptors("float", seed=2)
    for seq in desc:  # awkward magnitudes: distances whose shortest repr needs all 17 digits
        for t in desc[seq]:
            desc[seq][t] = (desc[seq][t] * np.float32(1.37e-3) + np.float32(1 / 3)).astype(np.float32)
    tasks = hb.matching_tasks(SEQS)
    counts = hb.patch_counts(desc)
    mem = {t: hb.compute_matching_results(p, desc) for t, p in tasks.items()}
    disk = {}
    for t, p in tasks.items():
        hb.write_matching_benchmark(tmp_path / f"{t}.benchmark", p)
        path = hb.write_matching_results(tmp_path / f"{t}.results", mem[t])
        again = hb.write_matching_results(tmp_path / f"{t}.again", mem[t])
        assert path.read_bytes() == again.read_bytes()
        pairs = hb.read_matching_benchmark(tmp_path / f"{t}.benchmark")
        assert pairs == p
        disk[t] = hb.read_matching_results(path, counts, pairs)
        for pair, m in mem[t].pairs.items():
            r = disk[t].pairs[pair]
            for f in ("nn1_idx", "nn1_dist", "nn2_idx", "nn2_dist"):
                assert np.array_equal(getattr(m, f), getattr(r, f))  # bit-identical floats
    a = hb.evaluate_matching(tasks, mem, counts)
    b = hb.evaluate_matching(tasks, disk, counts)
    pd.testing.assert_frame_equal(a.per_pair, b.per_pair, check_exact=True)
    pd.testing.assert_frame_equal(a.per_task, b.per_task, check_exact=True)


def test_matching_tasks_generation(tmp_path):
    tasks = hb.matching_tasks(["v_b", "i_z", "v_a", "i_c", "v_b"], split="train")
    assert list(tasks) == ["train_easy_illum", "train_easy_viewpoint", "train_hard_illum", "train_hard_viewpoint"]
    assert tasks["train_easy_illum"][:6] == [("i_c.ref", f"i_c.e{k}") for k in range(1, 6)] + [("i_z.ref", "i_z.e1")]
    assert tasks["train_hard_viewpoint"][0] == ("v_a.ref", "v_a.h1") and len(tasks["train_hard_viewpoint"]) == 10
    paths = hb.write_matching_benchmarks(tmp_path, ["v_b", "i_z", "v_a", "i_c"], split="train")
    assert paths["train_easy_illum"].read_text().splitlines()[0] == "i_c.ref,i_c.e1"
    with pytest.raises(ValueError, match="x_odd"):
        hb.matching_tasks(["x_odd"])
    assert hb.matching_tasks(["x_odd"], categories={"x_odd": "illum"})["test_easy_illum"][0] == ("x_odd.ref", "x_odd.e1")


def _write_results(tmp_path, text):
    p = tmp_path / "bad.results"
    p.write_text(text)
    return p


@pytest.mark.bad_input
def test_matching_bad_input(tmp_path):
    pairs = [("s.a", "s.b"), ("s.a", "s.c")]
    counts = {"s.a": 3, "s.b": 3, "s.c": 3}
    good = "s.a,s.b\n0,1,2\n1,2,3\n1,2,0\n4,5,6\ns.a,s.c\n0,1,2\n1,2,3\n1,2,0\n4,5,6\n"
    assert len(hb.read_matching_results(_write_results(tmp_path, good), counts, pairs).pairs) == 2
    # too few entries on a line: file, line number, pair, expected vs found
    p = _write_results(tmp_path, good.replace("1,2,3\n1,2,0\n4,5,6\ns.a,s.c", "1,2\n1,2,0\n4,5,6\ns.a,s.c", 1))
    with pytest.raises(DataError, match=r"bad\.results, line 3: pair s\.a,s\.b, nn1 distances: found 2 entries, expected 3"):
        hb.read_matching_results(p, counts, pairs)
    # without counts the first line sets the length
    with pytest.raises(DataError, match=r"line 3: .*found 2 entries, expected 3"):
        hb.read_matching_results(p)
    # non-numeric token
    p = _write_results(tmp_path, good.replace("4,5,6", "4,five,6", 1))
    with pytest.raises(DataError, match=r"line 5: pair s\.a,s\.b, nn2 distances: entry 2 'five' is not a number"):
        hb.read_matching_results(p, counts, pairs)
    p = _write_results(tmp_path, "s.a,s.b\n0,1\n12.3x, 7.5\n1,0\n4,5\n")  # a typo that looks like a name
    with pytest.raises(DataError, match=r"line 3: pair s\.a,s\.b, nn1 distances: entry 1 '12\.3x' is not a number"):
        hb.read_matching_results(p)
    # index out of range / not an integer
    p = _write_results(tmp_path, good.replace("0,1,2", "0,1,3", 1))
    with pytest.raises(DataError, match=r"line 2: .*nn1 indices: entry 3 is 3; .* up to 2 \(s\.b has 3 patches\)"):
        hb.read_matching_results(p, counts, pairs)
    p = _write_results(tmp_path, good.replace("0,1,2", "0,1.5,2", 1))
    with pytest.raises(DataError, match=r"line 2: .*entry 2 is 1.5; "):
        hb.read_matching_results(p)
    # missing pair (only with the benchmark) and pair not in the benchmark
    p = _write_results(tmp_path, good.split("s.a,s.c")[0])
    with pytest.raises(DataError, match=r"bad\.results: no results for pair s\.a,s\.c"):
        hb.read_matching_results(p, counts, pairs)
    res = hb.read_matching_results(p, counts)
    with pytest.raises(DataError, match=r"no results for pair s\.a,s\.c \(benchmark pair 2 of task t\)"):
        hb.evaluate_matching({"t": pairs}, {"t": res}, counts)
    p = _write_results(tmp_path, good.replace("s.a,s.c", "s.a,s.x"))
    with pytest.raises(DataError, match=r"line 6: pair s\.a,s\.x is not in the benchmark"):
        hb.read_matching_results(p, counts, pairs)
    # a truncated block: the next pair line comes after 3 numeric lines
    p = _write_results(tmp_path, good.replace("4,5,6\ns.a,s.c", "s.a,s.c", 1))
    with pytest.raises(DataError, match=r"line 1: pair s\.a,s\.b has 3 of the 4 numeric lines"):
        hb.read_matching_results(p, counts, pairs)
    # evaluation checks in-memory results against the counts too
    res = hb.read_matching_results(_write_results(tmp_path, good))
    with pytest.raises(DataError, match=r"line 2: pair s\.a,s\.b, nn1 indices: found 3 entries, expected 4"):
        hb.evaluate_matching({"t": pairs}, {"t": res}, {**counts, "s.a": 4})
    # a malformed benchmark line
    (tmp_path / "b.benchmark").write_text("s.a,s.b\ns.a;s.c\n")
    with pytest.raises(DataError, match=r"b\.benchmark, line 2: expected 'im_a,im_b'"):
        hb.read_matching_benchmark(tmp_path / "b.benchmark")


def test_matching_labels_file_small_case(tmp_path):
    """The .labels HBench's matching_eval.m reads: per benchmark pair, in the benchmark's order,
    the pair line, then 0..N-1 (patches of im_a), then the corresponding 0..N-1 of im_b."""
    counts = {"i_a": 3, "i_b": 2, "v_c": 4}
    n_patches = {f"{s}.{t}": n for s, n in counts.items() for t in PATCH_TYPES}
    tasks = hb.matching_tasks(list(counts), split="test")
    paths = hb.write_matching_labels_files(tmp_path, tasks, n_patches)
    assert sorted(paths) == sorted(tasks)
    expect = "".join(f"i_a.ref,i_a.e{k}\n0,1,2\n0,1,2\n" for k in range(1, 6))
    expect += "".join(f"i_b.ref,i_b.e{k}\n0,1\n0,1\n" for k in range(1, 6))
    assert (tmp_path / "test_easy_illum.labels").read_bytes() == expect.encode("ascii")
    assert (tmp_path / "test_hard_viewpoint.labels").read_text() == "".join(
        f"v_c.ref,v_c.h{k}\n0,1,2,3\n0,1,2,3\n" for k in range(1, 6))
    # matching_eval.m's checks: 3 lines per benchmark pair, pair lines equal line by line, one
    # label per patch of im_a (its numFeatures), indices within it
    for name, pairs in tasks.items():
        hb.write_matching_benchmark(tmp_path / f"{name}.benchmark", pairs)
        bench = (tmp_path / f"{name}.benchmark").read_text().splitlines()
        labels = (tmp_path / f"{name}.labels").read_text().splitlines()
        assert len(labels) == 3 * len(bench)
        for t, line in enumerate(bench):
            assert labels[3 * t] == line
            n = n_patches[line.split(",")[0]]
            assert labels[3 * t + 1] == labels[3 * t + 2] == ",".join(map(str, range(n)))
        back = hb.read_matching_labels(tmp_path / f"{name}.labels", pairs)
        assert list(back.pairs) == pairs
        hb.check_identity_labels(back, n_patches)


@pytest.mark.bad_input
def test_matching_labels_bad_input(tmp_path):
    pairs = [("s.a", "s.b"), ("s.a", "s.c")]
    with pytest.raises(DataError, match=r"pair s\.a,s\.b: s\.a has 3 patches and s\.b has 2"):
        hb.matching_labels(pairs, {"s.a": 3, "s.b": 2, "s.c": 3})
    with pytest.raises(DataError, match=r"no patch count for patch-image s\.c"):
        hb.matching_labels(pairs, {"s.a": 3, "s.b": 3})
    good = "s.a,s.b\n0,1,2\n0,1,2\ns.a,s.c\n0,1,2\n0,1,2\n"
    p = tmp_path / "t.labels"
    p.write_text(good.replace("s.a,s.c", "s.a,s.x"))
    with pytest.raises(DataError, match=r"benchmark pair 2 is s\.a,s\.c but the labels have pair s\.a,s\.x \(line 4\)"):
        hb.read_matching_labels(p, pairs)
    p.write_text(good.replace("0,1,2\ns.a,s.c", "s.a,s.c", 1))
    with pytest.raises(DataError, match=r"line 1: pair s\.a,s\.b needs 2 lines of patch indices"):
        hb.read_matching_labels(p)
    p.write_text(good.replace("0,1,2", "0,-1,2", 1))
    with pytest.raises(DataError, match=r"line 2: pair s\.a,s\.b, indices of s\.a: entry 2 is '-1'"):
        hb.read_matching_labels(p)
    p.write_text(good.replace("0,1,2\n0,1,2\ns.a,s.c", "0,1,2\n0,1\ns.a,s.c", 1))
    with pytest.raises(DataError, match=r"line 3: pair s\.a,s\.b: 2 indices of s\.b for 3 of s\.a"):
        hb.read_matching_labels(p)
    # a ground truth other than patch i <-> patch i is refused, not evaluated against nn1(i) = i
    p.write_text(good.replace("0,1,2\ns.a,s.c", "0,2,1\ns.a,s.c", 1))
    with pytest.raises(DataError, match=r"t\.labels, line 1: pair s\.a,s\.b: entry 2 pairs s\.a\.1 with s\.b\.2"):
        hb.check_identity_labels(hb.read_matching_labels(p, pairs))
    p.write_text(good)
    with pytest.raises(DataError, match=r"3 labels for the 4 patches of s\.a"):
        hb.check_identity_labels(hb.read_matching_labels(p, pairs), {"s.a": 4})


@pytest.mark.bad_input
@pytest.mark.parametrize("reader, block, follows", [
    (hb.read_matching_labels, "0,1\n0,1\n", "2 lines of patch indices (im_a's, then im_b's)"),
    (hb.read_matching_results, "0,1\n1,2\n1,0\n3,4\n", "exactly 4 numeric lines"),
])
def test_pair_line_errors_of_both_readers(tmp_path, reader, block, follows):
    """The .labels and .results readers' pair-line checks, messages in full: a numeric line where
    a pair line belongs, and a pair written twice."""
    p = tmp_path / "t.txt"
    after = 2 + block.count("\n")  # the line after the first block
    p.write_text("s.a,s.b\n" + block + "0,1\n")
    with pytest.raises(DataError, match=re.escape(f"{p}, line {after}: expected a pair line 'im_a,im_b', found '0,1'; "
                                                  f"each pair needs its pair line followed by {follows}") + "$"):
        reader(p)
    p.write_text(("s.a,s.b\n" + block) * 2)
    with pytest.raises(DataError, match=re.escape(f"{p}, line {after}: pair s.a,s.b repeats line 1; write each pair once") + "$"):
        reader(p)


def test_tasks_step_writes_matching_labels_and_evaluation_checks_them(tmp_path):
    """patches/stages: the tasks step writes <task>.labels beside each matching .benchmark; the
    file evaluation accepts them and refuses a labels file that is not the identity."""
    from descbench.patches import stages

    desc = make_descriptors("float", seed=5)
    counts = {s: v["ref"].shape[0] for s, v in desc.items()}
    cfg = {"split": "all", "retrieval_sequences": [2], "retrieval_seeds": 1, "retrieval_queries_per_sequence": 3}
    stages.build_hbench_tasks(tmp_path / "tasks", list(SEQS), counts, cfg)
    mdir = tmp_path / "tasks" / "matching"
    names = sorted(p.stem for p in mdir.glob("*.benchmark"))
    assert names == sorted(p.stem for p in mdir.glob("*.labels")) and len(names) == 4
    first = (mdir / "all_easy_illum.labels").read_text().splitlines()
    assert first[:3] == ["i_alpha.ref,i_alpha.e1"] + [",".join(map(str, range(counts["i_alpha"])))] * 2
    table = stages.evaluate_hbench(tmp_path / "tasks", desc, tmp_path / "res")[0]
    assert set(table.metric) == {"map", "map_2nn_ratio", "patch_map", "image_map"}
    lab = mdir / "all_hard_viewpoint.labels"
    lines = lab.read_text().splitlines()
    lines[2] = ",".join(["1", "0"] + lines[2].split(",")[2:])
    lab.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"all_hard_viewpoint\.labels, line 1: .*entry 1 pairs v_delta\.ref\.0 with v_delta\.h1\.1"):
        stages.evaluate_hbench_files(tmp_path / "tasks", tmp_path / "res", counts)


@pytest.mark.parametrize("kind", ["float", "int"])
def test_hbench_file_evaluator_ap_relation(kind):
    """The documented conversion to HBench's matching_eval.m (vl_pr without NumPositives: the AP
    divides by the correct matches): its AP = our AP x n_patches / n_correct, 0 without a correct
    match (its NaN -> 0), written out longhand from the nearest neighbours."""
    desc = make_descriptors(kind, seed=3)
    tasks = hb.matching_tasks(SEQS)
    results = {t: hb.compute_matching_results(p, desc) for t, p in tasks.items()}
    ev = hb.evaluate_matching(tasks, results, hb.patch_counts(desc))
    assert (ev.per_pair.n_correct < ev.per_pair.n_patches).any()  # the two definitions differ
    for row in ev.per_pair.itertuples():
        m = results[row.task].pairs[(row.im_a, row.im_b)]
        correct = (m.nn1_idx == np.arange(m.nn1_idx.size)).tolist()
        file_ap = ap_longhand(m.nn1_dist.tolist(), correct, sum(correct))
        expect = row.ap * row.n_patches / row.n_correct if row.n_correct else 0.0
        assert file_ap == pytest.approx(expect, abs=1e-12)


def test_matching_non_finite_distance_is_never_retrieved():
    # a.1 has no neighbour (inf): out of the ranking, still counted in numPositives = 3.
    # Ranking a.0 (correct, rank 1), a.2 (correct, rank 2): AP = (1 + 1) / 3.
    ap = hb.matching_pair_ap(np.array([0, -1, 2]), np.array([0.5, np.inf, 0.7]))
    assert ap == pytest.approx(2 / 3, abs=1e-15)


# ----------------------------------------------------------------------------- retrieval


def brute_force_ranking(bench, desc, top):
    pool = [(s, desc[s.split(".")[0]][s.split(".")[1]]) for s in bench.pool]
    sigs = [f"{s}.{i}" for s, a in pool for i in range(a.shape[0])]
    allc = np.concatenate([a for _, a in pool])
    out = []
    for q in bench.queries:
        self_j = sigs.index(q)
        key = sqdist_matrix(allc[self_j: self_j + 1], allc)[0]
        others = sorted((j for j in range(len(sigs)) if j != self_j), key=lambda j: (key[j], j))
        out.append(tuple(sigs[j] for j in [self_j] + others[: top - 1]))
    return out


@pytest.mark.parametrize("kind", ["float", "int", "binary"])
def test_retrieval_equals_brute_force(kind):
    desc = make_descriptors(kind, seed=3)
    sizes = {s: desc[s]["ref"].shape[0] for s in SEQS}
    bench, labels = hb.make_retrieval_task(SEQS, sizes, 3, seed=7, jitter="h", queries_per_sequence=4)
    if kind == "int":  # an earlier pool patch identical to a query: the query must still come first
        q_seq, _, q_idx = bench.queries[0].split(".")
        first = bench.pool[0].split(".")
        desc[first[0]][first[1]][0] = desc[q_seq]["ref"][int(q_idx)]
    counts = hb.patch_counts(desc)
    res = hb.compute_retrieval_results(bench, desc)
    assert list(res.ranked) == brute_force_ranking(bench, desc, 51)
    small = hb.compute_retrieval_results(bench, desc, chunk_mb=1e-6)  # one query row per screen block
    assert small.ranked == res.ranked
    ev = hb.evaluate_retrieval(bench, labels, res, counts)
    for i, row in enumerate(res.ranked):
        cluster = set(labels.clusters[i])
        seq_strips = {c.rsplit(".", 1)[0] for c in cluster}
        assert ev.per_query.patch_ap[i] == pytest.approx(list_ap_longhand([s in cluster for s in row]), abs=1e-12)
        assert ev.per_query.image_ap[i] == pytest.approx(
            list_ap_longhand([s.rsplit(".", 1)[0] in seq_strips for s in row]), abs=1e-12)
    assert ev.patch_map == pytest.approx(ev.per_query.patch_ap.mean(), abs=1e-15)
    assert 0 < ev.patch_map <= 1 and 0 < ev.image_map <= 1


def test_retrieval_exact_where_float32_screen_cannot_tell():
    # A large common offset: the float32 screen error (~1e-4) dwarfs the distance differences
    # (~1e-6), so the order comes from the float64 recheck alone.
    rng = np.random.default_rng(5)
    desc = {}
    for s in SEQS[:2]:
        n = 30
        desc[s] = {t: (np.float32(300.0) + rng.integers(-4, 5, size=(n, 4)).astype(np.float32) * np.float32(2**-14))
                   for t in PATCH_TYPES}
    sizes = {s: 30 for s in SEQS[:2]}
    bench, labels = hb.make_retrieval_task(SEQS[:2], sizes, 2, seed=1, queries_per_sequence=6)
    res = hb.compute_retrieval_results(bench, desc)
    assert list(res.ranked) == brute_force_ranking(bench, desc, 51)


@pytest.mark.bad_input
def test_retrieval_pool_smaller_than_top():
    desc = make_descriptors("float", seed=4, sizes=[5, 5, 5, 5, 5])
    sizes = {s: 5 for s in SEQS}
    bench, labels = hb.make_retrieval_task(SEQS, sizes, 1, seed=0, queries_per_sequence=3)
    res = hb.compute_retrieval_results(bench, desc)
    assert all(len(r) == 30 for r in res.ranked)  # 6 strips x 5 patches < 51
    assert list(res.ranked) == brute_force_ranking(bench, desc, 51)
    ev = hb.evaluate_retrieval(bench, labels, res, hb.patch_counts(desc))
    assert (ev.per_query.image_ap == 1.0).all()  # one sequence: every patch is from it
    with pytest.raises(DataError, match="30 patches for query .* expected 51"):
        hb.evaluate_retrieval(bench, labels, res)  # without counts HBench's 51 is required


def _hand_task(tmp_path):
    """Pool: sequences s1, s2 (6 easy strips x 10 patches); 2 queries."""
    pool = [f"{s}.{t}" for s in ("s1", "s2") for t in hb.strip_types("e")]
    bench = hb.RetrievalBenchmark(tuple(pool), ("s1.ref.0", "s2.ref.3"))
    labels = hb.RetrievalLabels(tuple(pool), (tuple(f"s1.{t}.0" for t in hb.strip_types("e")),
                                              tuple(f"s2.{t}.3" for t in hb.strip_types("e"))))
    hb.write_retrieval_benchmark(tmp_path / "h.benchmark", bench)
    hb.write_retrieval_labels(tmp_path / "h.labels", labels)
    counts = {s: 10 for s in pool}
    fillers_s2 = [f"s2.{t}.{i}" for t in hb.strip_types("e") for i in range(10) if i != 3]  # 54, all wrong
    fillers_s1 = [f"s1.{t}.{i}" for t in hb.strip_types("e")[1:] for i in range(10)]  # 50, wrong for query 2
    # query 1: after the query, s2 fillers except rank 2 = s1.e3.5 (same image, other patch) and
    # rank 4 = s1.e1.0 (the corresponding patch).
    row1 = ["s1.ref.0", fillers_s2[0], "s1.e3.5", fillers_s2[1], "s1.e1.0"] + fillers_s2[2:48]
    # query 2: nothing correct after the query (only s1 patches)
    row2 = ["s2.ref.3"] + fillers_s1[:50]
    text = ",".join(pool) + "\n" + ", ".join(row1) + "\n" + ",".join(row2) + "\n"
    (tmp_path / "h.results").write_text(text)
    return bench, labels, counts


def test_retrieval_hand_worked(tmp_path):
    _, _, counts = _hand_task(tmp_path)
    bench = hb.read_retrieval_benchmark(tmp_path / "h.benchmark")
    labels = hb.read_retrieval_labels(tmp_path / "h.labels")
    res = hb.read_retrieval_results(tmp_path / "h.results")
    assert len(res.ranked[0]) == 51 and len(res.ranked[1]) == 51
    ev = hb.evaluate_retrieval(bench, labels, res, counts)
    q1, q2 = ev.per_query.iloc[0], ev.per_query.iloc[1]
    # query 1, patch retrieval: one correct entry found, at rank 4 (the query is left out):
    # AP = (1/4) / 1 = 0.25. Image retrieval: correct at ranks 2 and 4: (1/2 + 2/4) / 2 = 0.5.
    assert q1.patch_ap == 0.25 and q1.image_ap == 0.5
    # query 2: no correct entry in the top 51: AP 0 (HBench replaces vl_pr's NaN by 0), not NaN.
    assert q2.patch_ap == 0.0 and q2.image_ap == 0.0
    assert ev.patch_map == 0.125 and ev.image_map == 0.25
    assert q1.line == 2 and q2.line == 3
    # chance (retrieval_eval_chance.m): pool 120 patches; 5 / 119 and (60 - 1) / 119
    ch = hb.retrieval_chance(labels, counts)
    assert ch.patch_chance_ap.tolist() == [5 / 119, 5 / 119]
    assert ch.image_chance_ap.tolist() == [59 / 119, 59 / 119]


@pytest.mark.bad_input
def test_retrieval_bad_input(tmp_path):
    bench, labels, counts = _hand_task(tmp_path)
    good = (tmp_path / "h.results").read_text().splitlines()
    path = tmp_path / "bad.results"

    def evaluate(lines):
        path.write_text("\n".join(lines) + "\n")
        return hb.evaluate_retrieval(bench, labels, hb.read_retrieval_results(path), counts)

    evaluate(good)
    with pytest.raises(DataError, match=r"bad\.results, line 3: unknown patch signature s3\.e1\.2 \(patch-image s3\.e1"):
        evaluate(good[:2] + [good[2].replace("s1.e4.1", "s3.e1.2")])
    with pytest.raises(DataError, match=r"bad\.results, line 2: unknown patch signature s1\.e1\.10 \(s1\.e1 has 10"):
        evaluate([good[0], good[1].replace("s1.e1.0", "s1.e1.10"), good[2]])
    with pytest.raises(DataError, match=r"bad\.results: 1 result lines for 2 queries; query s2\.ref\.3 \(.*line 3\)"):
        evaluate(good[:2])
    with pytest.raises(DataError, match=r"bad\.results, line 3: the first patch is s1\.e1\.0, not the query s2\.ref\.3"):
        evaluate(good[:2] + [good[2].replace("s2.ref.3,", "") + ",s2.e1.0"])
    with pytest.raises(DataError, match=r"line 2: 52 patches for query s1\.ref\.0, expected 51"):
        evaluate([good[0], good[1] + ",s2.e1.0", good[2]])
    with pytest.raises(DataError, match=r"line 2: 50 patches"):
        evaluate([good[0], good[1].rsplit(",", 1)[0], good[2]])
    with pytest.raises(DataError, match=r"line 3: patch s1\.e4\.1 is returned twice"):
        evaluate(good[:2] + [good[2].rsplit(",", 1)[0] + ",s1.e4.1"])
    with pytest.raises(DataError, match=r"bad\.results, line 2: 'x' is not a patch signature"):
        evaluate([good[0], good[1].replace("s1.e3.5", "x"), good[2]])
    with pytest.raises(DataError, match=r"bad\.results, line 1: the pool of patch-images differs"):
        evaluate([good[0].replace("s2.e5", "s2.h5")] + good[1:])
    with pytest.raises(DataError, match=r"line 4: a results line beyond the 2 queries"):
        evaluate(good + [good[2]])
    (tmp_path / "q.benchmark").write_text(good[0] + "\ns9.ref.1\n")
    with pytest.raises(DataError, match=r"q\.benchmark, line 2: query s9\.ref\.1 is not a patch of the pool"):
        hb.read_retrieval_benchmark(tmp_path / "q.benchmark")
    with pytest.raises(DataError, match="does not exist"):
        hb.read_retrieval_results(tmp_path / "missing.results")


def test_retrieval_round_trip_and_determinism(tmp_path):
    desc = make_descriptors("float", seed=6)
    sizes = {s: desc[s]["ref"].shape[0] for s in SEQS}
    b1, l1 = hb.write_retrieval_task(tmp_path / "a", "train", SEQS, sizes, 4, seed=3, queries_per_sequence=5)
    b2, l2 = hb.write_retrieval_task(tmp_path / "b", "train", list(reversed(SEQS)), sizes, 4, seed=3,
                                     queries_per_sequence=5)
    assert b1.name == "train_easy_4s_03.benchmark" and l1.name == "train_easy_4s_03.labels"
    assert b1.read_bytes() == b2.read_bytes() and l1.read_bytes() == l2.read_bytes()
    b3, _ = hb.write_retrieval_task(tmp_path / "c", "train", SEQS, sizes, 4, seed=4, queries_per_sequence=5)
    assert b3.read_bytes() != b1.read_bytes()
    bench = hb.read_retrieval_benchmark(b1)
    labels = hb.read_retrieval_labels(l1)
    assert len(bench.pool) == 24 and len(bench.queries) == 20 and len(set(bench.queries)) == 20
    for q, c in zip(bench.queries, labels.clusters):
        seq, typ, idx = q.split(".")
        assert typ == "ref" and int(idx) < sizes[seq]
        assert c == tuple(f"{seq}.{t}.{idx}" for t in ("ref", "e1", "e2", "e3", "e4", "e5"))
    counts = hb.patch_counts(desc)
    mem = hb.compute_retrieval_results(bench, desc)
    out = hb.write_retrieval_results(tmp_path / "r.results", mem)
    assert hb.write_retrieval_results(tmp_path / "r2.results", mem).read_bytes() == out.read_bytes()
    disk = hb.read_retrieval_results(out)
    a = hb.evaluate_retrieval(bench, labels, mem, counts)
    b = hb.evaluate_retrieval(bench, labels, disk, counts)
    pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
    assert (a.patch_map, a.image_map) == (b.patch_map, b.image_map)


# ----------------------------------------------------------------------------- small cases, edges, whole messages


def test_matching_pair_aps_single_patch_and_empty():
    # One patch, correct: ranked first, AP = (1/1) / 1 = 1 for both rankings. No patch: 0.
    assert hb.matching_pair_ap(np.array([0]), np.array([0.5])) == 1.0
    assert hb.matching_pair_ratio_ap(np.array([0]), np.array([0.5]), np.array([0.7])) == 1.0
    assert hb.matching_pair_ap(np.array([], dtype=np.int64), np.array([])) == 0.0
    assert hb.matching_pair_ratio_ap(np.array([], dtype=np.int64), np.array([]), np.array([])) == 0.0


def test_matching_ratio_ap_nan_ratio_ranks_first_without_warnings():
    # Patch 0 (wrong, nn1 = 1) has d2 = NaN: its ratio is NaN, ranked first (MATLAB's descending
    # sort); patch 1 (correct) ratio 2 / 1 = 2 comes second: AP = (1/2) / 2 = 1/4.
    import warnings

    assert hb.matching_pair_ratio_ap(np.array([1, 1]), np.array([1.0, 1.0]), np.array([np.nan, 2.0])) == 0.25
    # d1 = 0 < d2 (IEEE +inf) and d1 = d2 = 0 (ratio 1) are conventions, computed without a
    # division warning: patch 0 (correct, inf) first, patch 1 (wrong, 1), patch 2 (correct, 3 / 1 = 3)
    # second: AP = (1/1 + 2/2) / 3 = 2/3.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ap = hb.matching_pair_ratio_ap(np.array([0, 0, 2]), np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.0, 3.0]))
    assert ap == pytest.approx(2 / 3, abs=1e-15)


def test_evaluate_matching_tables_columns_and_counts():
    # Two tasks of 1 and 2 pairs and one without pairs: n_pairs counts the task's own pairs, the
    # means are over them, an empty task has NaN means.
    res = hb.MatchingResults("r", {
        ("s.a", "s.b"): hb.PairMatches(np.array([0, 0]), np.array([1.0, 2.0]), np.array([1, 1]), np.array([3.0, 2.0])),
        ("s.a", "s.c"): hb.PairMatches(np.array([0, 1]), np.array([1.0, 2.0]), np.array([1, 0]), np.array([3.0, 3.0])),
    })
    tasks = {"one": [("s.a", "s.b")], "two": [("s.a", "s.b"), ("s.a", "s.c")], "none": []}
    ev = hb.evaluate_matching(tasks, {"one": res, "two": res, "none": res})
    assert list(ev.per_pair.columns) == ["task", "pair", "im_a", "im_b", "n_patches", "n_correct", "ap", "ap_2nn_ratio"]
    assert list(ev.per_task.columns) == ["task", "n_pairs", "mean_ap", "mean_ap_2nn_ratio"]
    assert ev.per_pair.pair.tolist() == ["s.a,s.b", "s.a,s.b", "s.a,s.c"]
    assert ev.per_task.n_pairs.tolist() == [1, 2, 0]
    # s.a,s.b: patch 0 correct at distance 1 (rank 1), patch 1 wrong: AP = 1/2; ratios 3 and 1:
    # patch 0 first, AP = 1/2. s.a,s.c: both correct: AP = 1; ratios 3, 1.5: AP = 1.
    assert ev.per_pair.ap.tolist() == [0.5, 0.5, 1.0] and ev.per_pair.ap_2nn_ratio.tolist() == [0.5, 0.5, 1.0]
    assert ev.per_task.mean_ap.tolist()[:2] == [0.5, 0.75]
    assert ev.per_task.mean_ap_2nn_ratio.tolist()[:2] == [0.5, 0.75]
    assert np.isnan(ev.per_task.mean_ap[2]) and np.isnan(ev.per_task.mean_ap_2nn_ratio[2])


@pytest.mark.bad_input
def test_evaluate_matching_messages_in_full():
    m = hb.PairMatches(np.array([0, 1]), np.array([1.0, 2.0]), np.array([1, 0]), np.array([3.0, 3.0]), line=4)
    res = hb.MatchingResults("r.results", {("s.a", "s.b"): m})
    with pytest.raises(DataError, match=re.escape("no results for matching task u; compute or read its .results file") + "$"):
        hb.evaluate_matching({"u": [("s.a", "s.b")]}, {"t": res})
    with pytest.raises(DataError, match=re.escape(
            "r.results: no results for pair s.a,s.c (benchmark pair 2 of task t); every pair of the benchmark "
            "file needs its 5 lines") + "$"):
        hb.evaluate_matching({"t": [("s.a", "s.b"), ("s.a", "s.c")]}, {"t": res})
    # the nn1 indices (line 4 + 1) point past the 1 patch of s.b
    with pytest.raises(DataError, match=re.escape(
            "r.results, line 5: pair s.a,s.b, nn1 indices: entry 2 is 1, but s.b has 1 patches") + "$"):
        hb.evaluate_matching({"t": [("s.a", "s.b")]}, {"t": res}, {"s.a": 2, "s.b": 1})
    with pytest.raises(DataError, match=re.escape(
            "r.results, line 5: pair s.a,s.b, nn1 indices: found 2 entries, expected 3 (the number of patches of s.a)") + "$"):
        hb.evaluate_matching({"t": [("s.a", "s.b")]}, {"t": res}, {"s.a": 3})


def test_retrieval_chance_small_pools_and_columns():
    # Pool of 2 patches (s.ref.0, s.e1.0), labels line of both: P - 1 = 1 other patch, correct for
    # both retrievals: (2 - 1) / 1 = 1. One patch in the pool: no other patch, chance undefined (NaN).
    two = hb.RetrievalLabels(("s.ref", "s.e1"), (("s.e1.0", "s.ref.0"),))
    ch = hb.retrieval_chance(two, {"s.ref": 1, "s.e1": 1})
    assert list(ch.columns) == ["query", "patch_chance_ap", "image_chance_ap"]
    assert ch["query"].tolist() == ["s.e1.0"]  # the labels line's first entry
    assert ch.patch_chance_ap.tolist() == [1.0] and ch.image_chance_ap.tolist() == [1.0]
    one = hb.RetrievalLabels(("s.ref",), (("s.ref.0",),))
    ch = hb.retrieval_chance(one, {"s.ref": 1})
    assert np.isnan(ch.patch_chance_ap[0]) and np.isnan(ch.image_chance_ap[0])


@pytest.mark.bad_input
def test_retrieval_chance_missing_counts_messages():
    labels = hb.RetrievalLabels(("s.ref", "s.e1", "s.e2"), (("s.ref.0", "t.e1.0"),))
    with pytest.raises(ValueError, match=re.escape("n_patches has no count for pool patch-image s.e1") + "$"):
        hb.retrieval_chance(labels, {"s.ref": 1})
    with pytest.raises(ValueError, match=re.escape("n_patches has no count for patch-image t.e1") + "$"):
        hb.retrieval_chance(labels, {"s.ref": 1, "s.e1": 1, "s.e2": 1})


def test_evaluate_retrieval_counts_and_columns():
    # Pool s.ref, s.e1 (2 patches each) and t.ref (2 patches): 6 patches, fewer than 51, so
    # n_patches allows a list of all 6. Query s.ref.0, labels s.ref.0, s.e1.0.
    pool = ("s.ref", "s.e1", "t.ref")
    bench = hb.RetrievalBenchmark(pool, ("s.ref.0",))
    labels = hb.RetrievalLabels(pool, (("s.ref.0", "s.e1.0"),))
    row = ("s.ref.0", "s.e1.0", "t.ref.0", "s.ref.1", "t.ref.1", "s.e1.1")
    ev = hb.evaluate_retrieval(bench, labels, hb.RetrievalResults(pool, (row,)), {s: 2 for s in pool})
    assert list(ev.per_query.columns) == ["query", "line", "patch_ap", "image_ap", "n_patch_correct", "n_image_correct"]
    assert ev.per_query["query"].tolist() == ["s.ref.0"] and ev.per_query.line.tolist() == [2]
    # after the query: s.e1.0 (patch and image correct, rank 1), t.ref.0 (wrong), s.ref.1 (image
    # correct, rank 3), t.ref.1, s.e1.1 (image correct, rank 5)
    assert ev.per_query.n_patch_correct.tolist() == [1] and ev.per_query.n_image_correct.tolist() == [3]
    assert ev.per_query.patch_ap.tolist() == [1.0]
    assert ev.per_query.image_ap[0] == pytest.approx((1 / 1 + 2 / 3 + 3 / 5) / 3, abs=1e-15)


def test_strip_descriptors_accepts_edges_and_messages_in_full():
    ok = {"s": {"one_row": np.ones((1, 3), np.float32), "one_col": np.ones((4, 1), np.float32),
                "bits": np.full((2, 1), 255, np.uint8)}}
    assert hb._strip_descriptors(ok, "s.one_row").shape == (1, 3)
    assert hb._strip_descriptors(ok, "s.one_col").shape == (4, 1)
    assert hb._strip_descriptors(ok, "s.bits").dtype == np.uint8
    nan = np.zeros((4, 2), np.float32)
    nan[2, 1], nan[3, 0] = np.nan, np.inf
    bad = {"s": {"flat": np.zeros(3, np.float32), "nocol": np.zeros((3, 0), np.float32),
                 "f64": np.zeros((3, 2)), "norow": np.zeros((0, 2), np.float32), "nan": nan}}
    cases = [
        ("t.ref", "no descriptors for patch-image t.ref (sequence 't', patch type 'ref'); compute descriptors for "
                  "every patch-image the benchmark file names"),
        ("s.flat", "descriptors of s.flat must be a 2-D array [N, D] with D > 0, got shape (3,)"),
        ("s.nocol", "descriptors of s.nocol must be a 2-D array [N, D] with D > 0, got shape (3, 0)"),
        ("s.f64", "descriptors of s.f64 have dtype float64; expected float32 (L2) or uint8 packed bits (Hamming): "
                  "convert them when writing the descriptors"),
        ("s.norow", "patch-image s.norow has no patches (descriptor array of shape (0, 2))"),
        ("s.nan", "descriptors of s.nan contain NaN or inf (first bad patch s.nan.2); recompute them"),
    ]
    for sig, msg in cases:
        with pytest.raises(DataError, match=re.escape(msg) + "$"):
            hb._strip_descriptors(bad, sig)


def _one_sequence_pool(n=3, dim=2, dtype=np.float32):
    rng = np.random.default_rng(11)
    if dtype == np.uint8:
        desc = {"s": {t: rng.integers(0, 256, size=(n, dim), dtype=np.uint8) for t in hb.strip_types("e")}}
    else:
        desc = {"s": {t: rng.normal(size=(n, dim)).astype(np.float32) for t in hb.strip_types("e")}}
    return tuple(f"s.{t}" for t in hb.strip_types("e")), desc


@pytest.mark.bad_input
def test_compute_retrieval_query_and_descriptor_messages_in_full():
    pool, desc = _one_sequence_pool()
    with pytest.raises(DataError, match=re.escape(
            "<in memory>, line 3: query s.e1.3: patch-image s.e1 has 3 patches; the query must be a patch of the pool") + "$"):
        hb.compute_retrieval_results(hb.RetrievalBenchmark(pool, ("s.ref.0", "s.e1.3")), desc)
    with pytest.raises(DataError, match=re.escape(
            "<in memory>, line 2: query t.ref.0: patch-image t.ref is not in the pool; the query must be a patch "
            "of the pool") + "$"):
        hb.compute_retrieval_results(hb.RetrievalBenchmark(pool, ("t.ref.0",)), desc)
    desc["s"]["e2"] = np.zeros((3, 4), np.float32)  # the third pool strip has another width
    with pytest.raises(DataError, match=re.escape(
            "descriptor mismatch: s.ref has float32 x 2, s.e2 has float32 x 4; every patch-image must use one "
            "descriptor") + "$"):
        hb.compute_retrieval_results(hb.RetrievalBenchmark(pool, ("s.ref.0",)), desc)
    with pytest.raises(ValueError, match=re.escape("top must be >= 1, got 0") + "$"):
        hb.compute_retrieval_results(hb.RetrievalBenchmark(pool, ("s.ref.0",)), desc, top=0)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_compute_retrieval_top_one_and_odd_byte_width(dtype):
    # top = 1: the list is the query alone. 9 bytes = 72 bits: the packed rows are padded to two
    # uint64 words; the ranking still equals the brute force.
    pool, desc = _one_sequence_pool(n=4, dim=9, dtype=dtype)
    bench = hb.RetrievalBenchmark(pool, ("s.ref.1", "s.e3.2"))
    assert hb.compute_retrieval_results(bench, desc, top=1).ranked == (("s.ref.1",), ("s.e3.2",))
    res = hb.compute_retrieval_results(bench, desc)
    assert list(res.ranked) == brute_force_ranking(bench, desc, 51)
    assert all(re.fullmatch(r"s\.\w+\.\d", s) for row in res.ranked for s in row)  # integer indices


def test_make_retrieval_task_defaults_and_bounds():
    seqs = ["a", "b"]
    # default: 100 queries per drawn sequence
    bench, _ = hb.make_retrieval_task(seqs, {"a": 150, "b": 150}, 1, seed=0)
    assert len(bench.queries) == 100 and len(set(bench.queries)) == 100
    # n_queries overrides; 1 query and all ref patches (nq = total) are allowed; size-1 sequences too
    assert len(hb.make_retrieval_task(seqs, {"a": 5, "b": 5}, 2, seed=0, n_queries=7)[0].queries) == 7
    assert len(hb.make_retrieval_task(seqs, {"a": 5, "b": 5}, 2, seed=0, n_queries=1)[0].queries) == 1
    b, lab = hb.make_retrieval_task(seqs, {"a": 1, "b": 1}, 2, seed=0, n_queries=2)
    assert sorted(b.queries) == ["a.ref.0", "b.ref.0"]
    assert sorted(lab.clusters) == [tuple(f"{s}.{t}.0" for t in hb.strip_types("e")) for s in seqs]


@pytest.mark.bad_input
def test_make_retrieval_task_messages_in_full():
    sizes = {"a": 5, "b": 5}
    with pytest.raises(ValueError, match=re.escape("n_sequences must be in 1..2 (the sequences given), got 0") + "$"):
        hb.make_retrieval_task(["a", "b"], sizes, 0, seed=0)
    with pytest.raises(ValueError, match=re.escape("sequence_sizes has no positive patch count for sequence 'c'") + "$"):
        hb.make_retrieval_task(["a", "b", "c"], sizes, 1, seed=0)
    with pytest.raises(ValueError, match=re.escape("sequence_sizes has no positive patch count for sequence 'b'") + "$"):
        hb.make_retrieval_task(["a", "b"], {"a": 5, "b": 0}, 1, seed=0)
    with pytest.raises(ValueError, match=re.escape("cannot draw 0 distinct queries from 10 ref patches of the 2 sequences") + "$"):
        hb.make_retrieval_task(["a", "b"], sizes, 2, seed=0, n_queries=0)


def test_empty_evaluations_keep_their_columns():
    # No pair / no query / no task: the tables are empty but keep their documented columns.
    res = hb.MatchingResults("r", {})
    ev = hb.evaluate_matching({"none": []}, {"none": res})
    assert list(ev.per_pair.columns) == ["task", "pair", "im_a", "im_b", "n_patches", "n_correct", "ap", "ap_2nn_ratio"]
    assert len(ev.per_pair) == 0
    assert list(hb.evaluate_matching({}, {}).per_task.columns) == ["task", "n_pairs", "mean_ap", "mean_ap_2nn_ratio"]
    pool = ("s.ref",)
    ev = hb.evaluate_retrieval(hb.RetrievalBenchmark(pool, ()), hb.RetrievalLabels(pool, ()), hb.RetrievalResults(pool, ()))
    assert list(ev.per_query.columns) == ["query", "line", "patch_ap", "image_ap", "n_patch_correct", "n_image_correct"]
    assert np.isnan(ev.patch_map) and np.isnan(ev.image_map)
    ch = hb.retrieval_chance(hb.RetrievalLabels(pool, ()), {"s.ref": 3})
    assert list(ch.columns) == ["query", "patch_chance_ap", "image_chance_ap"] and len(ch) == 0
