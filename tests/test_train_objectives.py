"""Every loss with every model: batch losses (online mining) and triplets across MME,
JPoSE, HGR and heads; similarity export for ensembles; objective errors."""

import numpy as np
import pytest
from train_runs import config, train_losses

from jaxsvr.errors import InputError
from jaxsvr.evaluation import evaluate
from jaxsvr.train import loop

ONE = dict(train__num_epochs=1, eval__every_epochs=1)


def test_hgr_with_ranp_trains_and_exports_its_similarity(tmp_path):
    c = config("epic_hgr", "ranp,runlocal", eval__export_similarity=True, **ONE)
    m = loop.train_and_evaluate(c, tmp_path)
    assert m["step"] == 7 and 0 < m["ndcg_avg"] <= 1
    assert {"train/action_ranp", "train/loss"} <= set(_rows(tmp_path)[0])
    sim, rel = np.load(tmp_path / "test_similarity.npy"), np.load(tmp_path / "test_relevance.npy")
    assert sim.shape == rel.shape and rel.shape[0] == 60 and sim.dtype == np.float32
    assert evaluate(sim, rel)["ndcg_avg"] == pytest.approx(m["ndcg_avg"], abs=1e-9)


@pytest.mark.parametrize(
    "name, arg, overrides",
    [
        ("epic_jpose", "runlocal", dict(loss__name="ranp")),
        ("epic_mme", "runlocal", dict(loss__name="multi_similarity")),
        (
            "epic_sms",
            "runlocal",
            dict(loss__name="triplet", loss__margin="relevance", sampler__pairing="own"),
        ),
        ("epic_hgr", "runlocal", dict(loss__name="triplet")),  # video-text pairs only
    ],
)
def test_model_and_loss_combinations(tmp_path, name, arg, overrides):
    """Losses on models other than their config's (each config's own loss trains in
    tests/test_runlocal_pinned.py)."""
    m = loop.train_and_evaluate(config(name, arg, **overrides, **ONE), tmp_path)
    assert m["step"] == 7 and 0 < m["ndcg_avg"] <= 1
    losses = train_losses(tmp_path)
    assert losses and all(np.isfinite(v) for v in losses.values())


def test_jpose_batch_loss_terms_per_level(tmp_path):
    loop.train_and_evaluate(config(loss__name="max_margin", **ONE), tmp_path)
    row = _rows(tmp_path)[0]
    assert {"train/verb_max_margin", "train/noun_max_margin", "train/action_max_margin"} <= set(row)


def test_host_gather_matches_device_gather_for_a_batch_loss(tmp_path):
    c = dict(train__num_epochs=2, eval__every_epochs=2)
    loop.train_and_evaluate(config("epic_sms", "sms,runlocal", **c), tmp_path / "d")
    loop.train_and_evaluate(
        config("epic_sms", "sms,runlocal", train__gather="host", **c), tmp_path / "h"
    )
    a, b = train_losses(tmp_path / "d"), train_losses(tmp_path / "h")
    np.testing.assert_allclose(list(b.values()), list(a.values()), rtol=1e-6)


@pytest.mark.parametrize(
    "name, arg, overrides, match",
    [
        (
            "epic_jpose",
            "runlocal",
            dict(**{f"loss__pair_weights__{p}": 0.0 for p in ("tv", "vt", "tt", "vv")}),
            "pair type",
        ),
        ("epic_sms", "runlocal", dict(loss__name="triplet"), "pairing"),
        ("epic_sms", "runlocal", dict(sampler__pair_threshold=1.0), "pair_threshold"),
        ("epic_sms", "runlocal", dict(model__head="conv"), "head"),
        ("epic_sms", "runlocal", dict(data__synthetic_text__dim=0), "synthetic_text"),
        ("epic_jpose", "runlocal", dict(train__max_steps=-1), "max_steps"),
        ("epic_jpose", "runlocal", dict(loss__name="arcface"), "loss.name"),
        (
            "epic_mme",
            "runlocal",
            dict(loss__name="ran", loss__level_weights__action=0.0),
            "weight 0",
        ),
        ("epic_sms", "runlocal", dict(data__word_vectors="/nonexistent.txt"), "word"),
    ],
)
def test_objective_errors(tmp_path, name, arg, overrides, match):
    with pytest.raises((InputError, FileNotFoundError), match=match):
        loop.train_and_evaluate(config(name, arg, **overrides, **ONE), tmp_path)


