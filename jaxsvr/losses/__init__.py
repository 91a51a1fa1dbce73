"""Pure loss functions (jit- and vmap-friendly), named so configs can look them up.

- `triplet`: triplet losses with fixed or relevance-based margins over sampled triplets
  (JPoSE / MME; Wray et al. 2019, and "Relevance-based Margin for Contrastively-trained
  Video Retrieval Models").
Batch-mining and contrastive losses join in later modules (`mining`, `contrastive`).
"""

from jaxsvr.losses.triplet import PAIR_TYPES, triplet_loss, triplet_terms

__all__ = ["PAIR_TYPES", "triplet_loss", "triplet_terms"]
