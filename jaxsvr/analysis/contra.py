"""ConTra's analyses (Fragomeni et al., ACCV 2022) on trained runs, with plots.

- `window_attention(run)`: how much attention each layer of the clip-context encoder gives
  to every position of the window, averaged over the test clips and the heads (the
  paper's Fig. 4). Each `EncoderLayer` sows its softmax weights [n, heads, W, W] into
  Flax's "intermediates" collection (`jaxsvr.models.contra`), so the trained model itself
  records them: no second model, nothing changes in training. The result holds the whole
  mean matrix per layer (query position x key position) and its centre row, the weights
  of the centre clip's query: the output ConTra keeps.
- `rank_changes(...)`: the supplementary's clip length vs context analysis: for each test
  sentence (text-to-video) or clip (video-to-text), the rank of its paired item with
  m = 0 minus its rank with m > 0 (positive: context helped), averaged per bin of the
  clip's length in seconds. `rank_changes_between(run_m0, run_m)` runs it on two trained
  runs of the same test split (their embeddings through `jaxsvr.runs.gallery.Gallery`;
  video-to-text leaves out test clips without a sentence of their own).
- `rank_changes_by_word(sim_a, sim_b, paired, sentences)`: the per-word rank change
  between two exported rankings (text-to-video, each sentence's own clip), averaged over
  the sentences holding each word.
- `neighbour_similarity(sim, paired, windows, narrations)` / `neighbour_similarity_of(run)`:
  each test sentence's similarity to its own clip and, on average, to that clip's
  temporal neighbours with another narration, the clips NEI pushes away; compare a run
  without NEI and one with it.
- `plot_window_attention`, `plot_rank_changes`, `plot_word_rank_changes`: matplotlib axes
  for notebooks and reports.

Ranks are 1-based and pessimistic: items scoring as high as the paired one count as
ranked above it (the evaluation's tie rule).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.inputs.windows import context_windows
from jaxsvr.nlp import words as words_lib
from jaxsvr.relevance.analysis import pyplot
from jaxsvr.runs.gallery import Gallery, TrainedRun, rebuild
from jaxsvr.runtime import precision
from jaxsvr.sampling.neighbours import Neighbours

DIRECTIONS = ("t2v", "v2t")


@dataclasses.dataclass(frozen=True)
class WindowAttention:
    """Mean attention weights of the clip-context encoder over test clips and heads."""

    matrix: np.ndarray  # [layers, W, W]: query position x key position, rows sum to 1
    m: int  # window half-width: positions -m ... m, the clip itself at index m

    @property
    def centre(self) -> np.ndarray:
        """[layers, W]: the weights the centre clip's query gives each position."""
        return self.matrix[:, self.m]


def window_attention(run: TrainedRun, chunk: int = 256) -> WindowAttention:
    """`WindowAttention` of a trained ConTra run over its test clips (module docstring).

    Raises:
      InputError: the run's model is not ConTra, or it has no clip context (m_video = 0).
    """
    if run.config.model.name != "contra":
        raise InputError(
            f"{run.workdir}: window attention needs a ConTra run, not {run.config.model.name!r}"
        )
    splits, model = rebuild(run)
    if model.m_video == 0:
        raise InputError(f"{run.workdir}: the run has no clip context (model.m_video = 0)")
    from jaxsvr.inputs.model_inputs import test_inputs

    video, _, windows = test_inputs(model, splits.test)

    @jax.jit
    @functools.partial(precision.traced_under, precision.of_run(run.config))  # as it ran
    def weights(batch):
        _, state = model.apply(run.params, batch, method="embed_video", mutable=["intermediates"])
        layers = state["intermediates"]["video_context"]
        return [
            layers[f"layer{i}"]["attention"]["attention_weights"][0].sum(axis=(0, 1))
            for i in range(model.video_layers)
        ]  # per layer: [W, W] summed over clips and heads

    total = 0.0
    for start in range(0, len(windows), chunk):
        rows = windows[start : start + chunk]
        total = total + np.stack(jax.device_get(weights({"video": np.asarray(video)[rows]})))
    return WindowAttention(total / (len(windows) * model.video_heads), model.m_video)


def ranks(sim: np.ndarray, paired: np.ndarray, direction: str = "t2v") -> np.ndarray:
    """1-based pessimistic rank of each query's paired item.

    Args:
      sim: [n_videos, n_texts] similarities.
      paired: t2v: [n_texts] the clip each sentence describes; v2t: [n_videos] the
        sentence of each clip.
      direction: "t2v" (sentences query clips) or "v2t".
    """
    if direction not in DIRECTIONS:
        raise InputError(f"direction {direction!r}: use one of {DIRECTIONS}")
    scores = np.asarray(sim, np.float64)
    if direction == "t2v":
        scores = scores.T  # [queries, items]
    paired = np.asarray(paired, np.int64)
    if paired.shape != (scores.shape[0],):
        raise InputError(
            f"paired has shape {paired.shape}: need one item per {direction} query "
            f"({scores.shape[0]})"
        )
    own = scores[np.arange(len(paired)), paired]
    return np.count_nonzero(scores >= own[:, None], axis=1)


