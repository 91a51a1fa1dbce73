"""The margins a triplet loss uses during an epoch (the relevance-margin paper's histogram)."""

import numpy as np
import pytest
from train_runs import config

from jaxsvr.analysis.margin import plot_margins, triplet_margins
from jaxsvr.errors import InputError
from jaxsvr.train import pipeline


def test_relevance_margins_are_one_minus_the_negatives_relevance():
    c = config("epic_jpose", "margin=relevance,runlocal")
    margins = triplet_margins(c)
    run = pipeline.build(c)
    sampler, layout = run.objective.sampler, run.objective.sampler.layout
    steps = run.objective.steps_per_epoch(c.train.batch_size)
    assert set(margins) == {"action", "verb", "noun"}
    for level, values in margins.items():
        assert values.size == steps * c.train.batch_size * c.sampler.num_triplets
        want = []
        for step in range(steps):  # the batch's rows: 1 - R(anchor, negative) per triplet
            rows, _ = sampler.batch(0, step, c.train.batch_size)
            anchors = np.repeat(rows[:, 0], c.sampler.num_triplets)
            negatives = rows[:, layout.negatives(level)].ravel()
            want.append(sampler.relevance_margin(level, anchors, negatives))
        np.testing.assert_allclose(values, np.concatenate(want), rtol=1e-6)
        assert 0.0 <= values.min() and values.max() <= 1.0
    # negatives share classes with the anchor often enough that margins spread below 1
    assert margins["action"].min() < 1.0 and margins["action"].std() > 0


def test_fixed_margins_and_other_losses():
    margins = triplet_margins(config("epic_jpose", "runlocal", loss__fixed_margin=0.4))
    assert all(np.all(v == np.float32(0.4)) for v in margins.values())
    with pytest.raises(InputError, match="samples no triplets"):
        triplet_margins(config("epic_hgr", "ranp,runlocal"))


def test_plot_margins(tmp_path):
    ax = plot_margins({"fixed": np.full(10, 0.4), "relevance": np.linspace(0, 1, 50)}, bins=10)
    assert len(ax.lines) == 2 and ax.get_xlabel() == "margin of the triplet"
    ax.figure.savefig(tmp_path / "margins.png")
