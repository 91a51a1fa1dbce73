"""Semantic relevance between videos and captions, computed host-side in NumPy.

- `class_sets`: ragged verb/noun class sets, multi-caption aggregation (rho).
- `classes`: EPIC-style class relevance, full matrices and fast batch matrices.
- `captions`: spaCy parsing of captions (tokens, content lemmas, verbs, nouns).
- `wordnet`: WordNet 3.0 for NLTK from Debian's packages, without downloads.
- `proxies`: caption proxies BoW, PoS, SYN, METEOR (`meteor`: exact, fast NLTK METEOR),
  video-to-caption relevance, thresholded semantic positives.
- `analysis`: relevant captions per threshold, per-video correlation between proxies.
- `python -m jaxsvr.relevance`: the command line (see `__main__`).
"""

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.relevance.classes import RelevanceIndex, class_relevance, iou_table

__all__ = ["ClassSets", "RelevanceIndex", "class_relevance", "iou_table"]
