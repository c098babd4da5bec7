"""hpatches-benchmark tasks (descbench.patches.hpbench) against plain references written here.

References: the task generators as the original's call sequence on a RandomState(42) (slow, per
row); the evaluations as brute force (full distance matrices with float64 sums in index order,
np.argsort(kind="mergesort"), explicit trapezoid sums), on small random sets with float and binary
descriptors, duplicates and exact ties, plus one hand-worked example per task.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from descbench.errors import ConfigError, DataError
from descbench.metrics.ap import ap_trapezoid
from descbench.patches import JITTERS, PATCH_TYPES
from descbench.patches import hpbench as H
from descbench.patches import hpbench_kernels as K

# ============================================================================ references


def ref_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise keys: float64 squared L2 summed in index order (the definition), or Hamming."""
    if a.dtype == np.uint8:
        return np.unpackbits(a ^ b, axis=-1).sum(axis=-1).astype(np.float64)
    acc = np.zeros(a.shape[:-1])
    for k in range(a.shape[-1]):
        acc = acc + (a[..., k].astype(np.float64) - b[..., k].astype(np.float64)) ** 2
    return acc


def ref_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ref_keys(a[:, None, :], b[None, :, :])


def ref_curve(d, lab, numpos=None):
    """hpatches tpfp: stable mergesort by distance, counts with a leading 0."""
    d = np.asarray(d, dtype=np.float64)
    lab = np.asarray(lab)
    order = np.argsort(d, kind="mergesort")
    lab = lab[order]
    tp = np.concatenate([[0], np.cumsum(lab == 1)]).astype(np.float64)
    fp = np.concatenate([[0], np.cumsum(lab == 0)]).astype(np.float64)
    p = float(lab.sum()) if numpos is None else float(numpos)
    return tp, fp, p, float(lab.size - lab.sum())


def trapz(y, x) -> float:
    y, x = np.asarray(y, dtype=np.float64), np.asarray(x, dtype=np.float64)
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))


def ref_ap(d, lab, numpos=None) -> float:
    tp, fp, p, _ = ref_curve(d, lab, numpos)
    precision = np.maximum(tp, 1e-10) / np.maximum(tp + fp, 1e-10)
    return trapz(precision, tp / max(p, 1e-10))


def ref_auc(d, lab) -> float:
    tp, fp, p, n = ref_curve(d, lab)
    return trapz(tp / max(p, 1e-10), fp / max(n, 1e-10))


def ref_verification(desc, pairs):
    """{(jitter, negatives, protocol): value} by brute force."""
    out = {}
    for j in JITTERS:
        keys = {}
        for lst, df in pairs.items():
            a = np.stack([desc[s][H.type_name(j, t)][i] for s, t, i in zip(df.s1, df.t1, df.idx1)])
            b = np.stack([desc[s][H.type_name(j, t)][i] for s, t, i in zip(df.s2, df.t2, df.idx2)])
            keys[lst] = ref_keys(a, b)
        n_pos = keys["pos"].size
        for neg in ("intra", "inter"):
            d = np.concatenate([keys["neg_" + neg], keys["pos"]])
            lab = np.concatenate([np.zeros(keys["neg_" + neg].size), np.ones(n_pos)])
            out[(j, neg, "balanced")] = ref_auc(d, lab)
            n_imb = keys["neg_" + neg].size + int(n_pos * 0.2)
            out[(j, neg, "imbalanced")] = ref_ap(d[:n_imb], lab[:n_imb])
    return out


def ref_matching(desc, seqs):
    out = {}
    for s in seqs:
        ref = desc[s]["ref"]
        n = ref.shape[0]
        for j in JITTERS:
            for k in range(1, 6):
                D = ref_matrix(ref, desc[s][f"{j}{k}"])
                nn = np.argmin(D, axis=1)
                correct = nn == np.arange(n)
                out[(s, j, k)] = (ref_ap(D[np.arange(n), nn], correct.astype(int), numpos=n), correct.mean())
    return out


def ref_retrieval(desc, q, d, pool_sizes):
    out = {}
    Q = np.stack([desc[s]["ref"][i] for s, i in zip(q.s, q.idx)])
    Dd = np.stack([desc[s]["ref"][i] for s, i in zip(d.s, d.idx)])
    D = ref_matrix(Q, Dd)
    for r, (s, i) in enumerate(zip(q.s, q.idx)):
        mask = d.s.to_numpy() != s
        for j in JITTERS:
            pos = np.stack([desc[s][f"{j}{k}"][i] for k in range(1, 6)])
            lst = np.concatenate([ref_keys(Q[r][None], pos), D[r][mask]])
            gt = np.concatenate([np.ones(5), np.zeros(mask.sum())])
            for k in pool_sizes:
                out[(r, j, k)] = ref_ap(lst[:k], gt[:k])
    return out


# ---------------------------------------------------------------------------- slow generators


def slow_gen_verif(lengths, test, n):
    """The original gen_verif call sequence on a RandomState(42) instance."""
    rs = np.random.RandomState(42)
    s = rs.choice(test, n)
    s_idx = np.array([rs.choice(np.arange(lengths[k]), 2, replace=False) for k in s])
    s_type = np.array([rs.choice(np.arange(5), 2, replace=False) for _ in s_idx])
    s_inter = rs.choice(test, n)
    s_idx_inter = np.array([rs.randint(lengths[k]) for k in s_inter])

    def frame(s2, idx2):
        return pd.DataFrame({"s1": s.astype(object), "t1": s_type[:, 0], "idx1": s_idx[:, 0],
                             "s2": np.asarray(s2).astype(object), "t2": s_type[:, 1], "idx2": idx2})

    return {"pos": frame(s, s_idx[:, 0]), "neg_intra": frame(s, s_idx[:, 1]), "neg_inter": frame(s_inter, s_idx_inter)}


def slow_gen_retrieval(lengths, strips, test, nq, nd):
    """The original gen_retrieval call sequence (std of np.split patches, pandas filtering)."""
    rs = np.random.RandomState(42)
    s_q = rs.choice(test, nq * 4)
    s_q_idx = np.array([rs.randint(lengths[k]) for k in s_q])
    s_d = rs.choice(test, nd * 10)
    s_d_idx = np.array([rs.randint(lengths[k]) for k in s_d])
    mq = np.array([np.std(np.split(strips[s], lengths[s])[i]) > 10 for s, i in zip(s_q, s_q_idx)])
    md = np.array([np.std(np.split(strips[s], lengths[s])[i]) > 10 for s, i in zip(s_d, s_d_idx)])
    df_q = pd.DataFrame({"s": s_q[mq].astype(object), "idx": s_q_idx[mq]}).drop_duplicates().head(nq)
    df_d = pd.DataFrame({"s": s_d[md].astype(object), "idx": s_d_idx[md]}).drop_duplicates()
    qi = df_q.set_index(["s", "idx"]).index
    df_d = df_d.set_index(["s", "idx"])
    df_d = df_d[~df_d.index.isin(qi)].reset_index().head(nd)
    return df_q.reset_index(drop=True), df_d.reset_index(drop=True)


# ---------------------------------------------------------------------------- data


