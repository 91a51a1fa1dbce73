"""Rank-aware retrieval metrics under semantic relevance, EPIC-KITCHENS-100 semantics.

`evaluate(sim, rel)` scores a similarity matrix S [n_videos, n_texts] against a relevance
matrix R in [0, 1]: video-to-text (v2t) ranks each row, text-to-video (t2v) each column,
and `_avg` is their mean. All keys of the result:

- `ndcg_*`: nDCG as the EK-100 multi-instance retrieval benchmark computes it: gain r,
  discount log2(p + 1) for ranks p from 1, and only the first K_i ranked positions count,
  K_i = #{j: R_ij > 0}; IDCG from R sorted descending with the same cut-off.
- `ndcg_exp_*`: gain 2^r - 1 ("On Semantic Similarity in Video Retrieval", Wray et al.
  CVPR 2021, eq. 2); `ndcg_nocut_*`: linear gain without the K_i cut-off.
- `map_*`: mAP as the EK-100 benchmark computes it: an item is relevant when R = 1 exactly,
  and AP_i = 1/|{j: R_ij = 1}| sum over ranks k holding an R = 1 item of
  (sum_{l <= k} r(l)) / k. The numerator sums *graded* relevance (partially relevant items
  ranked above raise precision), exactly as the official code does; it is not the
  textbook AP. `map_binary_*` is standard binary AP over the same R = 1 items.
- `r1_*`, `r5_*`, `r10_*` (percent), `medr_*`, `meanr_*` (1-based rank of the best-ranked
  positive), `geomean_*` (of R@1, R@5, R@10), `rsum` (R@{1,5,10} of both directions);
  positives are items with R >= `threshold` (default 1), so a query may have several.
- with `bounds=True`, the lower bound of recall at a relevance threshold ("On Semantic
  Similarity in Video Retrieval", Wray et al. CVPR 2021, Fig. 5: every item with
  R >= `threshold` a positive): `r1_lower_*`, `r5_lower_*`, `r10_lower_*`,
  `geomean_lower_*` and `rsum_lower` count a query found at K only when its *worst*-ranked
  positive is within K; the plain `r*` and `geomean_*` keys, which use the best-ranked
  positive, are the upper bound. The paper's positives are SYN relevance > 0.8 (strict);
  `threshold` is inclusive, so a threshold just above 0.8 (e.g. 0.8001) gives its set.
- `n_queries_*`, `excluded_{ndcg,map,recall}_*`: queries without a relevant item (none with
  R > 0, none with R = 1, none with R >= threshold) are left out of that metric's mean and
  counted here; a metric with no query left is null, never NaN.
- `tied_*`: queries whose similarity row holds equal values. Ties are ranked least relevant
  first (pessimistic; see `query_stats`), so results equal the official evaluation on
  tie-free inputs and a model never gains from ties.

nDCG and mAP are fractions in [0, 1], as the official code returns them (published tables
print them x100); recalls are percentages, as retrieval papers report them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pkgutil
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.evaluation.query_stats import QueryStats

DIRECTIONS = ("v2t", "t2v")
ENGINES = ("numpy", "jax")  # jaxsvr.evaluation.<name>_engine.query_stats
BACKENDS = ("auto", *ENGINES)  # config.eval.backend, `evaluate(backend=)`
AVERAGED = ("ndcg", "ndcg_exp", "ndcg_nocut", "map", "map_binary")


def evaluate(
    sim,
    rel,
    *,
    threshold: float = 1.0,
    backend: str = "auto",
    workers: int | None = None,
    bounds: bool = False,
) -> dict[str, float | int | None]:
    """All metrics of `sim` against `rel` (see the module docstring for every key).

    Args:
      sim: [n_videos, n_texts] similarities (NumPy or JAX array), finite.
      rel: [n_videos, n_texts] relevance in [0, 1].
      threshold: relevance from which an item counts as a positive for R@K and ranks.
      backend: "numpy" (CPU), "jax" (jitted; for GPU/TPU) or "auto": "jax" when JAX is
        already imported and its default backend is an accelerator, else "numpy".
      workers: CPU threads for the NumPy engine.
      bounds: add the lower-bound recall keys (`*_lower_*`, module docstring).

    Returns:
      A flat dict of Python floats/ints (None for a metric without queries).

    Raises:
      InputError: shapes differ, non-finite similarities, or relevance outside [0, 1].
    """
    check_inputs(sim, rel, threshold)
    # engines by module name (imported on first use: the JAX one costs an import of JAX)
    engine = importlib.import_module(f"jaxsvr.evaluation.{choose_backend(backend)}_engine")
    v2t, t2v = engine.query_stats(sim, rel, threshold=threshold, workers=workers)
    return summarize(v2t, t2v, bounds=bounds)


def choose_backend(backend: str, *, import_jax: bool = False) -> str:
    """Resolves "auto": jitted JAX on an accelerator, NumPy on CPU (faster there).

    Args:
      backend: "auto", "numpy" or "jax".
      import_jax: for "auto", import JAX to look for an accelerator (costs start-up
        time, docs/benchmarks.md#evaluation; CLIs do this) when an accelerator plugin is
        installed (`accelerator_plugins`); without one JAX can only run on the CPU, so it
        is not imported. Otherwise only an already imported JAX is asked, so library
        calls stay cheap.
    """
    if backend not in BACKENDS:
        raise InputError(f"unknown evaluation backend {backend!r}: use one of {BACKENDS}")
    if backend != "auto":
        return backend
    if "jax" not in sys.modules and not (import_jax and accelerator_plugins()):
        return "numpy"
    import jax

    return "jax" if jax.default_backend() != "cpu" else "numpy"


def accelerator_plugins() -> list[str]:
    """The JAX accelerator plugins installed, found as JAX finds them (the `jax_plugins`
    entry points and namespace package; libtpu for TPUs) without importing JAX."""
    names = [entry.name for entry in importlib.metadata.entry_points(group="jax_plugins")]
    spec = importlib.util.find_spec("jax_plugins")
    if spec is not None and spec.submodule_search_locations:
        names += [m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)]
    if importlib.util.find_spec("libtpu") is not None:
        names.append("libtpu")
    return sorted(set(names))


def check_inputs(sim, rel, threshold: float = 1.0) -> None:
    """Raises InputError (one line) unless sim/rel are equal-shape 2-D, finite, R in [0, 1]."""
    if sim.ndim != 2 or rel.ndim != 2 or sim.shape != rel.shape:
        raise InputError(
            f"similarity {tuple(sim.shape)} and relevance {tuple(rel.shape)} must "
            "be 2-D with the same [n_videos, n_texts] shape"
        )
    if sim.size == 0:
        raise InputError(
            f"similarity {tuple(sim.shape)} is empty: need at least one video and text"
        )
    # min/max propagate NaN and expose inf without a full-size temporary.
    (sim_lo, sim_hi), (lo, hi) = _value_ranges(sim, rel)
    if not (np.isfinite(sim_lo) and np.isfinite(sim_hi)):
        bad = np.argwhere(~np.isfinite(np.asarray(sim)))[0].tolist()
        raise InputError(
            f"similarity has non-finite values (first at row {bad[0]}, column "
            f"{bad[1]}): fix the model output or drop those rows"
        )
    if not (0.0 <= lo and hi <= 1.0):  # also catches NaN
        raise InputError(f"relevance must lie in [0, 1], found values in [{lo}, {hi}]")
    if not 0.0 < threshold <= 1.0:
        raise InputError(f"positive threshold must be in (0, 1], got {threshold}")


def undefined_metrics(rel, threshold: float = 1.0, *, bounds: bool = False) -> dict[str, str]:
    """The metrics `evaluate(sim, rel, threshold=threshold)` reports as None whatever `sim`
    is (no query has an item to count): key -> why, for logging before a run evaluates.

    Found by reducing statistics with only the counts `rel` decides, through `summarize`,
    so the keys are exactly those `evaluate` leaves None.
    """
    rel = np.asarray(rel)
    stats, why = [], {}
    for axis, (query, item) in ((1, ("clip", "sentence")), (0, ("sentence", "clip"))):
        n = rel.shape[1 - axis]
        s = QueryStats.empty(n)
        for field, mask, what in (
            ("n_rel", rel > 0, "relevance > 0"),
            ("n_one", rel == 1, "relevance 1"),
            ("n_pos", rel >= threshold, f"relevance >= {threshold:g}"),
        ):
            counts = mask.sum(axis=axis) if rel.size else np.zeros(n, np.int64)
            getattr(s, field)[:] = counts
            if not counts.any():
                why[field, axis] = f"no {query} has a {item} of {what}"
        s.idcg[:] = s.idcg_exp[:] = 1.0  # any positive value: only None-ness is used
        s.first_pos[:] = s.last_pos[:] = 1
        stats.append(s)
    out = {}
    for key, value in summarize(*stats, bounds=bounds).items():
        if value is None:
            out[key] = _why_none(key, why)
    return out


def _why_none(key: str, why: dict) -> str:
    """The reason of the count behind `key`, in every direction that lacks it (so keys of
    one kind share one reason)."""
    field = "n_rel" if key.startswith("ndcg") else "n_one" if key.startswith("map") else "n_pos"
    return "; ".join(why[field, axis] for axis in (1, 0) if (field, axis) in why)


def _value_ranges(*arrays) -> list[tuple[float, float]]:
    """(min, max) of each array; large NumPy arrays in one thread each (NumPy's reductions
    release the GIL: docs/benchmarks.md#evaluation)."""

    def value_range(a) -> tuple[float, float]:
        return float(a.min()), float(a.max())

    if all(isinstance(a, np.ndarray) for a in arrays) and sum(a.size for a in arrays) >= 1 << 22:
        with ThreadPoolExecutor(len(arrays)) as pool:
            return list(pool.map(value_range, arrays))
    return [value_range(a) for a in arrays]


def summarize(
    v2t: QueryStats, t2v: QueryStats, *, bounds: bool = False
) -> dict[str, float | int | None]:
    """Reduces per-query statistics of both directions to the metrics dict (with the
    lower-bound recall keys when `bounds`)."""
    out: dict[str, float | int | None] = {}
    for name, stats in zip(DIRECTIONS, (v2t, t2v)):
        for key, value in _direction_metrics(stats).items():
            out[f"{key}_{name}"] = value
        if bounds:
            for key, value in _recalls(stats.last_pos[stats.n_pos > 0], "_lower").items():
                out[f"{key}_{name}"] = value
    for key in AVERAGED:
        a, b = out[f"{key}_v2t"], out[f"{key}_t2v"]
        out[f"{key}_avg"] = None if a is None or b is None else (a + b) / 2
    for suffix in ("", "_lower") if bounds else ("",):
        recalls = [out[f"r{k}{suffix}_{d}"] for d in DIRECTIONS for k in (1, 5, 10)]
        out[f"rsum{suffix}"] = None if None in recalls else float(sum(recalls))
    return out


def _recalls(ranks: np.ndarray, suffix: str = "") -> dict[str, float | None]:
    """R@1/5/10 (percent) and their geometric mean over the 1-based `ranks` of queries."""
    out = {}
    for k in (1, 5, 10):
        out[f"r{k}{suffix}"] = float(100.0 * np.mean(ranks <= k)) if ranks.size else None
    rs = [out[f"r{k}{suffix}"] for k in (1, 5, 10)]
    out[f"geomean{suffix}"] = None if None in rs else float(np.prod(rs) ** (1.0 / 3.0))
    return out


def _direction_metrics(s: QueryStats) -> dict[str, float | int | None]:
    has_rel, has_one, has_pos = s.n_rel > 0, s.n_one > 0, s.n_pos > 0
    out = {
        "ndcg": _mean(s.dcg, s.idcg, has_rel),
        "ndcg_exp": _mean(s.dcg_exp, s.idcg_exp, has_rel),
        "ndcg_nocut": _mean(s.dcg_nocut, s.idcg, has_rel),
        "map": _mean(s.ap_graded, s.n_one, has_one),
        "map_binary": _mean(s.ap_binary, s.n_one, has_one),
    }
    ranks = s.first_pos[has_pos]
    recalls = _recalls(ranks)
    out.update({k: recalls[k] for k in ("r1", "r5", "r10")})
    out["medr"] = float(np.median(ranks)) if ranks.size else None
    out["meanr"] = float(np.mean(ranks)) if ranks.size else None
    out["geomean"] = recalls["geomean"]
    out.update(
        n_queries=len(s),
        excluded_ndcg=int(np.sum(~has_rel)),
        excluded_map=int(np.sum(~has_one)),
        excluded_recall=int(np.sum(~has_pos)),
        tied=int(np.sum(s.tied)),
    )
    return out


def _mean(numerator: np.ndarray, denominator: np.ndarray, keep: np.ndarray) -> float | None:
    if not keep.any():
        return None
    return float(np.mean(numerator[keep] / denominator[keep]))
