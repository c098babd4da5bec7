"""AP conventions (descbench.metrics.ap) against sklearn, brute-force enumeration, plain loops
and hand-worked examples."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from descbench.metrics import ap as apm
from descbench.metrics.ap import (
    ap_from_tie_groups,
    ap_quantized,
    ap_step,
    ap_tie_aware,
    ap_tie_aware_from_histograms,
    ap_trapezoid,
    ap_vlfeat,
    quantized_ap_gap,
)

# ----------------------------------------------------------------------------- references


def plain_ap(ranked_pos, num_positives=None):
    """Mean precision at the positives of an already ordered list (loop)."""
    tp, total = 0, 0.0
    for k, is_pos in enumerate(ranked_pos, start=1):
        if is_pos:
            tp += 1
            total += tp / k
    denom = tp if num_positives is None else num_positives
    return total / denom


def stable_order(d):
    return sorted(range(len(d)), key=lambda i: d[i])  # Python's sort is stable


def vlfeat_loop(d, lab, num_positives=None):
    idx = [i for i in stable_order(d) if lab[i] != 0]
    npos = sum(1 for i in idx if lab[i] == 1) if num_positives is None else num_positives
    return plain_ap([lab[i] == 1 for i in idx], npos)


def trapezoid_loop(d, lab, num_positives=None):
    pos = [lab[i] == 1 for i in stable_order(d)]
    P = sum(pos) if num_positives is None else num_positives
    rec, prec, tp = [0.0], [1.0], 0
    for k, is_pos in enumerate(pos, start=1):
        tp += is_pos
        rec.append(tp / P)
        prec.append(max(tp, 1e-10) / k)
    return sum(0.5 * (prec[i] + prec[i + 1]) * (rec[i + 1] - rec[i]) for i in range(len(pos)))


def groups_of(d, lab):
    """Distinct distances (increasing) -> list of the labels (1/0) of the items at it."""
    return [[int(lab[i] == 1) for i in range(len(d)) if d[i] == v] for v in sorted(set(d))]


def brute_tie_aware(d, lab):
    """Mean AP over every combination of distinct within-group arrangements (equal weights is
    the same as all n! orderings: each distinct arrangement has multiplicity p!(n-p)!)."""
    arrangements = [sorted(set(itertools.permutations(g))) for g in groups_of(d, lab)]
    aps = [plain_ap([x for g in combo for x in g]) for combo in itertools.product(*arrangements)]
    return sum(aps) / len(aps)


def materialise(n_pos, n_neg, order):
    """Ranked label list with positives first ('optimistic') or last ('pessimistic') per group."""
    out = []
    for p, q in zip(n_pos, n_neg):
        out += [1] * p + [0] * q if order == "optimistic" else [0] * q + [1] * p
    return out


def tied_case(rng, n_max=60, n_levels=None, p_pos=None):
    n = int(rng.integers(1, n_max + 1))
    levels = int(rng.integers(1, 6)) if n_levels is None else n_levels
    d = rng.integers(0, levels, n).astype(np.float64)
    p = rng.choice([0.1, 0.5, 0.9, 1.0]) if p_pos is None else p_pos
    lab = (rng.random(n) < p).astype(np.int64)
    if not lab.any():
        lab[rng.integers(n)] = 1
    return d, lab


# ----------------------------------------------------------------------------- ap_step


def test_ap_step_matches_sklearn_with_many_ties():
    rng = np.random.default_rng(1)
    for case in range(200):
        d, lab = tied_case(rng)
        if case % 3 == 0:
            lab = np.where(lab == 1, 1, -1)  # {1, -1} labels: -1 negative
        if case % 50 == 0:
            lab = np.ones_like(lab)  # all positive
        ref = average_precision_score(lab == 1, -d)
        assert ap_step(d, lab) == pytest.approx(ref, abs=1e-12), (d, lab)
    assert ap_step([3.0], [1]) == 1.0 == average_precision_score([1], [-3.0])


def test_ap_step_no_positive_is_nan_where_sklearn_returns_zero():
    assert math.isnan(ap_step([0.1, 0.2], [0, -1]))
    assert math.isnan(ap_step([], []))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert average_precision_score([0, 0], [-0.1, -0.2]) == 0.0


# ----------------------------------------------------------------------------- tie-aware


def test_ap_tie_aware_matches_enumeration_over_orderings():
    rng = np.random.default_rng(2)
    for _ in range(120):
        d, lab = tied_case(rng, n_max=8)
        assert ap_tie_aware(d, lab) == pytest.approx(brute_tie_aware(d, lab), abs=1e-12), (d, lab)


def test_ap_tie_aware_hand_example_and_no_ties():
    # one group of 2 (one positive) then a positive: orderings +- and -+ give
    # AP (1 + 2/3)/2 = 5/6 and (1/2 + 2/3)/2 = 7/12, mean 17/24.
    assert ap_tie_aware([1, 1, 2], [0, 1, 1]) == pytest.approx(17 / 24, abs=1e-15)
    rng = np.random.default_rng(3)
    d, lab = rng.random(40), (rng.random(40) < 0.4).astype(int)
    ref = plain_ap([lab[i] == 1 for i in np.argsort(d)])
    assert ap_tie_aware(d, lab) == pytest.approx(ref, abs=1e-13)
    assert ap_step(d, lab) == pytest.approx(ref, abs=1e-13)


# ----------------------------------------------------------------------------- sufficient statistics


@pytest.mark.parametrize("convention", apm.CONVENTIONS)
def test_ap_from_tie_groups_equals_list_functions(convention):
    rng = np.random.default_rng(4)
    for _ in range(60):
        g = int(rng.integers(1, 8))
        n_pos, n_neg = rng.integers(0, 4, g), rng.integers(0, 4, g)
        if n_pos.sum() == 0:
            n_pos[rng.integers(g)] = 1
        d = np.repeat(np.arange(g, dtype=float), n_pos + n_neg)
        lab = np.concatenate([[1] * p + [0] * q for p, q in zip(n_pos, n_neg)]).astype(int)
        got = ap_from_tie_groups(n_pos, n_neg, convention)
        if convention == "step":
            ref = average_precision_score(lab == 1, -d)
        elif convention == "tie_aware":
            ref = brute_tie_aware(d, lab) if len(d) <= 9 else ap_tie_aware(d, lab)
        else:
            ref = plain_ap(materialise(n_pos, n_neg, convention))
        assert got == pytest.approx(ref, abs=1e-12), (n_pos, n_neg)
        extra = int(n_pos.sum()) + 3
        assert ap_from_tie_groups(n_pos, n_neg, convention, num_positives=extra) == pytest.approx(
            got * n_pos.sum() / extra, abs=1e-12)


def test_ap_from_tie_groups_large_counts_match_direct_sums():
    """Large groups exercise the asymptotic harmonic-number branch (counts >> 64)."""
    rng = np.random.default_rng(5)
    g = 30
    n_pos = rng.integers(0, 3000, g) * (rng.random(g) < 0.7)
    n_neg = rng.integers(0, 50000, g)
    n_pos[[0, 7]], n_neg[[3, 9]] = 0, 0
    n_pos[12], n_neg[12] = 1, 0
    n_pos[13], n_neg[13] = 1, 200000
    P_tot = n_pos.sum()
    sums = {c: 0.0 for c in apm.CONVENTIONS}
    N = P = 0
    for p, q in zip(n_pos.tolist(), n_neg.tolist()):
        n = p + q
        if p:
            j = np.arange(1, n + 1, dtype=float)
            s = (p - 1) / (n - 1) if n > 1 else 0.0
            sums["tie_aware"] += np.sum(p / n * (P + 1 + (j - 1) * s) / (N + j))
            jp = np.arange(1, p + 1, dtype=float)
            sums["optimistic"] += np.sum((P + jp) / (N + jp))
            sums["pessimistic"] += np.sum((P + jp) / (N + q + jp))
            sums["step"] += p * (P + p) / (N + n)
        N, P = N + n, P + p
    for c in apm.CONVENTIONS:
        assert ap_from_tie_groups(n_pos, n_neg, c) == pytest.approx(sums[c] / P_tot, rel=1e-12, abs=1e-14), c
    # the materialised pessimistic/optimistic lists (~700k items), vectorised
    for c in ("optimistic", "pessimistic"):
        pos = np.array(materialise(n_pos, n_neg, c), dtype=bool)
        ref = np.sum(np.cumsum(pos)[pos] / (np.flatnonzero(pos) + 1.0)) / P_tot
        assert ap_from_tie_groups(n_pos, n_neg, c) == pytest.approx(ref, rel=1e-12)


def test_harmonic_diff_against_fsum():
    for a, b in [(0, 1), (0, 64), (3, 70), (63, 64), (64, 65), (100, 5000), (10**6, 10**6 + 1), (5, 5)]:
        ref = math.fsum(1.0 / k for k in range(a + 1, b + 1))
        got = float(apm._harmonic_diff(np.array([float(a)]), np.array([float(b)]))[0])
        assert got == pytest.approx(ref, rel=1e-14, abs=1e-300), (a, b)


def test_ap_tie_aware_from_histograms_equals_list():
    rng = np.random.default_rng(6)
    bits = 16
    for _ in range(40):
        n = int(rng.integers(1, 300))
        d = rng.integers(0, bits + 1, n)
        lab = (rng.random(n) < rng.choice([0.05, 0.3, 0.8])).astype(int)
        lab[0] = 1
        hp = np.bincount(d[lab == 1], minlength=bits + 1)
        hn = np.bincount(d[lab == 0], minlength=bits + 1)
        assert ap_tie_aware_from_histograms(hp, hn) == pytest.approx(ap_tie_aware(d, lab), abs=1e-12)
        if n <= 8:
            assert ap_tie_aware_from_histograms(hp, hn) == pytest.approx(brute_tie_aware(d, lab), abs=1e-12)
    assert math.isnan(ap_tie_aware_from_histograms([0, 0], [3, 1]))


# ----------------------------------------------------------------------------- vl_pr / hpatches


def test_ap_vlfeat_hand_examples():
    d = [0.5, 0.1, 0.3, 0.3, 0.2, 0.9]
    lab = [1, -1, 0, 1, 1, -1]
    # drop the 0 label (index 2); ranking 0.1(-) 0.2(+) 0.3(+) 0.5(+) 0.9(-):
    # precision at the positives 1/2, 2/3, 3/4 -> AP = (1/2 + 2/3 + 3/4)/3 = 23/36
    assert ap_vlfeat(d, lab) == pytest.approx(23 / 36, abs=1e-15)
    # 5 positives, 2 never retrieved (precision 0): (23/12)/5 = 23/60
    assert ap_vlfeat(d, lab, num_positives=5) == pytest.approx(23 / 60, abs=1e-15)
    # counting the 0 as a negative would give (1/2 + 2/4 + 3/5)/3 instead
    assert ap_vlfeat(d, lab) != pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 3)
    # ties keep the input order: - + - | + -> (1/2 + 2/4)/2 ;  + - - | + -> (1 + 2/4)/2
    assert ap_vlfeat([1, 1, 1, 2], [-1, 1, -1, 1]) == pytest.approx(0.5, abs=1e-15)
    assert ap_vlfeat([1, 1, 1, 2], [1, -1, -1, 1]) == pytest.approx(0.75, abs=1e-15)
    assert math.isnan(ap_vlfeat([1.0, 2.0], [0, -1]))
    assert ap_vlfeat([1.0, 2.0], [0, -1], num_positives=2) == 0.0


def test_ap_trapezoid_hand_examples():
    # order 0.1(0) 0.2(1) 0.3(0) 0.4(1), P = 2; K = 0..4: recall 0, 0, 1/2, 1/2, 1;
    # precision 1, 1e-10, 1/2, 1/3, 1/2. Areas: 0 + (1e-10 + 1/2)/2 * 1/2 + 0 + (1/3 + 1/2)/2 * 1/2
    # = 1/8 + 2.5e-11 + 5/24 = 1/3 + 2.5e-11
    d, lab = [0.2, 0.1, 0.4, 0.3], [1, 0, 1, 0]
    assert ap_trapezoid(d, lab) == pytest.approx(1 / 3 + 2.5e-11, abs=1e-16)
    # num_positives = 4: recall halves, so does the area: 1/6 + 1.25e-11
    assert ap_trapezoid(d, lab, num_positives=4) == pytest.approx(1 / 6 + 1.25e-11, abs=1e-16)
    # ties keep the input order: 0 1 | 1 -> (1e-10 + 1/2)/4 + (1/2 + 2/3)/4 = 5/12 + 2.5e-11
    assert ap_trapezoid([1, 1, 2], [0, 1, 1]) == pytest.approx(5 / 12 + 2.5e-11, abs=1e-16)
    #                           1 0 | 1 -> (1 + 1)/4 + (1/2 + 2/3)/4 = 19/24
    assert ap_trapezoid([1, 1, 2], [1, 0, 1]) == pytest.approx(19 / 24, abs=1e-16)
    assert math.isnan(ap_trapezoid([1.0], [0]))
    assert ap_trapezoid([1.0], [0], num_positives=1) == 0.0
    assert ap_trapezoid([], [], num_positives=3) == 0.0


def test_vlfeat_and_trapezoid_match_loops_on_random_cases():
    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(1, 40))
        d = rng.integers(0, 6, n).astype(float) if rng.random() < 0.6 else rng.random(n)
        lab3 = rng.choice([-1, 0, 1], n)
        lab2 = rng.choice([0, 1], n)
        extra = int(rng.integers(0, 4))
        if (lab3 == 1).any():
            assert ap_vlfeat(d, lab3) == pytest.approx(vlfeat_loop(d, lab3), abs=1e-12)
        npos3 = int((lab3 == 1).sum()) + extra
        if npos3:
            assert ap_vlfeat(d, lab3, npos3) == pytest.approx(vlfeat_loop(d, lab3, npos3), abs=1e-12)
        if lab2.any():
            assert ap_trapezoid(d, lab2) == pytest.approx(trapezoid_loop(d, lab2), abs=1e-12)
            npos2 = int(lab2.sum()) + extra
            assert ap_trapezoid(d, lab2, npos2) == pytest.approx(trapezoid_loop(d, lab2, npos2), abs=1e-12)


# ----------------------------------------------------------------------------- quantised AP


def test_ap_quantized_exact_when_distances_sit_on_bin_centres():
    rng = np.random.default_rng(8)
    for bits in (8, 16, 64):
        for _ in range(10):
            n = int(rng.integers(1, 400))
            d = rng.integers(0, bits + 1, n)
            lab = (rng.random(n) < 0.3).astype(int)
            lab[-1] = 1
            got = ap_quantized(d, lab, bits + 1, d_min=0, d_max=bits)
            assert abs(got - ap_step(d, lab)) < 1e-9
    # all distances equal: a single bin, AP = P / n
    assert ap_quantized([2.0, 2.0, 2.0], [1, 0, 0], 5) == pytest.approx(1 / 3)


def test_ap_quantized_hand_example_and_clamping():
    # centres 0, 1; t = 0, 0.5, 1: bin 0 gets item0 + half of item1 (a = q = 1.5),
    # bin 1 gets half of item1 + item2 (a = 1.5, q = 0.5); precision 1 and 2/3;
    # AP = (1 * 1.5 + 2/3 * 0.5) / 2 = 11/12 (ap_step would give 1)
    assert ap_quantized([0.0, 0.5, 1.0], [1, 1, 0], 2) == pytest.approx(11 / 12, abs=1e-15)
    # items outside [d_min, d_max] go entirely to the end bins
    d, lab = np.array([-5.0, 0.0, 1.0, 2.0, 10.0]), np.array([1, 0, 1, 0, 1])
    assert ap_quantized(d, lab, 3, d_min=0, d_max=2) == pytest.approx(ap_step(np.clip(d, 0, 2), lab), abs=1e-14)


def test_ap_quantized_gap_shrinks_with_more_bins():
    rng = np.random.default_rng(9)
    for _ in range(3):
        n = 2000
        lab = (rng.random(n) < 0.3).astype(int)
        d = rng.random(n) + 0.3 * (1 - lab)
        gaps = [quantized_ap_gap(d, lab, q)[2] for q in (10, 100, 10000)]
        assert gaps[0] > gaps[1] > gaps[2]
        assert gaps[0] > 1e-2 and gaps[2] < 5e-4
        aq, ae, gap = quantized_ap_gap(d, lab, 100)
        assert (aq, ae, gap) == (ap_quantized(d, lab, 100), ap_step(d, lab), abs(aq - ae))


def test_ap_quantized_residual_once_bins_separate():
    """Documented limit: with every item alone in its bins the residual is exactly
    (1/P) sum_pos w(1-w)(N-TP)/((N+w)(N+1)) -- nonzero, bounded, ap_quantized <= ap_step."""
    rng = np.random.default_rng(10)
    n, n_q = 150, 10**6
    lab = (rng.random(n) < 0.4).astype(int)
    d = rng.random(n)
    lo, hi = d.min(), d.max()
    step = (hi - lo) / (n_q - 1)
    assert np.diff(np.sort(d)).min() > 2 * step  # precondition: no bin shared
    t = (d - lo) * ((n_q - 1) / (hi - lo))
    w = 1.0 - (t - np.floor(t))  # share in the lower bin
    order = np.argsort(d)
    residual = bound = 0.0
    for rank, i in enumerate(order):
        if lab[i] == 1:
            tp = int(lab[order[:rank]].sum())
            if rank:
                residual += w[i] * (1 - w[i]) * (rank - tp) / ((rank + w[i]) * (rank + 1))
                bound += (rank - tp) / (4 * rank * (rank + 1))
    P = lab.sum()
    gap = ap_step(d, lab) - ap_quantized(d, lab, n_q)
    assert gap == pytest.approx(residual / P, rel=1e-6, abs=1e-12)
    assert 0 < gap <= bound / P


# ----------------------------------------------------------------------------- validation


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ap_step([[0.1, 0.2]], [[1, 0]]), "distances"),
        (lambda: ap_step([0.1, np.nan], [1, 0]), "distances"),
        (lambda: ap_tie_aware([0.1, np.inf], [1, 0]), "distances"),
        (lambda: ap_vlfeat([0.1, -np.inf], [1, 0]), "distances"),
        (lambda: ap_step(["a", "b"], [1, 0]), "distances"),
        (lambda: ap_step([0.1, 0.2], [1, 0, 1]), "labels"),
        (lambda: ap_step([0.1, 0.2], [1, 2]), "labels"),
        (lambda: ap_tie_aware([0.1, 0.2], [1, 0.5]), "labels"),
        (lambda: ap_vlfeat([0.1, 0.2], [1, np.nan]), "labels"),
        (lambda: ap_trapezoid([0.1, 0.2], [1, -1]), "labels"),
        (lambda: ap_vlfeat([0.1, 0.2], [1, 1], num_positives=1), "num_positives"),
        (lambda: ap_trapezoid([0.1, 0.2], [1, 1], num_positives=2.5), "num_positives"),
        (lambda: ap_from_tie_groups([1, 2], [0, 1], "median"), "convention"),
        (lambda: ap_from_tie_groups([1, -2], [0, 1], "step"), "n_pos"),
        (lambda: ap_from_tie_groups([1, 2], [0, 0.5], "step"), "n_neg"),
        (lambda: ap_from_tie_groups([1, 2], [0], "step"), "n_neg"),
        (lambda: ap_from_tie_groups([1, 2], [0, 1], "step", num_positives=2), "num_positives"),
        (lambda: ap_tie_aware_from_histograms([1, 2], [0, 1, 2]), "hist_neg"),
        (lambda: ap_tie_aware_from_histograms([1, np.nan], [0, 1]), "hist_pos"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 1), "n_q"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 10.0), "n_q"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 10, d_min=1.0, d_max=0.0), "d_min"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 10, d_min=np.nan), "d_min"),
        (lambda: ap_quantized([0.1, np.nan], [1, 0], 10), "distances"),
    ],
)
def test_invalid_inputs_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_empty_or_no_positive_is_nan():
    for f in (ap_step, ap_tie_aware, ap_vlfeat, ap_trapezoid):
        assert math.isnan(f([], []))
        assert math.isnan(f([0.3, 0.1], [0, 0]))
    assert math.isnan(ap_quantized([], [], 10))
    assert math.isnan(ap_quantized([0.3, 0.1], [0, -1], 10))
    assert math.isnan(ap_from_tie_groups([], [], "tie_aware"))


# ----------------------------------------------------------------------------- the registry (verification.ap_convention)

SCHEMA = __import__("pathlib").Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


def tied_list(rng, n=60):
    """A pooled verification list: few distinct distances (ties), labels +1 / -1, >= 1 positive."""
    d = rng.integers(0, 6, n).astype(np.float64)
    lab = np.where(rng.random(n) < 0.35, 1, -1).astype(np.int8)
    lab[0] = 1
    return d, lab


def test_every_convention_is_its_function_on_the_list_and_its_tie_group_form_agrees():
    """Each registered convention computes its named function on a +1/-1 pooled list, and one that
    claims a tie-group form (candidates: all) gives the same AP from the tie-group counts alone."""
    rng = np.random.default_rng(12)
    named = {"step": lambda d, y: ap_step(d, y == 1), "tie_aware": lambda d, y: ap_tie_aware(d, y == 1),
             "vlfeat": ap_vlfeat, "trapezoid": lambda d, y: ap_trapezoid(d, (y == 1).astype(int))}
    for _ in range(20):
        d, lab = tied_list(rng)
        order = np.argsort(d, kind="stable")
        d, lab = d[order], lab[order]
        values, groups = np.unique(d, return_inverse=True)
        n_pos = np.bincount(groups, weights=lab == 1, minlength=values.size)
        n_neg = np.bincount(groups, weights=lab != 1, minlength=values.size)
        for c in apm.AP_CONVENTIONS.values():
            got = c.ap(d, lab)
            if c.name in named:
                assert got == named[c.name](d, lab)
            if c.tie_groups is not None:
                assert ap_from_tie_groups(n_pos, n_neg, c.tie_groups) == pytest.approx(got, abs=1e-12)
    assert list(apm.AP_CONVENTIONS)[:4] == ["step", "tie_aware", "vlfeat", "trapezoid"]  # column order of existing files
    assert apm.verification_ap_columns()[-1] == "verification_ap_quantized"


def test_the_schema_enum_is_the_registry():
    """verification.ap_convention's allowed values, as validation sees them, are the registry's
    names (the schema file holds no second list), and its default is one of them."""
    from descbench.config import load_schema, validate_config
    from descbench.errors import ConfigError
    from descbench.params import schema_node

    node = schema_node("verification.ap_convention", load_schema(SCHEMA))
    assert node["enum"] == list(apm.AP_CONVENTIONS) and node["default"] in apm.AP_CONVENTIONS
    assert "enum" not in schema_node("verification.ap_convention")  # the raw file: no hand-kept copy
    base = {"keypoint_sets": {"s": {"detector": "sift"}}}
    with pytest.raises(ConfigError, match=r"'verification\.ap_convention': 'median' is not one of \['step', 'tie_aware'"):
        validate_config({**base, "verification": {"ap_convention": "median"}}, SCHEMA)
    for name in apm.AP_CONVENTIONS:
        assert validate_config({**base, "verification": {"ap_convention": name}}, SCHEMA)["verification"]["ap_convention"] == name


@pytest.fixture
def toy_convention(monkeypatch):
    """A convention added to the registry and nowhere else (order-dependent: no tie-group form)."""
    toy = apm.APConvention("first_hit", lambda d, lab: 1.0 / (1 + int(np.argmax(lab[np.argsort(d, kind="stable")] == 1))), None)
    monkeypatch.setitem(apm.AP_CONVENTIONS, toy.name, toy)
    return toy


def test_a_convention_added_to_the_registry_reaches_config_columns_and_report(toy_convention):
    """Adding a convention is one registry entry: validation accepts it (and refuses it with
    candidates: all when it has no tie-group form), the per-scene rows and the Parquet schema get
    its column, the report gets keypoint_verification_ap_<name> and can pick it as the headline."""
    from descbench import io
    from descbench.config import validate_config
    from descbench.errors import ConfigError
    from descbench.metrics.aggregate import pooled_verification_ap, verification_summary
    from descbench.metrics.bojanic import verification_ap
    from descbench.tasks.verification import scene_schema

    base = {"keypoint_sets": {"s": {"detector": "sift"}}}
    assert validate_config({**base, "verification": {"ap_convention": "first_hit"}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"'first_hit' needs the materialised pooled list.*use step or tie_aware"):
        validate_config({**base, "verification": {"ap_convention": "first_hit", "candidates": "all"}}, SCHEMA)

    d = np.array([0.5, 0.1, 0.3, 0.2])
    lab = np.array([1, -1, -1, 1], np.int8)
    row = verification_ap(d, lab, 25)
    assert list(row) == apm.verification_ap_columns() and row["verification_ap_first_hit"] == pytest.approx(1 / 2)
    assert np.isnan(verification_ap(d[:0], lab[:0], 25)["verification_ap_first_hit"])
    schema = scene_schema(apm.verification_ap_columns())
    assert "verification_ap_first_hit" in schema.names
    stats = {"scene": "v_a", "n_queries": 4, "n_target_keypoints": 4, "n_distractor_scenes": 0, "n_distractors": 0,
             "verification_num_positives": 2, "verification_num_negatives": 2, **row,
             "retrieval_n_queries_with_positive": 1, "retrieval_sum_ap_negative": 1.0, "retrieval_sum_ap_ignore": 1.0,
             "retrieval_num_true_positives": 1, "retrieval_num_hard_negatives": 0, "retrieval_num_distractors": 0}
    table = io.table_from_rows([stats], schema, "toy scene table")
    summary = verification_summary(table.to_pandas(), "first_hit", "negative", pooled_verification_ap([(d, lab)], "first_hit"))
    assert summary["keypoint_verification_ap_first_hit"] == pytest.approx(0.5)
    assert summary["keypoint_verification_ap"] == pytest.approx(0.5) and summary["keypoint_verification_ap_pooled"] == 0.5


# ------------------------------------------------------------------------------------------------
# Merged from test_core_ap.py:
# AP conventions (descbench.metrics.ap): exact error messages, label sets, one-item and
# degenerate-range inputs, each checked against a hand-worked value or a plain loop.
#
# Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
# "Mutation testing"). The messages are matched from their start (``^name ...``): the module
# promises a ``ValueError`` *naming the offending argument*, and a name with extra characters
# around it is not that name.
# ------------------------------------------------------------------------------------------------


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ap_step([[0.1]], [1]), r"^distances must be a 1-D array, got shape \(1, 1\)$"),
        (lambda: ap_step(["a"], [1]), r"^distances must be numeric, got dtype <U1$"),
        (lambda: ap_step([True, False], [1, 0]), r"^distances must be numeric, got dtype bool$"),
        (lambda: ap_step([0.1, np.nan], [1, 0]), r"^distances must be finite; found nan at index 1$"),
        (lambda: ap_step([0.1], [[1]]), r"^labels must be a 1-D array, got shape \(1, 1\)$"),
        (lambda: ap_step([0.1], ["x"]), r"^labels must be numeric, got dtype <U1$"),
        (lambda: ap_step([0.1, 0.2], [1]), r"^labels has length 1 but distances has length 2$"),
        (lambda: ap_tie_aware([0.1, 0.2], [1, 2]), r"^labels must only contain values in \{0, 1, -1\}; found 2\.0$"),
        (lambda: ap_from_tie_groups([1, -1], [0, 0], "step"), r"^n_pos must contain non-negative integer counts$"),
        (lambda: ap_from_tie_groups([1, 1], [0, 0.5], "step"), r"^n_neg must contain non-negative integer counts$"),
        (lambda: ap_from_tie_groups([[1]], [[0]], "step"), r"^n_pos must be a 1-D array"),
        (lambda: ap_from_tie_groups([1], [np.inf], "step"), r"^n_neg must be finite; found inf at index 0$"),
        (lambda: ap_tie_aware_from_histograms([1, np.nan], [0, 1]), r"^hist_pos must be finite; found nan at index 1$"),
        (lambda: ap_tie_aware_from_histograms([1, 1], [0, -1]), r"^hist_neg must contain non-negative integer counts$"),
        (lambda: ap_tie_aware_from_histograms([1, 1], ["a", "b"]), r"^hist_neg must be numeric, got dtype <U1$"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 4, d_min=np.inf), r"^d_min must be finite, got inf$"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 4, d_max=np.nan), r"^d_max must be finite, got nan$"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 4, d_min=1.0, d_max=0.5), r"^d_min \(1\.0\) must be <= d_max \(0\.5\)$"),
    ],
)
def test_error_messages_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_labels_minus_one_are_negatives_for_tie_aware_and_step():
    # hand-worked: ranking 1 (pos), 2 (-1), 3 (pos): AP = (1/1 + 2/3) / 2
    d, lab = [0.1, 0.2, 0.3], [1, -1, 1]
    assert ap_tie_aware(d, lab) == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)
    assert ap_step(d, lab) == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)
    assert ap_tie_aware(d, [1, 0, 1]) == ap_tie_aware(d, lab)
    # vlfeat ignores the 0 label but counts -1 as a negative
    assert ap_vlfeat(d, [1, 0, 1]) == pytest.approx(1.0, abs=1e-15)
    assert ap_vlfeat(d, lab) == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)


def test_ap_quantized_one_item_and_one_positive():
    assert ap_quantized([0.5], [1], 4) == pytest.approx(1.0, abs=1e-15)
    assert ap_quantized([0.5, 0.7], [0, 1], 2) == pytest.approx(0.5, abs=1e-15)


def test_ap_quantized_without_positive_is_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(ap_quantized([0.3, 0.1, 0.2], [0, -1, 0], 8))
        assert math.isnan(ap_quantized([], [], 8))


def test_ap_quantized_degenerate_range_puts_items_at_d_min_in_the_first_bin():
    # d_min == d_max == 2: the item at 2 lies in the range (bin 0), the item at 3 beyond it (the
    # last bin). The positive is alone in the first bin: precision 1, AP 1 (for any n_q).
    for n_q in (2, 3, 5):
        assert ap_quantized([2.0, 3.0], [1, 0], n_q, d_min=2.0, d_max=2.0) == pytest.approx(1.0, abs=1e-15), n_q
    # the negative at d_min comes first: AP = 1/2 (the positive shares no bin with it)
    assert ap_quantized([2.0, 3.0], [0, 1], 2, d_min=2.0, d_max=2.0) == pytest.approx(0.5, abs=1e-15)
    # every distance equal and no explicit range: one bin holding everything, AP = precision = 1/3
    assert ap_quantized([1.0, 1.0, 1.0], [1, 0, 0], 3) == pytest.approx(1 / 3, abs=1e-15)


def test_ap_quantized_empty_leading_bins_contribute_nothing():
    # d_min far below every distance: the first bins stay empty (no item, precision undefined)
    # and must contribute 0, whatever memory a scratch array would hold
    n_q = 4096
    for _ in range(20):
        scratch = np.full(n_q, np.nan)  # leave NaNs in memory that a fresh array could reuse
        del scratch
        got = ap_quantized([10.0, 10.5], [1, 0], n_q, d_min=0.0, d_max=11.0)
        assert got == pytest.approx(1.0, abs=1e-12)


def test_tie_aware_from_histograms_equals_list_with_minus_one_labels():
    hist_pos, hist_neg = [1, 0, 2, 1], [2, 3, 0, 1]
    d = [g for g, (p, n) in enumerate(zip(hist_pos, hist_neg)) for _ in range(p + n)]
    lab = [lb for p, n in zip(hist_pos, hist_neg) for lb in [1] * p + [-1] * n]
    assert ap_tie_aware_from_histograms(hist_pos, hist_neg) == pytest.approx(ap_tie_aware(d, lab), abs=1e-14)


def test_tie_groups_count_each_distinct_distance_by_brute_force():
    """Per distinct distance, increasing: positives and negatives, counted here by a dict over
    the items; -0.0 and 0.0 are one distance, as the comparisons that form groups say."""
    from descbench.metrics.ap import _tie_groups

    rng = np.random.default_rng(11)
    d = rng.integers(0, 40, 3000).astype(np.float64) / 4.0
    d[rng.integers(0, 3000, 50)] = -0.0
    pos = rng.random(3000) < 0.3
    counts = {}
    for v, p in zip(d.tolist(), pos.tolist()):
        c = counts.setdefault(v + 0.0, [0, 0])  # v + 0.0: -0.0 -> 0.0
        c[0 if p else 1] += 1
    n_pos, n_neg = _tie_groups(d, pos)
    assert n_pos.tolist() == [float(counts[k][0]) for k in sorted(counts)]
    assert n_neg.tolist() == [float(counts[k][1]) for k in sorted(counts)]


def test_ap_quantized_with_empty_leading_bins_is_defined_without_a_warning():
    """Bins below the smallest distance hold nothing (cumulative count 0): their precision is
    taken as 0 (it is multiplied by their empty positive count), computed without touching
    uninitialised memory (NumPy warns about ``where`` without ``out``). Distances 5, 6, 7 in 11
    bins over [0, 10]: the bins at 5, 6, 7 hold one item each; precision 1 at 5 (positive),
    2/3 at 7 (positive): AP = (1 + 2/3) / 2."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ap_quantized([5.0, 6.0, 7.0], [1, -1, 1], 11, d_min=0.0, d_max=10.0)
    assert got == pytest.approx((1 + 2 / 3) / 2, rel=1e-15)
