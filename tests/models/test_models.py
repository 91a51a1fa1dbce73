"""MME and JPoSE: shapes, unit norms, JPoSE's action space, masking of padding."""

import jax
import numpy as np

from jaxsvr.models import jpose, mme


def batch(n=5, d=12, length=4, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, 20, (n, length)).astype(np.int32)
    ids[:, -1] = 0  # padding
    return {
        "video": rng.normal(size=(n, d)).astype(np.float32),
        "caption": ids,
        "verb": ids[:, :2],
        "noun": ids,
    }


def test_mme_shapes_and_norms():
    model = mme.Model(vocab_size=20, video_dim=12, embed_dim=16, word_dim=8)
    b = batch()
    params = model.init(jax.random.key(0), b)
    v, t = model.apply(params, b)
    assert model.levels == ("action",)
    for e in (v["action"], t["action"]):
        assert e.shape == (5, 16)
        np.testing.assert_allclose(np.linalg.norm(e, axis=-1), 1, atol=1e-5)


def test_jpose_action_is_normalised_concatenation():
    model = jpose.Model(vocab_size=20, video_dim=12, embed_dim=16, word_dim=8)
    b = batch()
    params = model.init(jax.random.key(0), b)
    v, t = model.apply(params, b)
    for e in (v, t):
        assert e["verb"].shape == (5, 16) and e["action"].shape == (5, 32)
        want = np.concatenate([e["verb"], e["noun"]], -1) / np.sqrt(2)
        np.testing.assert_allclose(e["action"], want, atol=1e-5)


def test_padding_and_unknown_words_are_ignored():
    model = mme.Model(vocab_size=20, video_dim=12, embed_dim=16, word_dim=8)
    b = batch()
    params = model.init(jax.random.key(0), b)
    longer = dict(b, caption=np.concatenate([b["caption"], np.zeros((5, 3), np.int32)], 1))
    unknown = dict(b, caption=np.where(b["caption"] == 0, 1, b["caption"]))
    base = model.apply(params, b, method=model.embed_text)["action"]
    for other in (longer, unknown):
        np.testing.assert_allclose(
            model.apply(params, other, method=model.embed_text)["action"], base, atol=1e-6
        )
