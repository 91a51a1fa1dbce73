"""`BatchObjective`: a batch loss of `jaxsvr.losses.BATCH_LOSSES` over [B, B] scores.

B (video, caption) pairs per batch (`jaxsvr.sampling.pairs`), the model's [B, B] score
matrix per level, and the loss with its keywords from `config.loss.<name>` (and the
relevance matrix of that level when the loss takes one).
"""

from __future__ import annotations

from jaxsvr import losses
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.objectives.base import Gather, embed, weighted_levels
from jaxsvr.relevance.levels import LevelRelevance
from jaxsvr.sampling.pairs import PAIRINGS, PairSampler

TRAIN_RELEVANCES = ("video", "caption")  # config.data.train_relevance (`batch_relevance`)


class BatchObjective:
    """A batch loss over the [B, B] score matrix of each weighted level."""

    batch_keys = ("video_rows", "text_rows", "rel")  # [B], [B], [B, n_levels, B]
    rows_per_anchor = 2  # a video and a caption
    pairings = PAIRINGS

    def __init__(self, config, train_split, model, relevance=None):
        self.name = config.loss.name
        self.fn = losses.BATCH_LOSSES[self.name]
        self.kwargs = dict(config.loss[self.name].to_dict())
        self.with_rel = losses.uses_relevance(self.fn)
        self.levels = weighted_levels(config, model, tuple(model.levels))
        self.weights = {lv: config.loss.level_weights[lv] for lv in self.levels}
        self.sampler = PairSampler(
            batch_relevance(config, train_split),
            levels=self.levels,
            pairing=config.sampler.pairing,
            pair_threshold=config.sampler.pair_threshold,
            seed=config.seed,
        )
        self.gathers = {"video": Gather("video", "video_rows")}
        self.gathers.update({f: Gather(f, "text_rows") for f in model.text_fields})

    def steps_per_epoch(self, batch_size: int) -> int:
        return self.sampler.steps_per_epoch(batch_size)

    def host_batch(self, epoch: int, step: int, batch_size: int, share: slice = slice(None)):
        return self.sampler.batch(epoch, step, batch_size, share)

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        video, text = embed(model, params, inputs, rng)
        sims = model.apply(params, video, text, method=model.similarity)
        terms = {}
        for i, level in enumerate(self.levels):
            args = (sims[level], batch["rel"][:, i, :]) if self.with_rel else (sims[level],)
            terms[f"{level}_{self.name}"] = self.fn(*args, **self.kwargs)
        total = sum(self.weights[lv] * terms[f"{lv}_{self.name}"] for lv in self.levels)
        return total, terms


def batch_relevance(config, train_split) -> LevelRelevance:
    """Relevance of a batch's videos to its captions: clip classes on both sides (the
    clip's main verb), or with `config.data.train_relevance = "caption"` each video's verb
    and noun sets against each caption's own (a multi-caption video's own caption can then
    be less than fully relevant, as in the RANP paper's MSR-VTT relevance)."""
    clips = train_split.clips
    mode = config.data.train_relevance
    if mode == "video":
        return LevelRelevance(ClassSets.from_labels(train_split.verbs), clips.noun_classes)
    if train_split.caption_classes is None:
        raise InputError(
            "config.data.train_relevance = 'caption' needs train rows that are captions of "
            "multi-caption videos (MSR-VTT with data.train_captions = 'all')"
        )
    return LevelRelevance(clips.verb_classes, clips.noun_classes, *train_split.caption_classes)
