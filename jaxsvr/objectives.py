"""What a train step optimises: host-side batches and the loss over a model's scores.

`config.loss.name` picks the objective, so every loss works with every model:
- `contra` (`ContraObjective`): ConTra's loss (Fragomeni et al. ACCV 2022): cross-modal
  NCE + neighbouring loss + uniformity over (video, caption) pairs, the neighbours drawn
  from each clip's temporal window (`jaxsvr.inputs.windows`); any model, though only context
  models make the neighbouring term meaningful.
- `triplet` (`TripletObjective`): offline triplets (`jaxsvr.sampling.triplets`, JPoSE/MME),
  fixed or relevance margins, four pair types per level (`jaxsvr.losses.triplet`). Models
  whose score is not a dot product (HGR) have no within-modality score, so only the two
  cross-modal pair types (text-video, video-text) are used for them (logged).
- a batch loss of `jaxsvr.losses.BATCH_LOSSES` (`BatchObjective`): B (video, caption)
  pairs per batch (`jaxsvr.sampling.pairs`), the model's [B, B] score matrix per level, and
  the loss with its keywords from `config.loss.<name>` (and the relevance matrix of that
  level when the loss takes one).

Each level the model has and `config.loss.level_weights` weighs above zero gets a term;
the total is the weighted sum. An objective hands the trainer:
- `steps_per_epoch(batch_size)` and `rows_per_anchor` (for the log);
- `host_batch(epoch, step, batch_size)`: numpy arrays (keys `batch_keys`) with the batch
  on the first axis, a pure function of (seed, epoch, step);
- `gathers`: {input name: (table, batch key)}: the trainer gathers rows `batch[key]` of
  the training table `table` (`video` or a text field of the model) into
  `inputs[input name]` (through the model's context windows, `Model.windows`, if any);
- `loss(model, params, inputs, batch, rng) -> (total, {term: scalar})`, traced inside the
  jitted train step; `inputs` are the gathered rows, flattened to [rows, ...].
"""

from __future__ import annotations

import logging
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxsvr import losses, pipeline
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.inputs import windows
from jaxsvr.losses.triplet import DISTANCES, PAIR_TYPES, triplet_terms
from jaxsvr.relevance import split_relevance
from jaxsvr.relevance.levels import LevelRelevance
from jaxsvr.sampling import neighbours, triplets
from jaxsvr.sampling import pairs as batches
from jaxsvr.sampling.pairs import PairSampler

NAMES = ("triplet", "contra", *losses.BATCH_LOSSES)


def build(
    config: ml_collections.ConfigDict, train_split, model
) -> TripletObjective | BatchObjective:
    """The objective `config.loss.name` names, for `model` on the training split."""
    check_name(config)
    if config.loss.name == "triplet":
        return TripletObjective(config, train_split, model)
    if config.loss.name == "contra":
        return ContraObjective(config, train_split, model)
    return BatchObjective(config, train_split, model)


def check_name(config: ml_collections.ConfigDict) -> None:
    """Fails on an unknown loss name (the trainer calls it before loading data)."""
    if config.loss.name not in NAMES:
        raise InputError(f"unknown config.loss.name {config.loss.name!r}: use one of {NAMES}")


