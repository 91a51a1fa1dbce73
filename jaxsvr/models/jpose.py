"""Joint Part-of-Speech Embeddings (JPoSE; Wray et al., "Fine-Grained Action Retrieval
Through Multiple Parts-of-Speech Embeddings", ICCV 2019).

Two MMEs share the video feature: a verb MME (video vs the caption's verb words) and a noun
MME (video vs its noun words). The action embedding is the L2-normalised concatenation of
the two (2 * embed_dim = 512-d); test similarity is the dot product of action embeddings.
Triplets train all three spaces (`verb`, `noun`, `action`; `jaxsvr.losses.triplet`).
The word table is shared by the two text branches; per-segment video features [n, T, D]
are averaged over T first.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxsvr.models import DotProductModel
from jaxsvr.models.mme import BagOfWords, GatedEmbedding, clip_feature, l2_normalize


class Model(DotProductModel):
    vocab_size: int
    video_dim: int
    embed_dim: int = 256
    word_dim: int = 100

    levels = ("verb", "noun", "action")
    text_fields = ("verb", "noun")

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
        verb = self.text_verb(self.words(batch["verb"]))
        noun = self.text_noun(self.words(batch["noun"]))
        return _with_action(verb, noun)


def _with_action(verb: jnp.ndarray, noun: jnp.ndarray) -> dict[str, jnp.ndarray]:
    return {"verb": verb, "noun": noun, "action": l2_normalize(jnp.concatenate([verb, noun], -1))}
