"""The run's figures by name, and their captions (what each shows, the metric's definition and
parameters). Data only: the workflow imports it at parse time (matplotlib and pandas are
imported by the plotting job alone, :mod:`descbench.report.plots`)."""

FIGURES = ("mma", "homography_accuracy", "roc", "verification_pr", "per_scene_map", "rank_histogram", "keypoint_stats")
CAPTIONS = {
    "mma": "Mean matching accuracy vs threshold: for each image pair (1, k), the fraction of mutual-nearest-neighbour "
           "descriptor matches whose reprojection error |H p1 - p2| is <= t px, averaged over pairs (D2-Net); all pairs, "
           "illumination (i_) and viewpoint (v_) scenes.",
    "homography_accuracy": "Homography accuracy vs threshold: fraction of pairs whose homography estimated by RANSAC "
                           "(matching.ransac_px) from the mutual-NN matches has a mean corner error <= t px; failures "
                           "count as never accurate.",
    "roc": "ROC of descriptor matching as a binary classifier (threshold matcher): per pair, every keypoint pair is "
           "positive iff its reprojection error <= matching.classifier_epsilon_px; the TPR at each FPR is averaged "
           "over pairs (vertical averaging). Dashed diagonal: chance.",
    "verification_pr": "Keypoint verification precision-recall: the pooled list of every scene (each query's nearest "
                       "candidate in images 2..6 and in the distractor sets, label +1 iff it is the ground truth), "
                       "sorted by descriptor distance.",
    "per_scene_map": "True mAP per scene (mean AP over queries with a ground truth, scoring.gt / tau_px), scenes "
                     "sorted by their mean over the descriptors; illumination and viewpoint scenes apart.",
    "rank_histogram": "Rank of the ground-truth keypoint among all image-k keypoints (queries with R = 1; rank under "
                      "scoring.tie_policy), fraction of queries per rank bin.",
    "keypoint_stats": "Keypoint sets: mean keypoints per image and repeatability at matching.repeatability_px "
                      "(SuperPoint definition, pooled over pairs).",
}
