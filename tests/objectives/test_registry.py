"""Objectives are looked up by `config.loss.name` and all satisfy the `Objective` protocol;
the triplet rows the sampler builds sit where `TripletLayout` says the loss reads them."""

import numpy as np
import pytest
from train_runs import config

from jaxsvr import losses, objectives, pipeline
from jaxsvr.errors import InputError
from jaxsvr.sampling.triplets import TripletLayout, TripletSampler


def test_every_loss_name_has_an_objective():
    assert set(objectives.NAMES) == {"triplet", "contra", *losses.BATCH_LOSSES}
    c = config("epic_jpose", "runlocal", loss__name="nope")
    with pytest.raises(InputError, match="unknown config.loss.name 'nope': use one of"):
        objectives.check_name(c)


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
