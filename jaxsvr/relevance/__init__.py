"""Stage 3 — relevance: how relevant each caption is to each clip, host-side NumPy.

- `classes`: EPIC-style class relevance (1/2 IoU of verb classes + 1/2 IoU of noun
  classes), full matrices and fast batch matrices (`RelevanceIndex`).
- `levels`: relevance at the levels a model scores (action, verb, noun) for samplers.
- `proxies`: caption proxies BoW, PoS, SYN, METEOR (`meteor`: exact, fast NLTK METEOR),
  video-to-caption relevance, thresholded semantic positives.
- `caption_classes`: verb/noun classes of captioned datasets (YouCook2, MSR-VTT) from
  their captions -> their `Annotations`.
- `split_relevance`: a run's test relevance and training positives under a
  `RelevanceSpec` (explicit settings, no config).
- `analysis`: relevant captions per threshold, per-video correlation between proxies.
- `python -m jaxsvr.relevance`: the command line (see `__main__`).

A new caption proxy goes into `proxies` (its name in `proxies.NAMES`).
"""

from jaxsvr.relevance.classes import RelevanceIndex, class_relevance, iou_table

__all__ = ["RelevanceIndex", "class_relevance", "iou_table"]
