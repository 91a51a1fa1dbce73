"""ConTra training: 8 fake devices against one, the objective's three terms against the
reference losses on real model embeddings (neighbours aligned row by row), context
variants, narration-instance evaluation, host vs device gathering, config variants."""

import functools

import jax
import numpy as np
import pytest
from reference_losses import cross_modal_nce, neighbour_nce, uniformity
from train_runs import config, jsonl, run_main, train_losses

from jaxsvr import models, objectives
from jaxsvr.errors import InputError
from jaxsvr.evaluation import evaluate
from jaxsvr.evaluation.evaluator import RetrievalEvaluator
from jaxsvr.inputs import windows
from jaxsvr.runtime import parallel
from jaxsvr.train import loop, pipeline

ONE = dict(train__num_epochs=1, eval__every_epochs=1)
# No test here reads a checkpoint: the runs save the last step's only (runlocal saves every
# 5 steps, and best/ at each better evaluation).
LAST_CHECKPOINT_ONLY = dict(checkpoint__every_steps=1000, checkpoint__best_metric="")
# The ConTra runs compared below: clip and text context (m = 2), one epoch (7 steps; the
# programs, not the steps, cost), every step's losses logged, and compared. One layer per
# encoder: what they compare (sharding, gathers, neighbour rows) does not depend on depth,
# and one layer compiles in 3 s instead of 7 (most of it dropout's random bits). The
# 2-layer runlocal model, a full layer under the centre-only last one, is trained by the
# pinned runs (tests/test_runlocal_pinned.py) and the analyses (test_contra_analysis.py).
BOTH_M2 = "context=both,m=2,runlocal"
COMPARED = dict(
    train__num_epochs=1,
    train__log_every_steps=1,
    model__video_layers=1,
    model__text_layers=1,
    **LAST_CHECKPOINT_ONLY,
)


@pytest.fixture(scope="module")
def contra_both_m2(tmp_path_factory):
    """One in-process ConTra run of `BOTH_M2` with `COMPARED` (device gather), shared by
    the tests that compare other runs with it or read its metrics: (workdir, final
    metrics)."""
    workdir = tmp_path_factory.mktemp("contra_both_m2")
    c = config("epic_contra", BOTH_M2, **COMPARED)
    return workdir, loop.train_and_evaluate(c, workdir)


def test_eight_fake_devices_follow_one_device(contra_both_m2, tmp_path):
    """CML + NEI + UNI of a batch sharded over 8 devices (windows and neighbours gathered
    on the devices) follows the one-device run."""
    flags = [f"--config.{k.replace('__', '.')}={v}" for k, v in COMPARED.items()]
    arg = f"configs/epic_contra.py:{BOTH_M2}"
    eight = run_main(tmp_path, *flags, config_arg=arg, devices=8)
    assert eight.returncode == 0, eight.stderr[-3000:]
    assert "on 8 device(s)" in eight.stderr
    want, got = train_losses(contra_both_m2[0]), train_losses(tmp_path)
    assert want.keys() == got.keys() == set(range(1, 8))  # every step
    np.testing.assert_allclose([got[s] for s in want], [want[s] for s in want], rtol=0, atol=1e-5)


def embed(model, params, inputs):
    v = model.apply(params, inputs, method=model.embed_video)["action"]
    t = model.apply(params, inputs, method=model.embed_text)["action"]
    return v, t


def embed64(model, params, inputs):
    return tuple(np.asarray(x, np.float64) for x in embed(model, params, inputs))


