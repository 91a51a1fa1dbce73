"""Joint Part-of-Speech Embeddings (JPoSE; Wray et al., "Fine-Grained Action Retrieval
Through Multiple Parts-of-Speech Embeddings", ICCV 2019).

Two MMEs share the video feature: a verb MME (video vs the caption's verb words) and a noun
MME (video vs its noun words). The action embedding is the L2-normalised concatenation of
the two (2 * embed_dim = 512-d); test similarity is the dot product of action embeddings.
Triplets train all three spaces (`verb`, `noun`, `action`; `jaxsvr.losses.triplet`).
The word table is shared by the two text branches; per-segment video features [n, T, D]
are averaged over T first. With `text_input = "features"` the branches read the frozen
verb / noun features of the public JPoSE data folder (`verb_feature`, `noun_feature`)
instead of word tables, as the public code trains it.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxsvr.models import DotProductModel
from jaxsvr.models.mme import BagOfWords, GatedEmbedding, clip_feature, l2_normalize, text_fields


class Model(DotProductModel):
    vocab_size: int
    video_dim: int
    embed_dim: int = 256
    word_dim: int = 100
    text_input: str = "words"  # or "features": frozen verb / noun features

    levels = ("verb", "noun", "action")
    video_input = "mean"
    word_fields = ("verb", "noun")
    feature_fields = ("verb_feature", "noun_feature")

    @property
    def text_fields(self) -> tuple[str, ...]:
        return text_fields(self)

    def setup(self):
        self.words = BagOfWords(self.vocab_size, self.word_dim, name="words")
        self.video_verb = GatedEmbedding(self.embed_dim, name="video_verb")
        self.video_noun = GatedEmbedding(self.embed_dim, name="video_noun")
        self.text_verb = GatedEmbedding(self.embed_dim, name="text_verb")
        self.text_noun = GatedEmbedding(self.embed_dim, name="text_noun")

    def embed_video(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        video = clip_feature(batch["video"])
        return _with_action(self.video_verb(video), self.video_noun(video))

    def embed_text(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        if self.text_input == "features":
            verb, noun = batch["verb_feature"], batch["noun_feature"]
        else:
            verb, noun = self.words(batch["verb"]), self.words(batch["noun"])
        verb, noun = self.text_verb(verb), self.text_noun(noun)
        return _with_action(verb, noun)


def _with_action(verb: jnp.ndarray, noun: jnp.ndarray) -> dict[str, jnp.ndarray]:
    return {"verb": verb, "noun": noun, "action": l2_normalize(jnp.concatenate([verb, noun], -1))}
