"""HPatches *patch* benchmarks: patch datasets, patch descriptors and their evaluations.

Vocabulary (HPatches, Balntas et al. CVPR 2017, and the hpatches-release layout):

* a *sequence* (= scene) folder holds 16 *patch-images* (strips) ``ref, e1..e5, h1..h5, t1..t5``;
  each is a grayscale PNG of width 65 and height 65*N: N patches of 65x65 stacked vertically;
* row i is the same physical patch in all 16 strips of a sequence: ``ref`` is cut from image 1,
  ``e<k>``/``h<k>``/``t<k>`` from image k+1 with easy/hard/tough affine jitter;
* a patch is named ``<sequence>.<type>.<index>`` (HBench signatures), a strip
  ``<sequence>.<type>``.

Modules: :mod:`.layout` (read/write/validate strips), :mod:`.generate` (patches from any
sequence dataset), :mod:`.describe` (registry descriptors on patches, CSV import),
:mod:`.hbench` (HBench image matching and patch/image retrieval, seeds 002/003),
:mod:`.hpbench` (hpatches-benchmark verification / matching / retrieval).
"""

from __future__ import annotations

PATCH_SIZE = 65  # side of one HPatches patch in pixels
JITTERS = ("e", "h", "t")  # easy, hard, tough
JITTER_NAMES = {"e": "easy", "h": "hard", "t": "tough"}
# The 16 patch-images of a sequence, in hpatches-release's order.
PATCH_TYPES = ("ref",) + tuple(f"{j}{k}" for j in JITTERS for k in range(1, 6))

__all__ = ["PATCH_SIZE", "JITTERS", "JITTER_NAMES", "PATCH_TYPES"]
