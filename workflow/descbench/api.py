"""descbench's public Python API: the metrics on arrays, for notebooks and training loops.

Every name here is the function the workflow itself calls (the same object, not a copy), so a
number computed in Python equals the one in the workflow's Parquet files for the same inputs.
Each docstring states the definition, the shapes and the convention, with an example that the
tests run.

Stability: the names in ``__all__`` and their signatures are public and follow semantic
versioning (``descbench.__version__``); everything else in the package is private and may change
in any release. The current signatures are listed in ``CHANGELOG.md`` ("Public API"); a test
fails when a signature changes without that list saying so.

Average precision of one ranked list (``distances`` [N], smaller is better; ``labels`` [N]):
:func:`ap_step` (scikit-learn), :func:`ap_tie_aware` (He et al. 2018), :func:`ap_vlfeat` (VLFeat,
HBench), :func:`ap_trapezoid` (hpatches-benchmark).

Descriptor matching (float32 [N, D] or packed uint8 bits): :func:`nearest_two`,
:func:`mutual_nearest` (exact, ties to the lowest index).

One image pair (image-1 keypoints and descriptors, image-k's, the 3x3 homography from image 1 to
image k): :func:`score_pair` (keypoint retrieval: the true mAP family per query, hit@K,
recall@K; settings :class:`RetrievalParams`), :func:`match_pair` (mutual-NN matching: MMA,
matching score, repeatability, homography estimate and corner error; settings
:class:`MatchingParams`).

One scene's keypoint verification and keypoint retrieval with distractors (Bojanić et al.):
:func:`score_scene_tasks` (image 1's keypoints against the scene's other images,
:class:`Target`, and other scenes' keypoints, :class:`Distractors`; settings
:class:`BojanicParams`; result :class:`SceneTaskResult`).

Two-view relative pose (glue-factory's definitions): :func:`estimate_relative_pose` (OpenCV's
essential matrix or PoseLib; :class:`PoseEstimate`), :func:`relative_pose_error`,
:func:`epipolar_errors`, :func:`epipolar_precision`, :func:`pose_auc`; with depth maps
(:mod:`descbench.metrics.depth`): :func:`sample_depth`, :func:`symmetric_reprojection_error`,
:func:`reprojection_precision`, :func:`covisibility`, :func:`gt_matches_from_pose_depth`,
:func:`gt_match_recall`, :func:`gt_match_precision`.

Homography estimation over pairs: :func:`corner_error`, :func:`homography_accuracy`,
:func:`homography_auc`.

A whole benchmark in this process, for a descriptor given as a callable:
:func:`evaluate_sequences` (image sequences: the workflow's keypoint, scoring and report jobs,
returning its comparison table) and :func:`evaluate_patches` (the HPatches patch benchmarks, for a
callable or a torch module fed as a named family feeds its network).
"""

from __future__ import annotations

import descbench
from descbench.evaluate import evaluate_patches, evaluate_sequences
from descbench.metrics.ap import ap_step, ap_tie_aware, ap_trapezoid, ap_vlfeat
from descbench.metrics.depth import (covisibility, gt_match_precision, gt_match_recall, gt_matches_from_pose_depth,
                                     reprojection_precision, sample_depth, symmetric_reprojection_error)
from descbench.metrics.bojanic import BojanicParams, Distractors, SceneTaskResult, Target, score_scene_tasks
from descbench.metrics.matching import MatchingParams, corner_error, homography_accuracy, homography_auc, match_pair
from descbench.estimators.relative_pose import PoseEstimate, estimate_relative_pose
from descbench.metrics.nn import mutual_nearest, nearest_two
from descbench.metrics.pose import epipolar_errors, epipolar_precision, pose_auc, relative_pose_error
from descbench.metrics.retrieval import PairResult, RetrievalParams, score_pair

__version__ = descbench.__version__

__all__ = [
    "__version__",
    "ap_step",
    "ap_tie_aware",
    "ap_trapezoid",
    "ap_vlfeat",
    "nearest_two",
    "mutual_nearest",
    "RetrievalParams",
    "PairResult",
    "score_pair",
    "MatchingParams",
    "match_pair",
    "BojanicParams",
    "Target",
    "Distractors",
    "SceneTaskResult",
    "score_scene_tasks",
    "corner_error",
    "homography_accuracy",
    "homography_auc",
    "estimate_relative_pose",
    "PoseEstimate",
    "relative_pose_error",
    "epipolar_errors",
    "epipolar_precision",
    "pose_auc",
    "sample_depth",
    "symmetric_reprojection_error",
    "reprojection_precision",
    "covisibility",
    "gt_matches_from_pose_depth",
    "gt_match_recall",
    "gt_match_precision",
    "evaluate_sequences",
    "evaluate_patches",
]