def _weighted_levels(config, model, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The model's levels with a positive weight; an error for one the objective lacks."""
    weights = config.loss.level_weights
    missing = [lv for lv in model.levels if lv not in weights]
    if missing:
        raise InputError(f"config.loss.level_weights has no weight for level {missing[0]!r}")
    levels = tuple(lv for lv in model.levels if weights[lv] > 0)
    if not levels:
        raise InputError(
            f"every level of model {config.model.name!r} {model.levels} has weight 0 in "
            "config.loss.level_weights: give one a positive weight"
        )
    bad = [lv for lv in levels if lv not in allowed]
    if bad:
        raise InputError(
            f"level {bad[0]!r} cannot be trained with loss {config.loss.name!r}: set "
            f"config.loss.level_weights.{bad[0]}=0"
        )
    return levels


def _model_inputs(model, inputs: dict) -> dict:
    """The model's inputs (`video` and its text fields) among the gathered ones."""
    return {k: inputs[k] for k in ("video", *model.text_fields)}


def _embed(model, params, inputs: dict, rng) -> tuple[Any, Any]:
    """Both modalities in training mode. Each `apply` restarts flax's rng counters, so the
    two get separate dropout keys (one key would give a module shared by both methods, like
    HGR's dropout, the same mask in each)."""
    video_rng, text_rng = jax.random.split(rng)
    video = model.apply(params, inputs, True, method=model.embed_video, rngs={"dropout": video_rng})
    text = model.apply(params, inputs, True, method=model.embed_text, rngs={"dropout": text_rng})
    return video, text


POSITIVES = ("class", "instance", "proxy")


def _semantic_positives(config, clips):
    """The triplet sampler's action-level positives for `config.sampler.positives`."""
    kind = config.sampler.positives
    if kind not in POSITIVES:
        raise InputError(f"unknown config.sampler.positives {kind!r}: use one of {POSITIVES}")
    if kind == "class":
        return None
    n = len(clips)
    if kind == "instance":  # each clip's only positive is itself
        return np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int32)
    spec = pipeline.relevance_spec(config.data)
    return split_relevance.semantic_positives(spec, clips, config.sampler.threshold)


class TripletObjective:
    """Offline triplets with fixed or relevance margins (JPoSE / MME)."""

    batch_keys = ("rows", "margin")  # [B, M] row indices, [B, n_levels, K] margins

    def __init__(self, config, train_split, model):
        lo = config.loss
        if lo.distance not in DISTANCES:
            raise InputError(
                f"unknown config.loss.distance {lo.distance!r}: use one of {DISTANCES}"
            )
        unknown = set(lo.pair_weights) - set(PAIR_TYPES)
        if unknown:
            raise InputError(
                f"unknown pair types {sorted(unknown)} in config.loss.pair_weights: use "
                f"{sorted(PAIR_TYPES)}"
            )
        if config.sampler.pairing != "own":
            raise InputError(
                f"config.sampler.pairing={config.sampler.pairing!r} is for batch losses; the "
                "triplet loss samples its own positives: set it to 'own'"
            )
        self.levels = _weighted_levels(config, model, triplets.LEVELS)
        self.pair_types = tuple(p for p in PAIR_TYPES if lo.pair_weights[p] > 0)
        if not model.dot_product:
            cross = tuple(p for p in self.pair_types if PAIR_TYPES[p][0] != PAIR_TYPES[p][1])
            if cross != self.pair_types:
                logging.info(
                    "triplet loss: model %s scores video-text pairs only; pair types %s",
                    config.model.name,
                    ", ".join(cross),
                )
            self.pair_types = cross
        if not self.pair_types:
            raise InputError(
                "every triplet pair type has weight 0 in config.loss.pair_weights: give one "
                f"of {sorted(PAIR_TYPES)} a positive weight"
            )
        self.sampler = triplets.TripletSampler(
            train_split.verbs,
            train_split.clips.noun_classes,
            train_split.clips.noun_class,
            levels=self.levels,
            num_triplets=config.sampler.num_triplets,
            resample_every=config.sampler.resample_every,
            margin=lo.margin,
            fixed_margin=lo.fixed_margin,
            seed=config.seed,
            semantic=_semantic_positives(config, train_split.clips),
        )
        self.gathers = {k: (k, "rows") for k in ("video", *model.text_fields)}
        self.weights = {
            f"{lv}_{p}": lo.level_weights[lv] * lo.pair_weights[p]
            for lv in self.levels
            for p in self.pair_types
        }
        self.distance = lo.distance

    @property
    def rows_per_anchor(self) -> int:
        return self.sampler.rows_per_anchor

    def steps_per_epoch(self, batch_size: int) -> int:
        return self.sampler.steps_per_epoch(batch_size)

    def host_batch(self, epoch: int, step: int, batch_size: int) -> dict[str, np.ndarray]:
        rows, margin = self.sampler.batch(epoch, step, batch_size)
        return {"rows": rows, "margin": margin}

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        b, m = batch["rows"].shape
        video, text = _embed(model, params, inputs, rng)
        video, text = jax.tree.map(lambda e: e.reshape(b, m, *e.shape[1:]), (video, text))

        def pair_score(v, t):
            return model.apply(params, v, t, method=model.pair_similarity)

        terms = triplet_terms(
            video,
            text,
            batch["margin"],
            levels=self.levels,
            level_index={lv: i for i, lv in enumerate(self.levels)},
            num_triplets=self.sampler.k,
            distance_kind=self.distance,
            pair_types=self.pair_types,
            pair_score=None if model.dot_product else pair_score,
        )
        return sum(w * terms[k] for k, w in self.weights.items()), terms


