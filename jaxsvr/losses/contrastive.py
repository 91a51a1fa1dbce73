"""Softmax and log-sum-exp batch losses over a similarity matrix.

Same inputs as `jaxsvr.losses.mining`: `sim` [B, B] (matching pairs on the diagonal) and,
where used, `rel` [B, B] = R(video_i, text_j); each loss sums its video-to-text (rows)
and text-to-video (columns) parts.

- `info_nce`: symmetric InfoNCE / NormSoftmax (Oord et al. 2018; the `NormSoftmaxLoss` of
  the EgoVLP and RAN code): -mean_i log softmax_j(s_ij / T)[i] per direction.
- `cross_modal_nce`: ConTra's cross-modal NCE (Fragomeni et al. ACCV 2022, eq. 6): one
  joint denominator per pair i over its row and its column,
  -mean_i [s_ii / T - log(sum_j exp(s_ij / T) + sum_j exp(s_ji / T))]
  (s_ii appears in both sums, as in the paper and the public code).

ConTra's other two terms work on embeddings rather than a score matrix:
- `uniformity`: log of the mean of exp(-t ||u - u'||^2) over all pairs of rows (Wang &
  Isola 2020), applied to the 2B clip and sentence embeddings (t = 2).
- `neighbour_nce`: each anchor's positive against a single negative, its clip's temporal
  neighbour with another narration: -log(e^{a.p/T} / (e^{a.p/T} + e^{a.n/T})), averaged
  over the anchors that have a neighbour (`mask`); 0 when none has. With K neighbours
  ([B, K, d]) the softmax runs over the positive and every existing neighbour.
- `multi_similarity`: the Multi-Similarity loss (Wang et al., CVPR 2019) across modalities:
  for anchor i, positives P = {j : rel[i, j] >= tau} plus the paired item i, negatives the
  rest. Pair mining as in the paper: a negative is kept if s_ij + eps > min_P s, a
  positive if s_ij - eps < max_N s; an anchor with no mined positive or negative is
  skipped. Per anchor
    1/alpha log(1 + sum_P' exp(-alpha (s - lam))) + 1/beta log(1 + sum_N' exp(beta (s - lam))),
  summed over anchors and divided by B.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsvr.losses.mining import check_inputs


def info_nce(sim: jnp.ndarray, *, temperature: float = 0.05) -> jnp.ndarray:
    """Symmetric InfoNCE: cross-entropy of the matching pair in each row and column."""
    check_inputs(sim)

    def one_way(s):
        return -jnp.mean(jnp.diagonal(jax.nn.log_softmax(s / temperature, axis=1)))

    return one_way(sim) + one_way(sim.T)


def cross_modal_nce(sim: jnp.ndarray, *, temperature: float = 0.07) -> jnp.ndarray:
    """ConTra's cross-modal NCE: the positive against its row and column jointly."""
    check_inputs(sim)
    s = sim / temperature
    joint = jax.nn.logsumexp(jnp.concatenate([s, s.T], axis=1), axis=1)  # row i + column i
    return jnp.mean(joint - jnp.diagonal(s))


def uniformity(x: jnp.ndarray, *, t: float = 2.0) -> jnp.ndarray:
    """log mean_{i < j} exp(-t ||x_i - x_j||^2) over the rows of x [n, d] (n >= 2)."""
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"uniformity needs at least 2 rows, got {n}")
    sq = jnp.sum(x * x, axis=1)
    dist = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)
    upper = jnp.triu(jnp.ones((n, n), bool), k=1)
    logits = jnp.where(upper, -t * dist, -jnp.inf)
    return jax.nn.logsumexp(logits) - jnp.log(n * (n - 1) / 2)


def neighbour_nce(
    anchor: jnp.ndarray,
    positive: jnp.ndarray,
    negative: jnp.ndarray,
    mask: jnp.ndarray,
    *,
    temperature: float = 0.07,
) -> jnp.ndarray:
    """Softmax of each anchor's positive against its neighbour negative(s).

    Args:
      anchor, positive: [B, d] embeddings (row k of each belong together).
      negative: [B, d], one neighbour per anchor, or [B, K, d], K neighbours.
      mask: [B] bool, anchors that have a neighbour negative; [B, K] with K neighbours
        (which of them exist; an anchor counts when one does).
    """
    pos = jnp.sum(anchor * positive, axis=-1) / temperature
    if negative.ndim == 3:
        neg = jnp.einsum("bd,bkd->bk", anchor, negative) / temperature
        logits = jnp.concatenate([pos[:, None], jnp.where(mask, neg, -jnp.inf)], axis=1)
        loss = jax.nn.logsumexp(logits, axis=1) - pos
        rows = jnp.any(mask, axis=1)
        return jnp.sum(jnp.where(rows, loss, 0.0)) / jnp.maximum(jnp.sum(rows), 1)
    neg = jnp.sum(anchor * negative, axis=-1) / temperature
    loss = jnp.logaddexp(pos, neg) - pos
    count = jnp.sum(mask)
    return jnp.sum(jnp.where(mask, loss, 0.0)) / jnp.maximum(count, 1)


def multi_similarity(
    sim: jnp.ndarray,
    rel: jnp.ndarray,
    *,
    tau: float = 1.0,
    alpha: float = 2.0,
    beta: float = 50.0,
    lam: float = 0.5,
    eps: float = 0.1,
) -> jnp.ndarray:
    """Multi-Similarity loss with relevance-defined positives (rel >= tau), both directions."""
    check_inputs(sim, rel)

    def one_way(s, r):
        positive = (r >= tau) | jnp.eye(s.shape[0], dtype=bool)
        negative = ~positive
        min_pos = jnp.min(jnp.where(positive, s, jnp.inf), axis=1, keepdims=True)
        max_neg = jnp.max(jnp.where(negative, s, -jnp.inf), axis=1, keepdims=True)
        pos_kept = positive & (s - eps < max_neg)
        neg_kept = negative & (s + eps > min_pos)
        used = jnp.any(pos_kept, axis=1) & jnp.any(neg_kept, axis=1)
        pos_term = _log1p_sum_exp(-alpha * (s - lam), pos_kept) / alpha
        neg_term = _log1p_sum_exp(beta * (s - lam), neg_kept) / beta
        return jnp.sum(jnp.where(used, pos_term + neg_term, 0.0)) / s.shape[0]

    return one_way(sim, rel) + one_way(sim.T, rel.T)


def _log1p_sum_exp(x: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """log(1 + sum_j exp(x_ij) over mask), per row, without overflow or NaN gradients."""
    x = jnp.where(mask, x, 0.0)  # keeps exp() of the masked entries finite
    top = jax.lax.stop_gradient(jnp.maximum(jnp.max(x, axis=1), 0.0))
    total = jnp.sum(jnp.where(mask, jnp.exp(x - top[:, None]), 0.0), axis=1)
    return top + jnp.log(jnp.exp(-top) + total)