@dataclasses.dataclass(frozen=True)
class RankChanges:
    """Mean rank change (rank with m = 0 minus with m > 0) per clip-length bin."""

    edges: np.ndarray  # [bins + 1] seconds
    mean_change: np.ndarray  # [bins] (NaN for an empty bin)
    count: np.ndarray  # [bins] queries per bin
    direction: str


def rank_changes(
    sim_m0: np.ndarray,
    sim_m: np.ndarray,
    paired: np.ndarray,
    clip_seconds: np.ndarray,
    *,
    direction: str = "t2v",
    bins: int | Sequence[float] = 5,
) -> RankChanges:
    """Mean rank change per bin of the paired clip's length (module docstring).

    Args:
      sim_m0, sim_m: [n_videos, n_texts] similarities of the runs without and with context.
      paired: as `ranks`.
      clip_seconds: [n_videos] clip lengths.
      direction: "t2v" or "v2t".
      bins: a number of equal-count bins, or the bin edges in seconds (increasing).
    """
    if np.shape(sim_m0) != np.shape(sim_m):
        raise InputError(
            f"similarities of shape {np.shape(sim_m0)} and {np.shape(sim_m)}: "
            "the two runs must score the same test split"
        )
    change = (ranks(sim_m0, paired, direction) - ranks(sim_m, paired, direction)).astype(float)
    seconds = np.asarray(clip_seconds, np.float64)
    length = seconds[paired] if direction == "t2v" else seconds
    if np.ndim(bins) == 0:
        edges = np.quantile(length, np.linspace(0.0, 1.0, int(bins) + 1))
    else:
        edges = np.asarray(bins, np.float64)
    if edges.size < 2 or np.any(np.diff(edges) < 0):
        raise InputError(f"bins {bins!r}: need at least one bin with increasing edges")
    which = np.clip(np.searchsorted(edges, length, side="right") - 1, 0, edges.size - 2)
    inside = (length >= edges[0]) & (length <= edges[-1])
    count = np.bincount(which[inside], minlength=edges.size - 1)
    total = np.bincount(which[inside], weights=change[inside], minlength=edges.size - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return RankChanges(edges, mean, count, direction)


def rank_changes_between(
    run_m0: TrainedRun, run_m: TrainedRun, *, direction: str = "t2v", bins=5
) -> RankChanges:
    """`rank_changes` of two trained runs on the same test split (m = 0 and m > 0)."""
    galleries = [Gallery.of(run) for run in (run_m0, run_m)]
    if galleries[0].clips != galleries[1].clips:
        raise InputError(f"{run_m0.workdir} and {run_m.workdir} have different test clips")
    for run, gallery in zip((run_m0, run_m), galleries):
        if not isinstance(gallery.video, np.ndarray):
            raise InputError(f"{run.workdir}: rank changes need a dot-product model (ConTra)")
    clips, sentences = galleries[0].clips, galleries[0].sentences
    row = {nid: i for i, nid in enumerate(clips["narration_id"])}
    seconds = np.asarray(clips["stop_s"]) - np.asarray(clips["start_s"])
    sims = [g.video @ g.text.T for g in galleries]
    if direction == "t2v":
        paired = np.asarray([row[nid] for nid in sentences["narration_id"]])
    else:  # each clip's first sentence; clips without a sentence of their own are left out
        first = {}
        for j, nid in enumerate(sentences["narration_id"]):
            first.setdefault(nid, j)
        keep = np.asarray([i for i, nid in enumerate(clips["narration_id"]) if nid in first])
        paired = np.asarray([first[clips["narration_id"][i]] for i in keep])
        sims, seconds = [sim[keep] for sim in sims], seconds[keep]
    return rank_changes(*sims, paired, seconds, direction=direction, bins=bins)


@dataclasses.dataclass(frozen=True)
class WordRankChanges:
    """Mean text-to-video rank change per word of the query sentences (rank under run A
    minus under run B: positive, B ranks the sentence's own clip higher)."""

    words: list[str]  # sorted by mean change, largest first
    mean_change: np.ndarray  # [words]
    count: np.ndarray  # [words] sentences holding the word


def rank_changes_by_word(
    sim_a: np.ndarray,
    sim_b: np.ndarray,
    paired: np.ndarray,
    sentences: Sequence[str],
    *,
    min_count: int = 5,
) -> WordRankChanges:
    """Per word, the mean rank change of the sentences that hold it, between two exported
    rankings of the same test split (e.g. `test_similarity.npy` of runs with m = 0 and
    m > 0, or without and with NEI): which words context helps or hurts.

    Args:
      sim_a, sim_b: [n_videos, n_texts] similarities of the two runs.
      paired: [n_texts] the clip each sentence describes (its rank is the one compared).
      sentences: [n_texts] the sentences; words are `jaxsvr.nlp.words.tokenize`'s tokens,
        each counted once per sentence.
      min_count: words in fewer sentences are left out.
    """
    if np.shape(sim_a) != np.shape(sim_b) or len(sentences) != np.shape(sim_a)[1]:
        raise InputError(
            f"similarities {np.shape(sim_a)} and {np.shape(sim_b)} with {len(sentences)} "
            "sentences: both runs must score the same test sentences"
        )
    change = (ranks(sim_a, paired, "t2v") - ranks(sim_b, paired, "t2v")).astype(np.float64)
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for j, sentence in enumerate(sentences):
        for word in set(words_lib.tokenize(sentence)):
            total[word] = total.get(word, 0.0) + change[j]
            count[word] = count.get(word, 0) + 1
    kept = [w for w in count if count[w] >= min_count]
    kept.sort(key=lambda w: (-total[w] / count[w], w))
    return WordRankChanges(
        kept,
        np.array([total[w] / count[w] for w in kept]),
        np.array([count[w] for w in kept], np.int64),
    )


def plot_word_rank_changes(changes: WordRankChanges, top: int = 10, ax=None):
    """Horizontal bars of the `top` words context helps most and the `top` it hurts most."""
    if ax is None:
        _, ax = pyplot().subplots(figsize=(5, 0.3 * min(2 * top, len(changes.words)) + 1))
    n = len(changes.words)
    picks = sorted(set(range(min(top, n))) | set(range(max(n - top, 0), n)))
    labels = [f"{changes.words[i]} ({changes.count[i]})" for i in picks]
    ax.barh(labels[::-1], changes.mean_change[picks][::-1], color="tab:blue")
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("mean rank change of the sentences with the word (A minus B)")
    return ax


@dataclasses.dataclass(frozen=True)
class NeighbourSimilarity:
    """Each test sentence's similarity to its own clip and to that clip's temporal
    neighbours with another narration (the clips NEI pushes away)."""

    own: np.ndarray  # [n_texts]
    neighbour: np.ndarray  # [n_texts] mean over the neighbours; NaN without any

    @property
    def gap(self) -> float:
        """Mean of own minus neighbour over the sentences that have neighbours."""
        keep = np.isfinite(self.neighbour)
        return float(np.mean(self.own[keep] - self.neighbour[keep])) if keep.any() else np.nan


def neighbour_similarity(
    sim: np.ndarray, paired: np.ndarray, windows: np.ndarray, narrations: Sequence[str]
) -> NeighbourSimilarity:
    """`NeighbourSimilarity` of a [n_videos, n_texts] similarity: the neighbours of clip i
    are the clips of its window `windows[i]` whose narration differs from clip i's
    (`jaxsvr.sampling.neighbours`, each window position once, as NEI draws them)."""
    sim = np.asarray(sim, np.float64)
    paired = np.asarray(paired, np.int64)
    valid = Neighbours(list(narrations), np.asarray(windows)).valid[paired]  # [n_texts, W]
    rows = np.asarray(windows)[paired]  # [n_texts, W] clip rows
    scores = sim[rows, np.arange(len(paired))[:, None]]  # sentence j against its window
    count = valid.sum(axis=1)
    total = np.where(valid, scores, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        neighbour = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return NeighbourSimilarity(sim[paired, np.arange(len(paired))], neighbour)


def neighbour_similarity_of(run: TrainedRun, m: int = 1) -> NeighbourSimilarity:
    """`neighbour_similarity` of a trained run's test split, neighbours within `m` clips
    (compare a run trained without NEI, `loss.contra.nei_weight=0`, with one trained with
    it: NEI should widen the gap)."""
    splits, _ = rebuild(run)
    gallery = Gallery.of(run)
    if not isinstance(gallery.video, np.ndarray):
        raise InputError(f"{run.workdir}: neighbour similarity needs a dot-product model")
    test = splits.test
    windows = context_windows(test.clips, m)
    return neighbour_similarity(
        gallery.video @ gallery.text.T, test.sentence_rows, windows, test.clips.narration
    )


def plot_window_attention(attention: WindowAttention, ax=None):
    """One line per layer: the centre clip's mean attention to each window position."""
    if ax is None:
        _, ax = pyplot().subplots(figsize=(5, 3.5))
    offsets = np.arange(-attention.m, attention.m + 1)
    for i, row in enumerate(attention.centre):
        ax.plot(offsets, row, marker="o", label=f"layer {i + 1}")
    ax.set_xticks(offsets)
    ax.set_xlabel("window position (0 = the clip)")
    ax.set_ylabel("mean attention of the clip")
    ax.legend()
    return ax


def plot_rank_changes(changes: RankChanges, ax=None):
    """Bars of the mean rank change per clip-length bin (positive: context helped)."""
    if ax is None:
        _, ax = pyplot().subplots(figsize=(5, 3.5))
    labels = [f"{a:.1f}-{b:.1f}" for a, b in zip(changes.edges[:-1], changes.edges[1:])]
    ax.bar(labels, np.nan_to_num(changes.mean_change), color="tab:blue")
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("clip length (s)")
    ax.set_ylabel(f"mean rank change, m = 0 minus m > 0 ({changes.direction})")
    return ax