class BatchObjective:
    """A batch loss over the [B, B] score matrix of each weighted level."""

    batch_keys = ("video_rows", "text_rows", "rel")  # [B], [B], [B, n_levels, B]
    rows_per_anchor = 2  # a video and a caption

    def __init__(self, config, train_split, model):
        self.name = config.loss.name
        self.fn = losses.BATCH_LOSSES[self.name]
        self.kwargs = dict(config.loss[self.name].to_dict())
        self.with_rel = losses.uses_relevance(self.fn)
        self.levels = _weighted_levels(config, model, tuple(model.levels))
        self.weights = {lv: config.loss.level_weights[lv] for lv in self.levels}
        clips = train_split.clips
        self.sampler = PairSampler(
            LevelRelevance(ClassSets.from_labels(train_split.verbs), clips.noun_classes),
            levels=self.levels,
            pairing=config.sampler.pairing,
            pair_threshold=config.sampler.pair_threshold,
            seed=config.seed,
        )
        self.gathers = {"video": ("video", "video_rows")}
        self.gathers.update({f: (f, "text_rows") for f in model.text_fields})

    def steps_per_epoch(self, batch_size: int) -> int:
        return self.sampler.steps_per_epoch(batch_size)

    def host_batch(self, epoch: int, step: int, batch_size: int) -> dict[str, np.ndarray]:
        return self.sampler.batch(epoch, step, batch_size)

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        video, text = _embed(model, params, inputs, rng)
        sims = model.apply(params, video, text, method=model.similarity)
        terms = {}
        for i, level in enumerate(self.levels):
            args = (sims[level], batch["rel"][:, i, :]) if self.with_rel else (sims[level],)
            terms[f"{level}_{self.name}"] = self.fn(*args, **self.kwargs)
        total = sum(self.weights[lv] * terms[f"{lv}_{self.name}"] for lv in self.levels)
        return total, terms


