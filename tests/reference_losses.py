"""Independent, deliberately straightforward reference implementation of the batch losses.

Written from the specification of ``jaxsvr.losses.BATCH_LOSSES`` (the public API: names,
keywords, definitions), independently of the package: it imports nothing from ``jaxsvr`` and
shares no code with ``jaxsvr.losses.mining`` or ``jaxsvr.losses.contrastive``. It exists only so
the vectorised JAX losses can be tested against something obviously correct, so it favours
readability over speed: every anchor is handled on its own with plain Python loops over Python
floats (float64).

Conventions:

* ``sim[i, j]`` is the similarity of video ``i`` and text ``j``; ``rel[i, j]`` their relevance in
  ``[0, 1]``. Matching pairs lie on the diagonal.
* Each loss is a video-to-text part plus a text-to-video part. Both parts use the same per-anchor
  code on an ``(S, R)`` pair whose rows are the anchors: ``(sim, rel)`` for video-to-text (anchor
  video ``i``, other texts ``j``: ``sim[i, j]``, ``rel[i, j]``) and ``(sim.T, rel.T)`` for
  text-to-video (anchor text ``i``, other videos ``j``: ``sim[j, i]``, ``rel[j, i]``). The
  positive of anchor ``i`` is ``S[i][i]`` and its weight ``R[i][i]``.
* Hinge reductions: ``hard`` keeps the largest violation of each anchor (0 without a valid
  negative) and divides the sum over anchors by ``B``; ``all`` divides the sum of every violation
  by ``B (B - 1)``. With ``B = 1`` every loss is 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _relu(x: float) -> float:
    return x if x > 0.0 else 0.0


Matrix = list[list[float]]


def _directions(sim: Any, rel: Any | None = None) -> list[tuple[Matrix, Matrix | None]]:
    """[(S, R) for video-to-text, (S, R) for text-to-video]: anchors on the rows, Python floats."""
    s = np.asarray(sim, dtype=np.float64)
    assert s.ndim == 2 and s.shape[0] == s.shape[1], s.shape
    if rel is None:
        return [(s.tolist(), None), (s.T.tolist(), None)]
    r = np.asarray(rel, dtype=np.float64)
    assert r.shape == s.shape, (r.shape, s.shape)
    return [(s.tolist(), r.tolist()), (s.T.tolist(), r.T.tolist())]


def _reduce(violations: list[list[float]], b: int, hard: bool) -> float:
    """One direction's hinge reduction of the per-anchor violation lists."""
    if hard:
        return sum(max(v, default=0.0) for v in violations) / b
    return sum(sum(v) for v in violations) / (b * (b - 1))


def _hinge_loss(sim, rel, hard: bool, margin_of, is_negative) -> float:
    """Sum over directions of the reduced violations relu(margin + s_neg - s_pos).

    ``margin_of(r)`` gives the margin of a negative with relevance ``r`` to its anchor and
    ``is_negative(s_neg, s_pos, r)`` decides whether an other item is a negative.
    """
    b = np.shape(sim)[0]
    if b == 1:
        return 0.0
    total = 0.0
    for S, R in _directions(sim, rel):
        violations = []
        for i in range(b):
            s_pos = S[i][i]
            v = []
            for j in range(b):
                if j == i:
                    continue
                s_neg = S[i][j]
                r = None if R is None else R[i][j]
                if is_negative(s_neg, s_pos, r):
                    v.append(_relu(margin_of(r) + s_neg - s_pos))
            violations.append(v)
        total += _reduce(violations, b, hard)
    return total


def max_margin(sim, *, margin: float = 0.2, hard: bool = True) -> float:
    """Max-margin hinge over every other item as a negative."""
    return _hinge_loss(sim, None, hard, lambda r: margin, lambda s, p, r: True)


def relevance_margin(sim, rel, *, hard: bool = True) -> float:
    """Max-margin hinge with margin ``1 - rel(anchor, other)``."""
    return _hinge_loss(sim, rel, hard, lambda r: 1.0 - r, lambda s, p, r: True)


def ran(sim, rel, *, tau: float = 0.15, margin: float = 0.2, hard: bool = True) -> float:
    """Max-margin hinge whose negatives are the others with ``rel(anchor, other) < tau``."""
    return _hinge_loss(sim, rel, hard, lambda r: margin, lambda s, p, r: r < tau)


def semi_hard(sim, *, margin: float = 0.2) -> float:
    """Hard-mined max-margin hinge over the negatives no more similar than the positive."""
    return _hinge_loss(sim, None, True, lambda r: margin, lambda s, p, r: s <= p)


def ranp(
    sim,
    rel,
    *,
    tau: float = 0.15,
    margin_neg: float = 0.2,
    margin_pos: float = 0.2,
    hard: bool = True,
) -> float:
    """RAN plus a positive term against the hardest relevant (``rel >= tau``) other item."""
    b = np.shape(sim)[0]
    if b == 1:
        return 0.0
    total = ran(sim, rel, tau=tau, margin=margin_neg, hard=hard)
    for S, R in _directions(sim, rel):
        violations = []
        for i in range(b):
            positives = [S[i][j] for j in range(b) if j != i and R[i][j] >= tau]
            negatives = [S[i][j] for j in range(b) if j != i and R[i][j] < tau]
            if not positives:
                violations.append([])
                continue
            hardest = min(positives)
            violations.append([_relu(margin_pos + s_neg - hardest) for s_neg in negatives])
        total += _reduce(violations, b, hard)
    return total


