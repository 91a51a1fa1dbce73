"""Objectives are looked up by `config.loss.name` and all satisfy the `Objective` protocol;
the triplet rows the sampler builds sit where `TripletLayout` says the loss reads them."""

import numpy as np
import pytest
from train_runs import config

from jaxsvr import losses, objectives
from jaxsvr.errors import InputError
from jaxsvr.sampling.triplets import TripletLayout, TripletSampler
from jaxsvr.train import checks, pipeline


def test_every_loss_name_has_an_objective():
    assert set(objectives.NAMES) == {"triplet", "contra", *losses.BATCH_LOSSES}
    c = config("epic_jpose", "runlocal", loss__name="nope")
    with pytest.raises(InputError, match="unknown config.loss.name 'nope': use one of"):
        checks.check_train(c)


@pytest.fixture(scope="module")
def jpose_run():
    return pipeline.build(config("epic_jpose", "runlocal"))


@pytest.mark.parametrize("name", ["triplet", "contra", "sms", "max_margin"])
def test_each_objective_satisfies_the_protocol(jpose_run, name):
    c = config("epic_jpose", "runlocal", loss__name=name)
    if name != "triplet":
        c.loss.level_weights.verb = c.loss.level_weights.noun = 0.0
    obj = objectives.build(
        c, jpose_run.splits.train, jpose_run.model, pipeline.relevance_spec(c.data)
    )
    assert isinstance(obj, objectives.Objective)
    batch = obj.host_batch(0, 0, 8)
    assert set(batch) == set(obj.batch_keys)
    assert all(len(v) == 8 for v in batch.values())
    assert all(isinstance(g, objectives.Gather) and g.rows in batch for g in obj.gathers.values())


def test_triplet_layout_columns_hold_what_the_loss_reads():
    rng = np.random.default_rng(0)
    verbs = rng.integers(0, 4, 60)
    from jaxsvr.annotations.class_sets import ClassSets

    nouns = ClassSets.from_lists([[int(n)] for n in rng.integers(0, 5, 60)])
    sampler = TripletSampler(verbs, nouns, nouns.indices.astype(np.int32), num_triplets=3, seed=1)
    layout = sampler.layout
    assert layout == TripletLayout(("verb", "noun", "action"), 3)
    rows, margin = sampler.batch(0, 0, 10)
    assert rows.shape == (10, layout.rows_per_anchor) == (10, 19)
    anchors = rows[:, layout.ANCHOR]
    pos, neg = rows[:, layout.positives("verb")], rows[:, layout.negatives("verb")]
    assert (verbs[pos] == verbs[anchors][:, None]).all()  # a verb positive shares the verb
    assert (verbs[neg] != verbs[anchors][:, None]).all()
    pos, neg = rows[:, layout.positives("noun")], rows[:, layout.negatives("noun")]
    assert (nouns.indices[pos] == nouns.indices[anchors][:, None]).all()
    assert (nouns.indices[neg] != nouns.indices[anchors][:, None]).all()
    assert margin.shape == (10, 3, 3)


@pytest.mark.parametrize(
    "model_name, overrides, groups",
    [
        ("epic_jpose", {}, 3),  # anchors + action rows, verb rows, noun rows
        ("epic_mme", {}, 1),  # anchors + action rows: every row
        ("epic_jpose", {"loss__level_weights__action": 0.0}, 3),  # anchors alone, verb, noun
    ],
)
def test_grouped_triplet_embedding_equals_embedding_every_row(model_name, overrides, groups):
    """Dot-product models embed each row group on its own (anchors for every level, a
    level's rows for that level only): the loss, every term and the gradients equal the
    straightforward path (every row through every branch, `triplet_terms` on [B, M])."""
    import jax

    from jaxsvr.inputs.model_inputs import gather_device
    from jaxsvr.objectives.base import embed

    c = config(model_name, "runlocal", **overrides)
    run = pipeline.build(c)
    obj, model = run.objective, run.model
    assert len(obj.groups) == groups
    assert sorted(np.concatenate([cols for cols, _ in obj.groups])) == list(
        range(obj.sampler.layout.rows_per_anchor)
    )  # every row in exactly one group
    tables = run.train_inputs.device_tables(None)
    batch = obj.host_batch(0, 0, 8)
    params = model.init(jax.random.key(0), run.train_inputs.init_batch())
    inputs = gather_device(tables, obj.gathers, batch)
    rows = {f: objectives.Gather(f, "rows") for f in obj.fields}

    def grouped(p):
        return obj.loss(model, p, inputs, batch, jax.random.key(1))

    def every_row(p):
        video, text = embed(model, p, gather_device(tables, rows, batch), jax.random.key(1))
        b, m = batch["rows"].shape
        video, text = jax.tree.map(lambda e: e.reshape(b, m, -1), (video, text))
        terms = losses.triplet_terms(
            video,
            text,
            batch["margin"],
            levels=obj.levels,
            layout=obj.sampler.layout,
            distance_kind=obj.distance,
            pair_types=obj.pair_types,
        )
        return sum(w * terms[k] for k, w in obj.weights.items()), terms

    # jitted: one compile each instead of a dispatch (and a compile) per operation
    (got, got_terms), got_grads = jax.jit(jax.value_and_grad(grouped, has_aux=True))(params)
    (want, want_terms), want_grads = jax.jit(jax.value_and_grad(every_row, has_aux=True))(params)
    assert got_terms.keys() == want_terms.keys()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for k in want_terms:
        np.testing.assert_allclose(got_terms[k], want_terms[k], rtol=1e-6, atol=1e-7)
    for g, w in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
    # Each group's inputs are gathered on their own, from its own row columns.
    for g, (cols, _) in enumerate(obj.groups):
        np.testing.assert_array_equal(batch[f"rows_{g}"], batch["rows"][:, cols])
