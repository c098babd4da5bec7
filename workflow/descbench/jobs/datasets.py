"""The dataset jobs: one scene of the offline demo dataset (``demo-scene``) and HPatches sequences
downloaded, extracted and validated (``hpatches``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(sub) -> dict:
    """The dataset jobs' subcommands; returns ``{command: function running it}``."""
    p = sub.add_parser("demo-scene", help="generate one scene of the offline demo dataset")
    p.add_argument("--scene", required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("hpatches", help="download (resumable), extract and validate HPatches sequences")
    p.add_argument("--urls", nargs="+", required=True)
    p.add_argument("--sha256", default=None)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--flag", type=Path, required=True, help="written once the layout is validated")
    return {"demo-scene": run_demo_scene, "hpatches": run_hpatches}


def run_demo_scene(a: argparse.Namespace) -> None:
    from descbench.datasets.demo import generate_scene

    generate_scene(a.scene, a.out_dir, a.seed)


def run_hpatches(a: argparse.Namespace) -> None:
    from descbench.datasets.hpatches import obtain

    obtain(a.urls, a.sha256, a.data_dir, a.flag)