def _ranking_loss(sim, rel, cost) -> float:
    """Mean over the 2 B (B - 1) (anchor, other) entries of ``cost(s_pos, s_other, w, r)``."""
    b = np.shape(sim)[0]
    if b == 1:
        return 0.0
    total = 0.0
    for S, R in _directions(sim, rel):
        for i in range(b):
            for j in range(b):
                if j == i:
                    continue
                w = None if R is None else R[i][i]
                r = None if R is None else R[i][j]
                total += cost(S[i][i], S[i][j], w, r)
    return total / (2 * b * (b - 1))


def mimm(sim, *, margin: float = 0.2) -> float:
    """MI-MM: mean of relu(margin - (s_pos - s_other)) over both directions."""
    return _ranking_loss(sim, None, lambda p, s, w, r: _relu(margin - (p - s)))


def adaptive_mimm(sim, rel, *, margin: float = 0.4) -> float:
    """MI-MM with the margin scaled by the relevance ``rel[i, i]`` of the anchor's pair."""
    return _ranking_loss(sim, rel, lambda p, s, w, r: _relu(w * margin - (p - s)))


def sms(sim, rel, *, margin: float = 0.6, relax: float = 0.1, eps: float = 1e-3) -> float:
    """SMS: ranks pairs by relevance difference ``W``; pairs of (nearly) equal relevance pull."""

    def cost(p: float, s: float, w: float, r: float) -> float:
        big_w = w - r
        z = big_w * margin - (p - s)
        if big_w > eps:
            return _relu(z)
        if big_w < -eps:
            return _relu(-z)
        return _relu(abs(p - s) - relax)

    return _ranking_loss(sim, rel, cost)


def _logsumexp(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def info_nce(sim, *, temperature: float = 0.05) -> float:
    """Symmetric InfoNCE: per direction -mean over anchors of the log-softmax at the match."""
    b = np.shape(sim)[0]
    total = 0.0
    for S, _ in _directions(sim):
        direction = 0.0
        for i in range(b):
            logits = [S[i][j] / temperature for j in range(b)]
            direction += -(logits[i] - _logsumexp(logits))
        total += direction / b
    return total


def cross_modal_nce(sim, *, temperature: float = 0.07) -> float:
    """ConTra's CML: per pair i, -log of e^{s_ii/T} over the sum of its row and its column."""
    b = np.shape(sim)[0]
    S = [[float(x) / temperature for x in row] for row in np.asarray(sim, np.float64)]
    total = 0.0
    for i in range(b):
        joint = [S[i][j] for j in range(b)] + [S[j][i] for j in range(b)]
        total += _logsumexp(joint) - S[i][i]
    return total / b


def uniformity(x, *, t: float = 2.0) -> float:
    """log of the mean over the pairs i < j of rows of exp(-t ||x_i - x_j||^2)."""
    x = np.asarray(x, np.float64)
    n = len(x)
    terms = [
        math.exp(-t * sum((a - b) ** 2 for a, b in zip(x[i], x[j])))
        for i in range(n)
        for j in range(i + 1, n)
    ]
    return math.log(sum(terms) / len(terms))


def neighbour_nce(anchor, positive, negative, mask, *, temperature: float = 0.07) -> float:
    """Mean over the masked anchors of -log(e^{a.p/T} / (e^{a.p/T} + e^{a.n/T}))."""
    losses = []
    for a, p, n, keep in zip(
        *(np.asarray(x, np.float64) for x in (anchor, positive, negative)), mask
    ):
        if not keep:
            continue
        pos = float(np.dot(a, p)) / temperature
        neg = float(np.dot(a, n)) / temperature
        losses.append(_logsumexp([pos, neg]) - pos)
    return sum(losses) / len(losses) if losses else 0.0


def multi_similarity(
    sim,
    rel,
    *,
    tau: float = 1.0,
    alpha: float = 2.0,
    beta: float = 50.0,
    lam: float = 0.5,
    eps: float = 0.1,
) -> float:
    """Multi-Similarity loss with its pair mining, positives ``rel >= tau`` plus the match."""
    b = np.shape(sim)[0]
    total = 0.0
    for S, R in _directions(sim, rel):
        direction = 0.0
        for i in range(b):
            positives = [S[i][j] for j in range(b) if j == i or R[i][j] >= tau]
            negatives = [S[i][j] for j in range(b) if j != i and R[i][j] < tau]
            kept_neg = [s for s in negatives if s + eps > min(positives)]
            hardest_neg = max(negatives, default=-math.inf)
            kept_pos = [s for s in positives if s - eps < hardest_neg]
            if not kept_pos or not kept_neg:
                continue
            pos_term = math.log(1.0 + sum(math.exp(-alpha * (s - lam)) for s in kept_pos))
            neg_term = math.log(1.0 + sum(math.exp(beta * (s - lam)) for s in kept_neg))
            direction += pos_term / alpha + neg_term / beta
        total += direction / b
    return total


REFERENCE_LOSSES = {
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
