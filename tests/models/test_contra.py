"""ConTra: shapes and norms per window size, context dependence, padding, positional init,
the residual MLP g, per-segment video, dropout, jit and gradients (tiny dims)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsvr.errors import InputError
from jaxsvr.models import contra

N, D, T, L, VOCAB = 3, 10, 4, 5, 20
DIMS = dict(
    vocab_size=VOCAB,
    video_dim=D,
    embed_dim=8,
    word_dim=6,
    text_hidden=12,
    video_layers=2,
    video_heads=2,
    text_layers=1,
    text_heads=2,
    ff_dim=16,
)


def make_model(m_video=2, m_text=1, **kw):
    return contra.Model(**{**DIMS, "m_video": m_video, "m_text": m_text, **kw})


def make_batch(m_video=2, m_text=1, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, size=(N, 2 * m_text + 1, L)).astype(np.int32)
    ids[:, :, 3:] = 0  # padding
    ids[0, 0, 1:] = 0  # a one-word sentence
    return {
        "video": rng.normal(size=(N, 2 * m_video + 1, D)).astype(np.float32),
        "caption": ids,
    }


@pytest.fixture(scope="module")
def setup():
    model = make_model()
    batch = make_batch()
    params = jax.jit(model.init)(jax.random.key(0), batch)
    return model, params, batch


def _embed(model, method, params, batch, rngs=None, **kw):
    """The action embedding, jitted (eager attention layers compile op by op)."""
    fn = jax.jit(lambda p, b, r: model.apply(p, b, method=method, rngs=r, **kw)["action"])
    return np.asarray(fn(params, batch, rngs))


def video(model, params, batch, **kw):
    return _embed(model, model.embed_video, params, batch, **kw)


def text(model, params, batch, **kw):
    return _embed(model, model.embed_text, params, batch, **kw)


@pytest.mark.parametrize("m_video", [0, 2])
@pytest.mark.parametrize("m_text", [0, 1])
def test_shapes_norms_and_windows(m_video, m_text):
    model = make_model(m_video, m_text)
    assert model.windows == {"video": m_video, "caption": m_text}
    batch = make_batch(m_video, m_text)
    params = jax.jit(model.init)(jax.random.key(0), batch)
    v, t = jax.jit(model.apply)(params, batch)
    for e in (v["action"], t["action"]):
        assert e.shape == (N, 8)
        np.testing.assert_allclose(np.linalg.norm(e, axis=-1), 1, atol=1e-5)
    sim = jax.jit(lambda p, a, b: model.apply(p, a, b, method=model.similarity))(params, v, t)
    sim = sim["action"]
    np.testing.assert_allclose(sim, v["action"] @ t["action"].T, atol=1e-6)
    p = params["params"]
    assert p["video_context"]["position"].shape == (2 * m_video + 1, 8)
    assert ("text_context" in p) == (m_text > 0)
    assert p["words"]["table"]["embedding"].shape == (VOCAB, 6)
    # rows are embedded independently of one another
    one = {k: x[1:2] for k, x in batch.items()}
    np.testing.assert_allclose(video(model, params, one)[0], v["action"][1], atol=1e-5)
    np.testing.assert_allclose(text(model, params, one)[0], t["action"][1], atol=1e-5)


def test_centre_depends_on_neighbour_clips_and_sentences(setup):
    model, params, batch = setup
    v, t = video(model, params, batch), text(model, params, batch)
    moved = dict(batch, video=batch["video"].copy())
    moved["video"][:, 0] += 1.0  # the first neighbour clip of every window
    assert not np.allclose(video(model, params, moved), v, atol=1e-4)
    moved = dict(batch, caption=batch["caption"].copy())
    moved["caption"][:, 2, 0] = moved["caption"][:, 2, 0] % (VOCAB - 2) + 2  # next sentence
    assert not np.allclose(text(model, params, moved), t, atol=1e-4)


def test_window_of_one_has_no_neighbours():
    model = make_model(m_video=0, m_text=0)
    batch = make_batch(0, 0)
    params = jax.jit(model.init)(jax.random.key(0), batch)
    with pytest.raises(InputError, match="2m\\+1 = 1"):
        model.apply(params, make_batch(2, 0), method=model.embed_video)
    with pytest.raises(InputError, match="caption"):
        model.apply(params, make_batch(0, 1), method=model.embed_text)
    with pytest.raises(InputError, match="m_text"):
        make_model(m_text=-1).init(jax.random.key(0), batch)


def test_sentence_from_the_vocabulary_equals_the_sentence_from_its_slots():
    # Model.embed_text takes the vocabulary path when the table has at most half as many
    # words as the batch has token slots (the m_text = 1 tests here), else the slots
    # (m_text = 0)
    # (the vocabulary path reads each unit's maximum at its winning word: also where a word
    # repeats, its maxima tied, and where no slot holds a word)
    enc = contra.SentenceEncoder(hidden=12, embed_dim=8, dropout=0.3)
    table = jnp.asarray(np.random.default_rng(3).normal(size=(VOCAB, 6)), jnp.float32)
    ids = make_batch()["caption"]
    ids[1, 0, :3] = ids[1, 0, 0]  # one word three times
    ids[1, 1, :] = 0  # no word at all
    ids = jnp.asarray(ids)
    params = enc.init(jax.random.key(0), table[ids], ids)
    rngs = {"dropout": jax.random.key(1)}

    def slots(p, t):
        return enc.apply(p, t[ids], ids, True, rngs=rngs)

    def vocabulary(p, t):
        return enc.apply(p, t, ids, True, vocabulary=True, rngs=rngs)

    np.testing.assert_allclose(vocabulary(params, table), slots(params, table), atol=1e-6)
    weights = jnp.asarray(np.random.default_rng(4).normal(size=(N, 3, 8)), jnp.float32)
    grads = [
        jax.grad(lambda p, t, f=f: jnp.sum(f(p, t) * weights), argnums=(0, 1))(params, table)
        for f in (vocabulary, slots)
    ]
    for a, b in zip(*(jax.tree.leaves(g) for g in grads)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m_text", [0, 1])
def test_padding_does_not_change_the_sentence(m_text):
    model = make_model(m_video=0, m_text=m_text)
    batch = make_batch(0, m_text)
    params = jax.jit(model.init)(jax.random.key(0), batch)
    padded = dict(batch, caption=np.pad(batch["caption"], ((0, 0), (0, 0), (0, 4))))
    np.testing.assert_allclose(text(model, params, padded), text(model, params, batch), atol=1e-6)
    # a sentence without tokens max-pools to zero (the output bias is zero at init)
    empty = dict(batch, caption=np.zeros_like(batch["caption"]))
    if m_text == 0:
        np.testing.assert_array_equal(text(model, params, empty), 0)


def test_positional_init_and_residual_mlp():
    wide = make_model(m_video=4, embed_dim=64, video_heads=4)
    # the positions belong to the clip branch: initialising it alone draws the same values
    # (flax derives each module's key from its path) in a program half the size
    init_video = functools.partial(wide.init, method=wide.embed_video)
    params = jax.jit(init_video)(jax.random.key(0), make_batch(4, 1))["params"]
    position = params["video_context"]["position"]  # [9, 64]
    assert position.shape == (9, 64)
    assert 0.0008 < float(jnp.std(position)) < 0.0012

    batch = make_batch()
    with_g = make_model(residual_mlp=True)
    params = jax.jit(with_g.init)(jax.random.key(0), batch)
    for branch in ("video_context", "text_context"):
        assert {"g_hidden", "g_out"} <= set(params["params"][branch])
    plain = make_model()
    without_g = jax.tree_util.tree_map(lambda x: x, params)  # copy, then drop g
    for branch in ("video_context", "text_context"):
        for name in ("g_hidden", "g_out"):
            del without_g["params"][branch][name]
    assert jax.tree_util.tree_structure(without_g) == jax.tree_util.tree_structure(
        jax.eval_shape(plain.init, jax.random.key(0), batch)
    )
    # both models' clip and sentence embeddings, in one jitted program
    both = jax.jit(lambda p, q, b: (with_g.apply(p, b), plain.apply(q, b)))
    (v_g, t_g), (v, t) = both(params, without_g, batch)
    assert not np.allclose(v_g["action"], v["action"])
    assert not np.allclose(t_g["action"], t["action"])


def test_per_segment_video_is_averaged_over_segments(setup):
    model, params, batch = setup
    rng = np.random.default_rng(1)
    segments = rng.normal(size=(N, 5, T, D)).astype(np.float32)
    np.testing.assert_allclose(
        video(model, params, dict(batch, video=segments)),
        video(model, params, dict(batch, video=segments.mean(axis=2))),
        atol=1e-5,
    )


def test_dropout_only_in_training(setup):
    model, params, batch = setup
    for embed in (video, text):
        eval_a = embed(model, params, batch)
        np.testing.assert_array_equal(embed(model, params, batch, train=False), eval_a)
        train_a = embed(model, params, batch, train=True, rngs={"dropout": jax.random.key(1)})
        train_b = embed(model, params, batch, train=True, rngs={"dropout": jax.random.key(2)})
        assert not np.allclose(train_a, eval_a, atol=1e-4)
        assert not np.allclose(train_a, train_b, atol=1e-4)


def test_jit_and_finite_gradients(setup):
    model, params, batch = setup
    v, t = jax.jit(model.apply)(params, batch)
    np.testing.assert_allclose(v["action"], video(model, params, batch), atol=1e-5)
    np.testing.assert_allclose(t["action"], text(model, params, batch), atol=1e-5)

    @jax.jit
    def loss(p):
        v, t = model.apply(p, batch, True, rngs={"dropout": jax.random.key(3)})
        return jnp.sum(model.apply(p, v, t, method=model.similarity)["action"])

    grads = jax.grad(loss)(params)["params"]
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        assert np.all(np.isfinite(g)), jax.tree_util.keystr(path)
    for branch in ("video_context", "text_context"):
        assert np.any(grads[branch]["position"] != 0)
    assert np.any(grads["words"]["table"]["embedding"] != 0)


def test_window_pool():
    x = jnp.asarray(np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2))
    np.testing.assert_array_equal(contra.window_pool(x, "centre"), x[:, 1])
    np.testing.assert_allclose(contra.window_pool(x, "mean"), np.mean(np.asarray(x), axis=1))
    np.testing.assert_array_equal(contra.window_pool(x, "max"), x[:, 2])


@pytest.mark.parametrize("how", ["mean", "max"])
def test_aggregating_the_inputs_pools_the_projected_window(how):
    """aggregate_over="inputs" (the paper's Table 8 rows without an encoder): the clip is
    the pooled projected features of its window, unit-normalised; no encoder weights."""
    model = make_model(aggregate=how, aggregate_over="inputs")
    batch = make_batch()
    params = jax.jit(model.init)(jax.random.key(0), batch)
    assert "video_context" not in params["params"] and "text_context" not in params["params"]
    p = params["params"]["video_proj"]
    x = np.asarray(batch["video"]) @ np.asarray(p["kernel"]) + np.asarray(p["bias"])
    pooled = x.mean(axis=1) if how == "mean" else x.max(axis=1)
    want = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    np.testing.assert_allclose(video(model, params, batch), want, rtol=1e-5, atol=1e-6)


def test_aggregating_the_outputs_keeps_the_encoder():
    batch = make_batch()
    centre = make_model()
    params = jax.jit(centre.init)(jax.random.key(0), batch)
    out = {how: video(make_model(aggregate=how), params, batch) for how in contra.AGGREGATES}
    np.testing.assert_array_equal(out["centre"], video(centre, params, batch))
    assert not np.allclose(out["mean"], out["centre"]) and not np.allclose(out["max"], out["mean"])
    np.testing.assert_allclose(np.linalg.norm(out["max"], axis=1), 1.0, rtol=1e-5)


def test_a_shared_context_encoder_serves_clips_and_sentences():
    model = make_model(m_video=1, m_text=1, shared_context=True)
    batch = make_batch(m_video=1, m_text=1)
    params = jax.jit(model.init)(jax.random.key(0), batch)
    assert "video_context" in params["params"] and "text_context" not in params["params"]
    assert np.all(np.isfinite(text(model, params, batch)))
    for bad in (dict(m_video=2, m_text=1), dict(m_video=1, m_text=0)):
        with pytest.raises(InputError, match="shared_context"):
            make_model(shared_context=True, **bad).init(jax.random.key(0), make_batch(**bad))
    with pytest.raises(InputError, match="aggregate = 'sum'"):
        make_model(aggregate="sum").init(jax.random.key(0), make_batch())


def test_last_layer_on_the_centre_alone_equals_the_whole_window():
    """The last encoder layer computes only the centre position (its output is all that is
    read), with the whole window's dropout masks: the outputs (evaluation and training)
    and the parameters' gradients (training) equal the full layer's, which runs when the
    attention weights are sown, within float32 rounding: the same dropout bits."""
    encoder = contra.ContextEncoder(layers=2, heads=2, ff_dim=16, dropout=0.3)
    x = jax.random.normal(jax.random.key(0), (N, 5, 8))
    params = encoder.init(jax.random.key(1), x)
    rngs = {"dropout": jax.random.key(3)}

    def outputs(p, sown):
        kw = {"mutable": ["intermediates"]} if sown else {}

        def train(p):
            out = encoder.apply(p, x, True, rngs=rngs, **kw)
            return jnp.sum((out[0] if sown else out) ** 3)

        out = encoder.apply(p, x, False, **kw)
        return (out[0] if sown else out), jax.value_and_grad(train)(p)

    fast, full = (jax.jit(functools.partial(outputs, sown=s))(params) for s in (False, True))
    for a, b in zip(jax.tree.leaves(fast), jax.tree.leaves(full)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    _, state = encoder.apply(params, x, mutable=["intermediates"])
    assert state["intermediates"]["layer1"]["attention"]["attention_weights"][0].shape == (
        N,
        2,
        5,
        5,
    )  # the full layer's weights, for the analyses
