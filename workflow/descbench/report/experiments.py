"""Comparison across experiments: their comparison tables side by side, read from Parquet, and the
C++ DescriptorWorkbench's results CSV as rows beside them.

Each experiment folder (``<results_dir>/<experiment>/``) holds ``report/comparison.parquet``;
its provenance (the Parquet metadata) names the experiment and carries its config, so every row
of the joint table says which experiment and which settings it comes from. Rows keep each
experiment's order; columns are the union (a metric one experiment did not compute is NaN).

**The workbench's results** (:func:`read_workbench_results`): a ``.csv`` file given instead of a
folder is read as the workbench's results, as it writes them: its
``analysis/scripts/export_experiment_metrics.py --format csv`` (experiment_name, descriptor_type,
dataset_name, the true mAP family, P@K, ...) or any CSV of its ``results`` table's columns (e.g.
``sqlite3 -header -csv experiments.db "SELECT e.descriptor_type, e.dataset_name, r.* FROM results
r JOIN experiments e ON e.id = r.experiment_id"``, verification and retrieval included). Each of
its columns goes into descbench's column of the same quantity (:data:`DW_COLUMNS`: e.g. its
``true_map_macro`` into ``true_map_macro_by_scene``, its ``keypoint_verification_ap`` into
``workbench_verification_map``, not into descbench's own ``keypoint_verification_ap``, which is
another definition); a column without a descbench counterpart is kept as ``dw:<name>``, so no
column holds two meanings. Its ``-1`` ("not computed": verification/retrieval disabled, image
retrieval) is NaN, and so are its retrieval counts on such rows (it writes 0 there).

**Conventions.** The same quantity follows different conventions in the two tools (ground truth
among equidistant keypoints, ties in rank, the verification lists' tie order and distractor
draw), so every row carries ``convention``: for descbench rows the settings that define its
numbers (``scoring.gt``, ``tie_policy``, ``tau_px``, the verification settings; a descriptor's
``overrides`` included), for workbench rows the workbench's fixed conventions and the descbench
settings that reproduce them. The Markdown table shows a short label per row and the texts, and
the column correspondence, below the table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from descbench import io
from descbench.errors import DataError

LEAD = ["experiment", "dataset", "source", "descriptor", "keypoint_set", "true_map_micro", "true_map_micro_ci_low",
        "true_map_micro_ci_high", "viewpoint_map", "illumination_map", "keypoint_verification_ap", "mma_at_3"]
# shown in the Markdown table as well when a row has a value (the workbench's rows fill these)
MD_EXTRA = ["true_map_macro_by_scene", "workbench_verification_map", "workbench_retrieval_map"]
DESCBENCH, DW = "descbench", "DescriptorWorkbench"
DW_PREFIX = "dw:"  # a workbench column without a descbench column of the same quantity

_ZERO_AP = "with R = 0 queries counted as AP 0"
_CATEGORIES = ("viewpoint", "illumination")  # its per-category columns


def _with_zeros(maps: tuple[tuple[str, str, str], ...]) -> dict[str, tuple[str, str]]:
    """The workbench's mAP columns ``maps`` ((its column, descbench's, quantity), over R >= 1
    queries), then each one's ``<column>_with_zeros`` twin (R = 0 queries as AP 0) in the same
    order: the workbench writes every mAP both ways, and lists them so."""
    return {**{c: (to, what) for c, to, what in maps},
            **{f"{c}_with_zeros": (f"{to}_including_zeros", f"{c} {_ZERO_AP}") for c, to, _ in maps}}


def _pooled(kind: str, what: str) -> dict[str, tuple[str, str]]:
    """The workbench's pooled-list metric ``kind`` (verification, retrieval; ``what`` its quantity):
    the overall column, then one per scene category. Its definition differs from descbench's own
    ``keypoint_<kind>_ap``, hence the ``workbench_`` names."""
    return {f"keypoint_{kind}_ap": (f"workbench_{kind}_map", what),
            **{f"{kind}_{cat}_ap": (f"workbench_{kind}_{cat}_map", f"the same over {cat} scenes") for cat in _CATEGORIES}}


_DW_VERIFICATION = _pooled("verification", "keypoint verification: mean over scenes of the AP of the scene's pooled list")
_DW_RETRIEVAL = _pooled("retrieval", "keypoint retrieval: mean over scenes of the pooled AP (labels 0 and -1 not relevant)")
# its pooled-list columns -> (descbench's workbench_* column, quantity); also what results.sqlite's
# columns of those names hold (descbench.report.database.DW_BOJANIC)
DW_POOLED = {**_DW_VERIFICATION, **_DW_RETRIEVAL}

# The workbench's results columns (its DatabaseManager ``results`` table and ExperimentMetrics,
# commit b834e17) -> descbench's column of the same quantity, and that quantity, in its order.
DW_COLUMNS = {
    **_with_zeros((("true_map_micro", "true_map_micro", "mean AP over the queries with a relevant keypoint (R >= 1)"),
                   ("true_map_macro", "true_map_macro_by_scene", "mean over scenes of the scene's mean AP (R >= 1)"))),
    **_with_zeros((("viewpoint_map", "viewpoint_map", "true_map_macro over viewpoint scenes"),
                   ("illumination_map", "illumination_map", "true_map_macro over illumination scenes"))),
    "precision_at_1": ("precision_at_1", "fraction of R >= 1 queries whose relevant keypoint ranks first"),
    "precision_at_5": ("precision_at_5", "fraction of R >= 1 queries whose relevant keypoint ranks within 5"),
    "recall_at_1": ("recall_at_1", "recall within rank 1 (= precision_at_1: one relevant keypoint per query)"),
    "recall_at_5": ("recall_at_5", "recall within rank 5 (= precision_at_5: one relevant keypoint per query)"),
    **DW_POOLED,
    "retrieval_num_true_positives": ("retrieval_num_true_positives", "+1 labels of its keypoint retrieval lists"),
    "retrieval_num_hard_negatives": ("retrieval_num_hard_negatives", "0 labels (other keypoints of images 2..6)"),
    "retrieval_num_distractors": ("retrieval_num_distractors", "-1 labels (distractor keypoints)"),
}
DW_IDENTITY = {"experiment_name": "experiment", "dataset_name": "dataset", "descriptor_type": "descriptor"}
# its columns where -1 means "not computed" (its defaults: the pooled lists when verification or
# retrieval is off, image retrieval), and the counts it leaves 0 then
DW_NOT_COMPUTED = (*DW_POOLED, "image_retrieval_map")
DW_RETRIEVAL_COUNTS = ("retrieval_num_true_positives", "retrieval_num_hard_negatives", "retrieval_num_distractors")
# what its unmapped columns hold, for the notes (the others: see its DatabaseManager.cpp)
DW_UNMAPPED_NOTES = {
    "mean_average_precision": "its display value: true_map_macro, or true_map_micro when that is 0",
    "legacy_mean_precision": ("its matching precision: a match is correct iff both indices are equal (homography-"
                              "projected keypoint sets only), mean over pairs with matches; not descbench's mean_precision"),
    "image_retrieval_map": "image-level retrieval mAP (-1: not computed)",
    "processing_time_ms": "0: its experiment runner never sets it (result_recording.cpp:24)",
}
DW_CONVENTION = (
    "DescriptorWorkbench: ground truth = the image-k keypoint nearest to H q within tau (the lowest index among "
    "equidistant ones: descbench scoring.gt closest), ties in rank 1 + L + ceil(t/2) (scoring.tie_policy half); "
    "verification and keypoint retrieval: its pooled per-scene lists (descbench verification.convention workbench, "
    "columns workbench_*), distractors drawn anew per query, ties in std::sort's unspecified order")


def compare_experiments(folders: list[Path]) -> pd.DataFrame:
    """One table: each descbench experiment folder's comparison rows, and each ``.csv`` file's
    rows read as the workbench's results (:func:`read_workbench_results`), in the order given."""
    frames = []
    for folder in folders:
        if Path(folder).suffix.lower() == ".csv" and not Path(folder).is_dir():
            frames.append(read_workbench_results(Path(folder)))
            continue
        f = Path(folder) / "report" / "comparison.parquet"
        if not f.exists():
            raise DataError(f"{f} does not exist: run the experiment first (snakemake --cores N --config experiment=...)"
                            + ("" if Path(folder).is_dir() else
                               "; give an experiment folder (results/<experiment>) or a DescriptorWorkbench results .csv"))
        table, meta = io.read_table(f)
        params = meta.get("params", {})
        df = table.to_pandas()
        df.insert(0, "source", DESCBENCH)
        df.insert(0, "dataset", params.get("dataset"))
        df.insert(0, "experiment", params.get("experiment") or Path(folder).name)
        config = params.get("config")
        df["convention"] = [descbench_convention(config, d) for d in df["descriptor"]]
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    lead = [c for c in LEAD if c in out.columns]
    return out[lead + [c for c in out.columns if c not in LEAD and c != "convention"] + ["convention"]]