@pytest.mark.parametrize("context", ["clip", "text", "both", "none"])
def test_objective_terms_match_the_reference(context):
    c = config("epic_contra", f"context={context},m=2,runlocal", model__dropout=0.0)
    data = pipeline.load_splits(c.data, ("caption",))
    model = models.build(c, len(data.vocab), data.video_dim)
    objective = objectives.build(c, data.train, model, pipeline.relevance_spec(c.data))
    batch = objective.host_batch(epoch=1, step=2, batch_size=16)
    # mask a few clips as if all their neighbours shared their narration (rare in the
    # built-in data): their terms must leave the mean, the others keep their own negatives
    batch["has_neighbour"][[0, 5, 6, 11]] = False
    has = batch["has_neighbour"]

    tables = {"video": data.train.video, "caption": data.train.text["caption"]}
    inputs = {}
    for name, (key, row_key) in objective.gathers.items():
        rows = windows.context_windows(data.train.clips, model.windows[key])[batch[row_key]]
        inputs[name] = tables[key][rows]
    params = model.init(jax.random.key(0), {k: inputs[k] for k in tables})
    loss = jax.jit(lambda p, x, b: objective.loss(model, p, x, b, jax.random.key(1)))
    total, terms = loss(params, inputs, batch)

    # only the neighbour inputs a term needs are gathered
    sides = {"clip": ["video"], "text": ["caption"], "both": ["video", "caption"], "none": []}
    assert set(objective.gathers) == {
        "video",
        "caption",
        *(f"neighbour_{k}" for k in sides[context]),
    }
    v, t = embed64(model, params, {k: inputs[k] for k in tables})
    want = {"cml": cross_modal_nce(v @ t.T), "uni": uniformity(np.concatenate([v, t]))}
    want["nei"] = 0.0
    if context in ("clip", "both"):
        x = {"video": inputs["neighbour_video"]}
        nv = model.apply(params, x, method=model.embed_video)["action"]
        want["nei"] += neighbour_nce(t, v, np.asarray(nv, np.float64), has)
    if context in ("text", "both"):
        x = {"caption": inputs["neighbour_caption"]}
        nt = model.apply(params, x, method=model.embed_text)["action"]
        want["nei"] += neighbour_nce(v, t, np.asarray(nt, np.float64), has)
    for key, value in want.items():
        np.testing.assert_allclose(float(terms[key]), value, rtol=2e-4, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(float(total), sum(want.values()), rtol=2e-4)
    if context == "none":
        assert float(terms["nei"]) == 0.0


def test_neighbour_batches_are_a_pure_function_of_seed_epoch_step():
    c = config("epic_contra", "runlocal")
    data = pipeline.load_splits(c.data, ("caption",))
    model = models.build(c, len(data.vocab), data.video_dim)
    objective = objectives.build(c, data.train, model, pipeline.relevance_spec(c.data))
    a, b = (objective.host_batch(3, 1, 16) for _ in range(2))
    for key in objective.batch_keys:
        np.testing.assert_array_equal(a[key], b[key])
    other = objective.host_batch(4, 1, 16)
    assert not np.array_equal(a["video_rows"], other["video_rows"])
    narration = np.asarray(data.train.clips.narration)
    has = a["has_neighbour"]
    rows, nb = a["video_rows"][has], a["neighbour_rows"][has]
    assert np.all(narration[rows] != narration[nb])


def test_training_with_both_contexts_and_instance_metrics(contra_both_m2):
    workdir, m = contra_both_m2
    assert m["step"] == 7 and 0 < m["ndcg_avg"] <= 1
    for key in ("rsum", "class_rsum", "r1_t2v", "class_r1_t2v", "medr_t2v", "map_avg"):
        assert key in m, key
    assert 0 <= m["rsum"] <= 600
    row = [r for r in jsonl(workdir) if "train/loss" in r][0]
    assert {"train/cml", "train/nei", "train/uni"} <= set(row)
    assert all(np.isfinite(row[k]) for k in ("train/cml", "train/nei", "train/uni"))


def test_instance_relevance_marks_each_sentences_own_clips():
    data = pipeline.load_splits(config("epic_contra", "runlocal").data, ("caption",))
    test = data.test
    inst = test.instance_relevance()
    assert inst.shape == test.relevance.shape
    assert np.all(inst[test.sentence_rows, np.arange(len(test.sentence_rows))] == 1)
    narration = np.asarray(test.clips.narration)
    for j in range(inst.shape[1]):
        clips = np.flatnonzero(inst[:, j])
        assert set(narration[clips]) == {narration[test.sentence_rows[j]]}
    assert np.all(test.relevance[inst == 1] == 1)  # same narration, same classes


@pytest.mark.parametrize(
    "name, arg, m_video, m_text",
    [
        ("epic_contra", None, 4, 0),
        ("epic_contra", "context=text", 0, 4),
        ("epic_contra", "context=both,m=1", 1, 1),
        ("epic_contra", "context=none", 0, 0),
        ("epic_contra", "m=0", 0, 0),
        ("youcook2_contra", None, 3, 0),
        ("youcook2_contra", "context=both,m=5", 5, 5),
    ],
)
def test_config_variants(name, arg, m_video, m_text):
    c = config(name, arg)
    assert (c.model.m_video, c.model.m_text) == (m_video, m_text)
    assert c.loss.name == "contra" and c.train.batch_size == 512
    assert c.optimizer.name == "adam" and c.optimizer.lr == 1e-4
    assert c.optimizer.schedule == "warmup_linear" and c.eval.positives == "narration"
    # the paper's 1300-iteration warm-up, not a share of the run
    assert (c.optimizer.warmup_steps, c.optimizer.warmup_fraction) == (1300, 0.0)
    layers = 2 if name == "epic_contra" else 1
    assert (c.model.video_layers, c.model.video_heads) == (layers, 8 if layers == 2 else 2)


def test_config_errors(tmp_path):
    with pytest.raises(InputError, match="m"):
        config("epic_contra", "m=6")
    with pytest.raises(InputError, match="context"):
        config("epic_contra", "context=video")
    c = config("epic_contra", "runlocal", eval__positives="instance")
    with pytest.raises(InputError, match="positives"):
        loop.train_and_evaluate(c, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing written before the check
    for name, overrides, match in [
        ("epic_hgr", {}, "dot products"),
        ("epic_jpose", dict(sampler__pairing="relevant"), "pairing"),
    ]:
        c = config(name, "runlocal", loss__name="contra", **overrides)
        with pytest.raises(InputError, match=match):
            loop.train_and_evaluate(c, tmp_path / "other")


def test_contra_loss_with_a_model_without_context_and_exported_positives(tmp_path):
    c = config(
        "epic_mme",
        "runlocal",
        loss__name="contra",
        eval__positives="narration",
        **ONE,
        **LAST_CHECKPOINT_ONLY,
    )
    c.eval.export_similarity = True
    m = loop.train_and_evaluate(c, tmp_path)
    assert m["step"] == 7 and np.isfinite(m["rsum"])
    row = [r for r in jsonl(tmp_path) if "train/loss" in r][0]
    assert row["train/nei"] == 0.0  # no context: no neighbouring term
    inst = np.load(tmp_path / "test_instance.npy")
    sim = np.load(tmp_path / "test_similarity.npy")
    assert evaluate(sim, inst)["rsum"] == pytest.approx(m["rsum"], abs=1e-9)
    want = evaluate(sim, np.load(tmp_path / "test_relevance.npy"))
    assert m["class_rsum"] == pytest.approx(want["rsum"], abs=1e-9)
    assert m["ndcg_avg"] == pytest.approx(want["ndcg_avg"], abs=1e-9)
    test_rows = [r for r in jsonl(tmp_path) if "test/rsum" in r][0]
    assert "test/class_rsum" in test_rows
    assert not any("excluded" in k for k in test_rows)


def test_evaluator_gathers_windows_across_chunks():
    """Clip windows and windowed sentences, chunked (chunk 8 over 60 clips, the last
    chunk padded), equal the embeddings of the whole windowed arrays at once."""
    c = config("epic_contra", "context=both,m=2,runlocal")
    data = pipeline.load_splits(c.data, ("caption",))
    model = models.build(c, len(data.vocab), data.video_dim)
    test = data.test
    w = windows.context_windows(test.clips, 2)
    sentences = test.clip_captions[w[test.sentence_rows]]  # [Nt, 5, L]
    np.testing.assert_array_equal(sentences[:, 2], test.text["caption"])  # centre = sentence
    params = jax.jit(model.init)(
        jax.random.key(0), {"video": test.video[w[:2]], "caption": sentences[:2]}
    )
    evaluator = RetrievalEvaluator(
        model,
        test.video,
        {"caption": sentences},
        test.relevance,
        parallel.make_mesh(-1),
        chunk=8,
        video_windows=w,
    )
    # the whole arrays in one jitted program (applied op by op, the attention layers
    # would dispatch one program per op)
    v, t = jax.jit(functools.partial(embed, model))(
        params, {"video": test.video[w], "caption": sentences}
    )
    np.testing.assert_allclose(evaluator.similarity(params), v @ t.T, atol=1e-5)


def test_k_neighbour_negatives_train_alike_with_host_and_device_gathers(tmp_path, contra_both_m2):
    """K = 3 neighbours per clip (the paper's Table 7) in both contexts: batches carry
    [B, K] neighbour rows, the host and device gathers give the same losses and metrics
    (the host's windows of [B] clip and caption rows and [B, K] neighbour rows: the K = 1
    batch's [B] neighbour rows are gathered as the clip rows are), and the run differs
    from K = 1 (the shared run: the same config and gather, but K = 1)."""
    c = config("epic_contra", BOTH_M2, sampler__neighbours=3, **COMPARED)
    run = pipeline.build(c)
    batch = run.objective.host_batch(0, 0, 8)
    assert batch["neighbour_rows"].shape == batch["has_neighbour"].shape == (8, 3)
    assert run.objective.rows_per_anchor == 2 + 3 * 2
    a = loop.train_and_evaluate(c, tmp_path / "device")
    c.train.gather = "host"
    b = loop.train_and_evaluate(c, tmp_path / "host")
    np.testing.assert_allclose(
        list(train_losses(tmp_path / "host").values()),
        list(train_losses(tmp_path / "device").values()),
        rtol=1e-5,
    )
    assert np.isfinite(a["ndcg_avg"]) and b["ndcg_avg"] == pytest.approx(a["ndcg_avg"], abs=1e-5)
    k1 = train_losses(contra_both_m2[0])
    assert k1.keys() == train_losses(tmp_path / "device").keys()
    assert k1 != train_losses(tmp_path / "device")


def test_cml_with_a_hard_mining_term():
    """loss.contra.mine_weight adds the max-margin hinge on the hardest in-batch negatives
    (the paper's loss table); off by default, so the default terms are unchanged."""
    from reference_losses import max_margin

    c = config("epic_contra", "runlocal", model__dropout=0.0)
    c.loss.contra.mine_weight = 0.5
    c.loss.max_margin.margin = 0.3
    run = pipeline.build(c)
    objective, model = run.objective, run.model
    batch = objective.host_batch(epoch=0, step=0, batch_size=16)
    inputs = run.train_inputs.gather_host(objective.gathers, batch)
    params = model.init(jax.random.key(0), {k: inputs[k] for k in ("video", "caption")})
    loss = jax.jit(lambda p, x, b: objective.loss(model, p, x, b, jax.random.key(1)))
    total, terms = loss(params, inputs, batch)
    v, t = embed64(model, params, {k: inputs[k] for k in ("video", "caption")})
    np.testing.assert_allclose(float(terms["mine"]), max_margin(v @ t.T, margin=0.3), rtol=2e-4)
    want = sum(float(terms[k]) for k in ("cml", "nei", "uni")) + 0.5 * float(terms["mine"])
    np.testing.assert_allclose(float(total), want, rtol=1e-5)
    default = pipeline.build(config("epic_contra", "runlocal")).objective
    assert "mine" not in default.weights
