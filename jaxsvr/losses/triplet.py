"""Triplet losses over sampled (anchor, positive, negative) triplets.

One triplet (a, p, n) with margin m costs relu(m + d(a, p) - d(a, n)) (JPoSE, Wray et al.
ICCV 2019, eq. 1), with d the squared Euclidean distance of unit vectors (2 - 2 cos; the
default) or the cosine distance 1 - cos. The margin is either fixed (JPoSE: 1.0) or the
relevance margin of "Relevance-based Margin for Contrastively-trained Video Retrieval
Models": m = 1 - R(a, n) at the action level and m = ½ (1 - IoU) of that part of speech at
the verb/noun level (computed on the host by `jaxsvr.data.triplets`).

Embeddings come in the sampler's row layout ([B, M, d] per modality, see
`jaxsvr.data.triplets.row_layout`): row 0 is the anchor, then per level K positives and K
negatives. A level has four pair types, anchor modality -> positive/negative modality:
text-video `tv`, video-text `vt`, text-text `tt`, video-video `vv` (JPoSE weights 2, 1, 1, 1).
Each term is the mean over the B * K triplets, so terms are comparable across batch sizes.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

# pair type: (anchor modality, positive/negative modality)
PAIR_TYPES = {
    "tv": ("text", "video"),
    "vt": ("video", "text"),
    "tt": ("text", "text"),
    "vv": ("video", "video"),
}
DISTANCES = ("squared_euclidean", "cosine")


def distance(a: jnp.ndarray, b: jnp.ndarray, kind: str = "squared_euclidean") -> jnp.ndarray:
    """Distance of unit vectors along the last axis."""
    cos = jnp.sum(a * b, axis=-1)
    if kind == "squared_euclidean":
        return 2.0 - 2.0 * cos
    if kind == "cosine":
        return 1.0 - cos
    raise ValueError(f"unknown distance {kind!r}: use one of {DISTANCES}")


def triplet_loss(
    anchor: jnp.ndarray,
    positive: jnp.ndarray,
    negative: jnp.ndarray,
    margin: jnp.ndarray,
    kind: str = "squared_euclidean",
) -> jnp.ndarray:
    """relu(margin + d(anchor, positive) - d(anchor, negative)) for one triplet ([d] each)."""
    return jax.nn.relu(margin + distance(anchor, positive, kind) - distance(anchor, negative, kind))


# vmapped over K triplets of one anchor, then over the B anchors
_per_anchor = jax.vmap(triplet_loss, in_axes=(None, 0, 0, 0, None))
_batched = jax.vmap(_per_anchor, in_axes=(0, 0, 0, 0, None))


def triplet_terms(
    video: Mapping[str, jnp.ndarray],
    text: Mapping[str, jnp.ndarray],
    margin: jnp.ndarray,
    *,
    levels: tuple[str, ...],
    level_index: Mapping[str, int],
    num_triplets: int,
    distance_kind: str = "squared_euclidean",
) -> dict[str, jnp.ndarray]:
    """Mean triplet loss per (level, pair type).

    Args:
      video, text: {level: [B, M, d]} embeddings of the batch rows in the sampler layout.
      margin: [B, n_levels, K] margins, levels in the sampler's order.
      levels: the model's levels to train (a subset of the sampler's).
      level_index: level -> its position in the sampler layout.
      num_triplets: K, triplets per anchor and level.
      distance_kind: "squared_euclidean" or "cosine".

    Returns:
      {"{level}_{pair}": scalar}, e.g. "action_tv".
    """
    k = num_triplets
    emb = {"video": video, "text": text}
    terms = {}
    for level in levels:
        slot = level_index[level]
        pos = slice(1 + 2 * k * slot, 1 + 2 * k * slot + k)
        neg = slice(1 + 2 * k * slot + k, 1 + 2 * k * (slot + 1))
        for pair, (a_mod, x_mod) in PAIR_TYPES.items():
            a = emb[a_mod][level][:, 0]
            x = emb[x_mod][level]
            losses = _batched(a, x[:, pos], x[:, neg], margin[:, slot], distance_kind)
            terms[f"{level}_{pair}"] = jnp.mean(losses)
    return terms