def descbench_convention(config: dict | None, descriptor: str) -> str:
    """The settings that define a descbench row's numbers (a descriptor's ``overrides`` applied)."""
    if not config:
        return f"{DESCBENCH}: settings not recorded in this comparison.parquet"
    over = ((config.get("descriptors") or {}).get(descriptor) or {}).get("overrides") or {}
    sc = {**(config.get("scoring") or {}), **(over.get("scoring") or {})}
    text = (f"{DESCBENCH}: scoring.gt {sc.get('gt')}, tie_policy {sc.get('tie_policy')}, tau_px {sc.get('tau_px')}")
    ver = {**(config.get("verification") or {}), **(over.get("verification") or {})}
    if ver and ver.get("enabled", True):
        text += (f"; verification candidates {ver.get('candidates')}, ap_convention {ver.get('ap_convention')}, "
                 f"convention {ver.get('convention')}")
    return text


def _key_values(text) -> dict[str, str]:
    """The workbench's ``key=value;`` strings (its experiments.parameters and results.metadata)."""
    if not isinstance(text, str):
        return {}
    return dict(p.split("=", 1) for p in (s.strip() for s in text.split(";")) if "=" in p)


def read_workbench_results(path: Path) -> pd.DataFrame:
    """The workbench's results CSV as comparison rows (module docstring): identity columns
    (experiment = its experiment_name, else the one in its parameters/metadata strings; dataset;
    descriptor = its descriptor_type), each :data:`DW_COLUMNS` column under descbench's name, every
    other column as ``dw:<name>``, and ``source`` / ``convention``."""
    path = Path(path)
    try:
        dw = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{path} cannot be read as a CSV ({exc})") from exc
    if not ({"descriptor_type", "experiment_id"} & set(dw.columns)) or not (set(DW_COLUMNS) & set(dw.columns)):
        raise DataError(
            f"{path} is not a DescriptorWorkbench results CSV: it needs a descriptor_type or experiment_id column and "
            f"at least one of its metric columns ({', '.join(list(DW_COLUMNS)[:4])}, ...); its columns are "
            f"{', '.join(map(str, dw.columns[:8]))}{' ...' if len(dw.columns) > 8 else ''}. A descbench experiment is given "
            "as its folder (results/<experiment>), not as a CSV")
    out = pd.DataFrame(index=dw.index)
    names = [_key_values(p).get("experiment_name") or _key_values(m).get("experiment_name")
             for p, m in zip(dw.get("parameters", [None] * len(dw)), dw.get("metadata", [None] * len(dw)))]
    exp = dw["experiment_name"] if "experiment_name" in dw.columns else pd.Series(names, index=dw.index)
    if "experiment_id" in dw.columns:  # no name: the workbench's experiment id
        exp = exp.where(exp.notna() & (exp.astype(str) != ""), "experiment " + dw["experiment_id"].astype(str))
    out["experiment"] = exp.astype(object)
    out["dataset"] = dw["dataset_name"] if "dataset_name" in dw.columns else np.nan
    out["source"] = DW
    out["descriptor"] = dw["descriptor_type"] if "descriptor_type" in dw.columns else np.nan
    out["keypoint_set"] = None  # the workbench's results name no keypoint set
    disabled = dw["keypoint_retrieval_ap"].eq(-1) if "keypoint_retrieval_ap" in dw.columns else pd.Series(False, index=dw.index)
    for c in dw.columns:
        if c in DW_IDENTITY:
            continue
        v = dw[c]
        if c in DW_NOT_COMPUTED:
            v = v.where(v != -1)
        if c in DW_RETRIEVAL_COUNTS:
            v = v.where(~disabled)
        out[DW_COLUMNS[c][0] if c in DW_COLUMNS else DW_PREFIX + c] = v
    out["convention"] = f"{DW_CONVENTION} (read from {path})"
    return out


