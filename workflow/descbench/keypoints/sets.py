"""How keypoint sets refer to each other (``keypoint_sets.<set>`` specs), one rule each.

A set is exactly one of: ``detector`` (detected), ``source`` + ``filters`` (another set,
filtered; descbench.keypoints.filters), ``intersection`` (of two sets). Kept apart from
:mod:`descbench.config` (jsonschema, yaml) so that jobs use these rules without importing it.
"""

from __future__ import annotations

from descbench.errors import ConfigError


def set_sources(spec: dict) -> list[str]:
    """The keypoint sets a set reads (none for a detector set)."""
    if "source" in spec:
        return [spec["source"]]
    if "intersection" in spec:
        return list(spec["intersection"]["sources"])
    return []


def global_top_n(spec: dict) -> int | None:
    """N of a set's ``global_top_n_by_size`` filter (always its last filter), None if it has none."""
    return next((f["global_top_n_by_size"] for f in spec.get("filters") or [] if "global_top_n_by_size" in f), None)


def intersection_keep(spec: dict) -> str:
    """The side of an intersection whose keypoints (attributes) a set keeps (default: the first)."""
    inter = spec["intersection"]
    return inter.get("keep") or inter["sources"][0]


def root_detector_spec(kpsets: dict, name: str) -> dict:
    """The detector set a set's keypoints come from (via sources; an intersection: its kept side).

    Descriptors use it: SIFT's pyramid parameters and octave field, precomputed files.
    """
    seen = []
    while "detector" not in kpsets[name]:
        seen.append(name)
        spec = kpsets[name]
        name = spec["source"] if "source" in spec else intersection_keep(spec)
        if name in seen:  # guarded by _check_sets; kept so that this function never loops
            raise ConfigError(f"keypoint sets form a cycle: {' -> '.join(seen + [name])}")
    return kpsets[name]
