"""ConTra (Fragomeni et al., "ConTra: (Con)text (Tra)nsformer for Cross-Modal Video
Retrieval", ACCV 2022), after the public code (adrianofragomeni/ConTra:
`src/models/contra.py`, `text_model.py`).

ConTra embeds a clip together with its neighbours in the untrimmed video: a transformer
attends over the window of 2m+1 consecutive clips centred on it, and the centre
position's output is the clip's embedding. Sentences can take the same context (the
2m+1 consecutive captions of the video); with m = 0 a sentence stands alone.

Video (`embed_video`; window [n, 2 m_video + 1, D] of clip features, centre at index
m_video, or [n, 2 m_video + 1, T, D] per-segment features averaged over T first):
  x_i = P dropout(f_i)                          Dense(embed_dim), per window position i;
                                                P = identity when not `video_projection`
  z = TransformerEncoder(dropout(x + E))        E: learnt positions [2m+1, embed_dim],
                                                init N(0, 0.001)
  v = l2_normalise(g(z_m))                      the centre position's output
The transformer (`ContextEncoder`) is PyTorch's `nn.TransformerEncoder` as the public code
builds it (each layer sows its attention weights, `jaxsvr.analysis.contra`): `layers`
post-LayerNorm layers,
  x = LN(x + dropout(SelfAttention(x)))        attention weights dropped out too,
  x = LN(x + dropout(W_2 dropout(relu(W_1 x))))  W_1: embed_dim -> ff_dim,
then a final LayerNorm (eps 1e-5 everywhere). g is the paper's residual MLP,
g(x) = x + W_4 relu(W_3 x), when `residual_mlp`; otherwise the identity (the public code).

Text (`embed_text`; windows [n, 2 m_text + 1, L] of token ids, 0 = padding):
  s = W_o dropout(max_{t valid} relu(W_h w_t))  w_t: word vectors (`words/table`),
                                                W_h: word_dim -> text_hidden (2048),
                                                W_o: text_hidden -> embed_dim
per sentence (shared weights), a sentence without tokens giving max = 0. m_text = 0:
t = l2_normalise(s); m_text > 0: the sentences of the window go through a second context
encoder (own parameters; `text_layers`, `text_heads`), t = l2_normalise(g(z_m)) as above.
Scores are dot products of the unit vectors (`DotProductModel`), level `action`.

Ablations of the paper (Table 8): `aggregate` = `centre` (default) | `mean` | `max` of the
window, over the encoder's `outputs` or (`aggregate_over="inputs"`) the projected inputs
with no encoder; `shared_context` sends sentences through the clip-context encoder (needs
m_video = m_text). Where this departs from the public code: docs/models.md#contra.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxsvr.errors import InputError
from jaxsvr.models import DotProductModel
from jaxsvr.models.dense import ATTENTION_DOT_GENERALS, Dense
from jaxsvr.models.mme import WordTable, l2_normalize

LN_EPS = 1e-5  # PyTorch's LayerNorm default (Flax's is 1e-6)
POSITION_STD = 0.001  # the public code's init of the positional embedding


class EncoderLayer(nn.Module):
    """PyTorch's default `nn.TransformerEncoderLayer`: post-LayerNorm, ReLU feed-forward,
    dropout on the attention weights and on both residual branches.

    `centre_only` (the last layer when only the centre output is read): the centre
    position's output alone, [n, 1, d] (queries, attention output and feed-forward of one
    position; keys and values from the whole window). Its dropout masks are drawn at the
    whole window's shape and their centre taken, so training draws the bits the full layer
    draws; outputs equal the full layer's centre within float32 rounding. When the
    attention weights are sown ("intermediates" mutable: `jaxsvr.analysis.contra`), the
    full layer runs.
    """

    heads: int
    ff_dim: int
    dropout: float
    centre_only: bool = False

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:  # [n, W, d]
        width, d = x.shape[1], x.shape[-1]
        full = not self.centre_only or self.is_mutable_collection("intermediates")
        # the centre path's modules carry the full layer's names: the same parameters and
        # dropout keys (Dropout_i are the names Flax gives the full layer's dropouts)
        if full:
            query, attention_fn = x, nn.dot_product_attention
            drops = [nn.Dropout(self.dropout, name=f"Dropout_{i}") for i in range(3)]
        else:
            query = x[:, width // 2 : width // 2 + 1]
            attention_fn = functools.partial(_centre_attention, width=width)
            drops = [_CentreDropout(self.dropout, width, name=f"Dropout_{i}") for i in range(3)]
        attn = nn.MultiHeadDotProductAttention(
            num_heads=self.heads,
            dropout_rate=self.dropout,
            deterministic=not train,
            attention_fn=attention_fn,
            name="attention",
            **ATTENTION_DOT_GENERALS,
        )(query, x, sow_weights=full)  # [n, heads, W, W] in "intermediates" when mutable
        x = nn.LayerNorm(epsilon=LN_EPS, name="norm1")(query + drops[0](attn, not train))
        h = nn.relu(Dense(self.ff_dim, name="ff1")(x))
        h = Dense(d, name="ff2")(drops[1](h, not train))
        return nn.LayerNorm(epsilon=LN_EPS, name="norm2")(x + drops[2](h, not train))


class _CentreDropout(nn.Module):
    """`nn.Dropout` of the centre row [n, 1, ...] of a [n, width, ...] array: the mask is
    drawn for the whole array (the bits `nn.Dropout` draws for it, under the same name)
    and its centre row applied."""

    rate: float
    width: int

    @nn.compact
    def __call__(self, y: jnp.ndarray, deterministic: bool) -> jnp.ndarray:
        if self.rate == 0.0 or deterministic:
            return y
        if self.rate == 1.0:
            return jnp.zeros_like(y)
        keep = 1.0 - self.rate
        shape = (y.shape[0], self.width) + y.shape[2:]
        mask = jax.random.bernoulli(self.make_rng("dropout"), p=keep, shape=shape)
        centre = self.width // 2
        return jax.lax.select(mask[:, centre : centre + 1], y / keep, jnp.zeros_like(y))


def _centre_attention(
    query,
    key,
    value,
    *,
    width,
    dropout_rng=None,
    dropout_rate=0.0,
    deterministic=False,
    broadcast_dropout=True,
    dtype=None,
    precision=None,
):
    """`nn.dot_product_attention` for the centre query ([n, 1, heads, depth]) against a
    window of `width` keys; the attention dropout mask is drawn at the whole window's
    [width, width] shape (broadcast over batch and heads, as Flax draws it) and its centre
    row applied."""
    weights = nn.dot_product_attention_weights(
        query, key, deterministic=True, dtype=dtype, precision=precision
    )  # [n, heads, 1, width]
    if not deterministic and dropout_rate > 0.0:
        assert broadcast_dropout, "the centre row of a broadcast mask"
        keep_prob = 1.0 - dropout_rate
        keep = jax.random.bernoulli(dropout_rng, keep_prob, (1,) * (key.ndim - 2) + (width,) * 2)
        centre = width // 2
        multiplier = keep[..., centre : centre + 1, :].astype(weights.dtype) / jnp.asarray(
            keep_prob, weights.dtype
        )
        weights = weights * multiplier
    return jnp.einsum("...hqk,...khd->...qhd", weights, value, precision=precision)


class ContextEncoder(nn.Module):
    """Window [n, W, d] -> centre embedding [n, d] (not normalised): learnt positions,
    dropout, `layers` encoder layers, final LayerNorm, the centre output, then g when
    `residual_mlp`."""

    layers: int
    heads: int
    ff_dim: int
    dropout: float
    residual_mlp: bool = False
    aggregate: str = "centre"  # of the outputs: centre, mean or max over the window

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        _, width, d = x.shape
        position = self.param("position", nn.initializers.normal(POSITION_STD), (width, d))
        x = nn.Dropout(self.dropout, deterministic=not train)(x + position)
        for i in range(self.layers):
            last = i == self.layers - 1 and self.aggregate == "centre"  # only its centre read
            x = EncoderLayer(
                self.heads, self.ff_dim, self.dropout, centre_only=last, name=f"layer{i}"
            )(x, train)
        centre = window_pool(nn.LayerNorm(epsilon=LN_EPS, name="norm")(x), self.aggregate)
        if self.residual_mlp:  # g of the paper: x + MLP(x)
            h = nn.relu(Dense(d, name="g_hidden")(centre))
            centre = centre + Dense(d, name="g_out")(h)
        return centre


AGGREGATES = ("centre", "mean", "max")  # how a window becomes one vector (Table 8)
AGGREGATE_OVER = ("outputs", "inputs")  # the encoder's outputs, or its inputs (no encoder)


def window_pool(x: jnp.ndarray, how: str) -> jnp.ndarray:
    """[n, W, d] -> [n, d]: the centre position, or the mean or max over the window."""
    if how == "centre":
        return x[:, x.shape[1] // 2]
    if how == "mean":
        return jnp.mean(x, axis=1)
    return jnp.max(x, axis=1)


class SentenceEncoder(nn.Module):
    """Token ids [..., L] -> [..., embed_dim]: per-word Dense + ReLU, max over the words
    that are not padding, dropout, Dense (the S3D/HowTo100M sentence model of the public
    code).

    `words` are the token slots' word vectors [..., L, word_dim], or with `vocabulary` the
    whole word table [V, word_dim]. The hidden layer sees one word at a time, so with the
    table each word's hidden vector is computed once and gathered by `ids`: the same
    values, and V rows of products instead of one per slot (an EPIC batch has 512 × 16
    slots, mostly padding, and 870 words: the text branch's forward and backward took
    184 → 46 ms on 2 cores; gradients agree within float32 rounding), and its max is read
    at each unit's winning word (`_max_over_words`: 220 → 39 MB of temporaries).
    """

    hidden: int
    embed_dim: int
    dropout: float

    @nn.compact
    def __call__(
        self, words: jnp.ndarray, ids: jnp.ndarray, train: bool = False, vocabulary: bool = False
    ):
        h = nn.relu(Dense(self.hidden, name="hidden")(words))  # [..., L | V, hidden]
        valid = ids > 0
        if vocabulary:
            h = _max_over_words(h, ids, valid)
        else:
            # h >= 0, so zeroing padding before the max is the max over valid words (0 if none)
            h = jnp.max(jnp.where(valid[..., None], h, 0.0), axis=-2)
        h = nn.Dropout(self.dropout, deterministic=not train)(h)
        return Dense(self.embed_dim, name="out")(h)


def _max_over_words(table: jnp.ndarray, ids: jnp.ndarray, valid: jnp.ndarray) -> jnp.ndarray:
    """max over the valid slots of `ids` [..., L] of their rows of `table` [V, hidden]
    (>= 0), per hidden unit; 0 where no slot is valid. Read from the table at each unit's
    winning word, so the backward adds [..., hidden] gradients into the table's rows
    instead of keeping and scattering [..., L, hidden] ones (an EPIC batch: 512 × 2048
    instead of 512 × 16 × 2048 floats); the same values, and the same gradients but for
    float32 rounding (ties: JAX's max shares the gradient among equal maxima, which here
    are one word repeated or relu's zeros, where the sum or relu's zero gradient is
    the same)."""
    slots = jnp.where(valid[..., None], jnp.take(table, ids, axis=0), -1.0)  # below any h
    winner = jnp.argmax(slots, axis=-2)  # [..., hidden]: a slot (an integer: no gradient)
    word = jnp.take_along_axis(ids, winner, axis=-1)  # [..., hidden]: its word
    h = table[word, jnp.arange(table.shape[-1])]
    return jnp.where(jnp.any(valid, axis=-1)[..., None], h, 0.0)


class Model(DotProductModel):
    """ConTra: {'action': [n, embed_dim]} for clip windows and caption windows."""

    vocab_size: int
    video_dim: int
    embed_dim: int = 512
    word_dim: int = 300
    text_hidden: int = 2048
    m_video: int = 4
    m_text: int = 0
    video_layers: int = 2
    video_heads: int = 8
    text_layers: int = 2
    text_heads: int = 8
    ff_dim: int = 2048
    dropout: float = 0.3
    residual_mlp: bool = False
    video_projection: bool = True
    aggregate: str = "centre"
    aggregate_over: str = "outputs"
    shared_context: bool = False  # one context encoder for clips and sentences

    levels = ("action",)
    text_fields = ("caption",)
    video_input = "segments"

    @property
    def windows(self) -> dict[str, int]:
        """Half-widths m of the context windows the data builds per input (2m+1 items)."""
        return {"video": self.m_video, "caption": self.m_text}

    def setup(self):
        for field in ("m_video", "m_text"):
            if getattr(self, field) < 0:
                raise InputError(f"config.model.{field} < 0: use a window half-width >= 0")
        if self.aggregate not in AGGREGATES or self.aggregate_over not in AGGREGATE_OVER:
            raise InputError(
                f"config.model.aggregate = {self.aggregate!r} over {self.aggregate_over!r}: use "
                f"one of {AGGREGATES} over one of {AGGREGATE_OVER}"
            )
        if self.shared_context and not (self.m_video == self.m_text > 0):
            raise InputError(
                "config.model.shared_context needs clip and text context of the same width "
                f"(m_video = m_text > 0), not {self.m_video} and {self.m_text}: use "
                "context=both"
            )
        context = dict(
            ff_dim=self.ff_dim,
            dropout=self.dropout,
            residual_mlp=self.residual_mlp,
            aggregate=self.aggregate,
        )
        self.video_drop = nn.Dropout(self.dropout)
        if self.video_projection:
            self.video_proj = Dense(self.embed_dim, name="video_proj")
        elif self.video_dim != self.embed_dim:
            raise InputError(
                f"config.model.video_projection is False, so the video features must be "
                f"embed_dim = {self.embed_dim} wide, but they have {self.video_dim} dims: "
                "set video_projection = True or embed_dim to the feature width"
            )
        self.video_context = ContextEncoder(
            self.video_layers, self.video_heads, name="video_context", **context
        )
        self.words = WordTable(self.vocab_size, self.word_dim, name="words")
        self.sentence = SentenceEncoder(
            self.text_hidden, self.embed_dim, self.dropout, name="sentence"
        )
        if self.shared_context:
            self.text_context = self.video_context
        elif self.m_text > 0:
            self.text_context = ContextEncoder(
                self.text_layers, self.text_heads, name="text_context", **context
            )

    def embed_video(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        video = batch["video"]  # [n, W, D] or [n, W, T, D]
        _check_window(video, "video", self.m_video, (3, 4))
        if video.ndim == 4:
            video = jnp.mean(video, axis=-2)
        x = self.video_drop(video, deterministic=not train)
        if self.video_projection:
            x = self.video_proj(x)  # [n, W, d]
        if self.aggregate_over == "inputs":  # the window's features pooled, no encoder
            return {"action": l2_normalize(window_pool(x, self.aggregate))}
        return {"action": l2_normalize(self.video_context(x, train))}

    def embed_text(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        ids = batch["caption"]  # [n, W, L]
        _check_window(ids, "caption", self.m_text, (3,))
        # each word's hidden vector once when that is well below one per token slot (a
        # speed choice: the backward then adds [n, W, text_hidden] gradients into the
        # table's rows; 2 <= V keeps nn.Embed's lookup of a one-row table out of it)
        if 2 <= self.vocab_size and 2 * self.vocab_size <= ids.size:
            vocabulary = self.words(jnp.arange(self.vocab_size))  # the table, [V, word_dim]
            s = self.sentence(vocabulary, ids, train, vocabulary=True)  # [n, W, d]
        else:
            s = self.sentence(self.words(ids), ids, train)
        if self.m_text == 0:
            return {"action": l2_normalize(s[:, 0])}
        if self.aggregate_over == "inputs":
            return {"action": l2_normalize(window_pool(s, self.aggregate))}
        return {"action": l2_normalize(self.text_context(s, train))}


def _check_window(x: jnp.ndarray, name: str, m: int, ndims: tuple[int, ...]) -> None:
    """Raise unless x has one of `ndims` dimensions and 2m+1 window items on axis 1."""
    if x.ndim not in ndims or x.shape[1] != 2 * m + 1:
        dims = " or ".join(map(str, ndims))
        raise InputError(
            f"batch[{name!r}] has shape {tuple(x.shape)}: ConTra expects a {dims}-dim array"
            f" with windows of 2m+1 = {2 * m + 1} items on axis 1 (m = {m})"
        )
