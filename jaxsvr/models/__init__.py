"""Retrieval models (Flax linen, pure init/apply), one module per model.

Every module exports `Model`, built from `config.model` by `jaxsvr.models.build` (every
key of `config.model` but `name` is a keyword argument of the model). A model embeds the
two modalities separately, so test similarity matrices are cheap:

- `embed_video(batch, train=False) -> {name: [n, ...]}` from `batch["video"]` ([n, D] clip
  features or [n, T, D] per-segment features);
- `embed_text(batch, train=False) -> {name: [n, ...]}` from the text inputs the model
  names in `Model.text_fields` (token ids `caption`, `verb`, `noun`: 0 = padding,
  1 = unknown word; role-graph fields of `jaxsvr.inputs.roles`; frozen caption features
  `text_feature`);
- `similarity(video_emb, text_emb) -> {level: [n_videos, n_texts]}`: the scores of every
  video against every text, one matrix per level;
- `pair_similarity(video_emb, text_emb) -> {level: [n]}`: the scores of aligned pairs
  (row k of each), used by the triplet loss.

`train=True` enables dropout where a model has it (rng stream `dropout`).

Class attributes:
- `levels`: the score levels; `action` is the retrieval score every evaluation ranks by.
  JPoSE adds its part-of-speech spaces `verb` and `noun`, HGR its `sentence`, `verb` and
  `noun` levels (its `action` is their mean). Losses are applied per level with
  `config.loss.level_weights`.
- `text_fields`: the text inputs `embed_text` reads (MME and JPoSE: their word fields, or
  with `text_input = "features"` frozen text features; `text_fields(config)` below).
- `video_input`: what the model reads of real per-segment features [n, T, D]: `mean` (a
  clip vector, computed once at load: MME, JPoSE, HGR as published) or `segments`
  (heads, ConTra); `config.data.temporal` overrides it (`video_input(config)`).
- `dot_product`: True when every level's embeddings are unit vectors and a score is their
  dot product (MME, JPoSE, heads). Such models also get within-modality triplet terms
  (text-text, video-video), and the evaluator scores them with one matrix product.
- `windows` (context models, ConTra): {input: m}, the half-width of the context window
  the data gathers for that input: the model then gets [n, 2m + 1, ...] (the item in the
  centre, `jaxsvr.inputs.windows`) instead of [n, ...].
- The word-embedding table, when a model has one, is the submodule `words` holding an
  `nn.Embed` named `table` (`params["params"]["words"]["table"]["embedding"]`), so a
  word-vector file (`config.data.word_vectors`) can initialise it.
"""

from __future__ import annotations

import dataclasses
import importlib

import flax.linen as nn
import jax.numpy as jnp
import ml_collections

from jaxsvr.errors import InputError

NAMES = ("mme", "jpose", "hgr", "heads", "contra")


def model_class(name: str) -> type:
    """The `Model` class of `jaxsvr.models.<name>` (its levels, text fields, ...)."""
    if name not in NAMES:
        raise InputError(f"unknown model {name!r} in config.model.name: use one of {NAMES}")
    return importlib.import_module(f"jaxsvr.models.{name}").Model


def build(config: ml_collections.ConfigDict, vocab_size: int, video_dim: int, **dims):
    """The model named by `config.model.name`, with its keyword arguments from the config.

    `dims` are sizes the data decides (e.g. `text_dim` of frozen caption features); each
    goes to the models that have a field of that name.
    """
    name = config.model.name
    cls = model_class(name)
    fields = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in config.model.items() if k != "name"}
    kwargs.update({k: v for k, v in dims.items() if k in fields})
    try:
        return cls(vocab_size=vocab_size, video_dim=video_dim, **kwargs)
    except TypeError as e:
        raise InputError(f"config.model does not fit model {name!r}: {e}") from None


def text_fields(config: ml_collections.ConfigDict) -> tuple[str, ...]:
    """The text inputs the model of `config.model` reads, before the data sizes are known."""
    return build(config, vocab_size=1, video_dim=1).text_fields


def video_input(config: ml_collections.ConfigDict) -> str:
    """ "mean" or "segments": how `config.data.temporal` ("auto": the model's own
    `video_input`) says real per-segment features enter the model."""
    temporal = config.data.temporal
    return model_class(config.model.name).video_input if temporal == "auto" else temporal


def dot_similarity(video: dict, text: dict, levels: tuple[str, ...]) -> dict[str, jnp.ndarray]:
    """{level: video[level] @ text[level].T} for unit-vector embeddings."""
    return {lv: video[lv] @ text[lv].T for lv in levels}


def dot_pair_similarity(video: dict, text: dict, levels: tuple[str, ...]) -> dict:
    """{level: [n]} dot products of aligned rows."""
    return {lv: jnp.sum(video[lv] * text[lv], axis=-1) for lv in levels}


class DotProductModel(nn.Module):
    """Base of models whose every level is a unit vector per item, scored by dot products
    (MME, JPoSE, heads, ConTra): subclasses define `levels`, `text_fields`, `embed_video` and
    `embed_text`."""

    dot_product = True

    def similarity(self, video: dict, text: dict) -> dict[str, jnp.ndarray]:
        return dot_similarity(video, text, self.levels)

    def pair_similarity(self, video: dict, text: dict) -> dict[str, jnp.ndarray]:
        return dot_pair_similarity(video, text, self.levels)

    def __call__(self, batch: dict, train: bool = False) -> tuple[dict, dict]:
        return self.embed_video(batch, train), self.embed_text(batch, train)