class ContraObjective:
    """ConTra's loss: CML + NEI + UNI over (video, own caption) pairs with neighbours.

    Per batch of B anchor clips (epoch order as every objective): the cross-modal NCE of
    the [B, B] `action` scores (`losses.cross_modal_nce`); uniformity over the 2B unit
    embeddings (`losses.uniformity`, t = 2); and the neighbouring loss
    (`losses.neighbour_nce`): each clip's neighbour (a clip of its window with another
    narration, drawn per (seed, epoch, step)) is embedded with its own window and is the
    single negative of the text anchor against its video (when the model has video
    context) and of the video anchor against its caption (when it has text context).
    Clips without such a neighbour are masked out of that term. The public code pairs the
    video-side negatives (encoded for all B clips) with the masked subset of anchors by
    position, so after the first clip without a neighbour each anchor meets another
    clip's negative; here row k of every array belongs to clip k.

    Config: weights `config.loss.contra.{cml,nei,uni}_weight`; one temperature for CML
    and NEI, `config.loss.cross_modal_nce.temperature` (0.07). Any dot-product model
    (unit `action` embeddings) works; only context models (`Model.windows`) get the
    neighbouring term. Only the neighbour inputs a term needs are gathered.
    """

    batch_keys = ("video_rows", "text_rows", "neighbour_rows", "has_neighbour")

    def __init__(self, config, train_split, model):
        if not model.dot_product or "action" not in model.levels:
            raise InputError(
                f"loss contra needs unit 'action' embeddings scored by dot products; model "
                f"{config.model.name!r} has none: use contra, mme, jpose or heads"
            )
        if config.sampler.pairing != "own":
            raise InputError(
                f"config.sampler.pairing={config.sampler.pairing!r}: ConTra pairs each clip "
                "with its own caption; set it to 'own'"
            )
        c = config.loss.contra
        self.temperature = config.loss.cross_modal_nce.temperature
        self.weights = {"cml": c.cml_weight, "nei": c.nei_weight, "uni": c.uni_weight}
        context = dict(getattr(model, "windows", {}))
        self.sides = tuple(
            side for side, key in (("video", "video"), ("text", "caption")) if context.get(key)
        )
        half = max([0, *context.values()])
        clips = train_split.clips
        self.neighbours = neighbours.Neighbours(
            clips.narration, windows.context_windows(clips, half)
        )
        self.n, self.seed = len(clips), config.seed
        self.gathers = {"video": ("video", "video_rows")}
        self.gathers.update({f: (f, "text_rows") for f in model.text_fields})
        if "video" in self.sides:
            self.gathers["neighbour_video"] = ("video", "neighbour_rows")
        if "text" in self.sides:
            self.gathers.update(
                {f"neighbour_{f}": (f, "neighbour_rows") for f in model.text_fields}
            )
        self.rows_per_anchor = 2 + len(self.sides)  # video, caption, neighbours

    def steps_per_epoch(self, batch_size: int) -> int:
        return batches.steps_per_epoch(self.n, batch_size)

    def host_batch(self, epoch: int, step: int, batch_size: int) -> dict[str, np.ndarray]:
        order = batches.epoch_order(self.seed, epoch, self.n)
        rows = order[step * batch_size : (step + 1) * batch_size]
        rng = np.random.default_rng([self.seed, epoch, step, 0x4E31])
        neighbour, has = self.neighbours.draw(rows, rng)
        rows = rows.astype(np.int32)
        return {
            "video_rows": rows,
            "text_rows": rows,
            "neighbour_rows": neighbour,
            "has_neighbour": has,
        }

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        rng, video_rng, text_rng = jax.random.split(rng, 3)
        video, text = _embed(model, params, _model_inputs(model, inputs), rng)
        v, t = video["action"], text["action"]
        terms = {
            "cml": losses.cross_modal_nce(v @ t.T, temperature=self.temperature),
            "uni": losses.uniformity(jnp.concatenate([v, t]), t=2.0),
            "nei": jnp.zeros((), v.dtype),
        }
        mask, kw = batch["has_neighbour"], dict(temperature=self.temperature)
        if "video" in self.sides:  # the caption's own clip against the neighbour clip
            x = {"video": inputs["neighbour_video"]}
            nv = model.apply(params, x, True, method=model.embed_video, rngs={"dropout": video_rng})
            terms["nei"] += losses.neighbour_nce(t, v, nv["action"], mask, **kw)
        if "text" in self.sides:  # the clip's own caption against the neighbour's
            x = {f: inputs[f"neighbour_{f}"] for f in model.text_fields}
            nt = model.apply(params, x, True, method=model.embed_text, rngs={"dropout": text_rng})
            terms["nei"] += losses.neighbour_nce(v, t, nt["action"], mask, **kw)
        total = sum(self.weights[k] * terms[k] for k in terms)
        return total, terms
