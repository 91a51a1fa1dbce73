"""Pure loss functions (jit- and vmap-friendly), named so configs can look them up.

- `triplet`: triplet losses with fixed or relevance-based margins over triplets sampled
  offline (JPoSE / MME; Wray et al. 2019, and "Relevance-based Margin for
  Contrastively-trained Video Retrieval Models").
- `mining`: batch hinge losses with online mining over a [B, B] similarity matrix
  (max-margin, relevance margin, RAN, RANP, semi-hard) and the max-margin ranking losses
  MI-MM, adaptive MI-MM and SMS.
- `contrastive`: InfoNCE, ConTra's cross-modal NCE, Multi-Similarity; and ConTra's
  embedding terms `uniformity` and `neighbour_nce` (used by the `contra` objective).

`BATCH_LOSSES` maps config names (`config.loss.name`) to the batch losses; their keyword
arguments are config keys `config.loss.<name>.<keyword>` (`jaxsvr.configs`).
"""

from __future__ import annotations

import inspect

from jaxsvr.losses.contrastive import (
    cross_modal_nce,
    info_nce,
    multi_similarity,
    neighbour_nce,
    uniformity,
)
from jaxsvr.losses.mining import (
    adaptive_mimm,
    max_margin,
    mimm,
    ran,
    ranp,
    relevance_margin,
    semi_hard,
    sms,
)
from jaxsvr.losses.triplet import PAIR_TYPES, triplet_loss, triplet_terms

BATCH_LOSSES = {
    f.__name__: f
    for f in (
        max_margin,
        relevance_margin,
        ran,
        ranp,
        semi_hard,
        mimm,
        adaptive_mimm,
        sms,
        info_nce,
        cross_modal_nce,
        multi_similarity,
    )
}


def uses_relevance(fn) -> bool:
    """Whether a batch loss takes the relevance matrix (its second positional argument)."""
    return "rel" in inspect.signature(fn).parameters


def keyword_defaults(fn) -> dict:
    """The keyword-only arguments of a batch loss and their defaults."""
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


__all__ = [
    "BATCH_LOSSES",
    "cross_modal_nce",
    "neighbour_nce",
    "uniformity",
    "PAIR_TYPES",
    "adaptive_mimm",
    "info_nce",
    "keyword_defaults",
    "max_margin",
    "mimm",
    "multi_similarity",
    "ran",
    "ranp",
    "relevance_margin",
    "semi_hard",
    "sms",
    "triplet_loss",
    "triplet_terms",
    "uses_relevance",
]
