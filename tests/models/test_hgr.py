"""HGR: shapes, masking of padding and absent nodes, the Gram-matrix attended cosine
against a direct loop, pair scores, segment subsampling, jit and gradients."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsvr.errors import InputError
from jaxsvr.inputs import roles
from jaxsvr.models import hgr

ROWS = [  # (caption ids, caption, verb, nouns)
    ([2, 3, 4], "turn on light", "turn-on", ("light",)),
    ([5, 6, 7, 8], "put plate in sink", "put", ("plate", "sink")),
    ([9, 10], "open tap", "turn-on", ("tap",)),  # no verb node
    ([11], "stir", "stir", ()),  # no noun node
]
L, T, D = 6, 4, 12


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(ROWS), L), np.int32)
    for i, row in enumerate(ROWS):
        ids[i, : len(row[0])] = row[0]
    _, caps, verbs, nouns = zip(*ROWS)
    graphs = roles.from_columns(caps, verbs, nouns, max_len=L, num_verbs=2, num_nouns=3)
    video = rng.normal(size=(len(ROWS), T, D)).astype(np.float32)
    video[1, 3:] = 0  # padding segment
    video[3, 1:] = 0
    return {"video": video, "caption": ids, **graphs}


@pytest.fixture(scope="module")
def setup():
    # hidden != embed_dim: the text levels get their projections
    model = hgr.Model(
        vocab_size=20,
        video_dim=D,
        embed_dim=16,
        word_dim=8,
        hidden=12,
        num_verbs=2,
        num_nouns=3,
        max_segments=T,
    )
    batch = make_batch()
    params = jax.jit(model.init)(jax.random.key(0), batch)
    embed = jax.jit(model.apply)
    return model, params, batch, embed


def assert_trees_close(a, b, atol=1e-6):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, atol=atol), a, b)


def test_shapes(setup):
    model, params, batch, embed = setup
    assert "embedding" in params["params"]["words"]["table"]
    v, t = embed(params, batch)
    assert v["sentence"].shape == (4, 16) and v["verb"].shape == (4, T, 16)
    assert v["noun"].shape == (4, T, 16) and v["mask"].shape == (4, T)
    assert t["sentence"].shape == (4, 16) and t["verb"].shape == (4, 2, 16)
    assert t["noun"].shape == (4, 3, 16) and t["noun_mask"].shape == (4, 3)
    np.testing.assert_array_equal(t["verb_mask"], [[1, 0], [1, 0], [0, 0], [1, 0]])
    np.testing.assert_array_equal(t["noun_mask"], [[1, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(v["mask"].sum(1), [4, 3, 4, 1])
    assert not np.any(t["noun"][3]) and not np.any(v["verb"][1, 3])
    assert "text_noun" in params["params"]
    # the reference's sizes (hidden == embed_dim) have no projection
    same = model.clone(hidden=16)
    shapes = jax.eval_shape(same.init, jax.random.key(1), batch)
    assert not any(k.startswith("text_") for k in shapes["params"])
    assert jax.eval_shape(same.apply, shapes, batch)[1]["noun"].shape == (4, 3, 16)
    with pytest.raises(InputError, match="num_verbs=2, num_nouns=4"):
        jax.eval_shape(model.clone(num_nouns=4).init, jax.random.key(1), batch)


def test_padding_and_absent_nodes_change_nothing(setup):
    model, params, batch, embed = setup
    _, base = embed(params, batch)
    pad = batch["caption"] == 0
    longer = dict(
        batch,
        caption=np.pad(batch["caption"], ((0, 0), (0, 2))),
        token_node=np.pad(batch["token_node"], ((0, 0), (0, 2)), constant_values=1),
    )
    garbage_at_padding = dict(batch, token_node=np.where(pad, 2, batch["token_node"]))
    absent = dict(batch)  # tokens of no node pointed at empty slots; their noun_verb set
    absent["token_node"] = np.where(batch["token_node"] < 0, 4, batch["token_node"])
    absent["noun_verb"] = np.where(batch["node_role"][:, 2:] == 0, 0, batch["noun_verb"])
    table = params["params"]["words"]["table"]["embedding"]
    padding_row = jax.tree.map(lambda x: x, params)
    padding_row["params"]["words"]["table"]["embedding"] = table.at[0].set(5.0)
    for p, b in (
        (params, longer),
        (params, garbage_at_padding),
        (params, absent),
        (padding_row, batch),
    ):
        assert_trees_close(embed(p, b)[1], base)


def test_video_padding_and_clip_features(setup):
    model, params, batch, embed = setup
    v, t = embed(params, batch)
    video = jax.jit(functools.partial(model.apply, method=model.embed_video))
    similarity = jax.jit(functools.partial(model.apply, method=model.similarity))
    # two more zero segments (max_segments raised so no subsampling happens)
    wide = model.clone(max_segments=T + 2)
    padded = dict(batch, video=np.pad(batch["video"], ((0, 0), (0, 2), (0, 0))))
    v2 = jax.jit(functools.partial(wide.apply, method=wide.embed_video))(params, padded)
    np.testing.assert_allclose(v2["sentence"], v["sentence"], atol=1e-6)
    scores = similarity(params, v, t)
    assert_trees_close(similarity(params, v2, t), scores)
    # [n, D] clip features are one segment
    clip = dict(batch, video=batch["video"][:, 0])
    one = dict(batch, video=batch["video"][:, :1])
    assert_trees_close(video(params, clip), video(params, one))


def direct_attended_cosine(video, vmask, nodes, nmask, sigma):
    """HGR's phrase score as the reference states it, pair by pair, in float64."""
    video, nodes = np.float64(video), np.float64(nodes)
    out = np.zeros((len(video), len(nodes)))
    for i in range(len(video)):
        u = video[i][vmask[i].astype(bool)]
        for j in range(len(nodes)):
            scores = []
            for c in nodes[j][nmask[j].astype(bool)]:
                if not len(u):
                    scores.append(0.0)
                    continue
                cos = u @ c / (np.linalg.norm(u, axis=1) * np.linalg.norm(c))
                r = np.maximum(cos, 0)
                r = r / max(np.linalg.norm(r), 1e-10)
                a = np.exp(sigma * r) / np.sum(np.exp(sigma * r))
                attended = a @ u
                scores.append(attended @ c / (np.linalg.norm(attended) * np.linalg.norm(c)))
            out[i, j] = np.mean(scores) if scores else 0.0
    return out


