"""The negatives batch mining picks (the RANP paper's Fig. 2): the pure selection against a
plain loop, and one epoch of training on EPIC-style and MSR-VTT-style data with and without
RAN's tau."""

import matplotlib
import numpy as np
import pytest
from train_runs import config

from jaxsvr.analysis import mining as mining_analysis
from jaxsvr.errors import InputError
from jaxsvr.losses import mining

matplotlib.use("Agg")


def _loop(sim, rel, tau):
    out = np.full((2, len(sim)), np.nan)
    for d, (s, r) in enumerate(((sim, rel), (sim.T, rel.T))):
        for i in range(len(s)):
            pool = [j for j in range(len(s)) if j != i and (tau is None or r[i, j] < tau)]
            if pool:
                out[d, i] = r[i, max(pool, key=lambda j: s[i, j])]
    return out


@pytest.mark.parametrize("tau", [None, 0.5])
def test_hardest_negative_relevance_against_a_loop(tau):
    rng = np.random.default_rng(0)
    sim = rng.normal(size=(9, 9)).astype(np.float32)
    rel = rng.choice(np.array([0, 0.25, 0.5, 0.75, 1], np.float32), (9, 9))
    rel[3] = 1.0  # video 3: every text relevant, so no RAN negative for that anchor
    got = np.asarray(mining.hardest_negative_relevance(sim, rel, tau))
    np.testing.assert_array_equal(got, _loop(sim, rel, tau))
    assert np.isnan(got[0, 3]) == (tau is not None)
    one = mining.hardest_negative_relevance(np.ones((1, 1)), np.ones((1, 1)))
    assert np.isnan(np.asarray(one)).all()  # a batch of one has no negative


@pytest.mark.parametrize("name", ["epic_hgr", "msrvtt_hgr"])
def test_one_epoch_with_and_without_tau(name):
    hard = mining_analysis.mined_negative_relevance(config(name, "hard,runlocal"))
    ran = mining_analysis.mined_negative_relevance(config(name, "ran,runlocal"))
    assert hard.shape == ran.shape and hard.shape[1:] == (2, 16)  # [steps, 2, batch]
    assert np.all(ran[np.isfinite(ran)] < 0.75)  # RAN's tau keeps them out of the pool
    assert np.nanmax(hard) > np.nanmax(ran)  # hard mining picks such relevant "negatives"
    ax = mining_analysis.plot_mined_relevance({"hard": hard, "RAN": ran}, bins=10)
    assert len(ax.get_lines()) == 2
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata().sum(), 1.0)


def test_needs_a_batch_loss():
    with pytest.raises(InputError, match="mines no batch negatives"):
        mining_analysis.mined_negative_relevance(config("epic_jpose", "runlocal"))
