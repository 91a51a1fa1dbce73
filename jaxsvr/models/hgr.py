"""Hierarchical Graph Reasoning (HGR; Chen et al., "Fine-grained Video-Text Retrieval with
Hierarchical Graph Reasoning", CVPR 2020), as trained on EPIC-KITCHENS-100 by the RANP
code of Falcon et al. (aranciokov/ranp: `t2vretrieval/models/mlmatch.py`,
`encoders/mlsent.py`, `readers/rolegraphs.py`; the layers it imports from cshizhe/hgr_v2t).

HGR matches a video and a caption at three levels: the whole sentence (events), its verbs
(actions) and its noun phrases (entities); the retrieval score (`action`) is the mean of
the three.

Text (`embed_text`). Word vectors x_t (table `words/table`, dropout `dropout`) go through a
bidirectional GRU whose two directions are averaged, h_t = (h_t^fwd + h_t^bwd) / 2 (each
direction runs over the caption's tokens only; id 0 is padding). The role graph
(`jaxsvr.inputs.roles`) has nodes:
  sentence       g = sum_t softmax_t(w^T h_t + b) h_t  (over the caption's tokens),
  verb k         v_k = max_{t in k} h_t * R[role_k],
  noun phrase m  o_m = max_{t in m} h_t * R[role_m],
with R a learned role embedding (elementwise product, as the reference). Edges (target <- source):
verb <- sentence, verb <-> each of its noun phrases (`noun_verb`), and self-loops when
`self_loops`. One attention-GCN layer (`AttnGCNLayer` of the reference):
  alpha_ij = softmax_{j in N(i)} ((W_q x_i + b_q)^T (W_k x_j + b_k) / sqrt(hidden / 2)),
  x_i' = LayerNorm(x_i + dropout(W_c sum_j alpha_ij x_j))   (a node without edges: LN(x_i)).
Absent nodes (role 0, or no token inside the caption) are zero and take part in nothing.

Video (`embed_video`). Segment features f_s ([n, T, D]; [n, D] is T = 1; all-zero segments
are padding; more than `max_segments` are subsampled evenly, `subsample_segments`) go
through three linear maps, one per level, with dropout:
  sentence  e = sum_s softmax_s(w^T W_e f_s + b) W_e f_s;  verb  W_v f_s;  noun  W_o f_s.

Scores (`similarity`; the reference's `generate_scores`/`generate_phrase_scores` with
attn_fusion='embed', simattn_sigma = `attn_sigma`):
  sentence: cos(e, g);
  verb / noun: for each node c_p of that level,
    r_s = max(cos(u_s, c_p), 0) over valid segments u_s,  r <- r / ||r||,
    a_s = softmax_s(sigma r_s),  score_p = cos(sum_s a_s u_s, c_p),
  averaged over the caption's present nodes (0 for a caption without such nodes;
  `attended_cosine` computes it without forming sum_s a_s u_s per pair);
  action: (sentence + verb + noun) / 3.

Where this departs from the reference code (role ids, masks, norm clamps, the GRU's
biases, the optional text projection and self-loops): docs/models.md#hgr.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxsvr.errors import InputError
from jaxsvr.inputs.roles import ROLES
from jaxsvr.models.dense import Dense
from jaxsvr.models.mme import WordTable

EPS2 = 1e-16  # squared-norm clamp: a zero vector has cosine 0 and finite gradients
_NEG = -1e30  # logit of masked entries (finite, so fully masked rows stay NaN-free)
ALWAYS_STEPS = 8  # GRU steps always run; later ones only for a batch with longer captions
VIDEO_LEVELS = ("sentence", "verb", "noun")


class GRU(nn.Module):
    """One GRU direction over padded [n, L, E] inputs, PyTorch's gate equations:
      r = sigmoid(W_ir x + W_hr h + b_r), z = sigmoid(W_iz x + W_hz h + b_z),
      c = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) c + z h.
    The input projections of all steps are one matrix product ahead of the scan.
    `reverse` runs each sequence backwards from its last valid step; outputs at padded
    steps are meaningless (mask them).

    Why not `flax.linen.RNN(GRUCell)` / `Bidirectional`: given the same weights they compute
    exactly this, bit for bit on CPU (tests/models/test_hgr.py), but `GRUCell` keeps six
    separately initialised blocks (ir, iz, in, hr, hz, hn) under other parameter paths,
    so its initialisation differs from this one orthogonal [E, 3H] input kernel (the
    reference's) and every pinned HGR run would move; its input products also run inside
    the scan instead of as one matrix product ahead of it."""

    hidden: int
    reverse: bool = False

    @nn.compact
    def __call__(self, x: jnp.ndarray, lengths: jnp.ndarray) -> jnp.ndarray:
        h_dim = self.hidden
        orthogonal = nn.initializers.orthogonal()  # the reference's init of both kernels
        if self.reverse:
            x = _reverse_valid(x, lengths)
        gates_x = Dense(3 * h_dim, kernel_init=orthogonal, name="input")(x)  # [n, L, 3H]
        w_h = self.param("recurrent", orthogonal, (h_dim, 3 * h_dim))
        b_hn = self.param("recurrent_bias", nn.initializers.zeros, (h_dim,))

        def step(h, gx):
            gh = h @ w_h
            r = nn.sigmoid(gx[:, :h_dim] + gh[:, :h_dim])
            z = nn.sigmoid(gx[:, h_dim : 2 * h_dim] + gh[:, h_dim : 2 * h_dim])
            c = jnp.tanh(gx[:, 2 * h_dim :] + r * (gh[:, 2 * h_dim :] + b_hn))
            h = (1.0 - z) * c + z * h
            return h, h

        h0 = jnp.zeros((x.shape[0], h_dim), gates_x.dtype)
        gates_x = jnp.swapaxes(gates_x, 0, 1)  # [L, n, 3H]
        # Captions are short (EPIC: 2-3 tokens, a batch's longest rarely past 8) and the
        # recurrence dominates the text encoder, so steps past ALWAYS_STEPS run only when a
        # caption of the batch reaches them: one cond around the tail's scan (a cond per
        # step saves the forward's work but not the backward's). Skipped outputs are zeros;
        # padded steps are meaningless anyway. The gradients keep every bit whenever the
        # batch's longest caption fits ALWAYS_STEPS (the tail then adds exact zeros).
        head = min(gates_x.shape[0], ALWAYS_STEPS)
        h, hs = jax.lax.scan(step, h0, gates_x[:head])
        if gates_x.shape[0] > head:
            tail = jax.lax.cond(
                jnp.max(lengths) > head,
                lambda h: jax.lax.scan(step, h, gates_x[head:])[1],
                lambda h: jnp.zeros((gates_x.shape[0] - head,) + h.shape, h.dtype),
                h,
            )
            hs = jnp.concatenate([hs, tail])
        hs = jnp.swapaxes(hs, 0, 1)  # [n, L, H]
        return _reverse_valid(hs, lengths) if self.reverse else hs


def _reverse_valid(x: jnp.ndarray, lengths: jnp.ndarray) -> jnp.ndarray:
    """Reverses the first lengths[i] steps of each row of [n, L, ...] (padding stays)."""
    t = jnp.arange(x.shape[1])[None]
    idx = jnp.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)
    return jnp.take_along_axis(x, idx.reshape(idx.shape + (1,) * (x.ndim - 2)), axis=1)


class AttnGCNLayer(nn.Module):
    """One attention-GCN layer over [n, K, H] node states with a [n, K, K] adjacency
    (target x source): LayerNorm(x + dropout(W_c attention-weighted neighbour sum))."""

    hidden: int
    dropout: float

    @nn.compact
    def __call__(self, x: jnp.ndarray, adj: jnp.ndarray, train: bool) -> jnp.ndarray:
        d_attn = max(self.hidden // 2, 1)
        q = Dense(d_attn, name="query")(x)
        k = Dense(d_attn, name="key")(x)
        logits = jnp.einsum("nod,nid->noi", q, k) / math.sqrt(d_attn)
        attn = jax.nn.softmax(jnp.where(adj, logits, _NEG), axis=-1) * adj  # no edge: all 0
        ctx = Dense(self.hidden, use_bias=False, name="ctx")(attn @ x)
        ctx = nn.Dropout(self.dropout, deterministic=not train)(ctx)
        return nn.LayerNorm(epsilon=1e-5, name="norm")(x + ctx)


class Model(nn.Module):
    """HGR: three-level video/text embeddings and attended-cosine scores (module doc)."""

    vocab_size: int
    video_dim: int
    embed_dim: int = 1024
    word_dim: int = 300
    hidden: int = 1024
    num_verbs: int = 4
    num_nouns: int = 6
    max_segments: int = 20
    dropout: float = 0.2
    gcn_dropout: float = 0.5
    attn_sigma: float = 4.0
    num_roles: int = len(ROLES)
    self_loops: bool = False

    levels = ("action", "sentence", "verb", "noun")
    text_fields = ("caption", "token_node", "node_role", "noun_verb")
    video_input = "mean"  # per-segment real features: their temporal mean, as published
    dot_product = False

    def setup(self):
        self.words = WordTable(self.vocab_size, self.word_dim, name="words")
        self.gru_fwd = GRU(self.hidden, name="gru_fwd")
        self.gru_bwd = GRU(self.hidden, reverse=True, name="gru_bwd")
        self.word_attn = Dense(1, name="word_attn")
        self.roles = nn.Embed(self.num_roles, self.hidden, name="roles")
        self.gcn = AttnGCNLayer(self.hidden, self.gcn_dropout, name="gcn")
        if self.hidden != self.embed_dim:
            self.text_proj = {lv: Dense(self.embed_dim, name=f"text_{lv}") for lv in VIDEO_LEVELS}
        self.video_proj = {lv: Dense(self.embed_dim, name=f"video_{lv}") for lv in VIDEO_LEVELS}
        self.video_attn = Dense(1, name="video_attn")
        self.drop = nn.Dropout(self.dropout)

    def embed_video(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        """{"sentence": [n, d], "verb": [n, S, d], "noun": [n, S, d], "mask": [n, S]}."""
        video, mask = subsample_segments(batch["video"], self.max_segments)
        emb = {
            lv: self.drop(self.video_proj[lv](video), deterministic=not train) * mask[..., None]
            for lv in VIDEO_LEVELS
        }
        weights = masked_softmax(self.video_attn(emb["sentence"])[..., 0], mask)  # [n, S]
        sentence = jnp.einsum("ns,nsd->nd", weights, emb["sentence"])
        return {"sentence": sentence, "verb": emb["verb"], "noun": emb["noun"], "mask": mask}

    def embed_text(self, batch: dict, train: bool = False) -> dict[str, jnp.ndarray]:
        """{"sentence": [n, d], "verb": [n, V, d], "verb_mask": [n, V], "noun": [n, N, d],
        "noun_mask": [n, N]}."""
        ids = batch["caption"]  # [n, L]
        valid = ids > 0
        lengths = jnp.sum(valid, axis=-1)
        x = self.drop(self.words(ids), deterministic=not train)
        h = (self.gru_fwd(x, lengths) + self.gru_bwd(x, lengths)) / 2
        h = h * valid[..., None]  # [n, L, H]

        weights = masked_softmax(self.word_attn(h)[..., 0], valid)
        sentence = jnp.einsum("nl,nlh->nh", weights, h)

        n_nodes = self.num_verbs + self.num_nouns
        if (
            batch["node_role"].shape[-1] != n_nodes
            or batch["noun_verb"].shape[-1] != self.num_nouns
        ):
            raise InputError(
                f"role graphs with {batch['node_role'].shape[-1]} node slots and "
                f"{batch['noun_verb'].shape[-1]} noun slots do not fit HGR's num_verbs="
                f"{self.num_verbs}, num_nouns={self.num_nouns}: build them with those sizes"
            )
        token_node = jnp.where(valid, batch["token_node"], -1)
        member = token_node[:, None, :] == jnp.arange(n_nodes)[None, :, None]  # [n, K, L]
        role = batch["node_role"]  # [n, K]
        present = (role > 0) & jnp.any(member, axis=-1)
        pooled = jnp.max(jnp.where(member[..., None], h[:, None], _NEG), axis=2)
        nodes = jnp.where(present[..., None], pooled, 0.0) * self.roles(role)  # [n, K, H]

        adj = self._adjacency(present, batch["noun_verb"])
        graph = jnp.concatenate([sentence[:, None], nodes], axis=1)
        on = jnp.pad(present, ((0, 0), (1, 0)), constant_values=True)  # sentence always on
        graph = self.gcn(graph, adj, train) * on[..., None]

        out = {
            "sentence": graph[:, 0],
            "verb": graph[:, 1 : 1 + self.num_verbs],
            "noun": graph[:, 1 + self.num_verbs :],
        }
        if self.hidden != self.embed_dim:
            out = {lv: self.text_proj[lv](x) for lv, x in out.items()}
        out["verb"] = out["verb"] * present[:, : self.num_verbs, None]
        out["noun"] = out["noun"] * present[:, self.num_verbs :, None]
        out["verb_mask"] = present[:, : self.num_verbs]
        out["noun_mask"] = present[:, self.num_verbs :]
        return out

    def _adjacency(self, present: jnp.ndarray, noun_verb: jnp.ndarray) -> jnp.ndarray:
        """[n, 1+V+N, 1+V+N] bool edges, target x source (node 0 is the sentence)."""
        n = present.shape[0]
        verb_on, noun_on = present[:, : self.num_verbs], present[:, self.num_verbs :]
        # arg[n, m, k]: noun phrase m is an argument of verb k, both present
        arg = noun_verb[:, :, None] == jnp.arange(self.num_verbs)[None, None, :]
        arg = arg & noun_on[:, :, None] & verb_on[:, None, :]
        sentence_row = jnp.zeros((n, 1, 1 + self.num_verbs + self.num_nouns), bool)
        no_verbs = jnp.zeros((n, self.num_verbs, self.num_verbs), bool)
        no_nouns = jnp.zeros((n, self.num_nouns, self.num_nouns), bool)
        verb_rows = jnp.concatenate([verb_on[..., None], no_verbs, jnp.swapaxes(arg, 1, 2)], 2)
        noun_rows = jnp.concatenate([jnp.zeros((n, self.num_nouns, 1), bool), arg, no_nouns], 2)
        adj = jnp.concatenate([sentence_row, verb_rows, noun_rows], axis=1)
        if self.self_loops:
            on = jnp.pad(present, ((0, 0), (1, 0)), constant_values=True)
            adj = adj | (jnp.eye(adj.shape[-1], dtype=bool)[None] & on[:, :, None])
        return adj

    def __call__(self, batch: dict, train: bool = False) -> tuple[dict, dict]:
        return self.embed_video(batch, train), self.embed_text(batch, train)

    def similarity(self, video_emb: dict, text_emb: dict) -> dict[str, jnp.ndarray]:
        """{level: [Nv, Nt]} scores of every video against every text."""
        return level_scores(video_emb, text_emb, self.attn_sigma)

    def pair_similarity(self, video_emb: dict, text_emb: dict) -> dict[str, jnp.ndarray]:
        """{level: [n]} scores of aligned pairs (video k vs text k)."""

        def one(v, t):
            add_axis = lambda tree: jax.tree.map(lambda x: x[None], tree)  # noqa: E731
            return jax.tree.map(
                lambda s: s[0, 0], level_scores(add_axis(v), add_axis(t), self.attn_sigma)
            )

        return jax.vmap(one)(video_emb, text_emb)


def level_scores(video: dict, text: dict, sigma: float) -> dict[str, jnp.ndarray]:
    """All-pairs HGR scores {level: [Nv, Nt]} from `embed_video` / `embed_text` outputs."""
    sentence = _unit(video["sentence"]) @ _unit(text["sentence"]).T
    verb = attended_cosine(video["verb"], video["mask"], text["verb"], text["verb_mask"], sigma)
    noun = attended_cosine(video["noun"], video["mask"], text["noun"], text["noun_mask"], sigma)
    return {
        "action": (sentence + verb + noun) / 3,
        "sentence": sentence,
        "verb": verb,
        "noun": noun,
    }


def attended_cosine(
    video: jnp.ndarray,  # [Nv, S, d] segment embeddings
    video_mask: jnp.ndarray,  # [Nv, S] valid segments
    nodes: jnp.ndarray,  # [Nt, P, d] text node embeddings
    node_mask: jnp.ndarray,  # [Nt, P] present nodes
    sigma: float,
) -> jnp.ndarray:
    """HGR phrase-level score of every video against every text, [Nv, Nt] (module doc).

    Uses cos(sum_s a_s u_s, c) = sum_s a_s cos(u_s, c) ||u_s|| / sqrt(a^T G a), G = U U^T,
    so no [Nv, Nt, P, d] tensor is formed; the largest intermediates are [Nv, Nt, P, S].
    """
    vmask = video_mask.astype(bool)[:, None, None, :]  # [Nv, 1, 1, S]
    v_norm2 = jnp.sum(video * video, axis=-1)  # [Nv, S]
    cos = jnp.einsum("vsd,tpd->vtps", _unit(video), _unit(nodes))  # [Nv, Nt, P, S]
    r = jnp.where(vmask, jnp.maximum(cos, 0.0), 0.0)
    r = r * jax.lax.rsqrt(jnp.maximum(jnp.sum(r * r, axis=-1, keepdims=True), EPS2))
    attn = jax.nn.softmax(jnp.where(vmask, sigma * r, _NEG), axis=-1) * vmask  # [Nv, Nt, P, S]
    v_norm = v_norm2 * jax.lax.rsqrt(jnp.maximum(v_norm2, EPS2))  # ||u_s||, finite grad at 0
    numer = jnp.sum(attn * cos * v_norm[:, None, None, :], axis=-1)  # [Nv, Nt, P]
    gram = jnp.einsum("vsd,vrd->vsr", video, video)  # [Nv, S, S]
    quad = jnp.sum(jnp.einsum("vtps,vsr->vtpr", attn, gram) * attn, axis=-1)  # ||sum a u||^2
    score = numer * jax.lax.rsqrt(jnp.maximum(quad, EPS2))  # [Nv, Nt, P]
    node_mask = node_mask.astype(score.dtype)
    return jnp.sum(score * node_mask, axis=-1) / jnp.maximum(jnp.sum(node_mask, axis=-1), 1.0)


def subsample_segments(video: jnp.ndarray, max_segments: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """[n, T, D] (or [n, D]) segment features -> ([n, S, D], valid mask [n, S]).

    All-zero segments are padding. A video with more than `max_segments` segments up to
    its last valid one keeps those at round(linspace(0, len - 1, max_segments)); S =
    min(T, max_segments).
    """
    if video.ndim == 2:
        video = video[:, None]
    n, t, _ = video.shape
    valid = jnp.any(video != 0, axis=-1)  # [n, T]
    if t > max_segments:
        length = jnp.max(jnp.where(valid, jnp.arange(1, t + 1), 0), axis=-1)  # [n]
        step = (length - 1).astype(jnp.float32)[:, None] / max(max_segments - 1, 1)
        picks = jnp.round(jnp.arange(max_segments)[None] * step).astype(jnp.int32)
        picks = jnp.where(length[:, None] > max_segments, picks, jnp.arange(max_segments)[None])
        video = jnp.take_along_axis(video, picks[..., None], axis=1)
        valid = jnp.take_along_axis(valid, picks, axis=1)
    return video, valid


def masked_softmax(logits: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """Softmax over the last axis restricted to `mask`; all-masked rows give zeros."""
    return jax.nn.softmax(jnp.where(mask, logits, _NEG), axis=-1) * mask


def _unit(x: jnp.ndarray) -> jnp.ndarray:
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), EPS2))
