"""Retrieval models (Flax linen, pure init/apply), one module per model.

Every module exports `Model`, built from `config.model` by `jaxsvr.models.build`. A model
embeds the two modalities separately, so test similarity matrices are cheap:
- `embed_video(batch, train=False) -> {level: [n, d]}` from the video inputs (`video`
  features);
- `embed_text(batch, train=False) -> {level: [n, d]}` from the text inputs (`caption`,
  `verb`, `noun` token ids; 0 = padding, 1 = unknown word);
`train=True` enables dropout where a model has it (rng stream `dropout`).
- `Model.levels`: the embedding spaces trained with triplets (`action` is the space used for
  retrieval; JPoSE adds the part-of-speech spaces `verb` and `noun`).
Embeddings are L2-normalised, so a similarity is a dot product.
"""

from __future__ import annotations

import importlib

import ml_collections

NAMES = ("mme", "jpose")


def build(config: ml_collections.ConfigDict, vocab_size: int, video_dim: int):
    """The model named by `config.model.name`, with its keyword arguments from the config."""
    name = config.model.name
    if name not in NAMES:
        from jaxsvr.errors import InputError

        raise InputError(f"unknown model {name!r} in config.model.name: use one of {NAMES}")
    module = importlib.import_module(f"jaxsvr.models.{name}")
    kwargs = {k: v for k, v in config.model.items() if k != "name"}
    return module.Model(vocab_size=vocab_size, video_dim=video_dim, **kwargs)
