"""The ``check-config`` command: config files read as the workflow reads them, then validated."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(sub) -> dict:
    """The ``check-config`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("check-config", help="check config files as the workflow reads them (YAML syntax with line and "
                                            "column, then every key); Snakemake's own error for a --configfile names no file")
    p.add_argument("files", type=Path, nargs="+", help="config.yaml, then each --configfile, in Snakemake's order")
    return {"check-config": run}


def run(a: argparse.Namespace) -> None:
    check_config(a.files)


def check_config(files: list[Path]) -> None:
    """Read ``files`` as the workflow does (each one updating the previous ones' keys, nested
    mappings merged) and validate the result; print what was checked."""
    from descbench.config import check_yaml_file, validate_config

    merged: dict = {}

    def update(d: dict, u: dict) -> dict:
        for k, v in u.items():
            d[k] = update(d.get(k) if isinstance(d.get(k), dict) else {}, v) if isinstance(v, dict) else v
        return d

    for f in files:
        update(merged, check_yaml_file(f))
    cfg = validate_config(merged, Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml")
    print(f"descbench: {', '.join(map(str, files))}: valid YAML and a valid descbench config")
    for problem in gpu_notes(cfg):
        print(f"descbench: note: {problem}; a run with Snakemake's local executor on this machine stops at DAG build, "
              "a cluster executor gives the job a GPU node")


def gpu_notes(cfg: dict) -> list[str]:
    """What asks for a GPU (``device: cuda``) and cannot have one on this machine
    (:func:`descbench.torchrt.local_cuda_problem`): notes, not errors, since the config may be
    meant for a cluster."""
    from descbench.config import job_resources
    from descbench.torchrt import local_cuda_problem

    asks = [(f"descriptors.{n}.params", {"params": d.get("params", {}), "family": d["family"]})
            for n, d in (cfg.get("descriptors") or {}).items()]
    asks += [(f"keypoint_sets.{n}.params", {"params": k.get("params", {}), "detector": k["detector"]})
             for n, k in (cfg.get("keypoint_sets") or {}).items() if "detector" in k]
    notes = []
    for key, run in asks:
        if job_resources(**run)["gpu"]:
            problem = local_cuda_problem(key)
            if problem:
                notes.append(problem)
    return notes