def _label(texts: list[str]) -> dict[str, str]:
    return {t: f"[{i}]" for i, t in enumerate(dict.fromkeys(texts), start=1)}


def _cell(v) -> str:
    if isinstance(v, (float, np.floating)):
        return "n/a" if np.isnan(v) else f"{v:.4f}"
    return "" if v is None else str(v)


def to_markdown(table: pd.DataFrame) -> str:
    """The comparison as Markdown: the lead columns (plus :data:`MD_EXTRA` where a row has a value),
    a convention label per row, then the convention texts and, with workbench rows, the column
    correspondence."""
    cols = [c for c in LEAD if c in table.columns]
    cols += [c for c in MD_EXTRA if c in table.columns and table[c].notna().any() and c not in cols]
    conv = table["convention"].tolist() if "convention" in table.columns else [""] * len(table)
    labels = _label(conv)
    lines = ["| " + " | ".join(cols + ["convention"]) + " |", "|" + "|".join("---" for _ in cols + ["convention"]) + "|"]
    for (_, r), c in zip(table[cols].iterrows(), conv):
        lines.append("| " + " | ".join(_cell(v) for v in r) + f" | {labels[c]} |")
    lines += ["", "Conventions (what each row's numbers follow):", ""]
    lines += [f"- {lab} {text}" for text, lab in labels.items()]
    if "source" in table.columns and (table["source"] == DW).any():
        lines += ["", f"{DW} columns, as read (its column -> descbench's column of the same quantity; the numbers "
                      "differ where the conventions above differ; its -1 'not computed' is n/a):", ""]
        dw_rows = table["source"] == DW
        lines += [f"- `{c}` -> `{to}`: {what}" for c, (to, what) in DW_COLUMNS.items()
                  if to in table.columns and table.loc[dw_rows, to].notna().any()]
        kept = [c for c in table.columns if c.startswith(DW_PREFIX)]
        if kept:
            lines.append("- kept under their own name (no descbench column of that quantity): " + "; ".join(
                f"`{c}`" + (f" ({DW_UNMAPPED_NOTES[c[len(DW_PREFIX):]]})" if c[len(DW_PREFIX):] in DW_UNMAPPED_NOTES else "")
                for c in kept))
    return "\n".join(lines) + "\n"