def test_similarity_matches_direct_formula(setup):
    model, params, _, _ = setup
    rng = np.random.default_rng(1)
    nv, nt, s, p, d = 5, 6, 4, 3, 16
    v = {
        k: rng.normal(size=shape).astype(np.float32)
        for k, shape in (("sentence", (nv, d)), ("verb", (nv, s, d)), ("noun", (nv, s, d)))
    }
    v["mask"] = rng.random((nv, s)) < 0.7
    v["mask"][0] = True
    v["mask"][1] = False  # a video without valid segments scores 0
    t = {
        k: rng.normal(size=shape).astype(np.float32)
        for k, shape in (("sentence", (nt, d)), ("verb", (nt, p, d)), ("noun", (nt, p, d)))
    }
    t["verb_mask"] = rng.random((nt, p)) < 0.6
    t["verb_mask"][0] = False  # a caption without verbs scores 0
    t["noun_mask"] = rng.random((nt, p)) < 0.6
    t["noun_mask"][1] = True
    got = jax.jit(lambda a, b: model.apply(params, a, b, method=model.similarity))(v, t)
    for level in ("verb", "noun"):
        mask = t[f"{level}_mask"]
        want = direct_attended_cosine(v[level], v["mask"], t[level], mask, model.attn_sigma)
        np.testing.assert_allclose(got[level], want, rtol=1e-5, atol=1e-6)
    assert not np.any(got["verb"][:, 0]) and not np.any(got["verb"][1])
    sentence = v["sentence"] @ t["sentence"].T
    sentence /= np.outer(
        np.linalg.norm(v["sentence"], axis=1), np.linalg.norm(t["sentence"], axis=1)
    )
    np.testing.assert_allclose(got["sentence"], sentence, rtol=1e-5, atol=1e-6)
    mean = (got["sentence"] + got["verb"] + got["noun"]) / 3
    np.testing.assert_allclose(got["action"], mean, rtol=1e-6, atol=1e-7)
    # aligned pairs: the diagonal
    rows = jax.tree.map(lambda x: x[:5], t)
    pairs = jax.jit(functools.partial(model.apply, method=model.pair_similarity))(params, v, rows)
    for level in model.levels:
        np.testing.assert_allclose(pairs[level], np.diag(got[level][:, :5]), rtol=1e-5, atol=1e-6)


def test_subsampling_takes_evenly_spaced_valid_segments():
    index = np.arange(1, 26, dtype=np.float32)  # segment k holds k + 1
    video = np.zeros((3, 25, 2), np.float32)
    video[0, :, 0] = index  # 25 valid -> round(linspace(0, 24, 5))
    video[1, :10, 0] = index[:10]  # 10 valid -> round(linspace(0, 9, 5)), half to even
    video[2, :3, 0] = index[:3]  # 3 valid: kept, then padding
    picked, mask = hgr.subsample_segments(jnp.asarray(video), 5)
    np.testing.assert_array_equal(
        picked[..., 0], [[1, 7, 13, 19, 25], [1, 3, 5, 8, 10], [1, 2, 3, 0, 0]]
    )
    np.testing.assert_array_equal(mask, [[1] * 5, [1] * 5, [1, 1, 1, 0, 0]])
    assert np.array_equal(np.round(np.linspace(0, 9, 5)), [0, 2, 4, 7, 9])  # the reference's


