"""Semantic relevance between videos and captions, computed host-side in NumPy.

- `class_sets`: ragged verb/noun class sets, multi-caption aggregation (rho).
- `classes`: EPIC-style class relevance, full matrices and fast batch matrices.
- `python -m jaxsvr.relevance`: the command line (see `__main__`).
Caption proxies (bag-of-words, PoS, synsets, METEOR) join this package later.
"""

from jaxsvr.relevance.class_sets import ClassSets
from jaxsvr.relevance.classes import RelevanceIndex, class_relevance, iou_table

__all__ = ["ClassSets", "RelevanceIndex", "class_relevance", "iou_table"]
