"""Dual projection heads over frozen clip and caption features.

The cheap setting in which the max-margin ranking losses (MI-MM, adaptive MI-MM) and SMS
are compared: the SMS paper (Wang et al., EPIC-KITCHENS-100 MIR challenge 2024) fine-tunes
a CLIP-style dual encoder (AVION); here both encoders stay frozen and only a head per
modality is trained, so a loss comparison takes minutes on a CPU.

Per modality: `head = "linear"`: Dense(embed_dim); `head = "mlp"`: Dense(hidden) -> GELU
-> dropout -> Dense(embed_dim); then L2-normalise. Clip features [n, D] (or per-segment
[n, T, D], averaged over T) and caption features `text_feature` [n, Dt] (the frozen text
encoder's outputs; `jaxsvr.inputs.synthetic_text` makes synthetic ones) enter as they are.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from jaxsvr.errors import InputError
from jaxsvr.models import DotProductModel
from jaxsvr.models.dense import Dense
from jaxsvr.models.mme import clip_feature, l2_normalize

HEADS = ("linear", "mlp")


class Projection(nn.Module):
    """A linear or MLP head followed by L2 normalisation."""

    embed_dim: int
    head: str = "mlp"
    hidden: int = 1024
    dropout: float = 0.1

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        if self.head == "mlp":
            x = nn.gelu(Dense(self.hidden, name="hidden")(x))
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        elif self.head != "linear":
            raise InputError(f"unknown config.model.head {self.head!r}: use one of {HEADS}")
        return l2_normalize(Dense(self.embed_dim, name="out")(x))


class Model(DotProductModel):
    """Heads over frozen features: {'action': [n, embed_dim]} for videos and texts."""

    vocab_size: int  # unused: the text side reads features, not words
    video_dim: int
    text_dim: int = 512
    embed_dim: int = 256
    head: str = "mlp"
    hidden: int = 1024
    dropout: float = 0.1

    levels = ("action",)
    text_fields = ("text_feature",)
    video_input = "segments"  # averaged inside (clip_feature)

    def setup(self):
        kw = dict(head=self.head, hidden=self.hidden, dropout=self.dropout)
        self.video_head = Projection(self.embed_dim, name="video", **kw)
        self.text_head = Projection(self.embed_dim, name="text", **kw)

    def embed_video(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        return {"action": self.video_head(clip_feature(batch["video"]), train)}

    def embed_text(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        return {"action": self.text_head(batch["text_feature"], train)}