def make_desc(seed, n_seq=4, n_range=(6, 14), dim=8, kind="float", n_exact=None):
    """Random descriptors of i_/v_ sequences; kind float / int (integer-valued floats: ties) /
    binary (uint8 packed bits, few bits: ties) / dup (float with duplicated rows across strips)."""
    rng = np.random.default_rng(seed)
    seqs = [f"i_{c}" for c in "abcdefgh"[: n_seq // 2]] + [f"v_{c}" for c in "abcdefgh"[: n_seq - n_seq // 2]]
    desc = {}
    for s in seqs:
        n = n_exact or int(rng.integers(*n_range))
        strips = {}
        for t in PATCH_TYPES:
            if kind == "binary":
                strips[t] = rng.integers(0, 256, (n, 2), dtype=np.uint8) & np.uint8(0b10110001)
            elif kind == "int":
                strips[t] = rng.integers(0, 3, (n, dim)).astype(np.float32)
            else:
                strips[t] = rng.standard_normal((n, dim)).astype(np.float32)
        if kind == "dup":  # some strips copy rows of ref / of each other
            for t in PATCH_TYPES[1:]:
                rows = rng.random(n) < 0.3
                strips[t][rows] = strips["ref"][rng.integers(0, n, rows.sum())]
        desc[s] = strips
    return desc


KINDS = ["float", "int", "binary", "dup"]


# ============================================================================ splits


def test_shipped_splits():
    sp = H.load_splits()
    assert set(sp) == {"a", "b", "c", "illum", "view", "full"}
    for name in "abc":
        assert len(sp[name]["test"]) == 40 and len(sp[name]["train"]) == 76
        assert set(sp[name]["test"]) | set(sp[name]["train"]) == set(sp["full"]["test"])
    assert len(sp["full"]["test"]) == 116
    assert set(sp["illum"]["test"]) == {s for s in sp["full"]["test"] if s.startswith("i_")}
    assert H.split_sequences("a") == sp["a"]["test"]  # file order, not sorted
    with pytest.raises(ConfigError, match="unknown HPatches split"):
        H.split_sequences("d")
    with pytest.raises(ConfigError, match="no 'train' list"):
        H.split_sequences("full", "train")


def test_make_splits():
    sp = H.make_splits(["v_b", "i_a", "x_c", "v_a"])
    assert sp["full"]["test"] == ["i_a", "v_a", "v_b", "x_c"]
    assert sp["illum"]["test"] == ["i_a"] and sp["view"]["test"] == ["v_a", "v_b"]
    assert set(H.make_splits(["x_1"])) == {"full"}


# ============================================================================ legacy stream


def _stream(seed):
    rs = np.random.RandomState(seed)
    st = rs.get_state()
    return rs, st[1].copy(), np.array([st[2]], np.int64)


def test_mt_kernels_equal_randomstate():
    rs, key, pos = _stream(5)
    assert np.array_equal(K.mt_raw32(key, pos, 2000), rs.randint(0, 2**32, 2000, dtype=np.uint32).astype(np.int64))
    sizes = np.concatenate([[2, 2, 3, 5, 1024, 1025, 2048, 4097], np.random.default_rng(0).integers(2, 700, 300)])
    heads = K.mt_permutation_heads(key, pos, sizes.astype(np.int64))
    assert np.array_equal(heads, [rs.choice(np.arange(k), 2, replace=False) for k in sizes])
    highs = np.concatenate([[1, 1, 2, 3, 4096, 4097], np.random.default_rng(1).integers(1, 3000, 300)])
    assert np.array_equal(K.mt_bounded_draws(key, pos, highs.astype(np.int64)), [rs.randint(k) for k in highs])
    st = rs.get_state()  # the stream is left exactly where the slow calls leave it
    assert int(pos[0]) == st[2] and np.array_equal(key, st[1])


# ============================================================================ generators


def test_gen_verification_equals_original_call_sequence(tmp_path):
    test = ["v_b", "i_a", "v_c", "i_d", "v_e"]
    lengths = {"v_b": 2, "i_a": 3, "v_c": 700, "i_d": 1025, "v_e": 40}
    fast = H.gen_verification(lengths, {"name": "x", "test": test}, n_pos=3000)
    slow = slow_gen_verif(lengths, test, 3000)
    for lst in H.VERIFICATION_LISTS:
        assert list(fast[lst].columns) == list(H.VERIFICATION_COLUMNS)
        pd.testing.assert_frame_equal(fast[lst], slow[lst], check_dtype=False)
    pos, intra, inter = fast["pos"], fast["neg_intra"], fast["neg_inter"]
    assert pos.t1.between(0, 4).all() and pos.t2.between(0, 4).all()  # arange(5): <j>5 never used
    assert (pos.t1 != pos.t2).all() and (pos.idx1 == pos.idx2).all() and (pos.s1 == pos.s2).all()
    assert (intra.s1 == intra.s2).all() and (intra.idx1 != intra.idx2).all()
    assert (inter.s1 == pos.s1).all() and (inter.idx1 == pos.idx1).all() and (inter.s1 == inter.s2).any()
    paths = H.write_verification_tasks(fast, tmp_path, "x")
    assert paths["pos"].name == "verif_pos_split-x.csv"
    assert paths["pos"].read_text().splitlines()[0] == "s1,t1,idx1,s2,t2,idx2"
    back = H.read_verification_tasks(tmp_path, "x")
    pd.testing.assert_frame_equal(back["neg_inter"], fast["neg_inter"], check_dtype=False)
    gz = H.write_verification_tasks(fast, tmp_path / "gz", "x", compress=True)
    again = H.write_verification_tasks(fast, tmp_path / "gz2", "x", compress=True)
    assert gz["pos"].read_bytes() == again["pos"].read_bytes()  # deterministic gzip
    with pytest.raises(ConfigError, match="n_neg"):
        H.gen_verification(lengths, {"name": "x", "test": test}, n_pos=10, n_neg=20)
    with pytest.raises(DataError, match="at least 2"):
        H.gen_verification({**lengths, "v_b": 1}, {"name": "x", "test": test}, n_pos=10)


@pytest.mark.bad_input
def test_gen_retrieval_without_a_distractor_left_is_an_error_naming_the_setting():
    """Queries that take every patch the draw reaches leave an empty distractor list, which no
    retrieval can be scored on (and whose file reads back as a column of no type): an error
    naming retrieval_queries, not a task file that fails later."""
    lengths = {"i_a": 3, "v_b": 2}
    std = {s: np.full(n, 50.0) for s, n in lengths.items()}
    with pytest.raises(ConfigError, match=r"split 'y': the 5 queries took every patch .* hold 5 patches\); lower "
                                          r"patches.hpatches_benchmark.retrieval_queries"):
        H.gen_retrieval(lengths, {"name": "y", "test": ["i_a", "v_b"]}, std, n_queries=40, n_distractors=10)
    q, d = H.gen_retrieval(lengths, {"name": "y", "test": ["i_a", "v_b"]}, std, n_queries=3, n_distractors=10)
    assert len(q) == 3 and len(d) == 2


def test_gen_retrieval_equals_original_call_sequence(tmp_path):
    rng = np.random.default_rng(3)
    test = ["i_a", "v_b", "i_c", "v_d"]
    lengths = {"i_a": 9, "v_b": 30, "i_c": 4, "v_d": 17}
    strips = {}
    for s, n in lengths.items():
        flat = rng.random(n) < 0.3  # low-contrast patches (std <= 10) are filtered out
        img = np.where(flat[:, None, None], rng.integers(100, 110, (n, 65, 65)), rng.integers(0, 256, (n, 65, 65)))
        strips[s] = img.astype(np.uint8).reshape(65 * n, 65)
    std = {s: H.ref_patch_std(strips[s]) for s in test}
    q, d = H.gen_retrieval(lengths, {"name": "y", "test": test}, std, n_queries=12, n_distractors=25)
    sq, sd = slow_gen_retrieval(lengths, strips, test, 12, 25)
    pd.testing.assert_frame_equal(q, sq, check_dtype=False)
    pd.testing.assert_frame_equal(d, sd, check_dtype=False)
    q2, _ = H.gen_retrieval(lengths, {"name": "y", "test": test}, lambda s, i: std[s][i],
                            n_queries=12, n_distractors=25)
    pd.testing.assert_frame_equal(q2, q)
    paths = H.write_retrieval_tasks(q, d, tmp_path, "y")
    assert paths["queries"].read_text().splitlines()[0] == "s,idx"
    bq, bd = H.read_retrieval_tasks("y", tmp_path)
    pd.testing.assert_frame_equal(bd, d, check_dtype=False)


@pytest.mark.parametrize("name", ["a", "b", "c", "full", "illum", "view"])
def test_shipped_queries_follow_the_first_draw(name):
    """The shipped query sequences are an ordered subsequence of choice(split['test'], 4 * 10^4)."""
    q, d = H.read_retrieval_tasks(name)
    assert len(q) == 10_000 and len(d) == 20_000
    assert not q.duplicated().any() and not d.duplicated().any()
    assert not pd.MultiIndex.from_frame(d).isin(pd.MultiIndex.from_frame(q)).any()
    draws = np.random.RandomState(42).choice(H.split_sequences(name), 40_000)
    assert is_ordered_subsequence(q.s.to_numpy(), draws)
    other_seed = np.random.RandomState(43).choice(H.split_sequences(name), 40_000)
    assert not is_ordered_subsequence(q.s.to_numpy(), other_seed)  # the check can fail


def is_ordered_subsequence(items, draws) -> bool:
    where = {s: np.flatnonzero(draws == s) for s in set(draws)}
    at = 0  # greedy: each item takes the next draw of its value
    for s in items:
        pos = where.get(s, np.empty(0, int))
        nxt = np.searchsorted(pos, at)
        if nxt == pos.size:
            return False
        at = int(pos[nxt]) + 1
    return True


def test_shipped_files_were_made_with_1e4_queries():
    """Split a: the first two queries (idx 3, 2) are the first two bounded draws after
    choice(test, 40000) (masks 1023 / 2047, i.e. any N in 513..2048), not after 20000."""
    q, _ = H.read_retrieval_tasks("a")
    assert q.idx[:2].tolist() == [3, 2]
    for n_draws, expect in ((40_000, True), (20_000, False)):
        rs = np.random.RandomState(42)
        rs.choice(H.split_sequences("a"), n_draws)
        w = rs.randint(0, 2**32, 2, dtype=np.uint32).astype(np.int64)
        assert ((w & 1023).tolist() == [3, 2] and (w & 2047).tolist() == [3, 2]) == expect


# ============================================================================ metrics


def test_roc_auc_matches_sklearn_without_ties_and_documents_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    d = rng.random(300)
    lab = (rng.random(300) < 0.4).astype(int)
    assert H.roc_auc_trapezoid(d, lab) == pytest.approx(roc_auc_score(lab, -d), abs=1e-12)
    assert H.roc_auc_trapezoid(d, lab) == pytest.approx(ref_auc(d, lab), abs=1e-12)
    # hand-worked ties: keys of [negatives; positives]; in the stable order the negatives win ties
    d = np.array([1, 9, 16, 4, 0, 1, 4, 4, 0, 16], dtype=float)
    lab = np.array([0] * 5 + [1] * 5)
    # positives ranked before each negative: 0 (key 0), 1 (key 1), 2 (key 4), 4 (key 9), 4 (key 16)
    assert H.roc_auc_trapezoid(d, lab) == pytest.approx(11 / 25, abs=1e-15)
    # sklearn counts the 5 tied (positive, negative) pairs as 1/2 each: (11 + 2.5) / 25
    assert roc_auc_score(lab, -d) == pytest.approx(13.5 / 25, abs=1e-15)


def test_retrieval_ap_from_ranks_equals_ap_trapezoid():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(5, 40))
        d = rng.integers(0, 6, n).astype(float)  # ties
        lab = np.zeros(n, int)
        lab[:5] = 1
        ranks = np.flatnonzero(lab[np.argsort(d, kind="stable")] == 1) + 1
        assert H.retrieval_ap_from_ranks(ranks, 5) == pytest.approx(ap_trapezoid(d, lab), abs=1e-14)


# ============================================================================ verification


def _pairs(desc, n_pos, seed):
    lengths = {s: v["ref"].shape[0] for s, v in desc.items()}
    return H.gen_verification(lengths, H.make_splits(desc)["full"], n_pos=n_pos, seed=seed)


@pytest.mark.parametrize("kind", KINDS)
def test_verification_equals_brute_force(kind):
    desc = make_desc(10, kind=kind)
    pairs = _pairs(desc, 400, 7)
    res = H.evaluate_verification(desc, pairs, "full")
    ref = ref_verification(desc, pairs)
    got = {(r.jitter, r.negatives, r.protocol): r.value for r in res.details.itertuples()}
    assert got.keys() == ref.keys()
    for key in ref:
        assert got[key] == pytest.approx(ref[key], abs=1e-12), key
    summary = res.table[res.table.level == "summary"].set_index("protocol")["value"]
    assert summary["balanced"] == pytest.approx(100 * np.mean([v for k, v in ref.items() if k[2] == "balanced"]))
    again = H.evaluate_verification(desc, pairs, "full")
    pd.testing.assert_frame_equal(again.details, res.details)  # bit-identical


def _hand_verification():
    """The hand-worked verification case: descriptors and the three pair lists (frames without a source)."""
    desc = {"i_a": {t: np.array([[0], [1], [2], [4]], np.float32) for t in PATCH_TYPES},
            "v_b": {t: np.array([[5], [6], [7], [8], [9]], np.float32) for t in PATCH_TYPES}}

    def lst(rows):
        return pd.DataFrame(rows, columns=list(H.VERIFICATION_COLUMNS))

    pairs = {
        "pos": lst([("i_a", 0, 0, "i_a", 0, 1), ("i_a", 0, 0, "i_a", 0, 2), ("i_a", 0, 2, "i_a", 0, 3),
                    ("i_a", 0, 1, "i_a", 0, 1), ("i_a", 0, 0, "i_a", 0, 3)]),
        "neg_intra": lst([("i_a", 0, 1, "i_a", 0, 2), ("i_a", 0, 1, "i_a", 0, 3), ("i_a", 0, 0, "i_a", 0, 3),
                          ("i_a", 0, 0, "i_a", 0, 2), ("i_a", 0, 3, "i_a", 0, 3)]),
        "neg_inter": lst([("i_a", 0, 0, "v_b", 0, i) for i in range(5)]),
    }
    return desc, pairs


def test_verification_hand_worked():
    # i_a ref = [0, 1, 2, 4], v_b ref = [5..9], D = 1; all pairs ref-ref (t = 0), so every jitter agrees;
    # keys: pos [1, 4, 4, 0, 16], intra [1, 9, 16, 4, 0], inter [25, 36, 49, 64, 81]
    desc, pairs = _hand_verification()
    res = H.evaluate_verification(desc, pairs, "hand")
    assert set(res.table["split"]) == {"hand"}  # the split name reaches the table
    got = {(r.jitter, r.negatives, r.protocol): r.value for r in res.details.itertuples()}
    for j in JITTERS:
        # intra, balanced: stable order [N P N P N P P N N P] -> 11 of 25 pairs won (see the ROC test)
        assert got[(j, "intra", "balanced")] == pytest.approx(11 / 25, abs=1e-15)
        # intra, imbalanced: 5 negatives + int(0.2 * 5) = 1 positive (key 1): order N(0) N(1) P(1):
        # area = 1 * (precision(2) + precision(3)) / 2 = (1e-10/2 + 1/3) / 2
        assert got[(j, "intra", "imbalanced")] == pytest.approx((0.5e-10 + 1 / 3) / 2, abs=1e-15)
        # inter: every positive (<= 16) before every negative (>= 25): AUC 1, AP 1
        assert got[(j, "inter", "balanced")] == 1.0 and got[(j, "inter", "imbalanced")] == 1.0
    table = res.table.set_index(["level", "jitter", "negatives", "protocol"])["value"]
    assert table[("summary", "all", "all", "balanced")] == pytest.approx(100 * (11 / 25 + 1) / 2)


# ============================================================================ matching


@pytest.mark.parametrize("kind", KINDS)
def test_matching_equals_brute_force(kind):
    desc = make_desc(20, kind=kind)
    res = H.evaluate_matching(desc, list(desc), "full")
    ref = ref_matching(desc, list(desc))
    assert len(res.details) == len(ref) == len(desc) * 15
    for r in res.details.itertuples():
        ap, sr = ref[(r.sequence, r.jitter, r.k)]
        assert r.ap == pytest.approx(ap, abs=1e-12) and r.success_rate == sr
    # aggregation as results.py: per (seq, jitter) mean over k, per type mean over seqs, x100
    per = {}
    for (s, j, k), (ap, _) in ref.items():
        per.setdefault((s[0], j), {}).setdefault(s, []).append(ap)
    table = res.table.set_index(["level", "jitter", "seq_type"])["value"]
    avg_type = {}
    for st in "iv":
        cases = [100 * np.mean([np.mean(v) for v in per[(st, j)].values()]) for j in JITTERS]
        for j, v in zip(JITTERS, cases):
            assert table[("case", j, st)] == pytest.approx(v, abs=1e-9)
        avg_type[st] = np.mean(cases)
    summary = res.table[res.table.level == "summary"].set_index(["seq_type", "metric"])["value"]
    assert summary[("all", "map_mean_of_types")] == pytest.approx((avg_type["i"] + avg_type["v"]) / 2, abs=1e-9)
    # headline (hpatches_results.py): every sequence weighs the same
    printed = [100 * np.mean([ap for (s, jj, k), (ap, _) in ref.items() if jj == j]) for j in JITTERS]
    assert summary[("all", "map")] == pytest.approx(np.mean(printed), abs=1e-9)


def test_matching_hand_worked():
    ref = np.array([[0], [10], [20]], np.float32)
    strips = {"ref": ref}
    for j in JITTERS:
        # e1 = [1, 14, 12]: nn = 0 (key 1, right), 2 (key 4, wrong), 1 (key 36, wrong):
        #     sorted [P, N, N] -> AP = (1/3) * (1 + 1) / 2 = 1/3, success 1/3
        strips[f"{j}1"] = np.array([[1], [14], [12]], np.float32)
        # e2 = [100, 12, -2]: nn = 2 (key 4, wrong), 1 (key 4, right), 1 (key 64, wrong): the tie
        #     keeps ref order [N, P, N] -> AP = (1/3) * (1e-10 + 1/2) / 2, success 1/3
        strips[f"{j}2"] = np.array([[100], [12], [-2]], np.float32)
        for k in (3, 4, 5):  # copies of ref: all right, AP 1
            strips[f"{j}{k}"] = ref.copy()
    res = H.evaluate_matching({"i_a": strips}, ["i_a"], "hand")
    assert set(res.table["split"]) == {"hand"}  # the split name reaches the table
    d = res.details.set_index(["jitter", "k"])
    for j in JITTERS:
        assert d.loc[(j, 1), "ap"] == pytest.approx(1 / 3, abs=1e-15)
        assert d.loc[(j, 2), "ap"] == pytest.approx((1e-10 + 0.5) / 6, abs=1e-15)
        assert d.loc[(j, 1), "success_rate"] == pytest.approx(1 / 3)
        assert d.loc[(j, 3), "ap"] == 1.0
    expect = 100 * (1 / 3 + (1e-10 + 0.5) / 6 + 3) / 5
    table = res.table.set_index(["level", "jitter", "seq_type", "metric"])["value"]
    assert table[("case", "e", "i", "map")] == pytest.approx(expect)
    assert table[("case", "e", "all", "map")] == pytest.approx(expect)
    assert table[("summary", "all", "all", "map")] == pytest.approx(expect)  # only i_ sequences
    assert table[("summary", "all", "all", "map_mean_of_types")] == pytest.approx(expect)  # = avg_i


# ============================================================================ retrieval


def _retrieval_task(desc, nq, nd, seed):
    rng = np.random.default_rng(seed)
    seqs = list(desc)
    qs = rng.choice(seqs, nq)
    q = pd.DataFrame({"s": qs, "idx": [int(rng.integers(desc[s]["ref"].shape[0])) for s in qs]}).drop_duplicates()
    ds = rng.choice(seqs, nd)
    d = pd.DataFrame({"s": ds, "idx": [int(rng.integers(desc[s]["ref"].shape[0])) for s in ds]})
    return q.reset_index(drop=True), d


@pytest.mark.parametrize("kind", KINDS)
def test_retrieval_equals_brute_force(kind):
    desc = make_desc(30, n_seq=5, kind=kind)
    q, d = _retrieval_task(desc, 30, 60, 1)
    pools = (5, 6, 12, 30, 47, 100)
    res = H.evaluate_retrieval(desc, q, d, "x", pool_sizes=pools, chunk_mb=0.002)  # several screen blocks
    ref = ref_retrieval(desc, q, d, pools)
    assert len(res.details) == len(ref)
    for r in res.details.itertuples():
        assert r.ap == pytest.approx(ref[(r.query, r.jitter, r.pool_size)], abs=1e-12)
    table = res.table.set_index(["level", "jitter", "metric"])["value"]
    for j in JITTERS:
        assert table[("case", j, "map_mean_over_pools")] == pytest.approx(
            100 * np.mean([np.mean([ref[(i, j, k)] for i in range(len(q))]) for k in pools]), abs=1e-9)
        assert table[("case", j, "map")] == pytest.approx(100 * np.mean([ref[(i, j, 100)] for i in range(len(q))]),
                                                          abs=1e-9)
    again = H.evaluate_retrieval(desc, q, d, "x", pool_sizes=pools)  # one screen block
    pd.testing.assert_frame_equal(again.details, res.details)  # bit-identical


def test_evaluate_hpbench_on_generated_tasks():
    desc = make_desc(50, n_seq=4)
    lengths = {s: v["ref"].shape[0] for s, v in desc.items()}
    split = H.make_splits(desc)["full"]
    pairs = H.gen_verification(lengths, split, n_pos=200)
    std = {s: np.full(n, 20.0) for s, n in lengths.items()}
    task = H.gen_retrieval(lengths, split, std, n_queries=10, n_distractors=20)
    out = H.evaluate_hpbench(desc, split, pairs, task)
    table = pd.concat([r.table for r in out.values()])
    assert list(table.columns) == list(H.TABLE_COLUMNS)
    assert set(table[table.level == "summary"].task) == {"verification", "matching", "retrieval"}
    pd.testing.assert_frame_equal(out["matching"].details, H.evaluate_matching(desc, split["test"], "full").details)
    with pytest.raises(ConfigError, match="gen_verification"):
        H.evaluate_hpbench(desc, split, None, task)


def test_retrieval_counts_exact_near_ties():
    """Distractors within a few ulps of a positive (screen band re-evaluated) and exact copies."""
    rng = np.random.default_rng(4)
    q = rng.standard_normal((40, 24)).astype(np.float32)
    pos = q + rng.standard_normal((40, 24)).astype(np.float32) * 0.5
    d = rng.standard_normal((300, 24)).astype(np.float32)
    src = rng.integers(0, 40, 300)
    near = rng.random(300) < 0.5
    d[near] = pos[src[near]]  # exact copies of a positive: equal key, not counted (strict)
    wiggle = rng.random(300) < 0.5
    d[near & wiggle] = np.nextafter(d[near & wiggle], np.float32(np.inf))  # keys a few ulps away
    qseq = rng.integers(0, 5, 40)
    dseq = rng.integers(0, 5, 300)
    pos_keys = ref_keys(q, pos)[:, None].copy()
    cuts = np.array([0, 7, 100, 150, 400], np.int64)
    got = H.retrieval_counts(q, d, qseq, dseq, pos_keys, cuts, chunk_mb=0.01)
    D = ref_matrix(q, d)
    for i in range(40):
        keys = D[i][dseq != qseq[i]]
        for c, m in enumerate(cuts):
            assert got[i, c, 0] == np.count_nonzero(keys[:m] < pos_keys[i, 0])
    direct = np.zeros_like(got)
    K.retrieval_counts_direct_l2(q, d, dseq.astype(np.int64), qseq.astype(np.int64), pos_keys, cuts, direct)
    assert np.array_equal(direct, got)


def _hand_retrieval_desc():
    """The descriptors of the hand-worked retrieval case: query i_a 0 = 0, positives [1, 3, 3, 5, 2]."""
    ia = {t: np.array([[0], [1]], np.float32) for t in PATCH_TYPES}
    for j in JITTERS:
        for k, v in zip(range(1, 6), (1, 3, 3, 5, 2)):
            ia[f"{j}{k}"] = np.array([[v], [0]], np.float32)
    vb = {t: np.array([[0], [2], [3], [4], [10]], np.float32) for t in PATCH_TYPES}
    return {"i_a": ia, "v_b": vb}


def test_retrieval_hand_worked():
    # i_a: ref[0] = 0 is the query; positives <j>1..5 at idx 0 = [1, 3, 3, 5, 2] -> keys [1, 9, 9, 25, 4]
    # distractors (file order): v_b 0 (key 0), i_a 1 (own sequence: masked), v_b 1..4 (keys 4, 9, 16, 100)
    q = pd.DataFrame({"s": ["i_a"], "idx": [0]})
    d = pd.DataFrame({"s": ["v_b", "i_a", "v_b", "v_b", "v_b", "v_b"], "idx": [0, 1, 1, 2, 3, 4]})
    res = H.evaluate_retrieval(_hand_retrieval_desc(), q, d, "hand", pool_sizes=(7, 100))
    assert set(res.table["split"]) == {"hand"}  # the split name reaches the table
    # pool 100: order D0 P(1) P(4) D(4) P(9) P(9) D(9) D(16) P(25) D(100): ranks 2, 3, 5, 6, 9
    # AP = 0.2 * sum of (precision before + precision at) / 2 over the positives
    full = 0.2 * ((1e-10 + 1 / 2) / 2 + (1 / 2 + 2 / 3) / 2 + (2 / 4 + 3 / 5) / 2 + (3 / 5 + 4 / 6) / 2
                  + (4 / 8 + 5 / 9) / 2)
    # pool 7 = 5 positives + the first 2 masked distractors (keys 0, 4): ranks 2, 3, 5, 6, 7
    short = 0.2 * ((1e-10 + 1 / 2) / 2 + (1 / 2 + 2 / 3) / 2 + (2 / 4 + 3 / 5) / 2 + (3 / 5 + 4 / 6) / 2
                   + (4 / 6 + 5 / 7) / 2)
    ap = res.details.set_index(["jitter", "pool_size"])["ap"]
    for j in JITTERS:
        assert ap[(j, 100)] == pytest.approx(full, abs=1e-15)
        assert ap[(j, 7)] == pytest.approx(short, abs=1e-15)
    table = res.table.set_index(["level", "jitter", "metric"])["value"]
    assert table[("summary", "all", "map")] == pytest.approx(100 * full)  # the largest pool, as printed
    assert table[("summary", "all", "map_mean_over_pools")] == pytest.approx(100 * (full + short) / 2)


# ============================================================================ headline = printed numbers


def printed_matching(per_sequence: pd.DataFrame) -> tuple[dict, float]:
    """What hpatches-benchmark's ``hpatches_results.py`` (master) prints for matching, rewritten
    here from its definition: its per-sequence results as nested dicts res[seq][jitter][k]; per
    jitter the sum of every AP over the sequences and k, divided by the number of entries of one
    jitter (sequences x 5); the 'mean' column = the mean of the three jitters. Fractions."""
    res: dict = {}
    for r in per_sequence.itertuples():
        res.setdefault(r.sequence, {}).setdefault(r.jitter, {})[r.k] = {"ap": r.ap}
    sums = {j: 0.0 for j in JITTERS}
    count = 0
    for seq in res:
        for j in JITTERS:
            for k in range(1, 6):
                sums[j] += res[seq][j][k]["ap"]
                count += 1
    per_j = {j: sums[j] / (count / 3.0) for j in JITTERS}
    return per_j, sum(per_j.values()) / 3.0


def printed_retrieval(per_query: pd.DataFrame) -> tuple[dict, list]:
    """``hpatches_results.py``'s retrieval table, rewritten from its definition: per jitter and
    pool size the sum of the queries' APs / #queries; the 'mean' row = per pool size the mean over
    the jitters of the table cast to float32. Returns ({jitter: {pool: value}}, mean row by pool)."""
    res: dict = {}
    for r in per_query.itertuples():
        res.setdefault(r.query, {}).setdefault(r.jitter, {})[r.pool_size] = {"ap": r.ap}
    n_q = float(len(res))
    first = next(iter(res.values()))
    table = {j: {k: 0.0 for k in first[j]} for j in JITTERS}
    for q in res:
        for j in JITTERS:
            for k in table[j]:
                table[j][k] += res[q][j][k]["ap"]
    rows = [[table[j][k] / n_q for k in sorted(table[j])] for j in JITTERS]
    for j, row in zip(JITTERS, rows):
        table[j] = dict(zip(sorted(table[j]), row))
    mean_row = list(np.mean(np.array(rows).astype(np.float32), axis=0))
    return table, mean_row


def _matching_details(aps: dict) -> pd.DataFrame:
    rows = [(s, s.split("_")[0], j, k, 10, v[(j, k)], 0.5) for s, v in aps.items() for j in JITTERS for k in range(1, 6)]
    return pd.DataFrame(rows, columns=["sequence", "seq_type", "jitter", "k", "n_patches", "ap", "success_rate"])


def test_matching_headline_is_the_printed_mean_over_sequences():
    """1 i_ and 3 v_ sequences (unequal groups): the headline is hpatches_results.py's mean over
    all sequences (45), not the mean of the i_ and v_ means (60, kept as map_mean_of_types)."""
    flat = {"i_a": 0.9, "v_b": 0.3, "v_c": 0.3, "v_d": 0.3}
    det = _matching_details({s: {(j, k): v for j in JITTERS for k in range(1, 6)} for s, v in flat.items()})
    summary = H.summarise_matching(det, "hand")
    summary = summary[summary.level == "summary"].set_index(["seq_type", "metric"])["value"]
    assert summary[("all", "map")] == pytest.approx(100 * (0.9 + 3 * 0.3) / 4)  # 45
    assert summary[("all", "map_mean_of_types")] == pytest.approx(100 * (0.9 + 0.3) / 2)  # 60
    assert summary[("i", "map")] == pytest.approx(90) and summary[("v", "map")] == pytest.approx(30)
    # random APs varying with jitter and k, 2 i_ and 5 v_ sequences: equal to the printed formula
    rng = np.random.default_rng(7)
    names = ["i_x", "i_y", "v_p", "v_q", "v_r", "v_s", "v_t"]
    det = _matching_details({s: {(j, k): float(rng.random()) for j in JITTERS for k in range(1, 6)} for s in names})
    table = H.summarise_matching(det, "full")
    per_j, mean = printed_matching(det)
    t = table.set_index(["level", "jitter", "seq_type", "metric"])["value"]
    assert t[("summary", "all", "all", "map")] == pytest.approx(100 * mean, rel=1e-14)
    for j in JITTERS:
        assert t[("case", j, "all", "map")] == pytest.approx(100 * per_j[j], rel=1e-14)
    assert abs(t[("summary", "all", "all", "map")] - t[("summary", "all", "all", "map_mean_of_types")]) > 0.1
    # the documented size of the change: (n_i - n_v) / (2 (n_i + n_v)) x (avg_i - avg_v)
    gap = t[("summary", "all", "i", "map")] - t[("summary", "all", "v", "map")]
    assert t[("summary", "all", "all", "map")] - t[("summary", "all", "all", "map_mean_of_types")] == pytest.approx(
        (2 - 5) / (2 * 7) * gap, abs=1e-9)


def _retrieval_details(ap) -> pd.DataFrame:
    """ap(query, jitter, pool) -> per-query details of 3 queries at pool sizes 100 .. 20000."""
    rows = [(q, "v_a", q, j, k, ap(q, j, k)) for q in range(3) for j in JITTERS for k in H.POOL_SIZES]
    return pd.DataFrame(rows, columns=["query", "sequence", "idx", "jitter", "pool_size", "ap"])


def test_retrieval_headline_is_the_printed_mean_at_the_largest_pool():
    # AP 1 at every pool below 20000 and 0.3 there: printed mean at 20000 = 30; the mean over the
    # 7 pool sizes (the former headline, kept as map_mean_over_pools) = (6 + 0.3) / 7 x 100 = 90
    det = _retrieval_details(lambda q, j, k: 0.3 if k == 20000 else 1.0)
    t = H.summarise_retrieval(det, "hand").set_index(["level", "jitter", "metric"])
    assert t.loc[("summary", "all", "map"), "value"] == pytest.approx(30)
    assert t.loc[("summary", "all", "map"), "pool_size"] == 20000
    assert t.loc[("summary", "all", "map_mean_over_pools"), "value"] == pytest.approx(100 * 6.3 / 7)
    rng = np.random.default_rng(3)
    vals = {(q, j, k): float(rng.random()) for q in range(3) for j in JITTERS for k in H.POOL_SIZES}
    det = _retrieval_details(lambda q, j, k: vals[(q, j, k)])
    table = H.summarise_retrieval(det, "full")
    cells, mean_row = printed_retrieval(det)
    t = table.set_index(["level", "jitter", "pool_size", "metric"])["value"]
    for j in JITTERS:
        for k in H.POOL_SIZES:
            assert t[("detail", j, k, "map")] == pytest.approx(100 * cells[j][k], rel=1e-14)
        assert t[("case", j, 20000, "map")] == pytest.approx(100 * cells[j][20000], rel=1e-14)
    for k, v in zip(H.POOL_SIZES, mean_row):
        assert t[("detail", "all", k, "map")] == pytest.approx(100 * v, rel=1e-6)  # printed in float32
    assert t[("summary", "all", 20000, "map")] == pytest.approx(100 * mean_row[-1], rel=1e-6)


@pytest.mark.bad_input
def test_retrieval_jitters_at_different_pool_sizes_are_refused():
    det = _retrieval_details(lambda q, j, k: 0.5)
    det = det[~((det.jitter == "t") & (det.pool_size == 500))]
    with pytest.raises(DataError, match="different pool sizes"):
        H.summarise_retrieval(det, "x")


def test_report_headline_columns_are_the_printed_numbers():
    """report/patches.hpbench_table: matching_map / retrieval_map are the printed headlines, the
    former definitions sit under their own names."""
    from descbench.report.patches import hpbench_table

    m = _matching_details({s: {(j, k): v for j in JITTERS for k in range(1, 6)}
                           for s, v in {"i_a": 0.9, "v_b": 0.3, "v_c": 0.3, "v_d": 0.3}.items()})
    r = _retrieval_details(lambda q, j, k: 0.3 if k == 20000 else 1.0)
    tidy = pd.concat([H.summarise_matching(m, "full"), H.summarise_retrieval(r, "full")], ignore_index=True)
    row = hpbench_table({"d": tidy}).iloc[0]
    assert row.matching_map == pytest.approx(45) and row.matching_map_mean_of_types == pytest.approx(60)
    assert row.matching_map_i == pytest.approx(90) and row.matching_map_v_easy == pytest.approx(30)
    assert row.matching_map_easy == pytest.approx(45)
    assert row.retrieval_map == pytest.approx(30) and row.retrieval_map_mean_over_pools == pytest.approx(100 * 6.3 / 7)
    assert row.retrieval_map_easy == pytest.approx(30) and row.retrieval_map_pool100 == pytest.approx(100)
    assert row.retrieval_map_pool20000 == pytest.approx(30)
    cols = list(hpbench_table({"d": tidy}).columns)
    assert cols[:4] == ["descriptor", "split", "matching_map", "retrieval_map"]
    # a table evaluated before the new definitions (no named former headline) is refused, not relabelled
    old = tidy[tidy.metric != "map_mean_over_pools"]
    with pytest.raises(DataError, match=r"retrieval rows of descriptor 'd' \(split 'full'\).*forcerun patch_evaluate"):
        hpbench_table({"d": old})


# ============================================================================ bad input


@pytest.mark.bad_input
def test_missing_sequences_name_the_task_file(tmp_path):
    desc = make_desc(40)
    H.write_verification_tasks(_pairs(desc, 50, 1), tmp_path, "x")
    pairs = H.read_verification_tasks(tmp_path, "x")
    gone = sorted(desc)[0]
    partial = {s: v for s, v in desc.items() if s != gone}
    with pytest.raises(DataError, match=rf"verif_pos_split-x\.csv.*{gone}"):
        H.evaluate_verification(partial, pairs, "x")
    q, d = H.read_retrieval_tasks("a")
    with pytest.raises(DataError, match=r"retr_queries_split-a\.csv\.gz.*absent from the descriptors"):
        H.evaluate_retrieval(desc, q, d, "a")


@pytest.mark.bad_input
def test_index_out_of_range_names_file_row_and_n(tmp_path):
    desc = make_desc(41)
    paths = H.write_verification_tasks(_pairs(desc, 50, 1), tmp_path, "x")
    df = pd.read_csv(paths["neg_inter"])
    n = desc[df.s2[7]]["ref"].shape[0]
    df.loc[7, "idx2"] = n
    df.to_csv(paths["neg_inter"], index=False)
    msg = rf"verif_neg_inter_split-x\.csv: row 7 \(line 9\) has idx2={n} .* has {n} patches"
    with pytest.raises(DataError, match=msg):
        H.evaluate_verification(desc, H.read_verification_tasks(tmp_path, "x"), "x")
    q, d = _retrieval_task(desc, 5, 10, 0)
    paths = H.write_retrieval_tasks(q, d, tmp_path, "y")
    d.loc[3, "idx"] = -1
    d.to_csv(paths["distractors"], index=False)
    with pytest.raises(DataError, match=r"retr_distractors_split-y\.csv: row 3 .*idx=-1"):
        H.evaluate_retrieval(desc, *H.read_retrieval_tasks("y", tmp_path), "y")


@pytest.mark.bad_input
def test_descriptor_mismatch_and_nan():
    desc = make_desc(42)
    s0, s1 = sorted(desc)[:2]
    bad = {**desc, s1: {t: a[:, :4].copy() for t, a in desc[s1].items()}}
    with pytest.raises(DataError, match="descriptor mismatch"):
        H.evaluate_matching(bad, list(bad))
    bad = {**desc, s1: {t: a.astype(np.float64) for t, a in desc[s1].items()}}
    with pytest.raises(DataError, match="float64"):
        H.evaluate_matching(bad, list(bad))
    nan = {**desc, s0: {t: a.copy() for t, a in desc[s0].items()}}
    nan[s0]["h3"][2, 1] = np.nan
    with pytest.raises(DataError, match=rf"{s0}\.h3 contain NaN.*row 2"):
        H.evaluate_matching(nan, list(nan))
    short = {**desc, s0: {**desc[s0], "t5": desc[s0]["t5"][:-1]}}
    with pytest.raises(DataError, match="same N"):
        H.evaluate_matching(short, list(short))
    with pytest.raises(DataError, match="read_\\*_tasks|columns"):
        H.evaluate_retrieval(desc, pd.DataFrame({"seq": []}), pd.DataFrame({"s": [], "idx": []}))


# ============================================================================ whole tables and messages

_ABSENT = ("; describe these sequences, or generate tasks for the described sequences "
           "(gen_verification / gen_retrieval on make_splits(...))")


def whole(msg: str) -> str:
    """pytest.raises pattern for exactly this message (anchored: nothing before or after)."""
    return f"^{re.escape(msg)}$"


_REGEN_IDX = "; the task file was made for other patches - regenerate it for this patch dataset"


def _table_frame(rows: list[dict]) -> pd.DataFrame:
    """The tidy table written out from its definition: every TABLE_COLUMNS entry, None where a
    row does not set it, pool_size as nullable Int64."""
    df = pd.DataFrame([{c: r.get(c) for c in H.TABLE_COLUMNS} for r in rows], columns=list(H.TABLE_COLUMNS))
    df["pool_size"] = df["pool_size"].astype("Int64")
    return df


def test_summarise_verification_whole_table_is_cases_x100_then_protocol_means():
    # 12 distinct fractions; the summary of each protocol is the plain mean of its 6 cases x100
    cases = [(j, neg, p) for j in JITTERS for neg in ("intra", "inter") for p in ("balanced", "imbalanced")]
    vals = {c: (i + 1) / 16 for i, c in enumerate(cases)}
    metric = {"balanced": "auc", "imbalanced": "ap"}
    details = pd.DataFrame([(j, neg, p, metric[p], vals[(j, neg, p)], 5, 5) for j, neg, p in cases],
                           columns=["jitter", "negatives", "protocol", "metric", "value", "n_pos", "n_neg"])
    rows = [{"task": "verification", "split": "custom", "level": "case", "jitter": j, "negatives": neg,
             "protocol": p, "metric": metric[p], "value": 100 * vals[(j, neg, p)]} for j, neg, p in cases]
    for p in ("balanced", "imbalanced"):
        mean = 100 * sum(v for c, v in vals.items() if c[2] == p) / 6
        rows.append({"task": "verification", "split": "custom", "level": "summary", "jitter": "all",
                     "negatives": "all", "protocol": p, "metric": metric[p], "value": mean})
    pd.testing.assert_frame_equal(H.summarise_verification(details), _table_frame(rows), rtol=1e-13)


def test_summarise_retrieval_whole_table_with_one_jitter():
    # jitter h only, 2 queries, pools 5 and 100: cells h@5 = (0.5 + 1) / 2 = 0.75, h@100 = (0.25 + 0.75) / 2
    # = 0.5; the 'all' rows equal them (one jitter); mean over pools = (75 + 50) / 2 = 62.5
    det = pd.DataFrame([(0, "v_a", 0, "h", 5, 0.5), (0, "v_a", 0, "h", 100, 0.25),
                        (1, "v_a", 1, "h", 5, 1.0), (1, "v_a", 1, "h", 100, 0.75)],
                       columns=["query", "sequence", "idx", "jitter", "pool_size", "ap"])
    base = {"task": "retrieval", "split": "custom"}
    rows = [{**base, "level": "detail", "jitter": "h", "pool_size": 5, "metric": "map", "value": 75.0},
            {**base, "level": "detail", "jitter": "h", "pool_size": 100, "metric": "map", "value": 50.0},
            {**base, "level": "detail", "jitter": "all", "pool_size": 5, "metric": "map", "value": 75.0},
            {**base, "level": "detail", "jitter": "all", "pool_size": 100, "metric": "map", "value": 50.0},
            {**base, "level": "case", "jitter": "h", "pool_size": 100, "metric": "map", "value": 50.0},
            {**base, "level": "summary", "jitter": "all", "pool_size": 100, "metric": "map", "value": 50.0},
            {**base, "level": "case", "jitter": "h", "metric": "map_mean_over_pools", "value": 62.5},
            {**base, "level": "summary", "jitter": "all", "metric": "map_mean_over_pools", "value": 62.5}]
    pd.testing.assert_frame_equal(H.summarise_retrieval(det), _table_frame(rows))
    # no rows at all: one summary row, map NaN
    empty = H.summarise_retrieval(det.iloc[:0])
    pd.testing.assert_frame_equal(empty, _table_frame([{**base, "level": "summary", "jitter": "all", "metric": "map",
                                                         "value": float("nan")}]))


@pytest.mark.bad_input
def test_summarise_retrieval_pool_mismatch_whole_message():
    det = pd.DataFrame([(0, "v_a", 0, "e", 5, 0.5), (0, "v_a", 0, "e", 100, 0.5), (0, "v_a", 0, "t", 5, 0.5)],
                       columns=["query", "sequence", "idx", "jitter", "pool_size", "ap"])
    msg = ("retrieval details: the jitters were evaluated at different pool sizes {'e': [5, 100], 't': [5]}; "
           "evaluate every jitter at the same pool sizes")
    with pytest.raises(DataError, match=whole(msg)):
        H.summarise_retrieval(det)


def test_verification_details_whole_frame_and_default_split():
    desc, pairs = _hand_verification()
    res = H.evaluate_verification(desc, pairs)
    # values worked out in test_verification_hand_worked; n_pos = 5 positives (balanced) and
    # int(5 * 0.2) = 1 kept positive (imbalanced); 5 negatives in both lists
    value = {("intra", "balanced"): 11 / 25, ("intra", "imbalanced"): (0.5e-10 + 1 / 3) / 2,
             ("inter", "balanced"): 1.0, ("inter", "imbalanced"): 1.0}
    rows = []
    for j in JITTERS:
        for neg in ("intra", "inter"):
            rows.append((j, neg, "balanced", "auc", value[(neg, "balanced")], 5, 5))
            rows.append((j, neg, "imbalanced", "ap", value[(neg, "imbalanced")], 1, 5))
    expect = pd.DataFrame(rows, columns=["jitter", "negatives", "protocol", "metric", "value", "n_pos", "n_neg"])
    pd.testing.assert_frame_equal(res.details, expect, rtol=1e-13)
    assert (res.task, res.split) == ("verification", "custom")
    assert set(res.table["task"]) == {"verification"} and set(res.table["split"]) == {"custom"}


def test_verification_accepts_type_index_5():
    """t = 5 (<jitter>5) is a valid type index (0 .. 5): evaluated like any other, as brute force."""
    desc, pairs = _hand_verification()
    pairs = {k: v.copy() for k, v in pairs.items()}
    for lst in pairs.values():
        lst.loc[0, "t1"] = 5
    res = H.evaluate_verification(desc, pairs, "hand")
    ref = ref_verification(desc, pairs)
    for r in res.details.itertuples():
        assert r.value == pytest.approx(ref[(r.jitter, r.negatives, r.protocol)], abs=1e-15)


@pytest.mark.bad_input
def test_verification_list_errors_whole_messages():
    desc, pairs = _hand_verification()
    src = "verification list 'pos'"
    with pytest.raises(ConfigError, match=whole(
            "verification pairs lack the list 'neg_inter'; expected ['pos', 'neg_intra', 'neg_inter']")):
        H.evaluate_verification(desc, {k: v for k, v in pairs.items() if k != "neg_inter"})
    cols = "['s1', 't1', 'idx1', 's2', 't2', 'idx2']"
    with pytest.raises(DataError, match=whole(
            f"task pos must be a table with columns {cols}, got dict; read it with read_*_tasks or make it with gen_*")):
        H.evaluate_verification(desc, {**pairs, "pos": {"s1": []}})
    with pytest.raises(DataError, match=whole(
            f"task {src} must be a table with columns {cols}, got ['s1', 't1']; read it with read_*_tasks "
            "or make it with gen_*")):
        H.evaluate_verification(desc, {**pairs, "pos": pairs["pos"][["s1", "t1"]]})
    with pytest.raises(DataError, match=whole(
            "task verification list 'neg_intra' is empty; regenerate the verification lists")):
        H.evaluate_verification(desc, {**pairs, "neg_intra": pairs["neg_intra"].iloc[:0]})
    with pytest.raises(DataError, match=whole(f"task {src}: column 't1' must hold integers, got dtype float64")):
        H.evaluate_verification(desc, {**pairs, "pos": pairs["pos"].astype({"t1": float})})
    bad = pairs["pos"].copy()
    bad.loc[[1, 2], "t2"] = 6  # the first bad row (1, file line 3) is named
    with pytest.raises(DataError, match=whole(
            f"task {src}: row 1 (line 3) has t2=6; type indices are 0 (ref) .. 5 (<jitter>5) - regenerate the file")):
        H.evaluate_verification(desc, {**pairs, "pos": bad})
    bad = pairs["pos"].copy()
    bad.loc[0, "idx1"] = 4  # i_a has 4 patches
    with pytest.raises(DataError, match=whole(
            f"task {src}: row 0 (line 2) has idx1=4 but sequence 'i_a' has 4 patches (valid 0..3){_REGEN_IDX}")):
        H.evaluate_verification(desc, {**pairs, "pos": bad})
    inter = pairs["neg_inter"].copy()
    inter.loc[2, "s2"] = "x_z"  # absent only from the third list: that list is named
    with pytest.raises(DataError, match=whole(
            f"task verification list 'neg_inter' references 1 sequences absent from the descriptors: x_z{_ABSENT}")):
        H.evaluate_verification(desc, {**pairs, "neg_inter": inter})


def test_retrieval_details_whole_frame_with_default_pools():
    desc = _hand_retrieval_desc()
    q = pd.DataFrame({"s": ["i_a"], "idx": [0]})
    d = pd.DataFrame({"s": ["v_b", "i_a", "v_b", "v_b", "v_b", "v_b"], "idx": [0, 1, 1, 2, 3, 4]})
    res = H.evaluate_retrieval(desc, q, d)
    # every default pool (>= 100) holds the whole list of 10: ranks 2, 3, 5, 6, 9 (test_retrieval_hand_worked)
    full = 0.2 * ((1e-10 + 1 / 2) / 2 + (1 / 2 + 2 / 3) / 2 + (2 / 4 + 3 / 5) / 2 + (3 / 5 + 4 / 6) / 2
                  + (4 / 8 + 5 / 9) / 2)
    n = len(H.POOL_SIZES)
    expect = pd.DataFrame({"query": [0] * 3 * n, "sequence": ["i_a"] * 3 * n, "idx": [0] * 3 * n,
                           "jitter": [j for j in JITTERS for _ in range(n)], "pool_size": list(H.POOL_SIZES) * 3,
                           "ap": [full] * 3 * n})
    pd.testing.assert_frame_equal(res.details, expect, check_dtype=False, rtol=1e-13)
    assert (res.task, res.split) == ("retrieval", "custom")
    assert set(res.table["task"]) == {"retrieval"} and set(res.table["split"]) == {"custom"}


@pytest.mark.bad_input
def test_retrieval_task_errors_whole_messages():
    desc = _hand_retrieval_desc()
    q = pd.DataFrame({"s": ["i_a"], "idx": [0]})
    d = pd.DataFrame({"s": ["v_b", "v_b"], "idx": [0, 1]})
    tail = "; read it with read_*_tasks or make it with gen_*"
    for kind, args in (("queries", (q[["s"]], d)), ("distractors", (q, d[["s"]]))):
        with pytest.raises(DataError, match=whole(
                f"task retrieval {kind} must be a table with columns ['s', 'idx'], got ['s']{tail}")):
            H.evaluate_retrieval(desc, *args)
    for kind, args in (("queries", (q.astype({"idx": float}), d)), ("distractors", (q, d.astype({"idx": float})))):
        with pytest.raises(DataError, match=whole(
                f"task retrieval {kind}: column 'idx' must hold integers, got dtype float64")):
            H.evaluate_retrieval(desc, *args)
    with pytest.raises(DataError, match=whole(
            f"task retrieval queries: row 0 (line 2) has idx=2 but sequence 'i_a' has 2 patches (valid 0..1){_REGEN_IDX}")):
        H.evaluate_retrieval(desc, pd.DataFrame({"s": ["i_a"], "idx": [2]}), d)
    with pytest.raises(DataError, match=whole(
            f"task retrieval distractors: row 1 (line 3) has idx=5 but sequence 'v_b' has 5 patches "
            f"(valid 0..4){_REGEN_IDX}")):
        H.evaluate_retrieval(desc, q, pd.DataFrame({"s": ["v_b", "v_b"], "idx": [0, 5]}))
    # a sequence absent only from the distractors: the distractor file is named
    with pytest.raises(DataError, match=whole(
            f"task retrieval distractors references 1 sequences absent from the descriptors: x_z{_ABSENT}")):
        H.evaluate_retrieval(desc, q, pd.DataFrame({"s": ["v_b", "x_z"], "idx": [0, 0]}))


def test_matching_details_whole_frame_with_a_one_patch_sequence():
    # v_c holds one patch: its only nearest neighbour is itself (correct), AP = 1, success 1;
    # i_a: every strip a copy of ref -> all correct, AP 1 (3 patches)
    ia = {t: np.array([[0], [10], [20]], np.float32) for t in PATCH_TYPES}
    vc = {t: np.array([[7]], np.float32) for t in PATCH_TYPES}
    res = H.evaluate_matching({"i_a": ia, "v_c": vc}, ["i_a", "v_c"])
    rows = [(s, s[0], j, k, n, 1.0, 1.0) for s, n in (("i_a", 3), ("v_c", 1)) for j in JITTERS for k in range(1, 6)]
    expect = pd.DataFrame(rows, columns=["sequence", "seq_type", "jitter", "k", "n_patches", "ap", "success_rate"])
    pd.testing.assert_frame_equal(res.details, expect)
    assert (res.task, res.split) == ("matching", "custom")
    assert set(res.table["task"]) == {"matching"} and set(res.table["split"]) == {"custom"}


@pytest.mark.bad_input
def test_matching_errors_whole_messages():
    ia = {t: np.array([[0], [10]], np.float32) for t in PATCH_TYPES}
    with pytest.raises(ConfigError, match=whole("evaluate_matching: no sequences given; pass split['test']")):
        H.evaluate_matching({"i_a": ia}, [])
    with pytest.raises(DataError, match=whole(
            f"task matching over 2 sequences references 1 sequences absent from the descriptors: x_z{_ABSENT}")):
        H.evaluate_matching({"i_a": ia}, ["i_a", "x_z"])
    empty = {t: np.zeros((0, 1), np.float32) for t in PATCH_TYPES}
    with pytest.raises(DataError, match=whole(
            "descriptors of sequence 'v_e' have no rows; a sequence needs >= 1 patch")):
        H.evaluate_matching({"i_a": ia, "v_e": empty}, ["i_a", "v_e"])


@pytest.mark.bad_input
def test_std_of_errors_whole_messages():
    names = np.array(["i_a", "v_b"], dtype=object)
    codes = np.array([0, 0, 1], np.int64)
    idx = np.array([1, 3, 0], np.int64)
    # the std of each drawn (sequence, idx), from a mapping and from a callable
    std = {"i_a": np.array([1.0, 2.0, 3.0, 4.0]), "v_b": np.array([5.0])}
    assert H._std_of(std, names, codes, idx).tolist() == [2.0, 4.0, 5.0]
    assert H._std_of(lambda s, i: std[s][i], names, codes, idx).tolist() == [2.0, 4.0, 5.0]
    with pytest.raises(ConfigError, match=whole(
            "ref_std must be a mapping seq -> per-patch std array (see ref_patch_std) or a callable (seq, idx) "
            "-> std, got list")):
        H._std_of([1.0], names, codes, idx)
    with pytest.raises(DataError, match=whole(
            "ref_std has no entry for sequence 'v_b'; give the std of every ref patch of each test sequence "
            "(ref_patch_std(ref strip))")):
        H._std_of({"i_a": std["i_a"]}, names, codes, idx)
    # i_a draws idx 3 but holds 3 values (0..2): one short
    with pytest.raises(DataError, match=whole(
            "ref_std['i_a'] has shape (3,) but patch 3 is drawn; it must hold one std per ref patch (length N)")):
        H._std_of({**std, "i_a": std["i_a"][:3]}, names, codes, idx)


def test_retrieval_counts_without_or_with_one_distractor():
    rng = np.random.default_rng(8)
    q = rng.standard_normal((4, 3)).astype(np.float32)
    pos_keys = ref_keys(q, rng.standard_normal((4, 3)).astype(np.float32))[:, None].copy()
    qseq = np.array([0, 0, 1, 1], np.int64)
    cuts = np.array([0, 1, 5], np.int64)
    none = H.retrieval_counts(q, np.zeros((0, 3), np.float32), qseq, np.zeros(0, np.int64), pos_keys, cuts)
    assert none.dtype == np.int64 and none.shape == (4, 3, 1) and not none.any()
    d = np.zeros((1, 3), np.float32)  # the origin: counted for a query of another sequence iff |q|^2 < pos key
    dseq = np.array([1], np.int64)
    got = H.retrieval_counts(q, d, qseq, dseq, pos_keys, cuts)
    assert got.dtype == np.int64
    for i in range(4):
        below = int(qseq[i] != 1 and ref_keys(q[i], d[0]) < pos_keys[i, 0])
        assert got[i, :, 0].tolist() == [0, below, below]


@pytest.mark.parametrize("qscale, dscale", [(1e19, 1e19), (1e30, 1e7), (1e-3, 1e19)])
def test_retrieval_counts_beyond_the_float32_screen(qscale, dscale):
    """Norms whose float32 screen would overflow (max|q| max|d| + max|d|^2 > 1e36) take the exact
    per-pair path: counts equal the brute force on float64 keys."""
    rng = np.random.default_rng(9)
    q = (rng.standard_normal((6, 4)) * qscale).astype(np.float32)
    d = (rng.standard_normal((30, 4)) * dscale).astype(np.float32)
    pos = q + (rng.standard_normal((6, 4)) * dscale).astype(np.float32)
    pos_keys = ref_keys(q, pos)[:, None].copy()
    qseq = rng.integers(0, 3, 6).astype(np.int64)
    dseq = rng.integers(0, 3, 30).astype(np.int64)
    cuts = np.array([0, 4, 30], np.int64)
    got = H.retrieval_counts(q, d, qseq, dseq, pos_keys, cuts)
    D = ref_matrix(q, d)
    for i in range(6):
        keys = D[i][dseq != qseq[i]]
        assert got[i, :, 0].tolist() == [np.count_nonzero(keys[:m] < pos_keys[i, 0]) for m in cuts]


def test_retrieval_counts_query_norms_beyond_float32_with_distractors_at_the_origin():
    """|q|^2 past float32's range (about 3.4e38) with every distractor at the origin: the key of a
    distractor is |q|^2 itself, counted exactly: (2e19)^2 = 4e38 < 5e38 and (3e19)^2 + 1 = 9e38 + 1 < 1e39,
    so every distractor is counted; a key of 4e38 against 3e38 is not."""
    q = np.array([[2e19, 0.0], [3e19, 1.0]], np.float32)
    d = np.zeros((2, 2), np.float32)
    pos_keys = np.array([[5e38, 3e38], [1e39, 3e38]])
    got = H.retrieval_counts(q, d, np.zeros(2, np.int64), np.ones(2, np.int64), pos_keys, np.array([0, 1, 2], np.int64))
    assert got[:, :, 0].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert got[:, :, 1].tolist() == [[0, 0, 0], [0, 0, 0]]
