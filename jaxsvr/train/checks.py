"""Checks of a training config before any data is loaded or any file is written.

`check_train(config)` is a pure function of the `ConfigDict`: every number the trainer reads
(data sizes, batch size, steps and epochs, log / eval / checkpoint cadences, keep counts,
prefetch depth, learning rate and the other optimiser numbers, thresholds, model sizes) is
checked against its range (`NUMBERS`), every name it reads against the choices of the stage
that reads it (`CHOICES`, `MODEL_CHOICES`: e.g. `optim.NAMES`, `objectives.NAMES`), and
values that must fit each other (`_check_fit`); the stages do not check them again. Every
float anywhere in the config (also inside tuples) must be finite, every `seed` / `*_seed`
an integer in [0, 2**32 - 1], loss temperatures > 0 and margins >= 0, the relevance
weights valid alphas (`proxies.check_weights`), and attention widths divisible by their
head counts. A bad value is one `InputError` line naming the key, the value and the
accepted range.

`check_data(config, data, text_fields)` holds the checks that need the loaded data (train
and test inputs of the same width, float inputs at least 1 wide); the trainer runs it
before it writes anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_collections
import numpy as np

from jaxsvr import models, objectives
from jaxsvr.annotations import FORMATS as ANNOTATION_FORMATS
from jaxsvr.errors import InputError
from jaxsvr.evaluation import evaluator, metrics
from jaxsvr.inputs import features, synthetic, synthetic_text
from jaxsvr.inputs import splits as splits_lib
from jaxsvr.losses import triplet as triplet_loss
from jaxsvr.models import mme
from jaxsvr.objectives import batch as batch_objectives
from jaxsvr.relevance import caption_classes, proxies
from jaxsvr.runtime import precision
from jaxsvr.sampling import pairs, triplets
from jaxsvr.train import batches, optim

# metric keys that are counts, or ranks where lower is better: never a best checkpoint's
NOT_BEST = ("n_queries_", "excluded_", "tied_", "medr_", "meanr_")


@dataclass(frozen=True)
class Range:
    """Accepted values of a number: [low, high] (an end is excluded when `open_*`)."""

    low: float = -math.inf
    high: float = math.inf
    integer: bool = False
    open_low: bool = False
    open_high: bool = False

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):  # also NaN
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def __str__(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        low, high = (
            f"{int(x)}" if self.integer and math.isfinite(x) else f"{x:g}"
            for x in (self.low, self.high)
        )
        if self.high == math.inf:
            return f"{kind} {'>' if self.open_low else '>='} {low}"
        left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
        return f"{kind} in {left}{low}, {high}{right}"


COUNT = Range(1, integer=True)  # sizes, cadences, keep counts
NON_NEGATIVE_INT = Range(0, integer=True)  # optional step counts
SEED = Range(0, 2**32 - 1, integer=True)  # jax.random.key and NumPy take 32-bit seeds
POSITIVE = Range(0, open_low=True)
NON_NEGATIVE = Range(0)
FRACTION = Range(0, 1)

# Every number the trainer reads, with its accepted values.
NUMBERS: dict[str, Range] = {
    "seed": SEED,  # NumPy generators refuse negative seeds; every *seed key is checked too
    "data.num_videos": COUNT,
    "data.test_videos": COUNT,
    "data.clips_per_video": COUNT,
    "data.seed": SEED,
    "data.val_videos": NON_NEGATIVE_INT,
    "data.val_fraction": Range(0, 1, open_high=True),
    "data.val_seed": SEED,
    "train.early_stop_evals": NON_NEGATIVE_INT,
    "data.feature_seed": SEED,
    "data.relevance.rho": Range(0, 1, open_low=True),
    "data.segments": NON_NEGATIVE_INT,
    "data.min_word_count": COUNT,
    "data.max_caption_len": COUNT,
    "data.max_verb_len": COUNT,
    "data.max_noun_len": COUNT,
    "data.num_verb_nodes": COUNT,
    "data.num_noun_nodes": COUNT,
    "sampler.num_triplets": COUNT,
    "sampler.neighbours": COUNT,
    "sampler.resample_every": COUNT,
    "sampler.threshold": Range(0, 1, open_low=True),  # positives S >= it, negatives S < it
    "sampler.pair_threshold": Range(0, 1, open_high=True),  # relevance > it
    "optimizer.lr": POSITIVE,
    "optimizer.momentum": NON_NEGATIVE,  # >= 1 diverges: left to the divergence checks
    "optimizer.weight_decay": NON_NEGATIVE,
    "optimizer.warmup_steps": NON_NEGATIVE_INT,
    "optimizer.warmup_fraction": FRACTION,
    "optimizer.final_lr": NON_NEGATIVE,
    "optimizer.grad_clip": NON_NEGATIVE,
    "train.batch_size": COUNT,
    "train.num_epochs": COUNT,
    "train.max_steps": NON_NEGATIVE_INT,
    "train.log_every_steps": COUNT,
    "train.prefetch": COUNT,
    "eval.every_epochs": COUNT,
    "eval.threshold": Range(0, 1, open_low=True),
    "eval.rescore.threshold": Range(0, 1, open_low=True),
    "eval.chunk": COUNT,
    "eval.text_chunk": COUNT,
    "checkpoint.every_steps": COUNT,
    "checkpoint.keep": COUNT,
}
# Sections whose every entry is a non-negative weight, and the names a section takes.
WEIGHTS = ("loss.pair_weights", "loss.level_weights", "loss.contra")
WEIGHT_NAMES = {"loss.pair_weights": tuple(triplet_loss.PAIR_TYPES)}
# Every name the trainer reads, with its choices from the stage that reads it. (`job` and
# `distributed` are read by the main command for every job, first: it checks them.)
CHOICES: dict[str, tuple[str, ...]] = {
    "matmul_precision": precision.PRECISIONS,
    "data.format": ANNOTATION_FORMATS,
    "data.relevance.proxy": ("class", *proxies.NAMES),
    "data.train_captions": caption_classes.TRAIN_CAPTIONS,
    "data.train_relevance": batch_objectives.TRAIN_RELEVANCES,
    "data.pos_source": splits_lib.POS_SOURCES,
    "data.temporal": ("auto", *features.TEMPORAL),
    "model.name": models.NAMES,
    "loss.name": objectives.NAMES,
    "loss.margin": triplets.MARGINS,
    "loss.distance": triplet_loss.DISTANCES,
    "sampler.pairing": pairs.PAIRINGS,
    "sampler.positives": objectives.SAMPLER_POSITIVES,
    "optimizer.name": optim.NAMES,
    "optimizer.schedule": optim.SCHEDULES,
    "train.gather": batches.GATHERS,
    "eval.positives": evaluator.POSITIVES,
    "eval.backend": metrics.BACKENDS,
}
HINTS = {"data.train_captions": "'all' = every caption of a multi-caption video is a pair"}
MODEL_CHOICES = {"text_input": mme.TEXT_INPUTS}  # keywords of the models that have them
# Sections of `config.data` that build a spec dataclass (its own checks raise ValueError).
SPECS = {"data.synthetic": synthetic.SyntheticSpec, "data.synthetic_text": synthetic_text.TextSpec}
# Keywords of the losses (`config.loss.fixed_margin`, `config.loss.<batch loss>.<name>`):
# temperatures divide the similarities, hinge margins below 0 ask for nothing, `tau` is a
# relevance threshold (0 leaves no negatives), alpha / beta of Multi-Similarity divide.
LOSS_KEYWORDS: dict[str, Range] = {
    "temperature": POSITIVE,
    "margin": NON_NEGATIVE,
    "margin_pos": NON_NEGATIVE,
    "margin_neg": NON_NEGATIVE,
    "fixed_margin": NON_NEGATIVE,
    "tau": Range(0, 1, open_low=True),
    "relax": NON_NEGATIVE,
    "alpha": POSITIVE,
    "beta": POSITIVE,
}
# Attention heads of the models and the width they split: (heads key, width key).
HEADS = (("video_heads", "embed_dim"), ("text_heads", "embed_dim"))


def check_train(config: ml_collections.ConfigDict) -> None:
    """Raises InputError (one line) at the first value of `config` the trainer cannot use.

    Args:
      config: a training config (`jaxsvr.configs.base()` and its variants).
    """
    _check_finite_and_seeds(config)
    for key, allowed in NUMBERS.items():
        value = _get(config, key)
        if value not in allowed:
            raise InputError(
                f"config.{key} = {value!r} is out of range: use {allowed} (--config.{key}=...)"
            )
    for section in WEIGHTS:
        for name, value in _get(config, section).items():
            if name not in WEIGHT_NAMES.get(section, (name,)):
                raise InputError(f"unknown config.{section}.{name}: use {WEIGHT_NAMES[section]}")
            if value not in NON_NEGATIVE:
                raise InputError(
                    f"config.{section}.{name} = {value!r} is not a weight: use {NON_NEGATIVE} "
                    "(0 turns the term off)"
                )
    for key, choices in CHOICES.items():
        value = _get(config, key)
        if value not in choices:
            hint = f" ({HINTS[key]})" if key in HINTS else ""
            raise InputError(f"unknown config.{key} {value!r}: use one of {choices}{hint}")
    _check_fit(config)
    proxies.check_weights(_get(config, "data.relevance.weights"), "config.data.relevance.weights")
    _check_loss(config.loss)
    if config.mesh.data != -1 and config.mesh.data not in COUNT:
        raise InputError(
            f"config.mesh.data = {config.mesh.data!r}: use -1 (every device) or a number of "
            "devices >= 1"
        )
    _check_model(config.model)
    best = config.checkpoint.best_metric
    if best:
        names = best_metric_names(config.eval.positives)
        if best not in names:
            raise InputError(
                f"config.checkpoint.best_metric = {best!r} is not a test metric where higher "
                f"is better: use one of {', '.join(names)}, or '' for no best checkpoint"
            )
        if best.startswith("map") and not config.eval.report_map:
            raise InputError(
                f"config.checkpoint.best_metric = {best!r} but config.eval.report_map is "
                "False: choose the best checkpoint on a reported metric (e.g. ndcg_avg)"
            )
    d = config.data
    if d.val_videos and d.val_fraction:
        raise InputError(
            f"config.data.val_videos = {d.val_videos} and config.data.val_fraction = "
            f"{d.val_fraction}: give one of them (the other 0)"
        )
    if config.train.early_stop_evals:
        if not (d.val_videos or d.val_fraction):
            raise InputError(
                "config.train.early_stop_evals needs a validation split (stopping on the test "
                "split would select on it): set config.data.val_fraction or val_videos"
            )
        if not best:
            raise InputError(
                "config.train.early_stop_evals stops on config.checkpoint.best_metric, which "
                "is '': name a metric (e.g. ndcg_avg)"
            )


def _check_finite_and_seeds(config: ml_collections.ConfigDict, prefix: str = "") -> None:
    """Every float of the config (also inside tuples and lists) is finite, and every key
    named `seed` or `*_seed` is an integer in [0, 2**32 - 1]."""
    for name, value in config.items():
        key = f"{prefix}{name}"
        if isinstance(value, ml_collections.ConfigDict):
            _check_finite_and_seeds(value, f"{key}.")
            continue
        if name == "seed" or name.endswith("_seed"):
            if value not in SEED:
                raise InputError(
                    f"config.{key} = {value!r} is out of range: use {SEED} (--config.{key}=...)"
                )
        items = value if isinstance(value, tuple | list) else (value,)
        for item in items:
            if isinstance(item, float) and not math.isfinite(item):
                raise InputError(
                    f"config.{key} = {value!r} is not finite: use finite numbers "
                    f"(--config.{key}=...)"
                )


def _check_fit(config: ml_collections.ConfigDict) -> None:
    """Values that must fit each other, and the sections a check of their own reads."""
    pairing, loss = config.sampler.pairing, config.loss.name
    fits = objectives.OBJECTIVES[loss].pairings
    if pairing not in fits:
        raise InputError(
            f"config.sampler.pairing = {pairing!r} does not fit config.loss.name = {loss!r}: "
            f"use one of {fits} (only batch losses pair a clip with a relevant caption)"
        )
    o = config.optimizer
    if o.schedule == "warmup_cosine" and o.final_lr > o.lr:
        raise InputError(
            f"config.optimizer.final_lr = {o.final_lr} is above config.optimizer.lr = "
            f"{o.lr}: the cosine decays from lr down to final_lr"
        )
    for key, spec in SPECS.items():
        try:
            spec(**_get(config, key).to_dict())
        except (TypeError, ValueError) as e:
            raise InputError(f"config.{key}: {e}") from None
    try:
        features.modality_names(config.data.modalities)
    except ValueError as e:
        raise InputError(f"config.data.modalities = {config.data.modalities!r}: {e}") from None


def _check_loss(loss: ml_collections.ConfigDict) -> None:
    """Loss keywords (LOSS_KEYWORDS) of `config.loss` and of every batch loss section."""
    sections = [("loss", {"fixed_margin": loss.fixed_margin})]
    sections += [
        (f"loss.{n}", v) for n, v in loss.items() if isinstance(v, ml_collections.ConfigDict)
    ]
    for where, section in sections:
        for name, value in section.items():
            allowed = LOSS_KEYWORDS.get(name)
            if allowed is not None and value not in allowed:
                raise InputError(
                    f"config.{where}.{name} = {value!r} is out of range: use {allowed} "
                    f"(--config.{where}.{name}=...)"
                )


def _check_model(model: ml_collections.ConfigDict) -> None:
    """Model sizes: integers >= 1 (context half-widths `m_*` >= 0), dropout rates in
    [0, 1), other numbers finite and > 0."""
    for name, value in model.items():
        if name in MODEL_CHOICES and value not in MODEL_CHOICES[name]:
            raise InputError(
                f"unknown config.model.{name} {value!r}: use one of {MODEL_CHOICES[name]}"
            )
        if name == "name" or isinstance(value, bool | str):
            continue
        if isinstance(value, int):
            allowed = NON_NEGATIVE_INT if name.startswith("m_") else COUNT
        elif "dropout" in name:
            allowed = Range(0, 1, open_high=True)
        else:
            allowed = POSITIVE
        if value not in allowed:
            raise InputError(
                f"config.model.{name} = {value!r} is out of range: use {allowed} "
                f"(--config.model.{name}=...)"
            )
    for heads, width in HEADS:
        if heads in model and width in model and model[width] % model[heads]:
            raise InputError(
                f"config.model.{width} = {model[width]} is not divisible by "
                f"config.model.{heads} = {model[heads]}: attention splits the width evenly "
                f"among the heads; use a head count dividing {model[width]} "
                f"(--config.model.{heads}=...)"
            )


def best_metric_names(positives: str = "class") -> tuple[str, ...]:
    """The test metrics `checkpoint.best_metric` can name: every key of
    `jaxsvr.evaluation.metrics.evaluate` where higher is better, plus the class-threshold
    recalls (`class_*`) the evaluator adds with `eval.positives = "narration"`. Taken from
    the metrics of a 2 x 2 identity, so the list follows the metrics module."""
    eye = np.eye(2, dtype=np.float32)
    names = [k for k in metrics.evaluate(eye, eye, backend="numpy") if not k.startswith(NOT_BEST)]
    if positives == "narration":
        names += [f"class_{k}" for k in names if k.startswith(evaluator.RECALL_KEYS)]
    return tuple(names)


def check_data(config: ml_collections.ConfigDict, splits, text_fields: tuple[str, ...]) -> None:
    """Checks of the loaded data (`jaxsvr.inputs.splits.Splits`) the trainer runs
    before it writes anything: the test split is not empty, and its video features and the
    text inputs the model reads have the widths of the training ones (the model is built
    for the training widths)."""
    if not len(splits.test.video) or not splits.test.relevance.shape[1]:
        raise InputError(
            f"the test split has {splits.test.relevance.shape[0]} clips and "
            f"{splits.test.relevance.shape[1]} sentences: it needs at least one of each "
            "(config.data.annotations)"
        )
    source = config.data.features or "synthetic"
    pairs = [("video features", splits.train.video, splits.test.video)]
    pairs += [(f"text input {f!r}", splits.train.text[f], splits.test.text[f]) for f in text_fields]
    for what, train, test in pairs:
        if np.issubdtype(train.dtype, np.floating) and train.ndim >= 2 and not train.shape[-1]:
            raise InputError(
                f"train {what} are {_shape(train)} per row (config.data.features: {source}): "
                "features need a width of at least 1"
            )
        if train.shape[1:] != test.shape[1:]:
            raise InputError(
                f"train {what} are {_shape(train)} per row but test ones {_shape(test)} "
                f"(config.data.features: {source}): both splits need inputs of one shape, "
                "from the same extractor"
            )


def _shape(array) -> str:
    return "x".join(map(str, array.shape[1:])) or "scalar"


def _get(config: ml_collections.ConfigDict, key: str):
    node = config
    for part in key.split("."):
        if part not in node:
            raise InputError(f"the config has no key {key}: build it from jaxsvr.configs.base()")
        node = node[part]
    return node
