"""HPatches sequences: their fixed shape, obtain (local archive or resumable download), extract, validate.

An HPatches (or Oxford affine) sequence is 6 images, image 1 the reference and images 2..6 its
targets, with the homographies ``H_1_2 .. H_1_6``: as a dataset it yields the pairs (1, k),
k = 2..6. The 6 is this dataset kind's shape, not descbench's: a folder dataset's scenes hold any
number of images and may list other pairs (:mod:`descbench.datasets.layout`).
"""

from __future__ import annotations

import json
import shutil
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

from descbench.datasets.layout import read_homography, scene_files
from descbench.errors import ConfigError, DataError
from descbench.fileops import write_text_atomic

#: Images per HPatches sequence (image 1 and its 5 targets); the demo generates the same shape.
N_IMAGES = 6
#: The target images k of the pairs (1, k) of an HPatches sequence.
TARGET_IMAGES = tuple(range(2, N_IMAGES + 1))

HPATCHES_ROOT = "hpatches-sequences-release"


@lru_cache(maxsize=1)
def hpatches_names() -> dict:
    return json.loads(resources.files("descbench").joinpath("data/hpatches_scenes.json").read_text())


def hpatches_scenes(subset: str = "full") -> list[str]:
    """The 116 HPatches sequences, or the 108 of the D2-Net convention (8 largest removed)."""
    names = hpatches_names()
    if subset == "full":
        return list(names["full"])
    if subset == "d2net108":
        drop = set(names["d2net_excluded"])
        return [s for s in names["full"] if s not in drop]
    raise ConfigError(f"unknown hpatches.subset {subset!r}; use full or d2net108")


def validate_layout(root: Path, scenes: list[str]) -> None:
    """Every scene folder has its 6 images and 5 valid homographies (images are read later)."""
    problems = []
    for s in scenes:
        try:
            files = scene_files(root / s)  # its numbering and homographies; the count is checked here
            if files.n_images != N_IMAGES:
                raise DataError(f"HPatches scene folder {root / s} holds {files.n_images} images, not {N_IMAGES} "
                                "(1.ppm..6.ppm); re-extract the archive")
            for k in TARGET_IMAGES:
                read_homography(files.homographies[k])
        except DataError as exc:
            problems.append(str(exc))
    if problems:
        raise DataError(f"{len(problems)} of {len(scenes)} HPatches scenes under {root} are invalid:\n" + "\n".join(problems[:10]))


def _holds_no_file(root: Path) -> bool:
    return root.is_dir() and not any(p.is_file() for p in root.rglob("*"))


def obtain(urls: list[str], sha256: str | None, data_dir: Path, flag: Path | None = None) -> Path:
    """Return the validated ``<data_dir>/hpatches/hpatches-sequences-release`` (all 116 scenes).

    An archive already placed in ``<data_dir>/hpatches/`` is used as is; otherwise the URLs are
    tried in order (resuming a partial download). After validation, ``flag`` is written.
    """
    # imported here: the workflow reads this module's constants at parse time, without the network code
    from descbench.datasets.download import extract_archive, fetch_archive, find_local_archive

    base = Path(data_dir) / "hpatches"
    root = base / HPATCHES_ROOT
    if _holds_no_file(root):  # empty folders left by an earlier failed attempt
        shutil.rmtree(root)
    if not root.is_dir():
        archive = find_local_archive(base) or fetch_archive(urls, base, sha256=sha256, progress=True)
        print(f"extracting {archive}", file=sys.stderr)
        extract_archive(archive, base, expected_root=HPATCHES_ROOT)
    validate_layout(root, hpatches_scenes("full"))
    if flag is not None:
        write_text_atomic(flag, f"validated {len(hpatches_scenes('full'))} scenes under {root}\n")
    return root
