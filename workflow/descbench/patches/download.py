"""HPatches patches (``hpatches-release``, 116 folders x 16 strips): obtain and validate.

Same mechanics as the sequences (:mod:`descbench.datasets.hpatches`): an archive placed by hand
in ``<data_dir>/hpatches/`` (``hpatches-release.tar.gz`` or ``.zip``) is used as is; otherwise
the configured mirrors are tried in order, a partial download (``.part``) is resumed, the
optional sha256 is checked, the archive is extracted safely and every sequence's 16 strips are
checked (header-only: width 65, height a multiple of 65, equal patch counts).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from descbench.datasets import hpatches_scenes
from descbench.datasets.download import extract_archive, fetch_archive, find_local_archive
from descbench.fileops import write_text_atomic

PATCHES_ROOT = "hpatches-release"
PATCH_ARCHIVES = (f"{PATCHES_ROOT}.tar.gz", f"{PATCHES_ROOT}.zip")


def obtain_patches(urls: list[str], sha256: str | None, data_dir: Path, flag: Path | None = None,
                   sequences: list[str] | None = None) -> Path:
    """The validated ``<data_dir>/hpatches/hpatches-release`` (``sequences``: default all 116)."""
    from descbench.patches.layout import validate_patch_dataset

    base = Path(data_dir) / "hpatches"
    root = base / PATCHES_ROOT
    if root.is_dir() and not any(p.is_file() for p in root.rglob("*")):
        shutil.rmtree(root)  # empty folders left by an earlier failed attempt
    if not root.is_dir():
        archive = find_local_archive(base, PATCH_ARCHIVES) or fetch_archive(urls, base, sha256=sha256, progress=True)
        print(f"extracting {archive}", file=sys.stderr)
        extract_archive(archive, base, expected_root=PATCHES_ROOT)
    seqs = sequences if sequences is not None else hpatches_scenes("full")
    counts = validate_patch_dataset(root, seqs)
    if flag is not None:
        write_text_atomic(flag, f"validated {len(seqs)} patch sequences ({sum(counts.values())} patches per strip type) under {root}\n")
    return root
