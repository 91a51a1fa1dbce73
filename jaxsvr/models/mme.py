"""Mixture-of-Embedding-Experts style joint embedding (MME), the JPoSE building block.

Per modality (Miech et al., "Learning a Text-Video Embedding from Incomplete and
Heterogeneous Data", 2018; as used by JPoSE, Wray et al. ICCV 2019):
  x -> L2-normalise -> Dense(d) -> context gating x * sigmoid(W x + b) -> L2-normalise.
Text enters as the mean of learned word embeddings over the caption's tokens (padding
masked), or, with `text_input = "features"`, as frozen sentence features (the public
JPoSE data folder's word2vec averages, `caption_feature`: `jaxsvr.inputs.jpose_folder`),
as the public code trains it. `Model` is MME trained on whole captions: one retrieval
space, `action`.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxsvr.models import DotProductModel
from jaxsvr.models.dense import Dense

EPS = 1e-8
TEXT_INPUTS = ("words", "features")  # config.model.text_input of MME / JPoSE


def clip_feature(video: jnp.ndarray) -> jnp.ndarray:
    """[n, D] clip features as they are; [n, T, D] per-segment features averaged over T
    (the temporal mean the public JPoSE code feeds its MMEs)."""
    return jnp.mean(video, axis=-2) if video.ndim == 3 else video


def l2_normalize(x: jnp.ndarray, axis: int = -1) -> jnp.ndarray:
    """x / ||x||, with a zero vector (e.g. a caption without nouns) mapped to zero and
    finite gradients there."""
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=axis, keepdims=True), EPS * EPS))


class GatedEmbedding(nn.Module):
    """L2-normalise -> Dense(dim) -> context gating -> L2-normalise.

    The input is normalised before the product on purpose: (x W) / |x| would skip writing
    the normalised rows (~5% of a JPoSE step) but lets a diverging run's activations grow
    with |x| |W| and overflow to NaN steps before its parameters do, which the trainer's
    divergence and vanishing-gradient handling rely on seeing (tests/test_checkpoint_faults).
    """

    dim: int

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        x = Dense(self.dim, name="proj")(l2_normalize(x))
        x = x * nn.sigmoid(Dense(self.dim, name="gate")(x))
        return l2_normalize(x)


def word_table(vocab_size: int, word_dim: int) -> nn.Embed:
    """The word-embedding table of a text encoder (named `table`; init N(0, 0.1)), inside a
    submodule `words` so word vectors can be written to it (`jaxsvr.models`)."""
    return nn.Embed(vocab_size, word_dim, embedding_init=nn.initializers.normal(0.1), name="table")


class WordTable(nn.Module):
    """Word-embedding lookup, `table` being the `nn.Embed` word vectors are written to."""

    vocab_size: int
    word_dim: int

    @nn.compact
    def __call__(self, ids: jnp.ndarray) -> jnp.ndarray:
        return word_table(self.vocab_size, self.word_dim)(ids)


class BagOfWords(nn.Module):
    """Mean of word embeddings over known tokens: [n, L] ids -> [n, word_dim].

    Padding (0) and unknown words (1, never seen in training) are left out.
    """

    vocab_size: int
    word_dim: int

    @nn.compact
    def __call__(self, ids: jnp.ndarray) -> jnp.ndarray:
        table = word_table(self.vocab_size, self.word_dim)
        mask = (ids > 1).astype(jnp.float32)[..., None]
        total = jnp.sum(table(ids) * mask, axis=-2)
        return total / jnp.maximum(jnp.sum(mask, axis=-2), 1.0)


class Model(DotProductModel):
    """MME over whole captions: {'action': [n, embed_dim]} for videos and texts."""

    vocab_size: int
    video_dim: int
    embed_dim: int = 256
    word_dim: int = 100
    text_input: str = "words"  # or "features": frozen caption features

    levels = ("action",)
    video_input = "mean"
    word_fields = ("caption",)
    feature_fields = ("caption_feature",)

    @property
    def text_fields(self) -> tuple[str, ...]:
        return text_fields(self)

    def setup(self):
        self.words = BagOfWords(self.vocab_size, self.word_dim, name="words")
        self.video_head = GatedEmbedding(self.embed_dim, name="video")
        self.text_head = GatedEmbedding(self.embed_dim, name="text")

    def embed_video(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        return {"action": self.video_head(clip_feature(batch["video"]))}

    def embed_text(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        if self.text_input == "features":
            return {"action": self.text_head(batch["caption_feature"])}
        return {"action": self.text_head(self.words(batch["caption"]))}


def text_fields(model) -> tuple[str, ...]:
    """The text inputs of an MME-style model: its word fields (token ids), or with
    `text_input = "features"` its frozen feature fields (`jaxsvr.train.checks` checks
    `config.model.text_input` against `TEXT_INPUTS`)."""
    return model.feature_fields if model.text_input == "features" else model.word_fields
