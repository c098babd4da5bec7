"""The dataset jobs: one scene of the offline demo dataset (``demo-scene``) or of the posed demo
(``posed-demo-scene``, :mod:`descbench.datasets.posed_demo`), a published posed set
(``posed-download``, :mod:`descbench.datasets.posed_sets`), HPatches sequences
downloaded, extracted and validated (``hpatches``), and the resized copy of one scene
(``resize-scene``, :mod:`descbench.datasets.resize`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from descbench.jobs.common import JobCommand


def add_commands(sub) -> dict:
    """The dataset jobs' subcommands; returns ``{command: function running it}``."""
    p = sub.add_parser("demo-scene", help="generate one scene of the offline demo dataset")
    p.add_argument("--scene", required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("posed-demo-scene", help="render one scene of the offline posed demo dataset")
    p.add_argument("--scene", required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("posed-download", help="download, extract and validate a published posed set (MegaDepth-1500, ScanNet-1500)")
    p.add_argument("name", help="megadepth1500 or scannet1500")
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--sha256", default=None, help="the archive's expected sha256 (checked when given)")

    p = sub.add_parser("hpatches", help="download (resumable), extract and validate HPatches sequences")
    p.add_argument("--urls", nargs="+", required=True)
    p.add_argument("--sha256", default=None)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--flag", type=Path, required=True, help="written once the layout is validated")

    p = sub.add_parser("resize-scene", help="write the resized copy of one scene (the config's resize)")
    p.add_argument("--source", type=Path, required=True, help="the scene folder")
    p.add_argument("--out", type=Path, required=True, help="its resized copy (written, resized.json last)")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--side", required=True)
    return {"demo-scene": JobCommand(run_demo_scene, pools=("opencv",)), "posed-demo-scene": run_posed_demo_scene, "posed-download": run_posed_download,
            "hpatches": run_hpatches, "resize-scene": JobCommand(run_resize_scene, pools=("opencv",))}


def run_demo_scene(a: argparse.Namespace) -> None:
    from descbench.datasets.demo import generate_scene

    generate_scene(a.scene, a.out_dir, a.seed)


def run_posed_demo_scene(a: argparse.Namespace) -> None:
    from descbench.datasets.posed_demo import N_SCENES, scene_name, write_scene
    from descbench.errors import ConfigError

    names = [scene_name(i) for i in range(N_SCENES)]
    if a.scene not in names:
        raise ConfigError(f"{a.scene!r} is not a scene of the posed demo; its scenes: {', '.join(names)}")
    print(f"wrote {write_scene(a.out_dir, names.index(a.scene), a.seed)}")


def run_posed_download(a: argparse.Namespace) -> None:
    from descbench.datasets.posed_sets import check_name, obtain

    obtain(check_name(a.name), a.data_dir, a.sha256)


def run_hpatches(a: argparse.Namespace) -> None:
    from descbench.datasets.hpatches import obtain

    obtain(a.urls, a.sha256, a.data_dir, a.flag)


def run_resize_scene(a: argparse.Namespace) -> None:
    from descbench.datasets.resize import check_resize, resize_scene

    check_resize({"size": a.size, "side": a.side})  # the rule passes the config's resize
    rec = resize_scene(a.source, a.out, a.size, a.side)
    images = rec["views"] if rec.get("layout") == "posed" else rec["images"]
    sizes = ", ".join(f"{k}: {v['source'][0]}x{v['source'][1]} -> {v['resized'][0]}x{v['resized'][1]}" for k, v in images.items())
    print(f"resized {a.source} -> {a.out} ({a.side} side {a.size} px): {sizes}")
