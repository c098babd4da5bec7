"""Robust model estimators (layer 1): pure computations on matched points, no file I/O.

:mod:`descbench.estimators.homography`: glue-factory's homography estimators (a score-weighted
DLT, OpenCV's RANSAC family and PoseLib) behind one function and one registry of names.
"""
