"""The matcher registry: params checked against each matcher's fragment, and what a matcher returns
checked by run_matcher whoever wrote it."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import raises_naming
from descbench.errors import ConfigError
from descbench.keypoints import ImageKeypoints
from descbench.matchers import MATCHER_MODULES, Matcher, Matches, MatchSide, check_matcher_params, get_matcher, \
    matcher_names, run_matcher
from descbench.params import fragment_defaults


def side(n: int) -> MatchSide:
    z = np.zeros(n, np.float32)
    kps = ImageKeypoints(z, z, z + 4, z - 1, z, np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))
    return MatchSide(kps, np.ones((n, 4), np.float32), (32, 32))


def test_registry_lists_every_module_matcher():
    import importlib

    names = [m.name for mod in MATCHER_MODULES for m in importlib.import_module(f"descbench.matchers.{mod}").MATCHERS]
    assert sorted(names) == matcher_names() and {"mnn", "nn", "snn", "smnn"} <= set(names)
    assert get_matcher("snn").defaults == fragment_defaults(get_matcher("snn").params_schema) == {"ratio": 0.8, "chunk_mb": 64}


def test_params_filled_and_checked():
    assert check_matcher_params("nn", None, "matchers.x.params") == {"ratio": None, "chunk_mb": 64}
    assert check_matcher_params("smnn", {"ratio": 0.9}, "matchers.x.params")["ratio"] == 0.9


@pytest.mark.bad_input
def test_unknown_matcher_names_the_key_and_the_known_ones():
    raises_naming(lambda: check_matcher_params("lowe", {}, "matchers.r08.params"), "matchers.r08.matcher", "'lowe'",
                  "mnn", "snn", exc=ConfigError)
    raises_naming(lambda: get_matcher("lowe"), "unknown matcher 'lowe'", "smnn", exc=ConfigError)


@pytest.mark.bad_input
@pytest.mark.parametrize("params, fragment", [({"ratio": 0}, "matchers.r.params.ratio"), ({"ratio": 1.5}, "matchers.r.params.ratio"),
                                              ({"ration": 0.8}, "matchers.r.params.ration")])
def test_bad_params_name_the_key(params, fragment):
    raises_naming(lambda: check_matcher_params("snn", params, "matchers.r.params"), fragment, exc=ConfigError)


@pytest.mark.bad_input
@pytest.mark.parametrize("out, fragment", [
    (Matches(np.array([0, 3]), np.array([0, 1]), np.array([1.0, 2.0])), "index out of range"),
    (Matches(np.array([0, 1]), np.array([0, 5]), np.array([1.0, 2.0])), "index out of range"),
    (Matches(np.array([1, 0]), np.array([0, 1]), np.array([1.0, 2.0])), "idx_a not strictly increasing"),
    (Matches(np.array([1, 1]), np.array([0, 1]), np.array([1.0, 2.0])), "idx_a not strictly increasing"),
    (Matches(np.array([0, 1]), np.array([0, 1]), np.array([1.0, np.nan])), "NaN or inf"),
    (Matches(np.array([0, 1]), np.array([0]), np.array([1.0, 2.0])), "shapes"),
    ((np.array([0]), np.array([0])), "not Matches"),
])
def test_run_matcher_refuses_what_a_matcher_must_not_return(monkeypatch, out, fragment):
    import descbench.matchers as reg

    fake = Matcher("fake", lambda a, b, p: out, {"type": "object", "additionalProperties": False, "properties": {}})
    monkeypatch.setitem(reg._registry(), "fake", fake)
    raises_naming(lambda: run_matcher("fake", {}, side(3), side(2), "scene s pair 1-2"), "scene s pair 1-2", "'fake'", fragment)


def test_run_matcher_returns_int64_and_float64(monkeypatch):
    import descbench.matchers as reg

    out = Matches(np.array([0, 2], np.int32), np.array([1, 1], np.int32), np.array([0.5, 0.25], np.float32))
    monkeypatch.setitem(reg._registry(), "fake", Matcher("fake", lambda a, b, p: out, {"type": "object", "properties": {}}))
    m = run_matcher("fake", {}, side(3), side(2), "w")
    assert m.idx_a.dtype == m.idx_b.dtype == np.int64 and m.score.dtype == np.float64


def test_score_kind_is_checked():
    with pytest.raises(ValueError, match="score_kind"):
        Matcher("x", lambda a, b, p: None, {}, score_kind="similarity")
