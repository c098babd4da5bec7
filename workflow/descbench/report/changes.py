"""What a rerun is about to replace: the settings that differ from those of the experiment's last
report, so that changing a parameter in place is never silent (the workflow prints them when it
starts; a new name, a sweep or another `experiment` keeps both results instead)."""

from __future__ import annotations

from pathlib import Path

from descbench.tasks import scoring_sections


def sections() -> tuple[str, ...]:
    """The config sections compared: the sets, the descriptors, the scoring job's sections
    (``scoring`` and each scoring task's, descbench.tasks.scoring_sections) and ``statistics``."""
    return ("keypoint_sets", "descriptors", *scoring_sections(), "statistics")


def _diff(old, new, path: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:
            if k not in new or k not in old:
                continue  # a name added or removed replaces nothing
            _diff(old[k], new[k], f"{path}.{k}", out)
    elif old != new:
        out.append(f"{path}: {old!r} -> {new!r}")


def changed_settings(old_cfg: dict, new_cfg: dict) -> list[str]:
    """``section.name.key: old -> new`` for every setting of an existing keypoint set or
    descriptor (and of the scoring sections) whose value changed."""
    out: list[str] = []
    for section in sections():
        if section in old_cfg and section in new_cfg:
            _diff(old_cfg[section], new_cfg[section], section, out)
    return out


def previous_config(provenance_json: Path) -> dict | None:
    """The config recorded by the last report (``report/provenance.json``), if any. Plain JSON:
    reading it costs Snakemake's start-up nothing measurable (no pyarrow import)."""
    import json

    provenance_json = Path(provenance_json)
    if not provenance_json.exists():
        return None
    try:
        return json.loads(provenance_json.read_text()).get("params", {}).get("config")
    except (OSError, ValueError):  # an unreadable old file only loses the warning
        return None
