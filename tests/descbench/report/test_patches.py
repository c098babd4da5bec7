"""descbench.report.patches: the patch benchmarks' tables across descriptors, from tidy rows
built here with known values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from descbench.errors import DataError
from descbench.report import patches as RP


def hbench_rows(base: float) -> pd.DataFrame:
    rows = [("hbench_matching", "a_easy_illum", "map", base), ("hbench_matching", "a_hard_view", "map", base + 0.2)]
    for jitter, add in (("easy", 0.0), ("hard", -0.1)):
        for pool in (2, 4):
            rows.append(("hbench_retrieval", f"a_{jitter}_{pool}_0", "patch_map", base + add + pool / 100))
            rows.append(("hbench_retrieval", f"a_{jitter}_{pool}_0", "image_map", base + add))
    return pd.DataFrame(rows, columns=["benchmark", "task", "metric", "value"]).assign(n=10)


def test_hbench_table_means_per_task_kind_and_jitter():
    t = RP.hbench_table({"sift": hbench_rows(0.5), "orb": hbench_rows(0.25)})
    assert t.descriptor.tolist() == ["sift", "orb"]
    s = t.iloc[0]
    assert s.matching_a_easy_illum == 0.5 and s.matching_a_hard_view == pytest.approx(0.7)
    assert s.matching_map == pytest.approx(0.6)
    assert s.retrieval_patch_map_easy == pytest.approx(0.53) and s.retrieval_patch_map_hard == pytest.approx(0.43)
    assert s.retrieval_image_map_easy == pytest.approx(0.5) and s.retrieval_image_map_hard == pytest.approx(0.4)
    empty = RP.hbench_table({"x": hbench_rows(0.5).iloc[:0]})
    assert np.isnan(empty.matching_map[0]) and np.isnan(empty.retrieval_patch_map_easy[0])


def tidy(split, with_headlines=True):
    rows = [dict(split=split, task="verification", level="summary", protocol="balanced", metric="auc", value=80.0),
            dict(split=split, task="verification", level="case", protocol="balanced", negatives="inter", jitter="e", metric="auc", value=90.0),
            dict(split=split, task="matching", level="summary", seq_type="all", metric="map", value=30.0),
            dict(split=split, task="matching", level="case", seq_type="all", jitter="h", metric="map", value=25.0),
            dict(split=split, task="retrieval", level="summary", metric="map", value=50.0),
            dict(split=split, task="retrieval", level="detail", jitter="all", pool_size=100, metric="map", value=55.0)]
    if with_headlines:
        rows += [dict(split=split, task="matching", level="summary", seq_type="all", metric="map_mean_of_types", value=31.0),
                 dict(split=split, task="retrieval", level="summary", metric="map_mean_over_pools", value=52.0)]
    return pd.DataFrame(rows)


@pytest.mark.bad_input
def test_hpbench_table_one_row_per_split_and_old_rows_refused():
    t = RP.hpbench_table({"sift": pd.concat([tidy("a"), tidy("view")], ignore_index=True)})
    assert t[["descriptor", "split"]].values.tolist() == [["sift", "a"], ["sift", "view"]]
    r = t.iloc[0]
    assert (r.verification_balanced_auc, r.verification_balanced_inter_easy, r.matching_map, r.matching_map_hard) == (80, 90, 30, 25)
    assert (r.retrieval_map, r.retrieval_map_pool100, r.matching_map_mean_of_types, r.retrieval_map_mean_over_pools) == (50, 55, 31, 52)
    with pytest.raises(DataError, match=r"descriptor 'old' \(split 'a'\) have no 'map_mean_of_types' row"):
        RP.hpbench_table({"old": tidy("a", with_headlines=False)})


def test_markdown_cells():
    md = RP.markdown(pd.DataFrame({"d": ["sift"], "frac": [0.123456], "pct": [45.678], "none": [np.nan]}))
    assert md == "| d | frac | pct | none |\n|---|---|---|---|\n| sift | 0.1235 | 45.68 | n/a |\n"