def test_training_gradients_are_finite(setup):
    model, params, batch, _ = setup

    def loss(p):
        # rbg keys: threefry dropout masks take seconds to compile on CPU
        rngs = {"dropout": jax.random.key(2, impl="rbg")}
        v, t = model.apply(p, batch, train=True, rngs=rngs)
        scores = model.apply(p, v, t, method=model.similarity)
        pairs = model.apply(p, v, t, method=model.pair_similarity)
        return sum(jnp.sum(s) for s in scores.values()) - sum(jnp.sum(s) for s in pairs.values())

    value, grads = jax.jit(jax.value_and_grad(loss))(params)
    assert np.isfinite(value)
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    flat = jax.tree_util.tree_flatten_with_path(grads)[0]
    nonzero = {jax.tree_util.keystr(k) for k, g in flat if np.any(g != 0)}
    for name in ("gru_fwd", "gru_bwd", "roles", "gcn", "video_verb", "video_attn", "words"):
        assert any(name in k for k in nonzero), name


@pytest.mark.parametrize(
    "slots, lengths",
    [
        (5, [5, 2, 0]),
        (12, [12, 9, 0]),  # past hgr.ALWAYS_STEPS: the tail's steps run
        (12, [5, 2, 0]),  # slots past ALWAYS_STEPS that no caption reaches: skipped
    ],
)
def test_gru_directions_match_a_numpy_loop(slots, lengths):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, slots, 4)).astype(np.float32)
    lengths = np.array(lengths)
    for reverse in (False, True):
        gru = hgr.GRU(6, reverse=reverse)
        params = gru.init(jax.random.key(4), x, lengths)
        got = np.asarray(gru.apply(params, x, lengths))
        p = params["params"]
        w_i, b_i = p["input"]["kernel"], p["input"]["bias"]
        w_h, b_hn = p["recurrent"], p["recurrent_bias"]
        sigmoid = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
        for row, n in enumerate(lengths):
            h = np.zeros(6)
            steps = range(n - 1, -1, -1) if reverse else range(n)
            for t in steps:
                gx, gh = x[row, t] @ w_i + b_i, h @ w_h
                r = sigmoid(gx[:6] + gh[:6])
                z = sigmoid(gx[6:12] + gh[6:12])
                c = np.tanh(gx[12:] + r * (gh[12:] + b_hn))
                h = (1 - z) * c + z * h
                np.testing.assert_allclose(got[row, t], h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_equals_flax_rnn_of_gru_cells_with_the_same_parameters(reverse):
    """HGR's GRU computes what flax.linen.RNN(GRUCell) computes on the valid steps, given
    the same weights, to float32 rounding (bit for bit on some CPUs, not on AVX-512 ones:
    the two group the gate products differently); it stays hand-written for its
    initialisation (one orthogonal [E, 3H] input kernel, as the reference) and the pinned
    runs."""
    import flax.linen as nn

    from jaxsvr.models.hgr import GRU

    n, length, e, h = 6, 9, 8, 16
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(n, length, e)), jnp.float32)
    lengths = jnp.asarray(rng.integers(1, length + 1, n))
    ours = GRU(h, reverse=reverse)
    p = ours.init(jax.random.key(0), x, lengths)["params"]
    k, b, w = p["input"]["kernel"], p["input"]["bias"], p["recurrent"]

    def part(a, i):
        return a[..., i * h : (i + 1) * h]

    cell = {
        **{g: {"kernel": part(k, i), "bias": part(b, i)} for i, g in enumerate(("ir", "iz", "in"))},
        "hr": {"kernel": part(w, 0)},
        "hz": {"kernel": part(w, 1)},
        "hn": {"kernel": part(w, 2), "bias": p["recurrent_bias"]},
    }
    rnn = nn.RNN(nn.GRUCell(h), reverse=reverse, keep_order=True)
    got = rnn.apply({"params": {"cell": cell}}, x, seq_lengths=lengths)
    want = ours.apply({"params": p}, x, lengths)
    valid = (jnp.arange(length)[None] < lengths[:, None])[..., None]
    np.testing.assert_allclose(np.where(valid, got, 0), np.where(valid, want, 0), atol=1e-6)