def _rows(workdir):
    from train_runs import jsonl

    return [r for r in jsonl(workdir) if "train/loss" in r]


def test_block_scoring_equals_all_pairs_with_ragged_chunks():
    """HGR test scores computed in [chunk, text_chunk] blocks on the devices."""
    import jax

    from jaxsvr.evaluation import evaluate
    from jaxsvr.evaluation.evaluator import RetrievalEvaluator
    from jaxsvr.inputs import roles
    from jaxsvr.models import hgr
    from jaxsvr.runtime import parallel

    rng = np.random.default_rng(0)
    nv, nt = 13, 11
    captions = [f"take plate {i}" if i % 2 else "put knife in drawer" for i in range(nt)]
    graphs = roles.from_columns(
        captions,
        ["take" if i % 2 else "put" for i in range(nt)],
        [("plate",) if i % 2 else ("knife", "drawer") for i in range(nt)],
        max_len=6,
    )
    text = {"caption": rng.integers(2, 30, (nt, 6)).astype(np.int32), **graphs}
    video = rng.normal(size=(nv, 3, 10)).astype(np.float32)
    model = hgr.Model(vocab_size=30, video_dim=10, embed_dim=8, word_dim=6, hidden=8)
    first = {"video": video[:2], **{k: v[:2] for k, v in text.items()}}
    params = jax.jit(model.init)(jax.random.key(0), first)  # jitted: eager GRUs crawl
    rel = rng.uniform(size=(nv, nt)).astype(np.float32)
    mesh = parallel.make_mesh()
    ev = RetrievalEvaluator(model, video, text, rel, mesh, chunk=4, text_chunk=5, backend="numpy")
    got = ev.similarity(params)

    @jax.jit
    def all_pairs(params, video, text):
        v = model.apply(params, {"video": video}, method=model.embed_video)
        t = model.apply(params, text, method=model.embed_text)
        return model.apply(params, v, t, method=model.similarity)["action"]

    want = all_pairs(params, video, text)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-6)
    # the streamed metrics (blocks of the model's matrix) equal the dense path's exactly
    scored = ev(params, with_similarity=True)
    np.testing.assert_array_equal(scored.pop("similarity"), got)
    scored.pop("eval_seconds")
    assert scored == evaluate(got, rel, backend="numpy")
    # and with the accelerators' engine (jitted blocks), here on the CPU
    ev.backend = "jax"
    scored = ev(params)
    scored.pop("eval_seconds")
    assert scored == evaluate(got, rel, backend="jax")


def test_config_variants():
    c = config("epic_hgr", "ranp,tau=0.15")
    assert c.loss.name == "ranp" and c.loss.ranp.tau == 0.15 and c.loss.ran.tau == 0.15
    c = config("epic_hgr", "ran,tau=0.4")
    assert c.loss.ran.tau == 0.4 and c.loss.ranp.tau == 0.15  # the RANP paper's EPIC tau
    assert config("epic_hgr", "all").loss.max_margin.hard is False
    assert config("epic_hgr", "").loss.name == "max_margin"
    assert config("epic_sms", "").loss.name == "sms"
    assert config("epic_sms", "adaptive").sampler.pairing == "relevant"
    for name, arg, match in [
        ("epic_hgr", "hard,tau=0.5", "tau"),
        ("epic_hgr", "ran,ranp", "pick one"),
        ("epic_hgr", "tau=high", "number"),
        ("epic_sms", "mimm,sms", "pick one"),
    ]:
        with pytest.raises(InputError, match=match):
            config(name, arg)
