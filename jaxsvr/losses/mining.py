"""Batch losses with online mining over a similarity matrix: hinge losses with hard or all
negatives, relevance-aware negatives and positives, and the max-margin ranking losses.

Inputs: `sim` [B, B] with sim[i, j] = s(video_i, text_j), matching pairs on the diagonal;
`rel` [B, B] with rel[i, j] = R(video_i, text_j) in [0, 1], computed on the host
(`jaxsvr.sampling.pairs`). Every loss is the sum of a video-to-text part (anchors are the
rows: video i, positive text i, other texts j) and a text-to-video part (anchors are the
columns: text i, positive video i, other videos j, with rel[j, i]); the second part is the
first applied to sim.T and rel.T.

Reductions of the hinge losses: `hard=True` keeps the largest violation per anchor
(VSE++, Faghri et al. 2018) and divides the sum over the B anchors by B; `hard=False` sums
every violation and divides by B(B - 1). An anchor without a valid negative adds 0.

- `max_margin`: relu(margin + s_ij - s_ii) (VSE++).
- `relevance_margin`: the same with margin 1 - rel[i, j] ("Relevance-based Margin for
  Contrastively-trained Video Retrieval Models", Falcon et al. ICMR 2022).
- `ran`: relevance-aware negatives: j with rel >= tau leaves the negative pool ("Learning
  video retrieval models with relevance-aware online mining", Falcon et al. ICIAP 2022;
  `tau` 0.15 by default, the paper's headline EPIC-KITCHENS-100 threshold).
- `ranp`: RAN plus relevance-aware positives: the hardest positive p (lowest s_ip among
  j != i with rel >= tau) is pulled above the negatives: relu(margin_pos + s_ij - s_ip),
  reduced like the negative term; an anchor without such a positive adds nothing.
- `semi_hard`: hard negatives among those less similar than the positive (s_ij <= s_ii), as
  in the public RAN code's semi-hard option (FaceNet, Schroff et al. 2015).
- `mimm`, `adaptive_mimm`: the max-margin ranking losses of the EgoVLP/AVION code
  (`MaxMarginRankingLoss`, `AdaptiveMaxMarginRankingLoss`): the mean over all 2B(B - 1)
  off-diagonal entries of relu(w * margin - (s_ii - s_other)), w = 1 or w = rel[i, i].
- `sms`: Symmetric Multi-Similarity (Wang et al., EPIC-KITCHENS-100 MIR challenge 2024,
  xqwang14/SMS-Loss): with W = rel[i, i] - rel(anchor, other) and
  z = W * margin - (s_ii - s_other): relu(z) if W > eps, relu(-z) if W < -eps, and
  relu(|s_ii - s_other| - relax) if |W| <= eps; mean over the 2B(B - 1) entries.

Where `ranp` and `sms` depart from the public code, and the papers' settings:
docs/losses.md.

All are pure jnp functions of their arrays (jit, grad and vmap over a leading axis work);
with batch-sharded embeddings the [B, B] matrix is laid out by the compiler.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def check_inputs(sim: jnp.ndarray, rel: jnp.ndarray | None = None) -> None:
    """Shapes are static under jit, so a wrong one fails at trace time with one line."""
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1]:
        raise ValueError(f"sim must be a square [B, B] matrix, got shape {sim.shape}")
    if rel is not None and rel.shape != sim.shape:
        raise ValueError(f"rel must have the shape of sim {sim.shape}, got {rel.shape}")


def max_margin(sim: jnp.ndarray, *, margin: float = 0.2, hard: bool = True) -> jnp.ndarray:
    """VSE++ hinge relu(margin + s_neg - s_pos), both directions."""
    check_inputs(sim)
    return _both(lambda s, r: _hinge(s, margin, _off_diagonal(s), hard), sim, None)


def relevance_margin(sim: jnp.ndarray, rel: jnp.ndarray, *, hard: bool = True) -> jnp.ndarray:
    """Hinge with the relevance margin 1 - rel(anchor, negative), both directions."""
    check_inputs(sim, rel)
    return _both(lambda s, r: _hinge(s, 1.0 - r, _off_diagonal(s), hard), sim, rel)


def ran(
    sim: jnp.ndarray,
    rel: jnp.ndarray,
    *,
    tau: float = 0.15,
    margin: float = 0.2,
    hard: bool = True,
) -> jnp.ndarray:
    """Relevance-aware negatives: negatives with rel >= tau leave the pool."""
    check_inputs(sim, rel)
    return _both(lambda s, r: _hinge(s, margin, _negatives(s, r, tau), hard), sim, rel)


def ranp(
    sim: jnp.ndarray,
    rel: jnp.ndarray,
    *,
    tau: float = 0.15,
    margin_neg: float = 0.2,
    margin_pos: float = 0.2,
    hard: bool = True,
) -> jnp.ndarray:
    """RAN plus the hardest relevant positive pulled above the negatives."""
    check_inputs(sim, rel)

    def one_way(s, r):
        negatives = _negatives(s, r, tau)
        loss = _hinge(s, margin_neg, negatives, hard)
        positives = _off_diagonal(s) & (r >= tau)
        has_positive = jnp.any(positives, axis=1)
        # lowest similarity among the positives; 0 where there is none (masked below)
        hardest = jnp.min(jnp.where(positives, s, jnp.inf), axis=1)
        hardest = jnp.where(has_positive, hardest, 0.0)
        viol = jax.nn.relu(margin_pos + s - hardest[:, None])
        return loss + _reduce(viol, negatives & has_positive[:, None], hard)

    return _both(one_way, sim, rel)


def semi_hard(sim: jnp.ndarray, *, margin: float = 0.2) -> jnp.ndarray:
    """Hardest negative among those with s_neg <= s_pos, both directions."""
    check_inputs(sim)

    def one_way(s, r):
        valid = _off_diagonal(s) & (s <= jnp.diagonal(s)[:, None])
        return _hinge(s, margin, valid, hard=True)

    return _both(one_way, sim, None)


def mimm(sim: jnp.ndarray, *, margin: float = 0.2) -> jnp.ndarray:
    """Max-margin ranking loss (EgoVLP / AVION MI-MM): mean over 2B(B - 1) entries."""
    check_inputs(sim)
    return _ranking_mean(sim, margin, None)


def adaptive_mimm(sim: jnp.ndarray, rel: jnp.ndarray, *, margin: float = 0.4) -> jnp.ndarray:
    """Adaptive MI-MM: the margin of anchor pair i is scaled by rel[i, i]."""
    check_inputs(sim, rel)
    return _ranking_mean(sim, margin, rel)


def sms(
    sim: jnp.ndarray,
    rel: jnp.ndarray,
    *,
    margin: float = 0.6,
    relax: float = 0.1,
    eps: float = 1e-3,
) -> jnp.ndarray:
    """Symmetric Multi-Similarity loss (mean over the 2B(B - 1) off-diagonal entries)."""
    check_inputs(sim, rel)

    def one_way(s, r):
        pos = jnp.diagonal(s)[:, None]
        w = jnp.diagonal(r)[:, None] - r  # relevance gap between the pair and the other item
        z = w * margin - (pos - s)
        cost = jnp.where(
            w > eps,
            jax.nn.relu(z),
            jnp.where(w < -eps, jax.nn.relu(-z), jax.nn.relu(jnp.abs(pos - s) - relax)),
        )
        return jnp.sum(jnp.where(_off_diagonal(s), cost, 0.0))

    return _both(one_way, sim, rel) / _pairs(sim, 2)


def hardest_negative_relevance(
    sim: jnp.ndarray, rel: jnp.ndarray, tau: float | None = None
) -> jnp.ndarray:
    """[2, B] relevance of each anchor's hardest negative (highest score among the other
    items; with `tau`, among those with rel < tau, RAN's pool): row 0 video-to-text
    anchors, row 1 text-to-video; NaN for an anchor without a valid negative. What hard
    mining picks (the RANP paper's Fig. 2), for analyses; no loss uses it."""
    check_inputs(sim, rel)

    def one_way(s, r):
        valid = _off_diagonal(s) if tau is None else _negatives(s, r, tau)
        pick = jnp.argmax(jnp.where(valid, s, -jnp.inf), axis=1)
        picked = jnp.take_along_axis(r, pick[:, None], axis=1)[:, 0]
        return jnp.where(jnp.any(valid, axis=1), picked, jnp.nan)

    return jnp.stack([one_way(sim, rel), one_way(sim.T, rel.T)])


def _both(one_way, sim, rel):
    """The video-to-text part (rows) plus the text-to-video part (columns)."""
    rel_t = None if rel is None else rel.T
    return one_way(sim, rel) + one_way(sim.T, rel_t)


def _off_diagonal(sim: jnp.ndarray) -> jnp.ndarray:
    return ~jnp.eye(sim.shape[0], dtype=bool)


def _negatives(sim, rel, tau):
    return _off_diagonal(sim) & (rel < tau)


def _hinge(sim, margin, valid, hard: bool) -> jnp.ndarray:
    """relu(margin + s_ij - s_ii) over the valid negatives, reduced (one direction)."""
    viol = jax.nn.relu(margin + sim - jnp.diagonal(sim)[:, None])
    return _reduce(viol, valid, hard)


def _reduce(viol, valid, hard: bool) -> jnp.ndarray:
    """Hard: sum over anchors of the largest valid violation / B; all: sum / B(B - 1)."""
    viol = jnp.where(valid, viol, 0.0)  # violations are >= 0, so 0 is neutral for max
    if hard:
        return jnp.sum(jnp.max(viol, axis=1)) / _anchors(viol)
    return jnp.sum(viol) / _pairs(viol, 1)


def _ranking_mean(sim, margin, rel):
    def one_way(s, r):
        w = 1.0 if r is None else jnp.diagonal(r)[:, None]
        cost = jax.nn.relu(w * margin - (jnp.diagonal(s)[:, None] - s))
        return jnp.sum(jnp.where(_off_diagonal(s), cost, 0.0))

    return _both(one_way, sim, rel) / _pairs(sim, 2)


def _anchors(x: jnp.ndarray) -> int:
    return max(x.shape[0], 1)


def _pairs(x: jnp.ndarray, directions: int) -> int:
    """directions * B(B - 1), at least 1 (a batch of one has no pair and costs 0)."""
    b = x.shape[0]
    return max(directions * b * (b - 1), 1)
