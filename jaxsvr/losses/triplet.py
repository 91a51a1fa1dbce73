"""Triplet losses over sampled (anchor, positive, negative) triplets.

One triplet (a, p, n) with margin m costs relu(m + d(a, p) - d(a, n)) (JPoSE, Wray et al.
ICCV 2019, eq. 1), with d the squared Euclidean distance of unit vectors (2 - 2 cos; the
default) or the cosine distance 1 - cos. The margin is either fixed (JPoSE: 1.0) or the
relevance margin of "Relevance-based Margin for Contrastively-trained Video Retrieval
Models": m = 1 - R(a, n) at the action level and m = ½ (1 - IoU) of that part of speech at
the verb/noun level (computed on the host by `jaxsvr.sampling.triplets`).

Embeddings come in the sampler's row layout ([B, M, d] per modality,
`jaxsvr.sampling.triplets.TripletLayout`): column 0 is the anchor, then per level K
positives and K negatives. A level has four pair types, anchor modality ->
positive/negative modality: text-video `tv`, video-text `vt`, text-text `tt`, video-video
`vv` (JPoSE weights 2, 1, 1, 1).
Each term is the mean over the B * K triplets, so terms are comparable across batch sizes.
Models whose score is not a dot product of unit vectors (HGR) pass their `pair_similarity`
as `pair_score`: d is then 2 - 2 s (or 1 - s) of the score s, and only the cross-modal pair
types exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from jaxsvr.sampling.triplets import TripletLayout

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
    return distance_from_score(jnp.sum(a * b, axis=-1), kind)


def triplet_loss(
    anchor: jnp.ndarray,
    positive: jnp.ndarray,
    negative: jnp.ndarray,
    margin: jnp.ndarray,
    kind: str = "squared_euclidean",
) -> jnp.ndarray:
    """relu(margin + d(anchor, positive) - d(anchor, negative)) for one triplet ([d] each)."""
    return jax.nn.relu(margin + distance(anchor, positive, kind) - distance(anchor, negative, kind))


def distance_from_score(score: jnp.ndarray, kind: str = "squared_euclidean") -> jnp.ndarray:
    """The distance of a pair from its score: for unit vectors the score is the cosine, and
    |a - b|^2 = 2 - 2 cos (squared Euclidean) or 1 - cos (cosine distance)."""
    if kind == "squared_euclidean":
        return 2.0 - 2.0 * score
    if kind == "cosine":
        return 1.0 - score
    raise ValueError(f"unknown distance {kind!r}: use one of {DISTANCES}")


def triplet_terms(
    video: Mapping[str, Any],
    text: Mapping[str, Any],
    margin: jnp.ndarray,
    *,
    levels: tuple[str, ...],
    layout: TripletLayout,
    distance_kind: str = "squared_euclidean",
    pair_types: tuple[str, ...] = tuple(PAIR_TYPES),
    pair_score: Callable[[Any, Any], Mapping[str, jnp.ndarray]] | None = None,
) -> dict[str, jnp.ndarray]:
    """Mean triplet loss per (level, pair type).

    Args:
      video, text: the embeddings of the batch rows in the sampler layout, every array
        [B, M, ...]: {level: [B, M, d]} unit vectors for dot-product models, or whatever a
        model's `pair_score` reads.
      margin: [B, n_levels, K] margins, levels in the layout's slot order.
      levels: the model's levels to train (a subset of the layout's).
      layout: where the anchor, positives and negatives of each level sit.
      distance_kind: "squared_euclidean" or "cosine".
      pair_types: the pair types to compute (keys of PAIR_TYPES).
      pair_score: None for unit-vector embeddings (score = dot product, any pair type);
        else a function (video_emb, text_emb) -> {level: [n]} scoring aligned rows, for
        models whose score is not a dot product (cross-modal pair types only).

    Returns:
      {"{level}_{pair}": scalar}, e.g. "action_tv".
    """
    emb = {"video": video, "text": text}
    terms = {}
    for level in levels:
        slot, pos, neg = layout.slot(level), layout.positives(level), layout.negatives(level)
        if neg.start != pos.stop:
            raise ValueError("the layout must hold a level's negatives right after its positives")
        rows = slice(pos.start, neg.stop)
        anchors = {m: _cols(emb[m], level, TripletLayout.ANCHOR, pair_score) for m in emb}
        others = {m: _cols(emb[m], level, rows, pair_score) for m in emb}
        terms.update(
            level_terms(
                level,
                anchors,
                others,
                margin[:, slot],
                distance_kind=distance_kind,
                pair_types=pair_types,
                pair_score=pair_score,
            )
        )
    return terms


def level_terms(
    level: str,
    anchors: Mapping[str, Any],
    others: Mapping[str, Any],
    margin: jnp.ndarray,
    *,
    distance_kind: str = "squared_euclidean",
    pair_types: tuple[str, ...] = tuple(PAIR_TYPES),
    pair_score: Callable[[Any, Any], Mapping[str, jnp.ndarray]] | None = None,
) -> dict[str, jnp.ndarray]:
    """Mean triplet loss per pair type of one level.

    Args:
      level: the level, for the term names (and the `pair_score` output to read).
      anchors: {modality: the anchors' embeddings}: [B, d] unit vectors of this level, or a
        `pair_score` model's embedding pytree with leaves [B, ...].
      others: {modality: the level's K positives then K negatives}: [B, 2K, d], or a
        pytree with leaves [B, 2K, ...].
      margin: [B, K] margins of the level.
      distance_kind, pair_types, pair_score: as `triplet_terms`.

    Each modality's rows are scored together ([B, 2K]) and split after, so the gradients
    flow back through one slice per modality, not one per pair type and side.

    Returns:
      {"{level}_{pair}": scalar}.
    """
    k = margin.shape[-1]
    terms = {}
    for pair in pair_types:
        a_mod, x_mod = PAIR_TYPES[pair]
        scores = _scores(anchors[a_mod], others[x_mod], a_mod, x_mod, level, pair_score)
        d_pos = distance_from_score(scores[:, :k], distance_kind)
        d_neg = distance_from_score(scores[:, k:], distance_kind)
        terms[f"{level}_{pair}"] = jnp.mean(jax.nn.relu(margin + d_pos - d_neg))
    return terms


def _cols(emb, level: str, cols, pair_score):
    """Columns `cols` of a modality's embeddings: the level's array for unit-vector
    embeddings, the whole pytree for a `pair_score` model."""
    if pair_score is None:
        return emb[level][:, cols]
    return jax.tree.map(lambda e: e[:, cols], emb)


def _scores(anchor, others, a_mod: str, x_mod: str, level: str, pair_score) -> jnp.ndarray:
    """[B, K] scores of each anchor ([B, ...], modality a_mod) with its K rows `others`
    ([B, K, ...], x_mod)."""
    if pair_score is None:
        return jnp.einsum("bd,bkd->bk", anchor, others)
    if a_mod == x_mod:
        raise ValueError("a pair_score model scores video-text pairs only")
    b, k = jax.tree.leaves(others)[0].shape[:2]
    anchor = jax.tree.map(
        lambda e: jnp.broadcast_to(e[:, None], (b, k, *e.shape[1:])).reshape(b * k, *e.shape[1:]),
        anchor,
    )
    others = jax.tree.map(lambda e: e.reshape(b * k, *e.shape[2:]), others)
    video, text = (anchor, others) if a_mod == "video" else (others, anchor)
    return pair_score(video, text)[level].reshape(b, k)
