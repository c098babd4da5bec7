"""Where every stage writes its files, in one place (used by the Snakemake rules and the report).

Layout under ``<results_dir>/<dataset_tag>/``: ``keypoints/<kpset>/<scene>.parquet``,
``descriptors/<kpset>/<descriptor>/<scene>.parquet``, ``scores/…/<scene>.{queries,pairs}.parquet``
(keypoint retrieval per pair), ``verification/…/<scene>.{list,queries,scene}.parquet`` (keypoint
verification and keypoint retrieval with distractors), ``matching/…/<scene>.{pairs,classifier,roc}.parquet``
(matching metrics and matching as a binary classifier), ``report/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ResultPaths:
    root: Path

    def keypoints(self, kpset: str, scene: str) -> str:
        return str(Path(self.root) / "keypoints" / kpset / f"{scene}.parquet")

    def descriptors(self, kpset: str, descriptor: str, scene: str) -> str:
        return str(Path(self.root) / "descriptors" / kpset / descriptor / f"{scene}.parquet")

    def score(self, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        return str(Path(self.root) / "scores" / kpset / descriptor / f"{scene}.{kind}")

    def verification(self, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        return str(Path(self.root) / "verification" / kpset / descriptor / f"{scene}.{kind}")

    def matching(self, kpset: str, descriptor: str, scene: str, kind: str) -> str:
        return str(Path(self.root) / "matching" / kpset / descriptor / f"{scene}.{kind}")

    def report(self, name: str) -> str:
        return str(Path(self.root) / "report" / name)
