"""Projection heads over frozen features: shapes, unit norms, heads, dropout."""

import jax
import numpy as np
import pytest

from jaxsvr.models import heads


def batch(n=6, dv=12, dt=10, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "video": rng.normal(size=(n, dv)).astype(np.float32),
        "text_feature": rng.normal(size=(n, dt)).astype(np.float32),
    }


@pytest.mark.parametrize("head", ["linear", "mlp"])
def test_shapes_norms_and_similarity(head):
    model = heads.Model(vocab_size=0, video_dim=12, text_dim=10, embed_dim=8, head=head, hidden=16)
    b = batch()
    params = model.init(jax.random.key(0), b)
    v, t = model.apply(params, b)
    for e in (v["action"], t["action"]):
        assert e.shape == (6, 8)
        np.testing.assert_allclose(np.linalg.norm(e, axis=-1), 1, atol=1e-5)
    sim = model.apply(params, v, t, method=model.similarity)["action"]
    np.testing.assert_allclose(sim, v["action"] @ t["action"].T, atol=1e-6)
    pairs = model.apply(params, v, t, method=model.pair_similarity)["action"]
    np.testing.assert_allclose(pairs, np.diagonal(sim), atol=1e-6)
    assert ("hidden" in params["params"]["video"]) == (head == "mlp")


def test_per_segment_video_is_averaged_and_dropout_only_in_training():
    model = heads.Model(vocab_size=0, video_dim=12, text_dim=10, embed_dim=8, dropout=0.5)
    b = batch()
    params = model.init(jax.random.key(0), b)
    seg = dict(b, video=np.repeat(b["video"][:, None], 3, axis=1))
    np.testing.assert_allclose(
        model.apply(params, seg, method=model.embed_video)["action"],
        model.apply(params, b, method=model.embed_video)["action"],
        atol=1e-6,
    )
    rngs = {"dropout": jax.random.key(1)}
    a = model.apply(params, b, True, method=model.embed_text, rngs=rngs)["action"]
    c = model.apply(params, b, False, method=model.embed_text)["action"]
    assert not np.allclose(a, c)


def test_unknown_head():
    model = heads.Model(vocab_size=0, video_dim=12, text_dim=10, head="conv")
    with pytest.raises(ValueError, match="head"):
        model.init(jax.random.key(0), batch())
